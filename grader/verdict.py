"""The verdict and the result record that explains it."""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, Field


class Verdict(str, Enum):
    """The wire strings are the values: a Verdict serializes as itself."""

    PASS = "PASS"
    FAIL = "FAIL"
    PATCH_FAILED = "PATCH FAILED"
    TIMED_OUT = "TIMED OUT"
    ERROR = "ERROR"  # the grading machinery failed; never the submitter's fault

    def __str__(self) -> str:
        return self.value

    @property
    def charged(self) -> bool:
        """Whether the attempt counts against the submitter (ERROR never does)."""
        return self is not Verdict.ERROR


def _split_outcomes() -> dict[str, list[str]]:
    return {"success": [], "failure": []}


class TestOutcomes(BaseModel):
    """Per-test outcomes in SWE-bench's shape, plus every test the report named."""

    fail_to_pass: dict[str, list[str]] = Field(default_factory=_split_outcomes)
    pass_to_pass: dict[str, list[str]] = Field(default_factory=_split_outcomes)
    all: dict[str, str] = Field(default_factory=dict, description="test id -> passed/failed/error/skipped")
    exit_code: int | None = None


class ApplyAttempt(BaseModel):
    method: str
    command: str
    exit_code: int
    output: str


class ApplyLog(BaseModel):
    method: str | None = Field(None, description="the chain step that applied the patch, or None")
    attempts: list[ApplyAttempt] = []
    neutralized: list[str] = Field([], description="runner-visible files the patch added or changed, reverted")
    restored: list[str] = Field([], description="hidden test files put back after the patch")


class AuditFinding(BaseModel):
    """A place where the patch reaches into the test runner or the interpreter."""

    rule: str = Field(description="what it reaches for: runner-internals, object-walk, frame-tricks, import-hooks, ...")
    path: str
    line: int | None = None
    text: str = Field("", description="the patch line, shortened")


class Canaries(BaseModel):
    """Hidden tests added to this run only: the must-fail ones must fail, the must-pass
    ones pass. Anything else means the report was tampered with."""

    must_pass: int = 0
    must_fail: int = 0
    wrong: int = Field(0, description="canaries whose outcome was not the one they must have")


class Protections(BaseModel):
    """What guarded this grade, so a result says which protections ran."""

    protected_restored: list[str] = Field([], description="protected paths the patch changed, put back to the base")
    bytecode_removed: list[str] = Field([], description="*.pyc / __pycache__ the patch added or changed, removed")
    hidden_tests: list[str] = Field([], description="hidden test files put in place, root-owned and read-only")
    report_channel: str | None = Field(None, description="how the runner's report came back: signed, unsigned, none")
    canaries: Canaries | None = None
    audit_mode: str | None = Field(None, description="flag or fail: what audit findings do to the verdict")
    runtime: str | None = None


class Blame(BaseModel):
    """Whose fault a grade that kept failing in the machinery was (grader/blame.py): the
    task's gold patch, graded on the same machinery, tells. A clean gold grade means the
    submission broke the grading harness (FAIL, charged); a gold that ERRORs or fails too,
    or no gold patch, leaves the machinery at fault (ERROR, not charged)."""

    at_fault: Literal["submission", "machinery"]
    reason: str = Field(description="one sentence: why this party")
    error: str | None = Field(None, description="what failed in the machinery on the submission's last attempt")
    attempts: int = Field(0, description="grades started for the submission")
    errors: int = Field(0, description="of them, ended in ERROR")
    gold: str | None = Field(None, description="the gold patch's verdict on this machinery (None: not graded)")
    gold_cached: bool = Field(False, description="the gold's verdict came from a recent gold grade, not a new one")


class Localization(BaseModel):
    precision: float | None
    recall: float | None
    f1: float | None
    patch_files: list[str]
    gold_files: list[str]


class Provenance(BaseModel):
    patch_sha256: str
    task_hash: str | None = None
    image_id: str | None = None
    grader_version: str
    runtime: str | None = None


class Result(BaseModel):
    task_id: str
    verdict: Verdict
    explanation: str
    tests: TestOutcomes | None = None
    check: dict[str, Any] = Field(
        default_factory=dict, description="what the check measured (ratio, mismatched files, ...)"
    )
    apply: ApplyLog = ApplyLog()
    output: str = Field("", description="the check command's output, truncated in the middle")
    durations: dict[str, float] = Field(default_factory=dict, description="seconds per stage")
    localization: Localization | None = None
    provenance: Provenance
    protections: Protections = Protections()
    tampered: list[str] = Field([], description="evidence that the run lied about its tests (empty when none)")
    audit: list[AuditFinding] = Field([], description="where the patch reaches into the runner or the interpreter")
    error: str | None = Field(None, description="for ERROR: what failed in the machinery")
    blame: Blame | None = Field(None, description="for a grade that kept failing in the machinery: whose fault it was")

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)
