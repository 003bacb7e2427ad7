"""The junit runner's pure parts (grader/box/runners/junit.py), without Docker or a JDK: its
plan (what it runs, the forms of the ids, where the canaries go), what it protects, the
class files it reads, which main sources it recompiles, how it answers the lists' ids, how
it takes the canaries back out of the exit status and the output, the canary class it
writes, the reporter's launcher, and the static audit's rules for Java (grader/audit_rules/
java.py) on the attacks of tests/docker/test_attacks_java.py and the maven-real suite's gold
patches. The run itself is tests/docker/test_attacks_java.py's."""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import helpers.java_mini as jm
from grader.audit_rules import java as rules
from grader.box import runners
from grader.box.order import CheckSpec, Order, ProtectSpec
from grader.box.protect import Protection
from grader.box.runners import junit
from grader.box.tree import Tree
from grader.tasks import model

ROOT = Path(__file__).resolve().parents[2]
REPORTER = ROOT / "grader" / "box" / "reporters" / "java"
HIDDEN = {
    "src/test/java/org/x/FooTest.java": "d1",
    "src/test/java/org/x/AbstractHelperTest.java": "d2",
    "src/test/resources/org/x/data.txt": "d3",
    "src/test/java/org/x/GoneTest.java": None,
}


def plan(hidden=None, **check):
    return junit.plan({"type": "tests", "runner": "junit", **check}, HIDDEN if hidden is None else hidden)


# --- the plan ------------------------------------------------------------------------------


def test_the_runner_is_registered_and_takes_no_command():
    assert "junit" in runners.test_runners()
    assert junit.TESTS and junit.COMMAND == "none" and junit.DECIDED_BY == "test report"
    assert (junit.EXIT_PASSED, junit.EXIT_FAILED) == (0, 1) and junit.EXIT_MAIN in junit.EXIT_MEANING
    model.TestsCheck(type="tests", runner="junit", paths=["org.x.FooTest"], fail_to_pass=["org.x.FooTest.a"])
    with pytest.raises(ValueError, match="builds its own command"):
        model.TestsCheck(type="tests", runner="junit", command="junit-run")


def test_the_paths_default_to_the_hidden_test_sources_and_the_listed_classes():
    spec = plan(fail_to_pass=["org.x.FooTest.a"], pass_to_pass=["org.y.BarTest.b[1]", "org.y.Baz$Inner.c"])
    assert spec.kind == "junit"
    assert spec.paths == [
        "src/test/java/org/x/AbstractHelperTest.java",
        "src/test/java/org/x/FooTest.java",
        "src/test/java/org/y/BarTest.java",
        "src/test/java/org/y/Baz.java",
    ]
    assert spec.canaries and spec.canary_dir == "src/test/java/org/x"
    assert spec.canary_sources == ["src/test/java/org/x/FooTest.java"]  # the one the lists name
    assert {"foo", "bar", "inner"} <= set(spec.canary_words) and "test" not in spec.canary_words


def test_paths_may_be_sources_or_class_names_and_nothing_else():
    spec = plan(paths=["org.x.FooTest", "src/test/java/org/x/OtherTest.java"])
    assert spec.paths == ["src/test/java/org/x/FooTest.java", "src/test/java/org/x/OtherTest.java"]
    for bad in ["../etc/passwd.java", "src/main/java/org/x/Foo.java", "-Dx=y", "org.x.Foo Test"]:
        with pytest.raises(ValueError):
            plan(paths=[bad])
    with pytest.raises(ValueError, match="needs paths"):
        plan(hidden={})


