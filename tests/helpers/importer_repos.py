"""Small local git repositories with real history, and benchmark rows pointing at them,
for the importer tests: GitHub is out of reach, so every repository a row names lives
in a --repo-dir as owner__name.

- acme/calc: a base commit with a bug (mean of [] divides by zero), then a fix commit
  that changes the code and adds tests (and a JSON fixture) beside it. SWE-bench's gold
  patch is the change outside tests/, its test_patch the change inside.
- acme/notes: two branches that edit the same lines of two files, and the merge commit
  that resolved them (GitGoodBench's merge-conflict sample).

Commit dates are fixed, so every sha is the same on every run (and so are the bundles
and the instance images built from them).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "HOME": "/nonexistent",
    "TZ": "UTC",
    "LC_ALL": "C",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


def git(root: Path, *args: str, date: str = "2023-01-01T00:00:00Z", text: bool = True):
    env = {**ENV, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    proc = subprocess.run(
        ["git", "-c", "init.defaultBranch=main", "-c", "merge.conflictstyle=merge", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=text,
    )
    if proc.returncode:
        raise RuntimeError(f"git {' '.join(args)}: {proc.stderr}")
    return proc.stdout


def write(root: Path, files: dict[str, str]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


def commit(root: Path, message: str, date: str) -> str:
    git(root, "add", "-A")
    git(root, "commit", "-qm", message, date=date)
    return git(root, "rev-parse", "HEAD").strip()


CALC_BASE = {
    "setup.py": "from setuptools import setup\n\nsetup(name='calc', version='0.1', packages=['calc'])\n",
    "calc/__init__.py": "def mean(xs):\n    return sum(xs) / len(xs)\n",
    "tests/test_basic.py": "from calc import mean\n\n\ndef test_one():\n    assert mean([2]) == 2\n",
}
CALC_FIX = {
    "calc/__init__.py": "def mean(xs):\n    if not xs:\n        raise ValueError('mean of nothing')\n"
    "    return sum(xs) / len(xs)\n",
    "tests/test_mean.py": "import json\nimport pathlib\n\nimport pytest\n\nfrom calc import mean\n\n"
    "CASES = json.loads((pathlib.Path(__file__).parent / 'data' / 'cases.json')"
    ".read_text())\n\n\n"
    "def test_empty_raises():\n    with pytest.raises(ValueError):\n        mean([])\n\n\n"
    "def test_values():\n    for xs, want in CASES:\n        assert mean(xs) == want\n",
    "tests/data/cases.json": "[[[1, 3], 2], [[5], 5]]\n",
}
# RES-Q's test scripts are Python files the harness runs with `python`; exit 0 is success.
RESQ_SCRIPT = """\
import sys
import unittest

from calc import mean


class MeanTest(unittest.TestCase):
    def test_empty_raises(self):
        with self.assertRaises(ValueError):
            mean([])

    def test_values(self):
        self.assertEqual(mean([1, 3]), 2)


if __name__ == "__main__":
    result = unittest.main(exit=False).result
    sys.exit(0 if result.wasSuccessful() else 1)
