"""The starting repository a submitter downloads: a git bundle of the task's base commit
(and, for a conflict task, the commit merged into it), with nothing the task keeps
private and nothing that came later.

The bundle is made from a fetch of exactly those commits into an empty repository, so
it holds their reachable history and no other object: no later commit (the fix), no
other branch or tag, no reflog; the hidden tests, expected files and gold patch live in
the task's folder, never in this history. Its refs are `refs/heads/base` (and
`refs/heads/merge`) with HEAD on base, so `git clone` of it works by hand too.

It is built once per task definition hash into the cache, with its sha256 beside it,
and packed single-threaded so that the same commits give the same bytes.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader.tasks.model import Task
from grader.tasks.prepare import UPLOAD_ANY_SHA, _lock, _mirror, git

BASE_REF = "refs/heads/base"
MERGE_REF = "refs/heads/merge"


@dataclass(frozen=True)
class RepositoryBundle:
    path: Path
    sha256: str
    size: int
    commit: str
    merge: str | None


def repository_bundle(task: Task, cache: Path, task_hash: str | None = None) -> RepositoryBundle:
    """The task's starting repository as a bundle file in `cache`, built if missing."""
    task_hash = task_hash or task.definition_hash()
    where = cache / "bundles"
    path = where / f"{task.id}-{task_hash[:16]}.bundle"
    digest = path.with_name(path.name + ".sha256")
    if not digest.exists():
        with _lock(where / f"{task.id}.lock"):
            if not digest.exists():
                _build(task, cache, path, digest)
    return RepositoryBundle(path, digest.read_text().strip(), path.stat().st_size, task.repo.commit, task.repo.merge)


def _build(task: Task, cache: Path, path: Path, digest: Path) -> None:
    mirror = _mirror(task, cache)
    work = Path(tempfile.mkdtemp(prefix=f"{task.id}-", dir=path.parent))
    try:
        repo = work / "repo.git"
        git("init", "--quiet", "--bare", str(repo))
        refspecs = [f"{task.repo.commit}:{BASE_REF}"] + ([f"{task.repo.merge}:{MERGE_REF}"] if task.repo.merge else [])
        git("fetch", "--quiet", "--no-tags", f"--upload-pack={UPLOAD_ANY_SHA}", str(mirror), *refspecs, cwd=repo)
        git("symbolic-ref", "HEAD", BASE_REF, cwd=repo)
        refs = ["HEAD", BASE_REF] + ([MERGE_REF] if task.repo.merge else [])
        out = work / "repo.bundle"
        git("-c", "pack.threads=1", "bundle", "create", "--quiet", str(out), *refs, cwd=repo)
        with out.open("rb") as f:
            sha = hashlib.file_digest(f, "sha256").hexdigest()
        out.rename(path)
        tmp_digest = work / "sha256"
        tmp_digest.write_text(sha + "\n")
        tmp_digest.rename(digest)  # last: its presence says the bundle beside it is whole
    finally:
        shutil.rmtree(work, ignore_errors=True)
