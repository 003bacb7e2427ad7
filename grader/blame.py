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

from redis import Redis
from redis.exceptions import RedisError

from grader.grading.adjudicate import (  # the pure policy, re-exported under its old names
    Case,
    GoldAnswer,
    Judgment,
    Next,
    abandoned,
    after_error,
    broken,
    judge,
)
from grader.verdict import Verdict

__all__ = [
    "Case",
    "GoldAnswer",
    "GoldCache",
    "Judgment",
    "Next",
    "RetryBudget",
    "abandoned",
    "after_error",
    "broken",
    "gold_answer",
    "gold_key",
    "judge",
    "known_broken",
]

log = logging.getLogger(__name__)


# --- the gold's answer ---------------------------------------------------------------------
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
