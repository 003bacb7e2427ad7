"""Whose fault an ERROR is (grader/blame.py): the decisions as pure logic, with fake gold
answers. The gold cache and the retry budget on a real Redis are
tests/service/test_blame_service.py; the same decisions end to end, in Docker through the
queue, tests/docker/test_blame_docker.py."""

from __future__ import annotations

import pytest
from redis import Redis

from grader import blame
from grader.blame import Case, GoldAnswer, Next, RetryBudget, after_error, judge
from grader.verdict import Provenance, Result, Verdict

SHA, GOLD_SHA = "a" * 64, "g" * 64


def error_result(image_id: str | None = "sha256:img", error: str = "supervisor: bad report\ntraceback...") -> Result:
    return Result(
        task_id="t",
        verdict=Verdict.ERROR,
        explanation="The grading machinery failed",
        error=error,
        provenance=Provenance(patch_sha256=SHA, task_hash="th", image_id=image_id, grader_version="v"),
        durations={"total": 1.5},
    )


def case(**kw) -> Case:
    base = dict(
        task_id="t",
        patch_sha256=SHA,
        grader_version="v",
        errors=2,
        attempts=3,
        max_attempts=5,
        failing_since=1000.0,
        last=error_result(),
        task_hash="th",
    )
    return Case(**{**base, **kw})


def gold_result(verdict: Verdict = Verdict.PASS, sha: str = GOLD_SHA) -> dict:
    return Result(
        task_id="t",
        verdict=verdict,
        explanation="gold",
        error=None if verdict is not Verdict.ERROR else "x",
        provenance=Provenance(
            patch_sha256=sha, task_hash="th", image_id="sha256:img", grader_version="v", runtime="runc"
        ),
    ).model_dump(mode="json")


class Gold:
    """A fake gold: answers `verdict` and records the `since` it was asked with."""

    def __init__(
        self, verdict: Verdict | None = Verdict.PASS, at: float = 2000.0, cached: bool = False, sha: str = GOLD_SHA
    ):
        self.answer = (
            None
            if verdict is None
            else GoldAnswer(verdict=verdict, at=at, result=gold_result(verdict, sha), cached=cached)
        )
        self.asked: list[float | None] = []

    def __call__(self, since):
        self.asked.append(since)
        return self.answer


# --- after an ERROR: retry, judge, or the breaker ---------------------------------------------
class Budget:
    def __init__(self, room: int):
        self.room, self.asked = room, 0

    def __call__(self) -> bool:
        self.asked += 1
        self.room -= 1
        return self.room >= 0


def test_an_error_is_retried_within_every_bound():
    b = Budget(10)
    assert after_error(errors=1, attempts=1, max_retries=3, max_attempts=5, broken=False, budget=b) is Next.RETRY
    assert after_error(errors=3, attempts=3, max_retries=3, max_attempts=5, broken=False, budget=b) is Next.RETRY
    assert b.asked == 2


@pytest.mark.parametrize(
    "errors, attempts, room, why",
    [
        (4, 4, 10, "its retries are spent"),
        (1, 5, 10, "it was started max_attempts times (lost workers count)"),
        (1, 1, 0, "the service-wide budget is spent"),
    ],
)
def test_past_a_bound_it_is_judged(errors, attempts, room, why):
    assert (
        after_error(errors=errors, attempts=attempts, max_retries=3, max_attempts=5, broken=False, budget=Budget(room))
        is Next.JUDGE
    ), why


def test_the_budget_counts_only_retries_that_are_otherwise_due():
    b = Budget(10)
    after_error(errors=4, attempts=4, max_retries=3, max_attempts=5, broken=False, budget=b)
    after_error(errors=1, attempts=1, max_retries=3, max_attempts=5, broken=True, budget=b)
    assert b.asked == 0


def test_the_breaker_ends_an_error_at_once():
    assert (
        after_error(errors=1, attempts=1, max_retries=3, max_attempts=5, broken=True, budget=Budget(10)) is Next.BROKEN
    )


