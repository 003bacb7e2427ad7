"""grader/box/signed.py: the reports of a runner's processes folded into one, each process's
last word held to its own exit status; the package's reporter files found in the archive
as on disk."""

from __future__ import annotations

import subprocess
import sys

from grader.box.signed import merge
from grader.grading.ship import archive


class Out:
    def data(self) -> bytes:
        return b""


def run(code, timed_out=False):
    return {"exit_code": code, "timed_out": timed_out, "out": Out()}


def rep(outcomes, exit=None, forged=None, sessions=1):
    return {
        "forged": forged,
        "end": None if exit is None else {"t": "end", "exit": exit},
        "ends": 0 if exit is None else sessions,
        "sessions": sessions,
        "outcomes": outcomes,
        "collect_errors": [],
        "integrity": [],
    }


def test_units_that_agree_fold_into_one_report():
    units = [
        ("test/a.js", run(0), rep({"test/a.js::x": "passed"}, exit=0)),
        ("test/b.js", run(1), rep({"test/b.js::y": "failed", "test/b.js::z": "passed"}, exit=1)),
    ]
    status, out = merge(units, "tape")
    assert status == 1 and out["end"] == {"t": "end", "exit": 1} and out["forged"] is None
    assert out["outcomes"] == {"test/a.js::x": "passed", "test/b.js::y": "failed", "test/b.js::z": "passed"}
    assert out["integrity"] == []


def test_a_unit_whose_process_disagrees_with_its_reporter_is_evidence():
    units = [("test/a.js", run(0), rep({"test/a.js::x": "failed"}, exit=1))]
    _, out = merge(units, "tape")
    assert "test/a.js: tape finished with exit status 1 but its process exited with 0" in out["integrity"][0]


def test_a_unit_that_exited_0_without_its_end_is_forged():
    units = [("a", run(0), rep({"a::x": "passed"}, exit=None)), ("b", run(0), rep({}, exit=0))]
    status, out = merge(units, "go")
    assert out["forged"] == "a: the process exited 0 before go reported its end"
    assert out["end"] is None and out["ends"] == 0


def test_a_crashed_unit_leaves_the_run_unended_but_not_forged():
    units = [("a", run(-9), rep({"a::x": "passed"}, exit=None))]
    status, out = merge(units, "go")
    assert status == 1 and out["forged"] is None and out["end"] is None


def test_the_worst_outcome_of_a_test_seen_twice_wins_and_the_first_forgery_is_kept():
    units = [
        ("a", run(0), rep({"t": "passed"}, exit=0)),
        ("b", run(1), rep({"t": "failed"}, exit=1, forged="line 2 ...")),
        ("c", run(1), rep({}, exit=1, forged="line 9 ...")),
    ]
    _, out = merge(units, "x")
    assert out["outcomes"] == {"t": "failed"} and out["forged"] == "b: line 2 ..."


def test_reporter_files_are_found_inside_the_archive(tmp_path):
    box = tmp_path / "box.zip"
    box.write_bytes(archive())
    code = "import sys; sys.path.insert(0, sys.argv[1]); import grader_box as b; print(b.resource_names('reporters'))"
    out = subprocess.run([sys.executable, "-I", "-c", code, str(box)], capture_output=True, text=True, check=True)
    assert "pytest_plugin.py" in out.stdout
