"""History and bisect tasks graded end to end in Docker: a series of commits (git
format-patch output) applied with git am in the container and judged as a history; a
bisect answer matched against the history's commits; a series on a tests task kept to
the same protections as a diff. Each hostile submission has its honest counterpart, and
the last test takes a series and a bisect answer through a live server: single
submissions by the CLI, a batch by the client."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from grader.pipeline import Grader
from grader.tasks.loader import TaskSet
from grader.verdict import Verdict
from helpers.mini import FIXED, GIT_ENV

pytestmark = pytest.mark.docker

README_DOC = "mini\n\nmean(xs) is the arithmetic mean of xs.\nAn empty xs raises ValueError.\n"
STATS = "def total(xs):\n    return sum(xs)\n"
BROKEN = "def mean(xs):\n    return sum(xs) / (len(xs) + 1)\n"
TASK = """\
id: {id}
instruction: "{instruction}"
metadata: {{suite: mini, difficulty: easy, created_at: 2024-01-01}}
repo: {{bundle: ../{bundle}, commit: {commit}}}
environment: python-3.11
feedback: full
protect: {{tests: false}}
check:
{check}limits: {{timeout: 30, memory: 256m, pids: 64}}
"""


def git(*args: str, cwd: Path, input: str | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True, input=input
    ).stdout


def commit(repo: Path, message: str, files: dict[str, str]) -> str:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", message, cwd=repo)
    return git("rev-parse", "HEAD", cwd=repo).strip()


def series(repo: Path, base: str, commits: list[tuple[str, dict[str, str]]]) -> bytes:
    """`commits` made on top of `base` in a scratch branch, as git format-patch output."""
    git("checkout", "-q", "-B", "scratch", base, cwd=repo)
    for message, files in commits:
        commit(repo, message, files)
    out = git("format-patch", "--stdout", base, cwd=repo)
    git("checkout", "-q", "main", cwd=repo)
    return out.encode()


def collide(repo: Path, tree: str, parent: str, taken: list[str]) -> str:
    """A commit of `tree` on `parent` whose sha's first 4 hex digits are those of a commit
    in `taken` (its message varied until they are): an ambiguous abbreviation, made."""
    prefixes = {t[:4] for t in taken}
    for n in range(1_000_000):
        body = (
            f"tree {tree}\nparent {parent}\nauthor t <t@t> 1577836800 +0000\ncommitter t <t@t> 1577836800 +0000\n\n"
            f"Divide by the count plus one (try {n})\n"
        ).encode()
        sha = hashlib.sha1(b"commit %d\0" % len(body) + body).hexdigest()
        if sha[:4] in prefixes:
            made = subprocess.run(
                ["git", "hash-object", "-t", "commit", "-w", "--stdin"], cwd=repo, input=body, capture_output=True
            ).stdout.decode()
            assert made.strip() == sha
            return sha
    raise AssertionError("no colliding commit found")


def answer(sha: str) -> bytes:
    return (
        "diff --git a/BISECT_ANSWER b/BISECT_ANSWER\nnew file mode 100644\n--- /dev/null\n+++ b/BISECT_ANSWER\n"
        f"@@ -0,0 +1 @@\n+{sha}\n"
    ).encode()


@pytest.fixture(scope="module")
def world(tmp_path_factory, settings, mini):
    """The tasks: a history task (a reference of three commits over three files), a bisect
    task (six commits, the fifth breaks mean, its sha's 4-digit prefix shared with another)
    and the mini tests task, all in one tasks directory, graded by one Grader."""
    tasks = tmp_path_factory.mktemp("history-tasks")
    shutil.copytree(settings.tasks_dir, tasks, dirs_exist_ok=True)
    repo = tasks.parent / f"{tasks.name}-repo"
    git("clone", "-q", str(mini.src), str(repo), cwd=tasks)
    git("checkout", "-q", "-B", "main", cwd=repo)
    base = mini.base
    reference = [
        ("Raise ValueError for an empty list", {"calc/__init__.py": FIXED}),
        ("Document mean in the README", {"README.md": README_DOC}),
        ("Add calc.stats.total", {"calc/stats.py": STATS}),
    ]
    for message, files in reference:
        ref = commit(repo, message, files)
    git("branch", "-f", "reference", ref, cwd=repo)
    git("reset", "-q", "--hard", base, cwd=repo)
    # the bisect history: five harmless commits, then the one that breaks mean, then one more
    chain = [base]
    for n in range(4):
        chain.append(commit(repo, f"Note {n} in the README", {"README.md": f"mini\n\nnote {n}\n"}))
    (repo / "calc" / "__init__.py").write_text(BROKEN)
    git("add", "-A", cwd=repo)
    tree = git("write-tree", cwd=repo).strip()
    culprit = collide(repo, tree, chain[-1], chain)
    git("reset", "-q", "--hard", culprit, cwd=repo)
    head = commit(repo, "Last note", {"README.md": "mini\n\nlast note\n"})
    git("branch", "-f", "bisect", head, cwd=repo)
    git("checkout", "-q", "-B", "main", base, cwd=repo)
    git("bundle", "create", "-q", str(tasks / "history.bundle"), "--all", cwd=repo)
    for tid, instruction, commit_at, check in (
        (
            "mini-history",
            "Commit the change as a history of cohesive commits.",
            base,
            f"  type: history\n  reference: {ref}\n  max_commits: 5\n",
        ),
        (
            "mini-history-each",
            "Commit the change as a history whose every commit passes the tests.",
            base,
            f"  type: history\n  reference: {ref}\n  each_commit: python -m pytest -q -p no:cacheprovider tests\n",
        ),
        (
            "mini-bisect",
            "mean([2, 4]) is 3 at the base of this history and not at HEAD: name the commit that broke it.",
            head,
            f"  type: bisect\n  commit: {culprit}\n",
        ),
    ):
        (tasks / tid).mkdir()
        (tasks / tid / "task.yaml").write_text(
            TASK.format(id=tid, instruction=instruction, bundle="history.bundle", commit=commit_at, check=check)
        )
    grader = Grader(settings.model_copy(update={"tasks_dir": tasks}))
    return {
        "tasks": TaskSet(tasks),
        "grader": grader,
        "repo": repo,
        "base": base,
        "reference": reference,
        "chain": chain,
        "culprit": culprit,
        "tasks_dir": tasks,
    }


def grade(world, task_id: str, patch: bytes):
    return world["grader"].grade(world["tasks"].get(task_id), patch)


def criteria(result) -> dict[str, dict]:
    return {c["name"]: c for c in result.check["criteria"]}


# --- the history check ------------------------------------------------------------------------
def test_the_reference_history_passes_with_every_criterion_explained(world):
    patch = series(world["repo"], world["base"], world["reference"])
    result = grade(world, "mini-history", patch)
    assert result.verdict is Verdict.PASS, result.explanation
    assert result.apply.method == "git am"
    found = criteria(result)
    assert set(found) == {
        "applies",
        "final_tree",
        "commit_count",
        "no_empty",
        "messages",
        "subject_length",
        "no_fixups",
        "cohesion",
    }
    assert all(c["passed"] and c["explanation"] for c in found.values())
    assert found["cohesion"]["index"] == 1.0 and result.check["score"] == 1.0 and result.check["commits"] == 3


def test_a_squashed_history_fails_on_cohesion(world):
    everything = {k: v for _, files in world["reference"] for k, v in files.items()}
    result = grade(world, "mini-history", series(world["repo"], world["base"], [("Do it all", everything)]))
    assert result.verdict is Verdict.FAIL
    found = criteria(result)
    assert found["final_tree"]["passed"] and not found["cohesion"]["passed"] and found["cohesion"]["index"] == 0.0


def test_a_scrambled_history_fails_on_cohesion(world):
    (_, fix), (_, doc), (_, stats) = world["reference"]
    scrambled = [("Fix mean and add total", {**fix, **stats}), ("Document", doc)]
    result = grade(world, "mini-history", series(world["repo"], world["base"], scrambled))
    assert result.verdict is Verdict.FAIL
    assert not criteria(result)["cohesion"]["passed"] and criteria(result)["final_tree"]["passed"]


def test_a_history_whose_final_tree_smuggles_a_file_fails_and_names_it(world):
    smuggled = [*world["reference"][:2], ("Add calc.stats.total", {"calc/stats.py": STATS, "calc/extra.py": "x = 1\n"})]
    result = grade(world, "mini-history", series(world["repo"], world["base"], smuggled))
    assert result.verdict is Verdict.FAIL
    found = criteria(result)["final_tree"]
    assert not found["passed"] and "calc/extra.py is not in the reference" in found["explanation"]
    assert criteria(result)["cohesion"]["passed"]  # only the tree is wrong


def test_a_message_with_shell_metacharacters_is_data(world, tmp_path):
    marker = tmp_path / "ran"
    hostile = [(f"Raise ValueError $(touch {marker}) `touch {marker}`; touch {marker}", world["reference"][0][1])]
    hostile += world["reference"][1:]
    result = grade(world, "mini-history", series(world["repo"], world["base"], hostile))
    assert result.verdict is Verdict.FAIL  # its subject is over 72 characters: nothing else is wrong
    assert [c for c, v in criteria(result).items() if not v["passed"]] == ["subject_length"]
    assert not marker.exists()
    honest = [("Raise ValueError; see `mean` ($x)", world["reference"][0][1]), *world["reference"][1:]]
    assert grade(world, "mini-history", series(world["repo"], world["base"], honest)).verdict is Verdict.PASS


def test_a_plain_diff_on_a_history_task_commits_nothing(world):
    everything = {k: v for _, files in world["reference"] for k, v in files.items()}
    repo = world["repo"]
    mbox = series(repo, world["base"], [("all", everything)])
    git("checkout", "-q", "scratch", cwd=repo)
    diff = git("diff", world["base"], "HEAD", cwd=repo).encode()
    git("checkout", "-q", "main", cwd=repo)
    assert mbox.startswith(b"From ")
    result = grade(world, "mini-history", diff)
    assert result.verdict is Verdict.FAIL and result.apply.method == "git apply"
    assert "format-patch" in criteria(result)["commit_count"]["explanation"]


def test_a_series_that_does_not_apply_is_patch_failed_and_undone(world):
    patch = series(world["repo"], world["base"], world["reference"])
    broken = patch.replace(b"\n def mean(xs):", b"\n def mean(ys):")
    assert broken != patch
    result = grade(world, "mini-history", broken)
    assert result.verdict is Verdict.PATCH_FAILED
    assert [a.method for a in result.apply.attempts] == ["git am", "git am --3way"]


def test_every_commit_passes_the_tests_where_the_task_asks(world):
    result = grade(world, "mini-history-each", series(world["repo"], world["base"], world["reference"]))
    assert result.verdict is Verdict.PASS, result.explanation
    assert criteria(result)["each_commit_tests"]["passed"]
    # the same final tree, but the first commit breaks mean and the second mends it
    (_, fix), (_, doc), (_, stats) = world["reference"]
    broken = [
        ("Divide by the count plus one", {"calc/__init__.py": BROKEN, **doc}),
        ("Raise ValueError for an empty list", fix),
        ("Add calc.stats.total", stats),
    ]
    result = grade(world, "mini-history-each", series(world["repo"], world["base"], broken))
    assert result.verdict is Verdict.FAIL
    found = criteria(result)["each_commit_tests"]
    assert not found["passed"] and "fails at commit(s) 1" in found["explanation"], found
    # a commit that would make its tests pass through a protected path is held to the base's
    exits = {"conftest.py": "import os\nos._exit(0)\n"}
    hostile = [
        ("Divide by the count plus one", {"calc/__init__.py": BROKEN, **doc, **exits}),
        ("Raise ValueError for an empty list", {**fix, **exits}),
        ("Add calc.stats.total", stats),
    ]
    result = grade(world, "mini-history-each", series(world["repo"], world["base"], hostile))
    assert result.verdict is Verdict.FAIL
    assert "fails at commit(s) 1" in criteria(result)["each_commit_tests"]["explanation"]
    assert "conftest.py" in result.protections.protected_restored


@pytest.mark.gvisor
def test_under_gvisor_the_series_and_the_answer_are_graded_alike(world, settings):
    gvisor = Grader(settings.model_copy(update={"tasks_dir": world["tasks_dir"]}), runtime="runsc")
    everything = {k: v for _, files in world["reference"] for k, v in files.items()}
    task = world["tasks"].get("mini-history")
    reference = gvisor.grade(task, series(world["repo"], world["base"], world["reference"]))
    squashed = gvisor.grade(task, series(world["repo"], world["base"], [("Do it all", everything)]))
    assert (reference.verdict, squashed.verdict) == (Verdict.PASS, Verdict.FAIL), reference.explanation
    assert reference.provenance.runtime == "runsc"
    answer_ok = gvisor.grade(world["tasks"].get("mini-bisect"), answer(world["culprit"][:12]))
    assert answer_ok.verdict is Verdict.PASS, answer_ok.explanation


# --- a series on a tests task: the same protections as a diff -----------------------------------
def test_a_series_on_a_tests_task_passes_and_one_through_a_protected_path_does_not(world):
    repo = world["repo"]
    honest = series(repo, world["base"], [("Raise ValueError for an empty list", {"calc/__init__.py": FIXED})])
    result = grade(world, "mini", honest)
    assert result.verdict is Verdict.PASS, result.explanation
    skip_all = "import pytest\n\ndef pytest_collection_modifyitems(items):\n    items[:] = []\n"
    hostile = series(
        repo,
        world["base"],
        [
            ("Make the tests pass", {"conftest.py": skip_all}),
            ("Pass the hidden test too", {"tests/test_mean.py": "def test_empty():\n    pass\n"}),
        ],
    )
    result = grade(world, "mini", hostile)
    assert result.verdict is Verdict.FAIL
    assert "conftest.py" in result.protections.protected_restored


# --- the bisect check ---------------------------------------------------------------------------
def test_bisect_answers(world):
    culprit, chain = world["culprit"], world["chain"]
    assert any(c[:4] == culprit[:4] for c in chain)  # the fixture made the 4-digit prefix ambiguous
    assert grade(world, "mini-bisect", answer(culprit)).verdict is Verdict.PASS
    abbreviated = grade(world, "mini-bisect", answer(culprit[:10]))
    assert abbreviated.verdict is Verdict.PASS and abbreviated.check["answer"] == culprit
    ambiguous = grade(world, "mini-bisect", answer(culprit[:4]))
    assert ambiguous.verdict is Verdict.FAIL and "ambiguous" in ambiguous.explanation
    wrong = grade(world, "mini-bisect", answer(chain[-1]))
    assert wrong.verdict is Verdict.FAIL and "is not the commit" in wrong.explanation
    nothing = grade(world, "mini-bisect", b"")
    assert nothing.verdict is Verdict.FAIL and "No answer" in nothing.explanation


# --- through a live server and the CLI ----------------------------------------------------------
@pytest.mark.service
def test_a_series_and_a_bisect_answer_through_the_service(world, live, tmp_path, team_dir, monkeypatch):
    from helpers.remote import cli, use_service
    from helpers.service import new_key, work

    svc, url = live(world["tasks_dir"], tmp_path / "service-cache")
    use_service(monkeypatch, url, new_key(svc, "history-team"))
    (team_dir / "history.patch").write_bytes(series(world["repo"], world["base"], world["reference"]))
    (team_dir / "answer.patch").write_bytes(answer(world["culprit"][:12]))
    got = {}
    for task_id, patch in (("mini-history", "history.patch"), ("mini-bisect", "answer.patch")):
        sent = cli("submit", "--task", task_id, "--patch", patch, "--json")
        assert sent.exit_code == 0, sent.output
        work(svc)
        got[task_id] = json.loads(cli("status", json.loads(sent.stdout)["id"], "--json").stdout)
    assert {k: (v["status"], v["verdict"]) for k, v in got.items()} == {
        "mini-history": ("done", "PASS"),
        "mini-bisect": ("done", "PASS"),
    }, got
    assert got["mini-history"]["result"]["check"]["score"] == 1.0

    # the batch, through the client: the series and its squashed counterpart side by side
    from grader.client import Client

    client = Client(url, new_key(svc, "history-batch"))
    everything = {k: v for _, files in world["reference"] for k, v in files.items()}
    squashed = series(world["repo"], world["base"], [("Do it all", everything)])
    reference = (team_dir / "history.patch").read_bytes()
    sent = client.submit_batch(
        [
            {"task_id": "mini-history", "patch": reference.decode(), "trial": 0},
            {"task_id": "mini-history", "patch": squashed.decode(), "trial": 1},  # one attempt a trial
        ],
        run_id="batch",
    )
    assert sent["accepted"] == 2, sent
    work(svc)
    verdicts = [client.get(item["id"])["verdict"] for item in sent["items"]]
    assert verdicts == ["PASS", "FAIL"]
