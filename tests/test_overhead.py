"""benchmarks/overhead.py measures honestly or says it cannot: its baseline runs the
environment's own pytest and plugins, and a baseline that differs from the image or is
slower than the grade is an error, never a figure (issue 13)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "overhead.py"

_spec = importlib.util.spec_from_file_location("overhead_benchmark", SCRIPT)
overhead = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(overhead)

IMAGE = {"python": "3.11.2", "packages": ["pluggy==1.5.0", "pytest==8.3.3"], "pytest11": []}


def test_a_baseline_slower_than_the_grade_is_broken():
    # the case: the project's virtualenv starts pytest in 1.7 s, a grade takes 0.4 s
    with pytest.raises(overhead.MeasurementBroken, match="not faster than the grade"):
        overhead.judge("runc", [1.7, 1.8, 1.6], [0.40, 0.42, 0.41])
    with pytest.raises(overhead.MeasurementBroken):
        overhead.judge("runc", [0.4], [0.4])
    overhead.judge("runc", [0.2, 0.21, 0.19], [0.35, 0.34, 0.36])  # a real overhead passes
    # a busy machine slowed two of three baseline runs: their best still says what they cost
    overhead.judge("runc", [0.72, 0.13, 0.70], [0.68, 0.66, 0.70])


@pytest.mark.parametrize(
    "host, words",
    [
        ({**IMAGE, "python": "3.12.1"}, "Python 3.12.1"),
        ({**IMAGE, "packages": ["pluggy==1.5.0", "pytest==9.2.0"]}, "pytest==9.2.0"),
        ({**IMAGE, "packages": [*IMAGE["packages"], "hypothesis==6.170.15"]}, "hypothesis"),
        ({**IMAGE, "pytest11": ["hypothesispytest=_hypothesis_pytestplugin"]}, "pytest plugins"),
    ],
)
def test_a_baseline_unlike_the_image_is_broken(host, words):
    with pytest.raises(overhead.MeasurementBroken, match=words):
        overhead.same_as_image(host, IMAGE)


def test_the_same_interpreter_and_packages_pass():
    overhead.same_as_image({**IMAGE, "python": "3.11.7"}, IMAGE)  # a patch release apart: same bytecode


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
