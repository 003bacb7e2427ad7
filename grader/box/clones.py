"""Canaries inside the hidden test modules: clones of the task's own tests whose check is
turned around, placed among the tests in an order drawn per run, with every test of the
module renamed per run (the mapping stays with the supervisor, outside the test process).

A clone is a copy of a hidden test (its decorators, fixtures, parameters and body) in
which one top-level statement that must hold for the test to pass is turned into one
that cannot hold whenever the original held: `assert f(x) == 3` becomes `assert f(x) == 5`
(another constant), `assert a == b` becomes `assert not (a == b)` (never `a != b`: a
class's `__ne__` may disagree with its `__eq__`), `is` / `is not`, `in` / `not in`,
`assert x` / `assert not x`, `pytest.raises(ValueError)` / `pytest.raises(KeyError)`,
`self.assertEqual(a, 3)` / `self.assertEqual(a, 5)`, `self.assertEqual(a, b)` /
`self.assertFalse((a) == (b))`, `assertTrue` / `assertFalse`... Nothing before that statement can return, so when the
original passed the clone reached the same statement with the same values, and failed.
Hence the rule the host applies, per parameter set: **the original passed and its clone
passed** is impossible for honest code, and is tampering (an always-equal object, a
flipped report). When the original fails (at the base, for a FAIL_TO_PASS test) nothing
is said of its clone.

What the test process can see of them is what it sees of any hidden test: a function
of the hidden module, named like the others (every test of the module gets a name drawn
for this run, so the public FAIL_TO_PASS ids name nothing in the process), at a place
drawn for this run, with the same imports, fixtures, decorators and body. Only the one
changed statement differs, and which of two near twins is the original is not written
anywhere in the container.

Standard library only (the supervisor's side)."""

from __future__ import annotations

import ast
import functools
import hashlib
import io
import keyword
import random
import re
import tokenize
from typing import Any

from .order import CheckSpec
from .tree import Tree

# An unrelated builtin exception for a clone of `pytest.raises(X)`: none of them is a
# subclass of another in this list.
SWAP_EXCEPTIONS = ("ValueError", "TypeError", "KeyError", "IndexError", "ZeroDivisionError", "AttributeError")
BUILTIN_EXCEPTIONS = {
    "ValueError",
    "TypeError",
    "KeyError",
    "IndexError",
    "ZeroDivisionError",
    "AttributeError",
    "RuntimeError",
    "NotImplementedError",
    "AssertionError",
    "OverflowError",
    "UnicodeDecodeError",
    "UnicodeEncodeError",
    "FileNotFoundError",
    "LookupError",
    "ArithmeticError",
    "OSError",
    "StopIteration",
}
# Operators whose opposite is exactly `not` of them, whatever the operands: identity, and
# membership (`x not in y` is `not (x in y)`). `==`, `!=` and the orderings are not: a
# class may define `__eq__` and inherit another `__ne__` (bytecode's Bytecode, a list whose
# `__eq__` compares structure while list's `!=` compares labels by identity: `b1 == b2` and
# `b1 != b2` both hold), or order partially. Their twins are `not (...)` of the comparison.
FLIPPED_OPS = {
    ast.Is: "is not",
    ast.IsNot: "is",
    ast.In: "not in",
    ast.NotIn: "in",
}
FLIPPED_METHODS = {  # the same for unittest's methods: each is exactly `not` of the other
    "assertTrue": "assertFalse",
    "assertFalse": "assertTrue",
    "assertIsNone": "assertIsNotNone",
    "assertIsNotNone": "assertIsNone",
    "assertIn": "assertNotIn",
    "assertNotIn": "assertIn",
    "assertIs": "assertIsNot",
    "assertIsNot": "assertIs",
}
# assertEqual(a, b) passes exactly when `a == b` holds (unittest compares with `==`, or for
# two objects of one builtin type with that type's own consistent comparison), and
# assertNotEqual(a, b) exactly when `a != b` does: their twins are assertFalse of that.
COMPARED_METHODS = {"assertEqual": "==", "assertEquals": "==", "assertNotEqual": "!=", "assertNotEquals": "!="}
# Clones per module: each FAIL_TO_PASS test of the module first (several each: an aimed
# flip has to tell the original among its twins), then others drawn at random.
CLONES_PER_TARGET = 3
# Exact copies of each FAIL_TO_PASS test, under names drawn like the rest: a copy must end
# as its original does. A flip of one test by place (the first failure of each module)
# lands on the original a quarter of the time among its three twins; its copies, not
# flipped, then fail beside it. To escape, a flip has to reach the original and every
# copy and no twin: telling copies (identical) from twins (one check turned) takes the
# right answer, as telling the original does.
COPIES_PER_TARGET = 2
MAX_CLONES = 8
MAX_RUNS = 4  # a twin of a test parametrized over more sets than this is not made
DEFAULT_WORDS = (
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
    "parse",
    "format",
    "invalid",
    "valid",
    "many",
    "none",
    "nested",
)


