"""benchmarks/overhead.py run for real, in containers: it measures with the environment's
own pytest, and refuses the project's virtualenv as a baseline (its judgement of figures
is tests/unit/test_overhead.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import ROOT

SCRIPT = ROOT / "benchmarks" / "overhead.py"


@pytest.mark.docker
def test_the_benchmark_measures_with_the_environments_pytest(tmp_path):
    out = tmp_path / "overhead.json"
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--rounds", "3", "--runtimes", "runc", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    figures = json.loads(out.read_text())
    requirements = ROOT / "environments" / "python-3.11" / "requirements.txt"
    pinned = [
        line.strip() for line in requirements.read_text().splitlines() if line.strip() and not line.startswith("#")
    ]
    assert sorted(figures["baseline"]["packages"]) == sorted(pinned)
    assert figures["baseline"]["pytest_plugins"] == []
    assert figures["baseline"]["host_python"].rsplit(".", 1)[0] == figures["baseline"]["image_python"].rsplit(".", 1)[0]
    row = figures["runtimes"]["runc"]
    assert row["host_min_s"] < row["grade_min_s"], row
    assert "target" in run.stdout and "broken" not in run.stderr


@pytest.mark.docker
def test_the_projects_own_virtualenv_as_baseline_is_refused(tmp_path):
    out = tmp_path / "overhead.json"
    run = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--rounds",
            "1",
            "--runtimes",
            "runc",
            "--json",
            str(out),
            "--baseline-python",
            sys.executable,
        ],  # the project's: pytest and its dev plugins
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 2, run.stdout + run.stderr
    assert "the measurement is broken" in run.stderr
    assert "installed distributions are not the image's" in run.stderr
    assert "runtimes" not in json.loads(out.read_text())  # no figures, not even an earlier run's
