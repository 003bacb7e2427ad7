"""A run is one transaction's worth of truth (issue 20), on SQLite and PostgreSQL.

A batch is stored 500 items per transaction. A run deleted while a 4,000-item batch to it
was being stored answered 200, yet 3,000 submissions kept its name and joined the next run
of that name (so --overwrite could mix old and new); a run published and locked at 1,001
submissions ended with 4,001. Now delete and publish take the team's lock as every chunk
does, and are refused (409 run_busy) while a batch holds the run's intake lease; a chunk
reads its runs again under the lock, so that even a batch whose lease ran out puts nothing
into a run deleted or published under it."""

from __future__ import annotations

import threading
import time

import pytest
import requests
from sqlalchemy import func, select

from grader import intake
from grader.store.models import Run, Submission, Team
from helpers.service import api_process, make_service, new_key

pytestmark = pytest.mark.service
TASK = "calc-mean-empty"


def _items(n: int, tag: str) -> list[dict]:
    return [{"task_id": TASK, "patch": f"{tag}-{i}", "trial": i} for i in range(n)]  # one attempt a trial


def _count(svc, team: str, run: str) -> int:
    with svc.db.read() as s:
        return s.scalar(
            select(func.count())
            .select_from(Submission)
            .join(Team, Team.id == Submission.team_id)
            .where(Team.name == team, Submission.run_id == run)
        )


def _all(svc, team: str) -> int:
    with svc.db.read() as s:
        return s.scalar(select(func.count()).select_from(Submission).join(Team).where(Team.name == team))


class Batch(threading.Thread):
    """One batch POSTed in a thread; `answer` once it is in."""

    def __init__(self, url: str, key: str, run: str, n: int, tag: str = "b"):
        super().__init__(daemon=True)
        self.args = (url, key, run, n, tag)
        self.answer: dict = {}
        self.status = 0

    def run(self) -> None:
        url, key, run, n, tag = self.args
        r = requests.post(
            f"{url}/v1/submissions/batch",
            json={"run_id": run, "submissions": _items(n, tag)},
            headers={"Authorization": f"Bearer {key}"},
            timeout=600,
        )
        self.status, self.answer = r.status_code, r.json()


@pytest.fixture
def slow_chunks(monkeypatch):
    """Each chunk of a batch takes a while longer: the batch is seen half stored."""
    real = intake._store

    def slow(*args, **kw):
        stored = real(*args, **kw)
        time.sleep(0.4)
        return stored

    monkeypatch.setattr(intake, "_store", slow)


def _midway(svc, team: str, total: int) -> None:
    deadline = time.monotonic() + 120
    while not 0 < _all(svc, team) < total:
        assert time.monotonic() < deadline, "the batch was never seen half stored"
        time.sleep(0.02)


