"""The `grader` command: thin commands over the modules below it.

Exit status of `grader grade`: 0 PASS; 1 FAIL, PATCH FAILED or TIMED OUT; 3 ERROR (the
grading machinery failed); 2 for a usage error (unknown task, unreadable patch).
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from grader.config import Settings, get_settings
from grader.errors import GraderError, TaskError
from grader.images import Images
from grader.pipeline import Grader
from grader.tasks.loader import TaskSet
from grader.tasks.model import PROMPT_VARIANTS
from grader.tasks.prepare import checkout_base
from grader.tasks.validate import validate_task
from grader.verdict import Result, Verdict

# Piped output (CI logs, files) gets wide lines instead of rich's 80-column default.
out = Console(width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True)
VERDICT_STYLE = {Verdict.PASS: "bold green", Verdict.FAIL: "bold red", Verdict.PATCH_FAILED: "bold yellow",
                 Verdict.TIMED_OUT: "bold magenta", Verdict.ERROR: "bold white on red"}
EXIT = {Verdict.PASS: 0, Verdict.FAIL: 1, Verdict.PATCH_FAILED: 1, Verdict.TIMED_OUT: 1, Verdict.ERROR: 3}
# Past the verdicts: 2 a usage error or a refusal of the request (click's own 2 for usage),
# 4 a batch with rejected items, 5 a --wait that ran out before every verdict.
EXIT_USAGE, EXIT_REJECTED, EXIT_NO_VERDICT = 2, 4, 5


def common(fn):
    """--tasks-dir (and GRADER_TASKS_DIR) on every command; machinery faults as clean errors."""

    @click.option("--tasks-dir", type=click.Path(path_type=Path), default=None,
                  help="Directory of task files [default: tasks/, or GRADER_TASKS_DIR].")
    @functools.wraps(fn)
    def wrapper(*args, tasks_dir: Path | None, **kwargs):
        settings = get_settings(tasks_dir=tasks_dir)
        try:
            return fn(settings, *args, **kwargs)
        except TaskError as exc:
            err.print(f"[red]error:[/red] {exc}", highlight=False)
            sys.exit(2)
        except GraderError as exc:
            err.print(f"[red]grading machinery error:[/red] {exc}", highlight=False)
            sys.exit(3)

    return wrapper


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=err, transient=True)


def _log(line: str) -> None:
    err.print(line, style="dim", highlight=False, markup=False)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="grader")
def main() -> None:
    """Grade unified-diff patches against tasks in isolated containers."""


# --- grade --------------------------------------------------------------------------
@main.command()
@click.option("--task", "task_id", required=True, help="The task id.")
@click.option("--patch", "patch_file", required=True, type=click.File("rb"), help="The unified diff; '-' reads stdin.")
@click.option("--json", "as_json", is_flag=True, help="Print the full result as JSON.")
@click.option("--runtime", type=click.Choice(["runc", "runsc"]), default=None, help="OCI runtime [default: runc].")
@common
def grade(settings: Settings, task_id: str, patch_file, as_json: bool, runtime: str | None) -> None:
    """Grade one patch against one task."""
    task = TaskSet(settings.tasks_dir).get(task_id)
    patch = patch_file.read()
    result = Grader(settings, runtime=runtime).grade(task, patch)
    if as_json:
        click.echo(result.to_json())
    else:
        _print_result(result)
    sys.exit(EXIT[result.verdict])


def _print_result(result: Result) -> None:
    out.print(f"[{VERDICT_STYLE[result.verdict]}]{result.verdict}[/]  {result.task_id}")
    out.print(result.explanation, highlight=False)
    if result.tests and (result.tests.fail_to_pass["failure"] or result.tests.pass_to_pass["failure"]):
        for kind in ("fail_to_pass", "pass_to_pass"):
            for tid in getattr(result.tests, kind)["failure"]:
                out.print(f"  [red]✗[/red] {tid} ({kind.upper()}: {result.tests.all.get(tid, 'not run')})", highlight=False)
    if result.apply.method:
        out.print(f"applied with: {result.apply.method}", style="dim")
    if result.apply.neutralized:
        out.print(f"reverted runner files: {', '.join(result.apply.neutralized)}", style="yellow")
    if result.verdict is Verdict.PATCH_FAILED:
        for a in result.apply.attempts:
            out.print(f"--- {a.command} (exit {a.exit_code})\n{a.output.strip()}", style="dim", highlight=False, markup=False)
    if result.error:
        out.print(result.error, style="red", highlight=False, markup=False)
    times = ", ".join(f"{k} {v:.2f}s" for k, v in result.durations.items() if not k.startswith("container_"))
    out.print(f"durations: {times}", style="dim")


# --- tasks ----------------------------------------------------------------------------
@main.group()
def tasks() -> None:
    """List, show, validate, build and check out tasks."""


class _Served:
    """The service a task command asks when there is no local task folder to read: no
    tasks directory, or none holding the task (a remote team has neither), or --url."""

    def __init__(self, url: str | None, api_key: str | None):
        self.named = url is not None
        self.url, self.api_key = url, api_key
        self.why = ""

    def client(self, why: str):
        """`why`: what was missing here, said first if the service cannot be asked either."""
        self.why = why
        return _client_or_exit(self.url, self.api_key, why=why)


def served(fn):
    """--url and --api-key on `tasks list / show / checkout`, which read the local task
    folders when there are any and ask the service (GRADER_API_URL) otherwise."""

    @click.option("--url", default=None,
                  help="Ask this grader service, not the local tasks [default without local tasks: GRADER_API_URL].")
    @click.option("--api-key", default=None, help="The API key for the service [default: GRADER_API_KEY].")
    @functools.wraps(fn)
    def wrapper(settings: Settings, *args, url: str | None, api_key: str | None, **kwargs):
        from grader.client import ApiError
        service = _Served(url, api_key)
        try:
            return fn(settings, service, *args, **kwargs)
        except ApiError as exc:
            _api_error_exit(exc, why=service.why)

    return wrapper


def _local_tasks(settings: Settings, service: _Served) -> TaskSet | None:
    return None if service.named or not settings.tasks_dir.is_dir() else TaskSet(settings.tasks_dir)


def _no_tasks_dir(settings: Settings) -> str:
    return f"no tasks directory {settings.tasks_dir} here (GRADER_TASKS_DIR or --tasks-dir)"


def _local_task(settings: Settings, service: _Served, task_id: str):
    """The task from its local folder, or None (with why, for `service.client`)."""
    ts = _local_tasks(settings, service)
    if ts is not None and task_id in ts.ids():
        return ts.get(task_id), ""
    return None, ("" if service.named else _no_tasks_dir(settings) if ts is None
                  else f"no task {task_id!r} in {settings.tasks_dir} (GRADER_TASKS_DIR or --tasks-dir)")


@tasks.command("list")
@click.option("--json", "as_json", is_flag=True)
@common
@served
def tasks_list(settings: Settings, service: _Served, as_json: bool) -> None:
    """List the tasks (public fields only), from the local tasks or the service."""
    # leniently, as the service loads: a broken file is named (exit 1), the rest listed
    ts = None if service.named or not settings.tasks_dir.is_dir() else TaskSet(settings.tasks_dir, strict=False)
    views = [t.public_view() for t in ts] if ts is not None else \
        service.client("" if service.named else _no_tasks_dir(settings)).tasks()
    refused = ts.refused if ts is not None else {}
    for path, why in refused.items():
        err.print(f"[red]refused[/red] {_escape(path)}: {_escape(why)}")
    if as_json:
        click.echo(json.dumps(views, indent=2))
        sys.exit(1 if refused else 0)
    table = Table("id", "check", "suite", "difficulty", "created", "environment")
    for v in views:
        meta = v.get("metadata") or {}
        table.add_row(_escape(v["id"]), _escape(v.get("check", "")), _escape(meta.get("suite") or ""),
                      _escape(meta.get("difficulty") or ""), _escape(meta.get("created_at") or ""),
                      _escape(v.get("environment", "")))
    out.print(table)
    if refused:
        sys.exit(1)


@tasks.command("show")
@click.argument("task_id")
@common
@served
def tasks_show(settings: Settings, service: _Served, task_id: str) -> None:
    """Show a task's public view (no gold patch, no hidden tests), from the local tasks or the service."""
    task, why = _local_task(settings, service, task_id)
    view = task.public_view() if task else service.client(why).task(task_id)
    click.echo(json.dumps(view, indent=2))


