"""Intake under greedy and concurrent clients (issue 11): oversized patches refused before
they are stored, cache lookups that read hashes only and outside the write transaction,
batches stored in bounded chunks, and quotas and Idempotency-Keys that hold when many
requests of one team race, through the real API process (gunicorn), on SQLite and PostgreSQL. The rules themselves,
below the API and without Flask, are tests/unit/test_intake.py's."""

from __future__ import annotations

import contextlib
import re
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from sqlalchemy import event, func, select

from grader.app import create_app
from grader.store import cache
from grader.store import submissions as subs
from grader.store.models import Status, Submission, utcnow
from grader.version import GRADER_VERSION
from helpers.service import ROOT, Api, api_process, make_service, new_key

pytestmark = pytest.mark.service
GOLD = (ROOT / "tasks/examples/calc-mean-empty/gold.patch").read_text()
TASK = "calc-mean-empty"


def _sub(n: int = 0, **kw) -> dict:
    return {"task_id": TASK, "patch": GOLD + "\n" * n, **kw}


@pytest.fixture
def service_options():
    """Patches of at most 4 KiB, and quotas out of the way but where a test sets them."""
    return {"max_patch_bytes": 4096, "daily_quota": 100_000, "queued_quota": 100_000, "queue_max": 100_000}


def _count(svc, **where) -> int:
    with svc.db.read() as s:
        return len(s.scalars(select(Submission.id).filter_by(**where)).all())


# --- oversized patches ---------------------------------------------------------------------------
def test_a_patch_over_the_limit_is_refused_at_intake_and_never_stored(api, svc):
    big = "x" * 4097
    r = api.post("/v1/submissions", json={"task_id": TASK, "patch": big})
    assert r.status_code == 413 and r.json["error"]["code"] == "patch_too_large"
    assert "4096" in r.json["error"]["message"] and "4097" in r.json["error"]["message"]
    r = api.post("/v1/submissions/batch", json=[_sub(), {"task_id": TASK, "patch": big}, _sub(1)])
    assert r.status_code == 202 and r.json["accepted"] == 2
    assert "id" in r.json["items"][0] and "id" in r.json["items"][2]
    err = r.json["items"][1]["error"]
    assert err["code"] == "patch_too_large" and "4096" in err["message"]
    assert _count(svc) == 2
    with svc.db.read() as s:
        assert max(len(p) for p in s.scalars(select(Submission.patch))) <= 4096
    r = api.post("/v1/submissions", json={"task_id": TASK, "patch": "y" * 4096})  # the limit itself is allowed
    assert r.status_code == 202


# --- the cache lookup --------------------------------------------------------------------------------
def _graded(svc, patch: str) -> str:
    """A finished grade of `patch`, as a worker would have left it, for the cache to find."""
    accepted = Api(create_app(service=svc, migrate=False).test_client(), new_key(svc, "grader-run"))
    sid = accepted.post("/v1/submissions", json={"task_id": TASK, "patch": patch}).json["id"]
    result = {
        "task_id": TASK,
        "verdict": "PASS",
        "explanation": "ok",
        "provenance": {"patch_sha256": "", "grader_version": GRADER_VERSION, "image_id": "sha256:img"},
    }
    with svc.db.write() as s:
        row = s.get(Submission, sid)
        row.status, row.verdict, row.result = Status.DONE.value, "PASS", result
        row.image_id, row.grader_version, row.finished_at, row.job_id = "sha256:img", GRADER_VERSION, utcnow(), None
        row.attempts = 1  # a worker's grade: the image intake takes as the task's current one
    return sid


def test_the_cache_lookup_reads_hashes_never_patches_and_not_inside_the_write(api, svc, monkeypatch):
    _graded(svc, GOLD)
    selects: list[str] = []
    writing = [0]
    lookups_while_writing = []

    def record(conn, cursor, statement, *args):
        if statement.lstrip().upper().startswith("SELECT"):
            selects.append(statement)

    engines = {svc.db.engine, svc.db._write_engine}
    for e in engines:
        event.listen(e, "before_cursor_execute", record)
    real_write, real_lookup = svc.db.write, cache.lookup

    @contextlib.contextmanager
    def write():
        writing[0] += 1
        try:
            with real_write() as s:
                yield s
        finally:
            writing[0] -= 1

    def lookup(*a, **kw):
        lookups_while_writing.append(writing[0] > 0)
        return real_lookup(*a, **kw)

    monkeypatch.setattr(svc.db, "write", write)
    monkeypatch.setattr(cache, "lookup", lookup)
    try:
        r = api.post("/v1/submissions/batch", json=[_sub(), _sub(1), _sub()])
    finally:
        for e in engines:
            event.remove(e, "before_cursor_execute", record)
    assert r.status_code == 202
    assert [it["verdict"] for it in r.json["items"]] == ["PASS", None, "PASS"]  # answered from the cache
    assert lookups_while_writing and not any(lookups_while_writing)
    body = re.compile(r"submissions\.patch\b(?!_)")
    assert not [q for q in selects if body.search(q)], "a query during intake loaded a patch"


