"""The C/C++ real-task suite (tasks/c-real/): the manifest keeps its promises, and the suite
built from the pinned Debian tarballs by tasks/releases.py is valid in the grading container,
task by task (the empty patch FAILs, the gold patch PASSes, FAIL_TO_PASS fail and PASS_TO_PASS
pass at the base), through the ctest runner.

Cached as the other suites are: the tarballs under the grader cache directory, the suite in
build/c-real (rewritten only when the manifest, the lists or releases.py change), the instance
images by content hash. The first run downloads and builds everything (each image configures and
builds its base release: about a minute per task on an idle machine)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from grader.config import get_settings
from grader.pipeline import Grader
from grader.tasks.loader import TaskSet
from grader.validate import validate_task

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tasks"))
import releases  # noqa: E402

SUITE = releases.suite("c-real")
MANIFEST = SUITE.manifest()
LISTS = SUITE.lists()
TASK_IDS = [spec.id for spec in MANIFEST.tasks]


def _quiet(*_args) -> None:
    pass


def test_the_manifest_is_in_the_shared_schema():
    assert MANIFEST.suite["environment"] == "c" and MANIFEST.suite["runner"] == "ctest"
    assert len(TASK_IDS) >= 5 and len({s.project for s in MANIFEST.tasks}) >= 4
    for project in MANIFEST.projects.values():
        assert project["registry"] == "debian" and project["install"].startswith("cmake -S . -B build")
    for release in MANIFEST.releases.values():
        assert "/debian/pool/main/" in release.url and len(release.sha256) == 64
    for task_id in TASK_IDS:
        assert LISTS[task_id]["fail_to_pass"], task_id
        assert not set(LISTS[task_id]["fail_to_pass"]) & set(LISTS[task_id]["pass_to_pass"])


@pytest.fixture(scope="module")
def c_real() -> Path:
    SUITE.build(log=_quiet)
    SUITE.build_images(log=_quiet)
    return SUITE.out


@pytest.fixture(scope="module")
def c_real_tasks(c_real: Path) -> TaskSet:
    return TaskSet(c_real)


@pytest.fixture(scope="module")
def c_real_grader(c_real: Path) -> Grader:
    return Grader(get_settings(tasks_dir=c_real, environments_dir=ROOT / "environments"))


@pytest.mark.docker
@pytest.mark.timeout(3600)  # the first run downloads the tarballs and builds every image
def test_the_built_suite_matches_the_manifest(c_real_tasks):
    assert c_real_tasks.ids() == sorted(TASK_IDS)
    for task in c_real_tasks:
        assert task.metadata.suite == "c-real" and task.metadata.language == "c"
        assert task.environment == "c" and task.check.runner == "ctest"
        assert task.repo.commit == LISTS[task.id]["base_commit"]
        assert task.check.fail_to_pass == LISTS[task.id]["fail_to_pass"]
        assert task.check.pass_to_pass == LISTS[task.id]["pass_to_pass"]


@pytest.mark.docker
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("task_id", TASK_IDS)
def test_c_real_task_is_valid(c_real_grader, c_real_tasks, task_id):
    report = validate_task(c_real_grader, c_real_tasks.get(task_id))
    assert report.ok, report.problems
