"""Commands for a team that grades through a grader service (its REST API): submit a
patch or a batch of predictions, follow a submission, and read runs and the leaderboard.

`grader submit --wait` exits as `grader grade` does (EXIT); 2 when the service refuses or
cannot be reached, 4 when a batch had rejected items, 5 when no verdict came within --timeout.
The HTTP client is imported inside the commands (through `remote`): grading locally never needs it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

import click

from grader.cli.app import EXIT, EXIT_NO_VERDICT, EXIT_REJECTED, main, remote
from grader.cli.render import (
    batch_progress,
    err,
    escape,
    out,
    print_comparison,
    print_leaderboard,
    print_run,
    print_runs,
    print_score,
    print_submission,
    print_verdict_counts,
    verdict_of,
)
from grader.metrics import MAX_COST_USD, MAX_SECONDS, MAX_TOKENS, REASONING_LEVELS
from grader.tasks.model import PROMPT_VARIANTS
from grader.verdict import Verdict

if TYPE_CHECKING:
    from grader.client import Client

F = TypeVar("F", bound=Callable[..., Any])

LONG_POLL = 60.0  # seconds one submit asks the server to hold for its verdict (the server caps it at max_wait)


def window(fn: F) -> F:
    """--suite, --language, --variant, --since, --until: the same filters as the API and the portal."""
    for opt in reversed(
        [
            click.option("--suite", default=None, help="Only tasks of this suite."),
            click.option("--language", default=None, help="Only tasks in this language (python, javascript, go, ...)."),
            click.option("--variant", default=None, help="Only attempts with this prompt variant."),
            click.option("--since", default=None, help="Only tasks created on or after this date (YYYY-MM-DD)."),
            click.option("--until", default=None, help="Only tasks created on or before this date."),
        ]
    ):
        fn = opt(fn)
    return fn


def _metadata(ctx: click.Context, param: click.Parameter, value: str | None) -> dict[str, Any] | None:
    """--metadata: a JSON object, given inline or as @FILE."""
    if value is None:
        return None
    try:
        text = Path(value[1:]).read_text(encoding="utf-8") if value.startswith("@") else value
        data = json.loads(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise click.BadParameter(f"not a JSON object: {exc}") from None
    if not isinstance(data, dict):
        raise click.BadParameter(f"must be a JSON object, not {type(data).__name__}")
    return data


def _id_list(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[str] | None:
    """--instance-ids a,b --instance-ids c: ['a', 'b', 'c'] (None when not given)."""
    ids = [i.strip() for v in values for i in v.split(",") if i.strip()]
    return ids or None


def run_id_from(path: str) -> str | None:
    """sb-cli's habit: a run is named after its predictions file, without the extension
    (preds/swe-lite-3.jsonl: swe-lite-3). None for stdin."""
    if path == "-":
        return None
    name = Path(path).name
    for suffix in (".jsonl", ".ndjson", ".json"):
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def _file_name(run: str) -> str:
    """A run's name made safe as a file name (run ids are free text)."""
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "_", run).strip("._") or "run"


def _report_path(output_dir: Path, run_id: str) -> Path:
    return output_dir / f"{_file_name(run_id)}.json"


