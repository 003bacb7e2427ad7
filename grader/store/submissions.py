"""Submissions: creation, the compare-and-set moves of their life, and the queries the API,
the workers and the reconciler need.

Every move is one conditional UPDATE, so that two workers, a reconciler and a cancelling
user racing on one submission leave it in exactly one state: a worker may only finish a
submission it still holds (`claim_token`), and a finished submission never changes again.
That is how no submission is ever graded into two different final results.
"""

from __future__ import annotations

import datetime as dt
import functools
import secrets
import threading
import time
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import ColumnElement, Select, and_, bindparam, case, func, insert, or_, select, text, update
from sqlalchemy.orm import Session, defer

from grader.store.db import Database
from grader.store.models import Run, Status, Submission, Team, utcnow
from grader.verdict import Result, Verdict

if TYPE_CHECKING:
    from sqlalchemy.engine import CursorResult
    from sqlalchemy.engine import Result as SqlResult


_ID_LOCK = threading.Lock()
_last_id = [0, 0]  # the milliseconds and the sequence number of this process's last id


def new_id() -> str:
    """24 hex characters: creation time in milliseconds, a sequence number, then random.
    Within a process ids strictly increase, so the items of one batch sort in the order
    they were given (a run's newest submission of a task is the last one given), even
    when many are made in one millisecond; across processes they sort by time."""
    with _ID_LOCK:
        ms = int(time.time() * 1000)
        if ms <= _last_id[0]:
            ms, seq = _last_id[0], _last_id[1] + 1
            if seq > 0xFFFF:
                ms, seq = ms + 1, 0
        else:
            seq = 0
        _last_id[:] = [ms, seq]
    return f"{ms:012x}{seq:04x}{secrets.token_hex(4)}"


def new_job_id(submission_id: str) -> str:
    return f"{submission_id}-{secrets.token_hex(4)}"


def start_of_day(now: dt.datetime | None = None) -> dt.datetime:
    now = now or utcnow()
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


@dataclass
class Claim:
    submission_id: str
    token: str
    attempts: int = 0  # grades started for the submission, this one included


def _rowcount(result: SqlResult[Any]) -> int:
    """The rows an UPDATE matched (its result is a cursor's, which SQLAlchemy types apart)."""
    return cast("CursorResult[Any]", result).rowcount


# --- the moves -----------------------------------------------------------------------------
def claim(db: Database, submission_id: str, job_id: str | None, host: str, lease: float) -> Claim | None:
    """queued -> running, for the job the submission is waiting for; None if it is not."""
    token = secrets.token_hex(8)
    now = utcnow()
    with db.write() as s:
        done = _rowcount(
            s.execute(
                update(Submission)
                .where(
                    Submission.id == submission_id,
                    Submission.status == Status.QUEUED.value,
                    Submission.job_id == job_id,
                )
                .values(
                    status=Status.RUNNING.value,
                    claim_token=token,
                    host=host,
                    attempts=Submission.attempts + 1,
                    lease_expires_at=now + dt.timedelta(seconds=lease),
                    started_at=func.coalesce(Submission.started_at, now),
                )
            )
        )
        if done != 1:
            return None
        attempts = s.scalar(select(Submission.attempts).where(Submission.id == submission_id))
        assert attempts is not None  # the row this transaction just updated
    return Claim(submission_id, token, attempts)


def _held(c: Claim) -> tuple[ColumnElement[bool], ...]:
    """Where a claimed row still is its claim's: running, under this claim's token. Every
    write of a worker's claim is conditioned on it, so a claim lost to the reconciler writes nothing."""
    return (
        Submission.id == c.submission_id,
        Submission.claim_token == c.token,
        Submission.status == Status.RUNNING.value,
    )


def renew(db: Database, c: Claim, lease: float) -> bool:
    with db.write() as s:
        return (
            _rowcount(
                s.execute(
                    update(Submission).where(*_held(c)).values(lease_expires_at=utcnow() + dt.timedelta(seconds=lease))
                )
            )
            == 1
        )


