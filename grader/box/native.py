"""Native test processes run by the supervisor itself: ctest's tests and automake's, one by
one, as the unprivileged user, each judged from its own exit status.

Standard library only, Python 3.9+. This is the C reporter's launcher (grader/box/reporters/c/
README.md says why neither ctest nor `make check` can be the runner: their tests share a uid
with them and with the build tree) folded into the supervisor's process: the supervisor is
root already, sees each test's wait status first hand, and so needs no report channel back from
a separate launcher process. Nothing here is reachable by the test processes: they run as the
unprivileged user with no descriptor of ours, and every process of theirs is killed after each
test, before the next one starts.

1. the build has already run as the unprivileged user (the runner's step);
2. the tree (the repository and the build directory) is handed to root: owner 0:0, no write
   bit for group or other, no set-id bit, links never followed; each test's working directory
   stays open for new files only (root-owned, mode 1777) and what a test creates there is
   swept away after it;
3. the test list comes from `ctest --show-only=json-v1` (run as the unprivileged user: it
   executes the build tree's CTestTestfile.cmake scripts, over the frozen tree), or from
   `make -k check` with a recording log driver (automake), and is parsed strictly;
4. each test runs as the unprivileged user, in a new session, from its working directory,
   with the environment less GRADER_*, LD_*, CTEST_*, GTEST_*, PYTHONPATH, plus its own
   ENVIRONMENT, a private TMPDIR/HOME, stdin from /dev/null, its output captured, its timeout;
   then every other process in the container is killed;
5. the outcome is the exit status as ctest reads it (WILL_FAIL, SKIP_RETURN_CODE,
   SKIP/FAIL_REGULAR_EXPRESSION, DISABLED), stricter where output would decide: a test ended
   by a signal always fails, and a PASS_REGULAR_EXPRESSION test also needs exit status 0;
   automake's tests as its test-driver reads them (0, 77 SKIP, 99 ERROR, XFAIL_TESTS).
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from typing import Any

from .proc import kill_everything_else

Test = dict[str, Any]  # name, command (list of strings or None), props (the ctest properties)

LIST_LIMIT = 16 * 1024 * 1024  # bytes of a test list accepted
OUTPUT_LIMIT = 1024 * 1024  # bytes of one test's output kept (for the regular expressions)
SHOWN_LIMIT = 16 * 1024  # bytes of one test's output shown in the run's output
ENV_DROP_PREFIXES = ("GRADER_", "LD_", "CTEST_", "GTEST_")
ENV_DROP = ("PYTHONPATH",)


class ListError(Exception):
    """The tests could not be listed (a configure step that failed, a broken test list)."""


# --- processes of the unprivileged user -----------------------------------------------------


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
    """Run argv as uid:gid (no supplementary groups) in a new session, stdin from /dev/null,
    stdout+stderr captured (the first `limit` bytes kept), then kill every other process.
    Returns (status, output, seconds, timed_out): status is the exit status, minus the
    signal's number when a signal ended it, None when it could not start."""
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            user=uid,
            group=gid,
            extra_groups=[],
            umask=0o022,
            start_new_session=True,
            close_fds=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        kill_everything_else()
        return None, f"could not start {argv[0]!r}: {exc}\n".encode(), 0.0, False
    out = bytearray()
    deadline = started + max(0.0, timeout)
    timed_out = False
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = proc.poll() is None
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
            # exited: take what is already in the pipe; a child it left behind that holds the
            # pipe (or keeps writing) is killed below and cannot delay the verdict
            try:
                while len(out) < limit:
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        break
                    out += chunk[: limit - len(out)]
            except BlockingIOError:
                pass
            break
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.kill()
    rc = proc.wait()  # reaped here, before kill_everything_else reaps whatever is left
    kill_everything_else()
    proc.stdout.close()
    return rc, bytes(out), time.monotonic() - started, timed_out


def base_env(env: dict[str, str]) -> dict[str, str]:
    out = {k: v for k, v in env.items() if not k.startswith(ENV_DROP_PREFIXES) and k not in ENV_DROP}
    out.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    return out


# --- the test lists -------------------------------------------------------------------------


