"""The in-container half of a grading run. Standard library only, Python 3.9+.

The host copies this file, the records of its job (jobspec.py, loaded from beside
this file), the report plugin and the job itself (job.json, a jobspec.JobSpec) into a
fresh container and starts it as PID 1, as root with the few capabilities of
SUPERVISOR_CAPS (grader/sandbox/docker/runs.py says why each) under no-new-privileges.
It never executes submitted code itself, and it trusts nothing the submission could have
touched:

1. records the repository's file tree (every entry, ignored files included) and copies
   the protected files aside, in a root-only directory;
2. applies the patch as the unprivileged user with a fixed chain (git apply, git apply
   --3way, patch --fuzz), undoing each failed attempt;
3. reads what the patch really changed from the tree (never from the diff's headers: a
   patch that wrote other paths than its headers name is refused), removes bytecode it
   brought, restores every protected path it changed (test files, conftest.py, *.pth,
   *.dist-info, ...) to the base, then puts the hidden tests in place, root-owned and
   read-only;
4. runs the check as the unprivileged user (no capabilities, new session). For pytest:
   entry-point plugins off, the base commit's configuration, no bytecode from the
   repository, hidden canary tests beside the hidden tests, and the report coming back
   through an inherited pipe from a plugin that signs every record with this run's secret;
5. kills every process left behind, checks the hidden tests are intact and prints one
   JSON document on stdout, which nothing else in the container can reach.

Every path it reads, writes or removes in the repository is opened component by
component from a directory descriptor, never following a symbolic link. What the
submission did, including leaving a tree the supervisor cannot put right, is reported
as data; only a fault of the supervisor itself is reported as "error".
"""

from __future__ import annotations

import base64
import errno
import fnmatch
import hashlib
import hmac
import json
import os
import random
import re
import resource
import secrets
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types
from typing import TYPE_CHECKING, Any, Literal, overload


def _shipped(name: str) -> types.ModuleType:
    """A module shipped beside this file, in the root-only run directory, loaded from its
    path: never by a name the environment's sys.path (the repository, an editable
    install) could answer to."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py")
    spec = importlib.util.spec_from_file_location("grader_" + name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the classes are made
    spec.loader.exec_module(module)
    return module


if TYPE_CHECKING or __package__:  # imported on the host, as grader.supervisor (the tests)
    from grader.jobspec import CheckSpec, JobSpec, ProtectSpec
else:  # run in the container as a script
    _jobspec = _shipped("jobspec")
    CheckSpec, JobSpec, ProtectSpec = _jobspec.CheckSpec, _jobspec.JobSpec, _jobspec.ProtectSpec

JOB_PATH = "/opt/grader/run/job.json"
STAGE_DIR = "/opt/grader/run/base"  # root-only: the protected files as they were before the patch
PYTEST_CONFIGS = (  # in pytest's own order of preference, with the section it reads
    ("pytest.ini", None, ".ini"),
    (".pytest.ini", None, ".ini"),
    ("pyproject.toml", "[tool.pytest.ini_options]", ".toml"),
    ("tox.ini", "[pytest]", ".ini"),
    ("setup.cfg", "[tool:pytest]", ".cfg"),
)
TRUSTED_CONFIG = ".grader-pytest"
# pytest options that would stop the run early or deselect by name: with them the canaries
# could not all run, so none are added (the result says so).
CANARY_BLOCKERS = (
    "-x",
    "--exitfirst",
    "--maxfail",
    "-k",
    "-m",
    "--deselect",
    "--lf",
    "--last-failed",
    "--sw",
    "--stepwise",
    "--ff",
)
MAX_DEPTH = 128
O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
O_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
START = time.monotonic()


class TreeError(Exception):
    """Raised when the repository is in a state the supervisor cannot read or put right,
    which only the submission can have caused: the submission's verdict, not ours."""


