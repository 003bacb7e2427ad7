"""The go runner's pure parts (grader/box/runners/go.py), without Docker or a Go toolchain:
its plan (packages, flags, the form of the ids, where the canaries go), what it protects,
the names of the binaries `go test -c -o DIR/` writes, the canaries it writes, and how it
takes the canaries back out of a binary's exit status and output. The run itself is
tests/docker/test_attacks_go.py's."""

from __future__ import annotations

import re

import pytest

from grader.box import runners
from grader.box.order import ProtectSpec
from grader.box.protect import Protection
from grader.box.runners import go
from grader.tasks import model
from helpers.go_mini import FakeTree, order_for

HIDDEN = {"calc/mean_test.go": "d1", "calc/testdata/in_test.go": "d2", "calc/old_test.go": None, "README.md": "d3"}


def plan(hidden=None, **check):
    return go.plan({"type": "tests", "runner": "go", **check}, HIDDEN if hidden is None else hidden)


# --- the plan ---------------------------------------------------------------------------


def test_the_runner_is_registered_and_takes_no_command():
    assert "go" in runners.test_runners()
    assert go.TESTS and go.COMMAND == "none" and go.DECIDED_BY == "test report"
    assert (go.EXIT_PASSED, go.EXIT_FAILED) == (0, 1) and set(go.EXIT_MEANING) == {2, 3}
    model.TestsCheck(type="tests", runner="go", args=["-short"], fail_to_pass=["TestX"])
    with pytest.raises(ValueError, match="builds its own command"):
        model.TestsCheck(type="tests", runner="go", command="go test ./...")


def test_the_packages_default_to_the_hidden_tests_directories():
    spec = plan(fail_to_pass=["TestEmpty"])
    # testdata/ holds data, a deleted file is not a test, README.md is not Go
    assert spec.kind == "go" and spec.paths == ["./calc"]
    assert spec.canaries and spec.canary_dir == "calc" and spec.canary_sources == ["calc/mean_test.go"]
    root = plan({"mean_test.go": "d", "stats/max_test.go": "d"})
    assert root.paths == [".", "./stats"] and root.canary_dir == ""
    assert plan(paths=["./..."]).paths == ["./..."]


def test_a_check_with_nothing_to_run_or_a_flag_for_a_package_is_refused():
    with pytest.raises(ValueError, match="needs paths"):
        plan({"calc/testdata/x_test.go": "d", "calc/calc.go": "d"})
    with pytest.raises(ValueError, match="not one"):
        plan(paths=["-toolexec=/bin/sh"])


@pytest.mark.parametrize(
    "args, flags",
    [
        (["-short"], ["-test.short"]),
        (["-run", "TestA|TestB", "--skip=Slow"], ["-test.run=TestA|TestB", "-test.skip=Slow"]),
        (["-test.v", "-parallel", "2", "-tags", "integration"], ["-test.v", "-test.parallel=2", "-tags=integration"]),
        (["-count=1", "-short=false"], ["-test.count=1", "-test.short=false"]),
    ],
)
def test_task_flags_are_spelled_the_way_the_runner_passes_them(args, flags):
    assert plan(args=args).args == [go.IDS_PLAIN, *flags]


@pytest.mark.parametrize(
    "args, words",
    [
        (["-ldflags=-checklinkname=0"], "not one the go runner passes"),
        (["-toolexec", "sh"], "not one the go runner passes"),
        (["-timeout=1s"], "not one the go runner passes"),
        (["-count", "2"], "runs a test twice"),
        (["./..."], "packages go in paths"),
        (["-run"], "needs a value"),
        (["-short=maybe"], "true or false"),
    ],
)
def test_flags_that_would_change_how_the_tests_are_judged_are_refused(args, words):
    with pytest.raises(ValueError, match=words):
        plan(args=args)


def test_the_ids_are_reported_in_the_form_the_lists_use():
    assert plan(fail_to_pass=["TestA", "TestA/sub"]).args[0] == go.IDS_PLAIN
    assert plan(fail_to_pass=["example.com/m/calc::TestA"]).args[0] == go.IDS_QUALIFIED
    with pytest.raises(ValueError, match="mixes them"):
        plan(fail_to_pass=["TestA"], pass_to_pass=["example.com/m::TestB"])
    # a subtest's name may hold "::" (timefmt-go's format strings): still a plain id
    subtests = ["TestFormat/%::z", "TestFormat/+09:00_%:::z", "TestParse/23:14:15"]
    assert plan(fail_to_pass=["TestA"], pass_to_pass=subtests).args[0] == go.IDS_PLAIN
    assert plan(fail_to_pass=["example/calc::TestA/x::y", "m::ExampleB"]).args[0] == go.IDS_QUALIFIED
    assert go.camel_words("TestFormat/%::z") == ["format"]
    assert go.camel_words("example.com/m::TestParseHTTP/a::b") == ["parse", "http"]
    # no lists: plain for one package, qualified where several may run
    assert plan().args[0] == go.IDS_PLAIN
    assert plan(paths=["./..."]).args[0] == go.IDS_QUALIFIED
    assert plan(paths=[".", "./calc"]).args[0] == go.IDS_QUALIFIED


