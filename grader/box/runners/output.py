"""An output check: a command run with sh, its stdout (up to the report limit) sent back
whole for the host to compare; its stderr is the run's output."""

from __future__ import annotations

import base64
from typing import Any

from ..order import CheckSpec, Order
from ..proc import remaining, run_as_user, text
from ..tree import Tree
from .common import PYTHON_PROTECT, finish_run, python_env

PROTECT = PYTHON_PROTECT


def plan(check: dict[str, Any], hidden: dict[str, str | None]) -> CheckSpec:
    return CheckSpec(kind="output", command=check["command"])


def run(order: Order, tree: Tree, result: dict[str, Any], canaries: dict[str, Any] | None) -> None:
    check = order.check
    if check.command is None:
        raise ValueError("an output check needs its command")
    run = run_as_user(
        order,
        ["sh", "-c", check.command],
        timeout=remaining(order),
        stdout_limit=order.report_limit,
        separate_stderr=True,
        env=python_env(order),
    )
    finish_run(result, run)
    result["stdout"] = base64.b64encode(run["out"].data()).decode()
    result["stdout_complete"] = run["out"].complete()
    result["output"] = text(run["err"].data())
