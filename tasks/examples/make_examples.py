"""Rebuild the example suite: two small repositories written for grader, as git bundles,
and the task directories that point into them.

Everything is deterministic (fixed identities and dates, no randomness), so the commit
shas in the task files come out the same on every machine. Run it after changing a
repository or a task here; `grader tasks validate` then checks every task.

    python3 tasks/examples/make_examples.py
"""

from __future__ import annotations

import difflib
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPOS = HERE / "repos"
_clock = [0]


def git(*args: str, cwd: Path, check: bool = True) -> str:
    _clock[0] += 1
    stamp = f"2024-01-01T00:{_clock[0] // 60:02d}:{_clock[0] % 60:02d}Z"
    env = {**os.environ, "GIT_AUTHOR_NAME": "Grader Examples", "GIT_AUTHOR_EMAIL": "examples@grader.invalid",
           "GIT_COMMITTER_NAME": "Grader Examples", "GIT_COMMITTER_EMAIL": "examples@grader.invalid",
           "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd),
           "TZ": "UTC", "LC_ALL": "C"}
    proc = subprocess.run(["git", "-c", "init.defaultBranch=main", "-c", "core.autocrlf=false",
                           "-c", "commit.gpgsign=false", "-c", "merge.conflictstyle=merge", *args],
                          cwd=cwd, env=env, capture_output=True, text=True)
    if check and proc.returncode:
        raise SystemExit(f"git {' '.join(args)}: {proc.stderr}")
    return proc.stdout


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))


def commit(root: Path, message: str, files: dict[str, str]) -> str:
    write(root, files)
    git("add", "-A", cwd=root)
    git("commit", "-qm", message, cwd=root)
    return git("rev-parse", "HEAD", cwd=root).strip()


def diff_of(root: Path, base: str, files: dict[str, str]) -> str:
    """A real `git diff` of `base` with `files` written."""
    git("checkout", "-q", "--detach", base, cwd=root)
    write(root, files)
    git("add", "-A", cwd=root)
    out = git("diff", "--cached", base, cwd=root)
    git("reset", "-q", "--hard", base, cwd=root)
    return out


def text_diff(path: str, old: str, new: str) -> str:
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=f"a/{path}", tofile=f"b/{path}")
    return f"diff --git a/{path} b/{path}\n" + "".join(lines)


# --- calc: a small Python package --------------------------------------------------------
CALC_BASE = {
    "pyproject.toml": """
        [build-system]
        requires = ["setuptools>=64"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "calc"
        version = "0.1.0"

        [tool.setuptools]
        packages = ["calc"]

        [tool.pytest.ini_options]
        pythonpath = ["."]
        testpaths = ["tests"]
        """,
    "README.md": "# calc\n\nSmall statistics and text helpers.\n",
    "calc/__init__.py": """
        from calc.stats import mean, median
        from calc.text import slugify, word_count

        __all__ = ["mean", "median", "slugify", "word_count"]
        """,
    "calc/stats.py": """
        def mean(values):
            \"\"\"The arithmetic mean of a sequence of numbers.\"\"\"
            return sum(values) / len(values)


        def median(values):
            \"\"\"The middle value of a sequence of numbers.\"\"\"
            ordered = sorted(values)
            return ordered[len(ordered) // 2]
        """,
    "calc/text.py": """
        import re


        def slugify(text):
            \"\"\"A lowercase, dash-separated version of `text` for URLs.\"\"\"
            return re.sub(r"\\s+", "-", text.strip().lower())


        def word_count(text):
            \"\"\"The number of words in `text`.\"\"\"
            return len(text.split())
        """,
    "tests/test_stats_basic.py": """
        from calc import mean, median


        def test_mean_of_three():
            assert mean([1, 2, 3]) == 2


        def test_median_of_odd_length():
            assert median([3, 1, 2]) == 2
        """,
    "tests/test_text_basic.py": """
        from calc import slugify, word_count


        def test_slugify_spaces():
            assert slugify("Hello World") == "hello-world"


        def test_word_count_simple():
            assert word_count("one two three") == 3
        """,
}

