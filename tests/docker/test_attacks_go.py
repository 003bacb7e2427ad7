"""Hostile Go submissions, graded through the real grader (tests/helpers/go_mini.py's module in
the go-1.24 environment) under runc, gVisor and the pool (a test marked `same_in_every_sandbox`
under runc alone: tests/README.md): each gets the verdict it deserves, and an honest submission
of each shape still PASSes.

What the go runner stands on (grader/box/runners/go.py, docs/runners/go.md): outcomes
only from the signed records of the image's patched `testing` package, every test binary
built before any runs and then root's, each binary's own exit status held to its
reporter's last word, *_test.go / testdata / go.mod / go.sum / go.work / vendor restored
to the base, and canaries in the hidden tests' package.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from grader.box.runners import go
from grader.config import get_settings
from grader.images import Images
from grader.pipeline import Grader
from grader.tasks.loader import TaskSet
from grader.verdict import Result, Verdict
from helpers import go_mini as gm
from helpers.sandboxes import grader_under

pytestmark = [pytest.mark.docker]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def go_mini(tmp_path_factory) -> gm.GoMini:
    return gm.GoMini(tmp_path_factory.mktemp("go-mini"))


@pytest.fixture(scope="module")
def go_tasks(tmp_path_factory, go_mini) -> TaskSet:
    tasks = tmp_path_factory.mktemp("go-tasks")
    gm.write_tasks(tasks, go_mini)
    return TaskSet(tasks)


@pytest.fixture(scope="module")
def grader(sandbox: str, tmp_path_factory, go_tasks) -> Grader:
    return grader_under(sandbox, go_tasks.dir, tmp_path_factory.mktemp("go-cache"))


def grade(grader: Grader, go_tasks: TaskSet, patch: bytes, task: str = "go-mini") -> Result:
    result = grader.grade(go_tasks.get(task), patch)
    assert result.verdict is not Verdict.ERROR, result.to_json()
    assert result.provenance.runtime == grader.runtime
    return result


def why(result: Result) -> str:
    return f"{result.verdict}: {result.explanation} | tampered {result.tampered} | {result.output[-1500:]}"


def unfixed(go_mini: gm.GoMini, fragment: tuple[str, tuple[str, ...]], **more: str | bytes | None) -> bytes:
    body, imports = fragment
    return go_mini.diff({"calc.go": gm.unfixed_with(body, imports), **more})


def fixed(go_mini: gm.GoMini, fragment: tuple[str, tuple[str, ...]] | None = None, **more: str | bytes | None) -> bytes:
    calc = gm.calc_with(*fragment) if fragment else gm.FIXED_CALC
    return go_mini.diff({"calc.go": calc, **more})


# --- the gold patch and the empty one --------------------------------------------------------


def test_gold_passes_and_empty_fails_with_plain_ids(grader, go_tasks):
    task = go_tasks.get("go-mini")
    gold = grade(grader, go_tasks, task.gold_patch_text())
    assert gold.verdict is Verdict.PASS, why(gold)
    assert gold.protections.report_channel == "signed"
    assert gold.protections.canaries is not None and gold.protections.canaries.wrong == 0
    assert set(gold.tests.all) == set(gm.F2P + gm.P2P)  # the canaries are not among them
    empty = grade(grader, go_tasks, b"")
    assert empty.verdict is Verdict.FAIL and not empty.tampered, why(empty)
    assert empty.tests.all["TestEmpty"] == "failed" and empty.tests.all["TestTwo"] == "passed"
    # the output names no canary: only the task's own failure is shown
    assert "--- FAIL: TestEmpty" in empty.output
    assert empty.output.count("--- FAIL:") == 1, empty.output


def test_several_packages_with_qualified_ids(grader, go_tasks, go_mini):
    task = go_tasks.get("go-multi")
    gold = grade(grader, go_tasks, task.gold_patch_text(), "go-multi")
    assert gold.verdict is Verdict.PASS, why(gold)
    assert set(gold.tests.all) == set(gm.MULTI_F2P + gm.MULTI_P2P)
    half = grade(grader, go_tasks, go_mini.diff({"calc.go": gm.FIXED_CALC}), "go-multi")
    assert half.verdict is Verdict.FAIL, why(half)
    assert half.tests.all["example.com/calc/stats::TestMaxEmpty"] == "failed"
    assert half.tests.all["example.com/calc::TestEmpty"] == "passed"


# --- 1. outcomes never from output or an unsigned line ------------------------------------


@pytest.mark.same_in_every_sandbox
def test_forged_success_lines_printed_by_the_code_under_test_fail(grader, go_tasks, go_mini):
    result = grade(grader, go_tasks, unfixed(go_mini, gm.FORGED_PRINT))
    assert result.verdict is Verdict.FAIL, why(result)
    assert "--- PASS: TestEmpty" in result.output  # printed, and believed by nothing
    assert result.tests.all["TestEmpty"] == "failed"


def test_a_record_written_to_the_report_pipe_is_forgery(grader, go_tasks, go_mini):
    result = grade(grader, go_tasks, unfixed(go_mini, gm.FORGED_RECORD))
    assert result.verdict is Verdict.FAIL, why(result)
    assert result.tampered and "signature" in result.tampered[0], why(result)


# --- 2. runner configuration and what the go command loads by itself ---------------------


@pytest.mark.same_in_every_sandbox
def test_a_testmain_file_is_removed_before_the_build(grader, go_tasks, go_mini):
    result = grade(grader, go_tasks, unfixed(go_mini, ("", ()), **{"zz_main_test.go": gm.TESTMAIN_FILE}))
    assert result.verdict is Verdict.FAIL, why(result)
    assert "zz_main_test.go" in result.apply.neutralized
    assert result.tests.all["TestEmpty"] == "failed"


@pytest.mark.same_in_every_sandbox
def test_go_mod_go_work_vendor_syso_and_testdata_go_back_to_the_base(grader, go_tasks, go_mini):
    files = {
        "go.mod": gm.GO_MOD_HOSTILE,
        "go.work": gm.GO_WORK,
        "vendor/modules.txt": gm.VENDOR_MODULES,
        "hook_amd64.syso": b"\x7fELF\x02\x01\x01" + bytes(57),  # an object the linker would take as it is
        "testdata/golden.txt": "NaN\n",
    }
    result = grade(grader, go_tasks, unfixed(go_mini, ("", ()), **files))
    assert result.verdict is Verdict.FAIL, why(result)
    assert set(files) <= set(result.apply.neutralized), result.apply
    assert result.tests.all["TestEmpty"] == "failed"  # built and run with the base's go.mod


@pytest.mark.same_in_every_sandbox
def test_linkname_to_the_reporter_does_not_link(grader, go_tasks, go_mini):
    """The package does not build: a collect error, its tests failed, never an ERROR."""
    result = grade(grader, go_tasks, unfixed(go_mini, gm.LINKNAME))
    assert result.verdict is Verdict.FAIL, why(result)
    assert result.check.get("collect_errors") == ["example.com/calc"], result.check
    assert "did not build" in result.explanation
    assert not result.tests.all


@pytest.mark.same_in_every_sandbox
def test_a_package_that_does_not_compile_is_a_collect_error(grader, go_tasks, go_mini):
    result = grade(grader, go_tasks, go_mini.diff({"calc.go": gm.FIXED_CALC + "\nfunc broken( {\n"}))
    assert result.verdict is Verdict.FAIL, why(result)
    assert result.check.get("collect_errors") == ["example.com/calc"]
    assert "calc.go" in result.output  # the compiler's message is shown


# --- 3. the tests themselves --------------------------------------------------------------


@pytest.mark.same_in_every_sandbox
def test_an_edited_hidden_test_and_a_deleted_own_test_are_restored(grader, go_tasks, go_mini):
    patch = unfixed(
        go_mini,
        ("", ()),
        **{
            "mean_test.go": 'package calc\n\nimport "testing"\n\nfunc TestEmpty(t *testing.T) {}\n',
            "calc_test.go": None,
        },
    )
    result = grade(grader, go_tasks, patch)
    assert result.verdict is Verdict.FAIL, why(result)
    assert "calc_test.go" in result.apply.neutralized
    assert result.tests.all["TestEmpty"] == "failed" and result.tests.all["TestOne"] == "passed"


def test_the_hidden_test_removed_while_the_tests_run_is_tampering(grader, go_tasks, go_mini):
    result = grade(grader, go_tasks, fixed(go_mini, gm.DELETE_HIDDEN_AT_RUN))
    assert result.verdict is Verdict.FAIL, why(result)
    assert any("mean_test.go" in t for t in result.tampered), why(result)


# --- 4. crashes never pass ------------------------------------------------------------------


def test_os_exit_0_inside_a_test_fails_it(grader, go_tasks, go_mini):
    calc = gm.unfixed_with(*gm.EXIT0_IN_CALL).replace("\ttotal := 0.0\n", gm.EXIT0_MEAN_LINE + "\ttotal := 0.0\n", 1)
    result = grade(grader, go_tasks, go_mini.diff({"calc.go": calc}))
    assert result.verdict is Verdict.FAIL, why(result)
    assert result.tests.all.get("TestEmpty") == "failed"


def test_a_panic_fails_its_test_and_the_tests_it_left_unrun_run_again(grader, go_tasks, go_mini):
    calc = gm.BASE_FILES["calc.go"].replace("\ttotal := 0.0\n", gm.PANIC_MEAN_LINE + "\ttotal := 0.0\n", 1)
    result = grade(grader, go_tasks, go_mini.diff({"calc.go": calc}))
    assert result.verdict is Verdict.FAIL and not result.tampered, why(result)
    assert result.tests.all["TestEmpty"] == "failed"
    # TestTwo and TestTable come after TestEmpty in mean_test.go: run again, alone
    assert result.tests.all["TestTwo"] == "passed" and result.tests.all["TestTable/three_values"] == "passed"
    assert "panic: calc: empty" in result.output and "run again after a panic" in result.output
    assert result.protections.canaries is not None and result.protections.canaries.wrong == 0


def test_exit_0_before_the_tests_is_forgery(grader, go_tasks, go_mini):
    result = grade(grader, go_tasks, fixed(go_mini, gm.EXIT0_AT_INIT))
    assert result.verdict is Verdict.FAIL, why(result)
    assert result.tampered and "exited 0 before" in result.tampered[0], why(result)


def test_a_goroutine_panic_fails(grader, go_tasks, go_mini):
    result = grade(grader, go_tasks, fixed(go_mini, gm.GOROUTINE_PANIC))
    assert result.verdict is Verdict.FAIL, why(result)
    assert "ended before go test finished its report" in result.explanation


# --- 5. a hang --------------------------------------------------------------------------


@pytest.mark.timeout(900)
def test_a_hang_times_out(grader, go_tasks, go_mini):
    result = grade(grader, go_tasks, fixed(go_mini, gm.HANG), "go-hang")
    assert result.verdict is Verdict.TIMED_OUT, why(result)
    assert grader.sandbox.busy_containers() == []


# --- 6. a blanket flip: only the canaries can tell --------------------------------------------


def test_a_blanket_flip_is_caught_by_the_canaries(grader, go_tasks, go_mini):
    """testing.(*common).Failed patched to `return false` in the running binary: TestEmpty
    reported passed, the binary exits 0, the signed report agrees, and the canaries that
    must fail are reported passed too."""
    result = grade(grader, go_tasks, unfixed(go_mini, gm.BLANKET_FLIP))
    assert result.verdict is Verdict.FAIL, why(result)
    assert result.tests.all.get("TestEmpty") == "passed"  # the flip worked on the task's test...
    assert any("canary test that must fail" in t for t in result.tampered), why(result)  # ...and was seen
    assert result.protections.canaries is not None and result.protections.canaries.wrong >= 2


# --- the canaries themselves ------------------------------------------------------------------


@pytest.mark.timeout(900)
def test_canaries_of_every_shape_build_and_say_what_they_must(tmp_path, go_tasks):
    """Forty canary files as make_canaries writes them, each in a package of its own (half
    an internal test package, half an external one), built and run in the go-1.24 image:
    every one compiles, and each test passes or fails as its `expect` says."""
    module = tmp_path / "canaries"
    module.mkdir()
    (module / "go.mod").write_text("module example.com/canaries\n\ngo 1.21\n")
    expect: dict[str, str] = {}
    for n in range(40):
        clause = f"p{n}" if n % 2 else f"p{n}_test"
        tree = gm.FakeTree({f"p{n}/x_test.go": f"package {clause}\n".encode()})
        check = go.plan({"fail_to_pass": ["TestParseZoneOffset", "TestTableValue/one"]}, {f"p{n}/x_test.go": "d"})
        canaries = go.make_canaries(gm.order_for(check, tmp_path), tree)
        (module / f"p{n}").mkdir()
        (module / f"p{n}" / f"p{n}.go").write_text(f"package p{n}\n")
        (module / canaries["path"]).write_bytes(tree.files[canaries["path"]])
        expect |= {f"example.com/canaries/p{n}::{t}": want for t, want in canaries["expect"].items()}
    settings = get_settings(tasks_dir=go_tasks.dir, environments_dir=ROOT / "environments")
    image = Images(settings).build_env("go-1.24")
    module.chmod(0o777)
    run = subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "--network",
            "none",
            "-v",
            f"{module}:/work/m:ro",
            "-w",
            "/work/m",
            "-e",
            "GOFLAGS=-buildvcs=false",
            image,
            "go",
            "test",
            "-vet=off",
            "-json",
            "./...",
        ],
        capture_output=True,
        text=True,
        timeout=800,
    )
    got = {}
    for line in run.stdout.splitlines():
        event = json.loads(line) if line.startswith("{") else {}
        if event.get("Test") and event.get("Action") in ("pass", "fail"):
            got[f"{event['Package']}::{event['Test']}"] = "passed" if event["Action"] == "pass" else "failed"
    assert "build failed" not in run.stdout and "[setup failed]" not in run.stdout, (
        run.stdout[-3000:] + run.stderr[-3000:]
    )
    assert got == expect


# --- honest submissions of each shape still pass --------------------------------------------


@pytest.mark.parametrize(
    "shape",
    ["prints", "goroutine", "exit-unreached", "new-file-and-package", "touches-protected-files"],
)
def test_honest_submissions_of_each_shape_pass(grader, go_tasks, go_mini, shape):
    if shape == "prints":
        patch = fixed(go_mini, gm.HONEST_PRINT)
    elif shape == "goroutine":
        patch = fixed(go_mini, gm.HONEST_GOROUTINE)
    elif shape == "exit-unreached":
        patch = fixed(go_mini, gm.HONEST_EXIT_UNREACHED)
    elif shape == "new-file-and-package":
        patch = fixed(go_mini, None, **{"sum.go": gm.HONEST_NEW_FILE, "extra/extra.go": gm.HONEST_NEW_PACKAGE})
    else:  # a fix that also edits go.mod, a test, the hidden test and adds a TestMain: all restored
        patch = fixed(
            go_mini,
            None,
            **{
                "go.mod": gm.BASE_FILES["go.mod"] + "\n// a comment\n",
                "calc_test.go": None,
                "mean_test.go": "package calc\n",
                "zz_main_test.go": gm.TESTMAIN_FILE,
            },
        )
    result = grade(grader, go_tasks, patch)
    assert result.verdict is Verdict.PASS, why(result)
    assert not result.tampered
