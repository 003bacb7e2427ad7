"""The database layer on SQLite and on a real PostgreSQL server: migrations, and the
compare-and-set moves that keep one submission from two final results."""

from __future__ import annotations

import datetime as dt

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from grader.store import cache
from grader.store import submissions as subs
from grader.store.db import Database
from grader.store.keys import authenticate, create_key, revoke_team_keys
from grader.store.models import Base, Submission, utcnow
from grader.verdict import Provenance, Result, Verdict

pytestmark = pytest.mark.service


@pytest.fixture
def db(database_url) -> Database:
    d = Database(database_url)
    d.migrate()
    yield d
    d.dispose()


def _add(db: Database, team_id: int, **kw) -> Submission:
    row = Submission(
        id=subs.new_id(),
        team_id=team_id,
        task_id="t",
        patch=b"",
        patch_sha256="0" * 64,
        job_id="j1",
        task_hash="h" * 64,
        **kw,
    )
    with db.write() as s:
        s.add(row)
    return row


def _team(db: Database, name="t1") -> int:
    with db.write() as s:
        create_key(s, name)
    with db.read() as s:
        from grader.store.models import Team

        return s.query(Team).filter_by(name=name).one().id


def _result(verdict=Verdict.PASS, image="img1") -> Result:
    return Result(
        task_id="t",
        verdict=verdict,
        explanation="x",
        durations={"total": 1.5},
        provenance=Provenance(patch_sha256="0" * 64, task_hash="h" * 64, image_id=image, grader_version="v"),
    )


def test_migrations_match_the_models(db):
    with db.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == [], f"models and migrations disagree: {diff}"
    assert db.current_revision() == db.head_revision()
    db.migrate()  # a second start migrates nothing and does not fail


def test_keys_are_stored_hashed_and_revocable(db):
    with db.write() as s:
        key = create_key(s, "team-a", admin=True, daily_quota=5)
    with db.read() as s:
        from grader.store.models import ApiKey

        stored = [k.key_hash for k in s.query(ApiKey)]
        assert key not in stored and all(len(h) == 64 for h in stored)
        team = authenticate(s, key)
        assert team.name == "team-a" and team.admin and team.daily_quota == 5
        assert authenticate(s, key + "x") is None
    with db.write() as s:
        assert revoke_team_keys(s, "team-a") == 1
    with db.read() as s:
        assert authenticate(s, key) is None


def test_one_claim_wins_and_a_lost_claim_cannot_finish(db):
    row = _add(db, _team(db))
    first = subs.claim(db, row.id, "j1", "host-a", -1)  # a lease that has run out already
    assert first is not None
    assert subs.claim(db, row.id, "j1", "host-b", 60) is None  # already running
    # its lease ran out; the reconciler gives it to a new job, which claims it
    assert subs.reassign_job(db, row.id, None, running_token=first.token)
    with db.read() as s:
        new_job = s.get(Submission, row.id).job_id
    assert subs.claim(db, row.id, "j1", "host-b", 60) is None  # the old job id no longer matches
    second = subs.claim(db, row.id, new_job, "host-b", 60)
    assert second is not None
    assert not subs.renew(db, first, 60)
    assert not subs.finish(db, first, _result(Verdict.FAIL))  # the first worker's late result is discarded
    assert subs.finish(db, second, _result(Verdict.PASS))
    assert not subs.finish(db, second, _result(Verdict.FAIL))  # a finished submission never changes
    with db.read() as s:
        sub = s.get(Submission, row.id)
        assert (sub.status, sub.verdict, sub.attempts, sub.host) == ("done", "PASS", 2, "host-b")


def test_a_lease_renewed_after_it_was_seen_expired_is_kept(db):
    row = _add(db, _team(db))
    c = subs.claim(db, row.id, "j1", "host-a", -1)
    with db.read() as s:
        assert [sid for sid, _ in subs.expired_leases(s)] == [row.id]  # the reconciler sees it expired...
    assert subs.renew(db, c, 60)  # ...then its worker, slowed by the database, renews it
    assert subs.reassign_job(db, row.id, None, running_token=c.token) is None  # so it keeps it
    assert subs.finish(db, c, _result(Verdict.PASS))
    with db.read() as s:
        sub = s.get(Submission, row.id)
        assert (sub.status, sub.verdict, sub.attempts) == ("done", "PASS", 1)


def test_retry_later_requeues_under_a_new_job(db):
    row = _add(db, _team(db))
    c = subs.claim(db, row.id, "j1", "h", 60)
    job = subs.retry_later(db, c, "docker down")
    assert job and job != "j1"
    with db.read() as s:
        sub = s.get(Submission, row.id)
        assert (sub.status, sub.errors, sub.last_error, sub.job_id) == ("queued", 1, "docker down", job)
    assert subs.retry_later(db, c, "again") is None  # the claim is gone


def test_claims_count_attempts_and_the_first_error_is_kept(db):
    row = _add(db, _team(db))
    first = subs.claim(db, row.id, "j1", "h", 60)
    assert first.attempts == 1
    job = subs.retry_later(db, first, "docker down")
    with db.read() as s:
        since = s.get(Submission, row.id).first_error_at
    assert since is not None
    second = subs.claim(db, row.id, job, "h", 60)
    assert second.attempts == 2
    # judged after its second ERROR: FAIL, but that attempt ERRORed and is counted so
    assert subs.finish(db, second, _result(Verdict.FAIL), errored=True)
    with db.read() as s:
        sub = s.get(Submission, row.id)
        assert (sub.verdict, sub.attempts, sub.errors, sub.first_error_at) == ("FAIL", 2, 2, since)


