"""The feedback policy: what a submitter sees of a grade (full, tests, verdict), and that
hosts see everything. The policy function over every field of a result, then the masking
of expected files read from a commit; the whole service (a real grade in Docker, read
back by every route a result leaves by) is tests/docker/test_feedback_docker.py."""

from __future__ import annotations

import json

import pytest

from grader.schemas import SubmissionOut, VerdictOnly
from grader.serializers.feedback import TAMPERED, TAMPERED_EVIDENCE, feedback_view
from grader.serializers.redact import MASK, redact, secret_lines
from grader.verdict import Result

F2P = "tests/test_mean.py::test_empty"
P2P = ["tests/test_mean.py::test_two", "tests/test_basic.py::test_one"]
UNLISTED = "tests/test_hidden_extra.py::test_secret_behaviour"
CANARY = "tests/test_canary_4f2a.py::test_must_fail_91"
SECRET_OUTPUT = "E       assert mean([1, 3]) == 2\nZGVmIHRlc3RfZW1wdHkoKTo=\n"


def full_result(**over) -> dict:
    """A FAIL of a tests task with something in every field of the record."""
    result = {
        "task_id": "mini",
        "verdict": "FAIL",
        "explanation": f"2 of 3 required test(s) did not pass: {F2P}, {P2P[0]}.",
        "tests": {
            "fail_to_pass": {"success": [], "failure": [F2P]},
            "pass_to_pass": {"success": [P2P[1]], "failure": [P2P[0]]},
            "all": {F2P: "failed", P2P[0]: "error", P2P[1]: "passed", UNLISTED: "passed", CANARY: "failed"},
            "exit_code": 1,
        },
        "check": {"type": "tests", "runner": "pytest", "counts": {"passed": 2, "failed": 2, "error": 1, "skipped": 0}},
        "apply": {
            "method": "git apply",
            "neutralized": ["conftest.py"],
            "restored": ["tests/test_mean.py", "tests/test_hidden_extra.py"],
            "attempts": [
                {
                    "method": "git apply",
                    "command": "git apply -v",
                    "exit_code": 0,
                    "output": "Checking patch calc/__init__.py...\nApplied patch calc/__init__.py cleanly.",
                }
            ],
        },
        "output": SECRET_OUTPUT,
        "durations": {"validate": 0.01, "apply": 0.2, "check": 0.9, "total": 1.5},
        "localization": {
            "precision": 1.0,
            "recall": 0.5,
            "f1": 0.667,
            "patch_files": ["calc/__init__.py"],
            "gold_files": ["calc/__init__.py", "calc/secret_helper.py"],
        },
        "provenance": {
            "patch_sha256": "ab" * 32,
            "task_hash": "cd" * 32,
            "image_id": "sha256:" + "ef" * 32,
            "grader_version": "1.0",
            "runtime": "runc",
        },
        "protections": {
            "protected_restored": ["tests/test_basic.py"],
            "bytecode_removed": ["calc/__pycache__/x.pyc"],
            "hidden_tests": ["tests/test_mean.py", "tests/test_hidden_extra.py"],
            "report_channel": "signed",
            "canaries": {"must_pass": 2, "must_fail": 2, "wrong": 1},
            "audit_mode": "flag",
            "runtime": "runc",
        },
        "tampered": [f"must-fail canary {CANARY} passed", "report written from the test process"],
        "audit": [
            {
                "rule": "runner-internals",
                "path": "calc/__init__.py",
                "line": 3,
                "text": "import _pytest.runner as r; r.pytest_runtest_makereport = fake",
            }
        ],
        "error": None,
    }
    result.update(over)
    return Result.model_validate(result).model_dump(mode="json")  # the shape a stored result has


# --- the policy function, field by field -----------------------------------------------------


@pytest.mark.parametrize("policy", ["full", "tests", "verdict"])
def test_a_host_sees_everything_under_every_policy(policy):
    result = full_result()
    assert feedback_view(result, policy, host=True) == result


def test_full_is_the_whole_result_but_the_gold_files():
    result = full_result()
    shown = feedback_view(result, "full", host=False)
    assert shown == {**result, "localization": {**result["localization"], "gold_files": []}}
    assert result["localization"]["gold_files"]  # the stored result is not changed


