"""benchmarks/overhead.py measures honestly or says it cannot: its baseline runs the
environment's own pytest and plugins, and a baseline that differs from the image or is
slower than the grade is an error, never a figure (issue 13)."""

from __future__ import annotations

import importlib.util

import pytest

from helpers import ROOT

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
