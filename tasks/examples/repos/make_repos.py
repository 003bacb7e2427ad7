"""Build the two example repositories, `calc` and `notes`, and write each as a git bundle
beside this file.

The repositories are written here, in full, as they stand at every commit. Each has a
few base commits (tagged releases) with deliberate bugs or missing features, a branch per
fix or feature (the code change and the tests that prove it, as a project would merge
it), and, in `notes`, two branches that conflict with `main` and the merge commits that
resolved them. The example tasks start at those bases; their gold patches, hidden tests
and expected files are cut from the fix branches by ../make_examples.py.

Every commit has a fixed author, committer and date (one day after the previous one), and
git runs without system or user configuration, so the shas are the same on every run and
every machine:

    python3 tasks/examples/repos/make_repos.py           # write calc.bundle, notes.bundle; print the refs
    python3 tasks/examples/repos/make_repos.py --check   # build twice elsewhere; compare with the bundles here

Standard library only.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
NAMES = ("calc", "notes")
IDENTITY = {"name": "Grader Examples", "email": "examples@grader.invalid"}


class Repo:
    """A scratch repository built one deterministic commit at a time."""

    def __init__(self, root: Path, start: dt.datetime):
        self.root = root
        self.clock = start
        root.mkdir(parents=True)
        self.git("init", "-q", ".")

    def git(self, *args: str, check: bool = True) -> str:
        stamp = self.clock.strftime("%Y-%m-%dT%H:%M:%SZ")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.root), "TZ": "UTC", "LC_ALL": "C",
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_AUTHOR_NAME": IDENTITY["name"], "GIT_AUTHOR_EMAIL": IDENTITY["email"], "GIT_AUTHOR_DATE": stamp,
            "GIT_COMMITTER_NAME": IDENTITY["name"], "GIT_COMMITTER_EMAIL": IDENTITY["email"],
            "GIT_COMMITTER_DATE": stamp,
        }
        proc = subprocess.run(
            ["git", "-c", "init.defaultBranch=main", "-c", "core.autocrlf=false", "-c", "commit.gpgsign=false",
             "-c", "tag.gpgsign=false", "-c", "merge.conflictstyle=merge", "-c", "pack.threads=1", *args],
            cwd=self.root, env=env, capture_output=True, text=True)
        if check and proc.returncode:
            raise SystemExit(f"git {' '.join(args)} failed in {self.root}:\n{proc.stdout}{proc.stderr}")
        return proc.stdout

    def write(self, files: dict[str, str | None]) -> None:
        for rel, text in files.items():
            path = self.root / rel
            if text is None:
                path.unlink()
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(text.encode("utf-8"))

    def commit(self, message: str, files: dict[str, str | None]) -> str:
        """Commit `files` (a path -> its new text, or None to delete it) one day after the last commit."""
        self.clock += dt.timedelta(days=1)
        self.write(files)
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.sha("HEAD")

    def merge(self, branch: str, message: str, resolved: dict[str, str]) -> str:
        """Merge `branch` into the current branch; it must conflict in exactly the files of
        `resolved`, whose texts are the hand-written resolution that gets committed."""
        proc = self.git("merge", "--no-ff", "--no-commit", branch, check=False)
        conflicted = sorted(self.git("diff", "--name-only", "--diff-filter=U").split())
        if conflicted != sorted(resolved):
            raise SystemExit(f"merging {branch}: expected conflicts in {sorted(resolved)}, got {conflicted}\n{proc}")
        return self.commit(message, resolved)

    def branch(self, name: str, at: str = "HEAD") -> None:
        self.git("checkout", "-q", "-b", name, at)

    def checkout(self, ref: str) -> None:
        self.git("checkout", "-q", ref)

    def tag(self, name: str) -> None:
        self.git("tag", name)

    def sha(self, ref: str) -> str:
        return self.git("rev-parse", f"{ref}^{{commit}}").strip()

    def refs(self) -> dict[str, str]:
        out = self.git("for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads", "refs/tags")
        return dict(line.split() for line in out.splitlines())


def src(text: str) -> str:
    """A file's text, written indented in this script."""
    return textwrap.dedent(text).lstrip("\n")