def _done(result: Result, *, cached: bool, errored: bool, shown: dict[str, Any] | None = None) -> dict[str, Any]:
    """The columns of a finished submission. `errored`: this attempt ERRORed even if the
    final verdict is not ERROR (a submission judged to have broken the grading harness).
    `shown`: the result as each viewer may see it (grader/serializers: masked), made by the
    caller, which has the task; with the metric inputs below, what every later read needs."""
    p = result.provenance
    errored = errored or result.verdict is Verdict.ERROR
    now = utcnow()
    loc = result.localization
    return dict(
        status=Status.DONE.value,
        verdict=result.verdict.value,
        result=result.model_dump(mode="json"),
        shown=shown,
        loc_precision=loc.precision if loc else None,
        loc_recall=loc.recall if loc else None,
        loc_f1=loc.f1 if loc else None,
        tampered=bool(result.tampered),
        audit_flagged=bool(result.audit),
        cached=cached,
        finished_at=now,
        duration=result.durations.get("total"),
        task_hash=p.task_hash,
        image_id=p.image_id,
        grader_version=p.grader_version,
        claim_token=None,
        lease_expires_at=None,
        errors=Submission.errors + (1 if errored else 0),
        first_error_at=func.coalesce(Submission.first_error_at, now) if errored else Submission.first_error_at,
    )


def finish(
    db: Database,
    c: Claim,
    result: Result,
    *,
    cached: bool = False,
    errored: bool = False,
    shown: dict[str, Any] | None = None,
) -> bool:
    """running -> done with `result`; False (and nothing written) if the claim was lost."""
    done = _done(result, cached=cached, errored=errored, shown=shown)
    with db.write() as s:
        return _changed_run(
            s, c.submission_id, _rowcount(s.execute(update(Submission).where(*_held(c)).values(**done)))
        )


def finish_abandoned(
    db: Database, submission_id: str, token: str | None, result: Result, *, shown: dict[str, Any] | None = None
) -> bool:
    """running -> done for a submission whose lease ran out (its worker is gone), instead of
    re-queueing it: the reconciler's move once it has been started too often. False if
    its worker renewed the lease since, or someone else moved it first."""
    with db.write() as s:
        return _changed_run(
            s,
            submission_id,
            _rowcount(
                s.execute(
                    update(Submission)
                    .where(
                        Submission.id == submission_id,
                        Submission.claim_token == token,
                        Submission.status == Status.RUNNING.value,
                        or_(Submission.lease_expires_at.is_(None), Submission.lease_expires_at < utcnow()),
                    )
                    .values(
                        **{
                            **_done(result, cached=False, errored=False, shown=shown),  # lost, not ERRORed
                            "errors": Submission.errors,
                            "first_error_at": Submission.first_error_at,
                        }
                    )
                )
            ),
        )


def retry_later(db: Database, c: Claim, error: str) -> str | None:
    """running -> queued after an ERROR, under a new job id (returned); None if the claim was lost."""
    job_id = new_job_id(c.submission_id)
    now = utcnow()
    with db.write() as s:
        done = _rowcount(
            s.execute(
                update(Submission)
                .where(*_held(c))
                .values(
                    status=Status.QUEUED.value,
                    job_id=job_id,
                    claim_token=None,
                    lease_expires_at=None,
                    errors=Submission.errors + 1,
                    last_error=error[:10000],
                    first_error_at=func.coalesce(Submission.first_error_at, now),
                )
            )
        )
    return job_id if done == 1 else None


def cancel(db: Database, submission_id: str) -> bool:
    with db.write() as s:
        return _changed_run(
            s,
            submission_id,
            _rowcount(
                s.execute(
                    update(Submission)
                    .where(Submission.id == submission_id, Submission.status == Status.QUEUED.value)
                    .values(status=Status.CANCELLED.value, finished_at=utcnow(), job_id=None)
                )
            ),
        )


