"""The `grader` command: thin commands over the modules below it, one module per audience.

    app.py      the group `main`, the exit statuses, the shared options (--tasks-dir;
                --url and --api-key for a grader service)
    local.py    grading on this machine: grade, tasks (list, show, validate, build,
                checkout, import), env, images
    remote.py   a team's client of a grader service: submit, status, runs, leaderboard
    service.py  running a service: serve, worker, reconcile, keys, db, config
    proxy.py    the nginx configuration in front of `grader serve`
    demo.py     demo
    render.py   how results, submissions, runs and the leaderboard are printed

Exit status of `grader grade`: 0 PASS; 1 FAIL, PATCH FAILED or TIMED OUT; 3 ERROR (the
grading machinery failed); 2 for a usage error (unknown task, unreadable patch).
"""

from grader.cli import demo, local, proxy, remote, service  # noqa: F401 (each registers its commands on main)
from grader.cli.app import common, main

__all__ = ["common", "main"]
