"""benchmarks/container_cost.py run for real: it measures a container's life in the shape the
sandbox gives a grade (in a network lane), beside the same container with a namespace of its
own, on the host's network, the kernel's own namespaces, and a run's namespaces made inside a
long-lived container (the floor of a sandbox without a container per run), in one run, or refuses a
measurement the machine's other work spoiled. What it asserts is how the benchmark behaves,
never a figure's size."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import ROOT

SCRIPT = ROOT / "benchmarks" / "container_cost.py"


@pytest.mark.docker
def test_the_benchmark_measures_a_grading_containers_life_or_refuses_to(tmp_path):
    """It measures the whole machine's CPU, so the tier's other workers weigh on it: a figure
    at or below the machine's idle CPU then makes it refuse (exit 2, a message, no figure, no
    file), which is what it must do rather than print one. Either way it never crashes and
    never prints a figure that is not above zero."""
    out = tmp_path / "cost.json"
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--rounds", "2", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    names = [
        "as a grade's (in a network lane)",
        "a namespace of its own (--network=none)",
        "on the host's network (comparison only)",
        "the kernel alone (unshare)",
        "a run's namespaces in a long-lived container",
    ]
    if run.returncode == 2:
        assert "broken measurement" in run.stderr and "ms of the machine's CPU" not in run.stdout
        assert not out.exists()
        return
    assert run.returncode == 0, run.stdout + run.stderr
    figures = json.loads(out.read_text())
    assert all(figures[name] > 0 for name in names), figures
    assert all(name in run.stdout for name in names) and "the network namespace Docker makes" in run.stdout
    assert "a network lane instead of it" in run.stdout
    assert "instead of a container per run" in run.stdout
