#!/usr/bin/env python3
"""The libtest runner: cargo's test binaries run one by one, their output parsed strictly,
every outcome written as a signed record to the report channel.

Standard library only (the supervisor's rule), Python 3.9+. It runs in the grading
container as the unprivileged user, in place of `cargo test`, and is the only process of
the run that holds the key. Rust's test harness (libtest) lives inside each test binary,
in the same process as the code under test, and writes its outcomes to that process's
stdout; a stable toolchain cannot load a reporter into it. So the channel of this runner
is libtest's own framing, read from outside and checked against what libtest itself said
it would run:

1. `cargo test --no-run --message-format=json`: every test binary (lib, bins, tests/) is
   built before any of them runs; a target that does not compile is a collect error (the
   targets are then built one by one so that the others still run).
2. Each binary is copied into a sealed, execute-only memfd at once, and every later run
   executes that copy: a test cannot replace another target's binary on disk, and a
   process started from a file it may not read is not dumpable (its descriptors and
   memory are closed to the other processes of the user).
3. `BINARY --list --format terse` names the binary's tests before any of them runs.
4. `BINARY --test-threads=1 -Z unstable-options --format json --report-time` (libtest
   accepts the unstable options when RUSTC_BOOTSTRAP is set in the binary's
   environment; `--format pretty` reads the stable human format instead). The stream is
   parsed strictly: libtest announces each test, then gives its verdict, one test at a
   time, in the listed order; every listed test exactly once; the suite summary last,
   its counts those of the verdicts, and the exit status the summary's (0 or 101). A
   line naming a test that was not listed, a second verdict, a verdict for a test that
   was not the one running, a summary that disagrees or an exit status that does not:
   the binary's stream contradicts itself (tampering), and none of its tests pass. A
   binary that crashes or exits before its summary leaves its unreported tests failed.
5. After each binary every process it left is killed (this runner is their subreaper).

Test ids: the lib's unit tests as libtest names them (`tests::it_parses`), the tests of
any other target (integration tests, bins) as `<target>::<name>` (`parse::it_parses`).

Records (CONTRACT.md): start, one `test` record per listed test (`when: call`), `collect`
for a target that did not build or list, `integrity` for each contradiction, `note` for
what is odd but not a contradiction, `end` with this runner's exit status (0 every test
passed, 1 otherwise, 2 nothing could be run). Without GRADER_REPORT_FD / GRADER_KEY_FD
(development), the records go unsigned to --records or stderr.
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import hashlib
import hmac
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
OUTPUT_CAP = 64 << 20  # bytes of one binary's stdout / stderr kept
EXIT_OK, EXIT_FAILED, EXIT_NOTHING = 0, 1, 2
LIBTEST_OK, LIBTEST_FAILED = 0, 101
EVENT_PREFIX = '{ "type": '  # how libtest's JSON formatter begins every line
LIB_KINDS = {"lib", "rlib", "dylib", "cdylib", "staticlib", "proc-macro"}
TEST_KINDS = LIB_KINDS | {"bin", "test"}


# --- the report channel --------------------------------------------------------------------


def open_channel(records_path: str | None) -> tuple[Callable[[dict[str, Any]], None], dict[str, Any], bool]:
    """emit(record), the settings, and whether the records are signed. The key is read at
    offset 0 and its descriptor closed; both variables leave the environment, and the
    report descriptor is not inherited, before any child exists."""
    report_fd = os.environ.pop("GRADER_REPORT_FD", None)
    key_fd = os.environ.pop("GRADER_KEY_FD", None)
    session = os.urandom(8).hex()
    if report_fd is None or key_fd is None:
        out = open(records_path, "w") if records_path else sys.stderr

        def emit_plain(record: dict[str, Any]) -> None:
            out.write(json.dumps(dict(record, s=session), sort_keys=True) + "\n")
            out.flush()

        return emit_plain, {}, False
    secret = b""
    while True:
        chunk = os.pread(int(key_fd), 65536, len(secret))
        if not chunk:
            break
        secret += chunk
    os.close(int(key_fd))
    fd = int(report_fd)
    os.set_inheritable(fd, False)
    key, settings = secret[:32], json.loads(secret[32:].decode() or "{}")
    chain = [b""]

    def emit(record: dict[str, Any]) -> None:
        line = json.dumps(dict(record, s=session), sort_keys=True, ensure_ascii=True)
        mac = hmac.new(key, chain[0] + line.encode(), hashlib.sha256).hexdigest()
        chain[0] = mac.encode()
        data = (line + "\t" + mac + "\n").encode()
        while data:
            data = data[os.write(fd, data) :]

    return emit, settings, True


def harden() -> list[str]:
    """Not dumpable (so /proc/PID/fd, mem and environ of this process are root's: a test
    process of the same user cannot open the report pipe or read the key), and the
    subreaper of everything the tests start. Returns what could not be done."""
    missing = []
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            missing.append("not dumpable")
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            missing.append("subreaper")
    except (OSError, AttributeError):
        missing.append("prctl")
    return missing


# --- building --------------------------------------------------------------------------------


class Target:
    def __init__(self, name: str, kinds: list[str], src_path: str, root: str):
        self.name, self.kinds = name, kinds
        self.src = os.path.relpath(src_path, root) if src_path.startswith(root + "/") else src_path
        self.exe: str | None = None
        self.fd: int | None = None
        self.readable = False  # the sealed copy had to be made readable to be executed

    @property
    def prefix(self) -> str:
        """libtest's names as they are for the lib, `<target>::` before them otherwise."""
        return "" if LIB_KINDS & set(self.kinds) else self.name + "::"

    def selector(self) -> list[str]:
        kind = self.kinds[0]
        if kind in LIB_KINDS:
            return ["--lib"]
        return {"bin": ["--bin"], "test": ["--test"], "example": ["--example"], "bench": ["--bench"]}.get(
            kind, ["--test"]
        ) + [self.name]