def test_cached_result_does_not_load_the_patch(api, svc):
    _graded(svc, GOLD)
    with svc.db.read() as s:
        row = s.scalar(select(Submission).where(Submission.status == Status.DONE.value))
        task_hash, sha = row.task_hash, row.patch_sha256
    queries: list[str] = []
    listener = lambda conn, cur, statement, *a: queries.append(statement)  # noqa: E731
    event.listen(svc.db.engine, "before_cursor_execute", listener)
    try:
        with svc.db.read() as s:
            hit = cache.lookup(s, task_hash, sha, GRADER_VERSION, cache.current_image(s, task_hash, GRADER_VERSION))
            assert hit is not None and hit.result["verdict"] == "PASS"
    finally:
        event.remove(svc.db.engine, "before_cursor_execute", listener)
    assert queries and not any(re.search(r"submissions\.patch\b(?!_)", q) for q in queries)


# --- a large batch in chunks ------------------------------------------------------------------------
def test_a_large_batch_is_stored_in_bounded_transactions_in_order(api, svc, monkeypatch):
    real_write = svc.db.write
    sizes: list[int] = []

    def stored(s) -> int:
        s.flush()
        return s.scalar(select(func.count()).select_from(Submission))

    @contextlib.contextmanager
    def write():
        with real_write() as s:
            before = stored(s)
            yield s
            sizes.append(stored(s) - before)

    monkeypatch.setattr(svc.db, "write", write)
    items = [_sub(i % 7, trial=i + 1) for i in range(1201)]
    items[600] = {"task_id": "no-such-task", "patch": GOLD}
    r = api.post("/v1/submissions/batch", json=items, headers={"Idempotency-Key": "big"})
    assert r.status_code == 202 and r.json["accepted"] == 1200
    per_write = [n for n in sizes if n]
    print(f"\nrows per write transaction of a 1,201-item batch: {per_write}")
    assert sum(per_write) == 1200 and max(per_write) <= 500
    answered = [it["id"] for it in r.json["items"] if "id" in it]
    assert answered == sorted(answered) and r.json["items"][600]["error"]["code"] == "unknown_task"
    with svc.db.read() as s:
        assert sorted(s.scalars(select(Submission.id))) == answered
    again = api.post("/v1/submissions/batch", json=items, headers={"Idempotency-Key": "big"})
    assert [it.get("id") for it in again.json["items"]] == [it.get("id") for it in r.json["items"]]
    assert _count(svc) == 1200


# --- Idempotency-Keys -------------------------------------------------------------------------------
def test_a_batch_reusing_its_key_with_another_body_is_409(api, svc):
    h = {"Idempotency-Key": "batch-k"}
    first = api.post("/v1/submissions/batch", json=[_sub(), _sub(1)], headers=h)
    assert first.status_code == 202
    for body in ([_sub(2), _sub(3)], [_sub(), _sub(3)], [_sub(), _sub(1), _sub(2)]):
        r = api.post("/v1/submissions/batch", json=body, headers=h)
        assert r.status_code == 409, (body, r.json)
        assert r.json["error"]["code"] == "idempotency_conflict" and r.json["accepted"] == 0
    assert _count(svc) == 2
    same = api.post("/v1/submissions/batch", json=[_sub(), _sub(1)], headers=h)
    assert same.status_code == 202 and [i["id"] for i in same.json["items"]] == [i["id"] for i in first.json["items"]]


def test_a_batch_stored_before_whole_batch_hashes_still_replays(api, svc):
    """Batches accepted before a batch's key covered the whole batch kept each item's own hash:
    the same batch retried across the upgrade is still its first answer, not 409."""
    from grader.intake import Item
    from grader.schemas import SubmissionIn

    h = {"Idempotency-Key": "old-batch"}
    first = api.post("/v1/submissions/batch", json=[_sub(), _sub(1)], headers=h)
    with svc.db.write() as s:
        for n, item in enumerate(first.json["items"]):
            old = Item(**SubmissionIn.model_validate(_sub(n)).model_dump())
            s.get(Submission, item["id"]).request_hash = old.request_hash()
    again = api.post("/v1/submissions/batch", json=[_sub(), _sub(1)], headers=h)
    assert again.status_code == 202, again.json
    assert [i["id"] for i in again.json["items"]] == [i["id"] for i in first.json["items"]]
    assert api.post("/v1/submissions/batch", json=[_sub(), _sub(2)], headers=h).status_code == 409
    assert _count(svc) == 2


