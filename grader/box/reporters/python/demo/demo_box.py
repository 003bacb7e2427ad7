"""The in-container half of the unittest reporter's demo (standard library, Python 3.9+).

Run as root inside an environment image (demo.py does it, with --network none). It plays
the supervisor: writes a tiny project to /work/repo (owned by uid 1000), copies the
reporter under a random module name into a root-owned directory, and for each scenario
makes a key file (root-only, opened then deleted) and a pipe, runs the tests as uid 1000
through the reporter, then checks every record's signature and folds them into outcomes:
with its own reader of CONTRACT.md's rules and, when grader/box is mounted at /opt/grader-code/box,
with the grader's own read_report too. Exit status 0 when every scenario gave what it
should.

    python3 demo_box.py            # the tiny project's scenarios
    python3 demo_box.py --django   # Django's runtests.py --parallel 2 (the image must have it)
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
REPORTER = os.path.join(os.path.dirname(HERE), "unittest_report.py")
REPO = "/work/repo"
USER = 1000

PROJECT = {
    "calc/__init__.py": """
        def add(a, b):
            return a + b


        def div(a, b):
            return a / b
    """,
    "tests/__init__.py": "",
    "tests/test_calc.py": """
        import unittest

        import calc


        class CalcTests(unittest.TestCase):
            def test_add(self):
                self.assertEqual(calc.add(2, 3), 5)

            def test_add_wrong(self):
                self.assertEqual(calc.add(2, 2), 5)

            def test_div_zero(self):
                calc.div(1, 0)

            @unittest.skip("not today")
            def test_skipped(self):
                pass

            @unittest.expectedFailure
            def test_xfail(self):
                self.assertEqual(1, 2)

            @unittest.expectedFailure
            def test_xpass(self):
                pass

            def test_subtests(self):
                for i in range(3):
                    with self.subTest(i=i):
                        self.assertLess(i, 2)

            def test_subtests_ok(self):
                for i in range(3):
                    with self.subTest(i=i):
                        self.assertLess(i, 5)


        class BrokenFixture(unittest.TestCase):
            @classmethod
            def setUpClass(cls):
                raise RuntimeError("no database")

            def test_never_runs(self):
                pass
    """,
    # a failing test that prints unittest's own success lines, on both streams
    "fake/test_fake.py": """
        import sys
        import unittest


        class FakeTests(unittest.TestCase):
            def test_fake(self):
                line = "test_fake (test_fake.FakeTests) ... ok\\n"
                sys.stderr.write(line)
                sys.stdout.write(line + "-" * 70 + "\\nRan 1 test in 0.001s\\n\\nOK\\n")
                sys.stderr.write("-" * 70 + "\\nRan 1 test in 0.001s\\n\\nOK\\n")
                self.fail("the real outcome")
    """,
    # a test module that cannot be imported, beside one that can
    "crash/test_crash.py": """
        raise ImportError("this module crashes when it is imported")
    """,
    "crash/test_fine.py": """
        import unittest


        class Fine(unittest.TestCase):
            def test_fine(self):
                pass
    """,
    # a test that ends the process with status 0 after a failure
    "exit/test_exit.py": """
        import os
        import unittest


        class ExitTests(unittest.TestCase):
            def test_a_fails(self):
                self.fail("a real failure")

            def test_b_exits(self):
                os._exit(0)
    """,
    # a test that finds the result object and reports itself passed, then fails
    "forge/test_forge.py": """
        import sys
        import unittest


        class ForgeTests(unittest.TestCase):
            def test_forge(self):
                frame = sys._getframe()
                while frame is not None and "result" not in frame.f_locals:
                    frame = frame.f_back
                result = frame.f_locals["result"]
                result.addSuccess(self)
                result.stopTest(self)
                self.fail("this test really fails")
    """,
    # code under test that runs the calling test again inside itself, with a passing body,
    # so that unittest itself reports it passed, then stops the process before the real
    # outcome is reported
    "again/lib.py": """
        import sys


        def compute():
            frame = sys._getframe(1)
            test, result = frame.f_locals["self"], None
            while frame is not None and result is None:
                result = frame.f_locals.get("result")
                frame = frame.f_back
            setattr(test, test._testMethodName, lambda: None)
            test.run(result)
            raise KeyboardInterrupt
    """,
    "again/test_again.py": """
        import unittest

        import lib


        class AgainTests(unittest.TestCase):
            def test_again(self):
                self.assertEqual(lib.compute(), 42)
    """,
    # code under test that turns every failure of the runner's result class into a success
    "evil/evil.py": """
        import unittest


        def _as_success(self, test, err):
            unittest.TestResult.addSuccess(self, test)


        unittest.TextTestResult.addFailure = _as_success
        unittest.TextTestResult.addError = _as_success
    """,
    "evil/test_evil.py": """
        import unittest

        import evil  # noqa: F401


        class EvilTests(unittest.TestCase):
            def test_fails(self):
                self.assertEqual(1, 2)
    """,
    # a test that writes a record of its own into the report pipe
    "pipe/test_pipe.py": """
        import os
        import unittest


        class PipeTests(unittest.TestCase):
            def test_pipe(self):
                forged = b'{"id":"test_pipe.PipeTests.test_pipe","outcome":"passed","s":"0123456789abcdef",'
                forged += b'"t":"test","when":"call"}\\t' + b"0" * 64 + b"\\n"
                for fd in os.listdir("/proc/self/fd"):
                    try:
                        target = os.readlink("/proc/self/fd/" + fd)
                    except OSError:
                        continue
                    if target.startswith("pipe:") and int(fd) > 2:
                        os.write(int(fd), forged)
                self.fail("really failing")
    """,
}

# scenario -> (argv after `python -m REPORTER`, cwd, expected outcomes, what else must hold)
SCENARIOS = [
    (
        "honest outcomes (unittest discover)",
        ["-m", "unittest", "discover", "-s", "tests", "-t", "."],
        REPO,
        {
            "tests.test_calc.CalcTests.test_add": "passed",
            "tests.test_calc.CalcTests.test_add_wrong": "failed",
            "tests.test_calc.CalcTests.test_div_zero": "failed",
            "tests.test_calc.CalcTests.test_skipped": "skipped",
            "tests.test_calc.CalcTests.test_xfail": "skipped",
            "tests.test_calc.CalcTests.test_xpass": "failed",
            "tests.test_calc.CalcTests.test_subtests": "failed",
            "tests.test_calc.CalcTests.test_subtests_ok": "passed",
            "setUpClass (tests.test_calc.BrokenFixture)": "failed",
        },
        {"ended": True, "exit": 1, "forged": False},
    ),
    (
        "the SWE-bench id form (setting ids=paren), a script run: python -m unittest as a file",
        ["tests/run.py"],
        REPO,
        {
            "test_add (tests.test_calc.CalcTests)": "passed",
            "test_add_wrong (tests.test_calc.CalcTests)": "failed",
        },
        {"ended": True, "exit": 1, "forged": False, "settings": {"ids": "paren"}},
    ),
    (
        "a failing test that prints unittest's success lines",
        ["-m", "unittest", "test_fake"],
        REPO + "/fake",
        {"test_fake.FakeTests.test_fake": "failed"},
        {"ended": True, "exit": 1, "forged": False, "output_has": "test_fake (test_fake.FakeTests) ... ok"},
    ),
    (
        "a test module that crashes at import",
        ["-m", "unittest", "discover", "-s", "crash", "-t", "crash"],
        REPO,
        {"test_fine.Fine.test_fine": "passed"},
        {"ended": True, "exit": 1, "forged": False, "collect_errors": ["test_crash"]},
    ),
    (
        "os._exit(0) after a failure",
        ["-m", "unittest", "-v", "test_exit"],
        REPO + "/exit",
        {"test_exit.ExitTests.test_a_fails": "failed"},
        {"ended": False, "exit": 0, "forged": False},
    ),
    (
        "a test that calls result.addSuccess/stopTest on itself, then fails",
        ["-m", "unittest", "test_forge"],
        REPO + "/forge",
        {"test_forge.ForgeTests.test_forge": "failed"},
        {"ended": True, "exit": 1, "forged": False, "integrity": True},
    ),
    (
        "code under test that runs the test again inside itself (passing), then interrupts",
        ["-m", "unittest", "test_again"],
        REPO + "/again",
        {},
        {
            "ended": True,
            "exit": 130,
            "forged": False,
            "integrity": True,
            "not_passed": ["test_again.AgainTests.test_again"],
        },
    ),
    (
        "code under test that turns failures into successes in TextTestResult",
        ["-m", "unittest", "test_evil"],
        REPO + "/evil",
        {},  # the failure is not counted as a success; the test is missing, never passed
        {"ended": True, "forged": False, "integrity": True, "not_passed": ["test_evil.EvilTests.test_fails"]},
    ),
    (
        "a test that writes a forged record into the report pipe",
        ["-m", "unittest", "test_pipe"],
        REPO + "/pipe",
        {},
        {"forged": True},
    ),
]

RUN_PY = """
import sys
import unittest

