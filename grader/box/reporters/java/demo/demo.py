#!/usr/bin/env python3
"""Demo of the JUnit reporter in the java-21 environment image: a tiny project and five
hostile test classes, each run as uid 1000 with no network under drive.py (a pipe + a key,
as the supervisor gives them), and what the signed report says.

    python3 grader/box/reporters/java/demo/demo.py [--image grader/env-java-21:TAG]

Without --image it builds (or finds) the environment with
`grader env build java-21` (GRADER_ENVIRONMENTS_DIR pointing at this worktree). Exits 1
when any scenario does not come out as expected.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))  # the reporter's demo/ directory
REPORTER = os.path.dirname(HERE)
ROOT = os.path.normpath(os.path.join(REPORTER, "..", "..", "..", ".."))
GRADER = os.environ.get("GRADER_BIN", "/work/main/.venv/bin/grader")

# (name, attack file or None, test files, expectation)
SCENARIOS = [
    (
        "honest outcomes",
        None,
        ["demo/CalcTest.java"],
        {
            "outcomes": {
                "demo.CalcTest.addsNumbers": "passed",
                "demo.CalcTest.meanOfEmptyThrows": "failed",
                "demo.CalcTest.onlyOnMars": "skipped",
                "demo.CalcTest.disabled": "skipped",
                "demo.CalcTest.addsPairs[1]": "passed",
                "demo.CalcTest.addsPairs[2]": "passed",
                "demo.CalcTest.addsPairs[3]": "failed",
                "demo.CalcTest$Means.meanOfTwo": "passed",
            },
            "exit": 1,
            "tampered": False,
        },
    ),
    (
        "a fake success line and a fake TEST-*.xml",
        "FakeSuccessTest",
        ["demo/FakeSuccessTest.java"],
        {"outcomes": {"demo.FakeSuccessTest.forged": "failed"}, "exit": 1, "tampered": False},
    ),
    (
        "System.exit(0) in a test",
        "ExitTest",
        ["demo/ExitTest.java"],
        {"outcomes": {"demo.ExitTest.passes": "passed"}, "exit": 0, "tampered": True},
    ),
    (
        "a test class whose static initializer throws",
        "CrashTest",
        ["demo/CrashTest.java"],
        {"outcomes": {"demo.CrashTest.wouldPass": "failed"}, "exit": 1, "tampered": False},
    ),
    (
        "a test file that does not compile",
        "BrokenTest",
        ["demo/CalcTest.java", "demo/BrokenTest.java"],
        {"collect_errors": ["src/test/java/demo/BrokenTest.java"], "exit": 1, "tampered": False},
    ),
    (
        "test code reaching for the channel",
        "ReachTest",
        ["demo/ReachTest.java"],
        {"outcomes": {"demo.ReachTest.reachesForTheChannel": "failed"}, "exit": 1, "tampered": False},
    ),
]


def image() -> str:
    env = dict(os.environ, GRADER_ENVIRONMENTS_DIR=os.path.join(ROOT, "environments"), PYTHONPATH=ROOT)
    subprocess.run([GRADER, "env", "build", "java-21"], env=env, check=True, stdout=subprocess.DEVNULL)
    out = subprocess.run([GRADER, "env", "list"], env=env, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        for word in line.split():
            if word.startswith("grader/env-java-21:"):
                return word
    sys.exit("the java-21 environment image was not found after building it")


def run(img: str, attack: str | None, tests: list[str]) -> tuple[dict, str]:
    out = tempfile.mkdtemp()
    os.chmod(out, 0o777)
    copy = f"cp /r/attacks/{attack}.java /work-repo/src/test/java/demo/ && " if attack else ""
    script = (
        "cp -r /r/project /work-repo && " + copy + "chown -R 1000:1000 /work-repo && cd /work-repo && "
        "python3 /r/drive.py --out /out/report.json -- junit-run "
        + " ".join("src/test/java/" + t for t in tests)
        + " > /out/log 2>&1"
    )
    subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "--network",
            "none",
            "-v",
            f"{HERE}:/r:ro",
            "-v",
            f"{out}:/out",
            img,
            "sh",
            "-c",
            script,
        ],
        check=True,
        timeout=300,
    )
    with open(os.path.join(out, "report.json")) as f, open(os.path.join(out, "log")) as g:
        return json.load(f), g.read()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--image")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    copy = os.path.join(ROOT, "environments/java-21/reporter/src")
    same = subprocess.run(["diff", "-r", os.path.join(REPORTER, "src"), copy], capture_output=True, text=True)
    if same.returncode:
        print("environments/java-21/reporter is not a copy of src/: run demo/sync-env.sh\n" + same.stdout)
        return 1
    img = a.image or image()
    print(f"image {img}")
    bad = 0
    for name, attack, tests, want in SCENARIOS:
        rep, log = run(img, attack, tests)
        got_tampered = bool(rep["tampered"])
        ok = rep["exit"] == want["exit"] and got_tampered == want["tampered"] and rep["forged"] is None
        for tid, outcome in want.get("outcomes", {}).items():
            ok = ok and rep["outcomes"].get(tid) == outcome
        ok = ok and all(c in rep["collect_errors"] for c in want.get("collect_errors", []))
        bad += not ok
        print(
            f"\n{'ok ' if ok else 'BAD'} {name}: exit {rep['exit']}, {rep['sessions']} signed session(s), "
            f"{len(rep['ends'])} end record(s)"
        )
        for tid, outcome in sorted(rep["outcomes"].items()):
            print(f"      {outcome:8} {tid}")
        for c in rep["collect_errors"]:
            print(f"      collect error: {c}")
        for t in rep["tampered"]:
            print(f"      tampered: {t}")
        if attack == "FakeSuccessTest":
            print(
                "      (its stdout had: "
                + "; ".join(ln.strip() for ln in log.splitlines() if "tests successful" in ln or "Tests run" in ln)[
                    :160
                ]
                + ")"
            )
        if attack == "ReachTest":
            for line in log.splitlines():
                if line.startswith(("/proc/self/fd", "FileDescriptor", "Channel.open", "env GRADER")):
                    print(f"      the test saw: {line}")
        if a.verbose or not ok:
            print(log[-4000:])
    print(f"\n{len(SCENARIOS) - bad} of {len(SCENARIOS)} scenarios as expected")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