def test_a_key_taken_by_a_concurrent_request_answers_409_for_another_body(api, svc, monkeypatch):
    """The unique index catches what the lookups missed (here made to miss twice): the loser
    must not be answered with the winner's submission when its body differs."""
    first = api.post("/v1/submissions", json=_sub(), headers={"Idempotency-Key": "race"})
    real, misses = subs.by_idempotency_key, [2]

    def blind(s, team_id, keys):
        if misses[0] > 0:
            misses[0] -= 1
            return {}
        return real(s, team_id, keys)

    monkeypatch.setattr(subs, "by_idempotency_key", blind)
    r = api.post("/v1/submissions", json=_sub(5), headers={"Idempotency-Key": "race"})
    assert r.status_code == 409 and r.json["error"]["code"] == "idempotency_conflict"
    misses[0] = 2
    r = api.post("/v1/submissions", json=_sub(), headers={"Idempotency-Key": "race"})
    assert r.status_code == 200 and r.json["id"] == first.json["id"] and r.headers["Idempotent-Replayed"] == "true"
    assert _count(svc) == 1


# --- through gunicorn, many requests of one team at once ---------------------------------------------
@pytest.fixture
def served(database_url, redis_url, tmp_path):
    """`grader serve` alone (no worker: what is accepted stays queued), on this test's database."""
    svc = make_service(database_url, redis_url)
    try:
        # these races test the store's atomicity: one team's requests must all be in progress
        # at once, so the per-team bound on threads (grader/api/inflight.py) is lifted here
        with api_process(
            database_url, redis_url, tmp_path, "--workers", "2", "--threads", "68", GRADER_MAX_INFLIGHT_PER_TEAM="64"
        ) as url:
            yield svc, url
    finally:
        svc.close()


def _race(
    url: str, key: str | list[str], bodies: list[dict], headers: list[dict] | None = None
) -> list[requests.Response]:
    """Every body POSTed at once, each from its own thread, released together (under one
    team's key, or each under its own)."""
    go = threading.Barrier(len(bodies))
    headers = headers or [{}] * len(bodies)
    keys = [key] * len(bodies) if isinstance(key, str) else key

    def post(i):
        with requests.Session() as http:
            go.wait()
            return http.post(
                f"{url}/v1/submissions",
                json=bodies[i],
                timeout=120,
                headers={"Authorization": f"Bearer {keys[i]}", **headers[i]},
            )

    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(post, range(len(bodies))))


def test_a_daily_quota_holds_under_concurrent_posts(served):
    svc, url = served
    key = new_key(svc, "greedy", daily_quota=10)
    answers = _race(url, key, [_sub(i) for i in range(50)])
    codes = [r.status_code for r in answers]
    assert codes.count(202) == 10 and codes.count(429) == 40, codes
    assert _count(svc) == 10
    account = requests.get(f"{url}/v1/account", headers={"Authorization": f"Bearer {key}"}).json()
    assert account["usage"]["today"] == 10, account


def test_a_queued_quota_holds_under_concurrent_posts(served):
    svc, url = served
    key = new_key(svc, "greedy", queued_quota=3)
    codes = [r.status_code for r in _race(url, key, [_sub(i) for i in range(30)])]
    assert codes.count(202) == 3 and codes.count(429) == 27, codes
    assert _count(svc, status=Status.QUEUED.value) == 3


def test_one_idempotency_key_under_concurrent_posts_accepts_one_body(served):
    svc, url = served
    key = new_key(svc, "retrying")
    answers = _race(url, key, [_sub(i) for i in range(20)], [{"Idempotency-Key": "one"}] * 20)
    codes = [r.status_code for r in answers]
    assert codes.count(202) == 1 and codes.count(409) == 19, codes
    assert all(r.json()["error"]["code"] == "idempotency_conflict" for r in answers if r.status_code == 409)
    winner = next(r for r in answers if r.status_code == 202)
    n = next(i for i, r in enumerate(answers) if r.status_code == 202)
    assert _count(svc) == 1
    # the same body, many times at once: every one is the winner's submission
    again = _race(url, key, [_sub(n)] * 10, [{"Idempotency-Key": "one"}] * 10)
    assert {r.status_code for r in again} == {200} and {r.json()["id"] for r in again} == {winner.json()["id"]}


def test_the_queue_bound_holds_when_many_teams_post_at_once(database_url, redis_url, tmp_path):
    """GRADER_QUEUE_MAX is across teams: each team's lock does not cover it, the queue's does."""
    svc = make_service(database_url, redis_url)
    try:
        keys = [new_key(svc, f"team-{i}") for i in range(60)]
        with api_process(database_url, redis_url, tmp_path, GRADER_QUEUE_MAX="5") as url:
            answers = _race(url, keys, [_sub(i) for i in range(60)])
        codes = [r.status_code for r in answers]
        assert codes.count(202) == 5 and codes.count(503) == 55, codes
        assert all(r.json()["error"]["code"] == "queue_full" for r in answers if r.status_code == 503)
        assert _count(svc) == 5
    finally:
        svc.close()
