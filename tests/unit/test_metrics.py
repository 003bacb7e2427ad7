"""The metric functions against numbers worked out by hand: the arithmetic is in the
comments or written out in the assertion, never taken from the function under test."""

import datetime as dt
import json
import math

import pytest

from grader.metrics import (
    Attempt,
    Figure,
    bootstrap_ci,
    file_localization,
    in_window,
    mcnemar_exact,
    mean_pass_at_k,
    normalize_text,
    paired_comparison,
    pass_at_k,
    pass_ks,
    resolved,
    run_summary,
    similarity,
    stability,
    wilson_interval,
)
from grader.verdict import Verdict

Z = 1.959963984540054  # two-sided 95%


def test_file_localization_by_hand():
    # patch {a, b, c}, gold {a, d}: 1 hit; P = 1/3, R = 1/2, F1 = 2PR/(P+R) = 0.4
    p, r, f1 = file_localization(["a", "b", "c"], ["a", "d"])
    assert p == pytest.approx(1 / 3) and r == pytest.approx(0.5) and f1 == pytest.approx(0.4)


def test_file_localization_edges():
    assert file_localization([], ["a"]) == (None, 0.0, None)
    assert file_localization(["a"], []) == (0.0, None, None)
    assert file_localization(["x"], ["y"]) == (0.0, 0.0, 0.0)
    assert file_localization(["a", "a"], ["a"]) == (1.0, 1.0, 1.0)


def test_similarity():
    assert similarity("abc", "abc") == 1.0
    assert similarity("", "abc") == 0.0
    # SequenceMatcher: 2*M/T with M=3 matches ("abc") and T=7 characters
    assert similarity("abcd", "abc") == pytest.approx(6 / 7)


def test_similarity_has_no_autojunk_cliff():
    long = "a" * 300 + "b"
    assert similarity(long, "a" * 300) > 0.99


def test_normalize():
    assert normalize_text("a \r\nb\t\r\n\r\n", line_endings=True, trailing_whitespace=True) == "a\nb\n"
    assert normalize_text("a\r\n", line_endings=True, trailing_whitespace=False) == "a\n"
    assert normalize_text("a \n", line_endings=False, trailing_whitespace=False) == "a \n"


def test_pass_at_k_by_hand():
    assert pass_at_k(10, 0, 1) == 0.0
    assert pass_at_k(10, 10, 5) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    # 1 - C(7,5)/C(10,5) = 1 - 21/252
    assert pass_at_k(10, 3, 5) == pytest.approx(1 - 21 / 252)
    assert pass_at_k(5, 1, 5) == 1.0


def test_pass_at_k_is_stable_for_large_n():
    v = pass_at_k(10_000, 1, 10)
    assert v == pytest.approx(1 - math.comb(9999, 10) / math.comb(10_000, 10))


def test_pass_at_k_rejects_nonsense():
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 5)


# --- intervals and tests ---------------------------------------------------------------------
def test_wilson_interval_by_hand():
    # 8/10: denom = 1 + Z^2/10 = 1.384146; centre = (0.8 + Z^2/20) / denom = 0.992073 / 1.384146 = 0.716742
    # half = Z * sqrt(0.8*0.2/10 + Z^2/400) / denom = 1.959964 * 0.160011 / 1.384146 = 0.226577
    lo, hi = wilson_interval(8, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.4902, 0.9433)
    # n/n: half = (Z^2/2n) / denom, so lo = 1 / (1 + Z^2/n) = n / (n + Z^2) and hi = 1; 0/n mirrors it
    assert wilson_interval(10, 10) == pytest.approx((10 / (10 + Z * Z), 1.0))
    assert wilson_interval(0, 10) == pytest.approx((0.0, Z * Z / (10 + Z * Z)))
    # z = 1, 1/2: denom = 1.5, centre = (0.5 + 0.25) / 1.5 = 0.5, half = sqrt(0.125 + 0.0625) / 1.5
    half = math.sqrt(0.1875) / 1.5
    assert wilson_interval(1, 2, z=1.0) == pytest.approx((0.5 - half, 0.5 + half))


def test_wilson_interval_edges():
    assert wilson_interval(0, 0) is None  # no evidence, no interval
    with pytest.raises(ValueError):
        wilson_interval(3, 2)
    with pytest.raises(ValueError):
        wilson_interval(-1, 2)


