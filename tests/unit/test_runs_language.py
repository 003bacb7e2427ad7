"""Runs by language: the filter the API, the portal and the CLI share keeps only attempts
(and the task set) of one language."""

from __future__ import annotations

import datetime as dt

from grader import metrics
from grader.runs import Filters, parse_filters


def attempt(task: str, language: str, verdict: str = "PASS") -> metrics.Attempt:
    return metrics.Attempt(
        task_id=task,
        verdict=verdict,
        trial=0,
        suite="polyglot",
        difficulty=None,
        language=language,
        prompt_variant=None,
        created_at=dt.date(2025, 1, 1),
    )


def test_the_language_filter_is_read_and_keeps_one_language():
    f = parse_filters({"language": "go", "suite": ""})
    assert f == Filters(language="go")
    kept = [a.task_id for a in (attempt("a", "go"), attempt("b", "javascript")) if f.keep(a)]
    assert kept == ["a"]
    assert parse_filters({"language": ""}) == Filters()


def test_a_run_summary_breaks_results_down_by_language():
    attempts = [attempt("a", "go"), attempt("b", "go", "FAIL"), attempt("c", "javascript")]
    by = metrics.run_summary(attempts).breakdowns["language"]
    assert (by["go"]["resolved"].numerator, by["go"]["resolved"].denominator) == (1, 2)
    assert (by["javascript"]["resolved"].numerator, by["javascript"]["resolved"].denominator) == (1, 1)