def _changed_run(s: Session, submission_id: str, moved: int) -> bool:
    """After a move of a submission (`moved`: the rows the move's UPDATE matched): if it
    moved, its run's stored figures are stale, in the same transaction. True if it moved."""
    if moved != 1:
        return False
    of = select(Submission.team_id, Submission.run_id).where(Submission.id == submission_id)
    s.execute(
        update(Run)
        .where(
            Run.team_id == of.with_only_columns(Submission.team_id).scalar_subquery(),
            Run.name == of.with_only_columns(Submission.run_id).scalar_subquery(),
        )
        .values(figures_stale=True)
    )
    return True


def reassign_job(
    db: Database, submission_id: str, old_job_id: str | None, *, running_token: str | None = None
) -> str | None:
    """Give a queued submission whose job is gone (or a running one whose lease ran out,
    `running_token`) a new job id; None if someone else moved it first, or if the lease
    was renewed since it was seen expired: its worker is alive, and keeps it."""
    job_id = new_job_id(submission_id)
    cond = [Submission.id == submission_id]
    if running_token is None:
        cond += [
            Submission.status == Status.QUEUED.value,
            Submission.job_id.is_(None) if old_job_id is None else Submission.job_id == old_job_id,
        ]
    else:
        cond += [
            Submission.status == Status.RUNNING.value,
            Submission.claim_token == running_token,
            or_(Submission.lease_expires_at.is_(None), Submission.lease_expires_at < utcnow()),
        ]
    with db.write() as s:
        done = _rowcount(
            s.execute(
                update(Submission)
                .where(*cond)
                .values(status=Status.QUEUED.value, job_id=job_id, claim_token=None, lease_expires_at=None)
            )
        )
    return job_id if done == 1 else None


# --- queries -------------------------------------------------------------------------------
def queued_or_running(s: Session, *, older_than: dt.datetime | None = None, limit: int = 10_000) -> list[Submission]:
    q = select(Submission).where(Submission.status.in_([Status.QUEUED.value, Status.RUNNING.value]))
    if older_than is not None:
        q = q.where(Submission.queued_at < older_than)
    return list(s.scalars(q.order_by(Submission.id).limit(limit)))


def _count(*where: ColumnElement[bool]) -> Select[int]:
    return select(func.count()).select_from(Submission).where(*where)


def _active(team_id: Any = None) -> list[ColumnElement[bool]]:
    """Queued or running; the team's only, given one (an id or a bound parameter)."""
    where: list[ColumnElement[bool]] = [Submission.status.in_([Status.QUEUED.value, Status.RUNNING.value])]
    return where if team_id is None else [Submission.team_id == team_id, *where]


def _today(team_id: Any, day: Any) -> list[ColumnElement[bool]]:
    """What counts against a team's daily quota: sent since `day` (midnight UTC), less
    those given back by a deleted run (`withdraw`)."""
    return [Submission.team_id == team_id, Submission.queued_at >= day, Submission.quota_refunded_at.is_(None)]


_QUEUED = Submission.status == Status.QUEUED.value


def count_active(s: Session, team_id: int | None = None) -> int:
    return s.scalar(_count(*_active(team_id))) or 0


def count_queued(s: Session) -> int:
    return s.scalar(_count(_QUEUED)) or 0


def count_today(s: Session, team_id: int) -> int:
    """The team's submissions that count against its daily quota (`_today`)."""
    return s.scalar(_count(*_today(team_id, start_of_day()))) or 0


def count_refunded_today(s: Session, team_id: int) -> int:
    """How many of the team's submissions were given back to its quota since midnight UTC."""
    return (
        s.scalar(
            select(func.count())
            .select_from(Submission)
            .where(Submission.team_id == team_id, Submission.quota_refunded_at >= start_of_day())
        )
        or 0
    )


@dataclass
class Withdrawn:
    """What deleting a run did to its submissions besides detaching them: the queued ones
    cancelled (their ids and jobs, for the caller to drop after its commit) and how many
    were given back to the team's quota."""

    cancelled: list[tuple[str, str | None]]
    refunded: int


