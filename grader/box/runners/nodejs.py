"""What the Node.js runners share (tap, node-test, mocha, jest, vitest; each is a module of its own
that imports this one): the paths a patch may not change, the plan of a check, the
environment of every node process, the canaries, the test files sealed for the run, and
the units' reports folded into one.

Outcomes come only from the signed reporters of grader/box/reporters/node/ (README.md
there), copied root-owned outside the repository for each run and named on node's command
line by the runner alone. A runner runs its tests as one or more units: tape, node:test and
mocha one process per test file (a file that crashes, or fails to load, loses its own
tests only), jest one process in band. Each unit has its own report channel; the reports
are folded with signed.merge, each process's last word held to its own exit status.

A unit that did not run to its end (it failed to load, crashed, or its process ended
before its runner's last word) counts every test of it failed, never passed. The canaries
run inside the test files' processes (jest, vitest: appended to the test files); their
failures are taken back out of the exit status here, where both the status and the signed
outcomes are known.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import random
import re
import stat
from typing import Any

from .. import signed
from ..hidden import hidden_manifest
from ..order import CheckSpec, Order
from ..proc import remaining, run_as_user, text
from ..tree import Tree, rel_ok
from . import node_forms, node_guard
from .common import test_file

JS_SUFFIXES = (".js", ".cjs", ".mjs", ".jsx", ".ts", ".cts", ".mts", ".tsx")
REPORTERS = "node"  # grader/box/reporters/node/
# Every Node.js runner reports `<file>::<describe > ... > test>`; a task may list a test as
# other benchmarks write it (the title path joined otherwise, the bare title, the file
# alone), resolved on the host (grader/checks/ids.py)
ID_STYLE = "title-path"

# What a patch may not change under any Node.js runner (restored to the base after the
# patch; a file it adds there is removed):
# - test locations: *.test.*, *.spec.* and test.js anywhere, every file of a test/, tests/,
#   __tests__/ or spec/ directory that holds a test file (or a hidden one) at the base;
# - runner configuration: package.json (node reads its "type", "imports", "exports" and
#   "main" when it loads a test file; its scripts and its mocha/jest keys configure runners),
#   .mocharc*, jest.config.*, vitest.* (config, workspace, setup), vite.config.*,
#   babel.config.* and .babelrc*, tsconfig*.json (a task's command may compile the tests
#   with it; ts-jest and vite read it), the configuration vite's plugins load in vitest's
#   main process (postcss, tailwind, svelte), the lock files, .npmrc, .nvmrc;
# - what node loads by itself: every node_modules/ directory (a patch may not bring or
#   change installed packages), __mocks__/ (jest applies them by itself), __snapshots__/
#   (what jest's and vitest's snapshot assertions compare with), native addons (*.node),
#   Yarn's .pnp.* loaders.
NODE_PROTECT: dict[str, list[str]] = {
    "names": [
        "package.json",
        "package-lock.json",
        "npm-shrinkwrap.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "pnpm-workspace.yaml",
        ".npmrc",
        ".yarnrc",
        ".yarnrc.yml",
        ".nvmrc",
        ".node-version",
        ".pnp.cjs",
        ".pnp.js",
        ".pnp.loader.mjs",
    ],
    "suffixes": [".node"],
    "prefixes": [
        ".mocharc",
        "jest.config",
        "vitest.",
        "vite.config",
        "babel.config",
        ".babelrc",
        "tsconfig",
        # what vite's plugins load in vitest's main process, beside its reporter
        "postcss.config",
        ".postcssrc",
        "tailwind.config",
        "svelte.config",
    ],
    "dir_suffixes": ["node_modules", "__mocks__", "__snapshots__"],
    "test_modules": ["*.test.*", "*.spec.*", "test.js", "test.cjs", "test.mjs", "test.ts"],
    "test_dir_names": ["test", "tests", "__tests__", "spec"],
}

# What every node process of a check runs with. NODE_OPTIONS is the supervisor's (empty):
# --require / --import flags come only from the runner's own command line. NODE_PATH adds no
# module directory; NODE_TEST_CONTEXT empty keeps node:test reporting in this process (node
# --test sets it for its children, which then speak its child protocol on stdout).
NODE_ENV = {"NODE_OPTIONS": "", "NODE_PATH": "", "NODE_TEST_CONTEXT": "", "NO_COLOR": "1"}

# node's own options a task's args may not give: they load code before the runner's
# reporter, open the inspector, reach node's internals or replace the runner.
NODE_REFUSED = (
    "-r",
    "--require",
    "--import",
    "--loader",
    "--experimental-loader",
    "--experimental-policy",
    "--experimental-permission",
    "--inspect",
    "--inspect-brk",
    "--inspect-port",
    "--inspect-wait",
    "--debug-port",
    "--expose-internals",
    "--expose_internals",
    "--allow-natives-syntax",
    "--test",
    "--test-reporter",
    "--test-reporter-destination",
    "--test-only",
    "--test-name-pattern",
    "--watch",
    "--watch-path",
    "-e",
    "--eval",
    "-p",
    "--print",
    "-i",
    "--interactive",
    "--env-file",
    "--snapshot-blob",
    "--build-snapshot",
    "--openssl-config",
    "--icu-data-dir",
    "--experimental-vm-modules",
)


def refused(arg: str, words: tuple[str, ...]) -> bool:
    """Whether `arg` is one of `words`, alone, with `=value`, or a short option with its
    value run together (-rfile)."""
    for w in words:
        if arg == w or arg.startswith(w + "="):
            return True
        if len(w) == 2 and w.startswith("-") and not w.startswith("--") and arg.startswith(w) and len(arg) > 2:
            if not arg.startswith("--"):
                return True
    return False


def is_js(rel: str) -> bool:
    return rel.endswith(JS_SUFFIXES) and not rel.endswith(".d.ts")


def file_id(tid: str) -> bool:
    """Whether a listed id is a test file alone (all its tests must pass)."""
    tid = tid.strip()
    return "::" not in tid and is_js(tid) and " " not in tid and rel_ok(tid.removeprefix("./"))


def listed_files(ids: list[str]) -> list[str]:
    """The files a task's ids name (`<file>::<name>`, or a test file alone), protected with
    the hidden tests and run."""
    named = {test_file(tid).strip().removeprefix("./") for tid in ids if "::" in tid}
    named |= {tid.strip().removeprefix("./") for tid in ids if file_id(tid)}
    return sorted(named)


def hidden_js_tests(hidden: dict[str, str | None]) -> list[str]:
    return sorted(p for p, d in hidden.items() if d is not None and is_js(p))


def check_paths(paths: list[str]) -> list[str]:
    for p in paths:
        if not rel_ok(p) or p.startswith("-"):
            raise ValueError(f"test path {p!r} is not a path inside the repository")
    return paths


def words(test_ids: list[str]) -> list[str]:
    """Words of the task's own test names (`<file>::<describe > ... > test>`), for canaries
    that look like them."""
    out: set[str] = set()
    for tid in test_ids:
        name = tid.split("::", 1)[-1]
        out |= {w.lower() for w in re.split(r"[^A-Za-z0-9]+", name) if re.fullmatch(r"[A-Za-z][A-Za-z0-9]{1,15}", w)}
    return sorted(out)


def plan_check(
    kind: str,
    check: dict[str, Any],
    hidden: dict[str, str | None],
    refused_args: tuple[str, ...],
) -> CheckSpec:
    """The order's check of a Node.js runner: the test files to run (`paths`, default the
    hidden test files and the files the lists name), the task's args, an optional command
    run first (a build step: tsc, say), and where the canaries go."""
    listed = list(check.get("fail_to_pass") or []) + list(check.get("pass_to_pass") or [])
    tests = hidden_js_tests(hidden)
    named = set(listed_files(listed))
    paths = check_paths(list(check.get("paths") or []) or sorted(set(tests) | named))
    if not paths:
        raise ValueError(f"a {kind} check needs paths or hidden test files")
    args = [str(a) for a in check.get("args") or []]
    for arg in args:
        if refused(arg, refused_args):
            raise ValueError(f"the {kind} runner sets {arg.split('=', 1)[0]} itself (or never): not in args")
    home = posixpath.dirname(paths[0])
    sources = [t for t in tests if t in paths] or tests
    return CheckSpec(
        kind=kind,
        args=args,
        paths=paths,
        command=check.get("command") or None,
        canaries=bool(check.get("canaries", True)),
        canary_dir=home,
        canary_words=words(listed),
        canary_sources=sources[:3],
    )


# --- the run ----------------------------------------------------------------------------------


def node_env() -> dict[str, str]:
    return dict(NODE_ENV)


def settings(order: Order, canaries: dict[str, Any] | None, unit: str | None) -> dict[str, Any]:
    """What a unit's reporter reads from its key descriptor: the repository, this run's
    canary files, the test file the unit runs."""
    return {
        "repo": order.repo,
        "canaries": [canaries["path"]] if canaries and "expect" in canaries and "path" in canaries else [],
        "unit": unit,
    }


def lock_dirs(order: Order, tree: Tree, rels: list[str]) -> None:
    """The directories holding `rels` (up to, not including, the repository's root) become
    root's, 0755, for the run: nothing can be added, renamed or swapped beside them (a
    node_modules/ beside a test file, a test file swapped between two units)."""
    dirs: set[str] = set()
    for rel in rels:
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


def seal(order: Order, tree: Tree, extra: list[str]) -> None:
    """The task's own test code made root's and read-only for the run (the hidden tests are
    already), so that one unit's process cannot rewrite what a later unit loads: every
    regular file the supervisor trusts as the task's tests (listed test files, every file of
    the test directories) and `extra` (files the check's command wrote); their directories
    and those of the hidden tests locked (lock_dirs)."""
    files: set[str] = set(extra)
    dirs = [d.rstrip("/") for d in order.check.trusted_tests if d.endswith("/")]
    files |= {f for f in order.check.trusted_tests if not f.endswith("/")}
    for d in dirs:
        base = os.path.join(order.repo, d)
        for root, subdirs, names in os.walk(base, followlinks=False):
            subdirs[:] = [s for s in subdirs if s != "node_modules"]
            rel_root = os.path.relpath(root, order.repo)
            files |= {posixpath.join(rel_root, n) for n in names}
    for rel in sorted(files):
        if not rel_ok(rel):
            continue
        fd = tree._parent(rel, create=False)
        if fd is None:
            continue
        try:
            ffd = os.open(rel.rsplit("/", 1)[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
        except OSError:
            continue  # gone, a link, or not a file to open
        finally:
            os.close(fd)
        try:
            st = os.fstat(ffd)
            if stat.S_ISREG(st.st_mode) and st.st_uid != 0:
                os.fchown(ffd, 0, 0)  # first: root may chmod only what it owns (no CAP_FOWNER)
                os.fchmod(ffd, stat.S_IMODE(st.st_mode) & 0o555)
        finally:
            os.close(ffd)
    manifest = hidden_manifest(order)
    lock_dirs(order, tree, [r for r, d in manifest.items() if d is not None] + list(order.check.paths) + list(extra))


def guard(order: Order) -> node_guard.Guard:
    """What node loads by itself, sealed and held for the run before any submitted code
    runs in it (node_guard): every node_modules/, the runner configuration the patch may
    not change (package.json, ...)."""
    g = node_guard.Guard(
        order.repo,
        (order.uid, order.gid),
        set(NODE_PROTECT["names"]),
        tuple(NODE_PROTECT["prefixes"]),
        tuple(NODE_PROTECT["suffixes"]),
    )
    g.arm()
    return g


def run_command(order: Order, result: dict[str, Any]) -> str:
    """The check's command (a build step before the tests, such as tsc), as the
    unprivileged user with sh. Its exit status does not decide (the tests do); its output
    goes first in the check's output."""
    assert order.check.command is not None
    run = run_as_user(
        order,
        ["sh", "-c", order.check.command],
        timeout=remaining(order),
        stdout_limit=order.output_limit,
        env=node_env(),
    )
    result["timed_out"] = result.get("timed_out", False) or run["timed_out"]
    result["command_exit_code"] = run["exit_code"]
    return f"== {order.check.command} (exit status {run['exit_code']})\n{text(run['out'].data())}\n"


# --- the units' reports -----------------------------------------------------------------------

Unit = tuple[str, dict[str, Any], dict[str, Any]]  # (label: the test file, the run, its report)


def settle(unit: Unit, canary_ids: set[str], files: list[str]) -> Unit:
    """A unit that did not run to its end counts every test of it failed, never passed: a
    file its reporter names as not loaded or crashed (a collect error: every test of that
    file), or a process that ended with a failing status before its reporter's last word
    (every test of the unit; its end is then taken as its exit status, with a collect error
    for each of its test `files`). A unit that exited 0 without its last word, a forged or an unusable
    report are left to signed.merge, which names them. Canaries keep their outcomes."""
    label, run, rep = unit
    if rep.get("problem") or rep.get("forged") or run.get("timed_out"):
        return unit
    rep = dict(rep)
    outcomes = dict(rep.get("outcomes", {}))
    collect = list(rep.get("collect_errors", []))
    ended = rep.get("end") is not None and rep.get("sessions", 0) > 0 and rep.get("ends", 0) >= rep.get("sessions", 0)
    if not ended and run.get("exit_code") not in (0, None):
        for tid in outcomes:
            if tid not in canary_ids and outcomes[tid] == "passed":
                outcomes[tid] = "failed"
        collect += [f for f in files if f not in collect]
        rep["end"] = {"t": "end", "exit": run["exit_code"]}
        rep["sessions"] = rep["ends"] = max(1, rep.get("sessions", 0))
    else:
        for bad in collect:
            for tid in outcomes:
                if tid.startswith(bad + "::") and tid not in canary_ids and outcomes[tid] == "passed":
                    outcomes[tid] = "failed"
    rep["outcomes"], rep["collect_errors"] = outcomes, collect
    return label, run, rep


def status_without_canaries(unit: Unit, canary_ids: set[str], by_count: bool) -> int | None:
    """The unit's exit status with the canaries' failures taken back out: 0 where the
    process failed only because must-fail canaries failed (its status and its reporter's
    last word agree, no other test failed, every file loaded). `by_count`: the status is
    the number of failures (mocha), else 1 for any failure (tape, node:test, jest)."""
    _, run, rep = unit
    code: int | None = run.get("exit_code")
    end = rep.get("end") or {}
    if code in (0, None) or rep.get("forged") or rep.get("problem") or end.get("exit") != code:
        return code
    outcomes = rep.get("outcomes", {})
    if rep.get("collect_errors") or any(
        o in ("failed", "error") for tid, o in outcomes.items() if tid not in canary_ids
    ):
        return code
    failed = sum(1 for tid, o in outcomes.items() if tid in canary_ids and o == "failed")
    if failed and code == (min(failed, 255) if by_count else 1):
        return 0
    return code


def fold(
    units: list[Unit],
    canaries: dict[str, Any] | None,
    runner: str,
    *,
    by_count: bool = False,
    files: dict[str, list[str]] | None = None,
) -> tuple[int | None, dict[str, Any]]:
    """The units' reports as one (signed.merge), the canaries' outcomes taken apart, and the
    check's exit status: 0 when every unit's process exited 0 or failed only by its
    canaries, else 1 (None when nothing ran)."""
    ids = set(canaries["expect"]) if canaries and "expect" in canaries else set()
    settled = [settle(u, ids, (files or {}).get(u[0], [u[0]])) for u in units]
    _, report = signed.merge(settled, runner)
    statuses = [status_without_canaries(u, ids, by_count) for u in settled]
    overall = None if not statuses else (0 if all(s == 0 for s in statuses) else 1)
    if report.get("end") is not None:
        report["end"] = {"t": "end", "exit": overall}
    signed.split_canaries(report, canaries)
    return overall, report


def run_units(
    order: Order,
    tree: Tree,
    result: dict[str, Any],
    canaries: dict[str, Any] | None,
    commands: list[tuple[str, list[str], list[str]]],
    runner: str,
    held: node_guard.Guard,
    *,
    by_count: bool = False,
    prelude: str = "",
    extra_sealed: list[str] | None = None,
    watched_extra: list[str] | None = None,
) -> None:
    """Run each (label, test files, argv) as a unit with a channel of its own, one after the
    other, and record the folded report in `result`. Stops early when the time is up.
    `held`: what node loads by itself (`prepare`), compared after each unit;
    `extra_sealed`: more files sealed like the task's tests; `watched_extra`: more files
    held like the configuration (the modules it names)."""
    try:
        seal(order, tree, list(extra_sealed or []))
        held.add(list(watched_extra or []))
        held.arm()  # what the check's command made, sealed and held as the rest
        moved = set(held.breaches())  # what it changed of what was held before it ran
        units: list[Unit] = []
        seconds = 0.0
        if result.get("timed_out"):  # the command used the time up
            commands = []
        for label, _, argv in commands:
            if remaining(order) <= 0:
                break
            run, rep = signed.run_signed(order, argv, settings=settings(order, canaries, label), env=node_env())
            units.append((label, run, rep))
            seconds += run["seconds"]
            moved |= set(held.breaches())  # after each unit: one undone by a later unit is seen
            if run["timed_out"]:
                break
    finally:
        held.close()
    files = {label: list(tests) for label, tests, _ in commands}
    exit_code, report = fold(units, canaries, runner, by_count=by_count, files=files)
    if moved and not report.get("problem"):
        names = sorted(moved)
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        report.setdefault("integrity", []).append(f"{shown}: loaded by node or the runner, changed while the tests ran")
    timed_out = any(run["timed_out"] for _, run, _ in units) or (len(units) < len(commands))
    output = prelude + signed.output_of(units, order.output_limit)
    signed.finish(result, exit_code, output, report, timed_out)
    result["check_seconds"] = round(seconds, 4)


def config_at_base(order: Order, argv: list[str], what: str, stdout_limit: int) -> str:
    """What a runner prints of the repository's configuration, read at the base commit
    (no submitted code exists yet) as the unprivileged user; a runner that cannot read it
    is the task's fault, never a verdict (ValueError, naming `what`)."""
    run = run_as_user(
        order,
        argv,
        timeout=min(120.0, remaining(order)),
        stdout_limit=stdout_limit,
        separate_stderr=True,
        env=node_env(),
    )
    out = text(run["out"].data())
    if run["exit_code"] != 0 or run["timed_out"]:
        err = text(run["err"].data()) if run["err"] else ""
        raise ValueError(f"{what} at the base commit (exit status {run['exit_code']}): {(err or out)[-1500:]}")
    return out


def reporter_dir() -> str:
    return signed.install_reporters(REPORTERS)


# --- canaries ---------------------------------------------------------------------------------

CANARY_WORDS = [
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
    "works",
    "handles",
    "returns",
    "keeps",
    "options",
    "nested",
    "string",
    "number",
    "array",
    "object",
]
REQUIRE = re.compile(r"""\brequire\(\s*(['"])([^'"\n]+)\1\s*\)""")
IMPORT = re.compile(r"""(?m)^\s*(?:import|export)\s+(?:[^'";]*?\s+from\s+)?(['"])([^'"\n]+)\1""")
TYPE_ONLY = re.compile(r"\s*(?:import|export)\s+type\s")
FRAMEWORKS = {"tape", "mocha", "node:test", "test", "@jest/globals", "jest", "vitest"}


def module_kind(tree: Tree, rel: str) -> str:
    """`esm` or `cjs`: how node loads the file at `rel` (its extension, else the "type" of
    the nearest package.json above it, as the patch cannot change it)."""
    if rel.endswith((".mjs", ".mts")):
        return "esm"
    if rel.endswith((".cjs", ".cts")):
        return "cjs"
    parts = rel.split("/")[:-1]
    for i in range(len(parts), -1, -1):
        data = tree.read("/".join(parts[:i] + ["package.json"]))
        if data is None:
            continue
        try:
            doc = json.loads(data)
        except ValueError:
            return "cjs"
        return "esm" if isinstance(doc, dict) and doc.get("type") == "module" else "cjs"
    return "cjs"


def esm_syntax(source: str) -> bool:
    """Whether test code is written as ES modules (import / export statements)."""
    return bool(re.search(r"(?m)^\s*(?:import\s*[\w{*'\"]|export\s)", source))


def borrowed(check: CheckSpec, tree: Tree) -> list[str]:
    """The modules the hidden tests load (their require() and import specifiers), so that
    the canaries load the code under test as the tests do. Test frameworks and the test
    files the check runs are left out."""
    tests = {posixpath.splitext(p)[0] for p in list(check.paths) + list(check.canary_sources)}
    out: list[str] = []
    for rel in check.canary_sources:
        data = tree.read(rel)
        if data is None:
            continue
        src = data.decode("utf-8", "replace")
        for m in list(REQUIRE.finditer(src)) + list(IMPORT.finditer(src)):
            spec = m.group(2)
            if spec in FRAMEWORKS or spec in out or TYPE_ONLY.match(m.group(0)):
                continue  # a framework, a repeat, or types only (nothing there at run time)
            if spec.startswith("."):  # a test file itself would run its tests again
                target = posixpath.normpath(posixpath.join(posixpath.dirname(rel), spec))
                if target in tests or posixpath.splitext(target)[0] in tests:
                    continue
            out.append(spec)
    return out[:20]


def _js(value: Any) -> str:
    return json.dumps(value)


THROWS_SHAPE = 4


def canary_check(
    rng: random.Random, must_pass: bool, style: str, *, pure: bool = False, shape: int | None = None
) -> str:
    """One assertion, in the runner's own style (tape's `t`, node's assert, jest's expect),
    that holds iff must_pass. `pure`: of the language alone (no node module: a TypeScript
    test file may have no node types). `shape`: drawn unless given (THROWS_SHAPE: a
    function that must throw)."""
    if shape is None or (pure and shape == 2):
        shape = rng.choice((0, 1, 3, 4)) if pure else rng.randrange(5)
    want: Any
    if shape == 0:
        xs = [rng.randint(-50, 99) for _ in range(rng.randint(3, 6))]
        got = f"{_js(xs)}.reduce((a, b) => a + b, 0)"
        want = sum(xs) if must_pass else sum(xs) + rng.choice([-2, -1, 1, 3])
    elif shape == 1:
        word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 8)))
        k = rng.randint(2, 9)
        got = f"{_js(word)}.repeat({k}).length"
        want = len(word) * k + (0 if must_pass else 1)
    elif shape == 2:
        seed = f"{rng.getrandbits(48):012x}"
        digest = hashlib.sha256(seed.encode()).hexdigest()[:10]
        if not must_pass:
            digest = digest[:-1] + ("0" if digest[-1] != "0" else "1")
        got = f"require('crypto').createHash('sha256').update({_js(seed)}).digest('hex').slice(0, 10)"
        want = digest
    elif shape == 3:
        xs = rng.sample(range(100), rng.randint(4, 7))
        i = rng.randrange(len(xs))
        got = f"{_js(xs)}.sort((a, b) => a - b)[{i}]"
        want = sorted(xs)[i] + (0 if must_pass else 1)
    else:
        text_ = "{" if must_pass else _js({"k": rng.randint(1, 99)})
        if style == "tape":
            return f"  t.throws(() => JSON.parse({_js(text_)}), SyntaxError);\n"
        if style == "jest":
            return f"  expect(() => JSON.parse({_js(text_)})).toThrow(SyntaxError);\n"
        return f"  assert.throws(() => JSON.parse({_js(text_)}), SyntaxError);\n"
    if style == "tape":
        return f"  t.equal({got}, {_js(want)});\n"
    if style == "jest":
        return f"  expect({got}).toBe({_js(want)});\n"
    return f"  assert.strictEqual({got}, {_js(want)});\n"