def test_args_are_the_runners_own_and_the_lists_odd_forms_travel_with_them():
    spec = plan(
        args=["--jvm-arg=-Xss4m", "--encoding=ISO-8859-1"],
        fail_to_pass=["org.x.FooTest#a", "org.x.FooTest"],
        pass_to_pass=["org.x.FooTest.b", "org.x.FooTest.c[2]"],
    )
    assert spec.args == [
        "--grader-id=org.x.FooTest",
        "--grader-id=org.x.FooTest#a",
        "--jvm-arg=-Xss4m",
        "--encoding=ISO-8859-1",
    ]
    assert junit.parse_args(spec.args) == (["org.x.FooTest", "org.x.FooTest#a"], ["-Xss4m"], "ISO-8859-1")
    with pytest.raises(ValueError, match="unknown junit runner argument"):
        plan(args=["--select-class=org.x.Evil"])


def test_ids_name_their_class_and_file():
    assert junit.class_of("org.x.FooTest.a") == ("org.x.FooTest", "a")
    assert junit.class_of("org.x.FooTest.a[3]") == ("org.x.FooTest", "a[3]")
    assert junit.class_of("org.x.FooTest.a(java.lang.String)") == ("org.x.FooTest", "a(java.lang.String)")
    assert junit.class_of("org.x.FooTest#a") == ("org.x.FooTest", "a")
    assert junit.class_of("org.x.FooTest") == ("org.x.FooTest", "")
    assert junit.class_of("org.x.Outer$Inner.m") == ("org.x.Outer$Inner", "m")
    assert junit.listed_files(["org.x.Outer$Inner.m", "org.x.FooTest#a", "org.y.BarTest"]) == [
        "src/test/java/org/x/FooTest.java",
        "src/test/java/org/x/Outer.java",
        "src/test/java/org/y/BarTest.java",
    ]


def test_what_a_patch_may_not_change():
    spec = ProtectSpec(
        files=["src/test/java/org/x/FooTest.java"],
        names=junit.PROTECT["names"],
        suffixes=junit.PROTECT["suffixes"],
        prefixes=junit.PROTECT["prefixes"],
        dir_suffixes=junit.PROTECT["dir_suffixes"],
        tests=True,
        test_modules=junit.PROTECT["test_modules"],
        test_dir_names=junit.PROTECT["test_dir_names"],
        globs=[],
    )
    p = Protection(spec, {})
    for rel in [
        "pom.xml",
        "sub/build.gradle.kts",
        ".mvn/jvm.config",
        "lib/x.jar",
        "src/main/resources/x/Y.class",
        "src/main/resources/junit-platform.properties",
        "src/main/resources/META-INF/services/org.junit.jupiter.api.extension.Extension",
        "src/main/resources/META-INF/services/org.junit.platform.launcher.TestExecutionListener",
        "src/main/java/module-info.java",
        "src/test/java/org/y/BarTests.java",
        "src/test/java/org/y/TestBar.java",
    ]:
        assert p.why(rel), rel
    for rel in ["src/main/java/org/x/Foo.java", "README.md", "src/main/resources/org/x/rules.txt"]:
        assert p.why(rel) is None, rel


# --- class files ---------------------------------------------------------------------------


def class_file(this: str, source: str | None, *, fields: int = 1) -> bytes:
    """A minimal class file: this_class, java/lang/Object, `fields` fields with one attribute
    each, a SourceFile attribute (or a Deprecated one)."""
    pool: list[bytes] = []

    def utf8(s: str) -> int:
        b = s.encode()
        pool.append(b"\x01" + struct.pack(">H", len(b)) + b)
        return len(pool)

    def cls(name: str) -> int:
        i = utf8(name)
        pool.append(b"\x07" + struct.pack(">H", i))
        return len(pool)

    this_i, super_i = cls(this), cls("java/lang/Object")
    pool.append(b"\x06" + struct.pack(">d", 1.5))  # a double takes two entries
    pool.append(b"")
    attr_name = utf8("SourceFile" if source else "Deprecated")
    value = utf8(source or "x")
    field_name, field_desc, const = utf8("f"), utf8("I"), utf8("ConstantValue")
    count = len(pool) + 1
    out = b"\xca\xfe\xba\xbe" + struct.pack(">HHH", 0, 65, count) + b"".join(pool)
    out += struct.pack(">HHHH", 0x21, this_i, super_i, 0)
    out += struct.pack(">H", fields)
    for _ in range(fields):
        out += struct.pack(">HHHH", 0, field_name, field_desc, 1) + struct.pack(">HIH", const, 2, 1)
    out += struct.pack(">H", 0)  # methods
    out += struct.pack(">H", 1) + struct.pack(">HIH", attr_name, 2, value)
    return out


