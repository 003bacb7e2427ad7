"""One task's answer in another task's public material.

Tasks cut from one history share it: a task whose base commit is another's expected
commit, or later than another's fix, hands that other task's answer to whoever downloads
its repository bundle (the bundle holds the base's whole history). Served side by side,
the later task's public material answers the earlier one: copy the files, PASS.

For every ordered pair (A, B) of a task set this finds what of B's secrets sits in A's
public material:
- B's secrets: the hidden tests' contents, the expected files' contents (exact-match
  tasks, from files or a commit), and the contents the gold patch gives the files it
  changes; each as a git blob id, less what B's own public history already holds (a
  hidden test unchanged since the base is no secret);
- A's public material: every blob reachable from A's base commit (and its merge
  commit), i.e. its repository bundle and its base history, and A's public view (a
  secret file quoted whole in an instruction);
- and, whatever became of the files since: B's gold patch already in A's base (it
  reverses cleanly there), the fix inside a later base.

Nothing is decided here: `grader tasks validate` lists the pairs and the service
refuses to serve them side by side unless the suite says the host chose to (suite.yaml,
`serve_together`, see docs/tasks.md): serve them apart, in separate phases or splits,
or knowingly together (a real-world suite cut from public releases, say).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader.tasks.model import ExactMatchCheck, Task
from grader.tasks.prepare import _mirror, git, prepare

MIN_QUOTED = 64  # a secret file shorter than this is not looked for inside a public view's text


@dataclass(frozen=True)
class Leak:
    public: str  # the task whose public material holds it
    secret: str  # the task it answers
    what: str  # which secret, where

    def as_dict(self) -> dict[str, str]:
        return {"public": self.public, "secret": self.secret, "what": self.what}


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def public_blobs(task: Task, cache: Path) -> set[str]:
    """Every blob reachable from the task's base (and merge) commit: what its bundle holds."""
    mirror = _mirror(task, cache)
    commits = [c for c in (task.repo.commit, task.repo.merge) if c]
    listed = git("rev-list", "--objects", *commits, cwd=mirror).stdout.decode().split("\n")
    ids = "\n".join(line.split(" ", 1)[0] for line in listed if line.strip())
    kinds = subprocess.run(
        ["git", "cat-file", "--batch-check=%(objecttype) %(objectname)"],
        cwd=mirror,
        input=ids.encode(),
        capture_output=True,
        check=True,
    ).stdout.decode()
    return {line.split()[1] for line in kinds.splitlines() if line.startswith("blob ")}


def secrets_of(task: Task, cache: Path) -> dict[str, str]:
    """blob id -> what it is, for what `task` keeps from its submitters."""
    prepared = prepare(task, cache)
    out: dict[str, str] = {}
    hidden_dir = prepared.hidden / "files"
    for rel, digest in prepared.hidden_manifest().items():
        if digest is not None and (hidden_dir / rel).is_file():
            out[blob_id((hidden_dir / rel).read_bytes())] = f"the hidden test {rel}"
    if isinstance(task.check, ExactMatchCheck):
        for rel, data in prepared.expected_files().items():
            out[blob_id(data)] = f"the expected file {rel}"
    gold = task.gold_patch_text()
    if gold:
        for rel, blob in _gold_blobs(prepared.repo, gold).items():
            out.setdefault(blob, f"the gold patch's {rel}")
    return out


