"""Runs, the leaderboard and paired comparison: submissions from the store turned into
metric inputs, and the metrics (grader.metrics, pure) turned into what the API, the
portal and the CLI show. Nothing here decides a verdict or touches Docker.

Every figure here, the SWE-bench report and the predictions export included, reduces a
task's trials by the one rule written in grader.metrics' docstring (resolved: most valid
trials passed; solve rate: the mean over tasks of the share passed)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from grader import metrics
from grader.errors import TaskError
from grader.handles import Handles
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
    language: str | None = None

    def keep(self, a: metrics.Attempt) -> bool:
        return (
            (self.suite is None or a.suite == self.suite)
            and (self.variant is None or a.prompt_variant == self.variant)
            and (self.language is None or a.language == self.language)
        )


class FilterError(ValueError):
    """Raised when a query's filters cannot be read: a date that is not YYYY-MM-DD, or
    `since` after `until`. The message is the refusal the API and the portal show."""


def parse_filters(args: Mapping[str, str]) -> Filters:
    """The filters a query string names (suite, variant, language, since, until), read the
    same way for the API's routes and the portal's pages."""

    def date(name: str) -> dt.date | None:
        raw = args.get(name)
        if not raw:
            return None
        try:
            return dt.date.fromisoformat(raw)
        except ValueError:
            raise FilterError(f"{name} must be a date, YYYY-MM-DD, not {raw!r}") from None

    f = Filters(
        suite=args.get("suite") or None,
        variant=args.get("variant") or None,
        since=date("since"),
        until=date("until"),
        language=args.get("language") or None,
    )
    if f.since and f.until and f.since > f.until:
        raise FilterError("since is after until")
    return f


class Graded(Protocol):
    """A submission as the metrics read it (grader/store/runs.py: METRIC_COLUMNS): a
    Submission, or a row of those columns alone."""

    @property
    def task_id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def verdict(self) -> str | None: ...
    @property
    def trial(self) -> int | None: ...
    @property
    def prompt_variant(self) -> str | None: ...
    @property
    def loc_precision(self) -> float | None: ...
    @property
    def loc_recall(self) -> float | None: ...
    @property
    def loc_f1(self) -> float | None: ...
    @property
    def tampered(self) -> bool | None: ...
    @property
    def audit_flagged(self) -> bool | None: ...


def attempts_of(svc: Handles, rows: Sequence[Graded]) -> tuple[list[metrics.Attempt], int]:
    """The finished submissions as metric attempts, and how many are still queued or
    running. The localization figures were stored with the verdict; the task's metadata
    (suite, difficulty, language, date) is the task's as it is now, from the task set in
    memory."""
    out: list[metrics.Attempt] = []
    pending = 0
    for sub in rows:
        if sub.status in (Status.QUEUED.value, Status.RUNNING.value):
            pending += 1
            continue
        if sub.status != Status.DONE.value or not sub.verdict:
            continue  # cancelled: never an attempt
        suite: str | None
        difficulty: str | None
        language: str | None
        created: dt.date | None
        try:
            meta = svc.task(sub.task_id).metadata
            suite, difficulty, language, created = meta.suite, meta.difficulty, meta.language, meta.created_at
        except TaskError:
            suite = difficulty = language = created = None
        out.append(
            metrics.Attempt(
                task_id=sub.task_id,
                verdict=sub.verdict,
                trial=sub.trial,
                suite=suite,
                difficulty=difficulty,
                language=language,
                prompt_variant=sub.prompt_variant,
                created_at=created,
                precision=sub.loc_precision,
                recall=sub.loc_recall,
                f1=sub.loc_f1,
            )
        )
    return out, pending


def run_meta(run: Run, team: Team) -> dict[str, Any]:
    return {
        "id": run.id,
        "name": run.name,
        "team": team.name,
        "method": run.method,
        "description": run.description,
        "project_url": run.project_url,
        "paper_url": run.paper_url,
        "public": run.public,
        "baseline": run.baseline,
        "hidden": run.hidden,
        "verified": run.verified,
        "created_at": run.created_at.isoformat() if run.created_at else None,
        "published_at": run.published_at.isoformat() if run.published_at else None,
        "locked": store_runs.locked(run),
        "links": {"self": f"/v1/runs/{run.id}", "page": f"/runs/{run.id}"},
    }


def integrity_of(rows: Sequence[Graded]) -> dict[str, int]:
    """For hosts: how many of a run's grades showed tampering or were flagged by the audit."""
    return {
        "tampered": sum(bool(sub.tampered) for sub in rows),
        "audit_flagged": sum(bool(sub.audit_flagged) for sub in rows),
    }


