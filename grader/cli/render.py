"""How the commands print: verdicts, results, submissions, runs, comparisons and the
leaderboard, for a person (the commands' --json prints the service's records as they are).

Text that came from the service or a task file goes through `escape` first: a '[' in it
is printed, not read as rich markup.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.markup import escape as _markup_escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from grader import metrics
from grader.verdict import Result, Verdict

# Piped output (CI logs, files) gets wide lines instead of rich's 80-column default.
out = Console(width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True)


VERDICT_STYLE = {
    Verdict.PASS: "bold green",
    Verdict.FAIL: "bold red",
    Verdict.PATCH_FAILED: "bold yellow",
    Verdict.TIMED_OUT: "bold magenta",
    Verdict.ERROR: "bold white on red",
}


DASH = "—"  # a figure over nothing: no value, no interval


def batch_progress() -> Any:
    """A bar on a terminal; off one (a CI log, a file, a pipe: where rich shows no bar) a
    line at every tenth of the way and at least every 30 seconds, so that a long batch is
    never silent. Either takes add_task(description, total=) and advance(task)."""
    return progress() if err.is_terminal else LineProgress()


def progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )


class LineProgress:
    """What `progress()` gives off a terminal: the Progress calls a batch makes (add_task,
    advance), written as plain lines to stderr."""

    EVERY = 30.0  # seconds at most between two lines

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.tasks: dict[int, list[Any]] = {}  # id -> [description, total, done, last tenth, last time, start]

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        for desc, total, done, _, _, start in self.tasks.values():
            if done < total:  # the end was said as it came; otherwise say where it stopped
                self._say(desc, done, total, start)

    def add_task(self, description: str, total: float | None = None, **_: Any) -> int:
        n = len(self.tasks)
        now = self.clock()
        self.tasks[n] = [description, int(total or 0), 0, 0, now, now]
        self._say(description, 0, int(total or 0), now)
        return n

    def advance(self, task_id: int, advance: float = 1) -> None:
        t = self.tasks[task_id]
        t[2] += int(advance)
        now = self.clock()
        tenth = (10 * t[2] // t[1]) if t[1] else 0
        if tenth > t[3] or now - t[4] >= self.EVERY or t[2] == t[1]:
            t[3], t[4] = tenth, now
            self._say(t[0], t[2], t[1], t[5])

    def _say(self, desc: str, done: int, total: int, start: float) -> None:
        share = f" ({100 * done / total:.0f}%)" if total else ""
        err.print(f"{desc}: {done} of {total} done{share}, {self.clock() - start:.0f} s", highlight=False, markup=False)


def log(line: str) -> None:
    err.print(line, style="dim", highlight=False, markup=False)


def escape(text: object) -> str:
    """Text from the service, printed literally: a '[' in a message is not rich markup."""
    return _markup_escape(str(text))


def verdict_of(value: object) -> Verdict | None:
    try:
        return Verdict(value)
    except ValueError:
        return None


# --- results and submissions ---------------------------------------------------------------
def print_result(result: Result) -> None:
    out.print(f"[{VERDICT_STYLE[result.verdict]}]{result.verdict}[/]  {result.task_id}")
    out.print(result.explanation, highlight=False)
    if result.tests and (result.tests.fail_to_pass["failure"] or result.tests.pass_to_pass["failure"]):
        for kind in ("fail_to_pass", "pass_to_pass"):
            for tid in getattr(result.tests, kind)["failure"]:
                out.print(
                    f"  [red]✗[/red] {tid} ({kind.upper()}: {result.tests.all.get(tid, 'not run')})", highlight=False
                )
    if result.apply.method:
        out.print(f"applied with: {result.apply.method}", style="dim")
    if result.apply.neutralized:
        out.print(f"reverted runner files: {', '.join(result.apply.neutralized)}", style="yellow")
    if result.verdict is Verdict.PATCH_FAILED:
        for a in result.apply.attempts:
            out.print(
                f"--- {a.command} (exit {a.exit_code})\n{a.output.strip()}", style="dim", highlight=False, markup=False
            )
    if result.error:
        out.print(result.error, style="red", highlight=False, markup=False)
    times = ", ".join(f"{k} {v:.2f}s" for k, v in result.durations.items() if not k.startswith("container_"))
    out.print(f"durations: {times}", style="dim")


def print_submission(sub: dict[str, Any]) -> None:
    """The service's view (status, times, host), then the result as `grader grade` prints it."""
    from pydantic import ValidationError

    about = ", ".join(
        f"{k.replace('_', ' ')} {sub[k]}"
        for k in ("run_id", "system", "trial", "prompt_variant")
        if sub.get(k) is not None
    )
    extra = [f"attempts {sub['attempts']}"] if sub.get("attempts", 0) > 1 else []
    extra += ["from cache"] if sub.get("cached") else []
    out.print(
        f"{escape(sub['id'])}  [bold]{sub['status']}[/bold]  {escape(sub.get('task_id', ''))}"
        + (f"  ({escape(about)})" if about else "")
        + (f"  [dim]{', '.join(extra)}[/dim]" if extra else ""),
        highlight=False,
    )
    times = [f"{k.removesuffix('_at')} {sub[k]}" for k in ("queued_at", "started_at", "finished_at") if sub.get(k)]
    spans = _spans(sub)
    if times:
        out.print("  ".join(times) + (f"  ({spans})" if spans else ""), style="dim", highlight=False, markup=False)
    if sub.get("host"):
        out.print(f"host {sub['host']}", style="dim", highlight=False, markup=False)
    if sub["status"] != "done":
        return
    try:
        result = Result.model_validate(sub["result"]) if sub.get("result") else None
    except ValidationError:
        result = None  # a newer server's record: fall back to the fields every version has
    if result is None:
        verdict = verdict_of(sub.get("verdict"))
        label = f"[{VERDICT_STYLE[verdict]}]{verdict}[/]" if verdict else escape(sub.get("verdict") or "no verdict")
        out.print(f"{label}  {escape(sub.get('task_id', ''))}", highlight=False)
        explanation = (sub.get("result") or {}).get("explanation")
        if explanation:
            out.print(explanation, highlight=False, markup=False)
        return
    print_result(result)
    if result.tests and result.tests.all:
        outcomes: dict[str, int] = {}
        for outcome in result.tests.all.values():
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        parts = [", ".join(f"{n} {o}" for o, n in sorted(outcomes.items()))]
        for kind in ("fail_to_pass", "pass_to_pass"):
            lists = getattr(result.tests, kind)
            total = len(lists["success"]) + len(lists["failure"])
            if total:
                parts.append(f"{kind.upper()} {len(lists['success'])}/{total}")
        out.print("tests: " + "; ".join(parts), highlight=False, markup=False)


