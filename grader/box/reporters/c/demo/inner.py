"""Inside the container, as root with the supervisor's five capabilities: a stand-in for the
supervisor. Builds the demo project as uid 1000, runs it once under plain ctest (as uid 1000,
for comparison) and once under the launcher with a pipe and a key, checks every record's
signature and chain as the supervisor does, and compares the outcomes with what each test
deserves. Exit 0 when the launcher got every one right."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import shutil
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET

UID = GID = 1000
LAUNCHER = "/opt/reporter/ctest_launcher.py"

# what each test deserves, and why
EXPECTED = {
    "honest_pass": ("passed", "returns 0"),
    "writes_output": ("passed", "writes out.txt in its working directory and reads it back"),
    "leftover": ("passed", "returns 0; the process it leaves behind is killed"),
    "honest_fail": ("failed", "returns 1 (the leftover process tries to replace it)"),
    "fake_success_lines": ("failed", "prints ctest/automake/TAP/gtest success lines, returns 1"),
    "crash": ("failed", "prints Passed, then SIGSEGV"),
    "abort_after_pass": ("failed", "prints 100% tests passed, then abort()"),
    "tamper": ("passed", "returns 0; every attempt at the next test or the channel is refused"),
    "victim": ("failed", "returns 1 (tamper tries to replace it)"),
    "will_fail": ("passed", "WILL_FAIL and returns 1"),
    "regex_forgery": ("failed", "PASS_REGULAR_EXPRESSION printed, returns 3"),
    "hang": ("failed", "prints 100% tests passed, then hangs past its TIMEOUT (2 s)"),
    "exit_zero_in_library": ("passed", "the known limit: the library calls exit(0) before the check"),
}


def as_user() -> None:
    os.setgroups([])
    os.setgid(GID)
    os.setuid(UID)


def sh(cmd: str, cwd: str) -> None:
    subprocess.run(["sh", "-c", cmd], cwd=cwd, preexec_fn=as_user, check=True, stdout=subprocess.DEVNULL)


def chown_tree(root: str) -> None:
    for d, dirs, files in os.walk(root):
        for n in [None] + dirs + files:
            os.lchown(d if n is None else os.path.join(d, n), UID, GID)


def plain_ctest(repo: str, *args: str) -> dict[str, str]:
    """ctest run the ordinary way, as the user the tests run as."""
    if os.path.exists("/tmp/plain-junit.xml"):
        os.unlink("/tmp/plain-junit.xml")
    subprocess.run(
        ["ctest", "--output-junit", "/tmp/plain-junit.xml", "--timeout", "60", *args],
        cwd=os.path.join(repo, "build"),
        preexec_fn=as_user,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ, HOME="/tmp"),
    )
    subprocess.run(["pkill", "-KILL", "-U", str(UID)], check=False)
    out = {}
    try:
        root = ET.parse("/tmp/plain-junit.xml").getroot()
    except (OSError, ET.ParseError) as exc:
        return {"(no JUnit file)": f"ctest wrote no report: {exc.__class__.__name__}"}
    for tc in root.iter("testcase"):
        status = {"run": "passed", "fail": "failed", "notrun": "skipped", "disabled": "skipped"}.get(
            str(tc.get("status")), "?"
        )
        if tc.find("failure") is not None:
            status = "failed"
        out[str(tc.get("name"))] = status
    return out


def verify(data: bytes, key: bytes) -> tuple[dict[str, str], list[str], str | None]:
    """The supervisor's reading of the channel: every line signed, chained per session, nothing
    after the end, no test twice."""
    outcomes: dict[str, str] = {}
    notes: list[str] = []
    chains: dict[str, bytes] = {}
    ended: set[str] = set()
    for n, line in enumerate(data.split(b"\n"), 1):
        if not line:
            continue
        body, _, mac = line.rpartition(b"\t")
        try:
            rec = json.loads(body)
            sid = str(rec["s"])
        except (ValueError, KeyError, TypeError):
            return outcomes, notes, f"line {n} is not a signed record"
        want = hmac.new(key, chains.get(sid, b"") + body, hashlib.sha256).hexdigest().encode()
        if not hmac.compare_digest(want, mac):
            return outcomes, notes, f"line {n}: bad signature"
        chains[sid] = mac
        if sid in ended:
            return outcomes, notes, f"line {n}: a record after the end"
        if rec["t"] == "end":
            ended.add(sid)
            notes.append(f"end: exit {rec['exit']}, {rec['collected']} tests")
        elif rec["t"] == "start":
            notes.append(f"start: pid {rec['pid']}, session {sid}")
        elif rec["t"] == "test":
            if rec["id"] in outcomes:
                return outcomes, notes, f"line {n}: {rec['id']} twice"
            outcomes[rec["id"]] = rec["outcome"]
        elif rec["t"] == "collect":
            notes.append(f"collection error: {rec['id']}")
    if len(ended) != len(chains):
        return outcomes, notes, "a session never ended"
    return outcomes, notes, None


def launcher(repo: str, args: list[str] | None = None) -> tuple[dict[str, str], list[str], str | None, int, str]:
    os.makedirs("/opt/grader/run", mode=0o700, exist_ok=True)
    key = secrets.token_bytes(32)
    path = "/opt/grader/run/.key"
    with open(path, "wb") as f:
        f.write(key + json.dumps({"repo": repo}).encode())
    os.chmod(path, 0o600)
    key_fd = os.open(path, os.O_RDONLY)
    os.unlink(path)
    rep_r, rep_w = os.pipe()
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: os.read(rep_r, 65536), b"")))
    reader.start()
    proc = subprocess.run(
        ["python3", LAUNCHER, "--repo", repo, "--timeout", "60"] + (args or ["--build-dir", "build"]),
        cwd=repo,
        pass_fds=(rep_w, key_fd),
        env=dict(os.environ, GRADER_REPORT_FD=str(rep_w), GRADER_KEY_FD=str(key_fd)),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    os.close(rep_w)
    os.close(key_fd)
    reader.join()
    os.close(rep_r)
    outcomes, notes, forged = verify(b"".join(chunks), key)
    return outcomes, notes, forged, proc.returncode, proc.stdout.decode(errors="replace")


AM_EXPECTED = {
    "honest_pass": ("passed", "returns 0"),
    "honest_fail": ("failed", "returns 1"),
    "fake_trs": ("failed", "prints PASS lines and writes its own .trs saying PASS, returns 1"),
    "crash": ("failed", "prints Passed, then SIGSEGV"),
    "tamper": ("passed", "returns 0; its attempt to replace the next test is refused"),
    "victim": ("failed", "returns 1 (tamper tries to replace it)"),
    "xfail": ("passed", "in XFAIL_TESTS and returns 1"),
    "skip": ("skipped", "returns 77"),
    "hard_error": ("failed", "prints PASS, returns 99"),
    "script.sh": ("passed", "a shell test through SH_LOG_DRIVER, exits 0"),
}


def plain_make_check(top: str) -> dict[str, str]:
    """make check the ordinary way, as the tests' user; outcomes from the .trs files."""
    subprocess.run(
        ["make", "-k", "check"], cwd=top, preexec_fn=as_user, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env=dict(os.environ, HOME="/tmp"),
    )  # fmt: skip
    subprocess.run(["pkill", "-KILL", "-U", str(UID)], check=False)
    names = {
        "PASS": "passed",
        "XFAIL": "passed",
        "FAIL": "failed",
        "XPASS": "failed",
        "ERROR": "failed",
        "SKIP": "skipped",
    }
    out = {}
    for name in AM_EXPECTED:
        try:
            with open(os.path.join(top, os.path.splitext(name)[0] + ".trs")) as f:
                results = [line.split(":", 2)[2].strip() for line in f if line.startswith(":test-result:")]
        except OSError:
            continue
        out[name] = names.get(results[0], "?") if results else "?"
    return out


