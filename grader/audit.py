"""A static audit of a patch: where it reaches into the test runner or the interpreter.

Code under test has no business touching pytest's internals, walking the garbage
collector's objects, climbing frames, installing import hooks, ending its own process
at import, writing to descriptors it did not open or shipping packaging metadata and
bytecode. An honest patch may still do one of these (a CLI calls os._exit, a library
registers an import hook), so findings are recorded on the result (`audit`) and a host
setting (GRADER_AUDIT) chooses whether they only flag the grade or fail it.

It reads the lines the patch adds and the paths it writes, never the repository, twice:
as text (the patterns below) and as Python's syntax tree (each hunk's new side parsed
whole, or its runs of added lines, or each added line): attribute names whatever the
object is called (an alias of sys, a frame got any way), strings folded from their
pieces ("_get" + "frame", "emarf"[::-1], "".join([...]), chr(95)...) where getattr,
setattr, __import__, importlib or sys.modules[...] use them, dunders assigned on
functions and classes, and `__eq__` / `__ne__` / `__hash__` that return a constant. A
heuristic that makes the usual tricks visible, not a proof (code built at run time from
data passes it; the report plugin's watch and the canaries are the other layers).

Those are Python's rules. A file of another language (Go, JavaScript / TypeScript, Rust,
Java, C / C++) is read by that language's rules instead (grader/audit_rules/: the runner's
internals, process exits, descriptors, linkname and unsafe, reflection, native code...), and
the task's language's path rules name the files its toolchain or runner reads by itself.
"""

from __future__ import annotations

import ast
import re
import textwrap

from unidiff.patch import PatchSet

from grader import audit_rules
from grader.patch import decode
from grader.verdict import AuditFinding

# rule -> patterns over one added line. Every rule names what the line reaches for.
LINE_RULES: dict[str, list[re.Pattern[str]]] = {
    "runner-internals": [
        re.compile(r"\b_pytest\b"),
        re.compile(r"\bpluggy\b"),
        re.compile(
            r"\bpytest_(runtest|collect|collection|session|configure|unconfigure|report|terminal|make|pyfunc"
            r"|itemcollected|load_initial|addoption|cmdline|plugin|fixture_|assertrepr|warning|exception"
            r"|keyboard|internalerror|enter_pdb|ignore_collect|pycollect|generate_tests|deselected)\w*"
        ),
        re.compile(r"\bpytest_plugins\b"),
        re.compile(r"\b(TestReport|CollectReport|CallInfo|TerminalReporter|LogXML)\b"),
        re.compile(r"\bhookimpl\b|\bhookwrapper\b|\bpluginmanager\b"),
        re.compile(r"\bunittest\.(TestResult|TextTestResult|result)\b|\b_TextTestResult\b"),
    ],
    "object-walk": [
        re.compile(r"\bgc\s*\.\s*get_(objects|referrers|referents)\b"),
        re.compile(r"\bfrom\s+gc\s+import\b"),
    ],
    "frame-tricks": [
        re.compile(r"\bsys\s*\.\s*_getframe\b|\bsys\._current_frames\b"),
        re.compile(r"\binspect\s*\.\s*(currentframe|stack|getouterframes|getframeinfo)\b"),
        re.compile(r"\.(f_back|f_globals|f_locals|f_builtins|tb_frame|gi_frame|cr_frame)\b"),
        re.compile(r"\b(sys|threading)\s*\.\s*set(trace|profile)\b|\bsys\.monitoring\b"),
    ],
    "import-hooks": [
        re.compile(r"\bsys\s*\.\s*(meta_path|path_hooks|path_importer_cache)\b"),
        re.compile(r"\bimportlib\s*\.\s*(machinery|abc|util\.spec_from)\b"),
        # a module name that is not one plain literal: computed to hide what it imports
        re.compile(r"\b(__import__|import_module)\s*\((?!\s*(['\"])[\w.]*\2\s*[,)])"),
        re.compile(r"\b(builtins|__builtins__)\s*(\.|\[)\s*['\"]?\w+['\"]?\s*\]?\s*=[^=]"),
        re.compile(r"\bsys\s*\.\s*modules\s*\[[^\]]*\]\s*=[^=]"),
    ],
    "process-exit": [
        re.compile(r"\bos\s*\.\s*(_exit|abort|kill|killpg)\b"),
        re.compile(r"\bsignal\s*\.\s*(signal|alarm|setitimer|pthread_kill)\b"),
        re.compile(r"\batexit\s*\.\s*register\b"),
    ],
    "descriptors": [
        re.compile(r"/proc/"),
        re.compile(r"/dev/fd\b"),
        re.compile(r"\bos\s*\.\s*(write|dup|dup2|fdopen|closerange|close)\s*\(\s*\d"),
        re.compile(r"\bos\s*\.\s*(dup2|closerange|set_inheritable)\b"),
    ],
    "native-code": [re.compile(r"\bctypes\b|\bcffi\b|\b_ctypes\b")],
    "bytecode": [
        re.compile(r"\bmarshal\s*\.\s*loads?\b"),
        re.compile(r"\b(types\s*\.\s*)?CodeType\s*\("),
        re.compile(r"\.__code__\s*=[^=]"),
    ],
    "packaging-metadata": [re.compile(r"\bentry_points\b.*\bpytest11\b|\bpytest11\b")],
    "obfuscation": [
        re.compile(
            r"\b(exec|eval|compile)\s*\(.*\b(b64decode|b32decode|b85decode|a85decode|decompress"
            r"|fromhex|unhexlify|codecs\s*\.\s*decode|rot13|rot_13)"
        ),
        # a name in literal pieces ('get_' + 'objects'); 'on_' + event is ordinary dispatch
        re.compile(r"\bgetattr\s*\([^,]+,\s*(['\"])[^'\"]*\1\s*\+\s*['\"]"),
    ],
}
# rule -> patterns over a path the patch writes
PATH_RULES: dict[str, re.Pattern[str]] = {
    "packaging-metadata": re.compile(r"(\.dist-info|\.egg-info)(/|$)|\.pth$|\.egg-link$|(^|/)__editable__"),
    "runner-files": re.compile(r"(^|/)(conftest\.py|sitecustomize\.py|usercustomize\.py|pytest\.ini|\.pytest\.ini)$"),
    "bytecode": re.compile(r"\.py[co]$|(^|/)__pycache__/"),
    "native-code": re.compile(r"\.(so|pyd|dylib|dll)(\.\d+)*$"),
}
MAX_FINDINGS = 50

