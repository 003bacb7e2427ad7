"""GitGoodBench's exact-match check: the named files after the patch must equal the
expected contents (for a merge-conflict task, the real merge commit's)."""

from __future__ import annotations

import difflib

from grader.checks.base import CheckOutcome
from grader.metrics import normalize_text
from grader.tasks.model import Normalize


def _norm(data: bytes, normalize: Normalize) -> bytes:
    if not (normalize.line_endings or normalize.trailing_whitespace):
        return data
    text = data.decode("utf-8", errors="surrogateescape")
    return normalize_text(
        text, line_endings=normalize.line_endings, trailing_whitespace=normalize.trailing_whitespace
    ).encode("utf-8", errors="surrogateescape")


def evaluate_exact_match(
    actual: dict[str, bytes | None], expected: dict[str, bytes], normalize: Normalize
) -> CheckOutcome:
    mismatched, missing, diffs = [], [], {}
    for rel in sorted(expected):
        got = actual.get(rel)
        if got is None:
            missing.append(rel)
            continue
        want = _norm(expected[rel], normalize)
        have = _norm(got, normalize)
        if have != want:
            mismatched.append(rel)
            diff = difflib.unified_diff(
                want.decode(errors="replace").splitlines(keepends=True),
                have.decode(errors="replace").splitlines(keepends=True),
                fromfile=f"expected/{rel}",
                tofile=f"actual/{rel}",
                n=2,
            )
            diffs[rel] = "".join(list(diff)[:200])
    matched = len(expected) - len(mismatched) - len(missing)
    details = {"files": len(expected), "matched": matched, "mismatched": mismatched, "missing": missing, "diffs": diffs}
    if not mismatched and not missing:
        return CheckOutcome(True, f"All {len(expected)} file(s) match the expected contents", details=details)
    parts = []
    if mismatched:
        parts.append(f"Not as expected: {', '.join(mismatched)}")
    if missing:
        parts.append(f"missing or not a regular file: {', '.join(missing)}")
    return CheckOutcome(False, "; ".join(parts), details=details)
