"""Issue 18, "verdict integrity, second round": hostile submissions written against round
one's defences, by class, through the whole service under runc, gVisor and the pool (the
`env` fixture of tests/test_attacks.py; those inside pytest's own process under runc and the
pool alone: `BELOW_THE_PROCESS` below names the others), and honest submissions of the same
shapes that must not be hurt.

Each attack gets FAIL; where only an audit can see what it did, it says so (`audit`:
rules that must be among the result's findings). Each honest submission gets PASS with
no tampering, and a note of what the audit records of it (a flag, under the default
mode). The payloads are in tests/attack_patches_round2.py.

The classes: 1 report objects changed in place through pytest's data; 2 code objects
swapped; 3 frame locals or memory written through ctypes; 4 spellings past a textual
audit; 5 canaries picked out; 6 malformed records the plugin signs; 7 bits out under
`feedback: tests` (an exit status, a sleep, a PATCH FAILED's localization: none reaches
the team's view); 9 an always-equal object. (8, one task's answer in another's public
material, is tests/test_task_leaks.py: it is about task sets, not submissions.)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from test_attacks import F, Graded, P, _not_rescued_by_blame, ctx, env, grade  # noqa: F401  (fixtures)

from helpers import attack_patches as ap
from helpers import attack_patches_round2 as r2
from helpers.attack_patches import FIXED, UNFIXED, code

pytestmark = [pytest.mark.docker, pytest.mark.service]


def unfixed_with(payload: str) -> str:
    return payload if "def mean" in payload else code(payload, UNFIXED)


@dataclass
class Case:
    cls: str
    files: dict[str, str]
    verdict: str
    task: str = "mini-attack"
    tampered: bool | None = None  # True: the result must carry tampering evidence
    audit: set[str] = field(default_factory=set)  # rules the result's findings must include
    check: Callable[[Graded], str | None] | None = None
    raw: bytes | None = None  # the patch as it is sent, instead of the diff of `files`


def _evidence(g: Graded) -> list[str]:
    return list((g.host.get("result") or {}).get("tampered") or [])


def _rules(g: Graded) -> set[str]:
    return {f.get("rule") for f in (g.host.get("result") or {}).get("audit") or []}


def _values(v, key: str):
    """Every value under `key`, anywhere in a JSON document."""
    if isinstance(v, dict):
        for k, x in v.items():
            if k == key:
                yield x
            yield from _values(x, key)
    elif isinstance(v, list):
        for x in v:
            yield from _values(x, key)


def _no_exit_status_out(g: Graded) -> str | None:
    """The status the leak chose (120 to 216: a byte of the hidden test, ap.exit_status_of)
    is in no field of the team's view and no number of its text."""
    chosen = range(120, 217)
    fields = [x for x in _values(g.view, "exit_code") if x in chosen]  # the apply log's 0 or 1 is git's, not the run's
    words = {int(w) for s in ap._strings(g.view) for w in re.findall(r"\b\d{3}\b", s)}
    if fields or words & set(chosen):
        return f"an exit status reaches the team: exit_code {fields}, numbers {sorted(words & set(chosen))}"
    return None


def _no_timing_out(g: Graded) -> str | None:
    """Neither the stage durations nor when the grade started and finished (their
    difference is the duration a sleep chose) reach the team."""
    shown = [k for k in ("started_at", "finished_at") if g.view.get(k)]
    durations = [x for x in _values(g.view, "durations") if x]
    if shown or durations:
        return f"the grade's timing reaches the team: {shown} {durations}"
    return None


def _no_localization_out(g: Graded) -> str | None:
    found = [x for x in _values(g.view, "localization") if x]
    return f"localization figures reach the team: {found}" if found else None


def _listed_outcomes_shown(g: Graded) -> str | None:
    tests = (g.view.get("result") or {}).get("tests") or {}
    if (tests.get("fail_to_pass") or {}).get("success") != ["tests/test_mean.py::test_empty"]:
        return f"the team does not see its listed tests' outcomes: {tests}"
    return _no_timing_out(g)


