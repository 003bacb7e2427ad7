"""The unit tier: tests that need nothing but this checkout, git and Python. No Docker, no
Redis, no PostgreSQL, no server process, no browser; the whole tier runs in well under a
minute, first and with -x in scripts/test.sh, so that a broken change stops there.

Held, not only promised: every test here runs with DOCKER_HOST pointing nowhere, and the
Redis and PostgreSQL fixtures of tests/conftest.py fail at once, naming the tier that a
test asking for them belongs in (tests/service/ or tests/docker/)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from helpers.fake_api import FakeApi

NOWHERE = "unix:///nonexistent/docker.sock"


@pytest.fixture(scope="module", autouse=True)
def _no_docker() -> Iterator[None]:
    """No Docker engine for a unit test (nor for what it starts: the variable is inherited).
    Module-scoped, so that module fixtures are covered too; undone after the module, so a
    run of every tier in one session gives the other tiers their engine back."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DOCKER_HOST", NOWHERE)
        yield


def _not_here(what: str) -> None:
    pytest.fail(f"a unit test may not start {what}: a test that needs it belongs in tests/service/", pytrace=False)


@pytest.fixture(scope="session")
def redis_server():
    _not_here("Redis")


@pytest.fixture(scope="session")
def postgres_server():
    _not_here("PostgreSQL")


@pytest.fixture
def api() -> Iterator[FakeApi]:
    """A scripted HTTP server in a thread (tests/helpers/fake_api.py), for the client and the CLI."""
    fake = FakeApi()
    thread = threading.Thread(target=fake.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()
