"""The verdict decision without Docker: grader/pipeline.py over the fake sandbox provider.

Each test scripts what the supervisor inside the container would have printed (or what
the sandbox would have done) and asserts the verdict the pipeline decides from it. The
tasks are prepared for real (git only); the image store is a stub that names one image.

The branches of the pipeline, each with its test below:

    Grader.grade
      the patch refused by the vetting                       -> PATCH FAILED (nothing runs)
      the image store fails (ImageError)                     -> ERROR
      the cache answers (lookup)                             -> the earlier result
      a pytest task with no test paths (_spec)               -> ERROR
      the sandbox raises SandboxError / ImageError           -> ERROR
      anything else raised (a bug of ours)                   -> ERROR, with the traceback
    Grader._decide
      killed from outside past the time limit                -> TIMED OUT
      no JSON report, killed for memory                      -> FAIL
      no report / a garbled one / not an object              -> ERROR
      the supervisor reports its own fault ("error")         -> ERROR
      the supervisor stopped the run at the deadline         -> TIMED OUT
      a tree the apply left that cannot be undone            -> PATCH FAILED
      the patch wrote paths its headers do not name          -> PATCH FAILED
      no step of the apply chain applied it                  -> PATCH FAILED
      a tree the submission left that cannot be checked      -> FAIL
      evidence of tampering in the signed report             -> FAIL, with the evidence
      a canary contradicted only on a run that would pass    -> FAIL (tampering) / FAIL (tests)
      protected files restored                               -> said in the explanation
      audit findings, GRADER_AUDIT=fail / flag               -> FAIL / PASS
      the check passes / does not                            -> PASS / FAIL
    Grader._check, per check: pytest (signed report, collection errors), a command
      (its signed report, a JUnit file, a broken or missing one, its exit status, hidden
      tests changed while it ran), output (similarity), exact match (files).
"""

from __future__ import annotations

import base64
import json
import textwrap
import time
from pathlib import Path

import pytest

from grader.box.order import Order
from grader.config import get_settings
from grader.errors import ImageError, SandboxError
from grader.grading.ship import archive
from grader.pipeline import Grader
from grader.sandbox import ContainerOutput, get_sandbox
from grader.sandbox.fake import FakeRun, FakeSandbox
from grader.tasks.loader import TaskSet
from grader.tasks.prepare import prepare
from grader.verdict import Provenance, Result, Verdict
from helpers.mini import FIXED, HIDDEN_TEST, git

IMAGE = "sha256:" + "ab" * 32
F2P = "tests/test_mean.py::test_empty"
P2P = ["tests/test_mean.py::test_two", "tests/test_basic.py::test_one"]
CANARY = "tests/test_value_edge.py"
CANARIES = {
    "expect": {
        f"{CANARY}::test_round": "passed",
        f"{CANARY}::test_small_case": "passed",
        f"{CANARY}::test_mixed": "failed",
        f"{CANARY}::test_split_order": "failed",
    }
}

TASKS = {
    "d-pytest": """\
check:
  type: tests
  hidden_tests: {tests/test_mean.py: test_mean.py}
  fail_to_pass: [tests/test_mean.py::test_empty]
  pass_to_pass: [tests/test_mean.py::test_two, tests/test_basic.py::test_one]
""",
    "d-nolist": """\
check:
  type: tests
  hidden_tests: {tests/test_mean.py: test_mean.py}
""",
    "d-nopaths": """\
check:
  type: tests
""",
    "d-junit": """\
check:
  type: tests
  runner: command
  command: ./run-tests --junit report.xml
  junit: report.xml
  hidden_tests: {tests/test_mean.py: test_mean.py}
  fail_to_pass: [tests/test_mean.py::test_empty]
""",
    "d-exit": """\
check:
  type: tests
  runner: command
  command: python3 -m unittest
  hidden_tests: {tests/test_mean.py: test_mean.py}
""",
    "d-output": """\
check:
  type: output
  command: python3 -m calc
  expected: expected.txt
  threshold: 0.9
""",
    "d-exact": """\
check:
  type: exact_match
  files: {calc/__init__.py: expected_init.py}
""",
}


def task_yaml(task_id: str, check: str, commit: str) -> str:
    return (
        f"id: {task_id}\ninstruction: Make calc.mean raise ValueError on an empty list.\n"
        f"repo: {{bundle: ../mini.bundle, commit: {commit}}}\nenvironment: python-3.11\n{check}"
        "limits: {timeout: 20, memory: 256m, pids: 64}\ngold_patch: gold.patch\n"
    )