def cargo_build(cargo: list[str], root: str, args: list[str], env: dict[str, str]) -> tuple[bool, list[Target]]:
    """Build the test binaries; returns (success, the targets built). The diagnostics go
    to stderr, rendered, for the log."""
    cmd = [*cargo, "test", "--no-run", "--offline", "--message-format=json-render-diagnostics", *args]
    proc = subprocess.run(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=None)
    built: dict[tuple[str, str], Target] = {}
    ok = False
    for line in proc.stdout.decode(errors="replace").splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        reason = msg.get("reason")
        if reason == "compiler-artifact" and msg.get("profile", {}).get("test") and msg.get("executable"):
            t = msg["target"]
            target = Target(t["name"], t["kind"], t["src_path"], root)
            target.exe = msg["executable"]
            built[(t["name"], t["src_path"])] = target
        elif reason == "build-finished":
            ok = bool(msg.get("success"))
    return ok and proc.returncode == 0, list(built.values())


def selected(targets: list[Target], args: list[str]) -> list[Target]:
    """The targets cargo test's own selection arguments name (all of them without any)."""
    picks: list[tuple[str, str]] = []  # (kind, name); "" matches any
    for i, a in enumerate(args):
        value = args[i + 1] if i + 1 < len(args) else ""
        if a == "--lib":
            picks.append(("lib", ""))
        elif a in ("--test", "--bin"):
            picks.append((a[2:], value))
        elif a == "--tests":
            picks.append(("", ""))
        elif a == "--bins":
            picks.append(("bin", ""))

    def picked(t: Target, kind: str, name: str) -> bool:
        kinds = {"lib" if k in LIB_KINDS else k for k in t.kinds}
        return (not kind or kind in kinds) and (not name or t.name == name)

    return [t for t in targets if not picks or any(picked(t, k, n) for k, n in picks)]


