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
from grader.tasks.prepare import checkout_base
from grader.tasks.validate import validate_task
from grader.verdict import Result, Verdict

# Piped output (CI logs, files) gets wide lines instead of rich's 80-column default.
out = Console(width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True)
VERDICT_STYLE = {Verdict.PASS: "bold green", Verdict.FAIL: "bold red", Verdict.PATCH_FAILED: "bold yellow",
                 Verdict.TIMED_OUT: "bold magenta", Verdict.ERROR: "bold white on red"}
EXIT = {Verdict.PASS: 0, Verdict.FAIL: 1, Verdict.PATCH_FAILED: 1, Verdict.TIMED_OUT: 1, Verdict.ERROR: 3}


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


@tasks.command("list")
@click.option("--json", "as_json", is_flag=True)
@common
def tasks_list(settings: Settings, as_json: bool) -> None:
    """List the tasks (public fields only)."""
    ts = TaskSet(settings.tasks_dir)
    if as_json:
        click.echo(json.dumps([t.public_view() for t in ts], indent=2))
        return
    table = Table("id", "check", "suite", "difficulty", "created", "environment")
    for t in ts:
        table.add_row(t.id, t.check.type, t.metadata.suite, t.metadata.difficulty or "",
                      str(t.metadata.created_at or ""), t.environment)
    out.print(table)


@tasks.command("show")
@click.argument("task_id")
@common
def tasks_show(settings: Settings, task_id: str) -> None:
    """Show a task's public view: no gold patch, no hidden tests."""
    click.echo(json.dumps(TaskSet(settings.tasks_dir).get(task_id).public_view(), indent=2))


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
def tasks_checkout(settings: Settings, task_id: str, dest: Path) -> None:
    """Write a task's starting repository to DEST, to make a patch against."""
    if dest.exists():
        raise click.UsageError(f"{dest} exists")
    checkout_base(TaskSet(settings.tasks_dir).get(task_id), dest, settings.cache_dir)
    err.print(f"checked out {task_id} in {dest}; make your change there, then `git diff > my.patch`")


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


# --- config and demo ------------------------------------------------------------------------
@main.command("config")
@common
def config_cmd(settings: Settings) -> None:
    """Print the effective settings (defaults <- GRADER_* environment <- options)."""
    for name, value in settings.masked().items():
        out.print(f"GRADER_{name.upper()}={'' if value is None else value}", highlight=False)


@main.command()
@click.option("--runtime", type=click.Choice(["runc", "runsc"]), default=None)
@click.option("--json", "as_json", is_flag=True)
@common
def demo(settings: Settings, runtime: str | None, as_json: bool) -> None:
    """Grade every task's gold patch and the empty patch, and print a verdict table."""
    ts = TaskSet(settings.tasks_dir)
    grader = Grader(settings, runtime=runtime)
    rows = []
    with _progress() as bar:
        job = bar.add_task("grading", total=len(ts) * 2)
        for task in ts:
            bar.update(job, description=f"grading {task.id}")
            for label, patch in (("gold", task.gold_patch_text() or b""), ("empty", b"")):
                result = grader.grade(task, patch)
                rows.append((task, label, result))
                bar.advance(job)
    if as_json:
        click.echo(json.dumps([{"task": t.id, "patch": label, **r.model_dump(mode="json")} for t, label, r in rows]))
        return
    table = Table("task", "check", "patch", "verdict", "explanation", "seconds", title="grader demo")
    table.columns[0].no_wrap = True
    for task, label, r in rows:
        table.add_row(task.id, task.check.type, label, f"[{VERDICT_STYLE[r.verdict]}]{r.verdict}[/]",
                      r.explanation, f"{r.durations.get('total', 0):.2f}")
    out.print(table)
    expected = {"gold": Verdict.PASS, "empty": Verdict.FAIL}
    wrong = [(t.id, label, r.verdict) for t, label, r in rows if r.verdict is not expected[label]]
    if wrong:
        err.print(f"[red]{len(wrong)} unexpected verdict(s):[/red] {wrong}")
        sys.exit(1)
    out.print(f"[green]all {len(rows)} verdicts as expected[/green] (gold patches PASS, empty patches FAIL)")


if __name__ == "__main__":
    main()
