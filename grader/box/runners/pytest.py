"""pytest: run by the supervisor itself with the base commit's configuration, entry-point
plugins off, the report plugin loaded under a name of this run only, and canaries cloned
into the hidden test modules (clones.py). Outcomes come only from the plugin's signed
records."""

from __future__ import annotations

import base64
from typing import Any

from .. import canaries as canary
from .. import clones
from ..channel import Channel, plugin_settings, write_plugin
from ..order import CheckSpec, Order
from ..proc import remaining, run_as_user, text
from ..tree import Tree
from .common import (
    PYTHON_PROTECT,
    canary_fields,
    finish_run,
    hidden_python_tests,
    python_env,
    test_file,
)

PROTECT = PYTHON_PROTECT
# pytest's exit statuses: 0 all passed, 1 some failed, 5 none collected.
EXIT_PASSED, EXIT_FAILED = 0, 1
EXIT_MEANING: dict[int, str] = {
    2: "interrupted, or a test file failed to import",
    3: "internal error",
    4: "usage error (a test path may be missing)",
    5: "no tests were collected",
}

TESTS = True
COMMAND = "none"
DECIDED_BY = "test report"


def plan(check: dict[str, Any], hidden: dict[str, str | None]) -> CheckSpec:
    """The order's check from the task's: pytest on `paths` (default: the hidden test modules
    and the files the lists name), with canaries beside the hidden tests."""
    listed = list(check.get("fail_to_pass") or []) + list(check.get("pass_to_pass") or [])
    modules = hidden_python_tests(hidden)
    named = {test_file(tid) for tid in listed}
    paths = list(check.get("paths") or []) or sorted(set(modules) | named)
    if not paths:
        raise ValueError("a pytest check needs paths or hidden test files")
    return CheckSpec(
        kind="pytest",
        args=[*(check.get("pytest_args") or []), *paths],
        plugins=list(check.get("plugins") or []),
        **canary_fields(check, modules, named, listed),
        # the canaries live inside the hidden test modules: clones of their tests
        canary_modules=modules,
        canary_targets=list(check.get("fail_to_pass") or []),
    )


PYTEST_CONFIGS = (  # in pytest's own order of preference, with the section it reads
    ("pytest.ini", None, ".ini"),
    (".pytest.ini", None, ".ini"),
    ("pyproject.toml", "[tool.pytest.ini_options]", ".toml"),
    ("tox.ini", "[pytest]", ".ini"),
    ("setup.cfg", "[tool:pytest]", ".cfg"),
)
TRUSTED_CONFIG = ".grader-pytest"


def base_pytest_config(tree: Tree) -> tuple[str, bytes]:
    """The configuration pytest would read at the base commit, saved before the patch so
    that a patched pytest.ini / setup.cfg / pyproject.toml cannot change how tests run."""
    for name, section, suffix in PYTEST_CONFIGS:
        data = tree.read(name)
        if data is not None and (section is None or section.encode() in data):
            return suffix, data
    return ".ini", b"[pytest]\n"


def before_patch(order: Order, tree: Tree) -> None:
    suffix, data = base_pytest_config(tree)
    order.pytest_config = (suffix, base64.b64encode(data).decode())


def make_canaries(order: Order, tree: Tree) -> dict[str, Any] | None:
    """Clones of the hidden tests inside their own modules, every test renamed for this
    run (clones.py); a task whose hidden tests offer no clone gets none."""
    check = order.check
    if not check.canaries or check.args is None:
        return None
    for arg in check.args:
        if canary.blocks_canaries(arg):
            return {"skipped": f"the task's pytest option {arg} could stop the run early or deselect them"}
    if not check.canary_modules:
        return canary.make_canaries(check, tree)
    return clones.make_clone_canaries(check, tree)


def fold_clones(result: dict[str, Any], rep: dict[str, Any], canaries: dict[str, Any]) -> None:
    """The report under the task's own test ids, the clones judged apart; and pytest's
    exit status as it would be without the clones, whose failures are by design (the
    supervisor knows them; the test process does not)."""
    outcomes, pairs, copies = clones.fold(rep.get("outcomes", {}), canaries)
    failing = [o for o in outcomes.values() if o in ("failed", "error")]
    # the twins fail by design; a copy fails only beside its original (or alone: tampering)
    clone_failed = any(c in ("failed", "error") for _, c in [*pairs, *copies])
    end = rep.get("end")
    if (
        clone_failed
        and not failing
        and not rep.get("collect_errors")
        and isinstance(end, dict)
        and end.get("exit") == EXIT_FAILED
        and result.get("exit_code") == EXIT_FAILED
    ):
        rep["end"] = dict(end, exit=EXIT_PASSED)
        result["exit_code"] = EXIT_PASSED
    rep["outcomes"] = outcomes
    canaries["got_pairs"] = pairs
    canaries["got_copies"] = copies
    output = clones.strip_clones(result.get("output", ""), canaries, [*pairs, *copies])
    result["output"] = clones.rename_in_text(output, canaries)


def run(order: Order, tree: Tree, result: dict[str, Any], canaries: dict[str, Any] | None) -> None:
    check = order.check
    if order.pytest_config is None or check.args is None:
        raise ValueError("a pytest check needs its arguments and the base commit's configuration")
    suffix, data = order.pytest_config
    cfg = TRUSTED_CONFIG + suffix
    tree.write(cfg, base64.b64decode(data), mode=0o444, owner=(0, 0))
    plugin_dir, module = write_plugin(order)
    channel = Channel(order, plugin_settings(order, canaries))
    args = list(check.args)
    if canaries and "expect" in canaries:
        args = [canaries["path"]] + args  # first: imported before any module of the submission's
    argv = [
        "python",
        "-m",
        "pytest",
        "-c",
        cfg,
        "--rootdir",
        order.repo,
        "-p",
        "no:cacheprovider",
        "-p",
        module,
        "-o",
        "console_output_style=classic",
        # Python's own tracebacks (the assertion's explanation included): pytest's long
        # style parses and walks the test's whole module again for every failing test, and
        # the clones fail by design (20 to 30 ms each in a module of 1,000 lines). A task's
        # pytest_args come after this and may ask for another style.
        "--tb=native",
    ]
    for plugin in check.plugins:
        argv += ["-p", plugin]
    env = {**python_env(order), "PYTHONPATH": plugin_dir, **channel.env()}
    try:
        run = run_as_user(
            order,
            argv + args,
            timeout=remaining(order),
            stdout_limit=order.output_limit,
            pass_fds=channel.fds(),
            env=env,
        )
    finally:
        channel.close()
    finish_run(result, run)
    result["output"] = text(run["out"].data())
    result["report"] = channel.read(canaries)
    if canaries and "pairs" in canaries:
        fold_clones(result, result["report"], canaries)
