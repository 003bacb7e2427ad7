import re

import pytest

from grader.checks import evaluate_exact_match, evaluate_output, evaluate_tests, output, parse_junit
from grader.checks.tests import ReportError, node_id
from grader.grading.decide import exit_rule
from grader.tasks.model import Normalize

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="6">
<testcase classname="tests.test_a" name="test_ok" file="tests/test_a.py" line="1" time="0.0"/>
<testcase classname="tests.test_a" name="test_bad" file="tests/test_a.py"><failure message="x">boom</failure></testcase>
<testcase classname="tests.test_a" name="test_skip" file="tests/test_a.py"><skipped message="s"/></testcase>
<testcase classname="tests.test_a.TestC" name="test_p[a b]" file="tests/test_a.py"/>
<testcase classname="tests.test_a" name="test_err" file="tests/test_a.py"><error message="e"/></testcase>
<testcase classname="tests.test_a" name="test_ok" file="tests/test_a.py"><error message="teardown"/></testcase>
</testsuite></testsuites>"""


def test_parse_junit_node_ids_and_worst_outcome():
    assert parse_junit(JUNIT) == {
        "tests/test_a.py::test_ok": "error",  # passed, then errored in teardown
        "tests/test_a.py::test_bad": "failed",
        "tests/test_a.py::test_skip": "skipped",
        "tests/test_a.py::TestC::test_p[a b]": "passed",
        "tests/test_a.py::test_err": "error",
    }


def test_node_id_fallbacks():
    assert node_id("pkg.mod", "t", None) == "pkg.mod::t"
    assert node_id("", "t", None) == "t"
    assert node_id("other", "t", "tests/x.py") == "tests/x.py::t"


def test_garbage_report():
    with pytest.raises(ReportError):
        parse_junit("<not xml")


def report(*cases):
    return {f"t/test_m.py::{name}": ("passed" if ok else "failed") for name, ok in cases}


LISTS = dict(
    fail_to_pass=["t/test_m.py::test_new"],
    pass_to_pass=["t/test_m.py::test_old"],
    runner="pytest",
    report_problem=None,
    exits=exit_rule("pytest"),
)


def test_all_listed_pass():
    out = evaluate_tests(outcomes=report(("test_new", True), ("test_old", True)), exit_code=0, **LISTS)
    assert out.passed
    assert out.tests.fail_to_pass == {"success": ["t/test_m.py::test_new"], "failure": []}


def test_listed_failure():
    out = evaluate_tests(outcomes=report(("test_new", False), ("test_old", True)), exit_code=1, **LISTS)
    assert not out.passed and "1 of 2" in out.explanation


def test_listed_test_missing_from_report():
    out = evaluate_tests(outcomes=report(("test_new", True)), exit_code=0, **LISTS)
    assert not out.passed and "not run" in out.explanation


def test_report_and_exit_status_must_agree():
    forged = evaluate_tests(outcomes=report(("test_new", True), ("test_old", True)), exit_code=1, **LISTS)
    assert not forged.passed and "no failing test" in forged.explanation
    hidden_failure = evaluate_tests(
        outcomes=report(("test_new", True), ("test_old", True), ("x", False)), exit_code=0, **LISTS
    )
    assert not hidden_failure.passed and "exited 0" in hidden_failure.explanation
    interrupted = evaluate_tests(outcomes=report(("test_new", True), ("test_old", True)), exit_code=2, **LISTS)
    assert not interrupted.passed


def test_a_report_problem_fails_even_with_exit_zero():
    out = evaluate_tests(outcomes={}, exit_code=0, **{**LISTS, "report_problem": "The test run produced no report"})
    assert not out.passed and "no report" in out.explanation


def test_no_lists_pytest_needs_a_passing_test():
    args = dict(fail_to_pass=[], pass_to_pass=[], runner="pytest", report_problem=None, exits=exit_rule("pytest"))
    assert evaluate_tests(outcomes=report(("a", True)), exit_code=0, **args).passed
    assert not evaluate_tests(outcomes=report(("a", False)), exit_code=1, **args).passed
    assert not evaluate_tests(outcomes={}, exit_code=5, **args).passed


def test_command_runner_uses_exit_status():
    args = dict(fail_to_pass=[], pass_to_pass=[], runner="command", report_problem=None)
    assert evaluate_tests(outcomes={}, exit_code=0, **args).passed
    out = evaluate_tests(outcomes={}, exit_code=3, **args)
    assert not out.passed and "status 3" in out.explanation


def test_exact_match():
    expected = {"a.txt": b"one\ntwo\n", "b.txt": b"x\n"}
    assert evaluate_exact_match({"a.txt": b"one\ntwo\n", "b.txt": b"x\n"}, expected, Normalize()).passed
    out = evaluate_exact_match({"a.txt": b"one\nTWO\n", "b.txt": None}, expected, Normalize())
    assert not out.passed
    assert out.details["mismatched"] == ["a.txt"] and out.details["missing"] == ["b.txt"]
    assert "+TWO" in out.details["diffs"]["a.txt"]


def test_exact_match_normalisation():
    expected = {"a.txt": b"one\ntwo\n"}
    crlf = {"a.txt": b"one  \r\ntwo\r\n"}
    assert not evaluate_exact_match(crlf, expected, Normalize()).passed
    assert evaluate_exact_match(crlf, expected, Normalize(line_endings=True, trailing_whitespace=True)).passed


def test_output_exact_and_threshold():
    exact = evaluate_output(b"hello\n", True, b"hello\n", threshold=None, normalize=Normalize(), exit_code=0)
    assert exact.passed and exact.details["ratio"] == 1.0
    near = evaluate_output(b"hello world\n", True, b"hello worle\n", threshold=0.9, normalize=Normalize(), exit_code=0)
    assert near.passed and 0.9 <= near.details["ratio"] < 1
    far = evaluate_output(b"abc", True, b"xyz", threshold=0.5, normalize=Normalize(), exit_code=0)
    assert not far.passed and "below the threshold" in far.explanation
    assert not evaluate_output(
        b"hello world\n", True, b"hello worle\n", threshold=None, normalize=Normalize(), exit_code=0
    ).passed


def test_truncated_output_never_passes():
    assert not evaluate_output(b"same", False, b"same", threshold=None, normalize=Normalize(), exit_code=0).passed


def test_output_ratio_is_reported_to_three_decimals():
    # one character printed against the expected text: 2 / (1 + len(expected)). To six
    # decimals that told the expected length exactly; to three, lengths 997..1001 read alike
    probes = {
        n: evaluate_output(b"a", True, b"a" * n, threshold=0.9, normalize=Normalize(), exit_code=0)
        for n in range(997, 1002)
    }
    assert {p.details["ratio"] for p in probes.values()} == {0.002}
    assert all("similarity 0.002 is below" in p.explanation for p in probes.values())
    # the decision is still taken on the exact ratio: 0.8996 is below 0.9 though it shows as 0.900
    text = "x" * 2249  # 2 * 2249 / (2249 + 2751) = 0.8996
    below = evaluate_output(
        text.encode(), True, (text + "z" * 502).encode(), threshold=0.9, normalize=Normalize(), exit_code=0
    )
    assert not below.passed and below.details["ratio"] == 0.9 and below.details["passed"] is False


@pytest.mark.parametrize(
    "stdout, expected, threshold, complete",
    [
        (b"hello world\n", b"hello worle\n", 0.9, True),  # at least the threshold
        (b"abc", b"xyz", 0.5, True),  # below it
        (b"hello world\n", b"hello worle\n", None, True),  # exact match asked, not met
        (b"hello\n", b"hello\n", None, True),  # met
        (b"same", b"same", None, False),  # over the output limit
    ],
)
def test_hide_ratio_takes_the_ratio_out_of_every_explanation(stdout, expected, threshold, complete):
    out = evaluate_output(stdout, complete, expected, threshold=threshold, normalize=Normalize(), exit_code=0)
    hidden = output.hide_ratio(out.explanation + ".")
    assert f"{out.details['ratio']:.3f}" not in hidden and not re.search(r"\d\.\d{3}", hidden)
    assert hidden.endswith(".") and "similarity (" not in hidden and "  " not in hidden
    if threshold is not None and complete:
        assert hidden == (
            f"The output's similarity is {'at least' if out.passed else 'below'} the threshold {threshold}."
        )