def _h(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


def test_delete_and_publish_wait_for_a_batch_being_stored(served, svc, slow_chunks):
    key = new_key(svc, "team-a")
    batch = Batch(served, key, "big", 2000)
    batch.start()
    _midway(svc, "team-a", 2000)
    gone = requests.delete(f"{served}/v1/runs/big", headers=_h(key), timeout=60)
    assert gone.status_code == 409 and gone.json()["error"]["code"] == "run_busy", gone.text
    assert 1 <= int(gone.headers["Retry-After"]) <= 30
    shown = requests.patch(f"{served}/v1/runs/big", json={"public": True}, headers=_h(key), timeout=60)
    assert shown.status_code == 409 and shown.json()["error"]["code"] == "run_busy", shown.text
    # the honest edit: what the run says of itself may change meanwhile
    said = requests.patch(f"{served}/v1/runs/big", json={"method": "Agent 1"}, headers=_h(key), timeout=60)
    assert said.status_code == 200 and said.json()["method"] == "Agent 1" and not said.json()["public"]
    batch.join(timeout=600)
    assert batch.status == 202 and batch.answer["accepted"] == 2000
    assert _count(svc, "team-a", "big") == 2000
    gone = requests.delete(f"{served}/v1/runs/big", headers=_h(key), timeout=60)
    assert gone.status_code == 200 and gone.json()["submissions_detached"] == 2000
    assert _count(svc, "team-a", "big") == 0


def test_a_run_deleted_under_a_batch_whose_lease_ran_out_takes_no_more_of_it(served, svc, slow_chunks, monkeypatch):
    """A batch whose lease has run out (its process stalled) no longer holds delete off; its
    later chunks then find the run gone and put nothing under its name."""
    monkeypatch.setattr(intake, "RUN_LEASE", 0.0)
    key = new_key(svc, "team-a")
    batch = Batch(served, key, "big", 2000)
    batch.start()
    _midway(svc, "team-a", 2000)
    gone = requests.delete(f"{served}/v1/runs/big", headers=_h(key), timeout=60)
    assert gone.status_code == 200, gone.text
    batch.join(timeout=600)
    assert batch.status == 202
    refused = [it for it in batch.answer["items"] if "error" in it]
    assert refused and {it["error"]["code"] for it in refused} == {"run_deleted"}
    assert batch.answer["accepted"] + len(refused) == 2000
    assert _count(svc, "team-a", "big") == 0  # no submission keeps a deleted run's name
    assert _all(svc, "team-a") == batch.answer["accepted"]  # and what was accepted is kept, without a run
    again = Batch(served, key, "big", 3, "again")
    again.start()
    again.join(timeout=120)
    shown = requests.get(f"{served}/v1/runs/big", headers=_h(key), timeout=60).json()
    assert shown["submissions"] == 3  # the new run of that name holds only its own


def test_a_run_published_under_a_batch_whose_lease_ran_out_takes_no_more_of_it(served, svc, slow_chunks, monkeypatch):
    monkeypatch.setattr(intake, "RUN_LEASE", 0.0)
    key = new_key(svc, "team-a")
    batch = Batch(served, key, "big", 2000)
    batch.start()
    _midway(svc, "team-a", 2000)
    shown = requests.patch(f"{served}/v1/runs/big", json={"public": True}, headers=_h(key), timeout=60)
    assert shown.status_code == 200, shown.text
    at_publication = requests.get(f"{served}/v1/runs/big", headers=_h(key), timeout=60).json()["submissions"]
    batch.join(timeout=600)
    refused = [it for it in batch.answer["items"] if "error" in it]
    assert refused and {it["error"]["code"] for it in refused} == {"run_locked"}
    assert _count(svc, "team-a", "big") == at_publication == batch.answer["accepted"]


def test_the_publish_bound_is_per_team_and_day(served, svc):
    key, other = new_key(svc, "team-a"), new_key(svc, "team-b")
    limit = svc.settings.max_publish_per_day
    for n in range(limit + 2):
        requests.post(
            f"{served}/v1/submissions", json={"task_id": TASK, "patch": f"p{n}", "run_id": f"r{n}"}, headers=_h(key)
        )
    codes = [
        requests.patch(f"{served}/v1/runs/r{n}", json={"public": True}, headers=_h(key), timeout=60).status_code
        for n in range(limit + 2)
    ]
    assert codes == [200] * limit + [429, 429]
    refused = requests.patch(f"{served}/v1/runs/r{limit}", json={"public": True}, headers=_h(key), timeout=60)
    assert refused.json()["error"]["code"] == "publish_quota" and int(refused.headers["Retry-After"]) > 0
    # publishing again what is published already, or making it private and public again, is no new run
    for n in (0, 0):
        assert requests.patch(f"{served}/v1/runs/r0", json={"public": n == 0}, headers=_h(key)).status_code == 200
    assert requests.patch(f"{served}/v1/runs/r0", json={"public": True}, headers=_h(key)).status_code == 200
    requests.post(f"{served}/v1/submissions", json={"task_id": TASK, "patch": "b", "run_id": "b"}, headers=_h(other))
    assert requests.patch(f"{served}/v1/runs/b", json={"public": True}, headers=_h(other)).status_code == 200


# --- through gunicorn ----------------------------------------------------------------------------------
@pytest.mark.parametrize("move", ["delete", "publish"])
def test_a_run_changed_under_a_batch_through_gunicorn_keeps_one_truth(database_url, redis_url, tmp_path, move):
    """Real processes, nothing slowed: a 4,000-item batch, and its team's DELETE (or
    PATCH public) sent again and again while it is stored. Whatever the timing, either the
    run holds every accepted item, or it is gone and no submission keeps its name; a
    published run holds nothing queued after its publication."""
    svc = make_service(database_url, redis_url)
    key = new_key(svc, "team-a")
    try:
        with api_process(database_url, redis_url, tmp_path, GRADER_DAILY_QUOTA="100000") as url:
            batch = Batch(url, key, "big", 4000)
            batch.start()
            answers = []
            while batch.is_alive():
                if move == "delete":
                    r = requests.delete(f"{url}/v1/runs/big", headers=_h(key), timeout=120)
                else:
                    r = requests.patch(f"{url}/v1/runs/big", json={"public": True}, headers=_h(key), timeout=120)
                answers.append(r.status_code)
                if r.status_code == 200:
                    break
                assert r.status_code in (404, 409), r.text  # not made yet, or busy
                time.sleep(0.05)
            batch.join(timeout=600)
            assert batch.status in (202, 409), batch.answer
            accepted = batch.answer["accepted"]
            with svc.db.read() as s:
                run = s.scalar(select(Run).where(Run.name == "big"))
                if move == "delete" and 200 in answers:
                    assert _count(svc, "team-a", "big") == (accepted if run is not None else 0)
                elif move == "publish" and 200 in answers:
                    assert run is not None and run.published_at is not None
                    late = s.scalar(
                        select(func.count())
                        .select_from(Submission)
                        .where(Submission.run_id == "big", Submission.queued_at > run.published_at)
                    )
                    assert late == 0  # nothing joined the locked run
                    assert _count(svc, "team-a", "big") == accepted
                else:
                    assert _count(svc, "team-a", "big") == accepted == 4000
            assert 409 in answers or 200 in answers, answers
    finally:
        svc.close()
