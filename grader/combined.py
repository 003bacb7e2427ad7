"""Calls that threads of one process make at once, done as one: the first caller does its
own items, and the items every other caller brought while it did are done together by the
first of them, and so on. For a call whose fixed cost (a round trip) outweighs its
per-item cost and whose callers come in bursts, such as the enqueues of a shared write's
group of POSTs, answered at one moment (grader/store/db.py's `write_shared` is the same
turn-taking for database transactions, with a retry of each alone that this one has no
need for)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class _Waiting(Generic[T]):
    __slots__ = ("items", "done", "error", "lead")

    def __init__(self, items: list[T]):
        self.items = items
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.lead = False  # woken to do the next batch, not because its items are done


class Combined(Generic[T]):
    """`combined(items)` returns once `do` has been called on a list holding `items` (in
    order, after the items of callers who came before) and returned; if that call raised,
    every caller whose items were in it raises that exception's type, with its message,
    from it (each its own instance: one exception object is not raised in many threads)."""

    def __init__(self, do: Callable[[list[T]], None]):
        self._do = do
        self._lock = threading.Lock()
        self._waiting: list[_Waiting[T]] = []
        self._leading = False

    def __call__(self, items: list[T]) -> None:
        me = _Waiting(items)
        with self._lock:
            self._waiting.append(me)
            lead, self._leading = not self._leading, True
        if not lead:
            me.done.wait()
            if not me.lead:
                return self._outcome(me)
        batch: list[_Waiting[T]] = []
        try:
            with self._lock:
                batch, self._waiting = self._waiting, []
            self._do([item for w in batch for item in w.items])
        except BaseException as exc:
            for w in batch:
                w.error = exc
            if not isinstance(exc, Exception):
                raise  # this thread is being stopped; the others are still woken below
        finally:
            for w in batch:
                if w is not me:
                    w.done.set()
            with self._lock:
                if self._waiting:  # came while the batch was done: the first of them does the next
                    self._waiting[0].lead = True
                    self._waiting[0].done.set()
                else:
                    self._leading = False
        return self._outcome(me)

    @staticmethod
    def _outcome(me: _Waiting[T]) -> None:
        error = me.error
        if error is None:
            return
        again: Exception
        try:
            again = type(error)(*error.args) if isinstance(error, Exception) else RuntimeError(repr(error))
        except Exception:  # a type that cannot be made again from its args
            again = RuntimeError(str(error))
        raise again from error
