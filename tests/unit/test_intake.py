"""Intake below the API (grader/intake.py), without Flask, Redis or a server: the checks of
one item, the Idempotency-Key, quotas and the queue's bound, the chunks, the cache, and the
domain refusal the API maps to a status in one place (grader/api/errors.py). The same
rules through the API and gunicorn, under concurrency and on PostgreSQL, are
tests/service/test_intake_service.py's."""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass

import pytest
from sqlalchemy import func, select

from grader import intake
from grader.handles import Handles
from grader.intake import Accepted, Item, Refusal
from grader.store.keys import create_key
from grader.store.models import Status, Submission, Team, utcnow
from grader.version import GRADER_VERSION
from helpers import ROOT


@dataclass(frozen=True)
class Team_:
    team_id: int
    admin: bool = False
    daily_quota: int | None = None
    queued_quota: int | None = None


@pytest.fixture
def svc(settings, tmp_path, monkeypatch):
    """The service over SQLite in this test's directory, the mini tasks, and no Redis: what
    would be queued is recorded instead."""
    st = settings.model_copy(
        update={
            "database_url": f"sqlite:///{tmp_path / 'db.sqlite'}",
            "redis_url": "redis://127.0.0.1:9/0",  # never connected: enqueueing is recorded below
            "daily_quota": 1000,
            "queued_quota": 1000,
            "queue_max": 1000,
        }
    )
    s = Handles(st)
    s.db.migrate()
    s.queued, s.callbacks = [], []
    monkeypatch.setattr(s, "enqueue_many", lambda items: s.queued.extend(items))
    monkeypatch.setattr(s, "enqueue_webhook", lambda sid, **kw: s.callbacks.append(sid))
    yield s
    s.close()


def team(svc: Handles, name: str = "team-a", **quotas) -> Team_:
    with svc.db.write() as s:
        create_key(s, name)
        t = s.scalar(select(Team).where(Team.name == name))
        return Team_(t.id, **quotas)


def item(n: int = 0, **kw) -> Item:
    return Item(task_id="mini", patch=f"--- a/x\n+++ b/x\n@@ -0,0 +1 @@\n+{n}\n", **kw)


def stored(svc: Handles) -> int:
    with svc.db.read() as s:
        return s.scalar(select(func.count()).select_from(Submission)) or 0


# --- one item -------------------------------------------------------------------------------------
def test_an_accepted_item_is_stored_then_queued(svc):
    (a,) = intake.accept(svc, team(svc), [item()], [None])
    assert isinstance(a, Accepted) and a.enqueue and not a.replayed
    assert a.row.status == Status.QUEUED.value and a.row.task_hash == svc.task_hash("mini")
    assert svc.queued == [(a.row.id, a.row.job_id, "mini")] and stored(svc) == 1


@pytest.mark.parametrize(
    ("given", "reason", "said"),
    [
        (Item(task_id="nope", patch=""), "unknown_task", "no task 'nope'"),
        (item(prompt_variant="shouty"), "invalid_fields", "prompt_variant must be one of"),
        (item(callback_url="ftp://example.org/hook"), "invalid_callback_url", ""),
        (Item(task_id="mini", patch="x" * 5000), "patch_too_large", "the limit is 4096 bytes"),
    ],
)
def test_an_item_is_refused_with_what_and_why_and_never_stored(svc, monkeypatch, given, reason, said):
    monkeypatch.setattr(svc.settings, "max_patch_bytes", 4096)
    (r,) = intake.accept(svc, team(svc), [given], [None])
    assert isinstance(r, Refusal) and r.reason == reason and said in r.message
    assert stored(svc) == 0 and svc.queued == []


def test_an_item_the_door_refused_keeps_its_place_and_its_details(svc):
    read = Refusal("invalid_fields", "invalid item: trial: too big", details=[{"field": "trial", "problem": "big"}])
    answers = intake.accept(svc, team(svc), [item(1), read, item(2)], [None] * 3)
    assert isinstance(answers[0], Accepted) and isinstance(answers[2], Accepted)
    assert answers[1] is read and answers[1].details == [{"field": "trial", "problem": "big"}]
    assert answers[0].row.id < answers[2].row.id  # in the order given


def test_a_published_run_refuses_its_team_but_not_the_host(svc):
    from grader.store.models import Run

    t = team(svc)
    intake.accept(svc, t, [item(run_id="r1")], [None])
    with svc.db.write() as s:
        run = s.scalar(select(Run).where(Run.name == "r1"))
        run.public, run.published_at = True, utcnow()
    (r,) = intake.accept(svc, t, [item(1, run_id="r1")], [None])
    assert isinstance(r, Refusal) and r.reason == "run_locked" and "'r1' was published" in r.message
    (h,) = intake.accept(svc, Team_(t.team_id, admin=True), [item(2, run_id="r1")], [None])
    assert isinstance(h, Accepted)


