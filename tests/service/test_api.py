"""The REST API against a real Redis and a real database (SQLite, then PostgreSQL).
Nothing here grades: submissions are stored and queued, and the queue is inspected."""

from __future__ import annotations

import json

import pytest

from grader.api.openapi import document
from grader.app import create_app
from grader.config import get_settings
from grader.errors import ConfigError
from grader.store.models import Submission
from helpers.service import ROOT, Api, make_service, new_key

pytestmark = pytest.mark.service
GOLD = (ROOT / "tasks/examples/calc-mean-empty/gold.patch").read_text()


@pytest.fixture
def service_options():
    """A ?wait= holds at most 2 s here."""
    return {"max_wait": 2}


def _sub(**kw):
    return {"task_id": "calc-mean-empty", "patch": GOLD, **kw}


# --- auth -----------------------------------------------------------------------------------------
def test_routes_need_a_valid_key(app, svc):
    anon = Api(app.test_client(), None)
    r = anon.post("/v1/submissions", json=_sub())
    assert r.status_code == 401 and r.json["error"]["code"] == "unauthorized"
    assert r.headers["WWW-Authenticate"].startswith("Bearer")
    assert Api(app.test_client(), "grk_wrong").get("/v1/tasks").status_code == 401
    r = app.test_client().get("/v1/tasks", headers={"Authorization": "Basic abc"})
    assert r.status_code == 401 and "Bearer" in r.json["error"]["message"]
    plain = Api(app.test_client(), new_key(svc, "plain"))
    r = plain.get("/v1/admin/teams")
    assert r.status_code == 403 and r.json["error"]["code"] == "forbidden"
    admin = Api(app.test_client(), new_key(svc, "ops", admin=True))
    r = admin.post("/v1/admin/teams", json={"name": "newteam", "daily_quota": 3})
    assert r.status_code == 201 and r.json["key"].startswith("grk_")
    assert Api(app.test_client(), r.json["key"]).get("/v1/account").json["quotas"]["per_day"] == 3


# --- submitting ---------------------------------------------------------------------------------------
def test_submission_is_stored_then_queued_with_only_its_id(api, svc):
    r = api.post(
        "/v1/submissions",
        json=_sub(run_id="r1", system="sys", trial=2, prompt_variant="minimal", metadata={"k": [1, "é"]}),
    )
    assert r.status_code == 202, r.json
    body = r.json
    assert r.headers["Location"] == f"/v1/submissions/{body['id']}"
    assert body["status"] == "queued" and body["verdict"] is None and body["result"] is None
    assert (body["run_id"], body["system"], body["trial"], body["metadata"]) == ("r1", "sys", 2, {"k": [1, "é"]})
    q = svc.queue_for("calc-mean-empty")  # its environment's queue
    assert q.name == "grader-env-python-3.11"
    [job] = q.get_jobs()
    assert job.args == (body["id"],) and job.kwargs == {}
    assert job.timeout > svc.task("calc-mean-empty").limits.timeout
    with svc.db.read() as s:
        row = s.get(Submission, body["id"])
        assert row.patch == GOLD.encode() and row.job_id == job.id
    assert api.get(body["links"]["self"]).json["id"] == body["id"]


