"""Commands that work on this machine: grade a patch, and the tasks, environment images
and base images it grades with: `tasks validate / build / import` join the team's task
commands (grader/cli/tasks.py) in their group."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

import click
from rich.table import Table

from grader.cli.app import EXIT, common, main
from grader.cli.render import err, escape, log, out, print_result, progress
from grader.cli.tasks import tasks
from grader.config import Settings
from grader.images import BASE_REPO, Images
from grader.pipeline import Grader
from grader.tasks.leaks import find_leaks_cached, unchosen
from grader.tasks.loader import TaskSet, serve_together
from grader.tasks.model import MAX_TIMEOUT
from grader.validate import TaskValidation, by_suite, validate_task
from grader.version import GRADER_VERSION

if TYPE_CHECKING:
    from grader.importers import Source

R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])


# --- grade --------------------------------------------------------------------------
@main.command()
@click.option("--task", "task_id", required=True, help="The task id.")
@click.option(
    "--patch",
    "patch_file",
    required=True,
    type=click.File("rb"),
    help="A diff, or git format-patch output; '-': stdin.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the full result as JSON.")
@click.option("--runtime", type=click.Choice(["runc", "runsc"]), default=None, help="OCI runtime [default: runc].")
@common
def grade(settings: Settings, task_id: str, patch_file: IO[bytes], as_json: bool, runtime: str | None) -> None:
    """Grade one patch against one task."""
    task = TaskSet(settings.tasks_dir).get(task_id)
    patch = patch_file.read()
    result = Grader(settings, runtime=runtime).grade(task, patch)
    if as_json:
        click.echo(result.to_json())
    else:
        print_result(result)
    sys.exit(EXIT[result.verdict])


@tasks.command("validate")
@click.argument("task_ids", nargs=-1)
@click.option("--repeat", default=1, show_default=True, type=click.IntRange(1, 100), help="Runs of each patch.")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the outcome as JSON (what POST /v1/admin/suites/validations takes)."
)
@click.option("--runtime", type=click.Choice(["runc", "runsc"]), default=None)
@click.option(
    "--record/--no-record",
    default=None,
    help="Store each whole suite's outcome in the service's database, for the host's pages "
    "[default: when GRADER_DATABASE_URL is set].",
)
@common
def tasks_validate(
    settings: Settings,
    task_ids: tuple[str, ...],
    repeat: int,
    as_json: bool,
    runtime: str | None,
    record: bool | None,
) -> None:
    """Check that the empty patch FAILs and the gold patch PASSes, REPEAT times each.

    With the service's database configured (GRADER_DATABASE_URL, or --record), the outcome
    of every suite validated whole is stored there: the host's /host/suites shows it, and
    shows a suite whose tasks changed since as changed."""
    everything = TaskSet(settings.tasks_dir)
    selected = everything.select(list(task_ids))
    grader = Grader(settings, runtime=runtime)
    reports = []
    with progress() as bar:
        job = bar.add_task("validating", total=len(selected) * repeat * 2)
        for task in selected:
            bar.update(job, description=f"validating {task.id}")
            reports.append(validate_task(grader, task, repeat, progress=lambda: bar.advance(job)))
    # one task's answer in another's public material, among every task served together
    chosen = serve_together(settings.tasks_dir)
    leaks = find_leaks_cached(list(everything), settings.cache_dir)
    refused = unchosen(leaks, chosen)
    for r in reports:
        for leak in refused:
            if r.task_id in (leak.secret, leak.public):
                r.problems.append(
                    f"{leak.secret}'s answer is in {leak.public}'s public material ({leak.what}); "
                    "serve them apart, or list the pair under serve_together in suite.yaml"
                )
    if leaks and not refused:
        err.print(
            f"{len(leaks)} pair(s) of tasks where one's public material answers the other, served "
            "together by the suite's choice (serve_together)"
        )
    if record is None:
        record = settings.database_configured
    if record:
        _record_validation(settings, everything, reports, repeat)
    if as_json:
        body = {"grader_version": GRADER_VERSION, "repeat": repeat, "tasks": [r.as_dict() for r in reports]}
        click.echo(json.dumps(body, indent=2))
    else:
        table = Table("task", "empty patch", "gold patch", "result")
        for r in reports:
            table.add_row(
                r.task_id,
                " ".join(map(str, r.empty)),
                " ".join(map(str, r.gold)),
                "[green]ok[/green]" if r.ok else "[red]" + ("flaky" if r.flaky else "invalid") + "[/red]",
            )
        out.print(table)
        for r in reports:
            for p in r.problems:
                out.print(f"[red]{r.task_id}:[/red] {p}", highlight=False)
    bad = [r for r in reports if not r.ok]
    if bad:
        err.print(
            f"{len(bad)} of {len(reports)} task(s) failed validation"
            + (f"; flaky: {', '.join(r.task_id for r in bad if r.flaky)}" if any(r.flaky for r in bad) else "")
        )
        sys.exit(1)


def _record_validation(settings: Settings, everything: TaskSet, reports: list[TaskValidation], repeat: int) -> None:
    """Store the outcome of each suite validated whole in the service's database; a suite
    validated in part is named and not stored (its status is of the whole suite)."""
    from grader.handles import host
    from grader.store import validations
    from grader.store.db import Database

    whole: dict[str, set[str]] = {}
    for task in everything:
        whole.setdefault(task.metadata.suite, set()).add(task.id)
    db = Database(settings.database_url)
    try:
        db.migrate()
        for suite, outcomes in sorted(by_suite(reports).items()):
            if set(outcomes) != whole.get(suite, set()):
                err.print(
                    f"suite {suite}: {len(outcomes)} of its {len(whole.get(suite, ()))} task(s) validated; "
                    "not recorded (a suite's validation is of all its tasks)",
                    highlight=False,
                )
                continue
            with db.write() as s:
                row = validations.record(
                    s,
                    suite,
                    outcomes,
                    repeat=repeat,
                    grader_version=GRADER_VERSION,
                    recorded_by=f"grader tasks validate on {host(settings)}",
                )
                said = f"{row.valid}/{row.tasks} valid, {row.invalid} invalid, {row.flaky} flaky"
            err.print(f"suite {suite}: validation recorded ({said})", highlight=False)
    finally:
        db.dispose()


@tasks.command("build")
@click.argument("task_ids", nargs=-1)
@common
def tasks_build(settings: Settings, task_ids: tuple[str, ...]) -> None:
    """Build the instance images of the tasks (all by default)."""
    selected = TaskSet(settings.tasks_dir).select(list(task_ids))
    images = Images(settings)
    with progress() as bar:
        job = bar.add_task("building", total=len(selected))
        for task in selected:
            bar.update(job, description=f"instance image {task.id}")
            image_id, _ = images.instance_image(task, log=log)
            bar.advance(job)
    err.print(f"{len(selected)} instance image(s) ready")


# --- tasks import ---------------------------------------------------------------------
@tasks.group("import")
def tasks_import() -> None:
    """Import SWE-bench, RES-Q or GitGoodBench rows as a validated suite (docs/importers.md)."""


def import_options(fn: F) -> F:
    """What every importer takes; FILE is a JSON list or JSONL."""
    for opt in reversed(
        [
            click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path)),
            click.option(
                "--out",
                type=click.Path(file_okay=False, path_type=Path),
                default=None,
                help="Where the suite goes [default: TASKS_DIR/SUITE].",
            ),
            click.option("--only", multiple=True, help="Import only this instance id (repeatable)."),
            click.option(
                "--repo-source",
                type=click.Choice(["bundle", "url"]),
                default="bundle",
                show_default=True,
                help="bundle: the history the tasks need, in the suite (offline); url: the repository's URL.",
            ),
            click.option(
                "--timeout",
                type=click.FloatRange(min=1, max=MAX_TIMEOUT),
                default=None,
                help="Each task's time limit in seconds [default: the task format's].",
            ),
            click.option(
                "--no-validate",
                "no_validate",
                is_flag=True,
                help="Do not grade the empty and gold patches (no Docker); tasks are kept unvalidated.",
            ),
            click.option("--keep-invalid", is_flag=True, help="Keep tasks that fail validation (they are reported)."),
            click.option("--skip-broken", is_flag=True, help="Import the other rows when some cannot be converted."),
            click.option(
                "--repeat",
                default=1,
                show_default=True,
                type=click.IntRange(1, 100),
                help="Validation runs of each patch.",
            ),
            click.option("--runtime", type=click.Choice(["runc", "runsc"]), default=None),
            click.option("--json", "as_json", is_flag=True, help="Print the import report as JSON."),
        ]
    ):
        fn = opt(fn)
    return fn


def _import(settings: Settings, source: Source, file: Path, no_validate: bool, as_json: bool, **kwargs: Any) -> None:
    from grader.importers import import_file

    with progress() as bar:
        job = bar.add_task("importing", total=None)
        report = import_file(
            source,
            file,
            settings=settings,
            validate=not no_validate,
            progress=lambda line: bar.update(job, description=line),
            **kwargs,
        )
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2))
    else:
        table = Table("task", "instance", "status", "empty patch", "gold patch", "why", title=f"{report.source} import")
        for o in report.outcomes:
            style = "red" if o.problems else "green" if o.validated else "yellow"
            table.add_row(
                o.task_id,
                o.source_id,
                f"[{style}]{o.status}[/]",
                " ".join(o.empty),
                " ".join(o.gold),
                escape("; ".join(o.problems + o.notes)),
            )
        for source_id, why in report.not_converted:
            table.add_row("", source_id, "[red]not converted[/]", "", "", escape(why))
        out.print(table)
    kept, total = len(report.kept), len(report.outcomes) + len(report.not_converted)
    err.print(
        f"{kept} of {total} task(s) kept in {report.out} (suite {report.suite}); "
        f"{len(report.invalid)} failed validation, {len(report.not_converted)} not converted; "
        f"the report is {report.out / 'import-report.json'}",
        highlight=False,
    )
    if not kept:
        sys.exit(1)


def _import_command(source: Source, summary: str, *options: Callable[[F], F]) -> None:
    """`grader tasks import SOURCE FILE`: the shared options, then the source's own."""

    def command(settings: Settings, file: Path, **kwargs: Any) -> None:
        _import(settings, source, file, **kwargs)

    command.__doc__ = summary
    command.__name__ = f"tasks_import_{source}"
    fn = import_options(common(command))
    for opt in reversed(options):
        fn = opt(fn)
    tasks_import.command(source)(fn)