"""

NOTES_BASE = {"notes.txt": "title: notes\nstatus: draft\nowner: nobody\n", "authors.txt": "Ada\n", "keep.txt": "same\n"}
NOTES_OURS = {"notes.txt": "title: notes\nstatus: review\nowner: nobody\n", "authors.txt": "Ada\nAlan\n"}
NOTES_THEIRS = {
    "notes.txt": "title: notes\nstatus: final\nowner: nobody\n",
    "authors.txt": "Ada\nGrace\n",
    "keep.txt": "same\n",
    "extra.txt": "from theirs\n",
}
NOTES_MERGED = {
    "notes.txt": "title: notes\nstatus: final (reviewed)\nowner: nobody\n",
    "authors.txt": "Ada\nAlan\nGrace\n",
}


@dataclass
class Calc:
    path: Path
    base: str
    fix: str

    def diff(self, *paths: str, exclude: str | None = None) -> str:
        spec = list(paths) + ([f":(exclude){exclude}"] if exclude else [])
        return git(self.path, "diff", self.base, self.fix, "--", *spec)

    @property
    def gold(self) -> str:
        return self.diff(".", exclude="tests")

    @property
    def test_patch(self) -> str:
        return self.diff("tests")


@dataclass
class Notes:
    path: Path
    ours: str
    theirs: str
    merged: str


def make_calc(repo_dir: Path) -> Calc:
    root = repo_dir / "acme__calc"
    root.mkdir(parents=True)
    git(root, "init", "-q", ".")
    write(root, CALC_BASE)
    base = commit(root, "calc: mean", "2023-01-01T00:00:00Z")
    write(root, CALC_FIX)
    fix = commit(root, "mean of an empty list raises ValueError", "2023-02-03T10:00:00Z")
    return Calc(root, base, fix)


def make_notes(repo_dir: Path) -> Notes:
    root = repo_dir / "acme__notes"
    root.mkdir(parents=True)
    git(root, "init", "-q", ".")
    write(root, NOTES_BASE)
    commit(root, "notes", "2023-03-01T00:00:00Z")
    git(root, "checkout", "-qb", "theirs")
    write(root, NOTES_THEIRS)
    theirs = commit(root, "theirs: final", "2023-03-02T00:00:00Z")
    git(root, "checkout", "-q", "main")
    write(root, NOTES_OURS)
    ours = commit(root, "ours: review", "2023-03-03T00:00:00Z")
    subprocess.run(["git", "merge", "-q", "--no-ff", "theirs"], cwd=root, env={**ENV}, capture_output=True)
    write(root, NOTES_MERGED)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "merge theirs", date="2023-03-04T00:00:00Z")
    merged = git(root, "rev-parse", "HEAD").strip()
    return Notes(root, ours, theirs, merged)


@dataclass
class Chain:
    path: Path
    base: str
    commits: list[str]  # oldest first, each changing notes.txt


def make_chain(repo_dir: Path) -> Chain:
    """acme/chain: a base, then three commits that change notes.txt (the second also
    README.md): GitGoodBench's file-commit chain."""
    root = repo_dir / "acme__chain"
    root.mkdir(parents=True)
    git(root, "init", "-q", ".")
    write(root, {"notes.txt": "one\ntwo\nthree\nfour\nfive\nsix\nseven\n", "README.md": "chain\n"})
    base = commit(root, "notes", "2023-04-01T00:00:00Z")
    made = []
    for n, (files, message) in enumerate(
        [
            ({"notes.txt": "ONE\ntwo\nthree\nfour\nfive\nsix\nseven\n"}, "Capitalise the first note"),
            (
                {"notes.txt": "ONE\ntwo\nthree\nfour\nfive\nsix\nSEVEN\n", "README.md": "chain of notes\n"},
                "Capitalise the last note and say so",
            ),
            ({"notes.txt": "ONE\ntwo\nthree\nFOUR\nfive\nsix\nSEVEN\n"}, "Capitalise the middle note"),
        ]
    ):
        write(root, files)
        made.append(commit(root, message, f"2023-04-0{n + 2}T00:00:00Z"))
    return Chain(root, base, made)


def gitgoodbench_chain_row(chain: Chain, **over) -> dict:
    scenario = {
        "file": "notes.txt",
        "branch": "main",
        "times_seen_consecutive": 3,
        "purity": 0.8,
        "newest_commit": chain.commits[-1],
        "oldest_commit": chain.commits[0],
    }
    row = {
        "id": "acme_chain_fcc_0001",
        "name": "acme/chain",
        "default_branch": "main",
        "programming_language": "Python",
        "scenario": json.dumps(scenario),
        "sample_type": "file_commit_chain",
        "project_size": "tiny",
        "difficulty": "easy",
    }
    row.update(over)
    return row


def swebench_row(calc: Calc, **over) -> dict:
    row = {
        "instance_id": "acme__calc-1",
        "repo": "acme/calc",
        "base_commit": calc.base,
        "problem_statement": "mean([]) raises ZeroDivisionError.\nIt should raise ValueError instead.\n",
        "patch": calc.gold,
        "test_patch": calc.test_patch,
        "FAIL_TO_PASS": json.dumps(["tests/test_mean.py::test_empty_raises"]),
        "PASS_TO_PASS": json.dumps(["tests/test_mean.py::test_values"]),
        "version": "0.1",
        "created_at": "2023-02-03T10:00:00Z",
        "environment_setup_commit": calc.base,
        "hints_text": "",
        # the environment: what the python-3.11 image already has, so nothing is downloaded
        "python": "3.11",
        "requirements": ["pytest==8.3.3"],
        "install": "pip install --no-build-isolation --no-deps -e .",
    }
    row.update(over)
    return {k: v for k, v in row.items() if v is not None}


def resq_row(calc: Calc, **over) -> dict:
    row = {
        "id": "0_0",
        "repo_url": "https://github.com/acme/calc",
        "instruction": "Make calc.mean raise ValueError when it is given no values.",
        "base_commit": calc.base,
        "test_script": RESQ_SCRIPT,
        "testbed_environment": "python3.11",
        "requirements_txt": "# what the testbed needs\npytest==8.3.3\n",
        "solution_commit": calc.fix,
        "solution_patch": calc.gold,
        "modified_files": [{"path": "calc/__init__.py", "content": CALC_FIX["calc/__init__.py"]}],
        "language": "Python",
    }
    row.update(over)
    return row


def gitgoodbench_row(notes: Notes, **over) -> dict:
    scenario = {
        "merge_commit_hash": notes.merged,
        "parents": [notes.ours, notes.theirs],
        "number_of_files_with_merge_conflict": 2,
        "total_number_of_merge_conflicts": 2,
        "files_in_merge_conflict": ["authors.txt", "notes.txt"],
    }
    row = {
        "id": "acme_notes_merge_0001",
        "name": "acme/notes",
        "default_branch": "main",
        "programming_language": "Python",
        "scenario": json.dumps(scenario),  # the published dataset holds it as a JSON string
        "sample_type": "merge",
        "project_size": "tiny",
        "difficulty": "hard",
    }
    row.update(over)
    return row
