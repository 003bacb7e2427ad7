"""RES-Q's task validation, with SWE-bench's per-test conditions: the empty patch must
FAIL and the gold patch must PASS, N times each; every FAIL_TO_PASS test must fail at
the base, every PASS_TO_PASS test must pass there. A task whose verdicts change between
repeats is flaky."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from grader.pipeline import Grader
from grader.tasks.model import Task, TestsCheck
from grader.verdict import Result, Verdict


@dataclass
class TaskValidation:
    task_id: str
    empty: list[Verdict] = field(default_factory=list)
    gold: list[Verdict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    suite: str | None = None
    task_hash: str | None = None  # the definition validated (Task.definition_hash)

    @property
    def flaky(self) -> bool:
        return len(set(self.empty)) > 1 or len(set(self.gold)) > 1

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def outcome(self) -> str:
        """valid, flaky (its verdicts changed between runs) or invalid: a suite's counts."""
        return "valid" if self.ok else "flaky" if self.flaky else "invalid"

    def as_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "suite": self.suite,
            "task_hash": self.task_hash,
            "ok": self.ok,
            "flaky": self.flaky,
            "problems": self.problems,
            "empty": [str(v) for v in self.empty],
            "gold": [str(v) for v in self.gold],
        }


def by_suite(reports: list[TaskValidation]) -> dict[str, dict[str, tuple[str, str]]]:
    """The reports as a suite's validation is stored (store/validations.py: record): suite
    -> task id -> (definition hash, outcome)."""
    out: dict[str, dict[str, tuple[str, str]]] = {}
    for r in reports:
        out.setdefault(r.suite or "", {})[r.task_id] = (r.task_hash or "", r.outcome)
    return out


def _per_test_problems(task: Task, empty: Result) -> list[str]:
    check = task.check
    if not isinstance(check, TestsCheck) or empty.tests is None:
        return []
    problems = []
    passing_at_base = empty.tests.fail_to_pass["success"]
    if passing_at_base:
        problems.append(f"FAIL_TO_PASS test(s) already pass at the base: {', '.join(passing_at_base)}")
    failing_at_base = empty.tests.pass_to_pass["failure"]
    if failing_at_base:
        problems.append(f"PASS_TO_PASS test(s) do not pass at the base: {', '.join(failing_at_base)}")
    return problems


def _honest_problems(what: str, i: int, result: Result) -> list[str]:
    """The empty and the gold patch are honest: tampering evidence on either means the
    task's own tests or conftest trip the canaries (turn them off with check.canaries)."""
    if result.tampered:
        return [f"{what}, run {i + 1}: tampering evidence on an honest patch: {'; '.join(result.tampered)}"]
    return []


def validate_task(
    grader: Grader, task: Task, repeat: int = 1, progress: Callable[[], None] | None = None
) -> TaskValidation:
    report = TaskValidation(task.id, suite=task.metadata.suite, task_hash=task.definition_hash())
    gold = task.gold_patch_text()
    if gold is None:
        report.problems.append("the task has no gold patch")
    for i in range(repeat):
        empty = grader.grade(task, b"")
        report.empty.append(empty.verdict)
        if empty.verdict is Verdict.ERROR:
            report.problems.append(f"empty patch, run {i + 1}: ERROR: {(empty.error or '')[:500]}")
        if i == 0:
            report.problems += _per_test_problems(task, empty)
        report.problems += _honest_problems("empty patch", i, empty)
        if progress:
            progress()
        if gold is not None:
            result = grader.grade(task, gold)
            report.gold.append(result.verdict)
            if result.verdict is not Verdict.PASS:
                report.problems.append(
                    f"gold patch, run {i + 1}: {result.verdict}: {result.explanation}"
                    + (f" {result.error[:500]}" if result.error else "")
                )
            report.problems += _honest_problems("gold patch", i, result)
        if progress:
            progress()
    wrong_empty = sorted({str(v) for v in report.empty if v is not Verdict.FAIL and v is not Verdict.ERROR})
    if wrong_empty:
        report.problems.append(f"the empty patch must FAIL, but got {', '.join(wrong_empty)}")
    if report.flaky:
        report.problems.append(f"flaky: empty {[str(v) for v in report.empty]}, gold {[str(v) for v in report.gold]}")
    return report


# --- test lists derived by running the tests ---------------------------------------------------
@dataclass
class DerivedLists:
    """FAIL_TO_PASS / PASS_TO_PASS as running the hidden tests showed them, `runs` times at
    the base (the empty patch) and with the gold patch; `dropped`: tests that did not pass
    with the gold every time, or did not behave the same at the base every time (flaky).
    `problem`: why no lists could be derived (a run that was not a test run)."""

    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    problem: str | None = None


def lists_from_runs(base_runs: list[dict[str, str]], gold_runs: list[dict[str, str]]) -> DerivedLists:
    """SWE-bench's validation rule over per-test outcomes (test id -> "passed", "failed",
    ...): a test that passed with the gold patch in every run is FAIL_TO_PASS when it
    passed in no run at the base, PASS_TO_PASS when it passed in every one; every other
    test the runs saw is dropped (it fails with the gold, or flips at the base)."""
    seen = sorted(set().union(*base_runs, *gold_runs))
    gold_ok = [t for t in seen if gold_runs and all(r.get(t) == "passed" for r in gold_runs)]
    f2p = [t for t in gold_ok if all(r.get(t) != "passed" for r in base_runs)]
    p2p = [t for t in gold_ok if base_runs and all(r.get(t) == "passed" for r in base_runs)]
    kept = set(f2p) | set(p2p)
    return DerivedLists(f2p, p2p, [t for t in seen if t not in kept])


def derive_lists(grader: Grader, task: Task, runs: int) -> DerivedLists:
    """Grade the empty and the gold patch `runs` times each (the task's lists, if any, are
    not what is read: every test's own outcome is) and apply `lists_from_runs`. A run that
    is not a clean test run (ERROR, TIMED OUT, PATCH FAILED, tampering evidence, no
    per-test outcomes) makes the task's lists underivable; so does a FAIL_TO_PASS that
    comes out empty (nothing the gold patch fixes)."""
    base_runs: list[dict[str, str]] = []
    gold_runs: list[dict[str, str]] = []
    gold = task.gold_patch_text()
    if gold is None:
        return DerivedLists(problem="the task has no gold patch")
    unclean = (Verdict.ERROR, Verdict.TIMED_OUT, Verdict.PATCH_FAILED)
    for i in range(runs):
        for what, patch, into in (("empty", b"", base_runs), ("gold", gold, gold_runs)):
            result = grader.grade(task, patch)
            if result.verdict in unclean or result.tests is None or result.tampered:
                why = "; ".join(result.tampered) if result.tampered else result.explanation
                return DerivedLists(problem=f"{what} patch, run {i + 1}: {result.verdict}: {why}")
            into.append(result.tests.all)
    derived = lists_from_runs(base_runs, gold_runs)
    if not derived.fail_to_pass:
        derived.problem = f"no test fails at the base and passes with the gold patch in all {runs} run(s)" + (
            f" ({len(derived.dropped)} dropped as failing with the gold or flaky)" if derived.dropped else ""
        )
    return derived
