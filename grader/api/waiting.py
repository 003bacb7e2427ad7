"""Holding a request for its verdict (`?wait=`) without letting one team hold the API.

A request that waits keeps one of the few request threads of its gunicorn process. Two
bounds keep waiting requests from taking them all:

- per process, at most `max_waiting_per_process` requests wait at once (`grader serve`
  sets it below its thread count, so threads are always left for requests that do not wait);
- per team, across every process and host, at most `max_waiting_per_team` wait at once,
  counted in Redis (a sorted set of leases that expire, so a process that dies while
  holding one cannot leak it).

A request past either bound is answered at once, as it would be without `?wait=` (202
with the queued submission), with a `Grader-Wait` header saying why it was not held and a
`Retry-After`: the client polls GET instead. The verdict is never refused, only the hold.

A held request sleeps on a notification, not on the database: the worker publishes each
finished submission's id on a Redis channel (`Handles.announce_done`), and one listener
thread per process wakes the requests waiting for it. The database is read once when the
wait begins and again every `RECHECK` seconds, so a notification lost (Redis restarted,
the listener reconnecting) delays a verdict by at most that long, and never loses it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator

from redis import Redis
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

RECHECK = 5.0  # seconds between database reads of a held request, in case a notification was lost

# One step, atomic in Redis: forget the expired leases, add ours, and take it back if that
# puts the team over its bound. Answers 1 if the lease is held, 0 if refused.
_TAKE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('EXPIRE', KEYS[1], math.ceil(ARGV[5]))
return 1
"""


class Refused(Exception):
    """Raised when a request may not be held: its reason goes back in the Grader-Wait header."""


class Waits:
    """The waiting requests of one process: their bounds, and the listener that wakes them."""

    def __init__(self, redis: Redis, channel: str, *, per_process: int, per_team: int, max_wait: float):
        self.redis, self.channel = redis, channel
        self.per_process, self.per_team, self.max_wait = per_process, per_team, max_wait
        self._slots = threading.BoundedSemaphore(max(per_process, 1))
        self._events: dict[str, set[threading.Event]] = {}
        self._lock = threading.Lock()
        self._listener: threading.Thread | None = None
        self._pid = os.getpid()
        self._take = redis.register_script(_TAKE)

    # --- the bounds ------------------------------------------------------------------------
    @contextlib.contextmanager
    def slot(self, team_id: str) -> Iterator[None]:
        """Hold one waiting place for `team_id`, or raise Refused saying which bound is full."""
        if self.per_process <= 0 or self.per_team <= 0:
            raise Refused("this service does not hold requests for their verdict; poll GET")
        if not self._slots.acquire(blocking=False):
            raise Refused(f"this API process holds {self.per_process} waiting requests already; poll GET")
        lease, key = uuid.uuid4().hex, f"{self.channel}:waiting:{team_id}"
        try:
            try:
                now = time.time()
                held = self._take(
                    keys=[key], args=[now, now + self.max_wait + 30, lease, self.per_team, self.max_wait + 60]
                )
            except RedisError as exc:
                raise Refused(f"waiting requests cannot be counted now ({type(exc).__name__}); poll GET") from None
            if not held:
                raise Refused(f"your team has {self.per_team} requests waiting already; poll GET")
            try:
                yield
            finally:
                with contextlib.suppress(RedisError):
                    self.redis.zrem(key, lease)
        finally:
            self._slots.release()

    # --- the wait --------------------------------------------------------------------------
    def wait(self, ids: list[str], open_: Callable[[list[str]], int], seconds: float) -> None:
        """Return when none of `ids` is queued or running (`open_` counts those), or after `seconds`."""
        deadline = time.monotonic() + seconds
        event = threading.Event()
        with self._lock:
            for i in ids:
                self._events.setdefault(i, set()).add(event)
            self._listen()
        try:
            while True:
                if open_(ids) == 0:  # read after registering: a verdict published before is not missed
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                event.wait(min(left, RECHECK))
                event.clear()
        finally:
            with self._lock:
                for i in ids:
                    waiting = self._events.get(i)
                    if waiting is not None:
                        waiting.discard(event)
                        if not waiting:
                            del self._events[i]

    def _listen(self) -> None:
        """Start this process's listener if none runs (under self._lock). It stops when no
        request is held, so an idle process keeps no subscription, and a forked child that
        inherited none starts its own."""
        if self._listener is not None and self._listener.is_alive() and self._pid == os.getpid():
            return
        self._pid = os.getpid()
        self._listener = threading.Thread(target=self._run, name="grader-waits", daemon=True)
        self._listener.start()

    def _run(self) -> None:
        pause = 0.5
        while True:
            try:
                # redis-py's pubsub() takes its options as **kwargs, unannotated
                with self.redis.pubsub(ignore_subscribe_messages=True) as pubsub:  # type: ignore[no-untyped-call]
                    pubsub.subscribe(self.channel)
                    pause = 0.5
                    while True:  # get_message waits on the socket itself: no read times out while all is quiet
                        message = pubsub.get_message(timeout=RECHECK)
                        if message is not None:
                            self._wake(message.get("data"))
                        elif self._idle():
                            return
            except (RedisError, OSError, ValueError) as exc:
                log.warning("the verdict listener lost Redis (%s); held requests read the database meanwhile", exc)
            if self._idle():
                return
            time.sleep(pause)
            pause = min(pause * 2, RECHECK)

    def _idle(self) -> bool:
        """True, and the listener given up, when no request is held."""
        with self._lock:
            if self._events:
                return False
            self._listener = None
            return True

    def _wake(self, data: object) -> None:
        sid = data.decode() if isinstance(data, bytes) else str(data)
        with self._lock:
            events = list(self._events.get(sid, ()))
        for event in events:
            event.set()
