"""grade(task, patch) -> Result: the run of one grade, through the harness's steps.

validate the patch (unidiff) -> PATCH FAILED on a refusal
find / build the instance image (images.py)
the container's order (grading/spec.py, the runner's plan)
one container run: the supervisor applies, restores, runs (grader/box/)
the decision (grading/decide.py): PASS, FAIL, PATCH FAILED, TIMED OUT
any fault of the machinery on the way -> ERROR (never FAIL, never charged)
"""

from __future__ import annotations

import json
import logging
import time
import traceback
from collections.abc import Callable
from typing import Any

from grader.audit import audit_patch
from grader.config import Settings, get_settings
from grader.errors import GraderError, ImageUnverified
from grader.grading import ship
from grader.grading.decide import Expected, decide
from grader.grading.spec import container_shape, container_spec, order_for
from grader.images import Images
from grader.metrics import file_localization
from grader.patch import PatchInfo, inspect_patch, touched_files
from grader.sandbox import ContainerSpec, Sandbox, sandbox_for_runtime
from grader.tasks.model import BisectCheck, ExactMatchCheck, HistoryCheck, OutputCheck, Task
from grader.tasks.prepare import PreparedTask
from grader.verdict import Localization, Provenance, Result, Verdict
from grader.version import GRADER_VERSION

