"""What grader/handles.py does that needs no Redis: the routing of grades by environment
(the queue names, and a batch's items grouped by queue without losing their order; the
rest is tests/service/test_queues.py), and the task set loaded once however many threads
ask for it at once."""

from __future__ import annotations

import threading

from grader.handles import Handles, _runs, grade_queue_name


def test_each_environment_has_a_queue_and_no_environment_the_plain_one():
    assert grade_queue_name("grader", "python-3.11") == "grader-env-python-3.11"
    assert grade_queue_name("grader", None) == "grader"
    assert grade_queue_name("other", "c") == "other-env-c"


def test_a_batch_is_grouped_by_queue_in_runs_keeping_its_order():
    a, b = object(), object()
    items = [(a, 1), (a, 2), (b, 3), (a, 4), (b, 5), (b, 6)]
    assert _runs(items) == [(a, [1, 2]), (b, [3]), (a, [4]), (b, [5, 6])]
    assert _runs([]) == []


def test_the_task_set_is_loaded_once_while_many_threads_ask_for_it(settings, monkeypatch):
    svc = Handles(settings)
    loads, entered, go = [], threading.Event(), threading.Event()
    real = Handles._load_tasks

    def slow(self):
        loads.append(1)
        entered.set()
        go.wait(30)  # every other thread asks while this one loads
        return real(self)

    monkeypatch.setattr(Handles, "_load_tasks", slow)
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(svc.tasks)) for _ in range(8)]
    threads[0].start()
    entered.wait(30)
    for t in threads[1:]:
        t.start()
    go.set()
    for t in threads:
        t.join(30)
    assert len(loads) == 1 and len(got) == 8 and all(g is got[0] for g in got)
