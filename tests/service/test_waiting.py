"""Requests held for their verdict (`?wait=`, grader/api/waiting.py): one team's long-polls
cannot take the request threads another team needs, the bounds hold across processes and
forget a dead process's leases, and a held request is woken by the worker's notification
rather than by polling the database. Through the real API process (gunicorn) where the
threads matter, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from redis import Redis
from sqlalchemy import select

from grader.api import waiting
from grader.api.waiting import Refused, Waits
from grader.store.models import Submission
from helpers.service import ROOT, api_process, make_service, new_key

pytestmark = pytest.mark.service
GOLD = (ROOT / "tasks/examples/calc-mean-empty/gold.patch").read_text()


def _waits(redis_url: str, **kw) -> Waits:
    args = {"per_process": 8, "per_team": 8, "max_wait": 60.0, **kw}
    return Waits(Redis.from_url(redis_url), "test:done", **args)


# --- the bounds ----------------------------------------------------------------------------------------
def test_a_team_holds_at_most_its_bound_across_processes(redis_url):
    # two Waits stand for two API processes: the team's bound is counted in Redis, not per process
    a, b = _waits(redis_url, per_team=2), _waits(redis_url, per_team=2)
    with a.slot("team-a"), b.slot("team-a"):
        with pytest.raises(Refused, match="2 requests waiting"):
            with a.slot("team-a"):
                pass
        with b.slot("team-b"):  # another team is not counted against this one
            pass
    with a.slot("team-a"), a.slot("team-a"):  # released on the way out, refusals included
        pass


def test_a_process_holds_at_most_its_bound(redis_url):
    w = _waits(redis_url, per_process=1)
    with w.slot("team-a"):
        with pytest.raises(Refused, match="this API process"):
            with w.slot("team-b"):
                pass
    with w.slot("team-b"):
        pass


def test_a_dead_process_lease_expires(redis_url):
    w = _waits(redis_url, per_team=1, max_wait=60.0)
    # what a process killed while holding a request leaves: a lease past its expiry
    w.redis.zadd("test:done:waiting:team-a", {"left-by-a-dead-process": time.time() - 1})
    with w.slot("team-a"):
        pass
    w.redis.zadd("test:done:waiting:team-a", {"held-by-a-live-process": time.time() + 90})
    with pytest.raises(Refused):
        with w.slot("team-a"):
            pass


def test_without_redis_a_request_is_answered_not_held():
    w = Waits(
        Redis(host="127.0.0.1", port=1, socket_connect_timeout=1), "test:done", per_process=8, per_team=8, max_wait=60.0
    )
    with pytest.raises(Refused, match="cannot be counted"):
        with w.slot("team-a"):
            pass


def test_no_holding_at_all_when_a_bound_is_zero(redis_url):
    with pytest.raises(Refused, match="does not hold"):
        with _waits(redis_url, per_team=0).slot("team-a"):
            pass


# --- the wake-up --------------------------------------------------------------------------------------
def test_a_held_request_is_woken_by_the_notification_not_the_database(redis_url, monkeypatch):
    monkeypatch.setattr(waiting, "RECHECK", 3600.0)  # the database is read again only on a wake-up
    w = _waits(redis_url)
    done, reads = threading.Event(), []

    def open_(ids):
        reads.append(list(ids))
        return 0 if done.is_set() else 1

    waiter = threading.Thread(target=w.wait, args=(["s1"], open_, 600.0))
    waiter.start()
    publisher = Redis.from_url(redis_url)
    while len(reads) < 1 or publisher.pubsub_numsub("test:done")[0][1] < 1:
        time.sleep(0.05)
    publisher.publish("test:done", "another-submission")  # not this request's: it sleeps on
    publisher.publish("test:done", "s1")  # woken, reads, still open: sleeps again
    while len(reads) < 2:
        time.sleep(0.05)
    done.set()
    publisher.publish("test:done", "s1")
    waiter.join(timeout=120)
    assert not waiter.is_alive()
    assert reads == [["s1"]] * 3  # the first read, and one per wake-up of its own id: no polling
    assert w._events == {}  # nothing left registered


def test_a_wait_ends_at_its_deadline_and_reads_once_more(redis_url):
    w = _waits(redis_url)
    reads = []
    w.wait(["never"], lambda ids: reads.append(ids) or 1, 0.2)
    assert len(reads) == 2  # at the start, and at the deadline
    assert w._events == {}


# --- one team's share of a process's threads ------------------------------------------------------------
def test_a_team_past_its_places_is_answered_429_at_once_and_others_are_not_counted():
    from grader.api.errors import ApiError
    from grader.api.inflight import InFlight

    places = InFlight(2)
    with places.hold(1), places.hold(1):
        with pytest.raises(ApiError) as refused:
            with places.hold(1):
                pass
        assert refused.value.status == 429 and refused.value.code == "too_many_requests"
        with places.hold(2):  # another team has places of its own
            pass
    for _ in range(10):  # an honest client, one request after another, never meets the bound
        with places.hold(1):
            pass
    assert not places._count


# --- through gunicorn ---------------------------------------------------------------------------------
def test_one_teams_long_polls_leave_threads_for_another_team(database_url, redis_url, tmp_path):
    """One gunicorn process of 12 threads: 40 long-polls of one team would hold all 12 for a
    minute without the bounds. With them at most 4 are held (GRADER_MAX_WAITING_PER_PROCESS),
    the team has at most 8 requests in progress (threads - 4), every other long-poll is
    answered at once saying why, and the other team is served while the held ones still wait."""
    svc = make_service(database_url, redis_url)
    hostile, victim = new_key(svc, "hostile"), new_key(svc, "victim")
    try:
        with api_process(
            database_url,
            redis_url,
            tmp_path,
            "--workers",
            "1",
            "--threads",
            "12",
            GRADER_MAX_WAIT="60",
            GRADER_MAX_WAITING_PER_PROCESS="4",
        ) as url:

            def long_poll(i: int) -> requests.Response:
                return requests.post(
                    f"{url}/v1/submissions?wait=60",
                    timeout=180,
                    headers={"Authorization": f"Bearer {hostile}"},
                    json={"task_id": "calc-mean-empty", "patch": GOLD + "\n" * i},
                )

            with ThreadPoolExecutor(40) as pool:
                polls = [pool.submit(long_poll, i) for i in range(40)]
                answered_at_once, deadline = [], time.monotonic() + 120
                while len(answered_at_once) < 36:  # no worker runs: only the held ones are left
                    assert time.monotonic() < deadline, f"{len(answered_at_once)} of 40 long-polls answered"
                    answered_at_once = [f for f in polls if f.done()]
                    time.sleep(0.05)
                auth = {"Authorization": f"Bearer {victim}"}
                account = requests.get(f"{url}/v1/account", headers=auth, timeout=180)
                posted = requests.post(
                    f"{url}/v1/submissions",
                    headers=auth,
                    timeout=180,
                    json={"task_id": "calc-mean-empty", "patch": GOLD},
                )
                still_held = [f for f in polls if not f.done()]
                assert account.status_code == 200 and posted.status_code == 202
                assert len(still_held) == 4  # the victim was served while they still held their threads
                not_held = [f.result() for f in answered_at_once if f.result().status_code == 202]
                refused = [f.result() for f in answered_at_once if f.result().status_code == 429]
                assert len(not_held) + len(refused) == 36
                for r in not_held:  # stored, queued, and told why it was not held
                    assert r.json()["status"] == "queued" and r.headers["Grader-Wait"].startswith("not held: ")
                    assert r.headers["Retry-After"] == "2"
                for r in refused:  # refused before any work: nothing stored
                    assert r.json()["error"]["code"] == "too_many_requests" and r.headers["Retry-After"] == "1"
                # the held ones are woken by a cancel (announced as a finished grade is)
                others = {r.json()["id"] for r in not_held} | {posted.json()["id"]}
                with svc.db.read() as s:
                    held_ids = set(s.scalars(select(Submission.id))) - others
                assert len(held_ids) == 4
                for sid in held_ids:
                    r = requests.delete(
                        f"{url}/v1/submissions/{sid}", timeout=60, headers={"Authorization": f"Bearer {hostile}"}
                    )
                    assert r.status_code == 200
                held = [f.result() for f in still_held]
                assert all(r.status_code == 202 and r.json()["status"] == "cancelled" for r in held)
                assert all("Grader-Wait" not in r.headers for r in held)
    finally:
        svc.close()


# --- one team's bytes a second ----------------------------------------------------------------------------
def test_a_teams_bodies_draw_on_its_bucket_and_past_it_wait_their_turn(redis_url):
    from grader.api.errors import ApiError
    from grader.api.inflight import Ingest

    bucket = Ingest(Redis.from_url(redis_url), "test", rate=10.0, burst=100)
    bucket.charge(1, 60)  # a full bucket pays for a burst
    with pytest.raises(ApiError) as refused:
        bucket.charge(1, 60)  # 40 left (and a little refilled): 60 does not fit
    assert refused.value.status == 429 and refused.value.code == "too_many_bytes"
    assert refused.value.retry_after in (1, 2, 3)  # about (60 - 40) / 10 s
    bucket.charge(2, 100)  # another team has a bucket of its own
    bucket.charge(1, 30)  # what fits is taken: a refusal took nothing
    bucket.charge(1, None)  # no body, no charge
    with pytest.raises(ApiError):
        bucket.charge(1, 200)  # bigger than the burst: only from a full bucket
    off = Ingest(Redis.from_url(redis_url), "test", rate=0, burst=100)
    for _ in range(5):
        off.charge(1, 10**9)


def test_the_byte_bound_lets_a_body_through_when_redis_is_down():
    from grader.api.inflight import Ingest

    bucket = Ingest(Redis(host="127.0.0.1", port=1, socket_connect_timeout=1), "test", rate=1.0, burst=1)
    bucket.charge(1, 10**6)  # the per-process bound on requests still holds


def test_a_body_past_the_teams_bytes_is_refused_before_it_is_sent(database_url, redis_url, tmp_path):
    """Through gunicorn: with a bucket of 4 KiB a second, after a burst of 4 MiB, a team's
    request announcing 4 MiB more is answered 429 from its headers alone; the body is never
    read (the client has not sent it). Another team's small request is served as always.
    The rate is small enough that however slowly a loaded machine serves the first request,
    the bucket cannot refill the 2 MiB it took (at 256 KiB a second it did in 8 s, and
    the announced body was let through to wait for bytes that never come)."""
    import socket
    from urllib.parse import urlparse

    svc = make_service(database_url, redis_url)
    greedy, other = new_key(svc, "greedy"), new_key(svc, "other")
    try:
        with api_process(
            database_url,
            redis_url,
            tmp_path,
            GRADER_INGEST_BYTES_PER_SECOND=str(2**12),
            GRADER_MAX_REQUEST_BYTES=str(4 * 2**20),
        ) as url:
            big = {"task_id": "calc-mean-empty", "patch": "x" * (2 * 2**20)}
            first = requests.post(
                f"{url}/v1/submissions", json=big, timeout=60, headers={"Authorization": f"Bearer {greedy}"}
            )
            assert first.status_code == 413  # read, and over the patch limit: the bucket paid for it
            u = urlparse(url)
            with socket.create_connection((u.hostname, u.port), timeout=30) as conn:
                conn.sendall(
                    (
                        f"POST /v1/submissions HTTP/1.1\r\nHost: {u.netloc}\r\n"
                        f"Authorization: Bearer {greedy}\r\nContent-Type: application/json\r\n"
                        f"Content-Length: {4 * 2**20}\r\nConnection: close\r\n\r\n"
                    ).encode()
                )
                answer = b""
                while chunk := conn.recv(65536):  # no body sent: only an answer from the headers can come
                    answer += chunk
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 429"), answer[:300]
            assert b"too_many_bytes" in body and b"Retry-After: " in head
            served = requests.post(
                f"{url}/v1/submissions",
                timeout=60,
                headers={"Authorization": f"Bearer {other}"},
                json={"task_id": "calc-mean-empty", "patch": GOLD},
            )
            assert served.status_code == 202
    finally:
        svc.close()
