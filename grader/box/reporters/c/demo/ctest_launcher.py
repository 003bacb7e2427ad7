"""The C/C++ reporter: a root-owned launcher that runs every ctest test itself.

Standard library only (Python 3.9+). It runs as root in the container, in the supervisor's
process tree (the supervisor runs it, or imports it and calls `main`), never as the user the
submitted code runs as. ctest itself is not the runner: a test process that shares a uid with
ctest can kill it, write its JUnit file, replace the executables of the tests still to come or
ptrace them. Instead:

1. the build (cmake + make) has already run as the unprivileged user (the task's command);
2. the launcher asks ctest for the test list (`ctest --show-only=json-v1`, run as the
   unprivileged user: it executes the build tree's CTestTestfile.cmake scripts) and parses it
   strictly: names, commands, working directories, the properties that decide an outcome;
3. it hands the repository and the build tree to root (chown, write bits off, set-id bits off),
   so that no test can change a test executable, a data file or the list for the tests after it;
   each test's working directory stays open for new files (root-owned, mode 1777: nothing that
   was there can be removed or replaced) and what a test leaves there is removed after it; each
   test gets a fresh private TMPDIR/HOME of its own;
4. it runs each test itself, as the unprivileged user, in a new session, with a timeout; after
   each test it kills every process of that user, so nothing a test leaves behind can touch (or
   ptrace) the next one;
5. the outcome is the process's exit status as ctest would read it (WILL_FAIL,
   SKIP_RETURN_CODE, FAIL_REGULAR_EXPRESSION, SKIP_REGULAR_EXPRESSION), except that a test killed
   by a signal always fails and a PASS_REGULAR_EXPRESSION test needs both the expected output AND
   exit status 0 (output alone is what code under test can print);
6. each outcome goes out as a signed record on the report channel of CONTRACT.md (the key read
   from GRADER_KEY_FD with pread at offset 0, both variables removed from the environment, the
   report descriptor not inheritable; the tests never get either descriptor).

Usage (root):  GRADER_REPORT_FD=N GRADER_KEY_FD=M python3 ctest_launcher.py \
                   --build-dir build [--repo /work/repo] [--user 1000:1000] [--timeout 300] \
                   [--test NAME ...] [--no-freeze] [--thaw]
With --automake the list comes from `make -k check` run as the unprivileged user with every log
driver replaced by am_record_driver.py (which records each test's command and runs nothing); the
tests are then run the same way and judged as automake's test-driver judges them.

Test ids are the names ctest lists (automake: the test's name, prefixed by its sub-directory).
The launcher's stdout is each test's output, framed with
lines that carry no weight: only the signed records decide.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import re
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

Test = dict[str, Any]  # name, command (list of strings or None), props (the ctest properties)

LIST_LIMIT = 16 * 1024 * 1024  # bytes of `ctest --show-only=json-v1` output accepted
OUTPUT_LIMIT = 1024 * 1024  # bytes of one test's output kept (for the regular expressions)
SHOWN_LIMIT = 64 * 1024  # bytes of one test's output echoed to the launcher's stdout


# --- the report channel ---------------------------------------------------------------------


class Channel:
    """Signed records on the inherited report descriptor (the same scheme as the pytest plugin)."""

    def __init__(self) -> None:
        report_fd = int(os.environ.pop("GRADER_REPORT_FD"))
        key_fd = int(os.environ.pop("GRADER_KEY_FD"))
        secret = b""
        while True:
            chunk = os.pread(key_fd, 65536, len(secret))
            if not chunk:
                break
            secret += chunk
        os.close(key_fd)
        os.set_inheritable(report_fd, False)
        self.fd = report_fd
        self.key = secret[:32]
        self.settings = json.loads(secret[32:].decode() or "{}")
        self.session = os.urandom(8).hex()
        self.prev = b""

    def emit(self, record: dict[str, Any]) -> None:
        record = dict(record, s=self.session)
        line = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        mac = hmac.new(self.key, self.prev + line.encode(), hashlib.sha256).hexdigest()
        self.prev = mac.encode()
        data = (line + "\t" + mac + "\n").encode()
        while data:
            data = data[os.write(self.fd, data) :]


# --- processes of the unprivileged user -----------------------------------------------------


def demote(uid: int, gid: int) -> Callable[[], None]:
    def run() -> None:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)

    return run


def user_pids(uid: int) -> list[int]:
    """Live processes (zombies aside) with `uid` among their uids."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        if fields.get("State", "").strip().startswith(("Z", "X")):
            continue
        if uid in (int(x) for x in fields.get("Uid", "").split()):
            pids.append(int(name))
    return pids