sys.exit(unittest.main(module=None, argv=["run.py", "discover", "-s", "tests", "-t", "."], exit=False)
         .result.wasSuccessful() is False)
"""


def write_project() -> None:
    shutil.rmtree(REPO, ignore_errors=True)
    for rel, text in PROJECT.items():
        path = os.path.join(REPO, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text).lstrip("\n"))
    with open(os.path.join(REPO, "tests", "run.py"), "w") as f:
        f.write(RUN_PY.lstrip("\n"))
    for root, dirs, files in os.walk(REPO):
        for name in dirs + files:
            os.chown(os.path.join(root, name), USER, USER)
    os.chown(REPO, USER, USER)


def install_reporter() -> tuple[str, str]:
    """The reporter under a module name of this run, in a root-owned directory."""
    module = "grader_unittest_" + secrets.token_hex(8)
    d = tempfile.mkdtemp(prefix=".grader-", dir="/tmp")
    os.chmod(d, 0o755)
    shutil.copy(REPORTER, os.path.join(d, module + ".py"))
    os.chmod(os.path.join(d, module + ".py"), 0o444)
    return d, module


def run(argv: list[str], cwd: str, settings: dict, timeout: int = 300) -> tuple[int, bytes, bytes, bytes]:
    """One run through the reporter as uid 1000: (exit status, report, key, output)."""
    key = secrets.token_bytes(32)
    os.makedirs("/opt/grader/run", mode=0o700, exist_ok=True)
    fd, path = tempfile.mkstemp(prefix=".grader-key-", dir="/opt/grader/run")
    os.write(fd, key + json.dumps(dict({"repo": REPO, "tests": []}, **settings)).encode())
    os.close(fd)
    key_fd = os.open(path, os.O_RDONLY)
    os.unlink(path)
    rep_r, rep_w = os.pipe()
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: os.read(rep_r, 65536), b"")))
    reader.start()
    plugin_dir, module = install_reporter()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONPATH": plugin_dir,
        "PYTHONDONTWRITEBYTECODE": "1",
        "GRADER_REPORT_FD": str(rep_w),
        "GRADER_KEY_FD": str(key_fd),
    }
    try:
        proc = subprocess.run(
            ["python", "-m", module] + argv,
            cwd=cwd,
            env=env,
            pass_fds=(rep_w, key_fd),
            user=USER,
            group=USER,
            extra_groups=[],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=timeout,
        )
    finally:
        os.close(rep_w)
        os.close(key_fd)
        reader.join()
        os.close(rep_r)
        shutil.rmtree(plugin_dir, ignore_errors=True)
    return proc.returncode, b"".join(chunks), key, proc.stdout


def read(data: bytes, key: bytes) -> dict:
    """CONTRACT.md's rules, read independently of the grader: every line signed in its
    session's chain, `start` first, no test twice, nothing after `end`."""
    out = {"forged": None, "sessions": {}, "outcomes": {}, "collect_errors": [], "integrity": [], "end": None}
    chains: dict[str, bytes] = {}
    for n, line in enumerate(data.split(b"\n"), 1):
        if not line:
            continue
        body, _, mac = line.rpartition(b"\t")
        try:
            rec = json.loads(body)
            sid = str(rec["s"])
        except (ValueError, KeyError, TypeError):
            out["forged"] = f"line {n} is not a signed record"
            break
        want = hmac.new(key, chains.get(sid, b"") + body, hashlib.sha256).hexdigest().encode()
        if not hmac.compare_digest(want, mac):
            out["forged"] = f"line {n}: bad signature"
            break
        session = out["sessions"].setdefault(sid, {"started": False, "ended": False})
        if sid not in chains and rec.get("t") != "start":
            out["forged"] = f"line {n}: the session does not start with `start`"
            break
        chains[sid] = mac
        if session["ended"]:
            out["forged"] = f"line {n}: a record after `end`"
            break
        kind = rec.get("t")
        if kind == "start":
            session["started"] = True
        elif kind == "end":
            session["ended"] = True
            out["end"] = rec
        elif kind == "collect":
            out["collect_errors"].append(rec["id"])
        elif kind == "integrity":
            out["integrity"].append(rec["what"])
        elif kind == "test":
            if rec["id"] in out["outcomes"]:
                out["forged"] = f"line {n}: {rec['id']} reported twice"
                break
            out["outcomes"][rec["id"]] = rec["outcome"] + (" (xfail)" if rec.get("xfail") else "")
    return out