CALC_BASE = {rel: textwrap.dedent(text).lstrip("\n") for rel, text in CALC_BASE.items()}
MEAN_FIXED = {"calc/stats.py": CALC_BASE["calc/stats.py"].replace(
    '    """The arithmetic mean of a sequence of numbers."""\n    return sum(values) / len(values)',
    '    """The arithmetic mean of a sequence of numbers."""\n'
    '    if not values:\n        raise ValueError("mean() of an empty sequence")\n'
    '    return sum(values) / len(values)')}
MEDIAN_FIXED = {"calc/stats.py": CALC_BASE["calc/stats.py"].replace(
    "    ordered = sorted(values)\n    return ordered[len(ordered) // 2]",
    "    ordered = sorted(values)\n    middle = len(ordered) // 2\n"
    "    if len(ordered) % 2 == 0:\n        return (ordered[middle - 1] + ordered[middle]) / 2\n"
    "    return ordered[middle]")}
MODE_FIXED = {
    "calc/stats.py": CALC_BASE["calc/stats.py"] + textwrap.dedent('''


        def mode(values):
            """The most common value; the smallest one on a tie."""
            if not values:
                raise ValueError("mode() of an empty sequence")
            counts = {}
            for v in values:
                counts[v] = counts.get(v, 0) + 1
            best = max(counts.values())
            return min(v for v, c in counts.items() if c == best)
        '''),
    "calc/__init__.py": CALC_BASE["calc/__init__.py"].replace(
        "from calc.stats import mean, median", "from calc.stats import mean, median, mode").replace(
        '"median", ', '"median", "mode", '),
}
SLUG_FIXED = {"calc/text.py": CALC_BASE["calc/text.py"].replace(
    'import re\n', 'import re\nimport unicodedata\n').replace(
    '    return re.sub(r"\\s+", "-", text.strip().lower())',
    '    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")\n'
    '    text = re.sub(r"[^a-z0-9]+", "-", text.lower())\n'
    '    return text.strip("-")')}
WORDS_FIXED = {"calc/text.py": CALC_BASE["calc/text.py"].replace(
    '    return len(text.split())',
    '    return len(re.findall(r"[A-Za-z0-9]+(?:\'[A-Za-z]+)?", text))')}

HIDDEN = {
    "calc-mean-empty": {"tests/test_mean.py": """
        import pytest

        from calc import mean


        def test_empty_raises():
            with pytest.raises(ValueError):
                mean([])


        def test_mean_values():
            assert mean([2, 4]) == 3
            assert mean([1.5]) == 1.5
        """},
    "calc-median-even": {"tests/test_median.py": """
        from calc import median


        def test_even_length_averages_the_middle_pair():
            assert median([4, 1, 3, 2]) == 2.5


        def test_odd_length():
            assert median([5, 1, 3]) == 3
        """},
    "calc-add-mode": {"tests/test_mode.py": """
        import pytest

        from calc import mode


        def test_most_common():
            assert mode([1, 2, 2, 3]) == 2


        def test_tie_takes_the_smallest():
            assert mode([3, 1, 3, 1]) == 1


        def test_empty_raises():
            with pytest.raises(ValueError):
                mode([])
        """},
    "calc-slugify-unicode": {"tests/test_slugify.py": """
        from calc import slugify


        class TestSlugify:
            def test_accents_are_stripped(self):
                assert slugify("Crème Brûlée") == "creme-brulee"

            def test_punctuation_becomes_one_dash(self):
                assert slugify("Hello, World!  Again") == "hello-world-again"

            def test_plain_words(self):
                assert slugify("plain words") == "plain-words"
        """},
    "calc-wordcount-punctuation": {"tests/test_words_unit.py": """
        import unittest

        from calc import word_count


        class WordCountTest(unittest.TestCase):
            def test_punctuation_is_not_a_word(self):
                self.assertEqual(word_count("Hello , world - again !"), 3)

            def test_contractions_are_one_word(self):
                self.assertEqual(word_count("don't stop"), 2)

            def test_plain(self):
                self.assertEqual(word_count("a b c"), 3)


        if __name__ == "__main__":
            unittest.main()
        """},
}


