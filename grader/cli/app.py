"""The `grader` group, the exit statuses and the options every audience's commands share:
--tasks-dir (`common`) and --url / --api-key for a grader service (`remote`).

The commands register on `main` from their own modules; `grader.cli` imports them all.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from grader.cli.render import err, escape
from grader.config import API_BIND, get_settings
from grader.errors import GraderError, TaskError
from grader.verdict import Verdict

if TYPE_CHECKING:
    from grader.client import ApiError, Client

R = TypeVar("R")

EXIT = {Verdict.PASS: 0, Verdict.FAIL: 1, Verdict.PATCH_FAILED: 1, Verdict.TIMED_OUT: 1, Verdict.ERROR: 3}
# Past the verdicts: 2 a usage error or a refusal of the request (click's own 2 for usage),
# 4 a batch with rejected items, 5 a --wait that ran out before every verdict.
EXIT_USAGE, EXIT_REJECTED, EXIT_NO_VERDICT = 2, 4, 5


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="grader")
def main() -> None:
    """Grade unified-diff patches against tasks in isolated containers."""


def common(fn: Callable[..., R]) -> Callable[..., R]:
    """--tasks-dir (and GRADER_TASKS_DIR) on every command; machinery faults as clean errors."""

    @click.option(
        "--tasks-dir",
        type=click.Path(path_type=Path),
        default=None,
        help="Directory of task files [default: tasks/, or GRADER_TASKS_DIR].",
    )
    @functools.wraps(fn)
    def wrapper(*args: Any, tasks_dir: Path | None, **kwargs: Any) -> R:
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


# --- a grader service (clients of the REST API) -------------------------------------------
# The HTTP client is imported inside these functions: grading locally never needs it.
def remote(fn: Callable[..., R]) -> Callable[..., R]:
    """--url and --api-key (GRADER_API_URL, GRADER_API_KEY) on commands that talk to the
    service; its errors as clean exits with status 2."""

    @click.option("--url", default=None, help=f"The grader service [default: GRADER_API_URL, or http://{API_BIND}].")
    @click.option("--api-key", default=None, help="The API key [default: GRADER_API_KEY, which keeps it out of `ps`].")
    @functools.wraps(fn)
    def wrapper(*args: Any, url: str | None, api_key: str | None, **kwargs: Any) -> R:
        from grader.client import ApiError

        client = client_or_exit(url, api_key)
        try:
            return fn(client, *args, **kwargs)
        except ApiError as exc:
            api_error_exit(exc)

    return wrapper


def client_or_exit(url: str | None, api_key: str | None, *, why: str = "") -> Client:
    """The service's client from --url / --api-key or GRADER_API_URL / GRADER_API_KEY;
    without a key, exit 2 naming where one goes (after `why`, what else was missing)."""
    from pydantic import SecretStr

    from grader.client import Client

    settings = get_settings(api_url=url, api_key=SecretStr(api_key) if api_key else None)
    if settings.api_key is None:
        # the team's fact first (its key); what a host would have here (`why`) after it
        aside = f" (and locally: {why})" if why else ""
        err.print(
            f"[red]error:[/red] no API key for the grader service at {escape(settings.api_url)}: "
            f"set GRADER_API_KEY or pass --api-key{escape(aside)}",
            highlight=False,
            soft_wrap=True,
        )
        sys.exit(2)
    return Client(settings.api_url, settings.api_key)


def api_error_exit(exc: ApiError, *, why: str = "") -> NoReturn:
    """The service's refusal, or its absence, in one line; exit 2. A service that did not
    answer is named with its URL alone (no transport trace); a refused key says where it came from."""
    text = exc.message if exc.status is None else str(exc)
    if exc.status == 401:
        text += "; the key comes from --api-key or GRADER_API_KEY"
    aside = f" (and locally: {why})" if why else ""
    err.print(f"[red]error:[/red] {escape(text)}{escape(aside)}", highlight=False, soft_wrap=True)
    sys.exit(2)