@pytest.fixture(scope="module")
def tasks(tmp_path_factory, mini) -> TaskSet:
    root = tmp_path_factory.mktemp("decide-tasks")
    git("bundle", "create", "-q", str(root / "mini.bundle"), "--all", cwd=mini.src)
    gold = mini.diff({"calc/__init__.py": FIXED})
    for task_id, check in TASKS.items():
        d = root / task_id
        d.mkdir()
        (d / "task.yaml").write_text(task_yaml(task_id, check, mini.base))
        (d / "test_mean.py").write_text(HIDDEN_TEST)
        (d / "gold.patch").write_bytes(gold)
        (d / "expected.txt").write_text("mean: 2\n")
        (d / "expected_init.py").write_text(FIXED)
    return TaskSet(root)


@pytest.fixture(scope="module")
def gold(mini) -> bytes:
    return mini.diff({"calc/__init__.py": FIXED})


class StubImages:
    """Images.instance_image without an engine: the task prepared for real, one image id
    (or the ImageError a missing image would raise)."""

    def __init__(self, cache: Path, fault: Exception | None = None):
        self.cache, self.fault = cache, fault
        self.env_of: dict[str, str] = {}

    def instance_image(self, task, *, build=True, log=None, task_hash=None):
        if self.fault is not None:
            raise self.fault
        self.env_of[IMAGE] = "sha256:env"
        return IMAGE, prepare(task, self.cache, task_hash)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("decide-cache")


def grade(
    tasks,
    cache,
    task_id: str,
    patch: bytes,
    answer,
    *,
    audit: str = "flag",
    images_fault=None,
    private_kernel: bool = False,
    lookup=None,
) -> tuple[Result, FakeSandbox]:
    """Grade `patch` on `task_id` with the sandbox answering `answer` (a FakeRun, a
    supervisor report as a dict, or a handler)."""
    if isinstance(answer, dict):
        answer = FakeRun(report=answer)
    handler = answer if callable(answer) else (lambda spec: answer)
    sandbox = FakeSandbox(handler, private_kernel=private_kernel)
    settings = get_settings(tasks_dir=tasks.dir, cache_dir=cache, audit=audit)
    g = Grader(settings, sandbox=sandbox, images=StubImages(cache, images_fault))
    return g.grade(tasks.get(task_id), patch, lookup=lookup), sandbox


# --- what the supervisor prints ------------------------------------------------------------


def supervisor(**over) -> dict:
    """The supervisor's document for a run that applied the patch with `git apply` and
    ran the check; `over` replaces or adds keys."""
    doc = {
        "durations": {
            "snapshot": 0.01,
            "apply": 0.02,
            "place_tests": 0.01,
            "check": 0.4,
            "verify": 0.01,
            "supervisor": 0.5,
            "cpu": 0.3,
            "cpu_boot": 0.05,
            "cpu_check": 0.2,
            "invented": 9.0,
        },
        "apply": {
            "method": "git apply",
            "attempts": [
                {
                    "method": "git apply",
                    "command": "git apply --verbose",
                    "exit_code": 0,
                    "output": "Applied patch calc/__init__.py cleanly.\n",
                }
            ],
        },
        "applied": True,
        "bytecode_removed": [],
        "protected_restored": [],
        "restored": ["tests/test_mean.py"],
        "output": "3 passed\n",
        "exit_code": 0,
        "timed_out": False,
        "check_seconds": 0.4,
        "tampered_files": [],
    }
    doc.update(over)
    return doc


def pytest_report(outcomes: dict[str, str], *, exit: int = 0, canaries: dict | None = CANARIES, **over) -> dict:
    """A run of the pytest runner whose signed report says `outcomes`; the canaries came
    out as they must unless `canaries` says otherwise."""
    got = {tid: want for tid, want in CANARIES["expect"].items()}
    report = {
        "forged": None,
        "end": {"t": "end", "s": "1", "exit": exit},
        "ends": 1,
        "sessions": 1,
        "collect_errors": [],
        "integrity": [],
        "outcomes": outcomes,
    }
    report.update(over.pop("report", {}))
    doc = supervisor(
        report=report,
        exit_code=over.pop("exit_code", exit),
        canaries=None if canaries is None else {**canaries, "got": {**got, **over.pop("got", {})}},
    )
    doc.update(over)
    return doc


ALL_PASS = {F2P: "passed", **{t: "passed" for t in P2P}}
EMPTY_FAILS = {**ALL_PASS, F2P: "failed"}


# --- PASS and FAIL ---------------------------------------------------------------------------


