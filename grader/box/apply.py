"""The apply chain: each attempt run as the unprivileged user with the patch on stdin, a
failed attempt undone from a snapshot of the paths the patch names (and the index). A
series of commits (git am) is undone with `git am --abort` first, which puts HEAD back."""

from __future__ import annotations

import os
import stat
from typing import Any

from .order import Order
from .proc import remaining, run_as_user, text
from .tree import Tree, rel_ok


def snapshot(tree: Tree, paths: list[str]) -> dict[str, Any]:
    """The base state of the paths a patch names: enough to undo a failed attempt."""
    snap: dict[str, Any] = {}
    for rel in paths:
        st = tree.lstat(rel)
        if st is None:
            snap[rel] = None
        elif stat.S_ISLNK(st.st_mode):
            fd = tree._parent(rel, create=False)
            assert fd is not None  # lstat has just found it: its directories are there
            try:
                snap[rel] = ("link", os.readlink(rel.rsplit("/", 1)[-1], dir_fd=fd), st)
            finally:
                os.close(fd)
        elif stat.S_ISREG(st.st_mode):
            snap[rel] = ("file", tree.read(rel), st)
        else:
            snap[rel] = ("other", None, st)
    return snap


def restore_snapshot(tree: Tree, snap: dict[str, Any]) -> None:
    for rel, saved in snap.items():
        for suffix in (".rej", ".orig"):
            tree.remove(rel + suffix)
        if saved is None:
            tree.remove(rel)
            continue
        kind, data, st = saved
        if kind == "link":
            tree.symlink(rel, data, owner=(st.st_uid, st.st_gid))
        elif kind == "file":
            tree.write(rel, data, mode=stat.S_IMODE(st.st_mode), owner=(st.st_uid, st.st_gid))


def apply_patch(order: Order, tree: Tree, result: dict[str, Any]) -> bool:
    with open(order.patch, "rb") as f:
        if not f.read().strip():
            result["apply"] = {"method": "empty", "attempts": []}
            return True
    touched = [p for p in order.touched if rel_ok(p)]
    snap = snapshot(tree, touched)
    index = os.path.join(order.repo, ".git", "index")
    with open(index, "rb") as f:
        index_data = f.read()
    attempts = []
    for method, argv in order.apply_chain:
        # the patch reaches the user's process on stdin: no copy of it is left where a test could read it
        run = run_as_user(
            order, argv, timeout=max(1.0, remaining(order)), stdout_limit=order.output_limit, stdin_path=order.patch
        )
        attempts.append(
            {
                "method": method,
                "command": " ".join(argv),
                "exit_code": run["exit_code"],
                "output": text(run["out"].data()),
            }
        )
        if run["exit_code"] == 0:
            result["apply"] = {"method": method, "attempts": attempts}
            return True
        if order.series:
            run_as_user(order, ["git", "am", "--abort"], timeout=max(1.0, remaining(order)), stdout_limit=4096)
        restore_snapshot(tree, snap)
        tree.write(".git/index", index_data, mode=0o644, owner=(order.uid, order.gid))
        if run["timed_out"]:
            result["timed_out"] = True
            break
    result["apply"] = {"method": None, "attempts": attempts}
    return False
