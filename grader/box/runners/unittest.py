"""unittest: Python's unittest, and Django-style runtests.py scripts, run through the
unittest reporter (reporters/python/unittest_report.py), which the supervisor installs
root-owned under a module name of this run and puts in front of the task's command:

    python -m <reporter> -m unittest <args> <labels>        # no command: plain unittest
    python -m <reporter> tests/runtests.py --parallel 1 <labels>   # command: a script
    python -m <reporter> -m mypackage.testrunner <labels>          # command: -m MODULE

Outcomes come only from the reporter's signed records (it hooks unittest.TestResult in
the test process, before any code of the repository is imported): a line a test prints,
`test_x (m.C) ... ok` or `OK`, counts for nothing, and a process that ends without the
reporter's last word (os._exit, a signal, a crash) is not a finished run.

A task names the tests the unittest way, in any of the forms benchmarks write them:

    test_name (module.Class)              SWE-bench's form (Django, Python < 3.11)
    test_name (module.Class.test_name)    the same as Python 3.11+ prints it
    module.Class.test_name                TestCase.id()
    a docstring's first line              SWE-bench's Django lists, where a verbose run
                                          printed the docstring in place of the name

The reporter records `module.Class.test_name`; the run's outcomes are renamed to the form
the task lists (the docstring form is recorded by the reporter itself for the ids named).

The test labels (`{tests}` in a command, else appended to it) are `paths` (files or
dotted labels; default: the hidden test modules and the modules the lists name), a file
turned into its module's dotted name relative to where the runner imports from: the
script's directory for a script (Django's tests/runtests.py puts tests/ first on
sys.path: tests/auth_tests/test_views.py is `auth_tests.test_views`), the repository for
`-m` (tests/test_x.py is `tests.test_x`).

How the order carries it (CheckSpec): `command` the argv after the reporter (shell words,
`{tests}` where the labels go), `args` the labels, `paths` the ids the task lists (the
container renames outcomes to their forms, and protects the files they name).
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import secrets
import shlex
from typing import Any

from .. import bytecode
from .. import canaries as canary
from ..order import CheckSpec, Order
from ..proc import text
from ..signed import install_reporters, merge, run_signed, split_canaries
from ..tree import Tree, rel_ok
from .common import PYTHON_PROTECT, canary_fields, finish_run, hidden_python_tests, python_env

# Django's test runner script is loaded by name; the command's own script and the
# packages of the hidden tests are protected per task (before_patch).
PROTECT = {**PYTHON_PROTECT, "names": PYTHON_PROTECT["names"] + ["runtests.py"]}
# unittest's and Django's exit statuses: 0 all passed, 1 some failed or errored.
EXIT_PASSED, EXIT_FAILED = 0, 1
EXIT_MEANING: dict[int, str] = {
    2: "usage error (a bad option or test label)",
    5: "no tests ran",
    130: "interrupted",
}
LABEL = "unittest"

TESTS = True
COMMAND = "optional"
DECIDED_BY = "test report"

PLACEHOLDER = "{tests}"
DEFAULT = ["-m", "unittest"]
_PYTHON = re.compile(r"(?:[\w./-]*/)?python(?:3(?:\.\d+)?)?")
_ASSIGN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*")
_PAREN = re.compile(r"(\w+) \(([\w.]+)\)")
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*){2,}")
# options that would deselect tests by name or stop before the canaries ran: unittest's
# -k, Django's runtests.py -k / --tag / --exclude-tag / --bisect / --pair / --start-*
CANARY_BLOCKERS = ("-k", "--tag", "--exclude-tag", "--bisect", "--pair", "--start-at", "--start-after")
# words canary names draw from besides the task's own
FILLER = ("value", "values", "empty", "result", "basic", "single", "order", "default", "missing", "mixed")


# --- the command, the labels and the ids (host and container alike) --------------------


def split_command(command: str | None, args: list[str] | None = None) -> tuple[dict[str, str], list[str]]:
    """(environment assignments, the argv after the reporter) of a task's command:
    `[VAR=value ...] [python] SCRIPT ARGS` or `[VAR=value ...] [python] -m MODULE ARGS`;
    no command is `-m unittest`. The task's `args` go after the command's own words."""
    words = shlex.split(command) if command else list(DEFAULT)
    env: dict[str, str] = {}
    while words and _ASSIGN.fullmatch(words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if words and _PYTHON.fullmatch(words[0]):
        words.pop(0)
    if not words:
        raise ValueError("a unittest command names a script or `-m MODULE`")
    if words[0] == "-m":
        if len(words) < 2 or not re.fullmatch(r"[A-Za-z_][\w.]*", words[1]):
            raise ValueError("a unittest command's -m names a module")
    elif words[0].startswith("-"):
        raise ValueError(f"a unittest command takes no interpreter option ({words[0]}): [python] SCRIPT or -m MODULE")
    else:
        script = words[0][2:] if words[0].startswith("./") else words[0]
        if not rel_ok(script):
            raise ValueError(f"a unittest command's script is a path inside the repository, not {words[0]!r}")
        words[0] = script
    return env, words + list(args or [])


def label_root(argv: list[str]) -> str:
    """Where the test process imports test modules from, relative to the repository: the
    script's directory (sys.path[0] for `python SCRIPT`), or the repository itself."""
    return "" if argv[0] == "-m" else os.path.dirname(argv[0])


