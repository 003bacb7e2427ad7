"""Issue 18, class 7: what a feedback policy shows carries nothing but what it names.

A submission chooses its exit status (os._exit(n)), how long its stages take (a sleep),
what its tracebacks say; the localization figures are computed from the gold patch. A
result is built here with a value the submission pushed (or a secret derived one) in
every field the model has; every leaf of every view under `tests` and `verdict` is read
and compared with what the policy allows, by path, and no pushed value may show.
"""

from __future__ import annotations

import json
import re

import pytest

from grader.serializers.feedback import feedback_view
from grader.verdict import Result

PUSHED_INT = 173  # an exit status the submission chose
PUSHED_FLOAT = 17.3  # a duration it slept
SECRET_FIGURE = 0.1739  # a figure computed from the gold patch
SECRET_TEXT = "zq-secret-7fd1"  # text of the machinery that quotes what the run shaped
F2P, P2P, UNLISTED = "tests/test_mean.py::test_empty", "tests/test_basic.py::test_one", "tests/test_mean.py::test_x"


def pushed_result(verdict: str = "FAIL") -> dict:
    tests = {
        "fail_to_pass": {"success": [], "failure": [F2P]},
        "pass_to_pass": {"success": [P2P], "failure": []},
        "all": {F2P: "failed", P2P: "passed", UNLISTED: "passed"},
        "exit_code": PUSHED_INT,
    }
    result = Result(
        task_id="mini",
        verdict=verdict,
        explanation=f"pytest exited {PUSHED_INT}: killed or crashed (exit status {PUSHED_INT}; exit code {PUSHED_INT})",
        tests=tests,
        check={
            "type": "tests",
            "runner": "pytest",
            "report_problem": f"pytest exited {PUSHED_INT}: killed; the process exited with status {PUSHED_INT}",
            "counts": {"passed": PUSHED_INT},
            "exit_code": PUSHED_INT,
        },
        apply={
            "method": "git apply",
            "attempts": [{"method": "git apply", "command": "git apply", "exit_code": 1, "output": "ok"}],
            "neutralized": [],
            "restored": ["tests/test_mean.py"],
        },
        output=SECRET_TEXT,
        durations={"apply": PUSHED_FLOAT, "check": PUSHED_FLOAT, "total": PUSHED_FLOAT},
        localization={
            "precision": SECRET_FIGURE,
            "recall": SECRET_FIGURE,
            "f1": SECRET_FIGURE,
            "patch_files": ["calc/__init__.py"],
            "gold_files": ["calc/secret.py"],
        },
        provenance={
            "patch_sha256": "p",
            "grader_version": "x",
            "task_hash": "h",
            "image_id": "sha256:1",
            "runtime": "runc",
        },
        protections={
            "protected_restored": [],
            "bytecode_removed": [],
            "hidden_tests": ["tests/test_mean.py"],
            "report_channel": "signed",
            "canaries": {"must_pass": PUSHED_INT, "must_fail": PUSHED_INT, "wrong": 0},
            "audit_mode": "flag",
            "runtime": "runc",
        },
        tampered=[],
        audit=[{"rule": "frame-tricks", "path": "calc/__init__.py", "line": PUSHED_INT, "text": SECRET_TEXT}],
        error=f"Traceback: {SECRET_TEXT}",
    )
    return json.loads(result.model_dump_json())


def leaves(value, path=()):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, (*path, str(k)))
    elif isinstance(value, list):
        for v in value:
            yield from leaves(v, (*path, "[]"))
    else:
        yield ".".join(path), value


# What each policy may show, by path (a test id's outcome under tests.all.<id>).
ALLOWED = {
    "verdict": {"task_id", "verdict", "explanation"},
    "tests": {
        "task_id",
        "verdict",
        "explanation",
        "tests.fail_to_pass.success.[]",
        "tests.fail_to_pass.failure.[]",
        "tests.pass_to_pass.success.[]",
        "tests.pass_to_pass.failure.[]",
        f"tests.all.{F2P}",
        f"tests.all.{P2P}",
        "check.type",
        "check.runner",
        "check.report_problem",
        "apply.method",
        "apply.neutralized.[]",
        "apply.restored.[]",
        "apply.attempts.[].method",
        "apply.attempts.[].command",
        "apply.attempts.[].exit_code",  # git's own (0, 1, 128): it runs before any submitted code
        "apply.attempts.[].output",
        "provenance.grader_version",
        "provenance.patch_sha256",
        "provenance.task_hash",
        "provenance.image_id",
        "provenance.runtime",
        "provenance.environment",
        "provenance.base_image_id",
        "provenance.gold_patch_sha256",
        "provenance.submitted_sha256",
        "protections.protected_restored.[]",
        "protections.bytecode_removed.[]",
        "protections.report_channel",
        "protections.audit_mode",
        "protections.runtime",
        "protections.hidden_tests.[]",
        "tampered.[]",
        "audit.[].rule",
        "audit.[].path",
    },
}


@pytest.mark.parametrize("verdict", ["FAIL", "PASS", "PATCH FAILED", "ERROR"])
@pytest.mark.parametrize("policy", ["tests", "verdict"])
def test_every_field_of_the_view_is_one_the_policy_names(policy, verdict):
    shown = feedback_view(pushed_result(verdict), policy, host=False)
    for path, _ in leaves(shown):
        assert path in ALLOWED[policy], f"{policy} shows {path}"


@pytest.mark.parametrize("verdict", ["FAIL", "PASS", "PATCH FAILED", "ERROR"])
@pytest.mark.parametrize("policy", ["tests", "verdict"])
def test_no_pushed_value_reaches_the_view(policy, verdict):
    shown = feedback_view(pushed_result(verdict), policy, host=False)
    for path, value in leaves(shown):
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, (int, float)):
            assert value not in (PUSHED_INT, PUSHED_FLOAT, SECRET_FIGURE), f"{policy}: {path} = {value}"
        else:
            text = str(value)
            assert SECRET_TEXT not in text, f"{policy}: {path} quotes the run"
            assert not re.search(rf"(?<![\d.]){PUSHED_INT}(?![\d])", text), f"{policy}: {path} = {text!r}"
            assert str(PUSHED_FLOAT) not in text and str(SECRET_FIGURE) not in text, f"{policy}: {path}"
    # what a client reads it as: still a record
    if policy == "tests":
        Result.model_validate(shown)


def test_hosts_keep_everything():
    host = feedback_view(pushed_result(), "tests", host=True)
    assert host["tests"]["exit_code"] == PUSHED_INT
    assert host["durations"]["total"] == PUSHED_FLOAT
    assert host["localization"]["precision"] == SECRET_FIGURE
    assert host["protections"]["canaries"]["must_fail"] == PUSHED_INT
