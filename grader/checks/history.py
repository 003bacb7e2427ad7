"""The history check: a series of commits judged as a history, deterministically and
explainably, criterion by criterion (GitGoodBench's rebase and iterative-committing
scenarios, which it judges with an LLM).

Every criterion a task keeps is decided here and explained in the result; PASS needs all
of them. The score is the mean of the criteria's scores (1 or 0 each; cohesion its index,
clamped to 0..1).

Cohesion compares how the submission groups the change into commits with how the
reference history does, as a partition of the hunks of the whole change (base to the
reference's last commit, `git diff -U0`: each contiguous block of changed lines is a
hunk). A hunk belongs, in a history, to the commit that contributed most of its lines,
a line being traced by its file and its text through the commits' own diffs (a line one
commit adds and a later one removes belongs to neither). The two partitions are compared
with the adjusted Rand index (grader.metrics).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from grader.checks.base import CheckOutcome
from grader.metrics import adjusted_rand_index
from grader.tasks.model import HistoryCheck

FIXUP_PREFIXES = ("fixup!", "squash!", "amend!")
_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")

Line = tuple[str, str, str]  # (path, "+" or "-", the line's text)
ABSENT = "absent"  # the group of the change's hunks a history does not hold


@dataclass(frozen=True)
class Commit:
    sha: str
    parents: list[str]
    message: str
    diff: str  # against its first parent: git diff -U0 --no-renames (box/runners/history.py)

    @property
    def subject(self) -> str:
        return self.message.strip().split("\n", 1)[0].strip() if self.message.strip() else ""


@dataclass(frozen=True)
class Reference:
    """The reference history, read from the task's repository when it is prepared."""

    tree: str
    files: dict[str, str]  # path -> blob id (and mode) of the reference's last tree
    diffs: list[str]  # each reference commit's diff, oldest first
    total: str  # the whole change, base to the reference's last commit


@dataclass
class Submitted:
    """What the container read back of the submission's history (report.py parses it)."""

    tree: str = ""
    files: dict[str, str] = field(default_factory=dict)
    commits: list[Commit] = field(default_factory=list)
    complete: bool = True  # False: more commits or text than the report carries
    problem: str | None = None
    # each_commit: whether the task's command passed at each commit, in order (None: not run)
    each_commit: list[bool] | None = None
    each_commit_problem: str | None = None


_SHA = re.compile(r"^[0-9a-f]{40}$")


def read_submitted(raw: dict[str, Any] | None) -> Submitted | None:
    """The container's read-back (box/runners/history.py) as commits. Its text came from
    git, but the messages in it are the submitter's: the log is split on the NULs git was
    asked to write (the vetting refuses a patch with NUL in it), and it must name exactly
    the commits rev-list listed, in order, or it is not believed."""
    if raw is None:
        return None
    got = Submitted(complete=raw.get("complete") is True)
    problem = raw.get("problem")
    if isinstance(problem, str):
        got.problem = problem
        return got
    if not got.complete:
        return got
    shas, log, listing = raw.get("shas"), raw.get("log"), raw.get("ls_tree")
    tree = raw.get("tree")
    if not (isinstance(shas, list) and isinstance(log, str) and isinstance(listing, str) and isinstance(tree, str)):
        got.problem = "the read-back is malformed"
        return got
    got.tree = tree
    for entry in listing.split("\0"):
        meta, _, path = entry.partition("\t")
        if path:
            got.files[path] = meta
    parts = log.split("\0")
    if parts[0].strip() or len(parts) % 2 != 1:
        got.problem = "the log does not read as commits"
        return got
    for head, diff in zip(parts[1::2], parts[2::2], strict=True):
        ids, _, message = head.partition("\n")
        if not ids.split():
            got.problem = "the log does not read as commits"
            return got
        sha, *parents = ids.split()
        got.commits.append(Commit(sha=sha, parents=parents, message=message, diff=diff.strip("\n")))
    if [c.sha for c in got.commits] != shas or not all(_SHA.match(s) for s in shas):
        got.problem = "the log does not name the commits rev-list listed"
        got.commits = []
    each = raw.get("each_commit")
    if isinstance(each, dict):
        runs = each.get("runs")
        if isinstance(runs, list) and all(isinstance(r, dict) for r in runs):
            got.each_commit = [r.get("exit_code") == 0 and r.get("timed_out") is False for r in runs]
        else:
            got.each_commit_problem = str(each.get("problem") or "the runs are malformed")[:200]
    return got