def test_an_abandoned_submission_is_finished_only_while_its_lease_is_expired(db):
    team = _team(db)
    live, gone = _add(db, team), _add(db, team)
    a = subs.claim(db, live.id, "j1", "h", 600)
    b = subs.claim(db, gone.id, "j1", "h", -1)
    assert not subs.finish_abandoned(db, live.id, a.token, _result(Verdict.ERROR))  # its worker is alive
    assert not subs.finish_abandoned(db, gone.id, "other-token", _result(Verdict.ERROR))
    assert subs.finish_abandoned(db, gone.id, b.token, _result(Verdict.ERROR))
    assert not subs.finish(db, b, _result(Verdict.PASS))  # the lost worker's late answer cannot replace it
    with db.read() as s:
        sub = s.get(Submission, gone.id)
        # lost, not ERRORed: its error count is what its grades said
        assert (sub.status, sub.verdict, sub.errors, sub.claim_token) == ("done", "ERROR", 0, None)


def test_cancel_only_while_queued(db):
    team = _team(db)
    a, b = _add(db, team), _add(db, team)
    assert subs.cancel(db, a.id)
    assert not subs.cancel(db, a.id)
    assert subs.claim(db, a.id, "j1", "h", 60) is None  # a cancelled submission is never graded
    subs.claim(db, b.id, "j1", "h", 60)
    assert not subs.cancel(db, b.id)


def test_cache_lookup_needs_same_image_and_not_error(db):
    team = _team(db)
    row = _add(db, team)
    c = subs.claim(db, row.id, "j1", "h", 60)
    subs.finish(db, c, _result(Verdict.PASS, image="img1"))
    err = _add(db, team)
    subs.finish(db, subs.claim(db, err.id, "j1", "h", 60), _result(Verdict.ERROR, image="img1"))
    with db.read() as s:
        assert cache.lookup(s, "h" * 64, "0" * 64, "v", "img1").id == row.id
        assert cache.lookup(s, "h" * 64, "0" * 64, "v", "img2") is None
        assert cache.lookup(s, "h" * 64, "0" * 64, "v2", "img1") is None
        assert cache.current_image(s, "h" * 64, "v") == "img1"  # the image a worker last graded it in


def test_expired_leases_and_counts(db):
    team = _team(db)
    a, b = _add(db, team), _add(db, team)
    subs.claim(db, a.id, "j1", "h", -1)  # already expired
    subs.claim(db, b.id, "j1", "h", 600)
    with db.read() as s:
        assert [sid for sid, _ in subs.expired_leases(s)] == [a.id]
        assert subs.count_active(s, team) == 2 and subs.count_queued(s) == 0
        assert subs.count_today(s, team) == 2
        assert subs.start_of_day() <= utcnow() < subs.start_of_day() + dt.timedelta(days=1)


def test_ids_are_time_ordered_and_strictly_increase_in_a_process():
    """Many ids in one millisecond (a batch) still sort in the order they were made."""
    ids = [subs.new_id() for _ in range(5000)]
    assert all(len(i) == 24 and int(i, 16) >= 0 for i in ids)
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert len({i[:12] for i in ids}) < len(ids)  # several did share a millisecond


def test_shared_writes_of_one_key_see_each_other_and_fail_alone(db):
    """Database.write_shared on both backends: threads that write under one key while a
    transaction of that key is open wait, then share one transaction (PostgreSQL groups by
    key, SQLite every write); each sees the writes before it, and one that raises fails
    alone. A work of another key is not held up by them on PostgreSQL."""
    import threading
    import time

    from sqlalchemy import func, select

    from grader.store.models import Team

    release, started = threading.Event(), threading.Event()
    outcomes: dict[str, object] = {}

    def adding(name: str, hold: bool = False, fail: bool = False):
        def work(s):
            if hold:
                started.set()
                release.wait(30)
            before = s.scalar(select(func.count()).select_from(Team))
            s.add(Team(name=name, webhook_secret="x"))
            s.flush()
            if fail:
                raise ValueError(name)
            return before

        return work

    def call(name: str, key: int, **kw):
        try:
            outcomes[name] = db.write_shared(adding(name, **kw), key=key)
        except Exception as exc:  # noqa: BLE001 - the outcome the test reads
            outcomes[name] = exc

    first = threading.Thread(target=call, args=("held", 1), kwargs={"hold": True})
    first.start()
    started.wait(30)
    rest = [threading.Thread(target=call, args=(f"t{i}", 1), kwargs={"fail": i == 2}) for i in range(5)]
    for t in rest:
        t.start()
    while len(db._groups[None if db.is_sqlite else 1].waiting) < 5:
        time.sleep(0.001)
    if not db.is_sqlite:  # another key's write goes on while key 1's transaction is open
        call("other", 2)
        assert outcomes["other"] == 0
    release.set()
    for t in [first, *rest]:
        t.join(60)
    assert isinstance(outcomes["t2"], ValueError)
    counts = sorted(v for k, v in outcomes.items() if k not in ("t2", "other"))
    extra = 0 if db.is_sqlite else 1  # PostgreSQL: "other" was committed before the held work counted
    assert counts == list(range(extra, 5 + extra))  # one after another, each counting the ones before
    with db.read() as s:
        assert set(s.scalars(select(Team.name))) == {"held", "t0", "t1", "t3", "t4"} | (
            set() if db.is_sqlite else {"other"}
        )