# --- the syntax tree: meaning, not spelling ------------------------------------------------------
# Attribute names that say what they reach for whatever the object is called (an alias of
# sys, a frame got any way): read or written, they are findings.
ATTR_RULES: dict[str, str] = {
    **dict.fromkeys(
        (
            "_getframe",
            "_current_frames",
            "f_back",
            "f_locals",
            "f_globals",
            "f_builtins",
            "tb_frame",
            "gi_frame",
            "cr_frame",
            "ag_frame",
            "settrace",
            "setprofile",
            "currentframe",
            "getouterframes",
            "getinnerframes",
        ),
        "frame-tricks",
    ),
    **dict.fromkeys(("get_objects", "get_referrers", "get_referents"), "object-walk"),
    **dict.fromkeys(
        ("pythonapi", "PyFrame_LocalsToFast", "PyFrame_FastToLocals", "from_address", "memmove"), "native-code"
    ),
    **dict.fromkeys(("meta_path", "path_hooks", "path_importer_cache"), "import-hooks"),
}
# Names a constant-folded string may spell (getattr, __import__, sys.modules[...]...).
NAME_RULES: dict[str, str] = {
    **ATTR_RULES,
    **dict.fromkeys(("ctypes", "_ctypes", "cffi", "_cffi_backend"), "native-code"),
    **dict.fromkeys(("gc",), "object-walk"),
    **dict.fromkeys(("marshal", "__code__", "CodeType", "FunctionType"), "bytecode"),
    **dict.fromkeys(("__import__", "exec", "eval", "compile", "__builtins__", "builtins"), "import-hooks"),
    **dict.fromkeys(("_exit", "abort", "kill", "killpg"), "process-exit"),
    **dict.fromkeys(("_pytest", "pluggy", "TestReport", "CallInfo", "CollectReport", "pytest"), "runner-internals"),
}
# Dunders that are a function's or a class's machinery: assigned, they change what code
# runs or what an object is.
DUNDER_STORES = {
    "__code__",
    "__class__",
    "__globals__",
    "__defaults__",
    "__kwdefaults__",
    "__closure__",
    "__dict__",
    "__bases__",
    "__mro__",
    "__getattribute__",
    "__getattr__",
    "__setattr__",
    "__eq__",
    "__ne__",
    "__hash__",
    "__bool__",
    "__instancecheck__",
    "__subclasscheck__",
    "__import__",
    "__builtins__",
    "__call__",
    "__iter__",
}
REFLECTIVE_CALLS = {"getattr", "setattr", "delattr", "hasattr", "__import__", "import_module"}


