"""Pure metric functions: no Docker, no Redis, no database.

Each takes plain values and returns plain values, so it can be tested against numbers
worked out by hand. The first part scores one submission (localization, similarity);
the second turns the attempts of a run into its figures and compares two runs task by
task (McNemar's exact test).

What stands for a task with several trials
------------------------------------------
This is the one rule every figure of a run follows: `runs show`, the run page, the
leaderboard, `runs compare`, the SWE-bench report and the predictions export.

A task's trials reduce to two counts: n, its *valid* trials (ERROR is a fault of the
grading machinery, never the submitter's: it counts nowhere and makes the run
incomplete) and c, how many of them PASSed. No trial stands for the task on its own
(not the newest, not the best), so adding trials can neither hide a failure nor buy a
pass.

- **resolved** (a task): more than half of its valid trials passed, c > n / 2. A tie is
  not resolved. With one trial this is "it passed", as in SWE-bench. The run's
  *resolved count* is what the report's `resolved_ids`, the per-task outcomes of a
  comparison, `runs show`, the run page and the leaderboard all give.
- **solve rate** (a run): the mean over tasks of c / n, the chance that one attempt at
  a task drawn at random passes. It is pass@1, and what a comparison's difference
  measures. Every task weighs the same however many trials it had, so retrying one task
  cannot move the rate more than that task is worth.
- **success rate**: the same mean of the share of a task's valid trials that were
  graded at all (PASS or FAIL: not PATCH FAILED, not TIMED OUT).
- **pass@k** for k = 1 .. n, n the most valid trials any task has: the unbiased
  estimator averaged over the tasks with at least k trials (the denominator says how
  many); **pass_any@n**: the share of tasks that passed at least once.
- **stability**: stable pass (every valid trial passed), stable fail (none did), flaky;
  none for a task with fewer than two valid trials.
- A run of **one trial** (no task with more than one valid trial) has no stability
  classes and no pass_any@n: with one trial a task's stability is its verdict and
  pass_any@n is the solve rate, so either would look like a measurement of what was never
  measured. It is still ranked and compared like any other run, as SWE-bench measures one.

Why a majority rather than "any trial passed": that tends to 1 for any task a system
ever passes as trials are added, so a 10-trial run would beat a 1-trial run of the same
system. Why a strict one: a task passed half the time is a coin flip, not a solution.

Over a task set (the leaderboard, the report's `total_instances`), a task without a
valid trial counts as not resolved and 0 in the solve rate, as SWE-bench counts an
instance it was given no prediction for; see `over_task_set`.

What a campaign cost (`usage`) is not a rate and follows GitBench instead: each attempt
may say its cost, tokens, model API time and wall-clock time; a run reports each as its
total and as the mean per *complete trial* (a trial number with an attempt at every task),
so that runs with different numbers of trials compare.

A run is `legacy` when its results were brought in from elsewhere rather than graded here
as its team sent them: its origin says so ("imported"); a run made before runs recorded
their origin (migration 0014) keeps the rule it had, every attempt a SWE-bench prediction
line and one trial. A fresh predictions upload graded here is not legacy: it is a run of
one trial (above), or of more.

Every figure carries its numerator and denominator. Its 95% interval is Wilson's over
tasks, the unit that was sampled (trials of one task are correlated): for a mean of
per-task values in [0, 1] that is conservative, since no such variable has a larger
variance than a coin with the same mean, and it is never the zero-width interval a
bootstrap gives when every task scored the same.
"""

from __future__ import annotations

import datetime as dt
import difflib
import math
import random
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from grader.verdict import Verdict

T = TypeVar("T")
# The edition of the figures' rules and shape: figures a store kept under another are computed
# again when next read, whatever the grader's version says (grader/runs.py's figures_key).
# 2: no stability class for a task with one valid trial; 3: usage and legacy (migration 0011);
# 4: any run of one trial has no stability classes or pass_any@n, and legacy is a run's origin
# (results imported from elsewhere, migration 0014), not a run of prediction lines.
RULES = 4
# Where a run's results came from (grader/store/models.py: Run.origin): graded here as its
# team sent them, or imported, graded elsewhere; None for a run made before it was recorded.
GRADED, IMPORTED = "graded", "imported"


