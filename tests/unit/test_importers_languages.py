"""Rows in other languages than Python: the environment a row's language names, and
RES-Q's JavaScript rows as tasks (no Docker: the import without validation)."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.config import get_settings
from grader.importers import import_rows
from grader.importers.common import DatasetError, environment_for_language
from grader.importers.resq import npm_install
from grader.importers.resq import test_command as resq_command
from grader.tasks.loader import TaskSet
from helpers.importer_repos import make_calc, resq_row

JS_SCRIPT = (
    "const assert = require('assert');\nconst calc = require('./calc');\nassert.strictEqual(calc.mean([2]), 2);\n"
)
ESM_SCRIPT = (
    "import assert from 'node:assert';\nimport { mean } from './calc.mjs';\nassert.strictEqual(mean([2]), 2);\n"
)


@pytest.fixture
def environments(tmp_path) -> Path:
    d = tmp_path / "environments"
    for name in ("python-3.11", "python-3.9", "node-18", "node-20", "go-1.24", "rust-1.85", "java-21", "c"):
        (d / name).mkdir(parents=True)
        (d / name / "Dockerfile").write_text("FROM scratch\n")
    return d


@pytest.mark.parametrize(
    "language, version, expected",
    [
        ("Python", "3.9", "python-3.9"),
        ("python", None, "python-3.11"),
        ("JavaScript", None, "node-20"),
        ("TypeScript", "18", "node-18"),
        ("node", "v20.11.1", "node-20"),
        ("Go", "1.24.4", "go-1.24"),
        ("golang", None, "go-1.24"),
        ("Rust", None, "rust-1.85"),
        ("Java", "21", "java-21"),
        ("Kotlin", None, "java-21"),
        ("C++", None, "c"),
    ],
)
def test_a_language_names_its_environment(environments, language, version, expected):
    assert environment_for_language(language, version, environments, "row 1") == expected


def test_a_language_or_version_without_an_environment_is_named(environments):
    with pytest.raises(DatasetError, match="row 1: language 'Haskell' has no environment"):
        environment_for_language("Haskell", None, environments, "row 1")
    with pytest.raises(DatasetError, match=r"row 1: Go 1.19 has no environment \(available: go-1.24\)"):
        environment_for_language("Go", "1.19", environments, "row 1")


def test_a_javascript_test_script_runs_with_node():
    assert resq_command(JS_SCRIPT, "javascript") == ("resq_test_script.js", "node resq_test_script.js")
    assert resq_command(ESM_SCRIPT, "javascript") == ("resq_test_script.mjs", "node resq_test_script.mjs")
    assert resq_command("#!/bin/bash\nnpm test\n", "javascript") == ("resq_test_script.sh", "bash resq_test_script.sh")


def test_npm_dependencies_are_installed_at_image_build_without_scripts():
    assert npm_install([], True, True, "t") == "npm ci --ignore-scripts --no-audit --no-fund"
    assert npm_install(["mocha@10.2.0"], False, True, "t") == (
        "npm install --ignore-scripts --no-audit --no-fund && "
        "npm install --no-save --ignore-scripts --no-audit --no-fund mocha@10.2.0"
    )
    assert npm_install([], False, False, "t") is None
    with pytest.raises(DatasetError, match="is not an npm package spec"):
        npm_install(["mocha; curl evil"], False, False, "t")


def test_a_resq_javascript_row_imports(tmp_path, environments):
    repos = tmp_path / "clones"
    repos.mkdir()
    calc = make_calc(repos)
    settings = get_settings(tasks_dir=tmp_path / "tasks", environments_dir=environments, cache_dir=tmp_path / "cache")
    row = resq_row(
        calc,
        language="JavaScript",
        testbed_environment="node 20",
        test_script=JS_SCRIPT,
        requirements_txt="chai@4.3.10\n",
    )
    report = import_rows("resq", [row], settings=settings, repo_dir=repos, validate=False, out=tmp_path / "suite")
    task = TaskSet(report.out).get("0_0")
    assert task.environment == "node-20" and task.metadata.language == "javascript"
    assert task.check.runner == "command" and task.check.command == "node resq_test_script.js"
    assert task.check.hidden_tests == {"resq_test_script.js": "hidden/resq_test_script.js"}
    assert task.install == "npm install --no-save --ignore-scripts --no-audit --no-fund chai@4.3.10"
    assert task.public_view()["decided_by"] == "exit status"


def test_a_multi_swe_bench_row_reads_as_a_swe_bench_row():
    from grader.importers.swebench import multi_swe_bench

    row = {
        "org": "acme",
        "repo": "calc",
        "number": 7,
        "base": {"label": "acme:main", "ref": "main", "sha": "a" * 40},
        "fix_patch": "diff --git a/x b/x\n",
        "test_patch": "diff --git a/t b/t\n",
        "title": "mean of nothing",
        "body": "It divides by zero.",
        "f2p_tests": {"TestMeanEmpty": {"run": "NONE", "test": "FAIL", "fix": "PASS"}},
        "p2p_tests": {"TestMean": {"run": "PASS", "test": "PASS", "fix": "PASS"}},
        "lang": "go",
    }
    out = multi_swe_bench(row)
    assert (out["repo"], out["base_commit"], out["instance_id"]) == ("acme/calc", "a" * 40, "acme__calc-7")
    assert out["patch"] == row["fix_patch"] and out["problem_statement"] == "mean of nothing\n\nIt divides by zero."
    assert (out["FAIL_TO_PASS"], out["PASS_TO_PASS"], out["language"]) == (["TestMeanEmpty"], ["TestMean"], "go")
    swe = {"instance_id": "x", "repo": "a/b", "patch": "p"}
    assert multi_swe_bench(swe) is swe


def test_a_row_with_an_unknown_log_parser_is_refused(tmp_path, environments):
    from grader.importers.swebench import EnvSpec, test_check

    spec = EnvSpec(python=None, language="javascript", runner="karma")
    with pytest.raises(DatasetError, match="unknown runner \\(log parser\\) 'karma'"):
        test_check(spec, ["test/a.js"], ["test/a.js::a"], [], [])
    with pytest.raises(DatasetError, match="a javascript instance needs a runner"):
        test_check(EnvSpec(python=None, language="javascript"), ["test/a.js"], ["test/a.js::a"], [], [])