@pytest.mark.parametrize("policy", ["full", "tests", "verdict"])
def test_no_policy_names_the_gold_patch_files_to_a_participant(policy):
    """The gold patch's files map the solution: a participant sees the localization
    figures at most, the host sees the files."""
    result = full_result(tampered=[])
    shown = feedback_view(result, policy, host=False)
    assert "calc/secret_helper.py" not in json.dumps(shown)
    if "localization" in shown:
        # the figures only under `full` (issue 18: under `tests` they are withheld too)
        assert shown["localization"]["gold_files"] == [] and shown["localization"].get("recall", 0.5) == 0.5
    assert feedback_view(result, policy, host=True)["localization"]["gold_files"] == [
        "calc/__init__.py",
        "calc/secret_helper.py",
    ]


def test_tests_shows_exactly_the_listed_tests_and_the_pass_mark():
    result = full_result()
    shown = feedback_view(result, "tests", host=False)
    assert shown == {
        "task_id": "mini",
        "verdict": "FAIL",
        "explanation": TAMPERED,  # this run was tampered with: said, not described
        "tests": {
            "fail_to_pass": {"success": [], "failure": [F2P]},
            "pass_to_pass": {"success": [P2P[1]], "failure": [P2P[0]]},
            "all": {F2P: "failed", P2P[0]: "error", P2P[1]: "passed"},  # no unlisted test, no canary
        },  # no exit status (issue 18): a byte the submission chooses
        "check": {"type": "tests", "runner": "pytest"},  # counts would count hidden and canary tests
        "apply": {
            "method": "git apply",
            "neutralized": ["conftest.py"],
            "restored": ["tests/test_mean.py"],  # the hidden file no listed id names stays unnamed
            "attempts": result["apply"]["attempts"],
        },
        # issue 18: no durations (a sleep encodes a byte), no error text, no localization
        # figures (they count the gold patch's files)
        "provenance": result["provenance"],
        "protections": {
            "protected_restored": ["tests/test_basic.py"],
            "bytecode_removed": ["calc/__pycache__/x.pyc"],
            "report_channel": "signed",
            "audit_mode": "flag",
            "runtime": "runc",
            "hidden_tests": ["tests/test_mean.py"],
        },  # no canary counts (issue 18): they count the hidden tests' shapes
        "tampered": [TAMPERED_EVIDENCE],
        "audit": [{"rule": "runner-internals", "path": "calc/__init__.py"}],
    }
    text = json.dumps(shown)
    for withheld in (
        SECRET_OUTPUT.split("\n")[1],
        UNLISTED,
        CANARY,
        "calc/secret_helper.py",
        "test_hidden_extra.py::",
        "_pytest.runner",
        "report written",
    ):
        assert withheld not in text
    # what a client reads it as: the record, with what was withheld empty
    assert Result.model_validate(shown).output == ""


def test_tests_keeps_the_explanation_when_nothing_in_it_is_withheld():
    result = full_result(tampered=[])
    assert feedback_view(result, "tests", host=False)["explanation"] == result["explanation"]
    assert feedback_view(result, "tests", host=False)["tampered"] == []


def test_verdict_shows_the_verdict_and_an_explanation_naming_no_test():
    result = full_result(tampered=[])
    shown = feedback_view(result, "verdict", host=False)
    assert shown == {"task_id": "mini", "verdict": "FAIL", "explanation": "2 of 3 required test(s) did not pass."}
    VerdictOnly.model_validate(shown)
    # more failures than the explanation lists ("and 2 more") and tests not run
    many = [f"tests/test_mean.py::test_{i}" for i in range(7)]
    tests = {
        "fail_to_pass": {"success": [], "failure": many},
        "pass_to_pass": {"success": [], "failure": []},
        "all": {},
        "exit_code": 1,
    }
    why = f"7 of 7 required test(s) did not pass: {', '.join(many[:5])} and 2 more (7 not run)."
    shown = feedback_view(full_result(tampered=[], tests=tests, explanation=why), "verdict", host=False)
    assert shown["explanation"] == "7 of 7 required test(s) did not pass (7 not run)."


