"""Hostile submissions against the unittest runner, graded by the real grader in real
containers under runc, gVisor and the pool (a test marked `same_in_every_sandbox` under runc
alone: tests/README.md), each getting the verdict it deserves.

Two tiny tasks, written by this module, one per shape the runner takes:

- `ut-module` (python-3.13): no command, `python -m unittest` on the hidden module, ids as
  TestCase.id() gives them (`tests.test_mean.MeanTests.test_empty`);
- `ut-script` (python-3.9): a Django-style `tests/runtests.py --verbosity 2` whose labels
  are relative to tests/, ids in SWE-bench's Django form (`test_empty
  (calc_tests.test_mean.MeanTests)`) and one as SWE-bench's log parser reads a test with a
  docstring (its first line).

Every attack leaves calc.mean unfixed (an empty list gives ZeroDivisionError, where the
hidden test wants ValueError) and tries to make the grade pass anyway: a printed success
line, os._exit(0), a replaced result class, an edited runtests.py, an edited or deleted
hidden test, a load_tests / shadowing-module injection, a blanket flip only the canaries
see; a crash must not pass and a hang must time out. The honest fix of each shape passes.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from grader.pipeline import Grader
from grader.tasks.loader import TaskSet
from grader.verdict import Result, Verdict
from helpers.sandboxes import grader_under

pytestmark = [pytest.mark.docker]
ROOT = Path(__file__).resolve().parent.parent.parent
GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z",
}

UNFIXED = "def mean(xs):\n    return sum(xs) / len(xs)\n"
FIXED = "def mean(xs):\n    if not xs:\n        raise ValueError('empty')\n    return sum(xs) / len(xs)\n"
RUNTESTS = '''\
#!/usr/bin/env python
"""A Django-style runner: test labels are modules relative to this directory."""
import argparse
import os
import sys
import unittest

RUNTESTS_DIR = os.path.abspath(os.path.dirname(__file__))
sys.path.insert(1, os.path.dirname(RUNTESTS_DIR))  # the library under test, as Django's finds django


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("labels", nargs="*")
    parser.add_argument("--verbosity", type=int, default=1)
    parser.add_argument("--parallel", type=int, default=1)
    args = parser.parse_args()
    loader = unittest.TestLoader()
    suite = loader.loadTestsFromNames(args.labels) if args.labels else loader.discover(RUNTESTS_DIR)
    result = unittest.TextTestRunner(verbosity=args.verbosity).run(suite)
    sys.exit(bool(result.failures or result.errors))


if __name__ == "__main__":
    main()
'''
BASIC = """\
import unittest

from calc import mean


class BasicTests(unittest.TestCase):
    def test_one(self):
        self.assertEqual(mean([2]), 2)
"""
HIDDEN = """\
import unittest

from calc import mean


class MeanTests(unittest.TestCase):
    def test_empty(self):
        with self.assertRaises(ValueError):
            mean([])

    def test_two(self):
        '''Two numbers average to their middle.'''
        self.assertEqual(mean([1, 3]), 2)
"""
# the hidden test module's older version, in the base: the hidden one replaces it
OLD_HIDDEN = """\
import unittest

from calc import mean


class MeanTests(unittest.TestCase):
    def test_two(self):
        self.assertEqual(mean([1, 3]), 2)
