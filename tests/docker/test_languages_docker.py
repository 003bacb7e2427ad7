"""The language examples (tasks/languages), graded for real: one small project per runner of
another language, the same bug in each. Each is valid (the empty patch FAILs on exactly its
FAIL_TO_PASS test, the gold patch PASSes), each outcome comes per test in its ecosystem's own
id, and the public view says what decides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader.config import get_settings
from grader.pipeline import Grader
from grader.tasks import model
from grader.tasks.loader import TaskSet
from grader.validate import validate_task
from grader.verdict import Verdict

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
LANGUAGES = TaskSet(ROOT / "tasks" / "languages")


@pytest.fixture(scope="module")
def language_grader(tmp_path_factory) -> Grader:
    return Grader(
        get_settings(
            tasks_dir=ROOT / "tasks" / "languages",
            environments_dir=ROOT / "environments",
            cache_dir=tmp_path_factory.mktemp("cache"),
        )
    )


def test_every_language_has_an_example():
    assert {t.metadata.language for t in LANGUAGES} == {"c", "go", "java", "javascript", "python", "rust", "typescript"}
    runners = {t.check.runner for t in LANGUAGES if isinstance(t.check, model.TestsCheck)}
    assert runners == {"ctest", "go", "junit", "node-test", "vitest", "unittest", "pytest", "cargo"}


@pytest.mark.parametrize("task_id", LANGUAGES.ids())
def test_a_language_example_is_valid_test_by_test(language_grader, task_id):
    task = LANGUAGES.get(task_id)
    check = task.check
    assert isinstance(check, model.TestsCheck)
    report = validate_task(language_grader, task)
    assert report.ok, report.problems
    assert report.empty == [Verdict.FAIL] and report.gold == [Verdict.PASS]
    empty = language_grader.grade(task, b"")
    assert empty.verdict is Verdict.FAIL
    # the one FAIL_TO_PASS test failed and the PASS_TO_PASS one passed, by their own ids
    assert empty.tests is not None
    assert [empty.tests.all.get(t) for t in check.fail_to_pass] != ["passed"]
    assert [empty.tests.all.get(t) for t in check.pass_to_pass] == ["passed"], empty.tests.all
    assert empty.tampered == []


def test_every_later_run_imports_the_supervisor_from_bytecode(language_grader):
    """Each image's first run (above) compiled the supervisor on its interpreter, or said which
    one it is; every run since imports it from that bytecode (box/bytecode.py): 3.9 and
    3.13 here, the same verdict. Each imports it before its own files come (the sandbox's
    `preload`), warm or cold."""
    reports = []
    run = language_grader.sandbox.run

    def spy(spec):
        out = run(spec)
        reports.append(json.loads(out.stdout))
        return out

    language_grader.sandbox.run = spy  # type: ignore[method-assign]
    try:
        for task_id in LANGUAGES.ids():
            assert language_grader.grade(LANGUAGES.get(task_id), b"").verdict is Verdict.FAIL, task_id
    finally:
        del language_grader.sandbox.run
    assert [r["bytecode"]["loaded"] for r in reports] == [True] * len(reports), reports
    # and each was imported by its container before the run's order came (the sandbox's preload)
    assert [r["preloaded"] for r in reports] == [True] * len(reports), reports
    assert not [r for r in reports if "compiled" in r or "compile" in r["durations"]]
    assert len({r["bytecode"]["magic"] for r in reports}) >= 2
