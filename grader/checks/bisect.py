"""The bisect check: the answer is a commit id, matched exactly against the commit that
introduced the failure. An abbreviation is taken as git takes one (at least 4 hex digits)
but only where it names one commit of the history the submitter was given: an ambiguous
prefix is a wrong answer, never a guess in the submitter's favour."""

from __future__ import annotations

import re

from grader.box.runners.bisect import ANSWER_FILE as BISECT_ANSWER
from grader.checks.base import CheckOutcome

_HEX = re.compile(r"^[0-9a-f]{4,40}$")


def read_answer(raw: bytes | None) -> str | None:
    """The commit id a submission's answer file holds (its first line, trimmed), or None."""
    if raw is None:
        return None
    text = raw.decode("utf-8", errors="replace").strip()
    return text.split("\n", 1)[0].strip().lower() if text else ""


def evaluate_bisect(raw: bytes | None, commits: list[str], culprit: str) -> CheckOutcome:
    answer = read_answer(raw)
    if answer is None:
        return CheckOutcome(
            False,
            f"No answer: the patch must add the file {BISECT_ANSWER} holding the commit id",
            details={"answer": None},
        )
    shown = answer[:60]
    if not _HEX.match(answer):
        return CheckOutcome(
            False,
            f"The answer {shown!r} is not a commit id (4 to 40 hex digits)",
            details={"answer": shown},
        )
    named = [c for c in commits if c.startswith(answer)]
    if not named:
        return CheckOutcome(False, f"{answer} names no commit of the history", details={"answer": answer})
    if len(named) > 1:
        return CheckOutcome(
            False,
            f"{answer} is ambiguous: it abbreviates {len(named)} commits of the history "
            f"({', '.join(sorted(named)[:5])})",
            details={"answer": answer, "ambiguous": len(named)},
        )
    if named[0] == culprit:
        return CheckOutcome(True, f"{answer} is the commit that introduced the failure", details={"answer": named[0]})
    return CheckOutcome(
        False, f"{named[0]} is not the commit that introduced the failure", details={"answer": named[0]}
    )