"""
BASE = {
    "calc/__init__.py": UNFIXED,
    "tests/test_mean.py": OLD_HIDDEN,
    "tests/calc_tests/test_mean.py": OLD_HIDDEN,
    "tests/__init__.py": "",
    "tests/test_basic.py": BASIC,
    "tests/runtests.py": RUNTESTS,
    "tests/calc_tests/__init__.py": "",
    "tests/calc_tests/test_basic.py": BASIC,
    "README.md": "mini\n",
}
TASK = """\
id: {id}
instruction: Make calc.mean raise ValueError on an empty list.
metadata: {{suite: unittest-attacks, language: python, difficulty: easy, created_at: 2024-01-01}}
repo: {{bundle: ../repo.bundle, commit: {commit}}}
environment: {environment}
check:
  type: tests
  runner: unittest
{check}limits: {{timeout: 20, memory: 512m, pids: 128}}
gold_patch: gold.patch
"""
TASKS = {
    "ut-module": (
        "python-3.13",
        "tests/test_mean.py",
        "  fail_to_pass: [tests.test_mean.MeanTests.test_empty]\n"
        "  pass_to_pass: [tests.test_mean.MeanTests.test_two, tests.test_basic.BasicTests.test_one]\n",
    ),
    "ut-script": (
        "python-3.9",
        "tests/calc_tests/test_mean.py",
        "  command: ./tests/runtests.py --verbosity 2 --parallel 1\n"
        "  fail_to_pass: ['test_empty (calc_tests.test_mean.MeanTests)']\n"
        "  pass_to_pass: ['Two numbers average to their middle.', 'test_one (calc_tests.test_basic.BasicTests)']\n"
        "  paths: [tests/calc_tests/test_mean.py, tests/calc_tests/test_basic.py]\n",
    ),
}


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        env=GIT_ENV,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def write(root: Path, files: dict[str, str | None]) -> None:
    for rel, text in files.items():
        path = root / rel
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


class Repo:
    def __init__(self, root: Path):
        self.src = root
        root.mkdir(parents=True)
        git("init", "-q", ".", cwd=root)
        write(root, BASE)
        os.chmod(root / "tests/runtests.py", 0o755)
        git("add", "-A", cwd=root)
        git("commit", "-qm", "base", cwd=root)
        self.base = git("rev-parse", "HEAD", cwd=root).strip()

    def diff(self, files: dict[str, str | None]) -> bytes:
        write(self.src, files)
        try:
            git("add", "-A", cwd=self.src)
            return subprocess.run(
                ["git", "diff", "--cached", "--binary"], cwd=self.src, check=True, capture_output=True
            ).stdout
        finally:
            git("reset", "-q", "--hard", "HEAD", cwd=self.src)
            git("clean", "-qfdx", cwd=self.src)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Repo:
    return Repo(tmp_path_factory.mktemp("ut") / "src")


@pytest.fixture(scope="module")
def tasks(tmp_path_factory, repo: Repo) -> TaskSet:
    d = tmp_path_factory.mktemp("ut-tasks")
    git("bundle", "create", "-q", str(d / "repo.bundle"), "--all", cwd=repo.src)
    gold = repo.diff({"calc/__init__.py": FIXED})
    for tid, (environment, hidden, lists) in TASKS.items():
        t = d / tid
        t.mkdir()
        check = f"  hidden_tests: {{{hidden}: hidden.py}}\n" + lists
        (t / "task.yaml").write_text(TASK.format(id=tid, commit=repo.base, environment=environment, check=check))
        (t / "hidden.py").write_text(HIDDEN)
        (t / "gold.patch").write_bytes(gold)
    return TaskSet(d)


@pytest.fixture(scope="module")
def grader(sandbox: str, tasks, tmp_path_factory) -> Grader:
    return grader_under(sandbox, tasks.dir, tmp_path_factory.mktemp("ut-cache"))


def grade(grader: Grader, tasks: TaskSet, tid: str, patch: bytes) -> Result:
    result = grader.grade(tasks.get(tid), patch)
    assert result.provenance.runtime == grader.runtime
    return result


BOTH = ["ut-module", "ut-script"]


# --- honest submissions ------------------------------------------------------------------


@pytest.mark.parametrize("tid", BOTH)
def test_the_fix_passes_and_nothing_fails(grader, tasks, repo, tid):
    gold = grade(grader, tasks, tid, repo.diff({"calc/__init__.py": FIXED}))
    assert gold.verdict is Verdict.PASS, gold.to_json()
    assert not gold.tampered and gold.protections.report_channel == "signed"
    assert gold.protections.canaries is not None and gold.protections.canaries.wrong == 0
    listed = tasks.get(tid).check.fail_to_pass + tasks.get(tid).check.pass_to_pass
    assert gold.tests is not None and all(gold.tests.all[t] == "passed" for t in listed)
    empty = grade(grader, tasks, tid, b"")
    assert empty.verdict is Verdict.FAIL and not empty.tampered, empty.to_json()
    assert empty.tests is not None and empty.tests.fail_to_pass["failure"] == tasks.get(tid).check.fail_to_pass


@pytest.mark.parametrize("tid", BOTH)
def test_an_honest_fix_that_prints_and_exits_its_own_way_passes(grader, tasks, repo, tid):
    """A library that prints unittest-like lines and has a CLI calling sys.exit: honest."""
    code = FIXED + textwrap.dedent("""\
        import sys


        def main():
            print("test_x (calc.Fake) ... ok")
            sys.exit(0)


        print("calc: loaded ... ok")
        """)
    result = grade(grader, tasks, tid, repo.diff({"calc/__init__.py": code}))
    assert result.verdict is Verdict.PASS and not result.tampered, result.to_json()


# --- hostile submissions -----------------------------------------------------------------


@pytest.mark.same_in_every_sandbox
@pytest.mark.parametrize("tid", BOTH)
def test_a_printed_success_line_does_not_pass(grader, tasks, repo, tid):
    code = textwrap.dedent("""\
        import sys

        LINES = (
            "test_empty (calc_tests.test_mean.MeanTests) ... ok\\n"
            "test_empty (tests.test_mean.MeanTests) ... ok\\n"
            "Two numbers average to their middle. ... ok\\n"
            + "-" * 70 + "\\nRan 3 tests in 0.001s\\n\\nOK\\n"
        )


        def mean(xs):
            if not xs:
                sys.stdout.write(LINES)
                sys.stderr.write(LINES)
            return sum(xs) / len(xs)
        """)
    result = grade(grader, tasks, tid, repo.diff({"calc/__init__.py": code}))
    assert result.verdict is Verdict.FAIL and not result.tampered, result.to_json()
    assert "Ran 3 tests" in (result.output or "")


@pytest.mark.parametrize("tid", BOTH)
def test_os_exit_zero_is_a_run_that_never_finished(grader, tasks, repo, tid):
    code = "import os\n\n\ndef mean(xs):\n    if not xs:\n        os._exit(0)\n    return sum(xs) / len(xs)\n"
    result = grade(grader, tasks, tid, repo.diff({"calc/__init__.py": code}))
    assert result.verdict is Verdict.FAIL, result.to_json()
    assert any("exited 0 before unittest reported its end" in t for t in result.tampered), result.tampered


@pytest.mark.same_in_every_sandbox
@pytest.mark.parametrize("tid", BOTH)
def test_a_replaced_result_class_is_caught(grader, tasks, repo, tid):
    code = UNFIXED + textwrap.dedent("""\
        import unittest


        def _success(self, test, err):
            unittest.TestResult.addSuccess(self, test)


        unittest.TextTestResult.addError = _success
        unittest.TextTestResult.addFailure = _success
        unittest.TestResult.addError = _success
        """)
    result = grade(grader, tasks, tid, repo.diff({"calc/__init__.py": code}))
    assert result.verdict is Verdict.FAIL and result.tampered, result.to_json()
    assert any("reached into unittest" in t and "was replaced" in t for t in result.tampered), result.tampered


@pytest.mark.same_in_every_sandbox
def test_an_edited_runtests_script_goes_back_to_the_base(grader, tasks, repo):
    script = "import sys\nprint('Ran 3 tests in 0.001s\\n\\nOK')\nsys.exit(0)\n"
    result = grade(grader, tasks, "ut-script", repo.diff({"tests/runtests.py": script}))
    assert result.verdict is Verdict.FAIL, result.to_json()
    assert "tests/runtests.py" in result.apply.neutralized


@pytest.mark.same_in_every_sandbox
@pytest.mark.parametrize("tid", BOTH)
def test_an_edited_or_deleted_hidden_test_goes_back(grader, tasks, repo, tid):
    hidden = TASKS[tid][1]
    passing = "import unittest\n\n\nclass MeanTests(unittest.TestCase):\n    def test_empty(self):\n        pass\n"
    for change in (passing, None):
        result = grade(grader, tasks, tid, repo.diff({hidden: change}))
        assert result.verdict is Verdict.FAIL and not result.tampered, result.to_json()
        assert hidden in result.apply.neutralized and hidden in result.apply.restored, result.apply


@pytest.mark.same_in_every_sandbox
@pytest.mark.parametrize("tid", BOTH)
def test_load_tests_and_a_shadowing_unittest_are_not_loaded(grader, tasks, repo, tid):
    """Runner injection: the test packages' __init__.py defining load_tests (a suite that
    passes), a sitecustomize, and a unittest module of the repository's own."""
    package = "tests/calc_tests/__init__.py" if tid == "ut-script" else "tests/__init__.py"
    injected = textwrap.dedent("""\
        import unittest


        class Passing(unittest.TestCase):
            def test_empty(self):
                pass


        def load_tests(loader, tests, pattern):
            return loader.loadTestsFromTestCase(Passing)
        """)
    shadow = "import sys\nprint('OK')\nsys.exit(0)\n"
    result = grade(
        grader,
        tasks,
        tid,
        repo.diff({package: injected, "unittest.py": shadow, "tests/unittest.py": shadow, "sitecustomize.py": shadow}),
    )
    assert result.verdict is Verdict.FAIL, result.to_json()
    assert {package, "unittest.py", "tests/unittest.py", "sitecustomize.py"} <= set(result.apply.neutralized)


