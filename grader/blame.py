"""Whose fault an ERROR is: the submission's or the machinery's.

ERROR is never charged and run metrics leave it out of their denominators, so a
submission that could make its own grade ERROR would hide a failure. The grading core
cannot tell a harness the submission broke from one that broke by itself. The task's gold
patch can: graded on the same machinery, a clean gold grade shows the machinery works, so
what keeps failing is the submission (FAIL, charged: "the submission broke the grading
harness"); a gold that ERRORs or fails too, or no gold patch, leaves the ERROR with the
machinery, uncharged.

The policy the worker (grader/jobs.py) applies after a grade that ERRORed (`after_error`):

1. **The breaker.** If a gold grade of this task ERRORed or failed on this host within
   `gold_ttl`, the machinery is known broken here: the ERROR is final at once, uncharged.
   Retrying a known broken machine only churns the queue. Only the gold opens it, and the
   gold never carries submitted code, so no submission can open it to launder itself.
2. **Retry** with backoff while the submission has ERRORed at most `max_retries` times,
   has been started fewer than `max_attempts` times, and the service-wide retry budget
   (`RetryBudget`: `retry_budget` retries per `retry_window` seconds, counted in Redis)
   has room: when everything ERRORs (the engine is down), retries stop at the budget.
3. **Judge** (`judge`) otherwise:
   - an ERROR that came before the patch reached the sandbox (no instance image id: the
     image could not be found or built, the engine did not answer) is the machinery's by
     construction: ERROR, and no gold is graded;
   - a task without a gold patch: ERROR;
   - the gold's verdict (`gold_answer`: graded through the same Grader, or a recent
     answer from `GoldCache`, per host, task definition hash, image id and grader
     version): not PASS: ERROR, and the breaker is open; PASS: FAIL, charged, once the
     submission has ERRORed twice. After one ERROR (its retry was refused by the budget)
     it is retried once more, outside the budget: the gold shows the machinery works, so
     the retry cannot churn against a broken one, and nobody is charged for a single
     ERROR a transient fault could have caused.

   To charge, the gold's PASS must come from a gold grade that started after the
   submission first ERRORed: the machinery demonstrably worked while the submission kept
   failing. An older cached PASS is graded again (an outage that began after it would
   otherwise be charged to the submission); a cached ERROR or FAIL is used as it is (it
   can only leave a submission uncharged).

A submission whose grades keep being started and lost (its worker dies, the lease runs
out, the reconciler re-queues it) is judged the same way once it has been started more
than `max_attempts` times, without being graded again (`lost=True`). If that judging
attempt is lost too, nothing of the submission ran in it: the reconciler finishes it as
ERROR (`abandoned`).

The gold cache makes a flood of ERRORing submissions cheap: a gold answer is graded at
most once per key while it holds, and a PASS serves every submission that first ERRORed
before it was graded. Workers that judge the same task at the same moment may each grade
the gold once; that is bounded by the number of workers and not worth a lock.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

from redis import Redis
from redis.exceptions import RedisError

from grader.verdict import Blame, Provenance, Result, Verdict

log = logging.getLogger(__name__)


# --- the gold's answer ---------------------------------------------------------------------
@dataclass(frozen=True)
class GoldAnswer:
    """The gold patch's verdict on this machinery, and when that grade started."""

    verdict: Verdict
    at: float  # epoch seconds when the gold grade started
    error: str | None = None
    result: dict[str, Any] | None = None  # the whole gold result: answers a submission identical to the gold
    cached: bool = False

    @property
    def clean(self) -> bool:
        return self.verdict is Verdict.PASS

    @classmethod
    def of(cls, result: Result, at: float) -> GoldAnswer:
        why = result.error if result.verdict is Verdict.ERROR else result.explanation
        return cls(verdict=result.verdict, at=at, error=why, result=result.model_dump(mode="json"))


def gold_key(host: str, task_hash: str, image_id: str, grader_version: str) -> str:
    """Per host: the engine, its images and its runtime are the host's own."""
    return f"{host}:{task_hash}:{image_id}:{grader_version}"


class GoldCache:
    """Recent gold answers in Redis, shared by every worker of the service, for `ttl`
    seconds. Redis being away is a miss: the gold is graded again."""

    def __init__(self, redis: Redis, prefix: str, ttl: float):
        self.redis, self.prefix, self.ttl = redis, prefix, ttl

    def get(self, key: str) -> GoldAnswer | None:
        if self.ttl <= 0:
            return None
        try:
            raw = self.redis.get(self.prefix + key)
        except RedisError as exc:
            log.warning("reading a gold answer: %s", exc)
            return None
        if raw is None:
            return None
        d = json.loads(raw)
        return GoldAnswer(
            verdict=Verdict(d["verdict"]), at=d["at"], error=d.get("error"), result=d.get("result"), cached=True
        )

    def put(self, key: str, answer: GoldAnswer) -> None:
        if self.ttl <= 0:
            return
        body = json.dumps(
            {"verdict": answer.verdict.value, "at": answer.at, "error": answer.error, "result": answer.result}
        )
        try:
            self.redis.set(self.prefix + key, body, ex=max(1, int(self.ttl)))
        except RedisError as exc:
            log.warning("keeping a gold answer: %s", exc)