def test_a_class_file_names_its_source():
    assert junit.class_source(class_file("org/x/Foo$1", "Foo.java")) == "org/x/Foo.java"
    assert junit.class_source(class_file("Top", "Top.java", fields=0)) == "Top.java"
    assert junit.class_source(class_file("org/x/Foo", None)) is None
    assert junit.class_source(b"not a class") is None
    assert junit.class_source(class_file("org/x/Foo", "Foo.java")[:40]) is None


def test_class_sources_walks_a_directory(tmp_path):
    (tmp_path / "org/x").mkdir(parents=True)
    (tmp_path / "org/x/Foo.class").write_bytes(class_file("org/x/Foo", "Foo.java"))
    (tmp_path / "org/x/Other.class").write_bytes(class_file("org/x/Other", "Foo.java"))
    (tmp_path / "org/x/rules.txt").write_text("x")
    assert junit.class_sources(str(tmp_path)) == {
        "org/x/Foo.class": "org/x/Foo.java",
        "org/x/Other.class": "org/x/Foo.java",
    }


# --- what is recompiled ----------------------------------------------------------------------------


def test_comments_and_literals_name_no_type():
    src = b'/** class Fake */ class Real { String s = "class Str"; char c = \'"\'; // enum Gone\n record Rec() {} }'
    assert junit.DECLARED.findall(junit.code(src)) == [b"Real", b"Rec"]
    assert b"Str" not in junit.identifiers(src) and b"Fake" not in junit.identifiers(src)


def test_the_sources_that_name_a_changed_type_are_recompiled_transitively():
    sources = {
        "src/main/java/p/A.java": b"package p; public class A { public static final int N = 1; }",
        "src/main/java/p/B.java": b"package p; class B extends A {}",
        "src/main/java/p/C.java": b"package p; class C { int n = B.N; }",  # A's constant, through B
        "src/main/java/p/D.java": b'package p; class D { /* A */ String s = "A"; }',
        "src/main/java/p/E.java": b"package p; class E {}",
    }
    names = {"src/main/java/p/A.java": {b"A"}}
    assert junit.dependents(sources, {"src/main/java/p/A.java"}, names) == {
        "src/main/java/p/A.java",
        "src/main/java/p/B.java",
        "src/main/java/p/C.java",
    }
    # a deleted source: whatever still names it is recompiled (and fails to compile if it uses it)
    names = {"src/main/java/p/Gone.java": {b"Gone", b"Helper"}}
    sources["src/main/java/p/E.java"] = b"package p; class E { Helper h; }"
    assert junit.dependents(sources, {"src/main/java/p/Gone.java"}, names) == {"src/main/java/p/E.java"}


def test_a_source_defines_its_file_its_types_and_what_the_base_compiled_from_it():
    base = {
        "p/A.class": "p/A.java",
        "p/A$Inner.class": "p/A.java",
        "p/A$1.class": "p/A.java",
        "p/Extra.class": "p/A.java",
    }
    names = junit.defined_names("src/main/java/p/A.java", b"class A { enum Mode {} }", base)
    assert names == {b"A", b"Mode", b"Inner", b"Extra"}
    assert junit.defined_names("src/main/java/p/New.java", None, base) == {b"New"}


# --- the report ------------------------------------------------------------------------------------