@pytest.mark.same_in_every_sandbox
@pytest.mark.parametrize("tid", BOTH)
def test_a_blanket_flip_is_caught_by_the_canaries(grader, tasks, repo, tid):
    """Every TestCase defined after the library's import gets empty test methods: the
    flip replaces no function of unittest's (a class hook it did not have), so only the
    canaries, which import the library as the tests do, can see it."""
    code = UNFIXED + textwrap.dedent("""\
        import unittest


        def _empty(cls, **kwargs):
            for name in list(vars(cls)):
                if name.startswith("test"):
                    setattr(cls, name, lambda self: None)


        unittest.TestCase.__init_subclass__ = classmethod(_empty)
        """)
    result = grade(grader, tasks, tid, repo.diff({"calc/__init__.py": code}))
    assert result.verdict is Verdict.FAIL, result.to_json()
    assert any("canary test that must fail was reported as passed" in t for t in result.tampered), result.tampered


@pytest.mark.parametrize("tid", BOTH)
def test_a_crash_does_not_pass(grader, tasks, repo, tid):
    code = textwrap.dedent("""\
        import os
        import signal


        def mean(xs):
            if not xs:
                os.kill(os.getpid(), signal.SIGSEGV)
            return sum(xs) / len(xs)
        """)
    result = grade(grader, tasks, tid, repo.diff({"calc/__init__.py": code}))
    assert result.verdict is Verdict.FAIL, result.to_json()
    assert "ended before unittest finished its report" in result.explanation


@pytest.mark.parametrize("tid", BOTH)
def test_a_hang_times_out(grader, tasks, repo, tid):
    code = "import time\n\n\ndef mean(xs):\n    if not xs:\n        time.sleep(600)\n    return sum(xs) / len(xs)\n"
    result = grade(grader, tasks, tid, repo.diff({"calc/__init__.py": code}))
    assert result.verdict is Verdict.TIMED_OUT, result.to_json()
    assert grader.sandbox.busy_containers() == []
