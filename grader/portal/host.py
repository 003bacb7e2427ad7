"""The host's pages of the portal (an admin key signed in): every run, filtered by team,
suite, phase and flags (awaiting review, ERRORs, tampering, audit findings, hidden), with
the host's actions on each (hide, verify, mark a baseline, approve or refuse a review,
re-grade its ERRORs); and the teams with their keys (create a team, its key shown once;
another key; revoke one; set quotas). What the actions change goes through the same code
as the API's (grader/publish.py, grader/store/keys.py); this module reads the forms."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import select

from grader.handles import Handles
from grader.store import phases as store_phases
from grader.store import runs as store_runs
from grader.store.models import MAX_ROW_ID, ApiKey, Run, Team, utcnow

FLAGS = {
    "review": "awaiting review",
    "errors": "with ERRORs",
    "tampered": "tampering seen",
    "audit": "audit findings",
    "hidden": "hidden",
    "public": "public",
    "baseline": "baselines",
}
ACTIONS = {
    "hide": {"hidden": True},
    "unhide": {"hidden": False},
    "verify": {"verified": True},
    "unverify": {"verified": False},
    "baseline": {"baseline": True},
    "unbaseline": {"baseline": False},
    "approve": {"verified": True},
    "refuse": {"public": False},
}


def runs(svc: Handles, args: Mapping[str, str]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The runs a host asked for, and the filters as read."""
    said = {k: (args.get(k) or "") for k in ("team", "suite", "phase", "flag")}
    with svc.db.read() as s:
        team = s.scalar(select(Team).where(Team.name == said["team"])) if said["team"] else None
        phase = store_phases.by_slug(s, {said["phase"]}).get(said["phase"]) if said["phase"] else None
        rows = store_runs.for_host(
            s, team_id=team.id if team else (-1 if said["team"] else None), phase_id=phase.id if phase else None
        )
        if said["phase"] and phase is None:
            rows = []
        slugs = {p.id: p.slug for p in store_phases.all_(s)}
    keep = []
    for r in rows:
        run: Run = r["run"]
        if said["suite"] and said["suite"] not in run.board_suites.split(store_runs.TABLE_JOIN):
            continue
        flag = said["flag"]
        if flag and not {
            "review": run.review_requested_at is not None,
            "errors": r["errors"] > 0,
            "tampered": r["tampered"] > 0,
            "audit": r["audit_flagged"] > 0,
            "hidden": run.hidden,
            "public": run.public,
            "baseline": run.baseline,
        }.get(flag, True):
            continue
        r["phase"] = slugs.get(run.phase_id) if run.phase_id is not None else None
        keep.append(r)
    return keep, said


def teams(svc: Handles) -> list[dict[str, Any]]:
    with svc.db.read() as s:
        out = []
        for t in s.scalars(select(Team).order_by(Team.name)):
            keys = sorted(t.keys, key=lambda k: k.id)
            out.append(
                {
                    "id": t.id,
                    "name": t.name,
                    "admin": t.admin,
                    "daily_quota": t.daily_quota,
                    "queued_quota": t.queued_quota,
                    "keys": [
                        {"id": k.id, "prefix": k.prefix, "created_at": k.created_at, "revoked_at": k.revoked_at}
                        for k in keys
                    ],
                }
            )
        return out


def quota(raw: str) -> int | None | str:
    """A quota field: empty for the service's default, else a whole number (or why not)."""
    raw = raw.strip()
    if not raw:
        return None
    try:
        n = int(raw)
    except ValueError:
        return f"{raw!r} is not a whole number"
    return n if 0 <= n <= 10**9 else "a quota is from 0 to 1,000,000,000"


def revoke(svc: Handles, key_id: int) -> str | None:
    """Revoke one key; the name of its team, or None when there is no such live key."""
    if key_id > MAX_ROW_ID:
        return None
    with svc.db.write() as s:
        key = s.get(ApiKey, key_id)
        if key is None or key.revoked_at is not None:
            return None
        key.revoked_at = utcnow()
        return key.team.name
