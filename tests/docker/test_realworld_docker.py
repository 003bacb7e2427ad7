"""The real-world suite (tasks/realworld/) built from the pinned sdists is valid in the
grading container, task by task (the empty patch FAILs, the gold patch PASSes,
FAIL_TO_PASS fail and PASS_TO_PASS pass at the base). That the manifest keeps the suite's
promises is tests/unit/test_realworld.py.

The build is cached: the sdists under the grader cache directory, the suite in
build/realworld (rewritten only when the manifest, the lists or build.py change), the
instance images by content hash. The first run downloads and builds everything.
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
from helpers import ROOT


def _load_build():
    spec = importlib.util.spec_from_file_location("realworld_build", ROOT / "tasks" / "realworld" / "build.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


build = _load_build()
MANIFEST = build.load_manifest()
LISTS = build.load_lists()
TASK_IDS = [spec.id for spec in MANIFEST.tasks]


def _quiet(*_args) -> None:
    pass


# --- built and graded for real --------------------------------------------------------------


@pytest.fixture(scope="module")
def realworld() -> Path:
    out = build.DEFAULT_OUT
    build.build_suite(out, log=_quiet)
    build.build_images(out, log=_quiet)
    return out


@pytest.fixture(scope="module")
def realworld_grader(realworld: Path) -> Grader:
    return Grader(get_settings(tasks_dir=realworld, environments_dir=ROOT / "environments"))


@pytest.fixture(scope="module")
def realworld_tasks(realworld: Path) -> TaskSet:
    return TaskSet(realworld)


@pytest.mark.docker
@pytest.mark.timeout(1800)  # the first run downloads the sdists and builds every image
def test_the_built_suite_matches_the_manifest(realworld_tasks):
    assert realworld_tasks.ids() == sorted(TASK_IDS)
    for task in realworld_tasks:
        spec = next(s for s in MANIFEST.tasks if s.id == task.id)
        assert task.metadata.suite == "realworld" and task.metadata.language == "python"
        assert task.metadata.created_at == MANIFEST.sdist(spec.project, spec.new).uploaded.date()
        assert task.repo.commit == LISTS[task.id]["base_commit"]
        assert task.check.fail_to_pass == LISTS[task.id]["fail_to_pass"]
        assert set(task.check.hidden_tests) == set(spec.tests)
        assert task.feedback == "tests"
    assert (realworld_tasks.dir / "suite.yaml").read_text() == build.SUITE_YAML


@pytest.mark.docker
@pytest.mark.timeout(900)
def test_a_rebuild_is_byte_identical(realworld, tmp_path):
    """Same sdists, same suite: the shas, the bundles, the gold patches, the task files."""
    again = tmp_path / "realworld"
    build.build_suite(again, force=True, log=_quiet)

    def digest(root: Path) -> dict[str, str]:
        return {
            str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))
            if p.is_file()
        }

    assert digest(again) == digest(realworld)
    shutil.rmtree(again)


@pytest.mark.docker
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("task_id", TASK_IDS)
def test_realworld_task_is_valid(realworld_grader, realworld_tasks, task_id):
    report = validate_task(realworld_grader, realworld_tasks.get(task_id))
    assert report.ok, report.problems