@pytest.mark.parametrize(
    "payload,status,code",
    [
        ({"patch": ""}, 422, "invalid_fields"),
        ({"task_id": "calc-mean-empty"}, 422, "invalid_fields"),
        ({"task_id": "no-such-task", "patch": ""}, 422, "unknown_task"),
        ({"task_id": "calc-mean-empty", "patch": 5}, 422, "invalid_fields"),
        ({"task_id": "calc-mean-empty", "patch": "", "bogus": 1}, 422, "invalid_fields"),
        ({"task_id": "calc-mean-empty", "patch": "a\u0000b"}, 422, "invalid_fields"),
        ({"task_id": "calc-mean-empty", "patch": "", "trial": -1}, 422, "invalid_fields"),
        ({"task_id": "calc-mean-empty", "patch": "", "trial": True}, 422, "invalid_fields"),  # JSON types, not coerced
        ({"task_id": "calc-mean-empty", "patch": "", "trial": "3"}, 422, "invalid_fields"),
        ({"task_id": "calc-mean-empty", "patch": "", "prompt_variant": "shouty"}, 422, "invalid_fields"),
        ({"task_id": "calc-mean-empty", "patch": "", "callback_url": "ftp://x/"}, 422, "invalid_callback_url"),
        ([{"task_id": "calc-mean-empty", "patch": ""}], 422, "invalid_fields"),
    ],
)
def test_bad_submissions_are_4xx_with_a_message(api, payload, status, code):
    r = api.post("/v1/submissions", json=payload)
    assert r.status_code == status, r.json
    assert r.json["error"]["code"] == code and r.json["error"]["message"]


def test_malformed_and_oversized_bodies(api, svc):
    r = api.post("/v1/submissions", data=b"{not json", content_type="application/json")
    assert r.status_code == 400 and "not valid JSON" in r.json["error"]["message"]
    r = api.post("/v1/submissions", data=b"", content_type="application/json")
    assert r.status_code == 400
    big = json.dumps(_sub(patch="x" * (svc.settings.max_request_bytes + 1)))
    r = api.post("/v1/submissions", data=big.encode(), content_type="application/json")
    assert r.status_code == 413 and r.json["error"]["code"] == "body_too_large"
    r = api.get("/v1/submissions/" + "f" * 24)
    assert r.status_code == 404 and r.json["error"]["code"] == "not_found"
    r = api.client.put("/v1/submissions", headers={"Authorization": f"Bearer {api.key}"})
    assert r.status_code == 405 and r.json["error"]["code"] == "method_not_allowed"


def test_callback_urls_to_private_addresses_are_refused_unless_allowed(database_url, redis_url):
    svc = make_service(database_url, redis_url, callback_allow_private=False)
    try:
        api = Api(create_app(service=svc, migrate=False).test_client(), new_key(svc, "t"))
        for url in (
            "http://127.0.0.1:6379/",
            "http://169.254.169.254/latest/meta-data",
            "http://10.0.0.1/",
            "http://localhost/x",
            "http://[::1]/",
        ):
            r = api.post("/v1/submissions", json=_sub(callback_url=url))
            assert r.status_code == 422 and r.json["error"]["code"] == "invalid_callback_url", url
    finally:
        svc.close()


def test_idempotency_key_returns_the_first_submission(api, svc):
    h = {"Idempotency-Key": "abc-1"}
    first = api.post("/v1/submissions", json=_sub(), headers=h)
    again = api.post("/v1/submissions", json=_sub(), headers=h)
    assert first.status_code == 202 and again.status_code == 200
    assert again.json["id"] == first.json["id"] and again.headers["Idempotent-Replayed"] == "true"
    other = api.post("/v1/submissions", json=_sub(patch=""), headers=h)
    assert other.status_code == 409 and other.json["error"]["code"] == "idempotency_conflict"
    assert sum(q.count for q in svc.grade_queues()) == 1
    # keys are per team: another team's same key is a different submission
    b = Api(api.client, new_key(svc, "team-b")).post("/v1/submissions", json=_sub(), headers=h)
    assert b.status_code == 202 and b.json["id"] != first.json["id"]


def test_wait_is_bounded_and_answers_202_when_not_done(api, svc):
    import time

    t = time.monotonic()
    r = api.post("/v1/submissions?wait=100", json=_sub())  # max_wait is 2 in this fixture
    assert r.status_code == 202 and r.json["status"] == "queued"
    assert time.monotonic() - t < 30
    assert api.post("/v1/submissions?wait=abc", json=_sub()).status_code == 422


