"""The shipped examples, their task-leak pairs and the host's choice (grader/tasks/leaks.py):
their repositories are built from their scripts in the instance images' cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.config import get_settings
from grader.tasks.leaks import find_leaks, unchosen
from grader.tasks.loader import TaskSet, serve_together

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.docker  # the example tasks' repositories are built from their scripts
def test_the_shipped_examples_pass_with_their_choice(tmp_path):
    examples = ROOT / "tasks"
    leaks = find_leaks(list(TaskSet(examples)), get_settings(tasks_dir=examples).cache_dir)
    assert leaks, "the notes tasks share one history: their pairs should be found"
    assert unchosen(leaks, serve_together(examples)) == []
