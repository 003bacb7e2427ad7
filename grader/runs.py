"""Runs, the leaderboard and paired comparison: submissions from the store turned into
metric inputs, and the metrics (grader.metrics, pure) turned into what the API, the
portal and the CLI show. Nothing here decides a verdict or touches Docker.

Every figure here, the SWE-bench report and the predictions export included, reduces a
task's trials by the one rule written in grader.metrics' docstring (resolved: most valid
trials passed; solve rate: the mean over tasks of the share passed)."""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import hashlib
import json
import threading
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any, Protocol

from grader import metrics
from grader.errors import TaskError
from grader.handles import Handles
from grader.store import phases as store_phases
from grader.store import runs as store_runs
from grader.store.models import Phase, Run, Status, Submission, Team
from grader.version import GRADER_VERSION

_SCALARS = (str, int, float, type(None))
_FIELDS: dict[type, tuple[str, ...]] = {}  # a dataclass's field names, by class


def plain(value: Any) -> Any:
    """Dataclasses, dates and tuples as JSON values."""
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, dict):
        return {str(k): v if isinstance(v, _SCALARS) else plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [v if isinstance(v, _SCALARS) else plain(v) for v in value]
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = _FIELDS.get(type(value))
        if names is None:
            names = _FIELDS[type(value)] = tuple(f.name for f in dataclasses.fields(value))
        return {n: v if isinstance(v := getattr(value, n), _SCALARS) else plain(v) for n in names}
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


def suites(svc: Handles) -> list[str]:
    """The suites the service has tasks of."""
    return sorted({t.metadata.suite for t in svc.tasks})


def check_filters(svc: Handles, f: Filters) -> Filters:
    """`f`, or FilterError when it names a suite the service has no task of (a misspelt
    suite would otherwise show an empty board, or a run's figures over nothing)."""
    if f.suite is not None and f.suite not in (known := suites(svc)):
        raise FilterError(f"there is no suite {f.suite!r}; the suites are: {', '.join(known) or 'none'}")
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
    @property
    def cost_usd(self) -> float | None: ...
    @property
    def input_tokens(self) -> int | None: ...
    @property
    def output_tokens(self) -> int | None: ...
    @property
    def api_seconds(self) -> float | None: ...
    @property
    def wall_seconds(self) -> float | None: ...
    @property
    def reasoning_level(self) -> str | None: ...
    @property
    def imported(self) -> bool | None: ...


def attempts_of(svc: Handles, rows: Sequence[Graded]) -> tuple[list[metrics.Attempt], int]:
    """The finished submissions as metric attempts, and how many are still queued or
    running. The localization figures were stored with the verdict; the task's metadata
    (suite, difficulty, language, date) is the task's as it is now, from the task set in
    memory."""
    out: list[metrics.Attempt] = []
    pending = 0
    known = _task_index(svc).meta
    for sub in rows:
        if sub.status in (Status.QUEUED.value, Status.RUNNING.value):
            pending += 1
            continue
        if sub.status != Status.DONE.value or not sub.verdict:
            continue  # cancelled: never an attempt
        suite, difficulty, language, created = known.get(sub.task_id, _UNKNOWN)
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
                cost_usd=sub.cost_usd,
                input_tokens=sub.input_tokens,
                output_tokens=sub.output_tokens,
                api_seconds=sub.api_seconds,
                wall_seconds=sub.wall_seconds,
                reasoning_level=sub.reasoning_level,
                imported=bool(sub.imported),
            )
        )
    return out, pending


_UNKNOWN: tuple[None, None, None, None] = (None, None, None, None)  # a task no longer served
Meta = tuple[str | None, str | None, str | None, dt.date | None]  # a task's suite, difficulty, language, date


class _TaskIndex:
    """What the figures read of a task set, read once per task set: each task's metadata
    (a run's figures look up every one of its attempts' tasks) and the task sets asked of
    it (every run of a board asks for the same few)."""

    def __init__(self, tasks: Any):
        self.tasks = tasks
        self.meta: dict[str, Meta] = {
            t.id: (m.suite, m.difficulty, m.language, m.created_at) for t in tasks for m in [t.metadata]
        }
        self.sets: dict[tuple[Any, ...], frozenset[str]] = {}