def test_pass_when_every_listed_test_passed(tasks, cache, gold):
    r, sandbox = grade(tasks, cache, "d-pytest", gold, pytest_report(ALL_PASS))
    assert r.verdict is Verdict.PASS, r.to_json()
    assert r.explanation == "All 3 required test(s) passed."
    assert r.tests.fail_to_pass == {"success": [F2P], "failure": []}
    assert r.protections.report_channel == "signed"
    canaries = r.protections.canaries
    assert (canaries.must_pass, canaries.must_fail, canaries.wrong) == (2, 2, 0)
    assert r.provenance.runtime == r.protections.runtime == "fake"
    assert r.provenance.image_id == IMAGE
    assert r.apply.method == "git apply" and r.apply.restored == ["tests/test_mean.py"]
    assert {"validate", "image", "container", "container_wait", "apply", "check", "total"} <= set(r.durations)
    # the supervisor's named stages and CPU figures are kept, nothing else it says
    assert (r.durations["cpu"], r.durations["cpu_boot"], r.durations["cpu_check"]) == (0.3, 0.05, 0.2)
    assert "invented" not in r.durations
    assert r.localization.f1 == 1.0 and r.error is None
    assert len(sandbox.runs) == 1


def test_fail_when_a_listed_test_failed(tasks, cache):
    doc = pytest_report(EMPTY_FAILS, exit=1, apply={"method": "empty", "attempts": []})
    r, _ = grade(tasks, cache, "d-pytest", b"", doc)
    assert r.verdict is Verdict.FAIL
    assert r.explanation == f"1 of 3 required test(s) did not pass: {F2P}."
    assert r.tests.all[F2P] == "failed" and r.tampered == []


def test_without_lists_the_run_must_succeed(tasks, cache, gold):
    tests = {"tests/test_mean.py::test_empty": "passed", "tests/test_mean.py::test_two": "passed"}
    assert grade(tasks, cache, "d-nolist", gold, pytest_report(tests))[0].verdict is Verdict.PASS
    failed = {**tests, "tests/test_mean.py::test_empty": "failed"}
    assert grade(tasks, cache, "d-nolist", gold, pytest_report(failed, exit=1))[0].verdict is Verdict.FAIL


def test_a_report_at_odds_with_pytests_exit_status_fails(tasks, cache, gold):
    # exit 0 with a failing test in the report: the report is not believed, so not passed
    r, _ = grade(tasks, cache, "d-pytest", gold, pytest_report(EMPTY_FAILS, exit=0))
    assert r.verdict is Verdict.FAIL
    assert "pytest exited 0 but its report has 1 failing test(s)" in r.explanation


def test_no_report_from_the_test_run_fails(tasks, cache, gold):
    r, _ = grade(tasks, cache, "d-pytest", gold, supervisor(report=None, exit_code=2))
    assert r.verdict is Verdict.FAIL and r.explanation.startswith("The test run produced no report")


def test_a_run_killed_before_pytest_finished_fails(tasks, cache, gold):
    doc = pytest_report(ALL_PASS, exit_code=-9, report={"end": None, "ends": 0})
    r, _ = grade(tasks, cache, "d-pytest", gold, doc)
    assert r.verdict is Verdict.FAIL
    assert "ended before pytest finished its report (exit status -9, killed" in r.explanation
    assert r.tampered == []


def test_collection_errors_are_shown(tasks, cache, gold):
    doc = pytest_report({**EMPTY_FAILS, F2P: "error"}, exit=1, report={"collect_errors": ["tests/test_mean.py"]})
    r, _ = grade(tasks, cache, "d-pytest", gold, doc)
    assert r.verdict is Verdict.FAIL and r.check["collect_errors"] == ["tests/test_mean.py"]


def test_restored_protected_files_are_named_in_the_explanation(tasks, cache, gold):
    restored = ["tests/conftest.py", "tests/test_basic.py", "pytest.ini", "setup.pth"]
    r, _ = grade(
        tasks,
        cache,
        "d-pytest",
        gold,
        pytest_report(ALL_PASS, protected_restored=restored, bytecode_removed=["calc/__pycache__/x.pyc"]),
    )
    assert r.verdict is Verdict.PASS
    assert r.explanation == (
        "All 3 required test(s) passed (4 protected file(s) the patch changed were restored to "
        "the base: tests/conftest.py, tests/test_basic.py, pytest.ini ...)."
    )
    assert r.protections.protected_restored == restored and r.apply.neutralized == restored
    assert r.protections.bytecode_removed == ["calc/__pycache__/x.pyc"]


AUDITED = textwrap.dedent("""\
    diff --git a/calc/__init__.py b/calc/__init__.py
    --- a/calc/__init__.py
    +++ b/calc/__init__.py
    @@ -1,2 +1,5 @@
    +import os
    +os._exit(0)
    +
     def mean(xs):
         return sum(xs) / len(xs)
    """).encode()