class Capture:
    """Drain a pipe in a thread, keeping the head and the tail up to a limit."""

    def __init__(self, fd: int, limit: int):
        self.limit = max(limit, 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self._fd = fd
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        half = self.limit // 2
        while True:
            try:
                chunk = os.read(self._fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            self.total += len(chunk)
            room = half - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail += chunk
                if len(self.tail) > half:
                    del self.tail[: len(self.tail) - half]
        os.close(self._fd)

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def data(self) -> bytes:
        if self.total <= len(self.head) + len(self.tail):
            return bytes(self.head + self.tail)
        dropped = self.total - len(self.head) - len(self.tail)
        return bytes(self.head) + f"\n[... {dropped:,} bytes omitted ...]\n".encode() + bytes(self.tail)

    def complete(self) -> bool:
        return self.total <= len(self.head) + len(self.tail)


def remaining(job: JobSpec) -> float:
    return max(0.0, job.deadline - (time.monotonic() - START))


def kill_everything_else() -> None:
    """SIGKILL every process in the container but this one, then reap them (we are PID 1)."""
    for _ in range(10):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        time.sleep(0.01)
        alive = False
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                alive = True
                break
        if not alive:
            return


def run_as_user(
    job: JobSpec,
    argv: list[str],
    *,
    timeout: float,
    stdout_limit: int,
    separate_stderr: bool = False,
    pass_fds: tuple[int, ...] = (),
    stdin_path: str | None = None,
    env: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run `argv` as the unprivileged user; capture output; kill everything on the way out."""
    stdin_file = open(stdin_path, "rb") if stdin_path else None
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe() if separate_stderr else (None, None)
    started = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=job.repo,
        stdin=stdin_file if stdin_file is not None else subprocess.DEVNULL,
        stdout=out_w,
        stderr=err_w if separate_stderr else out_w,
        user=job.uid,
        group=job.gid,
        extra_groups=[],
        umask=0o022,
        start_new_session=True,
        pass_fds=pass_fds,
        env={**os.environ, **job.env, **(env or {})},
    )
    os.close(out_w)
    if stdin_file is not None:
        stdin_file.close()
    if err_w is not None:
        os.close(err_w)
    out = Capture(out_r, stdout_limit)
    err = Capture(err_r, job.output_limit) if err_r is not None else None
    timed_out = False
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        code = None
    kill_everything_else()
    if code is None:
        code = proc.poll()
    out.join(2)
    if err:
        err.join(2)
    return {
        "exit_code": code,
        "timed_out": timed_out,
        "seconds": round(time.monotonic() - started, 4),
        "out": out,
        "err": err,
    }


def text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def shown(rel: str) -> str:
    """A path as it can be put in JSON and shown: undecodable bytes replaced."""
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


# --- the repository, reached only through directory descriptors -------------------------


def rel_ok(rel: str) -> bool:
    parts = rel.split("/")
    return bool(rel) and not rel.startswith("/") and ".." not in parts and "" not in parts and "." not in parts


def _remove_at(dirfd: int, name: str, depth: int = 0) -> None:
    """Remove `name` in `dirfd` and everything under it, never following a link."""
    try:
        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=dirfd)
        return
    if depth > MAX_DEPTH:
        raise TreeError(f"{shown(name)}: a tree deeper than {MAX_DEPTH} directories")
    fd = os.open(name, O_DIR, dir_fd=dirfd)
    try:
        for child in os.listdir(fd):
            _remove_at(fd, child, depth + 1)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dirfd)


class Tree:
    """The repository. Every path is walked component by component from a directory
    descriptor opened with O_NOFOLLOW: a symbolic link or a file where a directory
    should be ends the walk (or, when writing, is replaced by a real directory)."""

    def __init__(self, root: str, uid: int, gid: int):
        self.root, self.uid, self.gid = root, uid, gid

    @overload
    def _parent(self, rel: str, *, create: Literal[True]) -> int: ...
    @overload
    def _parent(self, rel: str, *, create: bool) -> int | None: ...
    def _parent(self, rel: str, *, create: bool) -> int | None:
        if not rel_ok(rel):
            raise TreeError(f"{shown(rel)!r} is not a path inside the repository")
        fd = os.open(self.root, O_DIR)
        try:
            for part in rel.split("/")[:-1]:
                try:
                    nfd = os.open(part, O_DIR, dir_fd=fd)
                except OSError as exc:
                    if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                        raise
                    if not create:
                        os.close(fd)
                        return None
                    _remove_at(fd, part)
                    os.mkdir(part, 0o755, dir_fd=fd)
                    os.chown(part, self.uid, self.gid, dir_fd=fd, follow_symlinks=False)
                    nfd = os.open(part, O_DIR, dir_fd=fd)
                os.close(fd)
                fd = nfd
            return fd
        except BaseException:
            os.close(fd)
            raise

    def lstat(self, rel: str) -> os.stat_result | None:
        fd = self._parent(rel, create=False)
        if fd is None:
            return None
        try:
            return os.stat(rel.rsplit("/", 1)[-1], dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        finally:
            os.close(fd)

    def read(self, rel: str, limit: int | None = None) -> bytes | None:
        """A regular file's bytes (up to limit + 1), or None for anything else."""
        fd = self._parent(rel, create=False)
        if fd is None:
            return None
        try:
            try:
                ffd = os.open(rel.rsplit("/", 1)[-1], O_FILE, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR, errno.EISDIR, errno.ENXIO):
                    return None
                raise
        finally:
            os.close(fd)
        with os.fdopen(ffd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            return f.read() if limit is None else f.read(limit + 1)

    def remove(self, rel: str) -> None:
        fd = self._parent(rel, create=False)
        if fd is None:
            return
        try:
            _remove_at(fd, rel.rsplit("/", 1)[-1])
        finally:
            os.close(fd)

    def write(self, rel: str, data: bytes, *, mode: int, owner: tuple[int, int]) -> None:
        fd = self._parent(rel, create=True)
        name = rel.rsplit("/", 1)[-1]
        try:
            _remove_at(fd, name)
            ffd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=fd)
        finally:
            os.close(fd)
        with os.fdopen(ffd, "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), mode)  # before the chown: root may not chmod what it no longer owns
            os.fchown(f.fileno(), *owner)

    def symlink(self, rel: str, target: str, *, owner: tuple[int, int]) -> None:
        fd = self._parent(rel, create=True)
        name = rel.rsplit("/", 1)[-1]
        try:
            _remove_at(fd, name)
            os.symlink(target, name, dir_fd=fd)
            os.chown(name, *owner, dir_fd=fd, follow_symlinks=False)
        finally:
            os.close(fd)

    def mkdir(self, rel: str) -> None:
        fd = self._parent(rel, create=True)
        name = rel.rsplit("/", 1)[-1]
        try:
            st = None
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                pass
            if st is not None and stat.S_ISDIR(st.st_mode):
                return
            _remove_at(fd, name)
            os.mkdir(name, 0o755, dir_fd=fd)
            os.chown(name, self.uid, self.gid, dir_fd=fd, follow_symlinks=False)
        finally:
            os.close(fd)

    def walk(self) -> dict[str, tuple[Any, ...]]:
        """Every entry under the root but .git/, ignored files included, by what it is.
        A file is known by its mode, size and modification time: the apply chain cannot
        change a file without changing its time."""
        out: dict[str, tuple[Any, ...]] = {}
        fd = os.open(self.root, O_DIR)
        try:
            self._walk(fd, "", out, 0)
        finally:
            os.close(fd)
        return out

    def _walk(self, fd: int, prefix: str, out: dict[str, Any], depth: int) -> None:
        if depth > MAX_DEPTH:
            raise TreeError(f"{shown(prefix)}: a tree deeper than {MAX_DEPTH} directories")
        for name in sorted(os.listdir(fd)):
            if not prefix and name == ".git":
                continue
            rel = prefix + name
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                out[rel] = ("d",)
                sub = os.open(name, O_DIR, dir_fd=fd)
                try:
                    self._walk(sub, rel + "/", out, depth + 1)
                finally:
                    os.close(sub)
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("f", stat.S_IMODE(st.st_mode), st.st_size, st.st_mtime_ns)
            elif stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", os.readlink(name, dir_fd=fd))
            else:
                out[rel] = ("o", stat.S_IFMT(st.st_mode))


# --- what the submission may not change ---------------------------------------------------

NATIVE = re.compile(r"\.(so|pyd|dylib)(\.\d+)*$")


def is_bytecode(rel: str) -> bool:
    """Compiled code: Python bytecode, or a native extension module. A patch may not
    bring either: neither can be read for what it does, and either runs in the tests."""
    return rel.endswith((".pyc", ".pyo")) or "__pycache__" in rel.split("/") or bool(NATIVE.search(rel))


class Protection:
    """Which paths are restored to the base after the patch, and why."""

    def __init__(
        self,
        spec: ProtectSpec,
        base: dict[str, tuple[Any, ...]],
        *,
        roots: tuple[str, ...] = ("",),
        shadowed: frozenset[str] = frozenset(),
    ):
        self.roots = roots
        self.shadowed = shadowed
        # modules the repository has itself where it is on sys.path: its own, even when
        # they share a name with one of the environment's (packaging's own packaging/)
        self.own = {
            (root, self._top(rel[len(root) :]))
            for root in roots
            for rel in base
            if rel.startswith(root) and self._top(rel[len(root) :])
        }
        self.files = set(spec.files)
        self.names = set(spec.names)
        self.suffixes = tuple(spec.suffixes)
        self.prefixes = tuple(spec.prefixes)
        self.dir_suffixes = tuple(spec.dir_suffixes)
        self.globs = list(spec.globs)
        self.tests = bool(spec.tests)
        self.test_modules = list(spec.test_modules)
        dir_names = set(spec.test_dir_names)
        # A test directory is one named like one (tests/, test/, testing/) that holds a
        # test module or a conftest.py itself at the base: sympy/core/tests/ is, a library
        # package such as django/test/ or numpy/testing/ is not.
        self.test_dirs: set[str] = set()
        candidates = [rel for rel, sig in base.items() if sig[0] == "f"] + sorted(self.files)
        for rel in candidates:
            parts = rel.split("/")
            if (
                len(parts) > 1
                and parts[-2] in dir_names
                and (self._test_module(parts[-1]) or rel in self.files or parts[-1] == "conftest.py")
            ):
                self.test_dirs.add("/".join(parts[:-1]))

    def _test_module(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pat) for pat in self.test_modules)

    @staticmethod
    def _top(rel: str) -> str | None:
        """The top-level module a path under a sys.path directory defines, if any."""
        first = rel.split("/", 1)[0]
        if "/" in rel:
            return first if first.isidentifier() else None
        name = first.split(".", 1)[0]
        return name if name.isidentifier() and first.endswith((".py", ".pyc", ".so", ".pyd")) else None

    def shadows(self, rel: str) -> bool:
        """A module new to the repository, where the repository is on sys.path, with the
        name of one of the interpreter's or the environment's (json.py, hmac.py, pytest/):
        it would be imported in their place, by the runner itself."""
        for root in self.roots:
            if rel.startswith(root):
                top = self._top(rel[len(root) :])
                if top in self.shadowed and (root, top) not in self.own:
                    return True
        return False

    def why(self, rel: str) -> str | None:
        parts = rel.split("/")
        name = parts[-1]
        if rel in self.files:
            return "hidden or listed test"
        if name in self.names or name.endswith(self.suffixes) or name.startswith(self.prefixes):
            return "loaded by the runner or the interpreter"
        if any(p.endswith(self.dir_suffixes) for p in parts):
            return "packaging metadata"
        if self.shadows(rel):
            return "shadows a module of the interpreter or the environment"
        if self.tests:
            if self._test_module(name):
                return "test module"
            if rel in self.test_dirs or any("/".join(parts[:i]) in self.test_dirs for i in range(1, len(parts))):
                return "in a test directory"
        if any(fnmatch.fnmatchcase(rel, g) for g in self.globs):
            return "protected by the task"
        return None


def import_roots(repo: str) -> tuple[tuple[str, ...], frozenset[str]]:
    """Where the repository is on the test process's sys.path (its root, as `python -m`
    puts it there, and what the environment's .pth files add, such as src/), and the
    module names of the interpreter and the environment that a file there would shadow.
    This supervisor runs on the environment's interpreter, so its sys.path is theirs."""
    roots = [""]
    names = set(getattr(sys, "stdlib_module_names", ())) | set(sys.builtin_module_names)
    for entry in sys.path:
        if entry.startswith(repo + "/"):
            roots.append(entry[len(repo) + 1 :].rstrip("/") + "/")
            continue
        if not entry or not os.path.isdir(entry) or entry.startswith(repo):
            continue
        for name in os.listdir(entry):
            top = Protection._top(name if not os.path.isdir(os.path.join(entry, name)) else name + "/x")
            if top:
                names.add(top)
    return tuple(roots), frozenset(names)


def stage(tree: Tree, base: dict[str, tuple[Any, ...]], protection: Protection) -> dict[str, str]:
    """Copy every protected file of the base to a root-only directory: the contents a
    changed protected file goes back to (ignored files such as *.egg-info included)."""
    os.makedirs(STAGE_DIR, 0o700, exist_ok=True)
    staged = {}
    for i, (rel, sig) in enumerate(sorted(base.items())):
        if sig[0] != "f" or protection.why(rel) is None:
            continue
        data = tree.read(rel)
        if data is None:
            continue
        dst = os.path.join(STAGE_DIR, str(i))
        with open(dst, "wb") as f:
            f.write(data)
        staged[rel] = dst
    return staged


def changes(before: dict[str, tuple[Any, ...]], after: dict[str, tuple[Any, ...]]) -> list[str]:
    return sorted(rel for rel in set(before) | set(after) if before.get(rel) != after.get(rel))


def unnamed_changes(changed: list[str], before: dict[str, Any], after: dict[str, Any], touched: set[str]) -> list[str]:
    """Files the apply chain wrote that the diff's headers do not name."""

    def kind(tree: dict[str, Any], rel: str) -> str | None:
        sig = tree.get(rel)
        return sig[0] if sig else None

    return [
        rel
        for rel in changed
        if not (kind(before, rel) in (None, "d") and kind(after, rel) in (None, "d")) and rel not in touched
    ]


def restore_protected(
    owner: tuple[int, int],
    tree: Tree,
    before: dict[str, Any],
    after: dict[str, Any],
    changed: list[str],
    protection: Protection,
    staged: dict[str, str],
) -> tuple[list[str], list[str]]:
    """Remove bytecode the patch brought; put every protected path it changed back."""
    bytecode, restored = [], []
    for rel in changed:
        if is_bytecode(rel) and rel in after and after[rel][0] != "d":
            tree.remove(rel)
            bytecode.append(shown(rel))
    for rel in changed:
        if protection.why(rel) is None:
            continue
        base = before.get(rel)
        if base is None:
            tree.remove(rel)
        elif base[0] == "d":
            tree.mkdir(rel)  # a directory of the base: its protected files are restored one by one
            continue
        elif base[0] == "l":
            tree.symlink(rel, base[1], owner=owner)
        elif base[0] == "f" and rel in staged:
            with open(staged[rel], "rb") as f:
                tree.write(rel, f.read(), mode=base[1], owner=owner)
        else:
            tree.remove(rel)
        restored.append(shown(rel))
    return bytecode, restored


def base_pytest_config(tree: Tree) -> tuple[str, bytes]:
    """The configuration pytest would read at the base commit, saved before the patch so
    that a patched pytest.ini / setup.cfg / pyproject.toml cannot change how tests run."""
    for name, section, suffix in PYTEST_CONFIGS:
        data = tree.read(name)
        if data is not None and (section is None or section.encode() in data):
            return suffix, data
    return ".ini", b"[pytest]\n"


# --- the steps --------------------------------------------------------------------


def snapshot(tree: Tree, paths: list[str]) -> dict[str, Any]:
    """The base state of the paths a patch names: enough to undo a failed attempt."""
    snap: dict[str, Any] = {}
    for rel in paths:
        st = tree.lstat(rel)
        if st is None:
            snap[rel] = None
        elif stat.S_ISLNK(st.st_mode):
            fd = tree._parent(rel, create=False)
            assert fd is not None  # lstat has just found it: its directories are there
            try:
                snap[rel] = ("link", os.readlink(rel.rsplit("/", 1)[-1], dir_fd=fd), st)
            finally:
                os.close(fd)
        elif stat.S_ISREG(st.st_mode):
            snap[rel] = ("file", tree.read(rel), st)
        else:
            snap[rel] = ("other", None, st)
    return snap


def restore_snapshot(tree: Tree, snap: dict[str, Any]) -> None:
    for rel, saved in snap.items():
        for suffix in (".rej", ".orig"):
            tree.remove(rel + suffix)
        if saved is None:
            tree.remove(rel)
            continue
        kind, data, st = saved
        if kind == "link":
            tree.symlink(rel, data, owner=(st.st_uid, st.st_gid))
        elif kind == "file":
            tree.write(rel, data, mode=stat.S_IMODE(st.st_mode), owner=(st.st_uid, st.st_gid))


def apply_patch(job: JobSpec, tree: Tree, result: dict[str, Any]) -> bool:
    with open(job.patch, "rb") as f:
        if not f.read().strip():
            result["apply"] = {"method": "empty", "attempts": []}
            return True
    touched = [p for p in job.touched if rel_ok(p)]
    snap = snapshot(tree, touched)
    index = os.path.join(job.repo, ".git", "index")
    with open(index, "rb") as f:
        index_data = f.read()
    attempts = []
    for method, argv in job.apply_chain:
        # the patch reaches the user's process on stdin: no copy of it is left where a test could read it
        run = run_as_user(
            job, argv, timeout=max(1.0, remaining(job)), stdout_limit=job.output_limit, stdin_path=job.patch
        )
        attempts.append(
            {
                "method": method,
                "command": " ".join(argv),
                "exit_code": run["exit_code"],
                "output": text(run["out"].data()),
            }
        )
        if run["exit_code"] == 0:
            result["apply"] = {"method": method, "attempts": attempts}
            return True
        restore_snapshot(tree, snap)
        tree.write(".git/index", index_data, mode=0o644, owner=(job.uid, job.gid))
        if run["timed_out"]:
            result["timed_out"] = True
            break
    result["apply"] = {"method": None, "attempts": attempts}
    return False


def hidden_manifest(job: JobSpec) -> dict[str, Any]:
    path = os.path.join(job.hidden_dir, "manifest.json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        manifest: dict[str, Any] = json.load(f)
        return manifest


def restore_hidden(job: JobSpec, tree: Tree, manifest: dict[str, Any]) -> list[str]:
    for rel, digest in sorted(manifest.items()):
        if not rel_ok(rel):
            raise ValueError(f"hidden test path {rel!r} is unsafe")
        if digest is None:  # the test patch deletes this file
            tree.remove(rel)
            continue
        with open(os.path.join(job.hidden_dir, "files", rel), "rb") as f:
            data = f.read()
        tree.write(rel, data, mode=0o444, owner=(0, 0))
    return sorted(manifest)


def placed_identity(
    tree: Tree, manifest: dict[str, Any], canaries: dict[str, Any] | None
) -> dict[str, tuple[Any, ...]]:
    """The inode and change time of each root-owned file placed for the run: a file moved
    aside and back while the tests ran keeps its bytes but not its change time."""
    paths = [rel for rel, digest in manifest.items() if digest is not None]
    if canaries and "expect" in canaries:
        paths.append(canaries["path"])
    out = {}
    for rel in paths:
        st = tree.lstat(rel)
        if st is not None:
            out[rel] = (st.st_ino, st.st_ctime_ns)
    return out


def moved(tree: Tree, identity: dict[str, tuple[Any, ...]]) -> list[str]:
    bad = []
    for rel, (ino, ctime) in sorted(identity.items()):
        st = tree.lstat(rel)
        if st is None or (st.st_ino, st.st_ctime_ns) != (ino, ctime):
            bad.append(rel)
    return bad


def lock_test_dirs(job: JobSpec, tree: Tree, manifest: dict[str, Any], canaries: dict[str, Any] | None) -> None:
    """The directories holding the hidden tests and the canaries (up to, not including,
    the repository's root) become root's, 0755, for the run: nothing can be renamed,
    swapped or added beside the tests while pytest collects them, and a directory that is
    not the user's cannot itself be moved (its '..' entry is not theirs to rewrite)."""
    paths = [rel for rel, digest in manifest.items() if digest is not None and rel.endswith(".py")]
    if canaries and "expect" in canaries:
        paths.append(canaries["path"])
    dirs = set()
    for rel in paths:
        parts = rel.split("/")[:-1]
        dirs |= {"/".join(parts[:i]) for i in range(1, len(parts) + 1)}
    for rel in sorted(dirs, key=lambda d: d.count("/"), reverse=True):
        fd = tree._parent(rel + "/x", create=False)
        if fd is None:
            continue
        try:
            os.fchown(fd, 0, 0)
            os.fchmod(fd, 0o755)
        finally:
            os.close(fd)


def tampered(tree: Tree, expected: dict[str, str | None]) -> list[str]:
    """Root-owned files that must be exactly as placed after the run (the hidden tests,
    the canaries): the ones that are not."""
    bad = []
    for rel, digest in sorted(expected.items()):
        st = tree.lstat(rel)
        if st is None:
            if digest is not None:
                bad.append(rel)
            continue
        if digest is None or not stat.S_ISREG(st.st_mode) or st.st_uid != 0:
            bad.append(rel)
            continue
        data = tree.read(rel)
        if data is None or hashlib.sha256(data).hexdigest() != digest:
            bad.append(rel)
    return bad


# --- canaries ---------------------------------------------------------------------------


def _canary_body(rng: random.Random, must_pass: bool) -> str:
    """One test body in a shape tasks' tests have; its assertion holds iff must_pass."""
    shape = rng.randrange(5)
    if shape == 0:
        xs = [rng.randint(-50, 99) for _ in range(rng.randint(3, 6))]
        want = sum(xs) if must_pass else sum(xs) + rng.choice([-2, -1, 1, 3])
        return f"    total = sum({xs!r})\n    assert total == {want}\n"
    if shape == 1:
        word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 8)))
        k = rng.randint(2, 9)
        want = len(word) * k if must_pass else len(word) * k + 1
        return f"    text = {word!r} * {k}\n    assert len(text) == {want}\n"
    if shape == 2:
        seed = secrets.token_hex(6)
        digest = hashlib.sha256(seed.encode()).hexdigest()[:10]
        if not must_pass:
            digest = digest[:-1] + ("0" if digest[-1] != "0" else "1")
        return f"    digest = hashlib.sha256({seed!r}.encode()).hexdigest()\n    assert digest[:10] == {digest!r}\n"
    if shape == 3:
        xs = rng.sample(range(100), rng.randint(4, 7))
        i = rng.randrange(len(xs))
        want = sorted(xs)[i] if must_pass else sorted(xs)[i] + 1
        return f"    items = sorted({xs!r})\n    assert items[{i}] == {want}\n"
    a, b = rng.randint(1, 50), rng.randint(1, 50)
    exc = "ZeroDivisionError" if must_pass else rng.choice(["ValueError", "KeyError", "TypeError"])
    return f"    with pytest.raises({exc}):\n        ({a} + {b}) / 0\n"


def blocks_canaries(arg: str) -> bool:
    if any(arg == b or arg.startswith(b + "=") for b in CANARY_BLOCKERS):
        return True
    # short options run together (-xvs, -kname): any x, k or m among them
    return arg.startswith("-") and not arg.startswith("--") and any(c in arg[1:] for c in "xkm")


def make_canaries(check: CheckSpec, tree: Tree) -> dict[str, Any] | None:
    """A test module of this run only, beside the hidden tests, with tests that must fail
    and tests that must pass. Returns what the report must say of each, or None."""
    if not check.canaries:
        return None
    if check.args is not None:
        args = check.args
    else:  # a command's words, less the interpreter's own "-m pytest"
        words = (check.command or "").split()
        args = [w for i, w in enumerate(words) if not (w == "-m" and words[i + 1 : i + 2] == ["pytest"])]
    for arg in args:
        if blocks_canaries(arg):
            return {"skipped": f"the task's pytest option {arg} could stop the run early or deselect them"}
    rng = random.SystemRandom()
    words = [w for w in check.canary_words if re.fullmatch(r"[a-z][a-z0-9]{1,15}", w)]
    words = sorted(
        set(words)
        | {
            "value",
            "values",
            "empty",
            "result",
            "basic",
            "single",
            "order",
            "default",
            "missing",
            "mixed",
            "simple",
            "large",
            "small",
            "edge",
            "round",
            "split",
            "case",
        }
    )
    folder = check.canary_dir or ""
    while True:
        module = "test_" + "_".join(rng.sample(words, 2)) + ".py"
        rel = f"{folder}/{module}" if folder else module
        if tree.lstat(rel) is None:
            break
    expect: dict[str, str] = {}
    names: set[str] = set()
    kinds = [True] * rng.randint(2, 3) + [False] * rng.randint(2, 3)
    rng.shuffle(kinds)
    source = "import hashlib\n\nimport pytest\n"
    for must_pass in kinds:
        while True:
            name = "test_" + "_".join(rng.sample(words, rng.randint(1, 3)))
            if name not in names:
                break
        names.add(name)
        source += f"\n\ndef {name}():\n" + _canary_body(rng, must_pass)
        expect[f"{rel}::{name}"] = "passed" if must_pass else "failed"
    source = source.replace(
        "import hashlib\n\nimport pytest\n", "import hashlib\n\nimport pytest\n" + borrowed_imports(check, tree), 1
    )
    data = source.encode()
    tree.write(rel, data, mode=0o444, owner=(0, 0))
    return {"path": rel, "digest": hashlib.sha256(data).hexdigest(), "expect": expect}


def borrowed_imports(check: CheckSpec, tree: Tree) -> str:
    """The hidden tests' own module-level imports, so the canaries import the code under
    test as the tests do and cannot be told apart by what they touch. An import that
    fails breaks the canaries with the tests that need it: the run fails either way."""
    import ast

    lines: list[str] = []
    for rel in check.canary_sources:
        data = tree.read(rel)
        if data is None:
            continue
        try:
            body = ast.parse(data).body
        except (SyntaxError, ValueError):
            continue
        for node in body:
            if isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom) and not node.level):
                line = ast.unparse(node) if hasattr(ast, "unparse") else None
                if line and "__future__" not in line and line not in lines:
                    lines.append(line)
    return "".join(f"{line}  # noqa\n" for line in lines[:40])