# --- submissions -------------------------------------------------------------------------
@main.command("submit")
@click.option("--task", "task_id", default=None, help="The task id (one patch).")
@click.option(
    "--patch", "patch_file", type=click.File("rb"), default=None, help="A diff, or git format-patch output; '-': stdin."
)
@click.option(
    "--predictions",
    "predictions_file",
    default=None,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="A batch: SWE-bench predictions as a JSON list, JSONL, or a JSON object keyed by instance_id "
    "('-' reads stdin). A line may carry its own trial, prompt_variant and metadata.",
)
@click.option(
    "--run-id",
    default=None,
    help="The run the submission(s) belong to [default with --predictions: the file's name without its extension].",
)
@click.option("--system", default=None, help="The system (agent, model) that made the patch(es).")
@click.option(
    "--trial",
    type=click.IntRange(0, 1_000_000),
    default=None,
    help="Which attempt of the run this is (0, 1, 2, ...); with --predictions, for lines that give none.",
)
@click.option(
    "--prompt-variant",
    type=click.Choice(PROMPT_VARIANTS),
    default=None,
    help="The prompt variant the system was given.",
)
@click.option(
    "--metadata",
    callback=_metadata,
    default=None,
    metavar="JSON|@FILE",
    help="A JSON object kept with the submission(s) (at most 16 KiB).",
)
@click.option("--callback-url", default=None, help="POSTed each finished submission, signed (X-Grader-Signature).")
@click.option(
    "--instance-ids",
    "instance_ids",
    multiple=True,
    callback=_id_list,
    metavar="ID[,ID...]",
    help="With --predictions: submit only these instances (comma-separated, or the option repeated).",
)
@click.option(
    "--suite",
    default=None,
    help="The suite the task(s) must belong to (as sb-cli's subset): a task of another suite is refused "
    "before anything is sent.",
)
@click.option(
    "--phase",
    default=None,
    help="The challenge phase to submit to (`grader phases list`): refused outside its window or past its limits.",
)
@click.option(
    "--overwrite",
    is_flag=True,
    help="With --predictions: replace the run if it exists (it is deleted first, as `grader runs delete` "
    "does); with --task: replace the run's attempt at that task and trial (it leaves the run, and stays "
    "in your history). Without it, a run that already holds any of these tasks and trials is refused.",
)
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="With --predictions: wait, then write the run's SWE-bench report to DIR/RUN.json.",
)
@click.option(
    "--reasoning-level",
    type=click.Choice(REASONING_LEVELS),
    default=None,
    help="The model's reasoning effort; with --predictions, for lines that give none.",
)
@click.option(
    "--cost-usd",
    type=click.FloatRange(0, MAX_COST_USD),
    default=None,
    help="With --task: what the attempt's model calls cost, in USD (a prediction line gives its own cost_usd).",
)
@click.option(
    "--input-tokens", type=click.IntRange(0, MAX_TOKENS), default=None, help="With --task: tokens the model read."
)
@click.option(
    "--output-tokens", type=click.IntRange(0, MAX_TOKENS), default=None, help="With --task: tokens the model wrote."
)
@click.option(
    "--api-seconds",
    type=click.FloatRange(0, MAX_SECONDS),
    default=None,
    help="With --task: seconds spent waiting on the model's API.",
)
@click.option(
    "--wall-seconds",
    type=click.FloatRange(0, MAX_SECONDS),
    default=None,
    help="With --task: seconds the attempt took from start to end.",
)
@click.option("--wait", "wait_", is_flag=True, help="Wait for the verdict(s).")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=None,
    help="With --wait: give up after this many seconds [default: no limit].",
)
@click.option("--json", "as_json", is_flag=True, help="Print the submission(s) as JSON.")
@remote
def submit_cmd(
    client: Client,
    task_id: str | None,
    patch_file: IO[bytes] | None,
    predictions_file: str | None,
    run_id: str | None,
    system: str | None,
    trial: int | None,
    prompt_variant: str | None,
    metadata: dict[str, Any] | None,
    callback_url: str | None,
    instance_ids: list[str] | None,
    suite: str | None,
    phase: str | None,
    overwrite: bool,
    output_dir: Path | None,
    reasoning_level: str | None,
    cost_usd: float | None,
    input_tokens: int | None,
    output_tokens: int | None,
    api_seconds: float | None,
    wall_seconds: float | None,
    wait_: bool,
    timeout: float | None,
    as_json: bool,
) -> None:
    """Submit a patch (--task, --patch) or a batch of predictions (--predictions) to the service."""
    import time

    from grader.client import ApiError

    attempt: dict[str, Any] = {
        "system": system,
        "trial": trial,
        "prompt_variant": prompt_variant,
        "metadata": metadata,
        "callback_url": callback_url,
        "phase": phase,
        "reasoning_level": reasoning_level,
    }
    spent: dict[str, Any] = {
        "cost_usd": cost_usd,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "api_seconds": api_seconds,
        "wall_seconds": wall_seconds,
    }
    if predictions_file is not None:
        if task_id or patch_file:
            raise click.UsageError("give either --predictions or --task with --patch, not both")
        for name, value in spent.items():
            if value is not None:
                raise click.UsageError(
                    f"--{name.replace('_', '-')} goes with --task: with --predictions each line gives its own {name}"
                )
        run_id = run_id or run_id_from(predictions_file)
        if not run_id:
            raise click.UsageError("--predictions - needs --run-id (there is no file name to take it from)")
        _submit_batch(
            client,
            predictions_file,
            run_id,
            attempt,
            suite=suite,
            instance_ids=instance_ids,
            overwrite=overwrite,
            output_dir=output_dir,
            wait_=wait_ or output_dir is not None,
            timeout=timeout,
            as_json=as_json,
        )
        return
    if not (task_id and patch_file):
        raise click.UsageError("give --task and --patch (or --predictions)")
    for given, name in ((instance_ids, "--instance-ids"), (output_dir, "--output-dir")):
        if given:
            raise click.UsageError(f"{name} goes with --predictions")
    if overwrite and not run_id:
        raise click.UsageError("--overwrite with --task replaces an attempt of a run: give --run-id")
    if suite is not None:
        _outside_suite(client, suite, [task_id])
    started = time.monotonic()
    hold = None if not wait_ else LONG_POLL if timeout is None else min(timeout, LONG_POLL)
    try:
        sub = client.submit(
            task_id, patch_file.read(), run_id=run_id, wait=hold, overwrite=overwrite, **attempt, **spent
        )
    except ApiError as exc:
        if exc.code != "attempt_exists":
            raise
        shown = task_id if trial is None else f"{task_id} trial {trial}"
        err.print(
            f"[red]error:[/red] run {escape(run_id)} already holds an attempt at {escape(shown)}; submit it "
            "as a new --trial, under another --run-id, or replace that attempt with --overwrite",
            highlight=False,
            soft_wrap=True,
        )
        sys.exit(2)
    if wait_ and sub["status"] not in ("done", "cancelled"):
        remaining = None if timeout is None else max(0.0, timeout - (time.monotonic() - started))
        with err.status(f"waiting for the verdict of {sub['id']}"):
            sub = client.wait([sub["id"]], timeout=remaining)[sub["id"]]
    if as_json:
        click.echo(json.dumps(sub, indent=2))
    else:
        print_submission(sub)
        if wait_ and run_id and sub["status"] == "done" and (score := _score(client, run_id)) is not None:
            print_score(score)
    if not wait_:
        return
    verdict = verdict_of(sub.get("verdict")) if sub["status"] == "done" else None
    if verdict is not None:
        sys.exit(EXIT[verdict])
    if sub["status"] != "cancelled":
        err.print(f"no verdict within {timeout:g} s; see `grader status {sub['id']}` later", highlight=False)
    sys.exit(EXIT_NO_VERDICT)


