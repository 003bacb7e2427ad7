"""A process loads its task set once, however many requests need it first. With 2,000
tasks a load is 20 s of CPU (benchmarks/board.py); a new API process's readiness probes,
each given up by its client after 2 s and sent again, loaded it once each, side by side,
and kept the process busy for minutes after it started."""

from __future__ import annotations

import threading
import time

import pytest

from grader.handles import Handles
from helpers.service import new_key

pytestmark = pytest.mark.service


def test_the_first_requests_wait_for_one_load_of_the_task_set(app, svc, monkeypatch):
    key = new_key(svc, "team-a")
    svc._tasks = None  # a process that has not read its tasks yet
    loads = []
    real = Handles._load_tasks

    def load(self):
        loads.append(1)
        time.sleep(0.3)  # long enough for every request below to ask meanwhile
        return real(self)

    monkeypatch.setattr(Handles, "_load_tasks", load)
    start, answers = threading.Barrier(8), []

    def ask() -> None:
        client = app.test_client()
        start.wait()
        answers.append(client.get("/v1/tasks", headers={"Authorization": f"Bearer {key}"}))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [a.status_code for a in answers] == [200] * 8
    assert all(len(a.json["items"]) == len(svc.tasks) > 0 for a in answers)
    assert len(loads) == 1
