"""GitBench's output check: a command's stdout after the patch against an expected text,
exactly or by SequenceMatcher ratio at or above a threshold.

The ratio is reported to 3 decimals: 2·matches / (len(actual) + len(expected)) to six
decimals gives away the expected output's length from one probe (print a single
character), and more, probe by probe. Under a feedback policy short of `full` it is not
reported at all: `hide_ratio` takes it out of the explanation, and the result's `check`
keeps only whether the output passed (grader/serializers/feedback.py)."""

from __future__ import annotations

import re

from grader.checks.base import CheckOutcome
from grader.metrics import normalize_text, similarity
from grader.tasks.model import Normalize

SHOWN_DECIMALS = 3
# How an explanation here states the ratio, and nowhere else: " (similarity 0.873)" or
# "similarity 0.873 " before "is at least / is below".
_RATIO = re.compile(r" \(similarity \d+\.\d+\)|(?<=similarity) \d+\.\d+(?= )")


def hide_ratio(explanation: str) -> str:
    """The explanation without the ratio: "The output's similarity is below the threshold 0.9"."""
    return _RATIO.sub("", explanation)


def evaluate_output(
    stdout: bytes,
    complete: bool,
    expected: bytes,
    *,
    threshold: float | None,
    normalize: Normalize,
    exit_code: int | None,
) -> CheckOutcome:
    def norm(b: bytes) -> str:
        return normalize_text(
            b.decode("utf-8", errors="replace"),
            line_endings=normalize.line_endings,
            trailing_whitespace=normalize.trailing_whitespace,
        )

    actual, wanted = norm(stdout), norm(expected)
    exact = similarity(actual, wanted)  # the decision is taken on the exact ratio; only its report is rounded
    ratio = round(exact, SHOWN_DECIMALS)
    if not complete:
        passed, why = False, "The command printed more than the output limit"
    elif threshold is None:
        passed = actual == wanted
        why = (
            "The output matches the expected text exactly"
            if passed
            else f"The output differs from the expected text (similarity {ratio:.3f})"
        )
    else:
        passed = exact >= threshold
        why = f"The output's similarity {ratio:.3f} is {'at least' if passed else 'below'} the threshold {threshold}"
    details = {
        "ratio": ratio,
        "threshold": threshold,
        "passed": passed,
        "exit_code": exit_code,
        "stdout_bytes": len(stdout),
        "stdout_truncated": not complete,
    }
    return CheckOutcome(passed, why, details=details)