def _read_predictions(predictions_file: str, instance_ids: list[str] | None) -> list[dict[str, Any]]:
    """The file's predictions, only those of `instance_ids` when given (each must be there)."""
    from grader.client import PredictionsError, parse_predictions, read_predictions

    try:
        if predictions_file == "-":
            # click 8.5 serves get_text_stream (deprecated) through a module __getattr__ typed `object`
            stdin = click.get_text_stream("stdin")  # type: ignore[operator]
            items = parse_predictions(stdin.read(), source="<stdin>")
        else:
            items = read_predictions(predictions_file)
    except PredictionsError as exc:
        err.print(f"[red]error:[/red] {escape(exc)}", highlight=False, soft_wrap=True)
        sys.exit(2)
    if instance_ids is None:
        return items
    wanted = set(instance_ids)
    missing = sorted(wanted - {_task_of(i) for i in items})
    if missing:
        raise click.UsageError(
            f"--instance-ids names {len(missing)} instance(s) that {predictions_file} does not "
            f"hold: {', '.join(missing[:10])}{' ...' if len(missing) > 10 else ''}"
        )
    return [i for i in items if _task_of(i) in wanted]


def _task_of(item: dict[str, Any]) -> str:
    return str(item.get("instance_id") or item.get("task_id"))


def _outside_suite(client: Client, suite: str, task_ids: list[str]) -> None:
    """--suite: every task must be one of the suite's (the service names the suites when
    it has no such suite); else exit 2 naming those that are not, before anything is sent."""
    inside = {t["id"] for t in client.tasks(suite=suite)}
    outside = sorted(set(task_ids) - inside)
    if outside:
        err.print(
            f"[red]error:[/red] {len(outside)} task(s) are not in suite {escape(suite)}: "
            f"{escape(', '.join(outside[:10]))}{' ...' if len(outside) > 10 else ''}; nothing was submitted",
            highlight=False,
            soft_wrap=True,
        )
        sys.exit(2)


