"""benchmarks/container_cost.py run for real: it measures a container's life in the shape the
sandbox gives a grade, beside the same container on the host's network and the kernel's own
namespaces, in one run. What it asserts is that it measured, never a figure."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import ROOT

SCRIPT = ROOT / "benchmarks" / "container_cost.py"


@pytest.mark.docker
def test_the_benchmark_measures_a_grading_containers_life(tmp_path):
    out = tmp_path / "cost.json"
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--rounds", "2", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    figures = json.loads(out.read_text())
    names = ["as a grade's (--network=none)", "on the host's network (comparison only)", "the kernel alone (unshare)"]
    assert all(figures[name] > 0 for name in names), figures
    assert "the network namespace Docker makes" in run.stdout
