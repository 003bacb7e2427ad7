"""The run metrics against values worked out by hand (the arithmetic is in the comments)."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from grader.metrics import (
    Attempt,
    bootstrap_ci,
    mcnemar_exact,
    mean_pass_at_k,
    paired_comparison,
    pass_at_k,
    run_summary,
    stability,
    wilson_interval,
)


def test_wilson_interval_by_hand():
    # p = 0.8, n = 10, z = 1.96: denom = 1 + 3.8415/10 = 1.38415; centre = (0.8 + 0.19207) / 1.38415 = 0.71681
    # half = 1.96 * sqrt(0.016 + 0.0096037) / 1.38415 = 1.96 * 0.160011 / 1.38415 = 0.22658
    lo, hi = wilson_interval(8, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.4902, 0.9433)
    # 0 of 4: centre = (0 + 0.48019) / 1.96040 = 0.24494 = half, so [0, 0.48990]
    lo, hi = wilson_interval(0, 4)
    assert lo == 0.0 and round(hi, 4) == 0.4899
    assert wilson_interval(0, 0) is None


def test_mcnemar_exact_by_hand():
    # 7 discordant pairs, 1 one way: 2 * (C(7,0) + C(7,1)) / 2^7 = 2 * 8 / 128
    assert mcnemar_exact(1, 6) == pytest.approx(0.125)
    assert mcnemar_exact(6, 1) == pytest.approx(0.125)
    assert mcnemar_exact(0, 2) == pytest.approx(0.5)  # 2 * 1/4
    assert mcnemar_exact(3, 3) == 1.0  # capped
    assert mcnemar_exact(0, 0) == 1.0


def test_pass_at_k_by_hand_and_its_mean():
    # n=5, c=2, k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    # task a: n=2 c=1 -> pass@1 = 1/2; task b: n=2 c=2 -> 1; task c has n=1 < k=2, left out of pass@2
    per = {"a": (2, 1), "b": (2, 2), "c": (1, 0)}
    one = mean_pass_at_k(per, 1)
    assert one.value == pytest.approx((0.5 + 1 + 0) / 3) and one.denominator == 3
    two = mean_pass_at_k(per, 2)  # a: 1 - C(1,2)/C(2,2) = 1 (n-c < k); b: 1
    assert two.value == 1.0 and two.denominator == 2
    assert mean_pass_at_k(per, 5) is None


def test_stability_classes():
    assert stability(["PASS", "PASS", "ERROR"]) == "stable_pass"
    assert stability(["FAIL", "TIMED OUT"]) == "stable_fail"
    assert stability(["PASS", "FAIL"]) == "flaky"
    assert stability(["ERROR"]) is None and stability([]) is None


def _a(task, verdict, trial=0, **kw):
    return Attempt(task_id=task, verdict=verdict, trial=trial, **kw)


def test_run_summary_by_hand():
    attempts = [
        _a("t1", "PASS", 0, suite="s1", difficulty="easy", created_at=dt.date(2022, 1, 1), f1=1.0),
        _a("t1", "FAIL", 1, suite="s1", difficulty="easy", created_at=dt.date(2022, 1, 1), f1=0.5),
        _a("t2", "PATCH FAILED", 0, suite="s2", difficulty="hard", created_at=dt.date(2024, 6, 1)),
        _a("t2", "ERROR", 1, suite="s2", difficulty="hard", created_at=dt.date(2024, 6, 1)),
        _a("t3", "TIMED OUT", 0, suite="s2", created_at=dt.date(2024, 7, 1)),
        _a("t3", "PASS", 1, suite="s2", created_at=dt.date(2024, 7, 1)),
    ]
    s = run_summary(attempts)
    # valid: 5 (the ERROR is out); per task (n, c, graded): t1 (2, 1, 2), t2 (1, 0, 0), t3 (2, 1, 1)
    assert (s.valid, s.errors, s.incomplete) == (5, 1, True)
    # solve rate, each task weighing the same: (1/2 + 0 + 1/2) / 3; success (2/2 + 0 + 1/2) / 3
    assert (s.solve_rate.numerator, s.solve_rate.denominator) == (1, 3)
    assert (s.success_rate.numerator, s.success_rate.denominator) == (1.5, 3)
    assert s.one_attempt_success == s.solve_rate
    # resolved: none (t1 and t3 are ties, t2 failed)
    assert (s.resolved.numerator, s.resolved.denominator) == (0, 3)
    # pass@1 per task: t1 1/2, t2 0/1, t3 1/2 -> mean 1/3; pass@k up to the 2 trials run; pass_any: t1, t3 of 3
    assert s.pass_at_k["1"].value == pytest.approx(1 / 3) and s.pass_at_k["1"].denominator == 3
    assert list(s.pass_at_k) == ["1", "2"]
    assert (s.pass_any_at_n.numerator, s.pass_any_at_n.denominator) == (2, 3)
    assert s.stability == {"stable_pass": 0, "stable_fail": 0, "flaky": 2}  # t2: one trial, no class
    assert s.per_task["t2"].verdicts == ["PATCH FAILED", "ERROR"] and s.per_task["t2"].n == 1
    # by suite: s1 (t1) -> 1/2; s2 (t2, t3) -> (0 + 1/2) / 2
    assert s.breakdowns["suite"]["s1"]["solve_rate"].value == 0.5
    assert (
        s.breakdowns["suite"]["s2"]["solve_rate"].numerator,
        s.breakdowns["suite"]["s2"]["solve_rate"].denominator,
    ) == (0.5, 2)
    assert s.localization["f1"].value == 0.75 and s.localization["f1"].denominator == 2
    lo, hi = s.solve_rate.ci
    assert lo < 0.4 < hi
    # a window from 2024: t2 and t3 only; (0 + 1/2) / 2
    w = run_summary(attempts, since=dt.date(2024, 1, 1))
    assert set(w.per_task) == {"t2", "t3"} and (w.solve_rate.numerator, w.solve_rate.denominator) == (0.5, 2)
    assert w.window == {"since": "2024-01-01", "until": None}
    assert run_summary(attempts, until=dt.date(2021, 12, 31)).attempts == 0


def test_empty_and_all_error_runs():
    empty = run_summary([])
    assert empty.solve_rate.value is None and empty.solve_rate.denominator == 0 and not empty.incomplete
    errs = run_summary([_a("t", "ERROR"), _a("t", "ERROR", 1)])
    assert errs.incomplete and errs.valid == 0 and errs.solve_rate.value is None and errs.per_task["t"].n == 0


def test_paired_comparison_by_hand():
    a = [_a("t1", "PASS"), _a("t2", "PASS"), _a("t3", "FAIL"), _a("t4", "FAIL"), _a("only-a", "PASS")]
    b = [
        _a("t1", "PASS"),
        _a("t2", "FAIL"),
        _a("t3", "FAIL"),
        _a("t4", "PASS"),
        _a("only-b", "PASS"),
        _a("t5", "ERROR"),
    ]
    c = paired_comparison(a, b)
    # common with valid trials: t1..t4; A wins t2, B wins t4; ties t1, t3
    assert (c.common_tasks, c.wins, c.losses, c.ties) == (4, 1, 1, 2)
    assert c.difference.value == 0.0  # 2/4 - 2/4
    assert c.mcnemar_p == 1.0  # 2 * (C(2,0) + C(2,1)) / 4 = 1.5, capped
    assert c.per_task["t2"]["outcome"] == "A" and c.per_task["t2"]["a"] == "resolved"
    lo, hi = c.difference.ci
    assert lo <= 0.0 <= hi


def test_bootstrap_is_deterministic_and_contains_the_estimate():
    items = [0, 1, 1, 0, 1, 1, 1, 0, 1, 1]
    stat = lambda s: sum(s) / len(s)  # noqa: E731
    assert bootstrap_ci(items, stat, seed=3) == bootstrap_ci(items, stat, seed=3)
    lo, hi = bootstrap_ci(items, stat)
    assert lo <= 0.7 <= hi and 0 <= lo < hi <= 1
    assert bootstrap_ci([], stat) is None
    assert not math.isnan(lo)
