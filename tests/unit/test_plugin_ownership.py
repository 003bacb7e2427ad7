"""Whose code the report plugin guards (grader/box/reporters/pytest_plugin.py), without
Docker: the real plugin in a real pytest process (test_integrity.run_plugin).

The rule: code swapped into what decides outcomes (a collected test's function, what a
test module defines itself, pytest's, pluggy's and the plugin's functions) is tampering;
code set on any other function (a function a test makes while it runs, a library's) is
not. And a test a test module makes with exec() from its own text is its own test."""

from __future__ import annotations

import pytest

from tests.unit.test_integrity import run_plugin

# --- __code__ set on functions: whose function is it? -----------------------------------------

# What the bytecode library's own tests do (tests/test_instr.py, tests/test_cfg.py): a local
# function recompiled and its code set back, twice.
HONEST_LOCAL_CODE = """\
import types


def recompile(code):
    return code.replace(co_consts=tuple(c + 1 if isinstance(c, int) else c for c in code.co_consts))


def test_local_function_gets_new_code():
    def f():
        return 41

    f.__code__ = recompile(f.__code__)
    assert f() == 42
    f.__code__ = recompile(f.__code__)
    assert f() == 43


class TestInClass:
    def test_nested_local(self):
        def outer():
            def g(x):
                return x * 2
            g.__code__ = (lambda x: x * 3).__code__
            return g(2)
        assert outer() == 6


def test_library_function_code_set():
    import helper
    helper.swap_own()
    assert helper.value() == 2


def test_failing_stays_failed():
    def f():
        return 1
    f.__code__ = recompile(f.__code__)
    assert f() == 3
"""

HELPER_LIBRARY = """\
def value():
    return 1


def _two():
    return 2


def swap_own():
    value.__code__ = _two.__code__
"""


def test_a_test_may_set_code_on_its_own_local_functions_and_a_library_on_its_own(tmp_path):
    code, rep = run_plugin(tmp_path, HONEST_LOCAL_CODE, extra=HELPER_LIBRARY)
    assert rep["integrity"] == [] and rep["forged"] is None, rep["integrity"]
    assert rep["outcomes"] == {
        "test_x.py::test_local_function_gets_new_code": "passed",
        "test_x.py::TestInClass::test_nested_local": "passed",
        "test_x.py::test_library_function_code_set": "passed",
        "test_x.py::test_failing_stays_failed": "failed",
    }
    assert code == 1


HIDDEN = """\
import helper
import pytest


def check(v):
    assert v == 3


@pytest.fixture(autouse=True)
def _reach():
    helper.install()


def test_passing():
    pass


def test_hidden():
    check(2)


class TestC:
    def test_method(self):
        assert 1 == 2
"""


@pytest.mark.parametrize(
    "how, said",
    [
        # a hidden test's code replaced by a passing test's
        (
            "import sys\n"
            "def install():\n"
            "    m = sys.modules['test_x']\n"
            "    m.test_hidden.__code__ = m.test_passing.__code__\n",
            "the __code__ of test_hidden was replaced from helper.py",
        ),
        # ... by code of the submission's
        (
            "import sys\ndef install():\n    sys.modules['test_x'].test_hidden.__code__ = (lambda: None).__code__\n",
            "the __code__ of test_hidden was replaced from helper.py",
        ),
        # a method of a test class
        (
            "import sys\n"
            "def install():\n"
            "    sys.modules['test_x'].TestC.test_method.__code__ = (lambda self: None).__code__\n",
            "the __code__ of TestC.test_method was replaced from helper.py",
        ),
        # a helper of the test module that decides the test's outcome
        (
            "import sys\ndef install():\n    sys.modules['test_x'].check.__code__ = (lambda v: None).__code__\n",
            "the __code__ of check was replaced from helper.py",
        ),
        # pytest's own function
        (
            "def install():\n"
            "    import _pytest.runner as r\n"
            "    r.call_and_report.__code__ = r.call_and_report.__code__.replace()\n",
            "the __code__ of call_and_report was replaced from helper.py",
        ),
        # pluggy's
        (
            "def install():\n"
            "    import pluggy._callers as c\n"
            "    c._multicall.__code__ = c._multicall.__code__.replace()\n",
            "the __code__ of _multicall was replaced from helper.py",
        ),
        # the code laundered first through a local function: the test's function is still the test's
        (
            "import sys\n"
            "def install():\n"
            "    def local():\n"
            "        pass\n"
            "    local.__code__ = sys.modules['test_x'].test_passing.__code__\n"
            "    sys.modules['test_x'].test_hidden.__code__ = local.__code__\n",
            "the __code__ of test_hidden was replaced from helper.py",
        ),
    ],
)
def test_code_swapped_into_what_decides_outcomes_is_still_tampering(tmp_path, how, said):
    code, rep = run_plugin(tmp_path, HIDDEN, extra=how)
    assert any(said in what for what in rep["integrity"]), rep["integrity"]


