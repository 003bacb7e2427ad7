"""What one team may take of the API: threads of a process (InFlight), and bytes of
request bodies a second across the service (Ingest).

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
import math
import threading
import time
from collections import Counter
from collections.abc import Iterator

from redis import Redis
from redis.exceptions import RedisError

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
                raise ApiError(
                    429,
                    "too_many_requests",
                    f"your team has {self.limit} requests in progress on this API process; wait for "
                    "them, or send many submissions as one batch",
                    retry_after=1,
                )
            self._count[team_id] += 1
        try:
            yield
        finally:
            with self._lock:
                self._count[team_id] -= 1
                if self._count[team_id] <= 0:
                    del self._count[team_id]


# A token bucket per team, in Redis (shared by every API process and host): it refills at
# `rate` bytes a second up to `burst`; a request takes its body's length. Answers 0 if taken,
# else the seconds until there would be enough (nothing is taken then).
_TAKE_BYTES = """
local rate, burst, now, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local have = tonumber(redis.call('HGET', KEYS[1], 'tokens') or burst)
local at = tonumber(redis.call('HGET', KEYS[1], 'at') or now)
have = math.min(burst, have + math.max(0, now - at) * rate)
if cost > have then
  redis.call('HSET', KEYS[1], 'tokens', have, 'at', now)
  redis.call('EXPIRE', KEYS[1], math.ceil(burst / rate) + 1)
  return tostring((cost - have) / rate)
end
redis.call('HSET', KEYS[1], 'tokens', have - cost, 'at', now)
redis.call('EXPIRE', KEYS[1], math.ceil(burst / rate) + 1)
return '0'
"""


class Ingest:
    """How many bytes of request bodies a team may send a second, across the service.

    Reading and parsing a body costs the API CPU in proportion to its size, and a 413 for a
    patch over the limit is only known once it is read: a team streaming large bodies takes
    the cores from everyone else. Each team's bodies draw on a bucket that refills at `rate`
    bytes a second up to `burst` (at least the largest request allowed, so a full-size batch
    always goes through a full bucket). A body the bucket cannot pay for is answered 429
    before it is read, with the seconds until it could be in Retry-After. If Redis cannot be
    reached the body is let through: the per-process bound on requests still holds."""

    def __init__(self, redis: Redis, prefix: str, *, rate: float, burst: int):
        self.redis, self.prefix, self.rate, self.burst = redis, prefix, rate, burst
        self._take = redis.register_script(_TAKE_BYTES)

    def charge(self, team_id: int, size: int | None) -> None:
        """Take `size` bytes from the team's bucket, or raise ApiError 429."""
        if not size or self.rate <= 0:
            return
        try:
            wait = float(
                self._take(
                    keys=[f"{self.prefix}:ingest:{team_id}"], args=[self.rate, max(self.burst, size), time.time(), size]
                )
            )
        except RedisError:
            return
        if wait > 0:
            raise ApiError(
                429,
                "too_many_bytes",
                f"your team has sent more than {self.burst} bytes of requests at "
                f"{self.rate / 2**20:g} MiB/s; this one ({size} bytes) fits in {wait:.1f} s",
                retry_after=max(1, math.ceil(wait)),
            )