def _reused(
    client: Client, run_id: str, items: list[dict[str, Any]], trial: int | None
) -> list[tuple[str, int | None]]:
    """The (task, trial) pairs of `items` that the run already holds a submission for
    (cancelled ones aside): what submitting again would silently add a second attempt at."""
    held = {
        (s["task_id"], s.get("trial"))
        for s in client.list(run_id=run_id, page_size=1000)
        if s.get("status") != "cancelled"
    }
    wanted = {(_task_of(i), i["trial"] if i.get("trial") is not None else trial) for i in items}
    return sorted(held & wanted, key=lambda p: (p[0], -1 if p[1] is None else p[1]))


def _submit_batch(
    client: Client,
    predictions_file: str,
    run_id: str,
    attempt: dict[str, Any],
    *,
    suite: str | None,
    instance_ids: list[str] | None,
    overwrite: bool,
    output_dir: Path | None,
    wait_: bool,
    timeout: float | None,
    as_json: bool,
) -> None:
    from grader.client import ApiError

    items = _read_predictions(predictions_file, instance_ids)
    if suite is not None:
        _outside_suite(client, suite, [_task_of(i) for i in items])
    if overwrite:
        try:
            gone = client.delete_run(run_id)
        except ApiError as exc:
            if exc.status != 404:
                raise
        else:
            err.print(
                f"run {escape(run_id)} replaced: the earlier one is deleted "
                f"({gone.get('submissions_detached', 0)} submission(s) detached from it)",
                highlight=False,
            )
    else:
        reused = _reused(client, run_id, items, attempt["trial"])
        if reused:
            shown = ", ".join(t if n is None else f"{t} trial {n}" for t, n in reused[:5])
            err.print(
                f"[red]error:[/red] run {escape(run_id)} already holds {len(reused)} of these task and trial "
                f"pair(s) ({escape(shown)}{' ...' if len(reused) > 5 else ''}); submit them as a new "
                "--trial, under another --run-id, or replace the run with --overwrite",
                highlight=False,
                soft_wrap=True,
            )
            sys.exit(2)
    try:
        answer = client.submit_batch(items, run_id=run_id, **attempt)
    except ApiError as exc:
        if exc.partial and exc.partial["accepted"]:
            err.print(
                f"{exc.partial['accepted']} item(s) were accepted before this failure (run {run_id})",
                highlight=False,
                markup=False,
            )
        raise
    ignored: dict[str, int] = {}
    for item in answer["items"]:
        for name in item.get("ignored") or []:
            ignored[name] = ignored.get(name, 0) + 1
        if "error" in item:
            err.print(
                f"[red]rejected[/red] #{item['index']} {escape(_task_of(items[item['index']]))}: "
                f"{escape(item['error']['message'])} ({escape(item['error']['code'])})",
                highlight=False,
                soft_wrap=True,
            )
    if ignored:
        err.print(
            "not kept (grader has no such field): "
            + ", ".join(f"{escape(k)} on {n} item(s)" for k, n in sorted(ignored.items())),
            highlight=False,
            soft_wrap=True,
        )
    ids = [item["id"] for item in answer["items"] if "id" in item]
    if not wait_:
        if as_json:
            click.echo(json.dumps(answer, indent=2))
        else:
            out.print(
                f"run {escape(run_id)}: {answer['accepted']} accepted, {answer['rejected']} rejected", highlight=False
            )
        sys.exit(0 if not answer["rejected"] else EXIT_REJECTED)
    with batch_progress() as bar:
        job = bar.add_task("grading", total=len(ids))
        subs = client.wait(ids, timeout=timeout, run_id=run_id, on_done=lambda _: bar.advance(job))
    counts: dict[str, int] = {str(v): 0 for v in Verdict}
    for sub in subs.values():
        key = sub.get("verdict") if sub["status"] == "done" else sub["status"]
        key = "not finished" if key in ("queued", "running") else key or "no verdict"
        counts[key] = counts.get(key, 0) + 1
    counts["rejected"] = answer["rejected"]
    final = sum(1 for s in subs.values() if s["status"] == "done" and s.get("verdict"))
    report_file = None
    if output_dir is not None and final == len(ids) and ids:
        output_dir.mkdir(parents=True, exist_ok=True)
        report_file = _report_path(output_dir, run_id)
        report_file.write_text(json.dumps(client.report(run_id), indent=1) + "\n")
    score = _score(client, run_id)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "batch": answer,
                    "submissions": [subs[i] for i in ids if i in subs],
                    "counts": counts,
                    "run": score,
                    "report": str(report_file) if report_file else None,
                },
                indent=2,
            )
        )
    else:
        if score is not None:
            print_score(score)  # first the run's score, as the leaderboard ranks it; then this batch's verdicts
        print_verdict_counts(run_id, counts)
    if report_file:
        err.print(f"SWE-bench report: {report_file}", highlight=False, markup=False, soft_wrap=True)
    elif output_dir is not None:
        err.print("no report written: not every submission has its verdict", highlight=False)
    if final < len(ids):
        err.print(f"{len(ids) - final} of {len(ids)} submission(s) reached no verdict", highlight=False)
    sys.exit(EXIT_REJECTED if answer["rejected"] else EXIT_NO_VERDICT if final < len(ids) else 0)