def edit(text: str, old: str, new: str) -> str:
    """`text` with its one occurrence of `old` replaced: a fix written as a change."""
    if text.count(old) != 1:
        raise SystemExit(f"edit: {old!r} occurs {text.count(old)} times")
    return text.replace(old, new)


# ----------------------------------------------------------------------------------------------
# calc: a tiny Python package of statistics and text helpers, tested with pytest
#
#   v0.1.0  mean and median              mean([]) raises ZeroDivisionError;
#                                        median of an even-length list is wrong
#   v0.2.0  + slugify and word_count     slugify keeps accents and punctuation;
#                                        word_count counts punctuation as words
#   v0.3.0  + spread, a README example   (no mode() yet)
#
#   fix/mean-empty              from v0.1.0
#   fix/median-even             from v0.2.0
#   fix/slugify-unicode         from v0.2.0
#   feature/mode                from v0.3.0
#   fix/word-count-punctuation  from v0.3.0
# ----------------------------------------------------------------------------------------------

CALC_PYPROJECT = src("""
    [build-system]
    requires = ["setuptools>=64"]
    build-backend = "setuptools.build_meta"

    [project]
    name = "calc"
    version = "{version}"
    requires-python = ">=3.9"

    [tool.setuptools]
    packages = ["calc"]

    [tool.pytest.ini_options]
    pythonpath = ["."]
    testpaths = ["tests"]
    """)

CALC_INIT_V1 = src('''
    """Small statistics and text helpers."""

    from calc.stats import mean, median

    __all__ = ["mean", "median"]
    ''')

CALC_INIT_V2 = src('''
    """Small statistics and text helpers."""

    from calc.stats import mean, median
    from calc.text import slugify, word_count

    __all__ = ["mean", "median", "slugify", "word_count"]
    ''')

CALC_INIT_V3 = src('''
    """Small statistics and text helpers."""

    from calc.stats import mean, median, spread
    from calc.text import slugify, word_count

    __all__ = ["mean", "median", "slugify", "spread", "word_count"]
    ''')

STATS_V1 = src('''
    """Descriptive statistics of plain sequences of numbers."""


    def mean(values):
        """The arithmetic mean of a sequence of numbers."""
        return sum(values) / len(values)


    def median(values):
        """The middle value of a sequence of numbers."""
        ordered = sorted(values)
        return ordered[len(ordered) // 2]
    ''')

STATS_V3 = STATS_V1 + src('''


    def spread(values):
        """The distance between the largest and the smallest value."""
        return max(values) - min(values)
    ''')

TEXT_V2 = src('''
    """Text helpers."""

    import re


    def slugify(text):
        """A lowercase, dash-separated version of `text` for URLs."""
        return re.sub(r"\\s+", "-", text.strip().lower())


    def word_count(text):
        """The number of words in `text`."""
        return len(text.split())
    ''')

TEST_STATS_BASIC = src("""
    from calc import mean, median


    def test_mean_of_three():
        assert mean([1, 2, 3]) == 2


    def test_median_of_odd_length():
        assert median([3, 1, 2]) == 2
    """)

TEST_TEXT_BASIC = src("""
    from calc import slugify, word_count


    def test_slugify_spaces():
        assert slugify("Hello World") == "hello-world"


    def test_word_count_simple():
        assert word_count("one two three") == 3
    """)

CALC_README_V1 = src("""
    # calc

    Small statistics helpers. Run the tests with `python -m pytest`.
    """)

CALC_README_V3 = src("""
    # calc

    Small statistics and text helpers. Run the tests with `python -m pytest`.

    ```python
    >>> from calc import mean, spread, slugify
    >>> mean([1, 2, 3]), spread([4, 9, 1])
    (2.0, 8)
    >>> slugify("Hello World")
    'hello-world'
    ```
    """)

# --- a history, and a history to bisect ---------------------------------------------------------

STATS_SPREAD_CHECKED = edit(STATS_V3,
    '    """The distance between the largest and the smallest value."""\n',
    '    """The distance between the largest and the smallest value."""\n'
    '    if not values:\n'
    '        raise ValueError("spread() of an empty sequence")\n')