def test_mcnemar_exact_by_hand():
    assert mcnemar_exact(1, 6) == pytest.approx(2 * (1 + 7) / 128)  # 2 * (C(7,0) + C(7,1)) / 2^7 = 0.125
    assert mcnemar_exact(6, 1) == mcnemar_exact(1, 6)  # two-sided: symmetric
    assert mcnemar_exact(0, 5) == pytest.approx(2 / 32)  # 2 * C(5,0) / 2^5
    assert mcnemar_exact(2, 8) == pytest.approx(2 * (1 + 10 + 45) / 1024)  # C(10,0..2) = 1, 10, 45
    assert mcnemar_exact(2, 2) == 1.0  # 2 * (1 + 4 + 6) / 16 = 1.375, capped at 1
    assert mcnemar_exact(0, 0) == 1.0  # no discordant pair: no evidence of a difference
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 3)


def test_bootstrap_ci_by_hand():
    mean = lambda s: sum(s) / len(s)  # noqa: E731
    # every resample of a constant is that constant
    assert bootstrap_ci([0.5, 0.5, 0.5], mean) == (0.5, 0.5)
    # two items {0, 1}: a resample's mean is 0 with probability 1/4, 1/2 with 1/2, 1 with 1/4, so the
    # 2.5% and 97.5% points of 2,000 resamples are 0 and 1
    assert bootstrap_ci([0, 1], mean) == (0.0, 1.0)
    assert bootstrap_ci([], mean) is None
    assert bootstrap_ci([1, 2], lambda s: None) is None  # every resample dropped


def test_bootstrap_ci_percentile_ranks():
    # a statistic that returns 0, 1, 2, ... in turn makes the sorted resample statistics 0..R-1, so
    # the bounds are the ranks: floor(0.025 * 1999) = 49 and ceil(0.975 * 1999) = ceil(1949.025) = 1950
    counter = iter(range(10_000))
    assert bootstrap_ci([1], lambda s: next(counter)) == (49, 1950)
    # R = 100, alpha = 0.1: floor(0.05 * 99) = 4, ceil(0.95 * 99) = ceil(94.05) = 95
    counter = iter(range(10_000))
    assert bootstrap_ci([1], lambda s: next(counter), resamples=100, alpha=0.1) == (4, 95)


def test_bootstrap_ci_rejects_nonsense():
    with pytest.raises(ValueError):
        bootstrap_ci([1], max, resamples=0)
    with pytest.raises(ValueError):
        bootstrap_ci([1], max, alpha=1.0)


def test_bootstrap_ci_is_deterministic_resamples_whole_items_and_contains_the_estimate():
    items = [0, 1, 1, 0, 1, 1, 1, 0, 1, 1]
    mean = lambda s: sum(s) / len(s)  # noqa: E731
    assert bootstrap_ci(items, mean, seed=7) == bootstrap_ci(items, mean, seed=7)
    lo, hi = bootstrap_ci(items, mean)
    assert 0.0 <= lo <= 7 / 10 <= hi <= 1.0 and lo < hi
    seen = []
    bootstrap_ci(items, lambda s: seen.append(s) or 0.0, resamples=50)
    assert len(seen) == 50 and all(len(s) == len(items) and set(s) <= {0, 1} for s in seen)
    # a narrower alpha gives a wider interval from the same resamples
    lo99, hi99 = bootstrap_ci(items, mean, alpha=0.01)
    assert lo99 <= lo and hi <= hi99


def test_stability_classes():
    assert stability(["PASS", "PASS", "PASS"]) == "stable_pass"
    assert stability(["PASS", "ERROR", "PASS"]) == "stable_pass"  # ERROR is not a trial of the system
    assert stability(["PASS", "ERROR"]) is None  # one valid trial says nothing of how steady it is
    assert stability(["FAIL"]) is None and stability(["PASS"]) is None
    assert stability(["FAIL", "PATCH FAILED", "TIMED OUT"]) == "stable_fail"
    assert stability(["PASS", "ERROR", "TIMED OUT"]) == "flaky"
    assert stability(["ERROR", "ERROR"]) is None and stability([]) is None