def test_a_tests_function_given_the_code_of_one_of_its_own_local_functions_is_caught(tmp_path):
    """The test's local function is not guarded, but the test's own function is: its code
    may not become another's, even one its own file compiled."""
    source = (
        "import helper\n\n"
        "def test_hidden():\n"
        "    def ok():\n"
        "        pass\n"
        "    helper.keep(ok)\n"
        "    assert 0\n\n"
        "def test_then():\n"
        "    helper.swap()\n\n"
        "def test_z_hidden_again():\n"
        "    assert 0\n"
    )
    extra = (
        "import sys\nkept = []\n"
        "def keep(f):\n    kept.append(f)\n"
        "def swap():\n    sys.modules['test_x'].test_z_hidden_again.__code__ = kept[0].__code__\n"
    )
    code, rep = run_plugin(tmp_path, source, extra=extra)
    assert any("the __code__ of test_z_hidden_again was replaced" in w for w in rep["integrity"]), rep["integrity"]
    assert any("test_z_hidden_again runs the code of another test" in w for w in rep["integrity"]), rep["integrity"]


# --- tests a test module defines with exec() ----------------------------------------------------

# What typing_extensions' tests do: definitions in newer syntax kept in strings, executed by
# the module itself in a class body (and here at module level too).
EXEC_TESTS = '''\
import textwrap
import unittest

import helper

exec(textwrap.dedent("""
    def test_exec_module():
        assert 1 + 1 == 2

    def test_exec_module_fails():
        assert 1 + 1 == 3
    """))


class ProtocolTests(unittest.TestCase):
    def test_plain(self):
        self.assertTrue(True)

    exec(textwrap.dedent(
        """
        def test_exec_in_class(self):
            def inner():
                return 2
            self.assertEqual(inner(), 2)

        def test_exec_in_class_fails(self):
            self.assertEqual(1, 2)
        """
    ))
'''


def test_a_test_a_module_makes_with_exec_from_its_own_text_is_its_own(tmp_path):
    code, rep = run_plugin(tmp_path, EXEC_TESTS, extra="VALUE = 1\n")
    assert rep["integrity"] == [] and rep["forged"] is None, rep["integrity"]
    assert rep["outcomes"] == {
        "test_x.py::test_exec_module": "passed",
        "test_x.py::test_exec_module_fails": "failed",
        "test_x.py::ProtocolTests::test_plain": "passed",
        "test_x.py::ProtocolTests::test_exec_in_class": "passed",
        "test_x.py::ProtocolTests::test_exec_in_class_fails": "failed",
    }


