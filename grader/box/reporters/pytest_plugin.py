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

It decides nothing from what pytest hands it alone. Around every phase of every test
(setup, call, teardown) its own outermost wrapper sees whether the phase raised, before
any report exists; around pytest_runtest_makereport it sees the report made from that
call; when the report is logged it must be that very object, of pytest's own class,
with the outcome it was made with, and a "passed" must come from a phase that raised
nothing (a "skipped" from one that raised). Any disagreement is tampering: a flip made
inside pytest's objects, whatever route reached them, shows as one.

It also watches the process from inside, and says what it saw on the same channel:
- tampering (`integrity` records): the garbage collector's objects walked, trace and
  profile functions set, code loaded from marshal data or compiled under another file's
  name, by anything but pytest, the standard library or the task's own test files; the
  code of what decides outcomes replaced (`__code__` assigned, or found different from
  the code compiled from its file): a function of pytest, pluggy or this plugin, a
  collected test's function, what a test file defines itself unless the task's own test
  code changes it (a function a test makes while it runs, or a library's, is not
  guarded: whose function it is is read from its code); an object of pytest's given
  another class; a test module executed twice, or given names its own
  code does not bind; the builtins replaced; a hook from anywhere but the task's code;
- reflective access (`finding` records, judged by the host's audit mode): frames read
  (sys._getframe, tracebacks' and generators' frames), `__code__` or `__class__`
  assigned, code objects or functions built, ctypes loaded or called, code compiled or
  executed from text, by code the submission wrote, named by file and line whatever
  spelling reached it. The standard library's own use stays quiet: a call is
  attributed to the first frame outward that is not a mere go-between (inspect,
  traceback, ctypes, the import system).
"""

from __future__ import annotations

import _thread
import gc
import hashlib
import hmac
import itertools
import json
import operator
import os
import sys
import types
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the types are for mypy: nothing more is imported when pytest loads this
    from collections.abc import Callable, Generator
    from typing import Any

    Emit = Callable[[dict[str, Any]], None]


HELD = 24  # passed or skipped records held before one write (_channel)


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
    encode = json.JSONEncoder(sort_keys=True, ensure_ascii=True).encode  # made once, not per record
    digest, sha256 = hmac.digest, hashlib.sha256
    # Records of phases that passed or were skipped wait, up to HELD of them (about 3.5 kB,
    # one write under the pipe's atomic size), for the next record that is anything else:
    # a failure, an error, an integrity record, the end. A write per record was a third of
    # this plugin's cost a test (a pipe write and the supervisor's wake-up each). A record
    # that would count against the tests is never held, so code in the test process that
    # reaches this closure can drop only passes, which counts against it: never a
    # failure, which leaves the process as it is made. A process killed mid-run loses
    # at most the passes held (feedback, never a verdict: its session has no end).
    held: list[bytes] = []
    most = HELD  # read once: the module's name can be rebound, this cannot
    # One record at a time, whichever thread says it: a finding is said from the thread
    # whose audited call made it (a submission's sampling thread reading frames) while the
    # main thread says its tests', and each link of the chain must be made, held and
    # written in the order the reader checks it. Reentrant: a signal handler that makes a
    # record in the middle of one can break the chain (so the run is called tampered),
    # never hang it. A forked child's records are not its parent's session: it says none.
    turn = _thread.RLock()
    pid = os.getpid()

    def emit(record: dict[str, Any]) -> None:
        if os.getpid() != pid:
            return
        with turn:
            line = encode(dict(record, s=session)).encode()
            mac = digest(key, chain[0] + line, sha256).hex().encode()
            chain[0] = mac
            held.append(line + b"\t" + mac + b"\n")
            if record.get("t") == "test" and record.get("outcome") in ("passed", "skipped") and len(held) < most:
                return
            data = b"".join(held)
            held.clear()
            while data:
                data = data[os.write(report_fd, data) :]

    return emit, settings


_emit, _settings = _channel()
del _channel
_emit({"t": "start", "pid": os.getpid()})  # a session that starts and never ends shows

import pytest  # noqa: E402  (after the channel: nothing of pytest's runs before the secret is taken)

# Events that name a frame read, by attribute: tracebacks', generators', coroutines'.
_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"})
_EVENTS = frozenset(
    {
        "object.__getattr__",
        "object.__setattr__",
        "import",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "sys.settrace",
        "sys.setprofile",
        "sys._getframe",
        "sys._current_frames",
        "code.__new__",
        "function.__new__",
        "marshal.loads",
        "compile",
        "exec",
    }
)
# The functions a test's report passes through, checked (by the identity of their code)
# after every test; all of pytest and pluggy is checked at the end.
_REPORT_PATH = {
    "_pytest.runner": (
        "call_and_report",
        "runtestprotocol",
        "call_runtest_hook",
        "pytest_runtest_makereport",
        "pytest_runtest_call",
        "pytest_runtest_setup",
        "pytest_runtest_teardown",
        "CallInfo.from_call",
    ),
    "_pytest.reports": (
        "TestReport.from_item_and_call",
        "TestReport.__init__",
        "BaseReport.passed",
        "BaseReport.failed",
    ),
    "_pytest.python": ("pytest_pyfunc_call", "Function.runtest"),
    "_pytest.skipping": ("pytest_runtest_makereport", "pytest_runtest_call", "pytest_runtest_setup"),
    "_pytest.unittest": ("pytest_runtest_makereport", "TestCaseFunction.runtest"),
    "_pytest.python_api": ("raises", "RaisesContext.__exit__", "approx"),
    "pluggy._callers": ("_multicall",),
    "pluggy._hooks": ("HookCaller.__call__",),
    "pluggy._manager": ("PluginManager._hookexec",),
}


def _watch(emit: Emit, settings: dict[str, Any]) -> types.SimpleNamespace:
    """The audit hook, the snapshots and the checks run around every test."""
    import sysconfig

    trusted_roots = tuple(
        sorted({p for p in (sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")) if p})
    )
    tests = tuple(settings.get("tests", ()))
    repo = settings.get("repo", "/nonexistent") + "/"
    changed = frozenset(settings.get("changed", ()))
    pytest_modules = ("_pytest", "pytest", "pluggy")
    watched_modules = (*pytest_modules, __name__)
    stdlib = sysconfig.get_paths().get("stdlib", "/nonexistent") + "/"
    # go-betweens: a call made through them is the caller's
    transparent_files = tuple(stdlib + f for f in ("inspect.py", "traceback.py", "ctypes/", "importlib/", "runpy.py"))
    seen: set[str] = set()
    # the threads now in this plugin's own code (the hook, the checks): what they do is the
    # plugin's, not the submission's. Per thread: one flag for all would let a thread of the
    # submission's, busy in the hook, blind it to the main thread's events (the test
    # module's exec among them, whose code every test's is checked against).
    busy: set[int] = set()
    me = _thread.get_ident
    state = types.SimpleNamespace()
    state.item_functions = set()  # id() of each collected test's function (kept in state.items)

    def said(what: str, kind: str = "integrity") -> None:
        if what not in seen and len(seen) < 100:
            seen.add(what)
            emit({"t": kind, "what": what})

    def trusted(path: str) -> bool:
        return path.startswith(trusted_roots) or path.startswith("<frozen ")

    def rel(path: str) -> str | None:
        return path[len(repo) :] if path.startswith(repo) else None

    def a_test(path: str) -> bool:
        r = rel(path)
        return r is not None and (
            r in tests or r.startswith(tuple(t.rstrip("/") + "/" for t in tests if t.endswith("/")))
        )

    def submitted(path: str) -> bool:
        """Code the submission wrote: a file of the repository it changed or added, that
        is not one of the task's own tests (those are the base's again)."""
        r = rel(path)
        if r is None or a_test(path):
            return False
        return r in changed if changed else True

    def where(path: str, line: int) -> str:
        return f"{rel(path) or path}:{line}"

    def caller(depth: int = 2) -> tuple[str, int]:
        """The frame that made the audited call, past this hook's own."""
        try:
            frame = sys._getframe(depth)
        except ValueError:  # raised from C with no Python frame above this hook
            return "?", 0
        return frame.f_code.co_filename, frame.f_lineno

    def culprit() -> tuple[str, int] | None:
        """The submission's frame a reflective call is attributed to: the first frame
        outward past go-betweens (inspect, traceback, ctypes, importlib, code compiled from
        text), if it is the submission's; None when the standard library, pytest or the
        task's tests made it for their own reasons."""
        try:
            frame: types.FrameType | None = sys._getframe(3)
        except ValueError:
            return None
        while frame is not None:
            path = frame.f_code.co_filename
            if path.startswith(transparent_files) or (path.startswith("<") and not path.startswith("<frozen ")):
                frame = frame.f_back
                continue
            return (path, frame.f_lineno) if submitted(path) else None
        return None

    def found(what: str) -> None:
        at = culprit()
        if at is not None:
            said(f"{what} at {where(*at)}", "finding")

    # the code of every test module, as executed: its functions' code must stay this code
    test_code: dict[str, dict[str, object]] = {}
    test_execs: dict[str, int] = {}
    module_code: dict[str, types.CodeType] = {}
    # every code object a test module's own code made: id -> (the code, its module's file,
    # its qualified name there); what a test module executes from its own text with exec()
    # (a definition in newer syntax kept in a string) is its own code too
    code_home: dict[int, tuple[types.CodeType, str, str]] = {}
    texts: dict[str, frozenset[tuple[str, ...]]] = {}  # a test module's string constants, line by line
    compiled: list[tuple[object, str]] = []  # the last text compiled by a test module's code
    granted: dict[int, tuple[object, object]] = {}  # id(function) -> code the task's own tests gave it

    def qualnames(code: types.CodeType, prefix: str, out: dict[str, object], home: str, base: str = "") -> None:
        """Every code object inside `code` under its qualified name (`base` before names
        made by an exec() inside a class or function of the module)."""
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                local = getattr(const, "co_qualname", None) or prefix + const.co_name
                qual = base + local
                out.setdefault(qual, const)
                code_home.setdefault(id(const), (const, home, qual))
                inner = local + ("." if not const.co_flags & 0x2 else ".<locals>.")  # CO_NEWLOCALS: a function
                qualnames(const, inner, out, home, base)

    def tests_own(frame: types.FrameType | None) -> bool:
        """Whether a frame runs the task's own test code: a code object a test module's
        code made (by identity: a code that only claims a test file's name is not)."""
        if frame is None:
            return False
        code = frame.f_code
        home = code_home.get(id(code))
        return (home is not None and home[0] is code) or module_code.get(code.co_filename) is code

    def decides(obj: object, frame: types.FrameType | None) -> bool:
        """Whether an object is one of those that decide outcomes, whose code or class must
        not change: pytest's, pluggy's and this plugin's objects and functions; a collected
        test's function and what a test file defines itself (its tests, their classes'
        methods, its fixtures and helpers) unless the task's own test code (`frame`, the
        one that assigns) changes it (bytecode's tests recompile the functions of another
        of their files, which pytest collects too). A function a test makes while it runs (a local
        function it recompiles, as a bytecode library's tests do) and a library's own
        functions are not guarded. Who owns a function is read from the code it has now
        (its file and where its module's code made it), never from its names."""
        module = str(getattr(type(obj), "__module__", ""))
        if module.startswith(watched_modules):
            return True
        code = getattr(obj, "__code__", None)
        if not isinstance(code, types.CodeType):
            return False
        if code.co_filename.startswith(watched_files):
            return True
        home = code_home.get(id(code))
        ours_ = id(obj) in state.item_functions or (home is not None and home[0] is code and "<locals>" not in home[2])
        return ours_ and not tests_own(frame)

    def own_text(home: str, source: object) -> bool:
        """Whether a text compiled by a test module's code is one of that module's own
        string constants (compared line by line without indentation, so a dedented
        constant is still its own)."""
        if isinstance(source, bytes):
            source = source.decode("utf-8", "replace")
        if not isinstance(source, str):
            return False
        known = texts.get(home)
        if known is None:
            found_: set[tuple[str, ...]] = set()
            stack = [module_code[home]] if home in module_code else []
            while stack:
                for const in stack.pop().co_consts:
                    if isinstance(const, types.CodeType):
                        stack.append(const)
                    elif isinstance(const, str) and "\n" in const:
                        found_.add(tuple(ln.strip() for ln in const.splitlines() if ln.strip()))
            known = texts[home] = frozenset(found_)
        return tuple(ln.strip() for ln in source.splitlines() if ln.strip()) in known

    def exec_by_test(code: types.CodeType) -> None:
        """exec() of text by a test module's own code (its module body, a class body, a
        function of it): the definitions it makes are the module's own, under the names
        they get where they are made."""
        try:
            frame = sys._getframe(2)  # past this function and the hook: exec's caller
        except ValueError:
            return
        home = code_home.get(id(frame.f_code))
        module = frame.f_code.co_name == "<module>" and module_code.get(frame.f_code.co_filename) is frame.f_code
        if home is None and not module:
            return
        where_ = frame.f_code.co_filename if module else home[1]  # type: ignore[index]
        if not a_test(where_) or not compiled or compiled[-1][1] != code.co_filename:
            return
        if not own_text(where_, compiled[-1][0]):
            return
        if module:
            prefix = ""
        else:
            qual = home[2]  # type: ignore[index]
            prefix = qual + ("." if not frame.f_code.co_flags & 0x2 else ".<locals>.")
        code_home.setdefault(id(code), (code, where_, prefix + "<exec>"))
        qualnames(code, "", test_code.setdefault(where_, {}), where_, prefix)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if me() in busy or (event not in _EVENTS and not event.startswith("ctypes.")):
            return
        if event == "object.__getattr__":
            if args[1] not in _FRAME_ATTRS:
                return
        elif event == "import" and args[0] not in ("ctypes", "_ctypes", "cffi", "_cffi_backend"):
            return
        busy.add(me())
        try:
            if event in ("gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys.settrace", "sys.setprofile"):
                path, line = caller()
                if not trusted(path) and not a_test(path):
                    said(f"{event} called from {where(path, line)}")
            elif event == "object.__setattr__":
                target, name = args[0], args[1]
                if name in ("__code__", "__class__"):
                    try:
                        setter: types.FrameType | None = sys._getframe(1)  # the frame that assigns
                    except ValueError:
                        setter = None
                    if name == "__code__" and tests_own(setter) and isinstance(args[2], types.CodeType):
                        granted[id(target)] = (target, args[2])
                    if decides(target, setter):
                        path, line = caller()
                        said(
                            f"the {name} of {getattr(target, '__qualname__', type(target).__name__)} was replaced "
                            f"from {where(path, line)}"
                        )
                    found(f"{name} assigned")
                elif isinstance(target, type) and str(getattr(target, "__module__", "")).startswith(watched_modules):
                    path, line = caller()
                    if not trusted(path):
                        said(f"{target.__module__}.{target.__name__}.{name} changed from {where(path, line)}")
            elif event == "object.__getattr__" or event in ("sys._getframe", "sys._current_frames"):
                found("a frame read")
            elif event == "import" or event.startswith("ctypes."):
                found(f"ctypes used ({event})")
            elif event in ("code.__new__", "function.__new__"):
                found(f"{event.split('.')[0]} object built")
            elif event == "marshal.loads":
                path, line = caller()
                if not trusted(path):
                    said(f"code loaded from marshal data at {where(path, line)}")
            elif event == "compile":
                name = str(args[1]) if len(args) > 1 else ""
                path, line = caller()
                if name.startswith(trusted_roots) or (name.startswith(repo) and a_test(name)):
                    if not trusted(path):
                        said(f"code compiled under the name {name} at {where(path, line)}")
                if submitted(path):
                    said(f"code compiled from text at {where(path, line)}", "finding")
                compiled[:] = [(args[0], name)] if a_test(path) else []
            elif event == "exec":
                code = args[0]
                filename = getattr(code, "co_filename", "")
                if isinstance(code, types.CodeType) and a_test(filename) and code.co_name == "<module>":
                    test_execs[filename] = test_execs.get(filename, 0) + 1
                    if test_execs[filename] > 1:
                        path, line = caller()
                        said(f"the test module {rel(filename)} was executed again from {where(path, line)}")
                    else:
                        table: dict[str, object] = {}
                        qualnames(code, "", table, filename)
                        test_code[filename] = table
                        module_code[filename] = code
                elif isinstance(code, types.CodeType) and compiled:
                    exec_by_test(code)
                compiled.clear()
                path, line = caller()
                if submitted(path):
                    said(f"code executed at {where(path, line)}", "finding")
        except Exception as exc:  # noqa: BLE001 - never break the audited call; say so
            said(f"the audit hook failed: {type(exc).__name__}")
        finally:
            busy.discard(me())

    watched_files = tuple(
        os.path.dirname(getattr(sys.modules.get(m), "__file__", None) or "/nonexistent") + "/"
        for m in ("_pytest", "pluggy")
    ) + (__file__,)
    sys.addaudithook(hook)

    # --- snapshots, taken before any conftest or test module is imported -------------------
    snapshot: dict[tuple[str, str, str | None], tuple[object, object]] = {}

    def code_of(value: object) -> object:
        for inner in ("__func__", "fget"):
            value = getattr(value, inner, value)
        return getattr(value, "__code__", None)

    busy.add(me())  # our own reads of __code__ are not the submission's
    try:
        for name, module in list(sys.modules.items()):
            if module is None or not name.startswith(pytest_modules) or name == __name__:
                continue
            for attr, value in list(vars(module).items()):
                if isinstance(value, (types.FunctionType, type)) and getattr(value, "__module__", None) == name:
                    snapshot[(name, attr, None)] = (value, code_of(value))
                    if isinstance(value, type):
                        for cattr, cvalue in list(vars(value).items()):
                            if isinstance(cvalue, (types.FunctionType, classmethod, staticmethod, property)):
                                snapshot[(name, attr, cattr)] = (cvalue, code_of(cvalue))
    finally:
        busy.discard(me())
    report_path = []
    for module_name, dotted_names in _REPORT_PATH.items():
        for dotted in dotted_names:
            attr, _, cattr = dotted.partition(".")
            if (module_name, attr, cattr or None) in snapshot:
                report_path.append((module_name, attr, cattr or None))
    import builtins

    builtin_names = dict(vars(builtins))
    builtin_dict = vars(builtins)  # the module's own dict: the same object for the process's life
    builtin_keys, builtin_values = tuple(builtin_names), tuple(builtin_names.values())
    builtin_set = frozenset(builtin_names)
    # each test module's globals, the names its own code binds, its path and its builtins,
    # from the end of collection (check_module_names)
    guarded_modules: list[tuple[dict[str, Any], frozenset[str], str | None, object]] = []

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
    state.config = []
    state.items = {}  # id(item) -> (item, its class, its function) at the end of collection
    state.hookimpls = {}  # id(function) -> code, for the hooks on a test's path

    # What the last full check_hooks saw, object by object: the hook relay, each hook's
    # name and caller, the implementations pluggy calls (its own list, `_hookimpls`), their
    # functions, what code_of unwraps of each and what those hold (their code among it).
    # Read again after every test by C loops alone (map, itertools), it is compared by
    # identity; the full check, a Python loop over every implementation (0.25 ms a
    # test), runs only when something differs, and would find nothing new otherwise: what
    # it says depends on these objects alone, and it says a thing once. A pluggy without
    # `_hookimpls` gets the full check every time.
    hooks_seen: list[object] = []
    _referents = gc.get_referents

    def held_by(objects: list[Any]) -> list[Any]:
        """What the objects hold, a function's code among it, in one call: a read of
        `__code__` is an audit event, a call of the hook above, for each function (the
        hooks' 162 of them were half of this check's cost). Called in the plugin's name:
        the submission's own gc.get_referents is still heard."""
        mine = me()
        nested = mine in busy
        busy.add(mine)
        try:
            return _referents(*objects)
        finally:
            if not nested:
                busy.discard(mine)

    _vars, _getattr, _map, _any, _len, _list, _type = vars, getattr, map, any, len, list, type
    _is_not, _function = operator.is_not, operator.attrgetter("function")
    _repeat, _chain = itertools.repeat, itertools.chain.from_iterable

    def impls_of(caller_: Any, hook_name: str) -> list[Any]:
        """The implementations pluggy calls for a hook: its own list where it keeps one (a
        get_hookimpls() set on the caller cannot hide any), else what the caller says."""
        found = _getattr(caller_, "_hookimpls", None)
        if found is None:
            return _list(_getattr(caller_, "get_hookimpls", _list)())
        if _type(found) is not list:
            said(f"the implementations of {hook_name} were replaced by a {_type(found).__name__}")
            return []
        return _list(found)

    def hooks_unchanged(hooks: Any) -> bool:
        named = _list(_chain(_vars(hooks).items()))
        lists: list[Any] = _list(_map(_getattr, named[1::2], _repeat("_hookimpls"), _repeat(None)))
        if _any(_map(_is_not, _map(_type, lists), _repeat(list))):  # not pluggy's lists: the full check
            hooks_seen.clear()
            return False
        impls = _list(_chain(lists))
        fns = _list(_map(_function, impls))
        inner = _list(_map(_getattr, fns, _repeat("__func__"), fns))  # code_of's steps
        inner = _list(_map(_getattr, inner, _repeat("fget"), inner))
        now = [hooks, *named, *lists, *_map(_len, lists), *impls, *fns, *inner]
        now += held_by(inner)
        same = _len(now) == _len(hooks_seen) and not _any(_map(_is_not, now, hooks_seen))
        hooks_seen[:] = now
        return same

    def check_hooks() -> None:
        """Every implementation of every hook pytest will call comes from code pytest may
        run: a flip registered from the repository (register(), or straight into pluggy's
        lists) shows here, whatever its class or module claims to be; and the code of
        each is still the code it had when first seen."""
        if not state.config:
            return
        hooks = state.config[0].pluginmanager.hook
        if hooks_unchanged(hooks):
            return
        for hook_name in dir(hooks):
            if not hook_name.startswith("pytest_"):
                continue
            caller_ = getattr(hooks, hook_name, None)
            for impl in impls_of(caller_, hook_name):
                fn = impl.function
                path = origin(fn)
                if not own(path):
                    said(f"a {hook_name} hook from {where(path, 0).rsplit(':', 1)[0]} was registered")
                code = code_of(fn)
                known = state.hookimpls.setdefault(id(fn), (fn, code))
                if known[1] is not code:
                    said(f"the code of a {hook_name} hook was replaced while the tests ran")

    def test_code_ok(item: Any, fn: object) -> None:
        """The function a test item runs is the one its module's code made, under the
        test's own name: not another test's code, nor code made elsewhere."""
        fn = getattr(fn, "__func__", fn)
        code = getattr(fn, "__code__", None)
        if code is None:
            if not isinstance(fn, (types.FunctionType, types.MethodType)) and callable(fn) and not own(origin(fn)):
                said(f"the test {item.nodeid} runs something that is not its module's code")
            return
        grant = granted.get(id(fn))
        if grant is not None and grant[0] is fn and grant[1] is code:
            return  # code the task's own test code set on it
        home = code_home.get(id(code))
        filename = home[1] if home is not None and home[0] is code else code.co_filename
        if not a_test(filename):
            return  # a decorator's wrapper (the standard library's, a plugin's), or reported by check_item
        table = test_code.get(filename)
        if table is None:
            return
        want = item.nodeid.split("::", 1)[-1].split("[", 1)[0].replace("::", ".")
        if code not in table.values():
            said(f"the test {item.nodeid} runs code its file never compiled")
        elif want in table and table[want] is not code:
            said(f"the test {item.nodeid} runs the code of another test")

    def module_made(thing: object) -> bool:
        """Code a test module's own code made: compiled from its file, or from one of its
        own strings by its own exec()."""
        code = code_of(thing)
        home = code_home.get(id(code))
        return home is not None and home[0] is code and a_test(home[1])

    def check_item(item: Any) -> None:
        """Before the test runs: the item is the one collected, of the class it had, running
        the function it had, whose code is its file's; the test runs code pytest may run."""
        busy.add(me())
        try:
            known = state.items.get(id(item))
            obj = getattr(item, "obj", None)
            if known is not None:
                if type(item) is not known[1]:
                    said(f"the test {item.nodeid} was given another class")
                if known[2] is not None and getattr(obj, "__func__", obj) is not known[2]:
                    said(f"the test {item.nodeid} was given another function")
            if state.config and (item.config is not state.config[0] or type(item.config) is not state.config_type):
                said(f"the test {item.nodeid} was given another configuration")
            for thing in (obj, getattr(item, "runtest", None)):
                path = origin(thing) if thing is not None else None
                if path and path != "?" and not own(path) and not module_made(thing):
                    said(f"the test {item.nodeid} runs code from {where(path, 0).rsplit(':', 1)[0]}")
            if obj is not None:
                test_code_ok(item, obj)
        finally:
            busy.discard(me())

    # The report path read again by C loops alone, as the hooks are: each module, what its
    # name holds (the class, for a method), the class's member, what code_of unwraps of
    # each and what that holds (its code among it). compare() runs for each function only
    # when one of them differs from what the last full compare saw, and would say nothing
    # new otherwise: what it says depends on these objects alone, and it says a thing once.
    path_names = tuple(k[0] for k in report_path)
    path_attrs = tuple(k[1] for k in report_path)
    path_plain = tuple(i for i, k in enumerate(report_path) if k[2] is None)
    path_classes = tuple(i for i, k in enumerate(report_path) if k[2] is not None)
    path_members = tuple(k[2] for k in report_path if k[2] is not None)
    path_seen: list[object] = []
    _dict_get: Any = dict.get  # overloaded: typed loosely
    _proxy_get: Any = types.MappingProxyType.get

    def report_path_now() -> list[object] | None:
        try:
            modules = _list(_map(sys.modules.get, path_names))
            tops = _list(_map(_dict_get, _map(_vars, modules), path_attrs))
            members = _map(_proxy_get, _map(_vars, _map(tops.__getitem__, path_classes)), path_members)
            fns = [*_map(tops.__getitem__, path_plain), *members]
        except Exception:  # noqa: BLE001 - not a module, or not a class: compare() says what
            return None
        inner = _list(_map(_getattr, fns, _repeat("__func__"), fns))
        inner = _list(_map(_getattr, inner, _repeat("fget"), inner))
        return [*modules, *tops, *fns, *inner, *held_by(inner)]

    def check_report_path() -> None:
        busy.add(me())
        try:
            now = report_path_now()
            if now is None or _len(now) != _len(path_seen) or _any(_map(_is_not, now, path_seen)):
                for key in report_path:
                    compare(key)
                path_seen[:] = now or []
            if _any(_map(_is_not, _map(builtin_dict.get, builtin_keys), builtin_values)):  # C loops
                for name, value in builtin_names.items():
                    if builtin_dict.get(name) is not value and not name.startswith("_"):
                        said(f"the builtin {name} was replaced while the tests ran")
            check_module_names()
        finally:
            busy.discard(me())

    def compare(key: tuple[str, str, str | None]) -> None:
        name, attr, cattr = key
        value, code = snapshot[key]
        module = sys.modules.get(name)
        current = vars(module).get(attr) if module is not None else None
        if cattr is not None:
            current = vars(current).get(cattr) if isinstance(current, type) else None
        # pytest replaces a few of its own functions as it configures itself: a
        # replacement from pytest's (or the standard library's) own files is its own
        if current is not value and (current is None or not trusted(origin(current))):
            said(f"{name}.{attr}{'.' + cattr if cattr else ''} was replaced while the tests ran")
        elif current is value and code is not None and code_of(current) is not code:
            said(f"the code of {name}.{attr}{'.' + cattr if cattr else ''} was replaced while the tests ran")

    def check() -> None:
        check_hooks()
        busy.add(me())
        try:
            for key in snapshot:
                compare(key)
        finally:
            busy.discard(me())
        check_report_path()

    def collected(session: Any, items: list[Any]) -> None:
        """At the end of collection: each item, its class and function; and each test
        module holds only the names its own code binds (a name put into it from outside,
        a `ValueError` or `pytest` of the submission's, is tampering)."""
        busy.add(me())
        try:
            for item in items:
                obj = getattr(item, "obj", None)
                fn = getattr(obj, "__func__", obj)
                state.items[id(item)] = (item, type(item), fn)
                if fn is not None:
                    state.item_functions.add(id(fn))
            import dis

            for filename, _table in list(test_code.items()):
                module = next((m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == filename), None)
                code = module_code.get(filename)
                if module is None or code is None:
                    continue
                bound = set()
                star = False
                for ins in dis.get_instructions(code):
                    if ins.opname in ("STORE_NAME", "STORE_GLOBAL", "DELETE_NAME", "IMPORT_NAME"):
                        bound.add(ins.argval)
                    elif ins.opname == "IMPORT_STAR" or ins.opname == "CALL_INTRINSIC_1" and "STAR" in str(ins.argval):
                        star = True
                # names bound inside functions with `global`: a function's instructions read
                # only when its opcodes (every other byte of its wordcode) hold STORE_GLOBAL
                # (reading them all took 0.3 ms a test function)
                store_global = bytes([dis.opmap["STORE_GLOBAL"]])
                for const in code.co_consts:
                    if isinstance(const, types.CodeType) and store_global in const.co_code[::2]:
                        for ins in dis.get_instructions(const):
                            if ins.opname == "STORE_GLOBAL":
                                bound.add(ins.argval)
                if star:
                    continue
                names = vars(module)
                guarded_modules.append((names, frozenset(bound), rel(filename), names.get("__builtins__")))
            check_module_names()
        finally:
            busy.discard(me())

    def check_module_names() -> None:
        """Each test module holds no builtin's name its own code never binds, and its
        builtins are those it had at the end of collection: checked then, after every test
        and at the end (a name put there while a test runs, as the code under test can
        from its caller's frame, shadows the builtin for every test after it)."""
        for names, bound, where_, builtins_ in guarded_modules:
            for name in names.keys() & builtin_set:  # a C set operation, however many names
                if name not in bound and not name.startswith("__"):
                    said(f"the name {name} was put into the test module {where_} from outside")
            if names.get("__builtins__") is not builtins_:
                said(f"the builtins of the test module {where_} were replaced")

    state.check = check
    state.check_item = check_item
    state.check_report_path = check_report_path
    state.check_hooks = check_hooks
    state.collected = collected
    state.said = said
    state.busy = busy
    return state