class Unclonable(ValueError):
    pass


Span = tuple[int, int, int, int]  # (line, column, end line, end column) of a node's text


def _span(node: ast.expr | ast.stmt) -> Span:
    end_line = node.end_lineno if node.end_lineno is not None else node.lineno
    end_col = node.end_col_offset if node.end_col_offset is not None else node.col_offset
    return node.lineno, node.col_offset, end_line, end_col


def _segment(lines: list[str], node: ast.expr | ast.stmt) -> Span:
    return _span(node)


def _constant_swap(node: ast.Constant, rng: random.Random) -> str | None:
    v = node.value
    if isinstance(v, bool) or v is None or v is Ellipsis:
        return None
    if isinstance(v, int):
        return repr(v + rng.choice([-3, -2, -1, 1, 2, 3, 7]))
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return None
        return repr(v + rng.choice([-1.5, 0.5, 1.0, 2.25]))
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 "
    if isinstance(v, str):
        extra = rng.choice(alphabet)
        if v and rng.random() < 0.5:
            i = rng.randrange(len(v))
            changed = v[:i] + extra + v[i + 1 :]
            if changed != v:
                return repr(changed)
        return repr(v + extra)
    if isinstance(v, bytes):
        extra_b = rng.choice(alphabet).encode()
        if v and rng.random() < 0.5:
            i = rng.randrange(len(v))
            changed_b = v[:i] + extra_b + v[i + 1 :]
            if changed_b != v:
                return repr(changed_b)
        return repr(v + extra_b)
    return None


def _no_exit_before(body: list[ast.stmt], index: int) -> bool:
    """Nothing before statement `index` of a test's body can leave the test early."""
    for stmt in body[:index]:
        for sub in _walk_same_scope(stmt):
            if isinstance(sub, (ast.Return, ast.Yield, ast.YieldFrom, ast.Break, ast.Continue, ast.Try)):
                return False
            if type(sub).__name__ == "TryStar":  # try/except* (Python 3.11+)
                return False
    return True


def _walk_same_scope(node: ast.AST) -> list[ast.AST]:
    out: list[ast.AST] = []
    stack = [node]
    while stack:
        n = stack.pop()
        out.append(n)
        for child in ast.iter_child_nodes(n):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                stack.append(child)
    return out


def _turn(stmt: ast.stmt, rng: random.Random) -> list[tuple[tuple[int, int, int, int], str]]:
    """The edits (span -> text) that turn one top-level statement of a test around, or
    [] when it has no sound opposite."""
    if isinstance(stmt, ast.Assert):
        test = stmt.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            op, right, left = test.ops[0], test.comparators[0], test.left
            if isinstance(op, ast.Eq):
                for side in (right, left):
                    if isinstance(side, ast.Constant) and (swapped := _constant_swap(side, rng)) is not None:
                        return [(_segment([], side), swapped)]
            flipped = FLIPPED_OPS.get(type(op))
            if flipped is not None:
                # the operator sits between the two operands' spans
                return [((left.end_lineno, left.end_col_offset, right.lineno, right.col_offset), f" {flipped} ")]  # type: ignore[list-item]
            return _negate(test)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return [((test.lineno, test.col_offset, test.operand.lineno, test.operand.col_offset), "")]
        if not isinstance(test, (ast.Constant, ast.Tuple)):
            return _negate(test)
        return []
    if isinstance(stmt, ast.With) and len(stmt.items) == 1:
        call = stmt.items[0].context_expr
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "raises"
            and call.args
            and isinstance(call.args[0], ast.Name)
            and call.args[0].id in BUILTIN_EXCEPTIONS
        ):
            choices = [e for e in SWAP_EXCEPTIONS if e != call.args[0].id and not _related(e, call.args[0].id)]
            return [(_segment([], call.args[0]), rng.choice(choices))]
        return []
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        func = call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            if func.attr in ("assertEqual", "assertEquals") and len(call.args) >= 2:
                for arg in call.args[:2]:
                    if isinstance(arg, ast.Constant) and (swapped := _constant_swap(arg, rng)) is not None:
                        return [(_segment([], arg), swapped)]
            _, _, end_line, end_col = _span(func)
            name_span = (end_line, end_col - len(func.attr), end_line, end_col)
            compared = COMPARED_METHODS.get(func.attr)
            if compared is not None and len(call.args) >= 2 and not any(isinstance(a, ast.Starred) for a in call.args):
                first, second = call.args[0], call.args[1]
                a_line, a_col, a_end_line, a_end_col = _span(first)
                b_line, b_col, b_end_line, b_end_col = _span(second)
                return [
                    (name_span, "assertFalse"),
                    ((a_line, a_col, a_line, a_col), "("),
                    ((a_end_line, a_end_col, b_line, b_col), f") {compared} ("),
                    ((b_end_line, b_end_col, b_end_line, b_end_col), ")"),
                ]
            flipped_name = FLIPPED_METHODS.get(func.attr)
            if flipped_name is not None:
                return [(name_span, flipped_name)]
    return []


