"""The benchmark importers with validation: the imported tasks validated and graded in
containers (the import itself, which needs git only, is tests/unit/test_importers.py).
The repositories the rows name are small local ones with real history
(tests/helpers/importer_repos.py)."""

from __future__ import annotations

import json
import subprocess

import pytest
from click.testing import CliRunner

from grader.cli import main
from grader.importers import import_rows
from grader.tasks.loader import TaskSet
from grader.verdict import Verdict
from helpers.importer_repos import (
    NOTES_OURS,
    Calc,
    Chain,
    Notes,
    gitgoodbench_chain_row,
    gitgoodbench_row,
    make_calc,
    make_chain,
    make_notes,
    resq_row,
    swebench_row,
)

# A gold patch that applies but fixes nothing: validation must catch it.
NOT_A_FIX = (
    "diff --git a/calc/__init__.py b/calc/__init__.py\n--- a/calc/__init__.py\n+++ b/calc/__init__.py\n"
    "@@ -1,2 +1,3 @@\n+# mean of the values\n def mean(xs):\n     return sum(xs) / len(xs)\n"
)


@pytest.fixture(scope="module")
def repo_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("clones")


@pytest.fixture(scope="module")
def calc(repo_dir) -> Calc:
    return make_calc(repo_dir)


@pytest.fixture(scope="module")
def notes(repo_dir) -> Notes:
    return make_notes(repo_dir)


# --- the CLI without Docker --------------------------------------------------------------------
@pytest.fixture
def run_cli(monkeypatch, tmp_path):
    """`grader ...` through click, with its cache in this test's directory."""
    from grader.config import _from_env

    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "cli-cache"))
    _from_env.cache_clear()  # the environment is read once per process
    yield lambda *args: CliRunner().invoke(main, list(args), catch_exceptions=False)
    _from_env.cache_clear()


# --- in containers -----------------------------------------------------------------------------
def validated(source, rows, settings, grader, repo_dir, out, **kwargs):
    return import_rows(source, rows, settings=settings, repo_dir=repo_dir, out=out, grader=grader, **kwargs)


@pytest.mark.docker
def test_swebench_import_validates_and_leaves_out_a_broken_instance(calc, settings, grader, repo_dir, tmp_path):
    rows = [swebench_row(calc), swebench_row(calc, instance_id="acme__calc-broken", patch=NOT_A_FIX)]
    report = validated("swebench", rows, settings, grader, repo_dir, tmp_path / "swe", suite="swe")
    good, broken = report.outcomes
    assert (good.status, good.empty, good.gold, good.problems) == ("kept", ["FAIL"], ["PASS"], [])
    assert broken.status == "rejected" and broken.gold == ["FAIL"]
    assert broken.problems == [
        "gold patch, run 1: FAIL: 1 of 2 required test(s) did not pass: tests/test_mean.py::test_empty_raises."
    ]
    ts = TaskSet(report.out)
    assert [t.id for t in ts] == ["acme__calc-1"]
    saved = json.loads((report.out / "import-report.json").read_text())
    assert [(t["task_id"], t["status"]) for t in saved["tasks"]] == [
        ("acme__calc-1", "kept"),
        ("acme__calc-broken", "rejected"),
    ]

    # the kept task grades like any other: the gold patch PASSes with every listed test
    result = grader.grade(ts.get("acme__calc-1"), ts.get("acme__calc-1").gold_patch_text())
    assert result.verdict is Verdict.PASS, result.to_json()
    assert result.tests.fail_to_pass == {"success": ["tests/test_mean.py::test_empty_raises"], "failure": []}
    assert result.tests.pass_to_pass == {"success": ["tests/test_mean.py::test_values"], "failure": []}

    # keep_invalid keeps the broken one, marked as such
    report = validated(
        "swebench", rows[1:], settings, grader, repo_dir, tmp_path / "swe", suite="swe", keep_invalid=True
    )
    assert [o.status for o in report.outcomes] == ["kept, invalid"]
    assert [t.id for t in TaskSet(report.out)] == ["acme__calc-1", "acme__calc-broken"]


@pytest.mark.docker
def test_lists_derived_by_running_the_tests_then_validated(calc, settings, grader, repo_dir, tmp_path):
    """Rows that carry neither FAIL_TO_PASS nor PASS_TO_PASS (--derive-lists 2): the tests
    run twice at the base and twice with the gold patch; the lists are what held, the task
    then validates like any other. A gold patch that fixes nothing derives no list."""
    rows = [
        swebench_row(calc, FAIL_TO_PASS=None, PASS_TO_PASS=None),
        swebench_row(calc, instance_id="acme__calc-nofix", patch=NOT_A_FIX, FAIL_TO_PASS=None, PASS_TO_PASS=None),
    ]
    report = validated("swebench", rows, settings, grader, repo_dir, tmp_path / "swe", suite="swe", derive_lists=2)
    good, nofix = report.outcomes
    assert (good.status, good.empty, good.gold, good.problems) == ("kept", ["FAIL"], ["PASS"], [])
    assert "FAIL_TO_PASS (1) and PASS_TO_PASS (1) derived by running the tests" in good.notes
    check = TaskSet(report.out).get("acme__calc-1").check
    assert check.fail_to_pass == ["tests/test_mean.py::test_empty_raises"]
    assert check.pass_to_pass == ["tests/test_mean.py::test_values"]  # what the published row says
    assert nofix.status == "rejected" and nofix.problems == [
        "its test lists cannot be derived: no test fails at the base and passes with the gold patch in all 2 "
        "run(s) (1 dropped as failing with the gold or flaky)"
    ]