def withdraw(s: Session, team_id: int, run_name: str, *, refund: int) -> Withdrawn:
    """Before a run is deleted (store/runs.py: delete), in its transaction under the team's
    lock: cancel its queued submissions, then give back to the daily quota at most `refund`
    of its cancelled ones (oldest first) that were sent today and never started grading
    (`attempts` 0: no worker ever claimed them, so no verdict, no partial result, no grading
    was spent). Each cancel is the same compare-and-set as `cancel`, so a submission a
    worker claims meanwhile is running, never cancelled, and counts."""
    of_run = (Submission.team_id == team_id, Submission.run_id == run_name)
    jobs: dict[str, str | None] = {
        sid: job_id
        for sid, job_id in s.execute(
            select(Submission.id, Submission.job_id).where(*of_run, Submission.status == Status.QUEUED.value)
        )
    }
    ids, cancelled = sorted(jobs), []
    now = utcnow()
    for at in range(0, len(ids), 500):  # within every backend's limit of bound parameters
        moved = s.scalars(
            update(Submission)
            .where(Submission.id.in_(ids[at : at + 500]), Submission.status == Status.QUEUED.value)
            .values(status=Status.CANCELLED.value, finished_at=now, job_id=None)
            .returning(Submission.id)
        )
        cancelled += [(sid, jobs[sid]) for sid in moved]
    if refund <= 0:
        return Withdrawn(cancelled, 0)
    refunded = list(
        s.scalars(
            select(Submission.id)
            .where(
                *of_run,
                Submission.status == Status.CANCELLED.value,
                Submission.attempts == 0,
                Submission.queued_at >= start_of_day(now),
                Submission.quota_refunded_at.is_(None),
            )
            .order_by(Submission.id)
            .limit(refund)
        )
    )
    for at in range(0, len(refunded), 500):
        s.execute(update(Submission).where(Submission.id.in_(refunded[at : at + 500])).values(quota_refunded_at=now))
    return Withdrawn(cancelled, len(refunded))


# count_today and count_active of a team, and count_queued: intake's three counts in one
# statement, built once from the same conditions (each statement run under SQLite's one
# write lock is one more wait for the interpreter's lock while every other writer waits)
_INTAKE_COUNTS = select(
    _count(*_today(bindparam("team_id"), bindparam("day"))).scalar_subquery(),
    _count(*_active(bindparam("team_id"))).scalar_subquery(),
    _count(_QUEUED).scalar_subquery(),
)


def intake_counts(s: Session, team_id: int) -> tuple[int, int, int]:
    """count_today and count_active of the team, and count_queued, in one statement (on the
    session's connection: a Core statement needs none of the ORM's execution)."""
    row = s.connection().execute(_INTAKE_COUNTS, {"team_id": team_id, "day": start_of_day()}).one()
    return int(row[0] or 0), int(row[1] or 0), int(row[2] or 0)


def by_idempotency_key(s: Session, team_id: int, keys: list[str]) -> dict[str, Submission]:
    """The team's submissions under these keys, without their patches (a replay answers with
    ids and states, and a key's check compares request hashes, never bodies)."""
    if not keys:
        return {}
    out: dict[str, Submission] = {}
    for at in range(0, len(keys), 500):  # within every backend's limit of bound parameters
        rows = s.scalars(
            select(Submission)
            .options(defer(Submission.patch, raiseload=True))
            .where(Submission.team_id == team_id, Submission.idempotency_key.in_(keys[at : at + 500]))
        )
        out.update({r.idempotency_key: r for r in rows if r.idempotency_key is not None})  # all: in_() matched it
    return out


Pair = tuple[str | None, str, int | None]  # (run name, task, trial): one attempt of a run


def attempts_held(s: Session, team_id: int, runs: set[str]) -> dict[Pair, list[str]]:
    """The attempts the team's runs `runs` hold, cancelled ones aside: (run, task, trial)
    -> the submissions' ids. Read under the team's lock, in intake's transaction."""
    if not runs:
        return {}
    out: dict[Pair, list[str]] = {}
    rows = s.execute(
        select(Submission.run_id, Submission.task_id, Submission.trial, Submission.id).where(
            Submission.team_id == team_id,
            Submission.run_id.in_(sorted(runs)),
            Submission.status != Status.CANCELLED.value,
        )
    )
    for run_id, task_id, trial, sid in rows:
        out.setdefault((run_id, task_id, trial), []).append(sid)
    return out