CALC_README_SPREAD = CALC_README_V3 + src("""

    `mean`, `median` and `spread` take any sequence of numbers; `spread` of an empty one
    raises `ValueError`.
    """)
HISTORY_SPREAD = [
    ("spread() of an empty sequence raises ValueError", {"calc/stats.py": STATS_SPREAD_CHECKED}),
    ("Say in the README what the statistics take", {"README.md": CALC_README_SPREAD}),
    ("Version 0.3.1", {"pyproject.toml": CALC_PYPROJECT.format(version="0.3.1")}),
]
STATS_MEAN_FLOORED = edit(STATS_V3, "sum(values) / len(values)", "sum(values) // len(values)")
README_TESTS = edit(CALC_README_V3, "`python -m pytest`", "`python3 -m pytest -q`")
README_MEDIAN = edit(README_TESTS, "mean, spread, slugify", "mean, median, spread, slugify")
BISECT_MEAN = [
    ("Say in the README how to run the tests", {"README.md": README_TESTS}),
    ("Version 0.4.0a1", {"pyproject.toml": CALC_PYPROJECT.format(version="0.4.0a1")}),
    ("Show median in the README", {"README.md": README_MEDIAN}),
    ("Keep mean() in integers", {"calc/stats.py": STATS_MEAN_FLOORED}),
    ("Version 0.4.0a2", {"pyproject.toml": CALC_PYPROJECT.format(version="0.4.0a2")}),
    ("Thank the contributors in the README", {"README.md": README_MEDIAN + "\nThanks to everyone who sent a fix.\n"}),
]

# --- the fixes ---------------------------------------------------------------------------------

STATS_MEAN_FIXED = edit(STATS_V1,
    '    """The arithmetic mean of a sequence of numbers."""\n',
    '    """The arithmetic mean of a sequence of numbers."""\n'
    '    if not values:\n'
    '        raise ValueError("mean() of an empty sequence")\n')

TEST_MEAN = src("""
    import pytest

    from calc import mean


    def test_empty_raises():
        with pytest.raises(ValueError):
            mean([])


    def test_mean_values():
        assert mean([2, 4]) == 3
        assert mean([1.5]) == 1.5
    """)

STATS_MEDIAN_FIXED = edit(STATS_V1,
    "    ordered = sorted(values)\n"
    "    return ordered[len(ordered) // 2]\n",
    "    ordered = sorted(values)\n"
    "    middle = len(ordered) // 2\n"
    "    if len(ordered) % 2 == 0:\n"
    "        return (ordered[middle - 1] + ordered[middle]) / 2\n"
    "    return ordered[middle]\n")

TEST_MEDIAN = src("""
    from calc import median


    def test_even_length_averages_the_middle_pair():
        assert median([4, 1, 3, 2]) == 2.5


    def test_odd_length():
        assert median([5, 1, 3]) == 3
    """)

TEXT_SLUGIFY_FIXED = src('''
    """Text helpers."""

    import re
    import unicodedata


    def slugify(text):
        """A lowercase, dash-separated version of `text` for URLs."""
        text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
        text = re.sub(r"[^a-z0-9]+", "-", text.lower())
        return text.strip("-")


    def word_count(text):
        """The number of words in `text`."""
        return len(text.split())
    ''')

TEST_SLUGIFY = src("""
    from calc import slugify


    class TestSlugify:
        def test_accents_are_stripped(self):
            assert slugify("Crème Brûlée") == "creme-brulee"

        def test_punctuation_becomes_one_dash(self):
            assert slugify("Hello, World!  Again") == "hello-world-again"

        def test_plain_words(self):
            assert slugify("plain words") == "plain-words"
    """)

CALC_INIT_MODE = edit(edit(CALC_INIT_V3,
    "from calc.stats import mean, median, spread", "from calc.stats import mean, median, mode, spread"),
    '"median", ', '"median", "mode", ')

STATS_MODE = STATS_V3 + src('''


    def mode(values):
        """The most common value; the smallest one on a tie."""
        if not values:
            raise ValueError("mode() of an empty sequence")
        counts = {}
        for v in values:
            counts[v] = counts.get(v, 0) + 1
        best = max(counts.values())
        return min(v for v, c in counts.items() if c == best)
    ''')