@tasks.command("validate")
@click.argument("task_ids", nargs=-1)
@click.option("--repeat", default=1, show_default=True, type=click.IntRange(1, 100), help="Runs of each patch.")
@click.option("--json", "as_json", is_flag=True)
@click.option("--runtime", type=click.Choice(["runc", "runsc"]), default=None)
@common
def tasks_validate(settings: Settings, task_ids: tuple[str, ...], repeat: int, as_json: bool, runtime: str | None) -> None:
    """Check that the empty patch FAILs and the gold patch PASSes, REPEAT times each."""
    selected = TaskSet(settings.tasks_dir).select(list(task_ids))
    grader = Grader(settings, runtime=runtime)
    reports = []
    with _progress() as bar:
        job = bar.add_task("validating", total=len(selected) * repeat * 2)
        for task in selected:
            bar.update(job, description=f"validating {task.id}")
            reports.append(validate_task(grader, task, repeat, progress=lambda: bar.advance(job)))
    if as_json:
        click.echo(json.dumps([r.as_dict() for r in reports], indent=2))
    else:
        table = Table("task", "empty patch", "gold patch", "result")
        for r in reports:
            table.add_row(r.task_id, " ".join(map(str, r.empty)), " ".join(map(str, r.gold)),
                          "[green]ok[/green]" if r.ok else "[red]" + ("flaky" if r.flaky else "invalid") + "[/red]")
        out.print(table)
        for r in reports:
            for p in r.problems:
                out.print(f"[red]{r.task_id}:[/red] {p}", highlight=False)
    bad = [r for r in reports if not r.ok]
    if bad:
        err.print(f"{len(bad)} of {len(reports)} task(s) failed validation"
                  + (f"; flaky: {', '.join(r.task_id for r in bad if r.flaky)}" if any(r.flaky for r in bad) else ""))
        sys.exit(1)


@tasks.command("build")
@click.argument("task_ids", nargs=-1)
@common
def tasks_build(settings: Settings, task_ids: tuple[str, ...]) -> None:
    """Build the instance images of the tasks (all by default)."""
    selected = TaskSet(settings.tasks_dir).select(list(task_ids))
    images = Images(settings)
    with _progress() as bar:
        job = bar.add_task("building", total=len(selected))
        for task in selected:
            bar.update(job, description=f"instance image {task.id}")
            image_id, _ = images.instance_image(task, log=_log)
            bar.advance(job)
    err.print(f"{len(selected)} instance image(s) ready")


@tasks.command("checkout")
@click.argument("task_id")
@click.argument("dest", type=click.Path(path_type=Path))
@common
@served
def tasks_checkout(settings: Settings, service: _Served, task_id: str, dest: Path) -> None:
    """Write a task's starting repository to DEST, to make a patch against: from its local
    folder, or downloaded from the service (GRADER_API_URL) as a git bundle, its sha256
    checked. Either way DEST holds the base commit alone, detached, and for a conflict
    task the merge in progress, as the grader starts from."""
    import shutil
    import tempfile

    from grader.tasks.prepare import checkout_bundle
    if dest.exists():
        raise click.UsageError(f"{dest} exists")
    task, why = _local_task(settings, service, task_id)
    try:
        if task:
            checkout_base(task, dest, settings.cache_dir)
            merge, source = task.repo.merge, ""
        else:
            client = service.client(why)
            view = client.task(task_id)  # an unknown task is a 404 before any download
            with tempfile.TemporaryDirectory(prefix="grader-") as tmp:
                got = client.repository(task_id, Path(tmp) / f"{task_id}.bundle")
                merge = got["merge"] or view["repo"].get("merge")
                checkout_bundle(Path(tmp) / f"{task_id}.bundle", dest, got["commit"] or view["repo"]["commit"], merge,
                                task_id=task_id)
            source = f" from {client.url} (bundle sha256 {got['sha256'][:16]}, {got['size']} bytes)"
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)  # no half-made DEST to trip the next try
        raise
    err.print(f"checked out {task_id} in {dest}{source}; make your change there, then `git diff > my.patch`",
              highlight=False, markup=False, soft_wrap=True)
    if merge:
        err.print("a conflicted merge is in progress: stage the conflicted files as they are (`git add -u`) "
                  "before resolving them, so that `git diff` compares your resolution with them",
                  highlight=False, markup=False, soft_wrap=True)


# --- tasks import ---------------------------------------------------------------------
@tasks.group("import")
def tasks_import() -> None:
    """Import SWE-bench, RES-Q or GitGoodBench rows as a validated suite (docs/importers.md)."""


def import_options(fn):
    """What every importer takes; FILE is a JSON list or JSONL."""
    for opt in reversed([
        click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path)),
        click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
                     help="Where the suite goes [default: TASKS_DIR/SUITE]."),
        click.option("--only", multiple=True, help="Import only this instance id (repeatable)."),
        click.option("--repo-source", type=click.Choice(["bundle", "url"]), default="bundle", show_default=True,
                     help="bundle: the history the tasks need, in the suite (offline); url: the repository's URL."),
        click.option("--timeout", type=click.FloatRange(min=1, max=3600), default=None,
                     help="Each task's time limit in seconds [default: the task format's]."),
        click.option("--no-validate", "no_validate", is_flag=True,
                     help="Do not grade the empty and gold patches (no Docker); tasks are kept unvalidated."),
        click.option("--keep-invalid", is_flag=True, help="Keep tasks that fail validation (they are reported)."),
        click.option("--skip-broken", is_flag=True, help="Import the other rows when some cannot be converted."),
        click.option("--repeat", default=1, show_default=True, type=click.IntRange(1, 100),
                     help="Validation runs of each patch."),
        click.option("--runtime", type=click.Choice(["runc", "runsc"]), default=None),
        click.option("--json", "as_json", is_flag=True, help="Print the import report as JSON."),
    ]):
        fn = opt(fn)
    return fn