def _repo_dir(required: bool, otherwise: str) -> Callable[[F], F]:
    return click.option(
        "--repo-dir",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        default=None,
        required=required,
        help=f"Local clones as DIR/<owner>__<name>{otherwise}.",
    )


_import_command(
    "swebench",
    "SWE-bench instances (JSON list or JSONL, as published) as tasks.",
    click.option("--suite", required=True, help="The suite's name (metadata.suite; the directory under TASKS_DIR)."),
    _repo_dir(False, "; others are cloned from GitHub"),
    click.option(
        "--env-map",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        default=None,
        help="Per-repository environments (YAML or JSON) for instances without python/requirements.",
    ),
    click.option(
        "--derive-lists",
        "derive_lists",
        default=0,
        type=click.IntRange(0, 100),
        metavar="N",
        help="For rows with neither FAIL_TO_PASS nor PASS_TO_PASS: run the tests N times at the base and "
        "with the gold patch and keep what held every time (SWE-bench's rule) [default: 0, such rows refused].",
    ),
)


_import_command(
    "resq",
    "RES-Q rows (JSON list or JSONL) as tasks.",
    click.option("--suite", default="resq", show_default=True, help="The suite's name."),
    _repo_dir(False, "; others are cloned from the row's repo_url"),
)


_import_command(
    "gitgoodbench",
    "GitGoodBench merge-conflict samples (JSON list or JSONL) as exact-match tasks.",
    click.option("--suite", default="gitgoodbench", show_default=True, help="The suite's name."),
    _repo_dir(True, " holding the merge commits"),
)


