"""Test ids as other benchmarks write them, resolved against the ids a run reported.

The Node.js runners report every test as `<file>::<describe > ... > test>` (a name that
repeats within a file gets ` [2]`, ` [3]`, ...). Datasets list the same tests in their own
conventions: SWE-bench Multilingual and Multi-SWE-bench take them from jest's, vitest's or
mocha's output, so a listed id may be the title path without the file joined by " > ",
jest's " › " or its fullName's " ", " - " or ":", the test's bare title, the file and the
path as vitest prints it (`file > a > b`), or a test file alone (all its tests). This
module resolves each listed id to the reported tests it names, in one place, for every
runner whose module says `ID_STYLE = "title-path"`.

The rules, chosen so that a listed id can never be satisfied by less than it names:

- a listed id names every reported test one of whose spellings it equals (never a prefix:
  `a > b` does not name `a > b c`); several tests named by one id must all pass;
- an id that names no reported test was not run (never passed);
- an id equal to a file of the run names all the tests of that file; a file that did not
  load reported no tests, so its id was not run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

PASSED = "passed"
# how other tools join a test's title path (describe blocks, then the test's own title)
JOINS = (" > ", " › ", " ", " - ", ":", " :: ", " / ")
# how a tool may put the file before the path (vitest's `file > a > b`, jest's `file › a`)
FILE_JOINS = (" > ", " › ", " ", " - ", ":")
REPEAT = re.compile(r" \[\d+\]$")


def _clean(text: str) -> str:
    text = text.strip()
    return text[2:] if text.startswith("./") else text


def spellings(reported: str) -> set[str]:
    """Every way a dataset may write the reported test `<file>::<a > b > test>`."""
    file, sep, name = reported.partition("::")
    if not sep:
        return {reported}
    out = {reported}
    plain = REPEAT.sub("", name)  # a repeated name is still that name
    for title in {name, plain}:
        parts = [p.strip() for p in title.split(" > ")]
        paths = {j.join(parts) for j in JOINS}
        out |= paths
        out |= {f"{file}::{p}" for p in paths}
        out |= {f"{file}{j}{p}" for j in FILE_JOINS for p in paths}
        out.add(parts[-1])
    return out


class Resolver:
    """The reported ids of one run, indexed by every spelling; `names(listed)` gives the
    reported ids a listed one names."""

    def __init__(self, reported: Iterable[str]):
        self.by_spelling: dict[str, set[str]] = {}
        self.by_file: dict[str, set[str]] = {}
        for rid in reported:
            for s in spellings(rid):
                self.by_spelling.setdefault(s, set()).add(rid)
            file, sep, _ = rid.partition("::")
            if sep:
                self.by_file.setdefault(file, set()).add(rid)

    def names(self, listed: str) -> list[str]:
        key = _clean(listed)
        found = set(self.by_spelling.get(key, ()))
        if "::" in key and not found:
            # a file part written another way (`./test/a.js::x`) or none of ours
            file, _, name = key.partition("::")
            found = {r for r in self.by_spelling.get(name.strip(), ()) if r.partition("::")[0] == _clean(file)}
        found |= self.by_file.get(key, set())
        return sorted(found)


def resolve(listed: Iterable[str], outcomes: dict[str, str]) -> tuple[dict[str, str], dict[str, list[str]]]:
    """The outcome of each listed id (passed when every test it names passed; absent when
    it names none) and, for the ids that are not a reported id themselves, what they name."""
    index = Resolver(outcomes)
    out: dict[str, str] = {}
    named: dict[str, list[str]] = {}
    for tid in listed:
        if tid in outcomes:
            matched = [tid]  # the run's own id names that test alone
        else:
            matched = index.names(tid)
            if matched:
                named[tid] = matched
        if not matched:
            continue
        results = [outcomes[r] for r in matched]
        out[tid] = PASSED if all(r == PASSED for r in results) else next(r for r in results if r != PASSED)
    return out, named