def file_localization(
    patch_files: Iterable[str], gold_files: Iterable[str]
) -> tuple[float | None, float | None, float | None]:
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


def adjusted_rand_index(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """Hubert and Arabie's adjusted Rand index of two partitions of the same items, each
    given as one label per item: 1 for the same partition, about 0 for one no better than
    chance, negative for worse. Where the index is undefined (fewer than two items, or both
    partitions all one cluster or all singletons) it is 1 for identical partitions, else 0."""
    if len(a) != len(b):
        raise ValueError("the two labelings cover different numbers of items")
    n = len(a)
    if n < 2:
        return 1.0
    pairs: dict[tuple[Hashable, Hashable], int] = {}
    rows: dict[Hashable, int] = {}
    cols: dict[Hashable, int] = {}
    for x, y in zip(a, b, strict=True):
        pairs[(x, y)] = pairs.get((x, y), 0) + 1
        rows[x] = rows.get(x, 0) + 1
        cols[y] = cols.get(y, 0) + 1
    index = sum(math.comb(c, 2) for c in pairs.values())
    sum_rows = sum(math.comb(c, 2) for c in rows.values())
    sum_cols = sum(math.comb(c, 2) for c in cols.values())
    expected = sum_rows * sum_cols / math.comb(n, 2)
    top = (sum_rows + sum_cols) / 2
    if top == expected:  # both all one cluster, or both all singletons: nothing to adjust
        return 1.0 if index == top else 0.0
    return (index - expected) / (top - expected)


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
    if k == 1:
        return c / n  # exactly, so that pass@1 is the solve rate to the last digit
    prob_all_fail = 1.0
    for i in range(n - c + 1, n + 1):
        prob_all_fail *= 1.0 - k / i
    return 1.0 - prob_all_fail


# --- runs (campaigns) ------------------------------------------------------------------------
# A model's reasoning effort, as the providers name it (OpenAI's reasoning_effort, GitBench's
# model#level): what an attempt may say of itself, lowest first.
REASONING_LEVELS = ("none", "minimal", "low", "medium", "high", "xhigh")
# The wire strings come from the one Verdict enum so a renamed verdict cannot silently
# drop out of a denominator here.
PASS, FAIL, ERROR = Verdict.PASS.value, Verdict.FAIL.value, Verdict.ERROR.value
VALID_GRADED = (PASS, FAIL)  # success rate: graded without PATCH FAILED or TIMED OUT
VERDICTS = frozenset(v.value for v in Verdict)  # the wire strings
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
    # what the attempt cost, as its submitter said (None: not said); see `usage`
    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    api_seconds: float | None = None
    wall_seconds: float | None = None
    reasoning_level: str | None = None
    imported: bool = False  # came as a SWE-bench prediction line (how it was sent, not where it was graded)

    def __post_init__(self) -> None:
        if type(self.verdict) is not str or self.verdict not in VERDICTS:
            object.__setattr__(self, "verdict", Verdict(self.verdict).value)


@dataclass
class Figure:
    """A figure is never shown without what it is made of: the value is numerator /
    denominator (None when the denominator is 0), with an optional 95% interval."""

    value: float | None
    numerator: float
    denominator: int
    ci: tuple[float, float] | None = None


def wilson_interval(successes: float, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson's score interval for a proportion. Unlike the normal approximation it stays
    inside [0, 1] and is not a zero-width interval at 0/n and n/n, where small runs live.

    `successes` may be fractional: the sum of n per-task values in [0, 1] (a solve rate,
    pass@k). The interval then bounds their mean conservatively, since p(1 - p) is the
    largest variance a variable in [0, 1] with mean p can have.

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


def rate(successes: float, n: int) -> Figure:
    """A proportion (or a mean of n values in [0, 1]) as a Figure with its Wilson interval."""
    return Figure(successes / n if n else None, successes, n, wilson_interval(successes, n))


def bootstrap_ci(
    items: Sequence[T],
    statistic: Callable[[list[T]], float | None],
    *,
    resamples: int = 2000,
    seed: int = 0,
    alpha: float = 0.05,
) -> tuple[float, float] | None:
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
    one passed, stable_fail when none did, flaky otherwise. None with fewer than two valid
    trials: a task the machinery never graded says nothing about the system, and one
    trial says nothing about how steady it is ("stable" over one trial misleads)."""
    valid = [v for v in verdicts if v != ERROR]
    return _stability(len(valid), valid.count(PASS))


def _stability(n: int, c: int) -> str | None:
    """`stability` of a task with n valid trials, c of them passed."""
    if n < 2:
        return None
    return "stable_pass" if c == n else "stable_fail" if c == 0 else "flaky"


def resolved(n: int, c: int) -> bool:
    """A task is resolved when more than half of its n valid trials passed (the module
    docstring has the rule and why): c > n / 2, so a tie is not resolved, and one trial
    resolves the task when it passed."""
    return n > 0 and 2 * c > n


def pass_ks(trials: int) -> list[int]:
    """The k of pass@k a run with `trials` valid trials (at most, per task) reports: every
    k from 1 to the trials run, thinned above 10 to 1, 2, 3, 5, 10, 20, 50, 100... and n."""
    if trials <= 10:
        return list(range(1, max(trials, 1) + 1))
    steps = [1, 2, 3, 5] + [m * 10**e for e in range(1, len(str(trials))) for m in (1, 2, 5)]
    return sorted({k for k in steps if k < trials} | {trials})


def mean_pass_at_k(per_task: dict[str, tuple[int, int]], k: int) -> Figure | None:
    """pass@k averaged over the tasks with at least k valid trials, with Wilson's interval
    over those tasks; None if no task has k trials.

    A task with fewer than k trials is left out rather than estimated, because pass@k is
    undefined for it; the denominator says how many tasks entered. The numerator is the
    sum of the per-task estimates."""
    eligible = [(n, c) for n, c in per_task.values() if n >= k]
    if not eligible:
        return None
    return rate(math.fsum(pass_at_k(n, c, k) for n, c in eligible), len(eligible))


@dataclass
class TaskRecord:
    """One task of a run under the rule: its valid trials n, of them PASS c, and what
    follows from them alone."""

    n: int  # valid trials
    c: int  # of them PASS
    graded: int  # of them PASS or FAIL (not PATCH FAILED, not TIMED OUT)
    errors: int
    resolved: bool
    stability: str | None
    verdicts: list[str]  # in trial order, ERROR included


@dataclass
class TaskSetFigures:
    """A run over a whole task set (a suite's, in a window): a task without a valid trial
    counts as not resolved and 0, as SWE-bench counts an instance with no prediction."""

    tasks: int  # in the set
    attempted: int  # of them with a valid trial
    resolved: Figure  # resolved tasks / tasks in the set
    solve_rate: Figure  # sum of c / n / tasks in the set


SPENT = ("cost_usd", "input_tokens", "output_tokens", "api_seconds", "wall_seconds")
# what an attempt may say of what it cost: the submission's fields, its columns, its export
USAGE_FIELDS = (*SPENT, "reasoning_level")
# Bounds far above any real attempt, so that a slip (a cost in cents times a thousand, the
# tokens of a whole campaign on one attempt) is refused where it is given, not averaged in
MAX_COST_USD = 100_000.0
MAX_TOKENS = 10**9
MAX_SECONDS = 1_000_000.0  # 11.6 days: one attempt


@dataclass
class Spent:
    """One quantity attempts report of themselves (dollars, tokens, seconds) over a run, as
    GitBench reports a campaign: its total, and its mean per complete trial.

    A *trial* is a round of the campaign: the attempts that share a trial number (the
    unnumbered ones are one round). A round is *complete* when it holds an attempt at every
    task the run attempted, so that a 3-trial run and a 1-trial run of the same system
    compare per trial: total over the complete rounds / their number. A round still
    missing tasks is in the total, never in the mean. The mean is None unless every attempt
    of the complete rounds reported the quantity (a mean over the ones that did would
    understate it); `reported` of `attempts` says how many did. ERROR attempts count: the
    model was called and paid for even when the grading machinery failed."""

    total: float | None  # over every attempt that reported it; None when none did
    per_trial: float | None  # over the complete trials; None when there is none, or one is unreported
    reported: int  # attempts that reported it
    attempts: int  # attempts in all


@dataclass
class Usage:
    """What a campaign cost (GitBench's figures): per quantity a `Spent`. API time (waiting
    on the model) and wall-clock time (the attempt from start to end) are kept apart: an
    agent's wall clock also holds its tools, retries and queues."""

    trials: int  # rounds (distinct trial numbers) seen
    complete_trials: int  # of them, with an attempt at every task
    cost_usd: Spent
    input_tokens: Spent
    output_tokens: Spent
    api_seconds: Spent
    wall_seconds: Spent
    reasoning_levels: dict[str, int]  # attempts per level said


def _spent(attempts: Sequence[Attempt], in_complete: Sequence[Attempt], rounds: int, name: str) -> Spent:
    given = [v for a in attempts if (v := getattr(a, name)) is not None]
    complete = [getattr(a, name) for a in in_complete]
    per_trial = None
    if rounds and all(v is not None for v in complete):
        per_trial = _sum(complete) / rounds
    return Spent(_sum(given) if given else None, per_trial, len(given), len(attempts))


def _sum(values: Sequence[Any]) -> float:
    """Whole numbers (tokens) exactly, money and seconds with math.fsum."""
    return sum(values) if all(isinstance(v, int) for v in values) else math.fsum(values)


def usage(attempts: Iterable[Attempt]) -> Usage:
    """A run's cost figures: see `Spent` for what a complete trial is and why the mean is
    over them."""
    kept = list(attempts)
    tasks = {a.task_id for a in kept}
    rounds: dict[int | None, list[Attempt]] = {}
    for a in kept:
        rounds.setdefault(a.trial, []).append(a)
    complete = [r for r in rounds.values() if {a.task_id for a in r} == tasks]
    in_complete = [a for r in complete for a in r]
    levels: dict[str, int] = {}
    for a in kept:
        if a.reasoning_level is not None:
            levels[a.reasoning_level] = levels.get(a.reasoning_level, 0) + 1
    order = {name: i for i, name in enumerate(REASONING_LEVELS)}
    return Usage(
        trials=len(rounds),
        complete_trials=len(complete),
        **{name: _spent(kept, in_complete, len(complete), name) for name in SPENT},
        reasoning_levels=dict(sorted(levels.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0]))),
    )


def legacy(attempts: Sequence[Attempt], trials: int, origin: str | None = None) -> bool:
    """Results brought in from elsewhere: a run whose origin is IMPORTED. A run graded here
    (GRADED) never is, whatever its attempts came as. A run of no recorded origin (made
    before migration 0014) keeps the rule it had then: every attempt a SWE-bench prediction
    line and no task with more than one valid trial."""
    if origin == IMPORTED:
        return bool(attempts)
    if origin == GRADED:
        return False
    return bool(attempts) and all(a.imported for a in attempts) and trials <= 1


# what a campaign cost, as the portal and the CLI print it
def usd(value: float | None) -> str:
    """Dollars: to the cent from ten cents up ($0.50, $1,234.56), else 3 significant digits
    ($0.0123), so that a cheap attempt is not shown as $0.00; '—' for none."""
    if value is None:
        return "—"
    return f"${value:,.2f}" if value >= 0.1 or value == 0 else f"${value:.3g}"


def tokens(value: float | None) -> str:
    """A count of tokens, shortened: 950, 12.3k, 4.56M."""
    if value is None:
        return "—"
    for size, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{value / size:.3g}{unit}"
    return f"{value:.3g}" if not float(value).is_integer() else str(int(value))


def seconds(value: float | None) -> str:
    """A duration: 42.1 s, 12.5 min, 3.2 h."""
    if value is None:
        return "—"
    if value >= 3600:
        return f"{value / 3600:.1f} h"
    return f"{value / 60:.1f} min" if value >= 120 else f"{value:.1f} s"


def spent(fig: dict[str, Any] | None, show: Any) -> tuple[str, str]:
    """A Spent figure (grader.metrics) as (per complete trial, total), each with `show`;
    a total some attempts did not report says how many did."""
    fig = fig or {}
    total = show(fig.get("total"))
    if fig.get("total") is not None and fig.get("reported") != fig.get("attempts"):
        total += f" ({fig.get('reported')} of {fig.get('attempts')} attempts said)"
    return show(fig.get("per_trial")), total


@dataclass
class RunSummary:
    attempts: int  # inside the window, ERROR included
    valid: int
    errors: int
    incomplete: bool
    window: dict[str, str | None]
    trials: int  # the most valid trials any task has: pass@k goes up to it
    tasks: int  # with a valid trial: the denominator of the rates below
    resolved: Figure  # tasks resolved / tasks
    solve_rate: Figure  # mean over tasks of c / n (= pass@1)
    one_attempt_success: Figure  # the solve rate under GitBench's name
    success_rate: Figure  # mean over tasks of graded / n
    pass_at_k: dict[str, Figure | None]  # "1" .. str(trials): JSON keys are strings
    pass_any_at_n: Figure | None  # None for a run of one trial
    stability: dict[str, int] | None  # None for a run of one trial
    per_task: dict[str, TaskRecord]
    breakdowns: dict[str, dict[str, dict[str, Figure | int]]]
    localization: dict[str, Figure]
    usage: Usage
    legacy: bool = False  # results imported from elsewhere, not graded here (`legacy`)
    single_trial: bool = False  # no task with two valid trials: no stability classes, no pass_any@n
    task_set: TaskSetFigures | None = None

    def to_dict(self) -> dict[str, Any]:
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


def task_records(attempts: Iterable[Attempt]) -> dict[str, TaskRecord]:
    """Each task's record under the rule, by task id in order: the one place trials are
    reduced, for every figure and for the SWE-bench report."""
    by_task: dict[str, list[Attempt]] = {}
    for a in attempts:
        by_task.setdefault(a.task_id, []).append(a)
    out = {}
    for task_id in sorted(by_task):
        trials = by_task[task_id]
        if len(trials) > 1:  # unnumbered trials after numbered ones; a stable sort keeps their arrival order
            trials = sorted(trials, key=lambda a: (a.trial is None, a.trial or 0))
        verdicts = [a.verdict for a in trials]
        errors = verdicts.count(ERROR)
        n, c = len(verdicts) - errors, verdicts.count(PASS)
        graded = c + verdicts.count(FAIL)  # VALID_GRADED
        out[task_id] = TaskRecord(n, c, graded, errors, resolved(n, c), _stability(n, c), verdicts)
    return out


def _rate_figures(records: dict[str, TaskRecord]) -> tuple[Figure, Figure, Figure]:
    """resolved, solve rate and success rate over the tasks with a valid trial."""
    valid = [r for r in records.values() if r.n]
    return (
        rate(sum(r.resolved for r in valid), len(valid)),
        rate(math.fsum(r.c / r.n for r in valid), len(valid)),
        rate(math.fsum(r.graded / r.n for r in valid), len(valid)),
    )


def _rates(records: dict[str, TaskRecord]) -> dict[str, Figure | int]:
    """_rate_figures by name, and the number of tasks."""
    resolved, solve_rate, success_rate = _rate_figures(records)
    return {"resolved": resolved, "solve_rate": solve_rate, "success_rate": success_rate, "tasks": len(records)}


def over_task_set(records: dict[str, TaskRecord], task_ids: Iterable[str]) -> TaskSetFigures:
    """The run's resolved count and solve rate over a whole task set. A task the run
    graded that is not in the set still counts (never more resolved than tasks)."""
    universe = set(task_ids) | {t for t, r in records.items() if r.n}
    valid = [r for t, r in records.items() if r.n]
    return TaskSetFigures(
        tasks=len(universe),
        attempted=len(valid),
        resolved=rate(sum(r.resolved for r in valid), len(universe)),
        solve_rate=rate(math.fsum(r.c / r.n for r in valid), len(universe)),
    )


def _breakdown(
    attempts: Sequence[Attempt], records: dict[str, TaskRecord], dim: str
) -> dict[str, dict[str, Figure | int]]:
    """The rates of the attempts grouped by a dimension's value (those without one left
    out), each group's tasks reduced by the rule. Where every task's attempts share one
    value (a task's suite, difficulty and language always do) a group's records are the
    tasks' own, `records`, reduced once; else (a prompt variant per attempt) each group
    is reduced on its own."""
    first: dict[str, Any] = {}
    for a in attempts:
        value = getattr(a, dim)
        if first.setdefault(a.task_id, value) != value:
            break  # a task's attempts differ
    else:
        by_value: dict[str, dict[str, TaskRecord]] = {}
        for task_id, value in first.items():
            if value is not None:
                by_value.setdefault(str(value), {})[task_id] = records[task_id]
        return {k: _rates(v) for k, v in sorted(by_value.items())}
    groups: dict[str, list[Attempt]] = {}
    for a in attempts:
        if getattr(a, dim) is not None:
            groups.setdefault(str(getattr(a, dim)), []).append(a)
    return {k: _rates(task_records(v)) for k, v in sorted(groups.items())}


def run_summary(
    attempts: Iterable[Attempt],
    *,
    since: dt.date | None = None,
    until: dt.date | None = None,
    task_set: Iterable[str] | None = None,
    origin: str | None = None,
) -> RunSummary:
    """Every figure of a run, under the rule of the module docstring; `origin` is the run's
    (GRADED, IMPORTED, or None: not recorded), which `legacy` reads.

    ERROR is a fault of the grading machinery, never the submitter's: those attempts leave
    every denominator and mark the run incomplete (incomplete runs are not ranked). A
    time window keeps only tasks created inside it, so scores can be reported on tasks
    newer than a model's training data. `task_set` (the ids of the suite's tasks, already
    in the window) adds the figures over that whole set. Breakdowns leave out attempts
    without a value for that dimension; their `tasks` counts every task seen, as the
    per-task table does. Localization is the mean over valid attempts."""
    if since is not None and until is not None and since > until:
        raise ValueError(f"empty window: since {since} is after until {until}")
    kept = [a for a in attempts if in_window(a.created_at, since, until)]
    valid = [a for a in kept if a.verdict != ERROR]
    tasks = task_records(kept)
    attempted = {t: (r.n, r.c) for t, r in tasks.items() if r.n}
    trials = max((n for n, _ in attempted.values()), default=0)
    classes = {"stable_pass": 0, "stable_fail": 0, "flaky": 0}
    for r in tasks.values():
        if r.stability:
            classes[r.stability] += 1
    breakdowns = {dim: _breakdown(kept, tasks, dim) for dim in ("suite", "difficulty", "language", "prompt_variant")}
    localization = {}
    for name in ("precision", "recall", "f1"):
        values = [getattr(a, name) for a in valid if getattr(a, name) is not None]
        localization[name] = Figure(sum(values) / len(values) if values else None, sum(values), len(values))
    all_resolved, all_solve_rate, all_success_rate = _rate_figures(tasks)
    old = legacy(kept, trials, origin)
    # one trial measures no stability (a legacy run of nothing valid kept the rule it had)
    single = trials == 1 or (old and trials == 0)
    if single:
        for r in tasks.values():
            r.stability = None
    return RunSummary(
        attempts=len(kept),
        valid=len(valid),
        errors=len(kept) - len(valid),
        incomplete=len(kept) > len(valid),
        window={"since": since.isoformat() if since else None, "until": until.isoformat() if until else None},
        trials=trials,
        tasks=len(attempted),
        resolved=all_resolved,
        solve_rate=all_solve_rate,
        one_attempt_success=all_solve_rate,
        success_rate=all_success_rate,
        pass_at_k={str(k): mean_pass_at_k(attempted, k) for k in pass_ks(trials)},
        pass_any_at_n=None if single else rate(sum(1 for _, c in attempted.values() if c > 0), len(attempted)),
        stability=None if single else classes,
        per_task=tasks,
        breakdowns=breakdowns,
        localization=localization,
        usage=usage(kept),
        legacy=old,
        single_trial=single,
        task_set=over_task_set(tasks, task_set) if task_set is not None else None,
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
    tail: float = sum(math.comb(n, i) for i in range(min(b01, b10) + 1)) / 2**n
    return min(1.0, 2 * tail)


@dataclass
class Comparison:
    common_tasks: int
    wins: int  # A resolved, B not
    losses: int  # B resolved, A not
    ties: int
    difference: Figure  # mean per-task solve rate of A minus that of B, on the common tasks
    mcnemar_p: float | None  # None without a common task: no test was made
    per_task: dict[str, dict[str, str | int]]

    def to_dict(self) -> dict[str, Any]:
        """Plain dicts, lists and numbers, ready for json.dumps."""
        return asdict(self)


def paired_comparison(a_attempts: Iterable[Attempt], b_attempts: Iterable[Attempt]) -> Comparison:
    """Two runs on the tasks both have valid trials of (ERROR trials are left out, as in
    run_summary), the matched A/B design: the same tasks, so task difficulty cancels.

    Wins, losses, ties and McNemar's exact test use resolved() per task, so a task's
    outcome here is the one `runs show` and the report give. The difference is A minus
    B in solve rate on the common tasks: the mean of c_A/n_A - c_B/n_B (for one-trial
    runs, (wins - losses) / common tasks; the numerator is the sum of the per-task
    differences). Its 95% interval resamples common tasks, keeping each task's pair
    together. Without a common task there is no test: mcnemar_p is None."""
    a_tasks = {t: r for t, r in task_records(a_attempts).items() if r.n}
    b_tasks = {t: r for t, r in task_records(b_attempts).items() if r.n}
    common = sorted(a_tasks.keys() & b_tasks.keys())
    outcome = {(True, False): "A", (False, True): "B", (True, True): "both", (False, False): "neither"}
    per_task: dict[str, dict[str, str | int]] = {}
    diffs, wins, losses = [], 0, 0
    for t in common:
        a, b = a_tasks[t], b_tasks[t]
        x, y = a.resolved, b.resolved
        wins += int(x and not y)
        losses += int(y and not x)
        diffs.append(a.c / a.n - b.c / b.n)
        per_task[t] = {
            "a": "resolved" if x else "unresolved",
            "b": "resolved" if y else "unresolved",
            "outcome": outcome[(x, y)],
            "a_passed": a.c,
            "a_trials": a.n,
            "b_passed": b.c,
            "b_trials": b.n,
        }

    def mean(s: list[float]) -> float:
        return sum(s) / len(s)

    difference = Figure(mean(diffs) if diffs else None, math.fsum(diffs), len(diffs), bootstrap_ci(diffs, mean))
    return Comparison(
        len(common),
        wins,
        losses,
        len(common) - wins - losses,
        difference,
        mcnemar_exact(wins, losses) if common else None,
        per_task,
    )