def _score(client: Client, run_id: str) -> dict[str, Any] | None:
    """The run's view (its score over its suites), or None if it cannot be read now."""
    from grader.client import ApiError

    try:
        return client.run(run_id)
    except ApiError as exc:
        err.print(f"the run's score could not be read: {escape(exc.message)}", highlight=False, soft_wrap=True)
        return None


@main.command("status")
@click.argument("submission_id")
@click.option("--json", "as_json", is_flag=True, help="Print the submission, with its result, as JSON.")
@remote
def status_cmd(client: Client, submission_id: str, as_json: bool) -> None:
    """Show a submission: status, verdict, times, host, and the result once done."""
    sub = client.get(submission_id)
    if as_json:
        click.echo(json.dumps(sub, indent=2))
    else:
        print_submission(sub)


# --- runs and the leaderboard ------------------------------------------------------------
@main.group()
def runs() -> None:
    """Runs (campaigns): their figures and paired comparisons, from the service."""


@runs.command("list")
@click.option("--json", "as_json", is_flag=True)
@remote
def runs_list(client: Client, as_json: bool) -> None:
    """Your team's runs and every public one."""
    items = client.runs()
    if as_json:
        click.echo(json.dumps(items, indent=1))
        return
    print_runs(items)


@runs.command("show")
@click.argument("run")
@window
@click.option("--json", "as_json", is_flag=True)
@remote
def runs_show(
    client: Client,
    run: str,
    suite: str | None,
    language: str | None,
    variant: str | None,
    since: str | None,
    until: str | None,
    as_json: bool,
) -> None:
    """RUN's figures (with numerators, denominators and 95% intervals) and its per-task table."""
    view = client.run(run, suite=suite, language=language, variant=variant, since=since, until=until)
    if as_json:
        click.echo(json.dumps(view, indent=1))
        return
    print_run(view)


@runs.command("compare")
@click.argument("a")
@click.argument("b")
@window
@click.option("--json", "as_json", is_flag=True)
@remote
def runs_compare(
    client: Client,
    a: str,
    b: str,
    suite: str | None,
    language: str | None,
    variant: str | None,
    since: str | None,
    until: str | None,
    as_json: bool,
) -> None:
    """A against B on their common tasks: wins, losses, the solve-rate difference and McNemar's p."""
    res = client.compare(a, b, suite=suite, language=language, variant=variant, since=since, until=until)
    if as_json:
        click.echo(json.dumps(res, indent=1))
        return
    print_comparison(res)