def test_audit_findings_fail_a_pass_only_when_the_grader_says_so(tasks, cache):
    flagged, _ = grade(tasks, cache, "d-pytest", AUDITED, pytest_report(ALL_PASS), audit="flag")
    assert flagged.verdict is Verdict.PASS and {f.rule for f in flagged.audit} == {"process-exit"}
    assert flagged.protections.audit_mode == "flag"
    failed, _ = grade(tasks, cache, "d-pytest", AUDITED, pytest_report(ALL_PASS), audit="fail")
    assert failed.verdict is Verdict.FAIL
    assert failed.explanation.startswith(
        "The patch reaches into the test runner or the interpreter (process-exit); "
        "this grader fails such patches. The tests alone: All 3 required"
    )
    # a FAIL stays a FAIL with the same words: the audit only ever turns a PASS
    failing, _ = grade(tasks, cache, "d-pytest", AUDITED, pytest_report(EMPTY_FAILS, exit=1), audit="fail")
    assert failing.verdict is Verdict.FAIL and failing.explanation.startswith("1 of 3 required")


# --- tampering: FAIL with the evidence ---------------------------------------------------------


@pytest.mark.parametrize(
    "doc, evidence",
    [
        (
            pytest_report(
                ALL_PASS, report={"forged": "line 7 of the report channel does not carry this run's signature"}
            ),
            "line 7 of the report channel does not carry this run's signature",
        ),
        (
            pytest_report(ALL_PASS, exit_code=1),
            "pytest finished with exit status 0 but its process exited with 1: something else ended the run",
        ),
        (
            pytest_report(ALL_PASS, got={f"{CANARY}::test_mixed": "passed"}),
            "a hidden canary test that must fail was reported as passed",
        ),
        (
            pytest_report(ALL_PASS, tampered_files=["tests/test_mean.py"]),
            "tests/test_mean.py was changed or moved while the tests ran",
        ),
        (
            pytest_report(ALL_PASS, report={"integrity": ["_pytest.runner.call_and_report replaced"]}),
            "the test process reached into pytest: _pytest.runner.call_and_report replaced",
        ),
        (
            pytest_report(ALL_PASS, got={f"{CANARY}::test_round": None}),
            "a hidden canary test that must pass was not in the report",
        ),
    ],
    ids=[
        "forged-line",
        "exit-status",
        "canary-must-fail-passed",
        "hidden-tests-changed",
        "reached-into-pytest",
        "canary-missing",
    ],
)
def test_tampering_is_fail_with_the_evidence(tasks, cache, gold, doc, evidence):
    r, _ = grade(tasks, cache, "d-pytest", gold, doc)
    assert r.verdict is Verdict.FAIL, r.to_json()
    assert evidence in r.tampered
    assert r.explanation == f"The run tampered with its test report: {r.tampered[0]}."
    assert r.tests is not None and r.check["type"] == "tests"


def test_a_forged_channel_is_named_as_such(tasks, cache, gold):
    r, _ = grade(tasks, cache, "d-pytest", gold, pytest_report(ALL_PASS, report={"forged": "line 1 ..."}))
    assert r.protections.report_channel == "forged"


def test_a_missing_canary_is_tampering_only_on_a_run_that_would_pass(tasks, cache):
    """A broken library can break a shared fixture honestly: on a failing run the canaries'
    contradictions are not evidence, and the tests decide."""
    doc = pytest_report(EMPTY_FAILS, exit=1, got={f"{CANARY}::test_round": "failed"})
    r, _ = grade(tasks, cache, "d-pytest", b"", doc)
    assert r.verdict is Verdict.FAIL and r.tampered == []
    assert r.explanation.startswith("1 of 3 required test(s) did not pass")
    assert r.protections.canaries.wrong == 1


def test_skipped_canaries_are_not_evidence(tasks, cache, gold):
    doc = pytest_report(ALL_PASS, canaries={"skipped": "the task's pytest option -x could stop the run early"})
    r, _ = grade(tasks, cache, "d-pytest", gold, doc)
    assert r.verdict is Verdict.PASS and r.protections.canaries is None


# --- PATCH FAILED ------------------------------------------------------------------------------


def test_a_refused_patch_never_reaches_the_sandbox(tasks, cache):
    patch = b"--- a/../etc/passwd\n+++ b/../etc/passwd\n@@ -1 +1 @@\n-a\n+b\n"
    r, sandbox = grade(tasks, cache, "d-pytest", patch, supervisor())
    assert r.verdict is Verdict.PATCH_FAILED
    assert r.explanation.startswith("The patch was refused before it was applied: ")
    assert sandbox.runs == [] and r.provenance.image_id is None