def gold_answer(cache: GoldCache, key: str, grade: Callable[[], GoldAnswer], *, since: float | None) -> GoldAnswer:
    """The gold's answer for `key`: the cached one if it may be used, else `grade()`d now
    and kept. A cached PASS may be used only if its grade started at or after `since`
    (when the submission first ERRORed; None: any recent PASS will do); a cached ERROR or
    FAIL always may."""
    hit = cache.get(key)
    if hit is not None and (not hit.clean or since is None or hit.at >= since):
        return hit
    answer = grade()
    cache.put(key, answer)
    return answer


def known_broken(cache: GoldCache, key: str | None) -> GoldAnswer | None:
    """The breaker: a recent gold answer for `key` that was not PASS, if there is one."""
    if key is None:
        return None
    hit = cache.get(key)
    return hit if hit is not None and not hit.clean else None


# --- the service-wide bound on retries -----------------------------------------------------
class RetryBudget:
    """At most `budget` ERROR retries per `window` seconds across the service: a counter
    per window in Redis. Fixed windows let up to twice the budget through around a window's
    edge; that is still a bound, and one INCR is all it costs. Redis being away grants the
    retry (the reconciler re-enqueues whatever could not be queued anyway)."""

    def __init__(self, redis: Redis, prefix: str, budget: int, window: float, clock: Callable[[], float] = time.time):
        self.redis, self.prefix, self.budget, self.window, self.clock = redis, prefix, budget, window, clock

    def take(self) -> bool:
        slot = int(self.clock() // self.window)
        key = f"{self.prefix}{slot}"
        try:
            with self.redis.pipeline() as pipe:
                pipe.incr(key)
                pipe.expire(key, int(self.window * 2) + 1)
                used: int
                used, _ = pipe.execute()
        except RedisError as exc:
            log.warning("the retry budget is unreadable (%s); granting the retry", exc)
            return True
        return used <= self.budget


# --- the decisions ---------------------------------------------------------------------------
class Next(str, Enum):
    """What happens to a submission after a grade that ERRORed."""

    RETRY = "retry"
    JUDGE = "judge"
    BROKEN = "broken"  # the breaker is open: final ERROR at once

    def __str__(self) -> str:
        return self.value


def after_error(
    *, errors: int, attempts: int, max_retries: int, max_attempts: int, broken: bool, budget: Callable[[], bool]
) -> Next:
    """`errors`: the submission's ERRORs, this one included; `attempts`: its grades
    started, this one included. `budget` is asked last, only when a retry is otherwise due,
    so that a refused retry is the only one it counts."""
    if broken:
        return Next.BROKEN
    if errors <= max_retries and attempts < max_attempts and budget():
        return Next.RETRY
    return Next.JUDGE


@dataclass(frozen=True)
class Case:
    """A submission to judge. `last` is its last grade (an ERROR), or None when its grades
    were lost (`lost`: started more than max_attempts times without a verdict)."""

    task_id: str
    patch_sha256: str
    grader_version: str
    errors: int  # ERRORs so far, the last one included
    attempts: int  # grades started, this one included
    max_attempts: int
    failing_since: float | None = None  # epoch: its first ERROR (or, when lost, its first start)
    last: Result | None = None
    lost: bool = False
    task_hash: str | None = None

    @property
    def reached_sandbox(self) -> bool:
        """Whether the patch could have run: the image was found, so the sandbox was next.
        A lost grade may have got anywhere."""
        return self.lost or (self.last is not None and self.last.provenance.image_id is not None)

    @property
    def may_be_charged(self) -> bool:
        """Charged only after two ERRORs, or once its grades keep being lost."""
        return self.lost or self.errors >= 2 or self.attempts >= self.max_attempts


@dataclass(frozen=True)
class Judgment:
    """A final result, or `retry`: ERRORed once while the gold passes, so try once more."""

    result: Result | None = None
    retry: bool = False
    gold: GoldAnswer | None = None


def _first_line(text: str | None, limit: int = 200) -> str:
    lines = (text or "").strip().splitlines()
    line = lines[0] if lines else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _what_happened(c: Case) -> str:
    if c.lost:
        lost = c.attempts - 1 - c.errors
        return f"its grade was started {c.attempts - 1} times without a verdict (" + (
            f"{c.errors} ended in ERROR, {lost} lost their worker)"
            if c.errors
            else "the worker grading it was lost each time)"
        )
    why = _first_line(c.last.error if c.last else None)
    return f"its grade failed in the machinery on {c.errors} attempt(s)" + (f" ({why})" if why else "")


_NOT_CHARGED = "; this attempt is not charged."


def _final(
    c: Case,
    verdict: Verdict,
    at_fault: Literal["submission", "machinery"],
    reason: str,
    explanation: str,
    answer: GoldAnswer | None,
) -> Result:
    """The submission's final result: its last grade's record (or a new one when its grades
    were lost), with the verdict, the explanation and the blame."""
    error = c.last.error if c.last is not None else None
    base = c.last or Result(
        task_id=c.task_id,
        verdict=verdict,
        explanation="",
        provenance=Provenance(patch_sha256=c.patch_sha256, task_hash=c.task_hash, grader_version=c.grader_version),
    )
    update: dict[str, Any] = {
        "verdict": verdict,
        "explanation": explanation,
        "error": (error or reason) if verdict is Verdict.ERROR else None,  # a FAIL keeps it in `blame`
        "blame": Blame(
            at_fault=at_fault,
            reason=reason,
            error=error,
            attempts=c.attempts,
            errors=c.errors,
            gold=answer.verdict.value if answer else None,
            gold_cached=bool(answer and answer.cached),
        ),
    }
    if c.last is None and answer is not None and answer.result is not None:
        gold_prov = answer.result.get("provenance", {})  # the machinery it was judged on
        update["provenance"] = base.provenance.model_copy(
            update={
                "image_id": gold_prov.get("image_id"),
                "runtime": gold_prov.get("runtime"),
                "task_hash": c.task_hash or gold_prov.get("task_hash"),
            }
        )
    return base.model_copy(update=update)


def judge(c: Case, gold: Callable[[float | None], GoldAnswer | None]) -> Judgment:
    """Decide a submission whose grade keeps failing in the machinery. `gold(since)` gives
    the gold's answer, or None without a gold patch; a PASS it gives was graded at or after
    `since` (None: any recent one). It is called only when the answer matters, and asked
    for a fresh one only when the answer may charge the submission."""
    if not c.reached_sandbox:
        reason = "The machinery failed before the patch reached the sandbox, so nothing the submission did caused it."
        return Judgment(
            result=_final(
                c,
                Verdict.ERROR,
                "machinery",
                reason,
                f"The grading machinery failed ({_what_happened(c)}) before the patch ran" + _NOT_CHARGED,
                None,
            )
        )
    answer = gold(c.failing_since if c.may_be_charged else None)
    if answer is None:
        reason = "The task has no gold patch to tell a broken harness from a broken machine."
        return Judgment(
            result=_final(
                c,
                Verdict.ERROR,
                "machinery",
                reason,
                f"The grading machinery failed: {_what_happened(c)}; the task has no gold "
                "patch to show that the machinery works" + _NOT_CHARGED,
                None,
            )
        )
    if answer.result is not None and answer.result.get("provenance", {}).get("patch_sha256") == c.patch_sha256:
        # the submission is the gold patch: its grade is the gold's, whatever that was
        return Judgment(result=Result.model_validate(answer.result), gold=answer)
    if not answer.clean:
        return Judgment(result=broken(c, answer), gold=answer)
    if not c.may_be_charged:
        return Judgment(retry=True, gold=answer)
    reason = "The task's gold patch grades cleanly on the same machinery, after the submission first failed."
    return Judgment(
        result=_final(
            c,
            Verdict.FAIL,
            "submission",
            reason,
            f"The submission broke the grading harness: {_what_happened(c)}, while the task's "
            "gold patch grades cleanly on the same machinery.",
            answer,
        ),
        gold=answer,
    )


def broken(c: Case, answer: GoldAnswer) -> Result:
    """ERROR, the machinery's: the gold patch does not grade cleanly on it either."""
    reason = f"The task's gold patch does not grade cleanly on this machinery either ({answer.verdict.value})."
    return _final(
        c,
        Verdict.ERROR,
        "machinery",
        reason,
        f"The grading machinery failed: {_what_happened(c)}, and the task's gold patch is "
        f"{answer.verdict.value} on it too, so the machinery is at fault" + _NOT_CHARGED,
        answer,
    )


def abandoned(c: Case, reason: str | None = None) -> Result:
    """The judging attempt itself was lost (or failed): nothing of the submission ran in
    it, so the machinery is at fault. Written by the reconciler instead of re-queueing once
    more."""
    reason = reason or (
        f"The grade that was to judge it (attempt {c.attempts}) was lost too, and it runs nothing of the submission."
    )
    return Result(
        task_id=c.task_id,
        verdict=Verdict.ERROR,
        error=reason,
        explanation=f"The grading machinery failed: the submission's grade was started {c.attempts} "
        "times and never finished; this attempt is not charged.",
        provenance=Provenance(patch_sha256=c.patch_sha256, task_hash=c.task_hash, grader_version=c.grader_version),
        blame=Blame(at_fault="machinery", reason=reason, attempts=c.attempts, errors=c.errors),
    )
