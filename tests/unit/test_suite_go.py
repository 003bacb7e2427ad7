"""The Go real-task suite's manifest and lists (tasks/go-real/), without Docker or the
network: the releases pinned to the Go module proxy by hash, the suite's defaults, the
lists computed for every task in the ids the go runner reports. Built and graded:
tests/docker/test_suite_go_docker.py."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _load_releases():
    spec = importlib.util.spec_from_file_location("releases_go_manifest", ROOT / "tasks" / "releases.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


releases = _load_releases()
SUITE = releases.suite("go-real")
MANIFEST = SUITE.manifest()
LISTS = SUITE.lists()
GO_ID = re.compile(r"(Test|Example|Fuzz)[A-Za-z0-9_]*(/.+)?")


def escaped(module: str) -> str:
    """A module path as the proxy's URLs spell it (capitals as !lower)."""
    return re.sub(r"[A-Z]", lambda c: "!" + c.group(0).lower(), module)


def test_the_suite_is_go_graded_by_the_go_runner():
    assert MANIFEST.suite["environment"] == "go-1.24"
    assert MANIFEST.suite["runner"] == "go" and MANIFEST.suite["language"] == "go"
    assert len(MANIFEST.tasks) >= 5
    assert len({spec.project for spec in MANIFEST.tasks}) >= 5


def test_every_release_is_a_module_zip_pinned_by_hash():
    for name, project in MANIFEST.projects.items():
        assert MANIFEST.registry(name) == "go"
        assert "module" not in project and "zips" not in project  # phase 1's keys, converted
    for release in MANIFEST.releases.values():
        module = MANIFEST.projects[release.project]["package"]
        assert release.url == f"https://proxy.golang.org/{escaped(module)}/@v/{release.version}.zip"
        assert re.fullmatch(r"[0-9a-f]{64}", release.sha256)


def test_every_task_has_lists_computed_through_the_grader():
    assert set(LISTS) == {spec.id for spec in MANIFEST.tasks}, "run tasks/releases.py go-real --compute --runs 3"
    for spec in MANIFEST.tasks:
        lists = LISTS[spec.id]
        assert re.fullmatch(r"[0-9a-f]{40}", lists["base_commit"]), spec.id
        assert lists["fail_to_pass"], spec.id
        ids = lists["fail_to_pass"] + lists["pass_to_pass"]
        assert len(ids) == len(set(ids)), spec.id
        # one package per task: plain ids, as `go test -v` prints them
        for tid in ids + lists["dropped"]:
            assert GO_ID.fullmatch(tid), (spec.id, tid)
        assert all(t.endswith("_test.go") for t in spec.tests) and not any(s.endswith("_test.go") for s in spec.source)


def test_a_task_document_names_the_go_runner(tmp_path):
    spec = MANIFEST.tasks[0]

    class History:
        base = LISTS[spec.id]["base_commit"]
        new = "new"

        def src_layout(self) -> bool:
            return False

        def files(self, rev: str, paths: list[str]) -> list[str]:  # the go tasks name files, no directories
            return paths

    doc = SUITE.task_document(MANIFEST, spec, History(), b"", LISTS[spec.id])
    assert doc["environment"] == "go-1.24" and doc["metadata"]["language"] == "go"
    assert doc["check"]["runner"] == "go" and "pytest_args" not in doc["check"]
    assert doc["check"]["hidden_tests"] == {rel: f"hidden/{rel}" for rel in spec.tests}
    assert doc["limits"] == {"timeout": 180, "memory": "1g"}
    assert doc["metadata"]["source"].endswith("(Go module zips)")