def test_a_patch_no_step_applies_is_patch_failed(tasks, cache, gold):
    attempts = [
        {"method": m, "command": c, "exit_code": 1, "output": "error: patch failed"}
        for m, c in [
            ("git apply", "git apply --verbose"),
            ("git apply --3way", "git apply --verbose --3way"),
            ("patch --fuzz", "patch --batch --forward --fuzz=5 -p1"),
        ]
    ]
    r, _ = grade(
        tasks,
        cache,
        "d-pytest",
        gold,
        supervisor(applied=False, apply={"method": None, "attempts": attempts}, restored=[], output=""),
    )
    assert r.verdict is Verdict.PATCH_FAILED
    assert r.explanation == (
        "The patch does not apply at the base commit (tried git apply, git apply --3way, patch --fuzz)."
    )
    assert [a.exit_code for a in r.apply.attempts] == [1, 1, 1] and r.apply.method is None


def test_a_patch_that_wrote_unnamed_paths_is_patch_failed(tasks, cache, gold):
    doc = supervisor(applied=False, apply_refused="it wrote files its headers do not name: evil.py")
    r, _ = grade(tasks, cache, "d-pytest", gold, doc)
    assert r.verdict is Verdict.PATCH_FAILED
    assert r.explanation == (
        "The patch was refused after it was applied: it wrote files its headers do not name: evil.py."
    )


def test_a_tree_the_apply_cannot_undo_is_patch_failed(tasks, cache, gold):
    doc = supervisor(applied=False, tree_error={"stage": "apply", "message": "TreeError: tests is a FIFO"})
    r, _ = grade(tasks, cache, "d-pytest", gold, doc)
    assert r.verdict is Verdict.PATCH_FAILED
    assert r.explanation == "Applying the patch left a file tree that could not be undone: TreeError: tests is a FIFO."


def test_a_tree_the_submission_left_after_the_apply_is_fail(tasks, cache, gold):
    doc = supervisor(tree_error={"stage": "verify", "message": "OSError: [Errno 40] Too many levels of symbolic links"})
    r, _ = grade(tasks, cache, "d-pytest", gold, doc)
    assert r.verdict is Verdict.FAIL
    assert r.explanation == (
        "The submission left the repository in a state the grader cannot check "
        "(verify: OSError: [Errno 40] Too many levels of symbolic links)."
    )


# --- TIMED OUT ---------------------------------------------------------------------------------


def test_killed_from_outside_past_the_limit_is_timed_out(tasks, cache, gold):
    r, _ = grade(tasks, cache, "d-pytest", gold, FakeRun(seconds=25.0))
    assert r.verdict is Verdict.TIMED_OUT
    assert r.explanation == "The run passed its 20 s wall-clock limit and was killed."
    assert r.provenance.runtime == "fake"


def test_stopped_by_the_supervisor_at_its_deadline_is_timed_out(tasks, cache, gold):
    r, _ = grade(tasks, cache, "d-pytest", gold, supervisor(timed_out=True, exit_code=None, report=None))
    assert r.verdict is Verdict.TIMED_OUT
    assert r.explanation == "The run passed its 20 s wall-clock limit and was stopped."


def test_a_timeout_during_the_apply_is_timed_out_not_patch_failed(tasks, cache, gold):
    doc = supervisor(
        applied=False,
        timed_out=True,
        apply={
            "method": None,
            "attempts": [{"method": "git apply", "command": "git apply --verbose", "exit_code": -9, "output": ""}],
        },
    )
    assert grade(tasks, cache, "d-pytest", gold, doc)[0].verdict is Verdict.TIMED_OUT


# --- the memory limit --------------------------------------------------------------------------


def test_killed_for_memory_with_no_report_is_fail(tasks, cache, gold):
    r, _ = grade(tasks, cache, "d-pytest", gold, FakeRun(exit_code=137, oom_killed=True))
    assert r.verdict is Verdict.FAIL
    assert r.explanation == "The run exceeded its 256m memory limit and was killed."


def test_a_report_that_arrived_decides_even_if_memory_ran_out_later(tasks, cache, gold):
    r, _ = grade(tasks, cache, "d-pytest", gold, FakeRun(report=pytest_report(ALL_PASS), oom_killed=True))
    assert r.verdict is Verdict.PASS


# --- ERROR: faults of the machinery, never charged -------------------------------------------------


def assert_error(r: Result, words: str) -> None:
    assert r.verdict is Verdict.ERROR, r.to_json()
    assert not r.verdict.charged
    assert r.explanation == "The grading machinery failed; this attempt is not charged and can be retried."
    assert words in r.error, r.error


