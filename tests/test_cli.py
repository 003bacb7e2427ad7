"""The `grader` command, end to end through click (the Docker-backed ones are marked)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli import main

ROOT = Path(__file__).resolve().parent.parent
TASKS = str(ROOT / "tasks")


def run(*args, input=None):
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


def test_help_everywhere():
    for args in ([], ["grade"], ["tasks"], ["tasks", "validate"], ["env"], ["env", "prune"], ["images", "bootstrap"]):
        result = run(*args, "--help")
        assert result.exit_code == 0 and "Usage" in result.output


def test_tasks_list_json_is_public(tmp_path):
    result = run("tasks", "list", "--json", "--tasks-dir", TASKS)
    assert result.exit_code == 0
    rows = json.loads(result.output)
    assert len(rows) == 10
    text = result.output
    for secret in ("gold.patch", "hidden/", "fail_to_pass", "expected_commit", "test.patch"):
        assert secret not in text


def test_tasks_show_unknown_task_is_a_clear_usage_error():
    result = run("tasks", "show", "nope", "--tasks-dir", TASKS)
    assert result.exit_code == 2 and "no task 'nope'" in result.output


def test_config_prints_effective_settings(tmp_path):
    result = run("config", "--tasks-dir", str(tmp_path))
    assert result.exit_code == 0
    assert f"GRADER_TASKS_DIR={tmp_path}" in result.output
    assert "GRADER_RUNTIME=runc" in result.output


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
