"""`grader tasks list / show / checkout` for a team that has no task folders, against a
live server (real HTTP): they fall back to the service (GRADER_API_URL), and a refused
key says where the key comes from. Without a server, tests/unit/test_tasks_remote.py;
the whole way to a PASS in Docker, tests/docker/test_tasks_remote_docker.py."""

from __future__ import annotations

import json

import pytest

from grader.tasks.prepare import checkout_base
from helpers.remote import cli, use_service
from helpers.repos import state
from helpers.service import ROOT, new_key


# --- the CLI against a live server --------------------------------------------------------------
@pytest.fixture
def database_url(tmp_path) -> str:
    """SQLite alone here."""
    return f"sqlite:///{tmp_path}/grader.db"


@pytest.fixture
def service_options(tmp_path):
    """The bundles in this test's own cache."""
    return {"cache_dir": tmp_path / "cache"}


@pytest.mark.service
def test_list_show_and_checkout_fall_back_to_the_service(svc, served, team_dir, monkeypatch, tmp_path):
    use_service(monkeypatch, served, new_key(svc, "remote-team"))
    listed = cli("tasks", "list", "--json")
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout) == [svc.task(i).public_view() for i in sorted(svc.tasks.ids())]
    table = cli("tasks", "list")
    assert table.exit_code == 0 and "notes-merge-release" in table.stdout and "exact_match" in table.stdout
    shown = cli("tasks", "show", "notes-merge-release")
    assert shown.exit_code == 0 and json.loads(shown.stdout) == svc.task("notes-merge-release").public_view()
    for task_id in ("calc-mean-empty", "notes-merge-release"):
        done = cli("tasks", "checkout", task_id, f"work-{task_id}")
        assert done.exit_code == 0, done.output
        assert f"from {served}" in done.output and "git diff > my.patch" in done.output
        checkout_base(svc.task(task_id), tmp_path / f"local-{task_id}", tmp_path / "local-cache")
        assert state(team_dir / f"work-{task_id}") == state(tmp_path / f"local-{task_id}")
    assert "git add -u" in done.output  # the conflict task says how to make its patch
    assert not (team_dir / "tasks").exists() and sorted(p.name for p in team_dir.iterdir()) == [
        "work-calc-mean-empty",
        "work-notes-merge-release",
    ]  # no bundle left behind
    # a task the service does not have: its answer, and no DIR made
    missing = cli("tasks", "checkout", "nope", "work-nope")
    assert missing.exit_code == 2 and "no task 'nope'" in missing.output and "GRADER_TASKS_DIR" in missing.output
    assert not (team_dir / "work-nope").exists()
    assert cli("tasks", "checkout", "calc-mean-empty", "work-calc-mean-empty").exit_code == 2  # DIR exists


@pytest.mark.service
def test_local_task_folders_win_and_url_asks_the_service(svc, served, team_dir, monkeypatch, tmp_path):
    key = new_key(svc, "remote-team")
    use_service(monkeypatch, "http://127.0.0.1:9", key)  # nothing there: a local answer must not ask
    local = cli("tasks", "show", "calc-mean-empty", "--tasks-dir", str(ROOT / "tasks" / "examples"))
    assert local.exit_code == 0 and json.loads(local.stdout)["id"] == "calc-mean-empty"
    listed = cli("tasks", "list", "--json", "--tasks-dir", str(ROOT / "tasks" / "examples"))
    assert len(json.loads(listed.stdout)) == len(svc.tasks)
    # a local tasks directory without the task: the service is asked (and is not there)
    other = cli("tasks", "show", "calc-mean-empty", "--tasks-dir", str(tmp_path))
    assert other.exit_code == 2 and "cannot reach the grader service at http://127.0.0.1:9" in other.output
    assert f"no task 'calc-mean-empty' in {tmp_path}" in other.output
    # --url names the service even where local tasks are
    named = cli("tasks", "list", "--json", "--url", served, "--tasks-dir", str(ROOT / "tasks" / "examples"))
    assert named.exit_code == 0 and [t["id"] for t in json.loads(named.stdout)] == sorted(svc.tasks.ids())


@pytest.mark.service
def test_a_refused_key_says_where_the_key_comes_from(served, team_dir, monkeypatch):
    use_service(monkeypatch, served, "grk_" + "x" * 43)
    for args in (["tasks", "list"], ["submit", "--task", "calc-mean-empty", "--patch", "-"]):
        result = cli(*args, input=b"")
        assert result.exit_code == 2 and "not valid" in result.output
        assert "--api-key" in result.output and "GRADER_API_KEY" in result.output