# --- the report channel -------------------------------------------------------------------


def read_report(data: bytes, key: bytes) -> dict[str, Any]:
    """Check each session's chain of signatures line by line (a command may run pytest
    more than once); fold the records into outcomes (a test seen in several sessions
    keeps its worst), and keep what the plugin saw of the process (`integrity`)."""
    rep: dict[str, Any] = {
        "forged": None,
        "end": None,
        "ends": 0,
        "sessions": 0,
        "phases": {},
        "collect_errors": [],
        "integrity": [],
    }
    chains: dict[str, bytes] = {}
    ended: set[str] = set()
    # the plugin writes one record per test and phase, and nothing after its last word:
    # anything else came through it from the test process
    for n, line in enumerate(data.split(b"\n"), 1):
        if not line:
            continue
        body, _, mac = line.rpartition(b"\t")
        try:
            rec = json.loads(body)
            sid = str(rec["s"])
        except (ValueError, KeyError, TypeError):
            rep["forged"] = f"line {n} of the report channel does not carry this run's signature"
            break
        want = hmac.new(key, chains.get(sid, b"") + body, hashlib.sha256).hexdigest().encode()
        if not body or not hmac.compare_digest(want, mac):
            rep["forged"] = f"line {n} of the report channel does not carry this run's signature"
            break
        chains[sid] = mac
        if sid in ended:
            rep["forged"] = f"line {n} of the report came after pytest's last word"
            break
        kind = rec.get("t")
        if kind == "end":
            ended.add(sid)
            rep["end"] = rec if rep["end"] is None or rec.get("exit") != 0 else rep["end"]
        elif kind == "collect":
            rep["collect_errors"].append(rec["id"])
        elif kind == "integrity":
            rep["integrity"].append(str(rec.get("what")))
        elif kind == "test":
            phases = rep["phases"].setdefault((sid, rec["id"]), {})
            if rec["when"] in phases:
                rep["forged"] = f"line {n} of the report repeats the {rec['when']} of {rec['id']}"
                break
            phases[rec["when"]] = rec["outcome"]
    rep["sessions"], rep["ends"] = len(chains), len(ended)
    outcomes: dict[str, str] = {}
    rank = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
    for (_, tid), ph in rep.pop("phases").items():
        setup, call, teardown = ph.get("setup"), ph.get("call"), ph.get("teardown")
        if setup == "failed":
            outcome = "error"
        elif call == "failed":
            outcome = "failed"
        elif teardown == "failed":
            outcome = "error"
        elif "skipped" in (setup, call):
            outcome = "skipped"
        elif call == "passed":
            outcome = "passed"
        else:
            outcome = "error"
        if tid not in outcomes or rank[outcome] > rank[outcomes[tid]]:
            outcomes[tid] = outcome
    rep["outcomes"] = outcomes
    return rep