def test_the_sandbox_failing_is_error(tasks, cache, gold):
    r, _ = grade(tasks, cache, "d-pytest", gold, FakeRun(raises=SandboxError("the Docker engine does not answer")))
    assert_error(r, "the Docker engine does not answer")
    # no run came back to say its runtime: the provenance keeps the configured one
    assert r.provenance.image_id == IMAGE and r.provenance.runtime == "runc"


def test_the_image_missing_in_the_sandbox_is_error(tasks, cache, gold):
    r, _ = grade(tasks, cache, "d-pytest", gold, FakeRun(raises=ImageError("image sha256:ab is missing")))
    assert_error(r, "image sha256:ab is missing")


def test_the_image_store_failing_is_error(tasks, cache, gold):
    fault = ImageError("instance image grader/task-d-pytest:1 for task d-pytest is missing")
    r, sandbox = grade(tasks, cache, "d-pytest", gold, supervisor(), images_fault=fault)
    assert_error(r, "for task d-pytest is missing")
    assert sandbox.runs == [] and r.provenance.image_id is None


def test_a_grader_keeps_its_image_answer_a_while_and_forgets_it_on_a_fault(tasks, cache, gold, monkeypatch):
    """Two grades of a task within IMAGE_TTL ask the image store once; a grade that fails in
    the machinery forgets the answer (the image may be gone), and so does the clock."""
    import grader.pipeline as pipeline

    asked: list[str] = []

    class Counting(StubImages):
        def instance_image(self, task, **kw):
            asked.append(task.id)
            return super().instance_image(task, **kw)

    passed = pytest_report(ALL_PASS)
    runs = iter([passed, passed, SandboxError("image sha256:ab is missing"), passed, passed])

    def answer(spec):
        step = next(runs)
        return FakeRun(raises=step) if isinstance(step, Exception) else FakeRun(report=step)

    g = Grader(
        get_settings(tasks_dir=tasks.dir, cache_dir=cache),
        sandbox=FakeSandbox(answer),
        images=Counting(cache),
    )
    task = tasks.get("d-pytest")
    assert g.grade(task, gold).verdict is Verdict.PASS
    assert g.grade(task, gold).verdict is Verdict.PASS
    assert asked == ["d-pytest"]
    assert g.grade(task, gold).verdict is Verdict.ERROR
    assert g.grade(task, gold).verdict is Verdict.PASS
    assert asked == ["d-pytest", "d-pytest"]
    now = time.monotonic()
    monkeypatch.setattr(pipeline.time, "monotonic", lambda: now + pipeline.IMAGE_TTL + 1)
    g.grade(task, gold)
    assert asked == ["d-pytest", "d-pytest", "d-pytest"]


def test_what_the_supervisor_read_at_the_base_goes_to_the_next_grades_of_the_image(tasks, cache, gold):
    """The base's configuration a supervisor read (its report's base_config: jest's or
    vitest's reading) is given to the next grades of the same task and image, which read
    it no more; a grade of the machinery's fault gives nothing, one that read nothing
    leaves the next to read it, and a grade that was given one cannot replace it."""
    read = {"file": "vitest.config.ts", "files": ["vitest.config.ts"], "pool": "forks"}
    runs = iter(
        [
            SandboxError("the engine went away"),
            pytest_report(ALL_PASS),
            pytest_report(ALL_PASS, base_config=read),
            pytest_report(ALL_PASS, base_config={"file": "other.ts", "files": [], "pool": "forks"}),
            pytest_report(ALL_PASS),
        ]
    )

    def answer(spec):
        step = next(runs)
        return FakeRun(raises=step) if isinstance(step, Exception) else FakeRun(report=step)

    sandbox = FakeSandbox(answer)
    g = Grader(get_settings(tasks_dir=tasks.dir, cache_dir=cache), sandbox=sandbox, images=StubImages(cache))
    task = tasks.get("d-pytest")
    verdicts = [g.grade(task, gold).verdict for _ in range(5)]
    assert verdicts == [Verdict.ERROR] + [Verdict.PASS] * 4
    given = [Order.from_json(spec.files["run/order.json"]).check.base_config for spec in sandbox.runs]
    assert given == [None, None, None, read, read]


@pytest.mark.parametrize(
    "run, words",
    [
        (FakeRun(stdout=b"", exit_code=137), "the supervisor produced no result (exit 137)"),
        (
            FakeRun(stdout=b'{"applied": true, "apply": {"meth', exit_code=0, stderr=b"Traceback: MemoryError"),
            "Traceback: MemoryError",
        ),
        (FakeRun(stdout=b"\xff\xfe not utf-8", exit_code=0), "the supervisor produced no result (exit 0)"),
    ],
    ids=["missing", "cut-short", "not-utf-8"],
)
def test_a_missing_or_garbled_supervisor_report_is_error(tasks, cache, gold, run, words):
    r, _ = grade(tasks, cache, "d-pytest", gold, run)
    assert_error(r, words)


