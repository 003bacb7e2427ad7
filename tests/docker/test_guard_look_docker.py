"""benchmarks/guard_look.py run for real, under runc and gVisor: the Node guard's kept look
(node_guard.Scanner) finds what a full walk finds inside a real grading container, after
plain writes and after a package.json and a node_modules/ made in directories the last
look kept (the script fails if the two ever differ). What it asserts is how the benchmark
behaves, never a figure's size."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from helpers import ROOT

SCRIPT = ROOT / "benchmarks" / "guard_look.py"


@pytest.mark.docker
def test_the_kept_look_finds_what_a_walk_finds_in_a_grading_container_under_each_runtime():
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--dirs", "40", "--files", "2", "--rounds", "10"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    lines = {
        m.group(1): m
        for m in re.finditer(r"^(runc|runsc)\s+(\d+) directories: .*\((\d+) listed again\)", run.stdout, re.M)
    }
    assert sorted(lines) == ["runc", "runsc"], run.stdout
    for m in lines.values():
        assert 1 <= int(m.group(3)) < int(m.group(2)), m.group(0)  # some listed again, never all
