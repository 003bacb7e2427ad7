"""Materialise a task on the host: the repository at its base state, the hidden tests,
the expected files. Everything lands in the cache under the task's definition hash, so
a task is prepared once and a changed task is prepared anew.

The base checkout holds only the history reachable from the base commit (and from the
merge commit of a conflict task): the fix the submitter is asked for is not in it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.box.runners.history import DIFF_ARGS
from grader.errors import TaskError
from grader.patch import inspect_patch, path_problem
from grader.tasks.model import BisectCheck, ExactMatchCheck, HistoryCheck, Task, TestsCheck

GIT_ENV = {
    "GIT_AUTHOR_NAME": "grader",
    "GIT_AUTHOR_EMAIL": "grader@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z",
    "GIT_COMMITTER_NAME": "grader",
    "GIT_COMMITTER_EMAIL": "grader@localhost",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
    # no global configuration either: HOME points into the repository being prepared, and a
    # .gitconfig there must not configure the git that checks it out
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_TERMINAL_PROMPT": "0",
    "TZ": "UTC",
    "LC_ALL": "C",
}


def git(
    *args: str, cwd: Path | None = None, check: bool = True, input: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, **GIT_ENV, "HOME": str(cwd or Path.cwd())}
    proc = subprocess.run(
        ["git", "-c", "core.autocrlf=false", "-c", "advice.detachedHead=false", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        input=input,
    )
    if check and proc.returncode != 0:
        raise TaskError(f"git {' '.join(args)} failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc


@dataclass(frozen=True)
class PreparedTask:
    task: Task
    task_hash: str
    root: Path

    @property
    def repo(self) -> Path:
        return self.root / "repo"

    @property
    def hidden(self) -> Path:
        return self.root / "hidden"

    def hidden_manifest(self) -> dict[str, str | None]:
        manifest: dict[str, str | None] = json.loads((self.hidden / "manifest.json").read_text())
        return manifest

    def expected_files(self) -> dict[str, bytes]:
        manifest = json.loads((self.root / "expected" / "manifest.json").read_text())
        return {rel: (self.root / "expected" / "files" / rel).read_bytes() for rel in manifest}

    def history(self) -> dict[str, Any]:
        """A history or bisect task's view of its repository's history (reference_history,
        history_commits), read when the task was prepared."""
        data: dict[str, Any] = json.loads((self.root / "history.json").read_text())
        return data


def reference_history(task: Task, mirror: Path) -> dict[str, Any]:
    """A history task's reference: the first-parent chain from the base to `reference`,
    each commit's diff (as the container takes the submission's), the whole change, and
    the last tree (its id, and each file's mode and blob)."""
    check = task.check
    assert isinstance(check, HistoryCheck)
    base, ref = task.repo.commit, check.reference
    if git("merge-base", "--is-ancestor", base, ref, cwd=mirror, check=False).returncode:
        raise TaskError(f"task {task.id}: the reference {ref} does not descend from the base commit {base}")
    chain = git("rev-list", "--reverse", "--first-parent", f"{base}..{ref}", cwd=mirror).stdout.decode().split()
    if not chain:
        raise TaskError(f"task {task.id}: the reference {ref} is the base commit: no history to compare with")

    def diff(a: str, b: str) -> str:
        return git("diff", *DIFF_ARGS, a, b, cwd=mirror).stdout.decode("utf-8", "surrogateescape")

    parents = [base, *chain[:-1]]
    listing = git("ls-tree", "-r", "-z", "--full-tree", ref, cwd=mirror).stdout.decode("utf-8", "surrogateescape")
    files = {}
    for entry in listing.split("\0"):
        meta, _, path = entry.partition("\t")
        if path:
            files[path] = meta
    return {
        "tree": git("rev-parse", f"{ref}^{{tree}}", cwd=mirror).stdout.decode().strip(),
        "files": files,
        "commits": chain,
        "diffs": [diff(p, c) for p, c in zip(parents, chain, strict=True)],
        "total": diff(base, ref),
    }


def history_commits(task: Task, mirror: Path) -> dict[str, Any]:
    """A bisect task's history as the submitter has it: every commit reachable from the
    task's commit (what an abbreviated answer must name exactly one of)."""
    check = task.check
    assert isinstance(check, BisectCheck)
    commits = git("rev-list", task.repo.commit, cwd=mirror).stdout.decode().split()
    if check.commit not in commits:
        raise TaskError(f"task {task.id}: the bisect answer {check.commit} is not in the history of {task.repo.commit}")
    return {"commits": commits}


def _mirror(task: Task, cache: Path) -> Path:
    """A bare mirror of the task's repository source, fetched once and shared by tasks."""
    repo = task.repo
    if repo.bundle:
        source = str(task.file(repo.bundle))
    elif repo.path:
        source = str(task.file(repo.path))
    else:
        assert repo.url is not None  # the model holds exactly one of url, bundle, path
        source = repo.url
    key = hashlib.sha256(source.encode()).hexdigest()[:16]
    if repo.bundle:  # a bundle's content may change under the same name
        key += "-" + hashlib.sha256(task.read(repo.bundle)).hexdigest()[:16]
    mirror = cache / "mirrors" / f"{key}.git"
    wanted = [c for c in (repo.commit, repo.merge) if c]
    if task.check.type == "exact_match" and task.check.expected_commit:
        wanted.append(task.check.expected_commit)
    if task.check.type == "history":
        wanted.append(task.check.reference)
    with _lock(cache / "mirrors" / f"{key}.lock"):
        if not mirror.exists():
            tmp = mirror.with_suffix(".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            git("clone", "--quiet", "--mirror", source, str(tmp))
            tmp.rename(mirror)
        missing = [c for c in wanted if git("cat-file", "-e", f"{c}^{{commit}}", cwd=mirror, check=False).returncode]
        if missing:
            git("fetch", "--quiet", source, "+refs/*:refs/*", cwd=mirror, check=False)
            for c in missing:
                if git("cat-file", "-e", f"{c}^{{commit}}", cwd=mirror, check=False).returncode:
                    raise TaskError(f"task {task.id}: commit {c} is not in {source}")
    return mirror


class _lock:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path

    def __enter__(self) -> None:
        self.fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


# Lets a fetch from a local mirror ask for any commit by its sha, not only a ref's tip.
UPLOAD_ANY_SHA = "git -c uploadpack.allowAnySHA1InWant=true upload-pack"


def checkout_base(task: Task, dest: Path, cache: Path) -> None:
    """Write the task's starting state to `dest`: the base commit checked out, with only
    its own history, and for a conflict task the merge left in progress."""
    mirror = _mirror(task, cache)
    start_state(str(mirror), dest, task.repo.commit, task.repo.merge, task_id=task.id, upload_pack=UPLOAD_ANY_SHA)


def checkout_bundle(bundle: Path, dest: Path, commit: str, merge: str | None, *, task_id: str) -> None:
    """The same starting state as `checkout_base`, from the bundle the service serves
    (grader/tasks/bundle.py): what `grader tasks checkout` does without the task's folder."""
    start_state(str(bundle), dest, commit, merge, task_id=task_id)


def start_state(
    source: str, dest: Path, commit: str, merge: str | None, *, task_id: str, upload_pack: str | None = None
) -> None:
    """A new repository in `dest` holding what `source` has of `commit` and `merge`
    (nothing else: no refs, no reflog), `commit` checked out detached, and `merge`
    merged without committing, which leaves a real conflicted merge."""
    dest.mkdir(parents=True)
    git("init", "--quiet", str(dest))
    wants = [c for c in (commit, merge) if c]
    via = [f"--upload-pack={upload_pack}"] if upload_pack else []
    git("fetch", "--quiet", "--no-tags", *via, source, *wants, cwd=dest)
    git("checkout", "--quiet", "--detach", commit, cwd=dest)
    if merge:
        merged = git("merge", "--no-commit", "--no-ff", merge, cwd=dest, check=False)
        if merged.returncode not in (0, 1):
            raise TaskError(f"task {task_id}: merging {merge} failed: {merged.stderr.decode(errors='replace')}")
    git("reflog", "expire", "--expire=now", "--all", cwd=dest)


def _hidden_from_patch(task: Task, repo: Path, test_patch: bytes) -> dict[str, bytes | None]:
    info = inspect_patch(test_patch, max_bytes=len(test_patch) + 1)
    if not info.ok:
        raise TaskError(f"task {task.id}: test_patch is unusable: {'; '.join(info.problems)}")
    applied = git("apply", "--whitespace=nowarn", "-", cwd=repo, input=test_patch, check=False)
    if applied.returncode:
        raise TaskError(
            f"task {task.id}: test_patch does not apply to the base: {applied.stderr.decode(errors='replace')}"
        )
    out: dict[str, bytes | None] = {}
    for rel in sorted({f.path for f in info.files}):
        path = repo / rel
        out[rel] = path.read_bytes() if path.is_file() else None
    for f in info.files:
        if f.status == "renamed" and f.source:
            out[f.source] = None
    git("apply", "-R", "--whitespace=nowarn", "-", cwd=repo, input=test_patch)
    return out


def _write_tree(root: Path, files: dict[str, bytes | None]) -> None:
    manifest: dict[str, str | None] = {}
    for rel, data in sorted(files.items()):
        problem = path_problem(rel)
        if problem:
            raise TaskError(f"unsafe path in a task: {problem}")
        if data is None:
            manifest[rel] = None
            continue
        path = root / "files" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        manifest[rel] = hashlib.sha256(data).hexdigest()
    root.mkdir(parents=True, exist_ok=True)
    (root / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))


def prepare(task: Task, cache: Path, task_hash: str | None = None) -> PreparedTask:
    """`task_hash`, when the caller already has it, saves hashing every task file again."""
    task_hash = task_hash or task.definition_hash()
    root = cache / "tasks" / f"{task.id}-{task_hash[:16]}"
    if (root / ".done").exists():
        return PreparedTask(task, task_hash, root)
    with _lock(cache / "tasks" / f"{task.id}.lock"):
        if (root / ".done").exists():
            return PreparedTask(task, task_hash, root)
        tmp = Path(tempfile.mkdtemp(prefix=f"{task.id}-", dir=cache / "tasks"))
        try:
            checkout_base(task, tmp / "repo", cache)
            check = task.check
            hidden: dict[str, bytes | None] = {}
            if isinstance(check, TestsCheck):
                if check.test_patch:
                    hidden = _hidden_from_patch(task, tmp / "repo", task.read(check.test_patch))
                else:
                    hidden = {rel: task.read(src) for rel, src in check.hidden_tests.items()}
            _write_tree(tmp / "hidden", hidden)
            expected: dict[str, bytes | None] = {}
            if isinstance(check, ExactMatchCheck):
                if check.files:
                    expected = {rel: task.read(src) for rel, src in check.files.items()}
                else:
                    mirror = _mirror(task, cache)
                    for rel in check.paths:
                        shown = git("show", f"{check.expected_commit}:{rel}", cwd=mirror, check=False)
                        if shown.returncode:
                            raise TaskError(f"task {task.id}: {rel} is not in commit {check.expected_commit}")
                        expected[rel] = shown.stdout
            _write_tree(tmp / "expected", expected)
            if isinstance(check, HistoryCheck):
                (tmp / "history.json").write_text(json.dumps(reference_history(task, _mirror(task, cache))))
            elif isinstance(check, BisectCheck):
                (tmp / "history.json").write_text(json.dumps(history_commits(task, _mirror(task, cache))))
            (tmp / ".done").write_text(task_hash)
            shutil.rmtree(root, ignore_errors=True)
            tmp.rename(root)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return PreparedTask(task, task_hash, root)