def detach(s: Session, team_id: int, ids: list[str]) -> None:
    """Take these submissions out of their run (an attempt replaced): they stay the team's,
    in its history and its quota, as a deleted run's do. The caller marks the run stale."""
    if ids:
        s.execute(update(Submission).where(Submission.team_id == team_id, Submission.id.in_(ids)).values(run_id=None))


@functools.cache
def _columns() -> list[tuple[str, str]]:
    """Each column of a submission: the attribute's name, the column's (meta is "metadata")."""
    return [(a.key, a.columns[0].key) for a in Submission.__mapper__.column_attrs]


def insert_many(s: Session, rows: list[Submission]) -> None:
    """Insert new submissions in one statement (executemany), as a Core statement on the
    session's connection: neither the unit of work's bookkeeping for each row nor the ORM's
    bulk insert, since this runs inside intake's write transaction, which other writers wait
    for. The rows stay detached, as built."""
    if not rows:
        return
    cols = _columns()
    s.connection().execute(insert(Submission), [{c: getattr(r, a) for a, c in cols} for r in rows])


def lock_team(s: Session, team_id: int) -> None:
    """Make this write transaction the team's only intake until it commits, so that counting
    its quota, checking its idempotency keys and inserting are one atomic step. PostgreSQL
    locks the team's row; SQLite needs nothing more, since its writers begin IMMEDIATE and so
    hold the database's one write lock already (FOR UPDATE is left out of SQLite's SQL, so
    the statement would lock nothing there: it is not sent)."""
    if s.get_bind().dialect.name == "sqlite":
        return
    s.execute(select(Team.id).where(Team.id == team_id).with_for_update())


QUEUE_LOCK = zlib.crc32(b"grader-queue-bound")  # pg_advisory_xact_lock key of the queue's bound


def lock_queue(s: Session) -> None:
    """Make this write transaction the only one counting the queue against its bound until it
    commits (GRADER_QUEUE_MAX is across teams, so the team's lock does not cover it).
    PostgreSQL takes a transaction-level advisory lock; SQLite's one writer holds it already."""
    if s.get_bind().dialect.name == "postgresql":
        s.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": QUEUE_LOCK})


def page(
    s: Session,
    *,
    team_id: int | None,
    run_id: str | None = None,
    status: str | None = None,
    after: str | None = None,
    limit: int = 100,
) -> list[Submission]:
    q = select(Submission)
    if team_id is not None:
        q = q.where(Submission.team_id == team_id)
    if run_id is not None:
        q = q.where(Submission.run_id == run_id)
    if status is not None:
        q = q.where(Submission.status == status)
    if after is not None:
        q = q.where(Submission.id > after)
    return list(s.scalars(q.order_by(Submission.id).limit(limit)))


def expired_leases(s: Session, now: dt.datetime | None = None) -> list[tuple[str, str | None]]:
    now = now or utcnow()
    rows = s.execute(
        select(Submission.id, Submission.claim_token).where(
            Submission.status == Status.RUNNING.value,
            or_(Submission.lease_expires_at.is_(None), Submission.lease_expires_at < now),
        )
    )
    return [(r[0], r[1]) for r in rows]


def verdict_counts(s: Session) -> list[tuple[str, str | None, int]]:
    rows = s.execute(
        select(Submission.status, Submission.verdict, func.count()).group_by(Submission.status, Submission.verdict)
    )
    return [(r[0], r[1], r[2]) for r in rows]


def duration_histogram(s: Session, bounds: list[float]) -> tuple[list[int], float, int]:
    """Cumulative counts of finished grades per upper bound, their sum and count."""
    done = and_(Submission.status == Status.DONE.value, Submission.duration.is_not(None), Submission.cached.is_(False))
    cols = [func.sum(case((Submission.duration <= b, 1), else_=0)) for b in bounds]
    row = s.execute(select(*cols, func.sum(Submission.duration), func.count()).where(done)).one()
    return [int(v or 0) for v in row[: len(bounds)]], float(row[-2] or 0.0), int(row[-1] or 0)
