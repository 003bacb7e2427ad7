"""The unittest reporter: the only voice of a unittest (or Django runtests.py) run the
supervisor listens to.

Standard library only, Python 3.9 and newer. The supervisor writes this file, under a module
name drawn at random for every run, into a root-owned directory on the environment's
sys.path, and runs the task's tests through it:

    python -m <module> -m unittest discover -s tests        # any `python -m X ...`
    python -m <module> tests/runtests.py --parallel 2 auth   # any script and its arguments

At import it takes the run's secret from the key descriptor (read at offset 0, closed),
removes GRADER_REPORT_FD / GRADER_KEY_FD from the environment, marks the report pipe
close-on-exec, and writes its signed `start` record (CONTRACT.md: one JSON line with an
HMAC-SHA256 chained over the session's records). Then, before any code of the repository
is imported, it replaces the outcome methods of `unittest.TestResult` at class level
(addSuccess, addFailure, addError, addSkip, addExpectedFailure, addUnexpectedSuccess,
addSubTest, and startTest / stopTest around them). Every result class derives from it:
TextTestResult, Django's DebugSQLTextTestResult, the result a Django --parallel parent
replays its workers' events into. It runs the script or module with runpy, in this
process, and writes `end` with the exit status when the script returns or raises
SystemExit. A process that ends otherwise (os._exit, a signal) leaves a session with no end.

A test's record is written when the test stops, with the worst outcome its result was
told of: a failed subtest fails the test, an expected failure is skipped (xfail), an
unexpected success is failed. A test module that cannot be imported (unittest's
_FailedTest) is a `collect` error. Records are written by the process that imported this
module only: a Django --parallel worker (forked) inherits these hooks, stays silent, and
its results count when the parent receives them through Django's own event protocol.

Test ids: `module.Class.test_name` (what TestCase.id() gives), or with the setting
"ids": "paren" the SWE-bench form `test_name (module.Class)`. Both are made from the
test's class and method name, not from str() (which Python 3.11 changed) nor from an
id() a test class may override.

It also watches the process, and says what it saw as `integrity` records (as the pytest
plugin does): an outcome method of unittest's that a result class turned into another
(the stack shows unittest's case.py asking for addFailure and the record arriving as
addSuccess); a function or method of unittest's, or one of these hooks, replaced; an
audit hook for the means of reaching this module's memory (the garbage collector's
object lists, trace and profile functions, marshal, code compiled under another file's
name) used by anything but the standard library, installed packages or the task's tests.
"""

from __future__ import annotations

import sys

# The standard modules this reporter uses are imported with the working directory off
# sys.path (`python -m` puts it first): a repository file named like one of them must not
# stand in for it. The path is put back before the task's script runs.
_dropped = None
if sys.path and not getattr(sys.flags, "safe_path", False):
    _dropped = sys.path.pop(0)
import hashlib  # noqa: E402
import hmac  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import runpy  # noqa: E402
import sysconfig  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402
import unittest  # noqa: E402
import unittest.case  # noqa: E402
import unittest.loader  # noqa: E402
import unittest.main  # noqa: E402
import unittest.result  # noqa: E402
import unittest.runner  # noqa: E402
import unittest.suite  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

if _dropped is not None:
    sys.path.insert(0, _dropped)
del _dropped

OUTCOMES = (
    "addSuccess",
    "addFailure",
    "addError",
    "addSkip",
    "addExpectedFailure",
    "addUnexpectedSuccess",
    "addSubTest",
)
RANK = {"passed": 0, "skipped": 1, "failed": 2}
FAILING = ("addFailure", "addError", "addUnexpectedSuccess", "addSubTest")

Record = dict[str, Any]
Emit = Callable[[Record], None]