# --- one attempt per (task, trial) of a run --------------------------------------------------------
def run_of(svc: Handles, sid: str) -> str | None:
    with svc.db.read() as s:
        return s.get(Submission, sid).run_id


def test_a_second_attempt_at_a_task_and_trial_of_a_run_is_refused_unless_new_or_overwritten(svc):
    t = team(svc)
    (first,) = intake.accept(svc, t, [item(0, run_id="r")], [None], exclusive=True)
    assert isinstance(first, Accepted)
    (again,) = intake.accept(svc, t, [item(1, run_id="r")], [None], exclusive=True)
    assert isinstance(again, Refusal) and again.reason == "attempt_exists"
    assert "'r' already holds an attempt at 'mini' with no trial number" in again.message
    (other_run,) = intake.accept(svc, t, [item(1, run_id="r2")], [None], exclusive=True)
    (new_trial,) = intake.accept(svc, t, [item(1, run_id="r", trial=1)], [None], exclusive=True)
    (trial_again,) = intake.accept(svc, t, [item(2, run_id="r", trial=1)], [None], exclusive=True)
    assert isinstance(other_run, Accepted) and isinstance(new_trial, Accepted)
    assert isinstance(trial_again, Refusal) and "as trial 1" in trial_again.message
    # overwrite: the earlier attempt leaves the run and stays the team's; the new one takes its place
    (replaced,) = intake.accept(svc, t, [item(3, run_id="r", overwrite=True)], [None], exclusive=True)
    assert isinstance(replaced, Accepted)
    assert run_of(svc, first.row.id) is None and run_of(svc, replaced.row.id) == "r"
    assert run_of(svc, new_trial.row.id) == "r"  # another trial is untouched
    assert stored(svc) == 4  # nothing accepted is lost
    # without `exclusive` (a batch: the CLI checks its pairs) the door decides, as before
    (batch,) = intake.accept(svc, t, [item(4, run_id="r")], [None])
    assert isinstance(batch, Accepted)


def test_a_cancelled_attempt_is_not_held_and_one_request_cannot_add_two(svc):
    from grader.store import submissions as subs

    t = team(svc)
    (first,) = intake.accept(svc, t, [item(0, run_id="r")], [None], exclusive=True)
    assert subs.cancel(svc.db, first.row.id)
    (after,) = intake.accept(svc, t, [item(1, run_id="r")], [None], exclusive=True)
    assert isinstance(after, Accepted)
    two = intake.accept(
        svc, t, [item(2, run_id="s", overwrite=True), item(3, run_id="s", overwrite=True)], [None, None], exclusive=True
    )
    assert isinstance(two[0], Accepted) and isinstance(two[1], Refusal) and two[1].reason == "attempt_exists"


def test_a_whole_request_takes_every_item_or_none(svc):
    t = team(svc)
    # refused before the store (an unknown task): the others are withheld, nothing stored
    answers = intake.accept(svc, t, [item(0), Item(task_id="nope", patch=""), item(1)], [None] * 3, whole=True)
    assert [a.reason for a in answers] == ["withheld", "unknown_task", "withheld"]
    assert "1 other item(s) of this request were refused" in answers[0].message
    assert stored(svc) == 0 and svc.queued == []
    # refused in the store's transaction (the run already holds the attempt): rolled back whole
    (held,) = intake.accept(svc, t, [item(2, run_id="r")], [None], exclusive=True)
    assert isinstance(held, Accepted)
    answers = intake.accept(
        svc, t, [item(3, run_id="r", trial=1), item(4, run_id="r")], [None, None], exclusive=True, whole=True
    )
    assert [a.reason for a in answers] == ["withheld", "attempt_exists"]
    assert stored(svc) == 1 and len(svc.queued) == 1
    # and past the quota: none of the request, though one would fit
    answers = intake.accept(svc, team(svc, "team-b", daily_quota=1), [item(5), item(6)], [None, None], whole=True)
    assert {a.reason for a in answers} == {"withheld", "quota_exceeded"} and stored(svc) == 1
    # all good: all taken, in one transaction
    answers = intake.accept(svc, t, [item(7), item(8)], ["w#0", "w#1"], whole=True)
    assert all(isinstance(a, Accepted) for a in answers) and stored(svc) == 3
    # the same request again (a form sent twice) replays every item
    again = intake.accept(svc, t, [item(7), item(8)], ["w#0", "w#1"], whole=True)
    assert all(isinstance(a, Accepted) and a.replayed for a in again) and stored(svc) == 3


