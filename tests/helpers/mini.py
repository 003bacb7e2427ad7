"""The mini task: a tiny repository written by the `mini` fixture (tests/conftest.py) in a
temporary directory, and its task definition; the hostile patches are made against it."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

from helpers import ROOT

__all__ = ["BASE_FILES", "FIXED", "GIT_ENV", "HIDDEN_TEST", "Mini", "ROOT", "TASK_YAML", "git", "write"]

GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z",
}

BASE_FILES = {
    "calc/__init__.py": "def mean(xs):\n    return sum(xs) / len(xs)\n",
    "tests/test_basic.py": "from calc import mean\n\n\ndef test_one():\n    assert mean([2]) == 2\n",
    "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["."]\n',
    "README.md": "mini\n",
}
HIDDEN_TEST = textwrap.dedent("""\
    import pytest
    from calc import mean


    def test_empty():
        with pytest.raises(ValueError):
            mean([])


    def test_two():
        assert mean([1, 3]) == 2
    """)
FIXED = "def mean(xs):\n    if not xs:\n        raise ValueError('empty')\n    return sum(xs) / len(xs)\n"


def git(*args, cwd):
    return subprocess.run(
        ["git", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        env=GIT_ENV,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def write(root: Path, files: dict[str, str | bytes | None]) -> None:
    for rel, content in files.items():
        path = root / rel
        if content is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


class Mini:
    """The mini repository, and a way to turn file edits into a real git diff."""

    def __init__(self, root: Path):
        self.src = root / "src"
        self.src.mkdir(parents=True)
        git("init", "-q", ".", cwd=self.src)
        write(self.src, BASE_FILES)
        git("add", "-A", cwd=self.src)
        git("commit", "-qm", "base", cwd=self.src)
        self.base = git("rev-parse", "HEAD", cwd=self.src).strip()

    def diff(self, files: dict[str, str | bytes | None], *, symlinks: dict[str, str] | None = None) -> bytes:
        """A `git diff --binary` of the base with `files` written (None deletes)."""
        write(self.src, files)
        for rel, target in (symlinks or {}).items():
            (self.src / rel).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, self.src / rel)
        try:
            git("add", "-A", cwd=self.src)
            return subprocess.run(
                ["git", "diff", "--cached", "--binary"], cwd=self.src, check=True, capture_output=True
            ).stdout
        finally:
            git("reset", "-q", "--hard", "HEAD", cwd=self.src)
            git("clean", "-qfdx", cwd=self.src)


TASK_YAML = """\
id: {id}
instruction: Make calc.mean raise ValueError on an empty list.
metadata: {{suite: mini, difficulty: easy, created_at: 2024-01-01}}
repo: {{bundle: ../mini.bundle, commit: {commit}}}
environment: python-3.11
check:
  type: tests
  hidden_tests: {{tests/test_mean.py: test_mean.py}}
{lists}
limits: {{timeout: {timeout}, memory: 256m, pids: 64}}
gold_patch: gold.patch
"""
