"""Runs: made when a team's first submission with a run_id arrives; found by their public
id, or by name within the caller's own team.

A run is *locked* once it has been published (made public, or marked a baseline): its
figures have been shown, so it takes no more submissions from its team (they would be
trials added after the fact, retried until they pass) and cannot be deleted. Making it
private again does not unlock it. Submissions with a host (admin) key are not refused.
Before that, its team may delete it: the run goes, and its submissions stay in the
team's history (and its quota, unless the host refunds deleted runs' never-graded
submissions: submissions.withdraw) with no run."""

from __future__ import annotations

import dataclasses
import datetime as dt
import secrets
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from sqlalchemy import ColumnElement, case, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from grader.errors import StoreError
from grader.metrics import GRADED
from grader.names import normal
from grader.store.db import Database
from grader.store.models import Run, RunFigures, Submission, Team, utcnow

if TYPE_CHECKING:
    from sqlalchemy.engine import CursorResult


def ensure_runs(
    db: Database,
    team_id: int,
    names: set[str],
    *,
    lease: Lease | None = None,
    phases: dict[str, int | None] | None = None,
) -> dict[str, str]:
    """Make the runs that do not exist yet (safe against a concurrent request making them),
    each in its phase of `phases` (name -> phase id), graded here (its origin: a run
    intake makes is graded as its team sends it); every run's id by name. `lease`: a
    batch stored in several transactions is about to go into them, and takes their intake
    lease first (`storing`)."""
    if not names:
        return {}

    def have() -> dict[str, str]:
        with db.read() as s:
            rows = s.execute(select(Run.name, Run.id).where(Run.team_id == team_id, Run.name.in_(names)))
            return {name: run_id for name, run_id in rows}

    runs = have()
    for name in sorted(names - set(runs)):
        run_id = secrets.token_hex(8)
        try:
            with db.write() as s:
                s.add(Run(id=run_id, team_id=team_id, name=name, phase_id=(phases or {}).get(name), origin=GRADED))
            runs[name] = run_id
        except StoreError as exc:
            if not isinstance(exc.__cause__, IntegrityError):
                raise
            runs = {**have(), **runs}  # made meanwhile by another request
    if lease:
        with db.write() as s:
            lease.renew(s, set(runs.values()))
    return runs


@dataclasses.dataclass(frozen=True)
class Lease:
    """A batch's hold on the runs it is stored into, between its transactions: renewed by
    each, given back at the end; one that is not renewed (its process died) runs out."""

    token: str
    seconds: float

    def renew(self, s: Session, run_ids: set[str]) -> None:
        if run_ids:
            until = utcnow() + dt.timedelta(seconds=self.seconds)
            s.execute(update(Run).where(Run.id.in_(run_ids)).values(intake_until=until, intake_token=self.token))

    def release(self, db: Database, run_ids: set[str]) -> None:
        """Given back, unless another batch has taken the run since (its own end gives it back)."""
        if run_ids:
            with db.write() as s:
                s.execute(
                    update(Run)
                    .where(Run.id.in_(run_ids), Run.intake_token == self.token)
                    .values(intake_until=None, intake_token=None)
                )


def storing(run: Run, now: dt.datetime | None = None) -> float:
    """Seconds left of a batch's intake lease on `run` (0: none is being stored into it)."""
    if run.intake_until is None:
        return 0.0
    until = run.intake_until if run.intake_until.tzinfo else run.intake_until.replace(tzinfo=dt.UTC)
    return max(0.0, (until - (now or utcnow())).total_seconds())


def changed_under(s: Session, team_id: int, runs: dict[str, str | None], *, admin: bool) -> dict[str, Run | None]:
    """Of the runs a chunk of a batch goes into (name -> the id it had when the batch
    began), those that changed since, read in the chunk's own transaction after the team's
    lock: deleted (None: a run of that name now, if any, is another run) or published and
    so locked (the run) unless the team is the host. Their items are refused."""
    if not runs:
        return {}
    now = {r.name: r for r in s.scalars(select(Run).where(Run.team_id == team_id, Run.name.in_(set(runs))))}
    out: dict[str, Run | None] = {}
    for name, run_id in runs.items():
        run = now.get(name)
        if run is None or run.id != run_id:
            out[name] = None
        elif locked(run) and not admin:
            out[name] = run
    return out


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