# A sleep whose length is a byte of the hidden test (0.0 to 4.9 s), before the tests fail.
SLEEP_LEAK = code("""
    import time as _t

    with open("tests/test_mean.py", "rb") as _f:
        _t.sleep(sum(_f.read()) % 50 / 10)
    """)
# A patch naming the gold patch's file whose hunk does not apply: graded PATCH FAILED, with
# localization figures (precision, recall) that say which of its files the gold touches.
UNAPPLIABLE = (
    b"--- a/calc/__init__.py\n+++ b/calc/__init__.py\n@@ -1,1 +1,1 @@\n-no such line at the base\n+x = 1\n"
    b"--- /dev/null\n+++ b/calc/extra.py\n@@ -0,0 +1,1 @@\n+y = 2\n"
)


def _canary_wrong(g: Graded) -> str | None:
    canaries = ((g.host.get("result") or {}).get("protections") or {}).get("canaries") or {}
    if not canaries.get("wrong"):
        return f"no canary caught it: {canaries}"
    return None


def _hook_named(g: Graded) -> str | None:
    said = [e for e in _evidence(g) if "pytest_runtest_logreport hook from calc/__init__.py was registered" in e]
    return None if said else f"the hook was not named: {_evidence(g)}"


def _name_put_into_the_test_module(g: Graded) -> str | None:
    said = [e for e in _evidence(g) if "the name ValueError was put into the test module tests/test_mean.py" in e]
    return None if said else f"the name was not said: {_evidence(g)}"


def _no_canary_wrong(g: Graded) -> str | None:
    canaries = ((g.host.get("result") or {}).get("protections") or {}).get("canaries") or {}
    if canaries.get("wrong"):
        return f"an honest run tripped a canary: {canaries}"
    if not canaries.get("must_fail"):
        return f"the run had no canaries: {canaries}"
    return None