# --- judging ---------------------------------------------------------------------------------
def test_gold_passes_so_the_submission_broke_the_harness():
    gold = Gold(Verdict.PASS)
    j = judge(case(), gold)
    r = j.result
    assert not j.retry and r.verdict is Verdict.FAIL and r.verdict.charged
    assert r.explanation.startswith(
        "The submission broke the grading harness: its grade failed in the machinery on "
        "2 attempt(s) (supervisor: bad report)"
    )
    assert r.error is None  # `error` is for ERROR; the machinery's error stays on the blame, for hosts
    assert r.blame.at_fault == "submission" and r.blame.error.startswith("supervisor: bad report\ntraceback")
    assert (r.blame.gold, r.blame.attempts, r.blame.errors) == ("PASS", 3, 2)
    assert r.provenance.image_id == "sha256:img" and r.durations == {"total": 1.5}
    assert gold.asked == [1000.0]  # to charge, a PASS graded after the submission first ERRORed


@pytest.mark.parametrize("verdict", [Verdict.ERROR, Verdict.FAIL, Verdict.TIMED_OUT])
def test_gold_not_clean_so_the_machinery_is_at_fault(verdict):
    r = judge(case(), Gold(verdict)).result
    assert r.verdict is Verdict.ERROR and not r.verdict.charged
    assert r.blame.at_fault == "machinery" and r.blame.gold == verdict.value
    assert r.error.startswith("supervisor: bad report")
    assert "not charged" in r.explanation


def test_no_gold_patch_leaves_it_with_the_machinery():
    r = judge(case(), Gold(None)).result
    assert r.verdict is Verdict.ERROR and r.blame.at_fault == "machinery" and r.blame.gold is None
    assert "no gold patch" in r.explanation


def test_an_error_before_the_sandbox_is_the_machinerys_without_a_gold_grade():
    # the engine did not answer, the image was missing: the patch never ran
    gold = Gold(Verdict.PASS)
    r = judge(case(last=error_result(image_id=None, error="instance image ... is missing")), gold).result
    assert r.verdict is Verdict.ERROR and r.blame.at_fault == "machinery"
    assert gold.asked == []


def test_one_error_is_never_charged_it_is_retried_once_more():
    # honest: a transient fault once, its retry refused by the budget; the gold passes
    gold = Gold(Verdict.PASS)
    j = judge(case(errors=1, attempts=1), gold)
    assert j.retry and j.result is None
    assert gold.asked == [None]  # any recent answer will do: it cannot charge
    # but once it has also used up its attempts, one ERROR and lost workers are charged
    assert judge(case(errors=1, attempts=5), Gold(Verdict.PASS)).result.verdict is Verdict.FAIL


def test_a_submission_that_is_the_gold_gets_the_golds_grade():
    r = judge(case(), Gold(Verdict.PASS, sha=SHA)).result
    assert r.verdict is Verdict.PASS and r.blame is None


def test_lost_grades_are_judged_by_the_gold_too():
    gold = Gold(Verdict.PASS)
    r = judge(case(last=None, lost=True, errors=0, attempts=6, failing_since=500.0), gold).result
    assert r.verdict is Verdict.FAIL and r.blame.at_fault == "submission"
    assert "started 5 times without a verdict (the worker grading it was lost each time)" in r.explanation
    assert r.provenance.patch_sha256 == SHA and r.provenance.image_id == "sha256:img"  # judged on this machinery
    assert gold.asked == [500.0]
    r = judge(case(last=None, lost=True, errors=2, attempts=6), Gold(Verdict.ERROR)).result
    assert r.verdict is Verdict.ERROR and "2 ended in ERROR, 3 lost their worker" in r.explanation


def test_abandoned_is_the_machinerys():
    r = blame.abandoned(case(last=None, lost=True, attempts=7))
    assert r.verdict is Verdict.ERROR and r.blame.at_fault == "machinery" and "attempt 7" in r.error


def test_the_retry_budget_grants_when_redis_is_away():
    gone = Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.5)
    assert RetryBudget(gone, "x:", budget=0, window=60).take()