def task_set(svc: Handles, attempts: list[metrics.Attempt], filters: Filters) -> tuple[list[str], set[str]]:
    """The suites a run is measured over and their tasks: the filter's suite, else every
    suite its attempts belong to; only tasks created inside the filter's window (and in the
    filter's language)."""
    suites = {filters.suite} if filters.suite else {a.suite for a in attempts if a.suite}
    ids = {
        t.id
        for t in svc.tasks
        if t.metadata.suite in suites
        and metrics.in_window(t.metadata.created_at, filters.since, filters.until)
        and (filters.language is None or t.metadata.language == filters.language)
    }
    return sorted(suites), ids


def run_view(svc: Handles, run: Run, filters: Filters | None = None, *, host: bool = False) -> dict[str, Any]:
    """A run and its metrics (over the tasks it has valid trials of, and in `task_set`
    over its suites' whole task sets); `host` adds the integrity counts."""
    with svc.db.read() as s:
        team = s.get(Team, run.team_id)
        assert team is not None  # the run's team_id is a foreign key
        rows = store_runs.metric_rows_of(s, run)
        return _view(svc, run, team, rows, filters or Filters(), host=host)


def _view(
    svc: Handles, run: Run, team: Team, rows: Sequence[Graded], filters: Filters, *, host: bool = False
) -> dict[str, Any]:
    attempts, pending = attempts_of(svc, rows)
    attempts = [a for a in attempts if filters.keep(a)]
    suites, ids = task_set(svc, attempts, filters)
    summary = plain(metrics.run_summary(attempts, since=filters.since, until=filters.until, task_set=ids))
    errors = summary["errors"]
    view: dict[str, Any] = {
        **run_meta(run, team),
        "submissions": len(rows),
        "pending": pending,
        "errors": errors,
        "complete": pending == 0 and errors == 0,
        "filters": plain(filters),
        "suites": suites,
        "metrics": summary,
    }
    if host:
        view["integrity"] = integrity_of(rows)
    return view


def leaderboard(svc: Handles, filters: Filters, *, include_incomplete: bool = False) -> list[dict[str, Any]]:
    """Public, unhidden runs (and baselines) ranked by how many tasks of their suites'
    whole task set they resolve (a task not submitted is not resolved), then by solve rate
    over that set; so a run over one task cannot outrank a run that resolves more.
    Incomplete runs are shown only when asked, and are never ranked. One query
    (store_runs.board: the runs, their teams and what the metrics read of their
    submissions), then the metrics."""
    with svc.db.read() as s:
        board = store_runs.board(s)
    rows = []
    for run, team, subs in board:
        view = _view(svc, run, team, subs, filters)
        if not view["metrics"]["attempts"] and not view["pending"]:
            continue  # nothing of it in this window or suite
        if not view["complete"] and not include_incomplete:
            continue
        rows.append(view)
    ranked = sorted((r for r in rows if r["complete"]), key=rank_key, reverse=True)
    for i, r in enumerate(ranked, 1):
        r["rank"] = i
    unranked = [dict(r, rank=None) for r in rows if not r["complete"]]
    return ranked + sorted(unranked, key=rank_key, reverse=True)


def rank_key(view: dict[str, Any]) -> tuple[float, float]:
    """(resolved tasks of the task set, solve rate over it): the leaderboard's order."""
    ts = view["metrics"].get("task_set") or {}
    solve = (ts.get("solve_rate") or {}).get("value")
    return (ts.get("resolved") or {}).get("numerator") or 0, solve if solve is not None else -1.0


def compare(svc: Handles, a: Run, b: Run, filters: Filters | None = None) -> dict[str, Any]:
    filters = filters or Filters()
    out: dict[str, Any] = {}
    atts: list[list[metrics.Attempt]] = []
    for key, run in (("a", a), ("b", b)):
        with svc.db.read() as s:
            team = s.get(Team, run.team_id)
            assert team is not None  # the run's team_id is a foreign key
            rows = store_runs.metric_rows_of(s, run)
            out[key] = run_meta(run, team)
        attempts, _ = attempts_of(svc, rows)
        atts.append(
            [x for x in attempts if filters.keep(x) and metrics.in_window(x.created_at, filters.since, filters.until)]
        )
    out["comparison"] = plain(metrics.paired_comparison(atts[0], atts[1]))
    return out


