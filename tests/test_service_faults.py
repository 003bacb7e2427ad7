"""Faults under the running service (gunicorn + worker processes, real Redis, real
PostgreSQL, Docker grading): Redis restarted with its data and empty, and the database
restarted, while submissions are queued and running. After each, every accepted
submission reaches one final verdict, the API and the database agree on it, and no
grading container of the service is left behind. API keys never reach the logs."""

from __future__ import annotations

import os
import socket
import time

import pytest

from grader.client import Client
from grader.sandbox.docker import DockerEngine
from test_service_e2e import Stack, make_service, new_key, ROOT  # noqa: F401

pytestmark = [pytest.mark.docker, pytest.mark.service]


@pytest.fixture
def pg_stack(postgres_server, redis_server, settings, tmp_path):
    import uuid
    redis_server.flush()
    name = f"faults_{uuid.uuid4().hex[:8]}"
    url = postgres_server.create_database(name)
    env = {"GRADER_DATABASE_URL": url, "GRADER_REDIS_URL": redis_server.url,
           "GRADER_TASKS_DIR": str(settings.tasks_dir), "GRADER_CACHE_DIR": str(settings.cache_dir),
           "GRADER_ENVIRONMENTS_DIR": str(ROOT / "environments"), "GRADER_LEASE_SECONDS": "4",
           "GRADER_RECONCILE_INTERVAL": "1", "GRADER_RETRY_BACKOFF": "1", "GRADER_MAX_RETRIES": "6",
           "GRADER_CACHE": "false"}
    svc = make_service(url, redis_server.url, tasks_dir=settings.tasks_dir)
    key = new_key(svc, "faults")
    svc.close()
    s = Stack(env, tmp_path).start()
    s.key, s.db_url = key, url
    try:
        yield s
    finally:
        s.stop()
        postgres_server.drop_database(name)


def _slow(mini, i: int) -> str:
    from conftest import FIXED
    return mini.diff({"calc/__init__.py": "import time\ntime.sleep(2)\n" + FIXED}).decode() + "\n" * (i % 2)


def _in_flight(stack, mini) -> tuple[Client, list[str]]:
    """Six slow submissions, returned once at least one of them is being graded."""
    c = Client(stack.url, stack.key)
    ids = [c.submit("mini", _slow(mini, i))["id"] for i in range(6)]
    deadline = time.monotonic() + 60
    while not any(c.get(i)["status"] == "running" for i in ids):
        assert time.monotonic() < deadline, stack.tail()
        time.sleep(0.2)
    return c, ids


def _settle(stack, c: Client, ids: list[str]) -> dict[str, dict]:
    """Wait for every id to finish while watching that no final verdict ever changes."""
    seen: dict[str, str] = {}
    deadline = time.monotonic() + 240
    while True:
        now = {i: c.get(i) for i in ids}
        for i, sub in now.items():
            if sub["status"] == "done":
                assert seen.setdefault(i, sub["verdict"]) == sub["verdict"], f"{i} changed its final verdict"
        if all(s["status"] == "done" for s in now.values()):
            return now
        assert time.monotonic() < deadline, stack.tail()
        time.sleep(0.5)


def _no_service_containers_left() -> None:
    me = f"{socket.gethostname()}:{os.getpid()}"
    engine = DockerEngine()
    deadline = time.monotonic() + 60
    while True:
        left = [x for x in engine.client.containers.list(all=True, ignore_removed=True,
                                                         filters={"label": "grader.sandbox"})
                if x.status != "running" and x.labels.get("grader.owner") != me]
        if not left:
            return
        assert time.monotonic() < deadline, [(x.id[:12], x.status) for x in left]
        time.sleep(1)


def _db_verdicts(url: str, ids: list[str]) -> dict[str, str]:
    from grader.store.db import Database
    from grader.store.models import Submission
    db = Database(url)
    try:
        with db.read() as s:
            return {r.id: r.verdict for r in s.query(Submission).filter(Submission.id.in_(ids))}
    finally:
        db.dispose()


@pytest.mark.parametrize("keep_data", [True, False], ids=["redis-restarted-with-data", "redis-restarted-empty"])
def test_redis_restart_loses_nothing(pg_stack, redis_server, mini, keep_data):
    c, ids = _in_flight(pg_stack, mini)
    redis_server.restart(keep_data=keep_data)
    final = _settle(pg_stack, c, ids)
    assert {s["verdict"] for s in final.values()} == {"PASS"}, {i: s["verdict"] for i, s in final.items()}
    assert _db_verdicts(pg_stack.db_url, ids) == {i: s["verdict"] for i, s in final.items()}
    _no_service_containers_left()


def test_database_restart_loses_nothing(pg_stack, postgres_server, mini):
    c, ids = _in_flight(pg_stack, mini)
    postgres_server.restart()
    # the API answers 503 with Retry-After while the database is away; the client retries
    more = c.submit("mini", _slow(mini, 7))["id"]
    final = _settle(pg_stack, c, ids + [more])
    assert {s["verdict"] for s in final.values()} == {"PASS"}, {i: s["verdict"] for i, s in final.items()}
    assert _db_verdicts(pg_stack.db_url, ids + [more]) == {i: s["verdict"] for i, s in final.items()}
    _no_service_containers_left()
    # and no key was ever written to a log: not the team's, not a wrong one that was tried
    wrong = "grk_" + "x" * 43
    assert Client(pg_stack.url, wrong, max_retries=0).session.get(
        f"{pg_stack.url}/v1/account", headers={"Authorization": f"Bearer {wrong}"}).status_code == 401
    logs = "".join(p.read_text(errors="replace") for p in pg_stack.logs.glob("*.log"))
    assert logs and pg_stack.key not in logs and wrong not in logs
