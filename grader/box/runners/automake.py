"""automake: projects whose tests run with `make check` (automake's parallel test harness).
The tree is configured when the instance image is built (the task's `install` runs
./configure: autoconf's configure cannot run under gVisor, and needs nothing from the
submission). At grading time `make -k check` runs as the unprivileged user with every log
driver replaced by a root-owned recording driver (grader/box/reporters/c/am_record_driver.py):
it builds the library and the check programs and lists each test without running one. Then
the supervisor hands the tree to root and runs each test itself, as the unprivileged user, one
at a time, judged as automake's test-driver judges an exit status (grader/box/native.py).

Test ids are the names automake gives its tests (a `TESTS` entry), prefixed with their
directory when it is not the top one (`tests/test_foo`). No canaries: automake's programs are
linked through libtool, which leaves no link line to borrow (docs/runners/automake.md).
"""

from __future__ import annotations

import os
from typing import Any

from .. import native
from ..order import CheckSpec, Order
from ..proc import remaining
from ..signed import install_reporters
from ..tree import Tree
from .ctest import (  # noqa: F401 (EXIT_PASSED, EXIT_FAILED: the same exit-status rule as ctest's)
    C_TEST_MODULES,
    EXIT_FAILED,
    EXIT_PASSED,
    build_step,
    cut,
    parse_args,
    plan_check,
    restore_prepared,
    run_listed,
)
from .ctest import before_patch as _set_aside

# What defines or runs the tests in an automake project, the configured tree included (the
# Makefiles, config.status and libtool that configure wrote when the image was built): restored
# to the base whatever the patch did. A patch therefore cannot add a source file to a
# Makefile.am (docs/runners/automake.md).
PROTECT: dict[str, list[str]] = {
    "names": [
        "Makefile",
        "GNUmakefile",
        "makefile",
        "configure",
        "configure.ac",
        "configure.in",
        "config.status",
        "libtool",
        "ltmain.sh",
        "test-driver",
        "tap-driver.sh",
        "tap-driver.pl",
        "aclocal.m4",
    ],
    "suffixes": [".am", ".in", ".m4", ".mk"],
    "prefixes": [],
    "dir_suffixes": [],
    "test_modules": C_TEST_MODULES,
    "test_dir_names": ["tests", "test", "testing", "unittests"],
}
EXIT_MEANING: dict[int, str] = {4: "the tests could not be listed (make check listed none)"}
LABEL = "make check"

TESTS = True
COMMAND = "optional"
DECIDED_BY = "the exit status of each test process, run by the grader itself one at a time"


def plan(check: dict[str, Any], hidden: dict[str, str | None]) -> CheckSpec:
    """`command` (optional) runs first, as the unprivileged user; `args`: --build-dir (default
    the repository: an in-source build), --timeout, --make-arg; `paths` (optional): the test
    ids to run."""
    spec = plan_check("automake", check, hidden)
    spec.canaries = False
    return spec


def listed_files(ids: list[str]) -> list[str]:
    return []


def build_dir(order: Order) -> str | None:
    args = order.check.args or []
    return parse_args(args)["build_dir"] if any(a.startswith("--build-dir") for a in args) else None


def before_patch(order: Order, tree: Tree) -> None:
    """A separate build directory the image configured (a VPATH build) is set aside as ctest's
    is; an in-source build's generated files are protected by name."""
    if build_dir(order) is not None:
        _set_aside(order, tree)


def run(order: Order, tree: Tree, result: dict[str, Any], canaries: dict[str, Any] | None) -> None:
    opts = parse_args(order.check.args or [])
    rel = build_dir(order)
    if rel is not None:
        restore_prepared(order, tree, rel)
    build = os.path.join(order.repo, rel) if rel else order.repo
    opts["build_dir"] = rel or "."
    parts: list[str] = []
    try:
        if order.check.command and not build_step(order, order.check.command, result, parts):
            return
        driver = os.path.join(install_reporters("c"), "am_record_driver.py")

        def lister(env: dict[str, str]) -> list[native.Test]:
            tests, out, timed_out = native.list_automake(
                build, driver, order.uid, order.gid, dict(env, HOME="/tmp"), remaining(order), opts["make_args"]
            )
            parts.append(f"== make check (building and listing)\n{out[-64 * 1024 :].decode('utf-8', 'replace')}")
            if timed_out:
                result["timed_out"] = True
            return tests

        run_listed(order, result, None, parts, build=build, opts=opts, lister=lister, list_first=True)
    finally:
        result["output"] = cut(parts, order.output_limit)