def _gold_blobs(repo: Path, gold: bytes) -> dict[str, str]:
    """The blob ids of the files the gold patch changes, as it leaves them (applied to a
    scratch index of the base checkout: the checkout itself is not touched)."""
    with tempfile.TemporaryDirectory(prefix="grader-leaks-") as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}

        def run(*args: str, data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
            return subprocess.run(["git", *args], cwd=repo, env=env, input=data, capture_output=True, check=False)

        if run("read-tree", "HEAD").returncode:
            return {}
        if run("apply", "--cached", "--whitespace=nowarn", "-", data=gold).returncode:
            return {}
        names = run("diff", "--cached", "--name-only", "--no-renames", "HEAD").stdout.decode().split("\n")
        names = [n for n in names if n]
        if not names:
            return {}
        staged = run("ls-files", "-s", "--", *names).stdout.decode()
        out = {}
        for line in staged.splitlines():
            meta, _, rel = line.partition("\t")
            parts = meta.split()
            if len(parts) >= 2:
                out[rel] = parts[1]
        return out


def _contains_fix(repo: Path, gold: bytes) -> bool:
    """Whether the base checked out at `repo` already holds what `gold` writes: the patch
    reverses cleanly there (checked on a scratch index; nothing is written)."""
    with tempfile.TemporaryDirectory(prefix="grader-leaks-") as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        if subprocess.run(["git", "read-tree", "HEAD"], cwd=repo, env=env, capture_output=True).returncode:
            return False
        check = subprocess.run(
            ["git", "apply", "--cached", "--check", "--reverse", "-"],
            cwd=repo,
            env=env,
            input=gold,
            capture_output=True,
        )
        return check.returncode == 0


def find_leaks(tasks: list[Task], cache: Path) -> list[Leak]:
    """Every (public, secret) pair of `tasks` where the first's public material holds a
    secret of the second, and which secret."""
    if len(tasks) < 2:
        return []
    public = {t.id: public_blobs(t, cache) for t in tasks}
    views = {t.id: json.dumps(t.public_view(), sort_keys=True) for t in tasks}
    leaks: list[Leak] = []
    for b in tasks:
        secrets = {k: v for k, v in secrets_of(b, cache).items() if k not in public[b.id]}
        if not secrets:
            continue
        texts = _secret_texts(b, cache)
        gold = b.gold_patch_text()
        for a in tasks:
            if a.id == b.id:
                continue
            if gold and _contains_fix(prepare(a, cache).repo, gold):
                leaks.append(
                    Leak(a.id, b.id, f"{b.id}'s gold patch is already in {a.id}'s base (its repository bundle)")
                )
            for blob, what in sorted(secrets.items(), key=lambda kv: kv[1]):
                if blob in public[a.id]:
                    leaks.append(Leak(a.id, b.id, f"{what} is in {a.id}'s repository bundle (its base history)"))
            for what, text in texts:
                if text in views[a.id]:
                    leaks.append(Leak(a.id, b.id, f"{what} is quoted in {a.id}'s public view"))
    return leaks


def _secret_texts(task: Task, cache: Path) -> list[tuple[str, str]]:
    prepared = prepare(task, cache)
    out = []
    hidden_dir = prepared.hidden / "files"
    for rel, digest in prepared.hidden_manifest().items():
        path = hidden_dir / rel
        if digest is not None and path.is_file():
            text = path.read_bytes().decode("utf-8", errors="replace").strip()
            if len(text) >= MIN_QUOTED:
                out.append((f"the hidden test {rel}", json.dumps(text)[1:-1]))
    return out


def unchosen(leaks: list[Leak], together: list[list[str]] | str | None) -> list[Leak]:
    """The leaks the host did not choose to serve side by side: `together` is the suite's
    `serve_together` ("all", or pairs of task ids in either order)."""
    if together == "all":
        return []
    allowed = {frozenset(p) for p in together or [] if isinstance(p, list) and len(p) == 2}
    return [leak for leak in leaks if frozenset((leak.public, leak.secret)) not in allowed]


def find_leaks_cached(tasks: list[Task], cache: Path) -> list[Leak]:
    """find_leaks, remembered in the cache under the task definitions' hashes."""
    key = hashlib.sha256(json.dumps(sorted((t.id, t.definition_hash()) for t in tasks)).encode()).hexdigest()[:24]
    path = cache / "leaks" / f"{key}.json"
    if path.is_file():
        return [Leak(**d) for d in json.loads(path.read_text())]
    leaks = find_leaks(tasks, cache)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps([leak.as_dict() for leak in leaks]))
    tmp.rename(path)
    return leaks
