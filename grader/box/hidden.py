"""The hidden tests: put in place root-owned and read-only, their directories locked for
the run, and checked afterwards (bytes, owner, inode and change time)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from typing import Any

from .order import Order
from .tree import Tree, rel_ok


def canary_files(canaries: dict[str, Any] | None) -> dict[str, str]:
    """The files the canaries were written to, with their digests: a module of their own,
    or the hidden test modules they were cloned into."""
    if not canaries:
        return {}
    if "expect" in canaries and "path" in canaries:
        return {canaries["path"]: canaries["digest"]}
    files: dict[str, str] = canaries.get("files") or {}
    return dict(files)


def hidden_manifest(order: Order) -> dict[str, Any]:
    path = os.path.join(order.hidden_dir, "manifest.json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        manifest: dict[str, Any] = json.load(f)
        return manifest


def restore_hidden(order: Order, tree: Tree, manifest: dict[str, Any]) -> list[str]:
    for rel, digest in sorted(manifest.items()):
        if not rel_ok(rel):
            raise ValueError(f"hidden test path {rel!r} is unsafe")
        if digest is None:  # the test patch deletes this file
            tree.remove(rel)
            continue
        with open(os.path.join(order.hidden_dir, "files", rel), "rb") as f:
            data = f.read()
        tree.write(rel, data, mode=0o444, owner=(0, 0))
    return sorted(manifest)


# Descriptors of the files placed for the run, held open until the supervisor exits.
_PINNED: list[int] = []


def pin(tree: Tree, paths: list[str]) -> None:
    """Hold the placed files open. Under gVisor a file's dentry that falls out of the
    sentry's cache (a Go build opens thousands of GOROOT files, jest's haste map walks the
    whole of node_modules/) is looked up again from the host, whose change time for a file
    the sandbox wrote can be later than the one the sentry kept: the check that the hidden
    tests were not moved aside and back (`moved`) would then see a new change time on an
    untouched file. An open descriptor keeps the dentry, and its times, in the cache
    (measured under Go: the file held kept its times, its unheld neighbour did not). Every
    runner's placed files are pinned, whatever its toolchain opens."""
    for rel in paths:
        fd = tree._parent(rel, create=False)
        if fd is None:
            continue
        try:
            _PINNED.append(os.open(rel.rsplit("/", 1)[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd))
        except OSError:
            pass
        finally:
            os.close(fd)


def placed_identity(
    tree: Tree, manifest: dict[str, Any], canaries: dict[str, Any] | None
) -> dict[str, tuple[Any, ...]]:
    """The change time of each root-owned file placed for the run: a file moved aside and
    back while the tests ran keeps its bytes but not its change time (a rename sets it to
    now, and no call sets it back). Not its inode number: gVisor may number a file anew when
    it looks it up again (after jest's scan of the whole repository, say), and then report
    the host's change time, a little earlier than the one it kept: only a later one counts.
    The files are pinned first (`pin`), so that gVisor keeps the times it has."""
    paths = [rel for rel, digest in manifest.items() if digest is not None]
    paths += [p for p in canary_files(canaries) if p not in paths]
    pin(tree, paths)
    out = {}
    for rel in paths:
        st = tree.lstat(rel)
        if st is not None:
            out[rel] = (st.st_ctime_ns,)
    return out


def moved(tree: Tree, identity: dict[str, tuple[Any, ...]]) -> list[str]:
    bad = []
    for rel, (ctime,) in sorted(identity.items()):
        st = tree.lstat(rel)
        if st is None or st.st_ctime_ns > ctime:  # gVisor may report an earlier stamp on a new lookup
            bad.append(rel)
    return bad


def lock_test_dirs(order: Order, tree: Tree, manifest: dict[str, Any], canaries: dict[str, Any] | None) -> None:
    """The directories holding the hidden tests and the canaries (up to, not including,
    the repository's root) become root's, 0755, for the run: nothing can be renamed,
    swapped or added beside the tests while pytest collects them, and a directory that is
    not the user's cannot itself be moved (its '..' entry is not theirs to rewrite)."""
    paths = [rel for rel, digest in manifest.items() if digest is not None and rel.endswith(".py")]
    paths += list(canary_files(canaries))
    dirs = set()
    for rel in paths:
        parts = rel.split("/")[:-1]
        dirs |= {"/".join(parts[:i]) for i in range(1, len(parts) + 1)}
    for rel in sorted(dirs, key=lambda d: d.count("/"), reverse=True):
        fd = tree._parent(rel + "/x", create=False)
        if fd is None:
            continue
        try:
            os.fchown(fd, 0, 0)
            os.fchmod(fd, 0o755)
        finally:
            os.close(fd)


def tampered(tree: Tree, expected: dict[str, str | None]) -> list[str]:
    """Root-owned files that must be exactly as placed after the run (the hidden tests,
    the canaries): the ones that are not."""
    bad = []
    for rel, digest in sorted(expected.items()):
        st = tree.lstat(rel)
        if st is None:
            if digest is not None:
                bad.append(rel)
            continue
        if digest is None or not stat.S_ISREG(st.st_mode) or st.st_uid != 0:
            bad.append(rel)
            continue
        data = tree.read(rel)
        if data is None or hashlib.sha256(data).hexdigest() != digest:
            bad.append(rel)
    return bad
