"""What the service tells whom (issue 11): a team sees how many workers there are, not
what they grade; /readyz says which dependency is down, not where it lives; a key sent in
a query string never reaches the access log; and one invalid task file is refused with
its reason while the valid tasks keep serving."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

import pytest
import requests
from click.testing import CliRunner
from rq import Worker

from grader.app import create_app
from grader.cli import main
from grader.errors import TaskError
from grader.tasks.loader import TaskSet
from helpers.service import BIN, ROOT, Api, _free_port, make_service, new_key

pytestmark = pytest.mark.service
GOLD = (ROOT / "tasks/examples/calc-mean-empty/gold.patch").read_text()


@pytest.fixture
def service_options():
    """A ?wait= holds at most 2 s here."""
    return {"max_wait": 2}


# --- /v1/workers ------------------------------------------------------------------------------------
def test_a_team_sees_worker_counts_a_host_sees_what_they_do(svc):
    app = create_app(service=svc, migrate=False)
    team = Api(app.test_client(), new_key(svc, "team-a"))
    host = Api(app.test_client(), new_key(svc, "ops", admin=True))
    r = team.post("/v1/submissions", json={"task_id": "calc-mean-empty", "patch": GOLD})
    sid = r.json["id"]
    worker = Worker([svc.queue], connection=svc.redis, name="grading-box-7")
    worker.register_birth()
    try:
        worker.set_state("busy")
        worker.set_current_job_id(f"{sid}-1")
        seen = team.get("/v1/workers")
        assert seen.status_code == 200
        assert seen.json["workers"] == [{"state": "busy"}] and seen.json["queue"]["queued"] == 1
        text = seen.get_data(as_text=True)
        for secret in (sid, "grading-box-7", str(worker.pid), worker.hostname):
            assert secret not in text
        [full] = host.get("/v1/workers").json["workers"]
        assert (full["name"], full["current_submission"], full["pid"]) == ("grading-box-7", sid, worker.pid)
    finally:
        worker.register_death()


# --- /readyz ------------------------------------------------------------------------------------------
def test_readyz_says_what_is_down_not_where_it_lives(database_url, redis_url):
    dead = f"redis://127.0.0.1:{_free_port()}/0"
    svc = make_service(database_url, redis_url)
    admin_key = new_key(svc, "ops", admin=True)
    team_key = new_key(svc, "team-a")
    svc.close()
    svc = make_service(database_url, dead)
    try:
        app = create_app(service=svc, migrate=False)
        port = dead.rsplit(":", 1)[1].split("/")[0]
        for headers in ({}, {"Authorization": f"Bearer {team_key}"}, {"Authorization": "Bearer grk_wrong"}):
            r = app.test_client().get("/readyz", headers=headers)
            assert r.status_code == 503
            assert r.json["checks"]["redis"] == {"ok": False, "detail": "Redis does not answer"}
            assert r.json["checks"]["database"] == {"ok": True}
            text = r.get_data(as_text=True)
            assert port not in text and "127.0.0.1" not in text and "connecting" not in text
        r = app.test_client().get("/readyz", headers={"Authorization": f"Bearer {admin_key}"})
        assert r.status_code == 503 and port in r.json["checks"]["redis"]["detail"]
    finally:
        svc.close()


# --- the access log -----------------------------------------------------------------------------------
def test_a_key_in_a_query_string_never_reaches_the_access_log(redis_url, tmp_path):
    """Through `grader serve` (gunicorn) itself."""
    database_url = f"sqlite:///{tmp_path}/grader.db"
    svc = make_service(database_url, redis_url)
    key = new_key(svc, "team-a")
    svc.close()
    port = _free_port()
    env = {
        **os.environ,
        "GRADER_DATABASE_URL": database_url,
        "GRADER_REDIS_URL": redis_url,
        "GRADER_TASKS_DIR": str(ROOT / "tasks" / "examples"),
        "GRADER_ENVIRONMENTS_DIR": str(ROOT / "environments"),
        "GRADER_CACHE_DIR": str(tmp_path / "cache"),
    }
    log_path = tmp_path / "api.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(BIN), "serve", "--bind", f"127.0.0.1:{port}", "--workers", "1"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                requests.get(f"{url}/healthz", timeout=2)
                break
            except requests.ConnectionError:
                time.sleep(0.1)
        answers = [
            requests.get(f"{url}/v1/tasks?api_key={key}", timeout=10),
            requests.get(f"{url}/v1/tasks?access_token={key}&limit=5", timeout=10),
            requests.get(f"{url}/v1/account?{key}", timeout=10),
            requests.get(f"{url}/leaderboard", headers={"Referer": f"{url}/me?api_key={key}"}, timeout=10),
            requests.get(f"{url}/v1/account", headers={"Authorization": f"Bearer {key}"}, timeout=10),
        ]
        assert [a.status_code for a in answers[:3]] == [401, 401, 401]
        assert answers[-1].status_code == 200
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    text = log_path.read_text(errors="replace")
    assert "GET /v1/tasks?api_key=<redacted>" in text and "access_token=<redacted>&limit=<redacted>" in text
    assert text.count("GET /leaderboard") == 1
    assert key not in text and key[4:] not in text


# --- an invalid task file ---------------------------------------------------------------------------
def _task_copy(top, name: str, task_id: str, extra: str = "") -> None:
    """calc-mean-empty again under another id, with `extra` YAML appended."""
    shutil.copytree(top / "examples/calc-mean-empty", top / name)
    path = top / name / "task.yaml"
    path.write_text(path.read_text().replace("id: calc-mean-empty", f"id: {task_id}") + extra)


@pytest.fixture
def tasks_dir(tmp_path):
    top = tmp_path / "tasks"
    shutil.copytree(ROOT / "tasks/examples", top / "examples")
    _task_copy(top, "examples/broken", "broken-task", "colour: red\n")  # an unknown key
    return top


def test_one_invalid_task_file_is_refused_and_the_others_serve(database_url, redis_url, tasks_dir):
    with pytest.raises(TaskError):  # `grader tasks validate` and the importers stay strict
        TaskSet(tasks_dir)
    svc = make_service(database_url, redis_url, tasks_dir=tasks_dir)
    try:
        app = create_app(service=svc, migrate=False)
        team = Api(app.test_client(), new_key(svc, "team-a"))
        host = Api(app.test_client(), new_key(svc, "ops", admin=True))
        listed = team.get("/v1/tasks")
        assert listed.status_code == 200
        ids = [t["id"] for t in listed.json["items"]]
        assert "calc-mean-empty" in ids and "broken-task" not in ids
        r = team.post("/v1/submissions", json={"task_id": "calc-mean-empty", "patch": GOLD})
        assert r.status_code == 202, r.json
        assert team.get("/v1/account").status_code == 200
        ready = app.test_client().get("/readyz").json["checks"]["tasks"]
        assert ready["ok"] is False and ready["refused"] == ["examples/broken/task.yaml"]

        # a reload that meets an invalid file keeps the previous set, whole, and says why
        broken = tasks_dir / "examples/broken/task.yaml"
        broken.write_text(broken.read_text().replace("colour: red\n", ""))
        _task_copy(tasks_dir, "examples/other", "other-task", "colour: blue\n")
        _task_copy(tasks_dir, "examples/calc-mean-empty-2", "calc-mean-empty-2")
        r = host.post("/v1/admin/tasks/reload")
        assert r.status_code == 422, r.json
        assert r.json["error"]["code"] == "invalid_tasks" and "examples/other/task.yaml" in r.json["error"]["message"]
        assert "colour" in r.json["error"]["message"] and "previous set stays" in r.json["error"]["message"]
        assert [d["field"] for d in r.json["error"]["details"]] == ["examples/other/task.yaml"]
        assert team.get("/v1/tasks/calc-mean-empty-2").status_code == 404  # nothing half-applied
        assert team.get("/v1/tasks/calc-mean-empty").status_code == 200

        (tasks_dir / "examples/other/task.yaml").unlink()
        r = host.post("/v1/admin/tasks/reload")
        assert r.status_code == 200, r.json
        assert team.get("/v1/tasks/calc-mean-empty-2").status_code == 200
        assert app.test_client().get("/readyz").json["checks"]["tasks"]["refused"] == []
    finally:
        svc.close()


def test_tasks_list_names_the_invalid_task_file(tasks_dir):
    result = CliRunner().invoke(main, ["tasks", "list", "--tasks-dir", str(tasks_dir)])
    assert result.exit_code == 1, result.output
    assert "calc-mean-empty" in result.output
    assert "refused" in result.output and "examples/broken/task.yaml" in result.output and "colour" in result.output
