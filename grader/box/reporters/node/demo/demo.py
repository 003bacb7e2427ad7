"""Demo of the Node.js reporters against a tiny project, in the node-20 environment image.

    python3 grader/box/reporters/node/demo/demo.py [--image grader/env-node-20:TAG] [--deps DIR]

Once (network on): `npm install` of the demo project's pinned devDependencies (tape, mocha,
jest) into DIR (default /tmp/grader-node-demo-deps). Then every scenario runs in
`docker run --network none -u 1000` with the project and the reporters mounted read-only:
driver.py gives the command a report pipe and a key descriptor, checks every session's HMAC
chain and prints the outcomes, which this script compares with what each scenario must say.
Exit status 0 when every expectation held. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPORTERS = os.path.dirname(HERE)
PROJECT = os.path.join(HERE, "project")
R = "/opt/grader-node"  # where the reporters are mounted (root-owned, read-only)

TAPE = f"node -r {R}/tape-preload.cjs"
MOCHA = f"node_modules/.bin/mocha --no-config --no-package --reporter {R}/mocha-reporter.cjs"
NODE_TEST = (
    f"node --test --test-reporter={R}/node-test-reporter.mjs --test-reporter-destination=stdout "
    "--test-reporter=spec --test-reporter-destination=stderr"
)
NODE_TEST_IN_PROCESS = (
    f"node --import {R}/node-test-preload.mjs --test-reporter={R}/node-test-reporter.mjs "
    "--test-reporter-destination=stdout --test-reporter=spec --test-reporter-destination=stderr"
)
JEST_CONFIG = json.dumps(
    {
        "rootDir": "/work/repo",
        "testEnvironment": "node",
        "cacheDirectory": "/tmp/jest",
        "reporters": ["default", f"{R}/jest-reporter.cjs"],
    }
)
JEST = f"node_modules/.bin/jest --ci --config '{JEST_CONFIG}'"

P, F, S = "passed", "failed", "skipped"
# (runner, what it shows, command, expected outcomes, expected collect errors, expect forged)
SCENARIOS = [
    (
        "tape",
        "honest outcomes, signed (a repeated name gets [2])",
        f"{TAPE} test/tape-honest.js",
        {
            "test/tape-honest.js::add": P,
            "test/tape-honest.js::sub": F,
            "test/tape-honest.js::nested > inner ok": P,
            "test/tape-honest.js::nested > inner bad": F,
            "test/tape-honest.js::nested": F,
            "test/tape-honest.js::skipped": S,
            "test/tape-honest.js::add [2]": P,
        },
        [],
        False,
    ),
    (
        "tape",
        "a test printing 'ok 1 - sub fake' and a TAP summary does not pass",
        f"{TAPE} test/tape-fake.js",
        {"test/tape-fake.js::sub fake": F},
        [],
        False,
    ),
    (
        "tape",
        "an uncaught exception mid-file: the tests not finished fail",
        f"{TAPE} test/tape-crash.js",
        {
            "test/tape-crash.js::before the crash": P,
            "test/tape-crash.js::crashes": F,
            "test/tape-crash.js::after the crash": F,
        },
        ["test/tape-crash.js"],
        False,
    ),
    (
        "tape",
        "process.exit(0) inside a test: the rest fail",
        f"{TAPE} test/tape-exit0.js",
        {"test/tape-exit0.js::exits early": F, "test/tape-exit0.js::never runs": F},
        ["test/tape-exit0.js"],
        False,
    ),
    (
        "tape",
        "a file that throws while loading: a collect error",
        f"{TAPE} test/tape-loadfail.js",
        {},
        ["test/tape-loadfail.js"],
        False,
    ),
    (
        "tape",
        "a test that forks node: the child does not inherit the preload",
        f"{TAPE} test/tape-fork.js",
        {"test/tape-fork.js::a forked child runs": P},
        [],
        False,
    ),
    (
        "tape",
        "test code that opens an inspector session to read the key out of the reporter's closure "
        "is refused (before the channel closed the inspector, this test printed the run's key)",
        f"{TAPE} test/tape-steal.js",
        {"test/tape-steal.js::steal": F},
        [],
        "steal",
    ),
    (
        "tape",
        "a record written into the report pipe by test code is unsigned: forged",
        f"{TAPE} test/tape-pipe-forge.js",
        None,
        [],
        True,
    ),
    (
        "mocha",
        "honest outcomes; a failing before() hook fails its tests",
        f"{MOCHA} test/mocha-honest.spec.js",
        {
            "test/mocha-honest.spec.js::math > adds": P,
            "test/mocha-honest.spec.js::math > subtracts": F,
            "test/mocha-honest.spec.js::math > nested > adds again": P,
            "test/mocha-honest.spec.js::math > nested > skipped": S,
            "test/mocha-honest.spec.js::broken hook > never runs": F,
        },
        [],
        False,
    ),
    (
        "mocha",
        "a test printing '✔ subtracts' and '1 passing' does not pass",
        f"{MOCHA} test/mocha-fake.spec.js",
        {"test/mocha-fake.spec.js::fake > subtracts": F},
        [],
        False,
    ),
    (
        "mocha",
        "process.exit(0) inside a test: it and the rest fail",
        f"{MOCHA} test/mocha-crash.spec.js",
        {
            "test/mocha-crash.spec.js::crash > first": P,
            "test/mocha-crash.spec.js::crash > exits": F,
            "test/mocha-crash.spec.js::crash > after": F,
        },
        [],
        False,
    ),
    (
        "mocha",
        "a file that throws while loading: a collect error",
        f"{MOCHA} test/mocha-loadfail.spec.js",
        {},
        ["test/mocha-loadfail.spec.js"],
        False,
    ),
    (
        "node-test",
        "honest outcomes, a fake '✔'/'ok 1' line, an early exit, a file that does not load",
        f"{NODE_TEST} test/nt-honest.test.js test/nt-fake.test.js test/nt-crash.test.js test/tape-loadfail.js",
        {
            "test/nt-honest.test.js::top add": P,
            "test/nt-honest.test.js::math > subtracts": F,
            "test/nt-honest.test.js::math > nested > adds": P,
            "test/nt-honest.test.js::math > nested > skipped": S,
            "test/nt-honest.test.js::with subtests > sub ok": P,
            "test/nt-honest.test.js::with subtests > sub bad": F,
            "test/nt-honest.test.js::with subtests": F,
            "test/nt-fake.test.js::fake > subtracts": F,
        },
        ["test/tape-loadfail.js"],
        False,
    ),
    (
        "node-test",
        "KNOWN LIMIT: a child forging node's v8-serialized protocol on its stdout passes",
        f"{NODE_TEST} test/nt-forge.test.js",
        {"test/nt-forge.test.js::math > subtracts": P},
        [],
        False,
    ),
    (
        "node-test",
        "in process (one file per process, node-test-preload.mjs): honest outcomes, signed",
        f"{NODE_TEST_IN_PROCESS} test/nt-honest.test.js",
        {
            "test/nt-honest.test.js::top add": P,
            "test/nt-honest.test.js::math > subtracts": F,
            "test/nt-honest.test.js::math > nested > adds": P,
            "test/nt-honest.test.js::math > nested > skipped": S,
            "test/nt-honest.test.js::with subtests > sub ok": P,
            "test/nt-honest.test.js::with subtests > sub bad": F,
            "test/nt-honest.test.js::with subtests": F,
        },
        [],
        False,
    ),
    (
        "node-test",
        "in process: the same forged frames are only bytes on stdout, nothing passes",
        f"{NODE_TEST_IN_PROCESS} test/nt-forge.test.js",
        {},
        [],
        False,
    ),
    (
        "node-test",
        "in process: a fake '✔ subtracts' line does not pass",
        f"{NODE_TEST_IN_PROCESS} test/nt-fake.test.js",
        {"test/nt-fake.test.js::fake > subtracts": F},
        [],
        False,
    ),
    (
        "node-test",
        "in process: a test that forks node, the child inherits none of the reporter flags",
        f"{NODE_TEST_IN_PROCESS} test/nt-fork.test.js",
        {"test/nt-fork.test.js::a forked child runs": P},
        [],
        False,
    ),
    (
        "jest",
        "in band (-i): honest outcomes, a fake 'PASS'/'✓' line; process.exit ends the run",
        f"{JEST} -i jt/honest.test.js jt/fake.test.js jt/crash.test.js jt/loadfail.test.js",
        {
            "jt/honest.test.js::math > adds": P,
            "jt/honest.test.js::math > subtracts": F,
            "jt/honest.test.js::math > skipped": S,
            "jt/honest.test.js::math > nested > adds again": P,
            "jt/fake.test.js::subtracts": F,
        },
        [],
        False,
    ),
    (
        "jest",
        "workers (-w 2): the same, a dead worker's file and a file that does not load are collect errors",
        f"{JEST} -w 2 jt/honest.test.js jt/fake.test.js jt/crash.test.js jt/loadfail.test.js",
        {
            "jt/honest.test.js::math > adds": P,
            "jt/honest.test.js::math > subtracts": F,
            "jt/honest.test.js::math > skipped": S,
            "jt/honest.test.js::math > nested > adds again": P,
            "jt/fake.test.js::subtracts": F,
        },
        ["jt/crash.test.js", "jt/loadfail.test.js"],
        False,
    ),
]


def newest_image() -> str:
    out = subprocess.run(
        ["docker", "image", "ls", "grader/env-node-20", "--format", "{{.Repository}}:{{.Tag}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not out:
        sys.exit("no grader/env-node-20 image: build it with `grader env build node-20`")
    return out[0]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--image")
    ap.add_argument("--deps", default="/tmp/grader-node-demo-deps")
    ap.add_argument("--only", help="run only the scenarios of this runner")
    a = ap.parse_args()
    image = a.image or newest_image()
    deps = os.path.abspath(a.deps)
    if not os.path.isdir(os.path.join(deps, "node_modules")):
        os.makedirs(deps, exist_ok=True)
        shutil.copy(os.path.join(PROJECT, "package.json"), deps)
        print(f"installing the demo's devDependencies into {deps} (network on) ...", flush=True)
        subprocess.run(
            [
                "docker",
                "run",
                "--rm",
                "-v",
                f"{deps}:/w",
                "-w",
                "/w",
                image,
                "sh",
                "-c",
                "npm install --ignore-scripts --no-audit --no-fund --no-package-lock >/dev/null",
            ],
            check=True,
        )
    # the project as the grader would have it: a copy, its node_modules pointing at the deps
    work = deps + "-project"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(PROJECT, work)
    os.symlink("/deps/node_modules", os.path.join(work, "node_modules"))
    print(f"image {image}; every run: docker run --network none -u 1000, repo and reporters read-only\n")
    failures = 0
    for runner, what, cmd, want, want_collect, want_forged in SCENARIOS:
        if a.only and runner != a.only:
            continue
        proc = subprocess.run(
            [
                "docker",
                "run",
                "--rm",
                "--network",
                "none",
                "-u",
                "1000",
                "--tmpfs",
                "/tmp:exec,uid=1000",
                "-v",
                f"{work}:/work/repo:ro",
                "-v",
                f"{deps}:/deps:ro",
                "-v",
                f"{REPORTERS}:{R}:ro",
                "-w",
                "/work/repo",
                image,
                "python3",
                f"{R}/demo/driver.py",
                runner,
                "--",
                "sh",
                "-c",
                cmd,
            ],
            capture_output=True,
            text=True,
        )
        try:
            rep = json.loads(proc.stdout)
        except ValueError:
            print(f"[ERROR] {runner}: {what}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
            failures += 1
            continue
        problems = []
        if want_forged == "steal":
            if rep["key_hex"] in rep["output_tail"]:
                problems.append("the test printed the run's key: it could sign anything")
            want_forged = False
        if want_forged:
            if not rep["forged"]:
                problems.append("the forged record was accepted")
        else:
            if rep["forged"]:
                problems.append(f"report rejected: {rep['forged']}")
            if want is not None and rep["outcomes"] != want:
                problems.append(f"outcomes {json.dumps(rep['outcomes'])}")
            if sorted(rep["collect_errors"]) != sorted(want_collect):
                problems.append(f"collect errors {rep['collect_errors']}")
        ok = not problems
        failures += not ok
        signed = "forged: " + rep["forged"] if rep["forged"] else f"signed, {rep['sessions']} session(s)"
        print(f"[{'ok' if ok else 'UNEXPECTED'}] {runner:9} {what}")
        print(f"     {signed}; exit {rep['exit_status']}; ends {rep['ends']}")
        for tid, outcome in rep["outcomes"].items():
            print(f"       {outcome:8} {tid}")
        for cid in rep["collect_errors"]:
            print(f"       {'error':8} {cid} (collect)")
        for p in problems:
            print(f"     !! {p}")
    print(f"\n{'all expectations held' if not failures else f'{failures} scenario(s) not as expected'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