# --- environments and images ------------------------------------------------------------
@main.group()
def env() -> None:
    """Build, list, prune, export and import environment images."""


@env.command("build")
@click.argument("names", nargs=-1)
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(1, 8),
    default=1,
    show_default=True,
    help="Environments built at once (their base images are made first, one at a time).",
)
@common
def env_build(settings: Settings, names: tuple[str, ...], jobs: int) -> None:
    """Build environment images (all by default); unchanged ones are skipped."""
    from concurrent.futures import ThreadPoolExecutor

    images = Images(settings)
    envs = [images.environment(n) for n in names] if names else images.environments()
    # the offline bases first, once each: two builds must not bootstrap one suite at once
    for base in sorted({b for e in envs for b in e.base_images() if b.startswith(BASE_REPO + ":")}):
        if images.engine.image_id(base) is None:
            images.bootstrap(base.split(":", 1)[1], log=log)

    def build(name: str) -> str:
        return Images(settings).build_env(name, log=log)  # an engine client per thread

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        built = dict(zip([e.name for e in envs], pool.map(build, [e.name for e in envs]), strict=True))
    for e in envs:
        out.print(f"{e.name:20} {images.env_tag(e):45} {built[e.name][7:19]}", highlight=False)


@env.command("list")
@click.option("--json", "as_json", is_flag=True)
@common
def env_list(settings: Settings, as_json: bool) -> None:
    """List environments and every grader image on this engine."""
    images = Images(settings)
    listing = images.listing()
    own = images.engine.unique_sizes()
    by_id = {im["id"]: im for im in listing}
    rows: list[dict[str, Any]] = []
    for e in images.environments():
        tag = images.env_tag(e)
        image_id = images.engine.image_id(tag)
        # the instance images built on this environment: what each adds of its own, beyond
        # the layers it shares with the environment and with each other
        instances = [
            im
            for im in listing
            if im["labels"].get("grader.kind") == "task" and im["labels"].get("grader.env_image") == image_id
        ]
        rows.append(
            {
                "environment": e.name,
                "tag": tag,
                "built": image_id is not None,
                "size": by_id[image_id]["size"] if image_id in by_id else None,
                "tasks": len(instances),
                "tasks_own_size": sum(own.get(im["id"], 0) for im in instances),
            }
        )
    for im in listing:
        im["own_size"] = own.get(im["id"])
    if as_json:
        click.echo(json.dumps({"environments": rows, "images": listing}, indent=2))
        return
    table = Table("environment", "tag", "built", "size", "instance images", "their own bytes")
    for r in rows:
        table.add_row(
            r["environment"],
            r["tag"],
            "yes" if r["built"] else "no",
            f"{r['size'] / 1e6:.0f} MB" if r["size"] else "",
            str(r["tasks"]),
            f"{r['tasks_own_size'] / 1e6:.0f} MB" if r["tasks"] else "",
        )
    out.print(table)
    table = Table("image", "kind", "size", "its own")
    for im in sorted(listing, key=lambda i: (i["labels"].get("grader.kind", ""), i["tags"])):
        table.add_row(
            ", ".join(im["tags"]) or im["id"][:19],
            im["labels"].get("grader.kind", ""),
            f"{im['size'] / 1e6:.0f} MB",
            f"{im['own_size'] / 1e6:.0f} MB" if im.get("own_size") is not None else "",
        )
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


