"""The `grader` command, end to end through click (the ones that grade in Docker are
tests/docker/test_cli_docker.py)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from grader.cli import main
from helpers import ROOT

TASKS = str(ROOT / "tasks" / "examples")


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
