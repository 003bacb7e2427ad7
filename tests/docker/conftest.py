"""The Docker tier: tests that grade in containers (runc, and gVisor's runsc where
marked), build images or drive the Docker engine, usually with the service's Redis and
database around them. The slowest tier: scripts/test.sh runs it after the unit and
service tiers.

Shared here: `stack`, the whole service as real processes (`grader serve` and `grader
worker`) over the mini tasks, and `live`, the app over real HTTP with an in-process
worker, for a remote team's command line. Before the tier's first test, the mini tasks'
instance images are built, one process at a time (`_mini_images`): scripts/test.sh runs
this tier with pytest-xdist, whose workers share the engine."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from filelock import FileLock

from grader import jobs
from grader.app import create_app
from grader.images import Images
from grader.pipeline import Grader
from grader.tasks.loader import TaskSet
from helpers import ROOT
from helpers.order import longest_first
from helpers.service import Stack, make_service, new_key

# Each file's seconds in one run of the tier (three workers, December 1, at 7a221c0, a clean
# clone through scripts/test.sh with `--durations=0`, summed by file; files under 20 s left
# out): the files start longest first (helpers/order.py), so that the few-but-long files do
# not run last with the other workers idle.
SECONDS_BY_FILE = {
    "test_attacks.py": 427,
    "test_attacks_node.py": 325,
    "test_attacks_rust.py": 233,
    "test_service_faults.py": 218,
    "test_attacks_node_configured.py": 218,
    "test_load.py": 213,
    "test_attacks_go.py": 187,
    "test_attacks_java.py": 186,
    "test_attacks_python_unittest.py": 156,
    "test_attacks_c.py": 154,
    "test_realworld_docker.py": 137,
    "test_suite_c.py": 128,
    "test_lanes_docker.py": 126,
    "test_attacks_round2.py": 107,
    "test_pipeline_docker.py": 98,
    "test_sandbox_conformance.py": 95,
    "test_blame_docker.py": 85,
    "test_service_e2e.py": 84,
    "test_schema_fuzz.py": 75,
    "test_host_loss.py": 69,
    "test_suite_node.py": 66,
    "test_suite_python.py": 64,
    "test_warm_delivery.py": 60,
    "test_languages_docker.py": 57,
    "test_suite_go_docker.py": 51,
    "test_gvisor.py": 49,
    "test_suite_history.py": 48,
    "test_suite_java_docker.py": 48,
    "test_jobs_docker.py": 45,
    "test_suite_rust.py": 42,
    "test_overhead_docker.py": 39,
    "test_importers_node_docker.py": 38,
    "test_image_archive_docker.py": 37,
    "test_importers_docker.py": 36,
    "test_service_image_docker.py": 34,
    "test_history_docker.py": 32,
    "test_speed.py": 32,
    "test_examples_docker.py": 24,
    "test_secrets.py": 21,
    "test_pool.py": 20,
}


# The sandbox providers an attack file grades under (its grader fixture takes `sandbox`):
# runc's container per grade, the reference, first.
SANDBOXES = ("runc", "runsc", "pool")
EVERY_SANDBOX = "GRADER_TEST_EVERY_SANDBOX"  # =1: every attack under every provider


def pytest_generate_tests(metafunc):
    """`sandbox`, for the tests whose grader takes it: every provider, but runc alone for a
    test marked `same_in_every_sandbox` (pyproject.toml says when a test is) unless
    GRADER_TEST_EVERY_SANDBOX=1. Such an attack is undone or refused by the supervisor
    before any code of the submission runs, or judged by the runner from what the
    submission's own process printed or did inside itself: the same code decides it, the
    same way, whatever the kernel below. What the providers differ in (processes, signals,
    descriptors, the report channel, files changed while the tests run, memory, the clock,
    time limits) and every honest grade run under all three. A test marked
    `same_on_every_kernel` (the pytest attack files' tricks inside pytest's own process) is
    graded under runc and the pool, whose pytest may be a fork of the supervisor: gVisor
    runs the same process image as runc, over another kernel."""
    if "sandbox" not in metafunc.fixturenames:
        return
    marked = metafunc.definition.get_closest_marker
    every = os.environ.get(EVERY_SANDBOX, "") == "1"
    providers = SANDBOXES
    if not every and marked("same_in_every_sandbox") is not None:
        providers = ("runc",)
    elif not every and marked("same_on_every_kernel") is not None:
        providers = ("runc", "pool")  # gVisor runs the process image runc runs
    metafunc.parametrize("sandbox", providers, indirect=True, scope="module")


@pytest.fixture(scope="module")
def sandbox(request) -> str:
    """The provider this module's grader grades under (`pytest_generate_tests`)."""
    return request.param


def pytest_collection_modifyitems(config, items):
    """The tier's files, longest first (`SECONDS_BY_FILE`); each file's tests keep their order."""
    longest_first(items, "docker", SECONDS_BY_FILE)


@pytest.fixture(scope="session", autouse=True)
def _mini_images(settings, tmp_path_factory) -> None:
    """The mini tasks' instance images, built under a lock before the first test that could
    grade them. Several processes (pytest-xdist's workers, another run on the machine) may
    want the same tag at once; two builds of one tag would each tag their own image, the one
    tagged first left untagged, its id perhaps already taken by a grade. Under the lock the
    second process finds the tag and builds nothing."""
    lock = tmp_path_factory.getbasetemp().parent / "grader-instance-images.lock"  # above every worker's directory
    with FileLock(lock):
        images = Images(settings)
        for task in TaskSet(settings.tasks_dir):
            images.instance_image(task)


@pytest.fixture
def stack(database_url, redis_url, settings, tmp_path):
    env = {
        "GRADER_DATABASE_URL": database_url,
        "GRADER_REDIS_URL": redis_url,
        "GRADER_TASKS_DIR": str(settings.tasks_dir),
        "GRADER_CACHE_DIR": str(settings.cache_dir),
        "GRADER_ENVIRONMENTS_DIR": str(ROOT / "environments"),
        "GRADER_LEASE_SECONDS": "4",
        "GRADER_RECONCILE_INTERVAL": "1",
        "GRADER_RETRY_BACKOFF": "1",
        "GRADER_CACHE": "false",
        # backoff 1, 2, 4, ... 32 s: an engine restart (tests/docker/test_dockerd_restart.py) fits in it
        "GRADER_MAX_RETRIES": "6",
    }
    svc = make_service(database_url, redis_url, tasks_dir=settings.tasks_dir)
    key = new_key(svc, "e2e")
    svc.close()
    s = Stack(env, tmp_path).start()
    s.key = key
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def live(tmp_path, redis_url):
    """start(tasks_dir, cache_dir) -> (the service, its URL): the app over real HTTP,
    graded by `work(svc)` (an RQ worker in this process, grading in Docker)."""
    made = []

    def start(tasks_dir: Path, cache_dir: Path):
        from werkzeug.serving import make_server

        svc = make_service(
            f"sqlite:///{tmp_path}/grader-{len(made)}.db",
            redis_url,
            tasks_dir=tasks_dir,
            cache_dir=cache_dir,
        )
        jobs.use(svc, Grader(svc.settings))
        server = make_server("127.0.0.1", 0, create_app(service=svc, migrate=False), threaded=True)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
        made.append((svc, server))
        return svc, f"http://127.0.0.1:{server.server_port}"

    yield start
    for service, server in made:
        server.shutdown()
        server.server_close()
        service.close()
