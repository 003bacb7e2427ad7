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
from collections.abc import Callable
import functools
import json
import logging
import time
import traceback
from importlib import resources
from importlib.metadata import PackageNotFoundError, version

from grader.checks import CheckOutcome, evaluate_exact_match, evaluate_output, evaluate_tests
from grader.config import Settings, get_settings
from grader.errors import GraderError, SandboxError
from grader.images import HIDDEN_DIR, REPO_DIR, UID, Images
from grader.metrics import file_localization
from grader.patch import PatchInfo, inspect_patch, touched_files
from grader.sandbox import Limits, RunOutput, RunSpec, Sandbox, get_sandbox
from grader.tasks.model import ExactMatchCheck, OutputCheck, Task, TestsCheck
from grader.tasks.prepare import PreparedTask
from grader.verdict import ApplyAttempt, ApplyLog, Localization, Provenance, Result, Verdict

log = logging.getLogger(__name__)

try:
    GRADER_VERSION = version("grader")
except PackageNotFoundError:  # running from a source tree
    GRADER_VERSION = "0+source"

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
    ("patch --fuzz", ["patch", "--batch", "--forward", "--fuzz=5", "-p1", "--no-backup-if-mismatch",
                      "--reject-file=-"]),
]
# Files a test runner or the interpreter picks up by themselves: a patch may not add or
# change them (a patch that was only a conftest.py was once scored as resolving SWE-bench
# tasks). pytest's ini-style files need no entry: pytest reads the base commit's config.
RUNNER_FILES = ["conftest.py", "sitecustomize.py", "usercustomize.py", "pytest.ini", ".pytest.ini"]
RUNNER_SUFFIXES = [".pth"]
NOT_TEST_FILES = ("conftest.py", "__init__.py")


@functools.cache
def _supervisor_source() -> bytes:
    return resources.files("grader").joinpath("supervisor.py").read_bytes()


def _margin(timeout: float) -> float:
    """Time the supervisor keeps back to report before the hard kill from outside."""
    return min(2.0, max(0.3, timeout * 0.05))


