"""The task: what a submission is graded against.

A task file is YAML (documented in docs/tasks.md). Paths inside it are relative to the
file's own directory. The model splits cleanly into a public part (what a submitter may
see: id, instruction, metadata, environment, limits, the kind of check) and a private
part (the gold patch, hidden tests, expected files and output). `public_view()` is the
only way the public part leaves the process, so a leak needs a change here.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from grader.box.runners import test_runner
from grader.config import DEFAULT_CPUS, DEFAULT_MEMORY, DEFAULT_PIDS, DEFAULT_TIMEOUT
from grader.errors import TaskError

SHA_RE = re.compile(r"^[0-9a-f]{40}$")
TASK_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
PROMPT_VARIANTS = ("minimal", "concise", "contextual", "guided")
MAX_TIMEOUT = 3600  # the longest time limit a task may give, in seconds (importers' --timeout too)
# What a submitter may see of a grade (hosts see everything): `full` the whole result,
# test output included (hidden tests quoted by a traceback are then theirs to read);
# `tests` the verdict, the explanation and the listed tests' outcomes and durations;
# `verdict` the verdict and its explanation only.
FEEDBACK_POLICIES = ("full", "tests", "verdict")
Feedback = Literal["full", "tests", "verdict"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Metadata(_Strict):
    suite: str = "default"
    language: str = "python"
    difficulty: Literal["easy", "medium", "hard"] | None = None
    created_at: dt.date | None = None
    source: str | None = None


class Repo(_Strict):
    """Where the repository comes from, and the exact commit the task starts at.

    Exactly one of `url`, `bundle` (a `git bundle` file) or `path` (a git repository
    directory). `merge` names a second commit merged into the base without committing,
    which leaves a real conflicted merge state (markers, MERGE_HEAD, unmerged index).
    """

    url: str | None = None
    bundle: str | None = None
    path: str | None = None
    commit: str
    merge: str | None = None

    @field_validator("commit", "merge")
    @classmethod
    def _full_sha(cls, v: str | None) -> str | None:
        if v is not None and not SHA_RE.match(v):
            raise ValueError("must be a full 40-character lowercase commit sha")
        return v

    @model_validator(mode="after")
    def _one_source(self) -> Repo:
        given = [k for k in ("url", "bundle", "path") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError("give exactly one of url, bundle, path")
        return self


class Limits(_Strict):
    timeout: float = Field(
        DEFAULT_TIMEOUT, gt=0, le=MAX_TIMEOUT, description="wall-clock seconds for the whole container life"
    )
    memory: str = Field(DEFAULT_MEMORY, pattern=r"^\d+[kmg]?$")
    cpus: float = Field(DEFAULT_CPUS, gt=0, le=64)
    pids: int = Field(DEFAULT_PIDS, ge=16, le=32768)


class TestsCheck(_Strict):
    """Run the hidden tests after the submission's patch, with one of the runners of
    grader/box/runners/ (docs/tasks.md lists them, with their test ids).

    runner `pytest`: the grader runs pytest itself on `paths` (default: the hidden test
    files), with the base commit's pytest configuration; per-test outcomes come from its
    signed report plugin. runner `command`: `command` is run with sh; its exit status
    decides, and `junit` (optional) names a JUnit file it writes, for per-test feedback.
    Every other runner runs its ecosystem's tests on `paths` with `args`, through a
    reporter that speaks the same signed channel (or, where the ecosystem leaves none,
    its runner's own framing read strictly), and may take a `command` where it says so.
    """

    type: Literal["tests"]
    runner: str = "pytest"
    paths: list[str] = []
    args: list[str] = Field([], description="extra arguments for the runner")
    pytest_args: list[str] = []
    command: str | None = None
    junit: str | None = None
    hidden_tests: dict[str, str] = Field({}, description="repository path -> file in the task directory")
    test_patch: str | None = Field(None, description="a diff, applied to the base, whose files are the hidden tests")
    fail_to_pass: list[str] = []
    pass_to_pass: list[str] = []
    plugins: list[str] = Field([], description="pytest plugins to load (-p NAME): entry-point auto-loading is off")
    canaries: bool = Field(True, description="add hidden canary tests to every pytest run (tampering shows on them)")

    @model_validator(mode="after")
    def _runner_fields(self) -> TestsCheck:
        module = test_runner(self.runner)
        takes = getattr(module, "COMMAND", "none")
        if takes == "required" and not self.command:
            raise ValueError(f"runner {self.runner!r} needs a command")
        if takes == "none" and self.command:
            raise ValueError(f"runner {self.runner!r} builds its own command; use paths and args")
        if self.runner != "pytest" and (self.pytest_args or self.plugins):
            raise ValueError("pytest_args and plugins are the pytest runner's; use args")
        if self.hidden_tests and self.test_patch:
            raise ValueError("give hidden_tests or test_patch, not both")
        return self


class Normalize(_Strict):
    line_endings: bool = False
    trailing_whitespace: bool = False


class ExactMatchCheck(_Strict):
    """Compare named files after the patch with expected contents.

    `files` maps a repository path to a file in the task directory; `expected_commit`
    instead reads every path in `paths` from that commit of the task's repository (a
    merge-conflict task points it at the real merge commit).
    """

    type: Literal["exact_match"]
    files: dict[str, str] = {}
    expected_commit: str | None = None
    paths: list[str] = []
    normalize: Normalize = Normalize()

    @model_validator(mode="after")
    def _source(self) -> ExactMatchCheck:
        if bool(self.files) == bool(self.expected_commit):
            raise ValueError("give files, or expected_commit with paths")
        if self.expected_commit and (not self.paths or not SHA_RE.match(self.expected_commit)):
            raise ValueError("expected_commit must be a full sha and needs paths")
        return self

    def compared_paths(self) -> list[str]:
        return sorted(self.files) if self.files else sorted(self.paths)


class OutputCheck(_Strict):
    """Compare a command's stdout after the patch with an expected text.

    Without `threshold` the match is exact (after optional normalisation); with it,
    PASS needs difflib.SequenceMatcher's ratio to be at least the threshold.
    """

    type: Literal["output"]
    command: str
    expected: str = Field(description="a file in the task directory holding the expected stdout")
    threshold: float | None = Field(None, gt=0, le=1)
    normalize: Normalize = Normalize()


class HistoryCheck(_Strict):
    """Grade a series of commits (git format-patch output) as a history, deterministically.

    The reference history is the first-parent chain from the task's base commit to
    `reference` (a commit of the task's repository that the submitter's checkout does not
    hold). Each criterion a task keeps is decided and explained in the result; PASS needs
    every one of them. `cohesion` is the pass mark of the adjusted Rand index between the
    submission's grouping of the change's hunks into commits and the reference's (None:
    reported, not decided).
    """

    type: Literal["history"]
    reference: str
    final_tree: bool = Field(True, description="the last commit's tree equals the reference's")
    min_commits: int = Field(1, ge=1)
    max_commits: int | None = Field(None, ge=1)
    no_empty: bool = True
    messages: bool = Field(True, description="every commit has a subject line")
    subject_max: int | None = Field(72, ge=1, description="the longest subject line allowed")
    no_fixups: bool = Field(True, description="no fixup!/squash!/amend! subject left over")
    cohesion: float | None = Field(0.5, ge=-1, le=1)
    each_commit: str | None = Field(
        None,
        description="a shell command run at every commit of the series (a bisectable history); its exit "
        "status decides, which code under test can fake, as a runner: command task's",
    )

    @field_validator("reference")
    @classmethod
    def _full_sha(cls, v: str) -> str:
        if not SHA_RE.match(v):
            raise ValueError("must be a full 40-character lowercase commit sha")
        return v

    @model_validator(mode="after")
    def _bounds(self) -> HistoryCheck:
        if self.max_commits is not None and self.max_commits < self.min_commits:
            raise ValueError("max_commits is below min_commits")
        return self


class BisectCheck(_Strict):
    """The answer is a commit of the task's history: the one that introduced the failure
    (or, in git bisect's own terms, the first `new` commit). The submission is a patch that
    adds the file BISECT_ANSWER (box/runners/bisect.py) holding the commit id, full or an abbreviation of at least
    4 hex digits that names one commit of the history reachable from the task's commit."""

    type: Literal["bisect"]
    commit: str

    @field_validator("commit")
    @classmethod
    def _full_sha(cls, v: str) -> str:
        if not SHA_RE.match(v):
            raise ValueError("must be a full 40-character lowercase commit sha")
        return v


class Protect(_Strict):
    """Files restored to the base commit's contents after the patch, before the check.

    The hidden tests and every file a FAIL_TO_PASS / PASS_TO_PASS id names are always
    restored; what a runner or the interpreter loads by itself from the repository
    (conftest.py, *.pth, sitecustomize, *.dist-info, *.egg-info, pytest.ini) always is too.
    `tests` (on by default) adds every file of the repository's test directories, as
    SWE-bench resets test files; a task whose instruction asks for test changes turns it
    off. `paths` adds globs of its own (an output check's input files, say).
    """

    tests: bool = True
    paths: list[str] = []


Check = Annotated[TestsCheck | ExactMatchCheck | OutputCheck | HistoryCheck | BisectCheck, Field(discriminator="type")]


class Task(_Strict):
    id: str
    instruction: str
    prompts: dict[str, str] = {}
    metadata: Metadata = Metadata()
    repo: Repo
    environment: str
    install: str | None = Field(
        None, description="shell command run in the repository when the instance image is built"
    )
    check: Check
    limits: Limits = Limits()
    gold_patch: str | None = None
    protect: Protect = Protect()
    feedback: Feedback = Field("tests", description="what a submitter may see of a grade: full, tests or verdict")

    # Where the file was loaded from; every relative path resolves against it.
    root: Path = Field(Path("."), exclude=True)

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not TASK_ID_RE.match(v):
            raise ValueError("task ids are letters, digits, '.', '_' and '-', starting with a letter or digit")
        return v

    @field_validator("prompts")
    @classmethod
    def _variants(cls, v: dict[str, str]) -> dict[str, str]:
        unknown = set(v) - set(PROMPT_VARIANTS)
        if unknown:
            raise ValueError(f"unknown prompt variants {sorted(unknown)}; use {list(PROMPT_VARIANTS)}")
        return v

    def file(self, rel: str) -> Path:
        """A file named by the task definition, relative to the task file's directory
        (a shared repository bundle may sit in a sibling directory)."""
        if Path(rel).is_absolute():
            raise TaskError(f"task {self.id}: {rel!r} must be relative to the task file")
        path = (self.root / rel).resolve()
        if not path.is_file() and not path.is_dir():
            raise TaskError(f"task {self.id}: {rel!r} does not exist (looked in {self.root})")
        return path

    def read(self, rel: str) -> bytes:
        return self.file(rel).read_bytes()

    def gold_patch_text(self) -> bytes | None:
        return self.read(self.gold_patch) if self.gold_patch else None

    def referenced_files(self) -> list[str]:
        """Every task-directory file the definition depends on (for the task hash)."""
        refs: list[str] = []
        check = self.check
        if isinstance(check, TestsCheck):
            refs += list(check.hidden_tests.values())
            refs += [check.test_patch] if check.test_patch else []
        elif isinstance(check, ExactMatchCheck):
            refs += list(check.files.values())
        elif isinstance(check, OutputCheck):
            refs.append(check.expected)
        if self.gold_patch:
            refs.append(self.gold_patch)
        if self.repo.bundle:
            refs.append(self.repo.bundle)
        return sorted(set(refs))

    def definition_hash(self) -> str:
        """sha256 over the definition and every file it references: a changed hidden
        test, expected file or gold patch is a different task."""
        h = hashlib.sha256()
        h.update(json.dumps(self.model_dump(mode="json"), sort_keys=True).encode())
        for rel in self.referenced_files():
            h.update(b"\0" + rel.encode() + b"\0")
            h.update(hashlib.sha256(self.read(rel)).digest())
        return h.hexdigest()

    def public_view(self) -> dict[str, Any]:
        """What a submitter may see. No gold patch, hidden tests, test ids or expected data.
        `decided_by` says what decides the verdict: a `runner: command` task is decided by its
        command's exit status alone unless it names a `junit` report and the tests that must
        pass in it, and code under test can fake an exit status (`os._exit(0)`): both the
        submitter and the host should know it."""
        check = self.check
        if isinstance(check, TestsCheck):
            decided_by = getattr(test_runner(check.runner), "DECIDED_BY", None)
            if decided_by is None:  # the command runner: its JUnit file where it names one, else its exit status
                by_report = check.junit and (check.fail_to_pass or check.pass_to_pass)
                decided_by = "test report" if by_report else "exit status"
        elif isinstance(check, HistoryCheck):
            decided_by = "commit history"
        elif isinstance(check, BisectCheck):
            decided_by = "commit id"
        else:
            decided_by = "file contents" if isinstance(check, ExactMatchCheck) else "output"
        return {
            "id": self.id,
            "instruction": self.instruction,
            "prompts": dict(self.prompts),
            "metadata": self.metadata.model_dump(mode="json"),
            "environment": self.environment,
            "check": self.check.type,
            "decided_by": decided_by,
            "feedback": self.feedback,
            "limits": self.limits.model_dump(mode="json"),
            # How to get the starting code: the service's bundle of the base commit (and the
            # merge commit), `grader tasks checkout`, or git by hand from the bundle. A
            # conflict task's patch is a diff from the conflicted files as they are.
            "repo": {
                "commit": self.repo.commit,
                "url": self.repo.url,
                "conflicted_merge": self.repo.merge is not None,
                "merge": self.repo.merge,
                "download": f"/v1/tasks/{self.id}/repository",
                "checkout": f"grader tasks checkout {self.id} DIR",
                "by_hand": [
                    f"git clone {self.id}.bundle DIR",
                    "cd DIR",
                    f"git checkout --detach {self.repo.commit}",
                    *(
                        [f"git -c merge.conflictStyle=merge merge --no-commit --no-ff {self.repo.merge}"]
                        if self.repo.merge
                        else []
                    ),
                ],
                **(
                    {
                        "patch": "the merge is left in progress with conflict markers: stage the conflicted files as "
                        "they are (git add -u) before resolving them, then git diff > my.patch"
                    }
                    if self.repo.merge
                    else {}
                ),
            },
        }

    def prompt(self, variant: str | None = None) -> str:
        if variant is None:
            return self.instruction
        if variant not in PROMPT_VARIANTS:
            raise ValueError(f"unknown prompt variant {variant!r}")
        return self.prompts.get(variant, self.instruction)