def test_the_canaries_go_where_the_check_runs_them():
    assert plan(paths=["./other"]).canaries is False  # the hidden tests' package is not run
    assert plan(paths=["./..."]).canary_dir == "calc"
    assert plan(canaries=False).canaries is False
    assert plan(fail_to_pass=["TestParseHTTPVersion/with_space", "ExampleMean_empty"]).canary_words == [
        "empty",
        "http",
        "mean",
        "parse",
        "version",
    ]


def test_listed_ids_name_no_file():
    assert go.listed_files(["TestA", "example.com/m::TestB"]) == []


# --- what is protected ----------------------------------------------------------------------


def protection(tests: bool = True) -> Protection:
    rules = go.PROTECT
    spec = ProtectSpec(
        files=["calc/mean_test.go"],
        names=rules["names"],
        suffixes=rules["suffixes"],
        prefixes=rules["prefixes"],
        dir_suffixes=rules["dir_suffixes"],
        tests=tests,
        test_modules=rules["test_modules"],
        test_dir_names=rules["test_dir_names"],
        globs=[],
    )
    return Protection(spec, {"calc/calc.go": ("f", 0o644, 1, 1)})


@pytest.mark.parametrize("tests", [True, False])
def test_what_the_go_command_and_the_test_binary_load_is_protected(tests):
    p = protection(tests)
    for rel in [
        "go.mod",
        "go.sum",
        "go.work",
        "go.work.sum",
        "sub/go.mod",  # a nested module would take its directory out of the module
        "calc/new_test.go",  # compiled into the hidden tests' binary: init(), TestMain
        "zz_main_test.go",
        "calc/testdata/golden.json",
        "testdata/x/y.txt",
        "vendor/modules.txt",
        "vendor/github.com/stretchr/testify/assert/assertions.go",
        "calc/blob_amd64.syso",
    ]:
        assert p.why(rel) is not None, rel
    for rel in ["calc/calc.go", "calc/calc_linux.go", "README.md", "calc/test_helpers.go", "internal/tests/x.go"]:
        assert p.why(rel) is None, rel


# --- the binaries ------------------------------------------------------------------------------


def test_the_binary_names_go_test_c_writes():
    assert go.binary_name("example.com/calc") == "calc.test"
    assert go.binary_name("github.com/Masterminds/semver/v3") == "semver.test"
    assert go.binary_name("example.com/m/v1") == "v1.test"  # v1 is no major-version suffix
    assert go.binary_name("example.com/m/v0") == "v0.test"
    assert go.binary_name("gopkg.in/yaml.v3") == "yaml.v3.test"
    assert go.binary_name("v2") == "v2.test"


def test_packages_whose_binaries_share_a_name_are_built_apart():
    pkgs = [{"ImportPath": p} for p in ("a/util", "b/util", "a/calc", "c/util/v2", "c/other")]
    groups = [[p["ImportPath"] for p in g] for g in go.groups(pkgs)]
    assert groups == [["a/util", "a/calc", "c/other"], ["b/util"], ["c/util/v2"]]
    for group in go.groups(pkgs):
        names = [go.binary_name(p["ImportPath"]) for p in group]
        assert len(names) == len(set(names))


def test_go_lists_stream_of_objects_is_read():
    data = b'{\n\t"ImportPath": "a",\n\t"Dir": "/r/a"\n}\n{\n\t"ImportPath": "./x",\n\t"Error": {"Err": "no"}\n}\n'
    assert go.parse_listing(data) == [{"ImportPath": "a", "Dir": "/r/a"}, {"ImportPath": "./x", "Error": {"Err": "no"}}]
    with pytest.raises(ValueError):
        go.parse_listing(b'{"ImportPath": "a"')


def test_the_job_args_split_into_the_ids_form_the_build_and_the_binaries():
    assert go.split_args([go.IDS_QUALIFIED, "-tags=x", "-test.short", "-test.run=A"]) == (
        True,
        ["-tags=x"],
        ["-test.short", "-test.run=A"],
    )
    assert go.split_args([go.IDS_PLAIN])[0] is False


# --- the canaries ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source, name",
    [
        (b"package calc\n", "calc"),
        (b"// Copyright\n\n//go:build linux\n\n/* a\npackage wrong\n*/\npackage calc_test // x\n", "calc_test"),
        (b"\xef\xbb\xbfnot go\n", None),
        (b"", None),
    ],
)
def test_the_package_clause_of_a_hidden_test(source, name):
    assert go.package_clause(source) == name


TAKEN = b'package calc\n\nimport "testing"\n\nfunc TestValue(t *testing.T) {}\nfunc TestEdge(t *testing.T) {}\n'


