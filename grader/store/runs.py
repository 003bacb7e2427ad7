"""Runs: made when a team's first submission with a run_id arrives; found by their public
id, or by name within the caller's own team.

A run is *locked* once it has been published (made public, or marked a baseline): its
figures have been shown, so it takes no more submissions from its team (they would be
trials added after the fact, retried until they pass) and cannot be deleted. Making it
private again does not unlock it. Submissions with a host (admin) key are not refused.
Before that, its team may delete it: the run goes, and its submissions stay in the
team's history (and its quota) with no run."""

from __future__ import annotations

import datetime as dt
import secrets
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Row, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from grader.errors import StoreError
from grader.names import normal
from grader.store.db import Database
from grader.store.models import Run, Submission, Team, utcnow

if TYPE_CHECKING:
    from sqlalchemy.engine import CursorResult


def ensure_runs(db: Database, team_id: int, names: set[str]) -> None:
    """Make the runs that do not exist yet; safe against a concurrent request making them."""
    if not names:
        return
    with db.read() as s:
        have = set(s.scalars(select(Run.name).where(Run.team_id == team_id, Run.name.in_(names))))
    for name in sorted(names - have):
        try:
            with db.write() as s:
                s.add(Run(id=secrets.token_hex(8), team_id=team_id, name=name))
        except StoreError as exc:
            if not isinstance(exc.__cause__, IntegrityError):
                raise  # else: made meanwhile by another request


def find(s: Session, ref: str, *, team_id: int | None) -> Run | None:
    """A run by name among `team_id`'s own runs, else by public id: a team's own name wins
    for that team, so that no other team's run (whose id a name made before grader/names.py
    refused id-shaped names may spell) stands in for it. Names are looked up NFC, and as
    given (a name stored before they were normalised)."""
    if team_id is not None:
        spellings = list(dict.fromkeys((normal(ref), ref)))
        own = s.scalars(select(Run).where(Run.team_id == team_id, Run.name.in_(spellings))).all()
        if own:
            return min(own, key=lambda r: spellings.index(r.name))
    return s.get(Run, ref) if len(ref) == 16 else None


def visible(s: Session, *, team_id: int | None, admin: bool) -> list[Run]:
    """The runs a caller may see: its own team's, every public one that the host has not
    hidden, and every run for an admin."""
    q = select(Run).join(Team)
    if not admin:
        shown = (Run.public.is_(True) | Run.baseline.is_(True)) & Run.hidden.is_(False)
        q = q.where(or_(shown, Run.team_id == team_id) if team_id is not None else shown)
    return list(s.scalars(q.order_by(Run.created_at)))


def owns(run: Run, *, team_id: int | None, admin: bool) -> bool:
    """Whether the caller may change the run and read its patches: its team, or the host."""
    return admin or run.team_id == team_id


def may_see(run: Run, *, team_id: int | None, admin: bool) -> bool:
    return owns(run, team_id=team_id, admin=admin) or ((run.public or run.baseline) and not run.hidden)


# What the metrics read of a submission: stored with its verdict (migration 0006), so that
# neither a run's figures nor the leaderboard load a result or a patch.
METRIC_COLUMNS = (
    Submission.task_id,
    Submission.status,
    Submission.verdict,
    Submission.trial,
    Submission.prompt_variant,
    Submission.loc_precision,
    Submission.loc_recall,
    Submission.loc_f1,
    Submission.tampered,
    Submission.audit_flagged,
)


def metric_rows_of(s: Session, run: Run) -> list[Row[Any]]:
    """A run's submissions as the metrics read them (METRIC_COLUMNS), oldest first."""
    return list(
        s.execute(
            select(*METRIC_COLUMNS)
            .where(Submission.team_id == run.team_id, Submission.run_id == run.name)
            .order_by(Submission.id)
        )
    )


def board(s: Session) -> list[tuple[Run, Team, list[Row[Any]]]]:
    """Every public, unhidden run (and baseline) that has submissions, with its team
    and its submissions as the metrics read them (METRIC_COLUMNS), oldest first, in
    `visible`'s order: the leaderboard's one query."""
    shown = (Run.public.is_(True) | Run.baseline.is_(True)) & Run.hidden.is_(False)
    rows = s.execute(
        select(Run, Team, *METRIC_COLUMNS)
        .join(Team, Team.id == Run.team_id)
        .join(Submission, (Submission.team_id == Run.team_id) & (Submission.run_id == Run.name))
        .where(shown)
        .order_by(Run.created_at, Run.id, Submission.id)
    )
    out: list[tuple[Run, Team, list[Row[Any]]]] = []
    for row in rows:
        run, team = row[0], row[1]
        if not out or out[-1][0].id != run.id:
            out.append((run, team, []))
        out[-1][2].append(cast("Row[Any]", row))
    return out


def submissions_of(s: Session, run: Run) -> list[Submission]:
    return list(
        s.scalars(
            select(Submission)
            .where(Submission.team_id == run.team_id, Submission.run_id == run.name)
            .order_by(Submission.id)
        )
    )


def locked(run: Run) -> bool:
    return run.published_at is not None


def publish(run: Run, now: dt.datetime | None = None) -> None:
    """Called on a row being written when it is made public or a baseline: the first time
    locks it."""
    if (run.public or run.baseline) and run.published_at is None:
        run.published_at = now or utcnow()


def locked_names(s: Session, team_id: int, names: set[str]) -> dict[str, Run]:
    """Of the run names a team submits to, the ones that are locked."""
    if not names:
        return {}
    rows = s.scalars(select(Run).where(Run.team_id == team_id, Run.name.in_(names), Run.published_at.is_not(None)))
    return {r.name: r for r in rows}


def delete(s: Session, run: Run) -> int:
    """Delete an unpublished run (the caller checks, in this transaction): its submissions
    leave it (run_id cleared) and stay the team's; returns how many. The name is free again."""
    result = s.execute(
        update(Submission).where(Submission.team_id == run.team_id, Submission.run_id == run.name).values(run_id=None)
    )
    detached: int = cast("CursorResult[Any]", result).rowcount  # an UPDATE's result is a cursor's
    s.delete(run)
    return detached
