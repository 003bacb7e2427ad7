"""The ctest and automake runners without Docker: the task's check planned, the runner's
arguments, ctest's and automake's test lists parsed strictly, outcomes judged from exit
statuses, the canaries' link line, and the static audit's C rules (they fire on the attacks of
tests/docker/test_attacks_c.py and stay quiet on the c-real suite's gold patches)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from grader.audit_rules import c as c_rules
from grader.box import native
from grader.box.runners import automake, ctest, runner
from grader.box.runners import test_runners as runner_names
from grader.tasks import model

ROOT = Path(__file__).resolve().parents[2]


def test_registered_as_test_runners():
    assert {"ctest", "automake"} <= set(runner_names())
    assert runner("ctest") is ctest and runner("automake") is automake
    for module in (ctest, automake):
        assert module.TESTS and module.COMMAND == "optional"
        assert (module.EXIT_PASSED, module.EXIT_FAILED) == (0, 1) and 4 in module.EXIT_MEANING
        assert module.listed_files(["test_a", "tests/test_b"]) == []


def test_plan_defaults_and_canaries_beside_the_hidden_tests():
    spec = ctest.plan(
        {"fail_to_pass": ["parse_value"], "pass_to_pass": ["print_number", "cJSON_test"]},
        {"tests/parse_value.c": "d1", "tests/CMakeLists.txt": "d2", "tests/unity/x.h": "d3", "gone.c": None},
    )
    assert spec.kind == "ctest" and spec.command is None and spec.args == [] and spec.paths == []
    assert spec.canaries and spec.canary_dir == "tests"
    assert {"parse", "value", "print", "number", "json"} <= set(spec.canary_words)
    assert "test" not in spec.canary_words
    spec = ctest.plan({"command": "make -C build", "args": ["--build-dir", "out/b"], "paths": ["t1"]}, {})
    assert spec.command == "make -C build" and spec.paths == ["t1"] and spec.canary_dir == ""
    assert automake.plan({}, {"tests/t.c": "d"}).canaries is False


def test_task_model_accepts_a_ctest_check():
    check = model.TestsCheck(type="tests", runner="ctest", command="cmake --build build", fail_to_pass=["a"])
    assert check.runner == "ctest"
    with pytest.raises(ValueError):
        model.TestsCheck(type="tests", runner="ctest", pytest_args=["-x"])


@pytest.mark.parametrize(
    ("args", "want"),
    [
        ([], {"build_dir": "build", "timeout": None, "no_freeze": False, "make_args": []}),
        (["--build-dir=out/", "--timeout", "30"], {"build_dir": "out", "timeout": 30.0}),
        (["--no-freeze", "--make-arg", "V=1"], {"no_freeze": True, "make_args": ["V=1"]}),
    ],
)
def test_runner_arguments(args, want):
    got = ctest.parse_args(args)
    assert {k: got[k] for k in want} == want


@pytest.mark.parametrize(
    "args",
    [["--pass-regex", "ctest"], ["--build-dir", "../x"], ["--build-dir", "/abs"], ["--timeout", "-1"], ["--timeout"]],
)
def test_runner_arguments_refused(args):
    with pytest.raises(ValueError):
        ctest.parse_args(args)
    with pytest.raises(ValueError):
        ctest.plan({"args": args}, {})


def ctest_json(tests: list[dict]) -> bytes:
    return b"noise before\n" + json.dumps({"kind": "ctestInfo", "version": {"major": 1}, "tests": tests}).encode()


def test_ctest_list_parsed_strictly_and_ordered():
    tests = native.parse_ctest_list(
        ctest_json(
            [
                {"name": "b", "command": ["/x/b"], "properties": [{"name": "DEPENDS", "value": ["a"]}]},
                {"name": "clean", "command": ["/x/c"], "properties": [{"name": "FIXTURES_CLEANUP", "value": ["f"]}]},
                {"name": "a", "command": ["/x/a"], "properties": [{"name": "WILL_FAIL", "value": True}]},
                {"name": "setup", "command": ["/x/s"], "properties": [{"name": "FIXTURES_SETUP", "value": ["f"]}]},
                {"name": "unbuilt"},
            ]
        )
    )
    assert [t["name"] for t in tests] == ["setup", "a", "b", "unbuilt", "clean"]
    assert tests[1]["props"]["WILL_FAIL"] is True and tests[3]["command"] is None


@pytest.mark.parametrize(
    "doc",
    [
        b"not json",
        b'{"kind": "other", "tests": []}',
        ctest_json([{"name": "a", "command": ["x"]}, {"name": "a", "command": ["y"]}]),
        ctest_json([{"name": "a", "command": "x"}]),
        ctest_json([{"command": ["x"]}]),
    ],
)
def test_ctest_list_refused(doc):
    with pytest.raises(native.ListError):
        native.parse_ctest_list(doc)


def test_automake_list_names_and_refusals(tmp_path):
    rec = {"name": "t1", "command": ["./t1"], "cwd": str(tmp_path / "tests"), "env": {"A": "1", "MAKEFLAGS": "-j"}}
    (tmp_path / "tests").mkdir()
    tests = native.parse_automake_list(json.dumps(rec).encode() + b"\n", str(tmp_path))
    assert tests[0]["name"] == "tests/t1" and tests[0]["props"]["AM_ENV"] == {"A": "1"}
    with pytest.raises(native.ListError):
        native.parse_automake_list((json.dumps(rec) + "\n" + json.dumps(rec)).encode(), str(tmp_path))
    with pytest.raises(native.ListError):
        native.parse_automake_list(b'{"name": "x"}\n', str(tmp_path))


@pytest.mark.parametrize(
    ("props", "status", "out", "timed_out", "want"),
    [
        ({}, 0, b"", False, "passed"),
        ({}, 1, b"100% tests passed\n[  PASSED  ]", False, "failed"),
        ({}, -11, b"Passed", False, "failed"),
        ({}, 0, b"", True, "failed"),
        ({}, None, b"", False, "failed"),
        ({"WILL_FAIL": True}, 1, b"", False, "passed"),
        ({"WILL_FAIL": True}, -6, b"", False, "failed"),
        ({"SKIP_RETURN_CODE": 77}, 77, b"", False, "skipped"),
        ({"PASS_REGULAR_EXPRESSION": ["ok"]}, 3, b"ok", False, "failed"),
        ({"PASS_REGULAR_EXPRESSION": ["ok"]}, 0, b"ok", False, "passed"),
        ({"PASS_REGULAR_EXPRESSION": ["ok"]}, 0, b"no", False, "failed"),
        ({"FAIL_REGULAR_EXPRESSION": ["ERROR"]}, 0, b"ERROR x", False, "failed"),
        ({"AUTOMAKE": True}, 77, b"", False, "skipped"),
        ({"AUTOMAKE": True, "HARD_ERRORS": True}, 99, b"PASS: x", False, "failed"),
        ({"AUTOMAKE": True, "XFAIL": True}, 1, b"", False, "passed"),
        ({"AUTOMAKE": True, "XFAIL": True}, 0, b"", False, "failed"),
        ({"AUTOMAKE": True, "XFAIL": True}, -11, b"", False, "failed"),
    ],
)
def test_judged_from_the_exit_status(props, status, out, timed_out, want):
    assert native.judge(props, status, out, timed_out)[0] == want


def test_test_environment_drops_the_runners_and_loaders_variables():
    base = native.base_env({"PATH": "/bin", "LD_PRELOAD": "x.so", "GRADER_REPORT_FD": "3", "GTEST_OUTPUT": "xml"})
    env = native.test_env(base, {"ENVIRONMENT": ["A=1", "LD_PRELOAD=y.so"]}, "/tmp/t")
    assert env["A"] == "1" and env["TMPDIR"] == env["HOME"] == "/tmp/t"
    assert not any(k.startswith(("LD_", "GRADER_", "GTEST_")) for k in env)


def test_canary_link_line_borrows_a_hidden_tests(tmp_path):
    link = tmp_path / "CMakeFiles" / "parse_value.dir" / "link.txt"
    link.parent.mkdir(parents=True)
    link.write_text(
        "/usr/bin/cc -O2 CMakeFiles/parse_value.dir/parse_value.c.o CMakeFiles/parse_value.dir/common.c.o"
        " -o parse_value -Wl,-rpath,/work/repo/build ../libcjson.so.1.7.14 libunity.a\n"
    )
    argv = ctest.canary_link(str(link), "/b/.canary.o", "/b/canary")
    assert argv == [
        "/usr/bin/cc",
        "-Wl,--no-as-needed",
        "/b/.canary.o",
        "-O2",
        "-o",
        "/b/canary",
        "-Wl,-rpath,/work/repo/build",
        "../libcjson.so.1.7.14",
        "libunity.a",
    ]
    lib = tmp_path / "CMakeFiles" / "lib.dir" / "link.txt"
    lib.parent.mkdir(parents=True)
    lib.write_text("/usr/bin/ar qc libx.a CMakeFiles/lib.dir/x.c.o\n/usr/bin/ranlib libx.a\n")
    assert ctest.canary_link(str(lib), "o", "e") is None
    assert ctest.link_lines(str(tmp_path), "", ["parse_value"])[0] == str(link)


def test_canaries_renamed_like_the_projects_tests():
    canaries = {"expect": {"value_edge": "passed", "basic": "failed", "a": "failed"}}
    listed = [{"name": f"test_{w}", "command": ["x"], "props": {}} for w in ("a", "b", "c")]
    extra = [{"name": n, "command": ["c", "t"], "props": {}} for n in ("value_edge", "basic", "a")]
    out = ctest.add_canaries(listed, extra, canaries)
    names = {"test_a", "test_b", "test_c", "test_value_edge", "test_basic", "test_a2"}
    assert {t["name"] for t in out} == names and len(out) == 6
    assert canaries["expect"] == {"test_value_edge": "passed", "test_basic": "failed", "test_a2": "failed"}
    plain = {"expect": {"edge": "passed"}}
    out = ctest.add_canaries(
        [{"name": "parse", "command": ["x"], "props": {}}], [{"name": "edge", "command": ["c"], "props": {}}], plain
    )
    assert {t["name"] for t in out} == {"parse", "edge"} and plain["expect"] == {"edge": "passed"}


def test_protected_paths():
    from grader.box.order import ProtectSpec
    from grader.box.protect import Protection

    rules = ctest.PROTECT
    spec = ProtectSpec(
        files=["tests/test_clamp.c"],
        names=rules["names"],
        suffixes=rules["suffixes"],
        prefixes=rules["prefixes"],
        dir_suffixes=rules["dir_suffixes"],
        tests=True,
        test_modules=rules["test_modules"],
        test_dir_names=rules["test_dir_names"],
        globs=[],
    )
    base = {"tests/test_add.c": ("f",), "tests/data/in.json": ("f",), "src/x.c": ("f",)}
    p = Protection(spec, base)
    for rel in (
        "CMakeLists.txt",
        "src/CMakeLists.txt",
        "cmake/Find.cmake",
        "CTestCustom.cmake",
        "CMakePresets.json",
        "tests/test_add.c",
        "tests/data/in.json",
        "src/parse_test.cc",
    ):
        assert p.why(rel), rel
    for rel in ("src/x.c", "src/new_helper.h", "json-c.sym", "README"):
        assert p.why(rel) is None, rel
    for rel in ("Makefile.am", "tests/Makefile.in", "configure.ac", "m4/ax.m4", "Makefile", "config.status"):
        name = rel.rsplit("/", 1)[-1]
        assert name in automake.PROTECT["names"] or name.endswith(tuple(automake.PROTECT["suffixes"])), rel


# --- the static audit's C rules -------------------------------------------------------------

ATTACK_LINES = {
    "process-exit": ["    exit(0);", "  _exit(0);", "std::quick_exit(0);", "atexit(flip);", "raise(SIGKILL);"],
    "signal-handlers": ["signal(SIGABRT, on_signal);", "struct sigaction sa;", "sigaction(SIGSEGV, &sa, 0);"],
    "constructors": [
        "__attribute__((constructor)) static void take_over(void)",
        "[[gnu::constructor]] void f();",
        '__attribute__((section(".init_array"))) void (*p)(void) = f;',
    ],
    "descriptors": [
        'int fd = open("/proc/self/fd/3", O_WRONLY);',
        "dup2(fd, 1);",
        'write(1, "ok\\n", 3);',
        'freopen("/dev/null", "w", stdout);',
        'FILE *f = fopen("/dev/stdout", "w");',
    ],
    "dynamic-loading": ['setenv("LD_PRELOAD", "/tmp/x.so", 1);', 'void *h = dlopen("libx.so", RTLD_NOW);', "RTLD_NEXT"],
    "assembly": ['__asm__ volatile("syscall");', 'asm("nop");'],
    "process-control": ["if (fork() == 0) {", 'system("sh -c true");', "ptrace(PTRACE_ATTACH, pid, 0, 0);"],
    "test-framework": ["#define main real_main", "#undef assert", "Unity.TestFailures = 0;", "#define NDEBUG"],
    "runner-output": [
        'printf("100%% tests passed, 0 tests failed out of 3\\n[  PASSED  ] 1 test.\\nPASS: test_clamp\\n");',
        'printf("ok 1 - test_clamp\\n---- test_clamp: passed (exit status 0, 0.00 s)\\n");',
        'fputs(":test-result: PASS\\n:global-test-result: PASS\\n", f);',
    ],
}


@pytest.mark.parametrize(("rule", "line"), [(r, line) for r, lines in ATTACK_LINES.items() for line in lines])
def test_c_rules_fire_on_the_attacks(rule, line):
    assert rule in {f[0] for f in c_rules.findings("mini.c", [line])}, line


@pytest.mark.parametrize(
    "line",
    [
        "static int exit_code = 0;",
        "item->exit_status = 1;",
        "if (!cJSON_IsNumber(x)) return NULL;",
        "return print_value(item, buffer);",
        "size_t written = fwrite(buf, 1, n, out);",
        "// we used to call exit(1) here",
        "obj->abort_parse = true;",
        'sprintf(number_buffer, "%1.15g", d);',
    ],
)
def test_c_rules_stay_quiet_on_ordinary_lines(line):
    assert c_rules.findings("lib.c", [line]) == []
    assert c_rules.findings("README.md", ["exit(0);"]) == []


def added_lines(patch: str) -> dict[str, list[str]]:
    files: dict[str, list[str]] = {}
    current = None
    for line in patch.splitlines():
        if line.startswith("+++ "):
            current = line[6:] if line.startswith("+++ b/") else None
            files.setdefault(current or "", [])
        elif line.startswith("+") and current:
            files[current].append(line[1:])
    return files


def test_c_rules_quiet_on_the_suites_gold_patches(tmp_path):
    """Every gold patch of tasks/c-real (cut from the pinned releases; downloaded once into the
    grader's cache) gives no finding."""
    sys.path.insert(0, str(ROOT / "tasks"))
    import releases

    built = ROOT / "build" / "c-real"
    if not list(built.glob("*/gold.patch")):
        built = tmp_path / "c-real"
        releases.suite("c-real").build(built, provisional=True, force=True, log=lambda _: None)
    golds = sorted(built.glob("*/gold.patch"))
    assert len(golds) == len(releases.suite("c-real").manifest().tasks)
    found = []
    for gold in golds:
        for path, lines in added_lines(gold.read_text(errors="replace")).items():
            found += [(gold.parent.name, *f) for f in c_rules.findings(path, lines)]
    assert found == []


def test_the_images_link_outputs_are_removed_before_the_build(tmp_path):
    """A hidden test that does not compile with the patch must not run the base's executable."""
    (tmp_path / "tests" / "CMakeFiles" / "t.dir").mkdir(parents=True)
    files = {
        "libmini.so.1": b"\x7fELF\x02\x01\x01",
        "libunity.a": b"!<arch>\nx",
        "tests/test_clamp": b"\x7fELF\x02",
        "tests/CMakeFiles/t.dir/t.c.o": b"\x7fELF\x01",
        "tests/run.sh": b"#!/bin/sh\n",
        "CTestTestfile.cmake": b"add_test(x y)\n",
    }
    for rel, data in files.items():
        (tmp_path / rel).write_bytes(data)
    removed = ctest.unlink_outputs(str(tmp_path))
    assert sorted(str(Path(p).relative_to(tmp_path)) for p in removed) == [
        "libmini.so.1",
        "libunity.a",
        "tests/test_clamp",
    ]
    assert (tmp_path / "tests/CMakeFiles/t.dir/t.c.o").exists() and (tmp_path / "tests/run.sh").exists()


def test_ctests_scratch_directory_is_removed_before_the_listing(tmp_path):
    """include(CTest) makes build/Testing at configure time; in the frozen tree ctest could not
    write its LastTest.log there and its listing would end with 8 (double-conversion)."""
    (tmp_path / "Testing" / "Temporary").mkdir(parents=True)
    (tmp_path / "Testing" / "Temporary" / "LastTest.log").write_text("x")
    (tmp_path / "CTestTestfile.cmake").write_text("add_test(x y)\n")
    ctest.drop_scratch(str(tmp_path))
    assert not (tmp_path / "Testing").exists() and (tmp_path / "CTestTestfile.cmake").exists()
    (tmp_path / "Testing").symlink_to(tmp_path / "CTestTestfile.cmake")
    ctest.drop_scratch(str(tmp_path))
    assert not os.path.lexists(tmp_path / "Testing") and (tmp_path / "CTestTestfile.cmake").exists()
    ctest.drop_scratch(str(tmp_path))  # nothing there: nothing to do