def test_mean_pass_at_k_by_hand():
    per = {"a": (3, 1), "b": (5, 0), "c": (5, 5), "d": (1, 1)}
    # k=1: c/n per task: 1/3, 0, 1, 1 -> (7/3) / 4 = 7/12
    one = mean_pass_at_k(per, 1)
    assert one.value == pytest.approx(7 / 12) and one.numerator == pytest.approx(7 / 3) and one.denominator == 4
    # k=2: a 1 - C(2,2)/C(3,2) = 2/3; b 0; c 1; d has n=1 < 2, left out -> (2/3 + 0 + 1) / 3 = 5/9
    two = mean_pass_at_k(per, 2)
    assert two.value == pytest.approx(5 / 9) and two.denominator == 3
    # k=5: only b (0) and c (1) have 5 trials -> 1/2; the interval is Wilson's over those 2 tasks
    five = mean_pass_at_k(per, 5)
    assert (five.value, five.numerator, five.denominator, five.ci) == (0.5, 1.0, 2, wilson_interval(1, 2))
    assert mean_pass_at_k(per, 10) is None and mean_pass_at_k({}, 1) is None


# --- runs ------------------------------------------------------------------------------------
def _a(task, verdict, trial=0, **kw):
    return Attempt(task_id=task, verdict=verdict, trial=trial, **kw)


def test_attempt_checks_its_verdict():
    assert _a("t", Verdict.PATCH_FAILED).verdict == "PATCH FAILED"  # stored as the wire string
    with pytest.raises(ValueError):
        _a("t", "pass")


def _campaign():
    """Four tasks, three trials each; the hand computation is in test_run_summary_by_hand."""
    t1 = dict(
        suite="swe", difficulty="easy", language="python", prompt_variant="minimal", created_at=dt.date(2023, 1, 10)
    )
    t2 = dict(
        suite="swe", difficulty="hard", language="python", prompt_variant="guided", created_at=dt.date(2023, 6, 1)
    )
    t3 = dict(
        suite="git", difficulty="medium", language="shell", prompt_variant="minimal", created_at=dt.date(2024, 2, 1)
    )
    t4 = dict(suite="git", prompt_variant="guided", created_at=dt.date(2024, 3, 1))
    return [
        _a("t1", "PASS", 0, f1=1.0, precision=1.0, **t1),
        _a("t1", "PASS", 1, f1=0.5, **t1),
        _a("t1", "PASS", 2, **t1),
        _a("t2", "PASS", 0, f1=0.0, precision=0.25, **t2),
        _a("t2", "FAIL", 1, **t2),
        _a("t2", "TIMED OUT", 2, **t2),
        _a("t3", "ERROR", 2, f1=0.9, **t3),
        _a("t3", "FAIL", 1, **t3),
        _a("t3", "PATCH FAILED", 0, **t3),
        _a("t4", "ERROR", 0, **t4),
        _a("t4", "ERROR", 1, **t4),
        _a("t4", "ERROR", 2, **t4),
    ]


def test_run_summary_by_hand():
    s = run_summary(_campaign())
    # 12 attempts, 4 ERROR (t3 once, t4 three times): 8 valid, and the run is incomplete
    assert (s.attempts, s.valid, s.errors, s.incomplete) == (12, 8, 4, True)
    # per task (n valid, c PASS, graded): t1 (3, 3, 3), t2 (3, 1, 2), t3 (2, 0, 1); t4 has no valid trial
    # and enters no rate: 3 tasks, at most 3 trials
    assert (s.tasks, s.trials) == (3, 3)
    # resolved (c > n/2): t1 only
    assert (s.resolved.numerator, s.resolved.denominator) == (1, 3) and s.resolved.ci == wilson_interval(1, 3)
    # solve rate: (3/3 + 1/3 + 0/2) / 3 = 4/9, each task weighing the same; Wilson over the 3 tasks
    assert s.solve_rate.value == pytest.approx(4 / 9) and s.solve_rate.numerator == pytest.approx(4 / 3)
    assert s.solve_rate.denominator == 3 and s.solve_rate.ci == pytest.approx(wilson_interval(4 / 3, 3))
    assert s.one_attempt_success == s.solve_rate
    # graded without PATCH FAILED or TIMED OUT: (3/3 + 2/3 + 1/2) / 3 = 13/18
    assert s.success_rate.value == pytest.approx(13 / 18) and s.success_rate.numerator == pytest.approx(13 / 6)
    # pass@k for k = 1..3: pass@1 is the solve rate; pass@2: t1 1, t2 1 - C(2,2)/C(3,2) = 2/3, t3 0 -> 5/9;
    # pass@3: t3 has 2 trials and is left out, t1 1, t2 (n - c = 2 < 3) 1 -> 1 over 2 tasks
    assert list(s.pass_at_k) == ["1", "2", "3"]
    assert s.pass_at_k["1"].value == pytest.approx(4 / 9) and s.pass_at_k["1"].denominator == 3
    assert s.pass_at_k["2"].value == pytest.approx(5 / 9)
    assert (s.pass_at_k["3"].value, s.pass_at_k["3"].denominator) == (1.0, 2)
    lo, hi = s.pass_at_k["3"].ci
    assert lo < 1.0 == hi  # not the zero-width [1, 1] a bootstrap of two 1s gives
    # passed at least once: t1, t2 of the 3 tasks with a valid trial
    assert (s.pass_any_at_n.numerator, s.pass_any_at_n.denominator) == (2, 3)
    assert s.stability == {"stable_pass": 1, "stable_fail": 1, "flaky": 1}
    t3 = s.per_task["t3"]  # given in the order 2, 1, 0; shown in trial order
    assert (t3.n, t3.c, t3.graded, t3.errors, t3.resolved, t3.stability, t3.verdicts) == (
        2,
        0,
        1,
        1,
        False,
        "stable_fail",
        ["PATCH FAILED", "FAIL", "ERROR"],
    )
    t4 = s.per_task["t4"]
    assert (t4.n, t4.c, t4.errors, t4.resolved, t4.stability) == (0, 0, 3, False, None)
    assert list(s.per_task) == ["t1", "t2", "t3", "t4"]
    assert s.task_set is None  # asked for with task_set=


