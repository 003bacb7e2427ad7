"""Rebuild the example suite: the repository bundles (repos/make_repos.py) and every task
directory here, cut from those repositories.

A task starts at a base ref of one repository and is solved by a fix branch. For a
tests task the fix branch's changes outside tests/ are the gold patch and its test files
are the hidden tests (or the test patch); for an output or exact-match task the whole
fix is the gold patch and the expected output or file is what the fix produces. A merge
task starts at the first parent of a real merge commit, with the second parent merged in
and conflicting; its gold patch takes the conflicted files, markers and all, to the merge
commit. Everything is deterministic, so the shas in the task files never drift:

    python3 tasks/examples/make_examples.py               # rewrite repos/*.bundle and the task directories
    python3 tasks/examples/make_examples.py --out DIR     # write the whole suite under DIR instead
    python3 tasks/examples/repos/verify_examples.py       # then check every task on the host

Standard library only.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
sys.path.insert(0, str(HERE / "repos"))
import make_repos  # noqa: E402  (a sibling script, not a package)

# The suite's defaults (docs/tasks.md, "Suites"): the examples are a demonstration, so
# their submitters see the whole result.
SUITE_YAML = """\
# Defaults for every task under this directory (docs/tasks.md, "Suites"); a task's own
# key wins. Written by make_examples.py. The examples are a demonstration: their
# submitters see the whole result, test output included, hidden tests quoted in a
# traceback included.
defaults:
  feedback: full
# The notes tasks are cut from one history: the merge tasks' answers (the merge commits'
# files, and the fix a later base already holds) are in the later tasks' repository
# bundles (grader tasks validate lists them). A demonstration serves them together,
# knowingly; a benchmark would serve them apart (docs/security.md, "Answers across tasks").
serve_together:
  - [notes-changelog-entry, notes-merge-greeting]
  - [notes-merge-release, notes-merge-greeting]
  - [notes-summary-mode, notes-merge-greeting]
  - [notes-changelog-entry, notes-merge-release]
