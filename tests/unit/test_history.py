"""The pure parts of history and bisect grading: a series recognised by its form and vetted
as a diff, the adjusted Rand index, the hunks of a diff and who owns them, each history
criterion, the container's read-back and the bisect answer."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from grader.box.runners.history import DIFF_ARGS, LOG_FORMAT
from grader.checks.bisect import evaluate_bisect
from grader.checks.history import (
    Commit,
    Reference,
    Submitted,
    cohesion,
    diff_hunks,
    evaluate_history,
    hunk_labels,
    read_submitted,
)
from grader.grading.spec import AM_CHAIN, APPLY_CHAIN, order_for
from grader.metrics import adjusted_rand_index
from grader.patch import inspect_patch, is_series
from grader.tasks.model import HistoryCheck, Task

ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_AUTHOR_DATE": "2001-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2001-01-01T00:00:00Z",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "PATH": "/usr/bin:/bin",
}
BASE = "".join(f"line {i}\n" for i in range(40))


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, env=ENV, check=True, capture_output=True, text=True).stdout


def edit(text: str, at: int, new: str) -> str:
    lines = text.splitlines(keepends=True)
    lines[at] = new + "\n"
    return "".join(lines)


class Repo:
    """A scratch repository: a base commit, then commits made by `commit`."""

    def __init__(self, path: Path):
        self.path = path
        path.mkdir()
        git(path, "init", "-q", "-b", "main")
        (path / "a.txt").write_text(BASE)
        (path / "b.txt").write_text(BASE)
        git(path, "add", ".")
        git(path, "commit", "-qm", "base")
        self.base = git(path, "rev-parse", "HEAD").strip()

    def commit(self, message: str, files: dict[str, str], allow_empty: bool = False) -> str:
        for rel, text in files.items():
            (self.path / rel).write_text(text)
        git(self.path, "add", ".")
        git(self.path, "commit", "-q", *(["--allow-empty"] if allow_empty else []), "-m", message)
        return git(self.path, "rev-parse", "HEAD").strip()

    def reset(self) -> None:
        git(self.path, "reset", "-q", "--hard", self.base)

    def reference(self) -> Reference:
        head = git(self.path, "rev-parse", "HEAD").strip()
        chain = git(self.path, "rev-list", "--reverse", f"{self.base}..{head}").split()
        parents = [self.base, *chain[:-1]]
        listing = git(self.path, "ls-tree", "-r", "-z", "--full-tree", head)
        return Reference(
            tree=git(self.path, "rev-parse", f"{head}^{{tree}}").strip(),
            files=dict(reversed(e.split("\t", 1)) for e in listing.split("\0") if e),  # type: ignore[misc]
            diffs=[git(self.path, "diff", *DIFF_ARGS, p, c) for p, c in zip(parents, chain, strict=True)],
            total=git(self.path, "diff", *DIFF_ARGS, self.base, head),
        )

    def read_back(self) -> Submitted:
        """What the container's runner reports, taken the same way, then read by the host."""
        shas = git(self.path, "rev-list", "--reverse", "--topo-order", f"{self.base}..HEAD").split()
        log = git(self.path, "log", "--reverse", "--topo-order", "-p", *DIFF_ARGS, LOG_FORMAT, f"{self.base}..HEAD")
        raw = {
            "complete": True,
            "shas": shas,
            "tree": git(self.path, "rev-parse", "HEAD^{tree}").strip(),
            "ls_tree": git(self.path, "ls-tree", "-r", "-z", "--full-tree", "HEAD"),
            "log": log,
        }
        got = read_submitted(raw)
        assert got is not None and got.problem is None, got
        return got


A1, A2, B1 = edit(BASE, 3, "changed a3"), edit(edit(BASE, 3, "changed a3"), 30, "changed a30"), edit(BASE, 5, "b5")


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Repo, Reference]:
    r = Repo(tmp_path / "r")
    r.commit("Change a in two places", {"a.txt": A2})
    r.commit("Change b", {"b.txt": B1})
    ref = r.reference()
    r.reset()
    return r, ref


def spec(**kw: object) -> HistoryCheck:
    return HistoryCheck(type="history", reference="0" * 40, **kw)  # type: ignore[arg-type]