log = logging.getLogger(__name__)
# How long a grader keeps its answer to "which instance image grades this task": an image
# id names its content, so an image verified by hash stays verified; a tag moved since
# (an import, a rebuild) is seen within this, and a grade that fails (the image removed)
# forgets the answer. Saves the engine two inspects a grade (the environment's image and
# the instance's: 20 to 400 ms on a loaded host). Long enough for a worker to see a suite
# of a hundred tasks come round again.
IMAGE_TTL = 300.0
# What a runner read of the repository's configuration at the base (jest's and vitest's
# readings start the runner: 0.6 s a grade under runc, 1.7 s under gVisor) is the same for
# every grade of one image: kept for this many images, each up to BASE_CONFIG_BYTES.
BASE_CONFIGS = 64
BASE_CONFIG_BYTES = 1 << 20


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
        # environments whose instance image this grader refused since asked last (take_unverified)
        self._unverified: dict[str, str] = {}
        # (task id, task hash) -> (until, image id, prepared task): instance_image's recent answers
        self._images: dict[tuple[str, str], tuple[float, str, PreparedTask]] = {}
        # (task id, task hash, image id) -> the base's configuration an earlier grade read
        self._base_configs: dict[tuple[str, str, str], dict[str, Any]] = {}
        # the supervisor's archive, with the bytecode of an image's interpreter once known
        self._archives = ship.shared()

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
                network_lanes=s.network_lanes,
                **({"fork": s.pool_fork, "keepers": s.pool_keepers} if self.runtime == "pool" else {}),
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
            task_hash = provenance.task_hash = task.definition_hash()
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
            image_id, prepared = self._instance_image(task, task_hash)
            provenance.image_id = image_id
            durations["image"] = time.monotonic() - t
            earlier = lookup(provenance) if lookup is not None else None
            if earlier is not None:
                return earlier
            audit = audit_patch(patch, task.metadata.language)
            expected = self._expected(task, prepared)
            try:
                order = order_for(
                    task,
                    prepared.hidden_manifest(),
                    info,
                    output_limit=self.settings.output_limit_bytes,
                    report_limit=self.settings.report_limit_bytes,
                    private_kernel=self.sandbox.private_kernel,
                )
            except ValueError as exc:
                raise GraderError(str(exc)) from None
            read_at_base = (task.id, task_hash, image_id)
            order.check.base_config = self._base_configs.get(read_at_base)
            order.bytecode_held = self._archives.held()
            env_image = self.images.env_of.get(image_id)
            archive = self._archives.for_image(image_id, env_image)
            t = time.monotonic()
            out = self.sandbox.run(container_spec(task, order, image_id, patch, archive))
            durations["container"] = time.monotonic() - t
            durations.update({f"container_{k}": v for k, v in out.durations.items()})
            result = decide(
                task,
                out,
                provenance=provenance,
                localization=localization,
                durations=durations,
                audit=audit,
                audit_mode=self.settings.audit,
                expected=expected,
            )
            if result.verdict is not Verdict.ERROR:
                self._remember(read_at_base, out.stdout, config=order.check.base_config is None, env_image=env_image)
                learnt = self._archives.for_image(image_id, env_image)
                if learnt is not archive:
                    # its bytecode learnt: the container started after this run holds the
                    # archive without it, so one with it is started for the next
                    self.sandbox.prewarm(container_shape(task, image_id, learnt))
        except GraderError as exc:
            log.warning("grading %s failed in the machinery: %s", task.id, exc)
            self._images.pop((task.id, provenance.task_hash or ""), None)
            if isinstance(exc, ImageUnverified):
                self._unverified[exc.environment] = str(exc)
            result = self._error(task, provenance, str(exc), durations)
        except Exception as exc:  # a bug of ours is still not the submitter's fault
            log.exception("unexpected failure grading %s", task.id)
            self._images.pop((task.id, provenance.task_hash or ""), None)
            result = self._error(task, provenance, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}", durations)
        return self._finish(result, started)

    def prewarm(self, task: Task) -> bool:
        """Have a container of `task`'s runs started ahead of its grade, unless one is idle
        already (a run takes it, as it takes the one its previous run's refill started); never
        builds an image. True if one is being started."""
        image_id, _ = self._instance_image(task, task.definition_hash(), build=False)
        shape = self._shape(task, image_id)
        if self.sandbox.is_warm(shape):
            return False
        self.sandbox.prewarm(shape)
        return True

    def is_warm(self, task: Task) -> bool:
        """Whether a container (or keeper) of `task`'s runs is idle here or being started, by
        what this grader already knows: no engine call, no sandbox made (a worker asks it of
        each job it may take next: jobs.take_warm)."""
        if self._sandbox is None:
            return False
        now = time.monotonic()
        # by the task's id, not its definition's hash (which reads every file it references):
        # a hint for the order of work, never for what grades it
        images = {hit[1] for (tid, _), hit in list(self._images.items()) if tid == task.id and hit[0] > now}
        return any(self._sandbox.is_warm(self._shape(task, image_id)) for image_id in images)

    def _shape(self, task: Task, image_id: str) -> ContainerSpec:
        """The container a run of `task` in `image_id` takes, with the box archive it would get."""
        return container_shape(task, image_id, self._archives.for_image(image_id, self.images.env_of.get(image_id)))

    def _instance_image(self, task: Task, task_hash: str, *, build: bool = True) -> tuple[str, PreparedTask]:
        """images.instance_image, or its answer for this task within the last IMAGE_TTL seconds."""
        key, now = (task.id, task_hash), time.monotonic()
        hit = self._images.get(key)
        if hit is not None and hit[0] > now:
            return hit[1], hit[2]
        image_id, prepared = self.images.instance_image(
            task, build=build and self.settings.build_missing_images, task_hash=task_hash
        )
        self._images[key] = (now + IMAGE_TTL, image_id, prepared)
        return image_id, prepared

    def _remember(self, key: tuple[str, str, str], stdout: bytes, *, config: bool, env_image: str | None) -> None:
        """Keep what a run reported for the next runs of its image (`key`: task, hash, image),
        each taken by the supervisor before the patch was applied, on the stdout no process
        of the submission reaches: the interpreter it ran and the bytecode it compiled, while
        the image's interpreter is unknown (ship.Archives); with `config`, what it read of the
        base's configuration (its report's `base_config`)."""
        config = config and b'"base_config"' in stdout
        if not config and self._archives.knows(key[2]):
            return
        try:
            report = json.loads(stdout)
        except ValueError:
            return
        if not isinstance(report, dict):
            return
        self._archives.learn(key[2], report, env_image)
        read = report.get("base_config")
        if not config or not isinstance(read, dict) or len(json.dumps(read)) > BASE_CONFIG_BYTES:
            return
        while len(self._base_configs) >= BASE_CONFIGS:
            self._base_configs.pop(next(iter(self._base_configs)))
        self._base_configs[key] = read

    def take_unverified(self) -> dict[str, str]:
        """Environment -> why, for each whose instance image a grade here refused since the
        last call (the worker tells its host to take none of its grades for a while)."""
        out, self._unverified = self._unverified, {}
        return out

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

    @staticmethod
    def _expected(task: Task, prepared: PreparedTask) -> Expected:
        check = task.check
        if isinstance(check, OutputCheck):
            return Expected(output=task.read(check.expected))
        if isinstance(check, ExactMatchCheck):
            return Expected(files=prepared.expected_files())
        if isinstance(check, HistoryCheck | BisectCheck):
            return Expected(history=prepared.history())
        return Expected()