def grader_reader():
    """read_report of grader/box/channel.py, when the package is mounted (demo.py does)."""
    if not os.path.exists("/opt/grader-code/box/channel.py"):
        return None
    sys.path.insert(0, "/opt/grader-code")
    try:
        from box.channel import read_report
    finally:
        sys.path.remove("/opt/grader-code")
    return read_report


def judge(name, argv, cwd, expected, must, grader_read) -> bool:
    status, data, key, output = run(argv, cwd, must.get("settings", {}))
    rep = read(data, key)
    problems = []
    got = {k: v.replace(" (xfail)", "") for k, v in rep["outcomes"].items()}
    for tid, outcome in expected.items():
        if got.get(tid) != outcome:
            problems.append(f"{tid}: expected {outcome}, reported {got.get(tid)}")
    for tid in must.get("not_passed", []):
        if got.get(tid) == "passed":
            problems.append(f"{tid} reported passed")
    ended = bool(rep["sessions"]) and all(s["ended"] for s in rep["sessions"].values())
    if "ended" in must and ended != must["ended"]:
        problems.append(f"session ended: {ended}, expected {must['ended']}")
    if "exit" in must and status != must["exit"]:
        problems.append(f"exit status {status}, expected {must['exit']}")
    if must.get("ended") and rep["end"] and rep["end"]["exit"] != status:
        problems.append(f"end record says exit {rep['end']['exit']}, the process exited {status}")
    if "forged" in must and bool(rep["forged"]) != must["forged"]:
        problems.append(f"forged: {rep['forged']!r}, expected {must['forged']}")
    if len(rep["outcomes"]) < must.get("min_tests", 0):
        problems.append(f"{len(rep['outcomes'])} tests reported, expected at least {must['min_tests']}")
    if must.get("integrity") and not rep["integrity"]:
        problems.append("no integrity record")
    if "collect_errors" in must and rep["collect_errors"] != must["collect_errors"]:
        problems.append(f"collect errors {rep['collect_errors']}, expected {must['collect_errors']}")
    if "output_has" in must and must["output_has"].encode() not in output:
        problems.append("the fake line is not in the output")
    print(f"\n== {name}")
    print(f"   $ python -m <reporter> {' '.join(argv)}    (cwd {cwd}, exit {status})")
    for tid, outcome in sorted(rep["outcomes"].items()):
        print(f"   {outcome:<16} {tid}")
    for cid in rep["collect_errors"]:
        print(f"   {'collect error':<16} {cid}")
    for what in rep["integrity"]:
        print(f"   integrity        {what}")
    sessions = ", ".join(f"{'ended' if s['ended'] else 'NO END'}" for s in rep["sessions"].values())
    print(f"   sessions: {sessions or 'none'}; forged: {rep['forged'] or 'no'}; {len(data.splitlines())} signed lines")
    if grader_read is not None:
        g = grader_read(data, key)
        print(
            f"   the grader's read_report: forged={g['forged']!r} sessions={g['sessions']} ends={g['ends']} "
            f"outcomes={len(g['outcomes'])} collect_errors={g['collect_errors']} integrity={len(g['integrity'])}"
        )
        if bool(g["forged"]) != bool(rep["forged"]) or (not rep["forged"] and g["outcomes"] != got):
            problems.append(f"the grader's reader disagrees: {g['forged']!r} {g['outcomes']}")
    if must.get("django"):
        text = output.decode(errors="replace")
        ran = re.search(r"^Ran (\d+) tests?", text, re.M)
        verdict = re.search(r"^(OK|FAILED)\b.*$", text, re.M)
        clones = len(re.findall(r"^Cloning test database", text, re.M))
        print(
            f"   Django says: {ran.group(0) if ran else 'no Ran line'}; {verdict.group(0) if verdict else '?'}; "
            f"test databases cloned for workers: {clones}"
        )
        if not ran or int(ran.group(1)) != len(rep["outcomes"]):
            problems.append(f"Django ran {ran.group(1) if ran else '?'} tests, {len(rep['outcomes'])} records")
        if must.get("clones") and clones < must["clones"]:
            problems.append("Django did not run in parallel (no test database cloned)")
    if must.get("show_output") or problems:
        print(textwrap.indent(output.decode(errors="replace")[-3000:], "   | "))
    for p in problems:
        print(f"   PROBLEM: {p}")
    print(f"   {'as expected' if not problems else 'NOT AS EXPECTED'}")
    return not problems