def write_plugin(job: JobSpec) -> tuple[str, str]:
    """The report plugin under a module name of this run only, in a root-owned directory
    on the environment's own sys.path (its site-packages, where this interpreter finds
    it too), so a command that sets PYTHONPATH still loads it; also returned as a
    directory to put on PYTHONPATH where site-packages cannot be written."""
    module = "grader_report_" + secrets.token_hex(8)
    data = base64.b64decode(job.report_plugin)
    import sysconfig

    purelib = sysconfig.get_paths().get("purelib")
    dirs = [purelib] if purelib and os.path.isdir(purelib) else []
    d = tempfile.mkdtemp(prefix=".grader-", dir="/tmp")
    os.chmod(d, 0o755)
    for where in dirs + [d]:
        try:
            with open(os.path.join(where, module + ".py"), "wb") as f:
                f.write(data)
                os.fchmod(f.fileno(), 0o444)
        except OSError:
            continue
    return d, module


class Channel:
    """The report channel of one check: the secret (and the plugin's settings) in a
    root-only file the test process gets only as a descriptor, the report on a pipe."""

    def __init__(self, job: JobSpec, settings: dict[str, Any]):
        self.key = secrets.token_bytes(32)
        fd, path = tempfile.mkstemp(prefix=".grader-key-", dir="/opt/grader/run")
        os.write(fd, self.key + json.dumps(settings).encode())
        os.close(fd)
        self.key_fd = os.open(path, os.O_RDONLY)
        os.unlink(path)
        self.rep_r, self.rep_w = os.pipe()
        self.report = Capture(self.rep_r, job.report_limit)
        self.limit = job.report_limit

    def env(self) -> dict[str, Any]:
        return {"GRADER_REPORT_FD": str(self.rep_w), "GRADER_KEY_FD": str(self.key_fd)}

    def fds(self) -> tuple[int, int]:
        return (self.rep_w, self.key_fd)

    def close(self) -> None:
        os.close(self.rep_w)
        os.close(self.key_fd)

    def read(self, canaries: dict[str, Any] | None) -> dict[str, Any]:
        self.report.join(5)
        if not self.report.complete():
            return {"problem": f"the test report was larger than {self.limit:,} bytes"}
        rep = read_report(self.report.data(), self.key)
        if canaries and "expect" in canaries:
            canaries["got"] = {tid: rep["outcomes"].pop(tid, None) for tid in canaries["expect"]}
        return rep


