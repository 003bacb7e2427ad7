"""The static audit reads each language's files with that language's rules (grader/audit_rules/),
through the one entry the grader calls (grader.audit.audit_patch): a hostile line of Go,
JavaScript, Rust, Java or C is named, an honest fix in each is not, and Python's rules keep
reading Python files and the files no language claims."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.audit import audit_patch
from grader.tasks.loader import TaskSet

ROOT = Path(__file__).resolve().parents[2]


def added(path: str, *lines: str) -> bytes:
    """A patch that creates `path` with `lines`."""
    body = "".join(f"+{line}\n" for line in lines)
    return (f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n{body}").encode()


def rules(patch: bytes, language: str = "python") -> set[str]:
    return {f.rule for f in audit_patch(patch, language)}


HOSTILE = [
    # Go: the testing package's internals through linkname; a process exit from library code
    ("stats.go", ["//go:linkname tRunner testing.tRunner"]),
    ("stats.go", ["\tos.Exit(0)"]),
    # JavaScript: the test runner's reporter bent from library code; a process exit at load
    ("index.js", ["process.exit(0);"]),
    ("lib/util.ts", ["require('node:test').mock.method(process, 'exitCode');"]),
    # Rust: a process exit from library code; a line that imitates libtest's result
    ("src/lib.rs", ["    std::process::exit(0);"]),
    ("src/lib.rs", ['    println!("test result: ok. 3 passed; 0 failed");']),
    # Java: System.exit from main code; deep reflection into JUnit's engine
    ("src/main/java/stats/Stats.java", ["        System.exit(0);"]),
    ("src/main/java/stats/Stats.java", ['        Class.forName("org.junit.platform.launcher.core.LauncherFactory");']),
    # C: exit from the library; a constructor run before main
    ("stats.c", ["    _exit(0);"]),
    ("stats.c", ["__attribute__((constructor)) static void early(void) { }"]),
]


@pytest.mark.parametrize(("path", "lines"), HOSTILE, ids=[f"{p}:{ls[0].strip()[:30]}" for p, ls in HOSTILE])
def test_a_hostile_line_of_each_language_is_named(path, lines):
    assert rules(added(path, *lines)), f"no finding for {lines!r} in {path}"


@pytest.mark.parametrize(
    ("language", "path", "rule"),
    [
        ("go", "go.mod", "runner-files"),
        ("go", "calc_test.go", "runner-files"),
        ("go", "hook.c", "native-code"),
        ("javascript", "node_modules/tape/index.js", "installed-packages"),
        ("typescript", ".mocharc.yml", "runner-files"),
        ("rust", "build.rs", "build-time-code"),
        ("java", "pom.xml", "runner-files"),
        ("java", "src/test/java/stats/MedianTest.java", "runner-files"),
        ("python", "conftest.py", "runner-files"),
        ("go", "conftest.py", "runner-files"),
    ],
)
def test_what_a_toolchain_reads_by_itself_is_named_by_its_path(language, path, rule):
    assert rule in rules(added(path, "x"), language)


def test_path_rules_are_the_task_languages():
    # a C project's source is its own; a Go module's .c file is cgo's
    assert "native-code" not in rules(added("stats.c", "int x;"), "c")
    assert "native-code" not in rules(added("numpy/core/src/x.c", "int x;"), "python")
    # a Python task's tests/ is not a JavaScript test directory
    assert not rules(added("tests/helpers.js", "module.exports = {};"), "python")


def test_honest_fixes_in_every_language_are_quiet():
    """The language examples' gold patches: the same fix written as each language's
    projects write it."""
    tasks = TaskSet(ROOT / "tasks" / "languages")
    assert {t.metadata.language for t in tasks} >= {"go", "javascript", "rust", "java", "c", "python"}
    for task in tasks:
        assert audit_patch(task.gold_patch_text() or b"", task.metadata.language) == [], task.id


def test_each_language_is_read_by_its_own_rules():
    # Python's rules do not read a Go file: os._exit is Python's; Go's own exit is named
    assert not rules(added("main.go", "\t// see os._exit in the Python port"))
    assert "process-exit" in rules(added("tool.py", "os._exit(0)"))
    # a file no language claims is read by Python's rules, as before
    assert rules(added("scripts/run.sh", "python -c 'import os; os._exit(0)'"))
    # a Python task's test directory is not a JavaScript test file
    assert not rules(added("tests/test_median.py", "def test_even():", "    assert True"))
