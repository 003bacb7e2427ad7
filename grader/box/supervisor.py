"""The in-container half of a grading run: the supervisor. Standard library only,
Python 3.9+.

The host copies this package (as one archive, paths.ARCHIVE) and the order (paths.ORDER_PATH,
a order.Order) into a fresh container and starts it as PID 1, as root with the few
capabilities of SUPERVISOR_CAPS (grader/sandbox/docker/containers.py says why each) under
no-new-privileges. It never executes submitted code itself, and it trusts nothing the
submission could have touched:

1. records the repository's file tree (every entry, ignored files included) and copies
   the protected files aside, in a root-only directory (protect.py);
2. applies the patch as the unprivileged user with a fixed chain (git apply, git apply
   --3way, patch --fuzz), undoing each failed attempt (apply.py);
3. reads what the patch really changed from the tree (never from the diff's headers: a
   patch that wrote other paths than its headers name is refused), removes bytecode it
   brought, restores every protected path it changed (test files, conftest.py, *.pth,
   *.dist-info, ...) to the base, then puts the hidden tests in place, root-owned and
   read-only (hidden.py);
4. runs the check as the unprivileged user (no capabilities, new session) through the
   runner its `kind` names (runners/): for pytest, entry-point plugins off, the base
   commit's configuration, no bytecode from the repository, hidden canary tests beside
   the hidden tests (canaries.py), and the report coming back through an inherited pipe
   from a plugin that signs every record with this run's secret (channel.py);
5. kills every process left behind, checks the hidden tests are intact and prints one
   JSON document on stdout, which nothing else in the container can reach.

Every path it reads, writes or removes in the repository is opened component by
component from a directory descriptor, never following a symbolic link (tree.py). What
the submission did, including leaving a tree the supervisor cannot put right, is
reported as data; only a fault of the supervisor itself is reported as "error".
"""

from __future__ import annotations

import errno
import json
import os
import resource
import sys
import time
import traceback
import types
from typing import Any

from . import bytecode, own_archive, proc
from .apply import apply_patch
from .hidden import canary_files, hidden_manifest, lock_test_dirs, moved, placed_identity, restore_hidden, tampered
from .order import Order
from .paths import ORDER_PATH
from .proc import kill_everything_else
from .protect import Protection, changes, import_roots, restore_protected, stage, unnamed_changes
from .runners import runner
from .tree import Tree, TreeError, shown

# What a file tree the submission shaped can make a file operation fail with. Running out
# of descriptors or memory, or a process limit, stays a fault of ours.
TREE_ERRNOS = {
    errno.ENOENT,
    errno.ENOTDIR,
    errno.EISDIR,
    errno.ELOOP,
    errno.ENAMETOOLONG,
    errno.EEXIST,
    errno.ENOTEMPTY,
    errno.ENOSPC,
    errno.EDQUOT,
    errno.EMLINK,
    errno.EFBIG,
    errno.EACCES,
    errno.EPERM,
    errno.ENXIO,
    errno.EINVAL,
    errno.EROFS,
    errno.ETXTBSY,
    errno.EBUSY,
}


# Whether this module was imported before the run's order arrived: by a container that
# waited for it with the supervisor loaded (grader/sandbox/docker/containers.py's BOOT).
PRELOADED = not os.path.exists(ORDER_PATH)


def cpu_seconds() -> float:
    """CPU seconds of this process since the container started (exec keeps them: the idle
    loop's too) and of every process it has waited for."""
    mine, theirs = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime + theirs.ru_utime + theirs.ru_stime


class Stage:
    """Names the step a TreeError (or an OSError the tree caused) came from: during the
    apply it is the patch's failure to apply, after it the submission's verdict, not ours."""

    def __init__(self, result: dict[str, Any], name: str):
        self.result, self.name = result, name

    def __enter__(self) -> Stage:
        self.t, self.cpu = time.monotonic(), cpu_seconds()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: types.TracebackType | None
    ) -> bool:
        self.result["durations"][self.name] = round(time.monotonic() - self.t, 4)
        self.result["durations"]["cpu_" + self.name] = round(cpu_seconds() - self.cpu, 4)
        if isinstance(exc, TreeError) or (isinstance(exc, OSError) and exc.errno in TREE_ERRNOS):
            self.result["tree_error"] = {"stage": self.name, "message": f"{type(exc).__name__}: {exc}"}
            return True
        return False