def _spans(sub: dict[str, Any]) -> str:
    """'waited 1.2 s, ran 3.4 s' from the ISO 8601 times, when they parse."""
    import datetime as dt

    try:
        at = {k: dt.datetime.fromisoformat(sub[k]) for k in ("queued_at", "started_at", "finished_at") if sub.get(k)}
        parts = []
        if "queued_at" in at and "started_at" in at:
            parts.append(f"waited {(at['started_at'] - at['queued_at']).total_seconds():.1f} s")
        if "started_at" in at and "finished_at" in at:
            parts.append(f"ran {(at['finished_at'] - at['started_at']).total_seconds():.1f} s")
        return ", ".join(parts)
    except (TypeError, ValueError):
        return ""


def score_line(view: dict[str, Any]) -> str:
    """A run's score in one line, as the leaderboard ranks it: the tasks it resolves of its
    suites' whole task set (a task not attempted is not resolved), then the solve rate."""
    ts = (view.get("metrics") or {}).get("task_set") or {}
    suites = " + ".join(view.get("suites") or []) or "its suites"
    kind = "suites" if len(view.get("suites") or []) > 1 else "suite"
    resolved = ts.get("resolved") or {}
    share = f"{100 * resolved['value']:.1f}%, " if resolved.get("value") is not None else ""
    line = (
        f"run {view['name']}: resolved {_num(resolved.get('numerator') or 0)} of {resolved.get('denominator') or 0} "
        f"tasks of {kind} {suites} ({share}{ts.get('attempted', 0)} attempted); "
        f"solve rate over the {kind} {_fig(ts.get('solve_rate'))}"
    )
    if not view.get("complete"):
        line += f"; INCOMPLETE: {view.get('pending', 0)} pending, {view.get('errors', 0)} machinery errors (not ranked)"
    return line


def print_score(view: dict[str, Any]) -> None:
    out.print(escape(score_line(view)), highlight=False, soft_wrap=True)


def print_verdict_counts(run_id: str, counts: dict[str, int]) -> None:
    """A batch's verdicts, counted: every verdict, then the statuses that were not one."""
    table = Table("verdict", "count", title=f"this batch's verdicts (run {escape(run_id)})")
    for key, n in counts.items():
        verdict = verdict_of(key)
        if n or verdict or key == "rejected":
            table.add_row(f"[{VERDICT_STYLE[verdict]}]{key}[/]" if verdict else key, str(n))
    out.print(table)


# --- runs and the leaderboard ------------------------------------------------------------
def _num(value: Any) -> str:
    """A numerator: whole numbers as such, sums of per-task shares to 3 significant digits."""
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return str(int(value)) if isinstance(value, (int, float)) else str(value)


