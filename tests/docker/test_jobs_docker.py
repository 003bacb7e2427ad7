"""Grading through the queue, for real: RQ workers (in this process, burst mode) run the
grading core in Docker against a real Redis and a real database (SQLite and PostgreSQL).
Retries, the reconciler, the cache and webhooks are proven on real grades."""

from __future__ import annotations

import json

import pytest

from grader import jobs, webhooks
from grader.app import create_app
from grader.pipeline import Grader
from grader.store import submissions as subs
from grader.store.models import Submission, Team, WebhookDelivery
from grader.verdict import Result
from helpers.service import Api, Receiver, make_service, new_key, work

pytestmark = [pytest.mark.docker, pytest.mark.service]


@pytest.fixture
def svc(database_url, redis_url, settings):
    s = make_service(
        database_url,
        redis_url,
        tasks_dir=settings.tasks_dir,
        cache_dir=settings.cache_dir,
        retry_backoff=0,
        webhook_backoff=0,
        max_retries=2,
    )
    jobs.use(s, Grader(s.settings))
    yield s
    s.close()


@pytest.fixture
def api(svc) -> Api:
    return Api(create_app(service=svc, migrate=False).test_client(), new_key(svc, "team"))


def row(svc, sid) -> Submission:
    with svc.db.read() as s:
        return s.get(Submission, sid)


def test_gold_passes_and_empty_fails_through_the_queue(svc, api, mini):
    from helpers.mini import FIXED

    gold = mini.diff({"calc/__init__.py": FIXED}).decode()
    a = api.post("/v1/submissions", json={"task_id": "mini", "patch": gold}).json["id"]
    b = api.post("/v1/submissions", json={"task_id": "mini", "patch": ""}).json["id"]
    work(svc)
    ra, rb = api.get(f"/v1/submissions/{a}").json, api.get(f"/v1/submissions/{b}").json
    assert (ra["status"], ra["verdict"], ra["cached"], ra["attempts"]) == ("done", "PASS", False, 1)
    assert (rb["status"], rb["verdict"]) == ("done", "FAIL")
    assert ra["host"] and (ra["started_at"], ra["finished_at"]) == (
        None,
        None,
    )  # the grade's duration: `tests` withholds it
    timed = Api(api.client, new_key(svc, "host", admin=True)).get(f"/v1/submissions/{a}").json
    assert timed["started_at"] and timed["finished_at"] >= timed["started_at"]
    assert ra["result"]["tests"]["fail_to_pass"]["success"] == ["tests/test_mean.py::test_empty"]
    assert ra["result"]["provenance"]["image_id"].startswith("sha256:")
    # the same patch again is answered from the first grade, at once, without a worker
    again = api.post("/v1/submissions", json={"task_id": "mini", "patch": gold})
    assert again.status_code == 200 and again.json["cached"] and again.json["verdict"] == "PASS"
    assert again.json["result"]["provenance"] == ra["result"]["provenance"]
    assert sum(q.count for q in svc.grade_queues()) == 0


def test_cache_in_the_worker_and_switched_off(database_url, redis_url, settings, mini):
    from helpers.mini import FIXED

    gold = mini.diff({"calc/__init__.py": FIXED}).decode()
    for cache in (True, False):
        svc = make_service(
            database_url,
            redis_url,
            tasks_dir=settings.tasks_dir,
            cache_dir=settings.cache_dir,
            cache=cache,
            retry_backoff=0,
        )
        jobs.use(svc, Grader(svc.settings))
        try:
            api = Api(create_app(service=svc, migrate=False).test_client(), new_key(svc, f"t{cache}"))
            # two identical patches queued together: the second is answered by the worker's lookup
            ids = [api.post("/v1/submissions", json={"task_id": "mini", "patch": gold}).json["id"] for _ in range(2)]
            work(svc)
            got = [api.get(f"/v1/submissions/{i}").json for i in ids]
            assert [g["verdict"] for g in got] == ["PASS", "PASS"]
            assert [g["cached"] for g in got] == ([False, True] if cache else [False, False])
        finally:
            svc.close()
        redis_url_flush(redis_url)


def redis_url_flush(url):
    from redis import Redis

    Redis.from_url(url).flushall()