def parse_ctest_list(out: bytes) -> list[Test]:
    """`ctest --show-only=json-v1`'s document, strictly: kind ctestInfo, each name once,
    commands as lists of strings."""
    start = out.find(b"{")
    try:
        doc = json.loads(out[start:].decode("utf-8")) if start >= 0 else None
    except ValueError as exc:
        raise ListError(f"the test list is not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("kind") != "ctestInfo" or not isinstance(doc.get("tests"), list):
        raise ListError("the test list is not ctest's json-v1")
    tests, seen = [], set()
    for t in doc["tests"]:
        if not isinstance(t, dict) or not isinstance(t.get("name"), str) or not t["name"]:
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


def list_ctest(build_dir: str, uid: int, gid: int, env: dict[str, str], timeout: float) -> tuple[list[Test], bytes]:
    rc, out, _, timed_out = run_as(
        ["ctest", "--show-only=json-v1"], uid=uid, gid=gid, cwd=build_dir, env=env, timeout=timeout, limit=LIST_LIMIT
    )
    if rc != 0 or timed_out:
        raise ListError(f"ctest --show-only=json-v1 ended with {rc}{' (timed out)' if timed_out else ''}")
    return parse_ctest_list(out), out


AM_DRIVERS = ("LOG_DRIVER", "TEST_LOG_DRIVER", "SH_LOG_DRIVER", "PL_LOG_DRIVER", "PY_LOG_DRIVER", "T_LOG_DRIVER")
AM_ENV_DROP = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "MAKE_TERMOUT", "MAKE_TERMERR")


def parse_automake_list(data: bytes, build_dir: str) -> list[Test]:
    """The recording driver's lines (one JSON object per test), strictly."""
    tests, seen = [], set()
    for line in data.splitlines():
        try:
            r = json.loads(line)
            name, command, cwd, renv = r["name"], r["command"], r["cwd"], r["env"]
        except (ValueError, KeyError, TypeError):
            raise ListError("a line of the automake test list is not a record") from None
        if not (
            isinstance(name, str)
            and name
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
    return tests


def list_automake(
    build_dir: str, driver: str, uid: int, gid: int, env: dict[str, str], timeout: float, make_args: list[str]
) -> tuple[list[Test], bytes, bool]:
    """`make -k check` as the unprivileged user with every log driver replaced by the recording
    driver (`driver`, a root-owned script): it builds the check programs and lists each test
    (command, directory, environment, XFAIL) without running one. Returns the tests, make's
    output and whether make timed out."""
    tmp = tempfile.mkdtemp(prefix=".am-list-", dir="/tmp")
    os.chown(tmp, uid, gid)
    listing = os.path.join(tmp, "tests.jsonl")
    recorder = f"python3 {driver}"
    argv = ["make", "-k", "check"] + [f"{v}={recorder}" for v in AM_DRIVERS] + list(make_args)
    rc, out, _, timed_out = run_as(
        argv, uid=uid, gid=gid, cwd=build_dir, env=dict(env, GRADER_AM_LIST=listing), timeout=timeout, limit=LIST_LIMIT
    )
    try:
        with open(listing, "rb") as f:
            data = f.read(LIST_LIMIT + 1)
    except FileNotFoundError:
        data = b""
    shutil.rmtree(tmp, ignore_errors=True)
    if timed_out:
        return [], out, True
    if len(data) > LIST_LIMIT:
        raise ListError("the test list is too large")
    tests = parse_automake_list(data, build_dir)
    if not tests and rc != 0:
        raise ListError(f"make check (listing) ended with {rc} and listed no test")
    return tests, out, False


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
    done: set[str] = set()
    out: list[Test] = []

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
    longer change anything under `roots` (links are never followed). What is root's and
    already so is left alone (its change time too: the hidden tests are known by it)."""
    n = 0
    for root in roots:
        if not os.path.lexists(root):
            continue
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            for name in [None] + dirnames + filenames:
                path = dirpath if name is None else os.path.join(dirpath, name)
                try:
                    st = os.lstat(path)
                    mode = stat.S_IMODE(st.st_mode)
                    link = stat.S_ISLNK(st.st_mode)
                    if st.st_uid == 0 and st.st_gid == 0 and (link or not mode & 0o6022):
                        continue
                    os.lchown(path, 0, 0)
                    if not link:
                        os.chmod(path, mode & ~0o6022)
                    n += 1
                except FileNotFoundError:
                    continue
    return n


def thaw(roots: list[str], uid: int, gid: int) -> None:
    """Give a frozen tree back to the user (its modes were kept but for group/other write)."""
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            for name in [None] + dirnames + filenames:
                try:
                    os.lchown(dirpath if name is None else os.path.join(dirpath, name), uid, gid)
                except FileNotFoundError:
                    continue


def inside(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def open_workdirs(tests: list[Test], roots: list[str]) -> list[str]:
    """Each test's WORKING_DIRECTORY inside the frozen roots becomes root-owned, mode 1777: a test
    may create files there (many write their output next to them), but the sticky bit keeps it
    from removing, renaming or replacing anything it did not create, and every file that was
    there is root's and read-only to it."""
    dirs: list[str] = []
    for t in tests:
        d = t["props"].get("WORKING_DIRECTORY")
        if not isinstance(d, str) or not os.path.isdir(d) or os.path.islink(d):
            continue
        d = os.path.realpath(d)
        if d in dirs or not inside(d, roots):
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
        return dict(base_env(props.get("AM_ENV") or base), TMPDIR=tmp, HOME=tmp)
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
    return base_env(env)


def judge(props: dict[str, Any], status: int | None, output: bytes, timed_out: bool) -> tuple[str, str]:
    """(outcome, why) from the wait status, as ctest reads it, stricter where output decides."""
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
    if passing:
        if not any(cmake_regex(p).search(text) for p in passing):
            return "failed", "output did not match PASS_REGULAR_EXPRESSION"
        if status != 0:
            return "failed", f"exit status {status} (PASS_REGULAR_EXPRESSION also needs 0 here)"
        return "passed", "exit status 0 and PASS_REGULAR_EXPRESSION matched"
    ok = (status != 0) if will_fail else (status == 0)
    return ("passed" if ok else "failed"), f"exit status {status}{' (WILL_FAIL)' if will_fail else ''}"


def judge_automake(props: dict[str, Any], status: int, timed_out: bool) -> tuple[str, str]:
    """automake's test-driver: 0 PASS, 77 SKIP, 99 ERROR (with hard errors), anything else FAIL; an
    XFAIL_TESTS test passes when it fails (XFAIL) and fails when it passes (XPASS). A signal or a
    timeout is a failure, and so the expected one of an XFAIL test."""
    if timed_out:
        return "failed", "timed out"
    if status < 0:
        return "failed", f"killed by signal {-status}"
    if status == 77:
        return "skipped", "exit status 77 (SKIP)"
    if status == 99 and props.get("HARD_ERRORS"):
        return "failed", "exit status 99 (ERROR)"
    if props.get("XFAIL"):
        if status == 0:
            return "failed", "exit status 0 (XPASS)"
        return "passed", f"exit status {status} (XFAIL)"
    if status == 0:
        return "passed", "exit status 0"
    return "failed", f"exit status {status}"


def run_test(
    t: Test, *, uid: int, gid: int, env: dict[str, str], timeout: float, tmp_root: str
) -> tuple[str, str, float, bytes, bool]:
    """(outcome, why, seconds, output, timed_out) of one test."""
    props = t["props"]
    if props.get("DISABLED") is True:
        return "skipped", "DISABLED", 0.0, b"", False
    if not t["command"]:
        return "failed", "no command (its executable was not built)", 0.0, b"", False
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
        t["command"], uid=uid, gid=gid, cwd=cwd, env=test_env(env, props, tmp), timeout=limit
    )
    shutil.rmtree(tmp, ignore_errors=True)
    outcome, why = judge(props, status, out, timed_out)
    return outcome, why, seconds, out, timed_out


