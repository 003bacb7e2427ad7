"""The Java real-task suite (tasks/maven-real/): built from the pinned Maven Central jars by
the shared builder (tasks/releases.py), and valid in the grading container task by task,
once (the empty patch FAILs, the gold patch PASSes, FAIL_TO_PASS fail and
PASS_TO_PASS pass at the base), graded by the junit runner through the java-21
environment's signed listener.

The build is cached: the jars under the grader cache directory, the suite in
build/maven-real (rewritten only when the manifest, the lists or the builder change), the
instance images by content hash (each compiles its base release once: junit-run
--prebuild). The first run downloads and builds everything.
"""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

from grader.config import get_settings
from grader.pipeline import Grader
from grader.tasks.loader import TaskSet
from grader.validate import validate_task

ROOT = Path(__file__).resolve().parents[2]
REPEAT = 1  # validate --repeat 1: two grades a task, 12-21 s of CPU each (README.md has the figures)


def _load_releases():
    spec = importlib.util.spec_from_file_location("releases_java_suite", ROOT / "tasks" / "releases.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


releases = _load_releases()
SUITE = releases.suite("maven-real")
MANIFEST = SUITE.manifest()
LISTS = SUITE.lists()
TASK_IDS = [spec.id for spec in MANIFEST.tasks]

pytestmark = [pytest.mark.docker]


def _quiet(*_args) -> None:
    pass


@pytest.fixture(scope="module")
def maven_real() -> Path:
    SUITE.build(log=_quiet)
    SUITE.build_images(log=_quiet)
    return SUITE.out


@pytest.fixture(scope="module")
def java_grader(maven_real: Path) -> Grader:
    return Grader(get_settings(tasks_dir=maven_real, environments_dir=ROOT / "environments"))


@pytest.fixture(scope="module")
def java_tasks(maven_real: Path) -> TaskSet:
    return TaskSet(maven_real)


@pytest.mark.timeout(1800)  # the first run downloads the jars and builds every image
def test_the_built_suite_matches_the_manifest(java_tasks):
    assert java_tasks.ids() == sorted(TASK_IDS)
    for task in java_tasks:
        spec = next(s for s in MANIFEST.tasks if s.id == task.id)
        assert task.metadata.suite == "maven-real" and task.metadata.language == "java"
        assert task.environment == "java-21" and task.check.runner == "junit"
        assert task.install and task.install.endswith("junit-run --prebuild")
        assert task.metadata.created_at == MANIFEST.release(spec.project, spec.new).uploaded.date()
        assert task.repo.commit == LISTS[task.id]["base_commit"]
        assert task.check.fail_to_pass == LISTS[task.id]["fail_to_pass"]
        assert task.check.pass_to_pass == LISTS[task.id]["pass_to_pass"]
        assert set(task.check.hidden_tests) == set(spec.tests)
        assert task.feedback == "tests"


@pytest.mark.timeout(900)
def test_a_rebuild_is_byte_identical(maven_real, tmp_path):
    """Same jars, same suite: the shas, the bundles, the gold patches, the task files."""
    again = tmp_path / "maven-real"
    SUITE.build(again, force=True, log=_quiet)

    def digest(root: Path) -> dict[str, str]:
        return {
            str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))
            if p.is_file()
        }

    assert digest(again) == digest(maven_real)
    shutil.rmtree(again)


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("task_id", TASK_IDS)
def test_maven_real_task_is_valid(java_grader, java_tasks, task_id):
    report = validate_task(java_grader, java_tasks.get(task_id), repeat=REPEAT)
    assert report.ok, report.problems
    assert report.empty == [report.empty[0]] * REPEAT and len(report.gold) == REPEAT
