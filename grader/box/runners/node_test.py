"""node-test: node:test files, each run in process by its own `node` (no --test): the
preload (grader/box/reporters/node/node-test-preload.mjs) opens the signed channel and makes
the reporter node's first before the test file loads. Under `node --test` a test file's
child process could forge passes through node's child protocol on its stdout; in process
nobody reads the test's stdout. Ids are `<test file>::<describe > ... > test>`. A file that
fails to load or crashes counts its tests failed, never passed (nodejs.settle)."""

from __future__ import annotations

from typing import Any

from ..order import CheckSpec, Order
from ..tree import Tree
from . import nodejs

PROTECT = nodejs.NODE_PROTECT
TESTS = True
COMMAND = "optional"  # a build step run before the tests (tsc, say); the tests decide
DECIDED_BY = "test report"
ID_STYLE = nodejs.ID_STYLE  # listed ids may be written as other benchmarks write them
LABEL = "node:test"
# 0 when every test file's process exited 0 (or failed only by its canaries), else 1
EXIT_PASSED, EXIT_FAILED = 0, 1
EXIT_MEANING: dict[int, str] = {}

listed_files = nodejs.listed_files


def plan(check: dict[str, Any], hidden: dict[str, str | None]) -> CheckSpec:
    """`paths`: the test files, one process each; `args`: node's own options (no loaders,
    no --test flags: the runner sets the reporters)."""
    return nodejs.plan_check("node-test", check, hidden, nodejs.NODE_REFUSED)


def make_canaries(order: Order, tree: Tree) -> dict[str, Any] | None:
    return nodejs.make_canaries(order, tree, "node-test", (), per_unit=True)


def run(order: Order, tree: Tree, result: dict[str, Any], canaries: dict[str, Any] | None) -> None:
    check = order.check
    r = nodejs.reporter_dir()
    prelude, made, guard = nodejs.prepare(order, tree, result, canaries)
    flags = [
        "--import",
        f"{r}/node-test-preload.mjs",
        f"--test-reporter={r}/node-test-reporter.mjs",
        "--test-reporter-destination=stdout",
        "--test-reporter=spec",
        "--test-reporter-destination=stderr",
    ]
    commands = [(path, [path], ["node", *(check.args or []), *flags, path]) for path in check.paths]
    nodejs.run_units(order, tree, result, canaries, commands, "node:test", guard, prelude=prelude, extra_sealed=made)
