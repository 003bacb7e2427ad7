"""The decision: one container run's output in, the verdict out. Pure: no Docker, no
files, no clock; grader/pipeline.py hands it what the run printed and what the task
expects, and it raises SandboxError only for what is the machinery's fault (a supervisor
that printed no report, or reported its own failure).

    the run passed its wall-clock limit                 -> TIMED OUT
    no report, and the memory limit killed it           -> FAIL
    no report otherwise / the supervisor's own fault    -> SandboxError (ERROR upstream)
    the supervisor stopped the run at its deadline      -> TIMED OUT
    the apply left a tree that could not be undone      -> PATCH FAILED
    the patch wrote paths its headers do not name       -> PATCH FAILED
    no step of the apply chain applied it               -> PATCH FAILED
    the submission left a tree the grader cannot check  -> FAIL
    the test report betrays tampering                   -> FAIL, `tampered`
    the check passed (and the audit allows it)          -> PASS, else FAIL
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grader.box.runners import runner
from grader.box.runners.bisect import ANSWER_FILE as BISECT_ANSWER
from grader.checks import CheckOutcome, evaluate_exact_match, evaluate_output, evaluate_tests, parse_junit
from grader.checks.bisect import evaluate_bisect
from grader.checks.history import Reference, evaluate_history, read_submitted
from grader.checks.integrity import Report, read_test_report
from grader.checks.tests import ExitRule, ReportError
from grader.errors import SandboxError
from grader.grading.report import BoxReport, ReportShapeError
from grader.sandbox import ContainerOutput
from grader.tasks.model import BisectCheck, ExactMatchCheck, HistoryCheck, OutputCheck, Task, TestsCheck
from grader.verdict import ApplyAttempt, ApplyLog, AuditFinding, Localization, Protections, Provenance, Result, Verdict

# the supervisor's stages, its whole time, and the CPU seconds the container's processes spent
# (in all, and before and in each stage: cpu_boot, cpu_snapshot, ...); `compile` only in a
# run that compiled the supervisor's bytecode (box/bytecode.py)
STAGES = ("compile", "snapshot", "apply", "place_tests", "check", "verify", "supervisor", "cpu")
CPU_STAGES = tuple(f"cpu_{s}" for s in ("boot", *STAGES[:6]))


@dataclass(frozen=True)
class Expected:
    """What the task expects, read before the decision: an output check's expected stdout,
    an exact-match check's expected files, a history check's reference history, a bisect
    check's commits."""

    output: bytes | None = None
    files: dict[str, bytes] | None = None
    history: dict[str, Any] | None = None


def exit_rule(name: str) -> ExitRule | None:
    """How a runner's exit status must agree with its report, when it declares it."""
    module = runner(name)
    if not hasattr(module, "EXIT_PASSED"):
        return None
    label = getattr(module, "LABEL", name)
    return ExitRule(label, module.EXIT_PASSED, module.EXIT_FAILED, dict(module.EXIT_MEANING))


def decide(
    task: Task,
    out: ContainerOutput,
    *,
    provenance: Provenance,
    localization: Localization | None,
    durations: dict[str, float],
    audit: list[AuditFinding],
    audit_mode: str,
    expected: Expected,
) -> Result:
    provenance.runtime = out.runtime
    protections = Protections(runtime=out.runtime, audit_mode=audit_mode)
    base: dict[str, Any] = dict(
        task_id=task.id,
        provenance=provenance,
        localization=localization,
        durations=durations,
        audit=audit,
        protections=protections,
    )
    limit = task.limits.timeout
    if out.timed_out:
        return Result(
            **base,
            verdict=Verdict.TIMED_OUT,
            explanation=f"The run passed its {limit:g} s wall-clock limit and was killed.",
        )
    try:
        box = BoxReport.parse(out.stdout)
    except ReportShapeError:
        if out.oom_killed:
            return Result(
                **base,
                verdict=Verdict.FAIL,
                explanation=f"The run exceeded its {task.limits.memory} memory limit and was killed.",
            )
        raise SandboxError(
            f"the supervisor produced no result (exit {out.exit_code}): {out.stderr.decode(errors='replace')[-2000:]}"
        ) from None
    if box.error:
        raise SandboxError(f"the supervisor failed: {box.error}")
    for stage in STAGES + CPU_STAGES:
        if stage in box.durations:
            durations[stage] = box.durations[stage]
    protections.protected_restored = box.protected_restored
    protections.bytecode_removed = box.bytecode_removed
    protections.hidden_tests = box.restored
    apply_log = ApplyLog(
        method=box.apply_method,
        attempts=[
            ApplyAttempt(method=a.method, command=a.command, exit_code=a.exit_code, output=a.output)
            for a in box.attempts
        ],
        neutralized=box.protected_restored,
        restored=box.restored,
    )
    base["apply"] = apply_log
    base["output"] = box.output
    if box.timed_out:
        return Result(
            **base,
            verdict=Verdict.TIMED_OUT,
            explanation=f"The run passed its {limit:g} s wall-clock limit and was stopped.",
        )
    if box.tree_error and box.tree_error[0] == "apply":
        return Result(
            **base,
            verdict=Verdict.PATCH_FAILED,
            explanation=f"Applying the patch left a file tree that could not be undone: {box.tree_error[1]}.",
        )
    if box.apply_refused:
        return Result(
            **base,
            verdict=Verdict.PATCH_FAILED,
            explanation=f"The patch was refused after it was applied: {box.apply_refused}.",
        )
    if not box.applied:
        tried = ", ".join(a.method for a in apply_log.attempts)
        return Result(
            **base,
            verdict=Verdict.PATCH_FAILED,
            explanation=f"The patch does not apply at the base commit (tried {tried}).",
        )
    if box.tree_error:
        return Result(
            **base,
            verdict=Verdict.FAIL,
            explanation=f"The submission left the repository in a state the grader cannot check "
            f"({box.tree_error[0]}: {box.tree_error[1]}).",
        )
    outcome, report = check(task, box, expected)
    if box.report is not None and box.report.findings:
        # what the report plugin saw the submission's own code do by reflection: findings
        # like the static audit's, judged by the same mode
        audit = base["audit"] = list(audit) + runtime_findings(box.report.findings)
    if report is not None:
        protections.report_channel = report.channel
        protections.canaries = report.canaries
        evidence = report.evidence + (report.pending if outcome.passed else [])
        if evidence:
            return Result(
                **base,
                verdict=Verdict.FAIL,
                tampered=evidence,
                tests=outcome.tests,
                check={"type": task.check.type, **outcome.details},
                explanation=f"The run tampered with its test report: {evidence[0]}.",
            )
    elif isinstance(task.check, TestsCheck):
        protections.report_channel = "junit file" if box.junit else "exit status"
    explanation = outcome.explanation
    restored = box.protected_restored
    if restored:
        shown = ", ".join(restored[:3]) + (" ..." if len(restored) > 3 else "")
        explanation += f" ({len(restored)} protected file(s) the patch changed were restored to the base: {shown})"
    verdict = Verdict.PASS if outcome.passed else Verdict.FAIL
    if verdict is Verdict.PASS and audit and audit_mode == "fail":
        rules = ", ".join(sorted({f.rule for f in audit}))
        verdict = Verdict.FAIL
        explanation = (
            f"The patch reaches into the test runner or the interpreter ({rules}); "
            f"this grader fails such patches. The tests alone: {explanation}"
        )
    return Result(
        **base,
        verdict=verdict,
        explanation=explanation + ".",
        tests=outcome.tests,
        check={"type": task.check.type, **outcome.details},
    )


