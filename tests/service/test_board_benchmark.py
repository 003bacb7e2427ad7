"""benchmarks/board.py at a tiny scale (SQLite, 3 runs of 12 tasks): it runs through and
prints and writes its figures; what it counts (runs computed, statements, submissions
read by a warm page) is asserted, never a time."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import ROOT

pytestmark = pytest.mark.service


def test_the_board_benchmark_prints_its_figures(tmp_path):
    out = tmp_path / "board.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "board.py"), "--runs", "3", "--tasks", "12", "--base-runs", "1"]
        + ["--rounds", "2", "--verdicts", "1", "--sqlite", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for line in ("first read, every run's figures computed", "warm /v1/leaderboard", "warm /leaderboard"):
        assert line in done.stdout
    assert "3 runs against 1 (the baseline, in the same run), 12 tasks, sqlite" in done.stdout
    stages = json.loads(out.read_text())["stages"]
    assert [s["runs"] for s in stages] == [1, 3]
    for stage in stages:
        assert stage["cold"]["computed"] == stage["runs"]  # every run's figures, on the first read
        assert stage["after_verdict"]["computed"] == [1]  # one verdict: its run alone
        for page in stage["statements"].values():
            assert page["reading_submissions"] == page["figures_computed"] == 0
        assert stage["filtered_suite"]["warm"]["n"] == 2