@pytest.mark.parametrize(
    "how, said",
    [
        # the text the module executes changed on its way (a submission's dedent)
        (
            "import textwrap\n"
            "_d = textwrap.dedent\n"
            "def dedent(text):\n"
            "    return _d(text).replace('1, 2', '1, 1').replace('1 + 1 == 3', '1 + 2 == 3')\n"
            "textwrap.dedent = dedent\n",
            "runs code from <string>",
        ),
        # a test's function swapped for one the submission executed from text
        (
            "import sys\n"
            "ns = {}\n"
            "exec('def test_exec_in_class_fails(self):\\n    pass\\n', ns)\n"
            "def install():\n"
            "    sys.modules['test_x'].ProtocolTests.test_exec_in_class_fails.__code__ = "
            "ns['test_exec_in_class_fails'].__code__\n",
            "the __code__ of test_exec_in_class_fails was replaced",
        ),
        # the exec'd test's code replaced by another exec'd test's of the same module
        (
            "import sys\n"
            "def install():\n"
            "    c = sys.modules['test_x'].ProtocolTests\n"
            "    c.test_exec_in_class_fails.__code__ = c.test_exec_in_class.__code__\n",
            "the __code__ of test_exec_in_class_fails was replaced",
        ),
    ],
)
def test_exec_made_tests_are_guarded_like_any_other(tmp_path, how, said):
    setup = "    def setUp(self):\n        getattr(helper, 'install', lambda: None)()\n\n"
    head = "class ProtocolTests(unittest.TestCase):\n"
    source = EXEC_TESTS.replace(head, head + setup)
    code, rep = run_plugin(tmp_path, source, extra=how)
    assert any(said in what for what in rep["integrity"]), rep["integrity"]


# What bytecode's test_cfg.py does with tests/cell_free_vars_cases.py: the task's own test code
# recompiles the functions of another of the task's test files and sets their code back.
CASES = "def one():\n    return 1\n\n\ndef two():\n    return 2\n\n\nTEST_CASES = [one, two]\n"
USES_CASES = """\
import cases
import helper


def test_roundtrip():
    helper.install()
    for f in cases.TEST_CASES:
        before = f()
        f.__code__ = f.__code__.replace()
        assert f() == before


def test_after():
    assert cases.one() == 1
"""


def test_the_tasks_own_test_code_may_set_code_on_its_test_files_functions(tmp_path):
    (tmp_path / "cases.py").write_text(CASES)
    code, rep = run_plugin(
        tmp_path, USES_CASES, {"tests": ["test_x.py", "cases.py"]}, extra="def install():\n    pass\n"
    )
    assert rep["integrity"] == [] and rep["forged"] is None, rep["integrity"]
    assert code == 0 and set(rep["outcomes"].values()) == {"passed"}


@pytest.mark.parametrize(
    "how",
    [
        # the submission sets it
        "import cases\ndef install():\n    cases.one.__code__ = (lambda: 1).__code__\n",
        # from a function whose code claims to be the test file's (a name is not an identity)
        "import cases, os, types\n"
        "def _set(f, c):\n    f.__code__ = c\n"
        "_c = _set.__code__.replace(co_filename=os.path.abspath('test_x.py'))\n"
        "def install():\n    types.FunctionType(_c, globals())(cases.one, (lambda: 1).__code__)\n",
    ],
)
def test_anyone_else_setting_code_on_a_test_files_functions_is_tampering(tmp_path, how):
    (tmp_path / "cases.py").write_text(CASES)
    code, rep = run_plugin(tmp_path, USES_CASES, {"tests": ["test_x.py", "cases.py"]}, extra=how)
    assert any("the __code__ of one was replaced" in w for w in rep["integrity"]), rep["integrity"]


def test_the_tasks_own_tests_may_set_code_on_a_collected_test(tmp_path):
    """bytecode's tests/cell_free_vars_cases.py is a hidden file pytest collects too: its
    `test_freevar` is a test item, and test_cfg.py recompiles it. Set by the task's own
    test code, that is not tampering, and the item then runs the code it was given."""
    source = (
        "def test_a_recompiles():\n"
        "    test_b_target.__code__ = test_b_target.__code__.replace()\n\n"
        "def test_b_target():\n"
        "    assert True\n"
    )
    code, rep = run_plugin(tmp_path, source, extra="VALUE = 1\n")
    assert rep["integrity"] == [] and code == 0, rep["integrity"]
    assert set(rep["outcomes"].values()) == {"passed"}