def kill_user(uid: int, gid: int) -> None:
    """SIGKILL every process of `uid` (a forked child drops to it and signals -1: the kernel then
    reaches exactly that user's processes) until none is left. Only the killer is reaped here: the
    test process is reaped by its Popen, orphans by the container's init."""
    for _ in range(100):
        if not user_pids(uid):
            return
        pid = os.fork()
        if pid == 0:
            try:
                os.setgroups([])
                os.setgid(gid)
                os.setuid(uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(0.01)


def run_as(
    argv: list[str],
    *,
    uid: int,
    gid: int,
    cwd: str | None,
    env: dict[str, str],
    timeout: float,
    limit: int = OUTPUT_LIMIT,
) -> tuple[int | None, bytes, float, bool]:
    """Run argv as uid:gid in a new session, stdin from /dev/null, stdout+stderr captured
    (the first `limit` bytes kept). Returns (status, output, seconds, timed_out): status is the
    exit status, minus the signal's number when a signal ended it, None when it could not start."""
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=demote(uid, gid),
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        return None, f"could not start {argv[0]!r}: {exc}\n".encode(), 0.0, False
    out = bytearray()
    deadline = started + timeout
    timed_out = False
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([fd], [], [], min(left, 0.2))
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                chunk = None
            if chunk == b"":
                break  # every writer closed its end (the test, and what it forked)
            if chunk and len(out) < limit:
                out += chunk[: limit - len(out)]
        if proc.poll() is not None:
            # exited: take what is already in the pipe; a child it left that holds the pipe
            # (or keeps writing) is killed below and cannot delay the verdict
            try:
                while len(out) < limit:
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        break
                    out += chunk[: limit - len(out)]
            except BlockingIOError:
                pass
            break
    if timed_out:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
    kill_user(uid, gid)
    proc.stdout.close()
    rc = proc.wait()  # negative: killed by that signal
    seconds = time.monotonic() - started
    return rc, bytes(out), seconds, timed_out


# --- the test list --------------------------------------------------------------------------


class ListError(Exception):
    pass


def list_tests(build_dir: str, uid: int, gid: int, env: dict[str, str], timeout: float) -> list[Test]:
    rc, out, _, timed_out = run_as(
        ["ctest", "--show-only=json-v1"], uid=uid, gid=gid, cwd=build_dir, env=env, timeout=timeout, limit=LIST_LIMIT
    )
    if rc != 0 or timed_out:
        raise ListError(f"ctest --show-only=json-v1 ended with {rc}{' (timed out)' if timed_out else ''}")
    start = out.find(b"{")
    try:
        doc = json.loads(out[start:].decode("utf-8")) if start >= 0 else None
    except ValueError as exc:
        raise ListError(f"the test list is not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("kind") != "ctestInfo" or not isinstance(doc.get("tests"), list):
        raise ListError("the test list is not ctest's json-v1")
    tests, seen = [], set()
    for t in doc["tests"]:
        if not isinstance(t, dict) or not isinstance(t.get("name"), str):
            raise ListError("a test without a name")
        name = t["name"]
        if name in seen:
            raise ListError(f"the test {name!r} is listed twice")
        seen.add(name)
        command = t.get("command")
        if command is not None and not (
            isinstance(command, list) and command and all(isinstance(c, str) for c in command)
        ):
            raise ListError(f"the command of {name!r} is not a list of strings")
        props = {}
        for p in t.get("properties") or []:
            if isinstance(p, dict) and isinstance(p.get("name"), str):
                props[p["name"]] = p.get("value")
        tests.append({"name": name, "command": command, "props": props})
    return order(tests)


AM_DRIVERS = ("LOG_DRIVER", "TEST_LOG_DRIVER", "SH_LOG_DRIVER", "PL_LOG_DRIVER", "PY_LOG_DRIVER", "T_LOG_DRIVER")
AM_ENV_DROP = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "MAKE_TERMOUT", "MAKE_TERMERR")


def list_automake(
    build_dir: str, uid: int, gid: int, env: dict[str, str], timeout: float, make_args: list[str]
) -> list[Test]:
    """`make -k check` as the unprivileged user with every log driver replaced by the recording
    driver: it builds the check programs and lists each test (command, directory, environment,
    XFAIL) without running one. A directory whose check programs do not build lists no test."""
    tmp = tempfile.mkdtemp(prefix=".am-list-", dir="/tmp")
    os.chown(tmp, uid, gid)
    listing = os.path.join(tmp, "tests.jsonl")
    here = os.path.dirname(os.path.abspath(__file__))
    driver = f"python3 {os.path.join(here, 'am_record_driver.py')}"
    argv = ["make", "-k", "check"] + [f"{v}={driver}" for v in AM_DRIVERS] + list(make_args)
    rc, out, _, timed_out = run_as(
        argv, uid=uid, gid=gid, cwd=build_dir, env=dict(env, GRADER_AM_LIST=listing), timeout=timeout, limit=LIST_LIMIT
    )
    sys.stdout.write(out[-SHOWN_LIMIT:].decode("utf-8", errors="replace"))
    if timed_out:
        raise ListError("make check (listing) timed out")
    try:
        with open(listing, "rb") as f:
            data = f.read(LIST_LIMIT + 1)
    except FileNotFoundError:
        data = b""
    shutil.rmtree(tmp, ignore_errors=True)
    if len(data) > LIST_LIMIT:
        raise ListError("the test list is too large")
    tests, seen = [], set()
    for line in data.splitlines():
        try:
            r = json.loads(line)
            name, command, cwd, renv = r["name"], r["command"], r["cwd"], r["env"]
        except (ValueError, KeyError, TypeError):
            raise ListError("a line of the automake test list is not a record") from None
        if not (
            isinstance(name, str)
            and isinstance(cwd, str)
            and isinstance(command, list)
            and command
            and all(isinstance(c, str) for c in command)
            and isinstance(renv, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in renv.items())
        ):
            raise ListError("a record of the automake test list is malformed")
        rel = os.path.relpath(os.path.realpath(cwd), os.path.realpath(build_dir))
        tid = name if rel == "." else f"{rel}/{name}"
        if tid in seen:
            raise ListError(f"the test {tid!r} is listed twice")
        seen.add(tid)
        props = {
            "WORKING_DIRECTORY": cwd,
            "AUTOMAKE": True,
            "AM_ENV": {k: v for k, v in renv.items() if k not in AM_ENV_DROP and not k.startswith("GRADER_")},
            "XFAIL": r.get("expect_failure") is True,
            "HARD_ERRORS": r.get("hard_errors") is not False,
        }
        tests.append({"name": tid, "command": command, "props": props})
    if not tests and rc != 0:
        raise ListError(f"make check (listing) ended with {rc} and listed no test")
    return tests


def as_list(value: object) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(value)]


