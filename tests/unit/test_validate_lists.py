"""SWE-bench's rule for deriving FAIL_TO_PASS / PASS_TO_PASS from runs of the tests at the
base and with the gold patch (grader.validate.lists_from_runs): pure, no Docker. The
import that uses it, in containers: tests/docker/test_importers_docker.py."""

from __future__ import annotations

from grader.validate import lists_from_runs

P, F, E = "passed", "failed", "error"


def test_what_the_gold_fixes_and_what_it_keeps():
    base = [{"a": F, "b": P, "c": E}] * 3
    gold = [{"a": P, "b": P, "c": P}] * 3
    got = lists_from_runs(base, gold)
    assert (got.fail_to_pass, got.pass_to_pass, got.dropped) == (["a", "c"], ["b"], [])


def test_a_test_that_flips_in_any_run_is_left_out():
    base = [{"a": F, "b": P, "c": P}, {"a": F, "b": F, "c": P}, {"a": F, "b": P, "c": P}]
    gold = [{"a": P, "b": P, "c": P}, {"a": P, "b": P, "c": F}, {"a": P, "b": P, "c": P}]
    got = lists_from_runs(base, gold)
    # b flips at the base, c fails once with the gold: neither is a list's
    assert (got.fail_to_pass, got.pass_to_pass, got.dropped) == (["a"], [], ["b", "c"])


def test_a_test_missing_from_a_gold_run_or_failing_with_the_gold_is_left_out():
    base = [{"a": F, "old": P}, {"a": F, "old": P}]
    gold = [{"a": P, "new": P}, {"a": P}]  # "new" ran once only; "old" is gone with the gold
    got = lists_from_runs(base, gold)
    assert (got.fail_to_pass, got.pass_to_pass, got.dropped) == (["a"], [], ["new", "old"])


def test_a_test_new_with_the_gold_is_fail_to_pass():
    """Absent at the base (its file does not compile there, or it is new): not passing there."""
    got = lists_from_runs([{}, {}], [{"x": P}, {"x": P}])
    assert (got.fail_to_pass, got.pass_to_pass) == (["x"], [])


def test_no_runs_no_lists():
    got = lists_from_runs([], [])
    assert (got.fail_to_pass, got.pass_to_pass, got.dropped) == ([], [], [])