def canary_name(rng: random.Random, vocabulary: list[str], taken: set[str], text_: str) -> str:
    for _ in range(200):
        name = " ".join(rng.sample(vocabulary, rng.randint(2, min(4, len(vocabulary)))))
        if name not in taken and name not in text_:
            return name
    raise ValueError("no canary name left")


def canary_file_name(check: CheckSpec, tree: Tree, rng: random.Random, vocabulary: list[str], suffix: str) -> str:
    """A new file beside the tests, named like them: `<words>.test.js` beside *.test.js
    files, `<words>.js` beside parse.js."""
    model = posixpath.basename(check.paths[0])
    stem, ext = posixpath.splitext(model)
    inner = ""
    for marker in (".test", ".spec", "_test", "-test"):
        if stem.endswith(marker):
            inner = marker
            break
    sep = "-" if "-" in stem else ("_" if "_" in stem else "-")
    ext = suffix or ext or ".js"
    folder = check.canary_dir
    for _ in range(200):
        base = sep.join(rng.sample(vocabulary, rng.randint(1, 2))) + inner + ext
        rel = f"{folder}/{base}" if folder else base
        if tree.lstat(rel) is None and rel not in check.paths:
            return rel
    raise ValueError("no canary file name left")


Canary = tuple[str, bool, "int | str | None"]  # name, must pass, its shape or its own body


