"""GitBench's output check: a command's stdout after the patch against an expected text,
exactly or by SequenceMatcher ratio at or above a threshold."""

from __future__ import annotations

from grader.checks.base import CheckOutcome
from grader.metrics import normalize_text, similarity
from grader.tasks.model import Normalize


def evaluate_output(stdout: bytes, complete: bool, expected: bytes, *, threshold: float | None,
                    normalize: Normalize, exit_code: int | None) -> CheckOutcome:
    def norm(b: bytes) -> str:
        return normalize_text(b.decode("utf-8", errors="replace"), line_endings=normalize.line_endings,
                              trailing_whitespace=normalize.trailing_whitespace)

    actual, wanted = norm(stdout), norm(expected)
    ratio = round(similarity(actual, wanted), 6)
    details = {"ratio": ratio, "threshold": threshold, "exit_code": exit_code, "stdout_bytes": len(stdout),
               "stdout_truncated": not complete}
    if not complete:
        return CheckOutcome(False, "The command printed more than the output limit", details=details)
    if threshold is None:
        if actual == wanted:
            return CheckOutcome(True, "The output matches the expected text exactly", details=details)
        return CheckOutcome(False, f"The output differs from the expected text (similarity {ratio:.3f})", details=details)
    if ratio >= threshold:
        return CheckOutcome(True, f"The output's similarity {ratio:.3f} is at least the threshold {threshold}", details=details)
    return CheckOutcome(False, f"The output's similarity {ratio:.3f} is below the threshold {threshold}", details=details)