TEST_MODE = src("""
    import pytest

    from calc import mode


    def test_most_common():
        assert mode([1, 2, 2, 3]) == 2


    def test_tie_takes_the_smallest():
        assert mode([3, 1, 3, 1]) == 1


    def test_empty_raises():
        with pytest.raises(ValueError):
            mode([])
    """)

TEXT_WORDS_FIXED = edit(TEXT_V2,
    "    return len(text.split())\n",
    "    return len(re.findall(r\"[A-Za-z0-9]+(?:'[A-Za-z]+)?\", text))\n")

TEST_WORDS_UNIT = src("""
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
    """)


def build_calc(repo: Repo) -> None:
    repo.commit("Start calc: mean and median", {
        "pyproject.toml": CALC_PYPROJECT.format(version="0.1.0"),
        "README.md": CALC_README_V1,
        "calc/__init__.py": CALC_INIT_V1,
        "calc/stats.py": STATS_V1,
        "tests/test_stats_basic.py": TEST_STATS_BASIC,
    })
    repo.tag("v0.1.0")
    repo.commit("Add text helpers: slugify and word_count", {
        "pyproject.toml": CALC_PYPROJECT.format(version="0.2.0"),
        "calc/__init__.py": CALC_INIT_V2,
        "calc/text.py": TEXT_V2,
        "tests/test_text_basic.py": TEST_TEXT_BASIC,
    })
    repo.tag("v0.2.0")
    repo.commit("Add spread(); show the helpers in the README", {
        "pyproject.toml": CALC_PYPROJECT.format(version="0.3.0"),
        "README.md": CALC_README_V3,
        "calc/__init__.py": CALC_INIT_V3,
        "calc/stats.py": STATS_V3,
    })
    repo.tag("v0.3.0")

    for branch, base, message, files in [
        ("fix/mean-empty", "v0.1.0", "mean() of an empty sequence raises ValueError",
         {"calc/stats.py": STATS_MEAN_FIXED, "tests/test_mean.py": TEST_MEAN}),
        ("fix/median-even", "v0.2.0", "median() of an even-length list averages the middle pair",
         {"calc/stats.py": STATS_MEDIAN_FIXED, "tests/test_median.py": TEST_MEDIAN}),
        ("fix/slugify-unicode", "v0.2.0", "slugify() drops accents and collapses punctuation",
         {"calc/text.py": TEXT_SLUGIFY_FIXED, "tests/test_slugify.py": TEST_SLUGIFY}),
        ("feature/mode", "v0.3.0", "Add mode()",
         {"calc/__init__.py": CALC_INIT_MODE, "calc/stats.py": STATS_MODE, "tests/test_mode.py": TEST_MODE}),
        ("fix/word-count-punctuation", "v0.3.0", "word_count() ignores punctuation",
         {"calc/text.py": TEXT_WORDS_FIXED, "tests/test_words_unit.py": TEST_WORDS_UNIT}),
    ]:
        repo.branch(branch, base)
        repo.commit(message, files)
    # history/spread: three commits of three concerns from v0.3.0 (the history task's reference)
    repo.branch("history/spread", "v0.3.0")
    for message, files in HISTORY_SPREAD:
        repo.commit(message, files)
    # bisect/mean: six commits from v0.3.0; the fourth makes mean() floor its result
    repo.branch("bisect/mean", "v0.3.0")
    for message, files in BISECT_MEAN:
        repo.commit(message, files)
    repo.checkout("main")


# ----------------------------------------------------------------------------------------------
# notes: `python3 -m wordstat FILE` and the team's plain-text notes
#
#   v0.1.0  wordstat prints every word's count in first-seen order
#   main: "Shorter greeting"  x  greeting: "Friendlier greeting"   -> merge (notes/todo.md, 1 hunk)
#   v0.1.1  hotfix notes      x  release: "Release 0.2.0 notes"     -> merge (CHANGELOG.md, 1 hunk;
#                                                                     notes/authors.txt, 2 hunks)
#   v0.2.0  the release merge
#
#   fix/report-top-words   from v0.1.0: print the five most common words, ranked
#   feature/summary        from the greeting merge: a --summary mode
#   docs/unreleased        from v0.2.0: an 'Unreleased' changelog section
# ----------------------------------------------------------------------------------------------