def test_targets(cargo: list[str], root: str, env: dict[str, str]) -> list[Target]:
    """The package's targets that `cargo test` builds as test binaries by default."""
    proc = subprocess.run(
        [*cargo, "metadata", "--no-deps", "--offline", "--format-version", "1"],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    out: list[Target] = []
    try:
        meta = json.loads(proc.stdout)
    except ValueError:
        return out
    manifest = os.path.realpath(os.path.join(root, "Cargo.toml"))
    for pkg in meta.get("packages", []):
        if os.path.realpath(pkg.get("manifest_path", "")) != manifest:
            continue
        for t in pkg.get("targets", []):
            if t.get("test") and set(t["kind"]) & TEST_KINDS:
                out.append(Target(t["name"], t["kind"], t["src_path"], root))
    return out


def snapshot(path: str) -> int:
    """The binary in a sealed memfd, execute-only for its owner."""
    fd = os.memfd_create("libtest-" + os.path.basename(path), os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            while chunk:
                chunk = chunk[os.write(fd, chunk) :]
    seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    os.fchmod(fd, 0o100)
    return fd


# --- running a binary -------------------------------------------------------------------------


def ancestors() -> set[int]:
    out, pid = set(), os.getpid()
    while pid > 1:
        out.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def reap_all(subreaper: bool) -> int:
    """Kill and collect what the tests left, until nothing is left. As their subreaper,
    every orphan of the tests is a child of this process. Where the runtime has no
    subreaper (gVisor), every other process of this user that is not this runner or one
    of its ancestors goes: in the grading container only the tests' leftovers run as
    this user. Returns how many were killed."""
    killed = 0
    me, uid, mine = str(os.getpid()), os.getuid(), ancestors()
    for _ in range(100):
        victims: list[int] = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) in mine:
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                owner = os.stat(f"/proc/{entry}").st_uid
            except OSError:
                continue
            if fields[1] == me or (not subreaper and owner == uid and fields[0] != "Z"):
                victims.append(int(entry))
        if not victims:
            return killed
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
        for pid in victims:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        if not subreaper:
            time.sleep(0.05)
    return killed


SUBREAPER = [True]  # harden() says whether the runtime gave this process the role


def run_binary(
    target: Target, argv: list[str], env: dict[str, str], cwd: str, timeout: float | None
) -> tuple[int, bytes, bytes, int]:
    """Run the snapshot of `target`; returns (exit status, stdout, stderr, processes it left)."""
    assert target.fd is not None and target.exe is not None

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [target.exe or "", *argv],
            executable=f"/proc/self/fd/{target.fd}",
            pass_fds=(target.fd,) if target.fd is not None else (),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )

    try:
        proc = start()
    except PermissionError:
        # gVisor will not execute a file it may not read: the copy becomes readable (still
        # sealed), and the test processes are then dumpable
        os.fchmod(target.fd, 0o500)
        target.readable = True
        proc = start()
    bufs: dict[str, bytearray] = {"out": bytearray(), "err": bytearray()}

    def pump(stream: Any, buf: bytearray) -> None:
        while True:
            chunk = stream.read1(65536)
            if not chunk:
                return
            if len(buf) < OUTPUT_CAP:
                buf += chunk[: OUTPUT_CAP - len(buf)]

    readers = [
        threading.Thread(target=pump, args=(proc.stdout, bufs["out"]), daemon=True),
        threading.Thread(target=pump, args=(proc.stderr, bufs["err"]), daemon=True),
    ]
    for r in readers:
        r.start()
    try:
        status = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        status = proc.wait()
    try:  # what it left holding the pipes goes too, so they reach EOF: its process group,
        os.killpg(proc.pid, signal.SIGKILL)  # then whatever was reparented to this subreaper
    except OSError:
        pass
    left = reap_all(SUBREAPER[0])
    for r in readers:
        r.join()
    return status, bytes(bufs["out"]), bytes(bufs["err"]), left


LIST_LINE = re.compile(r"^(\S+): (test|benchmark)$")


def list_tests(target: Target, env: dict[str, str], cwd: str) -> tuple[list[str] | None, list[str]]:
    status, out, err, _ = run_binary(target, ["--list", "--format", "terse"], env, cwd, 120)
    names, notes = [], []
    for line in out.decode(errors="replace").splitlines():
        m = LIST_LINE.match(line)
        if m and m.group(2) == "test":
            names.append(m.group(1))
        elif m is None and line.strip():
            notes.append(f"{target.src}: unexpected line in the test list: {line[:120]!r}")
    if status != 0:
        return None, notes + [f"{target.src}: listing its tests exited with status {status}"]
    if len(set(names)) != len(names):
        return None, notes + [f"{target.src}: the test list names a test twice"]
    return names, notes


# --- parsing what a binary said ------------------------------------------------------------------


class Reading:
    """What one binary's run established: a verdict per listed test, contradictions
    (tampering evidence) and notes."""

    def __init__(self, listed: list[str]):
        self.listed = listed
        self.verdicts: dict[str, tuple[str, float]] = {}
        self.contradictions: list[str] = []
        self.notes: list[str] = []
        self.failure_output: dict[str, str] = {}

    def outcomes(self) -> dict[str, tuple[str, float]]:
        """Every listed test: its verdict, failed when it had none, all failed when the
        stream contradicted itself."""
        out = {}
        for name in self.listed:
            outcome, d = self.verdicts.get(name, ("failed", 0.0))
            out[name] = ("failed", d) if self.contradictions else (outcome, d)
        return out


