"""What a campaign cost (grader.metrics: usage, legacy, one trial, and how they are printed), by hand:
pure figures, no service."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from grader import metrics
from grader.metrics import GRADED, IMPORTED, Attempt, legacy, run_summary, usage
from grader.schemas import PredictionIn, SubmissionIn, read_item


def at(task: str, trial: int | None, verdict: str = "PASS", **kw) -> Attempt:
    return Attempt(task_id=task, verdict=verdict, trial=trial, **kw)


def test_the_mean_is_over_complete_trials_and_the_total_over_all():
    attempts = [
        at("a", 0, cost_usd=1.0, input_tokens=10, api_seconds=2.0, wall_seconds=5.0),
        at("b", 0, "FAIL", cost_usd=3.0, input_tokens=30, api_seconds=4.0, wall_seconds=9.0),
        at("a", 1, cost_usd=2.0, input_tokens=20, api_seconds=1.0, wall_seconds=3.0),
        at("b", 1, "ERROR", cost_usd=4.0, input_tokens=40, api_seconds=3.0, wall_seconds=6.0),  # the model was paid
        at("a", 2, cost_usd=100.0, input_tokens=1000, api_seconds=50.0, wall_seconds=60.0),  # b not tried: incomplete
    ]
    u = usage(attempts)
    assert (u.trials, u.complete_trials) == (3, 2)
    assert u.cost_usd == metrics.Spent(total=110.0, per_trial=5.0, reported=5, attempts=5)  # (1+3+2+4) / 2
    assert u.input_tokens.total == 1100 and isinstance(u.input_tokens.total, int)
    assert u.input_tokens.per_trial == 50.0
    assert (u.api_seconds.per_trial, u.wall_seconds.per_trial) == (5.0, 11.5)  # kept apart
    assert u.output_tokens == metrics.Spent(total=None, per_trial=None, reported=0, attempts=5)


def test_runs_of_different_trial_counts_compare_per_trial():
    one = [at("a", 0, cost_usd=1.0), at("b", 0, cost_usd=2.0)]
    three = [at(t, n, cost_usd=c) for n in range(3) for t, c in (("a", 1.0), ("b", 2.0))]
    assert usage(one).cost_usd.per_trial == usage(three).cost_usd.per_trial == 3.0
    assert (usage(one).cost_usd.total, usage(three).cost_usd.total) == (3.0, 9.0)


def test_an_unreported_attempt_in_a_complete_trial_leaves_no_mean():
    u = usage([at("a", 0, cost_usd=1.0), at("b", 0), at("a", 1, cost_usd=5.0)])
    assert u.cost_usd == metrics.Spent(total=6.0, per_trial=None, reported=2, attempts=3)
    # an unreported attempt outside every complete trial leaves the mean alone
    u = usage([at("a", 0, cost_usd=1.0), at("b", 0, cost_usd=1.0), at("a", 1)])
    assert u.cost_usd.per_trial == 2.0 and u.cost_usd.reported == 2


def test_unnumbered_attempts_are_one_trial_and_no_attempts_cost_nothing_said():
    u = usage([at("a", None, cost_usd=0.5), at("b", None, cost_usd=0.25)])
    assert (u.trials, u.complete_trials, u.cost_usd.per_trial) == (1, 1, 0.75)
    empty = usage([])
    assert (empty.trials, empty.complete_trials, empty.cost_usd.total, empty.cost_usd.per_trial) == (0, 0, None, None)


def test_reasoning_levels_are_counted_lowest_first():
    u = usage([at("a", 0, reasoning_level="high"), at("b", 0, reasoning_level="low"), at("c", 0)])
    assert list(u.reasoning_levels.items()) == [("low", 1), ("high", 1)]


def test_legacy_is_where_a_runs_results_came_from():
    lines = [at("a", None, imported=True), at("b", None, "FAIL", imported=True)]  # SWE-bench prediction lines
    # graded here (a fresh predictions upload): never legacy, however its attempts were sent
    assert not legacy(lines, 1, GRADED) and not legacy([at("a", None)], 1, GRADED)
    # imported from elsewhere: legacy, whatever its trials
    assert legacy(lines, 1, IMPORTED) and legacy(lines, 2, IMPORTED) and not legacy([], 0, IMPORTED)
    # a run of no recorded origin (made before migration 0014) keeps the rule of its day
    assert legacy(lines, 1)
    assert not legacy(lines, 2)  # several trials
    assert not legacy([*lines, at("c", 0)], 1)  # one attempt not a prediction line
    assert not legacy([], 0)


def test_one_trial_measures_no_stability_whatever_its_origin():
    lines = [at("a", None, imported=True), at("b", None, "FAIL", imported=True)]
    fresh = run_summary(lines, origin=GRADED)  # a predictions upload graded here: one trial, not legacy
    assert not fresh.legacy and fresh.single_trial
    assert fresh.stability is None and fresh.pass_any_at_n is None
    assert all(r.stability is None for r in fresh.per_task.values())
    assert fresh.resolved.numerator == 1 and fresh.solve_rate.value == 0.5  # measured as SWE-bench measures it
    json.dumps(fresh.to_dict())  # still plain JSON
    old = run_summary(lines)  # no origin recorded: legacy as it was
    assert old.legacy and old.single_trial and old.stability is None and old.pass_any_at_n is None
    native = run_summary([at("a", None), at("b", None, "FAIL")], origin=GRADED)  # one patch at a time
    assert not native.legacy and native.single_trial and native.pass_any_at_n is None and native.stability is None
    imported = run_summary([at("a", 0, imported=True), at("a", 1, imported=True)], origin=IMPORTED)
    assert imported.legacy and not imported.single_trial  # imported with two trials: stability measured
    assert imported.stability == {"stable_pass": 1, "stable_fail": 0, "flaky": 0}
    twice = run_summary([at("a", 0), at("a", 1), at("b", 0, "FAIL"), at("b", 1, "FAIL")], origin=GRADED)
    assert twice.stability == {"stable_pass": 1, "stable_fail": 1, "flaky": 0} and not twice.single_trial
    assert twice.pass_any_at_n is not None and twice.pass_any_at_n.numerator == 1
    errors = run_summary([at("a", None, "ERROR")], origin=GRADED)  # nothing valid: no trial at all, not one
    assert not errors.single_trial and errors.pass_any_at_n == metrics.Figure(None, 0, 0, None)


def test_the_figures_are_printed_in_their_units():
    assert (metrics.usd(12.345), metrics.usd(0.5), metrics.usd(0.01234)) == ("$12.35", "$0.50", "$0.0123")
    assert (metrics.usd(0), metrics.usd(None), metrics.usd(1234.5)) == ("$0.00", "—", "$1,234.50")
    assert (metrics.tokens(950), metrics.tokens(12_345), metrics.tokens(4_560_000)) == ("950", "12.3k", "4.56M")
    assert (metrics.seconds(42.1), metrics.seconds(750), metrics.seconds(7200)) == ("42.1 s", "12.5 min", "2.0 h")
    fig = {"total": 3.0, "per_trial": None, "reported": 2, "attempts": 3}
    assert metrics.spent(fig, metrics.usd) == ("—", "$3.00 (2 of 3 attempts said)")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("cost_usd", -1.0),
        ("cost_usd", float("nan")),
        ("cost_usd", float("inf")),
        ("cost_usd", metrics.MAX_COST_USD * 2),
        ("input_tokens", metrics.MAX_TOKENS + 1),
        ("output_tokens", 2.5),
        ("api_seconds", -0.5),
        ("wall_seconds", float("nan")),
        ("reasoning_level", "maximum"),
        ("cost_usd", "1"),
    ],
)
def test_the_schema_refuses_bad_usage_naming_the_field(field, value):
    with pytest.raises(ValidationError) as caught:
        SubmissionIn.model_validate({"task_id": "t", "patch": "", field: value})
    assert [e["loc"] for e in caught.value.errors()] == [(field,)]
    read = read_item({"instance_id": "t", "model_patch": "", field: value}, "run", {})
    assert read.sub.reason == "invalid_fields" and field in read.sub.message  # type: ignore[union-attr]


def test_a_prediction_keeps_what_it_cost_and_is_marked_imported():
    line = {"instance_id": "t", "model_patch": "", "cost_usd": 0.5, "output_tokens": 7, "reasoning_level": "none"}
    assert PredictionIn.model_validate(line).cost_usd == 0.5
    read = read_item(line, "run", {"reasoning_level": "high"})
    sub = read.sub
    assert not read.ignored
    assert (sub.cost_usd, sub.output_tokens, sub.reasoning_level, sub.imported) == (0.5, 7, "none", True)  # type: ignore[union-attr]
    ours = read_item({"task_id": "t", "patch": ""}, "run", {"reasoning_level": "high"}).sub
    assert (ours.reasoning_level, ours.imported) == ("high", None)  # type: ignore[union-attr]


def test_how_an_item_came_is_no_part_of_its_idempotency_hash():
    """A prediction batch retried across the upgrade that began keeping `imported` is the
    same request, not a conflict; what it cost is part of what it says."""
    line = read_item({"instance_id": "t", "model_patch": "x"}, "run", {}).sub
    ours = read_item({"task_id": "t", "patch": "x"}, "run", {}).sub
    assert line.imported and not ours.imported  # type: ignore[union-attr]
    assert line.request_hash() == ours.request_hash()  # type: ignore[union-attr]
    costly = read_item({"task_id": "t", "patch": "x", "cost_usd": 1.0}, "run", {}).sub
    assert costly.request_hash() != ours.request_hash()  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        ('{"cost_usd": NaN}', "cost_usd: NaN is not a JSON number"),
        ('{"submissions": [{"api_seconds": -Infinity}]}', "submissions[0].api_seconds: -Infinity"),
        ('{"cost_usd": NaN, "x": [' + "[" * 100_000, "NaN is not a JSON number"),  # too deep past it
        ('{"cost_usd": Infinity, "x": }', "NaN is not a JSON number"),  # broken past it
    ],
)
def test_nan_in_a_body_is_422_naming_its_field_never_a_500(raw, said):
    from grader.api.errors import ApiError, parse_json

    with pytest.raises(ApiError) as caught:
        parse_json(raw)
    assert caught.value.status == 422 and said in caught.value.message