# --- the series: recognised by its form, vetted as a diff ----------------------------------
def test_format_patch_output_is_a_series_and_a_diff_is_not(repo: tuple[Repo, Reference], tmp_path: Path) -> None:
    r, _ = repo
    r.commit("one", {"a.txt": A1})
    r.commit("two", {"b.txt": B1})
    mbox = git(r.path, "format-patch", "--stdout", r.base)
    info = inspect_patch(mbox.encode(), 10**6)
    assert is_series(mbox) and info.ok and info.commits == 2 and info.touched() == {"a.txt", "b.txt"}
    diff = git(r.path, "diff", r.base, "HEAD")
    plain = inspect_patch(diff.encode(), 10**6)
    assert not is_series(diff) and plain.ok and plain.commits == 0 and not plain.series
    # the form is the first line: a "From <sha>" line further down is not a series
    assert not is_series("\n" + mbox)


def test_a_series_touching_git_or_leaving_the_repository_is_refused(repo: tuple[Repo, Reference]) -> None:
    r, _ = repo
    r.commit("one", {"a.txt": A1})
    mbox = git(r.path, "format-patch", "--stdout", r.base)
    assert inspect_patch(mbox.encode(), 10**6).ok
    for bad in (".git/hooks/post-applypatch", "../outside"):
        hostile = mbox.replace("a/a.txt", f"a/{bad}").replace("b/a.txt", f"b/{bad}")
        info = inspect_patch(hostile.encode(), 10**6)
        assert not info.ok and any(bad in p for p in info.problems), info.problems


def test_a_series_message_without_its_headers_is_refused(repo: tuple[Repo, Reference]) -> None:
    r, _ = repo
    r.commit("one", {"a.txt": A1})
    mbox = git(r.path, "format-patch", "--stdout", r.base)
    info = inspect_patch(mbox.replace("\nSubject:", "\nX-Subject:").encode(), 10**6)
    assert not info.ok and "no Subject: header" in info.problems[0]


def test_an_encoded_series_is_refused_for_git_am_would_decode_what_the_vetting_cannot_read(
    repo: tuple[Repo, Reference],
) -> None:
    import base64

    r, _ = repo
    r.commit("one", {"a.txt": A1})
    mbox = git(r.path, "format-patch", "--stdout", r.base)
    head, _, body = mbox.partition("\n\n")
    assert inspect_patch(mbox.encode(), 10**6).ok
    plain = head + "\nContent-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: 8bit\n\n" + body
    assert inspect_patch(plain.encode(), 10**6).ok  # what git writes for a non-ASCII message passes
    hidden = base64.encodebytes(body.replace("a.txt", "conftest.py").encode()).decode()
    encoded = head + "\nContent-Transfer-Encoding: base64\n\n" + hidden
    info = inspect_patch(encoded.encode(), 10**6)
    assert not info.ok and "base64-encoded" in info.problems[0]
    multipart = head + '\nContent-Type: multipart/mixed; boundary="b"' + "\n\n" + body
    assert not inspect_patch(multipart.encode(), 10**6).ok


def test_a_series_is_applied_with_git_am_and_a_diff_with_git_apply(repo: tuple[Repo, Reference]) -> None:
    r, _ = repo
    r.commit("one", {"a.txt": A1})
    task = Task(
        id="h",
        instruction="-",
        environment="python-3.11",
        repo={"path": ".", "commit": r.base},
        check={"type": "history", "reference": r.base},
    )
    mbox = git(r.path, "format-patch", "--stdout", r.base).encode()
    diff = git(r.path, "diff", r.base, "HEAD").encode()
    kw = {"output_limit": 1000, "report_limit": 1000, "private_kernel": False}
    series = order_for(task, {}, inspect_patch(mbox, 10**6), **kw)  # type: ignore[arg-type]
    plain = order_for(task, {}, inspect_patch(diff, 10**6), **kw)  # type: ignore[arg-type]
    assert series.series and [m for m, _ in series.apply_chain] == [m for m, _ in AM_CHAIN]
    assert not plain.series and [m for m, _ in plain.apply_chain] == [m for m, _ in APPLY_CHAIN]


