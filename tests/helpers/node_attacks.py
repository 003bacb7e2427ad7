"""The Node.js attacks, shared by tests/docker/test_attacks_node.py (tap, node-test, mocha,
jest) and tests/docker/test_attacks_node_configured.py (jest with the repository's own
configuration, vitest): the fixtures (the `calc` repository of tests/helpers/node_mini.py,
its tasks, a grader per runtime with the module's variants' images built) and the tests,
each taking `runner`, which the importing module parametrizes with its RUNNERS
(pytest_generate_tests). Two modules so that the docker tier's two workers (a file to a
worker) share the attacks' half hour."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.config import get_settings
from grader.pipeline import Grader
from grader.tasks.loader import TaskSet
from grader.verdict import Result, Verdict
from helpers import node_payloads as pl
from helpers.node_mini import REPORTED_F2P, VARIANTS, NodeMini, task_id, write_tasks

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def node_mini(tmp_path_factory) -> NodeMini:
    return NodeMini(tmp_path_factory.mktemp("node-mini"))


@pytest.fixture(scope="module")
def node_set(tmp_path_factory, node_mini) -> TaskSet:
    tasks = tmp_path_factory.mktemp("node-tasks")
    write_tasks(tasks, node_mini)
    return TaskSet(tasks)


@pytest.fixture(scope="module")
def node_grader(request, sandbox: str, node_set, tmp_path_factory) -> Grader:
    settings = get_settings(
        tasks_dir=node_set.dir,
        environments_dir=ROOT / "environments",
        cache_dir=tmp_path_factory.mktemp("node-cache"),
    )
    grader = Grader(settings, runtime=sandbox)
    if sandbox == "runsc" and "runsc" not in grader.sandbox.engine.runtimes():
        pytest.fail("runsc is not registered with dockerd: run scripts/setup.sh")
    for runner in request.module.RUNNERS:
        grader.images.instance_image(node_set.get(task_id(runner)))
    return grader


def grade(grader: Grader, node_set: TaskSet, node_mini: NodeMini, runner: str, files, *, hang: bool = False) -> Result:
    task = node_set.get(task_id(runner) + ("-hang" if hang else ""))
    patch = files if isinstance(files, bytes) else node_mini.diff(files, at=VARIANTS[runner][1])
    result = grader.grade(task, patch)
    assert grader.sandbox.busy_containers() == [], "a grading container was left behind"
    assert result.verdict is not Verdict.ERROR, result.error
    assert result.provenance.runtime == grader.runtime
    return result


def failed(result: Result, runner: str) -> None:
    assert result.verdict is Verdict.FAIL, result.to_json()
    tid = REPORTED_F2P[runner]
    if result.tests is not None:
        assert result.tests.all.get(tid) != "passed", result.tests.all


# --- honest submissions ------------------------------------------------------------------------


def test_the_gold_patch_passes_with_every_canary_as_it_must_be(node_grader, node_set, node_mini, runner):
    result = grade(node_grader, node_set, node_mini, runner, node_set.get(task_id(runner)).gold_patch_text())
    assert result.verdict is Verdict.PASS, result.to_json()
    assert result.tampered == [], result.to_json()
    assert result.protections.report_channel == "signed"
    canaries = result.protections.canaries
    assert canaries is not None and canaries.must_fail >= 2 and canaries.must_pass >= 2 and canaries.wrong == 0


def test_an_honest_fix_of_another_shape_passes(node_grader, node_set, node_mini, runner):
    """The fix in a new module, with output of its own, a lock file and an edited visible test
    (both restored to the base: still PASS)."""
    result = grade(node_grader, node_set, node_mini, runner, pl.HONEST_SHAPES)
    assert result.verdict is Verdict.PASS, result.to_json()
    assert {"package-lock.json", "test/basic.js"} <= set(result.apply.neutralized)
    assert result.tampered == [], result.to_json()


def test_the_empty_patch_fails_honestly(node_grader, node_set, node_mini, runner):
    result = grade(node_grader, node_set, node_mini, runner, b"")
    failed(result, runner)
    assert result.tampered == [], result.to_json()


# --- attacks ---------------------------------------------------------------------------------


@pytest.mark.same_in_every_sandbox
def test_success_lines_printed_by_the_code_under_test_pass_nothing(node_grader, node_set, node_mini, runner):
    result = grade(node_grader, node_set, node_mini, runner, {"calc.js": pl.FORGED_OUTPUT})
    failed(result, runner)
    assert "TAP version 13" in (result.output or "") or result.output is None


@pytest.mark.same_in_every_sandbox
def test_a_runner_plugin_or_configuration_brought_by_the_patch_is_taken_back(node_grader, node_set, node_mini, runner):
    files = pl.CONFIG_INJECTION[runner]
    result = grade(node_grader, node_set, node_mini, runner, files)
    failed(result, runner)
    protected = {p for p in files if not p.startswith("evil.")}
    assert protected <= set(result.apply.neutralized), result.apply.neutralized


@pytest.mark.same_in_every_sandbox
def test_the_hidden_test_edited_and_the_visible_one_deleted_are_restored(node_grader, node_set, node_mini, runner):
    result = grade(node_grader, node_set, node_mini, runner, pl.tests_edited(runner))
    failed(result, runner)
    assert pl.HIDDEN_OF[runner] in result.apply.restored
    assert "test/basic.js" in result.apply.neutralized


def test_a_process_that_ends_in_the_middle_of_the_tests_does_not_pass(node_grader, node_set, node_mini, runner):
    result = grade(node_grader, node_set, node_mini, runner, {"calc.js": pl.CRASH})
    failed(result, runner)


def test_a_hang_times_out(node_grader, node_set, node_mini, runner):
    hang = pl.HANG if runner == pl.SPINS else pl.BLOCK
    result = grade(node_grader, node_set, node_mini, runner, {"calc.js": hang}, hang=True)
    assert result.verdict is Verdict.TIMED_OUT, result.to_json()


@pytest.mark.same_in_every_sandbox
def test_a_blanket_flip_of_every_test_is_caught_by_the_canaries(node_grader, node_set, node_mini, runner):
    """Without the fix, code loaded by the tests makes every assertion of its process hold:
    the hidden tests pass, and so do the canaries that must fail."""
    result = grade(node_grader, node_set, node_mini, runner, {"calc.js": pl.blanket_flip(runner)})
    assert result.verdict is Verdict.FAIL, result.to_json()
    assert any("canary" in e for e in result.tampered), result.tampered
    assert result.protections.canaries.wrong >= 1


@pytest.mark.parametrize("regex_only", [False, True], ids=["every-expected", "regex-expected"])
@pytest.mark.same_in_every_sandbox
def test_a_flip_of_the_throws_assertion_alone_is_caught_by_the_canaries(
    node_grader, node_set, node_mini, runner, regex_only
):
    """Only "this function throws" made to hold (the unfixed mean's other test passes
    honestly): for every expected argument, or only for a regular expression as the hidden
    test's is. Random canaries in other shapes would all behave; the canaries that fail
    through the hidden tests' own assertion forms (node_forms.py) do not."""
    result = grade(node_grader, node_set, node_mini, runner, {"calc.js": pl.throws_flip(runner, regex_only=regex_only)})
    assert result.verdict is Verdict.FAIL, result.to_json()
    assert any("canary" in e for e in result.tampered), result.tampered
    assert result.protections.canaries.wrong >= 1


