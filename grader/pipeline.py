"""grade(task, patch) -> Result: the one place a verdict is decided.

validate the patch (unidiff) -> PATCH FAILED on a refusal
find / build the instance image
one container run: the supervisor applies, restores, runs (see supervisor.py)
-> TIMED OUT past the wall-clock limit
-> PATCH FAILED when no step of the apply chain applies it
-> the task's check turns the run into PASS or FAIL
any fault of the machinery on the way -> ERROR (never FAIL, never charged)
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import time
import traceback
from collections.abc import Callable
from importlib import resources
from typing import Any

from grader.audit import audit_patch
from grader.checks import CheckOutcome, evaluate_exact_match, evaluate_output, evaluate_tests, parse_junit
from grader.checks.integrity import Report, read_pytest_report
from grader.checks.tests import ReportError
from grader.config import Settings, get_settings
from grader.errors import GraderError, SandboxError
from grader.images import HIDDEN_DIR, REPO_DIR, UID, Images
from grader.jobspec import CheckSpec, JobSpec, ProtectSpec
from grader.metrics import file_localization
from grader.patch import PatchInfo, inspect_patch, touched_files
from grader.sandbox import Limits, RunOutput, RunSpec, Sandbox, sandbox_for_runtime
from grader.tasks.model import ExactMatchCheck, OutputCheck, Task, TestsCheck
from grader.tasks.prepare import PreparedTask
from grader.verdict import ApplyAttempt, ApplyLog, AuditFinding, Localization, Protections, Provenance, Result, Verdict
from grader.version import GRADER_VERSION

log = logging.getLogger(__name__)

GRADER_DIR = "/opt/grader"  # root-only in the instance image
RUN_DIR = f"{GRADER_DIR}/run"
PATCH_PATH = f"{RUN_DIR}/submission.patch"
# Deterministic: the same patch sees the same clock zone, locale, hash seed and git identity.
CONTAINER_ENV = {
    "TZ": "UTC",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONNOUSERSITE": "1",
    "HOME": "/tmp",
    "GIT_AUTHOR_NAME": "grader",
    "GIT_AUTHOR_EMAIL": "grader@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_NAME": "grader",
    "GIT_COMMITTER_EMAIL": "grader@localhost",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
}
# The SWE-bench harness's order: strict first, then looser. The patch arrives on stdin.
APPLY_CHAIN = [
    ("git apply", ["git", "apply", "--verbose"]),
    ("git apply --3way", ["git", "apply", "--verbose", "--3way"]),
    (
        "patch --fuzz",
        ["patch", "--batch", "--forward", "--fuzz=5", "-p1", "--no-backup-if-mismatch", "--reject-file=-"],
    ),
]
# What a runner or the interpreter loads by itself from the repository: restored to the
# base whatever the task says (a patch that was only a conftest.py was once scored as
# resolving SWE-bench tasks). pyproject.toml, setup.cfg and tox.ini stay the submission's
# to edit: pytest reads the base commit's configuration from a copy made before the patch.
RUNNER_FILES = ["conftest.py", "sitecustomize.py", "usercustomize.py", "pytest.ini", ".pytest.ini"]
RUNNER_SUFFIXES = [".pth", ".egg-link"]
# A command task's runner reads its configuration from the repository as it is: there,
# the files that configure pytest are protected too.
COMMAND_CONFIG_FILES = ["pyproject.toml", "setup.cfg", "tox.ini"]
RUNNER_PREFIXES = ["__editable__"]
METADATA_DIR_SUFFIXES = [".dist-info", ".egg-info"]
# The repository's test files, protected unless the task turns `protect.tests` off: what
# pytest collects by default, and every file of a directory named like a test directory
# that holds such a module (see supervisor.Protection).
TEST_MODULES = ["test_*.py", "*_test.py", "tests.py"]
TEST_DIR_NAMES = ["tests", "test", "testing"]
NOT_TEST_FILES = ("conftest.py", "__init__.py")
# Bytecode is read only from this root-owned cache of the environment's own modules (the
# environment image fills it); the repository's sources are always compiled afresh.
PYCACHE = "/opt/pycache"


@functools.cache
def _shipped(name: str) -> bytes:
    """A module of the package that runs inside the container: supervisor.py and the
    records of its job (jobspec.py), placed side by side in the root-only run directory."""
    return resources.files("grader").joinpath(name).read_bytes()


@functools.cache
def _report_plugin() -> str:
    return base64.b64encode(resources.files("grader").joinpath("report_plugin.py").read_bytes()).decode()


def _test_file(test_id: str) -> str:
    return test_id.split("::", 1)[0]


def _words(test_ids: list[str]) -> list[str]:
    """Words of the task's own test names, for canaries that look like them."""
    out: set[str] = set()
    for tid in test_ids:
        name = tid.rsplit("::", 1)[-1].split("[", 1)[0]
        out |= {w.lower() for w in name.split("_") if w and w.lower() != "test"}
    return sorted(out)