# --- the adjusted Rand index ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        ([0, 0, 1, 1], [0, 0, 1, 1], 1.0),
        ([0, 0, 1, 1], [5, 5, 3, 3], 1.0),  # the labels' names do not matter
        ([0, 0, 1, 1], [0, 0, 0, 0], 0.0),
        ([0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 2, 2], 0.24242424242424246),  # scikit-learn's documented value
        ([0, 1, 0, 1], [0, 0, 1, 1], -0.5),
        ([0], [1], 1.0),
        ([0, 1, 2], [0, 1, 2], 1.0),
        ([0, 0, 0], [0, 1, 2], 0.0),
    ],
)
def test_adjusted_rand_index(a: list[int], b: list[int], want: float) -> None:
    assert adjusted_rand_index(a, b) == pytest.approx(want)
    assert adjusted_rand_index(b, a) == pytest.approx(want)


def test_adjusted_rand_index_needs_the_same_items() -> None:
    with pytest.raises(ValueError):
        adjusted_rand_index([0, 1], [0])


# --- hunks and who owns them ------------------------------------------------------------------
def test_diff_hunks_counts_lines_by_the_headers() -> None:
    diff = (
        "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -2 +2 @@\n--- looks like a header\n+++ so does this\n"
        "@@ -9,0 +10,2 @@\n+one\n+two\n"
    )
    assert diff_hunks(diff) == [
        [("x", "-", "-- looks like a header"), ("x", "+", "++ so does this")],
        [
            ("x", "+", "one"),
            ("x", "+", "two"),
        ],
    ]


def test_each_hunk_goes_to_the_commit_that_made_it(repo: tuple[Repo, Reference]) -> None:
    _, ref = repo
    assert len(diff_hunks(ref.total)) == 3
    assert hunk_labels(ref.total, ref.diffs) == [0, 0, 1]


def test_a_line_added_then_taken_back_belongs_to_no_one(repo: tuple[Repo, Reference]) -> None:
    r, ref = repo
    r.commit("detour", {"a.txt": edit(A2, 10, "temporary")})
    r.commit("a", {"a.txt": A2})
    r.commit("b", {"b.txt": B1})
    got = r.read_back()
    assert hunk_labels(ref.total, [c.diff for c in got.commits]) == [0, 0, 2]
    assert cohesion(ref, got.commits)[0] == pytest.approx(1.0)


def test_a_line_moved_within_one_commit_is_that_commits(tmp_path: Path) -> None:
    r = Repo(tmp_path / "m")
    moved = BASE.replace("line 2\n", "").replace("line 30\n", "line 30\nline 2\n")
    r.commit("Move line 2 down", {"a.txt": moved})
    r.commit("Change b", {"b.txt": B1})
    ref = r.reference()
    assert hunk_labels(ref.total, ref.diffs) == [0, 0, 1]  # before the fix: the moved line's hunks were nobody's
    r.reset()
    r.commit("Everything", {"a.txt": moved, "b.txt": B1})
    squashed = r.read_back()
    assert hunk_labels(ref.total, [c.diff for c in squashed.commits]) == [0, 0, 0]
    assert cohesion(ref, squashed.commits)[0] == 0.0


# --- the criteria ---------------------------------------------------------------------------
def by_name(outcome_details: dict) -> dict[str, dict]:
    return {c["name"]: c for c in outcome_details["criteria"]}


def test_the_reference_history_meets_every_criterion(repo: tuple[Repo, Reference]) -> None:
    r, ref = repo
    r.commit("Change a in two places", {"a.txt": A2})
    r.commit("Change b", {"b.txt": B1})
    out = evaluate_history(spec(), r.read_back(), ref)
    assert out.passed, out.explanation
    assert out.details["score"] == 1.0 and by_name(out.details)["cohesion"]["index"] == 1.0


def test_a_squashed_history_fails_on_cohesion(repo: tuple[Repo, Reference]) -> None:
    r, ref = repo
    r.commit("Everything", {"a.txt": A2, "b.txt": B1})
    out = evaluate_history(spec(), r.read_back(), ref)
    crit = by_name(out.details)
    assert not out.passed and not crit["cohesion"]["passed"] and crit["final_tree"]["passed"]
    assert crit["cohesion"]["index"] == 0.0 and "cohesion" in out.explanation
    # reported, not decided: the same history passes
    assert evaluate_history(spec(cohesion=None), r.read_back(), ref).passed