def diff_hunks(diff: str) -> list[list[Line]]:
    """The hunks of a `git diff -U0` text, each as its changed lines. A binary change is a
    hunk of one line of its own. Counts from each hunk header decide which lines belong
    to it, so a removed line that reads like a header (`--- x`) is still a line."""
    hunks: list[list[Line]] = []
    src = tgt = ""
    lines = diff.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.startswith("diff --git "):
            src = tgt = ""
        elif line.startswith("--- "):
            src = line[4:]
        elif line.startswith("+++ "):
            tgt = line[4:]
        elif line.startswith("Binary files "):
            hunks.append([(line, "b", "")])
        else:
            m = _HUNK.match(line)
            if not m:
                continue
            path = (tgt if tgt != "/dev/null" else src).split("/", 1)[-1]
            removed = int(m.group(1)) if m.group(1) is not None else 1
            added = int(m.group(2)) if m.group(2) is not None else 1
            hunk: list[Line] = []
            while (removed or added) and i < len(lines):
                body = lines[i]
                i += 1
                if body.startswith("\\"):
                    continue
                if body.startswith("-") and removed:
                    hunk.append((path, "-", body[1:]))
                    removed -= 1
                elif body.startswith("+") and added:
                    hunk.append((path, "+", body[1:]))
                    added -= 1
                else:
                    break
            if hunk:
                hunks.append(hunk)
    return hunks


def line_owners(diffs: list[str]) -> dict[Line, list[int]]:
    """For each line of the net change, the commits (by index) that contributed it, in
    commit order; a line added and later removed (or removed and later restored) by the
    history is nobody's. A line one commit moves (removes here, adds there) is that
    commit's, twice."""
    added: dict[Line, list[int]] = {}
    removed: dict[Line, list[int]] = {}
    for n, diff in enumerate(diffs):
        for hunk in diff_hunks(diff):
            for path, sign, text in hunk:
                plus, minus = (path, "+", text), (path, "-", text)
                # a line an earlier commit removed (added) and this one restores (takes out)
                # cancels; within one commit a line moved is both, and both count
                if sign == "+":
                    if removed.get(minus) and removed[minus][-1] < n:
                        removed[minus].pop()
                    else:
                        added.setdefault(plus, []).append(n)
                elif sign == "-":
                    if added.get(plus) and added[plus][-1] < n:
                        added[plus].pop()
                    else:
                        removed.setdefault(minus, []).append(n)
                else:
                    added.setdefault((path, sign, text), []).append(n)
    return {**added, **removed}


def hunk_labels(total: str, diffs: list[str]) -> list[Hashable]:
    """The commit each hunk of the whole change `total` belongs to in the history `diffs`
    (the one that contributed most of its lines; ties to the earlier). The hunks no commit
    contributed to are one group, ABSENT: a history that leaves the change out has not
    grouped it (were each its own group, an empty history would match a reference of one
    hunk per commit)."""
    owners = {k: list(v) for k, v in line_owners(diffs).items()}
    labels: list[Hashable] = []
    for hunk in diff_hunks(total):
        votes: Counter[int] = Counter()
        for line in hunk:
            queue = owners.get(line)
            if queue:
                votes[queue.pop(0)] += 1
        if votes:
            best = max(votes.values())
            labels.append(min(n for n, v in votes.items() if v == best))
        else:
            labels.append(ABSENT)
    return labels


def cohesion(reference: Reference, commits: list[Commit]) -> tuple[float, int]:
    """(the adjusted Rand index of the two groupings of the change's hunks, the hunks)."""
    ref = hunk_labels(reference.total, reference.diffs)
    got = hunk_labels(reference.total, [c.diff for c in commits])
    return adjusted_rand_index(ref, got), len(ref)


def tree_differences(expected: dict[str, str], got: dict[str, str]) -> list[str]:
    out = [f"{p} is missing" for p in sorted(set(expected) - set(got))]
    out += [f"{p} is not in the reference" for p in sorted(set(got) - set(expected))]
    out += [f"{p} differs" for p in sorted(set(expected) & set(got)) if expected[p] != got[p]]
    return out


def _criterion(name: str, passed: bool, explanation: str, **more: Any) -> dict[str, Any]:
    return {"name": name, "passed": passed, "explanation": explanation, **more}