def canary_body(rng: random.Random, test: Canary, style: str, *, pure: bool = False) -> str:
    """The body of one canary: its own lines (a form of the hidden tests, node_forms.py),
    else a check of its shape or of a drawn one."""
    _, must_pass, extra = test
    if isinstance(extra, str):
        return extra
    return canary_check(rng, must_pass, style, pure=pure, shape=extra)


def opening(body: str) -> str:
    return "async " if "await " in body else ""


def transformed_source(style: str, specs: list[str], tests: list[Canary], rng: random.Random) -> str:
    """A canary file for a runner that transforms its test files (jest with the repository's
    configuration, vitest): written in the syntax of the tests beside it (ES modules, valid
    TypeScript: no types, no node module), loading what the tests load by dynamic import
    (a module the tests import only for its types is not there at run time)."""
    lines = ["import { test, expect, beforeAll } from 'vitest';"] if style == "vitest" else []
    if specs:
        lines += [
            "beforeAll(async () => {",
            f"  for (const spec of {_js(specs)}) {{",
            "    try { await import(spec); } catch { /* as the tests load it */ }",
            "  }",
            "});",
        ]
    lines.append("export {};")
    body = "\n".join(lines) + "\n"
    for test in tests:
        check = canary_body(rng, test, "jest", pure=True)
        body += f"\ntest({_js(test[0])}, {opening(check)}() => {{\n{check}}});\n"
    return body


