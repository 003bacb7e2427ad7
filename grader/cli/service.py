"""Commands that run a grader service on this host: the API under gunicorn, the grading
workers and the reconciler, teams and their keys, the database's schema, and the settings
they all read."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click
from rich.table import Table

from grader.cli.app import common, main
from grader.cli.render import out
from grader.config import API_BIND, Settings

if TYPE_CHECKING:
    from flask import Flask

    from grader.handles import Handles


def _service(settings: Settings) -> Handles:
    from grader.handles import Handles

    settings.require_production_secrets()
    svc = Handles(settings)
    svc.db.migrate()
    return svc


SWITCH_INTERVAL = 0.001  # seconds: the API's threads' turns at the interpreter's lock (CPython's default 0.005)
UNPROTECTED = (
    "grader serve on {bind}: gunicorn reads every request itself, so a client that sends slowly "
    "holds one of its threads; for anything but local use, put nginx in front of it "
    "(grader proxy config) and bind this where only nginx reaches"
)


@main.command()
@click.option("--bind", default=API_BIND, show_default=True, help="HOST:PORT to listen on.")
@click.option("--workers", "processes", type=int, default=2, show_default=True, help="gunicorn worker processes.")
@click.option(
    "--threads",
    type=int,
    default=16,
    show_default=True,
    help="Threads per process. Requests held by ?wait= take at most GRADER_MAX_WAITING_PER_PROCESS "
    "of them, and never the last 4.",
)
@common
def serve(settings: Settings, bind: str, processes: int, threads: int) -> None:
    """Run the REST API under gunicorn. The schema is migrated first.

    For local use, or behind a buffering proxy: gunicorn's threads read each request
    themselves, so a client that sends its headers or body slowly holds a thread for as
    long as it likes, and a few hundred such connections (no key needed) hold them all.
    Wherever others can reach the service, put nginx in front (`grader proxy config`)
    and bind this to an address only nginx reaches."""
    from gunicorn.app.base import BaseApplication

    from grader.app import create_app

    _service(settings).close()
    click.echo(UNPROTECTED.format(bind=bind), err=True)
    # other requests, and other teams, must always find a thread: neither the requests held
    # for their verdict nor one team's requests in progress may take the last 4; and every
    # thread a database connection
    settings = settings.model_copy(
        update={
            "max_waiting_per_process": max(0, min(settings.max_waiting_per_process, threads - 4)),
            "max_inflight_per_team": max(1, min(settings.max_inflight_per_team, threads - 4)),
            "max_inflight_anonymous": max(1, min(settings.max_inflight_anonymous, threads - 4)),
            # a connection for each thread, kept: no connection opened and closed per busy moment
            "database_pool": max(settings.database_pool, threads),
        }
    )

    class _App(BaseApplication):
        def load_config(self) -> None:
            for key, value in {
                "bind": bind,
                "workers": processes,
                "threads": threads,
                "worker_class": "gthread",
                "timeout": int(settings.max_wait + 60),
                "graceful_timeout": 30,
                # idle keep-alive connections are kept longer than the proxy keeps its own
                # (grader proxy config: 2 s), so that it never sends on one being closed
                "keepalive": 5,
                "accesslog": "-",
                "errorlog": "-",
                "loglevel": "info",
                # no query value (a key sent as ?api_key=) is ever written
                "logger_class": "grader.api.accesslog.RedactingLogger",
                "proc_name": "grader-api",
            }.items():
                self.cfg.set(key, value)

        # types-gunicorn spells a WSGI app's start_response as a plain callable, Flask takes
        # the standard StartResponse protocol: the same thing at run time
        def load(self) -> Flask:  # type: ignore[override]
            # in each worker process: a request waiting for the interpreter's lock gets it
            # within a millisecond of asking, not five, while other threads compute (pages
            # of the leaderboard): a short request is not held up by a long one's CPU
            sys.setswitchinterval(SWITCH_INTERVAL)
            return create_app(settings, migrate=False)

    _App().run()


@main.command()
@click.option("--count", type=int, default=2, show_default=True, help="Worker processes on this host.")
@click.option("--burst", is_flag=True, help="One worker: grade what is queued, then exit.")
@common
def worker(settings: Settings, count: int, burst: bool) -> None:
    """Run grading workers (restarted if one dies) and the reconciler. They take the grades
    of the environments this host has (GRADER_WORKER_ENVIRONMENTS: auto, all or names)."""
    import logging

    from grader.jobs import reconcile
    from grader.workers import ready_environments, run_worker, run_workers

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(processName)s %(name)s %(levelname)s %(message)s")
    svc = _service(settings)
    if burst:
        reconcile(svc, grace=0)
        run_worker(svc, burst=True, environments=ready_environments(svc) or [])
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
@click.option(
    "--queued-quota", type=int, default=None, help="Submissions queued at once [default: GRADER_QUEUED_QUOTA]."
)
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
    from grader.store.reports import team_summaries

    svc = _service(settings)
    table = Table("team", "admin", "daily quota", "queued quota", "live keys", "created")
    with svc.db.read() as s:
        for t in team_summaries(s):
            table.add_row(
                t.name,
                "yes" if t.admin else "",
                str(t.daily_quota or f"{settings.daily_quota} (default)"),
                str(t.queued_quota or f"{settings.queued_quota} (default)"),
                str(t.live_keys),
                t.created_at.strftime("%Y-%m-%d"),
            )
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


@main.command("config")
@common
def config_cmd(settings: Settings) -> None:
    """Print the effective settings (defaults <- GRADER_* environment <- options)."""
    for name, value in settings.masked().items():
        out.print(f"GRADER_{name.upper()}={'' if value is None else value}", highlight=False)
