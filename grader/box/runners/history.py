"""A history check: nothing of the submission runs; git, as the unprivileged user, reads
back the commits the series (git am) made on top of the base, their messages and their
diffs, and the last commit's tree, for the host to judge (grader/checks/history.py).

Git reads only what the base's .git holds and the commits: a series cannot change
.git/ (patch.py refuses the path), so no hook, filter, diff driver or textconv of the
submission's choosing runs; --no-ext-diff and --no-textconv say so again."""

from __future__ import annotations

from typing import Any

from ..order import CheckSpec, Order
from ..proc import remaining, run_as_user, text
from ..tree import Tree
from .common import PYTHON_PROTECT

PROTECT = PYTHON_PROTECT
# How every commit's diff is taken, here and from the reference on the host (tasks/prepare.py)
DIFF_ARGS = ["-U0", "--no-renames", "--no-color", "--no-ext-diff", "--no-textconv"]
MAX_COMMITS = 500
# one commit of the log: NUL, its sha and parents, its message, NUL, then its diff
LOG_FORMAT = "--format=%x00%H %P%n%B%x00"


def plan(check: dict[str, Any], hidden: dict[str, str | None]) -> CheckSpec:
    return CheckSpec(kind="history")


def _git(order: Order, *args: str, limit: int = 4096) -> tuple[int | None, str, bool]:
    run = run_as_user(
        order, ["git", *args], timeout=max(1.0, remaining(order)), stdout_limit=limit, separate_stderr=True
    )
    return run["exit_code"], text(run["out"].data()), run["out"].complete()


def before_patch(order: Order, tree: Tree) -> None:
    """The base: HEAD before the series, read before anything of the submission is there."""
    code, out, _ = _git(order, "rev-parse", "--verify", "HEAD")
    if code != 0:
        raise RuntimeError(f"git rev-parse HEAD failed at the base: {out.strip()}")
    order.check.base_config = {"base": out.strip()}


def run(order: Order, tree: Tree, result: dict[str, Any], canaries: dict[str, Any] | None) -> None:
    assert order.check.base_config is not None  # before_patch set it
    base = order.check.base_config["base"]
    limit = order.report_limit
    history: dict[str, Any] = {"complete": True}
    result["history"] = history
    listed = ["rev-list", "--reverse", "--topo-order", f"--max-count={MAX_COMMITS + 1}", f"{base}..HEAD"]
    code, shas, _ = _git(order, *listed, limit=64 * (MAX_COMMITS + 2))
    if code != 0:
        history["problem"] = "git rev-list failed"
        return
    history["shas"] = shas.split()
    if len(history["shas"]) > MAX_COMMITS:
        history["complete"] = False
        return
    code, tree_id, _ = _git(order, "rev-parse", "HEAD^{tree}")
    history["tree"] = tree_id.strip() if code == 0 else ""
    code, listing, complete = _git(order, "ls-tree", "-r", "-z", "--full-tree", "HEAD", limit=limit)
    history["ls_tree"] = listing if code == 0 else ""
    history["complete"] = history["complete"] and complete
    logged = ["log", "--reverse", "--topo-order", "-p", *DIFF_ARGS, LOG_FORMAT, f"{base}..HEAD"]
    code, log, complete = _git(order, *logged, limit=limit)
    if code != 0:
        history["problem"] = "git log failed"
        return
    history["log"] = log
    history["complete"] = history["complete"] and complete