def plugin_settings(job: JobSpec, canaries: dict[str, Any] | None) -> dict[str, Any]:
    tests = sorted(set(job.check.trusted_tests))
    return {
        "repo": job.repo,
        "tests": tests,
        "canaries": [canaries["path"]] if canaries and "expect" in canaries else [],
    }


def check_env(job: JobSpec) -> dict[str, Any]:
    """What every check command runs with: no plugin auto-loading, and bytecode read only
    from a root-owned cache (never from the repository's __pycache__, never written)."""
    os.makedirs(job.pycache, 0o755, exist_ok=True)
    return {
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTEST_ADDOPTS": "",
        "PYTHONPYCACHEPREFIX": job.pycache,
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def run_pytest(job: JobSpec, tree: Tree, result: dict[str, Any], canaries: dict[str, Any] | None) -> None:
    check = job.check
    if job.pytest_config is None or check.args is None:
        raise ValueError("a pytest check needs its arguments and the base commit's configuration")
    suffix, data = job.pytest_config
    cfg = TRUSTED_CONFIG + suffix
    tree.write(cfg, base64.b64decode(data), mode=0o444, owner=(0, 0))
    plugin_dir, module = write_plugin(job)
    channel = Channel(job, plugin_settings(job, canaries))
    args = list(check.args)
    if canaries and "expect" in canaries:
        args = [canaries["path"]] + args  # first: imported before any module of the submission's
    argv = [
        "python",
        "-m",
        "pytest",
        "-c",
        cfg,
        "--rootdir",
        job.repo,
        "-p",
        "no:cacheprovider",
        "-p",
        module,
        "-o",
        "console_output_style=classic",
    ]
    for plugin in check.plugins:
        argv += ["-p", plugin]
    env = {**check_env(job), "PYTHONPATH": plugin_dir, **channel.env()}
    try:
        run = run_as_user(
            job, argv + args, timeout=remaining(job), stdout_limit=job.output_limit, pass_fds=channel.fds(), env=env
        )
    finally:
        channel.close()
    finish_run(result, run)
    result["output"] = text(run["out"].data())
    result["report"] = channel.read(canaries)


def run_command(job: JobSpec, tree: Tree, result: dict[str, Any], canaries: dict[str, Any] | None) -> None:
    """A `runner: command` check. If the command runs pytest, pytest loads the report
    plugin too (through PYTEST_ADDOPTS) and runs the canaries: its signed report then
    decides, as for the pytest runner; a command that runs no pytest is decided by its
    JUnit file, or its exit status alone (the task's public view says which)."""
    check = job.check
    if check.command is None:
        raise ValueError("a command check needs its command")
    plugin_dir, module = write_plugin(job)
    channel = Channel(job, plugin_settings(job, canaries))
    addopts = ["-p", "no:cacheprovider", "-p", module]
    if canaries and "expect" in canaries:
        addopts.append(canaries["path"])
    env = {**check_env(job), "PYTEST_ADDOPTS": " ".join(addopts), "PYTHONPATH": plugin_dir, **channel.env()}
    try:
        run = run_as_user(
            job,
            ["sh", "-c", check.command],
            timeout=remaining(job),
            stdout_limit=job.output_limit,
            pass_fds=channel.fds(),
            env=env,
        )
    finally:
        channel.close()
    finish_run(result, run)
    result["output"] = text(run["out"].data())
    rep = channel.read(canaries)
    if rep.get("sessions") or rep.get("forged") or rep.get("problem"):
        result["report"] = rep
    if check.junit:
        junit = read_files(tree, [check.junit], job.report_limit).get(check.junit)
        result["junit"] = text(base64.b64decode(junit)) if junit else None


def finish_run(result: dict[str, Any], run: dict[str, Any]) -> None:
    result["exit_code"] = run["exit_code"]
    result["timed_out"] = result.get("timed_out", False) or run["timed_out"]
    result["check_seconds"] = run["seconds"]


def read_files(tree: Tree, paths: list[str], limit: int) -> dict[str, Any]:
    out = {}
    for rel in paths:
        data = tree.read(rel, limit) if rel_ok(rel) else None
        out[rel] = base64.b64encode(data).decode() if data is not None else None
    return out


def run_check(job: JobSpec, tree: Tree, result: dict[str, Any], canaries: dict[str, Any] | None) -> None:
    check = job.check
    kind = check.kind
    if kind == "exact_match":
        result["files"] = read_files(tree, check.paths, job.report_limit)
        return
    if kind == "pytest":
        run_pytest(job, tree, result, canaries)
        return
    if kind == "command":
        run_command(job, tree, result, canaries)
        return
    if kind == "output":
        if check.command is None:
            raise ValueError("an output check needs its command")
        run = run_as_user(
            job,
            ["sh", "-c", check.command],
            timeout=remaining(job),
            stdout_limit=job.report_limit,
            separate_stderr=True,
            env=check_env(job),
        )
        finish_run(result, run)
        result["stdout"] = base64.b64encode(run["out"].data()).decode()
        result["stdout_complete"] = run["out"].complete()
        result["output"] = text(run["err"].data())
        return
    raise ValueError(f"unknown check kind {kind!r}")


# What a file tree the submission shaped can make a file operation fail with. Running out
# of descriptors or memory, or a process limit, stays a fault of ours.
TREE_ERRNOS = {
    errno.ENOENT,
    errno.ENOTDIR,
    errno.EISDIR,
    errno.ELOOP,
    errno.ENAMETOOLONG,
    errno.EEXIST,
    errno.ENOTEMPTY,
    errno.ENOSPC,
    errno.EDQUOT,
    errno.EMLINK,
    errno.EFBIG,
    errno.EACCES,
    errno.EPERM,
    errno.ENXIO,
    errno.EINVAL,
    errno.EROFS,
    errno.ETXTBSY,
    errno.EBUSY,
}


class Stage:
    """Names the step a TreeError (or an OSError the tree caused) came from: during the
    apply it is the patch's failure to apply, after it the submission's verdict, not ours."""

    def __init__(self, result: dict[str, Any], name: str):
        self.result, self.name = result, name

    def __enter__(self) -> Stage:
        self.t = time.monotonic()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: types.TracebackType | None
    ) -> bool:
        self.result["durations"][self.name] = round(time.monotonic() - self.t, 4)
        if isinstance(exc, TreeError) or (isinstance(exc, OSError) and exc.errno in TREE_ERRNOS):
            self.result["tree_error"] = {"stage": self.name, "message": f"{type(exc).__name__}: {exc}"}
            return True
        return False


