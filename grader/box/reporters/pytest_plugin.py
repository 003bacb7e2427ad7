"""The report plugin: the only voice of a pytest run the supervisor listens to.

Standard library and pytest only. The supervisor writes this file, under a module name
drawn at random for every run, into the environment's site-packages (root-owned) and
names it with `-p` (for a `runner: command` task, through PYTEST_ADDOPTS), so pytest
imports it while it parses its arguments: before any conftest.py, test module or code of
the submission. With entry-point auto-loading off, nothing the repository ships loads
earlier, and no repository module can stand in for a standard one (the supervisor
removes new modules that would shadow them).

At import it reads the run's secret and settings from a descriptor (a root-only file,
read at offset 0 and closed, so each pytest process of a command reads it afresh) and
keeps the write end of the report pipe, which it marks not inheritable. Every record it
writes carries an HMAC-SHA256 chained over the records of its session before it, keyed
by the secret. Code in the test process can write to the pipe (it can find the
descriptor in /proc/self/fd), but not in the run's name without taking the key out of
this plugin's memory.

It also watches the process from inside, and says what it saw on the same channel:
- an audit hook (it cannot be removed) reports the means of reaching pytest's objects
  in memory: walking the garbage collector's objects, trace and profile functions, code
  loaded from marshal data or compiled under another file's name, by anything but
  pytest, the standard library or the task's own test files;
- a snapshot of every function and class of pytest and pluggy (and their methods),
  taken before the first conftest is imported, is compared after every test and at the
  end: a runner function or method replaced by code from anywhere but pytest's own
  files is reported by name.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sys
import types
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the types are for mypy: nothing more is imported when pytest loads this
    from collections.abc import Callable, Generator
    from typing import Any

    Emit = Callable[[dict[str, Any]], None]


def _channel() -> tuple[Emit, dict[str, Any]]:
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

    def emit(record: dict[str, Any]) -> None:
        record = dict(record, s=session)
        line = json.dumps(record, sort_keys=True, ensure_ascii=True)
        mac = hmac.new(key, chain[0] + line.encode(), hashlib.sha256).hexdigest()
        chain[0] = mac.encode()
        data = (line + "\t" + mac + "\n").encode()
        while data:
            data = data[os.write(report_fd, data) :]

    return emit, settings


def _watch(
    emit: Emit, settings: dict[str, Any]
) -> tuple[Callable[[], None], Callable[[pytest.Item], None], list[pytest.Config]]:
    """The audit hook and the snapshot; returns the snapshot's check."""
    import sysconfig

    trusted_roots = tuple(
        sorted({p for p in (sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")) if p})
    )
    tests = tuple(settings.get("tests", ()))
    repo = settings.get("repo", "/nonexistent") + "/"
    watched_modules = ("_pytest", "pytest", "pluggy", __name__)
    snapshot_modules = ("_pytest", "pytest", "pluggy")
    seen: set[str] = set()
    busy = [False]

    def said(what: str) -> None:
        if what not in seen and len(seen) < 50:
            seen.add(what)
            emit({"t": "integrity", "what": what})

    def caller() -> tuple[str, int]:
        """The frame that made the audited call, past this hook's own."""
        try:
            frame = sys._getframe(2)
        except ValueError:  # raised from C with no Python frame above this hook
            return "?", 0
        return frame.f_code.co_filename, frame.f_lineno

    def trusted(path: str) -> bool:
        return path.startswith(trusted_roots) or path.startswith("<frozen ")

    def a_test(path: str) -> bool:
        rel = path[len(repo) :] if path.startswith(repo) else None
        return rel is not None and (
            rel in tests or rel.startswith(tuple(t.rstrip("/") + "/" for t in tests if t.endswith("/")))
        )

    def where(path: str, line: int) -> str:
        return f"{path[len(repo) :] if path.startswith(repo) else path}:{line}"

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if busy[0]:
            return
        busy[0] = True
        try:
            if event in ("gc.get_objects", "gc.get_referrers", "gc.get_referents"):
                path, line = caller()
                if not trusted(path) and not a_test(path):
                    said(f"{event} called from {where(path, line)}")
            elif event in ("sys.settrace", "sys.setprofile"):
                path, line = caller()
                if not trusted(path) and not a_test(path):
                    said(f"{event} called from {where(path, line)}")
            elif event in ("object.__setattr__", "object.__delattr__"):
                target = args[0] if args else None
                if isinstance(target, type) and str(getattr(target, "__module__", "")).startswith(watched_modules):
                    path, line = caller()
                    if not trusted(path):
                        said(f"{target.__module__}.{target.__name__}.{args[1]} changed from {where(path, line)}")
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
            busy[0] = False

    sys.addaudithook(hook)

    snapshot: dict[tuple[str, str, str | None], object] = {}
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(snapshot_modules) or name == __name__:
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, (types.FunctionType, type)) and getattr(value, "__module__", None) == name:
                snapshot[(name, attr, None)] = value
                if isinstance(value, type):
                    for cattr, cvalue in list(vars(value).items()):
                        if isinstance(cvalue, (types.FunctionType, classmethod, staticmethod, property)):
                            snapshot[(name, attr, cattr)] = cvalue

    def origin(value: object) -> str:
        """The file the code of a function (or method, property, class) comes from."""
        for inner in ("__func__", "fget"):
            value = getattr(value, inner, value)
        code = getattr(value, "__code__", None)
        if code is not None:
            filename: str = code.co_filename
            return filename
        module = sys.modules.get(getattr(value, "__module__", "") or "")
        path: str = getattr(module, "__file__", None) or "?"
        return path

    def own(path: str) -> bool:
        """Code pytest may run as part of the task: pytest's, the standard library's,
        the task's own tests and conftest files, the canaries."""
        return trusted(path) or a_test(path) or path.startswith(canary_files) or path == __file__

    canary_files = tuple(repo + c for c in settings.get("canaries", ()))
    config: list[pytest.Config] = []

    def check_hooks() -> None:
        """Every implementation of every hook pytest will call comes from code pytest may
        run: a flip registered from the repository (register(), or straight into pluggy's
        lists) shows here, whatever its class or module claims to be."""
        if not config:
            return
        hooks = config[0].pluginmanager.hook
        for hook_name in dir(hooks):
            if not hook_name.startswith("pytest_"):
                continue
            caller_ = getattr(hooks, hook_name, None)
            for impl in getattr(caller_, "get_hookimpls", lambda: [])():
                path = origin(impl.function)
                if not own(path):
                    said(f"a {hook_name} hook from {where(path, 0).rsplit(':', 1)[0]} was registered")

    def check_item(item: pytest.Item) -> None:
        """The test about to run is the test its module defines: not a function put in
        its place from elsewhere."""
        for obj in (getattr(item, "obj", None), getattr(item, "runtest", None)):
            path = origin(obj) if obj is not None else None
            if path and path != "?" and not own(path):
                said(f"the test {item.nodeid} runs code from {where(path, 0).rsplit(':', 1)[0]}")

    def check() -> None:
        check_hooks()
        for (name, attr, cattr), value in snapshot.items():
            module = sys.modules.get(name)
            current = vars(module).get(attr) if module is not None else None
            if cattr is not None:
                current = vars(current).get(cattr) if isinstance(current, type) else None
            # pytest replaces a few of its own functions as it configures itself: a
            # replacement from pytest's (or the standard library's) own files is its own
            if current is not value and (current is None or not trusted(origin(current))):
                said(f"{name}.{attr}{'.' + cattr if cattr else ''} was replaced while the tests ran")

    return check, check_item, config


_emit, _settings = _channel()
del _channel
_emit({"t": "start", "pid": os.getpid()})  # a session that starts and never ends shows

import pytest  # noqa: E402  (after the channel: nothing of pytest's runs before the secret is taken)

_check, _check_item, _config = _watch(_emit, _settings)
del _watch


def _hooks(
    emit: Emit,
    check: Callable[[], None],
    check_item: Callable[[pytest.Item], None],
    configs: list[pytest.Config],
    canaries: tuple[str, ...],
) -> tuple[Callable[..., Any], ...]:
    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(config: pytest.Config) -> None:
        configs.append(config)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(item: pytest.Item) -> None:
        check_item(item)

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_logreport(report: pytest.TestReport) -> Generator[None, Any, None]:
        """Around every other plugin's: the record is written as the report arrives,
        before any of them (pytest's own session counting, the terminal) sees it."""
        emit(
            {
                "t": "test",
                "id": report.nodeid,
                "when": report.when,
                "outcome": report.outcome,
                "xfail": bool(getattr(report, "wasxfail", False)),
                "d": round(float(report.duration or 0), 4),
            }
        )
        if report.when == "call":
            check()
        if report.nodeid.startswith(canaries):
            # Recorded as they are; shown to everything after this as passed, so the
            # canaries print no traceback (their source stays unseen) and count for
            # nothing in the exit status, which stays the task's tests' alone.
            report.outcome = "passed"
            report.longrepr = None
            report.sections = []
        yield

    @pytest.hookimpl(tryfirst=True)
    def pytest_collectreport(report: pytest.CollectReport) -> None:
        if report.failed:
            emit({"t": "collect", "id": report.nodeid, "outcome": "error"})

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
        check()
        emit({"t": "end", "exit": int(exitstatus), "collected": int(session.testscollected)})

    return (pytest_configure, pytest_runtest_call, pytest_runtest_logreport, pytest_collectreport, pytest_sessionfinish)


# The hooks hold what they need in their closures: replacing a name in this module
# changes nothing pluggy calls.
(pytest_configure, pytest_runtest_call, pytest_runtest_logreport, pytest_collectreport, pytest_sessionfinish) = _hooks(
    _emit, _check, _check_item, _config, tuple(c + "::" for c in _settings.get("canaries", ()))
)
del _hooks, _emit, _check, _check_item, _config, _settings