@pytest.mark.parametrize(
    "stdout",
    [b"[]", b"null", b'"PASS"', b'{"applied": true, "apply": {"attempts": [{"x": 1}]}}'],
    ids=["list", "null", "string", "bad-attempt"],
)
def test_a_report_of_the_wrong_shape_is_error(tasks, cache, gold, stdout):
    r, _ = grade(tasks, cache, "d-pytest", gold, FakeRun(stdout=stdout))
    assert r.verdict is Verdict.ERROR, r.to_json()


def test_the_supervisors_own_fault_is_error(tasks, cache, gold):
    r, _ = grade(tasks, cache, "d-pytest", gold, supervisor(error="Traceback ...\nKeyError: 'repo'\n"))
    assert_error(r, "the supervisor failed: Traceback ...\nKeyError: 'repo'")


def test_a_bug_of_ours_is_error_with_its_traceback(tasks, cache, gold):
    def handler(spec):
        raise RuntimeError("a bug in the sandbox")

    r, _ = grade(tasks, cache, "d-pytest", gold, handler)
    assert_error(r, "RuntimeError: a bug in the sandbox\nTraceback (most recent call last)")


def test_a_pytest_task_with_nothing_to_run_is_error(tasks, cache, gold):
    r, sandbox = grade(tasks, cache, "d-nopaths", gold, supervisor())
    assert_error(r, "task d-nopaths: a pytest check needs paths or hidden test files")
    assert sandbox.runs == []


# --- the cache ---------------------------------------------------------------------------------


def test_the_cache_answers_once_the_image_is_known(tasks, cache, gold):
    seen: list[Provenance] = []
    earlier = Result(
        task_id="d-pytest",
        verdict=Verdict.PASS,
        explanation="cached",
        provenance=Provenance(patch_sha256="x", grader_version="0"),
    )

    def lookup(provenance):
        seen.append(provenance.model_copy())
        return earlier

    r, sandbox = grade(tasks, cache, "d-pytest", gold, supervisor(), lookup=lookup)
    assert r is earlier and sandbox.runs == []
    assert seen[0].image_id == IMAGE and seen[0].task_hash and seen[0].runtime == "runc"


# --- command tasks -------------------------------------------------------------------------------

JUNIT = """<?xml version="1.0"?><testsuites><testsuite name="t">
<testcase classname="tests.test_mean" name="test_empty" file="tests/test_mean.py"{body}</testcase>
</testsuite></testsuites>"""


def junit(failed: bool) -> str:
    return JUNIT.format(body='><failure message="no">x</failure>' if failed else ">")


def test_a_command_is_decided_by_its_junit_file(tasks, cache, gold):
    r, _ = grade(tasks, cache, "d-junit", gold, supervisor(junit=junit(False)))
    assert r.verdict is Verdict.PASS, r.to_json()
    assert r.protections.report_channel == "junit file"
    r, _ = grade(tasks, cache, "d-junit", gold, supervisor(junit=junit(True), exit_code=1))
    assert r.verdict is Verdict.FAIL


def test_a_command_with_no_or_a_broken_junit_file_fails(tasks, cache, gold):
    r, _ = grade(tasks, cache, "d-junit", gold, supervisor(junit=None))
    assert r.verdict is Verdict.FAIL and "The command wrote no JUnit report at report.xml" in r.explanation
    assert r.protections.report_channel == "exit status"
    r, _ = grade(tasks, cache, "d-junit", gold, supervisor(junit="<testsuites><testsuite"))
    assert r.verdict is Verdict.FAIL and r.check["report_problem"]


def test_a_command_without_a_report_is_decided_by_its_exit_status(tasks, cache, gold):
    r, _ = grade(tasks, cache, "d-exit", gold, supervisor(exit_code=0))
    assert r.verdict is Verdict.PASS and r.protections.report_channel == "exit status"
    assert grade(tasks, cache, "d-exit", gold, supervisor(exit_code=1))[0].verdict is Verdict.FAIL


def test_a_command_that_changed_the_hidden_tests_fails(tasks, cache, gold):
    r, _ = grade(tasks, cache, "d-exit", gold, supervisor(exit_code=0, tampered_files=["tests/test_mean.py"]))
    assert r.verdict is Verdict.FAIL
    assert r.explanation == "The hidden tests were modified while they ran: tests/test_mean.py."
    assert r.check["tampered"] == ["tests/test_mean.py"]


