"""A deleted unpublished run's submissions given back to the daily quota where the host
says so (GRADER_QUOTA_REFUND_DELETED, submissions a team a UTC day; 0, the default: none),
on SQLite and PostgreSQL with a real Redis. Only submissions that never started grading
come back, and at most the setting's number a day: the attacks below (delete a graded
run, a published one, another team's, and loop delete and resubmit) must not buy a
team one grade beyond its quota."""

from __future__ import annotations

import datetime as dt

import pytest
from click.testing import CliRunner

from grader.app import create_app
from grader.cli import main
from grader.store import submissions as subs
from grader.store.models import Run, Submission
from grader.verdict import Provenance, Result, Verdict
from helpers.service import Api, finish_queued_as, make_service, new_key

pytestmark = pytest.mark.service
TASK = "calc-mean-empty"
DAILY, REFUND = 5, 4


@pytest.fixture
def service_options():
    return {"quota_refund_deleted": REFUND}


@pytest.fixture
def api(app, svc):
    return Api(app.test_client(), new_key(svc, "team-a", daily_quota=DAILY))


def send(api: Api, run: str, n: int, first_trial: int = 0):
    items = [{"task_id": TASK, "patch": f"p{run}{t}", "trial": t} for t in range(first_trial, first_trial + n)]
    return api.post("/v1/submissions/batch", json={"run_id": run, "submissions": items})


def usage(api: Api) -> dict:
    return api.get("/v1/account").json["usage"]


def passed(row: Submission) -> Result:
    p = Provenance(patch_sha256=row.patch_sha256, task_hash="h", image_id="i", grader_version="t")
    return Result(task_id=TASK, verdict=Verdict.PASS, explanation="x", durations={"total": 1.0}, provenance=p)


def statuses(svc) -> list[str]:
    with svc.db.read() as s:
        return sorted(r.status for r in s.query(Submission).all())


def queued_jobs(svc) -> int:
    return sum(q.count for q in svc.grade_queues())


# --- the honest case -------------------------------------------------------------------------
def test_a_deleted_unpublished_run_gives_its_never_graded_submissions_back(api, svc, served):
    assert send(api, "oops", 3).json["accepted"] == 3
    assert usage(api)["today"] == 3 and queued_jobs(svc) == 3
    r = api.delete("/v1/runs/oops")
    assert r.status_code == 200, r.json
    assert (r.json["submissions_detached"], r.json["submissions_cancelled"], r.json["quota_refunded"]) == (3, 3, 3)
    assert statuses(svc) == ["cancelled"] * 3 and queued_jobs(svc) == 0  # nothing of it will be graded
    acc = api.get("/v1/account").json
    assert acc["usage"] == {"today": 0, "queued_or_running": 0, "refunded_today": 3}
    assert acc["quotas"]["refund_deleted_per_day"] == REFUND
    assert send(api, "oops", DAILY).json["accepted"] == DAILY  # the whole day's quota again
    # `grader quota` says what was given back
    said = CliRunner().invoke(main, ["quota", "--url", served, "--api-key", api.key], catch_exceptions=False)
    assert said.exit_code == 0, said.output
    assert "today: 5 of 5 submissions sent, 0 left" in said.output
    assert "given back by deleted runs today: 3 of at most 4" in said.output


def test_with_the_setting_off_nothing_changes(database_url, redis_url):
    svc = make_service(database_url, redis_url)  # the default: 0
    try:
        api = Api(create_app(service=svc, migrate=False).test_client(), new_key(svc, "team-a", daily_quota=DAILY))
        send(api, "oops", 3)
        r = api.delete("/v1/runs/oops")
        assert r.status_code == 200
        assert (r.json["submissions_cancelled"], r.json["quota_refunded"]) == (0, 0)
        assert statuses(svc) == ["queued"] * 3 and queued_jobs(svc) == 3  # graded, without a run, as before
        acc = api.get("/v1/account").json
        assert acc["usage"] == {"today": 3, "queued_or_running": 3, "refunded_today": 0}
        assert acc["quotas"]["refund_deleted_per_day"] == 0
        assert send(api, "again", 3).json["accepted"] == 2  # the quota as it was
    finally:
        svc.close()