def main() -> int:
    proc.begin()
    result: dict[str, Any] = {"durations": {}}
    try:
        with open(ORDER_PATH) as f:
            order = Order.from_json(f.read())
        if order.nproc_limit:
            # Inherited by every child; counted per user, so it binds the unprivileged
            # user's processes only (root, which this is, is exempt). Set only where the
            # kernel is the sandbox's own: on a shared kernel the count is host-wide.
            resource.setrlimit(resource.RLIMIT_NPROC, (order.nproc_limit, order.nproc_limit))
        tree = Tree(order.repo, order.uid, order.gid)
        manifest = hidden_manifest(order)
        t, cpu = time.monotonic(), cpu_seconds()
        result["durations"]["cpu_boot"] = round(cpu, 4)  # the idle loop, the interpreter, this package's import
        result["bytecode"] = {"magic": bytecode.MAGIC, "loaded": bytecode.loaded()}
        result["preloaded"] = PRELOADED
        archive = own_archive()
        if archive and bytecode.MAGIC not in order.bytecode_held:
            # before any submitted code ran, on the stdout nothing else reaches: the host
            # ships it to the next runs on this interpreter (bytecode.py)
            result["compiled"] = bytecode.compile_archive(archive)
            result["durations"]["compile"] = round(time.monotonic() - t, 4)
            result["durations"]["cpu_compile"] = round(cpu_seconds() - cpu, 4)
            t, cpu = time.monotonic(), cpu_seconds()
        check = runner(order.check.kind)
        given = order.check.base_config is not None
        if hasattr(check, "before_patch"):
            check.before_patch(order, tree)
        if not given and order.check.base_config is not None:
            # read at the base before any submitted code ran, on the stdout nothing else
            # reaches: the host gives it to the next grade of the same image (jest's and
            # vitest's readings start the runner, seconds under gVisor)
            result["base_config"] = order.check.base_config
        before = tree.walk()
        roots, shadowed = import_roots(order.repo)
        protection = Protection(order.protect, before, roots=roots, shadowed=shadowed)
        # the task's own test code, trusted by the report plugin's watch: restored to the base
        order.check.trusted_tests = sorted(
            protection.files
            | {rel for rel in before if rel.endswith("conftest.py")}
            | {d + "/" for d in protection.test_dirs}
        )
        staged = stage(tree, before, protection, order.touched)
        result["durations"]["snapshot"] = round(time.monotonic() - t, 4)
        result["durations"]["cpu_snapshot"] = round(cpu_seconds() - cpu, 4)

        applied = False
        with Stage(result, "apply"):
            applied = apply_patch(order, tree, result)
        if applied and "tree_error" not in result:
            with Stage(result, "place_tests"):
                after = tree.walk()
                changed = changes(before, after)
                stray = unnamed_changes(changed, before, after, set(order.touched))
                if stray:
                    applied = False
                    listed = ", ".join(shown(r) for r in stray[:5]) + (" ..." if len(stray) > 5 else "")
                    result["apply_refused"] = f"it wrote files its headers do not name: {listed}"
                else:
                    result["bytecode_removed"], result["protected_restored"] = restore_protected(
                        (order.uid, order.gid), tree, before, after, changed, protection, staged
                    )
                    result["restored"] = restore_hidden(order, tree, manifest)
                    # the submission's own code, to which the report plugin attributes reflection
                    order.check.submitted = [rel for rel in changed if rel in after and rel.endswith(".py")]
        result["applied"] = applied
        if applied and "tree_error" not in result and not result.get("timed_out"):
            canaries = None
            with Stage(result, "check"):
                if hasattr(check, "make_canaries"):
                    canaries = check.make_canaries(order, tree)
                identity = placed_identity(tree, manifest, canaries)
                lock_test_dirs(order, tree, manifest, canaries)
                check.run(order, tree, result, canaries)
            kill_everything_else()
            if "tree_error" not in result:
                with Stage(result, "verify"):
                    expected = {**manifest, **canary_files(canaries)}
                    result["tampered_files"] = tampered(tree, expected) + moved(tree, identity)
            if canaries is not None:
                result["canaries"] = {
                    k: v for k, v in canaries.items() if k in ("expect", "got", "skipped", "got_pairs", "got_copies")
                }
                if "pairs" in canaries:
                    copies = len(canaries.get("copies", {}))
                    result["canaries"]["clones"] = len(canaries["pairs"]) - copies
                    result["canaries"]["copies"] = copies
    except Exception:
        result["error"] = traceback.format_exc()
    result["durations"]["supervisor"] = round(time.monotonic() - proc.START, 4)
    result["durations"]["cpu"] = round(cpu_seconds(), 4)  # what the run cost inside, in CPU seconds
    sys.stdout.write(json.dumps(result))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