def canary_source(style: str, kind: str, specs: list[str], tests: list[Canary], rng: random.Random) -> str:
    """The canary file: `style` tape | node-test | mocha | jest | vitest, `kind` cjs | esm
    (for jest and vitest esm means a transformed file: transformed_source)."""
    if style == "vitest" or (style == "jest" and kind == "esm"):
        return transformed_source(style, specs, tests, rng)
    lines: list[str] = []
    if kind == "esm":
        if style == "tape":
            lines.append("import test from 'tape';")
        elif style == "node-test":
            lines.append("import test from 'node:test';")
        if style in ("node-test", "mocha"):
            lines.append("import assert from 'node:assert';")
        lines.append("import { createHash } from 'node:crypto';")
        for spec in specs:
            lines.append(f"try {{ await import({_js(spec)}); }} catch (e) {{ /* as the tests load it */ }}")
    else:
        lines.append("'use strict';")
        if style == "tape":
            lines.append("const test = require('tape');")
        elif style == "node-test":
            lines.append("const test = require('node:test');")
        if style in ("node-test", "mocha"):
            lines.append("const assert = require('node:assert');")
        for spec in specs:
            lines.append(f"try {{ require({_js(spec)}); }} catch (e) {{ /* as the tests load it */ }}")
    body = "\n".join(lines) + "\n"
    for test in tests:
        name = test[0]
        check = canary_body(rng, test, "tape" if style == "tape" else "jest" if style == "jest" else "assert")
        if kind == "esm":
            check = check.replace("require('crypto').createHash", "createHash")
        if style == "tape":
            body += f"\ntest({_js(name)}, {opening(check)}(t) => {{\n{check}  t.end();\n}});\n"
        elif style == "mocha":
            body += f"\nit({_js(name)}, {opening(check)}function () {{\n{check}}});\n"
        else:
            body += f"\ntest({_js(name)}, {opening(check)}() => {{\n{check}}});\n"
    return body


