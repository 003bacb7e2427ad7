"""A command run with sh. If it runs pytest, pytest loads the report plugin too (through
PYTEST_ADDOPTS) and runs the canaries: its signed report then decides, as for the pytest
runner; a command that runs no pytest is decided by its JUnit file, or its exit status
alone (the task's public view says which)."""

from __future__ import annotations

import base64
from typing import Any

from .. import canaries as canary
from ..channel import Channel, plugin_settings, write_plugin
from ..order import CheckSpec, Order
from ..proc import remaining, run_as_user, text
from ..tree import Tree
from .common import (
    PYTHON_CONFIG_FILES,
    PYTHON_PROTECT,
    canary_fields,
    finish_run,
    hidden_python_tests,
    python_env,
    read_files,
    test_file,
)

# the command's pytest reads its configuration from the repository as it is: protected
PROTECT = {**PYTHON_PROTECT, "names": PYTHON_PROTECT["names"] + PYTHON_CONFIG_FILES}

TESTS = True
COMMAND = "required"


def plan(check: dict[str, Any], hidden: dict[str, str | None]) -> CheckSpec:
    listed = list(check.get("fail_to_pass") or []) + list(check.get("pass_to_pass") or [])
    return CheckSpec(
        kind="command",
        command=check["command"],
        junit=check.get("junit"),
        **canary_fields(check, hidden_python_tests(hidden), {test_file(t) for t in listed}, listed),
    )


def make_canaries(order: Order, tree: Tree) -> dict[str, Any] | None:
    return canary.make_canaries(order.check, tree)


def run(order: Order, tree: Tree, result: dict[str, Any], canaries: dict[str, Any] | None) -> None:
    """A `runner: command` check. If the command runs pytest, pytest loads the report
    plugin too (through PYTEST_ADDOPTS) and runs the canaries: its signed report then
    decides, as for the pytest runner; a command that runs no pytest is decided by its
    JUnit file, or its exit status alone (the task's public view says which)."""
    check = order.check
    if check.command is None:
        raise ValueError("a command check needs its command")
    plugin_dir, module = write_plugin(order)
    channel = Channel(order, plugin_settings(order, canaries))
    addopts = ["-p", "no:cacheprovider", "-p", module]
    if canaries and "expect" in canaries:
        addopts.append(canaries["path"])
    env = {**python_env(order), "PYTEST_ADDOPTS": " ".join(addopts), "PYTHONPATH": plugin_dir, **channel.env()}
    try:
        run = run_as_user(
            order,
            ["sh", "-c", check.command],
            timeout=remaining(order),
            stdout_limit=order.output_limit,
            pass_fds=channel.fds(),
            env=env,
        )
    finally:
        channel.close()
    finish_run(result, run)
    result["output"] = text(run["out"].data())
    rep = channel.read(canaries)
    if rep.get("sessions") or rep.get("forged") or rep.get("problem"):
        result["report"] = rep
    if check.junit:
        junit = read_files(tree, [check.junit], order.report_limit).get(check.junit)
        result["junit"] = text(base64.b64decode(junit)) if junit else None