# --- notes: a text-report tool and the notes it keeps -----------------------------------------
NOTES_BASE = {
    "README.md": "# notes\n\nA word-statistics tool and the team's notes.\n",
    "sample.txt": """
        the quick brown fox jumps over the lazy dog
        the dog sleeps and the fox runs
        a quick fox is a happy fox
        """,
    "wordstat/__init__.py": """
        import re
        from collections import Counter


        def words(text):
            return re.findall(r"[a-z']+", text.lower())


        def counts(text):
            return Counter(words(text))
        """,
    "wordstat/__main__.py": """
        import sys

        from wordstat import counts


        def main(argv):
            if len(argv) != 1:
                print("usage: python3 -m wordstat FILE", file=sys.stderr)
                return 2
            with open(argv[0]) as f:
                c = counts(f.read())
            for word, n in c.items():
                print(word, n)
            return 0


        if __name__ == "__main__":
            sys.exit(main(sys.argv[1:]))
        """,
    "notes/todo.md": """
        # To do

        - write the release notes
        - greet new contributors with: Welcome aboard!
        - review open pull requests
        """,
    "notes/authors.txt": """
        Ada Lovelace
        Alan Turing
        Grace Hopper
        """,
    "CHANGELOG.md": """
        # Changelog

        ## 0.1.0
        - First release.
        """,
}

NOTES_BASE = {rel: textwrap.dedent(text).lstrip("\n") for rel, text in NOTES_BASE.items()}
REPORT_FIXED = {"wordstat/__main__.py": NOTES_BASE["wordstat/__main__.py"].replace(
    "    for word, n in c.items():\n        print(word, n)",
    "    ranked = sorted(c.items(), key=lambda item: (-item[1], item[0]))\n"
    "    for word, n in ranked[:5]:\n        print(f\"{word}: {n}\")")}
SUMMARY_FIXED = {"wordstat/__main__.py": NOTES_BASE["wordstat/__main__.py"].replace(
    "def main(argv):\n    if len(argv) != 1:", textwrap.dedent('''\
        def summary(text):
            c = counts(text)
            lines = [line for line in text.splitlines() if line.strip()]
            total = sum(c.values())
            top, n = sorted(c.items(), key=lambda item: (-item[1], item[0]))[0]
            return "\\n".join([
                f"lines: {len(lines)}",
                f"words: {total}",
                f"distinct words: {len(c)}",
                f"most common: {top} ({n} times)",
                f"average words per line: {total / len(lines):.2f}",
            ])


        def main(argv):
            if argv[:1] == ["--summary"] and len(argv) == 2:
                with open(argv[1]) as f:
                    print(summary(f.read()))
                return 0
            if len(argv) != 1:'''))}


def build_calc(root: Path) -> dict:
    base = commit(root, "calc: statistics and text helpers", CALC_BASE)
    return {"base": base, "gold": {
        "calc-mean-empty": diff_of(root, base, MEAN_FIXED),
        "calc-median-even": diff_of(root, base, MEDIAN_FIXED),
        "calc-add-mode": diff_of(root, base, MODE_FIXED),
        "calc-slugify-unicode": diff_of(root, base, SLUG_FIXED),
        "calc-wordcount-punctuation": diff_of(root, base, WORDS_FIXED),
    }, "test_patch": {"calc-median-even": diff_of(root, base, HIDDEN["calc-median-even"])}}


def conflicted_gold(root: Path, ours: str, theirs: str, merged: str, paths: list[str]) -> str:
    """The diff from the conflicted working tree (markers and all) to the real merge."""
    git("checkout", "-q", "--detach", ours, cwd=root)
    git("merge", "--no-commit", "--no-ff", theirs, cwd=root, check=False)
    parts = []
    for rel in paths:
        conflicted = (root / rel).read_text()
        if "<<<<<<<" not in conflicted:
            raise SystemExit(f"{rel} did not conflict")
        resolved = git("show", f"{merged}:{rel}", cwd=root)
        parts.append(text_diff(rel, conflicted, resolved))
    git("merge", "--abort", cwd=root)
    git("checkout", "-q", "main", cwd=root)
    return "".join(parts)


def plain(rel: str) -> str:
    """A notes file as it is written to disk (the source above is indented)."""
    return NOTES_BASE[rel]