def test_an_id_is_taken_out_only_where_it_stands_alone():
    # a test named like a word of the sentence does not eat the sentence
    tests = {
        "fail_to_pass": {"success": [], "failure": ["test"]},
        "pass_to_pass": {"success": [], "failure": []},
        "all": {"test": "failed"},
        "exit_code": 1,
    }
    why = "1 of 1 required test(s) did not pass: test."
    shown = feedback_view(full_result(tampered=[], tests=tests, explanation=why), "verdict", host=False)
    assert shown["explanation"] == "1 of 1 required test(s) did not pass."


def test_tests_names_no_unlisted_test_in_the_explanation():
    why = f"pytest exited 1 (tests failed) but its report has no failing test; {UNLISTED} errored."
    shown = feedback_view(full_result(tampered=[], explanation=why), "tests", host=False)
    assert UNLISTED not in shown["explanation"] and "pytest exited [withheld]" in shown["explanation"]


@pytest.mark.parametrize("policy", ["tests", "verdict"])
def test_an_exit_status_is_not_a_channel_out(policy):
    """os._exit(n) chooses a byte; the explanation must not carry it back."""
    for why in (
        "The test command exited with status 203.",
        "pytest exited 77: killed or crashed.",
        "The test run ended before pytest finished its report (exit status 65).",
    ):
        shown = feedback_view(full_result(tampered=[], explanation=why), policy, host=False)["explanation"]
        assert not any(n in shown for n in ("203", "77", "65")), shown
    assert (
        "203"
        in feedback_view(full_result(tampered=[], explanation="exited with status 203"), "full", host=False)[
            "explanation"
        ]
    )


@pytest.mark.parametrize("policy", ["tests", "verdict"])
def test_tampering_evidence_never_reaches_the_submitter(policy):
    # the evidence in the check's details (the hidden tests were modified) counts as well
    for over in (
        {},
        {
            "tampered": [],
            "check": {"type": "tests", "runner": "pytest", "tampered": ["tests/test_mean.py"]},
            "explanation": "The hidden tests were modified while they ran: tests/test_mean.py.",
        },
    ):
        shown = feedback_view(full_result(**over), policy, host=False)
        assert shown["explanation"] == TAMPERED
        text = json.dumps(shown)
        assert "canary" not in text and "report written" not in text and "modified while" not in text


def test_an_audit_findings_quoted_line_is_kept_out_of_the_explanation():
    line = full_result()["audit"][0]["text"]
    why = f"The patch reaches into the test runner: runner-internals at calc/__init__.py:3: {line}."
    shown = feedback_view(full_result(tampered=[], verdict="FAIL", explanation=why), "tests", host=False)
    assert line not in json.dumps(shown)
    assert shown["explanation"] == (
        "The patch reaches into the test runner: runner-internals at calc/__init__.py:3: [withheld]."
    )


OUTPUT_CHECK = {
    "type": "output",
    "ratio": 0.873,
    "threshold": 0.9,
    "passed": False,
    "exit_code": 0,
    "stdout_bytes": 412,
    "stdout_truncated": False,
}


@pytest.mark.parametrize("policy", ["tests", "verdict"])
def test_the_similarity_ratio_is_only_the_pass_mark(policy):
    result = full_result(
        tests=None,
        tampered=[],
        audit=[],
        check=OUTPUT_CHECK,
        explanation="The output's similarity 0.873 is below the threshold 0.9.",
    )
    shown = feedback_view(result, policy, host=False)
    assert shown["explanation"] == "The output's similarity is below the threshold 0.9."
    assert "0.873" not in json.dumps(shown) and "412" not in json.dumps(shown)
    if policy == "tests":
        assert shown["check"] == {
            "type": "output",
            "threshold": 0.9,
            "passed": False,
            "stdout_truncated": False,
        }  # no exit status (issue 18): a byte the submission chooses
    # an exact output check's explanation quotes it too
    result["explanation"] = "The output differs from the expected text (similarity 0.873)."
    assert feedback_view(result, policy, host=False)["explanation"] == "The output differs from the expected text."