def test_run_summary_over_a_task_set_counts_unattempted_tasks_as_unresolved():
    # the suite has t1..t6 and t9; the run graded t1..t4 (t4 only ERRORs) and t8, which is not in it
    attempts = _campaign() + [_a("t8", "PASS")]
    ts = run_summary(attempts, task_set=["t1", "t2", "t3", "t4", "t5", "t6", "t9"]).task_set
    # the set and t8: 8 tasks; attempted with a valid trial: t1, t2, t3, t8; resolved t1, t8
    assert (ts.tasks, ts.attempted) == (8, 4)
    assert (ts.resolved.numerator, ts.resolved.denominator, ts.resolved.value) == (2, 8, 0.25)
    # solve rate: (1 + 1/3 + 0 + 1) / 8
    assert ts.solve_rate.value == pytest.approx((7 / 3) / 8) and ts.solve_rate.denominator == 8
    # one task resolved of a 1-task set is 1 of 1; over a 5-task set it is 1 of 5
    one = [_a("only", "PASS")]
    assert run_summary(one, task_set=["only"]).task_set.resolved.value == 1.0
    assert run_summary(one, task_set=["only", "b", "c", "d", "e"]).task_set.resolved.numerator == 1


def _fig(f):
    return f.numerator, f.denominator


def _val(f):
    return f.numerator, f.denominator


def test_run_summary_breakdowns_by_hand():
    b = run_summary(_campaign()).breakdowns
    suite = b["suite"]
    # swe: t1 (3 of 3 passed, 3 graded), t2 (1 of 3, 2 graded): resolved 1 of 2; solve (1 + 1/3) / 2;
    # success (1 + 2/3) / 2
    swe = suite["swe"]
    assert (_fig(swe["resolved"]), swe["tasks"]) == ((1, 2), 2)
    assert swe["solve_rate"].value == pytest.approx(2 / 3) and swe["success_rate"].value == pytest.approx(5 / 6)
    # git: t3 (0 of 2, 1 graded; its ERROR is out), t4 only ERRORs: a task of the suite, in no rate
    git = suite["git"]
    assert (_fig(git["resolved"]), _fig(git["solve_rate"]), _fig(git["success_rate"]), git["tasks"]) == (
        (0, 1),
        (0, 1),
        (0.5, 1),
        2,
    )
    # difficulty: t4 has none and is left out of this breakdown
    assert {k: v["solve_rate"].value for k, v in b["difficulty"].items()} == {
        "easy": 1.0,
        "hard": pytest.approx(1 / 3),
        "medium": 0.0,
    }
    assert {k: _fig(v["resolved"]) for k, v in b["language"].items()} == {"python": (1, 2), "shell": (0, 1)}
    # minimal: t1 + t3 -> resolved 1 of 2, solve (1 + 0) / 2, success (1 + 1/2) / 2; guided: t2 (+ t4, no valid trial)
    pv = b["prompt_variant"]
    assert (
        _fig(pv["minimal"]["resolved"]),
        pv["minimal"]["solve_rate"].value,
        pv["minimal"]["success_rate"].value,
    ) == ((1, 2), 0.5, 0.75)
    assert (_fig(pv["guided"]["resolved"]), pv["guided"]["tasks"]) == ((0, 1), 2)
    assert pv["guided"]["solve_rate"].value == pytest.approx(1 / 3)


