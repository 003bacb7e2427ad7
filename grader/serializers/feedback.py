"""What a submitter may see of a grade: the task's feedback policy, applied in one place.

A result quotes the run, and the run can read the hidden tests: a traceback quotes the
failing line, and code under test can print a hidden file whole, encoded so that the
line masking of grader/serializers/redact.py cannot recognise it. So the task says what of the
result leaves the server to its submitter (`Task.feedback`):

- `full`: the whole result but the gold patch's file names (`localization.gold_files`,
  empty under every policy: they map the solution). The test output is the submitter's
  to read, hidden tests included; the similarity ratio is there to 3 decimals.
- `tests`: the verdict and its explanation (without a similarity ratio), the outcomes of
  the FAIL_TO_PASS / PASS_TO_PASS tests (and no other test's name: an unlisted test may
  be a hidden one), the apply log, provenance and protections (no localization);
  that tampering was detected, not its evidence; each audit finding's rule and path. No
  output, no diffs of expected files, no ratio; and nothing whose value the
  submission can choose or that is computed from a secret: no exit status (in any field
  or text), no durations, no error text, no localization figures, no canary counts.
- `verdict`: the verdict and its explanation, naming no test.

Hosts (admin keys) see everything. The view is built by keeping what the policy names,
never by deleting what it forbids, so a field added to the result later stays with the
host until a policy names it. Masking (redact) applies after this, under every policy.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from grader.checks.output import hide_ratio
from grader.tasks.model import FEEDBACK_POLICIES

TAMPERED = "The run's report of its tests was tampered with; the grader did not trust it."
TAMPERED_EVIDENCE = "tampering detected"
WITHHELD = "[withheld]"
# What of a check's measurements survives `tests`, per check type: the pass mark, never
# what measures the distance to the expected output or files.
CHECK_KEYS: dict[str | None, tuple[str, ...]] = {  # looked up by a result's check type, None if it has none
    "tests": ("type", "runner", "report_problem"),
    "output": ("type", "threshold", "passed", "stdout_truncated"),
    "exact_match": ("type", "files", "matched", "mismatched", "missing"),
    # a history's criteria speak of the submitter's own commits and counts, never the reference's text
    "history": ("type", "criteria", "score", "commits"),
    "bisect": ("type", "answer", "ambiguous"),
}
# an exit status is a byte the submission chooses (os._exit(n)): never a channel out
_EXIT_STATUS = re.compile(r"\b(exited(?: with status)?|exit status|exit code|status) -?\d+", re.I)
_MIN_SCRUB = 8  # shorter strings ("gc", "x.py") are words of any sentence, not evidence


def feedback_view(result: dict[str, Any] | None, policy: str, *, host: bool) -> dict[str, Any] | None:
    """The part of `result` (a stored Result as JSON) that `policy` shows a submitter; a
    host sees all of it. A new dict: the stored result is not changed."""
    if policy not in FEEDBACK_POLICIES:
        raise ValueError(f"unknown feedback policy {policy!r}; one of {list(FEEDBACK_POLICIES)}")
    if result is None:
        return None
    if host:
        return dict(result)
    if policy == "full":
        return _without_gold_files(result)
    view: dict[str, Any] = {
        "task_id": result.get("task_id"),
        "verdict": result.get("verdict"),
        "explanation": explanation(result, policy),
    }
    if policy == "verdict":
        return view
    listed = listed_tests(result)
    named_files = {tid.split("::", 1)[0] for tid in listed}
    if (tests := result.get("tests")) is not None:
        # no exit status: it is a byte the submission chooses
        view["tests"] = {
            "fail_to_pass": _lists(tests.get("fail_to_pass")),
            "pass_to_pass": _lists(tests.get("pass_to_pass")),
            "all": {tid: outcome for tid, outcome in (tests.get("all") or {}).items() if tid in listed},
        }
    check: dict[str, Any] = result.get("check") or {}
    view["check"] = _keep(check, CHECK_KEYS.get(check.get("type"), ("type",)))
    if isinstance(view["check"].get("report_problem"), str):
        view["check"]["report_problem"] = _EXIT_STATUS.sub(r"\1 " + WITHHELD, view["check"]["report_problem"])
    if (apply := result.get("apply")) is not None:
        # outputs included: the patch is applied before the hidden tests are in place and
        # before submitted code runs, to the base checkout the submitter has, so git and
        # patch can quote only the patch and that checkout
        view["apply"] = {
            **_keep(apply, ("method", "neutralized")),
            # git's and patch's own statuses (0, 1, 128): they run before any submitted code
            "attempts": [_keep(a, ("method", "command", "exit_code", "output")) for a in apply.get("attempts") or []],
            "restored": [p for p in apply.get("restored") or [] if p in named_files],
        }
    # No durations (a sleep encodes a byte in them), no error text (a traceback of the
    # machinery can quote what the run shaped), no localization figures (precision and
    # recall say how many files the gold patch touches and which of the submitter's are
    # among them): hosts keep all three.
    view.update(_keep(result, ("provenance",)))
    if (prot := result.get("protections")) is not None:
        # not the canaries' counts either: how many twins a run had is a count of the
        # hidden tests' shapes
        view["protections"] = {
            **_keep(prot, ("protected_restored", "bytecode_removed", "report_channel", "audit_mode", "runtime")),
            "hidden_tests": [p for p in prot.get("hidden_tests") or [] if p in named_files],
        }
    view["tampered"] = [TAMPERED_EVIDENCE] if tampering(result) else []
    view["audit"] = [_keep(f, ("rule", "path")) for f in result.get("audit") or []]
    return view


def _without_gold_files(result: dict[str, Any]) -> dict[str, Any]:
    """The whole result but the gold patch's file names, which no policy shows a
    participant: they map the solution. The localization figures stay."""
    view = dict(result)
    if isinstance(loc := result.get("localization"), dict):
        view["localization"] = {**loc, "gold_files": []}
    return view


def listed_tests(result: dict[str, Any]) -> set[str]:
    """The FAIL_TO_PASS and PASS_TO_PASS ids, the tests the task names to its submitter."""
    tests = result.get("tests") or {}
    return {tid for kind in ("fail_to_pass", "pass_to_pass") for lst in _lists(tests.get(kind)).values() for tid in lst}


def tampering(result: dict[str, Any]) -> bool:
    return bool(result.get("tampered") or (result.get("check") or {}).get("tampered"))


def explanation(result: dict[str, Any], policy: str) -> str:
    """The explanation as `policy` may show it. Tampering is said, not described; the
    similarity ratio goes under `tests` and `verdict`; no test is named under `verdict`,
    and no unlisted one under `tests`; an audit finding's quoted line never shows."""
    text = str(result.get("explanation") or "")
    if policy == "full":
        return text
    if tampering(result):
        return TAMPERED
    text = hide_ratio(text)
    text = _EXIT_STATUS.sub(r"\1 " + WITHHELD, text)
    tests = result.get("tests") or {}
    known = set(tests.get("all") or {}) | listed_tests(result)
    hidden = known if policy == "verdict" else known - listed_tests(result)
    text = _without_ids(text, hidden)
    for finding in result.get("audit") or []:
        quoted = str(finding.get("text") or "").strip()
        if len(quoted) >= _MIN_SCRUB:
            text = text.replace(quoted, WITHHELD)
    return text


def _without_ids(text: str, ids: set[str]) -> str:
    """`text` with every test id in `ids` taken out, and a list of them with it: "2 of 3
    required test(s) did not pass: a::x, b::y." becomes "2 of 3 required test(s) did not pass."."""
    present = sorted((i for i in ids if i and i in text), key=len, reverse=True)
    if not present:
        return text
    # an id stands alone: not part of a word ("test(s)") or of a longer id; a full stop may end it
    one = "(?<![\\w.:/-])(?:" + "|".join(re.escape(i) for i in present) + ")(?![\\w:/\\[(-])(?!\\.\\w)"
    text = re.sub(rf"(?::\s*)?{one}(?:,\s*{one})*(?: and \d+ more)?", "", text)
    return re.sub(r"\s+([.,;)])", r"\1", text).strip()


def _keep(record: dict[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    return {k: record[k] for k in keys if k in record}


def _lists(value: Any) -> dict[str, list[str]]:
    value = value or {}
    return {"success": list(value.get("success") or []), "failure": list(value.get("failure") or [])}
