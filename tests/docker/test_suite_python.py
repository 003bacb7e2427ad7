"""The Python suites beyond 3.11 (tasks/py39-real on python-3.9, tasks/py313-real on
python-3.13): their manifests keep the suites' promises, and each suite, built from its
pinned sdists by tasks/releases.py, is valid in the grading container task by task (the
empty patch FAILs, the gold patch PASSes), the pytest tasks and the unittest ones alike.

The build is cached: the sdists under the grader cache directory, the suite in
build/SUITE (rewritten only when its manifest, its lists or the builder change), the
instance images by content hash. The first run downloads and builds everything.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from grader.box.runners import unittest as unittest_runner
from grader.config import get_settings
from grader.pipeline import Grader
from grader.tasks.loader import TaskSet
from grader.validate import validate_task

ROOT = Path(__file__).resolve().parent.parent.parent
SUITES = {"py39-real": "python-3.9", "py313-real": "python-3.13"}


def _load_releases():
    spec = importlib.util.spec_from_file_location("releases", ROOT / "tasks" / "releases.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


releases = _load_releases()
TASKS = [(name, spec.id) for name in SUITES for spec in releases.suite(name).manifest().tasks]


def _quiet(*_args) -> None:
    pass


# --- the manifests, no Docker needed --------------------------------------------------------


@pytest.mark.parametrize("name", SUITES)
def test_the_suite_runs_in_its_python_and_spans_projects(name):
    m = releases.suite(name).manifest()
    assert m.suite["name"] == name and m.suite["environment"] == SUITES[name] and m.suite["language"] == "python"
    assert len(m.tasks) >= 5
    assert len({m.projects[s.project]["package"] for s in m.tasks}) >= 3
    runners = {m.setting(s.project, "runner", "pytest") for s in m.tasks}
    assert runners == {"pytest", "unittest"}


@pytest.mark.parametrize("name", SUITES)
def test_every_release_is_a_pypi_sdist_pinned_by_hash(name):
    m = releases.suite(name).manifest()
    for (project, _), release in m.releases.items():
        assert m.registry(project) == "pypi"
        assert release.url.startswith(releases.PYPI_FILES) and release.url.endswith(".tar.gz")
        assert len(release.sha256) == 64 and int(release.sha256, 16) >= 0
        package = m.projects[project]["package"].lower().replace("_", "-")
        assert release.filename.lower().replace("_", "-").startswith(package)


@pytest.mark.parametrize("name", SUITES)
def test_every_task_has_lists_computed_from_its_hidden_tests(name):
    suite = releases.suite(name)
    m, lists = suite.manifest(), suite.lists()
    assert set(lists) == {s.id for s in m.tasks}, f"run tasks/releases.py {name} --compute"
    for spec in m.tasks:
        got = lists[spec.id]
        assert got["fail_to_pass"] and len(got["base_commit"]) == 40, spec.id
        assert not set(got["fail_to_pass"]) & set(got["pass_to_pass"])
        for tid in got["fail_to_pass"] + got["pass_to_pass"]:
            if m.setting(spec.project, "runner", "pytest") == "pytest":
                assert tid.split("::", 1)[0] in spec.tests, (spec.id, tid)
            else:  # unittest: the test's module is one of the hidden test files
                module = unittest_runner.id_module(tid)
                assert module is not None, (spec.id, tid)
                path = module.replace(".", "/") + ".py"
                assert any(t == path or t.endswith("/" + path) for t in spec.tests), (spec.id, tid)


# --- built and graded for real --------------------------------------------------------------


@pytest.fixture(scope="module")
def built() -> dict[str, Path]:
    out = {}
    for name in SUITES:
        suite = releases.suite(name)
        suite.build(log=_quiet)
        suite.build_images(log=_quiet)
        out[name] = suite.out
    return out


@pytest.fixture(scope="module")
def graders(built) -> dict[str, Grader]:
    return {
        name: Grader(get_settings(tasks_dir=d, environments_dir=ROOT / "environments")) for name, d in built.items()
    }


@pytest.mark.docker
@pytest.mark.timeout(1800)  # the first run downloads the sdists and builds every image
def test_the_built_suites_match_their_manifests(built):
    for name, d in built.items():
        suite = releases.suite(name)
        m, lists = suite.manifest(), suite.lists()
        tasks = TaskSet(d)
        assert tasks.ids() == sorted(s.id for s in m.tasks)
        for task in tasks:
            spec = next(s for s in m.tasks if s.id == task.id)
            assert task.environment == SUITES[name] and task.metadata.suite == name
            assert task.repo.commit == lists[task.id]["base_commit"]
            assert task.check.runner == m.setting(spec.project, "runner", "pytest")
            assert task.check.fail_to_pass == lists[task.id]["fail_to_pass"]
            assert task.feedback == "tests"


@pytest.mark.docker
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name, task_id", TASKS, ids=[t for _, t in TASKS])
def test_the_task_is_valid(graders, built, name, task_id):
    report = validate_task(graders[name], TaskSet(built[name]).get(task_id))
    assert report.ok, report.problems
