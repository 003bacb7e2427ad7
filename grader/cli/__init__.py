"""The `grader` command: thin commands over the modules below it, one module per audience.

    app.py      the group `main`, the exit statuses, the shared options (--tasks-dir;
                --url and --api-key for a grader service)
    local.py    grading on this machine: grade, tasks (list, show, validate, build,
                checkout, import), env, images
    remote.py   a team's client of a grader service: submit, status, runs, leaderboard, account
    tasks.py    a team's task commands: tasks list, show, checkout (local folders or the service)
    service.py  running a service: serve, worker, reconcile, keys, db, config
    proxy.py    the nginx configuration in front of `grader serve`
    demo.py     demo
    render.py   how results, submissions, runs and the leaderboard are printed

Exit status of `grader grade`: 0 PASS; 1 FAIL, PATCH FAILED or TIMED OUT; 3 ERROR (the
grading machinery failed); 2 for a usage error (unknown task, unreadable patch).
"""

from grader.cli import remote, tasks  # noqa: F401 (each registers its commands on main)
from grader.cli.app import common, main

# The import names of the `server` extra's distributions (pyproject.toml; a unit test holds
# the two together). A client-only install (`pip install grader[client]`) lacks them: its
# `grader` has a team's commands alone, and says where the rest come from.
SERVER_MODULES = frozenset(
    {
        "alembic",
        "docker",
        "filelock",
        "flask",
        "gunicorn",
        "junitparser",
        "prometheus_client",
        "psycopg",
        "redis",
        "rq",
        "sqlalchemy",
    }
)

try:
    from grader.cli import demo, local, proxy, service  # noqa: F401
except ModuleNotFoundError as exc:
    if (exc.name or "").split(".")[0] not in SERVER_MODULES:
        raise  # a real fault, not a client-only install
    main.help = (
        "A team's client of a grader service (a client-only install: `pip install 'grader[server]'` "
        "adds grading on this machine and running a service)."
    )
    CLIENT_ONLY = True
else:
    CLIENT_ONLY = False

__all__ = ["CLIENT_ONLY", "SERVER_MODULES", "common", "main"]