# --- batches ------------------------------------------------------------------------------------------
def test_batch_of_1000_keeps_order_and_fails_items_not_the_batch(api, svc):
    preds = [
        {"instance_id": "calc-mean-empty", "model_name_or_path": "model-x", "model_patch": f"{GOLD}\n# {i}", "trial": i}
        for i in range(1000)
    ]  # a run holds one attempt per task and trial: each its own
    preds[7]["instance_id"] = "no-such-task"
    preds[500] = {"task_id": "calc-median-even", "patch": "", "trial": 3}  # our own format, mixed in
    preds[999] = "not an object"
    r = api.post("/v1/submissions/batch?run_id=big", json=preds)
    assert r.status_code == 202, r.json
    b = r.json
    assert (b["accepted"], b["rejected"], b["run_id"]) == (998, 2, "big")
    assert [it["index"] for it in b["items"]] == list(range(1000))
    assert b["items"][7]["error"]["code"] == "unknown_task" and "id" not in b["items"][7]
    assert b["items"][999]["error"]["code"] == "invalid_fields"
    ids = [it["id"] for it in b["items"] if "id" in it]
    assert len(set(ids)) == 998
    assert sum(q.count for q in svc.grade_queues()) == 998
    page, seen, cursor = None, [], None
    while True:
        page = api.get("/v1/submissions?run_id=big&limit=300" + (f"&cursor={cursor}" if cursor else "")).json
        seen += [x["id"] for x in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == sorted(ids)
    one = api.get(f"/v1/submissions/{b['items'][500]['id']}").json
    assert (one["task_id"], one["trial"], one["run_id"]) == ("calc-median-even", 3, "big")
    assert api.get(f"/v1/submissions/{ids[0]}").json["system"] == "model-x"


def test_batch_formats_jsonl_and_object(api):
    lines = "\n".join(
        json.dumps({"instance_id": "calc-mean-empty", "model_name_or_path": "m", "model_patch": p})
        for p in ("", None, GOLD)
    )
    r = api.post("/v1/submissions/batch", data=lines.encode(), content_type="application/x-ndjson")
    assert r.status_code == 202 and r.json["accepted"] == 3
    r = api.post("/v1/submissions/batch", data=b'{"a": 1}\nnot json\n', content_type="application/x-ndjson")
    assert r.status_code == 400 and "line 2" in r.json["error"]["message"]
    r = api.post("/v1/submissions/batch", json={"run_id": "R", "system": "S", "submissions": [_sub()]})
    assert r.status_code == 202
    sub = api.get(f"/v1/submissions/{r.json['items'][0]['id']}").json
    assert (sub["run_id"], sub["system"]) == ("R", "S")
    r = api.post("/v1/submissions/batch", json=[{"instance_id": "nope"}])
    assert r.status_code == 422 and r.json["items"][0]["error"]["code"] == "unknown_task"
    assert api.post("/v1/submissions/batch", json=[]).status_code == 422


# --- quotas and backpressure -----------------------------------------------------------------------
def test_daily_and_queued_quotas_answer_429_with_retry_after(app, svc):
    api = Api(app.test_client(), new_key(svc, "small", daily_quota=3))
    assert [api.post("/v1/submissions", json=_sub()).status_code for _ in range(3)] == [202] * 3
    r = api.post("/v1/submissions", json=_sub())
    assert r.status_code == 429 and r.json["error"]["code"] == "quota_exceeded"
    assert 0 < int(r.headers["Retry-After"]) <= 86401
    q = Api(app.test_client(), new_key(svc, "narrow", queued_quota=2))
    r = q.post("/v1/submissions/batch", json=[_sub() for _ in range(5)])
    assert r.status_code == 202 and r.json["accepted"] == 2
    assert [it.get("error", {}).get("code") for it in r.json["items"]] == [None, None] + ["quota_exceeded"] * 3
    r = q.post("/v1/submissions", json=_sub())
    assert r.status_code == 429 and "Retry-After" in r.headers


def test_a_full_queue_answers_503_and_loses_nothing(database_url, redis_url):
    svc = make_service(database_url, redis_url, queue_max=2)
    try:
        api = Api(create_app(service=svc, migrate=False).test_client(), new_key(svc, "t"))
        codes = [api.post("/v1/submissions", json=_sub()).status_code for _ in range(3)]
        assert codes == [202, 202, 503]
        r = api.post("/v1/submissions", json=_sub())
        assert r.json["error"]["code"] == "queue_full" and int(r.headers["Retry-After"]) > 0
        assert api.get("/v1/account").json["usage"]["queued_or_running"] == 2
    finally:
        svc.close()


def test_accepted_while_redis_is_down_is_kept_and_enqueued_later(database_url, redis_server):
    from grader.jobs import reconcile

    redis_server.flush()
    svc = make_service(database_url, redis_server.url)
    try:
        api = Api(create_app(service=svc, migrate=False).test_client(), new_key(svc, "t"))
        redis_server.stop()
        try:
            r = api.post("/v1/submissions", json=_sub())
            assert r.status_code == 202, r.json  # the database has it: accepted
        finally:
            redis_server.start()
        svc.redis.connection_pool.disconnect()
        queue = svc.queue_for(_sub()["task_id"])  # its environment's
        assert queue.name == f"grader-env-{svc.task(_sub()['task_id']).environment}" and queue.count == 0
        counts = reconcile(svc, grace=0)
        assert counts["requeued_lost_jobs"] == 1
        [job] = queue.get_jobs()
        assert job.args == (r.json["id"],)
        assert reconcile(svc, grace=0)["requeued_lost_jobs"] == 0  # its job is alive now
    finally:
        svc.close()


# --- cancel, teams, tasks ------------------------------------------------------------------------------
def test_cancel_a_queued_submission_only(api, svc):
    sid = api.post("/v1/submissions", json=_sub()).json["id"]
    r = api.delete(f"/v1/submissions/{sid}")
    assert r.status_code == 200 and r.json["status"] == "cancelled" and r.json["finished_at"]
    assert api.delete(f"/v1/submissions/{sid}").status_code == 200  # already cancelled: same answer
    from grader.store import submissions as subs

    sid2 = api.post("/v1/submissions", json=_sub()).json["id"]
    with svc.db.read() as s:
        job = s.get(Submission, sid2).job_id
    subs.claim(svc.db, sid2, job, "h", 60)
    r = api.delete(f"/v1/submissions/{sid2}")
    assert r.status_code == 409 and "running" in r.json["error"]["message"]


def test_a_team_sees_only_its_own_submissions(api, app, svc):
    sid = api.post("/v1/submissions", json=_sub(run_id="mine")).json["id"]
    other = Api(app.test_client(), new_key(svc, "team-b"))
    assert other.get(f"/v1/submissions/{sid}").status_code == 404
    assert other.delete(f"/v1/submissions/{sid}").status_code == 404
    assert other.get("/v1/submissions?run_id=mine").json["items"] == []
    admin = Api(app.test_client(), new_key(svc, "ops", admin=True))
    assert admin.get(f"/v1/submissions/{sid}").status_code == 200


def test_tasks_are_the_public_view(api, svc):
    items = api.get("/v1/tasks").json["items"]
    assert [t["id"] for t in items] == sorted(svc.tasks.ids())
    one = api.get("/v1/tasks/calc-median-even").json
    assert one == svc.task("calc-median-even").public_view()
    assert api.get("/v1/tasks/nope").status_code == 404


# --- system routes --------------------------------------------------------------------------------------
def test_health_ready_metrics_workers(api, app):
    c = app.test_client()
    assert c.get("/healthz").json == {"status": "ok"}
    r = c.get("/readyz")
    assert r.json["checks"]["database"]["ok"] and r.json["checks"]["redis"]["ok"]
    assert r.status_code == (200 if r.json["checks"]["docker"]["ok"] else 503)
    api.post("/v1/submissions", json=_sub())
    text = c.get("/metrics").get_data(as_text=True)
    assert 'grader_submissions_by_status{status="queued"} 1.0' in text
    assert 'grader_queue_depth{where="queued"} 1.0' in text
    assert "grader_grading_seconds_bucket" in text
    w = api.get("/v1/workers").json
    assert w["queue"]["queued"] == 1 and w["queue"]["redis_queued"] == 1 and isinstance(w["workers"], list)


def test_openapi_documents_every_route_and_the_docs_page_renders(app):
    doc = app.test_client().get("/openapi.json").json
    assert doc["openapi"].startswith("3.") and doc == json.loads(json.dumps(document()))
    served = set()
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static" or rule.endpoint.startswith(("portal.", "signup.")):
            continue  # the portal's pages are for people, not part of the API
        path = rule.rule.replace("<", "{").replace(">", "}")
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            served.add((path, method.lower()))
    documented = {(p, m) for p, ops in doc["paths"].items() for m in ops}
    assert served == documented
    for ops in doc["paths"].values():
        for op in ops.values():
            for resp in op["responses"].values():
                ref = resp.get("content", {}).get("application/json", {}).get("schema", {}).get("$ref")
                if ref:
                    assert ref.split("/")[-1] in doc["components"]["schemas"], ref
    page = app.test_client().get("/docs").get_data(as_text=True)
    assert "/v1/submissions/batch" in page and "SubmissionIn" in page


def test_production_mode_refuses_to_start_without_secrets(database_url, redis_url):
    settings = get_settings(mode="production", database_url=database_url, redis_url=redis_url)
    with pytest.raises(ConfigError, match="GRADER_SECRET_KEY"):
        create_app(settings)
    ok = get_settings(mode="production", database_url=database_url, redis_url=redis_url, secret_key="s" * 40)
    app = create_app(ok)
    assert app.config["GRADER_PRODUCTION"]


def test_unknown_query_parameters_are_refused_not_ignored(api, svc):
    """A misspelt filter must not answer with everything unfiltered."""
    api.post("/v1/submissions", json=_sub())
    r = api.get("/v1/submissions?runid=x")
    assert r.status_code == 400 and r.json["error"]["code"] == "unknown_parameter"
    assert "'runid'" in r.json["error"]["message"] and "run_id" in r.json["error"]["message"]
    assert api.get("/v1/submissions?run_id=x").status_code == 200
    assert api.get("/v1/tasks/calc-mean-empty?verbose=1").status_code == 400
    assert api.get("/healthz?x=1").status_code == 400
    assert api.get("/v1/submissions?runid=x", headers={"Authorization": "Bearer nope"}).status_code == 401
    # every operation documents the 400 it may answer
    assert all("400" in op["responses"] for ops in document()["paths"].values() for op in ops.values())


def test_nul_characters_and_bodies_that_are_not_json_are_400(api, svc):
    """A NUL reached PostgreSQL (which refuses it) and answered 503; a PATCH whose body was
    not JSON was taken as {} and answered 200."""
    assert api.get("/v1/compare?a=x&b=%00").status_code == 400
    assert api.get("/v1/runs/a%00b").status_code == 400
    assert api.get("/runs/a%00b").status_code == 400  # the portal too
    r = api.client.patch(
        "/v1/runs/nope",
        data=b"\x00",
        headers={"Authorization": f"Bearer {api.key}", "Content-Type": "application/json"},
    )
    assert r.status_code in (400, 404)  # 404 first when the run does not exist
    sid = api.post("/v1/submissions", json={**_sub(), "run_id": "r1"}).json["id"]
    assert sid
    r = api.client.patch(
        "/v1/runs/r1", data=b"\x00", headers={"Authorization": f"Bearer {api.key}", "Content-Type": "application/json"}
    )
    assert r.status_code == 400 and "not valid JSON" in r.json["error"]["message"]
    admin = Api(api.client, new_key(svc, "ops", admin=True))
    assert admin.post("/v1/admin/teams", json={"name": "big", "daily_quota": 10**30}).status_code == 422
