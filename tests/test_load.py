"""A burst through the whole service, CI-sized: benchmarks/load.py with 1,000 submissions
(`make stress` runs 10,000). The counts must reconcile exactly: what the API accepted,
what the database holds, what was graded; nothing lost. The figures it prints (rates,
latencies, memory) are for reading, never asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.service
ROOT = Path(__file__).resolve().parent.parent


def test_a_burst_of_1000_is_accepted_graded_and_reconciled():
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "load.py"), "--count", "1000", "--baseline", "50"],
                         capture_output=True, text=True, timeout=900)
    print(run.stdout)
    assert run.returncode == 0, run.stdout + run.stderr
    figures = json.loads((ROOT / "benchmarks" / "out" / "load.json").read_text())
    assert figures["accepted"] == figures["in_database"] == figures["done"] == 1000
    assert figures["lost"] == 0 and figures["verdicts"] == {"PATCH FAILED": 1000}


@pytest.mark.docker
def test_a_burst_graded_in_containers_reconciles():
    """The same through real grades: every patch is the gold patch plus a file of its own."""
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "load.py"), "--count", "60", "--baseline", "5",
                          "--batch", "25", "--containers"], capture_output=True, text=True, timeout=900)
    print(run.stdout)
    assert run.returncode == 0, run.stdout + run.stderr
    figures = json.loads((ROOT / "benchmarks" / "out" / "load-containers.json").read_text())
    assert figures["accepted"] == figures["in_database"] == figures["done"] == 60
    assert figures["lost"] == 0 and figures["verdicts"] == {"PASS": 60}
