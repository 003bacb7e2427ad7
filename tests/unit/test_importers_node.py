"""JavaScript and TypeScript rows that name nothing of their environment (SWE-bench
Multilingual, Multi-SWE-bench, RES-Q's JavaScript rows): what grader/importers/node.py reads
from the repository at the base commit (the language, the install, the runner, the test
files), and the clear refusal of a row it cannot complete. No Docker: the import without
validation (tests/docker/test_importers_node_docker.py validates real ones)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader.config import get_settings
from grader.importers import import_rows, node
from grader.importers.common import DatasetError
from grader.tasks.loader import TaskSet
from helpers import js_repos as js
from helpers.importer_repos import resq_row

LOCK = '{"name": "x", "lockfileVersion": 3, "packages": {}}\n'


@pytest.fixture
def environments(tmp_path) -> Path:
    d = tmp_path / "environments"
    for name in ("python-3.11", "node-18", "node-20"):
        (d / name).mkdir(parents=True)
        (d / name / "Dockerfile").write_text("FROM scratch\n")
    return d


def imported(tmp_path: Path, environments: Path, rows: list[dict], **kwargs):
    settings = get_settings(tasks_dir=tmp_path / "tasks", environments_dir=environments, cache_dir=tmp_path / "cache")
    report = import_rows(
        "swebench",
        rows,
        settings=settings,
        repo_dir=tmp_path / "clones",
        validate=False,
        out=tmp_path / "suite",
        **kwargs,
    )
    return report, TaskSet(report.out)


def test_a_jest_row_with_nothing_of_its_environment_is_completed_from_its_repository(tmp_path, environments):
    repo = js.make_stats(tmp_path / "clones", lock_file=LOCK)
    report, tasks = imported(tmp_path, environments, [js.row(repo, "acme__stats-1", js.STATS_F2P, js.STATS_P2P)])
    task = tasks.get("acme__stats-1")
    assert task.environment == "node-20" and task.metadata.language == "javascript"
    assert task.install == "npm ci --ignore-scripts --no-audit --no-fund"
    assert task.check.runner == "jest" and task.check.paths == ["test/median.test.js"]
    assert task.check.fail_to_pass == js.STATS_F2P and task.check.pass_to_pass == js.STATS_P2P
    assert task.public_view()["decided_by"] == "test report"
    assert report.outcomes[0].notes == []


def test_a_typescript_vitest_row_takes_its_log_parser_and_drops_its_test_command(tmp_path, environments):
    repo = js.make_geo(tmp_path / "clones", lock_file=None)
    row = js.row(repo, "acme__geo-1", js.GEO_F2P, js.GEO_P2P, log_parser="parse_log_vitest", test_cmd="npx vitest run")
    report, tasks = imported(tmp_path, environments, [row])
    task = tasks.get("acme__geo-1")
    assert task.metadata.language == "typescript" and task.environment == "node-20"
    assert task.install == "npm install --ignore-scripts --no-audit --no-fund"  # no lock file
    assert task.check.runner == "vitest" and task.check.paths == ["src/midpoint.test.ts"]
    assert task.check.command is None
    assert any("test_cmd is not used" in n for n in report.outcomes[0].notes)


@pytest.mark.parametrize(
    "package, lock_name, lock_text, install",
    [
        ({}, "yarn.lock", "# yarn lockfile v1\n", "npx --yes yarn@1.22.22 install --frozen-lockfile"),
        ({"packageManager": "yarn@1.22.19+sha1.abc"}, "yarn.lock", "# yarn lockfile v1\n", "yarn@1.22.19 install"),
        ({}, "pnpm-lock.yaml", "lockfileVersion: '6.0'\n", "npx --yes pnpm@8.15.9 install --frozen-lockfile"),
        ({}, "pnpm-lock.yaml", "lockfileVersion: '9.0'\n", "pnpm@9.15.9 install"),
        ({"packageManager": "pnpm@8.6.12"}, "pnpm-lock.yaml", "lockfileVersion: '6.0'\n", "pnpm@8.6.12 install"),
        ({}, "npm-shrinkwrap.json", LOCK, "npm ci --ignore-scripts"),
    ],
)
def test_the_install_follows_the_lock_file(package, lock_name, lock_text, install):
    repo = node.NodeRepo(package=package, lock=lock_name, lock_text=lock_text, typescript=False)
    got = node.install(repo, "row")
    assert install in got and "--ignore-scripts" in got


def test_a_lock_file_that_cannot_be_installed_so_names_what_to_give():
    berry = node.NodeRepo(package={}, lock="yarn.lock", lock_text="__metadata:\n  version: 6\n", typescript=False)
    with pytest.raises(DatasetError, match="yarn 2\\+.*--env-map: install"):
        node.install(berry, "row")
    odd = node.NodeRepo(package={}, lock="pnpm-lock.yaml", lock_text="lockfileVersion: 42\n", typescript=False)
    with pytest.raises(DatasetError, match="give install"):
        node.install(odd, "row")


@pytest.mark.parametrize(
    "package, test_cmd, runner",
    [
        ({"scripts": {"test": "jest --coverage"}}, None, "jest"),
        ({"scripts": {"test": "vitest run"}, "devDependencies": {"jest": "29"}}, None, "vitest"),
        ({"scripts": {"test": "npm run lint && mocha test/"}}, None, "mocha"),
        ({"scripts": {"test": "node --test test/"}}, None, "node-test"),
        ({"scripts": {"test": "tape test/*.js"}}, None, "tap"),
        ({"devDependencies": {"ts-jest": "29", "typescript": "5"}}, None, "jest"),
        ({"devDependencies": {"vitest": "3"}}, None, "vitest"),
        ({"scripts": {"test": "npm run build && echo ok"}, "devDependencies": {"mocha": "10"}}, None, "mocha"),
        ({"devDependencies": {"jest": "29", "vitest": "3"}}, "npx jest --ci", "jest"),
    ],
)
def test_the_runner_comes_from_the_test_command_the_test_script_or_the_dependencies(package, test_cmd, runner):
    repo = node.NodeRepo(package=package, lock=None, lock_text="", typescript=False)
    assert node.infer_runner(repo, test_cmd, "row") == runner


@pytest.mark.parametrize(
    "package, message",
    [
        ({"scripts": {"test": "karma start"}}, "under karma.*give runner"),
        ({"devDependencies": {"jest": "29", "mocha": "10"}}, "several test runners \\(jest, mocha\\).*give runner"),
        ({"scripts": {"test": "make check"}}, "no test runner found.*give runner"),
    ],
)
def test_a_runner_that_cannot_be_told_names_what_to_give(package, message):
    repo = node.NodeRepo(package=package, lock=None, lock_text="", typescript=False)
    with pytest.raises(DatasetError, match=message):
        node.infer_runner(repo, None, "row")


@pytest.mark.parametrize(
    "parser, runner",
    [
        ("parse_log_jest", "jest"),
        ("jest_json", "jest"),
        ("vitest", "vitest"),
        ("parse_log_mocha_v2", "mocha"),
        ("tap", "tap"),
        ("node", "node-test"),
    ],
)
def test_log_parsers_as_the_benchmarks_name_them(parser, runner):
    assert node.parser_runner(parser, "row") == runner


def test_a_log_parser_of_a_runner_the_grader_lacks_is_refused():
    with pytest.raises(DatasetError, match="karma.*give runner"):
        node.parser_runner("parse_log_karma", "row")


def test_only_test_files_of_the_test_patch_run():
    files = [
        "test/median.test.js",
        "test/fixtures/data.js",
        "test/helpers/make.js",
        "src/__snapshots__/a.test.ts.snap",
        "src/a.spec.ts",
        "src/__tests__/b.ts",
        "test/parse.js",
        "types/index.d.ts",
        "test/data.json",
        "src/__mocks__/fs.js",
    ]
    assert node.test_files(files, "jest") == ["test/median.test.js", "src/a.spec.ts", "src/__tests__/b.ts"]
    assert node.test_files(files, "mocha") == [
        "test/median.test.js",
        "src/a.spec.ts",
        "src/__tests__/b.ts",
        "test/parse.js",
    ]


def test_a_row_that_is_no_package_keeps_asking_for_its_environment(tmp_path, environments):
    repo = js.make_stats(tmp_path / "clones", lock_file=LOCK)
    (repo.path / "package.json").unlink()
    from helpers.importer_repos import commit

    base = commit(repo.path, "no package", "2024-03-03T00:00:00Z")
    row = js.row(repo, "acme__stats-2", js.STATS_F2P, [], base_commit=base)
    with pytest.raises(DatasetError, match="no environment: give the instance the fields python"):
        imported(tmp_path, environments, [row])


def test_a_row_whose_test_patch_has_no_test_file_names_it(tmp_path, environments):
    repo = js.make_stats(tmp_path / "clones", lock_file=LOCK)
    fixture = (
        "diff --git a/test/fixtures/x.js b/test/fixtures/x.js\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/test/fixtures/x.js\n@@ -0,0 +1 @@\n+module.exports = 1;\n"
    )
    with pytest.raises(DatasetError, match="no JavaScript/TypeScript test file"):
        imported(tmp_path, environments, [js.row(repo, "acme__stats-3", js.STATS_F2P, [], test_patch=fixture)])


def test_the_env_map_still_decides_what_it_gives(tmp_path, environments):
    repo = js.make_stats(tmp_path / "clones", lock_file=LOCK)
    env_map = {
        "acme/stats": {"language": "javascript", "language_version": "18", "install": "npm ci", "runner": "jest"}
    }
    _, tasks = imported(tmp_path, environments, [js.row(repo, "acme__stats-4", js.STATS_F2P, [])], env_map=env_map)
    task = tasks.get("acme__stats-4")
    assert task.environment == "node-18" and task.install == "npm ci" and task.check.runner == "jest"


def test_a_resq_javascript_row_without_a_testbed_gets_the_newest_node_and_its_lock_files_install(
    tmp_path, environments
):
    repo = js.make_js_repo(
        tmp_path / "clones",
        "acme/stats",
        js.STATS_PACKAGE,
        {**js.STATS_BASE, "yarn.lock": "# yarn lockfile v1\n"},
        js.STATS_FIX_SRC,
        js.STATS_FIX_TESTS,
    )
    calc = type("R", (), {"base": repo.base, "fix": repo.fix, "gold": repo.gold})()
    row = resq_row(
        calc,
        repo_url="https://github.com/acme/stats",
        language="JavaScript",
        testbed_environment=None,
        requirements_txt="",
        test_script="const assert = require('assert');\nassert.ok(true);\n",
        modified_files=[],
        solution_commit=None,
    )
    settings = get_settings(tasks_dir=tmp_path / "tasks", environments_dir=environments, cache_dir=tmp_path / "cache")
    report = import_rows(
        "resq", [row], settings=settings, repo_dir=tmp_path / "clones", validate=False, out=tmp_path / "r"
    )
    assert report.outcomes[0].problems == [] and report.outcomes[0].kept, report.as_dict()
    task = TaskSet(report.out).get("0_0")
    assert task.environment == "node-20"
    assert task.install.startswith("npx --yes yarn@1.22.22 install --frozen-lockfile --ignore-scripts")
    assert json.loads((repo.path / "package.json").read_text())["name"] == "acme-stats"