class MetricRow(NamedTuple):
    """What the metrics read of a submission: stored with its verdict (migration 0006), so
    that neither a run's figures nor the leaderboard load a result or a patch. A plain
    tuple: a run's figures read every field of each of its submissions, and a tuple's
    field is read several times faster than a Row's."""

    task_id: str
    status: str
    verdict: str | None
    trial: int | None
    prompt_variant: str | None
    loc_precision: float | None
    loc_recall: float | None
    loc_f1: float | None
    tampered: bool | None
    audit_flagged: bool | None
    cost_usd: float | None
    input_tokens: int | None
    output_tokens: int | None
    api_seconds: float | None
    wall_seconds: float | None
    reasoning_level: str | None
    imported: bool | None


METRIC_COLUMNS = tuple(getattr(Submission, name) for name in MetricRow._fields)


def metric_rows_of(s: Session, run: Run) -> list[MetricRow]:
    """A run's submissions as the metrics read them (METRIC_COLUMNS), oldest first."""
    rows = s.execute(
        select(*METRIC_COLUMNS)
        .where(Submission.team_id == run.team_id, Submission.run_id == run.name)
        .order_by(Submission.id)
    )
    return [MetricRow._make(row) for row in rows]


def _in_phase(phase_id: int | None) -> ColumnElement[bool]:
    """A phase's board holds its runs; the board outside phases the runs of none."""
    return Run.phase_id.is_(None) if phase_id is None else Run.phase_id == phase_id


def _shown() -> ColumnElement[bool]:
    """On the leaderboard: public or a baseline, and not hidden by the host."""
    return (Run.public.is_(True) | Run.baseline.is_(True)) & Run.hidden.is_(False)


def shown(s: Session, *, phase_id: int | None) -> list[tuple[Run, Team]]:
    """Every public, unhidden run (and baseline) of a board (a phase's, or the one outside
    phases) with its team, in `visible`'s order: one query, no submission read."""
    rows = s.execute(
        select(Run, Team)
        .join(Team, Team.id == Run.team_id)
        .where(_shown(), _in_phase(phase_id))
        .order_by(Run.created_at, Run.id)
    )
    return [(r[0], r[1]) for r in rows]


def metric_rows(s: Session, run_ids: Collection[str]) -> dict[str, list[MetricRow]]:
    """The submissions of these runs (at most 500: every backend's bound on parameters) as
    the metrics read them (METRIC_COLUMNS), oldest first, by run id: one query, plain
    columns (no run or team loaded with every row). A run without any is left out."""
    ids = list(run_ids)
    if len(ids) > 500:
        raise ValueError("at most 500 runs a read")
    out: dict[str, list[MetricRow]] = {}
    if not ids:
        return out
    rows = s.execute(
        select(Run.id, *METRIC_COLUMNS)
        .join(Submission, (Submission.team_id == Run.team_id) & (Submission.run_id == Run.name))
        .where(Run.id.in_(ids))
        .order_by(Submission.id)
    )
    make = MetricRow._make
    for row in rows:
        out.setdefault(row[0], []).append(make(row[1:]))
    return out


# --- the figures stored with a run (grader/runs.py computes them) ---------------------------------
def mark_stale(s: Session, team_id: int, names: Collection[str]) -> None:
    """The runs `names` of a team have changed (submissions were added): their figures are
    computed again when next read. In the transaction that changed them."""
    if names:
        s.execute(update(Run).where(Run.team_id == team_id, Run.name.in_(list(names))).values(figures_stale=True))


def needing_figures(s: Session, key: str, *, run_ids: Collection[str] | None = None) -> list[str]:
    """Of the runs on the leaderboard (or of `run_ids`), those whose stored figures are
    stale or were computed under another task set than `key`."""
    where = _shown() if run_ids is None else Run.id.in_(list(run_ids))
    old = Run.figures_stale.is_(True) | Run.figures_key.is_(None) | (Run.figures_key != key)
    return list(s.scalars(select(Run.id).where(where, old)))


@dataclasses.dataclass(frozen=True)
class Standing:
    """What the leaderboard orders a run by, under no filter: whether it is listed at all
    (something of it was attempted, or is still to be graded), complete (nothing pending,
    no ERROR), its resolved tasks and solve rate over its suites' whole task set (-1: none),
    its success rate (-1: none), the tasks attempted and in its task set, and that task
    set's suites (its table on the board: `TABLE_JOIN` between them)."""

    listed: bool
    complete: bool
    resolved: float
    solve: float
    success: float
    attempted: int
    tasks: int
    suites: str = ""


TABLE_JOIN = " + "  # between the suites of a task set of several, in board_suites