def test_full_keeps_the_ratio_the_honest_demo_shows():
    result = full_result(
        tests=None,
        tampered=[],
        audit=[],
        check={**OUTPUT_CHECK, "ratio": 1.0, "passed": True},
        verdict="PASS",
        explanation="The output's similarity 1.000 is at least the threshold 0.9.",
    )
    assert (
        feedback_view(result, "full", host=False)["explanation"]
        == "The output's similarity 1.000 is at least the threshold 0.9."
    )


def test_tests_shows_which_expected_files_differ_but_no_diff():
    check = {
        "type": "exact_match",
        "files": 2,
        "matched": 0,
        "mismatched": ["CHANGELOG.md"],
        "missing": ["a.txt"],
        "diffs": {"CHANGELOG.md": "--- expected/CHANGELOG.md\n+++ actual/CHANGELOG.md\n-## 1.0 secret line\n"},
    }
    result = full_result(
        tests=None,
        tampered=[],
        audit=[],
        check=check,
        explanation="Not as expected: CHANGELOG.md; missing or not a regular file: a.txt.",
    )
    shown = feedback_view(result, "tests", host=False)
    assert shown["check"] == {
        "type": "exact_match",
        "files": 2,
        "matched": 0,
        "mismatched": ["CHANGELOG.md"],
        "missing": ["a.txt"],
    }
    assert shown["explanation"] == result["explanation"]
    assert "secret line" not in json.dumps(shown)


def test_a_field_the_result_gains_later_stays_with_the_host():
    result = {**full_result(tampered=[]), "debug_trace": "the hidden test says: assert mean([1, 3]) == 2"}
    assert "debug_trace" not in feedback_view(result, "tests", host=False)
    assert feedback_view(result, "tests", host=True)["debug_trace"] == result["debug_trace"]


def test_errors_and_patch_failures_keep_their_explanations():
    refused = full_result(
        verdict="PATCH FAILED",
        tests=None,
        tampered=[],
        audit=[],
        check={},
        output="",
        explanation="The patch does not apply at the base commit (tried git apply, git apply --3way, patch --fuzz).",
    )
    for policy in ("tests", "verdict"):
        assert feedback_view(refused, policy, host=False)["explanation"] == refused["explanation"]
    error = full_result(
        verdict="ERROR",
        tests=None,
        tampered=[],
        audit=[],
        check={},
        output="",
        explanation="The grading machinery failed; this attempt is not charged and can be retried.",
        error="instance image missing: run grader tasks build",
    )
    # issue 18: the machinery's error text stays with the host under `tests` too (a
    # traceback can quote what the run shaped); the explanation says what happened
    assert "error" not in feedback_view(error, "tests", host=False)
    assert feedback_view(error, "tests", host=False)["explanation"] == error["explanation"]
    assert "error" not in feedback_view(error, "verdict", host=False)


def test_nothing_to_show_and_unknown_policies():
    assert feedback_view(None, "tests", host=False) is None
    with pytest.raises(ValueError, match="unknown feedback policy"):
        feedback_view(full_result(), "everything", host=False)


def test_every_view_matches_the_documented_schema():
    result = full_result()
    for policy in ("full", "tests", "verdict"):
        for host in (False, True):
            shown = feedback_view(result, policy, host=host)
            SubmissionOut.model_validate(
                {
                    "id": "s",
                    "task_id": "mini",
                    "status": "done",
                    "verdict": "FAIL",
                    "charged": True,
                    "cached": False,
                    "run_id": None,
                    "system": None,
                    "trial": None,
                    "prompt_variant": None,
                    "metadata": None,
                    "callback_url": None,
                    "webhook_status": None,
                    "attempts": 1,
                    "errors": 0,
                    "patch_sha256": "ab" * 32,
                    "queued_at": "2026-01-01T00:00:00Z",
                    "started_at": None,
                    "finished_at": None,
                    "host": None,
                    "links": {},
                    "feedback": "full" if host else policy,
                    "result": shown,
                }
            )