def test_machinery_faults_are_retried_then_final_error_not_charged(svc, api, mini, tmp_path):
    # an instance image that is missing and may not be built: ImageError on every attempt
    svc.settings.__dict__["build_missing_images"] = False
    jobs.use(svc, Grader(svc.settings))
    task_dir = svc.settings.tasks_dir / "mini"
    twin = svc.settings.tasks_dir / "mini-unbuilt"
    if not twin.exists():
        twin.mkdir()
        for f in task_dir.iterdir():
            (twin / f.name).write_bytes(f.read_bytes())
        text = (twin / "task.yaml").read_text()
        text = text.replace("id: mini", "id: mini-unbuilt").replace("timeout: 20", "timeout: 21")
        (twin / "task.yaml").write_text(text)
    svc._tasks = None
    try:
        sid = api.post("/v1/submissions", json={"task_id": "mini-unbuilt", "patch": ""}).json["id"]
        work(svc)
        got = api.get(f"/v1/submissions/{sid}").json
        assert (got["status"], got["verdict"], got["charged"]) == ("done", "ERROR", False)
        assert got["attempts"] == 3 and got["errors"] == 3  # the first try and max_retries=2 more
        # the error's text is the host's to read: `tests` feedback gives a team none (a traceback is bits out)
        assert "error" not in got["result"]
        host = Api(api.client, new_key(svc, "host", admin=True)).get(f"/v1/submissions/{sid}").json
        assert "grader tasks build" in host["result"]["error"]
    finally:
        for f in twin.iterdir():
            f.unlink()
        twin.rmdir()
        svc._tasks = None


def test_reconciler_requeues_a_dead_workers_submission_and_grades_it_once(svc, api, mini):
    from helpers.mini import FIXED

    gold = mini.diff({"calc/__init__.py": FIXED}).decode()
    sid = api.post("/v1/submissions", json={"task_id": "mini", "patch": gold + "\n"}).json["id"]
    job_id = row(svc, sid).job_id
    dead = subs.claim(svc.db, sid, job_id, "gone-host:1", lease=-1)  # a worker that died holding it
    svc.redis.flushall()  # and Redis lost everything too
    counts = jobs.reconcile(svc, grace=0)
    assert counts["requeued_expired_leases"] == 1
    work(svc)
    got = row(svc, sid)
    assert (got.status, got.verdict, got.attempts) == ("done", "PASS", 2)
    late = Result.model_validate({**got.result, "verdict": "FAIL"})
    assert not subs.finish(svc.db, dead, late)  # the dead worker's late answer cannot replace it
    assert row(svc, sid).verdict == "PASS"
    assert jobs.reconcile(svc, grace=0) == {
        "requeued_lost_jobs": 0,
        "requeued_expired_leases": 0,
        "abandoned": 0,
        "webhooks": 0,
    }


def test_webhook_is_signed_and_retried_on_5xx(svc, api):
    rx = Receiver([503, 500, 200])
    try:
        sid = api.post("/v1/submissions", json={"task_id": "mini", "patch": "", "callback_url": rx.url}).json["id"]
        work(svc)
        assert [json.loads(b)["submission"]["id"] for _, b in rx.got] == [sid] * 3
        with svc.db.read() as s:
            secret = s.query(Team).filter_by(name="team").one().webhook_secret
            deliveries = s.query(WebhookDelivery).filter_by(submission_id=sid).order_by(WebhookDelivery.id).all()
            assert [(d.attempt, d.status_code, d.ok) for d in deliveries] == [
                (0, 503, False),
                (1, 500, False),
                (2, 200, True),
            ]
        headers, body = rx.got[-1]
        assert webhooks.verify(body, headers[webhooks.SIGNATURE_HEADER], secret)
        assert not webhooks.verify(body + b" ", headers[webhooks.SIGNATURE_HEADER], secret)
        sent = json.loads(body)["submission"]
        assert sent["verdict"] == "FAIL" and sent["result"]["verdict"] == "FAIL"
        assert api.get(f"/v1/submissions/{sid}").json["webhook_status"] == "delivered"
    finally:
        rx.close()


def test_webhook_4xx_is_final(svc, api):
    rx = Receiver([404])
    try:
        sid = api.post("/v1/submissions", json={"task_id": "mini", "patch": "", "callback_url": rx.url}).json["id"]
        work(svc)
        assert len(rx.got) == 1
        assert api.get(f"/v1/submissions/{sid}").json["webhook_status"] == "failed"
    finally:
        rx.close()
