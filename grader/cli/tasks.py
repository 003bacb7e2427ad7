"""The task commands a team needs: `tasks list / show / checkout` read the local task
folders when there are any and ask a grader service otherwise (a remote team has none).
They need only the client's dependencies, so a client-only install (`pip install
grader[client]`) has them; `tasks validate / build / import` (grader/cli/local.py) grade
on this machine and add themselves to the same group when the server's part is installed."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.table import Table

from grader.cli.app import api_error_exit, client_or_exit, common, main
from grader.cli.render import err, escape, out
from grader.config import Settings
from grader.tasks.loader import TaskSet
from grader.tasks.prepare import checkout_base

if TYPE_CHECKING:
    from grader.client import Client
    from grader.tasks.model import Task

R = TypeVar("R")


# --- tasks ----------------------------------------------------------------------------
@main.group()
def tasks() -> None:
    """The tasks: list, show and check out (and, with the server's part installed, validate, build and import)."""


class _Served:
    """The service a task command asks when there is no local task folder to read: no
    tasks directory, or none holding the task (a remote team has neither), or --url."""

    def __init__(self, url: str | None, api_key: str | None):
        self.named = url is not None
        self.url, self.api_key = url, api_key
        self.why = ""

    def client(self, why: str) -> Client:
        """`why`: what was missing here, said first if the service cannot be asked either."""
        self.why = why
        return client_or_exit(self.url, self.api_key, why=why)


def served(fn: Callable[..., R]) -> Callable[..., R]:
    """--url and --api-key on `tasks list / show / checkout`, which read the local task
    folders when there are any and ask the service (GRADER_API_URL) otherwise."""

    @click.option(
        "--url",
        default=None,
        help="Ask this grader service, not the local tasks [default without local tasks: GRADER_API_URL].",
    )
    @click.option("--api-key", default=None, help="The API key for the service [default: GRADER_API_KEY].")
    @functools.wraps(fn)
    def wrapper(settings: Settings, *args: Any, url: str | None, api_key: str | None, **kwargs: Any) -> R:
        from grader.client import ApiError

        service = _Served(url, api_key)
        try:
            return fn(settings, service, *args, **kwargs)
        except ApiError as exc:
            api_error_exit(exc, why=service.why)

    return wrapper


def _local_tasks(settings: Settings, service: _Served) -> TaskSet | None:
    return None if service.named or not settings.tasks_dir.is_dir() else TaskSet(settings.tasks_dir)


def _no_tasks_dir(settings: Settings) -> str:
    return f"no tasks directory {settings.tasks_dir} here (GRADER_TASKS_DIR or --tasks-dir)"


def _local_task(settings: Settings, service: _Served, task_id: str) -> tuple[Task | None, str]:
    """The task from its local folder, or None (with why, for `service.client`)."""
    ts = _local_tasks(settings, service)
    if ts is not None and task_id in ts.ids():
        return ts.get(task_id), ""
    return None, (
        ""
        if service.named
        else _no_tasks_dir(settings)
        if ts is None
        else f"no task {task_id!r} in {settings.tasks_dir} (GRADER_TASKS_DIR or --tasks-dir)"
    )


@tasks.command("list")
@click.option("--suite", default=None, help="Only the tasks of this suite (as sb-cli's subset).")
@click.option("--json", "as_json", is_flag=True)
@common
@served
def tasks_list(settings: Settings, service: _Served, suite: str | None, as_json: bool) -> None:
    """List the tasks (public fields only), from the local tasks or the service."""
    # leniently, as the service loads: a broken file is named (exit 1), the rest listed
    ts = None if service.named or not settings.tasks_dir.is_dir() else TaskSet(settings.tasks_dir, strict=False)
    if ts is not None:
        views = [t.public_view() for t in ts]
        known = sorted({(v.get("metadata") or {}).get("suite") or "" for v in views})
        if suite is not None and suite not in known:
            raise click.BadParameter(
                f"there is no suite {suite!r}; the suites are: {', '.join(known)}", param_hint="--suite"
            )
        views = [v for v in views if suite is None or (v.get("metadata") or {}).get("suite") == suite]
    else:
        views = service.client("" if service.named else _no_tasks_dir(settings)).tasks(suite=suite)
    refused = ts.refused if ts is not None else {}
    for path, why in refused.items():
        err.print(f"[red]refused[/red] {escape(path)}: {escape(why)}")
    if as_json:
        click.echo(json.dumps(views, indent=2))
        sys.exit(1 if refused else 0)
    table = Table("id", "check", "suite", "difficulty", "created", "environment")
    for v in views:
        meta = v.get("metadata") or {}
        table.add_row(
            escape(v["id"]),
            escape(v.get("check", "")),
            escape(meta.get("suite") or ""),
            escape(meta.get("difficulty") or ""),
            escape(meta.get("created_at") or ""),
            escape(v.get("environment", "")),
        )
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
                checkout_bundle(
                    Path(tmp) / f"{task_id}.bundle",
                    dest,
                    got["commit"] or view["repo"]["commit"],
                    merge,
                    task_id=task_id,
                )
            source = f" from {client.url} (bundle sha256 {got['sha256'][:16]}, {got['size']} bytes)"
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)  # no half-made DEST to trip the next try
        raise
    err.print(
        f"checked out {task_id} in {dest}{source}; make your change there, then `git diff > my.patch`",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    if merge:
        err.print(
            "a conflicted merge is in progress: stage the conflicted files as they are (`git add -u`) "
            "before resolving them, so that `git diff` compares your resolution with them",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