def run_tests(
    tests: list[Test],
    *,
    uid: int,
    gid: int,
    env: dict[str, str],
    timeout: float,
    deadline: float,
    workdirs: list[str],
) -> tuple[dict[str, str], list[str], bool]:
    """Run each test in turn: (outcome by name, the framed output lines, whether the run's
    deadline (time.monotonic()) cut a test short or left tests unrun)."""
    tmp_root = tempfile.mkdtemp(prefix=".native-", dir="/tmp")
    os.chmod(tmp_root, 0o711)
    outcomes: dict[str, str] = {}
    shown: list[str] = []
    cut = False
    try:
        for t in tests:
            left = deadline - time.monotonic()
            if left <= 0:
                cut = True
                break
            outcome, why, seconds, out, timed_out = run_test(
                t, uid=uid, gid=gid, env=env, timeout=min(timeout, left), tmp_root=tmp_root
            )
            if timed_out and deadline - time.monotonic() <= 0.05:
                cut = True  # stopped by the run's own deadline, not by the test's limit
            sweep(workdirs)
            outcomes[t["name"]] = outcome
            text = out[:SHOWN_LIMIT].decode("utf-8", errors="replace")
            if len(out) > SHOWN_LIMIT:
                text += f"\n[... {len(out) - SHOWN_LIMIT:,} more bytes]"
            shown.append(f"---- {t['name']}: {outcome} ({why}, {seconds:.2f} s)\n{text}")
            if cut:
                break
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)
    return outcomes, shown, cut
