"""The service tier: tests that need a real Redis, a real PostgreSQL (where `database_url`
is parametrized) or the service's own processes (`grader serve` under gunicorn), and no
Docker: nothing here grades in a container.

The service every test here starts from, once (each module used to copy it): `svc` over
the test's database and Redis, its Flask `app`, `api` (the app's test client with a
team's key) and `served` (the app over real HTTP, for the command-line client). A module
changes what it needs by overriding a fixture of its own: `service_options` (settings
for make_service, e.g. {"max_wait": 2}), `team` (the key's team), or `database_url`
(e.g. SQLite alone)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from grader.app import create_app
from grader.handles import Handles
from helpers.order import longest_first
from helpers.service import Api, make_service, new_key

# Each file's seconds in one run of the tier (three workers, December 1, at ccaee03, the machine
# otherwise idle; `--junitxml`, summed by file; test_leaderboard_cost.py's less the two runs of
# its large-board test it no longer makes): the files start longest first (helpers/order.py).
SECONDS_BY_FILE = {
    "test_chunked_bodies.py": 156,
    "test_leaderboard_cost.py": 140,
    "test_intake_service.py": 127,
    "test_run_integrity.py": 113,
    "test_logs_archive.py": 94,
    "test_run_names.py": 74,
    "test_queues.py": 67,
    "test_api.py": 65,
    "test_waiting.py": 59,
    "test_run_cost.py": 58,
    "test_headers.py": 50,
    "test_client_install.py": 36,
    "test_slow_clients.py": 30,
    "test_submit_cli.py": 30,
    "test_runs_api.py": 27,
    "test_run_rule.py": 26,
    "test_leaks.py": 23,
    "test_board_benchmark.py": 22,
    "test_hostile_input.py": 21,
    "test_suite_validations.py": 18,
    "test_quota_refund.py": 17,
    "test_store.py": 14,
    "test_portal_submit.py": 12,
    "test_tasks_remote_service.py": 12,
    "test_signup.py": 11,
}


def pytest_collection_modifyitems(config, items):
    """The tier's files, longest first (`SECONDS_BY_FILE`); each file's tests keep their order."""
    longest_first(items, "service", SECONDS_BY_FILE)


@pytest.fixture
def service_options() -> dict[str, Any]:
    """Settings the module's service is made with, over make_service's own."""
    return {}


@pytest.fixture
def svc(database_url: str, redis_url: str, service_options: dict[str, Any]) -> Iterator[Handles]:
    s = make_service(database_url, redis_url, **service_options)
    yield s
    s.close()


@pytest.fixture
def app(svc: Handles):
    return create_app(service=svc, migrate=False)


@pytest.fixture
def team() -> str:
    """The team whose key `api` carries."""
    return "team-a"


@pytest.fixture
def api(app, svc: Handles, team: str) -> Api:
    return Api(app.test_client(), new_key(svc, team))


@pytest.fixture
def served(app) -> Iterator[str]:
    """The app over real HTTP on a free port, in a thread: its URL."""
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()