def _import(settings: Settings, source: str, file: Path, no_validate: bool, as_json: bool, **kwargs) -> None:
    from grader.tasks.importers import import_file

    with _progress() as bar:
        job = bar.add_task("importing", total=None)
        report = import_file(source, file, settings=settings, validate=not no_validate,
                             progress=lambda line: bar.update(job, description=line), **kwargs)
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2))
    else:
        table = Table("task", "instance", "status", "empty patch", "gold patch", "why", title=f"{report.source} import")
        for o in report.outcomes:
            style = "red" if o.problems else "green" if o.validated else "yellow"
            table.add_row(o.task_id, o.source_id, f"[{style}]{o.status}[/]", " ".join(o.empty), " ".join(o.gold),
                          _escape("; ".join(o.problems + o.notes)))
        for source_id, why in report.not_converted:
            table.add_row("", source_id, "[red]not converted[/]", "", "", _escape(why))
        out.print(table)
    kept, total = len(report.kept), len(report.outcomes) + len(report.not_converted)
    err.print(f"{kept} of {total} task(s) kept in {report.out} (suite {report.suite}); "
              f"{len(report.invalid)} failed validation, {len(report.not_converted)} not converted; "
              f"the report is {report.out / 'import-report.json'}", highlight=False)
    if not kept:
        sys.exit(1)


def _import_command(source: str, summary: str, *options) -> None:
    """`grader tasks import SOURCE FILE`: the shared options, then the source's own."""

    def command(settings: Settings, file: Path, **kwargs) -> None:
        _import(settings, source, file, **kwargs)

    command.__doc__ = summary
    command.__name__ = f"tasks_import_{source}"
    fn = import_options(common(command))
    for opt in reversed(options):
        fn = opt(fn)
    tasks_import.command(source)(fn)


def _repo_dir(required: bool, otherwise: str):
    return click.option("--repo-dir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
                        required=required, help=f"Local clones as DIR/<owner>__<name>{otherwise}.")


_import_command(
    "swebench", "SWE-bench instances (JSON list or JSONL, as published) as tasks.",
    click.option("--suite", required=True, help="The suite's name (metadata.suite; the directory under TASKS_DIR)."),
    _repo_dir(False, "; others are cloned from GitHub"),
    click.option("--env-map", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
                 help="Per-repository environments (YAML or JSON) for instances without python/requirements."))
_import_command(
    "resq", "RES-Q rows (JSON list or JSONL) as tasks.",
    click.option("--suite", default="resq", show_default=True, help="The suite's name."),
    _repo_dir(False, "; others are cloned from the row's repo_url"))
_import_command(
    "gitgoodbench", "GitGoodBench merge-conflict samples (JSON list or JSONL) as exact-match tasks.",
    click.option("--suite", default="gitgoodbench", show_default=True, help="The suite's name."),
    _repo_dir(True, " holding the merge commits"))


# --- environments and images ------------------------------------------------------------
@main.group()
def env() -> None:
    """Build, list and prune environment images."""


@env.command("build")
@click.argument("names", nargs=-1)
@common
def env_build(settings: Settings, names: tuple[str, ...]) -> None:
    """Build environment images (all by default); unchanged ones are skipped."""
    images = Images(settings)
    envs = [images.environment(n) for n in names] if names else images.environments()
    for e in envs:
        image_id = images.build_env(e.name, log=_log)
        out.print(f"{e.name:20} {images.env_tag(e):45} {image_id[7:19]}", highlight=False)


@env.command("list")
@click.option("--json", "as_json", is_flag=True)
@common
def env_list(settings: Settings, as_json: bool) -> None:
    """List environments and every grader image on this engine."""
    images = Images(settings)
    rows = []
    for e in images.environments():
        tag = images.env_tag(e)
        rows.append({"environment": e.name, "tag": tag, "built": images.engine.image_id(tag) is not None})
    listing = images.listing()
    if as_json:
        click.echo(json.dumps({"environments": rows, "images": listing}, indent=2))
        return
    table = Table("environment", "tag", "built")
    for r in rows:
        table.add_row(r["environment"], r["tag"], "yes" if r["built"] else "no")
    out.print(table)
    table = Table("image", "kind", "size")
    for im in sorted(listing, key=lambda i: (i["labels"].get("grader.kind", ""), i["tags"])):
        table.add_row(", ".join(im["tags"]) or im["id"][:19], im["labels"].get("grader.kind", ""),
                      f"{im['size'] / 1e6:.0f} MB")
    out.print(table)


@env.command("prune")
@click.option("--all", "everything", is_flag=True, help="Remove every environment and instance image.")
@click.option("--dry-run", is_flag=True, help="Only list what would go.")
@common
def env_prune(settings: Settings, everything: bool, dry_run: bool) -> None:
    """Remove images no current environment or task uses (base images are kept)."""
    ts = list(TaskSet(settings.tasks_dir)) if settings.tasks_dir.is_dir() else []
    removed, freed = Images(settings).prune(ts, everything=everything, dry_run=dry_run)
    for name in removed:
        out.print(("would remove " if dry_run else "removed ") + name, highlight=False)
    out.print(f"{len(removed)} image(s), about {freed / 1e6:.0f} MB{' (dry run)' if dry_run else ''}")


@main.group()
def images() -> None:
    """Base images made offline."""


@images.command("bootstrap")
@click.argument("suites", nargs=-1)
@click.option("--force", is_flag=True, help="Rebuild even if the image exists.")
@common
def images_bootstrap(settings: Settings, suites: tuple[str, ...], force: bool) -> None:
    """Make grader/base:SUITE with debootstrap and docker import (default: bookworm)."""
    im = Images(settings)
    for suite in suites or ("bookworm",):
        image_id = im.bootstrap(suite, force=force, log=_log)
        out.print(f"grader/base:{suite} {image_id[7:19]}")


# --- the service: submit and status (clients of the REST API) ----------------------------------
# The HTTP client is imported inside these commands: grading locally never needs it.
# `grader submit --wait` exits as `grader grade` does (EXIT); 2 when the service refuses,
# cannot be reached, or gives no verdict within --timeout.
LONG_POLL = 60.0  # seconds one submit asks the server to hold for its verdict (the server caps it at max_wait)


def remote(fn):
    """--url and --api-key (GRADER_API_URL, GRADER_API_KEY) on commands that talk to the
    service; its errors as clean exits with status 2."""

    @click.option("--url", default=None, help="The grader service [default: GRADER_API_URL, or http://127.0.0.1:8000].")
    @click.option("--api-key", default=None, help="The API key [default: GRADER_API_KEY, which keeps it out of `ps`].")
    @functools.wraps(fn)
    def wrapper(*args, url: str | None, api_key: str | None, **kwargs):
        from pydantic import SecretStr

        from grader.client import ApiError
        client = _client_or_exit(url, api_key)
        try:
            return fn(client, *args, **kwargs)
        except ApiError as exc:
            _api_error_exit(exc)

    return wrapper


def _client_or_exit(url: str | None, api_key: str | None, *, why: str = ""):
    """The service's client from --url / --api-key or GRADER_API_URL / GRADER_API_KEY;
    without a key, exit 2 naming where one goes (after `why`, what else was missing)."""
    from pydantic import SecretStr

    from grader.client import Client
    settings = get_settings(api_url=url, api_key=SecretStr(api_key) if api_key else None)
    if settings.api_key is None:
        first = why + ", and " if why else ""
        err.print(f"[red]error:[/red] {_escape(first)}no API key for {_escape(settings.api_url)}: "
                  "set GRADER_API_KEY or pass --api-key", highlight=False, soft_wrap=True)
        sys.exit(2)
    return Client(settings.api_url, settings.api_key)


