"""Twins are sound for honest objects whose `==` and `!=` disagree (grader/box/clones.py),
without Docker. bytecode's Bytecode is a list whose `__eq__` compares structure while the
`!=` it inherits from list compares its labels by identity: two equal Bytecodes are `==`
and `!=` at once. A twin `assertNotEqual(b1, b2)` of `assertEqual(b1, b2)` passed beside
its original, and the gold patch was called tampering. The twin of an equality is now
`not` of that very comparison; an always-equal object and a blanket flip are still caught."""

from __future__ import annotations

import ast
import random
import textwrap
import unittest

import pytest

from grader.box.clones import _rewrite, fold
from grader.checks.integrity import Report, _judge_clones

HIDDEN = textwrap.dedent("""\
    import unittest

    from lib import Code, Label, mean


    class CodeTests(unittest.TestCase):
        def test_eq(self):
            label = Label()
            self.assertEqual(Code([Label(), 1]), Code([label, 1]))

        def test_eq_assert(self):
            assert Code([Label()]) == Code([Label()])

        def test_ne(self):
            self.assertNotEqual(Code([1]), Code([2]))

        def test_ne_assert(self):
            assert Code([1]) != Code([2])

        def test_ordered(self):
            assert Code([1]) < Code([2])

        def test_mean(self):
            self.assertEqual(mean([1, 3]), 2)

        def test_mean_assert(self):
            assert mean([1, 3]) == 2
    """)
LIBRARY = textwrap.dedent("""\
    class Label:
        pass


    class Code(list):
        # structure: labels are equal wherever they stand; list's own != and < are inherited
        def __eq__(self, other):
            norm = lambda c: [('L' if isinstance(x, Label) else x) for x in c]
            return norm(self) == norm(other)

        __hash__ = None


    def mean(xs):
        return sum(xs) / len(xs)
    """)


class Anything(float):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = float.__hash__


def run(text: str, mean_override=None) -> dict[str, str]:
    import sys
    import types

    lib = types.ModuleType("lib")
    exec(compile(LIBRARY, "lib.py", "exec"), lib.__dict__)
    if mean_override is not None:
        lib.mean = mean_override
    sys.modules["lib"] = lib
    try:
        ns: dict = {"__name__": "tests_sound"}
        exec(compile(text, "tests/test_code.py", "exec"), ns)
    finally:
        del sys.modules["lib"]
    out = {}
    for cls in [v for v in ns.values() if isinstance(v, type) and issubclass(v, unittest.TestCase)]:
        for name in unittest.TestLoader().getTestCaseNames(cls):
            result = unittest.TestResult()
            cls(name).run(result)
            ok = result.wasSuccessful()
            out[f"tests/test_code.py::{cls.__name__}::{name}"] = "passed" if ok else "failed"
    return out


def twins(seed: int) -> tuple[str, dict]:
    text, renamed, pairs, _ = _rewrite(
        "tests/test_code.py", HIDDEN, ast.parse(HIDDEN), random.Random(seed), ["code", "mean"], set(), 8
    )
    return text, {"renamed": {"tests/test_code.py": renamed}, "pairs": pairs}


def judged(outcomes: dict[str, str], canaries: dict) -> Report:
    report = Report()
    _, got, _ = fold(outcomes, canaries)
    _judge_clones({"got_pairs": got, "clones": len(canaries["pairs"])}, 0, report)
    return report


def test_the_library_really_is_equal_and_unequal_at_once():
    ns: dict = {}
    exec(LIBRARY, ns)
    a, b = ns["Code"]([ns["Label"]()]), ns["Code"]([ns["Label"]()])
    assert (a == b) and (a != b)


@pytest.mark.parametrize("seed", range(25))
def test_every_twin_fails_beside_its_passing_original_for_honest_code(seed):
    text, canaries = twins(seed)
    outcomes = run(text)
    known, got, _ = fold(outcomes, canaries)
    assert set(known.values()) == {"passed"}, known
    assert got and all(g == ["passed", "failed"] for g in got), (got, text)
    assert judged(outcomes, canaries).evidence == []


def test_an_always_equal_object_is_still_caught():
    caught = 0
    for seed in range(25):
        text, canaries = twins(seed)
        outcomes = run(text, mean_override=lambda xs: Anything(99))
        caught += bool(judged(outcomes, canaries).evidence)
    assert caught >= 20


def test_a_blanket_flip_is_still_caught():
    text, canaries = twins(1)
    outcomes = dict.fromkeys(run(text), "passed")
    assert judged(outcomes, canaries).evidence