# --- Idempotency-Keys -----------------------------------------------------------------------------
def test_a_key_replays_the_same_request_and_refuses_another(svc):
    t = team(svc)
    (first,) = intake.accept(svc, t, [item()], ["k"])
    (again,) = intake.accept(svc, t, [item()], ["k"])
    assert isinstance(again, Accepted) and again.replayed and not again.enqueue and again.row.id == first.row.id
    (other,) = intake.accept(svc, t, [item(1)], ["k"])
    assert isinstance(other, Refusal) and other.reason == "idempotency_conflict"
    assert stored(svc) == 1 and len(svc.queued) == 1


def test_a_batch_under_a_key_that_differs_in_any_item_refuses_every_item(svc):
    t = team(svc)
    keys = ["b#0", "b#1"]
    intake.accept(svc, t, [item(0), item(1)], keys, batch_hash="h1")
    answers = intake.accept(svc, t, [item(0), item(2)], keys, batch_hash="h2")
    assert [a.reason for a in answers if isinstance(a, Refusal)] == ["idempotency_conflict"] * 2
    assert stored(svc) == 2


@pytest.mark.parametrize("raw", ["", "   ", "x" * 181])
def test_a_blank_or_long_key_is_refused(raw):
    with pytest.raises(Refusal) as info:
        intake.idempotency_key(raw)
    assert info.value.reason == "invalid_fields" and "1 to 180 characters" in info.value.message
    assert intake.idempotency_key(" k ") == "k" and intake.idempotency_key(None) is None


def test_the_request_hash_is_what_the_api_stored_before_intake_moved():
    """Keys stored before this module existed were hashed from the API's SubmissionIn (its
    given fields); a retry across the upgrade must still replay."""
    import hashlib
    import json

    from grader.schemas import SubmissionIn

    body = {"task_id": "mini", "patch": "p", "trial": 0, "metadata": {"a": None, "b": [1]}, "run_id": "r"}
    model = SubmissionIn.model_validate(body)
    before = hashlib.sha256(json.dumps(model.model_dump(exclude_none=True), sort_keys=True).encode()).hexdigest()
    assert Item(**model.model_dump()).request_hash() == before


# --- quotas and the queue's bound ------------------------------------------------------------------
def test_the_daily_quota_refuses_past_its_room_until_midnight(svc):
    t = team(svc, daily_quota=2)
    answers = intake.accept(svc, t, [item(n) for n in range(4)], [None] * 4)
    assert [type(a).__name__ for a in answers] == ["Accepted", "Accepted", "Refusal", "Refusal"]
    r = answers[2]
    assert r.reason == "quota_exceeded" and "quota of 2 submissions a day" in r.message
    assert 0 < r.retry_after <= 86401 and r.retry_after == pytest.approx(intake.seconds_to_midnight(), abs=5)


def test_the_queued_quota_and_the_queue_bound(svc, monkeypatch):
    t = team(svc, queued_quota=1)
    answers = intake.accept(svc, t, [item(0), item(1)], [None, None])
    assert isinstance(answers[0], Accepted)
    assert isinstance(answers[1], Refusal) and answers[1].reason == "quota_exceeded"
    assert answers[1].retry_after == 30  # counted once a chunk: the count is the one before it
    (later,) = intake.accept(svc, t, [item(3)], [None])
    assert isinstance(later, Refusal) and later.reason == "quota_exceeded"
    assert "already has 1 submissions queued or running; the limit is 1" in later.message
    monkeypatch.setattr(svc.settings, "queue_max", 1)
    (r,) = intake.accept(svc, team(svc, "team-b"), [item(2)], [None])
    assert isinstance(r, Refusal) and r.reason == "queue_full" and r.retry_after == 30


# --- chunks ---------------------------------------------------------------------------------------
def test_a_batch_is_stored_chunk_by_chunk_in_order(svc, monkeypatch):
    monkeypatch.setattr(intake, "CHUNK", 2)
    monkeypatch.setattr(intake, "SQLITE_CHUNK_PAUSE", 0)
    real, sizes = svc.db.write, []

    @contextlib.contextmanager
    def write():
        with real() as s:
            before = s.scalar(select(func.count()).select_from(Submission))
            yield s
            s.flush()
            sizes.append(s.scalar(select(func.count()).select_from(Submission)) - before)

    monkeypatch.setattr(svc.db, "write", write)
    answers = intake.accept(svc, team(svc), [item(n) for n in range(5)], [None] * 5)
    assert [n for n in sizes if n] == [2, 2, 1]
    ids = [a.row.id for a in answers if isinstance(a, Accepted)]
    assert len(ids) == 5 and ids == sorted(ids)


