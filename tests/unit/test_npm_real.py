"""The npm-real suite's manifest and lists (tasks/npm-real/), without Docker: every task cut
from two pinned npm releases of one package, run by a Node.js runner, with lists computed
by the grader (tests/docker/test_suite_node.py builds and validates it)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from grader.box.runners import runner

ROOT = Path(__file__).resolve().parents[2]


def _releases():
    spec = importlib.util.spec_from_file_location("releases_npm_real_unit", ROOT / "tasks" / "releases.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


releases = _releases()
SUITE = releases.suite("npm-real")
MANIFEST = SUITE.manifest()
LISTS = SUITE.lists()


def test_the_suite_has_at_least_five_tasks_over_several_packages_and_runners():
    assert len(MANIFEST.tasks) >= 5
    assert len({s.project for s in MANIFEST.tasks}) >= 4
    assert {MANIFEST.setting(s.project, "runner") for s in MANIFEST.tasks} >= {"tap", "node-test", "mocha"}
    assert MANIFEST.suite["environment"] == "node-20"


def test_every_release_is_pinned_to_the_npm_registry_by_hash():
    for (project, _), release in MANIFEST.releases.items():
        assert MANIFEST.registry(project) == "npm"
        for archive in release.archives:
            assert archive.url.startswith("https://registry.npmjs.org/") and archive.url.endswith(".tgz")
            assert len(archive.sha256) == 64 and int(archive.sha256, 16) >= 0


def test_every_task_has_lists_computed_by_the_grader():
    assert set(LISTS) == {s.id for s in MANIFEST.tasks}, "run tasks/releases.py npm-real --compute --runs 3"
    for spec in MANIFEST.tasks:
        lists = LISTS[spec.id]
        assert len(lists["base_commit"]) == 40
        assert lists["fail_to_pass"], spec.id
        assert not set(lists["fail_to_pass"]) & set(lists["pass_to_pass"])
        paths = spec.paths or spec.tests
        for tid in lists["fail_to_pass"] + lists["pass_to_pass"]:
            assert tid.split("::", 1)[0] in paths, (spec.id, tid)


def test_every_task_is_a_valid_check_of_its_runner():
    for spec in MANIFEST.tasks:
        module = runner(MANIFEST.setting(spec.project, "runner"))
        check = {"paths": spec.paths, "args": spec.args, "command": spec.command, "fail_to_pass": []}
        plan = module.plan(check, {t: "x" for t in spec.tests})
        assert plan.paths == (spec.paths or spec.tests)
        assert not set(spec.source) & set(spec.tests)
        # the gold patch may not touch what the runner protects: it would be restored
        assert not any(s.endswith("package.json") or "node_modules/" in s for s in spec.source)