def _margin(timeout: float) -> float:
    """Time the supervisor keeps back to report before the hard kill from outside."""
    return min(2.0, max(0.3, timeout * 0.05))


class Grader:
    """Grades patches against tasks with one sandbox and one image store."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        sandbox: Sandbox | None = None,
        images: Images | None = None,
        runtime: str | None = None,
    ):
        self.settings = settings or get_settings()
        self.runtime = runtime or self.settings.runtime
        self.images = images or Images(self.settings)
        self._sandbox = sandbox

    @property
    def sandbox(self) -> Sandbox:
        if self._sandbox is None:
            s = self.settings
            self._sandbox = sandbox_for_runtime(
                self.runtime,
                tmpfs_size=s.tmpfs_size,
                storage_size=s.storage_size,
                file_size_limit=s.file_size_limit,
                max_warm=s.prewarm,
            )
            # containers of graders on this host that died mid-run go first; housekeeping
            # that fails (the engine is away) leaves the grade to find out for itself
            try:
                reaped = self._sandbox.reap_orphans()
            except GraderError as exc:
                log.warning("reaping orphaned grading containers failed: %s", exc)
                reaped = 0
            if reaped:
                log.info("removed %d orphaned grading container(s)", reaped)
        return self._sandbox

    # ------------------------------------------------------------------------------
    def grade(self, task: Task, patch: bytes, *, lookup: Callable[[Provenance], Result | None] | None = None) -> Result:
        """The verdict for `patch` on `task`. `lookup`, given the provenance once the image is
        known, may answer with an earlier identical grade instead (the service's cache)."""
        started = time.monotonic()
        t = time.monotonic()
        info = inspect_patch(patch, self.settings.max_patch_bytes)
        durations = {"validate": time.monotonic() - t}
        provenance = Provenance(patch_sha256=info.sha256, grader_version=GRADER_VERSION, runtime=self.runtime)
        try:
            provenance.task_hash = task.definition_hash()
            localization = self._localization(task, info)
            if not info.ok:
                return self._finish(
                    Result(
                        task_id=task.id,
                        verdict=Verdict.PATCH_FAILED,
                        provenance=provenance,
                        localization=localization,
                        explanation="The patch was refused before it was applied: " + "; ".join(info.problems) + ".",
                        durations=durations,
                    ),
                    started,
                )
            t = time.monotonic()
            image_id, prepared = self.images.instance_image(
                task, build=self.settings.build_missing_images, task_hash=provenance.task_hash
            )
            provenance.image_id = image_id
            durations["image"] = time.monotonic() - t
            earlier = lookup(provenance) if lookup is not None else None
            if earlier is not None:
                return earlier
            audit = audit_patch(patch)
            t = time.monotonic()
            out = self.sandbox.run(self._spec(task, prepared, image_id, info, patch))
            durations["container"] = time.monotonic() - t
            durations.update({f"container_{k}": v for k, v in out.durations.items()})
            result = self._decide(task, prepared, out, provenance, localization, durations, audit)
        except GraderError as exc:
            log.warning("grading %s failed in the machinery: %s", task.id, exc)
            result = self._error(task, provenance, str(exc), durations)
        except Exception as exc:  # a bug of ours is still not the submitter's fault
            log.exception("unexpected failure grading %s", task.id)
            result = self._error(task, provenance, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}", durations)
        return self._finish(result, started)

    # ------------------------------------------------------------------------------
    @staticmethod
    def _finish(result: Result, started: float) -> Result:
        result.durations["total"] = time.monotonic() - started
        result.durations = {k: round(v, 4) for k, v in result.durations.items()}
        return result

    @staticmethod
    def _error(task: Task, provenance: Provenance, message: str, durations: dict[str, float]) -> Result:
        return Result(
            task_id=task.id,
            verdict=Verdict.ERROR,
            provenance=provenance,
            durations=durations,
            explanation="The grading machinery failed; this attempt is not charged and can be retried.",
            error=message,
        )

    @staticmethod
    def _localization(task: Task, info: PatchInfo) -> Localization | None:
        gold = task.gold_patch_text()
        if gold is None or not info.ok:
            return None
        gold_files = sorted(touched_files(gold))
        patch_files = sorted(info.touched())
        p, r, f1 = file_localization(patch_files, gold_files)
        return Localization(precision=p, recall=r, f1=f1, patch_files=patch_files, gold_files=gold_files)

    def _spec(self, task: Task, prepared: PreparedTask, image_id: str, info: PatchInfo, patch: bytes) -> RunSpec:
        check = task.check
        manifest = prepared.hidden_manifest()
        listed: list[str] = []
        if isinstance(check, TestsCheck):
            listed = check.fail_to_pass + check.pass_to_pass
        if isinstance(check, TestsCheck) and check.runner == "pytest":
            hidden = sorted(
                p
                for p, d in manifest.items()
                if d is not None and p.endswith(".py") and p.rsplit("/", 1)[-1] not in NOT_TEST_FILES
            )
            named = {_test_file(tid) for tid in listed}
            paths = check.paths or sorted(set(hidden) | named)
            if not paths:
                raise GraderError(f"task {task.id}: a pytest check needs paths or hidden test files")
            check_job = CheckSpec(
                kind="pytest",
                args=[*check.pytest_args, *paths],
                plugins=check.plugins,
                **self._canary_job(check, hidden, named, listed),
            )
        elif isinstance(check, TestsCheck):
            hidden = sorted(
                p
                for p, d in manifest.items()
                if d is not None and p.endswith(".py") and p.rsplit("/", 1)[-1] not in NOT_TEST_FILES
            )
            check_job = CheckSpec(
                kind="command",
                command=check.command,
                junit=check.junit,
                **self._canary_job(check, hidden, {_test_file(tid) for tid in listed}, listed),
            )
        elif isinstance(check, OutputCheck):
            check_job = CheckSpec(kind="output", command=check.command)
        else:
            check_job = CheckSpec(kind="exact_match", paths=check.compared_paths())
        runner_files = RUNNER_FILES
        if isinstance(check, TestsCheck) and check.runner == "command":
            runner_files = RUNNER_FILES + COMMAND_CONFIG_FILES  # the command's pytest reads them
        protect = ProtectSpec(
            files=sorted(set(manifest) | {_test_file(tid) for tid in listed}),
            names=runner_files,
            suffixes=RUNNER_SUFFIXES,
            prefixes=RUNNER_PREFIXES,
            dir_suffixes=METADATA_DIR_SUFFIXES,
            tests=task.protect.tests,
            test_modules=TEST_MODULES,
            test_dir_names=TEST_DIR_NAMES,
            globs=task.protect.paths,
        )
        job = JobSpec(
            repo=REPO_DIR,
            patch=PATCH_PATH,
            touched=sorted(info.touched()),
            hidden_dir=HIDDEN_DIR,
            uid=UID,
            gid=UID,
            deadline=max(0.5, task.limits.timeout - _margin(task.limits.timeout)),
            output_limit=self.settings.output_limit_bytes,
            report_limit=self.settings.report_limit_bytes,
            apply_chain=[(method, list(argv)) for method, argv in APPLY_CHAIN],
            protect=protect,
            pycache=PYCACHE,
            report_plugin=_report_plugin(),
            check=check_job,
            env=CONTAINER_ENV,
            nproc_limit=task.limits.pids if self.sandbox.private_kernel else None,
        )
        return RunSpec(
            image=image_id,
            command=["python3", "-I", f"{RUN_DIR}/supervisor.py"],
            files={
                "run/job.json": job.to_json().encode(),
                "run/jobspec.py": _shipped("jobspec.py"),
                "run/supervisor.py": _shipped("supervisor.py"),
                "run/submission.patch": patch,
            },
            files_root=GRADER_DIR,
            env=CONTAINER_ENV,
            workdir=REPO_DIR,
            limits=Limits(memory=task.limits.memory, cpus=task.limits.cpus, pids=task.limits.pids),
            timeout=task.limits.timeout,
            labels={"grader.task": task.id},
        )

    @staticmethod
    def _canary_job(check: TestsCheck, hidden: list[str], named: set[str], listed: list[str]) -> dict[str, Any]:
        """Where the canaries go (beside the hidden tests), what they are named like and
        whose imports they borrow."""
        homes = [p.rsplit("/", 1)[0] if "/" in p else "" for p in hidden + sorted(named)]
        return {
            "canaries": check.canaries,
            "canary_dir": homes[0] if homes else "",
            "canary_words": _words(listed),
            "canary_sources": hidden[:3],
        }

    def _decide(
        self,
        task: Task,
        prepared: PreparedTask,
        out: RunOutput,
        provenance: Provenance,
        localization: Localization | None,
        durations: dict[str, float],
        audit: list[AuditFinding],
    ) -> Result:
        provenance.runtime = out.runtime
        protections = Protections(runtime=out.runtime, audit_mode=self.settings.audit)
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
            sup = json.loads(out.stdout.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            if out.oom_killed:
                return Result(
                    **base,
                    verdict=Verdict.FAIL,
                    explanation=f"The run exceeded its {task.limits.memory} memory limit and was killed.",
                )
            raise SandboxError(
                f"the supervisor produced no result (exit {out.exit_code}): "
                f"{out.stderr.decode(errors='replace')[-2000:]}"
            ) from None
        if sup.get("error"):
            raise SandboxError(f"the supervisor failed: {sup['error']}")
        for stage in ("snapshot", "apply", "place_tests", "check", "verify"):
            if stage in sup.get("durations", {}):
                durations[stage] = sup["durations"][stage]
        apply = sup.get("apply") or {}
        restored = sup.get("protected_restored", [])
        protections.protected_restored = restored
        protections.bytecode_removed = sup.get("bytecode_removed", [])
        protections.hidden_tests = sup.get("restored", [])
        apply_log = ApplyLog(
            method=apply.get("method"),
            attempts=[ApplyAttempt(**a) for a in apply.get("attempts", [])],
            neutralized=restored,
            restored=sup.get("restored", []),
        )
        base["apply"] = apply_log
        base["output"] = sup.get("output", "")
        tree_error = sup.get("tree_error")
        if sup.get("timed_out"):
            return Result(
                **base,
                verdict=Verdict.TIMED_OUT,
                explanation=f"The run passed its {limit:g} s wall-clock limit and was stopped.",
            )
        if tree_error and tree_error["stage"] == "apply":
            return Result(
                **base,
                verdict=Verdict.PATCH_FAILED,
                explanation=f"Applying the patch left a file tree that could not be undone: {tree_error['message']}.",
            )
        if sup.get("apply_refused"):
            return Result(
                **base,
                verdict=Verdict.PATCH_FAILED,
                explanation=f"The patch was refused after it was applied: {sup['apply_refused']}.",
            )
        if not sup.get("applied"):
            tried = ", ".join(a.method for a in apply_log.attempts)
            return Result(
                **base,
                verdict=Verdict.PATCH_FAILED,
                explanation=f"The patch does not apply at the base commit (tried {tried}).",
            )
        if tree_error:
            return Result(
                **base,
                verdict=Verdict.FAIL,
                explanation=f"The submission left the repository in a state the grader cannot check "
                f"({tree_error['stage']}: {tree_error['message']}).",
            )
        outcome, report = self._check(task, prepared, sup)
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
            protections.report_channel = "junit file" if sup.get("junit") else "exit status"
        explanation = outcome.explanation
        if restored:
            shown = ", ".join(restored[:3]) + (" ..." if len(restored) > 3 else "")
            explanation += f" ({len(restored)} protected file(s) the patch changed were restored to the base: {shown})"
        verdict = Verdict.PASS if outcome.passed else Verdict.FAIL
        if verdict is Verdict.PASS and audit and self.settings.audit == "fail":
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

    @staticmethod
    def _check(task: Task, prepared: PreparedTask, sup: dict[str, Any]) -> tuple[CheckOutcome, Report | None]:
        check = task.check
        if isinstance(check, TestsCheck):
            if check.runner == "pytest":
                report = read_pytest_report(sup)
                outcome = evaluate_tests(
                    outcomes=report.outcomes,
                    report_problem=report.problem,
                    exit_code=sup.get("exit_code"),
                    fail_to_pass=check.fail_to_pass,
                    pass_to_pass=check.pass_to_pass,
                    runner=check.runner,
                )
                if report.collect_errors:
                    outcome.details["collect_errors"] = report.collect_errors
                return outcome, report
            if sup.get("report") is not None:  # the command ran pytest: its signed report decides
                report = read_pytest_report(sup, command=True)
                outcome = evaluate_tests(
                    outcomes=report.outcomes,
                    report_problem=report.problem,
                    exit_code=sup.get("exit_code"),
                    fail_to_pass=check.fail_to_pass,
                    pass_to_pass=check.pass_to_pass,
                    runner=check.runner,
                )
                return outcome, report
            outcomes, problem = {}, None
            if sup.get("junit"):
                try:
                    outcomes = parse_junit(sup["junit"])
                except ReportError as exc:
                    problem = str(exc)
            elif check.junit and (check.fail_to_pass or check.pass_to_pass):
                problem = f"The command wrote no JUnit report at {check.junit}"
            outcome = evaluate_tests(
                outcomes=outcomes,
                report_problem=problem,
                exit_code=sup.get("exit_code"),
                fail_to_pass=check.fail_to_pass,
                pass_to_pass=check.pass_to_pass,
                runner=check.runner,
            )
            tampered_files = sup.get("tampered_files") or []
            if tampered_files:
                outcome = CheckOutcome(
                    False,
                    f"The hidden tests were modified while they ran: {', '.join(tampered_files)}",
                    tests=outcome.tests,
                    details={**outcome.details, "tampered": tampered_files},
                )
            return outcome, None
        if isinstance(check, OutputCheck):
            return evaluate_output(
                base64.b64decode(sup.get("stdout", "")),
                sup.get("stdout_complete", False),
                task.read(check.expected),
                threshold=check.threshold,
                normalize=check.normalize,
                exit_code=sup.get("exit_code"),
            ), None
        assert isinstance(check, ExactMatchCheck)
        files = {rel: (base64.b64decode(v) if v is not None else None) for rel, v in sup.get("files", {}).items()}
        return evaluate_exact_match(files, prepared.expected_files(), check.normalize), None