@runs.command("export")
@click.argument("run")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["predictions", "report"]),
    default="predictions",
    show_default=True,
    help="predictions: your patches as SWE-bench predictions (JSONL, one per task); report: SWE-bench's report (JSON).",
)
@click.option("--out", "dest", type=click.File("w"), default="-", help="The file to write [default: stdout].")
@remote
def runs_export(client: Client, run: str, fmt: str, dest: IO[str]) -> None:
    """RUN in SWE-bench's formats: what `submit --predictions` and SWE-bench's harness read."""
    if fmt == "report":
        dest.write(json.dumps(client.report(run), indent=1) + "\n")
        return
    predictions = client.predictions(run)
    dest.writelines(json.dumps(p) + "\n" for p in predictions)
    err.print(f"{len(predictions)} prediction(s) of run {escape(run)}", highlight=False)


@runs.command("publish")
@click.argument("run")
@click.option("--method", default=None, help="The method's name, as the leaderboard shows it.")
@click.option("--description", default=None, help="What the system is and how it was run.")
@click.option("--project-url", default=None, help="The project's page (http or https).")
@click.option("--paper-url", default=None, help="The paper (http or https).")
@click.option("--json", "as_json", is_flag=True, help="Print the run as JSON.")
@remote
def runs_publish(
    client: Client,
    run: str,
    method: str | None,
    description: str | None,
    project_url: str | None,
    paper_url: str | None,
    as_json: bool,
) -> None:
    """Make RUN public, with its method and description: PATCH /v1/runs/RUN."""
    meta = client.publish(run, method=method, description=description, project_url=project_url, paper_url=paper_url)
    if as_json:
        click.echo(json.dumps(meta, indent=1))
        return
    out.print(
        f"run {escape(meta['name'])} ({meta['id']}) is public"
        + (f": {escape(meta['method'])}" if meta.get("method") else ""),
        highlight=False,
    )
    out.print(f"its page: {client.url}/runs/{meta['id']}", highlight=False, markup=False, soft_wrap=True)


def _archive_format(dest: Path | None, fmt: str | None) -> str:
    """--format, else what the file's name says (.zip; .tar.gz, .tgz), else tar.gz."""
    if fmt:
        return fmt
    name = dest.name.lower() if dest else ""
    return "zip" if name.endswith(".zip") else "tar.gz"


@runs.command("logs")
@click.argument("run")
@click.option(
    "-o",
    "--out",
    "dest",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The archive to write [default: RUN-logs.tar.gz here].",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["tar.gz", "zip"]),
    default=None,
    help="[default: from the file's name: .zip is a zip, anything else tar.gz]",
)
@remote
def runs_logs(client: Client, run: str, dest: Path | None, fmt: str | None) -> None:
    """Download every submission's logs of RUN (patch, test output, result) as one archive;
    a run larger than the service puts in one archive comes as several (OUT, then
    OUT's name with .2, .3, ... before its extension)."""
    fmt = _archive_format(dest, fmt)
    dest = dest or Path(f"{_file_name(run)}-logs.{fmt}")
    for path, size in client.run_logs_pages(run, dest, fmt):
        err.print(f"{path} ({size:,} bytes)", highlight=False, markup=False, soft_wrap=True)


@runs.command("delete")
@click.argument("run")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@remote
def runs_delete(client: Client, run: str, yes: bool) -> None:
    """Delete RUN, before it is published: the run goes, its submissions stay in your
    history (and your quota) with no run, and the run id can be used again. A run that
    has been public cannot be deleted (the host can hide it). Where the host refunds
    deleted runs, its queued submissions are cancelled and those never graded are given
    back to today's quota (`grader quota` says how many)."""
    if not yes:
        click.confirm(f"delete run {run}? its submissions stay, without a run", abort=True, err=True)
    res = client.delete_run(run)
    out.print(
        f"run {escape(res['deleted']['name'])} ({res['deleted']['id']}) deleted; "
        f"{res['submissions_detached']} submission(s) kept without a run",
        highlight=False,
    )
    if res.get("submissions_cancelled") or res.get("quota_refunded"):
        out.print(
            f"{res.get('submissions_cancelled', 0)} queued submission(s) cancelled; "
            f"{res.get('quota_refunded', 0)} never graded given back to today's quota",
            highlight=False,
        )


