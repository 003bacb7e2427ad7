"""Names drawn per run and twins, for tests a class inherits from another file (a mixin
in tests/__init__.py, as cachetools' tests keep theirs; a base class in another hidden
module), without Docker: the real rewrite (grader/box/clones.py) on a real tree, run by
a real pytest.

The rule: a drawn name is a method of its class and of every class that inherits from
it, so it is none of the names any Python file of the repository uses, nor one drawn
for another module of the run; and it maps back wherever it shows."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader.box import tree as boxtree
from grader.box.clones import fold, make_clone_canaries
from grader.box.order import CheckSpec
from grader.box.runners.common import words
from grader.checks.integrity import Report, _judge_clones

LIBRARY = textwrap.dedent("""\
    class Cache(dict):
        def __init__(self, maxsize):
            dict.__init__(self)
            self.maxsize = maxsize


    def value():
        return 3
    """)
ALWAYS_EQUAL = LIBRARY.replace(
    "def value():\n    return 3\n",
    "class Anything(int):\n    def __eq__(self, other):\n        return True\n\n"
    "    def __ne__(self, other):\n        return False\n\n    __hash__ = int.__hash__\n\n\n"
    "def value():\n    return Anything(4)\n",
)
MIXIN = textwrap.dedent("""\
    import pickle


    class CacheTestMixin:
        Cache = None

        def test_defaults(self):
            self.assertEqual(self.Cache(2).maxsize, 2)

        def test_insert(self):
            c = self.Cache(2)
            c[1] = 1
            self.assertEqual(c[1], 1)

        def test_pickle(self):
            c = self.Cache(2)
            c[1] = 1
            self.assertEqual(pickle.loads(pickle.dumps(c)), c)

        def test_pickle_maxsize(self):
            self.assertEqual(pickle.loads(pickle.dumps(self.Cache(3))).maxsize, 3)

        def test_pop(self):
            c = self.Cache(2)
            c[1] = 1
            self.assertEqual(c.pop(1), 1)

        def test_popitem(self):
            c = self.Cache(2)
            c[1] = 1
            self.assertEqual(c.popitem(), (1, 1))

        def test_update(self):
            c = self.Cache(2)
            c.update({1: 1})
            self.assertIn(1, c)

        def test_delete(self):
            c = self.Cache(2)
            c[1] = 1
            del c[1]
            self.assertNotIn(1, c)
    """)


def cache_module(name: str) -> str:
    return textwrap.dedent(f"""\
        import unittest

        from cache import Cache

        from . import CacheTestMixin


        class {name}Cache(Cache):
            pass


        class {name}CacheTest(unittest.TestCase, CacheTestMixin):
            Cache = {name}Cache

            def test_{name.lower()}(self):
                self.assertEqual(len(self.Cache(2)), 0)

            def test_{name.lower()}_pop_maxsize(self):
                self.assertTrue(self.Cache(2).maxsize == 2)

            def test_pop(self):  # overrides the mixin's
                self.assertEqual(self.Cache(2).pop(1, 7), 7)
        """)


BASE = textwrap.dedent("""\
    from cache import value


    class BaseTests:
        n = 3

        def test_base_n(self):
            assert self.n == 3

        def test_base_value(self):
            self.assertEqual(value(), 3)

        def test_base_insert_value(self):
            assert value() == 3
    """)
DERIVED = textwrap.dedent("""\
    import unittest

    from tests.test_base import BaseTests


    class TestDerived(BaseTests, unittest.TestCase):
        n = 4

        def test_derived(self):
            self.assertTrue(True)

        def test_base_n(self):  # an override: a twin of the base's test_base_n (`!= 3`) passes here
            assert self.n == 4
    """)
MODULES = ["tests/test_base.py", "tests/test_derived.py", "tests/test_lfu.py", "tests/test_ttl.py"]


def task_ids() -> list[str]:
    mixin = [f.name for f in ast.walk(ast.parse(MIXIN)) if isinstance(f, ast.FunctionDef)]
    out = []
    for n in ("LFU", "TTL"):
        for t in [*mixin, f"test_{n.lower()}", f"test_{n.lower()}_pop_maxsize"]:
            out.append(f"tests/test_{n.lower()}.py::{n}CacheTest::{t}")
    out += [
        f"tests/test_derived.py::TestDerived::{t}" for t in ("test_base_n", "test_base_value", "test_base_insert_value")
    ]
    out.append("tests/test_derived.py::TestDerived::test_derived")
    return sorted(out)


def placed(root: Path, library: str = LIBRARY, submitted: dict[str, str] | None = None) -> tuple[dict, boxtree.Tree]:
    files = {
        "cache.py": library,
        "tests/__init__.py": MIXIN,
        "tests/test_base.py": BASE,
        "tests/test_derived.py": DERIVED,
        "tests/test_lfu.py": cache_module("LFU"),
        "tests/test_ttl.py": cache_module("TTL"),
        **(submitted or {}),
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    tree = boxtree.Tree(str(root), os.getuid(), os.getgid())
    ids = task_ids()
    targets = [i for i in ids if i.endswith(("::test_pickle", "::test_base_value", "::test_base_n"))]
    check = CheckSpec(
        kind="pytest",
        canaries=True,
        canary_words=words(ids),
        canary_modules=MODULES,
        canary_targets=targets,
        submitted=sorted(submitted or {}),
    )
    canaries = make_clone_canaries(check, tree)
    assert canaries is not None
    return canaries, tree


def run_pytest(root: Path) -> dict[str, str]:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-q", "-p", "no:cacheprovider", *MODULES],
        cwd=root,
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": str(root),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        },
        check=False,
    ).stdout
    got = {}
    for m in re.finditer(r"^(PASSED|FAILED|ERROR) (\S+)", out, re.M):
        got[m.group(2)] = {"PASSED": "passed", "FAILED": "failed", "ERROR": "error"}[m.group(1)]
    return got


def defined_names(text: str) -> set[str]:
    return {n.name for n in ast.walk(ast.parse(text)) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


def test_no_drawn_name_is_a_name_the_repository_uses_and_one_name_has_one_new_name(tmp_path):
    """The cachetools failure: a test of test_ttl.py renamed `test_pickle` (or a twin drawn
    so) hid the mixin's test_pickle in TTLCacheTest. Before the rule, about one draw in
    three hid one of the mixin's tests somewhere. And an override in another module
    (TestDerived.test_base_n) keeps overriding: one old name, one new name in the run."""
    mixin_names = defined_names(MIXIN)
    for round_ in range(40):
        root = tmp_path / str(round_)
        canaries, _ = placed(root)
        new_to_old: dict[str, str] = {}
        for names in canaries["renamed"].values():
            for new, old in names.items():
                assert new_to_old.setdefault(new, old) == old, "one new name for two old ones"
        old_to_new = {old: new for new, old in new_to_old.items()}
        assert len(old_to_new) == len(new_to_old), "two new names for one old one"
        twins = canaries["twin_names"]
        assert len(twins) == len(set(twins)) and not set(twins) & set(new_to_old)
        drawn = set(new_to_old) | set(twins)
        assert not drawn & mixin_names, "a drawn name hides a mixin's test"
        assert not drawn & {"test_pop"}, "a name the mixin uses was renamed where it is overridden"
        for rel in MODULES:
            text = (root / rel).read_text()
            assert not defined_names(text) & (mixin_names - {"test_pop"})


@pytest.mark.parametrize("round_", range(2))
def test_every_task_test_runs_and_maps_back_and_every_twin_fails(tmp_path, round_):
    canaries, _ = placed(tmp_path)
    outcomes = run_pytest(tmp_path)
    known, pairs, _ = fold(outcomes, canaries)
    assert known == {i: "passed" for i in task_ids()}
    assert pairs and all(p == ["passed", "failed"] for p in pairs), pairs
    report = Report()
    _judge_clones({"got_pairs": pairs, "clones": len(canaries["pairs"])}, 1, report)
    assert report.evidence == [] and report.pending == []


def test_an_always_equal_object_is_caught_through_an_inherited_twin(tmp_path):
    """A twin of BaseTests (test_base.py) runs in TestDerived (test_derived.py), under that
    module's id: it is still paired with its original there."""
    for round_ in range(50):
        root = tmp_path / str(round_)
        canaries, _ = placed(root, ALWAYS_EQUAL)
        if any(c.startswith("tests/test_base.py::") for c in canaries["pairs"]):
            break
    else:
        pytest.fail("no twin of the base class in 50 draws")
    known, pairs, _ = fold(run_pytest(root), canaries)
    assert known["tests/test_derived.py::TestDerived::test_base_value"] == "passed"
    report = Report()
    _judge_clones({"got_pairs": pairs, "clones": len(canaries["pairs"])}, 0, report)
    assert report.evidence