VERDICT = {"ok": "passed", "failed": "failed", "ignored": "skipped"}


def check_summary(r: Reading, summary: dict[str, Any] | None, status: int, where: str) -> None:
    got = {
        k: sum(1 for v, _ in r.verdicts.values() if v == o)
        for k, o in (("passed", "passed"), ("failed", "failed"), ("ignored", "skipped"))
    }
    if summary is None:
        missing = [n for n in r.listed if n not in r.verdicts]
        if status == 0:
            r.contradictions.append(
                f"{where}: exited with status 0 before libtest's summary ({len(missing)} test(s) unreported)"
            )
        else:
            how = f"signal {-status}" if status < 0 else f"status {status}"
            r.notes.append(
                f"{where}: ended ({how}) before libtest's summary; {len(missing)} test(s) unreported count as failed"
            )
        return
    event = summary["event"]
    for key in ("passed", "failed", "ignored"):
        if summary.get(key) != got[key]:
            r.contradictions.append(f"{where}: the summary says {summary.get(key)} {key}, the verdicts {got[key]}")
    if summary.get("filtered_out") not in (0, None) or summary.get("measured") not in (0, None):
        r.contradictions.append(f"{where}: the summary counts tests that were filtered out or measured")
    if len(r.verdicts) != len(r.listed):
        r.contradictions.append(f"{where}: a summary after {len(r.verdicts)} of {len(r.listed)} listed tests")
    want_event = "failed" if got["failed"] else "ok"
    if event != want_event:
        r.contradictions.append(f"{where}: the summary says {event}, the verdicts {want_event}")
    want_status = LIBTEST_FAILED if event == "failed" else LIBTEST_OK
    if status != want_status:
        r.contradictions.append(f"{where}: the summary says {event} but the binary exited with status {status}")


def parse_json(out: bytes, listed: list[str], status: int, where: str) -> Reading:
    r = Reading(listed)
    known = set(listed)
    started = False
    running: str | None = None
    position = 0  # the index in `listed` of the next test libtest must announce
    summary: dict[str, Any] | None = None
    noise = 0
    for raw in out.decode(errors="replace").split("\n"):
        at = raw.find(EVENT_PREFIX)
        if at < 0:
            noise += bool(raw.strip())
            continue
        if at > 0:
            noise += 1  # output without a newline before libtest's line: keep the line
        try:
            ev = json.loads(raw[at:])
            kind, event = ev["type"], ev["event"]
        except (ValueError, KeyError, TypeError):
            noise += 1
            continue
        if summary is not None:
            r.contradictions.append(f"{where}: a libtest event after the summary: {raw[at:][:160]}")
            continue
        if kind == "suite" and event == "started":
            if started:
                r.contradictions.append(f"{where}: the suite started twice")
            elif ev.get("test_count") != len(listed):
                r.contradictions.append(
                    f"{where}: the suite announced {ev.get('test_count')} tests, {len(listed)} were listed"
                )
            started = True
        elif kind == "suite" and event in ("ok", "failed"):
            summary = ev
        elif kind == "test":
            name = ev.get("name")
            if name not in known:
                r.contradictions.append(f"{where}: an event for {name!r}, a test that was not listed")
                continue
            if not started:
                r.contradictions.append(f"{where}: an event for {name} before the suite started")
            if event == "started":
                if running is not None:
                    r.contradictions.append(f"{where}: {name} started while {running} was running")
                elif position >= len(listed) or listed[position] != name:
                    r.contradictions.append(f"{where}: {name} started out of the listed order")
                running = name
                position = listed.index(name) + 1
            elif event in VERDICT:
                if name in r.verdicts:
                    r.contradictions.append(f"{where}: a second verdict for {name} ({event})")
                    continue
                if running != name:
                    r.contradictions.append(f"{where}: a verdict for {name} while {running} was running")
                r.verdicts[name] = (VERDICT[event], float(ev.get("exec_time") or 0.0))
                if event == "failed" and ev.get("stdout"):
                    r.failure_output[name] = str(ev["stdout"])
                running = None
            elif event == "timeout":
                r.notes.append(f"{where}: {name} has been running for over 60 s")
            else:
                r.contradictions.append(f"{where}: an unknown event {event!r} for {name}")
        elif kind == "bench":
            r.contradictions.append(f"{where}: a benchmark result, no benchmark was run")
        else:
            r.notes.append(f"{where}: an unknown libtest line {raw[at:][:120]!r}")
    if running is not None:
        r.notes.append(f"{where}: {running} started and never finished (the binary crashed or exited in it)")
    if noise:
        r.notes.append(f"{where}: {noise} line(s) on stdout not from libtest (output a test wrote past the capture)")
    check_summary(r, summary, status, where)
    return r


