"""The test-suite check: per-test outcomes from JUnit XML, cross-checked with the exit
status of the runner, judged against FAIL_TO_PASS and PASS_TO_PASS.

Stdout is never parsed for outcomes: "PASSED" lines are the easiest thing for a
submission to print. pytest's outcomes come from the report plugin's signed records
(grader/report_plugin.py, verified by the supervisor); a `runner: command` task's from
the JUnit file it names. Either must agree with the runner's exit status, or the run
does not pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from xml.etree.ElementTree import ParseError

from junitparser import Error, Failure, JUnitXml, JUnitXmlError, Skipped, TestSuite

from grader.checks.base import CheckOutcome
from grader.checks.ids import resolve
from grader.verdict import TestOutcomes

PASSED, FAILED, ERROR, SKIPPED = "passed", "failed", "error", "skipped"
_RANK = {PASSED: 0, SKIPPED: 1, FAILED: 2, ERROR: 3}


@dataclass(frozen=True)
class ExitRule:
    """What a runner's exit status must say of its own report (a runner module's
    EXIT_PASSED, EXIT_FAILED and EXIT_MEANING): `passed` when no test failed, `failed`
    when some did; any other status ends the run unpassed, with its meaning."""

    name: str
    passed: int
    failed: int
    meaning: dict[int, str]


class ReportError(ValueError):
    """Raised when a JUnit report cannot be parsed."""


def node_id(classname: str, name: str, file: str | None) -> str:
    """Rebuild a pytest node id (`tests/test_x.py::TestC::test_m[p]`) from a JUnit case."""
    if file and file.endswith(".py"):
        module = file[:-3].replace("/", ".")
        if classname == module:
            return f"{file}::{name}"
        if classname.startswith(module + "."):
            classes = classname[len(module) + 1 :].split(".")
            return "::".join([file, *classes, name])
        return f"{file}::{name}"
    if not classname:
        return name
    return f"{classname}::{name}"


def parse_junit(xml: str) -> dict[str, str]:
    """Test id -> outcome. A test named twice (a teardown error after a pass) keeps its
    worst outcome."""
    try:
        doc = JUnitXml.fromstring(xml)
    except (ParseError, ValueError, TypeError, JUnitXmlError, RecursionError) as exc:
        raise ReportError(f"the JUnit report is not a JUnit report: {type(exc).__name__}: {str(exc)[:200]}") from exc
    try:
        return _outcomes(doc)
    except (RecursionError, ValueError, TypeError, AttributeError, JUnitXmlError) as exc:
        raise ReportError(f"the JUnit report is not a JUnit report: {type(exc).__name__}") from exc


def _outcomes(doc: JUnitXml | TestSuite) -> dict[str, str]:
    suites = [doc] if isinstance(doc, TestSuite) else list(doc)
    outcomes: dict[str, str] = {}
    for suite in suites:
        for case in suite:
            results = case.result
            if any(isinstance(r, Error) for r in results):
                outcome = ERROR
            elif any(isinstance(r, Failure) for r in results):
                outcome = FAILED
            elif any(isinstance(r, Skipped) for r in results):
                outcome = SKIPPED
            else:
                outcome = PASSED
            tid = node_id(case.classname or "", case.name or "", case._elem.get("file"))
            if tid not in outcomes or _RANK[outcome] > _RANK[outcomes[tid]]:
                outcomes[tid] = outcome
    return outcomes


def _split(ids: list[str], outcomes: dict[str, str]) -> dict[str, list[str]]:
    return {
        "success": [t for t in ids if outcomes.get(t) == PASSED],
        "failure": [t for t in ids if outcomes.get(t) != PASSED],
    }


def evaluate_tests(
    *,
    outcomes: dict[str, str],
    report_problem: str | None,
    exit_code: int | None,
    fail_to_pass: list[str],
    pass_to_pass: list[str],
    runner: str,
    exits: ExitRule | None = None,
    title_ids: bool = False,
) -> CheckOutcome:
    """Decide passed / not passed from the report's outcomes and the exit status.

    With FAIL_TO_PASS / PASS_TO_PASS lists, every listed test must be in the report and
    have passed. Without them, the runner must have succeeded (and, for pytest, have
    run at least one test with no failures). Where the runner ran the tests itself
    (`exits`: pytest, and every runner that speaks the signed channel) the report and the
    exit status must agree (the canaries are not in `outcomes`, and the reporter keeps them
    out of the exit status).

    `title_ids`: the runner reports `<file>::<a > b > test>` ids, and a listed id may be
    written as other benchmarks write it (grader/checks/ids.py): each listed id is judged
    by every test it names, and named as the task lists it.
    """
    tests = TestOutcomes(exit_code=exit_code)
    details: dict[str, Any] = {"runner": runner}
    tests.all = dict(outcomes)
    listed = outcomes
    if title_ids:
        listed, named = resolve(fail_to_pass + pass_to_pass, outcomes)
        if named:
            details["ids"] = {tid: found[:20] for tid, found in list(named.items())[:50]}
    tests.fail_to_pass = _split(fail_to_pass, listed)
    tests.pass_to_pass = _split(pass_to_pass, listed)
    counts = {k: sum(1 for v in outcomes.values() if v == k) for k in _RANK}
    details["counts"] = counts

    bad = counts[FAILED] + counts[ERROR]
    if exits is not None and not report_problem:
        if exit_code == exits.passed and bad:
            report_problem = f"{exits.name} exited {exits.passed} but its report has {bad} failing test(s)"
        elif exit_code == exits.failed and not bad:
            report_problem = f"{exits.name} exited {exits.failed} (tests failed) but its report has no failing test"
        elif exit_code not in (exits.passed, exits.failed):
            why = exits.meaning.get(exit_code, "killed or crashed") if exit_code is not None else "killed or crashed"
            report_problem = f"{exits.name} exited {exit_code}: {why}"
    if report_problem:
        details["report_problem"] = report_problem
        return CheckOutcome(False, report_problem, tests=tests, details=details)

    if fail_to_pass or pass_to_pass:
        failed = tests.fail_to_pass["failure"] + tests.pass_to_pass["failure"]
        total = len(fail_to_pass) + len(pass_to_pass)
        if not failed:
            return CheckOutcome(True, f"All {total} required test(s) passed", tests=tests, details=details)
        absent = [t for t in failed if t not in listed]
        shown = ", ".join(failed[:5]) + (f" and {len(failed) - 5} more" if len(failed) > 5 else "")
        why = f"{len(failed)} of {total} required test(s) did not pass: {shown}"
        if absent:
            why += f" ({len(absent)} not run)"
        return CheckOutcome(False, why, tests=tests, details=details)

    if exits is not None:
        if bad:
            return CheckOutcome(False, f"{bad} test(s) failed", tests=tests, details=details)
        if counts[PASSED] == 0:
            return CheckOutcome(False, "No test passed", tests=tests, details=details)
        return CheckOutcome(True, f"The test command succeeded ({counts[PASSED]} passed)", tests=tests, details=details)
    if exit_code != 0:
        return CheckOutcome(False, f"The test command exited with status {exit_code}", tests=tests, details=details)
    if bad:
        return CheckOutcome(False, f"{bad} test(s) failed", tests=tests, details=details)
    return CheckOutcome(
        True,
        "The test command succeeded" + (f" ({counts[PASSED]} passed)" if outcomes else ""),
        tests=tests,
        details=details,
    )
