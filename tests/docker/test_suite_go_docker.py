"""The Go real-task suite (tasks/go-real/): built from the pinned module zips by the shared
builder (tasks/releases.py), and valid in the grading container task by task (the empty
patch FAILs, the gold patch PASSes, FAIL_TO_PASS fail and PASS_TO_PASS pass at the base),
graded by the go runner through the go-1.24 environment's signed reports.

The build is cached: the zips under the grader cache directory, the suite in
build/go-real (rewritten only when the manifest, the lists or the builder change), the
instance images by content hash. The first run downloads and builds everything.
"""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import sys
from pathlib import Path

import pytest
from unidiff import PatchSet

from grader.audit_rules import go as rules
from grader.config import get_settings
from grader.pipeline import Grader
from grader.tasks.loader import TaskSet
from grader.validate import validate_task

ROOT = Path(__file__).resolve().parents[2]


def _load_releases():
    spec = importlib.util.spec_from_file_location("releases_go_suite", ROOT / "tasks" / "releases.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


releases = _load_releases()
SUITE = releases.suite("go-real")
MANIFEST = SUITE.manifest()
LISTS = SUITE.lists()
TASK_IDS = [spec.id for spec in MANIFEST.tasks]

pytestmark = [pytest.mark.docker]


def _quiet(*_args) -> None:
    pass


@pytest.fixture(scope="module")
def go_real() -> Path:
    SUITE.build(log=_quiet)
    SUITE.build_images(log=_quiet)
    return SUITE.out


@pytest.fixture(scope="module")
def go_grader(go_real: Path) -> Grader:
    return Grader(get_settings(tasks_dir=go_real, environments_dir=ROOT / "environments"))


@pytest.fixture(scope="module")
def go_tasks(go_real: Path) -> TaskSet:
    return TaskSet(go_real)


@pytest.mark.timeout(1800)  # the first run downloads the zips and builds every image
def test_the_built_suite_matches_the_manifest(go_tasks):
    assert go_tasks.ids() == sorted(TASK_IDS)
    for task in go_tasks:
        spec = next(s for s in MANIFEST.tasks if s.id == task.id)
        assert task.metadata.suite == "go-real" and task.metadata.language == "go"
        assert task.environment == "go-1.24" and task.check.runner == "go"
        assert task.metadata.created_at == MANIFEST.release(spec.project, spec.new).uploaded.date()
        assert task.repo.commit == LISTS[task.id]["base_commit"]
        assert task.check.fail_to_pass == LISTS[task.id]["fail_to_pass"]
        assert task.check.pass_to_pass == LISTS[task.id]["pass_to_pass"]
        assert set(task.check.hidden_tests) == set(spec.tests)
        assert task.feedback == "tests"


@pytest.mark.timeout(900)
def test_a_rebuild_is_byte_identical(go_real, tmp_path):
    """Same zips, same suite: the shas, the bundles, the gold patches, the task files."""
    again = tmp_path / "go-real"
    SUITE.build(again, force=True, log=_quiet)

    def digest(root: Path) -> dict[str, str]:
        return {
            str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))
            if p.is_file()
        }

    assert digest(again) == digest(go_real)
    shutil.rmtree(again)


def patch_findings(patch: bytes) -> list[tuple[str, str, str]]:
    """(rule, path, line) for what the Go audit rules find in a unified diff: its paths and
    the lines it adds."""
    out = []
    for f in PatchSet(patch.decode("utf-8", "replace")):
        path = f.target_file[2:] if f.target_file.startswith("b/") else f.target_file
        if f.is_removed_file:
            continue
        for rule, pattern in rules.PATH_RULES.items():
            if pattern.search(path):
                out.append((rule, path, ""))
        for hunk in f:
            for line in hunk:
                if line.is_added:
                    for rule, patterns in rules.rules_for(path).items():
                        if any(p.search(line.value) for p in patterns):
                            out.append((rule, path, line.value.strip()))
    return out


def test_the_gold_patches_are_quiet_under_the_go_audit_rules(go_tasks):
    """grader/audit_rules/go.py on the nine real changes: no finding (its rules firing on
    the attacks: tests/unit/test_audit_rules_go.py)."""
    golds = {task.id: task.gold_patch_text() for task in go_tasks}
    assert len(golds) == len(TASK_IDS) and all(golds.values())
    assert {tid: found for tid, gold in golds.items() if gold and (found := patch_findings(gold))} == {}


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("task_id", TASK_IDS)
def test_go_real_task_is_valid(go_grader, go_tasks, task_id):
    report = validate_task(go_grader, go_tasks.get(task_id))
    assert report.ok, report.problems
