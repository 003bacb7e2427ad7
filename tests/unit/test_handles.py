"""The routing of grades by environment in grader/handles.py that needs no Redis: the
queue names, and a batch's items grouped by queue without losing their order (the rest
is tests/service/test_queues.py)."""

from __future__ import annotations

from grader.handles import _runs, grade_queue_name


def test_each_environment_has_a_queue_and_no_environment_the_plain_one():
    assert grade_queue_name("grader", "python-3.11") == "grader-env-python-3.11"
    assert grade_queue_name("grader", None) == "grader"
    assert grade_queue_name("other", "c") == "other-env-c"


def test_a_batch_is_grouped_by_queue_in_runs_keeping_its_order():
    a, b = object(), object()
    items = [(a, 1), (a, 2), (b, 3), (a, 4), (b, 5), (b, 6)]
    assert _runs(items) == [(a, [1, 2]), (b, [3]), (a, [4]), (b, [5, 6])]
    assert _runs([]) == []
