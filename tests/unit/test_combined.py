"""grader/combined.py: calls made by threads at once, done as one. Pure logic with real
threads; the enqueue it carries is proven against Redis in tests/service/test_queues.py."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from grader.combined import Combined


def burst(
    n: int, later: Callable[[list[int]], None]
) -> tuple[Combined[int], list[list[int]], list[BaseException | None]]:
    """Caller 0 calls first (items [0, 1]) and is held inside the call until callers 1..n-1
    (items [10k, 10k+1]) all wait; every call after the first goes to `later`. Returns the
    calls made and each caller's outcome, once every caller is answered."""
    calls: list[list[int]] = []
    first_in, release = threading.Event(), threading.Event()

    def do(items: list[int]) -> None:
        calls.append(items)
        if len(calls) == 1:
            first_in.set()
            assert release.wait(10)
        else:
            later(items)

    combined = Combined(do)
    errors: list[BaseException | None] = [None] * n

    def call(k: int) -> None:
        try:
            combined([k * 10, k * 10 + 1])
        except BaseException as exc:  # noqa: BLE001 - each caller's outcome is what is tested
            errors[k] = exc

    threads = [threading.Thread(target=call, args=(k,), daemon=True) for k in range(n)]
    threads[0].start()
    assert first_in.wait(10)
    for t in threads[1:]:
        t.start()
    for _ in range(1000):
        with combined._lock:
            if len(combined._waiting) == n - 1:
                break
        threading.Event().wait(0.01)
    else:
        raise AssertionError("the callers never queued")
    release.set()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads), "a caller was left waiting"
    return combined, calls, errors


def test_callers_who_come_while_one_call_runs_are_done_together_once_each_in_order() -> None:
    combined, calls, errors = burst(6, lambda items: None)
    assert errors == [None] * 6
    assert calls[0] == [0, 1]
    assert len(calls) == 2 and sorted(calls[1]) == sorted(i for k in range(1, 6) for i in (k * 10, k * 10 + 1))
    # each caller's items stay together and in its order
    assert all(calls[1][calls[1].index(k * 10) + 1] == k * 10 + 1 for k in range(1, 6))
    # a lone caller afterwards is done alone, at once
    combined([99])
    assert calls[-1] == [99]


def test_a_failed_call_is_raised_in_every_caller_whose_items_it_held_each_its_own_instance() -> None:
    def fail(items: list[int]) -> None:
        raise ConnectionError("redis went away")

    combined, calls, errors = burst(4, fail)
    assert errors[0] is None  # its own batch went through before the failure
    failed = errors[1:]
    assert all(isinstance(e, ConnectionError) and str(e) == "redis went away" for e in failed), failed
    assert len({id(e) for e in failed}) == 3  # never one object raised in many threads
    assert all(isinstance(e.__cause__, ConnectionError) for e in failed if e is not None)
    # the next caller is not stuck behind the failure: it is done alone (and fails alone)
    with pytest.raises(ConnectionError):
        combined([7])
    assert calls[-1] == [7]


def test_a_caller_stopped_inside_the_call_still_wakes_the_others() -> None:
    """A SystemExit (a worker being stopped) in the thread doing the call: it goes on up in
    that thread, and the callers whose items were in the batch are answered, not left waiting."""

    def stop(items: list[int]) -> None:
        raise SystemExit(1)

    _, _, errors = burst(3, stop)
    kinds = sorted(type(e).__name__ for e in errors[1:])
    assert kinds == ["RuntimeError", "SystemExit"], errors  # the one that did it, and the other
