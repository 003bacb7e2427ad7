"""The `grader` commands that grade or look at images, end to end through click and Docker
(the others are tests/unit/test_cli.py)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from grader.cli import main
from helpers import ROOT

TASKS = str(ROOT / "tasks" / "examples")


def run(*args, input=None):
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


@pytest.mark.docker
def test_grade_from_stdin_as_json():
    gold = (ROOT / "tasks" / "examples" / "calc-mean-empty" / "gold.patch").read_bytes()
    result = CliRunner().invoke(
        main,
        ["grade", "--task", "calc-mean-empty", "--patch", "-", "--json", "--tasks-dir", TASKS],
        input=gold,
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["verdict"] == "PASS"


@pytest.mark.docker
def test_grade_exit_status_follows_the_verdict(tmp_path):
    empty = tmp_path / "empty.patch"
    empty.write_bytes(b"")
    result = run("grade", "--task", "calc-mean-empty", "--patch", str(empty), "--tasks-dir", TASKS)
    assert result.exit_code == 1 and "FAIL" in result.output
    bad = tmp_path / "bad.patch"
    bad.write_bytes(b"--- a/../x\n+++ b/../x\n@@ -1 +1 @@\n-a\n+b\n")
    result = run("grade", "--task", "calc-mean-empty", "--patch", str(bad), "--tasks-dir", TASKS)
    assert result.exit_code == 1 and "PATCH FAILED" in result.output


@pytest.mark.docker
def test_env_list_and_prune_dry_run():
    result = run("env", "list", "--json", "--tasks-dir", TASKS)
    data = json.loads(result.output)
    assert any(e["environment"] == "python-3.11" and e["built"] for e in data["environments"])
    result = run("env", "prune", "--dry-run", "--tasks-dir", TASKS)
    assert result.exit_code == 0 and "dry run" in result.output
