"""Many hosts on one Redis and one PostgreSQL, and one of them lost whole mid-batch.

Host A is `grader worker` on this machine's Docker engine; host B is `grader worker` on a
second engine with its own data root, exec root, pidfile and socket (tests/helpers/
engines.py), which starts with no image at all: its worker takes no grade of the mini
tasks' environment until it has the image, which it gets by `grader env export` here and
`grader env import` there, after which its worker starts again on that environment's queue;
building is off on both hosts, so neither can turn a grade into a build. Both take the batch from
one API (`grader serve`), one Redis and one PostgreSQL. Once host B has graded at least
one submission and holds another, it is killed whole: its `grader worker` (parent and
children) and its engine (dockerd, containerd, the shims and every process of its
containers) SIGKILLed at once, as a machine that loses power.

Then: every submission ends with exactly one final verdict, PASS, and no final verdict
is ever seen to change (`Ledger`); what host B had not finished is graded on host A, a
grade in flight on B once more (attempts 2) after its lease ran out, the rest once; the
database holds what the API reported; no container of host A's workers is left on its
engine, none at all once it stops. Not `disruptive`: this machine's engine is only used,
never restarted; the second engine is this test's own and its directory is removed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import requests

from grader.client import Client
from helpers import ROOT
from helpers.engines import SecondEngine
from helpers.mini import FIXED
from helpers.service import BIN, Ledger, Stack, make_service, new_key

pytestmark = [pytest.mark.docker, pytest.mark.service]

BATCH = 12


def _slow(mini, i: int, seconds: float = 1.5) -> str:
    """A passing patch whose grade takes `seconds` more; `i` makes each one unique."""
    return mini.diff({"calc/__init__.py": f"import time\ntime.sleep({seconds})\n# {i}\n" + FIXED}).decode()


def _workers(url: str, key: str) -> list[dict]:
    r = requests.get(f"{url}/v1/workers", headers={"Authorization": f"Bearer {key}"}, timeout=10)
    r.raise_for_status()
    return r.json()["workers"]


def _queues_of(url: str, key: str, host: str, proc: subprocess.Popen, tail) -> list[str]:
    """The queues the live worker of `host` listens to (waiting for one to be registered)."""
    deadline = time.monotonic() + 60
    while True:
        live = [w for w in _workers(url, key) if w.get("name", "").startswith(host) and w["state"] != "suspended"]
        if live:
            return sorted({q for w in live for q in w["queues"]})
        assert proc.poll() is None and time.monotonic() < deadline, tail()
        time.sleep(0.3)


@pytest.fixture
def engine_b():
    e = SecondEngine("hostb")
    try:
        yield e.start()
    finally:
        e.cleanup()  # a start that failed half-way leaves things too


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_host_lost_whole_mid_batch_loses_nothing(database_url, redis_server, settings, engine_b, mini, tmp_path):
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
        "GRADER_BUILD_MISSING_IMAGES": "false",
    }
    base = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}

    # the images reach host B without a registry
    out = tmp_path / "archive"
    done = subprocess.run(
        [str(BIN), "env", "export", "python-3.11", "-o", str(out), "--json"],
        env={**base, **env},
        capture_output=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr.decode()
    archive = json.loads(done.stdout)

    svc = make_service(database_url, redis_server.url, tasks_dir=settings.tasks_dir)
    key = new_key(svc, f"hosts-{uuid.uuid4().hex[:6]}")
    host_key = new_key(svc, f"ops-{uuid.uuid4().hex[:6]}", admin=True)
    svc.close()
    (tmp_path / "a").mkdir()
    stack = Stack({**base, **env, "GRADER_HOST_NAME": "host-a"}, tmp_path / "a").start(workers=1)
    b_log = open(tmp_path / "host-b.log", "wb")
    host_b = subprocess.Popen(
        [str(BIN), "worker", "--count", "1"],
        env={**base, **env, "GRADER_HOST_NAME": "host-b", "DOCKER_HOST": engine_b.url},
        stdout=b_log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    admin = Client(stack.url, host_key)

    def tail() -> str:
        return stack.tail() + "\n--- host-b.log\n" + (tmp_path / "host-b.log").read_text(errors="replace")[-3000:]

    try:
        # host B's engine has no image yet: its worker takes no python-3.11 grade
        b_queues = _queues_of(stack.url, host_key, "host-b:", host_b, tail)
        assert "grader-env-python-3.11" not in b_queues and "grader" in b_queues, b_queues

        done = subprocess.run(
            [str(BIN), "env", "import", archive["path"], "--sha256", archive["sha256"]],
            env={**base, **env, "DOCKER_HOST": engine_b.url},
            capture_output=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr.decode()
        Path(archive["path"]).unlink()
        # once it has: its worker starts again on the environment's queue too (the parent looks every 10 s)
        deadline = time.monotonic() + 90
        while "grader-env-python-3.11" not in _queues_of(stack.url, host_key, "host-b:", host_b, tail):
            assert time.monotonic() < deadline, tail()
            time.sleep(0.5)

        c = Client(stack.url, key)
        batch = c.submit_batch([{"task_id": "mini", "patch": _slow(mini, i)} for i in range(BATCH)])
        ids = [item["id"] for item in batch["items"]]
        ledger = Ledger(admin, ids, stack)

        # mid-batch: host B has graded one and holds another
        deadline = time.monotonic() + 180
        while True:
            now = ledger.poll()
            b_done = [i for i, s in now.items() if s["status"] == "done" and s["host"].startswith("host-b:")]
            b_running = [i for i, s in now.items() if s["status"] == "running" and s["host"].startswith("host-b:")]
            if b_done and b_running:
                break
            assert time.monotonic() < deadline, ({i: (s["status"], s["host"]) for i, s in now.items()}, tail())
            time.sleep(0.1)

        os.killpg(host_b.pid, signal.SIGKILL)  # the host lost whole: its workers and its engine
        killed = engine_b.kill()
        host_b.wait(timeout=30)
        assert killed and not engine_b.answers()
        lost = {
            i: s for i, s in ledger.poll().items() if s["status"] != "done" and (s["host"] or "").startswith("host-b:")
        }
        finished_by_b = {
            i for i, s in ledger.poll().items() if s["status"] == "done" and s["host"].startswith("host-b:")
        }
        assert lost, "host B held no grade when it was lost"

        final = ledger.settle(timeout=240)
        verdicts = {i: s["verdict"] for i, s in final.items()}
        assert verdicts == {i: "PASS" for i in ids}, (verdicts, tail())
        ledger.assert_database_agrees(database_url, final)
        # what B had not finished was graded on the survivor; what was in flight there, once more
        for i, s in final.items():
            if i in finished_by_b:
                assert s["host"].startswith("host-b:") and s["attempts"] == 1, s
            else:
                assert s["host"].startswith("host-a:"), (i, s["host"])
                assert s["attempts"] == (2 if i in lost else 1), (i, s["attempts"], s["status"])
        print(
            f"host B graded {len(finished_by_b)} before it was lost, held {len(lost)}; "
            f"host A graded {BATCH - len(finished_by_b)}, {len(lost)} of them a second time"
        )

        stack.assert_no_orphans()
        stack.stop()
        stack.assert_no_containers()
    finally:
        if host_b.poll() is None:
            os.killpg(host_b.pid, signal.SIGKILL)
            host_b.wait()
        b_log.close()
        stack.stop()
