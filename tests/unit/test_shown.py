"""The result as each viewer may see it, masked once when the verdict is written
(grader/serializers: masked, stored_view, shown_to): what a read picks from it is what masking
on every read gave, under every policy, for hosts and submitters; a read of a stored
result needs no task secrets; the worker writes its verdict even if masking fails. The
same through the API and the database: tests/service/test_written_once.py."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest

from grader import serializers
from grader.serializers.redact import MASK, Secrets

SECRET = "assert merge(left, right) == expected_release_notes"
OWN = "return sorted(set(lines))  # the team's own line"
PATCH = f"--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n+{OWN}\n".encode()


def result() -> dict:
    return {
        "task_id": "t",
        "verdict": "FAIL",
        "explanation": f"1 of 1 required test(s) did not pass: tests/test_x.py::test_a.\n{SECRET}",
        "tests": {
            "fail_to_pass": {"success": [], "failure": ["tests/test_x.py::test_a"]},
            "pass_to_pass": {"success": [], "failure": []},
            "all": {"tests/test_x.py::test_a": "failed", "tests/test_hidden.py::test_b": "passed"},
            "exit_code": 1,
        },
        "check": {"type": "tests", "runner": "pytest"},
        "output": f"    {SECRET}\n    {OWN}\n>   {SECRET_OTHER}\n",
        "localization": {"precision": 0.5, "recall": 1.0, "f1": 0.667, "patch_files": ["x.py"], "gold_files": ["y.py"]},
        "provenance": {"patch_sha256": "ab", "grader_version": "v", "image_id": "img"},
        "durations": {"total": 1.0},
        "tampered": [],
        "audit": [],
    }


SECRET_OTHER = "expected = load_fixture('hidden_release_notes.txt')"


def sub(**over) -> SimpleNamespace:
    fields = dict(
        id="s",
        task_id="t",
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
        patch=PATCH,
        patch_sha256="ab" * 32,
        queued_at=dt.datetime(2026, 1, 1),
        started_at=None,
        finished_at=None,
        host=None,
        result=result(),
        shown=None,
    )
    fields.update(over)
    return SimpleNamespace(**fields)


def service(policy: str) -> SimpleNamespace:
    return SimpleNamespace(task=lambda _id: SimpleNamespace(feedback=policy))


@pytest.fixture
def secrets(monkeypatch):
    """The task's secrets, as task_secrets would read them; `complete` set by the test."""
    known = {"secrets": Secrets(frozenset({SECRET, SECRET_OTHER}))}
    monkeypatch.setattr(serializers, "task_secrets", lambda svc, task_id: known["secrets"])
    return known


@pytest.mark.parametrize("policy", ["full", "tests", "verdict"])
@pytest.mark.parametrize("host", [False, True])
@pytest.mark.parametrize("complete", [True, False])
def test_a_stored_view_is_what_masking_on_read_gave(secrets, monkeypatch, policy, host, complete):
    if not complete:
        secrets["secrets"] = Secrets(frozenset({SECRET, SECRET_OTHER}), ("an expected file: unreadable",))
    svc = service(policy)
    on_read = serializers.shown_to(svc, sub(), host=host)  # a row written before: masked as it is read
    stored = serializers.masked(svc, "t", result(), PATCH)
    monkeypatch.setattr(serializers, "task_secrets", lambda *a: pytest.fail("a stored view read the task's secrets"))
    assert serializers.shown_to(svc, sub(shown=stored), host=host) == on_read
    if on_read["result"] and "output" in on_read["result"]:
        out = on_read["result"]["output"]
        assert SECRET not in out and SECRET_OTHER not in out and OWN in out and MASK in out


def test_a_policy_tightened_after_the_grade_still_holds(secrets):
    stored = serializers.masked(service("full"), "t", result(), PATCH)
    later = serializers.shown_to(service("verdict"), sub(shown=stored), host=False)
    assert later["feedback"] == "verdict" and set(later["result"]) == {"task_id", "verdict", "explanation"}


def test_a_submission_without_a_result_needs_no_secrets(monkeypatch):
    monkeypatch.setattr(serializers, "task_secrets", lambda *a: pytest.fail("read the task's secrets"))
    view = serializers.shown_to(service("tests"), sub(status="queued", verdict=None, result=None), host=False)
    assert (view["result"], view["feedback"]) == (None, "tests")
    assert serializers.masked(service("tests"), "t", None, PATCH) is None


def test_the_worker_writes_its_verdict_when_masking_fails(monkeypatch, caplog):
    from grader import jobs
    from grader.verdict import Provenance, Result, Verdict

    def broken(*a):
        raise RuntimeError("the task's repository is gone")

    monkeypatch.setattr(serializers, "task_secrets", broken)
    r = Result(
        task_id="t", verdict=Verdict.PASS, explanation="", provenance=Provenance(patch_sha256="", grader_version="v")
    )
    assert jobs._masked(SimpleNamespace(), "t", r, PATCH) is None
    assert "masked when read" in caplog.text


TIMED = {
    "started_at": dt.datetime(2026, 1, 1, 0, 0, 1, 123456),
    "finished_at": dt.datetime(2026, 1, 1, 0, 0, 9, 654321),
}


@pytest.mark.parametrize("policy", ["tests", "verdict"])
@pytest.mark.parametrize("stored", [False, True], ids=["masked-on-read", "stored"])
def test_a_submitter_under_tests_or_verdict_gets_no_start_or_finish_time(monkeypatch, secrets, policy, stored):
    """finished_at - started_at is the grade's duration, which a sleep chooses: a byte out
    (issue 18, class 7). The submitter keeps when it queued; a host keeps everything."""
    row = sub(**TIMED)
    if stored:
        row.shown = serializers.masked(service(policy), "t", row.result, row.patch)
    team = serializers.shown_to(service(policy), row, host=False)
    assert (team["started_at"], team["finished_at"]) == (None, None)
    assert team["queued_at"] == "2026-01-01T00:00:00Z"
    assert "durations" not in (team["result"] or {})
    host = serializers.shown_to(service(policy), row, host=True)
    assert host["started_at"].startswith("2026-01-01T00:00:01.123456") and host["finished_at"]
    listed = serializers.listed(service(policy), row, host=False)
    assert (listed["started_at"], listed["finished_at"]) == (None, None)
    assert serializers.listed(service(policy), row, host=True)["finished_at"]


def test_under_full_feedback_the_submitter_sees_the_times(secrets):
    row = sub(**TIMED)
    team = serializers.shown_to(service("full"), row, host=False)
    assert team["started_at"] and team["finished_at"]
    assert serializers.listed(service("full"), row, host=False)["finished_at"]