def make_canaries(
    order: Order, tree: Tree, style: str, blockers: tuple[str, ...], *, per_unit: bool, transformed: bool = False
) -> dict[str, Any] | None:
    """This run's canary file beside the tests, named like them: tests in the runner's own
    style that must fail and tests that must pass, loading what the hidden tests load.
    `per_unit`: they run inside each test file's process and are named as that file's tests
    (tape, node:test, mocha), else (jest, vitest) they are appended to each of the check's
    test files where every one can take them (inline_texts), or are one more test file of
    the run. With a
    command (a build step that may remove and rewrite the test directory) the file is
    written by `write_canaries` after it; its digest is known then. `transformed`: the
    runner transforms its test files (jest with the repository's configuration, vitest):
    the canary file takes the tests' own extension and syntax."""
    check = order.check
    if not check.canaries:
        return None
    for arg in check.args or []:
        if refused(arg, blockers):
            return {"skipped": f"the task's option {arg} could stop the run early or deselect them"}
    rng = random.SystemRandom()
    sources = ""
    for rel in check.canary_sources + list(check.paths):
        data = tree.read(rel)
        if data is not None:
            sources += data.decode("utf-8", "replace")
    vocabulary = sorted(set(check.canary_words) | set(CANARY_WORDS))
    # must pass: drawn shapes; must fail: one through a value's check and one through a
    # function that must throw (a framework may report the two by different paths), and
    # one through each assertion form of the hidden tests (node_forms.py)
    kinds: list[tuple[bool, int | str | None]] = [(True, None)] * rng.randint(2, 3)
    kinds += [(False, rng.choice((0, 1, 3))), (False, THROWS_SHAPE)]
    kinds += [(False, line) for line in node_forms.failing_checks(sources, style, rng)]
    rng.shuffle(kinds)
    tests: list[Canary] = []
    taken: set[str] = set()
    for must_pass, extra in kinds:
        name = canary_name(rng, vocabulary, taken, sources)
        taken.add(name)
        tests.append((name, must_pass, extra))
    inline = inline_texts(order, tree, style)
    if inline is not None:
        return append_canaries(tree, inline, style, tests, rng)
    plain_jest = style == "jest" and not transformed
    suffix = ".js" if plain_jest and posixpath.splitext(check.paths[0])[1] not in (".js", ".cjs") else ""
    rel = canary_file_name(check, tree, rng, vocabulary, suffix)
    expect: dict[str, str] = {}
    for name, must_pass, _ in tests:
        for owner in check.paths if per_unit else [rel]:
            expect[f"{owner}::{name}"] = "passed" if must_pass else "failed"
    out: dict[str, Any] = {
        "path": rel,
        "expect": expect,
        "style": style,
        "tests": [list(t) for t in tests],
        "specs": borrowed(check, tree),
        "seed": rng.getrandbits(64),
    }
    if plain_jest:
        out["kind"] = "cjs"
    elif transformed:
        # TypeScript (which may have no node types for require) and ES module tests: the
        # transformed form; plain CommonJS tests: CommonJS
        typed = rel.endswith((".ts", ".tsx", ".mts", ".cts"))
        out["kind"] = "esm" if style == "vitest" or typed or esm_syntax(sources) else "cjs"
    if not check.command:
        if not write_canaries(tree, out):
            return {"skipped": "the canaries cannot load as this task's test files do (an ES module under tape)"}
    else:
        out["digest"] = None  # written after the command
    return out


