"""How many of one API process's request threads one team may hold at once.

gunicorn gives each process a fixed pool of threads, served in the order requests arrive.
A team that sends hundreds of requests at once (long-polls, large bodies, a loop without
back-off) would otherwise take every thread, and another team's request would wait in
line behind all of them. Past `max_inflight_per_team` requests of its own in progress on
this process, a team's next request is answered 429 at once, before any work is done for
it (its key is checked, nothing more), with a Retry-After: the threads it did not get stay
free for the other teams. `grader serve` keeps the bound at least 4 below the thread count.

Per process, in memory: the bound is about threads, and threads are a process's own.
Hosts (admin keys) are not bound.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Iterator

from grader.api.errors import ApiError


class InFlight:
    """The requests in progress on this process, counted per team."""

    def __init__(self, limit: int):
        self.limit = limit
        self._count: Counter[int] = Counter()
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def hold(self, team_id: int) -> Iterator[None]:
        """One of the team's places for the length of a request, or ApiError 429 if none is free."""
        with self._lock:
            if self.limit > 0 and self._count[team_id] >= self.limit:
                raise ApiError(429, "too_many_requests",
                               f"your team has {self.limit} requests in progress on this API process; wait for "
                               "them, or send many submissions as one batch", retry_after=1)
            self._count[team_id] += 1
        try:
            yield
        finally:
            with self._lock:
                self._count[team_id] -= 1
                if self._count[team_id] <= 0:
                    del self._count[team_id]
