"""The runners: one module each, registered here by name (a check's `kind`).

A runner module defines, in one place, everything about its runner on both sides:

- `plan(check, hidden) -> CheckSpec` (on the host): the order's check from the task's
  (a dict of its fields) and the hidden files it places;
- `run(order, tree, result, canaries)` (in the container): runs the check as the
  unprivileged user and records in `result` what the host needs to decide (the exit
  status, the output, the verified report); optionally `before_patch(order, tree)` (read
  what must come from the base commit, before the patch can change it) and
  `make_canaries(order, tree)` (hidden tests of this run that must fail and must pass);
- `PROTECT`: the paths of its ecosystem the patch may not change (test locations,
  runner configuration, what the toolchain loads by itself);
- for a tests runner (`TESTS = True`): `COMMAND` ("required", "optional" or "none":
  whether a task gives it a command), `DECIDED_BY` (what the task's public view says
  decides the verdict; absent where it depends on the task), and where it runs the tests
  itself, the exit-status rule `EXIT_PASSED`, `EXIT_FAILED`, `EXIT_MEANING` (and `LABEL`,
  its name in explanations) that its report must agree with;
- optionally `listed_files(ids)`: the files a task's test ids name, protected with the
  hidden tests (pytest's `path::name`; a runner whose ids name no file has none).

Adding a runner is one module here and one line in RUNNERS. A module is imported when
its runner is first asked for: the supervisor, which runs one runner a run from an
archive (compiling what it imports, no bytecode cache there), compiles that one only.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# a check's kind -> the module of this package that implements it
RUNNERS: dict[str, str] = {
    "pytest": "pytest",
    "command": "command",
    "output": "output",
    "exact_match": "exact_match",
    "history": "history",  # a series of commits, read back for the history check
    "bisect": "bisect",  # the commit id a bisect answer names
    # one line per runner of another language; each has its page under docs/runners/
    "unittest": "unittest",  # Python's unittest and Django's runtests.py
    "go": "go",
    "tap": "tap",  # Node.js: tape and node-tap
    "node-test": "node_test",
    "mocha": "mocha",
    "jest": "jest",
    "vitest": "vitest",
    "cargo": "cargo",  # Rust
    "junit": "junit",  # Java
    "ctest": "ctest",  # C and C++
    "automake": "automake",
}


def runner(kind: str) -> ModuleType:
    try:
        module = RUNNERS[kind]
    except KeyError:
        raise ValueError(f"unknown check kind {kind!r}") from None
    return importlib.import_module(f"{__name__}.{module}")


def test_runners() -> list[str]:
    """The runners a `tests` check may name."""
    return sorted(kind for kind in RUNNERS if getattr(runner(kind), "TESTS", False))


def test_runner(name: str) -> ModuleType:
    if name not in test_runners():
        raise ValueError(f"unknown runner {name!r}; the runners are {', '.join(test_runners())}")
    return runner(name)
