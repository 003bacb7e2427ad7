"""`grader tasks list / show / checkout` for a team that has no task folders: they fall
back to the service (GRADER_API_URL), a checkout downloads the task's bundle and makes
the grader's starting state from it; the CLI's errors when the service does not answer
or the key is missing; and the whole way from an empty directory to a PASS through a
live server and a worker (Docker)."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader import jobs
from grader.app import create_app
from grader.cli import main
from grader.client import ApiError, Client
from grader.config import _from_env
from grader.pipeline import Grader
from grader.tasks.prepare import checkout_base
from service_helpers import ROOT, make_service, new_key
from test_client import api  # noqa: F401 (a fixture: a scripted HTTP server)
from test_task_repository import EXAMPLES, app, git, state, svc, unbundle  # noqa: F401 (fixtures)


# --- the CLI against a live server --------------------------------------------------------------
@pytest.fixture
def served(app):  # noqa: F811 (the fixture imported above)
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def team_dir(tmp_path, monkeypatch):
    """An empty working directory, no GRADER_* settings: a remote team's machine."""
    home = tmp_path / "team"
    home.mkdir()
    monkeypatch.chdir(home)
    for name in ("GRADER_TASKS_DIR", "GRADER_API_URL", "GRADER_API_KEY", "GRADER_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "team-cache"))
    _from_env.cache_clear()
    yield home
    _from_env.cache_clear()


def use_service(monkeypatch, url: str, key: str) -> None:
    monkeypatch.setenv("GRADER_API_URL", url)
    monkeypatch.setenv("GRADER_API_KEY", key)
    _from_env.cache_clear()


def cli(*args, input=None):
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


@pytest.mark.service
def test_list_show_and_checkout_fall_back_to_the_service(svc, served, team_dir, monkeypatch, tmp_path):  # noqa: F811 (the fixture imported above)
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
def test_local_task_folders_win_and_url_asks_the_service(svc, served, team_dir, monkeypatch, tmp_path):  # noqa: F811 (the fixture imported above)
    key = new_key(svc, "remote-team")
    use_service(monkeypatch, "http://127.0.0.1:9", key)  # nothing there: a local answer must not ask
    local = cli("tasks", "show", "calc-mean-empty", "--tasks-dir", str(ROOT / "tasks"))
    assert local.exit_code == 0 and json.loads(local.stdout)["id"] == "calc-mean-empty"
    listed = cli("tasks", "list", "--json", "--tasks-dir", str(ROOT / "tasks"))
    assert len(json.loads(listed.stdout)) == len(svc.tasks)
    # a local tasks directory without the task: the service is asked (and is not there)
    other = cli("tasks", "show", "calc-mean-empty", "--tasks-dir", str(tmp_path))
    assert other.exit_code == 2 and "cannot reach http://127.0.0.1:9" in other.output
    assert f"no task 'calc-mean-empty' in {tmp_path}" in other.output
    # --url names the service even where local tasks are
    named = cli("tasks", "list", "--json", "--url", served, "--tasks-dir", str(ROOT / "tasks"))
    assert named.exit_code == 0 and [t["id"] for t in json.loads(named.stdout)] == sorted(svc.tasks.ids())


@pytest.mark.service
def test_a_refused_key_says_where_the_key_comes_from(served, team_dir, monkeypatch):
    use_service(monkeypatch, served, "grk_" + "x" * 43)
    for args in (["tasks", "list"], ["submit", "--task", "calc-mean-empty", "--patch", "-"]):
        result = cli(*args, input=b"")
        assert result.exit_code == 2 and "not valid" in result.output
        assert "--api-key" in result.output and "GRADER_API_KEY" in result.output


def test_a_bundle_that_does_not_match_its_sha256_is_refused_and_nothing_is_left(api, team_dir):  # noqa: F811 (the fixture imported above)
    """A download cut short or changed on the way is not checked out."""
    import hashlib

    sent = b"# v2 git bundle\n" + b"x" * 100
    api.on("GET", "/v1/tasks/t1", (200, {"id": "t1", "repo": {"commit": "a" * 40, "merge": None}}))
    api.on(
        "GET",
        "/v1/tasks/t1/repository",
        (
            200,
            sent,
            {
                "Content-Type": "application/x-git-bundle",
                "X-Content-SHA256": hashlib.sha256(sent + b"more").hexdigest(),
                "X-Grader-Commit": "a" * 40,
            },
        ),
    )
    with pytest.raises(ApiError, match="the bundle's sha256 is"):
        Client(api.url, "k").repository("t1", team_dir / "t1.bundle")
    assert list(team_dir.iterdir()) == []
    result = cli("tasks", "checkout", "t1", "work", "--url", api.url, "--api-key", "k")
    assert result.exit_code == 2 and "the bundle's sha256 is" in result.output
    assert list(team_dir.iterdir()) == []


# --- the CLI's errors: no service, no key ---------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "args",
    [
        ["tasks", "list"],
        ["tasks", "show", "calc-mean-empty"],
        ["tasks", "checkout", "calc-mean-empty", "work"],
        ["submit", "--task", "calc-mean-empty", "--patch", "-"],
        ["runs", "list"],
    ],
)
def test_a_server_that_does_not_answer_is_named_not_traced(args, team_dir):
    url = f"http://127.0.0.1:{free_port()}"
    result = cli(*args, "--url", url, "--api-key", "k", input=b"")
    assert result.exit_code == 2
    assert f"error: cannot reach {url}: is `grader serve` running? (connection refused)" in result.output
    for trace in ("HTTPConnectionPool", "Max retries", "Traceback", "urllib3", "NewConnectionError"):
        assert trace not in result.output
    assert not (team_dir / "work").exists()


