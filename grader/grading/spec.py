"""The spec step: a task, its prepared files and a vetted patch in; the container's order
(grader.box.order.Order) and the sandbox's ContainerSpec out. Pure: nothing here runs, reads a
repository or talks to Docker, so every rule is tested without them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from grader.box import paths
from grader.box.order import Order, ProtectSpec
from grader.box.runners import RUNNERS, runner
from grader.box.runners.common import test_file
from grader.patch import PatchInfo
from grader.sandbox import ContainerSpec, Limits
from grader.tasks.model import Task, TestsCheck

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

# A series of commits (git format-patch output, patch.is_series): git am keeps every commit,
# its author and its message (data: nothing in a message is run); an empty commit is kept,
# for the history check to see. Each failed attempt is undone with `git am --abort` first.
AM_CHAIN = [
    ("git am", ["git", "am", "--empty=keep"]),
    ("git am --3way", ["git", "am", "--empty=keep", "--3way"]),
]


def runner_name(task: Task) -> str:
    """The runner a task's check runs with: a tests check names its own, the other check
    kinds are runners of their own name."""
    check = task.check
    return check.runner if isinstance(check, TestsCheck) else check.type


def _files_named(listed: list[str]) -> list[str]:
    return [test_file(tid) for tid in listed]


def margin(timeout: float) -> float:
    """Time the supervisor keeps back to report before the hard kill from outside."""
    return min(2.0, max(0.3, timeout * 0.05))


def order_for(
    task: Task,
    hidden: dict[str, str | None],
    info: PatchInfo,
    *,
    output_limit: int,
    report_limit: int,
    private_kernel: bool,
) -> Order:
    """The container's order for grading `info`'s patch on `task`, whose hidden files are
    `hidden` (repository path -> sha256, None for a file the test patch deletes)."""
    check: dict[str, Any] = task.check.model_dump(mode="json")
    module = runner(runner_name(task))
    try:
        check_job = module.plan(check, hidden)
    except ValueError as exc:
        raise ValueError(f"task {task.id}: {exc}") from None
    listed = []
    if isinstance(task.check, TestsCheck):
        listed = task.check.fail_to_pass + task.check.pass_to_pass
    rules: dict[str, list[str]] = module.PROTECT
    protect = ProtectSpec(
        # a runner whose ids name no file (go's TestX) says which files its ids name
        files=sorted(set(hidden) | set(getattr(module, "listed_files", _files_named)(listed))),
        names=list(rules["names"]),
        suffixes=list(rules["suffixes"]),
        prefixes=list(rules["prefixes"]),
        dir_suffixes=list(rules["dir_suffixes"]),
        tests=task.protect.tests,
        test_modules=list(rules["test_modules"]),
        test_dir_names=list(rules["test_dir_names"]),
        globs=task.protect.paths,
    )
    return Order(
        repo=paths.REPO_DIR,
        patch=paths.PATCH_PATH,
        touched=sorted(info.touched()),
        hidden_dir=paths.HIDDEN_DIR,
        uid=paths.UID,
        gid=paths.UID,
        deadline=max(0.5, task.limits.timeout - margin(task.limits.timeout)),
        output_limit=output_limit,
        report_limit=report_limit,
        apply_chain=[(method, list(argv)) for method, argv in (AM_CHAIN if info.series else APPLY_CHAIN)],
        series=info.series,
        protect=protect,
        pycache=paths.PYCACHE,
        check=check_job,
        env=CONTAINER_ENV,
        nproc_limit=task.limits.pids if private_kernel else None,
    )


def container_shape(task: Task, image_id: str, archive: bytes) -> ContainerSpec:
    """A run of `task` on `image_id` without its own files: all a container is fixed to
    when it is created, so a sandbox can start one for the task's runs before any run asks.
    The supervisor's archive is the shape's (the same for every run on the image), and its
    modules, with the runner of the task's check, can be imported while it waits."""
    box = paths.PACKAGE
    return ContainerSpec(
        image=image_id,
        command=["python3", "-I", paths.ARCHIVE],
        files_root=paths.GRADER_DIR,
        env=CONTAINER_ENV,
        workdir=paths.REPO_DIR,
        limits=Limits(memory=task.limits.memory, cpus=task.limits.cpus, pids=task.limits.pids),
        timeout=task.limits.timeout,
        labels={"grader.task": task.id},
        early_files={paths.ARCHIVE.removeprefix(paths.GRADER_DIR + "/"): archive},
        preload=(f"{box}.supervisor", f"{box}.runners.{RUNNERS[runner_name(task)]}"),
    )


def container_spec(task: Task, order: Order, image_id: str, patch: bytes, archive: bytes) -> ContainerSpec:
    """One container run of the supervisor (the archive) on `order`."""
    root = paths.GRADER_DIR + "/"
    files = {
        paths.ORDER_PATH.removeprefix(root): order.to_json().encode(),
        paths.PATCH_PATH.removeprefix(root): patch,
    }
    return replace(container_shape(task, image_id, archive), files=files)
