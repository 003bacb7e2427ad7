"""jest: the repository's own jest (node_modules/jest), one process in band (-i: the tests
run in the process whose signed reporter, grader/box/reporters/node/jest-reporter.cjs, jest
loads before any test; no worker's IPC to forge), configured by an inline JSON --config so
that no jest.config.* (JavaScript) or package.json key runs or counts. The task's jest
options go in `args`. Ids are `<test file>::<describe > ... > it>`. A file that fails to
load or whose run errs (jest's testExecError) counts its tests failed, never passed."""

from __future__ import annotations

import json
from typing import Any

from ..order import CheckSpec, Order
from ..tree import Tree
from . import nodejs

PROTECT = nodejs.NODE_PROTECT
TESTS = True
COMMAND = "optional"  # a build step run before the tests (tsc, say); the tests decide
DECIDED_BY = "test report"
ID_STYLE = nodejs.ID_STYLE  # listed ids may be written as other benchmarks write them
LABEL = "jest"
# jest's own statuses: 0 every test passed, 1 a test (or a file) failed
EXIT_PASSED, EXIT_FAILED = 0, 1
EXIT_MEANING: dict[int, str] = {}

# jest options the runner sets itself, or that would load repository code (a setup file, a
# transform, an environment, a resolver, a runner) or run in other processes
REFUSED = (
    "--config",
    "-c",
    "--reporters",
    "--setupFiles",
    "--setupFilesAfterEnv",
    "--globalSetup",
    "--globalTeardown",
    "--testRunner",
    "--runner",
    "--resolver",
    "--transform",
    "--testEnvironment",
    "--env",
    "--projects",
    "--selectProjects",
    "--rootDir",
    "--watch",
    "--watchAll",
    "--json",
    "--outputFile",
    "--testResultsProcessor",
    "--snapshotResolver",
    "--moduleNameMapper",
    "--maxWorkers",
    "-w",
    "--runInBand",
    "--shard",
    "--cacheDirectory",
    "--haste",
    "--listTests",
    "--showConfig",
    "--init",
)
# options that stop the run early or select tests: no canaries with them
BLOCKERS = (
    "-t",
    "--testNamePattern",
    "-b",
    "--bail",
    "-o",
    "--onlyChanged",
    "-f",
    "--onlyFailures",
    "--findRelatedTests",
    "--testPathPattern",
    "--changedSince",
    "--lastCommit",
)
JEST_BINS = ("node_modules/jest/bin/jest.js", "node_modules/jest-cli/bin/jest.js")
CACHE = "/tmp/.grader-jest-cache"

listed_files = nodejs.listed_files


def plan(check: dict[str, Any], hidden: dict[str, str | None]) -> CheckSpec:
    return nodejs.plan_check("jest", check, hidden, REFUSED)


def make_canaries(order: Order, tree: Tree) -> dict[str, Any] | None:
    return nodejs.make_canaries(order, tree, "jest", BLOCKERS, per_unit=False)


def config(order: Order, reporters: str) -> dict[str, Any]:
    """The whole configuration, inline: node's environment, no transform (no babel config
    of the repository is read), the signed reporter beside jest's default one."""
    return {
        "rootDir": order.repo,
        "testEnvironment": "node",
        "transform": {},
        "reporters": ["default", f"{reporters}/jest-reporter.cjs"],
        "cacheDirectory": CACHE,
        "watchman": False,
        "testMatch": ["**/*"],
        "testPathIgnorePatterns": ["/node_modules/"],
    }


def run(order: Order, tree: Tree, result: dict[str, Any], canaries: dict[str, Any] | None) -> None:
    check = order.check
    jest = next((b for b in JEST_BINS if tree.lstat(b) is not None), None)
    if jest is None:
        raise ValueError(
            "jest is not installed in the repository (node_modules/jest): the task's install must bring it"
        )
    reporters = nodejs.reporter_dir()
    prelude, made = nodejs.prepare(order, tree, result, canaries)
    extra = [canaries["path"]] if canaries and "expect" in canaries else []
    argv = [
        "node",
        jest,
        "--ci",
        "-i",
        "--no-cache",
        "--config",
        json.dumps(config(order, reporters)),
        *(check.args or []),
        "--runTestsByPath",
        *extra,
        *check.paths,
    ]
    nodejs.run_units(
        order, tree, result, canaries, [("jest", list(check.paths), argv)], "jest", prelude=prelude, extra_sealed=made
    )
