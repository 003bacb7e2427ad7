"""Pure metric functions: no Docker, no Redis, no database.

Each takes plain values and returns plain values, so it can be tested against numbers
worked out by hand. The first part scores one submission (localization, similarity);
the second turns the attempts of a run into its figures (rates with Wilson intervals,
pass@k with bootstrap intervals over tasks, stability classes, breakdowns, a time
window) and compares two runs task by task (McNemar's exact test).
"""

from __future__ import annotations

import datetime as dt
import difflib
import math
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import TypeVar

from grader.verdict import Verdict

T = TypeVar("T")


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
# The wire strings come from the one Verdict enum so a renamed verdict cannot silently
# drop out of a denominator here.
PASS, FAIL, ERROR = Verdict.PASS.value, Verdict.FAIL.value, Verdict.ERROR.value
VALID_GRADED = (PASS, FAIL)  # success rate: graded without PATCH FAILED or TIMED OUT
PASS_AT = (1, 5, 10)
Z95 = 1.959963984540054  # the 0.975 quantile of the standard normal: two-sided 95%


@dataclass(frozen=True)
class Attempt:
    """One finished submission of a run, with what the breakdowns need of its task.

    The verdict is checked and stored as its wire string: an unknown verdict is a bug of
    the caller, and counting it as a failure would charge the submitter for it.
    """

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

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", Verdict(self.verdict).value)