def django_scenarios():
    """Django's own runtests.py, --parallel 2, on an app of demo tests beside a real one."""
    tests_dir = "/opt/django/tests"
    app = os.path.join(tests_dir, "demo_unittest_report")
    os.makedirs(app, exist_ok=True)
    with open(os.path.join(app, "__init__.py"), "w"):
        pass
    with open(os.path.join(app, "tests.py"), "w") as f:
        f.write(
            textwrap.dedent(
                """
                import sys
                import unittest

                from django.test import SimpleTestCase


                class DemoTests(SimpleTestCase):
                    def test_pass(self):
                        self.assertEqual(1 + 1, 2)

                    def test_fail(self):
                        line = "test_fail (demo_unittest_report.tests.DemoTests) ... ok\\n"
                        sys.stdout.write(line)
                        sys.stderr.write(line)
                        self.assertEqual(1 + 1, 3)

                    def test_error(self):
                        raise RuntimeError("boom")

                    @unittest.skip("demo")
                    def test_skip(self):
                        pass

                    def test_subtest(self):
                        for i in range(3):
                            with self.subTest(i=i):
                                self.assertLess(i, 2)


                class MoreDemoTests(SimpleTestCase):
                    def test_pass_too(self):
                        pass
                """
            )
        )
    for root, dirs, files in os.walk(tests_dir):
        for name in dirs + files:
            os.chown(os.path.join(root, name), USER, USER)
    os.chown(tests_dir, USER, USER)
    labels = ["demo_unittest_report", "basic", "str"]
    expected = {
        "demo_unittest_report.tests.DemoTests.test_pass": "passed",
        "demo_unittest_report.tests.DemoTests.test_fail": "failed",
        "demo_unittest_report.tests.DemoTests.test_error": "failed",
        "demo_unittest_report.tests.DemoTests.test_skip": "skipped",
        "demo_unittest_report.tests.DemoTests.test_subtest": "failed",
        "demo_unittest_report.tests.MoreDemoTests.test_pass_too": "passed",
        "basic.tests.ModelInstanceCreationTests.test_object_is_not_written_to_database_until_save_was_called": "passed",
    }
    return [
        (
            "Django runtests.py --parallel 2 (results reach the parent through Django's events)",
            ["runtests.py", "--parallel", "2", "-v", "2"] + labels,
            tests_dir,
            expected,
            {"ended": True, "exit": 1, "forged": False, "min_tests": 40, "django": True, "clones": 1},
        ),
        (
            "Django runtests.py --parallel 1 (in one process), ids in the SWE-bench form",
            ["runtests.py", "--parallel", "1"] + labels,
            tests_dir,
            {
                "test_pass (demo_unittest_report.tests.DemoTests)": "passed",
                "test_fail (demo_unittest_report.tests.DemoTests)": "failed",
                "test_subtest (demo_unittest_report.tests.DemoTests)": "failed",
            },
            {"ended": True, "exit": 1, "forged": False, "settings": {"ids": "paren"}, "django": True},
        ),
    ]


def main() -> int:
    print(f"Python {sys.version.split()[0]} in {os.uname().nodename}; the reporter runs as uid {USER}")
    grader_read = grader_reader()
    if "--django" in sys.argv:
        scenarios = django_scenarios()
    else:
        write_project()
        scenarios = SCENARIOS
    ok = True
    for name, argv, cwd, expected, must in scenarios:
        ok = judge(name, argv, cwd, expected, must, grader_read) and ok
    print("\nall scenarios as expected" if ok else "\nSOME SCENARIOS NOT AS EXPECTED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