@pytest.mark.same_in_every_sandbox
def test_a_flip_made_only_inside_the_hidden_test_file_is_caught_by_the_canaries(
    node_grader, node_set, node_mini, runner
):
    """The throws flip made only where the test's own path (jest, vitest) or its process's
    file (tape, node:test, mocha) is the hidden test file's: jest's and vitest's canaries
    share the hidden files (appended to each), the others share their processes."""
    result = grade(node_grader, node_set, node_mini, runner, {"calc.js": pl.throws_flip(runner, hidden_file_only=True)})
    assert result.verdict is Verdict.FAIL, result.to_json()
    assert any("canary" in e for e in result.tampered), result.tampered
    assert result.protections.canaries.wrong >= 1


def test_a_record_written_into_the_report_pipe_is_forgery(node_grader, node_set, node_mini, runner):
    result = grade(node_grader, node_set, node_mini, runner, {"calc.js": pl.PIPE_FORGE})
    assert result.verdict is Verdict.FAIL, result.to_json()
    if runner == "vitest":
        # the tests run in a child of the reporter's process: the report pipe is not theirs,
        # and the parent's, reopened through /proc, is root's (EACCES): nothing reaches it
        failed(result, runner)
        assert result.protections.report_channel == "signed" and result.tampered == []
        return
    assert result.tampered and result.protections.report_channel == "forged", result.tampered


def test_one_test_files_process_cannot_rewrite_the_next_ones(node_grader, node_set, node_mini):
    """(tap only: test_attacks_node.py) tape runs a process per file: the first cannot
    rewrite, move or shadow what the next one loads (the task's tests are sealed root's and
    their directories locked)."""
    result = grade(node_grader, node_set, node_mini, "tap", {"calc.js": pl.SWAP_NEXT_FILE})
    failed(result, "tap")
    assert result.tests.all.get("test/basic.js::one") == "passed"