@dataclass
class Figure:
    """A figure is never shown without what it is made of: the value is numerator /
    denominator (None when the denominator is 0), with an optional 95% interval."""

    value: float | None
    numerator: float
    denominator: int
    ci: tuple[float, float] | None = None


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson's score interval for a proportion. Unlike the normal approximation it stays
    inside [0, 1] and is not a zero-width interval at 0/n and n/n, where small runs live.

    n = 0 gives None rather than (0, 1): an interval over no evidence would be drawn as if
    it were a measurement."""
    if not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return None
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def rate(successes: int, n: int) -> Figure:
    """A proportion as a Figure with its Wilson interval."""
    return Figure(successes / n if n else None, successes, n, wilson_interval(successes, n))


def bootstrap_ci(items: Sequence[T], statistic: Callable[[list[T]], float | None], *, resamples: int = 2000,
                 seed: int = 0, alpha: float = 0.05) -> tuple[float, float] | None:
    """Percentile bootstrap interval of `statistic` over `items` resampled with replacement.

    The items are tasks (or pairs of a task's outcomes), not attempts: trials of one task
    are correlated, so the task is the unit that was sampled. The generator is
    random.Random(seed), so a figure is the same on every page load. The bounds are the
    outer order statistics at alpha/2 and 1 - alpha/2 (floor and ceil of the rank), which
    errs on the wide side. Resamples whose statistic is None are dropped; None when
    nothing is left."""
    if resamples < 1 or not 0 < alpha < 1:
        raise ValueError(f"need resamples >= 1 and 0 < alpha < 1, got {resamples} and {alpha}")
    if not items:
        return None
    rng = random.Random(seed)
    size = len(items)
    stats = []
    for _ in range(resamples):
        value = statistic([items[rng.randrange(size)] for _ in range(size)])
        if value is not None:
            stats.append(value)
    if not stats:
        return None
    stats.sort()
    last = len(stats) - 1
    return stats[math.floor(alpha / 2 * last)], stats[math.ceil((1 - alpha / 2) * last)]


def stability(verdicts: Iterable[str]) -> str | None:
    """GitBench's classes over a task's valid (non-ERROR) trials: stable_pass when every
    one passed, stable_fail when none did, flaky otherwise; None with no valid trial,
    since a task the machinery never graded says nothing about the system."""
    valid = [v for v in verdicts if v != ERROR]
    if not valid:
        return None
    passed = sum(v == PASS for v in valid)
    return "stable_pass" if passed == len(valid) else "stable_fail" if passed == 0 else "flaky"


def mean_pass_at_k(per_task: dict[str, tuple[int, int]], k: int) -> Figure | None:
    """pass@k averaged over the tasks with at least k valid trials, with a bootstrap
    interval over those tasks; None if no task has k trials.

    A task with fewer than k trials is left out rather than estimated, because pass@k is
    undefined for it; the denominator says how many tasks entered. The numerator is the
    sum of the per-task estimates."""
    eligible = [(n, c) for n, c in per_task.values() if n >= k]
    if not eligible:
        return None
    values = [pass_at_k(n, c, k) for n, c in eligible]
    ci = bootstrap_ci(values, lambda s: sum(s) / len(s))
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
    attempts: int  # inside the window, ERROR included
    valid: int
    errors: int
    incomplete: bool
    window: dict[str, str | None]
    solve_rate: Figure
    one_attempt_success: Figure
    success_rate: Figure
    pass_at_k: dict[str, Figure | None]  # "1", "5", "10": JSON keys are strings
    pass_any_at_n: Figure
    stability: dict[str, int]
    per_task: dict[str, TaskRecord]
    breakdowns: dict[str, dict[str, dict[str, Figure | int]]]
    localization: dict[str, Figure]

    def to_dict(self) -> dict:
        """Plain dicts, lists and numbers, ready for json.dumps."""
        return asdict(self)


def in_window(created: dt.date | None, since: dt.date | None, until: dt.date | None) -> bool:
    """With no window every attempt counts; with one, only tasks dated inside it (both
    ends inclusive). An undated task is out: it cannot be shown to postdate a model's
    training data, which is what the window is for."""
    if since is None and until is None:
        return True
    if created is None:
        return False
    if isinstance(created, dt.datetime):  # a datetime cannot be compared with a date
        created = created.date()
    return (since is None or created >= since) and (until is None or created <= until)


def _tasks(attempts: list[Attempt]) -> dict[str, TaskRecord]:
    by_task: dict[str, list[Attempt]] = {}
    for a in attempts:
        by_task.setdefault(a.task_id, []).append(a)
    out = {}
    for task_id in sorted(by_task):
        # undated trials after numbered ones; a stable sort keeps their arrival order
        trials = sorted(by_task[task_id], key=lambda a: (a.trial is None, a.trial or 0))
        verdicts = [a.verdict for a in trials]
        valid = [v for v in verdicts if v != ERROR]
        out[task_id] = TaskRecord(len(valid), sum(v == PASS for v in valid), len(verdicts) - len(valid),
                                  stability(verdicts), verdicts)
    return out


def _rates(attempts: list[Attempt]) -> dict[str, Figure | int]:
    valid = [a for a in attempts if a.verdict != ERROR]
    return {"solve_rate": rate(sum(a.verdict == PASS for a in valid), len(valid)),
            "success_rate": rate(sum(a.verdict in VALID_GRADED for a in valid), len(valid)),
            "tasks": len({a.task_id for a in attempts})}


def run_summary(attempts: Iterable[Attempt], *, since: dt.date | None = None,
                until: dt.date | None = None) -> RunSummary:
    """Every figure of a run.

    ERROR is a fault of the grading machinery, never the submitter's: those attempts leave
    every denominator and mark the run incomplete (incomplete runs are not ranked). A
    time window keeps only tasks created inside it, so scores can be reported on tasks
    newer than a model's training data. Solve rate and one-attempt success are the same
    number under the two names GitGoodBench and GitBench give it. Breakdowns leave out
    attempts without a value for that dimension; their `tasks` counts every task seen,
    as the per-task table does."""
    if since is not None and until is not None and since > until:
        raise ValueError(f"empty window: since {since} is after until {until}")
    kept = [a for a in attempts if in_window(a.created_at, since, until)]
    valid = [a for a in kept if a.verdict != ERROR]
    tasks = _tasks(kept)
    attempted = {t: (r.n, r.c) for t, r in tasks.items() if r.n}
    classes = {"stable_pass": 0, "stable_fail": 0, "flaky": 0}
    for r in tasks.values():
        if r.stability:
            classes[r.stability] += 1
    breakdowns: dict[str, dict[str, dict[str, Figure | int]]] = {}
    for dim in ("suite", "difficulty", "language", "prompt_variant"):
        groups: dict[str, list[Attempt]] = {}
        for a in kept:
            if getattr(a, dim) is not None:
                groups.setdefault(str(getattr(a, dim)), []).append(a)
        breakdowns[dim] = {k: _rates(v) for k, v in sorted(groups.items())}
    localization = {}
    for name in ("precision", "recall", "f1"):
        values = [getattr(a, name) for a in valid if getattr(a, name) is not None]
        localization[name] = Figure(sum(values) / len(values) if values else None, sum(values), len(values))
    overall = _rates(kept)
    return RunSummary(
        attempts=len(kept), valid=len(valid), errors=len(kept) - len(valid), incomplete=len(kept) > len(valid),
        window={"since": since.isoformat() if since else None, "until": until.isoformat() if until else None},
        solve_rate=overall["solve_rate"], one_attempt_success=overall["solve_rate"],
        success_rate=overall["success_rate"],
        pass_at_k={str(k): mean_pass_at_k(attempted, k) for k in PASS_AT},
        pass_any_at_n=rate(sum(1 for _, c in attempted.values() if c > 0), len(attempted)),
        stability=classes, per_task=tasks, breakdowns=breakdowns, localization=localization,
    )


def mcnemar_exact(b01: int, b10: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts: under no difference
    each discordant task is a fair coin, so p = 2 * P(Binomial(b01 + b10, 1/2) <= min),
    capped at 1; 1.0 when there are none. Exact, not chi-squared: runs are often a few
    dozen tasks, where the approximation is poor."""
    if b01 < 0 or b10 < 0:
        raise ValueError(f"discordant counts must be >= 0, got {b01} and {b10}")
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
    difference: Figure  # mean per-task solve rate of A minus that of B, on the common tasks
    mcnemar_p: float
    per_task: dict[str, dict[str, str | int]]

    def to_dict(self) -> dict:
        """Plain dicts, lists and numbers, ready for json.dumps."""
        return asdict(self)


def solved(n: int, c: int) -> bool:
    """A run solves a task when at least half of its valid trials passed.

    Not "at least one passed": that tends to 1 for any task the system ever passes as
    trials are added, so a 10-trial run would beat a 1-trial run of the same system. The
    share of passing trials instead estimates the system's own chance on the task, and
    the majority settles on whether that is at least a coin flip. With one trial both
    definitions are "it passed"."""
    return n > 0 and 2 * c >= n


def paired_comparison(a_attempts: Iterable[Attempt], b_attempts: Iterable[Attempt]) -> Comparison:
    """Two runs on the tasks both have valid trials of (ERROR trials are left out, as in
    run_summary), the matched A/B design: the same tasks, so task difficulty cancels.

    Wins, losses, ties and McNemar's exact test use solved() per task. The difference is
    A minus B in solve rate, each task weighted equally: the mean over common tasks of
    c_A/n_A - c_B/n_B (for one-trial runs, (wins - losses) / common tasks; the numerator
    is the sum of the per-task differences). Its 95% interval resamples common tasks,
    keeping each task's pair together."""
    a_tasks = {t: r for t, r in _tasks(list(a_attempts)).items() if r.n}
    b_tasks = {t: r for t, r in _tasks(list(b_attempts)).items() if r.n}
    common = sorted(a_tasks.keys() & b_tasks.keys())
    outcome = {(True, False): "A", (False, True): "B", (True, True): "both", (False, False): "neither"}
    per_task: dict[str, dict[str, str | int]] = {}
    diffs, wins, losses = [], 0, 0
    for t in common:
        a, b = a_tasks[t], b_tasks[t]
        x, y = solved(a.n, a.c), solved(b.n, b.c)
        wins += int(x and not y)
        losses += int(y and not x)
        diffs.append(a.c / a.n - b.c / b.n)
        per_task[t] = {"a": "solved" if x else "unsolved", "b": "solved" if y else "unsolved",
                       "outcome": outcome[(x, y)], "a_passed": a.c, "a_trials": a.n, "b_passed": b.c,
                       "b_trials": b.n}
    mean = lambda s: sum(s) / len(s)  # noqa: E731
    difference = Figure(mean(diffs) if diffs else None, sum(diffs), len(diffs), bootstrap_ci(diffs, mean))
    return Comparison(len(common), wins, losses, len(common) - wins - losses, difference,
                      mcnemar_exact(wins, losses), per_task)
