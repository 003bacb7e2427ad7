"""A burst through the whole service graded in containers, CI-sized: benchmarks/load.py
with real Docker grading. The counts must reconcile exactly; the figures it prints are for
reading, never asserted. The bursts graded without containers, and the fairness and
throughput benchmarks, are tests/service/test_load.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import ROOT

pytestmark = pytest.mark.service


@pytest.mark.docker
def test_a_burst_graded_in_containers_reconciles():
    """The same through real grades: every patch is the gold patch plus a file of its own."""
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "load.py"),
            "--count",
            "60",
            "--baseline",
            "5",
            "--batch",
            "25",
            "--containers",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    print(run.stdout)
    assert run.returncode == 0, run.stdout + run.stderr
    figures = json.loads((ROOT / "benchmarks" / "out" / "load-containers.json").read_text())
    assert figures["accepted"] == figures["in_database"] == figures["done"] == 60
    assert figures["lost"] == 0 and figures["verdicts"] == {"PASS": 60}