def test_a_breakdown_by_a_value_a_tasks_attempts_do_not_share_reduces_each_group_alone():
    # t1: PASS with variant a, FAIL with b; t2: PASS with a, PASS with none; both of suite s
    attempts = [
        _a("t1", "PASS", 1, suite="s", prompt_variant="a"),
        _a("t1", "FAIL", 2, suite="s", prompt_variant="b"),
        _a("t2", "PASS", 1, suite="s", prompt_variant="a"),
        _a("t2", "PASS", 2, suite="s"),
    ]
    b = run_summary(attempts).breakdowns
    # variant a: t1 [PASS] and t2 [PASS], both resolved; b: t1 [FAIL]. Not t1's whole record
    # (1 of 2 passed, not resolved): a group holds the attempts of its value only
    assert {k: (_fig(v["resolved"]), v["tasks"]) for k, v in b["prompt_variant"].items()} == {
        "a": ((2, 2), 2),
        "b": ((0, 1), 1),
    }
    # suite s, shared by every attempt of a task: t1 (1 of 2, not resolved), t2 (2 of 2)
    assert (_fig(b["suite"]["s"]["resolved"]), b["suite"]["s"]["solve_rate"].value) == ((1, 2), 0.75)
    assert b["language"] == {} and b["difficulty"] == {}  # no attempt says one


def test_run_summary_localization_by_hand():
    loc = run_summary(_campaign()).localization
    # F1 on valid attempts: 1.0, 0.5, 0.0 (t3's 0.9 was an ERROR attempt) -> 1.5 / 3
    assert (loc["f1"].value, loc["f1"].numerator, loc["f1"].denominator) == (0.5, 1.5, 3)
    assert (loc["precision"].value, loc["precision"].denominator) == ((1.0 + 0.25) / 2, 2)
    assert (loc["recall"].value, loc["recall"].denominator) == (None, 0)


def test_run_summary_time_window_is_inclusive():
    # t2 is dated on `since`, t3 on `until`: both in; t1 (before) and t4 (after) out
    s = run_summary(_campaign(), since=dt.date(2023, 6, 1), until=dt.date(2024, 2, 1))
    assert list(s.per_task) == ["t2", "t3"] and s.window == {"since": "2023-06-01", "until": "2024-02-01"}
    # t2 PASS, FAIL, TIMED OUT (1 of 3) + t3 PATCH FAILED, FAIL, ERROR (0 of 2): (1/3 + 0) / 2, 1 error
    assert s.solve_rate.value == pytest.approx(1 / 6) and s.solve_rate.denominator == 2
    assert (s.errors, s.incomplete) == (1, True)
    assert s.pass_at_k["1"] == s.solve_rate
    # from 2024 only t3 and t4 remain; a window without tasks is empty, not an error
    assert set(run_summary(_campaign(), since=dt.date(2024, 1, 1)).per_task) == {"t3", "t4"}
    assert run_summary(_campaign(), until=dt.date(2022, 12, 31)).attempts == 0
    assert run_summary(_campaign()).window == {"since": None, "until": None}
    with pytest.raises(ValueError):
        run_summary(_campaign(), since=dt.date(2024, 1, 2), until=dt.date(2024, 1, 1))


def test_window_and_undated_tasks():
    attempts = [_a("dated", "PASS", created_at=dt.date(2024, 5, 1)), _a("undated", "FAIL")]
    assert set(run_summary(attempts).per_task) == {"dated", "undated"}  # no window: everything counts
    assert set(run_summary(attempts, since=dt.date(2024, 1, 1)).per_task) == {"dated"}
    assert in_window(dt.datetime(2024, 5, 1, 23, 59), dt.date(2024, 5, 1), dt.date(2024, 5, 1))  # a datetime too
    assert not in_window(None, None, dt.date(2030, 1, 1))