def order(tests: list[Test]) -> list[Test]:
    """ctest's order where it matters: fixture setups before the rest, cleanups after, DEPENDS
    honoured when the test depended on is listed earlier or later (a stable topological sort)."""

    def rank(t: Test) -> int:
        p = t["props"]
        return 0 if p.get("FIXTURES_SETUP") else 2 if p.get("FIXTURES_CLEANUP") else 1

    tests = sorted(tests, key=rank)
    names = {t["name"]: t for t in tests}
    done, out = set(), []

    def visit(t: Test, stack: tuple[str, ...] = ()) -> None:
        if t["name"] in done or t["name"] in stack:
            return
        for dep in as_list(t["props"].get("DEPENDS")):
            if dep in names:
                visit(names[dep], stack + (t["name"],))
        done.add(t["name"])
        out.append(t)

    for t in tests:
        visit(t)
    return out


# --- the tree handed to root ----------------------------------------------------------------


def freeze(roots: list[str]) -> int:
    """Owner root, no write bit for group or other, no set-id bit: the unprivileged user can no
    longer change anything under `roots` (links are never followed)."""
    n = 0
    for root in roots:
        if not os.path.lexists(root):
            continue
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            for name in [None] + dirnames + filenames:
                path = dirpath if name is None else os.path.join(dirpath, name)
                try:
                    st = os.lstat(path)
                    os.lchown(path, 0, 0)
                    if not stat.S_ISLNK(st.st_mode):
                        os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o6022)
                    n += 1
                except FileNotFoundError:
                    continue
    return n


