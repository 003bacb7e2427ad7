#!/usr/bin/env python3
"""Demo of the Go reporter (the patched `testing` package of the go-1.24 environment).

On the host:   python3 grader/box/reporters/go/demo/demo.py [--image IMAGE]
It starts a container of the environment image with no network, and runs itself there
(`--inside`): the tiny module in project/ is built with `go test -c` as uid 1000, each test
binary runs directly, as uid 1000, with a report pipe and a key descriptor (GRADER_REPORT_FD,
GRADER_KEY_FD) as the grader's supervisor gives them, and the report is checked by the
grader's own reader (grader/box/channel.py's read_report, mounted into the container).
Each scenario states what must be seen; the demo exits 1 if any is not.

Standard library only; inside the container it needs python3 and go, nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Report = dict[str, Any]
Reader = Callable[[bytes, bytes], Report]

HERE = os.path.dirname(os.path.abspath(__file__))
GRADER = os.path.normpath(os.path.join(HERE, "..", "..", "..", ".."))  # the grader package
UID = 1000

# name, package, extra binary arguments, what must be seen
SCENARIOS: list[tuple[str, str, list[str], dict[str, Any]]] = [
    (
        "honest outcomes",
        "honest",
        [],
        {
            "signed": True,
            "ended": True,
            "end_exit": 1,
            "outcomes": {
                "TestPass": "passed",
                "TestFail": "failed",
                "TestSkip": "skipped",
                "TestTable": "failed",
                "TestTable/one_plus_one": "passed",
                "TestTable/wrong_sum": "failed",
                "TestTable/ünïcode": "passed",
                "FuzzAdd": "passed",
                "FuzzAdd/seed#0": "passed",
                "FuzzAdd/seed#1": "passed",
                "ExampleAdd": "passed",
                "ExampleAdd_wrong": "failed",
            },
        },
    ),
    (
        "a failing test prints every success line (go test -v, test2json's ^V framing, go test -json)",
        "fakeprint",
        ["-test.run", "TestPrintsSuccess"],
        {"signed": True, "ended": True, "end_exit": 1, "outcomes": {"TestPrintsSuccess": "failed"}},
    ),
    (
        "a test writes an unsigned 'passed' record to the report pipe",
        "fakeprint",
        ["-test.run", "TestForgesRecord"],
        {"forged": True},
    ),
    (
        "a test panics (index out of range) in the middle of the run",
        "panics",
        [],
        {
            "signed": True,
            "ended": True,
            "end_exit": 2,
            "exit": 2,
            "outcomes": {"TestBefore": "passed", "TestPanics/inner": "failed", "TestPanics": "failed"},
            "absent": ["TestAfter"],
        },
    ),
    (
        "a test calls os.Exit(0) (binary run without -test.paniconexit0)",
        "exit0",
        [],
        {"signed": True, "ended": False, "exit": 0, "outcomes": {"TestPasses": "passed"}, "absent": ["TestQuits"]},
    ),
    (
        "a test calls os.Exit(0) (binary run with -test.paniconexit0, as go test runs it)",
        "exit0",
        ["-test.paniconexit0"],
        {"signed": True, "ended": True, "end_exit": 2, "exit": 2, "outcomes": {"TestQuits": "failed"}},
    ),
    (
        "init() of the code under test goes for the key before package testing starts",
        "initgrab",
        [],
        {"signed": True, "ended": True, "end_exit": 0, "outcomes": {"TestKeyOutOfReach": "passed"}},
    ),
    (
        "a goroutine started by the code under test panics",
        "gopanic",
        [],
        {"signed": True, "ended": False, "exit": 2, "outcomes": {"TestBefore": "passed"}},
    ),
    (
        "TestMain exits 0 after m.Run() reported a failure",
        "testmain",
        [],
        {"signed": True, "ended": True, "end_exit": 1, "exit": 0, "outcomes": {"TestTwo": "failed"}},
    ),
]


# packages of linkname/ that reach for the channel by symbol name: the linker must refuse them
LINKNAME = [
    ("golink", "//go:linkname to internal/graderkey.Secret (the key)"),
    ("asmlink", "an assembly reference to internal/graderkey.Secret"),
    ("testinglink", "//go:linkname to testing.graderEmit (the reporter's writer)"),
]


@dataclass
class Ran:
    exit: int
    output: str
    report: Report
    raw: bytes


def run_binary(binary: str, cwd: str, args: list[str], read_report: Reader) -> Ran:
    """One test binary with a fresh channel, as the supervisor runs it."""
    key = secrets.token_bytes(32)
    keydir = tempfile.mkdtemp(prefix="grader-key-")  # root only (0700)
    path = os.path.join(keydir, "key")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, key + json.dumps({"repo": cwd}).encode())
    os.close(fd)
    key_fd = os.open(path, os.O_RDONLY)
    os.unlink(path)
    os.rmdir(keydir)
    rep_r, rep_w = os.pipe()
    env = dict(os.environ, GRADER_REPORT_FD=str(rep_w), GRADER_KEY_FD=str(key_fd))
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            data = os.read(rep_r, 65536)
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain)
    reader.start()
    proc = subprocess.run(
        [binary, "-test.v", *args],
        cwd=cwd,
        env=env,
        pass_fds=(rep_w, key_fd),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
        user=UID,
        group=UID,
        extra_groups=[],
    )
    os.close(rep_w)
    os.close(key_fd)
    reader.join()
    os.close(rep_r)
    data = b"".join(chunks)
    rep = read_report(data, key)
    return Ran(proc.returncode, proc.stdout.decode(errors="replace"), rep, data)


def judge(rep: Report, exit_code: int, want: dict[str, Any]) -> list[str]:
    problems = []
    forged = rep.get("forged")
    if want.get("forged"):
        if not forged:
            problems.append("the forged record was not noticed")
        return problems
    if forged:
        problems.append(f"forged: {forged}")
    ended = rep["end"] is not None and rep["ends"] >= rep["sessions"] >= 1
    if "ended" in want and ended != want["ended"]:
        problems.append(f"the session {'ended' if ended else 'did not end'}")
    if "end_exit" in want and (rep["end"] or {}).get("exit") != want["end_exit"]:
        problems.append(f"end says exit {(rep['end'] or {}).get('exit')}, wanted {want['end_exit']}")
    if "exit" in want and exit_code != want["exit"]:
        problems.append(f"process exited {exit_code}, wanted {want['exit']}")
    outcomes = rep["outcomes"]
    for tid, outcome in want.get("outcomes", {}).items():
        if outcomes.get(tid) != outcome:
            problems.append(f"{tid}: {outcomes.get(tid)}, wanted {outcome}")
    for tid in want.get("absent", []):
        if tid in outcomes:
            problems.append(f"{tid} reported ({outcomes[tid]}) though it never ran")
    return problems


def verdict_like(rep: Report, exit_code: int) -> str:
    """What the grader's integrity check (grader/checks/integrity.py) makes of it."""
    if rep.get("forged"):
        return "forged: tampering, FAIL"
    if rep["end"] is None or rep["ends"] < rep["sessions"]:
        return "no 'end': the run ended before the report did, FAIL"
    if rep["end"].get("exit") != exit_code:
        return f"end says {rep['end'].get('exit')}, process {exit_code}: tampering evidence, FAIL"
    return "report complete and signed: per-test outcomes decide"


