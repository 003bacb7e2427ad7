"""dockerd restarted while submissions are being graded, with the whole service running
as real processes. Grades in flight fail in the machinery (ERROR, not charged), are
retried with backoff, and every accepted submission reaches one final verdict once the
engine is back; no grading container is left behind.

This restarts the machine's Docker engine, so it is marked `disruptive`: a plain pytest
run leaves it out, and `scripts/test.sh` (so CI) runs it with `--disruptive` as a step of
its own after every other test, never beside them. Never on a machine where other work
uses the engine."""

from __future__ import annotations

import os
import socket
import subprocess
import time

import pytest

from grader.client import Client
from grader.sandbox.docker import DockerEngine

pytestmark = [pytest.mark.docker, pytest.mark.service, pytest.mark.dockerd, pytest.mark.disruptive]


def _restart_dockerd() -> None:
    pid = subprocess.run(["pidof", "dockerd"], capture_output=True, text=True).stdout.split()
    if subprocess.run(["systemctl", "is-active", "--quiet", "docker"]).returncode == 0:
        subprocess.run(["systemctl", "restart", "docker"], check=True)
    else:
        for p in pid:
            subprocess.run(["kill", "-TERM", p], check=True)
        deadline = time.monotonic() + 60
        while subprocess.run(["pidof", "dockerd"], capture_output=True).returncode == 0:
            assert time.monotonic() < deadline, "dockerd did not stop"
            time.sleep(0.2)
        subprocess.Popen("nohup dockerd >>/var/log/dockerd.log 2>&1 &", shell=True)
    deadline = time.monotonic() + 90
    while not DockerEngine().available():
        assert time.monotonic() < deadline, "dockerd did not come back"
        time.sleep(0.5)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_dockerd_restart_mid_grade_loses_nothing(stack, mini):
    from helpers.mini import FIXED

    c = Client(stack.url, stack.key)
    slow = mini.diff({"calc/__init__.py": "import time\ntime.sleep(4)\n" + FIXED}).decode()
    ids = [c.submit("mini", slow + "\n" * i)["id"] for i in range(4)]
    deadline = time.monotonic() + 60
    while not any(c.get(i)["status"] == "running" for i in ids):
        assert time.monotonic() < deadline, stack.tail()
        time.sleep(0.2)
    time.sleep(1.0)
    _restart_dockerd()
    final = c.wait(ids, timeout=240)
    verdicts = {i: s["verdict"] for i, s in final.items()}
    assert all(s["status"] == "done" for s in final.values()), (verdicts, stack.tail())
    assert set(verdicts.values()) == {"PASS"}, (verdicts, stack.tail())
    assert any(s["errors"] >= 1 for s in final.values()), "no grade was in flight when dockerd went away"
    # every grading container is gone once the workers are idle again
    engine = DockerEngine()
    me = f"{socket.gethostname()}:{os.getpid()}"
    deadline = time.monotonic() + 60
    while True:
        # the service's containers: idle warm ones run, a dead one is left behind (this test
        # process's own graders from earlier tests keep their idle ones until they exit)
        left = [
            x
            for x in engine.client.containers.list(all=True, filters={"label": "grader.sandbox"})
            if x.status != "running" and x.labels.get("grader.owner") != me
        ]
        if not left:
            break
        assert time.monotonic() < deadline, [(x.id[:12], x.status) for x in left]
        time.sleep(1)