def build_notes(root: Path) -> dict:
    base = commit(root, "notes: word statistics and team notes", NOTES_BASE)
    # easy: both sides reword the same line of todo.md
    git("checkout", "-q", "-b", "greeting", cwd=root)
    theirs1 = commit(root, "Friendlier greeting", {"notes/todo.md": NOTES_BASE["notes/todo.md"].replace(
        "Welcome aboard!", "Welcome, we are glad you are here!")})
    git("checkout", "-q", "main", cwd=root)
    ours1 = commit(root, "Shorter greeting", {"notes/todo.md": NOTES_BASE["notes/todo.md"].replace(
        "Welcome aboard!", "Hi and welcome!")})
    git("merge", "--no-commit", "--no-ff", theirs1, cwd=root, check=False)
    merged1 = commit(root, "Merge branch 'greeting'", {"notes/todo.md": NOTES_BASE["notes/todo.md"].replace(
        "Welcome aboard!", "Hi, we are glad you are here!")})
    # hard: two files, several conflicting hunks
    git("checkout", "-q", "-b", "release", cwd=root)
    theirs2 = commit(root, "Release 0.2.0 notes", {
        "CHANGELOG.md": plain("CHANGELOG.md").replace("# Changelog\n", "# Changelog\n\n## 0.2.0\n- Summary mode.\n"),
        "notes/authors.txt": "Ada Lovelace\nAlan Turing\nBarbara Liskov\nGrace Hopper\n",
        "notes/todo.md": open_text(root, "notes/todo.md").replace("- write the release notes\n", "- publish 0.2.0\n"),
    })
    git("checkout", "-q", "main", cwd=root)
    ours2 = commit(root, "Hotfix 0.1.1 notes", {
        "CHANGELOG.md": plain("CHANGELOG.md").replace("# Changelog\n", "# Changelog\n\n## 0.1.1\n- Fix the report order.\n"),
        "notes/authors.txt": "Ada Lovelace\nAlan Turing\nEdsger Dijkstra\nGrace Hopper\n",
    })
    git("merge", "--no-commit", "--no-ff", theirs2, cwd=root, check=False)
    merged2 = commit(root, "Merge branch 'release'", {
        "CHANGELOG.md": plain("CHANGELOG.md").replace(
            "# Changelog\n", "# Changelog\n\n## 0.2.0\n- Summary mode.\n\n## 0.1.1\n- Fix the report order.\n"),
        "notes/authors.txt": "Ada Lovelace\nAlan Turing\nBarbara Liskov\nEdsger Dijkstra\nGrace Hopper\n",
    })
    out = {"base": base, "merges": {
        "notes-merge-greeting": (ours1, theirs1, merged1, ["notes/todo.md"]),
        "notes-merge-release": (ours2, theirs2, merged2, ["CHANGELOG.md", "notes/authors.txt"]),
    }, "gold": {
        "notes-report-top-words": diff_of(root, base, REPORT_FIXED),
        "notes-summary-mode": diff_of(root, base, SUMMARY_FIXED),
        "notes-changelog-entry": diff_of(root, base, {"CHANGELOG.md": plain("CHANGELOG.md").replace(
            "# Changelog\n", "# Changelog\n\n## Unreleased\n- Report the five most common words.\n")}),
    }}
    for task_id, (o, t, m, paths) in out["merges"].items():
        out["gold"][task_id] = conflicted_gold(root, o, t, m, paths)
    return out


def open_text(root: Path, rel: str) -> str:
    return (root / rel).read_text()


def run_output(root: Path, base: str, files: dict[str, str], command: list[str]) -> str:
    git("checkout", "-q", "--detach", base, cwd=root)
    write(root, files)
    out = subprocess.run(command, cwd=root, capture_output=True, text=True,
                         env={**os.environ, "PYTHONHASHSEED": "0", "LC_ALL": "C.UTF-8"}).stdout
    git("reset", "-q", "--hard", base, cwd=root)
    git("checkout", "-q", "main", cwd=root)
    return out


def task_yaml(**fields: str) -> str:
    return textwrap.dedent(fields.pop("body")).lstrip("\n").format(**fields)


COMMON = """\
metadata:
  suite: examples
  language: {language}
  difficulty: {difficulty}
  created_at: {created}
  source: grader examples
repo:
  bundle: ../repos/{repo}.bundle
  commit: {commit}
environment: python-3.11
limits: {{timeout: 60, memory: 512m}}
gold_patch: gold.patch
"""

