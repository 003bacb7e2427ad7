"""Issue 18, class 8: one task's answer in another task's public material.

Two tasks cut from one history: the second's base is the first's fix. The second's
repository bundle then holds the first's gold-changed file (byte for byte) and its fix;
`find_leaks` says so, the suite's `serve_together` is the host's choice, and without it
the service does not serve the answered task beside the other. The shipped example suite
passes (its pairs are listed as served together on purpose).
"""

from __future__ import annotations

import subprocess
import types
from pathlib import Path

import pytest

from grader.config import get_settings
from grader.handles import Handles
from grader.tasks.leaks import blob_id, find_leaks, unchosen
from grader.tasks.loader import TaskSet, serve_together

ROOT = Path(__file__).resolve().parents[2]
ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z",
    "PATH": "/usr/bin:/bin:/usr/local/bin",
}
UNFIXED = "def mean(xs):\n    return sum(xs) / len(xs)\n"
FIXED = "def mean(xs):\n    if not xs:\n        raise ValueError('empty')\n    return sum(xs) / len(xs)\n"
HIDDEN = "import pytest\nfrom calc import mean\n\n\ndef test_empty():\n    with pytest.raises(ValueError):\n        mean([])\n"
TASK = """\
id: {id}
instruction: {instruction}
metadata: {{suite: leaks, difficulty: easy, created_at: 2024-01-01}}
repo: {{bundle: ../history.bundle, commit: {commit}}}
environment: python-3.11
check:
  type: tests
  hidden_tests: {{tests/test_{id}.py: hidden.py}}
  fail_to_pass: [tests/test_{id}.py::test_empty]
gold_patch: gold.patch
"""


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=ENV, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    """A history of three commits and two tasks: `early` (base c1, fixed by c2) and
    `late` (base c2: the fix is in its history), plus `other` (base c1 too)."""
    top = tmp_path_factory.mktemp("leaks")
    src = top / "src"
    src.mkdir()
    git("init", "-q", "-b", "main", cwd=src)
    (src / "calc").mkdir()
    (src / "calc" / "__init__.py").write_text(UNFIXED)
    (src / "README").write_text("calc\n")
    git("add", "-A", cwd=src)
    git("commit", "-qm", "c1", cwd=src)
    c1 = git("rev-parse", "HEAD", cwd=src).strip()
    (src / "calc" / "__init__.py").write_text(FIXED)
    git("commit", "-qam", "c2: the fix", cwd=src)
    c2 = git("rev-parse", "HEAD", cwd=src).strip()
    early_gold = git("diff", c1, c2, cwd=src)
    (src / "README").write_text("calc, a calculator\n")
    git("commit", "-qam", "c3", cwd=src)
    c3 = git("rev-parse", "HEAD", cwd=src).strip()
    late_gold = git("diff", c2, c3, cwd=src)
    tasks = top / "tasks"
    tasks.mkdir()
    git("bundle", "create", "-q", str(tasks / "history.bundle"), "--all", cwd=src)
    for task_id, commit, gold in (("early", c1, early_gold), ("late", c2, late_gold), ("other", c1, late_gold)):
        d = tasks / task_id
        d.mkdir()
        (d / "task.yaml").write_text(TASK.format(id=task_id, commit=commit, instruction="Fix mean."))
        (d / "hidden.py").write_text(HIDDEN)
        (d / "gold.patch").write_text(gold)
    return tasks


def test_a_later_base_answers_the_earlier_task(history, tmp_path):
    leaks = find_leaks(list(TaskSet(history)), tmp_path)
    pairs = {(leak.public, leak.secret) for leak in leaks}
    assert ("late", "early") in pairs, leaks
    whats = " ".join(leak.what for leak in leaks if (leak.public, leak.secret) == ("late", "early"))
    assert "calc/__init__.py" in whats and "already in late's base" in whats
    # nothing of `early` in `other`'s public material (same base), nor the reverse of the pair
    assert ("other", "early") not in pairs and ("early", "late") not in pairs
    assert (
        blob_id(FIXED.encode())
        == subprocess.run(["git", "hash-object", "--stdin"], input=FIXED, capture_output=True, text=True).stdout.strip()
    )


def test_the_host_chooses_and_the_default_refuses(history, tmp_path):
    leaks = find_leaks(list(TaskSet(history)), tmp_path)
    assert unchosen(leaks, []) == leaks
    assert unchosen(leaks, "all") == []
    assert [x for x in unchosen(leaks, [["early", "late"]]) if {x.public, x.secret} == {"early", "late"}] == []
    # the service: the answered task is refused, with the reason, the others serve
    settings = get_settings(tasks_dir=history, cache_dir=tmp_path)
    tasks = TaskSet(history, strict=False)
    Handles._refuse_answered_tasks(types.SimpleNamespace(settings=settings), tasks)
    assert "early" not in tasks.ids() and {"late", "other"} <= set(tasks.ids())
    assert any("serve_together" in why and "late" in why for why in tasks.refused.values())
    # with the choice written in suite.yaml, all three serve
    (history / "suite.yaml").write_text("serve_together:\n  - [late, early]\n")
    try:
        assert serve_together(history) == [["late", "early"]]
        tasks = TaskSet(history, strict=False)
        Handles._refuse_answered_tasks(types.SimpleNamespace(settings=settings), tasks)
        assert set(tasks.ids()) == {"early", "late", "other"}
    finally:
        (history / "suite.yaml").unlink()