PRETTY_VERDICT = re.compile(r"^test (\S+)(?: - should panic)? \.\.\. (ok|FAILED|ignored(?:, .*)?)$")
PRETTY_SUMMARY = re.compile(
    r"^test result: (ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored; (\d+) measured; "
    r"(\d+) filtered out; finished in [\d.]+s$"
)
PRETTY_RUNNING = re.compile(r"^running (\d+) tests?$")


def parse_pretty(out: bytes, listed: list[str], status: int, where: str) -> Reading:
    """The stable human format. Captured output of failing tests is printed between the
    verdicts and the summary, unframed, so any verdict-shaped line anywhere counts: a
    test named twice is a contradiction, whoever printed the second line."""
    r = Reading(listed)
    known = set(listed)
    lines = out.decode(errors="replace").split("\n")
    running = [m for m in (PRETTY_RUNNING.match(x) for x in lines) if m]
    if not running or int(running[0].group(1)) != len(listed):
        r.contradictions.append(f"{where}: libtest's 'running N tests' line is missing or disagrees with the list")
    summaries = [(i, m) for i, m in ((i, PRETTY_SUMMARY.match(x)) for i, x in enumerate(lines)) if m]
    order = []
    for line in lines:
        m = PRETTY_VERDICT.match(line)
        if not m:
            continue
        name, word = m.group(1), m.group(2)
        if name not in known:
            r.contradictions.append(f"{where}: a verdict line for {name!r}, a test that was not listed")
            continue
        if name in r.verdicts:
            r.contradictions.append(f"{where}: a second verdict line for {name}")
            continue
        outcome = "passed" if word == "ok" else "failed" if word == "FAILED" else "skipped"
        r.verdicts[name] = (outcome, 0.0)
        order.append(name)
    if order != [n for n in listed if n in r.verdicts]:
        r.contradictions.append(f"{where}: verdicts out of the listed order")
    summary = None
    if len(summaries) > 1:
        r.contradictions.append(f"{where}: {len(summaries)} summary lines")
    elif summaries:
        i, m = summaries[0]
        if any(x.strip() for x in lines[i + 1 :]):
            r.contradictions.append(f"{where}: output after libtest's summary")
        summary = {
            "event": "ok" if m.group(1) == "ok" else "failed",
            "passed": int(m.group(2)),
            "failed": int(m.group(3)),
            "ignored": int(m.group(4)),
            "measured": int(m.group(5)),
            "filtered_out": int(m.group(6)),
        }
        failed = {n for n, (o, _) in r.verdicts.items() if o == "failed"}
        if failed:  # the block just above the summary: "failures:" then one name a line
            block, j = [], i - 1
            while j >= 0 and not lines[j].strip():
                j -= 1
            while j >= 0 and lines[j].startswith("    "):
                block.append(lines[j].strip())
                j -= 1
            if j < 0 or lines[j] != "failures:" or set(block) != failed:
                r.contradictions.append(f"{where}: the failures listed before the summary are not the FAILED verdicts")
    check_summary(r, summary, status, where)
    return r


