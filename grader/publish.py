"""What a team says of its own run (its method, description, links, public or private) and
the host's marks on any run (baseline, hidden, verified), whichever door the change came
by (PATCH /v1/runs/<run>, the portal's run page): one transaction under the team's lock,
as a batch's chunk takes it, so that a run is never changed under a batch being stored.

Publishing is bounded: not while a batch is being stored into the run (`run_busy`), and
at most GRADER_MAX_PUBLISH_PER_DAY runs of a team a UTC day (`publish_quota`; the host is
not bound): every run published is one more on every reader's page. What is refused is
said by intake's `Refusal`, which the API maps to its status in one place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from grader import intake
from grader import runs as R
from grader.handles import Handles
from grader.intake import Refusal
from grader.store import phases as store_phases
from grader.store import runs as store_runs
from grader.store import submissions as subs
from grader.store.models import Run, Team, utcnow

HOST_MARKS = frozenset({"baseline", "hidden", "verified"})


def change(svc: Handles, found: Run, fields: dict[str, Any], *, admin: bool) -> dict[str, Any]:
    """Set `fields` (read by schemas.RunPatch) on the run `found`, which the caller may
    change (its own team's, or any for the host); the run as it is then (runs.run_meta)."""
    host_only = HOST_MARKS & fields.keys()
    if host_only and not admin:
        raise Refusal("forbidden", f"only the host (an admin key) sets {sorted(host_only)}")
    run_id = found.id
    with svc.db.write() as s:
        subs.lock_team(s, found.team_id)  # as a batch's chunk does: publishing waits for one being stored
        row = s.get(Run, run_id)
        if row is None:
            raise Refusal("not_found", f"no run {found.name!r} (deleted meanwhile)")
        first = row.published_at is None
        fields = _reviewed(s, row, fields, admin=admin)
        for k, v in fields.items():
            setattr(row, k, v)
        row.figures_stale = True  # on the board or off it: its readers' caches must know (store_runs.board_version)
        store_runs.publish(row)
        if row.review_requested_at is not None and row.published_at is None:
            row.published_at = utcnow()  # what the host reviews must not change meanwhile
        if first and row.published_at is not None:
            _may_publish(svc, s, row, admin=admin)
    with svc.db.read() as s:
        row, team = s.get(Run, run_id), s.get(Team, found.team_id)
        assert row is not None and team is not None
        return R.run_meta(row, team)


def _reviewed(s: Session, run: Run, fields: dict[str, Any], *, admin: bool) -> dict[str, Any]:
    """The approval queue: in a phase whose host reviews runs first (auto_publish off), a
    team asking for its run to be public gets it queued for review instead (it stays
    private, and is locked meanwhile); asking for private withdraws the request. The host
    approves by verifying the run (which makes it public) and refuses by making it private."""
    phase = store_phases.by_ids(s, {run.phase_id}).get(run.phase_id) if run.phase_id is not None else None
    if admin:
        if fields.get("verified") is True and run.review_requested_at is not None:
            run.review_requested_at = None
            return {"public": True, **fields}
        if fields.get("public") is False:
            run.review_requested_at = None
        return fields
    if phase is None or phase.auto_publish or run.verified:
        return fields
    if fields.get("public") is True and not run.public:
        run.review_requested_at = run.review_requested_at or utcnow()
        return {**fields, "public": False}
    if fields.get("public") is False:
        run.review_requested_at = None
    return fields


def not_storing(run: Run, what: str) -> None:
    """Refused (`run_busy`) while a batch is being stored into `run`: a run is changed
    between batches, never under one (grader/intake.py: RUN_LEASE)."""
    left = store_runs.storing(run)
    if left > 0:
        raise Refusal(
            "run_busy",
            f"a batch is being stored into run {run.name!r}; it can be {what} once that batch is in "
            "(try again in a few seconds)",
            retry_after=max(1, min(int(left) + 1, 30)),
        )


def _may_publish(svc: Handles, s: Session, run: Run, *, admin: bool) -> None:
    """Publishing `run` now, in this transaction (the module's docstring)."""
    not_storing(run, "published")
    if admin:
        return
    limit = svc.settings.max_publish_per_day
    today = store_runs.published_since(s, run.team_id, subs.start_of_day(), but=run.id)
    if today >= limit:
        raise Refusal(
            "publish_quota",
            f"your team has published {today} runs today; the limit is {limit} a day (UTC)",
            retry_after=intake.seconds_to_midnight(),
        )


@dataclass(frozen=True)
class _OnBehalf:
    """The run's team, as the host acts for it (intake.Submitter): not bound by the lock, a
    phase's window or limits, and its quotas not spent by the host's action."""

    team_id: int
    admin: bool = True
    daily_quota: int | None = 10**9
    queued_quota: int | None = 10**9


def regrade_errors(svc: Handles, run: Run) -> tuple[int, int]:
    """The host's re-grade of a run's ERRORs (machinery faults, never the team's): each
    ERROR attempt is submitted again as it was (task, patch, trial, system, prompt variant,
    metadata, phase, what it cost), replacing it in the run (it stays in the team's history, as an
    overwritten attempt does). How many were sent again, and how many were refused."""
    with svc.db.read() as s:
        rows = [r for r in store_runs.submissions_of(s, run) if r.status == "done" and r.verdict == "ERROR"]
        phase = store_phases.by_ids(s, {run.phase_id}).get(run.phase_id) if run.phase_id is not None else None
    items: list[intake.Item | Refusal] = [
        intake.Item(
            task_id=r.task_id,
            patch=r.patch.decode("utf-8", errors="surrogateescape"),
            run_id=run.name,
            system=r.system,
            trial=r.trial,
            prompt_variant=r.prompt_variant,
            metadata=r.meta,
            overwrite=True,
            phase=phase.slug if phase else None,
            cost_usd=r.cost_usd,
            input_tokens=r.input_tokens,
            output_tokens=r.output_tokens,
            api_seconds=r.api_seconds,
            wall_seconds=r.wall_seconds,
            reasoning_level=r.reasoning_level,
            imported=r.imported,
        )
        for r in rows
    ]
    if not items:
        return 0, 0
    answers = intake.accept(svc, _OnBehalf(run.team_id), items, [None] * len(items), exclusive=True)
    sent = sum(1 for a in answers if isinstance(a, intake.Accepted))
    return sent, len(answers) - sent