def begin_figures(s: Session, run_ids: Collection[str]) -> None:
    """The figures of these runs are being computed from their submissions as read after
    this commits: not stale from now on, unless a change after this marks them so again
    (and then they are computed again when next read; a change is never hidden)."""
    ids = list(run_ids)
    for at in range(0, len(ids), 500):
        s.execute(update(Run).where(Run.id.in_(ids[at : at + 500])).values(figures_stale=False))


def save_figures(
    s: Session, run_id: str, figures: dict[str, Any], summary: dict[str, Any], standing: Standing, key: str
) -> None:
    """Store a run's figures (computed after begin_figures), those the leaderboard shows of
    it (`summary`: no per-task table) and what the leaderboard orders it by."""
    # written over in one statement, never read first (a merge would load the old figures:
    # 230 KB for 2,000 tasks), whoever else stores the same run's at the same time
    dialect = postgresql if s.get_bind().dialect.name == "postgresql" else sqlite
    row = dialect.insert(RunFigures).values(run_id=run_id, figures=figures, summary=summary)
    new = {"figures": row.excluded.figures, "summary": row.excluded.summary}
    s.execute(row.on_conflict_do_update(index_elements=[RunFigures.run_id], set_=new))
    s.execute(
        update(Run)
        .where(Run.id == run_id)
        .values(
            figures_key=key,
            figures_at=utcnow(),
            board_listed=standing.listed,
            board_complete=standing.complete,
            board_resolved=standing.resolved,
            board_solve=standing.solve,
            board_success=standing.success,
            board_attempted=standing.attempted,
            board_tasks=standing.tasks,
            board_suites=standing.suites,
        )
    )


SORTS = {
    "resolved": (Run.board_resolved, Run.board_solve),
    "solve_rate": (Run.board_solve, Run.board_resolved),
    "success_rate": (Run.board_success, Run.board_resolved),
    "tasks": (Run.board_attempted, Run.board_tasks),
    "name": (func.lower(Run.name), Team.name),
}


def board_page(
    s: Session,
    *,
    phase_id: int | None = None,
    include_incomplete: bool,
    offset: int,
    limit: int,
    sort: str | None = None,
    desc: bool = True,
) -> tuple[list[tuple[Run, Team, dict[str, Any] | None]], int, int]:
    """A page of the leaderboard from the stored figures (those it shows: no per-task
    table), one table per task set (board_suites) after another: in each, with no `sort`, complete runs first in their
    rank's order, then incomplete ones (when asked); with one, every listed run of the
    table by that column. The page's runs with their teams, how many runs are listed, and
    how many of them are complete (ranked)."""
    listed = _shown() & Run.board_listed.is_(True) & _in_phase(phase_id)
    if not include_incomplete:
        listed = listed & Run.board_complete.is_(True)
    columns = SORTS[sort or "resolved"]
    order: list[Any] = [Run.board_suites] + ([] if sort else [Run.board_complete.desc()])
    order += [c.desc() if desc else c.asc() for c in columns]
    order += [Run.created_at, Run.id]
    # the page's ids first (narrow rows sorted), then those runs whole with their figures
    ids = list(
        s.scalars(
            select(Run.id).join(Team, Team.id == Run.team_id).where(listed).order_by(*order).offset(offset).limit(limit)
        )
    )
    found = {
        r[0].id: (r[0], r[1], r[2])
        for r in s.execute(
            select(Run, Team, RunFigures.summary)
            .join(Team, Team.id == Run.team_id)
            .outerjoin(RunFigures, RunFigures.run_id == Run.id)
            .where(Run.id.in_(ids))
        )
    }
    total, complete = s.execute(
        select(func.count(), func.sum(case((Run.board_complete.is_(True), 1), else_=0))).where(listed)
    ).one()
    return [found[i] for i in ids if i in found], int(total or 0), int(complete or 0)


def stored_figures(s: Session, run_id: str) -> tuple[Run, Team, dict[str, Any] | None] | None:
    """A run, its team and its stored figures (None before they were first computed)."""
    row = s.execute(
        select(Run, Team, RunFigures.figures)
        .join(Team, Team.id == Run.team_id)
        .outerjoin(RunFigures, RunFigures.run_id == Run.id)
        .where(Run.id == run_id)
    ).one_or_none()
    return (row[0], row[1], row[2]) if row is not None else None