def _channel() -> tuple[Emit, dict[str, Any], int]:
    """The emitter of this session's signed records, and the settings of the key file."""
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
    key, settings = secret[:32], json.loads(secret[32:].decode() or "{}")
    session = os.urandom(8).hex()
    chain = [b""]
    lock = threading.Lock()
    pid = os.getpid()

    def emit(record: Record) -> None:
        if os.getpid() != pid:  # a forked worker: its parent speaks for it
            return
        with lock:
            line = json.dumps(dict(record, s=session), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
            mac = hmac.new(key, chain[0] + line.encode(), hashlib.sha256).hexdigest()
            chain[0] = mac.encode()
            data = (line + "\t" + mac + "\n").encode()
            while data:
                data = data[os.write(report_fd, data) :]

    return emit, settings, pid


FIXTURES = ("_handleClassSetUp", "_handleModuleFixture", "_tearDownPreviousClass", "_handleModuleTearDown")


class _Running:
    """The outermost test running in this process, and what its result was told of."""

    def __init__(self, test: unittest.TestCase, result: unittest.TestResult) -> None:
        self.test = test
        self.result = result
        self.outcome: str | None = None  # the worst outcome so far (None: none yet)
        self.xfail = False
        self.started = time.monotonic()
        self.depth = 0  # how deep it is run again inside itself


class _State:
    def __init__(self) -> None:
        self.ended = False  # the end record is written: nothing after it
        self.count = 0  # test records written
        self.current: _Running | None = None


def _install(emit: Emit, settings: dict[str, Any], pid: int) -> Callable[[int], None]:
    """Hook unittest.TestResult, the watch and the audit hook; returns what main() needs."""
    repo = settings.get("repo", os.getcwd()).rstrip("/") + "/"
    tests = tuple(settings.get("tests", ()))
    paren = settings.get("ids") == "paren"
    roots = [p for p in (sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")) if p]
    trusted_roots = tuple(
        sorted({os.path.join(p, "") for p in roots} | {os.path.join(os.path.realpath(p), "") for p in roots})
    )
    unittest_dir = os.path.dirname(unittest.__file__) + os.sep
    stdlib_dir = os.path.dirname(os.__file__) + os.sep
    case_file, suite_file, result_file = unittest.case.__file__, unittest.suite.__file__, unittest.result.__file__
    unittest_files = {case_file, suite_file}
    main_thread = threading.main_thread().ident
    seen_integrity: set[str] = set()
    state = _State()
    emitted: dict[str, str] = {}  # test id -> the outcome its record says
    again: dict[str, int] = {}  # test id -> how many times it ran
    # the canary modules of this run: their failures are recorded and kept out of the
    # result (its lists, so the exit status): the exit status stays the task's tests' alone
    canary_modules = frozenset(str(m) for m in settings.get("canaries", ()))
    # ids the task lists that are a test's first docstring line (SWE-bench's Django log
    # parser reads a verbose run's lines, which show the docstring in place of the name)
    aliases = frozenset(str(a) for a in settings.get("aliases", ()))
    aliased: set[str] = set()
    busy = threading.local()
    subtest_class: type[Any] = getattr(unittest.case, "_SubTest")  # noqa: B009 - private, untyped in the stubs

    def said(what: str) -> None:
        if os.getpid() == pid and what not in seen_integrity and len(seen_integrity) < 50:
            seen_integrity.add(what)
            emit({"t": "integrity", "what": what})

    if not unittest.__file__.startswith(stdlib_dir):
        said(f"unittest was imported from {unittest.__file__}, not the standard library")

    def trusted(path: str) -> bool:
        return path.startswith(trusted_roots) or path.startswith("<frozen ")

    def a_test(path: str) -> bool:
        rel = path[len(repo) :] if path.startswith(repo) else None
        return rel is not None and (
            rel in tests or rel.startswith(tuple(t.rstrip("/") + "/" for t in tests if t.endswith("/")))
        )

    def where(path: str, line: int | None = None) -> str:
        shown = path[len(repo) :] if path.startswith(repo) else path
        return shown if line is None else f"{shown}:{line}"

    def test_id(test: Any) -> str:
        cls = type(test)
        name = getattr(test, "_testMethodName", None)
        if isinstance(test, unittest.TestCase) and name and cls.__name__ != "_FailedTest":
            owner = f"{cls.__module__}.{cls.__qualname__}"
            if isinstance(getattr(cls, name, None), (types.FunctionType, types.MethodType)):
                return f"{name} ({owner})" if paren else f"{owner}.{name}"
        try:  # FunctionTestCase, doctests, suite-level error holders: their own description
            return str(test.id())
        except Exception:  # noqa: BLE001 - a broken id() is the test's problem, not ours
            return f"{type(test).__module__}.{type(test).__qualname__}"

    def outcome_of(name: str, args: tuple[Any, ...]) -> tuple[str | None, bool]:
        if name == "addSuccess":
            return "passed", False
        if name == "addSkip":
            return "skipped", False
        if name == "addExpectedFailure":
            return "skipped", True
        if name == "addSubTest":
            return ("failed", False) if len(args) > 1 and args[1] is not None else (None, False)
        return "failed", False  # addFailure, addError, addUnexpectedSuccess

    def provenance(name: str, up: int) -> tuple[str, str | None]:
        """Who called the result: ("unittest", the method unittest's case.py / suite.py
        asked for) when they did, through any chain of result methods (super() calls,
        failfast's wrapper); ("foreign", where) for a call made from inside a running test
        or class / module fixture of this process by anything else; ("external", None)
        when no test runs in this process (a Django --parallel parent replaying its
        workers' events, a runner of its own)."""
        frame: types.FrameType | None = sys._getframe(up)  # the hook's frame
        callee: types.FrameType | None = None
        depth = 0
        while frame is not None and depth < 60 and frame.f_code.co_filename not in unittest_files:
            code = frame.f_code
            if not (code.co_name in hooks or (code.co_name == "inner" and code.co_filename == result_file)):
                break
            callee, frame, depth = frame, frame.f_back, depth + 1
        if frame is None:
            return "external", None
        if frame.f_code.co_filename in unittest_files:
            return "unittest", (callee.f_code.co_name if callee is not None else name)
        direct = frame
        while frame is not None and depth < 200:
            code = frame.f_code
            if code.co_filename == case_file or (code.co_filename == suite_file and code.co_name in FIXTURES):
                return "foreign", where(direct.f_code.co_filename, direct.f_lineno)
            frame, depth = frame.f_back, depth + 1
        return "external", None

    def check_call(name: str, test: Any, up: int) -> bool | str:
        """False when this call of a result method does not count (said once); the
        method unittest asked for when unittest made it; else True."""
        kind, detail = provenance(name, up + 1)
        if kind == "foreign":
            said(f"result.{name}({describe(test)}) called from {detail} while a test ran")
            return False
        if kind == "external" and threading.get_ident() != main_thread:
            # unittest itself may report from another thread (an async test's subTest
            # run by asgiref's async_to_sync); nothing else may
            said(f"result.{name}({describe(test)}) called from another thread")
            return False
        return detail if kind == "unittest" and detail is not None else True

    def describe(test: Any) -> str:
        if isinstance(test, subtest_class):
            test = test.test_case
        return test_id(test) if isinstance(test, unittest.TestCase) else type(test).__name__

    def write(test: Any, started: float | None, outcome: str, xfail: bool) -> None:
        if type(test).__name__ == "_FailedTest" and type(test).__module__ == "unittest.loader":
            emit({"t": "collect", "id": str(getattr(test, "_testMethodName", "?")), "outcome": "error"})
            return
        tid = test_id(test)
        previous = emitted.get(tid)
        if previous is not None:
            # The same test run again by the runner: its class reachable from two loaded
            # modules (imported into another test module), a label named twice, a class or
            # module fixture error said twice (setUpClass and tearDownClass). The first
            # record stands; a worse outcome is written under a name of its own, to be seen.
            if type(test).__name__ == "_ErrorHolder" or RANK[outcome] <= RANK[previous]:
                return
            again[tid] = again.get(tid, 1) + 1
            tid = f"{tid} (run {again[tid]})"
        emitted[tid] = outcome
        state.count += 1
        d = round(time.monotonic() - started, 4) if started is not None else 0.0
        emit({"t": "test", "id": tid, "when": "call", "outcome": outcome, "xfail": xfail, "d": d})
        if aliases and previous is None and isinstance(test, unittest.TestCase):
            doc = getattr(test, "_testMethodDoc", None)  # what TestCase.shortDescription() reads
            line = doc.strip().split("\n")[0].strip() if isinstance(doc, str) else ""
            if line in aliases and line not in aliased:  # the first test with that docstring
                aliased.add(line)
                emit({"t": "test", "id": line, "when": "call", "outcome": outcome, "xfail": xfail, "d": d})

    def live() -> bool:
        return os.getpid() == pid and not state.ended

    def note(name: str, result: unittest.TestResult, test: Any, args: tuple[Any, ...]) -> None:
        if not live():
            return
        if isinstance(test, subtest_class):
            test = test.test_case
        ok = check_call(name, test, 2)  # check_call <- note <- the hook
        if ok is False:
            return
        outcome, xfail = outcome_of(name, args)
        if isinstance(ok, str) and ok != name and ok in OUTCOMES:
            said(f"{describe(test)}: unittest reported {ok}, the result class turned it into {name}")
            asked_outcome, asked_xfail = outcome_of(ok, args)
            if asked_outcome is not None and RANK[asked_outcome] > RANK.get(outcome or "passed", 0):
                outcome, xfail = asked_outcome, asked_xfail
        if outcome is None:
            return
        running = state.current
        if running is None:  # an outcome for no started test: a setUpClass error and the like
            write(test, None, outcome, xfail)
        elif running.test is test and running.result is result and running.depth == 0:
            if running.outcome is None or RANK[outcome] > RANK[running.outcome]:
                running.outcome, running.xfail = outcome, xfail
        # else: a run nested inside the running test (a test of a test runner): not ours

    originals = {name: unittest.TestResult.__dict__[name] for name in OUTCOMES + ("startTest", "stopTest")}

    def outcome_hook(name: str) -> Callable[..., Any]:
        original = originals[name]

        def hook(self: unittest.TestResult, test: Any, *args: Any, **kwargs: Any) -> Any:
            note(name, self, test, args)
            if canary_modules and name in FAILING and (name != "addSubTest" or (len(args) > 1 and args[1] is not None)):
                case = test.test_case if isinstance(test, subtest_class) else test
                if type(case).__module__ in canary_modules:
                    return None  # a canary's failure: recorded, kept out of the result
            return original(self, test, *args, **kwargs)

        return hook

    def start_hook(self: unittest.TestResult, test: Any) -> Any:
        running = state.current
        if live() and check_call("startTest", test, 1) is not False:
            if running is None:
                state.current = _Running(test, self)
            elif running.test is test:  # the running test run again inside itself
                said(f"{describe(test)} was run again while it ran")
                running.depth += 1
        return originals["startTest"](self, test)

    def stop_hook(self: unittest.TestResult, test: Any) -> Any:
        try:
            return originals["stopTest"](self, test)
        finally:
            running = state.current
            if live() and running is not None and running.test is test and running.result is self:
                if running.depth > 0:  # the end of a run inside the running test: not its outcome
                    running.depth -= 1
                elif check_call("stopTest", test, 1) is not False:
                    state.current = None
                    if running.outcome is not None:
                        write(test, running.started, running.outcome, running.xfail)
                    check()

    hooks: dict[str, Callable[..., Any]] = {name: outcome_hook(name) for name in OUTCOMES}
    hooks["startTest"], hooks["stopTest"] = start_hook, stop_hook
    for name, hook in hooks.items():
        assert isinstance(hook, types.FunctionType)
        hook.__name__ = hook.__qualname__ = name
        hook.__code__ = hook.__code__.replace(co_name=name)  # what provenance() reads off a frame
        setattr(hook, "__wrapped__", originals[name])  # noqa: B010 - not an attribute of a function's type
        setattr(unittest.TestResult, name, hook)

    # The snapshot: every function and class of unittest (the hooks included), checked
    # after every test and at the end.
    snapshot: dict[tuple[str, str, str | None], Any] = {}
    for mod_name, module in list(sys.modules.items()):
        if module is None or not (mod_name == "unittest" or mod_name.startswith("unittest.")):
            continue
        if mod_name.startswith("unittest.mock"):
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, (types.FunctionType, type)) and getattr(value, "__module__", None) == mod_name:
                snapshot[(mod_name, attr, None)] = value
                if isinstance(value, type):
                    for cattr, cvalue in list(vars(value).items()):
                        if isinstance(cvalue, (types.FunctionType, classmethod, staticmethod, property)):
                            snapshot[(mod_name, attr, cattr)] = cvalue

    def origin(value: Any) -> str:
        for inner in ("__func__", "fget"):
            value = getattr(value, inner, value)
        code = getattr(value, "__code__", None)
        if code is not None:
            return str(code.co_filename)
        module = sys.modules.get(getattr(value, "__module__", "") or "")
        return str(getattr(module, "__file__", None) or "?")

    def check() -> None:
        if os.getpid() != pid:
            return
        for (mod_name, attr, cattr), value in snapshot.items():
            module = sys.modules.get(mod_name)
            current = vars(module).get(attr) if module is not None else None
            if cattr is not None:
                current = vars(current).get(cattr) if isinstance(current, type) else None
            if current is value:
                continue
            path = origin(current) if current is not None else "?"
            if current is None or not (path.startswith(unittest_dir) or a_test(path)):
                said(f"{mod_name}.{attr}{'.' + cattr if cattr else ''} was replaced (from {where(path)})")

    def audit(event: str, args: tuple[Any, ...]) -> None:
        if getattr(busy, "on", False) or os.getpid() != pid:
            return
        busy.on = True
        try:
            if event in ("gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys.settrace", "sys.setprofile"):
                path, line = caller()
                if not trusted(path) and not a_test(path):
                    said(f"{event} called from {where(path, line)}")
            elif event in ("object.__setattr__", "object.__delattr__"):
                target = args[0] if args else None
                if isinstance(target, type) and (
                    str(getattr(target, "__module__", "")).startswith("unittest")
                    or (issubclass(target, unittest.TestResult) and len(args) > 1 and args[1] in hooks)
                ):
                    path, line = caller()
                    if not trusted(path) and not a_test(path):
                        said(f"{target.__module__}.{target.__qualname__}.{args[1]} changed from {where(path, line)}")
            elif event == "marshal.loads":
                path, line = caller()
                if not trusted(path):
                    said(f"code loaded from marshal data at {where(path, line)}")
            elif event == "compile":
                name = str(args[1]) if len(args) > 1 else ""
                if name.startswith(trusted_roots) or (name.startswith(repo) and a_test(name)):
                    path, line = caller()
                    if not trusted(path):
                        said(f"code compiled under the name {name} at {where(path, line)}")
        except Exception as exc:  # noqa: BLE001 - never break the audited call; say so
            said(f"the audit hook failed: {type(exc).__name__}")
        finally:
            busy.on = False

    def caller() -> tuple[str, int]:
        try:
            frame = sys._getframe(2)  # caller <- audit <- the audited call
        except ValueError:
            return "?", 0
        return frame.f_code.co_filename, frame.f_lineno

    sys.addaudithook(audit)

    def finish(status: int) -> None:
        """The last record: nothing is written after it."""
        check()
        state.ended = True
        emit({"t": "end", "exit": status, "collected": state.count})

    return finish


def _status(code: object) -> int:
    """The exit status a SystemExit with this code gives (as the interpreter computes it)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    return 1


def main(argv: list[str]) -> int:
    if not argv or (argv[0] == "-m" and len(argv) < 2):
        sys.stderr.write("usage: python -m REPORTER SCRIPT [ARGS...] | -m MODULE [ARGS...]\n")
        return 2
    emit, settings, pid = _channel()
    emit({"t": "start", "pid": pid})  # a session that starts and never ends shows
    finish = _install(emit, settings, pid)
    try:
        if argv[0] == "-m":
            sys.argv = list(argv[1:])
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(argv)
            script_dir = os.path.dirname(os.path.abspath(argv[0]))
            if sys.path and not getattr(sys.flags, "safe_path", False):
                sys.path[0] = script_dir  # as `python SCRIPT` would have it
            else:
                sys.path.insert(0, script_dir)
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exc:
        finish(_status(exc.code))
        raise
    except KeyboardInterrupt:
        # the interpreter would end itself with SIGINT: exit 130 instead, the status recorded
        finish(130)
        sys.stderr.write("KeyboardInterrupt\n")
        return 130
    except BaseException:
        finish(1)
        raise
    finish(0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