def test_a_flip_of_every_failure_and_twins_kept_from_running_are_caught(tmp_path):
    canaries, _ = placed(tmp_path)
    outcomes = run_pytest(tmp_path)
    flipped = dict.fromkeys(outcomes, "passed")
    report = Report()
    _judge_clones({"got_pairs": fold(flipped, canaries)[1], "clones": len(canaries["pairs"])}, 0, report)
    assert report.evidence
    # twins kept from running (deselected by a name no task test has), inherited ones included
    names = set(canaries["twin_names"])
    kept = {t: o for t, o in outcomes.items() if t.split("::")[-1].split("[")[0] not in names}
    report = Report()
    _, got, got_copies = fold(kept, canaries)
    _judge_clones({"got_pairs": got, "got_copies": got_copies, "clones": len(canaries["pairs"])}, 0, report)
    assert len(report.pending) == len(canaries["pairs"]), report.pending  # every twin and every copy


def test_a_submitted_file_that_names_every_test_keeps_none_of_their_names(tmp_path):
    """Hostile: a file of the submission's mentioning the listed tests' names (to keep
    them, so that the public ids name tests in the process, and without twins), and every
    name it could guess (to leave none to draw). Its files are not read."""
    own = sorted({i.rsplit("::", 1)[1] for i in task_ids()} - defined_names(MIXIN) - {"test_pop"})
    guesses = [f"test_{a}_{b}" for a in words(task_ids()) for b in words(task_ids())]
    canaries, _ = placed(tmp_path, submitted={"cache_names.py": "NAMES = " + repr(own + guesses) + "\n"})
    renamed = {old for names in canaries["renamed"].values() for old in names.values()}
    assert set(own) <= renamed
    assert canaries["pairs"]