def rank_of(s: Session, run: Run) -> int:
    """A complete run's rank in its table of the unfiltered board (the runs over the same
    task set): 1 + the complete listed runs of that table ahead of it (more resolved; as
    many and a higher solve rate; tied, and made earlier)."""
    ahead = (
        (Run.board_resolved > run.board_resolved)
        | ((Run.board_resolved == run.board_resolved) & (Run.board_solve > run.board_solve))
        | (
            (Run.board_resolved == run.board_resolved)
            & (Run.board_solve == run.board_solve)
            & ((Run.created_at < run.created_at) | ((Run.created_at == run.created_at) & (Run.id < run.id)))
        )
    )
    listed = (
        _shown()
        & Run.board_listed.is_(True)
        & Run.board_complete.is_(True)
        & (Run.board_suites == run.board_suites)
        & _in_phase(run.phase_id)
    )
    return 1 + int(s.scalar(select(func.count()).select_from(Run).where(listed, ahead)) or 0)


def runs_with_teams(s: Session, run_ids: Collection[str]) -> list[tuple[Run, Team]]:
    if not run_ids:
        return []
    rows = s.execute(select(Run, Team).join(Team, Team.id == Run.team_id).where(Run.id.in_(list(run_ids))))
    return [(r[0], r[1]) for r in rows]


def board_state(s: Session, key: str) -> tuple[int, str, int]:
    """In one query: how many runs the leaderboard shows, the newest time one of their
    figures was stored, and how many of them need their figures computed again (stale, or
    under another task set than `key`). The first two change whenever the board may, once
    the third is 0: a change marks its run stale, and storing its figures moves the time
    (publishing or hiding a run marks it stale too)."""
    old = Run.figures_stale.is_(True) | Run.figures_key.is_(None) | (Run.figures_key != key)
    count, newest, needing = s.execute(
        select(func.count(), func.max(Run.figures_at), func.sum(case((old, 1), else_=0))).where(_shown())
    ).one()
    return int(count or 0), str(newest), int(needing or 0)


def status_counts(s: Session, run: Run) -> dict[str, int]:
    """How many of a run's submissions are queued, running, done and cancelled: one query,
    however large the run (its page follows a run while it grades)."""
    rows = s.execute(
        select(Submission.status, func.count())
        .where(Submission.team_id == run.team_id, Submission.run_id == run.name)
        .group_by(Submission.status)
    )
    return {str(status): int(n) for status, n in rows}


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


def published_since(s: Session, team_id: int, since: dt.datetime, *, but: str) -> int:
    """How many of the team's runs other than `but` were first published at or after `since`."""
    return (
        s.scalar(
            select(func.count())
            .select_from(Run)
            .where(Run.team_id == team_id, Run.id != but, Run.published_at >= since)
        )
        or 0
    )


def phases_of(s: Session, team_id: int, names: set[str]) -> dict[str, int | None]:
    """Of a team's run names, those that exist, with the phase each was made for (or None)."""
    if not names:
        return {}
    rows = s.execute(select(Run.name, Run.phase_id).where(Run.team_id == team_id, Run.name.in_(names)))
    return {name: phase_id for name, phase_id in rows}


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


def for_host(s: Session, *, team_id: int | None = None, phase_id: int | None = None) -> list[dict[str, Any]]:
    """Every run (of a team, of a phase) with what a host filters and acts on: its flags and
    its submissions counted (all, still queued or running, ERROR, tampered, flagged by the
    audit): two queries, the counts grouped in the database."""
    q = select(Run, Team).join(Team, Team.id == Run.team_id)
    if team_id is not None:
        q = q.where(Run.team_id == team_id)
    if phase_id is not None:
        q = q.where(Run.phase_id == phase_id)
    runs = list(s.execute(q.order_by(Run.review_requested_at.is_(None), Run.created_at.desc())))
    pending = Submission.status.in_(["queued", "running"])
    counts = {
        (team, name): (int(n), int(p or 0), int(e or 0), int(t or 0), int(a or 0))
        for team, name, n, p, e, t, a in s.execute(
            select(
                Submission.team_id,
                Submission.run_id,
                func.count(),
                func.sum(case((pending, 1), else_=0)),
                func.sum(case((Submission.verdict == "ERROR", 1), else_=0)),
                func.sum(case((Submission.tampered.is_(True), 1), else_=0)),
                func.sum(case((Submission.audit_flagged.is_(True), 1), else_=0)),
            )
            .where(Submission.run_id.is_not(None))
            .group_by(Submission.team_id, Submission.run_id)
        )
    }
    out = []
    for run, team in runs:
        n, p, e, t, a = counts.get((run.team_id, run.name), (0, 0, 0, 0, 0))
        out.append(
            {"run": run, "team": team, "submissions": n, "pending": p, "errors": e, "tampered": t, "audit_flagged": a}
        )
    return out
