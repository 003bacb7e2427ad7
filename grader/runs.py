"""Runs, the leaderboard and paired comparison: submissions from the store turned into
metric inputs, and the metrics (grader.metrics, pure) turned into what the API, the
portal and the CLI show. Nothing here decides a verdict or touches Docker."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from grader.errors import TaskError
from grader import metrics
from grader.service import Service
from grader.store import runs as store_runs
from grader.store.models import Run, Status, Submission, Team


def plain(value: Any) -> Any:
    """Dataclasses, dates and tuples as JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return value


@dataclasses.dataclass
class Filters:
    suite: str | None = None
    variant: str | None = None
    since: dt.date | None = None
    until: dt.date | None = None

    def keep(self, a) -> bool:
        return (self.suite is None or a.suite == self.suite) and \
            (self.variant is None or a.prompt_variant == self.variant)


def attempts_of(svc: Service, rows: list[Submission]) -> tuple[list, int]:
    """The finished submissions as metric attempts, and how many are still queued or running."""
    out, pending = [], 0
    for sub in rows:
        if sub.status in (Status.QUEUED.value, Status.RUNNING.value):
            pending += 1
            continue
        if sub.status != Status.DONE.value or not sub.verdict:
            continue  # cancelled: never an attempt
        try:
            meta = svc.task(sub.task_id).metadata
            suite, difficulty, language, created = meta.suite, meta.difficulty, meta.language, meta.created_at
        except TaskError:
            suite = difficulty = language = created = None
        loc = (sub.result or {}).get("localization") or {}
        out.append(metrics.Attempt(task_id=sub.task_id, verdict=sub.verdict, trial=sub.trial, suite=suite,
                           difficulty=difficulty, language=language, prompt_variant=sub.prompt_variant,
                           created_at=created, precision=loc.get("precision"), recall=loc.get("recall"),
                           f1=loc.get("f1")))
    return out, pending


def run_meta(run: Run, team: Team) -> dict:
    return {"id": run.id, "name": run.name, "team": team.name, "method": run.method,
            "description": run.description, "project_url": run.project_url, "paper_url": run.paper_url,
            "public": run.public, "baseline": run.baseline, "hidden": run.hidden, "verified": run.verified,
            "created_at": run.created_at.isoformat() if run.created_at else None,
            "links": {"self": f"/v1/runs/{run.id}", "page": f"/runs/{run.id}"}}


def integrity_of(rows: list[Submission]) -> dict:
    """For hosts: how many of a run's grades showed tampering or were flagged by the audit."""
    tampered = flagged = 0
    for sub in rows:
        result = sub.result or {}
        tampered += bool(result.get("tampered"))
        flagged += bool(result.get("audit"))
    return {"tampered": tampered, "audit_flagged": flagged}


def run_view(svc: Service, run: Run, filters: Filters | None = None, *, host: bool = False) -> dict:
    """A run and its metrics; `host` adds the integrity counts (tampering, audit findings)."""
    filters = filters or Filters()
    with svc.db.read() as s:
        team = s.get(Team, run.team_id)
        rows = store_runs.submissions_of(s, run)
        meta = run_meta(run, team)
    attempts, pending = attempts_of(svc, rows)
    attempts = [a for a in attempts if filters.keep(a)]
    summary = plain(metrics.run_summary(attempts, since=filters.since, until=filters.until))
    errors = summary["errors"]
    view = {**meta, "submissions": len(rows), "pending": pending, "errors": errors,
            "complete": pending == 0 and errors == 0, "filters": plain(filters), "metrics": summary}
    if host:
        view["integrity"] = integrity_of(rows)
    return view


def leaderboard(svc: Service, filters: Filters, *, include_incomplete: bool = False,
                team_id: int | None = None, admin: bool = False) -> list[dict]:
    """Public, unhidden runs (and baselines) ranked by solve rate; incomplete runs are shown
    only when asked, and are never ranked."""
    with svc.db.read() as s:
        runs = [r for r in store_runs.visible(s, team_id=None, admin=False)]
    rows = []
    for run in runs:
        view = run_view(svc, run, filters)
        if not view["metrics"]["attempts"] and not view["pending"]:
            continue  # nothing of it in this window or suite
        if not view["complete"] and not include_incomplete:
            continue
        rows.append(view)
    ranked = sorted((r for r in rows if r["complete"]), key=_solve_key, reverse=True)
    for i, r in enumerate(ranked, 1):
        r["rank"] = i
    unranked = [dict(r, rank=None) for r in rows if not r["complete"]]
    return ranked + sorted(unranked, key=_solve_key, reverse=True)


def _solve_key(view: dict) -> float:
    v = (view["metrics"].get("solve_rate") or {}).get("value")
    return v if v is not None else -1.0


def compare(svc: Service, a: Run, b: Run, filters: Filters | None = None) -> dict:
    filters = filters or Filters()
    out = {}
    atts = []
    for key, run in (("a", a), ("b", b)):
        with svc.db.read() as s:
            team = s.get(Team, run.team_id)
            rows = store_runs.submissions_of(s, run)
            out[key] = run_meta(run, team)
        attempts, _ = attempts_of(svc, rows)
        atts.append([x for x in attempts if filters.keep(x) and metrics.in_window(x.created_at, filters.since,
                                                                                    filters.until)])
    out["comparison"] = plain(metrics.paired_comparison(atts[0], atts[1]))
    return out


EMPTY_PATCH_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def _latest(rows: list[dict]) -> dict[str, dict]:
    """Each task's newest submission (rows come oldest first): the one that stands for it
    in the SWE-bench report and the predictions, so the two always agree."""
    return {r["task_id"]: r for r in rows}


def swebench_report(rows: list[dict]) -> dict:
    """A run in SWE-bench's report format (its harness's final report): counts and id lists.
    `rows` are submissions (task_id, status, verdict, patch_sha256); the newest
    submission of a task stands for it. An empty patch is `empty_patch`, not graded; an
    ERROR is `error`; PASS is resolved; FAIL, PATCH FAILED and TIMED OUT are unresolved."""
    latest = _latest(rows)
    ids = {k: [] for k in ("submitted", "completed", "resolved", "unresolved", "empty_patch", "error", "incomplete")}
    for task_id in sorted(latest):
        r = latest[task_id]
        ids["submitted"].append(task_id)
        if r["patch_sha256"] == EMPTY_PATCH_SHA256:
            ids["empty_patch"].append(task_id)
        elif r["status"] != "done":
            ids["incomplete"].append(task_id)
        elif r["verdict"] == "ERROR":
            ids["error"].append(task_id)
        else:
            ids["completed"].append(task_id)
            ids["resolved" if r["verdict"] == "PASS" else "unresolved"].append(task_id)
    report = {"total_instances": len(latest)}
    report.update({f"{k}_instances": len(v) for k, v in ids.items()})
    report.update({f"{k}_ids": v for k, v in ids.items()})
    report["schema_version"] = 2
    return report


def swebench_predictions(rows: list[dict], model: str) -> list[dict]:
    """A run's patches as SWE-bench predictions, one per task (its newest submission, as in
    the report). `rows` are submissions (task_id, system, patch); model_name_or_path is the
    submission's system, else `model` (the run's name): SWE-bench's harness needs one."""
    return [{"instance_id": task_id, "model_name_or_path": r["system"] or model, "model_patch": r["patch"]}
            for task_id, r in sorted(_latest(rows).items())]