def grader_reader(grader_dir: str) -> Reader:
    """read_report, the grader's own reader of the channel: grader/box/channel.py, or
    grader/supervisor.py in trees from before the supervisor became a package."""
    import importlib.util

    if os.path.exists(os.path.join(grader_dir, "box", "channel.py")):
        parent = tempfile.mkdtemp(prefix="grader-box-")
        shutil.copytree(os.path.join(grader_dir, "box"), os.path.join(parent, "grader_box"))
        sys.path.insert(0, parent)
        from grader_box.channel import read_report  # type: ignore[import-not-found]

        reader: Reader = read_report
        return reader
    spec = importlib.util.spec_from_file_location("grader_supervisor", os.path.join(grader_dir, "supervisor.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found: Reader = module.read_report
    return found


def inside(args: argparse.Namespace) -> int:
    read_report = grader_reader(args.grader)

    work = tempfile.mkdtemp(prefix="go-demo-")
    os.chmod(work, 0o755)
    src = os.path.join(work, "project")
    shutil.copytree(args.project, src)
    bins = os.path.join(work, "bins")
    os.mkdir(bins)
    for root, dirs, files in os.walk(work):
        for name in dirs + files:
            os.chown(os.path.join(root, name), UID, UID)
    os.chown(work, UID, UID)
    print(f"$ go version: {subprocess.run(['go', 'version'], capture_output=True, text=True).stdout.strip()}")
    build = subprocess.run(
        ["go", "test", "-c", "-vet=off", "-o", bins + "/", "./..."],
        cwd=src,
        capture_output=True,
        text=True,
        user=UID,
        group=UID,
        extra_groups=[],
    )
    print(f"$ go test -c -vet=off -o bins/ ./...   (as uid {UID}): exit {build.returncode}")
    if build.returncode:
        print(build.stdout + build.stderr)
        return 1
    failures = 0
    for n, (title, pkg, extra, want) in enumerate(SCENARIOS, 1):
        binary = os.path.join(bins, f"{pkg}.test")
        got = run_binary(binary, os.path.join(src, pkg), extra, read_report)
        rep, exit_code = got.report, got.exit
        problems = judge(rep, exit_code, want)
        failures += bool(problems)
        print(f"\n[{n}] {title}")
        print(f"    {pkg}.test -test.v {' '.join(extra)}".rstrip() + f"  -> exit {exit_code}")
        if args.verbose:
            for line in got.output.splitlines():
                print(f"      | {line!r}"[:160])
            for line in got.raw.decode(errors="replace").splitlines():
                print(f"      > {line}"[:200])
        print(f"    channel: {rep['sessions']} session(s), {rep['ends']} ended, forged: {rep['forged'] or 'no'}")
        for tid, outcome in rep["outcomes"].items():
            print(f"      {tid:28} {outcome}")
        print(f"    what the grader makes of it: {verdict_like(rep, exit_code)}")
        print(f"    {'ok' if not problems else 'NOT AS EXPECTED: ' + '; '.join(problems)}")
    linkname = os.path.join(work, "linkname")
    shutil.copytree(os.path.join(os.path.dirname(args.project), "linkname"), linkname)
    for root, dirs, files in os.walk(linkname):
        for name in dirs + [".", *files]:
            os.chown(os.path.join(root, name), UID, UID)
    for n, (pkg, title) in enumerate(LINKNAME, len(SCENARIOS) + 1):
        built = subprocess.run(
            ["go", "test", "-c", "-vet=off", "-o", bins + "/", "./" + pkg],
            cwd=linkname,
            capture_output=True,
            text=True,
            user=UID,
            group=UID,
            extra_groups=[],
        )
        said = [line for line in (built.stdout + built.stderr).splitlines() if "invalid reference" in line]
        ok = built.returncode != 0 and bool(said)
        failures += not ok
        print(f"\n[{n}] {title}")
        shown = said[0] if said else (built.stdout + built.stderr)[-300:]
        print(f"    go test -c ./{pkg}  -> exit {built.returncode}: {shown}")
        print(f"    {'ok: the build is refused' if ok else 'NOT AS EXPECTED: it built'}")
    total = len(SCENARIOS) + len(LINKNAME)
    print(f"\n{total - failures} of {total} scenarios as expected")
    return 1 if failures else 0


def find_image() -> str:
    out = subprocess.run(
        ["docker", "image", "ls", "--filter", "label=grader.env=go-1.24", "--format", "{{.Repository}}:{{.Tag}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not out:
        sys.exit("no go-1.24 environment image: GRADER_ENVIRONMENTS_DIR=... grader env build go-1.24")
    return out[0]  # the newest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--image", help="the go-1.24 environment image (default: the newest grader/env-go-1.24)")
    ap.add_argument("-v", "--verbose", action="store_true", help="show each binary's output and raw report")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--project", help=argparse.SUPPRESS)
    ap.add_argument("--grader", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inside:
        return inside(args)
    image = args.image or find_image()
    print(f"image: {image}")
    cmd = [
        "docker", "run", "--rm", "--network", "none",
        "-v", f"{HERE}:/opt/demo:ro",
        "-v", f"{GRADER}:/opt/grader:ro",
        image,
        "python3", "/opt/demo/demo.py", "--inside", "--project", "/opt/demo/project", "--grader", "/opt/grader",
    ]  # fmt: skip
    if args.verbose:
        cmd.append("-v")
    return subprocess.run(cmd).returncode


if __name__ == "__main__":
    sys.exit(main())