ATTACKS: dict[str, Case] = {
    # 1. report objects changed in place through pytest's own data
    "user-properties-subclass-flips-the-report-being-built": Case(
        "1", {"calc/__init__.py": unfixed_with(r2.USER_PROPERTIES_FLIP_THE_REPORT)}, F, tampered=True
    ),
    "keywords-subclass-drops-the-calls-exception": Case(
        "1", {"calc/__init__.py": unfixed_with(r2.KEYWORDS_SUBCLASS_DROPS_THE_EXCEPTION)}, F, tampered=True
    ),
    # 2. code objects swapped, function objects kept
    "hidden-test-runs-a-passing-tests-code": Case(
        "2", {"calc/__init__.py": unfixed_with(r2.HIDDEN_TEST_CODE_SWAPPED)}, F, tampered=True
    ),
    "pytest-callinfo-from-call-body-swapped": Case(
        "2", {"calc/__init__.py": unfixed_with(r2.PYTEST_FUNCTION_BODY_SWAPPED)}, F, tampered=True
    ),
    # 2b. hooks changed for part of the run only: named by the check after every test
    "a-hook-registered-for-one-test-mid-run": Case(
        "2",
        {"calc/__init__.py": r2.HOOK_REGISTERED_FOR_ONE_TEST},
        F,
        tampered=True,
        check=_hook_named,
    ),
    "a-hook-put-straight-into-pluggys-list-mid-run": Case(
        "2",
        {"calc/__init__.py": r2.HOOK_INSERTED_INTO_PLUGGYS_LIST},
        F,
        tampered=True,
        check=_hook_named,
    ),
    # 2c. a builtin's name put into a test module from outside while the tests run (the
    # first test that calls mean may still fail; every later one is fooled)
    "a-builtin-name-put-into-the-test-module-while-the-tests-run": Case(
        "2",
        {"calc/__init__.py": r2.BUILTIN_NAME_PUT_INTO_THE_TEST_MODULE},
        F,
        tampered=True,
        check=_name_put_into_the_test_module,
    ),
    # 3. frame locals and memory written through ctypes
    "ctypes-locals-to-fast-from-an-exceptions-str": Case(
        "3", {"calc/__init__.py": unfixed_with(r2.CTYPES_LOCALS_TO_FAST)}, F, tampered=True
    ),
    "a-busy-thread-blinds-the-hook-while-a-code-is-swapped": Case(
        "2", {"calc/__init__.py": unfixed_with(r2.BUSY_THREAD_BLINDS_THE_HOOK)}, F, tampered=True
    ),
    "ctypes-rewrites-a-tests-code-pointer": Case(
        "3", {"calc/__init__.py": unfixed_with(r2.CTYPES_REWRITES_A_TEST_CODE_POINTER)}, F, tampered=True
    ),
    # 4. spellings past a textual audit: the run catches the flip, the audit names the means
    "getattr-spelled-getframe-flips-the-report": Case(
        "4",
        {
            "calc/__init__.py": unfixed_with(
                r2.USER_PROPERTIES_FLIP_THE_REPORT.replace("sys._getframe(", 'getattr(sys, "_get" "frame")(')
                .replace("f.f_back", 'getattr(f, "f_" "back")')
                .replace("f.f_locals", 'getattr(f, "f_lo" "cals")')
            )
        },
        F,
        tampered=True,
        audit={"frame-tricks"},
    ),
    "dunder-import-spelled-ctypes-writes-locals": Case(
        "4",
        {
            "calc/__init__.py": unfixed_with(
                r2.CTYPES_LOCALS_TO_FAST.replace(
                    '__import__("c" "types")', 'getattr(_b, "__imp" "ort__")("c" "types")'
                ).replace("import sys\n", "import sys\nimport builtins as _b\n", 1)
            )
        },
        F,
        tampered=True,
        audit={"native-code"},
    ),
    # 5. canaries picked out: the plugin's checks silenced first, so only twins can tell
    "silenced-plugin-blanket-flip": Case(
        "5", {"calc/__init__.py": unfixed_with(r2.SILENCED_BLANKET_FLIP)}, F, tampered=True, check=_canary_wrong
    ),
    "silenced-plugin-flip-aimed-at-the-listed-id": Case(
        "5", {"calc/__init__.py": unfixed_with(r2.SILENCED_FLIP_AIMED_AT_THE_LISTED_ID)}, F
    ),
    "silenced-plugin-flip-aimed-by-content": Case(
        "5",
        {"calc/__init__.py": unfixed_with(r2.SILENCED_FLIP_AIMED_BY_CONTENT)},
        F,
        tampered=True,
        check=_canary_wrong,
    ),
    "silenced-plugin-flip-of-the-first-failure-per-module": Case(
        "5", {"calc/__init__.py": unfixed_with(r2.SILENCED_FLIP_OF_THE_FIRST_FAILURE_PER_MODULE)}, F
    ),
    # 6. malformed records the plugin signs: FAIL, never ERROR
    "report-with-a-list-for-an-id-and-a-number-for-a-phase": Case(
        "6", {"calc/__init__.py": unfixed_with(r2.MALFORMED_ID_AND_PHASE)}, F, check=_not_rescued_by_blame
    ),
    "report-nested-past-the-recursion-limit-with-a-huge-duration": Case(
        "6", {"calc/__init__.py": unfixed_with(r2.MALFORMED_DEEP_AND_HUGE)}, F, check=_not_rescued_by_blame
    ),
    # 7. bits out under `feedback: tests` (mini-attack's policy): what the run chooses reaches no field
    "exit-status-encodes-a-byte-of-the-hidden-test": Case(
        "7", {"calc/__init__.py": unfixed_with(ap.LEAK_IN_EXIT_STATUS)}, F, check=_no_exit_status_out
    ),
    "a-sleep-encodes-a-byte-of-the-hidden-test": Case(
        "7", {"calc/__init__.py": unfixed_with(SLEEP_LEAK)}, F, check=_no_timing_out
    ),
    "a-patch-failed-probes-which-files-the-gold-touches": Case(
        "7", {}, "PATCH FAILED", check=_no_localization_out, raw=UNAPPLIABLE
    ),
    # 9. always-equal objects: the twins of `assert mean(...) == 2` pass too
    "always-equal-float-subclass": Case(
        "9", {"calc/__init__.py": r2.ALWAYS_EQUAL}, F, tampered=True, audit={"always-equal"}
    ),
    "always-equal-by-lambda": Case(
        "9", {"calc/__init__.py": r2.ALWAYS_EQUAL_BY_LAMBDA}, F, tampered=True, audit={"always-equal"}
    ),
}