"""

COMMON = {
    "environment": "python-3.11",
    "limits": {"timeout": 60, "memory": "512m"},
    "gold_patch": "gold.patch",
}

# Each task: the repository, where it starts (`base`), what solves it (`fix`, a branch
# of the repository; or `merged`, a merge commit whose parents make the conflict), the
# task file's own fields, and the check. `{hidden}` in a check is filled in from the fix.
TASKS: dict[str, dict] = {
    "calc-mean-empty": dict(
        repo="calc", base="v0.1.0", fix="fix/mean-empty", difficulty="easy", created=dt.date(2021, 3, 14),
        instruction="Make calc.mean raise ValueError for an empty sequence.",
        prompts={
            "minimal": "Fix mean on empty input.",
            "concise": "calc.mean should raise ValueError for an empty sequence.",
            "contextual": "calc.stats.mean divides by len(values), so an empty list raises ZeroDivisionError. "
                          "Callers expect a ValueError with a clear message instead.",
            "guided": "In calc/stats.py, make mean() check for an empty sequence first and raise "
                      "ValueError('mean() of an empty sequence'); leave the other results unchanged.",
        },
        check={"type": "tests", "hidden_tests": "{hidden}",
               "fail_to_pass": ["tests/test_mean.py::test_empty_raises"],
               "pass_to_pass": ["tests/test_mean.py::test_mean_values",
                                "tests/test_stats_basic.py::test_mean_of_three"]}),
    "calc-median-even": dict(
        repo="calc", base="v0.2.0", fix="fix/median-even", difficulty="medium", created=dt.date(2022, 6, 2),
        instruction="calc.median gives the wrong answer for lists of even length; fix it.",
        check={"type": "tests", "test_patch": "test.patch",
               "fail_to_pass": ["tests/test_median.py::test_even_length_averages_the_middle_pair"],
               "pass_to_pass": ["tests/test_median.py::test_odd_length",
                                "tests/test_stats_basic.py::test_median_of_odd_length"]}),
    "calc-add-mode": dict(
        repo="calc", base="v0.3.0", fix="feature/mode", difficulty="medium", created=dt.date(2023, 1, 20),
        instruction="Add calc.mode(values): the most common value, the smallest on a tie, ValueError when empty.",
        prompts={
            "minimal": "Add a mode function to calc.",
            "concise": "Add calc.mode(values), exported from the package: the most common value, the smallest "
                       "one on a tie, ValueError for an empty sequence.",
            "contextual": "calc has mean, median and spread in calc/stats.py, re-exported by calc/__init__.py. "
                          "Users want mode(values) beside them: the most common value, the smallest one when "
                          "several are equally common, and ValueError for an empty sequence.",
            "guided": "Define mode(values) in calc/stats.py (count occurrences, take the highest count, return "
                      "the smallest value with it, raise ValueError when values is empty), then import it in "
                      "calc/__init__.py and add it to __all__.",
        },
        install="pip install --no-build-isolation --no-deps -e .",
        check={"type": "tests", "hidden_tests": "{hidden}"}),
    "calc-slugify-unicode": dict(
        repo="calc", base="v0.2.0", fix="fix/slugify-unicode", difficulty="hard", created=dt.date(2024, 4, 9),
        instruction="calc.slugify should drop accents and turn every run of non-alphanumerics into one dash, "
                    "with none at the ends.",
        check={"type": "tests", "hidden_tests": "{hidden}",
               "fail_to_pass": ["tests/test_slugify.py::TestSlugify::test_accents_are_stripped",
                                "tests/test_slugify.py::TestSlugify::test_punctuation_becomes_one_dash"],
               "pass_to_pass": ["tests/test_slugify.py::TestSlugify::test_plain_words",
                                "tests/test_text_basic.py::test_slugify_spaces"]}),
    "calc-wordcount-punctuation": dict(
        repo="calc", base="v0.3.0", fix="fix/word-count-punctuation", difficulty="easy", created=dt.date(2025, 2, 11),
        instruction="calc.word_count counts punctuation as words; count only words (a contraction is one word).",
        check={"type": "tests", "runner": "command", "command": "python3 -m unittest -v tests.test_words_unit",
               "hidden_tests": "{hidden}"}),
    "notes-report-top-words": dict(
        repo="notes", base="v0.1.0", fix="fix/report-top-words", difficulty="easy", created=dt.date(2022, 9, 30),
        instruction="`python3 -m wordstat FILE` should print the five most common words as 'word: count', "
                    "most common first, ties alphabetical.",
        check={"type": "output", "command": "python3 -m wordstat sample.txt", "expected": "expected_output.txt"}),
    "notes-summary-mode": dict(
        repo="notes", base="greeting-merged", fix="feature/summary", difficulty="medium", created=dt.date(2023, 11, 5),
        instruction="Add `python3 -m wordstat --summary FILE`: lines, words, distinct words, the most common "
                    "word and the average words per line.",
        check={"type": "output", "command": "python3 -m wordstat --summary sample.txt",
               "expected": "expected_output.txt", "threshold": 0.9, "normalize": {"trailing_whitespace": True}}),
    "notes-changelog-entry": dict(
        repo="notes", base="v0.2.0", fix="docs/unreleased", difficulty="easy", created=dt.date(2024, 8, 19),
        instruction="Add an 'Unreleased' section at the top of CHANGELOG.md with the entry "
                    "'- Report the five most common words.'",
        check={"type": "exact_match", "files": {"CHANGELOG.md": "expected/CHANGELOG.md"},
               "normalize": {"line_endings": True, "trailing_whitespace": True}}),
    "notes-merge-greeting": dict(
        repo="notes", merged="greeting-merged", difficulty="easy", created=dt.date(2025, 5, 27),
        instruction="Resolve the merge conflict in notes/todo.md left by merging branch 'greeting'.",
        prompts={
            "minimal": "Resolve the merge conflict.",
            "concise": "Resolve the conflict in notes/todo.md left by merging branch 'greeting'.",
            "contextual": "Two branches reworded the greeting line in notes/todo.md. Keep the short opening "
                          "from main and the warmer ending from 'greeting'.",
            "guided": "In notes/todo.md, replace the conflict block with the single line "
                      "'- greet new contributors with: Hi, we are glad you are here!'.",
        },
        check={"type": "exact_match", "paths": ["notes/todo.md"]}),
    "notes-merge-release": dict(
        repo="notes", merged="v0.2.0", difficulty="hard", created=dt.date(2025, 10, 3),
        instruction="Finish merging branch 'release' into the 0.1.1 hotfix: resolve the conflicts in CHANGELOG.md "
                    "and notes/authors.txt, keeping both sides' entries.",
        prompts={
            "minimal": "Resolve the merge conflicts.",
            "concise": "Resolve the conflicts in CHANGELOG.md and notes/authors.txt from merging 'release', "
                       "keeping both sides' entries.",
            "contextual": "main carries the 0.1.1 hotfix notes and branch 'release' the 0.2.0 notes; both "
                          "edited CHANGELOG.md and notes/authors.txt. The changelog lists the newest release "
                          "first, the authors are alphabetical by first name, and 'Last updated' is the later "
                          "of the two dates.",
            "guided": "In CHANGELOG.md put the 0.2.0 section above the 0.1.1 section (one blank line between "
                      "sections). In notes/authors.txt keep both new authors, Barbara Liskov then Edsger "
                      "Dijkstra, and keep 'Last updated: 2021-05-16'. Remove every conflict marker.",
        },
        check={"type": "exact_match", "paths": ["CHANGELOG.md", "notes/authors.txt"]}),
}


# The git suite (tasks/git): tasks whose submission is a history or a commit id, cut from the
# calc repository (its bundle stays here; the git suite's task files point at it).
GIT_SUITE_YAML = """\
# Defaults for every task under this directory (docs/tasks.md, "Suites"). Written by
# tasks/examples/make_examples.py: a history task and a bisect task cut from the examples'
# calc repository. A demonstration: submitters see the whole result.
defaults:
  feedback: full