def _api_error_exit(exc, *, why: str = "") -> None:
    """The service's refusal, or its absence, in one line; exit 2. A service that did not
    answer is named with its URL alone (no transport trace); a refused key says where it came from."""
    text = exc.message if exc.status is None else str(exc)
    if exc.status == 401:
        text += "; the key comes from --api-key or GRADER_API_KEY"
    err.print(f"[red]error:[/red] {_escape(why + '; ' if why else '')}{_escape(text)}", highlight=False, soft_wrap=True)
    sys.exit(2)


def _escape(text: object) -> str:
    """Text from the service, printed literally: a '[' in a message is not rich markup."""
    from rich.markup import escape
    return escape(str(text))


def _verdict(value: object) -> Verdict | None:
    try:
        return Verdict(value)
    except ValueError:
        return None


def _metadata(ctx, param, value: str | None) -> dict | None:
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


def _id_list(ctx, param, values: tuple[str, ...]) -> list[str] | None:
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


@main.command("submit")
@click.option("--task", "task_id", default=None, help="The task id (one patch).")
@click.option("--patch", "patch_file", type=click.File("rb"), default=None, help="The unified diff; '-' reads stdin.")
@click.option("--predictions", "predictions_file", default=None, type=click.Path(dir_okay=False, allow_dash=True),
              help="A batch: SWE-bench predictions as a JSON list, JSONL, or a JSON object keyed by instance_id "
                   "('-' reads stdin). A line may carry its own trial, prompt_variant and metadata.")
@click.option("--run-id", default=None,
              help="The run the submission(s) belong to [default with --predictions: the file's name without its "
                   "extension].")
@click.option("--system", default=None, help="The system (agent, model) that made the patch(es).")
@click.option("--trial", type=click.IntRange(0, 1_000_000), default=None,
              help="Which attempt of the run this is (0, 1, 2, ...); with --predictions, for lines that give none.")
@click.option("--prompt-variant", type=click.Choice(PROMPT_VARIANTS), default=None,
              help="The prompt variant the system was given.")
@click.option("--metadata", callback=_metadata, default=None, metavar="JSON|@FILE",
              help="A JSON object kept with the submission(s) (at most 16 KiB).")
@click.option("--callback-url", default=None, help="POSTed each finished submission, signed (X-Grader-Signature).")
@click.option("--instance-ids", "instance_ids", multiple=True, callback=_id_list, metavar="ID[,ID...]",
              help="With --predictions: submit only these instances (comma-separated, or the option repeated).")
@click.option("--overwrite", is_flag=True,
              help="With --predictions: replace the run if it exists (it is deleted first, as `grader runs delete` "
                   "does). Without it, a run that already holds any of these tasks and trials is refused.")
