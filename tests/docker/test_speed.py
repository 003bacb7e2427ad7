"""benchmarks/speed.py, small: a few distinct grades of two example tasks through the whole
service (gunicorn, RQ workers, Redis, SQLite) and the same tests run bare, in one run. Its
bookkeeping is checked, never a time: every submission graded PASS, the bare runs all ran
their tests, the ratio printed and positive, and a budget row for every grade's stages
(the job's own stages reached its RQ job's meta)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import ROOT

pytestmark = [pytest.mark.docker, pytest.mark.service]


def test_speed_grades_every_submission_and_prints_a_positive_ratio_and_a_budget(tmp_path):
    out = tmp_path / "speed.json"
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "speed.py"),
            "--only",
            "calc-mean-empty,calc-median-even",
            "--count",
            "6",
            "--workers",
            "1",
            "--streams",
            "1",
            "--rounds",
            "1",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    print(run.stdout, run.stderr)
    assert run.returncode == 0, run.stdout + run.stderr
    f = json.loads(out.read_text())
    s = f["service"]
    assert s["accepted"] == s["in_database"] == s["done"] == 6 and s["rejected"] == 0
    assert s["verdicts"] == {"PASS": 6}
    # bare: 2 tasks x 1 round x 1 stream, before and after, each ran pytest to its end
    assert f["bare"]["runs"] == 4 and sum(f["bare"]["pytest_exit"].values()) == 4
    assert 0 < f["ratio"] < 1 and "ratio:" in run.stdout
    budget = f["budget"]
    assert budget["grades"] == 6
    grades = json.loads(out.read_text())["grades"]
    assert len(grades) == 6
    for g in grades:
        stages = g["job"]["stages"]
        assert {"claim", "load", "grade", "finish", "notify", "job"} <= set(stages), stages
        assert {"container_wait", "supervisor", "check", "cpu", "cpu_boot", "cpu_check"} <= set(g["durations"])
    assert f["cpu_per_grade"]["measured_in_container"] == 6 and f["cpu_per_grade"]["ratio"] > 0
    # a container per grade (runc): each grade takes one started ahead and starts the next
    assert s["containers_started"]["grading containers or keepers"] >= 5
    assert "containers the engine started in the window" in run.stdout
    # each task's check against its own bare round
    rows = {r["task"]: r for r in f["by_task"]}
    assert set(rows) == {"calc-mean-empty", "calc-median-even"} and "by task" in run.stdout
    assert all(r["grades"] == 3 and r["check_cpu"] > 0 and r["bare_cpu"] > 0 for r in rows.values())
    delivery = "file delivery (the order and patch on the container's stdin)"
    for name in ("database: claim", delivery, "supervisor: the tests' run (check)"):
        assert name in budget["stages"] and name in run.stdout
