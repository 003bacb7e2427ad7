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


@pytest.fixture(scope="module")
def marked() -> set[str]:
    """The tests marked same_in_every_sandbox, read from their source, as `file::name` (the
    Node.js files' tests are tests/helpers/node_attacks.py's)."""
    names = set()
    for f in FILES:
        source = (ROOT / ("tests/helpers/node_attacks.py" if "node" in f else f)).read_text()
        found = re.findall(r"@pytest\.mark\.same_in_every_sandbox\n(?:@.*\n)*def (\w+)\(", source)
        names |= {f"{f}::{name}" for name in found}
    assert names
    return names


def test_a_marked_test_is_graded_under_runc_alone_and_every_other_under_all_three(marked):
    tests = collected(every=False)
    for name, providers in tests.items():
        if providers == {"(none)"}:
            continue  # a test without a grader (the Go canaries built in the go image)
        assert providers == ({"runc"} if name in marked else SANDBOXES), (name, providers)
    assert {name for name, p in tests.items() if p == {"runc"}} == marked


def test_every_sandbox_on_demand_grades_every_attack_under_all_three():
    tests = collected(every=True)
    assert all(p in (SANDBOXES, {"(none)"}) for p in tests.values()), tests


def test_no_honest_gold_empty_or_hang_grade_is_marked(marked):
    """By the test's name, and by what it grades: a task's gold patch or the empty patch."""
    assert not [name for name in marked if NEVER_ALONE.search(name + "_")], marked
    for f in [*FILES, "tests/helpers/node_attacks.py"]:
        for node in ast.parse((ROOT / f).read_text()).body:
            if not isinstance(node, ast.FunctionDef) or not any(
                "same_in_every_sandbox" in ast.unparse(d) for d in node.decorator_list
            ):
                continue
            body = ast.unparse(node)
            grades = "gold_patch_text(" in body or ", b'')" in body or ", b''," in body
            assert not grades, f"{f}::{node.name} grades a gold or empty patch"