def _negate(test: ast.expr) -> list[tuple[Span, str]]:
    line, col, end_line, end_col = _span(test)
    return [((line, col, line, col), "not ("), ((end_line, end_col, end_line, end_col), ")")]


def _related(a: str, b: str) -> bool:
    import builtins

    x, y = getattr(builtins, a, None), getattr(builtins, b, None)
    return not (isinstance(x, type) and isinstance(y, type)) or issubclass(x, y) or issubclass(y, x)


def _edit(lines: list[str], edits: list[tuple[tuple[int, int, int, int], str]]) -> list[str]:
    """Apply span edits (1-based lines, 0-based UTF-8 byte columns as ast gives them)."""
    data = [ln.encode() for ln in lines]
    for (l1, c1, l2, c2), text in sorted(edits, key=lambda e: (e[0][0], e[0][1]), reverse=True):
        if l1 == l2:
            row = data[l1 - 1]
            data[l1 - 1] = row[:c1] + text.encode() + row[c2:]
        else:
            head, tail = data[l1 - 1][:c1], data[l2 - 1][c2:]
            data[l1 - 1 : l2] = [head + text.encode() + tail]
    return [d.decode() for d in data]


def _tests_in(module: ast.Module) -> list[tuple[ast.FunctionDef, ast.ClassDef | None]]:
    out: list[tuple[ast.FunctionDef, ast.ClassDef | None]] = []
    for node in module.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            out.append((node, None))
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef) and sub.name.startswith("test"):
                    out.append((sub, node))
    return out


def _names_in(expr_nodes: list[ast.AST]) -> set[str]:
    return {n.id for e in expr_nodes for n in ast.walk(e) if isinstance(n, ast.Name)}