# A test file the canaries are not appended to (they get a file of their own): one that
# selects its own tests (`.only`, `fit`: the appended ones would not run), or has a hook
# that may judge the tests around it (one that asserts: an afterEach that checks a spy, a
# beforeEach that counts assertions), which the canaries must not meet
ONLY = re.compile(r"(?<![\w$])(?:(?:describe|it|test|suite)\s*\.\s*only|f(?:it|describe|test))\s*\(")
HOOK = re.compile(r"(?<![\w$.])(?:before|after)(?:Each|All)\s*\(")
JUDGES = re.compile(r"(?<![\w$])(?:expect|assert)(?![\w$])")
INLINE_BYTES = 2 << 20
TYPED = (".ts", ".tsx", ".mts", ".cts")


def inline_texts(order: Order, tree: Tree, style: str) -> dict[str, str] | None:
    """The texts of the check's test files, when jest's or vitest's canaries can be
    appended to every one of them (so they share each hidden test's file, and a patch
    cannot tell them apart by the file a test is in); None where one file cannot take them
    (then they get a file of their own, as before): a check with a command (it may rewrite
    the files), a file that is not plain UTF-8 text, selects its own tests or has hooks
    that may judge every test or binds `expect` to something not the framework's,
    CommonJS under vitest, or a jest configuration that gives its tests no globals."""
    check = order.check
    if style not in ("jest", "vitest") or check.command or not check.paths:
        return None
    shown = (check.base_config or {}).get("shown")
    if style == "jest" and isinstance(shown, dict):
        projects = shown.get("configs")
        projects = projects if isinstance(projects, list) else []
        if any(isinstance(p, dict) and p.get("injectGlobals") is False for p in projects):
            return None
    out: dict[str, str] = {}
    for rel in check.paths:
        st = tree.lstat(rel)
        if st is None or not stat.S_ISREG(st.st_mode) or st.st_size > INLINE_BYTES:
            return None
        if style == "vitest" and rel.endswith((".cjs", ".cts")):
            return None
        try:
            text_ = (tree.read(rel, INLINE_BYTES) or b"").decode("utf-8")
        except UnicodeDecodeError:
            return None
        if "\x00" in text_ or ONLY.search(text_) or judging_hook(text_) or expect_binding(text_) == "other":
            return None
        out[rel] = text_
    return out


