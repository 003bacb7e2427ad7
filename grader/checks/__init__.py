"""Checks turn what ran in the container into data: passed or not, why, and the
measurements behind it. They never decide ERROR or TIMED OUT; the pipeline does."""

from grader.checks.base import CheckOutcome
from grader.checks.exact_match import evaluate_exact_match
from grader.checks.output import evaluate_output
from grader.checks.tests import evaluate_tests, parse_junit

__all__ = ["CheckOutcome", "evaluate_exact_match", "evaluate_output", "evaluate_tests", "parse_junit"]
