"""Canaries: a hidden test module of this run only, beside the hidden tests, holding tests
that must fail and tests that must pass, named like the task's own tests and borrowing
their imports."""

from __future__ import annotations

import hashlib
import random
import re
import secrets
from typing import Any

from .order import CheckSpec
from .tree import Tree

# pytest options that would stop the run early or deselect by name: with them the canaries
# could not all run, so none are added (the result says so).
CANARY_BLOCKERS = (
    "-x",
    "--exitfirst",
    "--maxfail",
    "-k",
    "-m",
    "--deselect",
    "--lf",
    "--last-failed",
    "--sw",
    "--stepwise",
    "--ff",
)


def _canary_body(rng: random.Random, must_pass: bool) -> str:
    """One test body in a shape tasks' tests have; its assertion holds iff must_pass."""
    shape = rng.randrange(5)
    if shape == 0:
        xs = [rng.randint(-50, 99) for _ in range(rng.randint(3, 6))]
        want = sum(xs) if must_pass else sum(xs) + rng.choice([-2, -1, 1, 3])
        return f"    total = sum({xs!r})\n    assert total == {want}\n"
    if shape == 1:
        word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 8)))
        k = rng.randint(2, 9)
        want = len(word) * k if must_pass else len(word) * k + 1
        return f"    text = {word!r} * {k}\n    assert len(text) == {want}\n"
    if shape == 2:
        seed = secrets.token_hex(6)
        digest = hashlib.sha256(seed.encode()).hexdigest()[:10]
        if not must_pass:
            digest = digest[:-1] + ("0" if digest[-1] != "0" else "1")
        return f"    digest = hashlib.sha256({seed!r}.encode()).hexdigest()\n    assert digest[:10] == {digest!r}\n"
    if shape == 3:
        xs = rng.sample(range(100), rng.randint(4, 7))
        i = rng.randrange(len(xs))
        want = sorted(xs)[i] if must_pass else sorted(xs)[i] + 1
        return f"    items = sorted({xs!r})\n    assert items[{i}] == {want}\n"
    a, b = rng.randint(1, 50), rng.randint(1, 50)
    exc = "ZeroDivisionError" if must_pass else rng.choice(["ValueError", "KeyError", "TypeError"])
    return f"    with pytest.raises({exc}):\n        ({a} + {b}) / 0\n"


def blocks_canaries(arg: str) -> bool:
    if any(arg == b or arg.startswith(b + "=") for b in CANARY_BLOCKERS):
        return True
    # short options run together (-xvs, -kname): any x, k or m among them
    return arg.startswith("-") and not arg.startswith("--") and any(c in arg[1:] for c in "xkm")


def make_canaries(check: CheckSpec, tree: Tree) -> dict[str, Any] | None:
    """A test module of this run only, beside the hidden tests, with tests that must fail
    and tests that must pass. Returns what the report must say of each, or None."""
    if not check.canaries:
        return None
    if check.args is not None:
        args = check.args
    else:  # a command's words, less the interpreter's own "-m pytest"
        words = (check.command or "").split()
        args = [w for i, w in enumerate(words) if not (w == "-m" and words[i + 1 : i + 2] == ["pytest"])]
    for arg in args:
        if blocks_canaries(arg):
            return {"skipped": f"the task's pytest option {arg} could stop the run early or deselect them"}
    rng = random.SystemRandom()
    words = [w for w in check.canary_words if re.fullmatch(r"[a-z][a-z0-9]{1,15}", w)]
    words = sorted(
        set(words)
        | {
            "value",
            "values",
            "empty",
            "result",
            "basic",
            "single",
            "order",
            "default",
            "missing",
            "mixed",
            "simple",
            "large",
            "small",
            "edge",
            "round",
            "split",
            "case",
        }
    )
    folder = check.canary_dir or ""
    while True:
        module = "test_" + "_".join(rng.sample(words, 2)) + ".py"
        rel = f"{folder}/{module}" if folder else module
        if tree.lstat(rel) is None:
            break
    expect: dict[str, str] = {}
    names: set[str] = set()
    kinds = [True] * rng.randint(2, 3) + [False] * rng.randint(2, 3)
    rng.shuffle(kinds)
    source = "import hashlib\n\nimport pytest\n"
    for must_pass in kinds:
        while True:
            name = "test_" + "_".join(rng.sample(words, rng.randint(1, 3)))
            if name not in names:
                break
        names.add(name)
        source += f"\n\ndef {name}():\n" + _canary_body(rng, must_pass)
        expect[f"{rel}::{name}"] = "passed" if must_pass else "failed"
    source = source.replace(
        "import hashlib\n\nimport pytest\n", "import hashlib\n\nimport pytest\n" + borrowed_imports(check, tree), 1
    )
    data = source.encode()
    tree.write(rel, data, mode=0o444, owner=(0, 0))
    return {"path": rel, "digest": hashlib.sha256(data).hexdigest(), "expect": expect}


def borrowed_imports(check: CheckSpec, tree: Tree) -> str:
    """The hidden tests' own module-level imports, so the canaries import the code under
    test as the tests do and cannot be told apart by what they touch. An import that
    fails breaks the canaries with the tests that need it: the run fails either way."""
    import ast

    lines: list[str] = []
    for rel in check.canary_sources:
        data = tree.read(rel)
        if data is None:
            continue
        try:
            body = ast.parse(data).body
        except (SyntaxError, ValueError):
            continue
        for node in body:
            if isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom) and not node.level):
                line = ast.unparse(node) if hasattr(ast, "unparse") else None
                if line and "__future__" not in line and line not in lines:
                    lines.append(line)
    return "".join(f"{line}  # noqa\n" for line in lines[:40])
