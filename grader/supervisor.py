"""The in-container half of a grading run. Standard library only, Python 3.9+.

The host copies this file and a job description into a fresh container and starts it
as PID 1. It runs as root with a handful of capabilities (CHOWN, DAC_OVERRIDE, SETUID,
SETGID, KILL) under no-new-privileges, and it never executes submitted code itself:

1. saves the base commit's pytest configuration and the files the patch will touch;
2. applies the patch as the unprivileged user with a fixed chain (git apply, git apply
   --3way, patch --fuzz), restoring the touched files between attempts;
3. reverts runner-visible files the patch added or changed (conftest.py and friends),
   then puts the hidden tests back in place, root-owned and read-only;
4. runs the check command as the unprivileged user (no capabilities, new session) with
   its JUnit report streamed through a named pipe, not a file the submission could forge;
5. kills every process left behind, verifies the hidden tests are still intact, and
   prints one JSON document on stdout, which nothing else in the container can reach.

Everything the submission does is reported as data. An exception here is a fault of
the grading machinery and is reported as such ("error").
"""

from __future__ import annotations

import base64
import errno
import hashlib
import json
import os
import resource
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import traceback

JOB_PATH = "/opt/grader/run/job.json"
PYTEST_CONFIGS = (  # in pytest's own order of preference, with the section it reads
    ("pytest.ini", None, ".ini"),
    (".pytest.ini", None, ".ini"),
    ("pyproject.toml", "[tool.pytest.ini_options]", ".toml"),
    ("tox.ini", "[pytest]", ".ini"),
    ("setup.cfg", "[tool:pytest]", ".cfg"),
)
TRUSTED_CONFIG = ".grader-pytest"
START = time.monotonic()


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


def remaining(job: dict) -> float:
    return max(0.0, job["deadline"] - (time.monotonic() - START))


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


def run_as_user(job: dict, argv: list[str], *, timeout: float, stdout_limit: int,
                separate_stderr: bool = False, pass_fds: tuple = (), stdin_path: str | None = None) -> dict:
    """Run `argv` as the unprivileged user; capture output; kill everything on the way out."""
    stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe() if separate_stderr else (None, None)
    started = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=job["repo"],
        stdin=stdin,
        stdout=out_w,
        stderr=err_w if separate_stderr else out_w,
        user=job["uid"],
        group=job["gid"],
        extra_groups=[],
        umask=0o022,
        start_new_session=True,
        pass_fds=pass_fds,
        env={**os.environ, **job["env"]},
    )
    os.close(out_w)
    if stdin_path:
        stdin.close()
    if err_w is not None:
        os.close(err_w)
    out = Capture(out_r, stdout_limit)
    err = Capture(err_r, job["output_limit"]) if err_r is not None else None
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


# --- the repository's files -------------------------------------------------------

def rel_ok(rel: str) -> bool:
    parts = rel.split("/")
    return bool(rel) and not rel.startswith("/") and ".." not in parts and ".git" not in parts


def remove_path(path: str) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def ensure_parents(repo: str, rel: str, uid: int, gid: int) -> str:
    """Make every parent of `rel` a real directory, replacing symlinks and files the
    submission may have put in the way, so that nothing we write follows a link."""
    cur = repo
    for part in rel.split("/")[:-1]:
        cur = os.path.join(cur, part)
        try:
            st = os.lstat(cur)
            if stat.S_ISDIR(st.st_mode):
                continue
            os.unlink(cur)
        except FileNotFoundError:
            pass
        os.mkdir(cur, 0o755)
        os.chown(cur, uid, gid)
    return os.path.join(repo, rel)