def open_workdirs(tests: list[Test], roots: list[str]) -> list[str]:
    """Each test's WORKING_DIRECTORY inside the frozen roots becomes root-owned, mode 1777: a test
    may create files there (many write their output next to them), but the sticky bit keeps it
    from removing, renaming or replacing anything it did not create, and every file that was
    there is root's and read-only to it."""
    dirs = []
    for t in tests:
        d = t["props"].get("WORKING_DIRECTORY")
        if not isinstance(d, str) or not os.path.isdir(d) or os.path.islink(d):
            continue
        d = os.path.realpath(d)
        if d in dirs or not any(d == r or d.startswith(r.rstrip("/") + "/") for r in roots):
            continue
        os.chown(d, 0, 0)
        os.chmod(d, 0o1777)
        dirs.append(d)
    return dirs


def sweep(dirs: list[str]) -> list[str]:
    """Remove what a test left in the writable working directories (every entry not owned by
    root: the frozen tree is root's), so that each test starts from the same tree."""
    removed = []
    for d in dirs:
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for name in names:
            path = os.path.join(d, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            if st.st_uid == 0:
                continue
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
            removed.append(path)
    return removed


def thaw(roots: list[str], uid: int, gid: int) -> None:
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            for name in [None] + dirnames + filenames:
                path = dirpath if name is None else os.path.join(dirpath, name)
                try:
                    os.lchown(path, uid, gid)
                except FileNotFoundError:
                    continue


# --- one test -------------------------------------------------------------------------------


def cmake_regex(pattern: str) -> re.Pattern[str]:
    """CMake's regular expressions are a subset of Python's for what tests use (. * + ? [] ^ $ |
    and groups); a pattern Python cannot compile matches nothing."""
    try:
        return re.compile(pattern, re.M)
    except re.error:
        return re.compile(r"(?!x)x")


def test_env(base: dict[str, str], props: dict[str, Any], tmp: str) -> dict[str, str]:
    if props.get("AUTOMAKE"):
        return dict(props.get("AM_ENV") or base, TMPDIR=tmp, HOME=tmp)
    env = dict(base, TMPDIR=tmp, HOME=tmp)
    for item in as_list(props.get("ENVIRONMENT")):
        k, sep, v = item.partition("=")
        if sep and k:
            env[k] = v
    for item in as_list(props.get("ENVIRONMENT_MODIFICATION")):
        k, _, rest = item.partition("=")
        op, _, v = rest.partition(":")
        if not k:
            continue
        cur = env.get(k)
        if op == "reset":
            if k in base:
                env[k] = base[k]
            else:
                env.pop(k, None)
        elif op == "set":
            env[k] = v
        elif op == "unset":
            env.pop(k, None)
        elif op == "string_append":
            env[k] = (cur or "") + v
        elif op == "string_prepend":
            env[k] = v + (cur or "")
        elif op == "path_list_append":
            env[k] = (cur + ":" + v) if cur else v
        elif op == "path_list_prepend":
            env[k] = (v + ":" + cur) if cur else v
        elif op == "cmake_list_append":
            env[k] = (cur + ";" + v) if cur else v
        elif op == "cmake_list_prepend":
            env[k] = (v + ";" + cur) if cur else v
    return env


def judge(
    props: dict[str, Any], status: int | None, output: bytes, timed_out: bool, pass_regex: str = "strict"
) -> tuple[str, str]:
    """(outcome, why) from the wait status, as ctest reads it, stricter where output decides
    (pass_regex "strict"; "ctest" keeps ctest's rule: the output alone decides)."""
    text = output.decode("utf-8", errors="replace")
    if status is None:
        return "failed", "could not start"
    if props.get("AUTOMAKE"):
        return judge_automake(props, status, timed_out)
    if timed_out:
        return "failed", "timed out"
    if status < 0:
        return "failed", f"killed by signal {-status}"
    skip_rc = props.get("SKIP_RETURN_CODE")
    if isinstance(skip_rc, int) and not isinstance(skip_rc, bool) and status == skip_rc:
        return "skipped", f"exit status {status} (SKIP_RETURN_CODE)"
    if any(cmake_regex(p).search(text) for p in as_list(props.get("SKIP_REGULAR_EXPRESSION"))):
        return "skipped", "output matched SKIP_REGULAR_EXPRESSION"
    if any(cmake_regex(p).search(text) for p in as_list(props.get("FAIL_REGULAR_EXPRESSION"))):
        return "failed", "output matched FAIL_REGULAR_EXPRESSION"
    passing = as_list(props.get("PASS_REGULAR_EXPRESSION"))
    will_fail = props.get("WILL_FAIL") is True
    ok = (status != 0) if will_fail else (status == 0)
    if passing:
        matched = any(cmake_regex(p).search(text) for p in passing)
        if not matched:
            return "failed", "output did not match PASS_REGULAR_EXPRESSION"
        if pass_regex == "ctest":
            return "passed", f"PASS_REGULAR_EXPRESSION matched (exit status {status} not read)"
        if status != 0:
            return "failed", f"exit status {status} (PASS_REGULAR_EXPRESSION also needs 0 here)"
        return "passed", "exit status 0 and PASS_REGULAR_EXPRESSION matched"
    return ("passed" if ok else "failed"), f"exit status {status}{' (WILL_FAIL)' if will_fail else ''}"


def judge_automake(props: dict[str, Any], status: int, timed_out: bool) -> tuple[str, str]:
    """automake's test-driver: 0 PASS, 77 SKIP, 99 ERROR (with hard errors), anything else FAIL; an
    XFAIL_TESTS test passes when it fails (XFAIL) and fails when it passes (XPASS). A signal or a
    timeout is a failure, and so the expected one of an XFAIL test."""
    if props.get("XFAIL"):
        if timed_out:
            return "failed", "timed out (XFAIL)"
        if status == 0:
            return "failed", "exit status 0 (XPASS)"
        if status == 77:
            return "skipped", "exit status 77 (SKIP)"
        if status == 99 and props.get("HARD_ERRORS"):
            return "failed", "exit status 99 (ERROR)"
        return "passed", f"{'killed by signal ' + str(-status) if status < 0 else 'exit status ' + str(status)} (XFAIL)"
    if timed_out:
        return "failed", "timed out"
    if status < 0:
        return "failed", f"killed by signal {-status}"
    if status == 0:
        return "passed", "exit status 0"
    if status == 77:
        return "skipped", "exit status 77 (SKIP)"
    if status == 99 and props.get("HARD_ERRORS"):
        return "failed", "exit status 99 (ERROR)"
    return "failed", f"exit status {status}"


def run_test(
    t: Test,
    *,
    uid: int,
    gid: int,
    base_env: dict[str, str],
    timeout: float,
    tmp_root: str,
    pass_regex: str = "strict",
) -> tuple[str, str, float, bytes]:
    props = t["props"]
    if props.get("DISABLED") is True:
        return "skipped", "DISABLED", 0.0, b""
    if not t["command"]:
        return "failed", "no command (its executable was not built)", 0.0, b""
    tmp = tempfile.mkdtemp(prefix="t-", dir=tmp_root)
    os.chown(tmp, uid, gid)
    limit = props.get("TIMEOUT")
    if isinstance(limit, (int, float)) and not isinstance(limit, bool) and limit > 0:
        limit = min(float(limit), timeout)
    else:
        limit = timeout
    cwd = props.get("WORKING_DIRECTORY")
    if not isinstance(cwd, str) or not os.path.isdir(cwd):
        cwd = None
    status, out, seconds, timed_out = run_as(
        t["command"], uid=uid, gid=gid, cwd=cwd, env=test_env(base_env, props, tmp), timeout=limit
    )
    shutil.rmtree(tmp, ignore_errors=True)
    outcome, why = judge(props, status, out, timed_out, pass_regex)
    return outcome, why, seconds, out


# --- main -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", required=True, help="ctest's build tree, or the top build directory of make check")
    ap.add_argument("--automake", action="store_true", help="list the tests with make check and the recording driver")
    ap.add_argument("--make-arg", action="append", default=[], help="more arguments for the listing make check")
    ap.add_argument("--repo", default=os.getcwd(), help="frozen with the build tree (default: the current directory)")
    ap.add_argument("--user", default="1000:1000", help="uid:gid the tests run as")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per test (a TIMEOUT property may lower it)")
    ap.add_argument("--list-timeout", type=float, default=600.0, help="seconds for listing (automake: and building)")
    ap.add_argument("--test", action="append", default=[], help="run only these (default: every listed test)")
    ap.add_argument("--freeze", action="append", default=[], help="more paths handed to root")
    ap.add_argument("--no-freeze", action="store_true", help="leave the tree writable (weaker: see README)")
    ap.add_argument(
        "--read-only-workdirs", action="store_true", help="do not let tests create files in their working directories"
    )
    ap.add_argument(
        "--pass-regex",
        choices=("strict", "ctest"),
        default="strict",
        help="strict: a PASS_REGULAR_EXPRESSION test also needs exit status 0; ctest: the output alone "
        "decides, as in ctest (each such test is then named in an integrity record)",
    )
    ap.add_argument("--thaw", action="store_true", help="give the tree back to the user at the end")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("ctest_launcher: must run as root (it runs the tests as --user)", file=sys.stderr)
        return 2
    channel = Channel()
    channel.emit({"t": "start", "pid": os.getpid()})
    uid, gid = (int(x) for x in args.user.split(":"))
    build = os.path.abspath(os.path.join(args.repo, args.build_dir))
    base_env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GRADER_", "LD_", "CTEST_", "GTEST_")) and k not in ("PYTHONPATH",)
    }
    base_env.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    kill_user(uid, gid)
    try:
        list_env = dict(base_env, HOME="/tmp", TMPDIR="/tmp")
        if args.automake:
            tests = list_automake(build, uid, gid, list_env, args.list_timeout, args.make_arg)
        else:
            tests = list_tests(build, uid, gid, list_env, args.list_timeout)
    except ListError as exc:
        print(f"ctest_launcher: {exc}", flush=True)
        channel.emit({"t": "collect", "id": args.build_dir, "outcome": "error"})
        channel.emit({"t": "end", "exit": 4, "collected": 0})
        return 4
    kill_user(uid, gid)
    roots = [] if args.no_freeze else [os.path.abspath(args.repo), build] + [os.path.abspath(p) for p in args.freeze]
    freeze(roots)
    workdirs = [] if args.no_freeze or args.read_only_workdirs else open_workdirs(tests, roots)
    tmp_root = tempfile.mkdtemp(prefix=".ctest-launcher-", dir="/tmp")
    os.chmod(tmp_root, 0o711)
    wanted = set(args.test)
    failed = 0
    collected = 0
    for t in tests:
        if wanted and t["name"] not in wanted:
            continue
        collected += 1
        outcome, why, seconds, out = run_test(
            t, uid=uid, gid=gid, base_env=base_env, timeout=args.timeout, tmp_root=tmp_root, pass_regex=args.pass_regex
        )
        if args.pass_regex == "ctest" and t["props"].get("PASS_REGULAR_EXPRESSION"):
            channel.emit({"t": "integrity", "what": f"{t['name']}: decided by its output (PASS_REGULAR_EXPRESSION)"})
        sweep(workdirs)
        failed += outcome == "failed"
        sys.stdout.write(f"---- {t['name']}: {outcome} ({why}, {seconds:.2f} s)\n")
        sys.stdout.write(out[:SHOWN_LIMIT].decode("utf-8", errors="replace"))
        if out and not out.endswith(b"\n"):
            sys.stdout.write("\n")
        sys.stdout.flush()
        channel.emit({"t": "test", "id": t["name"], "when": "call", "outcome": outcome, "d": round(seconds, 4)})
    for name in sorted(wanted - {t["name"] for t in tests}):
        print(f"---- {name}: not listed by ctest", flush=True)
    shutil.rmtree(tmp_root, ignore_errors=True)
    if args.thaw:
        for d in workdirs:
            os.chmod(d, 0o755)
        thaw(roots, uid, gid)
    status = 1 if failed else 0
    channel.emit({"t": "end", "exit": status, "collected": collected})
    return status


if __name__ == "__main__":
    sys.exit(main())
