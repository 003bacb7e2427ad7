"""Hostile Rust submissions, graded through the real grader (tests/helpers/rust_mini.py's crate
in the rust-1.85 environment) under runc, gVisor and the pool (a test marked
`same_in_every_sandbox` under runc alone: tests/README.md): each gets the verdict it deserves,
and an honest submission of each shape still PASSes.

What the cargo runner stands on (grader/box/runners/cargo.py, docs/runners/cargo.md): the
supervisor itself runs every test binary, from a sealed copy made before any of them runs,
and reads each one's libtest stream strictly against the binary's own list; Cargo.toml,
Cargo.lock, build.rs, .cargo/, rust-toolchain*, tests/ restored to the base; target/ not
writable by the patch; canaries in a test target of the run that copies the hidden tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.audit_rules import rust as rust_rules
from grader.pipeline import Grader
from grader.tasks.loader import TaskSet
from grader.verdict import Result, Verdict
from helpers import rust_mini as rm
from helpers.sandboxes import grader_under

pytestmark = [pytest.mark.docker]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rust_mini(tmp_path_factory) -> rm.RustMini:
    return rm.RustMini(tmp_path_factory.mktemp("rust-mini"))


@pytest.fixture(scope="module")
def rust_tasks(tmp_path_factory, rust_mini) -> TaskSet:
    tasks = tmp_path_factory.mktemp("rust-tasks")
    rm.write_tasks(tasks, rust_mini)
    return TaskSet(tasks)


@pytest.fixture(scope="module")
def grader(sandbox: str, tmp_path_factory, rust_tasks) -> Grader:
    return grader_under(sandbox, rust_tasks.dir, tmp_path_factory.mktemp("rust-cache"))


def grade(grader: Grader, rust_tasks: TaskSet, patch: bytes, task: str = "rust-mini") -> Result:
    result = grader.grade(rust_tasks.get(task), patch)
    assert result.verdict is not Verdict.ERROR, result.to_json()
    assert result.provenance.runtime == grader.runtime
    return result


def why(result: Result) -> str:
    return f"{result.verdict}: {result.explanation} | tampered {result.tampered} | {result.output[-2500:]}"


def unfixed(mini: rm.RustMini, hook: str = "", items: str = "", **more: str | None) -> bytes:
    return mini.diff({"src/lib.rs": rm.lib(False, hook, items), **more})


def fixed(mini: rm.RustMini, hook: str = "", items: str = "", **more: str | None) -> bytes:
    return mini.diff({"src/lib.rs": rm.lib(True, hook, items), **more})


# --- the gold patch and the empty one ----------------------------------------------------------


def test_gold_passes_and_empty_fails(grader, rust_tasks):
    task = rust_tasks.get("rust-mini")
    gold = grade(grader, rust_tasks, task.gold_patch_text())
    assert gold.verdict is Verdict.PASS, why(gold)
    assert gold.protections.report_channel == "framed"
    assert gold.protections.canaries is not None and gold.protections.canaries.wrong == 0, gold.protections
    assert gold.protections.canaries.must_fail >= 2
    assert set(gold.tests.all) == set(rm.F2P + rm.P2P)  # neither the canaries nor the copies
    empty = grade(grader, rust_tasks, b"")
    assert empty.verdict is Verdict.FAIL and not empty.tampered, why(empty)
    assert empty.tests.all == {"mean::empty": "failed", "mean::many": "passed", "mean::two": "passed"}
    assert "test mean::empty ... failed" in empty.output
    assert empty.output.count("... failed") == 1, empty.output  # the canaries stay out of the output


def test_several_targets_give_ids_of_both_forms(grader, rust_tasks):
    task = rust_tasks.get("rust-multi")
    gold = grade(grader, rust_tasks, task.gold_patch_text(), "rust-multi")
    assert gold.verdict is Verdict.PASS, why(gold)
    assert set(gold.tests.all) == set(rm.MULTI_F2P + rm.MULTI_P2P)


# --- 1. outcomes never from a print -----------------------------------------------------------------


@pytest.mark.same_in_every_sandbox
def test_success_lines_printed_through_println_stay_in_the_capture(grader, rust_tasks, rust_mini):
    result = grade(grader, rust_tasks, unfixed(rust_mini, rm.PRINTED_SUCCESS))
    assert result.verdict is Verdict.FAIL and not result.tampered, why(result)
    assert result.tests.all["mean::empty"] == "failed"
    assert "test mean::empty ... ok" in result.output  # in the failed test's own captured output


@pytest.mark.same_in_every_sandbox
def test_success_lines_written_past_the_capture_are_tampering(grader, rust_tasks, rust_mini):
    result = grade(grader, rust_tasks, unfixed(rust_mini, rm.RAW_SUCCESS))
    assert result.verdict is Verdict.FAIL, why(result)
    assert any("a second verdict for empty" in t for t in result.tampered), why(result)
    assert set(result.tests.all.values()) == {"failed"}  # nothing of the binary passes


# --- 2. runner configuration and what cargo loads by itself ---------------------------------------


@pytest.mark.same_in_every_sandbox
def test_cargo_config_build_script_and_manifest_go_back_to_the_base(grader, rust_tasks, rust_mini):
    patch = unfixed(
        rust_mini,
        **{".cargo/config.toml": rm.CARGO_CONFIG, "build.rs": rm.BUILD_RS, "Cargo.toml": rm.HARNESS_OFF},
    )
    result = grade(grader, rust_tasks, patch)
    assert result.verdict is Verdict.FAIL and not result.tampered, why(result)
    assert {".cargo/config.toml", "build.rs", "Cargo.toml"} <= set(result.apply.neutralized), result.apply
    assert result.tests.all["mean::empty"] == "failed"  # built with the base's manifest, libtest's harness


@pytest.mark.same_in_every_sandbox
def test_a_patch_that_writes_build_artifacts_does_not_apply(grader, rust_tasks, rust_mini):
    result = grade(grader, rust_tasks, fixed(rust_mini, **{"target/debug/deps/libcalc-0000.rlib": "not a library"}))
    assert result.verdict is Verdict.PATCH_FAILED, why(result)


# --- 3. the tests themselves ------------------------------------------------------------------------------


@pytest.mark.same_in_every_sandbox
def test_an_edited_hidden_test_and_a_deleted_own_test_are_restored(grader, rust_tasks, rust_mini):
    result = grade(
        grader, rust_tasks, unfixed(rust_mini, **{"tests/mean.rs": rm.EDITED_HIDDEN, "tests/basic.rs": None})
    )
    assert result.verdict is Verdict.FAIL and not result.tampered, why(result)
    assert {"tests/mean.rs", "tests/basic.rs"} <= set(result.apply.neutralized)
    assert result.tests.all["mean::empty"] == "failed"


def test_a_test_file_the_patch_adds_is_removed_and_an_honest_fix_still_passes(grader, rust_tasks, rust_mini):
    patch = fixed(rust_mini, "", rm.OWN_UNIT_TEST, **{"tests/extra.rs": "#[test]\nfn extra() {}\n"})
    result = grade(grader, rust_tasks, patch)
    assert result.verdict is Verdict.PASS, why(result)
    assert "tests/extra.rs" in result.apply.neutralized


# --- 4. crashes and hangs ------------------------------------------------------------------------------------


def test_exit_0_inside_a_test_is_tampering(grader, rust_tasks, rust_mini):
    result = grade(grader, rust_tasks, unfixed(rust_mini, rm.EXIT_ZERO))
    assert result.verdict is Verdict.FAIL, why(result)
    assert any("exited with status 0 before libtest's summary" in t for t in result.tampered), why(result)


def test_an_abort_fails_the_test_and_those_after_it(grader, rust_tasks, rust_mini):
    result = grade(grader, rust_tasks, unfixed(rust_mini, rm.ABORT))
    assert result.verdict is Verdict.FAIL and not result.tampered, why(result)
    assert set(result.tests.all.values()) == {"failed"}  # empty aborted; many and two never ran
    assert "signal 6" in result.output


def test_a_hang_times_out(grader, rust_tasks, rust_mini):
    result = grade(grader, rust_tasks, unfixed(rust_mini, rm.HANG), "rust-hang")
    assert result.verdict is Verdict.TIMED_OUT, why(result)


# --- 5. forging a whole stream, and the canaries ----------------------------------------------------------


@pytest.mark.same_in_every_sandbox
def test_a_blanket_flip_is_caught_by_the_canaries(grader, rust_tasks, rust_mini):
    result = grade(grader, rust_tasks, unfixed(rust_mini, rm.BLANKET_FLIP, rm.FORGE_ITEMS))
    assert result.verdict is Verdict.FAIL, why(result)
    assert result.tampered, why(result)
    assert any("canary" in t or "summary says" in t for t in result.tampered), why(result)


def test_a_forgery_aimed_at_the_hidden_tests_binary_is_caught_by_its_copy(grader, rust_tasks, rust_mini):
    """Honest everywhere but in the hidden target's binary: that binary's stream is
    consistent, but the canary target's copy of mean::empty fails where its original passed."""
    result = grade(grader, rust_tasks, unfixed(rust_mini, rm.AIMED_FLIP, rm.FORGE_ITEMS))
    assert result.verdict is Verdict.FAIL, why(result)
    assert result.tests.all["mean::empty"] == "passed"  # the forged stream itself holds together
    assert "a hidden canary test that must pass was reported as failed" in result.tampered, why(result)


