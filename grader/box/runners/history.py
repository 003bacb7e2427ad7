"""A history check: nothing of the submission runs; git, as the unprivileged user, reads
back the commits the series (git am) made on top of the base, their messages and their
diffs, and the last commit's tree, for the host to judge (grader/checks/history.py).

Git reads only what the base's .git holds and the commits: a series cannot change
.git/ (patch.py refuses the path), so no hook, filter, diff driver or textconv of the
submission's choosing runs; --no-ext-diff and --no-textconv say so again."""

from __future__ import annotations

import os
import subprocess
from typing import Any

from ..order import CheckSpec, Order
from ..proc import remaining, run_as_user, text
from ..tree import Tree
from .common import PYTHON_PROTECT, python_env

PROTECT = PYTHON_PROTECT
# How every commit's diff is taken, here and from the reference on the host (tasks/prepare.py)
DIFF_ARGS = ["-U0", "--no-renames", "--no-color", "--no-ext-diff", "--no-textconv"]
MAX_COMMITS = 500
# one commit of the log: NUL, its sha and parents, its message, NUL, then its diff
LOG_FORMAT = "--format=%x00%H %P%n%B%x00"


def plan(check: dict[str, Any], hidden: dict[str, str | None]) -> CheckSpec:
    return CheckSpec(kind="history", command=check.get("each_commit"))


def _git(order: Order, *args: str, limit: int = 4096) -> tuple[int | None, str, bool]:
    run = run_as_user(
        order, ["git", *args], timeout=max(1.0, remaining(order)), stdout_limit=limit, separate_stderr=True
    )
    return run["exit_code"], text(run["out"].data()), run["out"].complete()


def before_patch(order: Order, tree: Tree) -> None:
    """The base: HEAD before the series, read before anything of the submission is there
    (unless the host gives it: an earlier grade of the same image read it)."""
    if order.check.base_config is not None:
        return
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
    if order.check.command and history["complete"]:
        history["each_commit"] = each_commit(order, tree, base, history["shas"])


def _blobs(order: Order, ids: list[str], limit: int) -> dict[str, bytes] | None:
    """The contents of `ids` (git cat-file --batch, as the user), or None past `limit` bytes."""
    proc = subprocess.run(
        ["git", "cat-file", "--batch"],
        cwd=order.repo,
        input="".join(i + "\n" for i in ids).encode(),
        capture_output=True,
        user=order.uid,
        group=order.gid,
        extra_groups=[],
        env={**os.environ, **order.env},
        start_new_session=True,
        timeout=max(1.0, remaining(order)),
    )
    if len(proc.stdout) > limit:
        return None
    out, data, at = {}, proc.stdout, 0
    for blob in ids:
        end = data.index(b"\n", at)
        name, kind, size = data[at:end].decode().split()
        if name != blob or kind != "blob":
            raise RuntimeError(f"git cat-file gave {name} {kind} for {blob}")
        out[blob] = data[end + 1 : end + 1 + int(size)]
        at = end + 2 + int(size)
    return out


def each_commit(order: Order, tree: Tree, base: str, shas: list[str]) -> dict[str, Any]:
    """Run the task's command at every commit of the series, in order: the exit status of
    each. Every commit's version of the files the series changes is read with git first,
    before any of the submission's code runs, and written into the working tree by the
    supervisor (never by a git the submission's code could have reconfigured since). A path
    whose working-tree copy is not HEAD's (a protected path put back, a hidden test) keeps
    that copy at every commit."""
    code, names, _ = _git(order, "diff", "--name-only", "-z", "--no-renames", base, "HEAD", limit=order.report_limit)
    if code != 0:
        return {"problem": "git diff failed"}
    changed = sorted({n for n in names.split("\0") if n})
    states: list[dict[str, tuple[str, str]]] = []  # per commit: path -> (mode, blob) of a regular file
    for sha in shas:
        listing = ""
        if changed:  # (ls-tree with no path after -- would list every file)
            code, listing, _ = _git(order, "ls-tree", "-r", "-z", sha, "--", *changed, limit=order.report_limit)
        state = {}
        for entry in listing.split("\0"):
            meta, _, path = entry.partition("\t")
            mode, kind, blob = (meta.split() + ["", "", ""])[:3]
            if path and kind == "blob" and mode in ("100644", "100755"):
                state[path] = (mode, blob)
        states.append(state)
    ids = sorted({blob for state in states for _, blob in state.values()})
    blobs = _blobs(order, ids, order.report_limit) if ids else {}
    if blobs is None:
        return {"problem": "the series' files are larger than the grader reads back"}
    final = states[-1]
    kept = {p for p in changed if tree.read(p) != (blobs[final[p][1]] if p in final else None)}
    runs = []
    for n, state in enumerate(states):
        for path in changed:
            if path in kept:
                continue
            if path in state:
                perms = 0o755 if state[path][0] == "100755" else 0o644
                tree.write(path, blobs[state[path][1]], mode=perms, owner=(order.uid, order.gid))
            else:
                tree.remove(path)
        left = remaining(order)
        run = run_as_user(
            order,
            ["sh", "-c", order.check.command or "true"],
            timeout=max(0.5, left / (len(states) - n)),
            stdout_limit=4096,
            env=python_env(order),
        )
        runs.append({"exit_code": run["exit_code"], "timed_out": run["timed_out"]})
        if run["timed_out"] and remaining(order) <= 0.5:
            break
    return {"runs": runs}