def discovers(argv: list[str]) -> bool:
    """`python -m unittest discover ...`: unittest finds its tests itself, takes no labels."""
    return argv[:2] == ["-m", "unittest"] and "discover" in argv[2:3]


def label_of(path: str, root: str) -> str | None:
    """A test path's label: a file or a directory as a dotted module name relative to
    `root`, a dotted label as it is; None for what no label names (a data file, a file
    outside the root)."""
    if "/" not in path and not path.endswith(".py"):
        return path if re.fullmatch(r"[A-Za-z_][\w.]*", path) else None
    rel = path.rstrip("/")
    if root:
        if not rel.startswith(root + "/"):
            return None
        rel = rel[len(root) + 1 :]
    if rel.endswith("/__init__.py"):
        rel = rel[: -len("/__init__.py")]
    elif rel.endswith(".py"):
        rel = rel[:-3]
    elif "." in rel.rsplit("/", 1)[-1]:
        return None  # a data file
    parts = rel.split("/")
    return ".".join(parts) if all(p.isidentifier() for p in parts) else None


def module_path(label: str, root: str) -> list[str]:
    """The files a dotted module name can be, relative to the repository."""
    rel = "/".join(([root] if root else []) + label.split("."))
    return [rel + ".py", rel + "/__init__.py"]


def canonical(test_id: str) -> str | None:
    """`module.Class.test_name` for an id in any of the unittest forms, or None (a
    docstring line)."""
    m = _PAREN.fullmatch(test_id)
    if m:
        name, owner = m.groups()
        return owner if owner.endswith("." + name) else f"{owner}.{name}"
    return test_id if _DOTTED.fullmatch(test_id) else None


def id_module(test_id: str) -> str | None:
    """The module a test id names (its class and method taken off)."""
    full = canonical(test_id)
    if full is None:
        return None
    parts = full.split(".")
    return ".".join(parts[:-2]) if len(parts) > 2 else None


def dedupe(labels: list[str]) -> list[str]:
    """Each label once, and none inside another (a module and its package, a class and its
    module): unittest would run those tests twice."""
    out: list[str] = []
    for label in sorted(set(labels), key=lambda s: (s.count("."), s)):
        if not any(label == o or label.startswith(o + ".") for o in out):
            out.append(label)
    return sorted(out)


def words_of(test_ids: list[str]) -> list[str]:
    """Words of the task's test names (method and class), for canaries that look like them."""
    out: set[str] = set()
    for tid in test_ids:
        full = canonical(tid)
        if full is None:
            continue
        parts = full.split(".")
        for part in parts[-2:]:
            for w in re.findall(r"[A-Z]?[a-z0-9]+", part):
                if w.lower() not in ("test", "tests"):
                    out.add(w.lower())
    return sorted(out)


# --- the host ---------------------------------------------------------------------------


def plan(check: dict[str, Any], hidden: dict[str, str | None]) -> CheckSpec:
    """The order's check: the command (or `-m unittest`), the labels, the listed ids."""
    listed = list(check.get("fail_to_pass") or []) + list(check.get("pass_to_pass") or [])
    env, argv = split_command(check.get("command"), list(check.get("args") or []))
    root = label_root(argv)
    modules = hidden_python_tests(hidden)
    if check.get("paths"):
        labels = [label_of(p, root) for p in check["paths"]]
    else:
        tests = [p for p in modules if is_test_module(p)] or modules
        labels = [label_of(p, root) for p in tests] + [id_module(t) for t in listed]
    found = dedupe([lb for lb in labels if lb])
    if not found and not discovers(argv) and PLACEHOLDER in argv:
        raise ValueError("a unittest check needs paths, hidden test modules or listed tests to run")
    fields = canary_fields(check, modules, set(), listed)
    fields["canary_words"] = words_of(listed)
    return CheckSpec(
        kind="unittest",
        command=shlex.join([f"{k}={v}" for k, v in env.items()] + argv),
        args=found,
        paths=listed,
        **fields,
    )