def _bound_by(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _slots(body: list[ast.stmt], needs: set[str]) -> list[int]:
    """The places (after statement i) a clone may go in `body`: after every name its
    decorators and defaults need is bound, and after the last import."""
    first = 0
    for i, stmt in enumerate(body):
        if isinstance(stmt, (ast.Import, ast.ImportFrom)) or _bound_by(stmt) & needs:
            first = i + 1
        if isinstance(stmt, ast.Expr) and i == 0 and isinstance(getattr(stmt, "value", None), ast.Constant):
            first = max(first, 1)  # after the docstring
    return list(range(max(first, 1), len(body) + 1)) or [len(body)]


def make_clone_canaries(check: CheckSpec, tree: Tree) -> dict[str, Any] | None:
    """Rewrite the hidden test modules in place (root-owned, read-only) with clones and
    names drawn for this run. Returns what the supervisor must keep: the new digests, the
    names to map back, and which clone pairs with which original.

    A test's name is a method of its class and of every class that inherits from it, in
    whatever module (cachetools keeps its shared tests in a mixin in tests/__init__.py;
    a base class may sit in another hidden module). So the names are drawn for the run,
    not per module: one old name gets one new name in every hidden module (an override in
    a subclass still overrides); a name any other Python file of the repository uses keeps
    its name (a subclass there may override it, a mixin there may hold it); and no drawn
    name is a name any file of the repository uses (it would hide that test)."""
    rng = random.SystemRandom()
    files: dict[str, str] = {}
    renamed: dict[str, dict[str, str]] = {}
    pairs: dict[str, str] = {}
    copies: dict[str, str] = {}
    targets = {t.split("[", 1)[0] for t in check.canary_targets}
    words = sorted({w for w in check.canary_words if re.fullmatch(r"[a-z][a-z0-9]{1,15}", w)} | set(DEFAULT_WORDS))
    budget = MAX_CLONES
    parsed: list[tuple[str, str, ast.Module]] = []
    for rel in check.canary_modules:
        data = tree.read(rel)
        if data is None:
            continue
        try:
            # newlines as Python reads a source file (\r\n and \r are \n): the lines, the
            # syntax tree and the tokens are then numbered alike
            source = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
            module = ast.parse(source)
        except (SyntaxError, ValueError, UnicodeDecodeError):
            continue
        if _name_tokens(source) is not None:
            parsed.append((rel, source, module))
    # the submission's files are not read: a name it mentions must not keep a test's name
    # (the listed ids would then name tests in the process, without twins), nor could a
    # file of every name it can guess leave no name to draw; a class of the hidden tests
    # overrides whatever a base class of the submission's defines
    taken, outside = names_in_tree(tree, {rel for rel, _, _ in parsed}, set(check.submitted))
    rename, inheritable = _draw_names(parsed, outside, taken, rng, words)
    clone_names: dict[str, str] = {}  # a twin's name -> its original's, where it may be inherited
    twin_names: list[str] = []
    back = {v: k for k, v in rename.items()}
    for rel, source, module in parsed:
        out = _rewrite(rel, source, module, rng, words, targets, budget, taken, rename)
        if out is None:
            continue
        text, names, clone_pairs, clone_copies = out
        budget -= len(clone_pairs)
        encoded = text.encode()
        tree.write(rel, encoded, mode=0o444, owner=(0, 0))
        files[rel] = hashlib.sha256(encoded).hexdigest()
        renamed[rel] = names
        pairs.update(clone_pairs)
        pairs.update(clone_copies)  # mapped back, folded and stripped as twins are; judged apart
        copies.update(clone_copies)
        for clone, original in {**clone_pairs, **clone_copies}.items():
            clone_name, original_name = clone.rsplit("::", 1)[1], original.rsplit("::", 1)[1]
            twin_names.append(clone_name)
            if back.get(original_name) in inheritable:
                clone_names[clone_name] = original_name
    if not files:
        return None
    return {
        "files": files,
        "renamed": renamed,
        "pairs": pairs,
        "copies": copies,
        "clone_names": clone_names,
        "twin_names": sorted(twin_names),
    }


def _draw_names(
    parsed: list[tuple[str, str, ast.Module]], outside: set[str], taken: set[str], rng: random.Random, words: list[str]
) -> tuple[dict[str, str], set[str]]:
    """One new name per old test name for the whole run, and the old names defined once
    in all the hidden modules (a twin of such a test pairs with its original in whatever
    class inherits both; one defined twice may be overridden, so its twins pair only
    where they were placed)."""
    keep = set(outside)
    defined: dict[str, int] = {}
    for _, source, module in parsed:
        tokens = _name_tokens(source) or ()
        keep |= {t for t, _, after_dot in tokens if after_dot}
        strings = _strings(module)
        for fn, _ in _tests_in(module):
            defined[fn.name] = defined.get(fn.name, 0) + 1
            if fn.name in strings:
                keep.add(fn.name)
    names = sorted(defined)
    pool = sorted(set(words) | {w for n in names for w in n.lower().split("_") if w and w != "test" and w.isalpha()})
    olds = [n for n in names if n not in keep]

    def draw() -> str:
        tries = 0
        while True:
            tries += 1
            picked = rng.sample(pool, min(len(pool), rng.randint(1, 3)))
            name = "test_" + "_".join(picked)
            if rng.random() < 0.3 or tries > 1000:
                name += str(rng.randint(1, 9) if tries <= 1000 else rng.randrange(10**9))
            if name not in taken and not keyword.iskeyword(name):
                taken.add(name)
                return name

    # New names keep the old names' alphabetical order: unittest runs a TestCase's methods
    # in that order, and suites rely on it (a first test that sets up what later ones use);
    # an original's new name never carries all the words of its old one
    rename: dict[str, str] = {}
    for attempt in range(20):
        fresh = sorted(draw() for _ in olds)
        if all(not _covers(old, new) for old, new in zip(olds, fresh)) or attempt == 19:  # noqa: B905 - the box runs on Python 3.9 (no strict=); equal lengths by construction
            rename = dict(zip(olds, fresh))  # noqa: B905
            break
        taken.difference_update(fresh)
    return rename, {n for n in olds if defined[n] == 1}


TEST_NAME = re.compile(rb"\btest\w*")
MAX_SCANNED = 64 << 20  # bytes of Python read for the names in use; past that, the hidden modules' own


def names_in_tree(tree: Tree, rewritten: set[str], skipped: set[str]) -> tuple[set[str], set[str]]:
    """Every identifier starting with `test` in the repository's Python files, and those
    of the files other than the `rewritten` ones and the `skipped` ones (the files the
    submission touched): what a drawn name must not be, and the names that must stay.

    The submission's files are read last, with what the scan's budget has left, and only
    for names not to draw: a name they mention keeps no test's name (the listed ids would
    then name tests in the process), but no drawn name may be one of theirs either. A
    test file the patch changed is the base's again by now (protected, restored): drawing
    its test's name for a hidden test made the ids of both one, and the visible test was
    "not run" (gold-fix-plus-a-benign-visible-test-edit, 1 run in 4)."""
    every: set[str] = set()
    outside: set[str] = set()
    budget = MAX_SCANNED
    files = sorted(tree.walk().items(), key=lambda item: (item[0] in skipped, item[0]))
    for rel, entry in files:
        if entry[0] != "f" or not rel.endswith((".py", ".pyi")) or budget <= 0:
            continue
        data = tree.read(rel, limit=min(budget, 8 << 20))
        if data is None:
            continue
        budget -= len(data)
        found = {m.decode("ascii", "replace") for m in TEST_NAME.findall(data)}
        every |= found
        if rel not in rewritten and rel not in skipped:
            outside |= found
    return every, outside


def _rewrite(
    rel: str,
    source: str,
    module: ast.Module,
    rng: random.Random,
    words: list[str],
    targets: set[str],
    budget: int,
    taken: set[str] | None = None,
    fixed: dict[str, str] | None = None,
) -> tuple[str, dict[str, str], dict[str, str], dict[str, str]] | None:
    """One module rewritten: its tests renamed (by `fixed`, the run's names, when given),
    its twins and copies placed: (text, new name -> old, twin -> original, copy ->
    original). `taken` holds the names in use elsewhere (the repository's, the names
    drawn for the run): a drawn name is none of them, and is added to it."""
    taken = set() if taken is None else taken
    lines = _lines(source)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    tests = _tests_in(module)
    if not tests:
        return None
    tokens = _name_tokens(source)
    if tokens is None:
        return None
    used = {t for t, _, _ in tokens}
    dotted = {t for t, _, after_dot in tokens if after_dot}
    strings = _strings(module)
    names_here = sorted({fn.name for fn, _ in tests})
    words = sorted(
        set(words) | {w for n in names_here for w in n.lower().split("_") if w and w != "test" and w.isalpha()}
    )

    def draw(old: str = "") -> str:
        own = {w for w in old.lower().split("_") if w and w != "test"}
        tries = 0
        while True:
            tries += 1
            picked = rng.sample(words, min(len(words), rng.randint(1, 3)))
            name = "test_" + "_".join(picked)
            if rng.random() < 0.3 or tries > 1000:
                name += str(rng.randint(1, 9) if tries <= 1000 else rng.randrange(10**9))
            # an original's new name never carries all the words of its old one
            if (
                name not in used
                and name not in taken
                and not keyword.iskeyword(name)
                and not (own and own <= set(picked))
            ):
                used.add(name)
                taken.add(name)
                return name

    # New names keep the old names' alphabetical order: unittest runs a TestCase's methods
    # in that order, and suites rely on it (a first test that sets up what later ones use)
    olds = sorted(n for n in names_here if n not in dotted and n not in strings)
    rename: dict[str, str] = {}
    if fixed is not None:
        rename = {old: fixed[old] for old in names_here if old in fixed}
        olds = []
    for _ in range(20 if olds else 0):
        fresh = sorted(draw() for _ in olds)
        if all(not _covers(old, new) for old, new in zip(olds, fresh)) or _ == 19:  # noqa: B905 - the box runs on Python 3.9 (no strict=); equal lengths by construction
            rename = dict(zip(olds, fresh))  # noqa: B905
            break
        used.difference_update(fresh)
        taken.difference_update(fresh)

    # the clones: FAIL_TO_PASS tests of this module first, then others
    def key_of(fn: ast.FunctionDef, cls: ast.ClassDef | None) -> str:
        return f"{rel}::{cls.name}::{fn.name}" if cls else f"{rel}::{fn.name}"

    def runs(t: tuple[ast.FunctionDef, ast.ClassDef | None]) -> int:
        """How many runs a twin of this test costs: parametrized ones cost one per set."""
        return 1 + sum(
            len(getattr(d.args[1], "elts", ())) if isinstance(d, ast.Call) and len(d.args) > 1 else 0
            for d in t[0].decorator_list
            if "parametrize" in ast.dump(getattr(d, "func", d))
        )

    order = [t for t in tests if key_of(*t) in targets and runs(t) <= MAX_RUNS] * CLONES_PER_TARGET
    others = [t for t in tests if key_of(*t) not in targets and runs(t) == 1]
    rng.shuffle(others)
    order += others
    inserts: dict[tuple[int, int], list[str]] = {}  # (class index or -1, slot) -> blocks
    pairs: dict[str, str] = {}
    for fn, cls in order:
        if len(pairs) >= budget:
            break
        if fn.name not in rename:
            continue  # a test whose name is used as a string or an attribute keeps its name: no twin
        turns = [t for i, stmt in enumerate(fn.body) if (t := _turn(stmt, rng)) and _no_exit_before(fn.body, i)]
        if not turns:
            continue
        edits = rng.choice(turns)
        first = min([d.lineno for d in fn.decorator_list] + [fn.lineno])
        last: int = fn.end_lineno  # type: ignore[assignment]
        shifted = [((l1 - first + 1, c1, l2 - first + 1, c2), text) for (l1, c1, l2, c2), text in edits]
        block = _edit(lines[first - 1 : last], shifted)
        clone = draw()
        block_text = "".join(block)
        block_text = re.sub(rf"(\bdef\s+){re.escape(fn.name)}\b", rf"\g<1>{clone}", block_text, count=1)
        needs = _names_in([*fn.decorator_list, *fn.args.defaults, *fn.args.kw_defaults])  # type: ignore[list-item]
        body = cls.body if cls is not None else module.body
        slot = rng.choice(_slots(body, needs))
        where = (module.body.index(cls) if cls is not None else -1, slot)
        inserts.setdefault(where, []).append(block_text)
        orig_new = rename[fn.name]
        prefix = f"{rel}::{cls.name}::" if cls is not None else f"{rel}::"
        pairs[prefix + clone] = prefix + orig_new
    copies: dict[str, str] = {}
    for fn, cls in [t for t in tests if key_of(*t) in targets and runs(t) <= MAX_RUNS] * COPIES_PER_TARGET:
        if fn.name not in rename:
            continue
        first = min([d.lineno for d in fn.decorator_list] + [fn.lineno])
        last = fn.end_lineno  # type: ignore[assignment]
        copy = draw()
        block_text = re.sub(
            rf"(\bdef\s+){re.escape(fn.name)}\b", rf"\g<1>{copy}", "".join(lines[first - 1 : last]), count=1
        )
        needs = _names_in([*fn.decorator_list, *fn.args.defaults, *fn.args.kw_defaults])  # type: ignore[list-item]
        body = cls.body if cls is not None else module.body
        slot = rng.choice(_slots(body, needs))
        inserts.setdefault((module.body.index(cls) if cls is not None else -1, slot), []).append(block_text)
        prefix = f"{rel}::{cls.name}::" if cls is not None else f"{rel}::"
        copies[prefix + copy] = prefix + rename[fn.name]
    if not pairs and not rename:
        return None
    # place the blocks: after statement slot-1 of the body (bottom up, so lines stay put)
    placed: list[tuple[int, bool, str]] = []
    for (ci, slot), blocks in inserts.items():
        owner = module.body[ci] if ci >= 0 else None
        body = owner.body if isinstance(owner, ast.ClassDef) else module.body
        after = _span(body[slot - 1])[2] if slot > 0 else body[0].lineno - 1
        for text in blocks:
            # a twin stays in its original's scope: its lines keep their own indentation
            placed.append((after, ci >= 0, "\n\n" + text if ci < 0 else "\n" + text))
    # the module's own lines renamed by its tokens (already read), each block by its own:
    # the same text as renaming the whole, which the tokenizer would read again (a third of
    # the clones' cost); a block that does not read alone has the whole renamed after all
    alone = [_renamed_block(text, rename) for _, _, text in placed]
    whole = any(b is None for b in alone)
    if not whole:
        lines = _renamed(_name_tokens(source) or (), rename, lines)
        placed = [(after, cls, block or "") for (after, cls, _), block in zip(placed, alone)]  # noqa: B905 - Python 3.9
    # bottom up; where a class ends on the line a module-level twin follows, the class's
    # own twin goes first (inserted last at that line), inside the class
    for after, _, text in sorted(placed, key=lambda p: (p[0], -int(p[1])), reverse=True):
        lines[after:after] = [text]
    text = "".join(lines)
    if whole:
        text = "".join(_renamed(_scan_names(text) or (), rename, _lines(text)))
    return text, {v: k for k, v in rename.items()}, pairs, copies


def _covers(old: str, new: str) -> bool:
    """Whether a new name carries every word of the old one (it would point back to it)."""
    own = {w for w in old.lower().split("_") if w and w != "test"}
    return bool(own) and own <= set(new.split("_")[1:])


Names = tuple[tuple[str, tuple[int, int], bool], ...]


def _scan_names(source: str) -> Names | None:
    """Each name in `source`: (name, its start, whether a dot comes before it); None if it
    does not tokenize."""
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    out = []
    prev = None
    for tok in toks:
        if tok.type == tokenize.NAME:
            out.append((tok.string, tok.start, prev is not None and prev.string == "."))
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
            prev = tok
    return tuple(out)


# Kept for the texts seen last: a hidden module is asked for three times in a run, and the
# pure-Python tokenizer (before Python 3.12) is most of the clones' cost.
_name_tokens = functools.lru_cache(maxsize=16)(_scan_names)


def _lines(text: str) -> list[str]:
    """The lines of a module as the parser and the tokenizer number them: ended by a newline
    alone (str.splitlines also ends one at a form feed, which source files hold as page
    breaks, and the line numbers of every later statement would miss by one)."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _renamed(tokens: Names, rename: dict[str, str], lines: list[str]) -> list[str]:
    """`lines` with every name token (of the text they are the lines of) that `rename`
    maps replaced: the names in code, never those in strings or comments."""
    lines = list(lines)
    if not rename:
        return lines
    for name, (row, col), _ in sorted(tokens, key=lambda t: t[1], reverse=True):
        new = rename.get(name)
        if new is None:
            continue
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[col + len(name) :]
    return lines


def _renamed_block(text: str, rename: dict[str, str]) -> str | None:
    """A placed block (its leading newlines, then whole statements at their own
    indentation) renamed by its own tokens; None if it does not tokenize alone."""
    body = text.lstrip("\n")
    lead = text[: len(text) - len(body)]
    # an indented block (a method) reads as the body of an `if`, one line down
    shift = 1 if body[:1] in (" ", "\t") else 0
    source = "if 1:\n" + body if shift else body
    tokens = _scan_names(source)  # not kept: each block is read once
    if tokens is None:
        return None
    return lead + "".join(_renamed(tokens, rename, _lines(source))[shift:])


@functools.lru_cache(maxsize=16)
def _strings(module: ast.Module) -> str:
    """The module's string constants, joined (a name in one is used as a string): read
    once a run, though two steps ask (a walk of every node, 40 ms in a module of 1,000
    lines)."""
    return " ".join(n.value for n in ast.walk(module) if isinstance(n, ast.Constant) and isinstance(n.value, str))


def map_back(tid: str, canaries: dict[str, Any]) -> tuple[str, str | None]:
    """A test id as the process reported it -> (the id the task knows, the original's id
    when this is a clone). A test inherited from a class of another hidden module (a
    mixin's, a base class's) is reported under the module that collected it, with the
    name drawn in the module that defines it: drawn names are unique across the run,
    so a name is mapped back wherever it shows."""
    path, sep, rest = tid.partition("::")
    if not sep:
        return tid, None
    base, bracket, params = rest.partition("[")
    full = f"{path}::{base}"
    tail = bracket + params if bracket else ""
    original = canaries.get("pairs", {}).get(full)
    if original is not None:
        return tid, original + tail
    parts = base.split("::")
    clone_of = canaries.get("clone_names", {}).get(parts[-1])
    if clone_of is not None:
        return tid, f"{path}::{'::'.join([*parts[:-1], clone_of])}{tail}"
    if parts[-1] in canaries.get("twin_names", ()):
        # a twin run by a class that may override its original (a name defined twice):
        # not judged there, and no test of the task's
        return tid, ""
    renamed: dict[str, dict[str, str]] = canaries.get("renamed", {})
    names = renamed.get(path) or {}
    old = names.get(parts[-1])
    if old is None:
        old = next((n[parts[-1]] for n in renamed.values() if parts[-1] in n), None)
    if old is not None:
        parts[-1] = old
        return f"{path}::{'::'.join(parts)}{tail}", None
    return tid, None


def _bare(tid: str) -> str:
    """A test id's function name: no path, class or parameters."""
    return tid.partition("::")[2].split("[", 1)[0].rsplit("::", 1)[-1]


def fold(outcomes: dict[str, str], canaries: dict[str, Any]) -> tuple[dict[str, str], list[list[Any]], list[list[Any]]]:
    """The outcomes under the task's own ids; [original outcome, twin outcome] for every
    twin, and [original outcome, copy outcome] for every exact copy (per parameter set,
    per class that runs it). A twin or copy without its original is paired with None."""
    known: dict[str, str] = {}
    clones: list[tuple[str, str, bool]] = []
    copy_names = {_bare(c) for c in canaries.get("copies", {})}
    for tid, outcome in outcomes.items():
        mapped, original = map_back(tid, canaries)
        if original:
            clones.append((original, outcome, _bare(tid) in copy_names))
        elif original is None:
            known[mapped] = outcome
    got: list[list[Any]] = []
    got_copies: list[list[Any]] = []
    for original, outcome, is_copy in clones:
        mapped, _ = map_back(original, canaries)
        (got_copies if is_copy else got).append([known.get(mapped), outcome])
    # a clone that never ran at all (its module did not collect, or it was kept from
    # running) is paired with nothing, beside its original wherever that ran (a mixin's
    # test runs in the classes of other modules, under the name drawn for it)
    by_name: dict[str, list[str]] = {}
    for tid, outcome in outcomes.items():
        by_name.setdefault(tid.partition("::")[2].split("[", 1)[0].rsplit("::", 1)[-1], []).append(outcome)
    for clone, original in canaries.get("pairs", {}).items():
        if clone.rsplit("::", 1)[-1] in by_name:
            continue
        seen = by_name.get(original.rsplit("::", 1)[-1], [])
        pair = ["passed" if "passed" in seen else seen[0] if seen else None, None]
        (got_copies if clone.rsplit("::", 1)[-1] in copy_names else got).append(pair)
    return known, got, got_copies


def rename_in_text(text: str, canaries: dict[str, Any]) -> str:
    """pytest's output with the task's own test names back in place."""
    for names in canaries.get("renamed", {}).values():
        for new, old in names.items():
            text = re.sub(rf"\b{re.escape(new)}\b", old, text)
    return text


_HEADER = re.compile(r"^_{3,} (\S.*?) _{3,}$")
_COUNTS = re.compile(r"(\d+) (failed|passed|errors?)")


def strip_clones(text: str, canaries: dict[str, Any], pairs: list[list[Any]]) -> str:
    """pytest's output without the twins' failures: their sections (a traceback into the
    code under test, which for a gold patch quotes the fix), their summary lines, and
    their counts taken out of the last line."""
    names = {c.rsplit("::", 1)[1] for c in canaries.get("pairs", {})}
    if not names:
        return text

    def is_clone(label: str) -> bool:
        # by the clone's own name (unique in the run): a clone inherited by a class of
        # another module shows under that class
        return label.split("[", 1)[0].rsplit(".", 1)[-1] in names

    out: list[str] = []
    skipping = False
    for line in text.split("\n"):
        head = _HEADER.match(line)
        if head:
            skipping = is_clone(head.group(1))
            if skipping:
                continue
        elif line.startswith("=") and skipping:
            skipping = False
        if skipping:
            continue
        if line.startswith(("FAILED ", "ERROR ", "PASSED ", "XPASS ", "XFAIL ")):
            tid = line.split(" ", 2)[1] if " " in line else ""
            if "::" in tid and is_clone(tid.split("::", 1)[1].replace("::", ".")):
                continue
        out.append(line)
    failed = sum(1 for _, c in pairs if c == "failed")
    passed = sum(1 for _, c in pairs if c == "passed")
    for i in range(len(out) - 1, -1, -1):
        if _COUNTS.search(out[i]) and (" in " in out[i]):

            def fix(m: re.Match[str]) -> str:
                n, what = int(m.group(1)), m.group(2)
                n -= failed if what == "failed" else passed if what == "passed" else 0
                return f"{max(n, 0)} {what}"

            out[i] = _COUNTS.sub(fix, out[i]).replace(" 0 failed,", "").replace("0 failed, ", "")
            break
    return "\n".join(out)