# --- the run -------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--manifest-dir", default=".", help="the package's directory (default: the current one)")
    ap.add_argument("--format", choices=("json", "pretty"), default="json")
    ap.add_argument("--cargo", default="cargo")
    ap.add_argument("--timeout", type=float, default=None, help="seconds for one binary's run")
    ap.add_argument("--records", default=None, help="without a report channel: write the records here")
    ap.add_argument("cargo_args", nargs="*", help="after --: cargo test's arguments (--features ..., --test NAME)")
    opts = ap.parse_args(argv)

    emit, settings, signed = open_channel(opts.records)
    emit({"t": "start", "pid": os.getpid()})
    missing = harden()
    SUBREAPER[0] = "subreaper" not in missing
    if missing:
        emit({"t": "note", "what": "could not make the runner " + " and ".join(missing)})
    canaries = set(settings.get("canaries", ()))
    root = os.path.realpath(opts.manifest_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRADER_") and k != "RUSTC_BOOTSTRAP"}
    env["CARGO_NET_OFFLINE"] = "true"
    env.setdefault("CARGO_TERM_COLOR", "never")
    cargo = [opts.cargo]

    def finish(status: int, collected: int) -> int:
        emit({"t": "end", "exit": status, "collected": collected})
        return status

    t0 = time.monotonic()
    ok, built = cargo_build(cargo, root, opts.cargo_args, env)
    failed: list[Target] = []
    if not ok:
        # cargo stops at the first target that does not compile: build the others one by one;
        # a test target that still has no binary is a collect error
        have = {(t.name, tuple(t.kinds)) for t in built}
        for t in selected(test_targets(cargo, root, env), opts.cargo_args):
            if (t.name, tuple(t.kinds)) in have:
                continue
            _, more = cargo_build(cargo, root, [*opts.cargo_args, *t.selector()], env)
            mine = [b for b in more if b.name == t.name and b.kinds == t.kinds]
            if mine:
                built += mine
            else:
                failed.append(t)
    print(f"libtest runner: built {len(built)} test binaries in {time.monotonic() - t0:.1f} s", flush=True)
    for t in failed:
        emit({"t": "collect", "id": t.src, "outcome": "error"})
        print(f"collect error: {t.src} ({t.name}) did not compile", flush=True)
    for t in built:  # every binary copied before any of them runs
        assert t.exe is not None
        t.fd = snapshot(t.exe)

    collected = 0
    all_passed = not failed
    for t in sorted(built, key=lambda t: (t.prefix != "", t.name)):
        name_env = dict(env, CARGO_MANIFEST_DIR=root, CARGO=opts.cargo)
        deps = os.path.dirname(t.exe or "")
        name_env["LD_LIBRARY_PATH"] = ":".join(
            p for p in (deps, os.path.dirname(deps), env.get("LD_LIBRARY_PATH")) if p
        )
        listed, notes = list_tests(t, name_env, root)
        for n in notes:
            emit({"t": "note", "what": n})
        if listed is None:
            emit({"t": "collect", "id": t.src, "outcome": "error"})
            print(f"collect error: {t.src}: {notes[-1]}", flush=True)
            all_passed = False
            continue
        collected += len(listed)
        if opts.format == "json":
            run_env = dict(name_env, RUSTC_BOOTSTRAP="1")
            args = ["--test-threads=1", "-Z", "unstable-options", "--format", "json", "--report-time"]
        else:
            run_env = name_env
            args = ["--test-threads=1", "--format", "pretty", "--color", "never"]
        status, out, err, left = run_binary(t, args, run_env, root, opts.timeout)
        parse = parse_json if opts.format == "json" else parse_pretty
        reading = parse(out, listed, status, t.src)
        if left:
            reading.notes.append(f"{t.src}: {left} process(es) it left were killed")
        if t.readable:
            reading.notes.append(
                f"{t.src}: the runtime would not execute an unreadable copy: its test process was dumpable"
            )
        print(f"\n{t.src} ({len(listed)} tests, exit status {status})", flush=True)
        for name, (outcome, d) in reading.outcomes().items():
            tid = t.prefix + name
            emit({"t": "test", "id": tid, "when": "call", "outcome": outcome, "d": round(d, 6)})
            if tid not in canaries and outcome == "failed":
                all_passed = False
            print(f"test {tid} ... {outcome}", flush=True)
        for name, text in reading.failure_output.items():
            if t.prefix + name not in canaries:
                print(f"---- {t.prefix}{name} output ----\n{text.rstrip()}", flush=True)
        if err.strip():
            print(f"---- {t.src} stderr ----\n{err.decode(errors='replace').rstrip()[-4000:]}", flush=True)
        for c in reading.contradictions:
            emit({"t": "integrity", "what": c})
            print(f"CONTRADICTION: {c}", flush=True)
            all_passed = False
        for n in reading.notes:
            emit({"t": "note", "what": n})
            print(f"note: {n}", flush=True)
    if not built:
        return finish(EXIT_NOTHING, collected)
    return finish(EXIT_OK if all_passed else EXIT_FAILED, collected)


if __name__ == "__main__":
    sys.exit(main())
