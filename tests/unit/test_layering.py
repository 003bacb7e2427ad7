"""The layering of grader/ (docs/architecture.md) holds: every import points down.

Every module of the package is parsed with `ast`, and every import it makes is read,
those inside functions and under `if TYPE_CHECKING` included: an import that Python only
runs later is still a dependency, and a loop hidden in a function is still a loop. Each
module is placed by the layer table of docs/architecture.md, the one place the layering
is written. The test fails when

- a module belongs to no entry of the table (a new module must be placed);
- an import goes to a module of the same layer but another entry (side by side means
  knowing nothing of each other), or to a higher layer;
- modules import each other, directly or round a longer cycle (within one entry too).

Imports by name that Python does not see as imports (RQ's job names in handles.py,
the sandbox providers' modules in sandbox/__init__.py) are not read; the document says
where they are.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from helpers import ROOT

PACKAGE = ROOT / "grader"
DOC = ROOT / "docs" / "architecture.md"


@dataclass(frozen=True)
class Entry:
    """One entry of the layer table: a file (`grader/jobs.py`) or a folder (`grader/api/`)."""

    path: str
    layer: int

    def covers(self, rel: str) -> bool:
        return rel.startswith(self.path) if self.path.endswith("/") else rel == self.path


def layer_table(text: str) -> list[list[str]]:
    """The entries of the ```layers block, a list per layer, top layer first."""
    match = re.search(r"^```layers\n(.*?)^```", text, re.S | re.M)
    assert match, f"{DOC} has no ```layers block"
    layers = []
    for line in match.group(1).splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            layers.append(line.split())
    return layers


def entries() -> list[Entry]:
    return [Entry(path, i) for i, layer in enumerate(layer_table(DOC.read_text())) for path in layer]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that `name` (at `path`) imports, anywhere in its body. `from
    a import b` counts as importing a.b when that is a module, else as importing a; an
    import of a.b.c from outside package a.b also imports a.b (its __init__ runs)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def nearest(target: str) -> str | None:
        while target and target not in known:
            target = target.rpartition(".")[0]
        return target or None

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")
                up = up[: len(up) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            if target == "grader" or target.startswith("grader."):
                hit = nearest(target)
                if hit is not None and hit != name:
                    found.add(hit)
                    found |= outer_packages(name, hit)
    return found


def outer_packages(importer: str, target: str) -> set[str]:
    """The packages whose __init__ Python runs before `target`, seen from `importer`:
    those below the root that `importer` is not inside of (inside one, its __init__ is
    already running or done)."""
    parts = target.split(".")
    return {
        p
        for p in (".".join(parts[:i]) for i in range(2, len(parts)))
        if importer != p and not importer.startswith(p + ".")
    }


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imported(name, path, known) for name, path in known.items()}


def entry_of(name: str, table: list[Entry]) -> Entry | None:
    rel = modules()[name].relative_to(ROOT).as_posix()
    covering = [e for e in table if e.covers(rel)]
    return max(covering, key=lambda e: len(e.path)) if covering else None


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_every_module_has_a_place_in_the_layering():
    table = entries()
    unplaced = [name for name in modules() if entry_of(name, table) is None]
    assert not unplaced, f"add these to the ```layers block of docs/architecture.md: {unplaced}"


def test_every_entry_names_a_file_or_folder():
    missing = [e.path for e in entries() if not (ROOT / e.path).exists()]
    assert not missing, f"the ```layers block of docs/architecture.md names what is not there: {missing}"


def test_every_import_points_down_the_layers():
    table = entries()
    wrong = []
    for name, targets in sorted(graph().items()):
        here = entry_of(name, table)
        if here is None:
            continue  # reported by the test above
        for target in sorted(targets):
            there = entry_of(target, table)
            if there is None or there == here:
                continue
            if there.layer == here.layer:
                wrong.append(f"{name} ({here.path}) imports {target} ({there.path}), side by side in one layer")
            elif there.layer < here.layer:
                wrong.append(f"{name} ({here.path}) imports {target} ({there.path}), a layer above it")
    assert not wrong, "imports that do not point down the layers:\n" + "\n".join(wrong)


def test_no_modules_import_each_other():
    loops = cycles(graph())
    assert not loops, "modules that import each other (each line one loop):\n" + "\n".join(
        " <-> ".join(loop) for loop in loops
    )


def test_cycles_finds_pairs_and_longer_loops():
    assert cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_function_level_and_relative_imports_are_read(tmp_path):
    pkg = tmp_path / "grader"
    (pkg / "sub").mkdir(parents=True)
    for rel in ("__init__.py", "low.py", "sub/__init__.py", "sub/mod.py"):
        (pkg / rel).write_text("")
    (pkg / "sub" / "mod.py").write_text("def f():\n    from grader import low\n    from . import other\n")
    (pkg / "sub" / "other.py").write_text("from ..low import X\n")
    known = {
        ".".join(p.relative_to(tmp_path).with_suffix("").parts).removesuffix(".__init__"): p for p in pkg.rglob("*.py")
    }
    assert imported("grader.sub.mod", pkg / "sub" / "mod.py", known) == {"grader.low", "grader.sub.other"}
    assert imported("grader.sub.other", pkg / "sub" / "other.py", known) == {"grader.low"}
    (pkg / "low.py").write_text("import grader.sub.other\n")  # runs grader/sub/__init__.py first
    assert imported("grader.low", pkg / "low.py", known) == {"grader.sub", "grader.sub.other"}
