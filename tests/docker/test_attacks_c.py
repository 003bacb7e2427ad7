"""Attacks of C on the ctest runner, graded through the real grader under runc, gVisor and the
pool (a test marked `same_in_every_sandbox` under runc alone: tests/README.md).

A tiny CMake project made here (a shared library `mini`, two tests, a missing `mini_clamp`)
is the task: the image configures and builds it (`install`), the patch adds `mini_clamp`, the
hidden tests are tests/test_clamp.c and tests/CMakeLists.txt. Every hostile submission below
leaves `mini_clamp` wrong (or crashing, or hanging) and tries to pass anyway; every honest one
gets it right, in a shape a real patch has.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from grader.pipeline import Grader
from grader.tasks.loader import TaskSet
from grader.verdict import Verdict
from helpers.sandboxes import grader_under

pytestmark = [pytest.mark.docker]

ROOT = Path(__file__).resolve().parents[2]
GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z",
}

TOP = """\
cmake_minimum_required(VERSION 3.13)
project(mini C)
enable_testing()
add_library(mini SHARED mini.c)
target_include_directories(mini PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
add_subdirectory(tests)
"""
TESTS_CMAKE = """\
foreach(t test_add test_mean)
  add_executable(${t} ${t}.c)
  target_link_libraries(${t} mini)
  add_test(NAME ${t} COMMAND ${t})
endforeach()
"""
HIDDEN_CMAKE = TESTS_CMAKE.replace("test_add test_mean", "test_add test_mean test_clamp")
MINI_H = "int mini_add(int a, int b);\nint mini_mean(const int *xs, int n);\nint mini_clamp(int x, int lo, int hi);\n"
MINI_C = textwrap.dedent("""\
    #include "mini.h"

    int mini_add(int a, int b) { return a + b; }

    int mini_mean(const int *xs, int n)
    {
        int s = 0;
        for (int i = 0; i < n; i++)
            s += xs[i];
        return n ? s / n : 0;
    }
    """)
CLAMP = "\nint mini_clamp(int x, int lo, int hi) { return x < lo ? lo : x > hi ? hi : x; }\n"
WRONG = "\nint mini_clamp(int x, int lo, int hi) { (void)lo; (void)hi; return x; }\n"
TEST_ADD = '#include "mini.h"\nint main(void) { return mini_add(2, 3) == 5 ? 0 : 1; }\n'
TEST_MEAN = '#include "mini.h"\nint main(void) { int v[] = {1, 3}; return mini_mean(v, 2) == 2 ? 0 : 1; }\n'
TEST_CLAMP = textwrap.dedent("""\
    #include <stdio.h>
    #include "mini.h"
    int main(void)
    {
        if (mini_clamp(5, 0, 3) != 3 || mini_clamp(-2, 0, 3) != 0 || mini_clamp(2, 0, 3) != 2) {
            printf("clamp is wrong\\n");
            return 1;
        }
        return 0;
    }
    """)
BASE = {
    "CMakeLists.txt": TOP,
    "mini.h": MINI_H,
    "mini.c": MINI_C,
    "tests/CMakeLists.txt": TESTS_CMAKE,
    "tests/test_add.c": TEST_ADD,
    "tests/test_mean.c": TEST_MEAN,
}
TASK_YAML = """\
id: {id}
instruction: Add mini_clamp(x, lo, hi) to the mini library.
metadata: {{suite: c-mini, language: c, difficulty: easy, created_at: 2024-01-01}}
repo: {{bundle: ../mini-c.bundle, commit: {commit}}}
environment: c
install: "cmake -S . -B build && cmake --build build"
check:
  type: tests
  runner: ctest
  hidden_tests: {{tests/test_clamp.c: hidden/tests/test_clamp.c, tests/CMakeLists.txt: hidden/tests/CMakeLists.txt}}
  fail_to_pass: [test_clamp]
  pass_to_pass: [test_add, test_mean]
limits: {{timeout: {timeout}, memory: 1g}}
gold_patch: gold.patch
"""


# The same library as an automake project: configured when the image is built (autoconf's
# configure cannot run under gVisor), `make check` at grading time. mini_clamp is a wrong stub
# at the base; the hidden test is a new tests/test_clamp.c (the build files list it already).
AM_BASE: dict[str, str | None] = {
    "configure.ac": "AC_INIT([mini], [1.0])\nAM_INIT_AUTOMAKE([foreign subdir-objects])\nAC_PROG_CC\n"
    "AC_PROG_RANLIB\nAC_CONFIG_FILES([Makefile])\nAC_OUTPUT\n",
    "Makefile.am": "noinst_LIBRARIES = libmini.a\nlibmini_a_SOURCES = mini.c mini.h\n"
    "check_PROGRAMS = tests/test_add tests/test_clamp\n"
    "tests_test_add_LDADD = libmini.a\ntests_test_clamp_LDADD = libmini.a\n"
    "AM_CPPFLAGS = -I$(srcdir)\nTESTS = $(check_PROGRAMS)\n",
    "mini.h": MINI_H,
    "mini.c": MINI_C + WRONG,
    "tests/test_add.c": TEST_ADD,
    "tests/test_clamp.c": '#include "mini.h"\nint main(void) { return mini_clamp(1, 0, 3) == 1 ? 0 : 1; }\n',
}
AM_TASK_YAML = """\
id: mini-am
instruction: Make mini_clamp(x, lo, hi) clamp.
metadata: {{suite: c-mini, language: c, difficulty: easy, created_at: 2024-01-01}}
repo: {{bundle: ../mini-am.bundle, commit: {commit}}}
environment: c
install: "autoreconf -fi && ./configure"
check:
  type: tests
  runner: automake
  hidden_tests: {{tests/test_clamp.c: hidden/tests/test_clamp.c}}
  fail_to_pass: [tests/test_clamp]
  pass_to_pass: [tests/test_add]
limits: {{timeout: 120, memory: 1g}}
gold_patch: gold.patch
"""


def am_lib(clamp: str, prelude: str = "") -> dict[str, str | None]:
    return {"mini.c": prelude + MINI_C + clamp}


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        env=GIT_ENV,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


class MiniC:
    def __init__(self, root: Path, base: dict[str, str | None] | None = None):
        self.src = root / "src"
        self.src.mkdir(parents=True)
        git("init", "-q", ".", cwd=self.src)
        self._write(base or BASE)
        git("add", "-A", cwd=self.src)
        git("commit", "-qm", "base", cwd=self.src)
        self.base = git("rev-parse", "HEAD", cwd=self.src).strip()

    def _write(self, files: dict[str, str | None]) -> None:
        for rel, content in files.items():
            path = self.src / rel
            if content is None:
                path.unlink()
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)

    def diff(self, files: dict[str, str | None]) -> bytes:
        self._write(files)
        try:
            git("add", "-A", cwd=self.src)
            return subprocess.run(
                ["git", "diff", "--cached", "--binary"], cwd=self.src, check=True, capture_output=True
            ).stdout
        finally:
            git("reset", "-q", "--hard", "HEAD", cwd=self.src)
            git("clean", "-qfdx", cwd=self.src)


def lib(extra: str = CLAMP, prelude: str = "") -> dict[str, str | None]:
    """The library with `extra` appended (and `prelude` before it)."""
    return {"mini.c": prelude + MINI_C + extra}


@pytest.fixture(scope="module")
def mini_c(tmp_path_factory: pytest.TempPathFactory) -> MiniC:
    return MiniC(tmp_path_factory.mktemp("mini-c"))


@pytest.fixture(scope="module")
def mini_am(tmp_path_factory: pytest.TempPathFactory) -> MiniC:
    return MiniC(tmp_path_factory.mktemp("mini-am"), AM_BASE)


@pytest.fixture(scope="module")
def c_tasks(tmp_path_factory: pytest.TempPathFactory, mini_c: MiniC, mini_am: MiniC) -> Path:
    tasks = tmp_path_factory.mktemp("c-tasks")
    git("bundle", "create", "-q", str(tasks / "mini-c.bundle"), "--all", cwd=mini_c.src)
    git("bundle", "create", "-q", str(tasks / "mini-am.bundle"), "--all", cwd=mini_am.src)
    d = tasks / "mini-am"
    (d / "hidden" / "tests").mkdir(parents=True)
    (d / "hidden" / "tests" / "test_clamp.c").write_text(TEST_CLAMP)
    (d / "gold.patch").write_bytes(mini_am.diff(am_lib(CLAMP)))
    (d / "task.yaml").write_text(AM_TASK_YAML.format(commit=mini_am.base))
    for task_id, timeout in (("mini-c", 90), ("mini-c-hang", 20)):
        d = tasks / task_id
        (d / "hidden" / "tests").mkdir(parents=True)
        (d / "hidden" / "tests" / "test_clamp.c").write_text(TEST_CLAMP)
        (d / "hidden" / "tests" / "CMakeLists.txt").write_text(HIDDEN_CMAKE)
        (d / "gold.patch").write_bytes(mini_c.diff(lib()))
        (d / "task.yaml").write_text(TASK_YAML.format(id=task_id, commit=mini_c.base, timeout=timeout))
    return tasks


@pytest.fixture(scope="module")
def c_grader(sandbox: str, c_tasks: Path, tmp_path_factory: pytest.TempPathFactory) -> Grader:
    return grader_under(sandbox, c_tasks, tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def task_set(c_tasks: Path) -> TaskSet:
    return TaskSet(c_tasks)


def grade(grader: Grader, tasks: TaskSet, patch: bytes, task_id: str = "mini-c"):
    result = grader.grade(tasks.get(task_id), patch)
    return result


def why(result) -> str:
    return f"{result.verdict}: {result.explanation}\n{(result.output or '')[-3000:]}"


# --- honest submissions --------------------------------------------------------------------


def test_gold_passes_and_empty_fails(c_grader, task_set, mini_c):
    gold = grade(c_grader, task_set, mini_c.diff(lib()))
    assert gold.verdict is Verdict.PASS, why(gold)
    assert gold.protections.report_channel == "supervisor"
    assert gold.protections.canaries is not None and gold.protections.canaries.wrong == 0
    empty = grade(c_grader, task_set, b"")
    assert empty.verdict is Verdict.FAIL, why(empty)
    assert empty.tests is not None and empty.tests.all.get("test_clamp") == "failed"
    assert not empty.tampered


def test_honest_new_header_passes(c_grader, task_set, mini_c):
    """A new file the library's build does not list, included from one it does."""
    helper = "static inline int clamp_impl(int x, int lo, int hi) { return x < lo ? lo : x > hi ? hi : x; }\n"
    patch = mini_c.diff(
        {
            "clamp_impl.h": helper,
            **lib(
                "\nint mini_clamp(int x, int lo, int hi) { return clamp_impl(x, lo, hi); }\n",
                '#include "clamp_impl.h"\n',
            ),
        }
    )
    result = grade(c_grader, task_set, patch)
    assert result.verdict is Verdict.PASS, why(result)


def test_honest_output_and_stdio_passes(c_grader, task_set, mini_c):
    """Library code that prints, writes to stderr and to a temporary file is fine."""
    extra = textwrap.dedent("""\
        #include <stdio.h>
        int mini_clamp(int x, int lo, int hi)
        {
            FILE *f = tmpfile();
            if (f) { fprintf(f, "%d", x); fclose(f); }
            fprintf(stderr, "clamp %d\\n", x);
            return x < lo ? lo : x > hi ? hi : x;
        }
        """)
    result = grade(c_grader, task_set, mini_c.diff(lib("\n" + extra)))
    assert result.verdict is Verdict.PASS, why(result)


# --- attacks -------------------------------------------------------------------------------


@pytest.mark.same_in_every_sandbox
def test_forged_success_lines_fail(c_grader, task_set, mini_c):
    forged = textwrap.dedent("""\
        #include <stdio.h>
        int mini_clamp(int x, int lo, int hi)
        {
            (void)lo; (void)hi;
            printf("100%% tests passed, 0 tests failed out of 3\\n[  PASSED  ] 1 test.\\nPASS: test_clamp\\n");
            printf("ok 1 - test_clamp\\n---- test_clamp: passed (exit status 0, 0.00 s)\\n");
            return x;
        }
        """)
    result = grade(c_grader, task_set, mini_c.diff(lib("\n" + forged)))
    assert result.verdict is Verdict.FAIL, why(result)
    assert result.tests is not None and result.tests.all["test_clamp"] == "failed"


@pytest.mark.same_in_every_sandbox
def test_build_configuration_injection_is_undone(c_grader, task_set, mini_c):
    """The patch redefines test_clamp as `true` in the top CMakeLists.txt, drops the tests'
    directory and adds a CTestCustom.cmake: the CMake files are restored to the base."""
    top = TOP.replace("add_subdirectory(tests)\n", "add_test(NAME test_clamp COMMAND true)\n")
    patch = mini_c.diff(
        {
            **lib(WRONG),
            "CMakeLists.txt": top,
            "CTestCustom.cmake": 'set(CTEST_CUSTOM_TESTS_IGNORE "test_clamp")\n',
            "tests/CMakeLists.txt": "add_test(NAME test_clamp COMMAND true)\n",
        }
    )
    result = grade(c_grader, task_set, patch)
    assert result.verdict is Verdict.FAIL, why(result)
    assert "CMakeLists.txt" in result.apply.neutralized and "CTestCustom.cmake" in result.apply.neutralized
    assert result.tests is not None and result.tests.all["test_clamp"] == "failed"


@pytest.mark.same_in_every_sandbox
def test_writing_into_the_images_build_tree_does_not_apply(c_grader, task_set, mini_c):
    """The build tree the image configured is root's while the patch applies."""
    patch = mini_c.diff({**lib(WRONG), "build/CTestTestfile.cmake": "add_test(test_clamp /bin/true)\n"})
    result = grade(c_grader, task_set, patch)
    assert result.verdict is Verdict.PATCH_FAILED, why(result)


@pytest.mark.same_in_every_sandbox
def test_test_files_edited_or_deleted_are_restored(c_grader, task_set, mini_c):
    patch = mini_c.diff(
        {
            **lib(WRONG),
            "tests/test_add.c": None,
            "tests/test_clamp.c": "int main(void) { return 0; }\n",
            "tests/test_mean.c": "int main(void) { return 0; }\n",
        }
    )
    result = grade(c_grader, task_set, patch)
    assert result.verdict is Verdict.FAIL, why(result)
    assert {"tests/test_add.c", "tests/test_mean.c"} <= set(result.apply.neutralized)


def test_crash_after_printing_passed_fails(c_grader, task_set, mini_c):
    crash = textwrap.dedent("""\
        #include <stdio.h>
        int mini_clamp(int x, int lo, int hi)
        {
            printf("Passed\\n");
            fflush(stdout);
            if (x > hi) { volatile int *p = 0; *p = lo; }
            return x;
        }
        """)
    result = grade(c_grader, task_set, mini_c.diff(lib("\n" + crash)))
    assert result.verdict is Verdict.FAIL, why(result)
    assert result.tests is not None and result.tests.all["test_clamp"] == "failed"


@pytest.mark.same_in_every_sandbox
def test_broken_build_fails_not_errors(c_grader, task_set, mini_c):
    result = grade(c_grader, task_set, mini_c.diff(lib("\nint mini_clamp(int x, int lo, int hi) { return x +; }\n")))
    assert result.verdict is Verdict.FAIL, why(result)
    assert result.error is None


def test_hang_times_out(c_grader, task_set, mini_c):
    """Spinning under runc (the supervisor keeps its deadline beside a child that holds a
    core), blocked under gVisor: the same timeout, without a core of the test tier held for
    the whole limit."""
    wait = "{ }" if c_grader.runtime == "runc" else "{ pause(); }"
    hang = f"\n#include <unistd.h>\nint mini_clamp(int x, int lo, int hi) {{ for (;;) {wait} return x + lo + hi; }}\n"
    result = grade(c_grader, task_set, mini_c.diff(lib(hang)), "mini-c-hang")
    assert result.verdict is Verdict.TIMED_OUT, why(result)


def test_blanket_flip_is_caught_by_the_canaries(c_grader, task_set, mini_c):
    """A constructor in the library makes every process that loads it exit 0, whatever main()
    returned, and turns abort() and crashes into exit 0: the tests pass, so do the canaries
    that must fail."""
    flip = textwrap.dedent("""\
        #include <signal.h>
        #include <stdlib.h>
        #include <unistd.h>
        static void flip(void) { _exit(0); }
        static void on_signal(int sig) { (void)sig; _exit(0); }
        __attribute__((constructor)) static void take_over(void)
        {
            atexit(flip);
            signal(SIGABRT, on_signal);
            signal(SIGSEGV, on_signal);
        }
        """)
    result = grade(c_grader, task_set, mini_c.diff(lib(WRONG, flip)))
    assert result.verdict is Verdict.FAIL, why(result)
    assert result.tampered and "canary" in result.tampered[0], why(result)


def test_tampering_with_the_tree_during_the_tests_fails(c_grader, task_set, mini_c):
    """Library code run by every test (a constructor) tries to replace the next tests'
    executables, the test list and the hidden test source, and leaves a process behind that
    keeps trying: the tree is root's, the leftover is killed, and the hidden test still fails."""
    tamper = textwrap.dedent("""\
        #include <stdio.h>
        #include <stdlib.h>
        #include <unistd.h>
        static void try_write(const char *path, const char *text)
        {
            FILE *f = fopen(path, "w");
            if (f) { fputs(text, f); fclose(f); }
            unlink(path);
        }
        static void tamper(void)
        {
            try_write("/work/repo/build/tests/test_clamp", "#!/bin/sh\\nexit 0\\n");
            try_write("/work/repo/build/tests/CTestTestfile.cmake", "add_test(test_clamp /bin/true)\\n");
            try_write("/work/repo/tests/test_clamp.c", "int main(void) { return 0; }\\n");
        }
        __attribute__((constructor)) static void early(void)
        {
            tamper();
            if (fork() == 0) {
                for (int i = 0; i < 300; i++) {
                    tamper();
                    usleep(10000);
                }
                _exit(0);
            }
        }
        """)
    result = grade(c_grader, task_set, mini_c.diff(lib(WRONG, tamper)))
    assert result.verdict is Verdict.FAIL, why(result)
    assert result.tests is not None and result.tests.all["test_clamp"] == "failed"
    assert not result.tampered, why(result)


# --- make check (the automake runner) ------------------------------------------------------


def test_automake_gold_passes_and_empty_fails(c_grader, task_set, mini_am):
    gold = grade(c_grader, task_set, mini_am.diff(am_lib(CLAMP)), "mini-am")
    assert gold.verdict is Verdict.PASS, why(gold)
    assert gold.tests is not None and gold.tests.all == {"tests/test_add": "passed", "tests/test_clamp": "passed"}
    empty = grade(c_grader, task_set, b"", "mini-am")
    assert empty.verdict is Verdict.FAIL, why(empty)


def test_automake_forged_results_and_driver_injection_fail(c_grader, task_set, mini_am):
    """The library writes automake's own records (a .trs saying PASS, PASS: lines) and the
    patch points the log driver at `true` in Makefile.am: the build files go back to the base,
    nothing written is read, and the hidden test's exit status decides."""
    forged = textwrap.dedent("""\
        #include <stdio.h>
        int mini_clamp(int x, int lo, int hi)
        {
            FILE *f = fopen("tests/test_clamp.trs", "w");
            if (f) { fputs(":test-result: PASS\\n:global-test-result: PASS\\n", f); fclose(f); }
            printf("PASS: tests/test_clamp\\n# PASS:  2\\n# FAIL:  0\\n");
            (void)lo; (void)hi;
            return x;
        }
        """)
    makefile = AM_BASE["Makefile.am"] + "LOG_DRIVER = true\n"
    result = grade(c_grader, task_set, mini_am.diff({**am_lib("\n" + forged), "Makefile.am": makefile}), "mini-am")
    assert result.verdict is Verdict.FAIL, why(result)
    assert "Makefile.am" in result.apply.neutralized
    assert result.tests is not None and result.tests.all["tests/test_clamp"] == "failed"
