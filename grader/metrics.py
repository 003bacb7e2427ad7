"""Pure metric functions: no Docker, no Redis, no database.

Each takes plain values and returns plain values, so it can be tested against numbers
worked out by hand.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def file_localization(patch_files: Iterable[str], gold_files: Iterable[str]) -> tuple[float | None, float | None, float | None]:
    """File-level precision, recall and F1 of the files a patch touches against the files
    the real change touched (the time-consistent benchmark's localization metric).

    Precision is undefined (None) for a patch that touches nothing, recall for a gold
    change that touches nothing; F1 is 0 when both are defined and either is 0.
    """
    predicted, gold = set(patch_files), set(gold_files)
    hits = len(predicted & gold)
    precision = hits / len(predicted) if predicted else None
    recall = hits / len(gold) if gold else None
    if precision is None or recall is None:
        f1 = None
    elif precision + recall == 0:
        f1 = 0.0
    else:
        f1 = 2 * precision * recall / (precision + recall)
    return precision, recall, f1


def similarity(actual: str, expected: str) -> float:
    """difflib.SequenceMatcher's ratio, as GitBench scores fuzzy output (1.0 is identical).

    autojunk is off: its heuristic treats frequent characters as junk in texts over 200
    characters, which makes the score depend on length in surprising ways.
    """
    if actual == expected:
        return 1.0
    return difflib.SequenceMatcher(None, actual, expected, autojunk=False).ratio()


def normalize_text(text: str, *, line_endings: bool, trailing_whitespace: bool) -> str:
    if line_endings:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if trailing_whitespace:
        text = "\n".join(line.rstrip() for line in text.split("\n")).rstrip("\n")
        text = text + "\n" if text else text
    return text


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): 1 - C(n-c, k) / C(n, k), computed as a running
    product so that large n never overflows or loses precision."""
    if not 0 <= c <= n or k < 1:
        raise ValueError(f"need 0 <= c <= n and k >= 1, got n={n} c={c} k={k}")
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} attempts, got {n}")
    if n - c < k:
        return 1.0
    prob_all_fail = 1.0
    for i in range(n - c + 1, n + 1):
        prob_all_fail *= 1.0 - k / i
    return 1.0 - prob_all_fail