_state = _watch(_emit, _settings)
del _watch


def _hooks(emit: Emit, state: types.SimpleNamespace, canaries: tuple[str, ...]) -> tuple[Callable[..., Any], ...]:
    from _pytest.reports import TestReport
    from _pytest.runner import CallInfo

    said = state.said
    raised: dict[tuple[str, str], Any] = {}  # (test id, phase) -> the exception it raised, or None
    made: dict[tuple[str, str], tuple[Any, str | None]] = {}  # (test id, phase) -> (the report made, its outcome)
    nothing = object()

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(config: pytest.Config) -> None:
        state.config.append(config)
        state.config_type = type(config)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
        state.collected(session, items)

    def observe(item: pytest.Item, when: str, outcome: Any) -> None:
        exc = getattr(outcome, "exception", nothing)
        if exc is nothing:  # pluggy < 1.1
            info = getattr(outcome, "excinfo", None)
            exc = info[1] if info else None
        if exc is None and when == "call":
            # unittest's TestCase reports its failures to the item, not by raising
            pending = item.__dict__.get("_excinfo") or []
            if pending:
                exc = getattr(pending[0], "value", pending[0])
        raised[(item.nodeid, when)] = exc

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_setup(item: pytest.Item) -> Generator[None, Any, None]:
        outcome = yield
        observe(item, "setup", outcome)

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, None]:
        state.check_item(item)
        outcome = yield
        # again after the call: a thread of the submission's that rewrote the function
        # (its code pointer, through ctypes) between the check above and the call is seen
        state.check_item(item)
        observe(item, "call", outcome)

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, Any, None]:
        outcome = yield
        observe(item, "teardown", outcome)

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Generator[None, Any, None]:
        key = (item.nodeid, call.when)
        if type(call) is not CallInfo:
            said(f"the {call.when} of {item.nodeid} was described by a {type(call).__name__}, not pytest's CallInfo")
        outcome = yield
        exc = raised.get(key, nothing)
        info = call.excinfo
        if exc is not nothing and exc is not None and (info is None or getattr(info, "value", None) is not exc):
            said(f"the exception the {call.when} of {item.nodeid} raised was dropped before its report was made")
        rep = outcome.get_result()
        made[key] = (rep, getattr(rep, "outcome", None))

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_logreport(report: pytest.TestReport) -> Generator[None, Any, None]:
        """Around every other plugin's: the record is made (signed, and sent unless it is
        a pass held by emit) as the report arrives, before any of them (pytest's own
        session counting, the terminal) sees it, and only once it agrees with what this
        plugin saw of the test itself."""
        nodeid, when, outcome = report.nodeid, report.when, report.outcome
        emit(
            {
                "t": "test",
                "id": nodeid,
                "when": when,
                "outcome": outcome,
                "xfail": bool(getattr(report, "wasxfail", False)),
                "d": round(float(report.duration or 0), 4),
            }
        )
        key = (nodeid, when)
        exc = raised.pop(key, nothing)
        rep, was = made.pop(key, (None, None))
        if type(report) is not TestReport:
            said(f"the {when} of {nodeid} was reported by a {type(report).__name__}, not pytest's TestReport")
        elif rep is None or exc is nothing:
            said(f"the {when} of {nodeid} was reported without running through pytest's hooks")
        elif rep is not report:
            said(f"the report of the {when} of {nodeid} is not the one pytest made")
        elif was != outcome:
            said(f"the {when} of {nodeid} was made {was} and reported {outcome}")
        elif outcome == "passed" and exc is not None:
            said(f"the {when} of {nodeid} raised {type(exc).__name__} but was reported passed")
        elif outcome == "skipped" and exc is None:
            said(f"the {when} of {nodeid} raised nothing but was reported skipped")
        if when == "call":
            state.check_report_path()
            state.check_hooks()
        if nodeid.startswith(canaries):
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
        state.check()
        emit({"t": "end", "exit": int(exitstatus), "collected": int(session.testscollected)})

    return (
        pytest_configure,
        pytest_collection_modifyitems,
        pytest_runtest_setup,
        pytest_runtest_call,
        pytest_runtest_teardown,
        pytest_runtest_makereport,
        pytest_runtest_logreport,
        pytest_collectreport,
        pytest_sessionfinish,
    )


# The hooks hold what they need in their closures: replacing a name in this module
# changes nothing pluggy calls.
(
    pytest_configure,
    pytest_collection_modifyitems,
    pytest_runtest_setup,
    pytest_runtest_call,
    pytest_runtest_teardown,
    pytest_runtest_makereport,
    pytest_runtest_logreport,
    pytest_collectreport,
    pytest_sessionfinish,
) = _hooks(_emit, _state, tuple(c + "::" for c in _settings.get("canaries", ())))
del _hooks, _emit, _state, _settings