# --- the cache ------------------------------------------------------------------------------------
def finished(svc: Handles, t: Team_, it: Item, image: str = "sha256:img") -> str:
    """A grade of `it` as a worker leaves it, for the cache to find."""
    (a,) = intake.accept(svc, t, [it], [None])
    result = {"task_id": it.task_id, "verdict": "FAIL", "explanation": "no", "provenance": {"image_id": image}}
    with svc.db.write() as s:
        row = s.get(Submission, a.row.id)
        row.status, row.verdict, row.result, row.finished_at = Status.DONE.value, "FAIL", result, utcnow()
        row.image_id, row.grader_version, row.job_id, row.attempts = image, GRADER_VERSION, None, 1
    return a.row.id


def test_an_earlier_grade_answers_at_once_and_its_callback_is_queued(svc, monkeypatch):
    monkeypatch.setattr(svc.settings, "callback_allow_private", True)
    t = team(svc)
    finished(svc, t, item())
    svc.queued.clear()
    (a,) = intake.accept(svc, t, [item(callback_url="http://127.0.0.1:9/hook")], [None])
    assert isinstance(a, Accepted) and not a.enqueue
    assert (a.row.status, a.row.verdict, a.row.cached, a.row.image_id) == ("done", "FAIL", True, "sha256:img")
    assert svc.queued == [] and svc.callbacks == [a.row.id]


def test_the_cache_answers_from_the_image_a_worker_last_graded_the_task_in(svc):
    """One rule (grader/store/cache.py): the exact image, which at intake is the task's
    current one. A grade in an image the workers have moved on from answers no more."""
    t = team(svc)
    finished(svc, t, item(), image="sha256:old")
    finished(svc, t, item(1), image="sha256:new")  # the environment was rebuilt since
    (a,) = intake.accept(svc, t, [item()], [None])
    assert a.enqueue and a.row.status == "queued"  # graded again, in the new image
    (b,) = intake.accept(svc, t, [item(1)], [None])
    assert not b.enqueue and b.row.image_id == "sha256:new"


def test_answers_from_the_cache_do_not_move_the_current_image(svc):
    from grader.store import cache

    t = team(svc)
    finished(svc, t, item(), image="sha256:old")
    finished(svc, t, item(1), image="sha256:new")
    with svc.db.write() as s:  # an answer at intake copies its hit's image and is newer than both
        row = s.get(Submission, intake.accept(svc, t, [item(1)], [None])[0].row.id)
        row.image_id, row.finished_at = "sha256:old", utcnow()
    with svc.db.read() as s:
        assert cache.current_image(s, svc.task_hash("mini"), GRADER_VERSION) == "sha256:new"


def test_the_worker_and_intake_look_up_through_one_function():
    """The worker's lookup and intake's call grader/store/cache.py's `lookup`; nothing else
    queries the cache's rule."""
    for module in ("intake.py", "jobs.py"):
        assert "cache.lookup(" in (ROOT / "grader" / module).read_text()
    others = [
        p for p in (ROOT / "grader").rglob("*.py") if p.name != "cache.py" and "Submission.image_id ==" in p.read_text()
    ]
    assert others == []


def test_the_cache_can_be_turned_off(svc, monkeypatch):
    t = team(svc)
    finished(svc, t, item())
    monkeypatch.setattr(svc.settings, "cache", False)
    (a,) = intake.accept(svc, t, [item()], [None])
    assert a.enqueue and a.row.status == "queued"


# --- the one place a refusal becomes a status ------------------------------------------------------
def test_every_reason_intake_gives_has_a_status():
    from grader.api.errors import REFUSAL_STATUS, refused

    source = (ROOT / "grader" / "intake.py").read_text()
    reasons = set(re.findall(r'Refusal\(\s*"(\w+)"', source))
    assert reasons and reasons <= set(REFUSAL_STATUS), reasons - set(REFUSAL_STATUS)
    err = refused(Refusal("quota_exceeded", "used up", retry_after=7))
    assert (err.status, err.code, err.message, err.retry_after) == (429, "quota_exceeded", "used up", 7)
    assert refused(Refusal("queue_full", "full")).status == 503