def test_the_lists_odd_forms_are_answered():
    outcomes = {
        "p.ATest.a": "passed",
        "p.ATest.b[1]": "passed",
        "p.ATest.b[2]": "failed",
        "p.ATest$In.c": "passed",
        "p.BTest.d": "skipped",
        "p.CTest.e": "passed",
    }
    junit.answer(outcomes, ["p.ATest#a", "p.ATest", "p.BTest", "p.CTest", "p.DTest", "p.CTest.e"])
    assert outcomes["p.ATest#a"] == "passed" and "p.ATest.a" not in outcomes
    assert outcomes["p.ATest"] == "failed"  # b[2] failed
    assert outcomes["p.BTest"] == "skipped" and outcomes["p.CTest"] == "passed"
    assert "p.DTest" not in outcomes  # nothing ran: not passed


def test_the_canaries_failures_leave_the_exit_status():
    canaries = {"p.KTest.x", "p.KTest.y"}
    end = {"t": "end", "exit": 1}
    only_canaries = {"end": end, "outcomes": {"p.ATest.a": "passed", "p.KTest.x": "failed", "p.KTest.y": "passed"}}
    assert junit.without_canaries(1, only_canaries, canaries) == 0
    real = {"end": end, "outcomes": {"p.ATest.a": "failed", "p.KTest.x": "failed"}}
    assert junit.without_canaries(1, real, canaries) == 1
    assert junit.without_canaries(0, {"end": {"t": "end", "exit": 0}, "outcomes": {}}, canaries) == 0
    # a status the listener did not say is left as it is: the host sees the disagreement
    assert (
        junit.without_canaries(1, {"end": {"t": "end", "exit": 0}, "outcomes": {"p.KTest.x": "failed"}}, canaries) == 1
    )
    assert junit.without_canaries(1, {**only_canaries, "forged": "line 3"}, canaries) == 1


TREE_OUTPUT = """\
calc ready
╷
└─ JUnit Jupiter ✔
   ├─ SplitValuesTest ✔
   │  ├─ testEmptyOrder() ✔
   │  └─ testRoundCase() ✘ expected: <3> but was: <4>
   ├─ FooTest ✔
   │  ├─ works() ✔
   │  └─ breaks() ✘ expected: <1> but was: <2>
   └─ BarTest ✔
      └─ fine() ✔

Failures (2):
  JUnit Jupiter:SplitValuesTest:testRoundCase()
    MethodSource [className = 'p.SplitValuesTest', methodName = 'testRoundCase', methodParameterTypes = '']
    => org.opentest4j.AssertionFailedError: expected: <3> but was: <4>
       p.SplitValuesTest.testRoundCase(SplitValuesTest.java:12)

  JUnit Jupiter:FooTest:breaks()
    MethodSource [className = 'p.FooTest', methodName = 'breaks', methodParameterTypes = '']
    => org.opentest4j.AssertionFailedError: expected: <1> but was: <2>
       p.FooTest.breaks(FooTest.java:9)

Test run finished after 60 ms
[         3 containers found      ]
[         4 tests successful      ]
"""


def test_the_output_names_no_canary_and_no_count():
    canaries = {
        "class": "SplitValuesTest",
        "expect": {"p.SplitValuesTest.testEmptyOrder": "passed", "p.SplitValuesTest.testRoundCase": "failed"},
    }
    out = junit.hide_canaries(TREE_OUTPUT, canaries)
    assert "SplitValues" not in out and "testRoundCase" not in out and "testEmptyOrder" not in out
    assert "expected: <3>" not in out and "Failures (" not in out and "tests successful" not in out
    assert "breaks() ✘ expected: <1> but was: <2>" in out and "p.FooTest.breaks(FooTest.java:9)" in out
    assert "   └─ BarTest ✔" in out and "      └─ fine() ✔" in out and "   ├─ FooTest ✔" in out
    assert "calc ready" in out and "  JUnit Jupiter:FooTest:breaks()" in out
    assert junit.hide_canaries(TREE_OUTPUT, None) == TREE_OUTPUT


# --- canaries --------------------------------------------------------------------------------------


class FakeTree:
    def __init__(self, files: dict[str, bytes]):
        self.files = dict(files)
        self.modes: dict[str, tuple[int, tuple[int, int]]] = {}

    def read(self, rel, limit=None):
        return self.files.get(rel)

    def lstat(self, rel):
        return os.stat(__file__) if rel in self.files else None

    def write(self, rel, data, *, mode, owner):
        self.files[rel] = data
        self.modes[rel] = (mode, owner)


