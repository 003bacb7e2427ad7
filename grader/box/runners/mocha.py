"""mocha: the repository's own mocha (node_modules/mocha), one process per test file,
serial, with --no-config --no-package (no .mocharc* or package.json key can --require code
before the reporter) and the signed reporter (grader/box/reporters/node/mocha-reporter.cjs)
required by mocha while it reads its arguments, before any test file. The task's mocha
options go in `args`. Ids are `<test file>::<describe > ... > it>`. A file that fails to
load or crashes counts its tests failed, never passed (nodejs.settle); one process per file
keeps a file that throws while loading (mocha then runs nothing) from costing the others."""

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
LABEL = "mocha"
# 0 when every test file's process exited 0 (or failed only by its canaries), else 1; a
# file's own mocha exits with its number of failures
EXIT_PASSED, EXIT_FAILED = 0, 1
EXIT_MEANING: dict[int, str] = {}

# mocha options the runner sets itself, or that would load code before its reporter, run in
# other processes or watch; node's own options (mocha passes them on to a node it spawns)
REFUSED = nodejs.NODE_REFUSED + (
    "--config",
    "--package",
    "--reporter",
    "-R",
    "--reporter-option",
    "--reporter-options",
    "-O",
    "--parallel",
    "--orders",
    "-j",
    "--file",
    "--node-option",
    "-n",
    "--watch",
    "-w",
    "--watch-files",
    "--watch-ignore",
    "--spec",
    "--list-reporters",
    "--list-interfaces",
    "--dry-run",
)
# options that stop the run early or select tests by name: no canaries with them
BLOCKERS = ("--grep", "-g", "--fgrep", "-f", "--invert", "-i", "--bail", "-b")
MOCHA_BINS = ("node_modules/mocha/bin/mocha.js", "node_modules/mocha/bin/mocha", "node_modules/mocha/bin/_mocha")

listed_files = nodejs.listed_files


def plan(check: dict[str, Any], hidden: dict[str, str | None]) -> CheckSpec:
    return nodejs.plan_check("mocha", check, hidden, REFUSED)


def make_canaries(order: Order, tree: Tree) -> dict[str, Any] | None:
    return nodejs.make_canaries(order, tree, "mocha", BLOCKERS, per_unit=True)


def run(order: Order, tree: Tree, result: dict[str, Any], canaries: dict[str, Any] | None) -> None:
    check = order.check
    mocha = next((b for b in MOCHA_BINS if tree.lstat(b) is not None), None)
    if mocha is None:
        raise ValueError(
            "mocha is not installed in the repository (node_modules/mocha): the task's install must bring it"
        )
    reporters = nodejs.reporter_dir()
    prelude, made, guard = nodejs.prepare(order, tree, result, canaries)
    extra = [canaries["path"]] if canaries and "expect" in canaries else []
    base = ["node", mocha, "--no-config", "--no-package", "--reporter", f"{reporters}/mocha-reporter.cjs"]
    commands = [(path, [path], [*base, *(check.args or []), *extra, path]) for path in check.paths]
    nodejs.run_units(
        order, tree, result, canaries, commands, "mocha", guard, by_count=True, prelude=prelude, extra_sealed=made
    )