def suite_tasks(svc: Handles, rows: list[Submission]) -> set[str]:
    """The whole task set of the suites a run's submissions belong to: the report's
    total_instances, as SWE-bench's is the dataset's size."""
    suites: set[str] = set()
    for sub in rows:
        try:
            suites.add(svc.task(sub.task_id).metadata.suite)
        except TaskError:
            continue
    return {t.id for t in svc.tasks if t.metadata.suite in suites}


EMPTY_PATCH_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def _by_task(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:  # oldest first
        out.setdefault(r["task_id"], []).append(r)
    return out


def _records(rows: list[dict[str, Any]]) -> dict[str, metrics.TaskRecord]:
    """The rule's per-task records (grader.metrics) from submission rows: finished ones
    with a verdict are the trials, as attempts_of makes them for every other figure."""
    return metrics.task_records(
        metrics.Attempt(task_id=r["task_id"], verdict=r["verdict"], trial=r.get("trial"))
        for r in rows
        if r["status"] == Status.DONE.value and r["verdict"]
    )


def swebench_report(rows: list[dict[str, Any]], task_ids: set[str] | None = None) -> dict[str, Any]:
    """A run in SWE-bench's report format (its harness's final report): counts and id lists.

    `rows` are submissions (task_id, status, verdict, patch_sha256, trial), oldest first;
    `task_ids` the task set the run is measured over (total_instances, with every task
    submitted). Each task is classed by the rule of grader.metrics, over its finished
    valid trials: resolved when most of them passed (so resolved_ids are the tasks
    `runs show` counts resolved); else empty_patch when every submission was the empty
    patch; incomplete while trials are queued or running (or none was graded); error
    when only ERRORs came back; unresolved otherwise."""
    records, by_task = _records(rows), _by_task(rows)
    classes = ("submitted", "completed", "resolved", "unresolved", "empty_patch", "error", "incomplete")
    ids: dict[str, list[str]] = {k: [] for k in classes}
    for task_id in sorted(by_task):
        subs, rec = by_task[task_id], records.get(task_id)
        ids["submitted"].append(task_id)
        live = [r for r in subs if r["status"] != Status.CANCELLED.value]
        pending = any(r["status"] in (Status.QUEUED.value, Status.RUNNING.value) for r in subs)
        if rec is not None and rec.resolved:
            ids["completed"].append(task_id)
            ids["resolved"].append(task_id)
        elif live and all(r["patch_sha256"] == EMPTY_PATCH_SHA256 for r in live):
            ids["empty_patch"].append(task_id)
        elif pending or rec is None:
            ids["incomplete"].append(task_id)
        elif rec.n == 0:
            ids["error"].append(task_id)
        else:
            ids["completed"].append(task_id)
            ids["unresolved"].append(task_id)
    report: dict[str, Any] = {"total_instances": len(set(by_task) | (task_ids or set()))}
    report.update({f"{k}_instances": len(v) for k, v in ids.items()})
    report.update({f"{k}_ids": v for k, v in ids.items()})
    report["schema_version"] = 2
    return report


def _standing(subs: list[dict[str, Any]], rec: metrics.TaskRecord | None) -> dict[str, Any]:
    """The submission that stands for a task in the predictions: the newest valid trial
    whose outcome is the task's (a PASS for a resolved task, not a PASS otherwise), so
    grading the predictions once gives back the report's resolved_ids; the newest
    submission while none is graded."""
    if rec is not None and rec.n:
        agree = [
            r
            for r in subs
            if r["status"] == Status.DONE.value
            and r["verdict"] not in (None, metrics.ERROR)
            and (r["verdict"] == metrics.PASS) == rec.resolved
        ]
        if agree:
            return agree[-1]
    return subs[-1]


def swebench_predictions(rows: list[dict[str, Any]], model: str) -> list[dict[str, Any]]:
    """A run's patches as SWE-bench predictions, one per task (`_standing`). `rows` are
    submissions (task_id, system, patch, status, verdict, trial), oldest first;
    model_name_or_path is the submission's system, else `model` (the run's name):
    SWE-bench's harness needs one."""
    records = _records(rows)
    out = []
    for task_id, subs in sorted(_by_task(rows).items()):
        r = _standing(subs, records.get(task_id))
        out.append({"instance_id": task_id, "model_name_or_path": r["system"] or model, "model_patch": r["patch"]})
    return out