NOTES_README = src("""
    # notes

    A word-statistics tool and the team's notes.

        python3 -m wordstat sample.txt
    """)

SAMPLE = src("""
    the quick brown fox jumps over the lazy dog
    the dog sleeps and the fox runs
    a quick fox is a happy fox
    """)

WORDSTAT_INIT = src('''
    """Word statistics of plain text."""

    import re
    from collections import Counter


    def words(text):
        return re.findall(r"[a-z']+", text.lower())


    def counts(text):
        return Counter(words(text))
    ''')

WORDSTAT_MAIN = src('''
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
    ''')

TODO = src("""
    # To do

    - write the release notes
    - greet new contributors with: {greeting}
    - review open pull requests
    """)

AUTHORS = src("""
    # Authors, alphabetical by first name

    Ada Lovelace
    Alan Turing
    {added}Grace Hopper
    John McCarthy
    Ken Thompson

    Last updated: {updated}
    """)

CHANGELOG = src("""
    # Changelog
    {new}
    ## 0.1.0
    - First release.
    """)

# --- the fixes and the branches that conflict ---------------------------------------------------

WORDSTAT_MAIN_TOP5 = edit(WORDSTAT_MAIN,
    "    for word, n in c.items():\n"
    "        print(word, n)\n",
    "    ranked = sorted(c.items(), key=lambda item: (-item[1], item[0]))\n"
    "    for word, n in ranked[:5]:\n"
    "        print(f\"{word}: {n}\")\n")

WORDSTAT_MAIN_SUMMARY = edit(WORDSTAT_MAIN, "def main(argv):\n    if len(argv) != 1:\n", src('''
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
        if len(argv) != 1:
    '''))

CHANGELOG_0_2_0 = "\n## 0.2.0\n- A --summary mode.\n- Friendlier greeting for new contributors.\n"
CHANGELOG_0_1_1 = "\n## 0.1.1\n- wordstat reads files as UTF-8.\n"
CHANGELOG_UNRELEASED = "\n## Unreleased\n- Report the five most common words.\n"


def build_notes(repo: Repo) -> None:
    repo.commit("Start notes: wordstat and the team's notes", {
        "README.md": NOTES_README,
        "sample.txt": SAMPLE,
        "wordstat/__init__.py": WORDSTAT_INIT,
        "wordstat/__main__.py": WORDSTAT_MAIN,
        "notes/todo.md": TODO.format(greeting="Welcome aboard!"),
        "notes/authors.txt": AUTHORS.format(added="", updated="2021-05-11"),
        "CHANGELOG.md": CHANGELOG.format(new=""),
    })
    repo.tag("v0.1.0")

    # An easy conflict: both sides reword the same line.
    repo.branch("greeting")
    repo.commit("Friendlier greeting", {"notes/todo.md": TODO.format(greeting="Welcome, we are glad you are here!")})
    repo.checkout("main")
    repo.commit("Shorter greeting", {"notes/todo.md": TODO.format(greeting="Hi and welcome!")})
    repo.merge("greeting", "Merge branch 'greeting'",
               {"notes/todo.md": TODO.format(greeting="Hi, we are glad you are here!")})
    repo.tag("greeting-merged")

    # A harder one: two files, three conflicting hunks; todo.md merges cleanly.
    repo.branch("release")
    repo.commit("Release 0.2.0 notes", {
        "CHANGELOG.md": CHANGELOG.format(new=CHANGELOG_0_2_0),
        "notes/authors.txt": AUTHORS.format(added="Barbara Liskov\n", updated="2021-05-15"),
        "notes/todo.md": edit(TODO.format(greeting="Hi, we are glad you are here!"),
                              "- write the release notes\n", "- publish 0.2.0\n"),
    })
    repo.checkout("main")
    repo.commit("Hotfix 0.1.1 notes", {
        "CHANGELOG.md": CHANGELOG.format(new=CHANGELOG_0_1_1),
        "notes/authors.txt": AUTHORS.format(added="Edsger Dijkstra\n", updated="2021-05-16"),
    })
    repo.tag("v0.1.1")
    repo.merge("release", "Merge branch 'release'", {
        "CHANGELOG.md": CHANGELOG.format(new=CHANGELOG_0_2_0 + CHANGELOG_0_1_1),
        "notes/authors.txt": AUTHORS.format(added="Barbara Liskov\nEdsger Dijkstra\n", updated="2021-05-16"),
    })
    repo.tag("v0.2.0")

    for branch, base, message, files in [
        ("fix/report-top-words", "v0.1.0", "Report the five most common words, ranked",
         {"wordstat/__main__.py": WORDSTAT_MAIN_TOP5}),
        ("feature/summary", "greeting-merged", "Add a --summary mode",
         {"wordstat/__main__.py": WORDSTAT_MAIN_SUMMARY}),
        ("docs/unreleased", "v0.2.0", "Changelog: an Unreleased section",
         {"CHANGELOG.md": CHANGELOG.format(new=CHANGELOG_UNRELEASED + CHANGELOG_0_2_0 + CHANGELOG_0_1_1)}),
    ]:
        repo.branch(branch, base)
        repo.commit(message, files)
    repo.checkout("main")