def test_a_command_that_ran_pytest_is_decided_by_its_signed_report(tasks, cache, gold):
    doc = pytest_report({F2P: "passed"}, canaries=None)
    r, _ = grade(tasks, cache, "d-junit", gold, doc)
    assert r.verdict is Verdict.PASS and r.protections.report_channel == "signed"
    forged = pytest_report({F2P: "passed"}, canaries=None, report={"forged": "line 2 of the report ..."})
    r, _ = grade(tasks, cache, "d-junit", gold, forged)
    assert r.verdict is Verdict.FAIL and r.tampered == ["line 2 of the report ..."]


# --- output and exact-match tasks ----------------------------------------------------------------


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_an_output_task_is_decided_by_similarity(tasks, cache, gold):
    r, _ = grade(tasks, cache, "d-output", gold, supervisor(stdout=b64(b"mean: 2\n"), stdout_complete=True))
    assert r.verdict is Verdict.PASS and r.check["ratio"] == 1.0
    r, _ = grade(tasks, cache, "d-output", gold, supervisor(stdout=b64(b"Traceback\n"), stdout_complete=True))
    assert r.verdict is Verdict.FAIL and r.check["ratio"] < 0.9


def test_an_exact_match_task_is_decided_by_the_files(tasks, cache, gold):
    r, _ = grade(tasks, cache, "d-exact", gold, supervisor(files={"calc/__init__.py": b64(FIXED.encode())}))
    assert r.verdict is Verdict.PASS, r.to_json()
    r, _ = grade(tasks, cache, "d-exact", gold, supervisor(files={"calc/__init__.py": None}))
    assert r.verdict is Verdict.FAIL


# --- what the pipeline asks the sandbox for ---------------------------------------------------------


def test_the_run_spec_carries_the_supervisor_the_job_and_the_patch(tasks, cache, gold):
    _, sandbox = grade(tasks, cache, "d-pytest", gold, pytest_report(ALL_PASS))
    spec = sandbox.runs[0]
    assert spec.image == IMAGE and spec.files_root == "/opt/grader" and spec.workdir == "/work/repo"
    assert spec.command == ["python3", "-I", "/opt/grader/run/box.zip"]
    assert spec.files["run/submission.patch"] == gold
    # the archive is the shape's, the same for every run on the image: a container started
    # ahead holds it, and its supervisor and the check's runner imported, before the run
    assert sorted(spec.files) == ["run/order.json", "run/submission.patch"]
    assert spec.early_files == {"run/box.zip": archive()} and archive().startswith(b"PK")
    assert spec.preload == ("grader_box.supervisor", "grader_box.runners.pytest")
    assert Order.from_json(spec.files["run/order.json"]).check.kind == "pytest"
    assert (spec.limits.memory, spec.limits.pids, spec.timeout) == ("256m", 64, 20)
    assert spec.env["TZ"] == "UTC" and spec.labels == {"grader.task": "d-pytest"}
    order = json.loads(spec.files["run/order.json"])
    assert order["check"]["kind"] == "pytest" and order["check"]["args"] == [
        "tests/test_basic.py",
        "tests/test_mean.py",
    ]
    assert order["touched"] == ["calc/__init__.py"] and order["nproc_limit"] is None
    assert 0.5 <= order["deadline"] < spec.timeout


def test_a_private_kernel_gets_the_process_limit_inside(tasks, cache, gold):
    _, sandbox = grade(tasks, cache, "d-pytest", gold, pytest_report(ALL_PASS), private_kernel=True)
    assert json.loads(sandbox.runs[0].files["run/order.json"])["nproc_limit"] == 64


def test_the_fake_is_a_registered_provider(tasks, cache, gold):
    sandbox = get_sandbox("fake", handler=lambda spec: FakeRun(report=pytest_report(ALL_PASS)), tmpfs_size="256m")
    g = Grader(get_settings(tasks_dir=tasks.dir, cache_dir=cache), sandbox=sandbox, images=StubImages(cache))
    assert g.grade(tasks.get("d-pytest"), gold).verdict is Verdict.PASS


def test_a_finished_run_output_is_taken_as_it_is(tasks, cache, gold):
    out = ContainerOutput(
        exit_code=0,
        stdout=json.dumps(pytest_report(ALL_PASS)).encode(),
        stderr=b"",
        timed_out=False,
        oom_killed=False,
        image_id=IMAGE,
        runtime="runsc",
    )
    r, _ = grade(tasks, cache, "d-pytest", gold, lambda spec: out)
    assert r.verdict is Verdict.PASS and r.provenance.runtime == r.protections.runtime == "runsc"
