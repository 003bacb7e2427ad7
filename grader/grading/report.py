"""The supervisor's report, typed: what the container sends back (one JSON document on
the supervisor's stdout, which nothing else in the container can reach) read into
records the decision works on.

The supervisor writes the document, but much of what is in it comes from what the
submission's processes did: exit statuses, output, the records the test process's
reporter signed (which sign whatever the runner hands them). So nothing here trusts a
type: a field of the wrong shape inside the test report makes the report forged
(`malformed`), never an exception; only a document that is not the supervisor's at all
(not JSON, not an object) is a fault of the machinery, and `parse` says so by raising
ReportShapeError.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any

OUTCOMES = ("passed", "failed", "skipped", "error")


class ReportShapeError(ValueError):
    """Raised when the container's output is not a supervisor report at all."""


def _str(v: Any, default: str = "") -> str:
    return v if isinstance(v, str) else default


def _opt_str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _float(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if f == f and abs(f) != float("inf") else None


def _strs(v: Any) -> list[str]:
    return [x for x in v if isinstance(x, str)] if isinstance(v, list) else []


def _b64(v: Any) -> bytes | None:
    if not isinstance(v, str):
        return None
    try:
        return base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError):
        return None


@dataclass
class ApplyAttempt:
    method: str
    command: str
    exit_code: int | None
    output: str


@dataclass
class TestReport:
    """The verified test report of a runner that speaks the signed channel (or parses its
    runner's own framing in the container): outcomes by test id, and what says it can or
    cannot be believed."""

    __test__ = False  # a record, not a pytest class

    outcomes: dict[str, str] = field(default_factory=dict)
    channel: str = "signed"  # signed | framed
    forged: str | None = None  # the first line that betrays another writer, or a malformed record
    problem: str | None = None  # unusable (too large, missing): not passed, not tampering
    end_exit: int | None = None  # the runner's own last word: its exit status
    ended: bool = False
    sessions: int = 0
    ends: int = 0
    collect_errors: list[str] = field(default_factory=list)
    integrity: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)  # reflective access by the submission's code

    @classmethod
    def parse(cls, raw: Any) -> TestReport | None:
        if raw is None:
            return None
        if not isinstance(raw, dict):
            return cls(forged="the test report is malformed")
        rep = cls(
            channel=_str(raw.get("channel"), "signed"),
            forged=_opt_str(raw.get("forged")),
            problem=_opt_str(raw.get("problem")),
            collect_errors=_strs(raw.get("collect_errors")),
            integrity=_strs(raw.get("integrity")),
            findings=_strs(raw.get("findings"))[:100],
        )
        sessions, ends = _int(raw.get("sessions")), _int(raw.get("ends"))
        end = raw.get("end")
        if end is not None:
            if not isinstance(end, dict) or _int(end.get("exit")) is None:
                rep.forged = rep.forged or "the runner's last record is malformed"
            else:
                rep.ended, rep.end_exit = True, _int(end.get("exit"))
        rep.sessions = sessions if sessions is not None else 1
        rep.ends = ends if ends is not None else (1 if rep.ended else 0)
        outcomes = raw.get("outcomes") or {}
        if not isinstance(outcomes, dict):
            rep.forged = rep.forged or "the test report's outcomes are malformed"
            outcomes = {}
        for tid, outcome in outcomes.items():
            if not isinstance(tid, str) or outcome not in OUTCOMES:
                rep.forged = rep.forged or "a test record is malformed"
                continue
            rep.outcomes[tid] = outcome
        return rep


@dataclass
class BoxReport:
    """What one container run of the supervisor reports."""

    error: str | None = None  # the supervisor's own fault: ERROR
    durations: dict[str, float] = field(default_factory=dict)
    applied: bool = False
    apply_method: str | None = None
    attempts: list[ApplyAttempt] = field(default_factory=list)
    apply_refused: str | None = None
    tree_error: tuple[str, str] | None = None  # (stage, message)
    timed_out: bool = False
    protected_restored: list[str] = field(default_factory=list)
    bytecode_removed: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)  # hidden tests placed
    exit_code: int | None = None
    output: str = ""
    report: TestReport | None = None
    junit: str | None = None
    tampered_files: list[str] = field(default_factory=list)
    canaries: dict[str, Any] | None = None  # {expect, got} or {skipped}
    stdout: bytes = b""
    stdout_complete: bool = False
    files: dict[str, bytes | None] = field(default_factory=dict)
    history: dict[str, Any] | None = None  # a history check's read-back (checks/history.py reads it)

    @classmethod
    def parse(cls, data: bytes) -> BoxReport:
        try:
            doc = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ReportShapeError(f"not a supervisor report: {exc}") from None
        if not isinstance(doc, dict):
            raise ReportShapeError("not a supervisor report: not a JSON object")
        out = cls(error=_opt_str(doc.get("error")))
        durations = doc.get("durations")
        if isinstance(durations, dict):
            out.durations = {k: f for k, v in durations.items() if (f := _float(v)) is not None}
        apply = doc.get("apply")
        if not isinstance(apply, dict):
            apply = {}
        out.apply_method = _opt_str(apply.get("method"))
        for a in apply.get("attempts") or []:
            if isinstance(a, dict):
                out.attempts.append(
                    ApplyAttempt(
                        method=_str(a.get("method")),
                        command=_str(a.get("command")),
                        exit_code=_int(a.get("exit_code")),
                        output=_str(a.get("output")),
                    )
                )
        out.applied = doc.get("applied") is True
        out.apply_refused = _opt_str(doc.get("apply_refused"))
        tree_error = doc.get("tree_error")
        if isinstance(tree_error, dict):
            out.tree_error = (_str(tree_error.get("stage")), _str(tree_error.get("message")))
        out.timed_out = doc.get("timed_out") is True
        out.protected_restored = _strs(doc.get("protected_restored"))
        out.bytecode_removed = _strs(doc.get("bytecode_removed"))
        out.restored = _strs(doc.get("restored"))
        out.exit_code = _int(doc.get("exit_code"))
        out.output = _str(doc.get("output"))
        out.report = TestReport.parse(doc.get("report"))
        out.junit = _opt_str(doc.get("junit"))
        out.tampered_files = _strs(doc.get("tampered_files"))
        canaries = doc.get("canaries")
        out.canaries = canaries if isinstance(canaries, dict) else None
        out.stdout = _b64(doc.get("stdout")) or b""
        out.stdout_complete = doc.get("stdout_complete") is True
        files = doc.get("files")
        if isinstance(files, dict):
            out.files = {k: _b64(v) for k, v in files.items() if isinstance(k, str)}
        history = doc.get("history")
        out.history = history if isinstance(history, dict) else None
        return out