def main_automake() -> int:
    for where in ("/work/am", "/work/amplain"):
        for part in ("am-project", "project"):
            shutil.copytree(f"/opt/demo/{part}", f"{where}/{part}")
        chown_tree(where)
        sh("autoreconf -fi >/dev/null 2>&1 && ./configure >/dev/null", f"{where}/am-project")
    plain = plain_make_check("/work/amplain/am-project")
    outcomes, notes, forged, rc, output = launcher("/work/am", ["--automake", "--build-dir", "am-project"])
    print("== the launcher's output (the listing make check, then each test) ==")
    print("\n".join(line for line in output.splitlines() if line.startswith(("----", "tamper", "PASS", ":test"))))
    print("\n== the signed channel ==")
    for n in notes:
        print(" ", n)
    print("  forged:", forged)
    print("\n== outcomes ==")
    print(f"{'test':14} {'deserves':9} {'make check':11} {'launcher':9}  why")
    wrong = []
    for name, (want, why) in AM_EXPECTED.items():
        got = outcomes.get(name, "missing")
        if got != want:
            wrong.append(name)
        print(f"{name:14} {want:9} {plain.get(name, '-'):11} {got:9}  {why}{'' if got == want else '   <-- WRONG'}")
    if sorted(set(outcomes) - set(AM_EXPECTED)):
        wrong.append(f"unexpected ids {sorted(set(outcomes) - set(AM_EXPECTED))}")
    fooled = sorted(n for n, (want, _) in AM_EXPECTED.items() if plain.get(n) != want)
    print(f"\nplain make check (same user as the tests) got {len(fooled)} wrong: {', '.join(fooled) or 'none'}")
    verdict = "every outcome as deserved" if not wrong and not forged else f"WRONG: {wrong}"
    print(f"launcher exit status {rc}; {verdict}")
    return 0 if not wrong and not forged else 1


