"""A remote team's whole way, from an empty directory to a PASS, through a live server
(real HTTP) and a worker grading in Docker: check out, fix (a conflicted merge resolved as
the checkout says, too), submit, pass. The CLI's other remote paths are
tests/unit/test_tasks_remote.py and tests/service/test_tasks_remote_service.py."""

from __future__ import annotations

import json

import pytest

from helpers.remote import cli, use_service
from helpers.repos import EXAMPLES, git, unbundle
from helpers.service import ROOT, new_key


# --- the whole way, from an empty directory to a PASS (Docker) -------------------------------------
def submit_and_grade(svc, task_id: str, patch_file: str) -> dict:
    from helpers.service import work

    sent = cli("submit", "--task", task_id, "--patch", patch_file, "--json")
    assert sent.exit_code == 0, sent.output
    work(svc)
    return json.loads(cli("status", json.loads(sent.stdout)["id"], "--json").stdout)


@pytest.mark.docker
@pytest.mark.service
def test_a_remote_team_checks_out_fixes_submits_and_passes(live, settings, team_dir, monkeypatch):
    from helpers.mini import FIXED

    svc, url = live(settings.tasks_dir, settings.cache_dir)
    use_service(monkeypatch, url, new_key(svc, "remote-team"))
    assert [t["id"] for t in json.loads(cli("tasks", "list", "--json").stdout)] == ["mini", "mini-nolist"]
    view = json.loads(cli("tasks", "show", "mini").stdout)
    done = cli("tasks", "checkout", "mini", "work")
    assert done.exit_code == 0, done.output
    work_dir = team_dir / "work"
    assert git("log", "--format=%H", "--all", cwd=work_dir).split() == [view["repo"]["commit"]]
    (work_dir / "calc" / "__init__.py").write_text(FIXED)
    (team_dir / "fix.patch").write_text(git("diff", cwd=work_dir))
    got = submit_and_grade(svc, "mini", "fix.patch")
    assert (got["status"], got["verdict"]) == ("done", "PASS"), got
    assert got["result"]["tests"]["fail_to_pass"]["success"] == ["tests/test_mean.py::test_empty"]


@pytest.mark.docker
@pytest.mark.service
def test_a_remote_team_resolves_a_conflicted_merge_as_the_checkout_says_and_passes(
    live, team_dir, monkeypatch, tmp_path
):
    task = EXAMPLES.get("notes-merge-release")
    svc, url = live(ROOT / "tasks" / "examples", tmp_path / "service-cache")
    use_service(monkeypatch, url, new_key(svc, "remote-team"))
    done = cli("tasks", "checkout", task.id, "work")
    assert done.exit_code == 0 and "git add -u" in done.output, done.output
    work_dir = team_dir / "work"
    git("add", "-u", cwd=work_dir)  # as the checkout said: the conflicted files as they are
    source = unbundle(task.file(task.repo.bundle), tmp_path / "answers.git")  # the test knows the resolution
    for rel in task.check.paths:
        (work_dir / rel).write_text(git("show", f"{task.check.expected_commit}:{rel}", cwd=source))
    (team_dir / "fix.patch").write_text(git("diff", cwd=work_dir))
    got = submit_and_grade(svc, task.id, "fix.patch")
    assert (got["status"], got["verdict"]) == ("done", "PASS"), got