def _fig(fig: dict[str, Any] | None) -> str:
    """A figure as a person reads it: 66.7% (2/3) [20.8, 93.9]; a dash over no task."""
    if not fig or fig.get("value") is None or not fig.get("denominator"):
        return DASH
    text = f"{100 * fig['value']:.1f}% ({_num(fig.get('numerator'))}/{fig.get('denominator')})"
    ci = fig.get("ci")
    return text + (f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci and ci[0] is not None else "")


def _count(fig: dict[str, Any] | None) -> str:
    """Tasks out of a task set: 3 of 5 (60.0%)."""
    if not fig or not fig.get("denominator"):
        return DASH
    return f"{_num(fig.get('numerator'))} of {fig['denominator']} ({100 * fig['value']:.1f}%)"


def print_runs(items: list[dict[str, Any]]) -> None:
    table = Table("id", "run", "team", "method", "public", "created")
    for r in items:
        table.add_row(
            r["id"],
            escape(r["name"]),
            escape(r["team"]),
            escape(r.get("method") or ""),
            "yes" if r["public"] else "",
            (r.get("created_at") or "")[:10],
        )
    out.print(table)


def print_run(view: dict[str, Any]) -> None:
    """A run's figures (with numerators, denominators and 95% intervals) and its per-task table."""
    m = view["metrics"]
    state = "complete" if view["complete"] else f"INCOMPLETE ({view['pending']} pending, {view['errors']} errors)"
    lock = f" · published {view['published_at'][:10]}, locked" if view.get("locked") else ""
    out.print(
        f"[bold]{escape(view['name'])}[/] by {escape(view['team'])} · {view['submissions']} submissions · "
        f"{state}{lock}",
        highlight=False,
    )
    if not m.get("per_task"):
        out.print(
            "no graded submission yet"
            + (
                f": {view['pending']} queued or running"
                if view["pending"]
                else " matches these filters"
                if any(view.get("filters", {}).values())
                else ""
            ),
            highlight=False,
        )
        return
    figures = Table("figure", "value", "what it is", title="figures")
    figures.add_row("resolved", _count(m.get("resolved")), "tasks where more than half of the valid trials passed")
    figures.add_row("solve rate", _fig(m.get("solve_rate")), "share of trials passed, averaged over tasks (= pass@1)")
    figures.add_row(
        "success rate", _fig(m.get("success_rate")), "share of trials graded PASS or FAIL, averaged over tasks"
    )
    for k, fig in (m.get("pass_at_k") or {}).items():
        figures.add_row(f"pass@{k}", _fig(fig), "at least one of k attempts passes, over tasks with k trials")
    if m.get("pass_any_at_n") is not None:  # None for a run of one trial
        figures.add_row(
            f"pass_any@{m.get('trials') or 'n'}", _fig(m.get("pass_any_at_n")), "tasks passed at least once"
        )
    ts = m.get("task_set")
    if ts:
        suites = ", ".join(view.get("suites") or []) or "its suites"
        figures.add_row(
            "resolved over the suite",
            _count(ts.get("resolved")),
            f"over every task of {suites}; {ts.get('attempted')} of {ts.get('tasks')} attempted",
        )
        figures.add_row("solve rate over the suite", _fig(ts.get("solve_rate")), "a task not attempted counts 0")
    loc = m.get("localization") or {}
    for name in ("precision", "recall", "f1"):
        if (loc.get(name) or {}).get("denominator"):
            figures.add_row(f"file localization {name}", _fig(loc[name]), "mean over valid attempts")
    out.print(figures)
    if m.get("legacy"):
        out.print(
            "legacy: imported results"
            + (
                " (graded elsewhere and brought in)"
                if view.get("origin") == "imported"
                else " (SWE-bench predictions of one trial, from before the service recorded a run's origin)"
            )
            + ", not a campaign graded here as it was sent",
            highlight=False,
        )
    if m.get("single_trial"):
        out.print(
            "one trial per task: no stability classes or pass_any@n, which one trial cannot measure",
            highlight=False,
        )
    print_usage(m.get("usage"))
    for dim, groups in (m.get("breakdowns") or {}).items():
        if groups:
            t = Table(dim, "resolved", "solve rate", "success rate", title=f"by {dim}")
            for name, g in sorted(groups.items()):
                t.add_row(str(name), _count(g.get("resolved")), _fig(g.get("solve_rate")), _fig(g.get("success_rate")))
            out.print(t)
    per = Table("task", "valid trials", "passed", "resolved", "stability", "trials", title="per task")
    for task_id, t in (m.get("per_task") or {}).items():
        per.add_row(
            task_id,
            str(t.get("n")),
            str(t.get("c")),
            "yes" if t.get("resolved") else "no",
            (t.get("stability") or DASH).replace("_", " "),
            " ".join(str(v) for v in t.get("verdicts") or []),
        )
    out.print(per)