def test_limit_a_forger_that_runs_its_own_tests_in_children_is_not_detected(grader, rust_tasks, rust_mini):
    """The limit DECIDED_BY states: every remaining test is run for real in a child of the
    binary, only mean::empty is lied about, and the stream is complete and consistent in
    both binaries. It PASSes; the static audit's Rust rules name what it reaches for."""
    patch = unfixed(rust_mini, rm.LIMIT_FORGERY, rm.FORGE_ITEMS + "\n" + rm.TRUTHFUL_CHILD_ITEMS)
    result = grade(grader, rust_tasks, patch)
    assert result.verdict is Verdict.PASS, why(result)
    added = [line[1:] for line in patch.decode().splitlines() if line.startswith("+") and not line.startswith("+++")]
    named = {rule for rule, _, _ in rust_rules.findings("src/lib.rs", added)}
    assert {"rerun-self", "libtest-lines", "libtest-internals", "process-exit"} <= named, named


# --- the runner's own ground ------------------------------------------------------------------------------------


def test_a_binary_replaced_on_disk_runs_from_its_sealed_copy(grader, rust_tasks, rust_mini):
    """The lib's unit test (run first) replaces the hidden tests' binary with a script that
    prints a passing run; the copy made before any binary ran is what runs."""
    result = grade(grader, rust_tasks, unfixed(rust_mini, rm.SWAP_BINARY), "rust-multi")
    assert result.verdict is Verdict.FAIL and not result.tampered, why(result)
    assert result.tests.all["mean::empty"] == "failed" and result.tests.all["tests::one"] == "passed"


def test_a_daemon_left_holding_stdout_is_killed_and_not_waited_for(grader, rust_tasks, rust_mini):
    result = grade(grader, rust_tasks, fixed(rust_mini, rm.LEAVE_DAEMON))
    assert result.verdict is Verdict.PASS, why(result)
    assert result.durations["check"] < 60


# --- honest shapes ---------------------------------------------------------------------------------------------------


def test_honest_output_a_child_process_and_a_new_module_still_pass(grader, rust_tasks, rust_mini):
    noisy = grade(grader, rust_tasks, fixed(rust_mini, rm.HONEST_NOISE))
    assert noisy.verdict is Verdict.PASS and not noisy.tampered, why(noisy)
    module = grade(grader, rust_tasks, rust_mini.diff({"src/lib.rs": rm.NEW_MODULE_LIB, "src/sum.rs": rm.NEW_MODULE}))
    assert module.verdict is Verdict.PASS and not module.tampered, why(module)
