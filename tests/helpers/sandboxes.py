"""The grader an attack file grades with, under the sandbox provider its tests are
parametrized over (tests/docker/conftest.py's `sandbox`: runc, runsc, pool)."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.config import get_settings
from grader.pipeline import Grader

ROOT = Path(__file__).resolve().parents[2]


def grader_under(sandbox: str, tasks_dir: Path, cache_dir: Path) -> Grader:
    """A Grader of the tasks in `tasks_dir` under `sandbox`, with a cache of its own. A
    runtime dockerd does not know fails the test (scripts/setup.sh registers runsc): a
    sandbox left out is never a pass."""
    settings = get_settings(tasks_dir=tasks_dir, environments_dir=ROOT / "environments", cache_dir=cache_dir)
    grader = Grader(settings, runtime=sandbox)
    if sandbox != "pool" and sandbox not in grader.sandbox.engine.runtimes():
        pytest.fail(f"{sandbox} is not registered with dockerd: run scripts/setup.sh")
    return grader
