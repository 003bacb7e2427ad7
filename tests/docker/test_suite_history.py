"""The history and bisect tasks cut from real release history (tasks/history-real), built
from the real-world suite's pinned sdists and validated in Docker: every reference history
and bisect answer PASSes, every squashed and scrambled history and every wrong answer
FAILs (`build.py --validate`, once each here; README.md there has the three-times figures)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import ROOT

pytestmark = pytest.mark.docker
BUILD = ROOT / "tasks" / "history-real" / "build.py"


def test_every_real_history_and_bisect_task_grades_as_it_should(tmp_path):
    out = tmp_path / "history-real"
    done = subprocess.run(
        [sys.executable, str(BUILD), "--out", str(out), "--validate", "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    report = json.loads((out / "validation.json").read_text())
    kinds = {tid: set(rows) for tid, rows in report.items()}
    history = [t for t, names in kinds.items() if "squashed.patch" in names]
    bisect = [t for t, names in kinds.items() if "wrong.patch" in names]
    assert len(history) >= 10 and len(bisect) >= 5, kinds
    for tid, rows in report.items():
        for name, row in rows.items():
            assert row["got"] == [row["want"]], (tid, name, row)