def criteria(spec: HistoryCheck, got: Submitted, reference: Reference) -> list[dict[str, Any]]:
    """Each criterion the task keeps, decided and explained."""
    commits = got.commits
    n = len(commits)
    out = [_criterion("applies", True, f"all {n} commit(s) applied with git am, in order")]
    if spec.final_tree:
        if got.tree == reference.tree:
            out.append(_criterion("final_tree", True, "the last commit's tree is the reference's"))
        else:
            diff = tree_differences(reference.files, got.files) if got.files else []
            shown = "; ".join(diff[:8]) + (f"; ... ({len(diff)} in all)" if len(diff) > 8 else "")
            out.append(
                _criterion(
                    "final_tree",
                    False,
                    "the last commit's tree is not the reference's" + (f": {shown}" if shown else ""),
                    differences=diff[:50],
                )
            )
    high = f"at most {spec.max_commits}" if spec.max_commits is not None else "no upper bound"
    within = n >= spec.min_commits and (spec.max_commits is None or n <= spec.max_commits)
    said = f"{n} commit(s); the task asks for at least {spec.min_commits}, {high}"
    if n == 0:
        said += " (a plain diff commits nothing: send git format-patch output)"
    out.append(_criterion("commit_count", within, said, commits=n))
    if spec.no_empty:
        empty = [i + 1 for i, c in enumerate(commits) if not c.diff.strip()]
        out.append(
            _criterion(
                "no_empty",
                not empty,
                f"commit(s) {', '.join(map(str, empty))} change nothing" if empty else "no commit is empty",
            )
        )
    if spec.messages:
        bare = [i + 1 for i, c in enumerate(commits) if not c.subject]
        out.append(
            _criterion(
                "messages",
                not bare,
                f"commit(s) {', '.join(map(str, bare))} have no message" if bare else "every commit has a message",
            )
        )
    if spec.subject_max is not None:
        long = [i + 1 for i, c in enumerate(commits) if len(c.subject) > spec.subject_max]
        out.append(
            _criterion(
                "subject_length",
                not long,
                (
                    f"the subject line of commit(s) {', '.join(map(str, long))} is longer than {spec.subject_max}"
                    if long
                    else f"every subject line is at most {spec.subject_max} characters"
                ),
            )
        )
    if spec.no_fixups:
        fix = [i + 1 for i, c in enumerate(commits) if c.subject.startswith(FIXUP_PREFIXES)]
        out.append(
            _criterion(
                "no_fixups",
                not fix,
                (
                    f"commit(s) {', '.join(map(str, fix))} are fixup!/squash!/amend! leftovers"
                    if fix
                    else "no fixup!/squash!/amend! commit is left"
                ),
            )
        )
    if spec.each_commit is not None:
        out.append(each_commit_criterion(spec.each_commit, got, n))
    ari, hunks = cohesion(reference, commits)
    mark = spec.cohesion
    explained = f"adjusted Rand index {ari:.3f} over the change's {hunks} hunk(s) against the reference's grouping"
    if mark is None:
        out.append(_criterion("cohesion", True, explained + " (reported, not decided)", index=round(ari, 4)))
    else:
        met = ari >= mark
        out.append(
            _criterion("cohesion", met, f"{explained}; the pass mark is {mark:g}", index=round(ari, 4), pass_mark=mark)
        )
    return out


def each_commit_criterion(command: str, got: Submitted, n: int) -> dict[str, Any]:
    said = f"`{command[:80]}`"
    if got.each_commit is None:
        why = got.each_commit_problem or "it was not run"
        return _criterion("each_commit_tests", False, f"{said} at every commit: {why}")
    failed = [i + 1 for i, ok in enumerate(got.each_commit) if not ok]
    missing = n - len(got.each_commit)
    if failed or missing:
        parts = [f"it fails at commit(s) {', '.join(map(str, failed))}"] if failed else []
        parts += [f"{missing} commit(s) were not reached in time"] if missing else []
        return _criterion("each_commit_tests", False, f"{said}: {'; '.join(parts)}")
    return _criterion(
        "each_commit_tests", True, f"{said} passes at every one of the {n} commit(s) (its exit status decides)"
    )


def score(found: list[dict[str, Any]]) -> float:
    parts = [max(0.0, min(1.0, c["index"])) if c["name"] == "cohesion" else float(c["passed"]) for c in found]
    return round(sum(parts) / len(parts), 4) if parts else 0.0


def evaluate_history(spec: HistoryCheck, got: Submitted | None, reference: Reference) -> CheckOutcome:
    if got is None or got.problem:
        why = got.problem if got is not None else "the run read back no history"
        return CheckOutcome(False, f"The history could not be read: {why}", details={"criteria": [], "score": 0.0})
    if not got.complete:
        return CheckOutcome(
            False,
            "The history is larger than the grader reads back (commits or text over the report's limit)",
            details={"criteria": [], "score": 0.0},
        )
    found = criteria(spec, got, reference)
    failed = [c for c in found if not c["passed"]]
    details = {"criteria": found, "score": score(found), "commits": len(got.commits)}
    if failed:
        said = "; ".join(f"{c['name']}: {c['explanation']}" for c in failed)
        said = f"The history falls short on {len(failed)} of {len(found)} criteria: {said}"
        return CheckOutcome(False, said, details=details)
    return CheckOutcome(
        True, f"The history meets all {len(found)} criteria (score {details['score']:g})", details=details
    )
