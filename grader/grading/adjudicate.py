"""Adjudication: whose fault an ERROR is, and what happens next. Pure: every fact it needs
(the submission's counts, its last grade, the breaker, the retry budget, the gold patch's
answer) is handed in, and what it cannot decide without one more fact it asks for
(`Ask`), so the worker's job is only to fetch that fact and call again: claim, lease,
grade, adjudicate, persist. The policy is written out in grader/blame.py's docstring,
with the Redis-backed caches and budget that supply the facts.

    adjudicate(facts, policy) -> Final(result) | Retry(reason) | Ask("budget") | Ask("gold", since)

    the task is gone since it was accepted -> Retry while retries remain, else Final(ERROR)
    its grades keep being lost (started past max_attempts) -> judged on the gold, never retried
    the grade ERRORed:
        the breaker is open (a recent gold grade on this host was not PASS) -> Final(ERROR)
        retries remain and the budget grants one -> Retry
        otherwise judged on the gold (judge) -> Final(ERROR or FAIL), or one Retry
    any other verdict -> Final(the grade)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Literal

from grader.verdict import Blame, Provenance, Result, Verdict


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


def gold_since(c: Case) -> float | None:
    """How fresh a gold PASS must be to judge `c`: one graded at or after its first ERROR
    when the judgment may charge it; any recent one otherwise."""
    return c.failing_since if c.may_be_charged else None


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


# --- one step at a time ----------------------------------------------------------------------
@dataclass(frozen=True)
class Policy:
    max_retries: int
    max_attempts: int


_NOT_ASKED: Any = object()  # a fact adjudicate has not been given yet


@dataclass(frozen=True)
class Facts:
    """What is known of a submission after a grade (or without one): `case`, and the facts
    adjudicate asks for as it needs them."""

    case: Case
    task_missing: bool = False  # the task is no longer defined
    breaker: GoldAnswer | None = None  # a recent gold answer on this host that was not PASS
    budget: bool | None = None  # whether the service-wide retry budget grants a retry (None: not asked)
    gold: Any = _NOT_ASKED  # GoldAnswer, or None for a task without a gold patch

    def told(self, **facts: Any) -> Facts:
        return replace(self, **facts)


@dataclass(frozen=True)
class Final:
    result: Result


@dataclass(frozen=True)
class Retry:
    reason: str


@dataclass(frozen=True)
class Ask:
    what: Literal["budget", "gold"]
    since: float | None = None  # for the gold: how fresh a PASS must be


Step = Final | Retry | Ask


def removed_task(c: Case, error: str) -> Result:
    """The grade of a submission whose task was removed after it was accepted: the
    service's fault, not theirs."""
    return Result(
        task_id=c.task_id,
        verdict=Verdict.ERROR,
        error=error,
        explanation="The task is no longer defined on this grader; this attempt is not charged.",
        provenance=Provenance(patch_sha256=c.patch_sha256, grader_version=c.grader_version),
    )


def adjudicate(f: Facts, policy: Policy) -> Step:
    """The next step for a submission: its final result, a retry, or the one fact still
    needed to decide. Pure: the same facts give the same step."""
    c = f.case
    if f.task_missing:
        if c.errors <= policy.max_retries and c.attempts < policy.max_attempts:
            return Retry("the task is no longer defined")
        assert c.last is not None
        return Final(c.last)
    if c.last is not None and c.last.verdict is not Verdict.ERROR and not c.lost:
        return Final(c.last)
    if not c.lost:
        if f.breaker is not None:
            return Final(broken(c, f.breaker))
        if c.errors <= policy.max_retries and c.attempts < policy.max_attempts:
            if f.budget is None:
                return Ask("budget")
            if f.budget:
                return Retry(c.last.error or c.last.explanation if c.last else "lost")
    if c.reached_sandbox and f.gold is _NOT_ASKED:
        return Ask("gold", gold_since(c))
    judged = judge(c, lambda since: f.gold)
    if judged.retry:
        return Retry("ERRORed once while the gold patch grades cleanly: once more")
    assert judged.result is not None
    return Final(judged.result)