def test_run_summary_pass_at_5_leaves_out_short_tasks():
    attempts = [_a("x", v, i) for i, v in enumerate(["PASS", "FAIL", "FAIL", "FAIL", "FAIL"])]
    attempts += [_a("y", v, i) for i, v in enumerate(["FAIL", "FAIL", "PASS", "FAIL", "FAIL", "FAIL"])]
    attempts += [_a("z", "PASS", 0), _a("z", "PASS", 1)]
    s = run_summary(attempts)
    # pass@k for k = 1 .. 6, the most trials a task had (y)
    assert list(s.pass_at_k) == ["1", "2", "3", "4", "5", "6"] and s.trials == 6
    # pass@5: x has n - c = 4 < 5 -> 1; y: 1 - C(5,5)/C(6,5) = 5/6; z (2 trials) left out -> (1 + 5/6) / 2
    assert s.pass_at_k["5"].value == pytest.approx(11 / 12) and s.pass_at_k["5"].denominator == 2
    # pass@6: y alone, n - c = 5 < 6 -> 1
    assert (s.pass_at_k["6"].value, s.pass_at_k["6"].denominator) == (1.0, 1)
    # pass@1 over all three: (1/5 + 1/6 + 2/2) / 3 = (6 + 5 + 30) / 90
    assert s.pass_at_k["1"].value == pytest.approx(41 / 90) and s.pass_at_k["1"].denominator == 3
    assert s.stability == {"stable_pass": 1, "stable_fail": 0, "flaky": 2}


def test_intervals_are_over_tasks_and_never_zero_width():
    # every task passed one of its two trials: the unit sampled is the task (10 of them), not the 20
    # attempts; a bootstrap over tasks would say [0.5, 0.5], as if 10 tasks settled the rate
    s = run_summary([_a(f"t{i}", v, j) for i in range(10) for j, v in enumerate(["PASS", "FAIL"])])
    assert s.pass_at_k["1"].value == 0.5 and s.pass_at_k["1"].ci == wilson_interval(5, 10)
    assert wilson_interval(5, 10) != wilson_interval(10, 20)
    lo, hi = s.solve_rate.ci
    assert lo < 0.4 and hi > 0.6
    assert s.stability["flaky"] == 10 and s.resolved.numerator == 0  # 1 of 2 is a tie: not resolved


def test_pass_ks_go_up_to_the_trials_run():
    assert pass_ks(0) == [1] and pass_ks(1) == [1] and pass_ks(3) == [1, 2, 3]
    assert pass_ks(10) == list(range(1, 11))
    assert pass_ks(12) == [1, 2, 3, 5, 10, 12] and pass_ks(100) == [1, 2, 3, 5, 10, 20, 50, 100]


def test_empty_and_all_error_runs():
    empty = run_summary([])
    assert (empty.attempts, empty.errors, empty.incomplete, empty.per_task) == (0, 0, False, {})
    assert empty.solve_rate == Figure(None, 0, 0, None) and empty.pass_any_at_n == Figure(None, 0, 0, None)
    assert empty.pass_at_k == {"1": None} and empty.resolved == Figure(None, 0, 0, None)
    assert empty.breakdowns == {"suite": {}, "difficulty": {}, "language": {}, "prompt_variant": {}}
    assert empty.stability == {"stable_pass": 0, "stable_fail": 0, "flaky": 0}
    errs = run_summary([_a("t", "ERROR", 0, suite="s"), _a("t", "ERROR", 1, suite="s")])
    assert (errs.valid, errs.errors, errs.incomplete) == (0, 2, True)
    assert errs.solve_rate.value is None and errs.solve_rate.denominator == 0 and errs.pass_at_k["1"] is None
    assert (errs.per_task["t"].n, errs.per_task["t"].errors, errs.per_task["t"].stability) == (0, 2, None)
    assert _fig(errs.breakdowns["suite"]["s"]["solve_rate"]) == (0, 0)


def test_run_summary_is_json():
    data = json.loads(json.dumps(run_summary(_campaign()).to_dict()))
    assert {k: data["resolved"][k] for k in ("value", "numerator", "denominator")} == {
        "value": 1 / 3,
        "numerator": 1,
        "denominator": 3,
    }
    assert len(data["solve_rate"]["ci"]) == 2 and data["per_task"]["t4"]["stability"] is None
    assert data["per_task"]["t1"]["resolved"] is True and set(data["pass_at_k"]) == {"1", "2", "3"}