def runtime_findings(found: list[str]) -> list[AuditFinding]:
    """The plugin's findings ("a frame read at calc/x.py:12") as audit findings."""
    out = []
    for what in found:
        text, _, at = what.rpartition(" at ")
        path, _, line = at.rpartition(":")
        if not text or not path:
            text, path, line = what, "", ""
        out.append(
            AuditFinding(
                rule="runtime-reflection",
                path=path,
                line=int(line) if line.isdigit() else None,
                text=text[:160],
            )
        )
    return out


def check(task: Task, box: BoxReport, expected: Expected) -> tuple[CheckOutcome, Report | None]:
    """What the task's check makes of the run: the outcome, and the test report it was read
    from (None where no report decides)."""
    spec = task.check
    if isinstance(spec, TestsCheck):
        return _tests(spec, box)
    if isinstance(spec, OutputCheck):
        assert expected.output is not None  # read by the pipeline for an output check
        return evaluate_output(
            box.stdout,
            box.stdout_complete,
            expected.output,
            threshold=spec.threshold,
            normalize=spec.normalize,
            exit_code=box.exit_code,
        ), None
    if isinstance(spec, HistoryCheck):
        ref = expected.history
        assert ref is not None  # read by the pipeline for a history check
        reference = Reference(tree=ref["tree"], files=ref["files"], diffs=ref["diffs"], total=ref["total"])
        return evaluate_history(spec, read_submitted(box.history), reference), None
    if isinstance(spec, BisectCheck):
        assert expected.history is not None
        return evaluate_bisect(box.files.get(BISECT_ANSWER), expected.history["commits"], spec.commit), None
    assert isinstance(spec, ExactMatchCheck) and expected.files is not None
    return evaluate_exact_match(box.files, expected.files, spec.normalize), None


def _tests(spec: TestsCheck, box: BoxReport) -> tuple[CheckOutcome, Report | None]:
    def judged(outcomes: dict[str, str], problem: str | None, exits: ExitRule | None = None) -> CheckOutcome:
        return evaluate_tests(
            outcomes=outcomes,
            report_problem=problem,
            exit_code=box.exit_code,
            fail_to_pass=spec.fail_to_pass,
            pass_to_pass=spec.pass_to_pass,
            runner=spec.runner,
            exits=exits,
            title_ids=getattr(runner(spec.runner), "ID_STYLE", None) == "title-path",
        )

    rule = exit_rule(spec.runner)
    if rule is not None:  # the runner ran the tests itself and reported through the channel
        report = read_test_report(
            box.report,
            exit_code=box.exit_code,
            canaries=box.canaries,
            tampered_files=box.tampered_files,
            runner=rule.name,
        )
        outcome = judged(report.outcomes, report.problem, rule)
        if report.collect_errors:
            outcome.details["collect_errors"] = report.collect_errors
        return outcome, report
    if box.report is not None:  # the command ran pytest: its signed report decides
        report = read_test_report(
            box.report,
            exit_code=box.exit_code,
            canaries=box.canaries,
            tampered_files=box.tampered_files,
            command=True,
        )
        outcome = judged(report.outcomes, report.problem)
        return outcome, report
    outcomes: dict[str, str] = {}
    problem = None
    if box.junit:
        try:
            outcomes = parse_junit(box.junit)
        except ReportError as exc:
            problem = str(exc)
    elif spec.junit and (spec.fail_to_pass or spec.pass_to_pass):
        problem = f"The command wrote no JUnit report at {spec.junit}"
    outcome = judged(outcomes, problem)
    if box.tampered_files:
        outcome = CheckOutcome(
            False,
            f"The hidden tests were modified while they ran: {', '.join(box.tampered_files)}",
            tests=outcome.tests,
            details={**outcome.details, "tampered": box.tampered_files},
        )
    return outcome, None
