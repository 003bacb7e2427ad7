"""The Rust real-task suite (tasks/crates-real/): built from the pinned crates by the shared
builder (tasks/releases.py), and valid in the grading container task by task (the empty
patch FAILs, the gold patch PASSes, FAIL_TO_PASS fail and PASS_TO_PASS pass at the base).

The build is cached: the crates under the grader cache directory, the suite in
build/crates-real (rewritten only when the manifest, the lists or the builder change), the
instance images by content hash. The first run downloads and builds everything (about two
minutes of image builds on a quiet machine: each install prebuilds its crate's target/).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from grader.config import get_settings
from grader.pipeline import Grader
from grader.tasks.loader import TaskSet
from grader.validate import validate_task

pytestmark = [pytest.mark.docker]
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tasks"))
import releases  # noqa: E402  (the shared builder, a script beside the suites)

SUITE = releases.suite("crates-real")
MANIFEST = SUITE.manifest()
LISTS = SUITE.lists()
TASK_IDS = [spec.id for spec in MANIFEST.tasks]


def _quiet(*_args: object) -> None:
    pass


@pytest.fixture(scope="module")
def crates_real() -> Path:
    SUITE.build(log=_quiet)
    SUITE.build_images(log=_quiet)
    return SUITE.out


@pytest.fixture(scope="module")
def crates_tasks(crates_real: Path) -> TaskSet:
    return TaskSet(crates_real)


@pytest.fixture(scope="module")
def crates_grader(crates_real: Path) -> Grader:
    return Grader(get_settings(tasks_dir=crates_real, environments_dir=ROOT / "environments"))


@pytest.mark.timeout(1800)  # the first run downloads the crates and builds every image
def test_the_built_suite_matches_the_manifest(crates_tasks):
    assert crates_tasks.ids() == sorted(TASK_IDS)
    for task in crates_tasks:
        spec = next(s for s in MANIFEST.tasks if s.id == task.id)
        assert task.metadata.suite == "crates-real" and task.metadata.language == "rust"
        assert task.environment == "rust-1.85" and task.check.runner == "cargo"
        assert task.metadata.created_at == MANIFEST.release(spec.project, spec.new).uploaded.date()
        assert task.repo.commit == LISTS[task.id]["base_commit"]
        assert task.check.fail_to_pass == LISTS[task.id]["fail_to_pass"]
        assert set(task.check.hidden_tests) == set(spec.tests)
        assert task.feedback == "tests"
        assert task.public_view()["decided_by"].startswith("libtest's own output")


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("task_id", TASK_IDS)
def test_crates_real_task_is_valid(crates_grader, crates_tasks, task_id):
    report = validate_task(crates_grader, crates_tasks.get(task_id))
    assert report.ok, report.problems