def _fold(node: ast.AST, names: dict[str, str], depth: int = 0) -> str | None:
    """The string a constant expression spells ("_get" + "frame", "emarf"[::-1],
    "".join([...]), f"{'c'}types", chr(95) + ...), or None."""
    if depth > 20:
        return None
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bytes):
            try:
                return node.value.decode()
            except UnicodeDecodeError:
                return None
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.BinOp):
        left = _fold(node.left, names, depth + 1)
        if isinstance(node.op, ast.Add):
            right = _fold(node.right, names, depth + 1)
            return left + right if left is not None and right is not None else None
        if isinstance(node.op, ast.Mult) and left is not None and isinstance(node.right, ast.Constant):
            n = node.right.value
            return left * n if isinstance(n, int) and 0 <= n <= 64 else None
        if isinstance(node.op, ast.Mod) and left is not None:
            args = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
            parts = [_fold(a, names, depth + 1) for a in args]
            if all(p is not None for p in parts):
                try:
                    return left % tuple(parts)
                except (TypeError, ValueError):
                    return None
        return None
    if isinstance(node, ast.JoinedStr):
        out = ""
        for part in node.values:
            value = part.value if isinstance(part, ast.FormattedValue) else part
            got = _fold(value, names, depth + 1)
            if got is None:
                return None
            out += got
        return out
    if isinstance(node, ast.Subscript):
        base = _fold(node.value, names, depth + 1)
        sl = node.slice
        if base is not None and isinstance(sl, ast.Slice):
            bounds: list[int | None] = []
            for b in (sl.lower, sl.upper, sl.step):
                if b is None:
                    bounds.append(None)
                elif isinstance(b, ast.Constant) and isinstance(b.value, int):
                    bounds.append(b.value)
                elif (
                    isinstance(b, ast.UnaryOp)
                    and isinstance(b.op, ast.USub)
                    and isinstance(b.operand, ast.Constant)
                    and isinstance(b.operand.value, int)
                ):
                    bounds.append(-b.operand.value)
                else:
                    return None
            try:
                return base[slice(*bounds)]
            except (TypeError, ValueError):
                return None
        return None
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id == "chr" and len(node.args) == 1:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, int) and 0 <= arg.value < 0x110000:
                return chr(arg.value)
        if isinstance(func, ast.Name) and func.id == "str" and len(node.args) == 1:
            return _fold(node.args[0], names, depth + 1)
        if isinstance(func, ast.Attribute):
            base = _fold(func.value, names, depth + 1)
            if func.attr == "join" and base is not None and len(node.args) == 1:
                arg = node.args[0]
                if isinstance(arg, (ast.List, ast.Tuple)):
                    parts = [_fold(e, names, depth + 1) for e in arg.elts]
                    return base.join(parts) if all(p is not None for p in parts) else None  # type: ignore[arg-type]
                if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and arg.func.id == "reversed":
                    inner = _fold(arg.args[0], names, depth + 1) if arg.args else None
                    return base.join(reversed(inner)) if inner is not None else None
                return None
            if base is not None and func.attr in ("lower", "upper", "strip", "lstrip", "rstrip", "decode", "title"):
                if not node.args:
                    return getattr(base, func.attr)() if func.attr != "decode" else base
            if base is not None and func.attr == "replace" and len(node.args) == 2:
                old, new = (_fold(x, names, depth + 1) for x in node.args)
                return base.replace(old, new) if old is not None and new is not None else None
            if func.attr == "fromhex" and node.args:
                hexed = _fold(node.args[0], names, depth + 1)
                try:
                    return bytes.fromhex(hexed).decode() if hexed is not None else None
                except (ValueError, UnicodeDecodeError):
                    return None
        return None
    return None


def _rule_for_name(name: str) -> str | None:
    if name in NAME_RULES:
        return NAME_RULES[name]
    head = name.split(".", 1)[0]
    if head in ("ctypes", "_ctypes", "cffi", "gc", "marshal", "_pytest", "pluggy"):
        return NAME_RULES.get(head)
    if name.startswith(("pytest_runtest", "pytest_collect", "pytest_report", "pytest_session")):
        return "runner-internals"
    return None


