"""What the submission may not change: which paths are protected and why, the base copies
they go back to, and what the patch really changed (read from the file tree, never from
the diff's headers)."""

from __future__ import annotations

import fnmatch
import os
import re
import sys
from typing import Any

from .order import ProtectSpec
from .paths import STAGE_DIR
from .tree import Tree, shown

NATIVE = re.compile(r"\.(so|pyd|dylib)(\.\d+)*$")


def is_bytecode(rel: str) -> bool:
    """Compiled code: Python bytecode, or a native extension module. A patch may not
    bring either: neither can be read for what it does, and either runs in the tests."""
    return rel.endswith((".pyc", ".pyo")) or "__pycache__" in rel.split("/") or bool(NATIVE.search(rel))


class Protection:
    """Which paths are restored to the base after the patch, and why."""

    def __init__(
        self,
        spec: ProtectSpec,
        base: dict[str, tuple[Any, ...]],
        *,
        roots: tuple[str, ...] = ("",),
        shadowed: frozenset[str] = frozenset(),
    ):
        self.roots = roots
        self.shadowed = shadowed
        # modules the repository has itself where it is on sys.path: its own, even when
        # they share a name with one of the environment's (packaging's own packaging/)
        self.own = {
            (root, self._top(rel[len(root) :]))
            for root in roots
            for rel in base
            if rel.startswith(root) and self._top(rel[len(root) :])
        }
        self.files = set(spec.files)
        self.names = set(spec.names)
        self.suffixes = tuple(spec.suffixes)
        self.prefixes = tuple(spec.prefixes)
        self.dir_suffixes = tuple(spec.dir_suffixes)
        self.globs = list(spec.globs)
        self.tests = bool(spec.tests)
        self.test_modules = list(spec.test_modules)
        dir_names = set(spec.test_dir_names)
        # A test directory is one named like one (tests/, test/, testing/) that holds a
        # test module or a conftest.py itself at the base: sympy/core/tests/ is, a library
        # package such as django/test/ or numpy/testing/ is not.
        self.test_dirs: set[str] = set()
        candidates = [rel for rel, sig in base.items() if sig[0] == "f"] + sorted(self.files)
        for rel in candidates:
            parts = rel.split("/")
            if (
                len(parts) > 1
                and parts[-2] in dir_names
                and (self._test_module(parts[-1]) or rel in self.files or parts[-1] == "conftest.py")
            ):
                self.test_dirs.add("/".join(parts[:-1]))

    def _test_module(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pat) for pat in self.test_modules)

    @staticmethod
    def _top(rel: str) -> str | None:
        """The top-level module a path under a sys.path directory defines, if any."""
        first = rel.split("/", 1)[0]
        if "/" in rel:
            return first if first.isidentifier() else None
        name = first.split(".", 1)[0]
        return name if name.isidentifier() and first.endswith((".py", ".pyc", ".so", ".pyd")) else None

    def shadows(self, rel: str) -> bool:
        """A module new to the repository, where the repository is on sys.path, with the
        name of one of the interpreter's or the environment's (json.py, hmac.py, pytest/):
        it would be imported in their place, by the runner itself."""
        for root in self.roots:
            if rel.startswith(root):
                top = self._top(rel[len(root) :])
                if top in self.shadowed and (root, top) not in self.own:
                    return True
        return False

    def why(self, rel: str) -> str | None:
        parts = rel.split("/")
        name = parts[-1]
        if rel in self.files:
            return "hidden or listed test"
        if name in self.names or name.endswith(self.suffixes) or name.startswith(self.prefixes):
            return "loaded by the runner or the interpreter"
        if any(p.endswith(self.dir_suffixes) for p in parts):
            return "packaging metadata"
        if self.shadows(rel):
            return "shadows a module of the interpreter or the environment"
        if self.tests:
            if self._test_module(name):
                return "test module"
            if rel in self.test_dirs or any("/".join(parts[:i]) in self.test_dirs for i in range(1, len(parts))):
                return "in a test directory"
        if any(fnmatch.fnmatchcase(rel, g) for g in self.globs):
            return "protected by the task"
        return None