def is_test_module(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.startswith("test") or name.endswith("_test.py") or name == "tests.py"


def listed_files(ids: list[str]) -> list[str]:
    """None here: a unittest id names a module, whose file depends on where the runner
    imports from. The container protects them (before_patch), with the command's script."""
    return []


# --- the container ----------------------------------------------------------------------


def before_patch(order: Order, tree: Tree) -> None:
    """Protect, with the hidden tests: the command's script, the files of the modules the
    listed ids name, and the packages (__init__.py) the hidden tests are imported through,
    as they are at the base (all code the runner loads by itself before any test runs)."""
    check = order.check
    _, argv = split_command(check.command)
    root = label_root(argv)
    wanted: set[str] = set()
    if argv[0] != "-m":
        wanted.add(argv[0])
    modules = {m for m in (id_module(t) for t in check.paths) if m} | set(check.args or [])
    for label in modules:
        wanted.update(module_path(label, root))
    hidden = [rel for rel in order.protect.files if rel.endswith(".py")]
    for rel in hidden + ([check.canary_dir + "/x"] if check.canary_dir else []):
        parts = rel.split("/")[:-1]
        start = len(root.split("/")) if root else 0
        for i in range(start + 1, len(parts) + 1):
            wanted.add("/".join(parts[:i]) + "/__init__.py")
    present = [rel for rel in sorted(wanted) if rel_ok(rel) and tree.lstat(rel) is not None]
    order.protect.files = sorted(set(order.protect.files) | set(present))


def blocks_canaries(word: str) -> bool:
    return any(word == b or word.startswith(b + "=") or (b == "-k" and word.startswith("-k")) for b in CANARY_BLOCKERS)


def make_canaries(order: Order, tree: Tree) -> dict[str, Any] | None:
    """A unittest module of this run only, beside the hidden tests, first among the labels:
    a TestCase whose tests must fail and must pass, named like the task's own."""
    check = order.check
    if not check.canaries:
        return None
    _, argv = split_command(check.command)
    if discovers(argv) or not check.args:
        return {"skipped": "the command chooses its tests itself (no test labels to add the canaries to)"}
    for word in argv:
        if blocks_canaries(word):
            return {"skipped": f"the command's option {word} could deselect them or stop the run before them"}
    root = label_root(argv)
    folder = check.canary_dir
    if root and not (folder == root or folder.startswith(root + "/")):
        folder = root
    rng = random.SystemRandom()
    words = [w for w in check.canary_words if re.fullmatch(r"[a-z][a-z0-9]{1,15}", w)]
    words = sorted(set(words) | set(FILLER))
    while True:
        module = "test_" + "_".join(rng.sample(words, 2)) + ".py"
        rel = f"{folder}/{module}" if folder else module
        if tree.lstat(rel) is None:
            break
    label = label_of(rel, root)
    if label is None:
        return {"skipped": f"{folder or 'the repository root'} is not importable as a package"}
    cls = "".join(w.capitalize() for w in rng.sample(words, rng.randint(1, 2))) + "Tests"
    kinds = [True] * rng.randint(2, 3) + [False] * rng.randint(2, 3)
    rng.shuffle(kinds)
    expect: dict[str, str] = {}
    names: set[str] = set()
    body = ""
    for must_pass in kinds:
        while True:
            name = "test_" + "_".join(rng.sample(words, rng.randint(1, 3)))
            if name not in names:
                break
        names.add(name)
        body += f"\n    def {name}(self):\n" + _canary_body(rng, must_pass)
        expect[f"{label}.{cls}.{name}"] = "passed" if must_pass else "failed"
    source = (
        "import hashlib\nimport unittest\n"
        + _guarded(canary.borrowed_imports(check, tree))
        + f"\n\nclass {cls}(unittest.TestCase):{body}"
        # only this class: a TestCase the borrowed imports bring runs where it is defined
        + f"\n\ndef load_tests(loader, tests, pattern):\n    return loader.loadTestsFromTestCase({cls})\n"
    )
    data = source.encode()
    tree.write(rel, data, mode=0o444, owner=(0, 0))
    return {"path": rel, "digest": hashlib.sha256(data).hexdigest(), "expect": expect, "module": label}


def _guarded(imports: str) -> str:
    """The hidden tests' imports, each one unable to fail: the canaries import the code
    under test as the tests do, and their module loads whatever that code does (a canary
    module that does not load is then the test process's doing)."""
    out = ""
    for line in imports.splitlines():
        out += f"try:\n    {line}\nexcept Exception:  # noqa: BLE001\n    pass\n"
    return out


def _canary_body(rng: random.Random, must_pass: bool) -> str:
    """One test method's body in a shape tasks' tests have; it passes iff must_pass."""
    shape = rng.randrange(5)
    if shape == 0:
        xs = [rng.randint(-50, 99) for _ in range(rng.randint(3, 6))]
        want = sum(xs) if must_pass else sum(xs) + rng.choice([-2, -1, 1, 3])
        return f"        total = sum({xs!r})\n        self.assertEqual(total, {want})\n"
    if shape == 1:
        word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 8)))
        k = rng.randint(2, 9)
        want = len(word) * k if must_pass else len(word) * k + 1
        return f"        text = {word!r} * {k}\n        self.assertEqual(len(text), {want})\n"
    if shape == 2:
        seed = secrets.token_hex(6)
        digest = hashlib.sha256(seed.encode()).hexdigest()[:10]
        if not must_pass:
            digest = digest[:-1] + ("0" if digest[-1] != "0" else "1")
        return (
            f"        digest = hashlib.sha256({seed!r}.encode()).hexdigest()\n"
            f"        self.assertEqual(digest[:10], {digest!r})\n"
        )
    if shape == 3:
        xs = rng.sample(range(100), rng.randint(4, 7))
        i = rng.randrange(len(xs))
        want = sorted(xs)[i] if must_pass else sorted(xs)[i] + 1
        return f"        items = sorted({xs!r})\n        self.assertTrue(items[{i}] == {want})\n"
    a, b = rng.randint(1, 50), rng.randint(1, 50)
    exc = "ZeroDivisionError" if must_pass else rng.choice(["ValueError", "KeyError", "TypeError"])
    return f"        with self.assertRaises({exc}):\n            ({a} + {b}) / 0\n"


