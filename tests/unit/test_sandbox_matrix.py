"""Which sandbox providers the attack files grade under (tests/docker/conftest.py,
tests/README.md "The attack files and the sandbox providers"), read from pytest's own
collection of the Docker tier's files: collecting runs no fixture, so no Docker is needed."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from collections import defaultdict

import pytest

from helpers import ROOT

FILES = [
    "tests/docker/test_attacks_java.py",
    "tests/docker/test_attacks_rust.py",
    "tests/docker/test_attacks_go.py",
    "tests/docker/test_attacks_c.py",
    "tests/docker/test_attacks_node.py",
    "tests/docker/test_attacks_node_configured.py",
    "tests/docker/test_attacks_python_unittest.py",
    "tests/docker/test_attacks.py",
    "tests/docker/test_attacks_round2.py",
]
SANDBOXES = {"runc", "runsc", "pool"}
# what the marker may never cover: a grade that must pass or fail honestly, and a hang
NEVER_ALONE = re.compile(r"_(gold|honest|empty|hangs?)_")


def collected(every: bool) -> dict[str, set[str]]:
    """test (its file and name, the other params left out) -> the providers it is collected for."""
    env = {k: v for k, v in os.environ.items() if k != "GRADER_TEST_EVERY_SANDBOX"}
    if every:
        env["GRADER_TEST_EVERY_SANDBOX"] = "1"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *FILES],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    tests: dict[str, set[str]] = defaultdict(set)
    for line in run.stdout.splitlines():
        if "::" not in line:
            continue
        name, _, params = line.partition("[")
        parts = set(params.rstrip("]").split("-")) if params else set()
        tests[name] |= parts & SANDBOXES or {"(none)"}
    assert tests, run.stdout[-3000:]
    return tests


def marked_with(marker: str) -> set[str]:
    """The tests with `marker`, read from their source, as `file::name` (the Node.js files'
    tests are tests/helpers/node_attacks.py's)."""
    names = set()
    for f in FILES:
        source = (ROOT / ("tests/helpers/node_attacks.py" if "node" in f else f)).read_text()
        found = re.findall(rf"@pytest\.mark\.{marker}\n(?:@.*\n)*def (\w+)\(", source)
        names |= {f"{f}::{name}" for name in found}
    assert names, marker
    return names


@pytest.fixture(scope="module")
def marked() -> set[str]:
    """The tests marked same_in_every_sandbox or same_on_every_kernel."""
    return marked_with("same_in_every_sandbox") | marked_with("same_on_every_kernel")


def test_a_marked_test_is_graded_under_runc_alone_and_every_other_under_all_three():
    """same_in_every_sandbox: runc alone; same_on_every_kernel (the pytest files' tricks inside
    pytest's own process): runc and the pool; every other test: all three."""
    alone, inside = marked_with("same_in_every_sandbox"), marked_with("same_on_every_kernel")
    assert not alone & inside
    tests = collected(every=False)
    for name, providers in tests.items():
        if providers == {"(none)"}:
            continue  # a test without a grader (the Go canaries built in the go image)
        want = {"runc"} if name in alone else {"runc", "pool"} if name in inside else SANDBOXES
        assert providers == want, (name, providers)
    assert {name for name, p in tests.items() if p == {"runc"}} == alone
    assert {name for name, p in tests.items() if p == {"runc", "pool"}} == inside


def test_every_sandbox_on_demand_grades_every_attack_under_all_three():
    tests = collected(every=True)
    assert all(p in (SANDBOXES, {"(none)"}) for p in tests.values()), tests


def test_no_honest_gold_empty_or_hang_grade_is_marked(marked):
    """By the test's name, and by what it grades: a task's gold patch or the empty patch."""
    assert not [name for name in marked if NEVER_ALONE.search(name + "_")], marked
    for f in [*FILES, "tests/helpers/node_attacks.py"]:
        for node in ast.parse((ROOT / f).read_text()).body:
            if not isinstance(node, ast.FunctionDef) or not any(
                marker in ast.unparse(d)
                for d in node.decorator_list
                for marker in ("same_in_every_sandbox", "same_on_every_kernel")
            ):
                continue
            body = ast.unparse(node)
            grades = "gold_patch_text(" in body or ", b'')" in body or ", b''," in body
            assert not grades, f"{f}::{node.name} grades a gold or empty patch"