# --- paired comparison -----------------------------------------------------------------------
def test_resolved_is_a_strict_majority_of_valid_trials():
    assert resolved(1, 1) and not resolved(1, 0)  # one trial: it passed
    assert resolved(3, 2) and not resolved(3, 1) and resolved(2, 2)
    assert not resolved(2, 1) and not resolved(4, 2)  # a tie is a coin flip, not a solution
    assert not resolved(0, 0)


def test_paired_comparison_single_trial_by_hand():
    a_solved = {
        "t1": True,
        "t2": False,
        "t3": False,
        "t4": False,
        "t5": False,
        "t6": False,
        "t7": False,
        "t8": True,
        "t9": False,
    }
    b_solved = {
        "t1": False,
        "t2": True,
        "t3": True,
        "t4": True,
        "t5": True,
        "t6": True,
        "t7": True,
        "t8": True,
        "t9": False,
    }
    a = [_a(t, "PASS" if ok else "FAIL") for t, ok in a_solved.items()] + [_a("only-a", "PASS")]
    b = [_a(t, "PASS" if ok else "PATCH FAILED") for t, ok in b_solved.items()] + [_a("t10", "ERROR")]
    a.append(_a("t10", "PASS"))  # B never graded t10: not a common task
    c = paired_comparison(a, b)
    # common t1..t9; A alone: t1; B alone: t2..t7; both t8, neither t9
    assert (c.common_tasks, c.wins, c.losses, c.ties) == (9, 1, 6, 2)
    assert c.mcnemar_p == pytest.approx(2 * (1 + 7) / 128)
    # A - B = 2/9 - 7/9; numerator wins - losses
    assert c.difference.value == pytest.approx(-5 / 9) and (c.difference.numerator, c.difference.denominator) == (-5, 9)
    lo, hi = c.difference.ci
    assert -1.0 <= lo <= -5 / 9 <= hi <= 1.0
    assert c.per_task["t1"]["outcome"] == "A" and c.per_task["t9"]["outcome"] == "neither"
    assert set(c.per_task) == set(a_solved)


def test_paired_comparison_multi_trial_by_hand():
    a = [_a("m1", v, i) for i, v in enumerate(["PASS", "FAIL", "FAIL"])]
    a += [_a("m2", v, i) for i, v in enumerate(["PASS", "FAIL"])]
    a += [_a("m3", v, i) for i, v in enumerate(["FAIL", "ERROR", "PASS"])]
    a += [_a("m4", "ERROR")]
    b = [_a("m1", v, i) for i, v in enumerate(["PASS", "PASS", "FAIL"])]
    b += [_a("m2", v, i) for i, v in enumerate(["FAIL", "FAIL"])]
    b += [_a("m3", "PASS"), _a("m4", "PASS")]
    c = paired_comparison(a, b)
    # m1: A 1/3 unresolved, B 2/3 resolved -> B (with "any PASS" it would be a tie)
    # m2: A 1/2 is a tie, unresolved; B 0/2 -> neither; m3: A 1 of 2 valid, a tie; B 1/1 -> B;
    # m4: A has no valid trial, not common
    assert (c.common_tasks, c.wins, c.losses, c.ties) == (3, 0, 2, 1)
    assert c.per_task["m1"] == {
        "a": "unresolved",
        "b": "resolved",
        "outcome": "B",
        "a_passed": 1,
        "a_trials": 3,
        "b_passed": 2,
        "b_trials": 3,
    }
    assert (c.per_task["m2"]["outcome"], c.per_task["m3"]["outcome"]) == ("neither", "B")
    # difference: (1/3 - 2/3) + (1/2 - 0) + (1/2 - 1) = -1/3 over 3 tasks = -1/9
    assert c.difference.value == pytest.approx(-1 / 9) and c.difference.numerator == pytest.approx(-1 / 3)
    assert c.mcnemar_p == pytest.approx(0.5)  # 2 discordant, both B's: 2 * C(2,0) / 4


def test_paired_comparison_without_common_tasks():
    c = paired_comparison([_a("x", "PASS")], [_a("y", "PASS"), _a("x", "ERROR")])
    assert (c.common_tasks, c.wins, c.losses, c.ties, c.mcnemar_p) == (0, 0, 0, 0, None)  # no test was made
    assert c.difference == Figure(None, 0, 0, None)
    assert json.loads(json.dumps(c.to_dict()))["per_task"] == {}
