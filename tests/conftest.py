"""The root conftest: the options every run has (--disruptive, --shuffle) and the fixtures
any tier may use: the mini task set (built in a temporary directory from the tiny
repository of helpers/mini.py: hostile patches are made against it), the example tasks,
and real Redis and PostgreSQL servers. Each tier's own fixtures are in its folder's
conftest.py: unit/, service/, docker/, browser/ (tests/README.md)."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.config import _from_env, get_settings
from grader.pipeline import Grader
from grader.tasks.loader import TaskSet
from helpers import ROOT
from helpers.mini import FIXED, HIDDEN_TEST, TASK_YAML, Mini, git
from helpers.servers import INSTALL_HINT, PostgresServer, RedisServer

# Tests marked `disruptive` disturb what the others use (one restarts dockerd), so a run
# holds either them or the others, never both: the order of a run then never matters.
# scripts/test.sh runs the others, then `--disruptive` as a step of its own.
_LEFT_OUT = pytest.StashKey[int]()


def pytest_addoption(parser):
    parser.addoption(
        "--disruptive",
        action="store_true",
        default=False,
        help="run only the tests marked disruptive (left out otherwise); scripts/test.sh runs them after the others",
    )
    parser.addoption(
        "--shuffle",
        type=int,
        metavar="SEED",
        default=None,
        help="run the tests in an order drawn from SEED (the modules, and the tests in each), to "
        "check that no test needs another to run before it; slower: shared fixtures are "
        "set up more than once",
    )


@pytest.hookimpl(trylast=True)  # after -k and -m: counts only what they left
def pytest_collection_modifyitems(config, items):
    seed = config.getoption("--shuffle")
    if seed is not None:
        rng = random.Random(seed)
        modules: dict[str, list] = {}
        for item in items:
            modules.setdefault(item.nodeid.split("::")[0], []).append(item)
        order = list(modules)
        rng.shuffle(order)
        items[:] = [item for name in order for item in rng.sample(modules[name], len(modules[name]))]
    wanted = config.getoption("--disruptive")
    keep, left = [], []
    for item in items:
        (keep if (item.get_closest_marker("disruptive") is not None) == wanted else left).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = keep
    config.stash[_LEFT_OUT] = 0 if wanted else len(left)


def pytest_terminal_summary(terminalreporter, config):
    if config.stash.get(_LEFT_OUT, 0):
        terminalreporter.write_line(
            f"{config.stash[_LEFT_OUT]} disruptive test(s) left out: they run with "
            "--disruptive, as scripts/test.sh does after the others"
        )


@pytest.fixture(scope="session")
def mini(tmp_path_factory) -> Mini:
    return Mini(tmp_path_factory.mktemp("mini"))


@pytest.fixture(scope="session")
def mini_tasks_dir(tmp_path_factory, mini: Mini) -> Path:
    tasks = tmp_path_factory.mktemp("tasks")
    git("bundle", "create", "-q", str(tasks / "mini.bundle"), "--all", cwd=mini.src)
    gold = mini.diff({"calc/__init__.py": FIXED})
    lists = (
        "  fail_to_pass: [tests/test_mean.py::test_empty]\n"
        "  pass_to_pass: [tests/test_mean.py::test_two, tests/test_basic.py::test_one]"
    )
    for task_id, task_lists, timeout in (("mini", lists, 20), ("mini-nolist", "", 20)):
        d = tasks / task_id
        d.mkdir()
        (d / "task.yaml").write_text(TASK_YAML.format(id=task_id, commit=mini.base, lists=task_lists, timeout=timeout))
        (d / "test_mean.py").write_text(HIDDEN_TEST)
        (d / "gold.patch").write_bytes(gold)
    return tasks


@pytest.fixture(scope="session")
def settings(tmp_path_factory, mini_tasks_dir):
    return get_settings(
        tasks_dir=mini_tasks_dir, environments_dir=ROOT / "environments", cache_dir=tmp_path_factory.mktemp("cache")
    )


@pytest.fixture(scope="session")
def mini_set(settings) -> TaskSet:
    return TaskSet(settings.tasks_dir)


@pytest.fixture(scope="session")
def grader(settings) -> Grader:
    return Grader(settings)


@pytest.fixture(scope="session")
def examples() -> TaskSet:
    return TaskSet(ROOT / "tasks" / "examples")


@pytest.fixture(scope="session")
def example_grader(tmp_path_factory) -> Grader:
    return Grader(get_settings(tasks_dir=ROOT / "tasks" / "examples", environments_dir=ROOT / "environments"))


# Real Redis and PostgreSQL servers, started here: CI has the packages (scripts/setup.sh)
# but nothing running, and a missing package is a failure to fix, never a skip.


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory) -> Iterator[RedisServer]:
    if not RedisServer.is_available():
        pytest.fail(f"redis-server is not installed: {INSTALL_HINT}", pytrace=False)
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory) -> Iterator[PostgresServer]:
    if not PostgresServer.is_available():
        pytest.fail(f"PostgreSQL server binaries are not installed: {INSTALL_HINT}", pytrace=False)
    server = PostgresServer(tmp_path_factory.mktemp("postgres")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The session's Redis, emptied for this test."""
    redis_server.flush()
    return redis_server.url


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path) -> Iterator[str]:
    """An empty database for this test: a SQLite file, then a fresh PostgreSQL database
    (dropped afterwards). PostgreSQL starts only when a test asks for this param."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/grader.db"
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    name = f"test_{uuid.uuid4().hex[:16]}"
    url = server.create_database(name)
    try:
        yield url
    finally:
        server.drop_database(name)


@pytest.fixture
def team_dir(tmp_path, monkeypatch):
    """An empty working directory, no GRADER_* settings: a remote team's machine."""
    home = tmp_path / "team"
    home.mkdir()
    monkeypatch.chdir(home)
    for name in ("GRADER_TASKS_DIR", "GRADER_API_URL", "GRADER_API_KEY", "GRADER_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "team-cache"))
    _from_env.cache_clear()
    yield home
    _from_env.cache_clear()