def main() -> int:
    result: dict[str, Any] = {"durations": {}}
    try:
        with open(JOB_PATH) as f:
            job = JobSpec.from_json(f.read())
        if job.nproc_limit:
            # Inherited by every child; counted per user, so it binds the unprivileged
            # user's processes only (root, which this is, is exempt). Set only where the
            # kernel is the sandbox's own: on a shared kernel the count is host-wide.
            resource.setrlimit(resource.RLIMIT_NPROC, (job.nproc_limit, job.nproc_limit))
        tree = Tree(job.repo, job.uid, job.gid)
        manifest = hidden_manifest(job)
        t = time.monotonic()
        if job.check.kind == "pytest":
            suffix, data = base_pytest_config(tree)
            job.pytest_config = (suffix, base64.b64encode(data).decode())
        before = tree.walk()
        roots, shadowed = import_roots(job.repo)
        protection = Protection(job.protect, before, roots=roots, shadowed=shadowed)
        # the task's own test code, trusted by the report plugin's watch: restored to the base
        job.check.trusted_tests = sorted(
            protection.files
            | {rel for rel in before if rel.endswith("conftest.py")}
            | {d + "/" for d in protection.test_dirs}
        )
        staged = stage(tree, before, protection)
        result["durations"]["snapshot"] = round(time.monotonic() - t, 4)

        applied = False
        with Stage(result, "apply"):
            applied = apply_patch(job, tree, result)
        if applied and "tree_error" not in result:
            with Stage(result, "place_tests"):
                after = tree.walk()
                changed = changes(before, after)
                stray = unnamed_changes(changed, before, after, set(job.touched))
                if stray:
                    applied = False
                    listed = ", ".join(shown(r) for r in stray[:5]) + (" ..." if len(stray) > 5 else "")
                    result["apply_refused"] = f"it wrote files its headers do not name: {listed}"
                else:
                    result["bytecode_removed"], result["protected_restored"] = restore_protected(
                        (job.uid, job.gid), tree, before, after, changed, protection, staged
                    )
                    result["restored"] = restore_hidden(job, tree, manifest)
        result["applied"] = applied
        if applied and "tree_error" not in result and not result.get("timed_out"):
            canaries = None
            with Stage(result, "check"):
                if job.check.kind in ("pytest", "command"):
                    canaries = make_canaries(job.check, tree)
                identity = placed_identity(tree, manifest, canaries)
                lock_test_dirs(job, tree, manifest, canaries)
                run_check(job, tree, result, canaries)
            kill_everything_else()
            if "tree_error" not in result:
                with Stage(result, "verify"):
                    expected = dict(manifest)
                    if canaries and "expect" in canaries:
                        expected[canaries["path"]] = canaries["digest"]
                    result["tampered_files"] = tampered(tree, expected) + moved(tree, identity)
            if canaries is not None:
                result["canaries"] = {k: v for k, v in canaries.items() if k in ("expect", "got", "skipped")}
    except Exception:
        result["error"] = traceback.format_exc()
    result["durations"]["supervisor"] = round(time.monotonic() - START, 4)
    sys.stdout.write(json.dumps(result))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