def judging_hook(text_: str) -> bool:
    """Whether a hook of the file asserts anything (its call's text names expect or assert;
    a hook that never closes counts as one)."""
    for m in HOOK.finditer(text_):
        end = node_forms.call_end(text_, m.end())
        if JUDGES.search(text_[m.end() : end if end > 0 else len(text_)]):
            return True
    return False


# How a test file binds `expect`: by name from the framework's module (an import, or a
# require of @jest/globals), by a declaration or destructuring of its own (chai's, say), or
# not at all (the global jest and vitest's `globals` give)
FRAMEWORK_MODULES = ("vitest", "@jest/globals")
NAMED_IMPORT = re.compile(
    r"""\bimport\s+(?:type\s+)?(?:[\w$]+\s*,\s*)?\{([^}]*)\}\s*from\s*(['"])([^'"\n]+)\2"""
    r"""|\{([^}]*)\}\s*=\s*(?:require\s*\(|await\s+import\s*\()\s*(['"])([^'"\n]+)\5"""
)
DESTRUCTURED = re.compile(r"\{([^{}]*)\}\s*=(?!=)")
DECLARED = re.compile(
    r"(?<![\w$.])(?:const|let|var|function|class)\s+expect(?![\w$])|(?<![\w$.])expect\s*=(?![=>])"
    r"|\bimport\s+(?:\*\s*as\s+)?expect(?![\w$])"
)