def main() -> int:
    if sys.argv[1:] == ["automake"]:
        return main_automake()
    # three separate builds (a build tree names its own absolute paths): two for plain ctest
    for where in ("/work/repo", "/work/plain", "/work/plain2"):
        shutil.copytree("/opt/demo/project", where)
        chown_tree(where)
        sh("cmake -S . -B build >/dev/null && cmake --build build >/dev/null", where)
    whole = plain_ctest("/work/plain")
    plain = plain_ctest("/work/plain2", "-E", "^tamper$")  # without the test that kills ctest
    outcomes, notes, forged, rc, output = launcher("/work/repo")
    print("== the launcher's output (framing lines and test output: none of it decides) ==")
    print(output.rstrip())
    print("\n== the signed channel ==")
    for n in notes:
        print(" ", n)
    print("  forged:", forged)
    print("\n== outcomes ==")
    print(f"{'test':22} {'deserves':9} {'plain ctest':12} {'launcher':9}  why")
    wrong = []
    for name, (want, why) in EXPECTED.items():
        got = outcomes.get(name, "missing")
        mark = "" if got == want else "   <-- WRONG"
        if got != want:
            wrong.append(name)
        print(f"{name:22} {want:9} {plain.get(name, '-'):12} {got:9}  {why}{mark}")
    extra = sorted(set(outcomes) - set(EXPECTED))
    if extra:
        wrong.append(f"unexpected ids {extra}")
    fooled = sorted(n for n, (want, _) in EXPECTED.items() if plain.get(n) not in (want,))
    print(f"\nplain ctest, every test, as the tests' user: {json.dumps(whole)}")
    print(f"plain ctest without tamper (the column above) got {len(fooled)} wrong: {', '.join(fooled) or 'none'}")
    verdict = "every outcome as deserved" if not wrong and not forged else f"WRONG: {wrong}"
    print(f"launcher exit status {rc}; {verdict}")
    return 0 if not wrong and not forged else 1


if __name__ == "__main__":
    sys.exit(main())
