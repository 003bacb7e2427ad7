"""The Java real-task suite's manifest and lists (tasks/maven-real/), without Docker or the
network: every release three files pinned to Maven Central by hash, the suite's defaults,
the lists computed for every task in the ids the junit runner reports. Built and graded:
tests/docker/test_suite_java_docker.py."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

from grader.box.runners import junit

ROOT = Path(__file__).resolve().parents[2]


def _load_releases():
    spec = importlib.util.spec_from_file_location("releases_java_unit", ROOT / "tasks" / "releases.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


releases = _load_releases()
SUITE = releases.suite("maven-real")
MANIFEST = SUITE.manifest()
LISTS = SUITE.lists()


def test_the_suite_is_java_graded_by_junit():
    assert MANIFEST.suite["environment"] == "java-21" and MANIFEST.suite["runner"] == "junit"
    assert MANIFEST.suite["language"] == "java"
    assert 5 <= len(MANIFEST.tasks) <= 6  # the fastest of the candidates (README.md)
    assert len({spec.project for spec in MANIFEST.tasks}) >= 2


def test_every_release_is_its_jars_and_pom_pinned_to_maven_central():
    for (project, version), release in MANIFEST.releases.items():
        assert MANIFEST.registry(project) == "maven"
        group, artifact = MANIFEST.projects[project]["package"].split(":")
        base = f"https://repo1.maven.org/maven2/{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}"
        by_place = {(a.into, a.file): a for a in release.archives}
        assert by_place[("src/main/java", "")].url == base + "-sources.jar"
        assert by_place[("src/main/resources", "")].url == base + "-sources.jar"
        assert by_place[("src/test/java", "")].url == base + "-test-sources.jar"
        assert by_place[("src/test/resources", "")].url == base + "-test-sources.jar"
        assert by_place[("", "pom.xml")].url == base + ".pom"
        for a in release.archives:
            assert re.fullmatch(r"[0-9a-f]{64}", a.sha256)


def test_every_install_fetches_pinned_jars_and_prebuilds_the_base():
    for name, project in MANIFEST.projects.items():
        words = project["install"].split()
        assert words[0] == "maven-fetch" and words[-3:] == ["&&", "junit-run", "--prebuild"], name
        for coord in words[1:-3]:
            assert re.fullmatch(r"[\w.-]+:[\w.-]+:[\w.-]+=[0-9a-f]{64}", coord), coord


def test_every_task_has_lists_in_the_runners_ids():
    assert set(LISTS) == {spec.id for spec in MANIFEST.tasks}, "run tasks/releases.py maven-real --compute --runs 3"
    for spec in MANIFEST.tasks:
        lists = LISTS[spec.id]
        assert lists["fail_to_pass"] and len(lists["base_commit"]) == 40, spec.id
        assert not set(lists["fail_to_pass"]) & set(lists["pass_to_pass"])
        for test_id in lists["fail_to_pass"] + lists["pass_to_pass"]:
            cls, method = junit.class_of(test_id)
            assert method and junit.source_of(cls) in spec.paths, (spec.id, test_id)
        assert set(spec.paths) <= set(spec.tests)
