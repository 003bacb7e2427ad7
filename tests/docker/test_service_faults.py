"""Faults under the running service: `grader serve` (gunicorn) and `grader worker` as real
processes over a real Redis, SQLite or a real PostgreSQL, and Docker grading, with short
leases (4 s) and a reconciler pass every second.

Each fault strikes while six slow submissions are in flight (two being graded, four
queued): worker processes SIGKILLed mid-grade; Redis restarted with its data and empty,
with a submission accepted while it was down; PostgreSQL restarted; and for SQLite, which
has no server to restart, its file write-locked by another process for longer than a
lease (what a backup or a long migration does), so that no lease can be renewed, no
claim taken and no verdict written until it lets go.

After each: every accepted submission reaches one final verdict, and while the test polls
none is ever seen to change a final verdict or grade, or count fewer attempts (`Ledger`);
the attempts are what the fault explains; the database holds what the API reports; no
container of a dead worker is left, and none at all once the service stops; no API key
reached the logs."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
import uuid

import pytest
from sqlalchemy.engine import make_url

from grader.client import Client
from helpers.mini import FIXED
from helpers.service import ROOT, Ledger, Stack, make_service, new_key

pytestmark = [pytest.mark.docker, pytest.mark.service]


@pytest.fixture
def stack(database_url, redis_server, settings, tmp_path):
    redis_server.flush()
    env = {
        "GRADER_DATABASE_URL": database_url,
        "GRADER_REDIS_URL": redis_server.url,
        "GRADER_TASKS_DIR": str(settings.tasks_dir),
        "GRADER_CACHE_DIR": str(settings.cache_dir),
        "GRADER_ENVIRONMENTS_DIR": str(ROOT / "environments"),
        "GRADER_LEASE_SECONDS": "4",
        "GRADER_RECONCILE_INTERVAL": "1",
        "GRADER_RETRY_BACKOFF": "1",
        "GRADER_MAX_RETRIES": "6",
        "GRADER_CACHE": "false",
    }
    svc = make_service(database_url, redis_server.url, tasks_dir=settings.tasks_dir)
    key = new_key(svc, f"faults-{uuid.uuid4().hex[:6]}")
    host_key = new_key(svc, f"host-{uuid.uuid4().hex[:6]}", admin=True)
    svc.close()
    s = Stack(env, tmp_path).start()
    s.key, s.host_key, s.db_url = key, host_key, database_url
    try:
        yield s
    finally:
        s.stop()


def _slow(mini, i: int, seconds: float = 2) -> str:
    """A passing patch whose grade takes `seconds` more; `i` makes each one unique."""
    return mini.diff({"calc/__init__.py": f"import time\ntime.sleep({seconds})\n# {i}\n" + FIXED}).decode()


def _in_flight(stack, mini, n: int = 6, seconds: float = 2, running: int = 1) -> tuple[Client, Ledger]:
    """`n` slow submissions, returned once `running` of them are being graded."""
    c = Client(stack.url, stack.key)
    ids = [c.submit("mini", _slow(mini, i, seconds))["id"] for i in range(n)]
    ledger = Ledger(Client(stack.url, stack.host_key), ids, stack)  # the host sees each grade's duration
    deadline = time.monotonic() + 60
    while sum(s["status"] == "running" for s in ledger.poll().values()) < running:
        assert time.monotonic() < deadline, stack.tail()
        time.sleep(0.1)
    return c, ledger


def _after(stack, ledger: Ledger) -> dict[str, dict]:
    """Every submission final and PASS, the database agrees, no orphan, no key in the logs;
    then the service stops and leaves no container. Returns the final submissions."""
    final = ledger.settle()
    assert {i: s["verdict"] for i, s in final.items()} == {i: "PASS" for i in final}, stack.tail()
    ledger.assert_database_agrees(stack.db_url, final)
    stack.assert_no_orphans()
    stack.stop()
    stack.assert_no_containers()
    assert stack.key not in stack.log_text() and stack.host_key not in stack.log_text()
    print(
        "attempts:", sorted(s["attempts"] for s in final.values()), "claims lost:", stack.log_text().count("claim lost")
    )
    return final


def test_workers_killed_mid_grade_lose_nothing(stack, mini):
    c, ledger = _in_flight(stack, mini, seconds=3, running=2)
    time.sleep(1.0)  # inside their containers now
    running = {i: s["host"] for i, s in ledger.poll().items() if s["status"] == "running"}
    pids = {int(host.rpartition(":")[2]) for host in running.values()}
    assert len(pids) == 2 and pids <= set(stack.worker_children()), (running, stack.worker_children())
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    final = _after(stack, ledger)
    # the killed grades ran out their lease and were graded again, once, elsewhere
    assert {i: final[i]["attempts"] for i in running} == {i: 2 for i in running}
    assert all(final[i]["host"] != running[i] for i in running)
    assert {i: s["attempts"] for i, s in final.items() if i not in running} == {i: 1 for i in final if i not in running}


@pytest.mark.parametrize("keep_data", [True, False], ids=["with-data", "empty"])
def test_redis_restarted_loses_nothing(stack, redis_server, mini, keep_data):
    c, ledger = _in_flight(stack, mini, running=2)
    redis_server.stop()
    # accepted while Redis is down: stored first, enqueued by the reconciler later
    late = c.submit("mini", _slow(mini, 99, 0))
    assert late["status"] == "queued"
    ledger.add([late["id"]])
    time.sleep(1.0)
    redis_server.restart(keep_data=keep_data)
    final = _after(stack, ledger)
    # nothing was taken from a worker: every submission was claimed once
    assert {i: s["attempts"] for i, s in final.items()} == {i: 1 for i in final}


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_postgres_restarted_loses_nothing(stack, postgres_server, mini):
    c, ledger = _in_flight(stack, mini, running=2)
    postgres_server.restart()
    # the API answers 503 with Retry-After while the database is away; the client retries
    ledger.add([c.submit("mini", _slow(mini, 99, 0))["id"]])
    final = _after(stack, ledger)
    # a verdict whose write the restart refused is graded again once the lease runs out
    assert all(1 <= s["attempts"] <= 2 and s["errors"] == 0 for s in final.values()), final


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_sqlite_locked_past_a_lease_loses_nothing(stack, mini):
    c, ledger = _in_flight(stack, mini, running=2)
    lock = sqlite3.connect(make_url(stack.db_url).database, timeout=30, isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    try:
        late: dict = {}
        sender = threading.Thread(target=lambda: late.update(c.submit("mini", _slow(mini, 99, 0))))
        sender.start()
        held = time.monotonic()
        while time.monotonic() - held < 8:  # twice the lease: renewals, claims and verdicts all wait
            ledger.poll()  # reads go on (WAL)
            time.sleep(0.5)
        assert sender.is_alive(), "a submission was stored while another process held the write lock"
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    sender.join(60)
    assert late.get("status") == "queued", late
    ledger.add([late["id"]])
    final = _after(stack, ledger)
    # a grade whose lease ran out under the lock may have lost its claim to the reconciler:
    # then its verdict was discarded and the submission graded again, once
    assert all(1 <= s["attempts"] <= 2 and s["errors"] == 0 for s in final.values()), final