PROMPTS = {
    "calc-mean-empty": {
        "minimal": "Fix mean on empty input.",
        "concise": "calc.mean should raise ValueError for an empty sequence.",
        "contextual": "calc.stats.mean divides by len(values), so an empty list raises ZeroDivisionError. "
                      "Callers expect a ValueError with a clear message instead.",
        "guided": "In calc/stats.py, make mean() check for an empty sequence first and raise "
                  "ValueError('mean() of an empty sequence'); leave the other results unchanged.",
    },
    "notes-merge-greeting": {
        "minimal": "Resolve the merge conflict.",
        "concise": "Resolve the conflict in notes/todo.md left by merging branch 'greeting'.",
        "contextual": "Two branches reworded the greeting line in notes/todo.md. Keep the short opening "
                      "from main and the warmer ending from 'greeting'.",
        "guided": "In notes/todo.md, replace the conflict block with the single line "
                  "'- greet new contributors with: Hi, we are glad you are here!'.",
    },
}


def main() -> int:
    if shutil.which("git") is None:
        print("git is required", file=sys.stderr)
        return 1
    REPOS.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        repos = {}
        for name, build in (("calc", build_calc), ("notes", build_notes)):
            root = Path(tmp) / name
            root.mkdir()
            git("init", "-q", ".", cwd=root)
            repos[name] = (root, build(root))
            git("bundle", "create", "-q", str(REPOS / f"{name}.bundle"), "--all", cwd=root)
        calc_root, calc = repos["calc"]
        notes_root, notes = repos["notes"]

        tasks = {
            "calc-mean-empty": dict(repo="calc", commit=calc["base"], difficulty="easy", created="2021-03-14",
                                    instruction="Make calc.mean raise ValueError for an empty sequence.", check="""
                check:
                  type: tests
                  hidden_tests: {tests/test_mean.py: hidden/test_mean.py}
                  fail_to_pass: [tests/test_mean.py::test_empty_raises]
                  pass_to_pass: [tests/test_mean.py::test_mean_values, tests/test_stats_basic.py::test_mean_of_three]
                """),
            "calc-median-even": dict(repo="calc", commit=calc["base"], difficulty="medium", created="2022-06-02",
                                     instruction="calc.median gives the wrong answer for lists of even length; fix it.",
                                     check="""
                check:
                  type: tests
                  test_patch: test.patch
                  fail_to_pass: [tests/test_median.py::test_even_length_averages_the_middle_pair]
                  pass_to_pass: [tests/test_median.py::test_odd_length, tests/test_stats_basic.py::test_median_of_odd_length]
                """),
            "calc-add-mode": dict(repo="calc", commit=calc["base"], difficulty="medium", created="2023-01-20",
                                  instruction="Add calc.mode(values): the most common value, the smallest on a tie, "
                                              "ValueError when empty.", check="""
                install: pip install --no-build-isolation --no-deps -e .
                check:
                  type: tests
                  hidden_tests: {tests/test_mode.py: hidden/test_mode.py}
                """),
            "calc-slugify-unicode": dict(repo="calc", commit=calc["base"], difficulty="hard", created="2024-04-09",
                                         instruction="calc.slugify should drop accents and turn every run of "
                                                     "non-alphanumerics into one dash, with none at the ends.", check="""
                check:
                  type: tests
                  hidden_tests: {tests/test_slugify.py: hidden/test_slugify.py}
                  fail_to_pass:
                    - tests/test_slugify.py::TestSlugify::test_accents_are_stripped
                    - tests/test_slugify.py::TestSlugify::test_punctuation_becomes_one_dash
                  pass_to_pass:
                    - tests/test_slugify.py::TestSlugify::test_plain_words
                    - tests/test_text_basic.py::test_slugify_spaces
                """),
            "calc-wordcount-punctuation": dict(repo="calc", commit=calc["base"], difficulty="easy",
                                               created="2025-02-11",
                                               instruction="calc.word_count counts punctuation as words; count only "
                                                           "words (a contraction is one word).", check="""
                check:
                  type: tests
                  runner: command
                  command: python3 -m unittest -v tests.test_words_unit
                  hidden_tests: {tests/test_words_unit.py: hidden/test_words_unit.py}
                """),
            "notes-report-top-words": dict(repo="notes", commit=notes["base"], difficulty="easy", created="2022-09-30",
                                           instruction="`python3 -m wordstat FILE` should print the five most common "
                                                       "words as 'word: count', most common first, ties alphabetical.",
                                           check="""
                check:
                  type: output
                  command: python3 -m wordstat sample.txt
                  expected: expected_output.txt
                """),
            "notes-summary-mode": dict(repo="notes", commit=notes["base"], difficulty="medium", created="2023-11-05",
                                       instruction="Add `python3 -m wordstat --summary FILE`: lines, words, distinct "
                                                   "words, the most common word and the average words per line.",
                                       check="""
                check:
                  type: output
                  command: python3 -m wordstat --summary sample.txt
                  expected: expected_output.txt
                  threshold: 0.9
                  normalize: {trailing_whitespace: true}
                """),
            "notes-changelog-entry": dict(repo="notes", commit=notes["base"], difficulty="easy", created="2024-08-19",
                                          instruction="Add an 'Unreleased' section at the top of CHANGELOG.md with "
                                                      "the entry '- Report the five most common words.'", check="""
                check:
                  type: exact_match
                  files: {CHANGELOG.md: expected/CHANGELOG.md}
                  normalize: {line_endings: true, trailing_whitespace: true}
                """),
        }
        for task_id, (ours, theirs, merged, paths) in notes["merges"].items():
            tasks[task_id] = dict(
                repo="notes", commit=ours, merge=theirs, difficulty="easy" if len(paths) == 1 else "hard",
                created="2025-05-27" if len(paths) == 1 else "2025-10-03",
                instruction=f"Resolve the merge conflict in {', '.join(paths)} as the project did.",
                check="check:\n  type: exact_match\n  expected_commit: " + merged + "\n  paths: ["
                      + ", ".join(paths) + "]\n")

        for task_id, t in tasks.items():
            d = HERE / task_id
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir()
            gold = (calc if t["repo"] == "calc" else notes)["gold"][task_id]
            (d / "gold.patch").write_text(gold)
            for rel, text in HIDDEN.get(task_id, {}).items():
                if task_id in calc.get("test_patch", {}):
                    (d / "test.patch").write_text(calc["test_patch"][task_id])
                else:
                    (d / "hidden").mkdir(exist_ok=True)
                    (d / "hidden" / Path(rel).name).write_text(textwrap.dedent(text).lstrip("\n"))
            if task_id == "notes-report-top-words":
                (d / "expected_output.txt").write_text(run_output(
                    notes_root, notes["base"], REPORT_FIXED, [sys.executable, "-m", "wordstat", "sample.txt"]))
            if task_id == "notes-summary-mode":
                (d / "expected_output.txt").write_text(run_output(
                    notes_root, notes["base"], SUMMARY_FIXED, [sys.executable, "-m", "wordstat", "--summary",
                                                               "sample.txt"]))
            if task_id == "notes-changelog-entry":
                (d / "expected").mkdir()
                (d / "expected" / "CHANGELOG.md").write_text(textwrap.dedent(
                    NOTES_BASE["CHANGELOG.md"]).lstrip("\n").replace(
                    "# Changelog\n", "# Changelog\n\n## Unreleased\n- Report the five most common words.\n"))
            lines = [f"id: {task_id}", f"instruction: {t['instruction']!r}"]
            if task_id in PROMPTS:
                lines.append("prompts:")
                lines += [f"  {k}: {v!r}" for k, v in PROMPTS[task_id].items()]
            common = COMMON.format(language="python", difficulty=t["difficulty"], created=t["created"],
                                   repo=t["repo"], commit=t["commit"])
            if t.get("merge"):
                common = common.replace(f"  commit: {t['commit']}\n", f"  commit: {t['commit']}\n  merge: {t['merge']}\n")
            text = "\n".join(lines) + "\n" + common + textwrap.dedent(t["check"]).lstrip("\n")
            (d / "task.yaml").write_text(text)
            print(f"{task_id:28} {t['repo']:6} {t['commit'][:12]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