def test_a_scrambled_history_fails_on_cohesion(repo: tuple[Repo, Reference]) -> None:
    r, ref = repo
    r.commit("Change a3 and b", {"a.txt": A1, "b.txt": B1})
    r.commit("Change a30", {"a.txt": A2})
    out = evaluate_history(spec(), r.read_back(), ref)
    assert not out.passed and not by_name(out.details)["cohesion"]["passed"]
    assert by_name(out.details)["cohesion"]["index"] < 0.5


def test_a_final_tree_that_smuggles_a_file_fails_and_names_it(repo: tuple[Repo, Reference]) -> None:
    r, ref = repo
    r.commit("Change a in two places", {"a.txt": A2})
    r.commit("Change b", {"b.txt": B1, "extra.py": "import os\n"})
    out = evaluate_history(spec(), r.read_back(), ref)
    crit = by_name(out.details)["final_tree"]
    assert not out.passed and not crit["passed"] and "extra.py is not in the reference" in crit["explanation"]


def test_empty_fixup_and_long_subject_commits_fail_their_criteria(repo: tuple[Repo, Reference]) -> None:
    r, ref = repo
    r.commit("Change a in two places", {"a.txt": A2})
    r.commit("fixup! Change a in two places", {"b.txt": B1})
    r.commit("x" * 80, {}, allow_empty=True)
    out = evaluate_history(spec(cohesion=None), r.read_back(), ref)
    crit = by_name(out.details)
    assert not out.passed
    assert not crit["no_empty"]["passed"] and "3" in crit["no_empty"]["explanation"]
    assert not crit["no_fixups"]["passed"] and "2" in crit["no_fixups"]["explanation"]
    assert not crit["subject_length"]["passed"]
    assert crit["final_tree"]["passed"] and crit["messages"]["passed"]
    # the task chooses its criteria: without these three the same history passes
    loose = spec(cohesion=None, no_empty=False, no_fixups=False, subject_max=None)
    assert evaluate_history(loose, r.read_back(), ref).passed


def test_commit_count_bounds(repo: tuple[Repo, Reference]) -> None:
    r, ref = repo
    r.commit("Change a in two places", {"a.txt": A2})
    r.commit("Change b", {"b.txt": B1})
    got = r.read_back()
    assert evaluate_history(spec(min_commits=2, max_commits=2), got, ref).passed
    low = evaluate_history(spec(min_commits=3), got, ref)
    high = evaluate_history(spec(max_commits=1), got, ref)
    assert not low.passed and not high.passed and "2 commit(s)" in by_name(high.details)["commit_count"]["explanation"]


def test_a_message_with_shell_metacharacters_is_only_data(repo: tuple[Repo, Reference]) -> None:
    r, ref = repo
    r.commit("Change a $(touch /tmp/pwned) `id`; rm -rf /", {"a.txt": A2})
    r.commit("Change b", {"b.txt": B1})
    got = r.read_back()
    assert got.commits[0].subject == "Change a $(touch /tmp/pwned) `id`; rm -rf /"
    assert evaluate_history(spec(), got, ref).passed


def test_a_read_back_that_does_not_match_rev_list_is_not_believed(repo: tuple[Repo, Reference]) -> None:
    r, ref = repo
    r.commit("Change a in two places", {"a.txt": A2})
    r.commit("Change b", {"b.txt": B1})
    shas = git(r.path, "rev-list", "--reverse", f"{r.base}..HEAD").split()
    log = git(r.path, "log", "--reverse", "-p", *DIFF_ARGS, LOG_FORMAT, f"{r.base}..HEAD")
    honest = {"complete": True, "shas": shas, "tree": "t", "ls_tree": "", "log": log}
    assert read_submitted(honest).problem is None  # type: ignore[union-attr]
    forged = read_submitted({**honest, "shas": shas[:1]})
    assert forged is not None and forged.problem and not forged.commits
    assert not evaluate_history(spec(), forged, ref).passed
    assert read_submitted({**honest, "log": 5}).problem == "the read-back is malformed"  # type: ignore[union-attr]
    incomplete = read_submitted({"complete": False})
    assert incomplete is not None and not evaluate_history(spec(), incomplete, ref).passed


