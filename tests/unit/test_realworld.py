"""The real-world suite's manifest (tasks/realworld/) keeps the suite's promises, read
without Docker; the suite built from the pinned sdists and graded in the container, task
by task, is tests/docker/test_realworld_docker.py."""

from __future__ import annotations

import importlib.util
import sys

from grader.tasks.loader import TaskSet
from helpers import ROOT

# Kept for an independent check of the suite: no task may come from these projects.
RESERVED = {
    "attrs",
    "boltons",
    "cachetools",
    "humanize",
    "idna",
    "inflect",
    "more-itertools",
    "python-dateutil",
    "six",
    "toolz",
    "wcwidth",
    "tabulate",
    "sortedcontainers",
    "python-slugify",
}


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


def test_the_suite_spans_projects_and_years():
    projects = {spec.project for spec in MANIFEST.tasks}
    assert len(TASK_IDS) >= 20
    assert len(projects) >= 5
    assert not {MANIFEST.projects[p].get("pypi", p).lower() for p in projects} & RESERVED
    years = {MANIFEST.sdist(spec.project, spec.new).uploaded.year for spec in MANIFEST.tasks}
    assert len(years) >= 5, sorted(years)


def test_every_sdist_is_pinned_to_pypi_by_hash():
    for sdist in MANIFEST.sdists.values():
        assert sdist.url.startswith(build.FILES_HOST) and sdist.url.endswith((".tar.gz", ".zip"))
        assert len(sdist.sha256) == 64 and int(sdist.sha256, 16) >= 0
        assert (
            sdist.filename.lower()
            .replace("_", "-")
            .startswith(MANIFEST.projects[sdist.project].get("pypi", sdist.project).lower().replace("_", "-"))
        )


def test_every_task_has_lists_computed_from_its_hidden_tests():
    assert set(LISTS) == set(TASK_IDS), "run tasks/realworld/build.py --compute"
    for spec in MANIFEST.tasks:
        lists = LISTS[spec.id]
        assert lists["fail_to_pass"], spec.id
        assert len(lists["base_commit"]) == 40
        assert not set(lists["fail_to_pass"]) & set(lists["pass_to_pass"])
        for test_id in lists["fail_to_pass"] + lists["pass_to_pass"]:
            assert test_id.split("::", 1)[0] in spec.tests, (spec.id, test_id)


def test_difficulty_rule():
    def patch(files: int, lines: int) -> bytes:
        one = "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n" + "+x\n" * lines
        return (one * files).encode()

    assert build.difficulty(patch(1, 10)) == "easy"
    assert build.difficulty(patch(1, 11)) == "medium"
    assert build.difficulty(patch(2, 30)) == "medium"
    assert build.difficulty(patch(1, 61)) == "hard"
    assert build.difficulty(patch(3, 3)) == "hard"


def test_the_suite_file_the_build_writes_sets_tests_feedback(tmp_path):
    """Submitters of the real-world tasks see the listed tests' outcomes, never the output
    that could quote the real projects' hidden tests."""
    from grader.tasks.loader import read_suite_file

    (tmp_path / "suite.yaml").write_text(build.SUITE_YAML)
    assert read_suite_file(tmp_path / "suite.yaml") == {"feedback": "tests"}


def test_the_default_tasks_directory_does_not_hold_the_suite():
    """The suite is generated outside tasks/, which the grader loads by default: the
    example suite, the demo and the service are the same with or without it built."""
    assert not set(TaskSet(ROOT / "tasks").ids()) & set(TASK_IDS)
    assert build.DEFAULT_OUT.relative_to(ROOT).parts[0] != "tasks"
