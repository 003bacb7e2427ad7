"""Pure metric functions: no Docker, no Redis, no database.

Each takes plain values and returns plain values, so it can be tested against numbers
worked out by hand.
"""

from __future__ import annotations

import datetime as dt
import difflib
import math
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass


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


# --- runs (campaigns) ------------------------------------------------------------------------
VALID_GRADED = ("PASS", "FAIL")  # success rate: graded without PATCH FAILED or TIMED OUT
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Attempt:
    """One finished submission of a run, with what the breakdowns need of its task."""

    task_id: str
    verdict: str  # PASS, FAIL, PATCH FAILED, TIMED OUT or ERROR
    trial: int | None = None
    suite: str | None = None
    difficulty: str | None = None
    language: str | None = None
    prompt_variant: str | None = None
    created_at: dt.date | None = None
    precision: float | None = None
    recall: float | None = None
    f1: float | None = None


@dataclass
class Figure:
    """A figure is never shown without what it is made of."""

    value: float | None
    numerator: float
    denominator: int
    ci: tuple[float, float] | None = None


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson's score interval for a proportion; None for n = 0 (nothing to estimate).
    Unlike the normal approximation it stays inside [0, 1] and behaves at 0/n and n/n."""
    if n == 0:
        return None
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def rate(successes: int, n: int) -> Figure:
    return Figure(successes / n if n else None, successes, n, wilson_interval(successes, n))


def bootstrap_ci(items: list, statistic: Callable[[list], float | None], *, resamples: int = 2000, seed: int = 0,
                 alpha: float = 0.05) -> tuple[float, float] | None:
    """Percentile bootstrap over `items` (tasks) resampled with replacement; deterministic
    for a seed. None when there is nothing to resample."""
    if not items:
        return None
    rng = random.Random(seed)
    stats = []
    for _ in range(resamples):
        sample = [items[rng.randrange(len(items))] for _ in items]
        value = statistic(sample)
        if value is not None:
            stats.append(value)
    if not stats:
        return None
    stats.sort()
    lo = stats[int(math.floor(alpha / 2 * (len(stats) - 1)))]
    hi = stats[int(math.ceil((1 - alpha / 2) * (len(stats) - 1)))]
    return lo, hi


def stability(verdicts: Iterable[str]) -> str | None:
    """GitBench's classes over a task's valid (non-ERROR) trials."""
    valid = [v for v in verdicts if v != "ERROR"]
    if not valid:
        return None
    passed = sum(v == "PASS" for v in valid)
    return "stable_pass" if passed == len(valid) else "stable_fail" if passed == 0 else "flaky"


def mean_pass_at_k(per_task: dict[str, tuple[int, int]], k: int) -> Figure | None:
    """pass@k averaged over the tasks with at least k valid trials (None if none has);
    the numerator is the sum of the per-task estimates."""
    eligible = [(n, c) for n, c in per_task.values() if n >= k]
    if not eligible:
        return None
    values = [pass_at_k(n, c, k) for n, c in eligible]
    ci = bootstrap_ci(eligible, lambda s: sum(pass_at_k(n, c, k) for n, c in s) / len(s))
    return Figure(sum(values) / len(values), sum(values), len(values), ci)


@dataclass
class TaskRecord:
    n: int  # valid trials
    c: int  # of them PASS
    errors: int
    stability: str | None
    verdicts: list[str]  # in trial order, ERROR included


@dataclass
class RunSummary:
    attempts: int
    valid: int
    errors: int
    incomplete: bool
    window: dict[str, str | None]
    solve_rate: Figure
    one_attempt_success: Figure
    success_rate: Figure
    pass_at_k: dict[str, Figure | None]
    pass_any_at_n: Figure
    stability: dict[str, int]
    per_task: dict[str, TaskRecord]
    breakdowns: dict[str, dict[str, dict[str, Figure | int]]]
    localization: dict[str, Figure]


def in_window(created: dt.date | None, since: dt.date | None, until: dt.date | None) -> bool:
    """With no window every attempt counts; with one, only tasks dated inside it (inclusive)."""
    if since is None and until is None:
        return True
    if created is None:
        return False
    return (since is None or created >= since) and (until is None or created <= until)


def _tasks(attempts: list[Attempt]) -> dict[str, TaskRecord]:
    by_task: dict[str, list[Attempt]] = {}
    for a in attempts:
        by_task.setdefault(a.task_id, []).append(a)
    out = {}
    for task_id in sorted(by_task):
        trials = sorted(by_task[task_id], key=lambda a: (a.trial is None, a.trial or 0))
        verdicts = [a.verdict for a in trials]
        valid = [v for v in verdicts if v != "ERROR"]
        out[task_id] = TaskRecord(len(valid), sum(v == "PASS" for v in valid), len(verdicts) - len(valid),
                                  stability(verdicts), verdicts)
    return out


def _rates(attempts: list[Attempt]) -> dict[str, Figure | int]:
    valid = [a for a in attempts if a.verdict != "ERROR"]
    return {"solve_rate": rate(sum(a.verdict == "PASS" for a in valid), len(valid)),
            "success_rate": rate(sum(a.verdict in VALID_GRADED for a in valid), len(valid)),
            "tasks": len({a.task_id for a in attempts})}


def run_summary(attempts: Iterable[Attempt], *, since: dt.date | None = None,
                until: dt.date | None = None) -> RunSummary:
    """Every figure of a run. ERROR attempts leave every denominator and mark the run
    incomplete; a time window keeps only tasks created inside it."""
    kept = [a for a in attempts if in_window(a.created_at, since, until)]
    valid = [a for a in kept if a.verdict != "ERROR"]
    tasks = _tasks(kept)
    passed = sum(a.verdict == "PASS" for a in valid)
    per_nc = {t: (r.n, r.c) for t, r in tasks.items() if r.n}
    attempted = [r for r in tasks.values() if r.n]
    classes = {"stable_pass": 0, "stable_fail": 0, "flaky": 0}
    for r in tasks.values():
        if r.stability:
            classes[r.stability] += 1
    breakdowns: dict[str, dict[str, dict[str, Figure | int]]] = {}
    for dim in ("suite", "difficulty", "language", "prompt_variant"):
        groups: dict[str, list[Attempt]] = {}
        for a in kept:
            key = getattr(a, dim)
            if key is not None:
                groups.setdefault(str(key), []).append(a)
        breakdowns[dim] = {k: _rates(v) for k, v in sorted(groups.items())}
    localization = {}
    for name in ("precision", "recall", "f1"):
        values = [getattr(a, name) for a in valid if getattr(a, name) is not None]
        localization[name] = Figure(sum(values) / len(values) if values else None, sum(values), len(values))
    solve = rate(passed, len(valid))
    return RunSummary(
        attempts=len(kept), valid=len(valid), errors=len(kept) - len(valid), incomplete=len(kept) > len(valid),
        window={"since": since.isoformat() if since else None, "until": until.isoformat() if until else None},
        solve_rate=solve, one_attempt_success=solve,
        success_rate=rate(sum(a.verdict in VALID_GRADED for a in valid), len(valid)),
        pass_at_k={str(k): mean_pass_at_k(per_nc, k) for k in (1, 5, 10)},
        pass_any_at_n=rate(sum(1 for r in attempted if r.c > 0), len(attempted)),
        stability=classes, per_task=tasks, breakdowns=breakdowns, localization=localization,
    )


def mcnemar_exact(b01: int, b10: int) -> float:
    """Two-sided exact McNemar p-value: a binomial test with p = 1/2 on the discordant
    pairs; 1.0 when there are none."""
    n = b01 + b10
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b01, b10) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


@dataclass
class Comparison:
    common_tasks: int
    wins: int  # A solved, B not
    losses: int  # B solved, A not
    ties: int
    difference: Figure  # solve rate of A minus B on the common tasks
    mcnemar_p: float
    per_task: dict[str, dict[str, str]]


def paired_comparison(a_attempts: Iterable[Attempt], b_attempts: Iterable[Attempt]) -> Comparison:
    """Two runs on the tasks both have valid trials of. A task counts as solved by a run
    when at least one of its valid trials passed (for one-trial runs: it passed); the
    difference is A's solve rate minus B's on the common tasks, with a paired bootstrap
    interval over those tasks, and McNemar's exact test on the discordant tasks."""
    a_tasks = {t: r for t, r in _tasks(list(a_attempts)).items() if r.n}
    b_tasks = {t: r for t, r in _tasks(list(b_attempts)).items() if r.n}
    common = sorted(a_tasks.keys() & b_tasks.keys())
    pairs = [(a_tasks[t].c > 0, b_tasks[t].c > 0) for t in common]
    wins = sum(1 for x, y in pairs if x and not y)
    losses = sum(1 for x, y in pairs if y and not x)
    diff_of = (lambda s: (sum(x for x, _ in s) - sum(y for _, y in s)) / len(s)) if pairs else None
    difference = Figure(diff_of(pairs) if pairs else None, float(wins - losses), len(pairs),
                        bootstrap_ci(pairs, diff_of) if pairs else None)
    outcome = {(True, False): "A", (False, True): "B", (True, True): "both", (False, False): "neither"}
    per_task = {t: {"a": "solved" if x else "unsolved", "b": "solved" if y else "unsolved", "outcome": outcome[(x, y)]}
                for t, (x, y) in zip(common, pairs)}
    return Comparison(len(common), wins, losses, len(pairs) - wins - losses, difference, mcnemar_exact(wins, losses),
                      per_task)
