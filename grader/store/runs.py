"""Runs: made when a team's first submission with a run_id arrives; found by their public
id, or by name within the caller's own team."""

from __future__ import annotations

import secrets

from sqlalchemy import or_, select
from sqlalchemy.exc import IntegrityError

from grader.errors import StoreError
from grader.store.db import Database
from grader.store.models import Run, Submission, Team


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


def find(s, ref: str, *, team_id: int | None) -> Run | None:
    """A run by public id, or by name among `team_id`'s runs."""
    run = s.get(Run, ref) if len(ref) == 16 else None
    if run is None and team_id is not None:
        run = s.scalar(select(Run).where(Run.team_id == team_id, Run.name == ref))
    return run


def visible(s, *, team_id: int | None, admin: bool) -> list[Run]:
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


def submissions_of(s, run: Run) -> list[Submission]:
    return list(s.scalars(select(Submission).where(Submission.team_id == run.team_id, Submission.run_id == run.name)
                          .order_by(Submission.id)))