# --- the attacks -----------------------------------------------------------------------------
def test_graded_submissions_never_come_back(api, svc):
    """Submit, read the verdicts, delete, submit again: what was graded still counts."""
    send(api, "probe", 3)
    finish_queued_as(svc, "FAIL")
    r = api.delete("/v1/runs/probe")
    assert (r.json["submissions_cancelled"], r.json["quota_refunded"]) == (0, 0)
    assert usage(api)["today"] == 3
    assert send(api, "probe", 3).json["accepted"] == 2


def test_only_submissions_that_never_started_come_back(api, svc):
    """Of one run: one graded, one running, one queued again after an ERROR (started once),
    one sent yesterday, one queued: only the last comes back; the running one still counts."""
    send(api, "mixed", 5)
    with svc.db.read() as s:
        rows = s.query(Submission).order_by(Submission.id).all()
    graded, running, retried, old, fresh = rows
    for row in (graded, running, retried):
        claim = subs.claim(svc.db, row.id, row.job_id, "h", 60)
        assert claim is not None
        if row is retried:
            assert subs.retry_later(svc.db, claim, "the engine went away")
        elif row is graded:
            assert subs.finish(svc.db, claim, passed(row))
    with svc.db.write() as s:
        s.get(Submission, old.id).queued_at = subs.start_of_day() - dt.timedelta(hours=1)
    assert usage(api)["today"] == 4
    r = api.delete("/v1/runs/mixed")
    assert (r.json["submissions_cancelled"], r.json["quota_refunded"]) == (3, 1)  # retried, old, fresh; fresh back
    with svc.db.read() as s:
        back = {r.id for r in s.query(Submission).filter(Submission.quota_refunded_at.is_not(None))}
        assert back == {fresh.id}
        assert s.get(Submission, running.id).status == "running"  # its worker finishes it; it counts
    assert usage(api) == {"today": 3, "queued_or_running": 1, "refunded_today": 1}


def test_a_published_run_is_never_refunded(api, svc):
    send(api, "shown", 3)
    assert (
        api.client.patch(
            "/v1/runs/shown", json={"public": True}, headers={"Authorization": f"Bearer {api.key}"}
        ).status_code
        == 200
    )
    assert (
        api.client.patch(
            "/v1/runs/shown", json={"public": False}, headers={"Authorization": f"Bearer {api.key}"}
        ).status_code
        == 200
    )  # private again, but it has been public
    r = api.delete("/v1/runs/shown")
    assert r.status_code == 409 and r.json["error"]["code"] == "run_locked"
    assert usage(api) == {"today": 3, "queued_or_running": 3, "refunded_today": 0}
    assert statuses(svc) == ["queued"] * 3


def test_another_team_cannot_delete_a_run_or_spend_its_refunds(app, api, svc):
    send(api, "mine", 3)
    with svc.db.read() as s:
        run_id = s.query(Run).one().id
    for other in (
        Api(app.test_client(), new_key(svc, "team-b")),
        Api(app.test_client(), new_key(svc, "ops", admin=True)),
    ):
        r = other.delete(f"/v1/runs/{run_id}")
        assert r.status_code in (403, 404), r.json
        assert usage(other)["refunded_today"] == 0
    assert usage(api) == {"today": 3, "queued_or_running": 3, "refunded_today": 0}


def test_delete_and_resubmit_stops_at_the_bound_a_day(api, svc):
    """A team that deletes and sends again, over and over, gets back REFUND submissions a
    day and no more: then its quota holds as if nothing were refunded."""
    assert send(api, "loop", DAILY).json["accepted"] == DAILY
    assert api.delete("/v1/runs/loop").json["quota_refunded"] == REFUND
    assert usage(api)["today"] == DAILY - REFUND
    assert send(api, "loop", REFUND).json["accepted"] == REFUND
    r = api.delete("/v1/runs/loop")
    assert (r.json["submissions_cancelled"], r.json["quota_refunded"]) == (REFUND, 0)  # cancelled, not given back
    assert usage(api) == {"today": DAILY, "queued_or_running": 0, "refunded_today": REFUND}
    r = send(api, "loop", 1)
    assert r.status_code == 429 and r.json["error"]["code"] == "quota_exceeded"