def rename(outcomes: dict[str, str], listed: list[str]) -> dict[str, str]:
    """The reporter's `module.Class.test_name` ids in the forms the task lists them."""
    forms: dict[str, list[str]] = {}
    for tid in listed:
        full = canonical(tid)
        if full is not None and full != tid:
            forms.setdefault(full, []).append(tid)
    out: dict[str, str] = {}
    for tid, outcome in outcomes.items():
        for form in forms.get(tid, []):
            out[form] = outcome
        if tid not in forms or tid in listed:
            out.setdefault(tid, outcome)
    return out


def run(order: Order, tree: Tree, result: dict[str, Any], canaries: dict[str, Any] | None) -> None:
    check = order.check
    env_words, argv = split_command(check.command)
    labels = list(check.args or [])
    loaded = canaries is not None and "expect" in canaries
    if loaded:
        assert canaries is not None
        labels = [canaries["module"]] + labels  # first: imported before any module of the submission's
    if PLACEHOLDER in argv:
        i = argv.index(PLACEHOLDER)
        argv = argv[:i] + labels + [w for w in argv[i + 1 :] if w != PLACEHOLDER]
    elif not discovers(argv):
        argv = argv + labels
    reporters = install_reporters("python")
    module = "grader_unittest_" + secrets.token_hex(8)
    os.rename(os.path.join(reporters, "unittest_report.py"), os.path.join(reporters, module + ".py"))
    bytecode.place("reporters/python/unittest_report.py", os.path.join(reporters, module + ".py"), order.pycache)
    listed = list(check.paths)
    settings = {
        "repo": order.repo,
        "tests": sorted(set(check.trusted_tests) | ({canaries["path"]} if loaded and canaries else set())),
        "canaries": [canaries["module"]] if loaded and canaries else [],
        "aliases": sorted(t for t in listed if canonical(t) is None),
    }
    path = ":".join(p for p in (env_words.get("PYTHONPATH"), reporters) if p)
    env = {**python_env(order), **env_words, "PYTHONPATH": path}
    unit, rep = run_signed(order, ["python", "-m", module, *argv], settings=settings, env=env)
    _, report = merge([("unittest", unit, rep)], "unittest")
    exit_code = unit["exit_code"]
    if report.get("end") is not None:
        report["end"]["exit"] = exit_code  # one process: its own status (merge checked it against the reporter's)
    split_canaries(report, canaries)
    if loaded and canaries and canaries["module"] in report.get("collect_errors", []):
        others = [c for c in report["collect_errors"] if c != canaries["module"]]
        if not others:  # its imports cannot fail: something in the test process stopped it loading
            report["integrity"].append(f"the canary module {canaries['module']} could not be imported")
    report["outcomes"] = rename(report.get("outcomes", {}), listed)
    finish_run(result, unit)
    result["exit_code"] = exit_code
    result["output"] = text(unit["out"].data())
    result["report"] = report