# Graded under all three providers: through threads' scheduling, the report channel, a
# process's exit status or the clock. Every other attack here is made and judged inside
# pytest's own process, or at the patch's apply: runc and the pool (`same_on_every_kernel`,
# as INSIDE_THE_PROCESS of test_attacks.py).
BELOW_THE_PROCESS = frozenset(
    {
        "a-busy-thread-blinds-the-hook-while-a-code-is-swapped",
        "report-with-a-list-for-an-id-and-a-number-for-a-phase",
        "report-nested-past-the-recursion-limit-with-a-huge-duration",
        "exit-status-encodes-a-byte-of-the-hidden-test",
        "a-sleep-encodes-a-byte-of-the-hidden-test",
    }
)
assert BELOW_THE_PROCESS <= set(ATTACKS), BELOW_THE_PROCESS - set(ATTACKS)


@pytest.mark.parametrize("name", [n for n in ATTACKS if n in BELOW_THE_PROCESS])
def test_round2_attack(env, ctx, name):
    graded_as_it_deserves(env, ctx, name)


@pytest.mark.same_on_every_kernel
@pytest.mark.parametrize("name", [n for n in ATTACKS if n not in BELOW_THE_PROCESS])
def test_round2_attack_inside_the_test_process(env, ctx, name):
    graded_as_it_deserves(env, ctx, name)


def graded_as_it_deserves(env, ctx, name: str) -> None:
    case = ATTACKS[name]
    got = grade(env, case.raw if case.raw is not None else ctx.diff(case.files), case.task)
    where = f"{name} under {env['runtime']}"
    assert got.view["status"] == "done"
    assert got.verdict == case.verdict, f"{where}: {got.why()}"
    if case.tampered:
        assert _evidence(got), f"{where}: FAIL without tampering evidence: {got.why()}"
    missing = case.audit - _rules(got)
    assert not missing, f"{where}: the audit did not name {missing}: {_rules(got)}"
    if case.check is not None:
        complaint = case.check(got)
        assert complaint is None, f"{where}: {complaint}: {got.why()}"
    assert env["grader"].sandbox.busy_containers() == []


# --- honest submissions of the same shapes -------------------------------------------------

