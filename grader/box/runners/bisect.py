"""A bisect check: nothing runs; the answer file the submission's patch added is read
back (without following a link) for the host to match against the history's commits."""

from __future__ import annotations

from typing import Any

from ..order import CheckSpec, Order
from ..tree import Tree
from .common import PYTHON_PROTECT, read_files

PROTECT = PYTHON_PROTECT
# The file of the repository a bisect answer is written to, by a patch that adds it.
ANSWER_FILE = "BISECT_ANSWER"


def plan(check: dict[str, Any], hidden: dict[str, str | None]) -> CheckSpec:
    return CheckSpec(kind="bisect", paths=[ANSWER_FILE])


def run(order: Order, tree: Tree, result: dict[str, Any], canaries: dict[str, Any] | None) -> None:
    result["files"] = read_files(tree, order.check.paths, order.report_limit)
