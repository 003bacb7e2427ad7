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

# Each file's seconds in one run of the tier (three workers, December 1, at ccaee03, the machine
# otherwise idle; `--junitxml`, summed by file; test_load.py's less the 12 grades it no longer
# makes): the files start longest first (helpers/order.py). Before, this table had the compiled
# languages' attack files and test_suite_c.py at half their time, and they started late.
SECONDS_BY_FILE = {
    "test_attacks.py": 763,
    "test_attacks_node.py": 446,
    "test_attacks_node_configured.py": 302,
    "test_load.py": 271,
    "test_attacks_rust.py": 269,
    "test_service_faults.py": 267,
    "test_attacks_go.py": 260,
    "test_attacks_java.py": 234,
    "test_realworld_docker.py": 230,
    "test_suite_c.py": 215,
    "test_attacks_round2.py": 213,
    "test_attacks_c.py": 202,
    "test_schema_fuzz.py": 167,
    "test_attacks_python_unittest.py": 167,
    "test_blame_docker.py": 151,
    "test_suite_node.py": 147,
    "test_lanes_docker.py": 147,
    "test_sandbox_conformance.py": 140,
    "test_service_e2e.py": 139,
    "test_suite_python.py": 127,
    "test_pipeline_docker.py": 124,
    "test_suite_go_docker.py": 119,
    "test_host_loss.py": 112,
    "test_suite_java_docker.py": 111,
    "test_languages_docker.py": 92,
    "test_jobs_docker.py": 78,
    "test_importers_node_docker.py": 69,
    "test_suite_history.py": 68,
    "test_warm_delivery.py": 66,
    "test_suite_rust.py": 65,
    "test_importers_docker.py": 61,
    "test_gvisor.py": 54,
    "test_history_docker.py": 51,
    "test_overhead_docker.py": 48,
    "test_image_archive_docker.py": 44,
    "test_speed.py": 43,
    "test_examples_docker.py": 40,
    "test_secrets.py": 29,
    "test_feedback_docker.py": 25,
    "test_audit_realworld.py": 20,
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
    providers = SANDBOXES
    if os.environ.get(EVERY_SANDBOX, "") == "1":
        pass
    elif marked("same_in_every_sandbox") is not None:
        providers = ("runc",)
    elif marked("same_on_every_kernel") is not None:
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