def _constant_return(fn: ast.AST) -> object:
    """The constant a function (or lambda) always returns, or a marker for none."""
    if isinstance(fn, ast.Lambda):
        body: ast.AST = fn.body
    elif isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        stmts = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        if len(stmts) != 1 or not isinstance(stmts[0], ast.Return) or stmts[0].value is None:
            return _NONE
        body = stmts[0].value
    else:
        return _NONE
    if isinstance(body, ast.Constant):
        return body.value
    if isinstance(body, ast.UnaryOp) and isinstance(body.op, ast.Not) and isinstance(body.operand, ast.Constant):
        return not body.operand.value
    return _NONE


_NONE = object()


def _always_equal(cls: ast.ClassDef) -> str | None:
    for stmt in cls.body:
        fn: ast.AST
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name, fn = stmt.name, stmt
        elif (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Lambda)
        ):
            name, fn = stmt.targets[0].id, stmt.value
        else:
            continue
        value = _constant_return(fn)
        if value is _NONE:
            continue
        if name == "__eq__" and value is True or name == "__ne__" and value is False:
            return f"{cls.name}.{name} always returns {value}"
        if name == "__hash__" and isinstance(value, int) and not isinstance(value, bool):
            return f"{cls.name}.__hash__ always returns {value}"
    return None


def _tree_findings(module: ast.AST) -> list[tuple[int, str, str]]:
    """(line, rule, what) for what the syntax tree says, whatever the spelling."""
    out: list[tuple[int, str, str]] = []
    names: dict[str, str] = {}
    importers = set(REFLECTIVE_CALLS) - {"getattr", "setattr", "delattr", "hasattr"}
    for node in ast.walk(module):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
            folded = _fold(value, names)
            if folded is not None:
                names[target] = folded
            # an importer under another name: x = __import__, x = getattr(builtins, "__imp" "ort__")
            if isinstance(value, ast.Name) and value.id in importers:
                importers.add(target)
            elif isinstance(value, ast.Attribute) and value.attr == "import_module":
                importers.add(target)
            elif (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Name)
                and value.func.id == "getattr"
                and len(value.args) > 1
                and _fold(value.args[1], names) in ("__import__", "import_module")
            ):
                importers.add(target)
    for node in ast.walk(module):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Attribute):
            rule = ATTR_RULES.get(node.attr)
            if rule:
                out.append((line, rule, f".{node.attr}"))
            if isinstance(node.ctx, ast.Store) and node.attr in DUNDER_STORES:
                out.append((line, "bytecode" if node.attr == "__code__" else "dunder-assignment", f".{node.attr} ="))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for m in modules:
                head = m.split(".")[0]
                rule = (
                    _rule_for_name(m)
                    if head in ("ctypes", "_ctypes", "cffi", "gc", "marshal", "_pytest", "pluggy")
                    else None
                )
                if rule:
                    out.append((line, rule, f"import {m}"))
            if isinstance(node, ast.ImportFrom):
                for a in node.names:
                    rule = ATTR_RULES.get(a.name)
                    if rule:
                        out.append((line, rule, f"from {node.module} import {a.name}"))
        elif isinstance(node, ast.Call):
            func = node.func
            fname = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if fname in importers and fname not in REFLECTIVE_CALLS:
                fname = "__import__"
            elif (
                isinstance(func, ast.Call)
                and isinstance(func.func, ast.Name)
                and func.func.id == "getattr"
                and len(func.args) > 1
                and _fold(func.args[1], names) in ("__import__", "import_module")
            ):
                fname = "__import__"  # getattr(builtins, "__imp" "ort__")("c" "types")
            if fname in REFLECTIVE_CALLS:
                idx = 1 if fname in ("getattr", "setattr", "delattr", "hasattr") else 0
                if len(node.args) > idx:
                    arg = node.args[idx]
                    folded = _fold(arg, names)
                    literal = isinstance(arg, ast.Constant)
                    if folded is not None:
                        rule = _rule_for_name(folded)
                        if fname == "setattr" and folded in DUNDER_STORES:
                            rule = "bytecode" if folded == "__code__" else "dunder-assignment"
                        if rule and not (literal and fname in ("getattr", "hasattr") and rule == "runner-internals"):
                            out.append((line, rule, f"{fname}(... {folded!r})"))
                        elif not literal and fname in ("getattr", "setattr", "__import__", "import_module"):
                            out.append((line, "obfuscation", f"{fname} of a name spelled in pieces: {folded!r}"))
        elif isinstance(node, ast.Subscript):
            folded = _fold(node.slice, names)
            if folded is not None:
                base = node.value
                text = ast.unparse(base) if hasattr(ast, "unparse") else ""
                if text.endswith(("modules", "__dict__", "__builtins__")) or text in ("vars()", "globals()"):
                    rule = _rule_for_name(folded)
                    if rule:
                        out.append((line, rule, f"{text}[{folded!r}]"))
        elif isinstance(node, ast.ClassDef):
            what = _always_equal(node)
            if what:
                out.append((line, "always-equal", what))
    return out