class Grader:
    """Grades patches against tasks with one sandbox and one image store."""

    def __init__(self, settings: Settings | None = None, *, sandbox: Sandbox | None = None, images: Images | None = None,
                 runtime: str | None = None):
        self.settings = settings or get_settings()
        self.runtime = runtime or self.settings.runtime
        self.images = images or Images(self.settings)
        self._sandbox = sandbox

    @property
    def sandbox(self) -> Sandbox:
        if self._sandbox is None:
            s = self.settings
            self._sandbox = get_sandbox("docker", runtime=self.runtime, tmpfs_size=s.tmpfs_size,
                                        storage_size=s.storage_size, file_size_limit=s.file_size_limit,
                                        max_warm=s.prewarm)
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
                return self._finish(Result(
                    task_id=task.id, verdict=Verdict.PATCH_FAILED, provenance=provenance, localization=localization,
                    explanation="The patch was refused before it was applied: " + "; ".join(info.problems) + ".",
                    durations=durations,
                ), started)
            t = time.monotonic()
            image_id, prepared = self.images.instance_image(task, build=self.settings.build_missing_images,
                                                            task_hash=provenance.task_hash)
            provenance.image_id = image_id
            durations["image"] = time.monotonic() - t
            earlier = lookup(provenance) if lookup is not None else None
            if earlier is not None:
                return earlier
            t = time.monotonic()
            out = self.sandbox.run(self._spec(task, prepared, image_id, info, patch))
            durations["container"] = time.monotonic() - t
            durations.update({f"container_{k}": v for k, v in out.durations.items()})
            result = self._decide(task, prepared, out, provenance, localization, durations)
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
    def _error(task: Task, provenance: Provenance, message: str, durations: dict) -> Result:
        return Result(task_id=task.id, verdict=Verdict.ERROR, provenance=provenance, durations=durations,
                      explanation="The grading machinery failed; this attempt is not charged and can be retried.",
                      error=message)

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
        if isinstance(check, TestsCheck) and check.runner == "pytest":
            hidden = sorted(p for p, d in prepared.hidden_manifest().items()
                            if d is not None and p.endswith(".py") and p.rsplit("/", 1)[-1] not in NOT_TEST_FILES)
            named = {tid.split("::", 1)[0] for tid in check.fail_to_pass + check.pass_to_pass}
            paths = check.paths or sorted(set(hidden) | named)
            if not paths:
                raise GraderError(f"task {task.id}: a pytest check needs paths or hidden test files")
            check_job = {"kind": "pytest", "args": [*check.pytest_args, *paths]}
        elif isinstance(check, TestsCheck):
            check_job = {"kind": "command", "command": check.command, "junit": check.junit}
        elif isinstance(check, OutputCheck):
            check_job = {"kind": "output", "command": check.command}
        else:
            check_job = {"kind": "exact_match", "paths": check.compared_paths()}
        job = {
            "repo": REPO_DIR,
            "patch": PATCH_PATH,
            "touched": sorted(info.touched()),
            "hidden_dir": HIDDEN_DIR,
            "uid": UID,
            "gid": UID,
            "deadline": max(0.5, task.limits.timeout - _margin(task.limits.timeout)),
            "output_limit": self.settings.output_limit_bytes,
            "report_limit": self.settings.report_limit_bytes,
            "apply_chain": APPLY_CHAIN,
            "runner_files": RUNNER_FILES,
            "runner_suffixes": RUNNER_SUFFIXES,
            "check": check_job,
            "env": CONTAINER_ENV,
            "nproc_limit": task.limits.pids if self.sandbox.private_kernel else None,
        }
        supervisor = _supervisor_source()
        return RunSpec(
            image=image_id,
            command=["python3", "-I", f"{RUN_DIR}/supervisor.py"],
            files={"run/job.json": json.dumps(job).encode(), "run/supervisor.py": supervisor, "run/submission.patch": patch},
            files_root=GRADER_DIR,
            env=CONTAINER_ENV,
            workdir=REPO_DIR,
            limits=Limits(memory=task.limits.memory, cpus=task.limits.cpus, pids=task.limits.pids),
            timeout=task.limits.timeout,
            labels={"grader.task": task.id},
        )

    def _decide(self, task: Task, prepared: PreparedTask, out: RunOutput, provenance: Provenance,
                localization: Localization | None, durations: dict) -> Result:
        provenance.runtime = out.runtime
        base = dict(task_id=task.id, provenance=provenance, localization=localization, durations=durations)
        limit = task.limits.timeout
        if out.timed_out:
            return Result(**base, verdict=Verdict.TIMED_OUT,
                          explanation=f"The run passed its {limit:g} s wall-clock limit and was killed.")
        try:
            sup = json.loads(out.stdout.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            if out.oom_killed:
                return Result(**base, verdict=Verdict.FAIL,
                              explanation=f"The run exceeded its {task.limits.memory} memory limit and was killed.")
            raise SandboxError(f"the supervisor produced no result (exit {out.exit_code}): "
                               f"{out.stderr.decode(errors='replace')[-2000:]}") from None
        if sup.get("error"):
            raise SandboxError(f"the supervisor failed: {sup['error']}")
        for stage in ("apply", "place_tests", "check"):
            if stage in sup.get("durations", {}):
                durations[stage] = sup["durations"][stage]
        apply = sup.get("apply") or {}
        apply_log = ApplyLog(
            method=apply.get("method"),
            attempts=[ApplyAttempt(**a) for a in apply.get("attempts", [])],
            neutralized=sup.get("neutralized", []),
            restored=sup.get("restored", []),
        )
        base["apply"] = apply_log
        base["output"] = sup.get("output", "")
        if sup.get("timed_out"):
            return Result(**base, verdict=Verdict.TIMED_OUT,
                          explanation=f"The run passed its {limit:g} s wall-clock limit and was stopped.")
        if not sup.get("applied"):
            tried = ", ".join(a.method for a in apply_log.attempts)
            return Result(**base, verdict=Verdict.PATCH_FAILED,
                          explanation=f"The patch does not apply at the base commit (tried {tried}).")
        outcome = self._check(task, prepared, sup)
        if outcome.passed and apply_log.neutralized:
            outcome.explanation += f" ({len(apply_log.neutralized)} runner file(s) from the patch were reverted)"
        return Result(**base, verdict=Verdict.PASS if outcome.passed else Verdict.FAIL,
                      explanation=outcome.explanation + ".",
                      tests=outcome.tests, check={"type": task.check.type, **outcome.details})

    @staticmethod
    def _check(task: Task, prepared: PreparedTask, sup: dict) -> CheckOutcome:
        check = task.check
        if isinstance(check, TestsCheck):
            return evaluate_tests(junit=sup.get("junit"), exit_code=sup.get("exit_code"),
                                  fail_to_pass=check.fail_to_pass, pass_to_pass=check.pass_to_pass,
                                  runner=check.runner, tampered=sup.get("tampered", []))
        if isinstance(check, OutputCheck):
            return evaluate_output(base64.b64decode(sup.get("stdout", "")), sup.get("stdout_complete", False),
                                   task.read(check.expected), threshold=check.threshold, normalize=check.normalize,
                                   exit_code=sup.get("exit_code"))
        assert isinstance(check, ExactMatchCheck)
        files = {rel: (base64.b64decode(v) if v is not None else None) for rel, v in sup.get("files", {}).items()}
        return evaluate_exact_match(files, prepared.expected_files(), check.normalize)