def order_for(check: CheckSpec) -> Order:
    protect = ProtectSpec([], [], [], [], [], True, [], [], [])
    return Order(
        repo="/work/repo",
        patch="/p",
        touched=[],
        hidden_dir="/h",
        uid=1000,
        gid=1000,
        deadline=60.0,
        output_limit=1000,
        report_limit=1000,
        apply_chain=[],
        protect=protect,
        pycache="/c",
        check=check,
        env={},
    )


def test_the_canary_class_sits_in_the_hidden_tests_package_and_looks_like_them():
    spec = plan(hidden={jm.HIDDEN_PATH: "d"}, paths=[jm.HIDDEN_PATH], fail_to_pass=jm.F2P, pass_to_pass=jm.P2P)
    tree = FakeTree({jm.HIDDEN_PATH: jm.HIDDEN_TEST.encode()})
    canaries = junit.make_canaries(order_for(spec), tree)
    assert canaries is not None and "expect" in canaries
    rel, cls = canaries["path"], canaries["class"]
    assert rel == f"src/test/java/calc/{cls}.java" and cls.endswith("Test") and cls[0].isupper()
    data = tree.files[rel]
    assert tree.modes[rel] == (0o444, (0, 0)) and hashlib.sha256(data).hexdigest() == canaries["digest"]
    text = data.decode()
    assert text.startswith("package calc;\n") and "import org.junit.jupiter.params.ParameterizedTest;" in text
    expect = canaries["expect"]
    assert {"passed", "failed"} == set(expect.values()) and 4 <= len(expect) <= 6
    for tid in expect:
        assert tid.startswith(f"calc.{cls}.") and f"void {tid.rsplit('.', 1)[1]}()" in text
    # MeanTest's methods do not start with "test": neither do the canaries'
    assert not any(tid.rsplit(".", 1)[1].startswith("test") for tid in expect)
    assert text.count("@org.junit.jupiter.api.Test") == len(expect)


def test_no_canaries_when_turned_off_or_outside_the_layout():
    assert junit.make_canaries(order_for(plan(canaries=False)), FakeTree({})) is None
    odd = CheckSpec(kind="junit", paths=["x"], canaries=True, canary_dir="tests/x")
    assert "skipped" in junit.make_canaries(order_for(odd), FakeTree({}))


# --- the test tree goes back to the base, and becomes root's ------------------------------------------


def test_the_test_tree_goes_back_to_the_base_but_the_hidden_tests(tmp_path):
    repo = tmp_path / "repo"
    files = {
        "src/test/java/p/ATest.java": b"class ATest {}",
        "src/test/java/p/Helper.java": b"class Helper {}",
        "src/test/resources/META-INF/services/x.Y": b"p.Z\n",
        "src/main/java/p/A.java": b"class A {}",
    }
    for rel, data in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(data)
    order = order_for(CheckSpec(kind="junit"))
    order.repo, order.uid, order.gid = str(repo), os.getuid(), os.getgid()
    tree = Tree(str(repo), os.getuid(), os.getgid())
    junit.before_patch(order, tree)
    (repo / "src/test/java/p/Helper.java").write_bytes(b"class Helper { static { System.exit(0); } }")
    (repo / "src/test/resources/META-INF/services/x.Y").unlink()
    (repo / "src/test/resources/META-INF/services/org.junit.platform.launcher.TestExecutionListener").write_text(
        "p.L\n"
    )
    (repo / "src/test/java/p/NewTest.java").write_bytes(b"hidden")
    (repo / "src/main/java/p/A.java").write_bytes(b"class A { int x; }")
    done = junit.restore_tests(order, tree, keep={"src/test/java/p/NewTest.java"})
    assert done == [
        "src/test/java/p/Helper.java",
        "src/test/resources/META-INF/services/org.junit.platform.launcher.TestExecutionListener",
        "src/test/resources/META-INF/services/x.Y",
    ]
    assert (repo / "src/test/java/p/Helper.java").read_bytes() == b"class Helper {}"
    assert (repo / "src/test/resources/META-INF/services/x.Y").read_bytes() == b"p.Z\n"
    assert not (
        repo / "src/test/resources/META-INF/services/org.junit.platform.launcher.TestExecutionListener"
    ).exists()
    assert (repo / "src/test/java/p/NewTest.java").read_bytes() == b"hidden"
    assert (repo / "src/main/java/p/A.java").read_bytes() == b"class A { int x; }"  # not the runner's to restore
    order.protect.tests = False
    (repo / "src/test/java/p/Helper.java").write_bytes(b"changed")
    assert junit.restore_tests(order, tree, keep=set()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="making files root's needs root (the grading container's supervisor is)")