def _bound(names: str) -> bool:
    """Whether `expect` is a name a list of imported or destructured names binds."""
    for part in names.split(","):
        part = part.strip().removeprefix("type ").strip()
        local = re.split(r"\s+as\s+|\s*:\s*", part)[-1].strip()
        if local == "expect":
            return True
    return False


def expect_binding(text_: str) -> str:
    """`framework`, `other` or `none`: how the file binds `expect` (see FRAMEWORK_MODULES)."""
    framework = other = False
    spans = []
    for m in NAMED_IMPORT.finditer(text_):
        names, module = (m.group(1), m.group(3)) if m.group(1) is not None else (m.group(4), m.group(6))
        spans.append(m.span())
        if _bound(names):
            framework |= module in FRAMEWORK_MODULES
            other |= module not in FRAMEWORK_MODULES
    for m in DESTRUCTURED.finditer(text_):
        if not any(a <= m.start() < b for a, b in spans) and _bound(m.group(1)):
            other = True
    other |= DECLARED.search(text_) is not None
    return "other" if other else "framework" if framework else "none"


def inline_source(rel: str, style: str, tests: list[Canary], rng: random.Random, binding: str) -> str:
    """The canaries as appended to the test file `rel`, in the file's own scope: each body
    calls `expect` as the file's tests do (the framework's, by the file's import, or the
    global, looked up when the test runs: a patch that swaps either swaps it for both; where
    vitest's tests have no import of it, one is added, shared by both), and each is
    registered by the framework's own `test` under a name of this run's (the file may bind
    `test` to something of its own). TypeScript: the global as `any` (ts-jest checks types)."""
    reg = "_" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(12))
    if style == "vitest":
        head = f"import {{ test as {reg} }} from 'vitest';\n"
        if binding == "none":
            head += "import { expect } from 'vitest';\n"
    else:
        g = "(globalThis as any)" if rel.endswith(TYPED) else "globalThis"
        head = f"const {reg} = {g}.test;\n"
    body = ""
    for test in tests:
        check = canary_body(rng, test, "jest", pure=True)
        body += f"\n{reg}({_js(test[0])}, {opening(check)}() => {{\n{check}}});\n"
    return f"\n;\n{head}{body}"


def append_canaries(
    tree: Tree, texts: dict[str, str], style: str, tests: list[Canary], rng: random.Random
) -> dict[str, Any]:
    """The canaries appended to each of the check's test files (root's, read-only, as the
    hidden tests are placed): each file's outcomes are judged by its own copy of them."""
    expect: dict[str, str] = {}
    files: dict[str, str] = {}
    for rel, original in sorted(texts.items()):
        data = (original + inline_source(rel, style, tests, rng, expect_binding(original))).encode()
        tree.write(rel, data, mode=0o444, owner=(0, 0))
        files[rel] = hashlib.sha256(data).hexdigest()
        for name, must_pass, _ in tests:
            expect[f"{rel}::{name}"] = "passed" if must_pass else "failed"
    return {"expect": expect, "files": files, "style": style, "tests": [list(t) for t in tests]}


def write_canaries(tree: Tree, canaries: dict[str, Any]) -> bool:
    """Write the canary file (root's, read-only) in the module kind of its place; False
    where the runner cannot load it so (tape requires it: CommonJS only)."""
    rel = canaries["path"]
    kind = canaries.get("kind") or module_kind(tree, rel)
    if canaries["style"] == "tape" and kind == "esm":
        return False
    tests: list[Canary] = [(str(n), bool(p), extra) for n, p, extra in canaries["tests"]]
    source = canary_source(canaries["style"], kind, list(canaries["specs"]), tests, random.Random(canaries["seed"]))
    data = source.encode()
    tree.write(rel, data, mode=0o444, owner=(0, 0))
    canaries["digest"] = hashlib.sha256(data).hexdigest()
    return True


def prepare(
    order: Order, tree: Tree, result: dict[str, Any], canaries: dict[str, Any] | None
) -> tuple[str, list[str], node_guard.Guard]:
    """Before the units: what node loads by itself sealed and held (`guard`), the check's
    command, if any, then the canary file it would have removed. Returns the command's
    output, the files it made that the units run (sealed like the task's tests) and the
    guard."""
    held = guard(order)
    if not order.check.command:
        return "", [], held
    prelude = run_command(order, result)
    made = [p for p in order.check.paths if tree.lstat(p) is not None]
    if canaries and "expect" in canaries:
        if write_canaries(tree, canaries):
            made.append(canaries["path"])
        else:
            canaries.clear()
            canaries["skipped"] = "the canaries cannot load as this task's test files do (an ES module under tape)"
    return prelude, made, held