def import_roots(repo: str) -> tuple[tuple[str, ...], frozenset[str]]:
    """Where the repository is on the test process's sys.path (its root, as `python -m`
    puts it there, and what the environment's .pth files add, such as src/), and the
    module names of the interpreter and the environment that a file there would shadow.
    This supervisor runs on the environment's interpreter, so its sys.path is theirs."""
    roots = [""]
    names = set(getattr(sys, "stdlib_module_names", ())) | set(sys.builtin_module_names)
    for entry in sys.path:
        if entry.startswith(repo + "/"):
            roots.append(entry[len(repo) + 1 :].rstrip("/") + "/")
            continue
        if not entry or not os.path.isdir(entry) or entry.startswith(repo):
            continue
        for name in os.listdir(entry):
            top = Protection._top(name if not os.path.isdir(os.path.join(entry, name)) else name + "/x")
            if top:
                names.add(top)
    return tuple(roots), frozenset(names)


def stage(tree: Tree, base: dict[str, tuple[Any, ...]], protection: Protection, touched: list[str]) -> dict[str, str]:
    """Copy the protected files of the base that the patch names to a root-only directory:
    the contents a changed protected file goes back to (ignored files such as *.egg-info
    included). Only those: the apply chain may change no file its headers do not name
    (unnamed_changes refuses the patch), so no other protected file can need restoring
    before the tests run, and a whole protected node_modules/ is not copied for every
    grade (11 s of a jest grade under gVisor). A changed protected file with no staged
    copy is removed (restore_protected), never kept."""
    os.makedirs(STAGE_DIR, 0o700, exist_ok=True)
    staged = {}
    for i, rel in enumerate(sorted(set(touched) & set(base))):
        if base[rel][0] != "f" or protection.why(rel) is None:
            continue
        data = tree.read(rel)
        if data is None:
            continue
        dst = os.path.join(STAGE_DIR, str(i))
        with open(dst, "wb") as f:
            f.write(data)
        staged[rel] = dst
    return staged


def changes(before: dict[str, tuple[Any, ...]], after: dict[str, tuple[Any, ...]]) -> list[str]:
    return sorted(rel for rel in set(before) | set(after) if before.get(rel) != after.get(rel))


def unnamed_changes(changed: list[str], before: dict[str, Any], after: dict[str, Any], touched: set[str]) -> list[str]:
    """Files the apply chain wrote that the diff's headers do not name."""

    def kind(tree: dict[str, Any], rel: str) -> str | None:
        sig = tree.get(rel)
        return sig[0] if sig else None

    return [
        rel
        for rel in changed
        if not (kind(before, rel) in (None, "d") and kind(after, rel) in (None, "d")) and rel not in touched
    ]


def restore_protected(
    owner: tuple[int, int],
    tree: Tree,
    before: dict[str, Any],
    after: dict[str, Any],
    changed: list[str],
    protection: Protection,
    staged: dict[str, str],
) -> tuple[list[str], list[str]]:
    """Remove bytecode the patch brought; put every protected path it changed back."""
    bytecode, restored = [], []
    for rel in changed:
        if is_bytecode(rel) and rel in after and after[rel][0] != "d":
            tree.remove(rel)
            bytecode.append(shown(rel))
    for rel in changed:
        if protection.why(rel) is None:
            continue
        base = before.get(rel)
        if base is None:
            tree.remove(rel)
        elif base[0] == "d":
            tree.mkdir(rel)  # a directory of the base: its protected files are restored one by one
            continue
        elif base[0] == "l":
            tree.symlink(rel, base[1], owner=owner)
        elif base[0] == "f" and rel in staged:
            with open(staged[rel], "rb") as f:
                tree.write(rel, f.read(), mode=base[1], owner=owner)
        else:
            tree.remove(rel)
        restored.append(shown(rel))
    return bytecode, restored