def test_seal_makes_everything_roots_and_read_only(tmp_path):
    (tmp_path / "t/p").mkdir(parents=True)
    (tmp_path / "t/p/A.java").write_text("x")
    os.chmod(tmp_path / "t/p/A.java", 0o664)
    os.chown(tmp_path / "t/p/A.java", 1000, 1000)
    junit.seal(str(tmp_path / "t"))
    st = os.stat(tmp_path / "t/p/A.java")
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o444)
    assert stat.S_IMODE(os.stat(tmp_path / "t/p").st_mode) == 0o755


# --- the reporter ------------------------------------------------------------------------------------


def test_the_reporters_listing_is_the_one_build_sh_writes():
    listing = subprocess.run(
        "find src build.sh -type f | LC_ALL=C sort | xargs sha256sum",
        shell=True,
        cwd=REPORTER,
        capture_output=True,
        check=True,
    ).stdout
    assert junit.reporter_listing(str(REPORTER)) == listing
    # the environment's copy is the reporter's (demo/sync-env.sh)
    env_copy = ROOT / "environments" / "java-21" / "reporter"
    assert junit.reporter_listing(str(env_copy)) == listing


def test_launch_moves_the_channel_into_properties_and_out_of_the_environment(tmp_path):
    show = tmp_path / "show"
    show.write_text('#!/bin/sh\necho "args: $*"\nenv | sort\n')
    show.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "GRADER_REPORT_FD": "5", "GRADER_KEY_FD": "6", "JAVA_TOOL_OPTIONS": "-javaagent:x"}
    out = subprocess.run(
        [sys.executable, "-I", str(REPORTER / "launch.py"), str(show), "-cp", "x", "Main"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "args: -Dgrader.report.fd=5 -Dgrader.key.fd=6 -cp x Main" in out
    assert "GRADER_" not in out.split("\n", 1)[1] and "JAVA_TOOL_OPTIONS" not in out
    assert subprocess.run([sys.executable, "-I", str(REPORTER / "launch.py"), "java"], env=env).returncode == 2


# --- the static audit's rules for Java ------------------------------------------------------------------


def findings(files: dict[str, str]) -> set[str]:
    out = set()
    for path, text in files.items():
        for rule, pattern in rules.PATH_RULES.items():
            if pattern.search(path):
                out.add(rule)
        for line in text.splitlines():
            for rule, patterns in rules.rules_for(path).items():
                if any(p.search(line) for p in patterns):
                    out.add(rule)
    return out


def calc(more: str) -> dict[str, str]:
    return {"src/main/java/calc/Calc.java": jm.calc_with(more)}


@pytest.mark.parametrize(
    "name, files, expected",
    [
        ("forged print", calc(jm.FORGED_PRINT), "forged-output"),
        ("forged record", calc(jm.FORGED_RECORD), "descriptors"),
        ("reaches the channel", calc(jm.FORGED_RECORD), "runner-internals"),
        ("FileDescriptor", calc(jm.FORGED_RECORD), "deep-reflection"),
        ("JUnit's configuration", jm.CONFIG_FILES, "runner-files"),
        ("an extension in the library", jm.CONFIG_FILES, "runner-internals"),
        (
            "a class named like JUnit's",
            {"src/main/java/org/junit/jupiter/api/Assertions.java": jm.FAKE_ASSERTIONS},
            "shadowing",
        ),
        ("jars", {"lib/evil.jar": ""}, "compiled-code"),
        ("exit", calc(jm.EXIT0), "process-exit"),
        ("halt after", calc(jm.HALT_AFTER), "process-exit"),
        ("rewrite at run", calc(jm.REWRITE_AT_RUN), "test-files"),
        ("blanket flip", calc(jm.BLANKET_FLIP), "deep-reflection"),
        ("blanket flip by name", calc(jm.BLANKET_FLIP), "runner-internals"),
        ("one-line static print", calc('static { System.out.println("[ 3 tests successful ]"); }\n'), "static-init"),
        (
            "heap dump",
            calc("static Object b = ManagementFactory.getPlatformMXBean(HotSpotDiagnosticMXBean.class);\n"),
            "agents-native",
        ),
        ("native", calc('static { System.load("/tmp/x.so"); }\n'), "agents-native"),
        (
            "private lookup",
            calc("static Object l = MethodHandles.privateLookupIn(Object.class, MethodHandles.lookup());\n"),
            "deep-reflection",
        ),
    ],
)
def test_the_rules_fire_on_the_attacks(name, files, expected):
    assert expected in findings(files), name


@pytest.mark.parametrize(
    "files",
    [
        {"src/main/java/calc/Calc.java": jm.FIXED_CALC},
        calc(jm.HONEST_PRINT + jm.HONEST_THREAD),
        {"src/main/java/calc/Checks.java": jm.HONEST_NEW_CLASS, "src/main/java/calc/Calc.java": jm.CALC_WITH_HELPER},
        {"src/main/resources/calc/README.txt": "what calc does\n"},
        {"src/test/java/calc/MeanTest.java": jm.HIDDEN_TEST.replace("2.5", "2.50")},  # the task's, not read
    ],
)
def test_the_rules_stay_quiet_on_honest_code(files):
    assert findings(files) - {"runner-files"} == set(), files


def suite_gold_patches() -> list[tuple[str, bytes]]:
    import importlib.util

    spec = importlib.util.spec_from_file_location("releases_for_audit", ROOT / "tasks" / "releases.py")
    assert spec and spec.loader
    releases = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = releases
    spec.loader.exec_module(releases)
    suite = releases.suite("maven-real")
    m = suite.manifest()
    out = []
    import tempfile

    with tempfile.TemporaryDirectory() as work:
        for task in m.tasks:
            history = releases.make_history(m, task, Path(work), suite.cache(), log=lambda _: None)
            out.append((task.id, history.diff(task.source)))
    return out


def test_the_rules_stay_quiet_on_the_suites_gold_patches():
    from unidiff import PatchSet

    patches = suite_gold_patches()
    assert len(patches) >= 5
    for tid, patch in patches:
        hits = []
        for f in PatchSet(patch.decode("utf-8", "replace")):
            path = f.target_file[2:] if f.target_file.startswith("b/") else f.target_file
            for hunk in f:
                for line in hunk:
                    if line.is_added:
                        for rule, patterns in rules.rules_for(path).items():
                            if any(p.search(line.value) for p in patterns):
                                hits.append((rule, line.value.strip()))
        assert not hits, (tid, hits)


def test_the_jvms_map_the_images_archives_only_where_it_has_them(tmp_path, monkeypatch):
    monkeypatch.setattr(junit, "CDS", str(tmp_path))
    assert junit.cds("launcher") == []  # an image built before cds-train: the JVM as before
    (tmp_path / "launcher.jsa").write_bytes(b"archive")
    assert junit.cds("launcher") == [f"-XX:SharedArchiveFile={tmp_path}/launcher.jsa", *junit.CDS_QUIET]
    assert junit.cds("javac") == []