# --- masking: expected files read from a commit -----------------------------------------------


def test_expected_files_from_a_commit_are_secret(examples, tmp_path):
    task = examples.get("notes-merge-release")
    assert task.check.type == "exact_match" and task.check.expected_commit and not task.check.files
    from grader.tasks.prepare import prepare

    expected = prepare(task, tmp_path / "cache").expected_files()
    lines = {ln.strip() for data in expected.values() for ln in data.decode().splitlines() if len(ln.strip()) >= 12}
    assert lines
    secrets = secret_lines(task, tmp_path / "cache")
    assert secrets.complete and lines <= secrets.lines
    # a diff quoting them is masked line by line
    diff = "\n".join(f"-{ln}" for ln in sorted(lines))
    assert set(redact(diff, secrets.lines).splitlines()) == {MASK}
    # without a place to read them, the set says it is incomplete rather than being smaller in silence
    partial = secret_lines(task)
    assert not partial.complete and "expected files" in partial.unread[0] and not lines <= partial.lines


def test_when_some_secrets_cannot_be_read_full_shows_no_more_than_tests(examples, tmp_path):
    """Lines that cannot be known cannot be masked: a `full` task whose expected files
    cannot be read is shown to its submitter as under `tests` (its host still sees all)."""
    import datetime as dt
    from types import SimpleNamespace

    from grader import serializers

    task = examples.get("notes-merge-release")
    assert task.feedback == "full"
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")  # prepare cannot make its cache here
    svc = SimpleNamespace(
        task=lambda _id: task, task_hash=lambda _id: "h-" + tmp_path.name, settings=SimpleNamespace(cache_dir=blocked)
    )
    sub = SimpleNamespace(
        id="s",
        task_id=task.id,
        status="done",
        verdict="FAIL",
        cached=False,
        run_id=None,
        system=None,
        trial=None,
        prompt_variant=None,
        meta=None,
        callback_url=None,
        cost_usd=None,
        input_tokens=None,
        output_tokens=None,
        api_seconds=None,
        wall_seconds=None,
        reasoning_level=None,
        imported=None,
        webhook_status=None,
        attempts=1,
        errors=0,
        patch=b"",
        patch_sha256="ab" * 32,
        queued_at=dt.datetime(2026, 1, 1),
        started_at=None,
        finished_at=None,
        host=None,
        result=full_result(tampered=[], output="CHANGELOG quoted here"),
        shown=None,  # graded before masking was stored with the verdict: masked as it is read
    )
    assert not serializers.task_secrets(svc, task.id).complete
    shown = serializers.shown_to(svc, sub, host=False)
    assert shown["feedback"] == "tests" and "output" not in shown["result"]
    assert serializers.shown_to(svc, sub, host=True)["result"]["output"] == "CHANGELOG quoted here"


# --- the CLI prints what the API gives, and makes up nothing --------------------------------------


def _envelope(policy: str, result: dict) -> dict:
    return {
        "id": "s1",
        "task_id": "mini",
        "status": "done",
        "verdict": result["verdict"],
        "attempts": 1,
        "cached": False,
        "queued_at": "2026-01-01T00:00:00Z",
        "feedback": policy,
        "result": result,
    }


def test_grader_status_prints_a_verdict_only_view_as_it_came(capsys):
    from grader.cli.render import print_submission as _print_submission

    shown = feedback_view(full_result(tampered=[]), "verdict", host=False)
    _print_submission(_envelope("verdict", shown))
    text = capsys.readouterr().out
    assert "FAIL" in text and "2 of 3 required test(s) did not pass." in text
    assert "test_mean" not in text and "tests:" not in text and "applied with" not in text


def test_grader_status_prints_a_tests_view_with_the_listed_tests_only(capsys):
    from grader.cli.render import print_submission as _print_submission

    shown = feedback_view(full_result(tampered=[]), "tests", host=False)
    _print_submission(_envelope("tests", shown))
    text = capsys.readouterr().out
    assert F2P in text and P2P[0] in text and "FAIL_TO_PASS 0/1" in text
    assert UNLISTED not in text and CANARY not in text and "ZGVm" not in text