def test_connection_refused_is_retried_only_a_little():
    sleeps: list[float] = []
    client = Client(f"http://127.0.0.1:{free_port()}", "k", max_retries=5, sleep=sleeps.append)
    with pytest.raises(ApiError) as info:
        client.tasks()
    assert info.value.status is None and info.value.code == "unreachable"
    assert "is `grader serve` running? (connection refused)" in info.value.message
    assert len(sleeps) == 2 and sum(sleeps) <= 0.5 + 1.0  # two retries, backoff 0.5 s then 1 s at most


def test_a_connection_nobody_accepts_gives_up_after_the_connect_timeout():
    """A listener whose accept queue is full drops new handshakes, as a firewall that
    drops packets does: the connect timeout, not the 30 s read timeout, ends each try."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    waiting = []
    try:
        for _ in range(3):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            waiting.append(s)
        time.sleep(0.2)  # the handshakes that fit complete; the queue is then full
        sleeps: list[float] = []
        client = Client(f"http://127.0.0.1:{port}", "k", timeout=30, connect_timeout=0.2, sleep=sleeps.append)
        with pytest.raises(ApiError) as info:
            client.tasks()
        assert "is `grader serve` running? (no answer to the connection)" in info.value.message
        assert len(sleeps) == 2
    finally:
        for s in waiting:
            s.close()
        listener.close()


@pytest.mark.parametrize(
    "args", [["tasks", "list"], ["tasks", "show", "calc-mean-empty"], ["tasks", "checkout", "calc-mean-empty", "work"]]
)
def test_no_tasks_and_no_key_names_both_settings(args, team_dir):
    result = cli(*args)
    assert result.exit_code == 2
    for name in ("GRADER_TASKS_DIR", "--tasks-dir", "GRADER_API_KEY", "--api-key"):
        assert name in result.output, name
    assert not (team_dir / "work").exists()


def test_a_command_of_the_service_without_a_key_names_the_setting_and_the_option(team_dir):
    for args in (["submit", "--task", "t", "--patch", "-"], ["status", "s1"], ["runs", "list"]):
        result = cli(*args, input=b"")
        assert result.exit_code == 2 and "no API key" in result.output
        assert "GRADER_API_KEY" in result.output and "--api-key" in result.output


# --- the whole way, from an empty directory to a PASS (Docker) -------------------------------------
@pytest.fixture
def live(tmp_path, redis_url):
    """start(tasks_dir, cache_dir) -> (the service, its URL): the app over real HTTP,
    graded by `work(svc)` (an RQ worker in this process, grading in Docker)."""
    made = []

    def start(tasks_dir: Path, cache_dir: Path):
        from werkzeug.serving import make_server

        svc = make_service(  # noqa: F811 (a local service, not the fixture imported above)
            f"sqlite:///{tmp_path}/grader-{len(made)}.db",
            redis_url,
            tasks_dir=tasks_dir,
            cache_dir=cache_dir,
        )
        jobs.use(svc, Grader(svc.settings))
        server = make_server("127.0.0.1", 0, create_app(service=svc, migrate=False), threaded=True)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
        made.append((svc, server))
        return svc, f"http://127.0.0.1:{server.server_port}"

    yield start
    for service, server in made:
        server.shutdown()
        server.server_close()
        service.close()


def submit_and_grade(svc, task_id: str, patch_file: str) -> dict:  # noqa: F811 (a local service, not the fixture imported above)
    from test_jobs_docker import work

    sent = cli("submit", "--task", task_id, "--patch", patch_file, "--json")
    assert sent.exit_code == 0, sent.output
    work(svc)
    return json.loads(cli("status", json.loads(sent.stdout)["id"], "--json").stdout)


@pytest.mark.docker
@pytest.mark.service
def test_a_remote_team_checks_out_fixes_submits_and_passes(live, settings, team_dir, monkeypatch):
    from conftest import FIXED

    svc, url = live(settings.tasks_dir, settings.cache_dir)  # noqa: F811 (a local service, not the fixture imported above)
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
    svc, url = live(ROOT / "tasks", tmp_path / "service-cache")  # noqa: F811 (a local service, not the fixture imported above)
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
