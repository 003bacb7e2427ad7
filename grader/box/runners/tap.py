"""tap: tape test files (and TAP producers built on tape), one node process per test file
with the signed tape preload (grader/box/reporters/node/tape-preload.cjs) loaded by -r
before the test file. Ids are `<test file>::<test name>`, subtests `<parent> > <child>`;
outcomes come only from the preload's signed records, never from the TAP text. A file
that fails to load or crashes counts its tests failed, never passed (nodejs.settle)."""

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
LABEL = "tape"
# the check's status: 0 when every test file's process exited 0 (or failed only by its
# canaries), 1 otherwise (nodejs.fold); a file's own process exits 1 when a test failed
EXIT_PASSED, EXIT_FAILED = 0, 1
EXIT_MEANING: dict[int, str] = {}

listed_files = nodejs.listed_files


def plan(check: dict[str, Any], hidden: dict[str, str | None]) -> CheckSpec:
    """`paths`: the tape files, one process each (default: the hidden test files and the
    files the lists name); `args`: node's own options, before the file (no loaders)."""
    return nodejs.plan_check("tap", check, hidden, nodejs.NODE_REFUSED)


def make_canaries(order: Order, tree: Tree) -> dict[str, Any] | None:
    return nodejs.make_canaries(order, tree, "tape", (), per_unit=True)


def run(order: Order, tree: Tree, result: dict[str, Any], canaries: dict[str, Any] | None) -> None:
    check = order.check
    reporters = nodejs.reporter_dir()
    prelude, made, guard = nodejs.prepare(order, tree, result, canaries)
    commands = [
        (path, [path], ["node", *(check.args or []), "-r", f"{reporters}/tape-preload.cjs", path])
        for path in check.paths
    ]
    nodejs.run_units(order, tree, result, canaries, commands, "tape", guard, prelude=prelude, extra_sealed=made)
