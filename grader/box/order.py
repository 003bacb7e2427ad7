"""The order a grading run's supervisor is given: what the host (grader/grading/spec.py)
asks of the in-container supervisor (this package), as typed records that travel as
JSON (run/order.json).

Standard library only, Python 3.9+: this package ships into the container as one
archive in the root-only run directory, and runs from there by path (never by a module
name the submission's environment could answer to).

    Order       the run: where the repository is, the patch, the user, the deadline,
                  the output caps, the apply chain, the environment
      ProtectSpec what is restored to the base after the patch (supervisor.Protection)
      CheckSpec   what the check runs: `kind` names a runner of runners/ (pytest, command,
                  output, exact_match, ...), the other fields are that runner's settings

A record refuses a key it does not know (a TypeError) and one it lacks: the host and the
supervisor ship together, so a mismatch is a bug to hear of, never a default to guess.
What the supervisor reports back is report.BoxReport, read by grader/grading/report.py.
"""

from __future__ import annotations

import json
from typing import Any

from .record import as_dict, field, record


@record
class ProtectSpec:
    """The paths a patch may not change (each one it changed goes back to the base)."""

    files: list[str]  # hidden tests and the test files the task's lists name
    names: list[str]  # file names the runner or the interpreter loads (conftest.py, ...)
    suffixes: list[str]  # *.pth, *.egg-link
    prefixes: list[str]  # __editable__*
    dir_suffixes: list[str]  # *.dist-info, *.egg-info
    tests: bool  # the repository's own test files too (a task's protect.tests)
    test_modules: list[str]  # what pytest collects by default: test_*.py, ...
    test_dir_names: list[str]  # tests/, test/, testing/
    globs: list[str]  # the task's protect.paths


@record
class CheckSpec:
    """What the check runs, by `kind`. A field a kind does not use keeps its default."""

    kind: str  # a runner's name (runners.RUNNERS)
    args: list[str] | None = None  # pytest: its options and paths (None for every other kind)
    plugins: list[str] = field(default_factory=list)  # pytest: -p NAME for each
    command: str | None = None  # command, output: run with sh -c
    junit: str | None = None  # command: the JUnit file it writes, if any
    paths: list[str] = field(default_factory=list)  # exact_match: the files read back
    # pytest and command: hidden canary tests, where they go, what they are named like and
    # whose imports they borrow
    canaries: bool = False
    canary_dir: str = ""
    canary_words: list[str] = field(default_factory=list)
    canary_sources: list[str] = field(default_factory=list)
    # pytest: the hidden test modules the canaries are cloned into, and the FAIL_TO_PASS
    # ids (their tests get the most twins)
    canary_modules: list[str] = field(default_factory=list)
    canary_targets: list[str] = field(default_factory=list)
    # filled in by the supervisor: the task's own test code, which the report plugin trusts
    trusted_tests: list[str] = field(default_factory=list)
    # filled in by the supervisor: the Python files the patch added or changed
    submitted: list[str] = field(default_factory=list)
    # filled in by the supervisor before the patch: what the runner read of the repository's
    # own configuration at the base (jest: the configuration --showConfig printed, and the
    # files it names as modules)
    base_config: dict[str, Any] | None = None


@record
class Order:
    repo: str  # the repository inside the container
    patch: str  # the submission's patch, a root-only file
    touched: list[str]  # the paths the patch's headers name
    hidden_dir: str  # the hidden tests: manifest.json and files/
    uid: int  # the unprivileged user every submitted process runs as
    gid: int
    deadline: float  # seconds from the supervisor's start, short of the hard kill from outside
    output_limit: int  # bytes of a command's output kept (head and tail)
    report_limit: int  # bytes of a report, a JUnit file or a compared file read back
    apply_chain: list[tuple[str, list[str]]]  # (method, argv), tried in order
    protect: ProtectSpec
    pycache: str  # the root-owned bytecode cache
    check: CheckSpec
    env: dict[str, str]  # the deterministic environment of every process it starts
    nproc_limit: int | None = None  # RLIMIT_NPROC, set only under a private kernel
    # filled in by the supervisor: the base commit's pytest configuration (suffix, base64)
    pytest_config: tuple[str, str] | None = None
    series: bool = False  # the patch is a series of commits, applied with git am (apply_chain)
    # the interpreters (bytecode.MAGIC) whose bytecode of this package the host holds: a
    # supervisor of another compiles it and reports it
    bytecode_held: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(as_dict(self))

    @classmethod
    def from_json(cls, text: str) -> Order:
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Order:
        data = dict(data)
        data["protect"] = ProtectSpec(**data["protect"])
        data["check"] = CheckSpec(**data["check"])
        data["apply_chain"] = [(method, list(argv)) for method, argv in data["apply_chain"]]
        if data.get("pytest_config") is not None:
            data["pytest_config"] = tuple(data["pytest_config"])
        return cls(**data)
