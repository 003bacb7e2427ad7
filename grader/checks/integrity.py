"""Whether a run's report can be believed: the evidence of tampering, read from what the
supervisor saw. Pure functions over its JSON, so every rule is tested without Docker.

Code imported by the tests runs inside the test process and can lie to it; that cannot
be made impossible, so it is made loud. A run lied when:

- a line on the report channel does not carry the run's signature (written by something
  other than the report plugin, or the plugin's records were spliced);
- pytest's own last word (its exit status, signed) disagrees with the process's exit
  status (something ended the process before or after pytest did);
- a hidden canary test that must fail passed (a twin of a hidden test with its check
  turned around, passing beside its original), or, in a run that would otherwise pass, a
  canary is missing or a must-pass one did not pass;
- the hidden tests or the canaries were changed, or moved aside and back, while the
  tests ran;
- the report plugin saw the process reach into pytest: its functions or classes
  replaced, the garbage collector's objects walked, a trace function set, code loaded
  from marshal data or compiled under another file's name, by code that is neither
  pytest's, the standard library's nor the task's own tests'.

Any of these makes the verdict FAIL with the evidence on the result. An honest run shows
none of them, whatever its code does, so canaries never change an honest verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from grader.grading.report import TestReport
from grader.verdict import Canaries

MUST_PASS, MUST_FAIL = "passed", "failed"


@dataclass
class Report:
    """What the test run says, once checked."""

    outcomes: dict[str, str] = field(default_factory=dict)
    problem: str | None = None  # the report is unusable (missing, cut short): not passed, not tampering
    evidence: list[str] = field(default_factory=list)  # tampering
    channel: str = "none"  # signed | forged | none
    canaries: Canaries | None = None
    collect_errors: list[str] = field(default_factory=list)
    # canary outcomes that contradict only if the run would otherwise pass
    pending: list[str] = field(default_factory=list)


def read_test_report(
    test: TestReport | None,
    *,
    exit_code: int | None,
    canaries: dict[str, Any] | None,
    tampered_files: list[str],
    runner: str = "pytest",
    command: bool = False,
) -> Report:
    """Turn the supervisor's verified test report, the canaries, the exit status and the
    tampered files into outcomes, a report problem, and the evidence of tampering.
    `runner` names whose report it is (in the evidence); `command`: the report of the
    runner sessions a task's command ran (one or more); the process's exit status is the
    command's, so only a single session's must agree with it."""
    out = Report()
    if test is None:
        out.problem = "The test run produced no report"
        return out
    if test.problem:
        out.problem = test.problem[0].upper() + test.problem[1:]
        return out
    out.outcomes = dict(test.outcomes)
    out.collect_errors = list(test.collect_errors)
    if test.forged:
        out.channel = "forged"
        out.evidence.append(test.forged)
    else:
        out.channel = test.channel
    if not test.ended or test.ends < test.sessions:
        killed = ", killed: the memory limit or a signal" if exit_code is not None and exit_code < 0 else ""
        out.problem = f"The test run ended before {runner} finished its report (exit status {exit_code}{killed})"
    elif test.end_exit != exit_code and (not command or test.sessions == 1):
        out.evidence.append(
            f"{runner} finished with exit status {test.end_exit} but its process exited with "
            f"{exit_code}: something else ended the run"
        )
    _judge_canaries(canaries, test.end_exit if test.ended else None, out)
    for what in test.integrity:
        out.evidence.append(f"the test process reached into {runner}: {what}")
    for rel in tampered_files:
        out.evidence.append(f"{rel} was changed or moved while the tests ran")
    return out


def _judge_clones(canaries: dict[str, Any], end_exit: int | None, out: Report) -> None:
    """Canaries cloned into the hidden modules (grader/box/clones.py): each a twin of a
    hidden test with its check turned around, so that both passing is impossible for
    honest code. [original, clone] outcomes per parameter set."""
    pairs = canaries.get("got_pairs")
    if not isinstance(pairs, list):
        pairs = []
    count = canaries.get("clones")
    record = Canaries(must_pass=0, must_fail=count if isinstance(count, int) and not isinstance(count, bool) else 0)
    completed = end_exit in (0, 1) and not out.collect_errors
    for pair in pairs:
        if not isinstance(pair, list) or len(pair) != 2:
            continue
        original, clone = pair
        if original == MUST_PASS and clone == MUST_PASS:
            record.wrong += 1
            out.evidence.append("a hidden canary test that must fail was reported as passed")
        elif original == MUST_PASS and clone is None and completed:
            record.wrong += 1
            out.pending.append("a hidden canary test that must fail was not in the report")
    # exact copies of the FAIL_TO_PASS tests: each must end as its original did; an original
    # that passed beside a copy that did not was flipped alone (by place, or by name)
    copies = canaries.get("got_copies")
    for pair in copies if isinstance(copies, list) else []:
        if not isinstance(pair, list) or len(pair) != 2:
            continue
        original, copy = pair
        if original == MUST_PASS and copy not in (MUST_PASS, None):
            record.wrong += 1
            out.evidence.append("a hidden test passed where its exact copy of this run did not")
        elif original == MUST_PASS and copy is None and completed:
            record.wrong += 1
            out.pending.append("an exact copy of a hidden test was not in the report")
    out.canaries = record


def _judge_canaries(canaries: dict[str, Any] | None, end_exit: int | None, out: Report) -> None:
    if canaries and "got_pairs" in canaries:
        _judge_clones(canaries, end_exit, out)
        return
    if not canaries or not isinstance(canaries.get("expect"), dict):
        return
    expect: dict[str, str] = canaries["expect"]
    got = canaries.get("got")
    if not isinstance(got, dict):
        got = {}
    completed = end_exit in (0, 1) and not out.collect_errors
    record = Canaries(
        must_pass=sum(1 for v in expect.values() if v == MUST_PASS),
        must_fail=sum(1 for v in expect.values() if v == MUST_FAIL),
    )
    for tid, want in expect.items():
        have = got.get(tid)
        if have == want:
            continue
        if want == MUST_FAIL and have == MUST_PASS:
            record.wrong += 1
            out.evidence.append("a hidden canary test that must fail was reported as passed")
        elif completed:
            # a canary missing or a must-pass one failing: tampering only where the run
            # would otherwise pass (a broken library may break a shared fixture honestly)
            record.wrong += 1
            what = "was not in the report" if have is None else f"was reported as {have}"
            out.pending.append(f"a hidden canary test that must {'pass' if want == MUST_PASS else 'fail'} {what}")
    out.canaries = record