@click.option("--output-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="With --predictions: wait, then write the run's SWE-bench report to DIR/RUN.json.")
@click.option("--wait", "wait_", is_flag=True, help="Wait for the verdict(s).")
@click.option("--timeout", type=click.FloatRange(min=0), default=None,
              help="With --wait: give up after this many seconds [default: no limit].")
@click.option("--json", "as_json", is_flag=True, help="Print the submission(s) as JSON.")
@remote
def submit_cmd(client, task_id: str | None, patch_file, predictions_file: str | None, run_id: str | None,
               system: str | None, trial: int | None, prompt_variant: str | None, metadata: dict | None,
               callback_url: str | None, instance_ids: list[str] | None, overwrite: bool, output_dir: Path | None,
               wait_: bool, timeout: float | None, as_json: bool) -> None:
    """Submit a patch (--task, --patch) or a batch of predictions (--predictions) to the service."""
    import time
    attempt = {"system": system, "trial": trial, "prompt_variant": prompt_variant, "metadata": metadata,
               "callback_url": callback_url}
    if predictions_file is not None:
        if task_id or patch_file:
            raise click.UsageError("give either --predictions or --task with --patch, not both")
        run_id = run_id or run_id_from(predictions_file)
        if not run_id:
            raise click.UsageError("--predictions - needs --run-id (there is no file name to take it from)")
        _submit_batch(client, predictions_file, run_id, attempt, instance_ids=instance_ids, overwrite=overwrite,
                      output_dir=output_dir, wait_=wait_ or output_dir is not None, timeout=timeout, as_json=as_json)
        return
    if not (task_id and patch_file):
        raise click.UsageError("give --task and --patch (or --predictions)")
    for given, name in ((instance_ids, "--instance-ids"), (overwrite, "--overwrite"), (output_dir, "--output-dir")):
        if given:
            raise click.UsageError(f"{name} goes with --predictions")
    started = time.monotonic()
    hold = None if not wait_ else LONG_POLL if timeout is None else min(timeout, LONG_POLL)
    sub = client.submit(task_id, patch_file.read(), run_id=run_id, wait=hold, **attempt)
    if wait_ and sub["status"] not in ("done", "cancelled"):
        remaining = None if timeout is None else max(0.0, timeout - (time.monotonic() - started))
        with err.status(f"waiting for the verdict of {sub['id']}"):
            sub = client.wait([sub["id"]], timeout=remaining)[sub["id"]]
    if as_json:
        click.echo(json.dumps(sub, indent=2))
    else:
        _print_submission(sub)
    if not wait_:
        return
    verdict = _verdict(sub.get("verdict")) if sub["status"] == "done" else None
    if verdict is not None:
        sys.exit(EXIT[verdict])
    if sub["status"] != "cancelled":
        err.print(f"no verdict within {timeout:g} s; see `grader status {sub['id']}` later", highlight=False)
    sys.exit(EXIT_NO_VERDICT)


def _read_predictions(predictions_file: str, instance_ids: list[str] | None) -> list[dict]:
    """The file's predictions, only those of `instance_ids` when given (each must be there)."""
    from grader.client import PredictionsError, parse_predictions, read_predictions
    try:
        items = (parse_predictions(click.get_text_stream("stdin").read(), source="<stdin>")
                 if predictions_file == "-" else read_predictions(predictions_file))
    except PredictionsError as exc:
        err.print(f"[red]error:[/red] {_escape(exc)}", highlight=False, soft_wrap=True)
        sys.exit(2)
    if instance_ids is None:
        return items
    wanted = set(instance_ids)
    missing = sorted(wanted - {_task_of(i) for i in items})
    if missing:
        raise click.UsageError(f"--instance-ids names {len(missing)} instance(s) that {predictions_file} does not "
                               f"hold: {', '.join(missing[:10])}{' ...' if len(missing) > 10 else ''}")
    return [i for i in items if _task_of(i) in wanted]


def _task_of(item: dict) -> str:
    return str(item.get("instance_id") or item.get("task_id"))


def _reused(client, run_id: str, items: list[dict], trial: int | None) -> list[tuple[str, int | None]]:
    """The (task, trial) pairs of `items` that the run already holds a submission for
    (cancelled ones aside): what submitting again would silently add a second attempt at."""
    held = {(s["task_id"], s.get("trial")) for s in client.list(run_id=run_id, page_size=1000)
            if s.get("status") != "cancelled"}
    wanted = {(_task_of(i), i["trial"] if i.get("trial") is not None else trial) for i in items}
    return sorted(held & wanted, key=lambda p: (p[0], -1 if p[1] is None else p[1]))


def _submit_batch(client, predictions_file: str, run_id: str, attempt: dict, *, instance_ids: list[str] | None,
                  overwrite: bool, output_dir: Path | None, wait_: bool, timeout: float | None,
                  as_json: bool) -> None:
    from grader.client import ApiError
    items = _read_predictions(predictions_file, instance_ids)
    if overwrite:
        try:
            gone = client.delete_run(run_id)
        except ApiError as exc:
            if exc.status != 404:
                raise
        else:
            err.print(f"run {_escape(run_id)} replaced: the earlier one is deleted "
                      f"({gone.get('submissions_detached', 0)} submission(s) detached from it)", highlight=False)
    else:
        reused = _reused(client, run_id, items, attempt["trial"])
        if reused:
            shown = ", ".join(t if n is None else f"{t} trial {n}" for t, n in reused[:5])
            err.print(f"[red]error:[/red] run {_escape(run_id)} already holds {len(reused)} of these task and trial "
                      f"pair(s) ({_escape(shown)}{' ...' if len(reused) > 5 else ''}); submit them as a new "
                      "--trial, under another --run-id, or replace the run with --overwrite", highlight=False,
                      soft_wrap=True)
            sys.exit(2)
    try:
        answer = client.submit_batch(items, run_id=run_id, **attempt)
    except ApiError as exc:
        if exc.partial and exc.partial["accepted"]:
            err.print(f"{exc.partial['accepted']} item(s) were accepted before this failure (run {run_id})",
                      highlight=False, markup=False)
        raise
    ignored: dict[str, int] = {}
    for item in answer["items"]:
        for name in item.get("ignored") or []:
            ignored[name] = ignored.get(name, 0) + 1
        if "error" in item:
            err.print(f"[red]rejected[/red] #{item['index']} {_escape(_task_of(items[item['index']]))}: "
                      f"{_escape(item['error']['message'])} ({_escape(item['error']['code'])})",
                      highlight=False, soft_wrap=True)
    if ignored:
        err.print("not kept (grader has no such field): " + ", ".join(f"{_escape(k)} on {n} item(s)"
                                                                     for k, n in sorted(ignored.items())),
                  highlight=False, soft_wrap=True)
    ids = [item["id"] for item in answer["items"] if "id" in item]
    if not wait_:
        if as_json:
            click.echo(json.dumps(answer, indent=2))
        else:
            out.print(f"run {_escape(run_id)}: {answer['accepted']} accepted, {answer['rejected']} rejected",
                      highlight=False)
        sys.exit(0 if not answer["rejected"] else EXIT_REJECTED)
    with _progress() as bar:
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
    if as_json:
        click.echo(json.dumps({"batch": answer, "submissions": [subs[i] for i in ids if i in subs],
                               "counts": counts, "report": str(report_file) if report_file else None}, indent=2))
    else:
        table = Table("verdict", "count", title=f"run {_escape(run_id)}")
        for key, n in counts.items():
            verdict = _verdict(key)
            if n or verdict or key == "rejected":
                table.add_row(f"[{VERDICT_STYLE[verdict]}]{key}[/]" if verdict else key, str(n))
        out.print(table)
    if report_file:
        err.print(f"SWE-bench report: {report_file}", highlight=False, markup=False, soft_wrap=True)
    elif output_dir is not None:
        err.print("no report written: not every submission has its verdict", highlight=False)
    if final < len(ids):
        err.print(f"{len(ids) - final} of {len(ids)} submission(s) reached no verdict", highlight=False)
    sys.exit(EXIT_REJECTED if answer["rejected"] else EXIT_NO_VERDICT if final < len(ids) else 0)


@main.command("status")
@click.argument("submission_id")
@click.option("--json", "as_json", is_flag=True, help="Print the submission, with its result, as JSON.")
@remote
def status_cmd(client, submission_id: str, as_json: bool) -> None:
    """Show a submission: status, verdict, times, host, and the result once done."""
    sub = client.get(submission_id)
    if as_json:
        click.echo(json.dumps(sub, indent=2))
    else:
        _print_submission(sub)


def _print_submission(sub: dict) -> None:
    """The service's view (status, times, host), then the result as `grader grade` prints it."""
    from pydantic import ValidationError
    about = ", ".join(f"{k.replace('_', ' ')} {sub[k]}" for k in ("run_id", "system", "trial", "prompt_variant")
                      if sub.get(k) is not None)
    extra = [f"attempts {sub['attempts']}"] if sub.get("attempts", 0) > 1 else []
    extra += ["from cache"] if sub.get("cached") else []
    out.print(f"{_escape(sub['id'])}  [bold]{sub['status']}[/bold]  {_escape(sub.get('task_id', ''))}"
              + (f"  ({_escape(about)})" if about else "") + (f"  [dim]{', '.join(extra)}[/dim]" if extra else ""),
              highlight=False)
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
        verdict = _verdict(sub.get("verdict"))
        label = f"[{VERDICT_STYLE[verdict]}]{verdict}[/]" if verdict else _escape(sub.get("verdict") or "no verdict")
        out.print(f"{label}  {_escape(sub.get('task_id', ''))}", highlight=False)
        explanation = (sub.get("result") or {}).get("explanation")
        if explanation:
            out.print(explanation, highlight=False, markup=False)
        return
    _print_result(result)
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


def _spans(sub: dict) -> str:
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


# --- config and demo ------------------------------------------------------------------------
@main.command("config")
@common
def config_cmd(settings: Settings) -> None:
    """Print the effective settings (defaults <- GRADER_* environment <- options)."""
    for name, value in settings.masked().items():
        out.print(f"GRADER_{name.upper()}={'' if value is None else value}", highlight=False)


BROKEN_PATCH = "--- a/no/such/file.py\n+++ b/no/such/file.py\n@@ -1 +1 @@\n-old\n+new\n"


@main.command()
@click.option("--local", is_flag=True, help="Grade in this process instead of through the service.")
@click.option("--runtime", type=click.Choice(["runc", "runsc"]), default=None, help="With --local.")
@click.option("--json", "as_json", is_flag=True)
@click.option("--url", default=None, help="The grader service [default: GRADER_API_URL].")
@click.option("--api-key", default=None, help="[default: GRADER_API_KEY]")
@common
def demo(settings: Settings, local: bool, runtime: str | None, as_json: bool, url: str | None,
         api_key: str | None) -> None:
    """Grade every task's gold patch, the empty patch and a broken patch through the REST
    API, then the gold patches again (answered from the cache), and print the verdicts."""
    ts = TaskSet(settings.tasks_dir)
    cases = [(t.id, "gold", (t.gold_patch_text() or b"").decode("utf-8")) for t in ts]
    cases += [(t.id, "empty", "") for t in ts]
    cases.append((ts.ids()[0], "broken", BROKEN_PATCH))
    expected = {"gold": Verdict.PASS, "empty": Verdict.FAIL, "broken": Verdict.PATCH_FAILED}
    if local:
        rows = _demo_local(settings, ts, cases, runtime)
    else:
        rows = _demo_service(settings, cases, url, api_key)
    if as_json:
        click.echo(json.dumps(rows, indent=1))
    else:
        table = Table("task", "patch", "verdict", "cached", "seconds", "graded by", "explanation", title="grader demo")
        table.columns[0].no_wrap = True
        for r in rows:
            v = Verdict(r["verdict"]) if r["verdict"] else None
            table.add_row(r["task"], r["patch"], f"[{VERDICT_STYLE[v]}]{v}[/]" if v else str(r["status"]),
                          "yes" if r.get("cached") else "", f"{r['seconds']:.2f}",
                          r.get("host") or ("the cache" if r.get("cached") else ""),
                          _escape(r["explanation"]))
        out.print(table)
    wrong = [(r["task"], r["patch"], r["verdict"]) for r in rows if r["verdict"] != expected[r["patch"].split()[0]]]
    if wrong:
        err.print(f"[red]{len(wrong)} unexpected verdict(s):[/red] {wrong}")
        sys.exit(1)
    err.print(f"[green]all {len(rows)} verdicts as expected[/green] (gold PASS, empty FAIL, broken PATCH FAILED)")


def _demo_local(settings: Settings, ts: TaskSet, cases, runtime) -> list[dict]:
    grader = Grader(settings, runtime=runtime)
    rows = []
    with _progress() as bar:
        job = bar.add_task("grading", total=len(cases))
        for task_id, label, patch in cases:
            bar.update(job, description=f"grading {task_id}")
            r = grader.grade(ts.get(task_id), patch.encode())
            rows.append({"task": task_id, "patch": label, "verdict": r.verdict.value, "status": "done",
                         "seconds": r.durations.get("total", 0.0), "explanation": r.explanation})
            bar.advance(job)
    return rows


def _demo_service(settings: Settings, cases, url: str | None, api_key: str | None) -> list[dict]:
    import time
    import uuid

    from pydantic import SecretStr

    from grader.client import ApiError, Client
    st = get_settings(api_url=url, api_key=SecretStr(api_key) if api_key else None)
    if st.api_key is None:
        err.print("[red]error:[/red] no API key: set GRADER_API_KEY or pass --api-key (scripts/demo.sh does both)")
        sys.exit(2)
    client = Client(st.api_url, st.api_key)
    run = f"demo-{uuid.uuid4().hex[:8]}"
    rows: list[dict] = []
    try:
        for round_, todo in (("", cases), (" again", [c for c in cases if c[1] == "gold"])):
            t0 = time.monotonic()
            answer = client.submit_batch([{"task_id": t, "patch": p, "system": label, "metadata": {"demo": label}}
                                          for t, label, p in todo], run_id=run)
            ids = [it.get("id") for it in answer["items"]]
            refused = [(todo[it["index"]][0], it["error"]["message"]) for it in answer["items"] if "error" in it]
            if refused:
                raise click.ClickException(f"the service refused {len(refused)} submission(s): {refused[:3]}")
            with _progress() as bar:
                job = bar.add_task(f"grading {len(ids)} submissions through {st.api_url}", total=len(ids))
                client.wait(ids, timeout=900, poll=0.5, on_done=lambda _s: bar.advance(job))
            wall = time.monotonic() - t0
            for (task_id, label, _), sid in zip(todo, ids):
                sub = client.get(sid)
                result = sub.get("result") or {}
                rows.append({"task": task_id, "patch": label + round_, "id": sid, "verdict": sub["verdict"],
                             "status": sub["status"], "cached": sub["cached"], "host": sub["host"],
                             "seconds": (result.get("durations") or {}).get("total", 0.0) if not sub["cached"] else 0.0,
                             "explanation": result.get("explanation", "")})
            what = "the gold patches again (the cache answers)" if round_ else "every task: gold, empty, broken"
            err.print(f"{what}: {len(ids)} submissions, {wall:.1f} s from POST to the last verdict", highlight=False)
    except ApiError as exc:
        err.print(f"[red]error:[/red] {_escape(exc)}", highlight=False)
        sys.exit(2)
    return rows


# --- the service: serve, worker, keys, db ------------------------------------------------------
def _service(settings: Settings):
    from grader.service import Service
    settings.require_production_secrets()
    svc = Service(settings)
    svc.db.migrate()
    return svc


@main.command()
@click.option("--bind", default="127.0.0.1:8000", show_default=True, help="HOST:PORT to listen on.")
@click.option("--workers", "processes", type=int, default=2, show_default=True, help="gunicorn worker processes.")
@click.option("--threads", type=int, default=16, show_default=True,
              help="Threads per process. Requests held by ?wait= take at most GRADER_MAX_WAITING_PER_PROCESS "
                   "of them, and never the last 4.")
@common
def serve(settings: Settings, bind: str, processes: int, threads: int) -> None:
    """Run the REST API under gunicorn. The schema is migrated first."""
    from gunicorn.app.base import BaseApplication

    from grader.api import create_app

    _service(settings).close()
    # requests that do not wait must always find a thread: held requests leave at least 4
    settings = settings.model_copy(update={"max_waiting_per_process": max(0, min(settings.max_waiting_per_process,
                                                                                threads - 4))})

    class _App(BaseApplication):
        def load_config(self):
            for key, value in {"bind": bind, "workers": processes, "threads": threads, "worker_class": "gthread",
                               "timeout": int(settings.max_wait + 60), "graceful_timeout": 30,
                               "accesslog": "-", "errorlog": "-", "loglevel": "info",
                               # no query value (a key sent as ?api_key=) is ever written
                               "logger_class": "grader.api.accesslog.RedactingLogger",
                               "proc_name": "grader-api"}.items():
                self.cfg.set(key, value)

        def load(self):
            return create_app(settings, migrate=False)

    _App().run()


@main.command()
@click.option("--count", type=int, default=2, show_default=True, help="Worker processes on this host.")
@click.option("--burst", is_flag=True, help="One worker: grade what is queued, then exit.")
@common
def worker(settings: Settings, count: int, burst: bool) -> None:
    """Run grading workers (restarted if one dies) and the reconciler."""
    import logging

    from grader.jobs import reconcile, run_worker, run_workers

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(processName)s %(name)s %(levelname)s %(message)s")
    svc = _service(settings)
    if burst:
        reconcile(svc, grace=0)
        run_worker(svc, burst=True)
        return
    run_workers(svc, count)


@main.command("reconcile")
@common
def reconcile_cmd(settings: Settings) -> None:
    """One reconciler pass: re-enqueue what the database holds but no live job owns."""
    from grader.jobs import reconcile

    counts = reconcile(_service(settings), grace=0)
    out.print(", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in counts.items()), highlight=False)


@main.group()
def keys() -> None:
    """Teams and their API keys."""


@keys.command("create")
@click.argument("team")
@click.option("--admin", is_flag=True, help="The team may manage tasks and teams.")
@click.option("--daily-quota", type=int, default=None, help="Submissions per UTC day [default: GRADER_DAILY_QUOTA].")
@click.option("--queued-quota", type=int, default=None,
              help="Submissions queued at once [default: GRADER_QUEUED_QUOTA].")
@common
def keys_create(settings: Settings, team: str, admin: bool, daily_quota: int | None, queued_quota: int | None) -> None:
    """Make a new key for TEAM (created if new) and print it, and only it, once."""
    from grader.store.keys import create_key

    svc = _service(settings)
    with svc.db.write() as s:
        key = create_key(s, team, admin=admin, daily_quota=daily_quota, queued_quota=queued_quota)
    click.echo(key)


@keys.command("list")
@common
def keys_list(settings: Settings) -> None:
    """Teams, their quotas and how many live keys they have (never the keys)."""
    from sqlalchemy import select

    from grader.store.models import Team

    svc = _service(settings)
    table = Table("team", "admin", "daily quota", "queued quota", "live keys", "created")
    with svc.db.read() as s:
        for t in s.scalars(select(Team).order_by(Team.name)):
            table.add_row(t.name, "yes" if t.admin else "", str(t.daily_quota or f"{settings.daily_quota} (default)"),
                          str(t.queued_quota or f"{settings.queued_quota} (default)"),
                          str(sum(1 for k in t.keys if k.revoked_at is None)), t.created_at.strftime("%Y-%m-%d"))
    out.print(table)


@keys.command("revoke")
@click.argument("team")
@common
def keys_revoke(settings: Settings, team: str) -> None:
    """Revoke every key of TEAM."""
    from grader.store.keys import revoke_team_keys

    svc = _service(settings)
    with svc.db.write() as s:
        n = revoke_team_keys(s, team)
    out.print(f"revoked {n} key(s) of {team}")


@main.group()
def db() -> None:
    """The service's database."""


@db.command("upgrade")
@common
def db_upgrade(settings: Settings) -> None:
    """Create or migrate the schema to the newest revision (the service and workers also do this)."""
    from grader.store.db import Database

    database = Database(settings.database_url)
    database.migrate()
    out.print(f"{database!r} at revision {database.current_revision()}", highlight=False)


# --- runs and the leaderboard (clients of the REST API) -----------------------------------------
def window(fn):
    """--suite, --variant, --since, --until: the same filters as the API and the portal."""
    for opt in reversed([
        click.option("--suite", default=None, help="Only tasks of this suite."),
        click.option("--variant", default=None, help="Only attempts with this prompt variant."),
        click.option("--since", default=None, help="Only tasks created on or after this date (YYYY-MM-DD)."),
        click.option("--until", default=None, help="Only tasks created on or before this date."),
    ]):
        fn = opt(fn)
    return fn


DASH = "—"  # a figure over nothing: no value, no interval


def _num(value) -> str:
    """A numerator: whole numbers as such, sums of per-task shares to 3 significant digits."""
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return str(int(value)) if isinstance(value, (int, float)) else str(value)


def _fig(fig) -> str:
    """A figure as a person reads it: 66.7% (2/3) [20.8, 93.9]; a dash over no task."""
    if not fig or fig.get("value") is None or not fig.get("denominator"):
        return DASH
    text = f"{100 * fig['value']:.1f}% ({_num(fig.get('numerator'))}/{fig.get('denominator')})"
    ci = fig.get("ci")
    return text + (f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci and ci[0] is not None else "")


def _count(fig) -> str:
    """Tasks out of a task set: 3 of 5 (60.0%)."""
    if not fig or not fig.get("denominator"):
        return DASH
    return f"{_num(fig.get('numerator'))} of {fig['denominator']} ({100 * fig['value']:.1f}%)"


@main.group()
def runs() -> None:
    """Runs (campaigns): their figures and paired comparisons, from the service."""


@runs.command("list")
@click.option("--json", "as_json", is_flag=True)
@remote
def runs_list(client, as_json: bool) -> None:
    """Your team's runs and every public one."""
    items = client.runs()
    if as_json:
        click.echo(json.dumps(items, indent=1))
        return
    table = Table("id", "run", "team", "method", "public", "created")
    for r in items:
        table.add_row(r["id"], _escape(r["name"]), _escape(r["team"]), _escape(r.get("method") or ""),
                      "yes" if r["public"] else "", (r.get("created_at") or "")[:10])
    out.print(table)


@runs.command("show")
@click.argument("run")
@window
@click.option("--json", "as_json", is_flag=True)
@remote
def runs_show(client, run: str, suite, variant, since, until, as_json: bool) -> None:
    """RUN's figures (with numerators, denominators and 95% intervals) and its per-task table."""
    view = client.run(run, suite=suite, variant=variant, since=since, until=until)
    if as_json:
        click.echo(json.dumps(view, indent=1))
        return
    m = view["metrics"]
    state = "complete" if view["complete"] else f"INCOMPLETE ({view['pending']} pending, {view['errors']} errors)"
    lock = f" · published {view['published_at'][:10]}, locked" if view.get("locked") else ""
    out.print(f"[bold]{_escape(view['name'])}[/] by {_escape(view['team'])} · {view['submissions']} submissions · "
              f"{state}{lock}", highlight=False)
    if not m.get("per_task"):
        out.print("no graded submission yet" + (f": {view['pending']} queued or running" if view["pending"] else
                                                   " matches these filters" if any(view.get("filters", {}).values())
                                                   else ""), highlight=False)
        return
    figures = Table("figure", "value", "what it is", title="figures")
    figures.add_row("resolved", _count(m.get("resolved")), "tasks where more than half of the valid trials passed")
    figures.add_row("solve rate", _fig(m.get("solve_rate")), "share of trials passed, averaged over tasks (= pass@1)")
    figures.add_row("success rate", _fig(m.get("success_rate")),
                    "share of trials graded PASS or FAIL, averaged over tasks")
    for k, fig in (m.get("pass_at_k") or {}).items():
        figures.add_row(f"pass@{k}", _fig(fig), "at least one of k attempts passes, over tasks with k trials")
    figures.add_row(f"pass_any@{m.get('trials') or 'n'}", _fig(m.get("pass_any_at_n")), "tasks passed at least once")
    ts = m.get("task_set")
    if ts:
        suites = ", ".join(view.get("suites") or []) or "its suites"
        figures.add_row("resolved over the suite", _count(ts.get("resolved")),
                        f"over every task of {suites}; {ts.get('attempted')} of {ts.get('tasks')} attempted")
        figures.add_row("solve rate over the suite", _fig(ts.get("solve_rate")), "a task not attempted counts 0")
    loc = m.get("localization") or {}
    for name in ("precision", "recall", "f1"):
        if (loc.get(name) or {}).get("denominator"):
            figures.add_row(f"file localization {name}", _fig(loc[name]), "mean over valid attempts")
    out.print(figures)
    for dim, groups in (m.get("breakdowns") or {}).items():
        if groups:
            t = Table(dim, "resolved", "solve rate", "success rate", title=f"by {dim}")
            for name, g in sorted(groups.items()):
                t.add_row(str(name), _count(g.get("resolved")), _fig(g.get("solve_rate")), _fig(g.get("success_rate")))
            out.print(t)
    per = Table("task", "valid trials", "passed", "resolved", "stability", "trials", title="per task")
    for task_id, t in (m.get("per_task") or {}).items():
        per.add_row(task_id, str(t.get("n")), str(t.get("c")), "yes" if t.get("resolved") else "no",
                    (t.get("stability") or DASH).replace("_", " "), " ".join(str(v) for v in t.get("verdicts") or []))
    out.print(per)


@runs.command("compare")
@click.argument("a")
@click.argument("b")
@window
@click.option("--json", "as_json", is_flag=True)
@remote
def runs_compare(client, a: str, b: str, suite, variant, since, until, as_json: bool) -> None:
    """A against B on their common tasks: wins, losses, the solve-rate difference and McNemar's p."""
    res = client.compare(a, b, suite=suite, variant=variant, since=since, until=until)
    if as_json:
        click.echo(json.dumps(res, indent=1))
        return
    c = res["comparison"]
    out.print(f"A = {_escape(res['a']['name'])} ({_escape(res['a']['team'])}), "
              f"B = {_escape(res['b']['name'])} ({_escape(res['b']['team'])})", highlight=False)
    if not c.get("common_tasks"):
        out.print("no graded task in common: nothing to compare task by task", highlight=False)
        return
    t = Table("figure", "value")
    for key, label in (("common_tasks", "common tasks"), ("wins", "A resolved, B not"),
                       ("losses", "B resolved, A not"), ("ties", "ties")):
        t.add_row(label, str(c.get(key)))
    t.add_row("solve-rate difference (A - B)", _fig(c.get("difference")))
    p = c.get("mcnemar_p")
    t.add_row("McNemar exact p", DASH if p is None else "< 0.001" if p < 0.001 else f"{p:.2g}" if p < 1 else "1")
    out.print(t)
    per = Table("task", "A", "B", "outcome", title="per task")
    for task_id, x in (c.get("per_task") or {}).items():
        per.add_row(task_id, f"{x['a']} ({x['a_passed']}/{x['a_trials']})", f"{x['b']} ({x['b_passed']}/{x['b_trials']})",
                    x["outcome"])
    out.print(per)


@runs.command("export")
@click.argument("run")
@click.option("--format", "fmt", type=click.Choice(["predictions", "report"]), default="predictions",
              show_default=True, help="predictions: your patches as SWE-bench predictions (JSONL, one per task); "
                                      "report: SWE-bench's report (JSON).")
@click.option("--out", "dest", type=click.File("w"), default="-", help="The file to write [default: stdout].")
@remote
def runs_export(client, run: str, fmt: str, dest) -> None:
    """RUN in SWE-bench's formats: what `submit --predictions` and SWE-bench's harness read."""
    if fmt == "report":
        dest.write(json.dumps(client.report(run), indent=1) + "\n")
        return
    predictions = client.predictions(run)
    dest.writelines(json.dumps(p) + "\n" for p in predictions)
    err.print(f"{len(predictions)} prediction(s) of run {_escape(run)}", highlight=False)


@runs.command("publish")
@click.argument("run")
@click.option("--method", default=None, help="The method's name, as the leaderboard shows it.")
@click.option("--description", default=None, help="What the system is and how it was run.")
@click.option("--project-url", default=None, help="The project's page (http or https).")
@click.option("--paper-url", default=None, help="The paper (http or https).")
@click.option("--json", "as_json", is_flag=True, help="Print the run as JSON.")
@remote
def runs_publish(client, run: str, method: str | None, description: str | None, project_url: str | None,
                 paper_url: str | None, as_json: bool) -> None:
    """Make RUN public, with its method and description: PATCH /v1/runs/RUN."""
    meta = client.publish(run, method=method, description=description, project_url=project_url,
                          paper_url=paper_url)
    if as_json:
        click.echo(json.dumps(meta, indent=1))
        return
    out.print(f"run {_escape(meta['name'])} ({meta['id']}) is public"
              + (f": {_escape(meta['method'])}" if meta.get("method") else ""), highlight=False)
    out.print(f"its page: {client.url}/runs/{meta['id']}", highlight=False, markup=False, soft_wrap=True)


def _archive_format(dest: Path | None, fmt: str | None) -> str:
    """--format, else what the file's name says (.zip; .tar.gz, .tgz), else tar.gz."""
    if fmt:
        return fmt
    name = dest.name.lower() if dest else ""
    return "zip" if name.endswith(".zip") else "tar.gz"


@runs.command("logs")
@click.argument("run")
@click.option("-o", "--out", "dest", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The archive to write [default: RUN-logs.tar.gz here].")
@click.option("--format", "fmt", type=click.Choice(["tar.gz", "zip"]), default=None,
              help="[default: from the file's name: .zip is a zip, anything else tar.gz]")
@remote
def runs_logs(client, run: str, dest: Path | None, fmt: str | None) -> None:
    """Download every submission's logs of RUN (patch, test output, result) as one archive."""
    fmt = _archive_format(dest, fmt)
    dest = dest or Path(f"{_file_name(run)}-logs.{fmt}")
    size = client.run_logs(run, dest, fmt)
    err.print(f"{dest} ({size:,} bytes)", highlight=False, markup=False, soft_wrap=True)


@runs.command("delete")
@click.argument("run")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@remote
def runs_delete(client, run: str, yes: bool) -> None:
    """Delete RUN, before it is published: the run goes, its submissions stay in your
    history (and your quota) with no run, and the run id can be used again. A run that
    has been public cannot be deleted (the host can hide it)."""
    if not yes:
        click.confirm(f"delete run {run}? its submissions stay, without a run", abort=True, err=True)
    res = client.delete_run(run)
    out.print(f"run {_escape(res['deleted']['name'])} ({res['deleted']['id']}) deleted; "
              f"{res['submissions_detached']} submission(s) kept without a run", highlight=False)


@main.command("leaderboard")
@window
@click.option("--all", "include_incomplete", is_flag=True, help="Also show incomplete runs (never ranked).")
@click.option("--json", "as_json", is_flag=True)
@remote
def leaderboard_cmd(client, suite, variant, since, until, include_incomplete: bool, as_json: bool) -> None:
    """The public leaderboard, as the portal shows it: runs ranked by the tasks of their
    suites' whole task set they resolve (a task not attempted is not resolved)."""
    rows = client.leaderboard(suite=suite, variant=variant, since=since, until=until,
                              include_incomplete=include_incomplete)
    if as_json:
        click.echo(json.dumps(rows, indent=1))
        return
    if not rows:
        out.print("no public run matches" + (" these filters" if any((suite, variant, since, until)) else " yet"),
                  highlight=False)
        return
    t = Table("#", "run", "team", "method", "resolved", "solve rate", "success rate", "tasks attempted / in suite", "",
              title="leaderboard")
    for r in rows:
        m = r["metrics"]
        ts = m.get("task_set") or {}
        marks = " ".join(x for x, on in (("baseline", r["baseline"]), ("verified", r["verified"]),
                                         ("INCOMPLETE", not r["complete"])) if on)
        t.add_row(str(r.get("rank") or ""), _escape(r["name"]), _escape(r["team"]), _escape(r.get("method") or ""),
                  _count(ts.get("resolved")), _fig(ts.get("solve_rate")), _fig(m.get("success_rate")),
                  f"{ts.get('attempted', 0)} / {ts.get('tasks', 0)}", marks)
    out.print(t)


if __name__ == "__main__":
    main()
