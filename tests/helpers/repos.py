"""Looking into git repositories and bundles, for the tests of a task's starting repository
(the bundle the service serves, a checkout made from it) and of the CLI that fetches it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from grader.tasks.loader import TaskSet
from helpers import ROOT

EXAMPLES = TaskSet(ROOT / "tasks" / "examples")


def git(*args, cwd, input: bytes | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, input=input).stdout.decode()


def objects(repo: Path) -> set[str]:
    return set(git("cat-file", "--batch-all-objects", "--batch-check=%(objectname)", cwd=repo).split())


def reachable(repo: Path, *commits: str) -> set[str]:
    return {line.split()[0] for line in git("rev-list", "--objects", *commits, cwd=repo).splitlines()}


def blob_id(data: bytes) -> str:
    return git("hash-object", "--stdin", cwd=ROOT, input=data).strip()


def unbundle(bundle: Path, where: Path) -> Path:
    """The bundle's objects as they are, in a bare repository of their own."""
    git("clone", "--quiet", "--bare", str(bundle), str(where), cwd=bundle.parent)
    return where


def state(repo: Path) -> dict:
    """Everything of a checkout a submitter's `git diff` and the grader could see."""
    git_dir = repo / ".git"
    return {
        "head": git("rev-parse", "HEAD", cwd=repo),
        "detached": subprocess.run(["git", "symbolic-ref", "-q", "HEAD"], cwd=repo).returncode == 1,
        "refs": git("for-each-ref", cwd=repo),
        "reflog": git("reflog", "--all", cwd=repo),
        "merge": {
            n: (git_dir / n).read_bytes() if (git_dir / n).exists() else None
            for n in ("MERGE_HEAD", "MERGE_MSG", "MERGE_MODE")
        },
        "index": git("ls-files", "--stage", cwd=repo),
        "status": git("status", "--porcelain=v2", "--untracked-files=all", cwd=repo),
        "diff": git("diff", cwd=repo),
        "files": {
            p.relative_to(repo).as_posix(): p.read_bytes()
            for p in sorted(repo.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(repo).parts
        },
        "objects": objects(repo),
    }