def test_a_history_without_the_change_does_not_match_a_reference_of_one_hunk_per_commit(tmp_path: Path) -> None:
    r = Repo(tmp_path / "h")
    r.commit("a3", {"a.txt": A1})
    r.commit("b5", {"b.txt": B1})
    ref = r.reference()
    assert hunk_labels(ref.total, ref.diffs) == [0, 1]
    assert hunk_labels(ref.total, []) == ["absent", "absent"]
    assert cohesion(ref, [])[0] == 0.0  # singletons each would have made it 1.0


def test_each_commit_tests_criterion(repo: tuple[Repo, Reference]) -> None:
    r, ref = repo
    r.commit("Change a in two places", {"a.txt": A2})
    r.commit("Change b", {"b.txt": B1})
    got = r.read_back()
    task = spec(each_commit="make test")
    got.each_commit = [True, True]
    assert evaluate_history(task, got, ref).passed
    got.each_commit = [True, False]
    out = evaluate_history(task, got, ref)
    crit = by_name(out.details)["each_commit_tests"]
    assert not out.passed and "fails at commit(s) 2" in crit["explanation"]
    got.each_commit = [True]  # the time ran out before the last commit
    assert (
        "1 commit(s) were not reached"
        in by_name(evaluate_history(task, got, ref).details)["each_commit_tests"]["explanation"]
    )
    got.each_commit = None
    assert not evaluate_history(task, got, ref).passed
    # the read-back: exit status 0 and no timeout is a pass, anything else is not
    shas = [c.sha for c in got.commits]
    raw = {
        "complete": True,
        "shas": shas,
        "tree": got.tree,
        "ls_tree": "",
        "log": git(r.path, "log", "--reverse", "-p", *DIFF_ARGS, LOG_FORMAT, f"{r.base}..HEAD"),
        "each_commit": {"runs": [{"exit_code": 0, "timed_out": False}, {"exit_code": 0, "timed_out": True}]},
    }
    assert read_submitted(raw).each_commit == [True, False]  # type: ignore[union-attr]
    raw["each_commit"] = {"problem": "too large"}
    assert read_submitted(raw).each_commit_problem == "too large"  # type: ignore[union-attr]
    # a task without the criterion does not ask
    assert "each_commit_tests" not in by_name(evaluate_history(spec(), got, ref).details)


def test_a_plain_diff_on_a_history_task_commits_nothing_and_fails() -> None:
    ref = Reference(tree="t", files={}, diffs=["x"], total="")
    out = evaluate_history(spec(), Submitted(tree="u"), ref)
    assert not out.passed and "format-patch" in by_name(out.details)["commit_count"]["explanation"]


# --- bisect -----------------------------------------------------------------------------------
COMMITS = ["abcd1234" + "0" * 32, "abcd5678" + "1" * 32, "ffff0000" + "2" * 32]


@pytest.mark.parametrize(
    ("answer", "passed", "said"),
    [
        (COMMITS[1].encode(), True, "is the commit"),
        (b"abcd5678\n", True, "is the commit"),
        (b"  ABCD5  \n", True, "is the commit"),
        (b"abcd", False, "ambiguous"),  # names two commits: never a guess in the submitter's favour
        (COMMITS[0].encode(), False, "is not the commit"),
        (b"ffff", False, "is not the commit"),
        (b"0123456", False, "names no commit"),
        (b"abc", False, "not a commit id"),
        (b"HEAD~2", False, "not a commit id"),
        (b"$(id)", False, "not a commit id"),
        (None, False, "No answer"),
    ],
)
def test_bisect_answers(answer: bytes | None, passed: bool, said: str) -> None:
    out = evaluate_bisect(answer, COMMITS, COMMITS[1])
    assert out.passed is passed and said in out.explanation, out.explanation


def test_commit_dataclass_subject() -> None:
    assert Commit("s", [], "\n  Subject here \n\nbody", "").subject == "Subject here"
    assert Commit("s", [], "", "").subject == ""