@main.command("account")
@click.option("--json", "as_json", is_flag=True, help="Print the account as JSON (the webhook secret included).")
@remote
def account_cmd(client: Client, as_json: bool) -> None:
    """Your team, its quotas and what is left of them today (GET /v1/account)."""
    acc = client.account()
    if as_json:
        click.echo(json.dumps(acc, indent=1))
        return
    q, used = acc.get("quotas") or {}, acc.get("usage") or {}
    day, at_once = q.get("per_day"), q.get("queued_at_once")
    today, active = used.get("today", 0), used.get("queued_or_running", 0)
    out.print(f"team {escape(acc['team'])}{' (host)' if acc.get('admin') else ''}", highlight=False)
    out.print(
        f"today: {today} of {day} submissions sent, {max(0, (day or 0) - today)} left (the day is UTC's)",
        highlight=False,
    )
    if q.get("refund_deleted_per_day"):
        out.print(
            f"given back by deleted runs today: {used.get('refunded_today', 0)} of at most "
            f"{q['refund_deleted_per_day']} (cancelled before they were graded; not in the count above)",
            highlight=False,
        )
    out.print(f"now: {active} of at most {at_once} queued or running", highlight=False)


main.add_command(account_cmd, "quota")


@main.group()
def phases() -> None:
    """A challenge's phases: each a suite offered in a window, with limits and its own board."""


@phases.command("list")
@click.option("--json", "as_json", is_flag=True)
@remote
def phases_list(client: Client, as_json: bool) -> None:
    """Every phase: its suite, window (open now, or why not), limits and split."""
    items = client.phases()
    if as_json:
        click.echo(json.dumps(items, indent=1))
        return
    if not items:
        out.print("no phase is set up", highlight=False)
        return
    from rich.table import Table

    t = Table("phase", "suite", "window (UTC)", "limits a team", "split", "now", title="phases")
    for p in items:
        limits = ", ".join(
            x
            for x in (
                f"{p['daily_limit']} a day" if p.get("daily_limit") is not None else "",
                f"{p['total_limit']} in all" if p.get("total_limit") is not None else "",
            )
            if x
        )
        t.add_row(
            escape(p["slug"]),
            escape(p["suite"]),
            f"{(p.get('starts_at') or 'open')[:16]} – {(p.get('ends_at') or 'no end')[:16]}",
            limits or "the team's quota",
            "private" if p.get("private") else "public",
            "open" if p.get("open") else escape(p.get("closed_because") or "closed"),
        )
    out.print(t)


@phases.command("apply")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@remote
def phases_apply(client: Client, path: Path) -> None:
    """Set up the phases a YAML file lists (an admin key): a list of mappings, each with its
    `slug` and the fields of PUT /v1/admin/phases/<slug> (name, suite, description,
    starts_at, ends_at, daily_limit, total_limit, private, reveal, auto_publish). Each is
    created, or changed in the fields it gives; a file applied twice changes nothing."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise click.BadParameter(f"cannot read {path}: {exc}") from None
    if not isinstance(data, list) or not all(isinstance(x, dict) and x.get("slug") for x in data):
        raise click.BadParameter(f"{path} must be a list of phases, each a mapping with its slug")
    for entry in data:
        fields = {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in entry.items() if k != "slug"}
        phase = client.put_phase(str(entry["slug"]), **fields)
        state = "open" if phase["open"] else phase["closed_because"]
        out.print(f"phase {escape(phase['slug'])} ({escape(phase['suite'])}): {escape(state)}", highlight=False)


@main.command("leaderboard")
@click.option("--phase", default=None, help="A challenge phase's own board (`grader phases list`).")
@window
@click.option("--all", "include_incomplete", is_flag=True, help="Also show incomplete runs (never ranked).")
@click.option("--json", "as_json", is_flag=True)
@remote
def leaderboard_cmd(
    client: Client,
    phase: str | None,
    suite: str | None,
    language: str | None,
    variant: str | None,
    since: str | None,
    until: str | None,
    include_incomplete: bool,
    as_json: bool,
) -> None:
    """The public leaderboard, as the portal shows it: runs ranked by the tasks of their
    suites' whole task set they resolve (a task not attempted is not resolved)."""
    rows = client.leaderboard(
        phase=phase,
        suite=suite,
        language=language,
        variant=variant,
        since=since,
        until=until,
        include_incomplete=include_incomplete,
    )
    if as_json:
        click.echo(json.dumps(rows, indent=1))
        return
    print_leaderboard(rows, filtered=any((suite, language, variant, since, until)))
