"""grader/grading/adjudicate.py: one pure function decides what follows a grade; what it
cannot decide without a fact it asks for, and the same facts always give the same step.
Every branch of its docstring is here, without Redis, Docker or a database."""

from __future__ import annotations

import pytest

from grader.grading.adjudicate import (
    Ask,
    Case,
    Facts,
    Final,
    GoldAnswer,
    Policy,
    Retry,
    adjudicate,
    removed_task,
)
from grader.verdict import Provenance, Result, Verdict

POLICY = Policy(max_retries=2, max_attempts=5)
SHA = "ab" * 32


def graded(verdict: Verdict, image: str | None = "sha256:img") -> Result:
    return Result(
        task_id="t",
        verdict=verdict,
        explanation="x",
        error="docker went away" if verdict is Verdict.ERROR else None,
        provenance=Provenance(patch_sha256=SHA, image_id=image, task_hash="h", grader_version="v"),
    )


def case(**kw) -> Case:
    base = dict(task_id="t", patch_sha256=SHA, grader_version="v", errors=1, attempts=1, max_attempts=5)
    base.update(kw)
    return Case(**base)


def gold(verdict: Verdict, at: float = 100.0) -> GoldAnswer:
    return GoldAnswer(verdict=verdict, at=at)


def test_a_grade_that_is_not_an_error_is_final_as_it_is():
    for v in (Verdict.PASS, Verdict.FAIL, Verdict.PATCH_FAILED, Verdict.TIMED_OUT):
        last = graded(v)
        assert adjudicate(Facts(case=case(errors=0, last=last)), POLICY) == Final(last)


def test_a_removed_task_is_retried_while_retries_remain_then_final_uncharged():
    c = case(errors=1)
    facts = Facts(case=Case(**{**c.__dict__, "last": removed_task(c, "no task t")}), task_missing=True)
    assert isinstance(adjudicate(facts, POLICY), Retry)
    spent = Facts(case=Case(**{**facts.case.__dict__, "errors": 3}), task_missing=True)
    step = adjudicate(spent, POLICY)
    assert isinstance(step, Final) and step.result.verdict is Verdict.ERROR and step.result.blame is None


def test_an_error_with_the_breaker_open_is_final_at_once_and_the_machinerys():
    facts = Facts(case=case(last=graded(Verdict.ERROR)), breaker=gold(Verdict.ERROR))
    step = adjudicate(facts, POLICY)
    assert isinstance(step, Final) and step.result.verdict is Verdict.ERROR
    assert step.result.blame.at_fault == "machinery"


def test_an_error_asks_the_budget_and_is_retried_when_it_grants():
    facts = Facts(case=case(last=graded(Verdict.ERROR)))
    assert adjudicate(facts, POLICY) == Ask("budget")
    assert isinstance(adjudicate(facts.told(budget=True), POLICY), Retry)


def test_a_refused_retry_is_judged_on_the_gold():
    facts = Facts(case=case(last=graded(Verdict.ERROR), failing_since=50.0)).told(budget=False)
    assert adjudicate(facts, POLICY) == Ask("gold", None)  # one error: not chargeable, any recent gold
    # a clean gold after a single ERROR: once more, outside the budget
    assert isinstance(adjudicate(facts.told(gold=gold(Verdict.PASS)), POLICY), Retry)


@pytest.mark.parametrize("gold_verdict", [Verdict.ERROR, Verdict.FAIL])
def test_a_gold_that_does_not_pass_leaves_the_error_with_the_machinery(gold_verdict):
    facts = Facts(case=case(errors=3, last=graded(Verdict.ERROR), failing_since=50.0), gold=gold(gold_verdict))
    step = adjudicate(facts, POLICY)
    assert isinstance(step, Final) and step.result.verdict is Verdict.ERROR
    assert step.result.blame.at_fault == "machinery" and step.result.blame.gold == gold_verdict.value


def test_errors_past_the_retries_while_the_gold_passes_are_the_submissions_charged():
    facts = Facts(case=case(errors=3, last=graded(Verdict.ERROR), failing_since=50.0))
    assert adjudicate(facts, POLICY) == Ask("gold", 50.0)  # chargeable: a gold graded since the first ERROR
    step = adjudicate(facts.told(gold=gold(Verdict.PASS)), POLICY)
    assert isinstance(step, Final) and step.result.verdict is Verdict.FAIL
    assert step.result.blame.at_fault == "submission" and step.result.verdict.charged


def test_no_gold_patch_leaves_the_error_uncharged():
    step = adjudicate(Facts(case=case(errors=3, last=graded(Verdict.ERROR)), gold=None), POLICY)
    assert isinstance(step, Final) and step.result.verdict is Verdict.ERROR
    assert "no gold" in step.result.explanation


def test_an_error_before_the_sandbox_is_never_judged_on_the_gold():
    facts = Facts(case=case(errors=3, last=graded(Verdict.ERROR, image=None)))
    step = adjudicate(facts, POLICY)  # no Ask: the image was never found, nothing of the patch ran
    assert isinstance(step, Final) and step.result.verdict is Verdict.ERROR
    assert step.result.blame.at_fault == "machinery"


def test_lost_grades_are_judged_on_the_gold_and_never_retried():
    facts = Facts(case=case(errors=0, attempts=6, lost=True, failing_since=10.0, task_hash="h"))
    assert adjudicate(facts, POLICY) == Ask("gold", 10.0)
    step = adjudicate(facts.told(gold=gold(Verdict.PASS, at=20.0)), POLICY)
    assert isinstance(step, Final) and step.result.verdict is Verdict.FAIL


def test_the_same_facts_give_the_same_step():
    facts = Facts(case=case(errors=3, last=graded(Verdict.ERROR), failing_since=50.0), gold=gold(Verdict.PASS))
    assert adjudicate(facts, POLICY) == adjudicate(facts, POLICY)
