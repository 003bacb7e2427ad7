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

    @property
    def flaky(self) -> bool:
        return len(set(self.empty)) > 1 or len(set(self.gold)) > 1

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "ok": self.ok,
            "flaky": self.flaky,
            "problems": self.problems,
            "empty": [str(v) for v in self.empty],
            "gold": [str(v) for v in self.gold],
        }


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
    report = TaskValidation(task.id)
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