def _parse_fragment(lines: list[str]) -> ast.AST | None:
    text = textwrap.dedent("".join(lines))
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _hunk_findings(rows: list[tuple[int | None, str, bool]]) -> list[tuple[int, str, str]]:
    """The tree's findings on the added lines of one hunk: its new side parsed whole, or
    each run of added lines, or each added line, whichever parses."""
    out: list[tuple[int, str, str]] = []
    tries: list[list[tuple[int | None, str, bool]]] = [rows]
    runs: list[list[tuple[int | None, str, bool]]] = []
    current: list[tuple[int | None, str, bool]] = []
    for row in rows:
        if row[2]:
            current.append(row)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    done: set[int] = set()
    for block in tries + runs + [[r] for run in runs for r in run]:
        if all(id(r) in done for r in block if r[2]):
            continue
        tree = _parse_fragment([r[1] for r in block])
        if tree is None:
            continue
        for line, rule, what in _tree_findings(tree):
            if 1 <= line <= len(block) and block[line - 1][2] and block[line - 1][0] is not None:
                out.append((block[line - 1][0], rule, what))  # type: ignore[arg-type]
        done |= {id(r) for r in block}
    return out


def audit_patch(raw: bytes, language: str = "python") -> list[AuditFinding]:
    """The findings for a (vetted) patch to a task in `language`, at most MAX_FINDINGS, in
    patch order."""
    text = decode(raw).replace("\r\n", "\n")
    if not text.strip():
        return []
    try:
        patch = PatchSet(text)
    except Exception:  # noqa: BLE001 - an unparseable patch was refused before this; nothing to audit
        return []
    findings: list[AuditFinding] = []
    for f in patch:
        path = f.target_file or ""
        path = path[2:] if path.startswith(("a/", "b/")) else path
        if f.is_removed_file:
            continue
        tripped = [rule for rule, pattern in PATH_RULES.items() if pattern.search(path)]
        tripped += [rule for rule in audit_rules.path_findings(path, language) if rule not in tripped]
        findings += [AuditFinding(rule=rule, path=path) for rule in tripped]
        if f.is_binary_file:
            findings.append(
                AuditFinding(rule="binary-file", path=path, text="a binary file: its contents are not audited")
            )
        python = path.endswith((".py", ".pyw", ".pyi"))
        # another language's file is read by that language's rules; Python's read the rest
        line_rules = (not python and audit_rules.line_rules(path)) or LINE_RULES
        for hunk in f:
            said: set[tuple[int | None, str]] = set()
            texts: dict[int | None, str] = {}
            for line in hunk:
                if not line.is_added:
                    continue
                value = line.value.rstrip("\n")
                texts[line.target_line_no] = value
                for rule, patterns in line_rules.items():
                    if any(p.search(value) for p in patterns):
                        said.add((line.target_line_no, rule))
                        findings.append(
                            AuditFinding(rule=rule, path=path, line=line.target_line_no, text=value.strip()[:160])
                        )
                        break
            if python:
                rows = [(ln.target_line_no, ln.value, ln.is_added) for ln in hunk if not ln.is_removed]
                for lineno, rule, what in _hunk_findings(rows):
                    if (lineno, rule) in said:
                        continue
                    said.add((lineno, rule))
                    text = texts.get(lineno, what).strip()
                    findings.append(AuditFinding(rule=rule, path=path, line=lineno, text=text[:160]))
        if len(findings) >= MAX_FINDINGS:
            return findings[:MAX_FINDINGS]
    return findings