def place_file(repo: str, rel: str, data: bytes, *, mode: int, uid: int, gid: int, owner: tuple[int, int]) -> None:
    path = ensure_parents(repo, rel, uid, gid)
    remove_path(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        os.fchmod(f.fileno(), mode)  # before the chown: root may not chmod what it no longer owns
        os.fchown(f.fileno(), *owner)


def snapshot(repo: str, paths: list[str]) -> dict:
    """The base state of the paths a patch touches: enough to undo a failed attempt."""
    snap = {}
    for rel in paths:
        path = os.path.join(repo, rel)
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            snap[rel] = None
            continue
        if stat.S_ISLNK(st.st_mode):
            snap[rel] = ("link", os.readlink(path), st)
        elif stat.S_ISREG(st.st_mode):
            with open(path, "rb") as f:
                snap[rel] = ("file", f.read(), st)
        else:
            snap[rel] = ("other", None, st)
    index = os.path.join(repo, ".git", "index")
    with open(index, "rb") as f:
        snap[".git/index"] = ("index", f.read(), os.stat(index))
    return snap


def restore_snapshot(repo: str, snap: dict, uid: int, gid: int) -> None:
    for rel, saved in snap.items():
        path = os.path.join(repo, rel)
        for suffix in (".rej", ".orig"):
            if rel != ".git/index":
                remove_path(path + suffix)
        if saved is None:
            remove_path(path)
            continue
        kind, data, st = saved
        if kind == "other":
            continue
        if kind == "index":
            with open(path, "wb") as f:
                f.write(data)
            continue
        ensure_parents(repo, rel, uid, gid)
        remove_path(path)
        if kind == "link":
            os.symlink(data, path)
            os.lchown(path, st.st_uid, st.st_gid)
        else:
            place_file(repo, rel, data, mode=stat.S_IMODE(st.st_mode), uid=uid, gid=gid,
                       owner=(st.st_uid, st.st_gid))


def base_pytest_config(repo: str) -> tuple[str, bytes]:
    """The configuration pytest would read at the base commit, saved before the patch so
    that a patched pytest.ini / setup.cfg / pyproject.toml cannot change how tests run."""
    for name, section, suffix in PYTEST_CONFIGS:
        path = os.path.join(repo, name)
        if not os.path.isfile(path) or os.path.islink(path):
            continue
        with open(path, "rb") as f:
            data = f.read()
        if section is None or section.encode() in data:
            return suffix, data
    return ".ini", b"[pytest]\n"


# --- the steps --------------------------------------------------------------------

def apply_patch(job: dict, result: dict) -> bool:
    repo, patch = job["repo"], job["patch"]
    if os.path.getsize(patch) == 0 or not open(patch, "rb").read().strip():
        result["apply"] = {"method": "empty", "attempts": []}
        return True
    touched = [p for p in job["touched"] if rel_ok(p)]
    snap = snapshot(repo, touched)
    attempts = []
    for method, argv in job["apply_chain"]:
        # the patch reaches the user's process on stdin: no copy of it is left where a test could read it
        run = run_as_user(job, argv, timeout=max(1.0, remaining(job)), stdout_limit=job["output_limit"],
                          stdin_path=patch)
        attempts.append({"method": method, "command": " ".join(argv), "exit_code": run["exit_code"],
                         "output": text(run["out"].data())})
        if run["exit_code"] == 0:
            result["apply"] = {"method": method, "attempts": attempts}
            return True
        restore_snapshot(repo, snap, job["uid"], job["gid"])
        if run["timed_out"]:
            result["timed_out"] = True
            break
    result["apply"] = {"method": None, "attempts": attempts}
    return False


def changed_paths(job: dict) -> set[str]:
    """What the patch changed, in git's eyes as well as unidiff's."""
    paths = set(job["touched"])
    run = run_as_user(job, ["git", "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames"],
                      timeout=min(30.0, max(1.0, remaining(job))), stdout_limit=16 * 1024 * 1024, separate_stderr=True)
    if run["exit_code"] == 0 and run["out"].complete():
        for entry in run["out"].data().split(b"\0"):
            if len(entry) > 3:
                paths.add(entry[3:].decode("utf-8", errors="surrogateescape"))
    return {p for p in paths if rel_ok(p)}


def neutralize(job: dict, changed: set[str], hidden: set[str]) -> list[str]:
    """Revert files a test runner or the interpreter would pick up on its own."""
    names, suffixes = set(job["runner_files"]), tuple(job["runner_suffixes"])
    reverted = []
    for rel in sorted(changed - hidden):
        base = rel.rsplit("/", 1)[-1]
        if base not in names and not base.endswith(suffixes):
            continue
        show = run_as_user(job, ["git", "show", "HEAD:" + rel], timeout=30, stdout_limit=64 * 1024 * 1024,
                           separate_stderr=True)
        if show["exit_code"] == 0 and show["out"].complete():
            place_file(job["repo"], rel, show["out"].data(), mode=0o644, uid=job["uid"], gid=job["gid"], owner=(0, 0))
        else:
            remove_path(os.path.join(job["repo"], rel))
        reverted.append(rel)
    return reverted


def hidden_manifest(job: dict) -> dict:
    path = os.path.join(job["hidden_dir"], "manifest.json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def restore_hidden(job: dict, manifest: dict) -> list[str]:
    for rel, digest in sorted(manifest.items()):
        if not rel_ok(rel):
            raise ValueError(f"hidden test path {rel!r} is unsafe")
        if digest is None:  # the test patch deletes this file
            remove_path(os.path.join(job["repo"], rel))
            continue
        with open(os.path.join(job["hidden_dir"], "files", rel), "rb") as f:
            data = f.read()
        place_file(job["repo"], rel, data, mode=0o444, uid=job["uid"], gid=job["gid"], owner=(0, 0))
    return sorted(manifest)


def tampered(job: dict, manifest: dict) -> list[str]:
    bad = []
    for rel, digest in sorted(manifest.items()):
        path = os.path.join(job["repo"], rel)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            if digest is not None:
                bad.append(rel)
            continue
        if digest is None or not stat.S_ISREG(st.st_mode) or st.st_uid != 0:
            bad.append(rel)
            continue
        with open(path, "rb") as f:
            if hashlib.sha256(f.read()).hexdigest() != digest:
                bad.append(rel)
    return bad


def read_files(job: dict, paths: list[str], limit: int) -> dict:
    out = {}
    for rel in paths:
        if not rel_ok(rel):
            out[rel] = None
            continue
        try:
            fd = os.open(os.path.join(job["repo"], rel), os.O_RDONLY | os.O_NOFOLLOW)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR, errno.EISDIR):
                out[rel] = None
                continue
            raise
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                out[rel] = None
                continue
            data = f.read(limit + 1)
        out[rel] = base64.b64encode(data[: limit + 1]).decode()
    return out


def report_fifo(job: dict) -> tuple[str, tuple[int, int]]:
    """A named pipe for the JUnit report, in a directory only root can list.

    The report streams to the supervisor as pytest writes it: there is no file a
    submission could overwrite before it is read. The supervisor holds a write end
    open so the reader sees end-of-file only after the test run is over.
    """
    d = tempfile.mkdtemp(prefix=".grader-", dir="/tmp")
    os.chmod(d, 0o711)
    fifo = os.path.join(d, f"report-{secrets.token_hex(8)}.xml")
    os.mkfifo(fifo, 0o600)
    os.chown(fifo, job["uid"], job["gid"])
    rd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    wr = os.open(fifo, os.O_WRONLY)
    os.set_blocking(rd, True)
    return fifo, (rd, wr)


def run_check(job: dict, result: dict) -> None:
    check = job["check"]
    kind = check["kind"]
    if kind == "exact_match":
        result["files"] = read_files(job, check["paths"], job["report_limit"])
        return
    report = None
    if kind == "pytest":
        suffix, data = job["pytest_config"]
        cfg = TRUSTED_CONFIG + suffix
        place_file(job["repo"], cfg, base64.b64decode(data), mode=0o444, uid=job["uid"], gid=job["gid"], owner=(0, 0))
        fifo, hold = report_fifo(job)
        argv = [
            "python", "-m", "pytest", "-c", cfg, "--rootdir", job["repo"], "-p", "no:cacheprovider",
            "-o", "junit_family=xunit1", f"--junitxml={fifo}", "-o", "console_output_style=classic",
        ] + check["args"]
        report = Capture(hold[0], job["report_limit"])
        run = run_as_user(job, argv, timeout=remaining(job), stdout_limit=job["output_limit"])
        os.close(hold[1])
        report.join(2)
    elif kind == "command":
        run = run_as_user(job, ["sh", "-c", check["command"]], timeout=remaining(job), stdout_limit=job["output_limit"])
    elif kind == "output":
        run = run_as_user(job, ["sh", "-c", check["command"]], timeout=remaining(job),
                          stdout_limit=job["report_limit"], separate_stderr=True)
    else:
        raise ValueError(f"unknown check kind {kind!r}")

    result["exit_code"] = run["exit_code"]
    result["timed_out"] = result.get("timed_out", False) or run["timed_out"]
    result["check_seconds"] = run["seconds"]
    if kind == "output":
        result["stdout"] = base64.b64encode(run["out"].data()).decode()
        result["stdout_complete"] = run["out"].complete()
        result["output"] = text(run["err"].data())
    else:
        result["output"] = text(run["out"].data())
    if report is not None:
        result["junit"] = text(report.data()) if report.complete() else None
    if kind == "command" and check.get("junit"):
        junit = read_files(job, [check["junit"]], job["report_limit"]).get(check["junit"])
        result["junit"] = text(base64.b64decode(junit)) if junit else None


def main() -> int:
    result: dict = {"durations": {}}
    try:
        with open(JOB_PATH) as f:
            job = json.load(f)
        repo = job["repo"]
        if job.get("nproc_limit"):
            # Inherited by every child; counted per user, so it binds the unprivileged
            # user's processes only (root, which this is, is exempt). Set only where the
            # kernel is the sandbox's own: on a shared kernel the count is host-wide.
            resource.setrlimit(resource.RLIMIT_NPROC, (job["nproc_limit"], job["nproc_limit"]))
        manifest = hidden_manifest(job)
        if job["check"]["kind"] == "pytest":
            suffix, data = base_pytest_config(repo)
            job["pytest_config"] = (suffix, base64.b64encode(data).decode())

        t = time.monotonic()
        applied = apply_patch(job, result)
        result["durations"]["apply"] = round(time.monotonic() - t, 4)
        if applied:
            t = time.monotonic()
            changed = changed_paths(job)
            result["neutralized"] = neutralize(job, changed, set(manifest))
            result["restored"] = restore_hidden(job, manifest)
            result["durations"]["place_tests"] = round(time.monotonic() - t, 4)
            if not result.get("timed_out"):
                t = time.monotonic()
                run_check(job, result)
                result["durations"]["check"] = round(time.monotonic() - t, 4)
                result["tampered"] = tampered(job, manifest)
        result["applied"] = applied
    except Exception:
        result["error"] = traceback.format_exc()
    result["durations"]["supervisor"] = round(time.monotonic() - START, 4)
    sys.stdout.write(json.dumps(result))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
