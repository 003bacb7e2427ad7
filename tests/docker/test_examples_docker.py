"""The shipped example tasks, graded for real: each is valid (the empty patch FAILs, the
gold patch PASSes, per-test conditions hold), and each check reports its evidence."""

from __future__ import annotations

import pytest

from grader.validate import validate_task
from grader.verdict import Verdict

pytestmark = pytest.mark.docker

EXAMPLE_IDS = [
    "calc-add-mode",
    "calc-mean-empty",
    "calc-median-even",
    "calc-slugify-unicode",
    "calc-wordcount-punctuation",
    "notes-changelog-entry",
    "notes-merge-greeting",
    "notes-merge-release",
    "notes-report-top-words",
    "notes-summary-mode",
]


def test_the_suite_covers_every_check(examples):
    assert examples.ids() == EXAMPLE_IDS
    kinds = {t.check.type for t in examples}
    assert kinds == {"tests", "exact_match", "output"}
    assert any(t.repo.merge for t in examples)
    assert len({t.repo.bundle for t in examples}) >= 2


@pytest.mark.parametrize("task_id", ["calc-bisect-mean", "calc-history-spread"])
def test_the_git_suite_is_valid(example_grader, task_id):
    """tasks/git: a history task and a bisect task cut from the examples' calc repository."""
    from grader.tasks.loader import TaskSet
    from helpers import ROOT

    suite = TaskSet(ROOT / "tasks" / "git")
    assert suite.ids() == ["calc-bisect-mean", "calc-history-spread"]
    task = suite.get(task_id)
    report = validate_task(example_grader, task)
    assert report.ok, report.problems
    assert report.empty == [Verdict.FAIL] and report.gold == [Verdict.PASS]
    result = example_grader.grade(task, task.gold_patch_text())
    assert result.check["type"] == task.check.type and result.verdict is Verdict.PASS


@pytest.mark.parametrize("task_id", EXAMPLE_IDS)
def test_example_is_valid(example_grader, examples, task_id):
    report = validate_task(example_grader, examples.get(task_id))
    assert report.ok, report.problems
    assert report.empty == [Verdict.FAIL] and report.gold == [Verdict.PASS]


def test_merge_conflict_base_really_is_conflicted(example_grader, examples):
    task = examples.get("notes-merge-greeting")
    result = example_grader.grade(task, b"")
    assert result.verdict is Verdict.FAIL
    assert result.check["mismatched"] == ["notes/todo.md"]
    assert "<<<<<<<" in result.check["diffs"]["notes/todo.md"]


def test_output_threshold_reports_the_ratio(example_grader, examples, mini):
    task = examples.get("notes-summary-mode")
    gold = example_grader.grade(task, task.gold_patch_text())
    assert gold.check["ratio"] == 1.0 and gold.check["threshold"] == 0.9
    # a near miss: one figure printed differently still clears the 0.9 threshold
    near = task.gold_patch_text().replace(b"average words per line", b"mean words per line")
    result = example_grader.grade(task, near)
    assert result.verdict is Verdict.PASS and 0.9 <= result.check["ratio"] < 1.0


def test_test_patch_task_restores_its_files(example_grader, examples):
    result = example_grader.grade(examples.get("calc-median-even"), b"")
    assert result.apply.restored == ["tests/test_median.py"]
    assert result.tests.fail_to_pass["failure"] == ["tests/test_median.py::test_even_length_averages_the_middle_pair"]


def test_command_runner_task(example_grader, examples):
    task = examples.get("calc-wordcount-punctuation")
    result = example_grader.grade(task, task.gold_patch_text())
    assert result.verdict is Verdict.PASS
    assert "Ran 3 tests" in result.output
