"""The npm-real suite (tasks/npm-real/, JavaScript and TypeScript under the Node.js runners):
built from the pinned npm tarballs by tasks/releases.py, it matches its manifest and
lists, a rebuild is byte-identical, and every task is valid in the grading container (the
empty patch FAILs, the gold patch PASSes, FAIL_TO_PASS fail and PASS_TO_PASS pass at the
base), as `grader tasks validate` checks it.

The build is cached: the tarballs under the grader cache directory, the suite in
build/npm-real (rewritten only when the manifest, the lists or releases.py change), the
instance images by content hash. The first run downloads and installs everything."""

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

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[2]


def _releases():
    spec = importlib.util.spec_from_file_location("releases_npm_real", ROOT / "tasks" / "releases.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


releases = _releases()
SUITE = releases.suite("npm-real")
MANIFEST = SUITE.manifest()
LISTS = SUITE.lists()
TASK_IDS = [spec.id for spec in MANIFEST.tasks]


def _quiet(*_args) -> None:
    pass


@pytest.fixture(scope="module")
def npm_real() -> Path:
    SUITE.build(log=_quiet)
    SUITE.build_images(log=_quiet)
    return SUITE.out


@pytest.fixture(scope="module")
def npm_real_tasks(npm_real: Path) -> TaskSet:
    return TaskSet(npm_real)


@pytest.fixture(scope="module")
def npm_real_grader(npm_real: Path) -> Grader:
    return Grader(get_settings(tasks_dir=npm_real, environments_dir=ROOT / "environments"))


@pytest.mark.timeout(3600)  # the first run downloads the tarballs and installs every image
def test_the_built_suite_matches_the_manifest(npm_real_tasks):
    assert npm_real_tasks.ids() == sorted(TASK_IDS)
    for task in npm_real_tasks:
        spec = next(s for s in MANIFEST.tasks if s.id == task.id)
        assert task.metadata.suite == "npm-real"
        assert task.metadata.language in ("javascript", "typescript")
        assert task.environment == "node-20"
        assert task.check.runner == MANIFEST.setting(spec.project, "runner")
        assert task.metadata.created_at == MANIFEST.release(spec.project, spec.new).uploaded.date()
        assert task.repo.commit == LISTS[task.id]["base_commit"]
        assert task.check.fail_to_pass == LISTS[task.id]["fail_to_pass"]
        assert task.check.pass_to_pass == LISTS[task.id]["pass_to_pass"]
        assert set(task.check.hidden_tests) == set(spec.tests)
        assert task.public_view()["decided_by"] == "test report"
        assert task.feedback == "tests"


@pytest.mark.timeout(900)
def test_a_rebuild_is_byte_identical(npm_real, tmp_path):
    """Same tarballs, same suite: the shas, the bundles, the gold patches, the task files."""
    again = tmp_path / "npm-real"
    SUITE.build(again, force=True, log=_quiet)

    def digest(root: Path) -> dict[str, str]:
        return {
            str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != ".stamp"
        }

    assert digest(again) == digest(npm_real)
    shutil.rmtree(again)


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("task_id", TASK_IDS)
def test_npm_real_task_is_valid(npm_real_grader, npm_real_tasks, task_id):
    report = validate_task(npm_real_grader, npm_real_tasks.get(task_id))
    assert report.ok, report.problems