@pytest.mark.docker
def test_resq_import_validates_and_grades(calc, settings, grader, repo_dir, tmp_path):
    report = validated("resq", [resq_row(calc)], settings, grader, repo_dir, tmp_path / "resq")
    assert [(o.status, o.empty, o.gold) for o in report.outcomes] == [("kept", ["FAIL"], ["PASS"])]
    task = TaskSet(report.out).get("0_0")
    assert grader.grade(task, task.gold_patch_text()).verdict is Verdict.PASS
    # a fix that only half works: the script's exit status decides
    half = calc.gold.replace("raise ValueError('mean of nothing')", "return 0")
    assert grader.grade(task, half.encode()).verdict is Verdict.FAIL


@pytest.fixture(scope="module")
def chain(repo_dir) -> Chain:
    return make_chain(repo_dir)


@pytest.mark.docker
def test_gitgoodbench_chain_imports_as_a_history_task_that_validates_and_grades(
    chain, settings, grader, repo_dir, tmp_path
):
    report = validated("gitgoodbench", [gitgoodbench_chain_row(chain)], settings, grader, repo_dir, tmp_path / "fcc")
    assert [(o.status, o.empty, o.gold) for o in report.outcomes] == [("kept", ["FAIL"], ["PASS"])]
    task = TaskSet(report.out).get("acme_chain_fcc_0001")
    result = grader.grade(task, task.gold_patch_text())
    assert result.verdict is Verdict.PASS and result.check["score"] == 1.0, result.to_json()
    # the chain's three commits squashed into one: the tree is right, the grouping is not
    squashed = subprocess.run(
        ["git", "diff", chain.base, chain.commits[-1]], cwd=chain.path, capture_output=True, check=True
    ).stdout
    mbox = (
        b"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nFrom: t <t@t>\n"
        b"Date: Sat, 1 Apr 2023 00:00:00 +0000\nSubject: [PATCH] Capitalise three notes\n\n---\n" + squashed
    )
    result = grader.grade(task, mbox)
    assert result.verdict is Verdict.FAIL, result.to_json()
    assert [c["name"] for c in result.check["criteria"] if not c["passed"]] == ["cohesion"]


@pytest.mark.docker
def test_gitgoodbench_import_validates_and_grades(notes, settings, grader, repo_dir, tmp_path):
    report = validated("gitgoodbench", [gitgoodbench_row(notes)], settings, grader, repo_dir, tmp_path / "ggb")
    assert [(o.status, o.empty, o.gold) for o in report.outcomes] == [("kept", ["FAIL"], ["PASS"])]
    task = TaskSet(report.out).get("acme_notes_merge_0001")
    result = grader.grade(task, task.gold_patch_text())
    assert result.verdict is Verdict.PASS, result.to_json()
    # resolving by taking our side is not the merge commit's resolution
    ours = (
        task.gold_patch_text()
        .decode()
        .replace("+status: final (reviewed)", "+" + NOTES_OURS["notes.txt"].splitlines()[1])
    )
    result = grader.grade(task, ours.encode())
    assert result.verdict is Verdict.FAIL and "notes.txt" in result.explanation


@pytest.mark.docker
def test_cli_import_with_validation(run_cli, calc, repo_dir, tmp_path):
    rows = tmp_path / "rows.json"
    rows.write_text(
        json.dumps([swebench_row(calc), swebench_row(calc, instance_id="acme__calc-broken", patch=NOT_A_FIX)])
    )
    args = [
        "tasks",
        "import",
        "swebench",
        str(rows),
        "--suite",
        "swe",
        "--repo-dir",
        str(repo_dir),
        "--tasks-dir",
        str(tmp_path / "tasks"),
    ]
    result = run_cli(*args)
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert "acme__calc-1 │ acme__calc-1 │ kept │ FAIL │ PASS" in flat
    assert "acme__calc-broken │ acme__calc-broken │ rejected │ FAIL │ FAIL │ gold patch, run 1: FAIL" in flat
    assert "1 of 2 task(s) kept" in flat and "1 failed validation" in flat
    # nothing kept: a non-zero exit
    result = run_cli(*args, "--only", "acme__calc-broken", "--out", str(tmp_path / "none"))
    assert result.exit_code == 1 and "0 of 1 task(s) kept" in " ".join(result.output.split())