BUILDERS = {
    "calc": (build_calc, dt.datetime(2021, 3, 1, 9, 0, tzinfo=dt.timezone.utc)),
    "notes": (build_notes, dt.datetime(2021, 5, 10, 9, 0, tzinfo=dt.timezone.utc)),
}


def build(workdir: Path, bundles: Path | None = None) -> dict[str, Path]:
    """Build every repository under `workdir` (and, given `bundles`, write NAME.bundle there).
    Returns each repository's working directory."""
    roots = {}
    for name, (builder, start) in BUILDERS.items():
        repo = Repo(workdir / name, start)
        builder(repo)
        if bundles is not None:
            bundles.mkdir(parents=True, exist_ok=True)
            repo.git("bundle", "create", "-q", str(bundles / f"{name}.bundle"), "--all")
        roots[name] = repo.root
    return roots


def bundle_refs(bundle: Path) -> dict[str, str]:
    """ref -> sha as listed by a bundle file."""
    out = subprocess.run(["git", "bundle", "list-heads", str(bundle)], capture_output=True, text=True, check=True)
    refs = {}
    for line in out.stdout.splitlines():
        sha, ref = line.split()
        refs[ref.removeprefix("refs/heads/").removeprefix("refs/tags/")] = sha
    return refs


def check(bundles: Path) -> list[str]:
    """Build twice in scratch directories; both builds, and the bundles in `bundles`,
    must agree on every ref's sha and byte for byte. Returns the problems."""
    problems = []
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        build(Path(a) / "work", Path(a) / "out")
        build(Path(b) / "work", Path(b) / "out")
        for name in NAMES:
            first, second = Path(a) / "out" / f"{name}.bundle", Path(b) / "out" / f"{name}.bundle"
            here = bundles / f"{name}.bundle"
            if bundle_refs(first) != bundle_refs(second):
                problems.append(f"{name}: two builds give different shas")
            elif first.read_bytes() != second.read_bytes():
                problems.append(f"{name}: two builds give the same shas but different bundle bytes")
            if not here.exists():
                problems.append(f"{name}: {here} is missing; run make_repos.py")
            elif bundle_refs(here) != bundle_refs(first):
                problems.append(f"{name}: {here.name} is stale (its shas differ from a fresh build); run make_repos.py")
            elif here.read_bytes() != first.read_bytes():
                problems.append(f"{name}: {here.name} has the right shas but other bytes (another git version?)")
    return problems


def print_refs(bundles: Path) -> None:
    for name in NAMES:
        print(f"{name}.bundle")
        for ref, sha in sorted(bundle_refs(bundles / f"{name}.bundle").items()):
            print(f"  {ref:28} {sha}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help="where to write the bundles (default: beside this file)")
    parser.add_argument("--check", action="store_true", help="verify determinism and that the bundles are current")
    args = parser.parse_args(argv)
    if args.check:
        problems = check(args.out)
        for p in problems:
            print("FAIL", p)
        if not problems:
            print("ok: two fresh builds and the bundles here agree byte for byte")
            print_refs(args.out)
        return 1 if problems else 0
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp), args.out)
    print_refs(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