"""
GIT_TASKS: dict[str, dict] = {
    # a history task: the reference is a branch of three commits; the submission is a series
    "calc-history-spread": dict(
        repo="calc", base="v0.3.0", history="history/spread", difficulty="easy", created=dt.date(2025, 11, 2),
        instruction="Commit this change as a history of cohesive commits (one concern each, with a message) and "
                    "submit it as `git format-patch --stdout` output from the base commit:\n\n{change}",
        check={"type": "history", "max_commits": 6}),
    # a bisect task: the answer is the commit, in a patch that adds the file BISECT_ANSWER
    "calc-bisect-mean": dict(
        repo="calc", base="bisect/mean", culprit="bisect/mean~2", difficulty="easy", created=dt.date(2025, 11, 3),
        instruction="mean([1, 2]) is 1.5 at the first commit after v0.3.0 and 1 at HEAD. Find the commit that "
                    "broke it (git bisect) and answer with a patch that adds the file BISECT_ANSWER holding its "
                    "id (full, or an abbreviation that names one commit).",
        check={"type": "bisect"}),
}


def git(root: Path, *args: str, check: bool = True, text: bool = True) -> str | bytes:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root), "TZ": "UTC", "LC_ALL": "C",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_AUTHOR_NAME": "grader", "GIT_AUTHOR_EMAIL": "grader@localhost",  # a merge needs an identity
           "GIT_COMMITTER_NAME": "grader", "GIT_COMMITTER_EMAIL": "grader@localhost"}
    proc = subprocess.run(["git", "-c", "core.autocrlf=false", "-c", "merge.conflictstyle=merge",
                           "-c", "advice.detachedHead=false", *args],
                          cwd=root, env=env, capture_output=True, text=text)
    if check and proc.returncode:
        raise SystemExit(f"git {' '.join(args)} failed in {root}:\n{proc.stderr}")
    return proc.stdout


def sha(root: Path, ref: str) -> str:
    return git(root, "rev-parse", f"{ref}^{{commit}}").strip()


def conflicted_gold(root: Path, ours: str, theirs: str, merged: str, paths: list[str]) -> bytes:
    """`git diff` from the conflicted working tree (markers and all) to the merge commit.

    The merge runs as the grader runs it (`git merge --no-commit --no-ff <sha>`), so the
    markers carry the same labels; the conflicted files are then staged so that `git diff`
    compares them, as they are, with the resolution written over them."""
    git(root, "checkout", "-q", "--detach", ours)
    git(root, "merge", "--no-commit", "--no-ff", theirs, check=False)
    unmerged = sorted(git(root, "diff", "--name-only", "--diff-filter=U").split())
    if unmerged != sorted(paths):
        raise SystemExit(f"merging {theirs} into {ours}: conflicts in {unmerged}, expected {sorted(paths)}")
    git(root, "add", "--", *paths)
    for rel in paths:
        (root / rel).write_bytes(git(root, "show", f"{merged}:{rel}", text=False))
    patch = git(root, "diff", "--", *paths, text=False)
    git(root, "reset", "-q", "--hard")
    git(root, "checkout", "-q", "main")
    return patch


def run_at(root: Path, ref: str, command: str) -> str:
    """The stdout of `command` (run with sh, python3 being this interpreter) at `ref`."""
    git(root, "checkout", "-q", "--detach", ref)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "LC_ALL": "C.UTF-8"}
    proc = subprocess.run(["sh", "-c", command], cwd=root, env=env, capture_output=True, text=True)
    git(root, "checkout", "-q", "main")
    if proc.returncode:
        raise SystemExit(f"{command!r} at {ref} exited {proc.returncode}: {proc.stderr}")
    return proc.stdout


# --- a little YAML, enough for task files, so this script needs nothing but the standard library

_PLAIN = re.compile(r"^[A-Za-z./][A-Za-z0-9_./-]*$")
_RESERVED = {"y", "n", "yes", "no", "true", "false", "on", "off", "null"}


def _scalar(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, dt.date)):
        return str(v)
    if _PLAIN.match(v) and v.lower() not in _RESERVED and not re.fullmatch(r"[0-9a-f]{40}", v):
        return v
    return json.dumps(v, ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar


def to_yaml(obj: dict, indent: int = 0) -> str:
    out = []
    pad = " " * indent
    for key, value in obj.items():
        if isinstance(value, dict):
            out.append(f"{pad}{key}:\n{to_yaml(value, indent + 2)}")
        elif isinstance(value, list):
            out.append(f"{pad}{key}:\n" + "".join(f"{pad}  - {_scalar(v)}\n" for v in value))
        else:
            out.append(f"{pad}{key}: {_scalar(value)}\n")
    return "".join(out)


def write_task(out: Path, task_id: str, spec: dict, root: Path, repos: Path | None = None, suite: str = "examples") -> str:
    """Write one task directory; returns a line for the summary. `repos`: where the
    bundles are, when not beside the task directories (the git suite's)."""
    d = out / task_id
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    check = dict(spec["check"])
    bundle = os.path.relpath((repos or out / "repos") / f"{spec['repo']}.bundle", d)
    repo: dict = {"bundle": bundle}
    instruction = spec["instruction"]
    if "history" in spec:
        base, ref = sha(root, spec["base"]), sha(root, spec["history"])
        repo["commit"] = base
        check = {"type": check.pop("type"), "reference": ref, **check}
        gold = git(root, "format-patch", "--stdout", "--no-signature", f"{base}..{ref}", text=False)
        instruction = instruction.format(change=git(root, "diff", base, ref))
    elif "culprit" in spec:
        repo["commit"] = sha(root, spec["base"])
        culprit = sha(root, spec["culprit"])
        check = {"type": check.pop("type"), "commit": culprit, **check}
        gold = (
            "diff --git a/BISECT_ANSWER b/BISECT_ANSWER\nnew file mode 100644\n--- /dev/null\n+++ b/BISECT_ANSWER\n"
            f"@@ -0,0 +1 @@\n+{culprit}\n"
        ).encode()
    elif "merged" in spec:
        merged = sha(root, spec["merged"])
        ours, theirs = sha(root, f"{merged}^1"), sha(root, f"{merged}^2")
        repo.update(commit=ours, merge=theirs)
        check = {"type": check.pop("type"), "expected_commit": merged, **check}
        gold = conflicted_gold(root, ours, theirs, merged, check["paths"])
    else:
        base, fix = sha(root, spec["base"]), sha(root, spec["fix"])
        repo["commit"] = base
        if check["type"] == "tests":
            gold = git(root, "diff", base, fix, "--", ".", ":(exclude)tests", text=False)
            test_files = git(root, "diff", "--name-only", base, fix, "--", "tests").split()
            if check.get("test_patch"):
                (d / check["test_patch"]).write_bytes(git(root, "diff", base, fix, "--", "tests", text=False))
            else:
                (d / "hidden").mkdir()
                for rel in test_files:
                    (d / "hidden" / Path(rel).name).write_bytes(git(root, "show", f"{fix}:{rel}", text=False))
                check["hidden_tests"] = {rel: f"hidden/{Path(rel).name}" for rel in test_files}
        else:
            gold = git(root, "diff", base, fix, text=False)
            if check["type"] == "output":
                (d / check["expected"]).write_text(run_at(root, fix, check["command"]))
            else:
                for rel, expected in check["files"].items():
                    (d / expected).parent.mkdir(parents=True, exist_ok=True)
                    (d / expected).write_bytes(git(root, "show", f"{fix}:{rel}", text=False))
    (d / "gold.patch").write_bytes(gold)

    task = {"id": task_id, "instruction": instruction}
    if spec.get("prompts"):
        task["prompts"] = spec["prompts"]
    task["metadata"] = {"suite": suite, "language": "python", "difficulty": spec["difficulty"],
                        "created_at": spec["created"], "source": "grader examples"}
    task["repo"] = repo
    task["environment"] = COMMON["environment"]
    if spec.get("install"):
        task["install"] = spec["install"]
    task["check"] = check
    task["limits"] = COMMON["limits"]
    task["gold_patch"] = COMMON["gold_patch"]
    (d / "task.yaml").write_text(to_yaml(task))
    start = spec.get("merged", spec.get("base"))
    return f"{task_id:28} {spec['repo']:6} {check['type']:12} {start:16} {repo['commit']}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help="where to write the suite (default: here)")
    parser.add_argument("--git-out", type=Path, default=None, help="where to write the git suite (default: ../git)")
    args = parser.parse_args(argv)
    if shutil.which("git") is None:
        print("git is required", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        roots = make_repos.build(Path(tmp), args.out / "repos")
        print(f"{'task':28} {'repo':6} {'check':12} {'starts at':16} commit")
        for task_id, spec in TASKS.items():
            print(write_task(args.out, task_id, spec, roots[spec["repo"]]))
        git_out = args.git_out or (args.out.parent / "git" if args.out == HERE else args.out / "git")
        git_out.mkdir(parents=True, exist_ok=True)
        for task_id, spec in GIT_TASKS.items():
            print(write_task(git_out, task_id, spec, roots[spec["repo"]], args.out / "repos", "git"))
        (git_out / "suite.yaml").write_text(GIT_SUITE_YAML)
    (args.out / "suite.yaml").write_text(SUITE_YAML)
    print()
    make_repos.print_refs(args.out / "repos")
    return 0


if __name__ == "__main__":
    sys.exit(main())
