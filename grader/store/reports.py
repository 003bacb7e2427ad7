"""Read-only summaries the command line prints, as plain records: the store owns its
queries, and the CLI formats what they return."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from grader.store.models import Team


@dataclass(frozen=True)
class TeamSummary:
    """A team as `grader keys list` shows it: its quotas (None: the service's default) and
    how many of its keys are live, never the keys."""

    name: str
    admin: bool
    daily_quota: int | None
    queued_quota: int | None
    live_keys: int
    created_at: dt.datetime


def team_summaries(session: Session) -> list[TeamSummary]:
    """Every team, by name."""
    return [
        TeamSummary(
            t.name, t.admin, t.daily_quota, t.queued_quota, sum(1 for k in t.keys if k.revoked_at is None), t.created_at
        )
        for t in session.scalars(select(Team).order_by(Team.name))
    ]
