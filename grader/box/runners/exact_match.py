"""An exact-match check: nothing runs; the named files are read back (without following a
link) for the host to compare with the expected contents."""

from __future__ import annotations

from typing import Any

from ..order import CheckSpec, Order
from ..tree import Tree
from .common import PYTHON_PROTECT, read_files

PROTECT = PYTHON_PROTECT


def plan(check: dict[str, Any], hidden: dict[str, str | None]) -> CheckSpec:
    files = check.get("files") or {}
    return CheckSpec(kind="exact_match", paths=sorted(files) if files else sorted(check.get("paths") or []))


def run(order: Order, tree: Tree, result: dict[str, Any], canaries: dict[str, Any] | None) -> None:
    result["files"] = read_files(tree, order.check.paths, order.report_limit)