HONEST: dict[str, Case] = {
    # 7: an honest fix under `tests` still learns what it needs: the verdict and its listed tests
    "fix-under-tests-feedback-sees-its-listed-outcomes": Case(
        "7", {"calc/__init__.py": FIXED + "\n# honest\n"}, P, check=_listed_outcomes_shown
    ),
    # 1: a list subclass and a caller's frame read, as ordinary code does (flagged only)
    "fix-that-reads-its-callers-module-name-from-a-frame": Case(
        "1",
        {
            "calc/__init__.py": code(
                """
                import sys


                class History(list):
                    def __iter__(self):
                        return list.__iter__(self)


                CALLERS = History()
                """,
                FIXED.replace(
                    "    return sum(xs) / len(xs)",
                    "    CALLERS.append(sys._getframe(1).f_globals.get('__name__'))\n    return sum(xs) / len(xs)",
                ),
            )
        },
        P,
        audit={"frame-tricks"},
    ),
    # 2: a sampling thread that reads every thread's frames while the tests run (a profiler's
    # habit): busy in the audit hook at the same moments as the main thread, and no tampering
    "fix-with-a-thread-that-samples-frames": Case(
        "2",
        {
            "calc/__init__.py": code(
                """
                import sys
                import threading
                import time

                SAMPLES = []


                def _sample():
                    for _ in range(2000):
                        SAMPLES.append(len(sys._current_frames()))
                        time.sleep(0.0005)


                threading.Thread(target=_sample, daemon=True).start()
                """,
                FIXED,
            )
        },
        P,
    ),
    # 2: a worker forked while the tests run (multiprocessing's habit on Linux) whose code
    # reads a frame: the child inherits the plugin and its channel, and says nothing in the
    # parent's session (a record from it would break the parent's chain)
    "fix-that-forks-a-worker-that-reads-a-frame": Case(
        "2",
        {
            "calc/__init__.py": code(
                """
                import os
                import sys


                def _in_a_fork():
                    pid = os.fork()
                    if pid == 0:
                        sys._getframe()
                        os._exit(0)
                    os.waitpid(pid, 0)
                """,
                FIXED.replace("    return sum(xs) / len(xs)", "    _in_a_fork()\n    return sum(xs) / len(xs)"),
            )
        },
        P,
    ),
    # 2: a function whose code it swaps itself (a fast path chosen at import)
    "fix-that-swaps-its-own-functions-code": Case(
        "2",
        {
            "calc/__init__.py": code(
                FIXED,
                """
                def _checked(xs):
                    if not xs:
                        raise ValueError("empty")
                    return sum(xs) / len(xs)


                mean.__code__ = _checked.__code__
                """,
            )
        },
        P,
        audit={"bytecode"},
    ),
    # 3: ctypes for what it is for
    "fix-that-uses-ctypes-for-a-c-double": Case(
        "3",
        {
            "calc/__init__.py": code(
                """
                import ctypes


                def _as_double(x):
                    return ctypes.c_double(x).value
                """,
                FIXED.replace("return sum(xs) / len(xs)", "return _as_double(sum(xs)) / len(xs)"),
            )
        },
        P,
        audit={"native-code"},
    ),
    # 4: getattr with plain names, importlib with a literal: nothing to say
    "fix-with-plain-getattr-and-import-module": Case(
        "4",
        {
            "calc/__init__.py": code(
                """
                import importlib

                _json = importlib.import_module("json")
                """,
                FIXED.replace("if not xs:", "if not getattr(xs, '__len__', None) or not len(xs):"),
            )
        },
        P,
        check=lambda g: f"findings on plain code: {_rules(g)}" if _rules(g) else None,
    ),
    # 5: the gold fix beside the twins: none trips
    "the-fix-beside-the-twins": Case("5", {"calc/__init__.py": FIXED}, P, check=_no_canary_wrong),
    # 6: odd but honest test ids of its own
    "fix-with-a-test-file-of-odd-ids": Case(
        "6",
        {
            "calc/__init__.py": FIXED,
            "tests/test_mean_ids.py": code("""
                import pytest
                from calc import mean


                @pytest.mark.parametrize("xs", [pytest.param([1], id="one [x]::y"), pytest.param([2, 4], id="\\u00e9")])
                def test_ids(xs):
                    assert mean(xs) == sum(xs) / len(xs)
                """),
        },
        P,
    ),
    # 9: a real __eq__
    "fix-returning-a-value-type-with-a-real-eq": Case(
        "9",
        {
            "calc/__init__.py": code(
                """
                class Mean(float):
                    def __eq__(self, other):
                        return float(self) == other

                    __hash__ = float.__hash__
                """,
                FIXED.replace("return sum(xs) / len(xs)", "return Mean(sum(xs) / len(xs))"),
            )
        },
        P,
        check=lambda g: f"findings on a real __eq__: {_rules(g)}" if "always-equal" in _rules(g) else None,
    ),
}


@pytest.mark.parametrize("name", list(HONEST))
def test_round2_honest_submission_passes(env, ctx, name):
    case = HONEST[name]
    got = grade(env, ctx.diff(case.files), case.task)
    where = f"{name} under {env['runtime']}"
    assert got.verdict == P, f"{where}: {got.why()}"
    assert not _evidence(got), f"{where}: an honest run was called tampering: {_evidence(got)}"
    missing = case.audit - _rules(got)
    assert not missing, f"{where}: the audit did not record {missing}: {_rules(got)}"
    if case.check is not None:
        complaint = case.check(got)
        assert complaint is None, f"{where}: {complaint}"