_INDEX: list[_TaskIndex | None] = [None]


def _task_index(svc: Handles) -> _TaskIndex:
    found = _INDEX[0]
    if found is None or found.tasks is not svc.tasks:
        found = _INDEX[0] = _TaskIndex(svc.tasks)
    return found


def run_meta(run: Run, team: Team) -> dict[str, Any]:
    return {
        "phase_id": run.phase_id,
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
        "review_requested_at": run.review_requested_at.isoformat() if run.review_requested_at else None,
        "origin": run.origin,
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
    index = _task_index(svc)
    key = (tuple(sorted(suites)), filters.since, filters.until, filters.language)
    ids = index.sets.get(key)
    if ids is None:
        if len(index.sets) >= 64:
            index.sets.clear()
        ids = index.sets[key] = frozenset(
            task_id
            for task_id, (suite, _, language, created) in index.meta.items()
            if suite in suites
            and metrics.in_window(created, filters.since, filters.until)
            and (filters.language is None or language == filters.language)
        )
    return sorted(suites), set(ids)


def run_view(svc: Handles, run: Run, filters: Filters | None = None, *, host: bool = False) -> dict[str, Any]:
    """A run and its metrics (over the tasks it has valid trials of, and in `task_set`
    over its suites' whole task sets); `host` adds the integrity counts. Without a filter,
    its stored figures (computed again first if it changed since)."""
    if not host and (filters is None or filters == Filters()):
        refresh(svc, [run.id])
        with svc.db.read() as s:
            found = store_runs.stored_figures(s, run.id)
            if found is not None and found[2] is not None:
                return {**run_meta(found[0], found[1]), **found[2]}
    with svc.db.read() as s:
        team = s.get(Team, run.team_id)
        assert team is not None  # the run's team_id is a foreign key
        rows = store_runs.metric_rows_of(s, run)
        return _view(svc, run, team, rows, filters or Filters(), host=host)


def _view(
    svc: Handles,
    run: Run,
    team: Team,
    rows: Sequence[Graded],
    filters: Filters,
    *,
    host: bool = False,
    board: bool = False,
) -> dict[str, Any]:
    """A run's view from its submissions as the metrics read them; `board`: as the
    leaderboard shows it (`board_metrics`: its per-task table never made)."""
    attempts, pending = attempts_of(svc, rows)
    attempts = [a for a in attempts if filters.keep(a)]
    suites, ids = task_set(svc, attempts, filters)
    found = metrics.run_summary(attempts, since=filters.since, until=filters.until, task_set=ids, origin=run.origin)
    if board:
        found = dataclasses.replace(found, per_task={})
    summary = board_metrics(plain(found)) if board else plain(found)
    errors = summary["errors"]
    view: dict[str, Any] = {
        **run_meta(run, team),
        "submissions": len(rows),
        "pending": pending,
        "errors": errors,
        "complete": pending == 0 and errors == 0,
        "filters": plain(filters),
        "suites": suites,
        "table": store_runs.TABLE_JOIN.join(suites or _pending_suites(svc, rows)),
        "metrics": summary,
    }
    if host:
        view["integrity"] = integrity_of(rows)
    return view


def _pending_suites(svc: Handles, rows: Sequence[Graded]) -> list[str]:
    """The suites of a run's queued and running submissions: the table a run with nothing
    finished yet waits in (its task set, once graded)."""
    found: set[str] = set()
    for sub in rows:
        if sub.status in (Status.QUEUED.value, Status.RUNNING.value):
            try:
                found.add(svc.task(sub.task_id).metadata.suite)
            except TaskError:
                continue
    return sorted(found)


AGGREGATE = (
    "attempts",
    "valid",
    "errors",
    "incomplete",
    "window",
    "trials",
    "tasks",
    "resolved",
    "solve_rate",
    "one_attempt_success",
    "success_rate",
    "pass_at_k",
    "pass_any_at_n",
    "usage",
    "legacy",
    "single_trial",
)


def phase_of(svc: Handles, run: Run | dict[str, Any]) -> Phase | None:
    phase_id = run.phase_id if isinstance(run, Run) else run.get("phase_id")
    if phase_id is None:
        return None
    with svc.db.read() as s:
        return store_phases.by_ids(s, {phase_id}).get(phase_id)


def for_viewer(svc: Handles, view: dict[str, Any], *, host: bool, phase: Phase | None = None) -> dict[str, Any]:
    """A run's view as a viewer may see it: whole outside a private phase (and for the
    host); in one, its aggregate figures only (no per-task table, breakdowns, stability or
    localization), and none at all until the phase has ended and the host reveals them
    (store/phases.py)."""
    phase = phase or phase_of(svc, view)
    if phase is None:
        return view
    view = {**view, "phase": phase.slug}
    if host or not phase.private:
        return view
    if not store_phases.results_shown(phase, host=False):
        view["metrics"] = {}
        view["withheld"] = (
            f"phase {phase.slug!r} is scored on a private split: its figures are shown once it has ended, "
            "if the host reveals them; no per-task result of it is ever shown"
        )
        return view
    m = view.get("metrics") or {}
    ts = {k: v for k, v in (m.get("task_set") or {}).items() if k != "per_task"}
    view["metrics"] = {k: m[k] for k in AGGREGATE if k in m} | {"task_set": ts}
    view["aggregate_only"] = (
        f"phase {phase.slug!r} is scored on a private split: its aggregate figures only, no per-task result"
    )
    return view


def private_refusal(svc: Handles, run: Run, *, host: bool) -> str | None:
    """Why a viewer may not read `run`'s per-task results (its report, logs, predictions
    export, a comparison): a private phase's run, to anyone but the host."""
    phase = phase_of(svc, run)
    if host or not phase or store_phases.per_task_shown(phase, host=False):
        return None
    return f"run {run.name!r} is in phase {phase.slug!r}, scored on a private split: no per-task result of it is shown"


def leaderboard(
    svc: Handles,
    filters: Filters,
    *,
    include_incomplete: bool = False,
    phase_id: int | None = None,
    offset: int = 0,
    limit: int | None = None,
    sort: str | None = None,
    desc: bool = True,
) -> Board:
    """Public, unhidden runs (and baselines), one table per task set (the suites a run's
    figures are over: a filter's suite, else the run's own; each view's `table`), never
    ranked across tables; in each, ranked by how many tasks of that whole task set they
    resolve (a task not submitted is not resolved), then by solve rate over that set; so a
    run over one task cannot outrank a run that resolves more. Incomplete runs are shown
    only when asked, and are never ranked. `sort` (a key of store_runs.SORTS) orders every
    listed run of a table by that column instead; `offset` and `limit` take a page.

    Without a filter (the leaderboard as everyone first sees it) the page is read from the
    figures stored with each run (`refresh`: computed again only for the runs that changed
    since), so a page costs the same however many runs are public. With a filter every
    public run's figures are computed under it, once per state of the board and filter
    (kept in this process), one such computation at a time."""
    version = board_version(svc)
    if filters == Filters():
        return _stored_board(svc, include_incomplete, offset, limit, sort, desc, phase_id)
    key = (*dataclasses.astuple(filters), include_incomplete, sort, desc, phase_id, version)
    rows = _FILTERED.get(key)
    if rows is None:
        with _FILTERING:
            rows = _FILTERED.get(key)
            if rows is None:
                rows = _computed_board(svc, filters, include_incomplete, sort, desc, phase_id)
                _FILTERED.put(key, rows)
    ranked = sum(1 for r in rows if r["rank"] is not None)
    end = len(rows) if limit is None else offset + limit
    return Board([dict(r) for r in rows[offset:end]], len(rows), ranked, offset, limit)


@dataclasses.dataclass
class Board:
    """A page of the leaderboard: its runs' views (each with its rank, None when
    incomplete), how many runs are listed in all and how many of them are ranked."""

    items: list[dict[str, Any]]
    total: int
    ranked: int
    offset: int
    limit: int | None

    @property
    def next_offset(self) -> int | None:
        end = self.offset + len(self.items)
        return end if end < self.total and self.limit is not None else None


def _stored_board(
    svc: Handles,
    include_incomplete: bool,
    offset: int,
    limit: int | None,
    sort: str | None,
    desc: bool,
    phase_id: int | None,
) -> Board:
    with svc.db.read() as s:
        page, total, ranked = store_runs.board_page(
            s,
            phase_id=phase_id,
            include_incomplete=include_incomplete,
            offset=offset,
            limit=limit if limit is not None else 2**31 - 1,
            sort=sort,
            desc=desc,
        )
        items: list[dict[str, Any]] = []
        for run, team, figures in page:
            view = {**run_meta(run, team), **(figures or {})}
            view["table"] = run.board_suites
            before = items[-1] if items else None
            if not run.board_complete:
                view["rank"] = None
            elif sort is None and desc and before and before["table"] == run.board_suites and before["rank"]:
                view["rank"] = before["rank"] + 1  # complete runs come first in a table, in their rank's order
            else:
                view["rank"] = store_runs.rank_of(s, run)
            items.append(view)
    return Board(items, total, ranked, offset, limit)


def _computed_board(
    svc: Handles, filters: Filters, include_incomplete: bool, sort: str | None, desc: bool, phase_id: int | None
) -> list[dict[str, Any]]:
    """Every listed run's view under `filters` (as the board shows it: no per-task
    table), in the board's order: the runs in one query, their submissions a share at a
    time (`_with_rows`), then the metrics."""
    with svc.db.read() as s:
        listed = store_runs.shown(s, phase_id=phase_id)
    rows = []
    for run, team, subs in _with_rows(svc, listed):
        view = _view(svc, run, team, subs, filters, board=True)
        if not view["metrics"]["attempts"] and not view["pending"]:
            continue  # nothing of it in this window or suite
        if not view["complete"] and not include_incomplete:
            continue
        rows.append(view)
    out: list[dict[str, Any]] = []
    for table in sorted({table_of(r) for r in rows}):  # one table per task set, never ranked together
        mine = [dict(r, table=table) for r in rows if table_of(r) == table]
        ranked = sorted((r for r in mine if r["complete"]), key=rank_key, reverse=True)
        for i, r in enumerate(ranked, 1):
            r["rank"] = i
        unranked = [dict(r, rank=None) for r in mine if not r["complete"]]
        part = ranked + sorted(unranked, key=rank_key, reverse=True)
        if sort is not None or not desc:
            part.sort(key=lambda r: _sort_value(r, sort or "resolved"), reverse=desc)
        out += part
    return out


ON_RUN_PAGE_ONLY = ("per_task",)  # of a run's metrics: what the leaderboard leaves to the run's own view


def board_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """A run's metrics as the leaderboard shows them: without the per-task table (its own
    view, GET /v1/runs/<id> and its page, has it), so that a page of the board costs its
    runs, never their tasks (2,000 tasks: 230 KB a run with the table, 3 KB without)."""
    return {k: v for k, v in metrics.items() if k not in ON_RUN_PAGE_ONLY}


ROWS_A_READ = 50_000  # submissions held in memory at once when many runs' figures are computed
FIRST_READ = 5  # runs of the first read: the next ones are sized by the submissions a run had so far


def _with_rows(svc: Handles, runs: Sequence[tuple[Run, Team]]) -> Iterator[tuple[Run, Team, Sequence[Graded]]]:
    """Each run with its submissions as the metrics read them, in `runs`' order, read a
    share of the runs at a time: about ROWS_A_READ submissions a query (sized by the runs
    read so far), so that a board of millions of submissions is never in memory whole."""
    at, read = 0, 0
    while at < len(runs):
        chunk = runs[at : at + _next_read(at, read)]
        with svc.db.read() as s:
            found = store_runs.metric_rows(s, [run.id for run, _ in chunk])
        for run, team in chunk:
            yield run, team, found.get(run.id, [])
        read += sum(len(v) for v in found.values())
        at += len(chunk)


def _next_read(runs: int, rows: int) -> int:
    """How many runs the next read takes, `runs` having had `rows` submissions: about
    ROWS_A_READ submissions (at most 500 runs: a backend's bound on parameters)."""
    if not runs:
        return FIRST_READ
    return max(1, min(500, ROWS_A_READ * runs // max(1, rows)))


def _sort_value(view: dict[str, Any], sort: str) -> tuple[Any, ...]:
    """A view's value in a column of the board (store_runs.SORTS, from the views)."""
    if sort == "name":
        return (view["name"].lower(), view["team"])
    st = standing(view)
    return {
        "resolved": (st.resolved, st.solve),
        "solve_rate": (st.solve, st.resolved),
        "success_rate": (st.success, st.resolved),
        "tasks": (st.attempted, st.tasks),
    }[sort]


class _Cache:
    """A few filtered boards, the most recently used kept (a filter's board is the same
    until a public run changes, which changes the key)."""

    def __init__(self, size: int):
        self.size, self.items = size, collections.OrderedDict[tuple[Any, ...], list[dict[str, Any]]]()
        self.lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> list[dict[str, Any]] | None:
        with self.lock:
            found = self.items.get(key)
            if found is not None:
                self.items.move_to_end(key)
            return found

    def put(self, key: tuple[Any, ...], rows: list[dict[str, Any]]) -> None:
        with self.lock:
            self.items[key] = rows
            while len(self.items) > self.size:
                self.items.popitem(last=False)


class Recent:
    """What a public read answered, by key (the request and `board_version`, so that a
    change to the board is never hidden), for at most `ttl` seconds: anonymous readers of
    the leaderboard get what another got for the same state, so that any number of them
    costs the service one query each and a rendering per state. Signed-in readers and
    keyed requests are never served from it."""

    def __init__(self, ttl: float, size: int = 256):
        self.ttl, self.size = ttl, size
        self.items = collections.OrderedDict[Any, tuple[float, Any]]()
        self.lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self.lock:
            found = self.items.get(key)
            if found is None or found[0] < time.monotonic():
                return None
            return found[1]

    def put(self, key: Any, value: Any) -> None:
        with self.lock:
            self.items[key] = (time.monotonic() + self.ttl, value)
            self.items.move_to_end(key)
            while len(self.items) > self.size:
                self.items.popitem(last=False)


_FILTERED = _Cache(32)
_FILTERING = threading.Lock()  # one filtered board computed at a time in a process
_REFRESHING = threading.Lock()  # one refresh of stored figures at a time in a process
WAIT_FOR_REFRESH = 2.0  # seconds a read waits for another thread's refresh before going on without it
FIGURES = ("submissions", "pending", "errors", "complete", "filters", "suites", "table", "metrics")


def standing(view: dict[str, Any]) -> store_runs.Standing:
    """What the board orders a run's view by."""
    m = view["metrics"]
    ts = m.get("task_set") or {}
    resolved, solve = rank_key(view)
    success = (m.get("success_rate") or {}).get("value")
    return store_runs.Standing(
        listed=bool(m["attempts"] or view["pending"]),
        complete=bool(view["complete"]),
        resolved=float(resolved),
        solve=float(solve),
        success=float(success) if success is not None else -1.0,
        attempted=int(ts.get("attempted") or 0),
        tasks=int(ts.get("tasks") or 0),
        suites=table_of(view),
    )


def table_of(view: dict[str, Any]) -> str:
    """The board's table a run's view ranks in: the suites its figures are over (those of
    its submissions still to be graded while none is)."""
    return str(view.get("table") or store_runs.TABLE_JOIN.join(view.get("suites") or []))


_KEY: list[Any] = [None, ""]  # the task set the key below was made for, and the key


def figures_key(svc: Handles) -> str:
    """What stored figures depend on besides a run's submissions: the metadata of the
    task set (suite, difficulty, language, date of every task), the grader's version and
    the edition of the figures' rules (metrics.RULES).
    Figures stored under another key are computed again when read."""
    tasks = svc.tasks
    if _KEY[0] is not tasks:
        data = sorted(
            (t.id, t.metadata.suite, t.metadata.difficulty, t.metadata.language, str(t.metadata.created_at))
            for t in tasks
        )
        _KEY[:] = [tasks, hashlib.sha256(json.dumps([GRADER_VERSION, metrics.RULES, data]).encode()).hexdigest()]
    return str(_KEY[1])


def board_version(svc: Handles) -> tuple[Any, ...]:
    """The leaderboard's state, with the figures of every run on it up to date (computed
    again for those that changed): equal twice only if the board did not change between,
    so that what was answered for one state may be answered again (grader.runs.Recent,
    the filtered boards). One query when nothing changed."""
    key = figures_key(svc)
    with svc.db.read() as s:
        count, newest, needing = store_runs.board_state(s, key)
    if needing:
        refresh(svc)
        with svc.db.read() as s:
            count, newest, needing = store_runs.board_state(s, key)
    return count, newest, key


def refresh(svc: Handles, run_ids: Collection[str] | None = None) -> int:
    """Compute the stored figures of the runs on the leaderboard (or of `run_ids`) that
    changed since theirs were stored; how many were computed. What a read costs is then
    what changed, never how many runs there are."""
    key = figures_key(svc)
    with svc.db.read() as s:
        if not store_runs.needing_figures(s, key, run_ids=run_ids):
            return 0
    # Another thread of this process computing figures is waited for, and then there is
    # nothing left to do; but only so long: computing every run's again (a new task set or
    # version: 1,000 runs of 2,000 tasks is minutes) must not hold every reader meanwhile.
    # Past the wait the board is read as stored, its changed runs shown as they were until
    # computed; a run's own figures are computed here, beside the other computation.
    mine = _REFRESHING.acquire(timeout=WAIT_FOR_REFRESH)
    if not mine and run_ids is None:
        return 0
    try:
        return _refresh(svc, key, run_ids)
    finally:
        if mine:
            _REFRESHING.release()


def _refresh(svc: Handles, key: str, run_ids: Collection[str] | None) -> int:
    """`refresh`'s computation: the runs needing it when it starts, a share at a time."""
    done = 0
    with svc.db.read() as s:
        todo = store_runs.needing_figures(s, key, run_ids=run_ids)
    at, read = 0, 0
    while at < len(todo):  # a share of the runs at a time, about ROWS_A_READ submissions
        ids = todo[at : at + _next_read(at, read)]
        with svc.db.write() as s:
            store_runs.begin_figures(s, ids)
        with svc.db.read() as s:
            runs = store_runs.runs_with_teams(s, ids)
            rows = store_runs.metric_rows(s, ids)
        read += sum(len(v) for v in rows.values())
        views = {run.id: _view(svc, run, team, rows.get(run.id, []), Filters()) for run, team in runs}
        del rows  # a share of the board's submissions at a time
        with svc.db.write() as s:
            for rid, view in views.items():
                figures = {k: view[k] for k in FIGURES}
                summary = {**figures, "metrics": board_metrics(figures["metrics"])}
                store_runs.save_figures(s, rid, figures, summary, standing(view), key)
        done += len(views)
        at += len(ids)
    return done


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
    return metrics.task_records(_attempts(rows))


def _attempts(rows: list[dict[str, Any]]) -> list[metrics.Attempt]:
    """Finished submission rows with a verdict as the metrics' attempts, with what each cost."""
    return [
        metrics.Attempt(
            task_id=r["task_id"],
            verdict=r["verdict"],
            trial=r.get("trial"),
            **{k: r.get(k) for k in metrics.USAGE_FIELDS},
            imported=bool(r.get("imported")),
        )
        for r in rows
        if r["status"] == Status.DONE.value and r["verdict"]
    ]


def usage_row(sub: Submission) -> dict[str, Any]:
    """A submission's usage fields, as the export rows carry them."""
    return {k: getattr(sub, k) for k in metrics.USAGE_FIELDS} | {"imported": bool(sub.imported)}


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
    # not SWE-bench's: what the campaign cost, per complete trial and in all (grader.metrics.usage)
    report["usage"] = plain(metrics.usage(_attempts(rows)))
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
    submissions (task_id, system, patch, status, verdict, trial, what it cost), oldest
    first; model_name_or_path is the submission's system, else `model` (the run's name):
    SWE-bench's harness needs one. What the standing submission cost goes with it, under
    the names a prediction line is read back with (SWE-bench's harness ignores them)."""
    records = _records(rows)
    out = []
    for task_id, subs in sorted(_by_task(rows).items()):
        r = _standing(subs, records.get(task_id))
        said = {
            k: r[k] for k in metrics.USAGE_FIELDS if r.get(k) is not None
        }  # read back by `grader submit --predictions`
        out.append(
            {"instance_id": task_id, "model_name_or_path": r["system"] or model, "model_patch": r["patch"]} | said
        )
    return out