USAGE_ROWS = (
    ("cost", "cost_usd", metrics.usd),
    ("input tokens", "input_tokens", metrics.tokens),
    ("output tokens", "output_tokens", metrics.tokens),
    ("model API time", "api_seconds", metrics.seconds),
    ("wall-clock time", "wall_seconds", metrics.seconds),
)


def print_usage(u: dict[str, Any] | None) -> None:
    """What the campaign cost: per complete trial (runs of different trial counts compare)
    and in all; API time and wall-clock time apart."""
    if not u or not any((u.get(key) or {}).get("reported") for _, key, _ in USAGE_ROWS):
        return
    t = Table(
        "",
        "per complete trial",
        "campaign total",
        title=f"what it cost: {u.get('complete_trials')} complete trial(s) of {u.get('trials')}",
    )
    for label, key, show in USAGE_ROWS:
        t.add_row(label, *metrics.spent(u.get(key), show))
    levels = u.get("reasoning_levels") or {}
    if levels:
        t.add_row("reasoning level", ", ".join(f"{k} ({n})" for k, n in levels.items()), "")
    out.print(t)


def print_comparison(res: dict[str, Any]) -> None:
    """Two runs on their common tasks: wins, losses, the solve-rate difference and McNemar's p."""
    c = res["comparison"]
    out.print(
        f"A = {escape(res['a']['name'])} ({escape(res['a']['team'])}), "
        f"B = {escape(res['b']['name'])} ({escape(res['b']['team'])})",
        highlight=False,
    )
    if not c.get("common_tasks"):
        out.print("no graded task in common: nothing to compare task by task", highlight=False)
        return
    t = Table("figure", "value")
    for key, label in (
        ("common_tasks", "common tasks"),
        ("wins", "A resolved, B not"),
        ("losses", "B resolved, A not"),
        ("ties", "ties"),
    ):
        t.add_row(label, str(c.get(key)))
    t.add_row("solve-rate difference (A - B)", _fig(c.get("difference")))
    p = c.get("mcnemar_p")
    t.add_row("McNemar exact p", DASH if p is None else "< 0.001" if p < 0.001 else f"{p:.2g}" if p < 1 else "1")
    out.print(t)
    per = Table("task", "A", "B", "outcome", title="per task")
    for task_id, x in (c.get("per_task") or {}).items():
        per.add_row(
            task_id,
            f"{x['a']} ({x['a_passed']}/{x['a_trials']})",
            f"{x['b']} ({x['b_passed']}/{x['b_trials']})",
            x["outcome"],
        )
    out.print(per)


def print_leaderboard(rows: list[dict[str, Any]], *, filtered: bool) -> None:
    """The ranked runs; an empty board says whether the filters (`filtered`) emptied it."""
    if not rows:
        out.print("no public run matches" + (" these filters" if filtered else " yet"), highlight=False)
        return
    tables: list[tuple[str, list[dict[str, Any]]]] = []
    for r in rows:  # one table per task set, in the board's order: never ranked together
        table = r.get("table") or " + ".join(r.get("suites") or [])
        if not tables or tables[-1][0] != table:
            tables.append((table, []))
        tables[-1][1].append(r)
    for table, mine in tables:
        _print_board_table(table, mine)


def _print_board_table(table: str, rows: list[dict[str, Any]]) -> None:
    t = Table(
        "#",
        "run",
        "team",
        "method",
        "resolved",
        "solve rate",
        "success rate",
        "tasks attempted / in suite",
        "cost / trial",
        "",
        title=f"leaderboard: {'suites' if ' + ' in table else 'suite'} {escape(table)}" if table else "leaderboard",
    )
    for r in rows:
        m = r["metrics"]
        ts = m.get("task_set") or {}
        marks = " ".join(
            x
            for x, on in (("baseline", r["baseline"]), ("verified", r["verified"]), ("INCOMPLETE", not r["complete"]))
            if on
        )
        t.add_row(
            str(r.get("rank") or ""),
            escape(r["name"]),
            escape(r["team"]),
            escape(r.get("method") or ""),
            _count(ts.get("resolved")),
            _fig(ts.get("solve_rate")),
            _fig(m.get("success_rate")),
            f"{ts.get('attempted', 0)} / {ts.get('tasks', 0)}",
            metrics.usd(((m.get("usage") or {}).get("cost_usd") or {}).get("per_trial")),
            marks,
        )
    out.print(t)
