"""What one team may take of the API: threads of a process (InFlight), bytes of request
bodies a second across the service (Ingest), and how a body is read (read_body).

gunicorn gives each process a fixed pool of threads, served in the order requests arrive.
A team that sends hundreds of requests at once (long-polls, large bodies, a loop without
back-off) would otherwise take every thread, and another team's request would wait in
line behind all of them. Past `max_inflight_per_team` requests of its own in progress on
this process, a team's next request is answered 429 at once, before any work is done for
it (its key is checked, nothing more), with a Retry-After: the threads it did not get stay
free for the other teams. `grader serve` keeps the bound at least 4 below the thread count.

Per process, in memory: the bound is about threads, and threads are a process's own.
Hosts (admin keys) are not bound. Requests that name no team (anonymous readers of the
public leaderboard and pages) are bound together as one team (ANONYMOUS); a signed-in
portal page counts as its team's (grader/app.py).
"""

from __future__ import annotations

import contextlib
import io
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from redis import Redis
from redis.exceptions import RedisError

from grader.api.errors import ApiError

ANONYMOUS = -1  # the place-holder team of the requests that name none (no key, no session)


class InFlight:
    """The requests in progress on this process, counted per team."""

    def __init__(self, limit: int, anonymous: int | None = None):
        self.limit = limit
        self.anonymous = limit if anonymous is None else anonymous
        self._count: Counter[int] = Counter()
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def hold(self, team_id: int) -> Iterator[None]:
        """One of the team's places for the length of a request, or ApiError 429 if none is free.
        ANONYMOUS stands for every request that names no team: together they are one team."""
        limit = self.anonymous if team_id == ANONYMOUS else self.limit
        with self._lock:
            if limit > 0 and self._count[team_id] >= limit:
                who = "requests without a key have" if team_id == ANONYMOUS else "your team has"
                raise ApiError(
                    429,
                    "too_many_requests",
                    f"{who} {limit} requests in progress on this API process; wait for "
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


PIECE = 256 * 1024  # bytes of a body read (and paid for) at a time when its length is not known


def read_body(environ: dict[str, Any], limit: int, pay: Callable[[int], None] | None) -> None:
    """Read a request body whose length its headers do not give (Transfer-Encoding:
    chunked) before anything else does, PIECE at a time: each piece is paid for as it is
    read (`pay`: the team's bucket, or None for a host), and a body past `limit` is
    refused with 413 as soon as it is, whatever its framing. The body read is put back as
    an ordinary one of known length, which is all the rest of the request sees.

    A body announced by Content-Length is paid for from its headers (Ingest.charge) and
    needs none of this; Werkzeug alone would cut a chunked body at the limit without a
    word, and the truncated JSON was answered 400 instead of 413."""
    stream = environ["wsgi.input"]
    body = bytearray()
    while True:
        piece = stream.read(min(PIECE, limit + 1 - len(body)))
        if not piece:
            break
        body += piece
        if len(body) > limit:
            raise ApiError(413, "body_too_large", f"the request body is larger than the limit of {limit} bytes")
        if pay is not None:
            pay(len(piece))
    environ["wsgi.input"] = io.BytesIO(bytes(body))
    environ["CONTENT_LENGTH"] = str(len(body))
    environ.pop("HTTP_TRANSFER_ENCODING", None)


def unannounced(environ: dict[str, Any]) -> bool:
    """Whether a request carries a body of a length its headers do not give."""
    return "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()


def drain(environ: dict[str, Any], limit: int) -> None:
    """Read and drop what is left of a body announced by Content-Length (at most `limit`
    bytes), for an answer given before the body was read. Behind the proxy the body is
    already whole on the proxy's side, so this is a copy over a local socket; left unread,
    gunicorn would close the connection with bytes in it, the kernel would reset it, and
    the proxy would answer the client 502 instead of the refusal."""
    if unannounced(environ):
        return
    stream = environ.get("wsgi.input")
    if stream is None:
        return
    left = limit
    while left > 0:
        piece = stream.read(min(PIECE, left))
        if not piece:
            return
        left -= len(piece)
