"""Challenge phases (store/models.py: Phase): found by slug, set up by the host, and the
rules every door reads the same way: whether a phase takes submissions now (and why not),
how much of its limits a team has used, and whether a team may see its results.

A private phase scores on a split whose per-task results its participants never see:
not a submission's verdict or result, not a run's per-task table, report, logs or
comparison; its aggregate figures only once the phase has ended and the host has set
`reveal`. The host sees everything, always."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from grader.store.models import Phase, Status, Submission, utcnow

FIELDS = (
    "name",
    "suite",
    "description",
    "starts_at",
    "ends_at",
    "daily_limit",
    "total_limit",
    "private",
    "reveal",
    "auto_publish",
)


def by_slug(s: Session, slugs: Collection[str]) -> dict[str, Phase]:
    if not slugs:
        return {}
    return {p.slug: p for p in s.scalars(select(Phase).where(Phase.slug.in_(sorted(slugs))))}


def named(s: Session, slug: str) -> Phase | str:
    """The phase of `slug`, or (none has it) the slugs there are, for the refusal to name."""
    found = by_slug(s, {slug}).get(slug)
    return found if found is not None else ", ".join(p.slug for p in all_(s)) or "none"


def all_(s: Session) -> list[Phase]:
    return list(s.scalars(select(Phase).order_by(Phase.starts_at.is_(None).desc(), Phase.starts_at, Phase.slug)))


def by_ids(s: Session, ids: Collection[int]) -> dict[int, Phase]:
    if not ids:
        return {}
    return {p.id: p for p in s.scalars(select(Phase).where(Phase.id.in_(sorted(ids))))}


def put(s: Session, slug: str, fields: dict[str, Any]) -> tuple[Phase, bool]:
    """Create phase `slug` with `fields`, or change the fields given of the one there is
    (its suite too, while nothing was submitted to it); the phase and whether it is new."""
    phase = s.scalar(select(Phase).where(Phase.slug == slug))
    new = phase is None
    if phase is None:
        phase = Phase(slug=slug, private=False, reveal=False, auto_publish=True)
        s.add(phase)
    for k in FIELDS:
        if k in fields:
            setattr(phase, k, fields[k])
    s.flush()
    return phase, new


def _aware(t: dt.datetime | None) -> dt.datetime | None:
    return t if t is None or t.tzinfo else t.replace(tzinfo=dt.UTC)


def closed(phase: Phase, now: dt.datetime | None = None) -> str | None:
    """Why `phase` takes no submission now (not open yet, or ended), or None."""
    now = now or utcnow()
    starts, ends = _aware(phase.starts_at), _aware(phase.ends_at)
    if starts is not None and now < starts:
        return f"phase {phase.slug!r} opens at {starts:%Y-%m-%d %H:%M} UTC; it takes no submission before then"
    if ends is not None and now >= ends:
        return f"phase {phase.slug!r} ended at {ends:%Y-%m-%d %H:%M} UTC; it takes no more submissions"
    return None


def ended(phase: Phase, now: dt.datetime | None = None) -> bool:
    ends = _aware(phase.ends_at)
    return ends is not None and (now or utcnow()) >= ends


def results_shown(phase: Phase | None, *, host: bool, now: dt.datetime | None = None) -> bool:
    """Whether a team sees the aggregate figures of a run in `phase` (a host always does;
    outside a private phase, everyone who may see the run)."""
    if host or phase is None or not phase.private:
        return True
    return phase.reveal and ended(phase, now)


def per_task_shown(phase: Phase | None, *, host: bool) -> bool:
    """Whether a team sees per-task results (verdicts, results, per-task tables) of `phase`."""
    return host or phase is None or not phase.private


def used(s: Session, phase_id: int, team_id: int, since: dt.datetime) -> tuple[int, int]:
    """A team's submissions to a phase (cancelled ones aside) since `since`, and in all."""
    base = (
        select(func.count())
        .select_from(Submission)
        .where(
            Submission.phase_id == phase_id, Submission.team_id == team_id, Submission.status != Status.CANCELLED.value
        )
    )
    today = s.scalar(base.where(Submission.queued_at >= since)) or 0
    total = s.scalar(base) or 0
    return int(today), int(total)


def used_at_all(s: Session, phase_id: int) -> bool:
    """Whether anything was ever submitted to the phase."""
    return s.scalar(select(Submission.id).where(Submission.phase_id == phase_id).limit(1)) is not None


def view(phase: Phase, now: dt.datetime | None = None) -> dict[str, Any]:
    """A phase as the API and the portal show it to anyone."""
    why = closed(phase, now)
    starts, ends = _aware(phase.starts_at), _aware(phase.ends_at)
    return {
        "slug": phase.slug,
        "name": phase.name,
        "suite": phase.suite,
        "description": phase.description,
        "starts_at": starts.isoformat() if starts else None,
        "ends_at": ends.isoformat() if ends else None,
        "open": why is None,
        "closed_because": why,
        "daily_limit": phase.daily_limit,
        "total_limit": phase.total_limit,
        "private": phase.private,
        "reveal": phase.reveal,
        "auto_publish": phase.auto_publish,
        "links": {"self": f"/v1/phases/{phase.slug}", "page": f"/phases/{phase.slug}"},
    }