@pytest.mark.parametrize("clause", ["calc", "calc_test"])
def test_canaries_are_a_test_file_of_the_hidden_tests_package(tmp_path, clause):
    for _ in range(30):  # random shapes and names: every draw holds the rules
        tree = FakeTree({"calc/mean_test.go": f"package {clause}\n".encode(), "calc/old_test.go": TAKEN})
        check = plan(fail_to_pass=["TestParseEmpty"], pass_to_pass=["TestTableValue/one"])
        canaries = go.make_canaries(order_for(check, tmp_path), tree)
        assert canaries is not None and "expect" in canaries
        rel = canaries["path"]
        data, mode, owner = tree.written[rel]
        assert rel.startswith("calc/") and rel.endswith("_test.go") and (mode, owner) == (0o444, (0, 0))
        # no word of its name is a GOOS or GOARCH: the file is always built
        assert not set(rel[len("calc/") : -len("_test.go")].split("_")) & go.GOOS_GOARCH
        source = data.decode()
        assert source.startswith(f'package {clause}\n\nimport "testing"\n')
        funcs = re.findall(r"^func (Test\w+)\(t \*testing\.T\) \{$", source, re.M)
        assert funcs == list(canaries["expect"]) and len(set(funcs)) == len(funcs)
        assert not {"TestValue", "TestEdge", "TestParseEmpty"} & set(funcs)  # never a name already taken
        wants = list(canaries["expect"].values())
        assert 2 <= wants.count("passed") <= 3 and 2 <= wants.count("failed") <= 3
        assert canaries["dir"] == "calc"
        # nothing at package level but the test functions (no name of the package's clashes)
        top = re.findall(r"^\S.*$", source, re.M)[2:]
        assert top == [line for f in funcs for line in (f"func {f}(t *testing.T) {{", "}")]


def test_no_canaries_where_the_flags_deselect_or_nothing_gives_the_package(tmp_path):
    tree = FakeTree({"calc/mean_test.go": b"package calc\n"})
    blocked = go.make_canaries(order_for(plan(args=["-run", "TestA"]), tmp_path), tree)
    assert blocked == {"skipped": "the task's go test flag -test.run=TestA could stop the run early or deselect them"}
    assert go.make_canaries(order_for(plan(canaries=False), tmp_path), tree) is None
    unreadable = go.make_canaries(order_for(plan(), tmp_path), FakeTree({"calc/mean_test.go": b"// nothing\n"}))
    assert unreadable == {"skipped": "no hidden test file to take the package clause from"}
    assert not tree.written


# --- the canaries taken back out -----------------------------------------------------------------


def unit(code, end, outcomes, forged=None):
    run = {"exit_code": code, "timed_out": False}
    rep = {
        "forged": forged,
        "end": None if end is None else {"t": "end", "exit": end},
        "ends": 0 if end is None else 1,
        "sessions": 1,
        "outcomes": outcomes,
    }
    return run, rep


CANARIES = {"TestEdgeValue", "TestRoundSplit"}


def test_a_binary_that_failed_only_its_canaries_exited_0_for_the_task():
    run, rep = unit(1, 1, {"TestEmpty": "passed", "TestEdgeValue": "failed", "TestRoundSplit": "passed"})
    assert go.take_back_canaries(run, rep, CANARIES)
    assert run["exit_code"] == 0 and rep["end"]["exit"] == 0


@pytest.mark.parametrize(
    "code, end, outcomes, forged",
    [
        (1, 1, {"TestEmpty": "failed", "TestEdgeValue": "failed"}, None),  # a task's test failed too
        (2, 2, {"TestEdgeValue": "failed"}, None),  # a panic
        (1, 0, {"TestEdgeValue": "failed"}, None),  # a TestMain that lied: left for the evidence
        (1, None, {"TestEdgeValue": "failed"}, None),  # no end
        (1, 1, {"TestEdgeValue": "failed"}, "line 3 ..."),  # forged
        (1, 1, {"TestEmpty": "passed"}, None),  # nothing failed: exit 1 for another reason
    ],
)
def test_anything_else_keeps_its_status(code, end, outcomes, forged):
    run, rep = unit(code, end, outcomes, forged)
    assert not go.take_back_canaries(run, rep, CANARIES)
    assert run["exit_code"] == code and (rep["end"] or {}).get("exit") == end


def test_the_canaries_lines_leave_the_output():
    out = (
        b"=== RUN   TestEdgeValue\n--- FAIL: TestEdgeValue (0.00s)\n    round_edge_test.go:12: total = 3, want 4\n"
        b"=== RUN   TestEmpty\n--- FAIL: TestEmpty (0.00s)\n    mean_test.go:9: Mean(nil) = NaN\n"
        b"=== RUN   TestEdgeValueX\n--- PASS: TestRoundSplit (0.00s)\nFAIL\n"
    )
    canaries = {"path": "calc/round_edge_test.go", "expect": {"TestEdgeValue": "failed", "TestRoundSplit": "passed"}}
    shown = go.hide_canaries(out, canaries, taken_back=False).decode()
    assert "TestEdgeValue " not in shown and "round_edge_test.go" not in shown and "TestRoundSplit" not in shown
    assert "--- FAIL: TestEmpty" in shown and "mean_test.go:9" in shown and "TestEdgeValueX" in shown
    assert shown.rstrip().endswith("FAIL")
    only = b"--- FAIL: TestEdgeValue (0.00s)\n    round_edge_test.go:12: no\nFAIL\n"
    assert go.hide_canaries(only, canaries, taken_back=True).decode().strip() == "PASS"