@env.command("export")
@click.argument("names", nargs=-1)
@click.option(
    "--output",
    "-o",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="The directory the archive is written to.",
)
@click.option("--no-tasks", is_flag=True, help="Leave the tasks' instance images out.")
@click.option("--json", "as_json", is_flag=True, help="Print the archive's path, sha256 and images as JSON.")
@common
def env_export(settings: Settings, names: tuple[str, ...], directory: Path, no_tasks: bool, as_json: bool) -> None:
    """Write environment images (all built ones by default), their base images and the
    instance images of their tasks that this engine has, to one archive named by its
    sha256, for `grader env import` on a host without a registry."""
    from grader import image_archive

    images = Images(settings)
    if names:
        chosen = [images.environment(n).name for n in names]
    else:
        chosen = [e.name for e in images.environments() if images.engine.image_id(images.env_tag(e)) is not None]
    if not chosen:
        raise click.UsageError("no environment image is built here; nothing to export")
    ts = [] if no_tasks or not settings.tasks_dir.is_dir() else list(TaskSet(settings.tasks_dir, strict=False))
    selection = image_archive.select(images, chosen, ts)
    for task_id, why in sorted(selection.skipped.items()):
        err.print(f"left out task {task_id}: {why}", highlight=False)
    path = image_archive.export(images, selection, directory)
    digest = path.name[len(image_archive.PREFIX) : -len(".tar")]
    if as_json:
        listed = image_archive.describe(selection.images)
        click.echo(json.dumps({"path": str(path), "sha256": digest, "images": listed}))
        return
    for e in selection.images:
        out.print(f"{e.kind:5} {e.ref:60} {e.id[7:19]}", highlight=False)
    out.print(f"{path} ({path.stat().st_size / 1e6:.0f} MB)", highlight=False)
    out.print(f"sha256 {digest}  (on the new host: grader env import {path.name} --sha256 {digest})", highlight=False)


@env.command("import")
@click.argument("archive", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--sha256",
    default=None,
    help="The hash the exporting host printed; without it the hash in the file's name is checked.",
)
@common
def env_import(settings: Settings, archive: Path, sha256: str | None) -> None:
    """Load an archive from `grader env export` into this host's engine, once its sha256
    is checked (nothing is loaded otherwise) and every image is the one its manifest names."""
    from grader import image_archive

    manifest = image_archive.import_archive(Images(settings), archive, sha256)
    for e in manifest.images:
        out.print(f"{e.kind:5} {e.ref:60} {e.id[7:19]}", highlight=False)
    out.print(f"{len(manifest.images)} image(s) loaded and verified from {archive.name}", highlight=False)


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
        image_id = im.bootstrap(suite, force=force, log=log)
        out.print(f"grader/base:{suite} {image_id[7:19]}")
