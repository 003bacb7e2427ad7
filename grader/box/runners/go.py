"""go: Go's tests, graded by the signed records of the environment's patched `testing`
package (environments/go-1.24, grader/box/reporters/go/README.md), never by their output.

Go's test runner is the test binary itself: package `testing` linked into it. The
go-1.24 image's GOROOT is patched so that every test binary built there writes one signed
record per test, subtest and example to the report channel when it is given one. So this
runner loads nothing at run time (reporters/go/ holds only the reporter's documentation
and demo); it checks the GOROOT is the patched one and then, as the unprivileged user:

1. `go list -e -json` of the check's package patterns: each package's import path,
   directory and test files;
2. `go test -c -vet=off -o BIN/` of every package with test files, before any test runs
   (the build cache is the user's to write: a test that ran first could plant entries for
   a later build); a package whose test binary does not build is a collect error (its
   tests did not run), never a fault of the grader's;
3. BIN becomes root's (nothing the tests run can swap a binary that runs later), and each
   binary runs directly in its package's directory, as `go test` runs it, with
   `-test.paniconexit0` and a report channel of its own (signed.run_signed), one after the
   other; their reports are folded into one (signed.merge).

Test ids are the names `go test -v` prints (`TestX`, `TestX/sub`, `ExampleX`), or
`<import path>::TestX`: the runner reports every test in the form the task's lists use
(docs/runners/go.md). The exit status it reports: 0 every binary exited 0, 1 some test
failed (or a binary died), 2 a package's test binary did not build, 3 no package of the
check has tests; the canaries' own failures are taken back out of it.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import stat
import tempfile
from typing import Any

from .. import signed
from ..order import CheckSpec, Order
from ..proc import remaining, run_as_user, text
from ..tree import Tree

# What the go command and the test binary load by themselves from the repository: every
# _test.go file is compiled into its package's test binary (its init() and TestMain run
# around the hidden tests), so every one of them goes back to the base whatever the
# task's `protect.tests` says, as conftest.py does for pytest; testdata/ is what the tests
# read; go.mod / go.sum / go.work (a replace directive, a toolchain line, a workspace
# swap the code the tests import), vendor/ (a vendored copy of a dependency, testify's
# assert say, is used in place of the module cache's), and *.syso objects (linked into
# the binary as they are). `dir_suffixes` matches any path component ending so: a
# directory named like `govendor` is protected too.
PROTECT: dict[str, list[str]] = {
    "names": ["go.mod", "go.sum", "go.work", "go.work.sum"],
    "suffixes": ["_test.go", ".syso"],
    "prefixes": [],
    "dir_suffixes": ["testdata", "vendor"],
    "test_modules": ["*_test.go"],
    "test_dir_names": [],
}

TESTS = True
COMMAND = "none"
DECIDED_BY = "test report"
LABEL = "go test"
EXIT_PASSED, EXIT_FAILED = 0, 1
EXIT_BUILD, EXIT_NO_TESTS = 2, 3
EXIT_MEANING: dict[int, str] = {
    EXIT_BUILD: "the test binary of a package did not build (a collect error: its tests did not run)",
    EXIT_NO_TESTS: "no package of the check's paths has test files",
}

# The runner's own words in CheckSpec.args, ahead of the task's flags: which form of test
# id it reports (see plan).
IDS_PLAIN, IDS_QUALIFIED = "-grader.ids=plain", "-grader.ids=qualified"
# Flags a task may give in `args`, in any of go test's spellings (-run X, -run=X, --run,
# -test.run): the build's (-tags) and the test binaries' (the rest). Anything else (a
# -ldflags that turns the linker's checks off, -exec, -toolexec, -overlay, -timeout that
# would turn a hang into a failure, -count that repeats a test) is refused.
BUILD_FLAGS = {"tags"}
RUN_VALUE_FLAGS = {"run", "skip", "parallel", "cpu", "shuffle", "count"}
RUN_BOOL_FLAGS = {"short", "v", "failfast"}
# Flags that stop the run early or deselect by name: with them the canaries could not all
# run, so none are added (the result says so).
CANARY_BLOCKERS = ("-test.run", "-test.skip", "-test.failfast")
# File names Go reads as build constraints (name_GOOS_test.go, name_GOARCH_test.go): never
# a word of a canary file's name, or the file would not be built here.
GOOS_GOARCH = set(
    "aix android darwin dragonfly freebsd hurd illumos ios js linux nacl netbsd openbsd plan9 solaris "
    "wasip1 windows zos 386 amd64 amd64p32 arm armbe arm64 arm64be loong64 mips mipsle mips64 mips64le "
    "mips64p32 mips64p32le ppc ppc64 ppc64le riscv riscv64 s390 s390x sparc sparc64 wasm test".split()
)
FILLER_WORDS = (
    "value values empty result basic single order default missing mixed simple large small edge round "
    "split case parse format string number input output"
).split()
GO_ENV = {
    # the image sets these; set again so that no other environment can loosen them
    "GOFLAGS": "",
    "GOENV": "off",
    "GOTOOLCHAIN": "local",
    "GOPROXY": "off",
    "CGO_ENABLED": "0",
}
REPORTER_MARK = "src/testing/grader_report.go"  # the patched GOROOT's reporter
BIN_PARENTS = ("/var/tmp",)
MAX_RERUNS = 20  # processes of a package after a panic, for the tests it left unrun


# --- on the host: the task's check -> the order's ---------------------------------------


def is_go_test(rel: str) -> bool:
    """A Go test file of a package (not data under testdata/, nor a file the go command
    ignores: under a directory or with a name starting with '_' or '.')."""
    parts = rel.split("/")
    if not parts[-1].endswith("_test.go"):
        return False
    return not any(p == "testdata" or p.startswith(("_", ".")) for p in parts)


def hidden_go_tests(hidden: dict[str, str | None]) -> list[str]:
    return sorted(p for p, d in hidden.items() if d is not None and is_go_test(p))


def package_pattern(directory: str) -> str:
    """The go command's pattern for a directory of the repository ("" -> ".")."""
    return "./" + directory if directory else "."


def directory_of(rel: str) -> str:
    return rel.rsplit("/", 1)[0] if "/" in rel else ""


def listed_files(ids: list[str]) -> list[str]:
    """Go's test ids name no file (the hidden tests' files are protected as hidden)."""
    return []


def normalize_flags(args: list[str]) -> list[str]:
    """The task's `args` as the runner passes them: `-tags=...` for the build, `-test.NAME`
    or `-test.NAME=VALUE` for the test binaries. Raises ValueError on anything else."""
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if not isinstance(arg, str) or not arg.startswith("-") or arg in ("-", "--"):
            raise ValueError(f"the go runner's args are go test flags; {arg!r} is not one (packages go in paths)")
        name, eq, value = arg.lstrip("-").partition("=")
        name = name[len("test.") :] if name.startswith("test.") else name
        if name in BUILD_FLAGS or name in RUN_VALUE_FLAGS:
            if not eq:
                if i >= len(args):
                    raise ValueError(f"go test flag -{name} needs a value")
                value = args[i]
                i += 1
            if name == "count" and value != "1":
                raise ValueError("-count above 1 runs a test twice in one report; the go runner refuses it")
            out.append(f"-{name}={value}" if name in BUILD_FLAGS else f"-test.{name}={value}")
        elif name in RUN_BOOL_FLAGS:
            if eq and value not in ("true", "false", "1", "0"):
                raise ValueError(f"go test flag -{name} takes true or false, not {value!r}")
            out.append(f"-test.{name}" + (f"={value}" if eq else ""))
        else:
            allowed = sorted(BUILD_FLAGS | RUN_VALUE_FLAGS | RUN_BOOL_FLAGS)
            raise ValueError(f"go test flag {arg!r} is not one the go runner passes (it takes: {', '.join(allowed)})")
    return out


def camel_words(name: str) -> list[str]:
    """Words of a Go test name: TestParseHTTPVersion/sub -> parse, http, version."""
    top = name.split("::", 1)[1] if is_qualified(name) else name
    top = top.split("/", 1)[0]
    top = re.sub(r"^(Test|Example|Fuzz|Benchmark)_?", "", top)
    return [w.lower() for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+", top)]


PLAIN_ID = re.compile(r"(Test|Example|Fuzz|Benchmark)[^/:]*(/|$)")


def is_qualified(test_id: str) -> bool:
    """`<import path>::TestX` rather than `TestX` or `TestX/sub`: a subtest's name may
    hold "::" itself (`TestFormat/%::z`), after the top-level test's name."""
    return "::" in test_id and not PLAIN_ID.match(test_id)


def words(test_ids: list[str]) -> list[str]:
    out: set[str] = set()
    for tid in test_ids:
        out |= {w for w in camel_words(tid) if re.fullmatch(r"[a-z][a-z0-9]{1,15}", w)}
    return sorted(out)


def plan(check: dict[str, Any], hidden: dict[str, str | None]) -> CheckSpec:
    """The order's check from the task's: the packages of `paths` (default: those of the
    hidden test files), the task's flags, the form of the ids it reports, and canaries
    in the package of the hidden tests."""
    fail_to_pass = list(check.get("fail_to_pass") or [])
    listed = fail_to_pass + list(check.get("pass_to_pass") or [])
    tests = hidden_go_tests(hidden)
    dirs = sorted({directory_of(p) for p in tests})
    paths = list(check.get("paths") or []) or [package_pattern(d) for d in dirs]
    if not paths:
        raise ValueError("a go check needs paths (packages) or hidden _test.go files")
    for p in paths:
        if not isinstance(p, str) or not p or p.startswith("-") or "\n" in p:
            raise ValueError(f"go package pattern {p!r} is not one (flags go in args)")
    flags = normalize_flags(list(check.get("args") or []))
    qualified = {is_qualified(tid) for tid in listed}
    if len(qualified) > 1:
        raise ValueError("the go runner's test ids are all `TestX` or all `<import path>::TestX`; this task mixes them")
    if listed:
        mode = IDS_QUALIFIED if qualified == {True} else IDS_PLAIN
    else:  # no lists: plain where the check runs one package
        mode = IDS_PLAIN if len(paths) == 1 and "..." not in paths[0] else IDS_QUALIFIED
    # the canaries go beside the hidden tests of a package the check runs
    run_dirs = {p[2:].rstrip("/") if p.startswith("./") else ("" if p == "." else None) for p in paths}
    homes = [d for d in dirs if d in run_dirs] or (dirs if any("..." in p for p in paths) else [])
    home = homes[0] if homes else None
    return CheckSpec(
        kind="go",
        args=[mode, *flags],
        paths=paths,
        canaries=bool(check.get("canaries", True)) and home is not None,
        canary_dir=home or "",
        canary_words=words(listed),
        canary_sources=[p for p in tests if directory_of(p) == home],
        # the listed tests' own names: a canary never takes one, even one no file defines yet
        canary_targets=sorted({tid.rsplit("::", 1)[-1].split("/", 1)[0] for tid in listed}),
    )


# --- in the container: the canaries -----------------------------------------------------

PACKAGE_CLAUSE = re.compile(rb"^package\s+([A-Za-z_][A-Za-z0-9_]*)\s*(//.*)?$", re.M)


def package_clause(source: bytes) -> str | None:
    """The package name a Go file declares (its first `package` line outside comments)."""
    cleaned = re.sub(rb"/\*.*?\*/", lambda m: b"\n" * m.group(0).count(b"\n"), source, flags=re.S)
    for line in cleaned.splitlines():
        s = line.strip()
        if not s or s.startswith(b"//"):
            continue
        m = PACKAGE_CLAUSE.match(s)
        return m.group(1).decode() if m else None
    return None


def _canary_body(rng: random.Random, must_pass: bool) -> str:
    """One test body in a shape tasks' tests have, using nothing but the builtins and `t`;
    it fails (t.Errorf, never a panic that would end the binary) iff not must_pass."""
    shape = rng.randrange(5)
    if shape == 0:
        xs = [rng.randint(-50, 99) for _ in range(rng.randint(3, 6))]
        want = sum(xs) if must_pass else sum(xs) + rng.choice([-2, -1, 1, 3])
        items = ", ".join(map(str, xs))
        return (
            f"\ttotal := 0\n\tfor _, x := range []int{{{items}}} {{\n\t\ttotal += x\n\t}}\n"
            f'\tif total != {want} {{\n\t\tt.Errorf("total = %d, want %d", total, {want})\n\t}}\n'
        )
    if shape == 1:
        word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 8)))
        k = rng.randint(2, 9)
        want = len(word) * k if must_pass else len(word) * k + 1
        return (
            f'\ttext := ""\n\tfor i := 0; i < {k}; i++ {{\n\t\ttext += "{word}"\n\t}}\n'
            f'\tif len(text) != {want} {{\n\t\tt.Errorf("len(text) = %d, want %d", len(text), {want})\n\t}}\n'
        )
    if shape == 2:
        seed = os.urandom(6).hex()
        h = 2166136261
        for c in seed.encode():
            h = ((h ^ c) * 16777619) & 0xFFFFFFFF
        want = h if must_pass else h ^ (1 << rng.randrange(32))
        return (
            f'\th := uint32(2166136261)\n\tfor _, c := range []byte("{seed}") {{\n'
            f"\t\th ^= uint32(c)\n\t\th *= 16777619\n\t}}\n"
            f'\tif h != {want:#x} {{\n\t\tt.Errorf("hash = %#x, want %#x", h, uint32({want:#x}))\n\t}}\n'
        )
    if shape == 3:
        xs = rng.sample(range(100), rng.randint(4, 7))
        i = rng.randrange(len(xs))
        want = sorted(xs)[i] if must_pass else sorted(xs)[i] + 1
        items = ", ".join(map(str, xs))
        return (
            f"\titems := []int{{{items}}}\n\tfor i := 1; i < len(items); i++ {{\n"
            f"\t\tfor j := i; j > 0 && items[j-1] > items[j]; j-- {{\n"
            f"\t\t\titems[j-1], items[j] = items[j], items[j-1]\n\t\t}}\n\t}}\n"
            f'\tif items[{i}] != {want} {{\n\t\tt.Errorf("items[{i}] = %d, want %d", items[{i}], {want})\n\t}}\n'
        )
    a, b = rng.randint(1, 50), 0 if must_pass else rng.randint(1, 9)
    return (
        f'\tdefer func() {{\n\t\tif recover() == nil {{\n\t\t\tt.Errorf("no panic")\n\t\t}}\n\t}}()\n'
        f'\ta, b := {a}, {b}\n\tt.Logf("%d", a/b)\n'
    )


def _taken_names(tree: Tree, folder: str) -> set[str]:
    """Identifiers a canary may not take: every Test/Example/Fuzz/Benchmark name in the
    repository's Go files (unique across packages, so that a plain id names one test)."""
    taken: set[str] = set()
    for rel, sig in tree.walk().items():
        if sig[0] != "f" or not rel.endswith(".go"):
            continue
        data = tree.read(rel, 4 << 20)
        if data is None:
            continue
        taken |= {m.decode() for m in re.findall(rb"\b(?:Test|Example|Fuzz|Benchmark)\w*", data)}
    return taken


def make_canaries(order: Order, tree: Tree) -> dict[str, Any] | None:
    """A _test.go file of this run only, in the package of the hidden tests (its package
    clause theirs), with tests that must fail and tests that must pass, named like the
    task's own tests. Returns what the report must say of each, or None. The supervisor
    pins the placed files (this one too) when it records their identity (`hidden.pin`)."""
    check = order.check
    if not check.canaries:
        return None
    flags = check.args or []
    for arg in flags:
        if arg.startswith(CANARY_BLOCKERS):
            return {"skipped": f"the task's go test flag {arg} could stop the run early or deselect them"}
    clause = None
    for rel in check.canary_sources:
        data = tree.read(rel, 4 << 20)
        clause = package_clause(data) if data is not None else None
        if clause:
            break
    if not clause:
        return {"skipped": "no hidden test file to take the package clause from"}
    rng = random.SystemRandom()
    vocabulary = sorted((set(check.canary_words) | set(FILLER_WORDS)) - GOOS_GOARCH)
    folder = check.canary_dir
    while True:
        name = "_".join(rng.sample(vocabulary, 2)) + "_test.go"
        rel = f"{folder}/{name}" if folder else name
        if tree.lstat(rel) is None:
            break
    taken = _taken_names(tree, folder) | set(check.canary_targets)
    expect: dict[str, str] = {}
    kinds = [True] * rng.randint(2, 3) + [False] * rng.randint(2, 3)
    rng.shuffle(kinds)
    source = f'package {clause}\n\nimport "testing"\n'
    for must_pass in kinds:
        while True:
            func = "Test" + "".join(w.capitalize() for w in rng.sample(vocabulary, rng.randint(1, 3)))
            if func not in taken:
                break
        taken.add(func)
        source += f"\nfunc {func}(t *testing.T) {{\n" + _canary_body(rng, must_pass) + "}\n"
        expect[func] = "passed" if must_pass else "failed"
    data = source.encode()
    tree.write(rel, data, mode=0o444, owner=(0, 0))
    return {"path": rel, "digest": hashlib.sha256(data).hexdigest(), "expect": expect, "dir": folder}


# --- in the container: the run ------------------------------------------------------------


def goroot() -> str | None:
    """The GOROOT of the `go` on PATH, if it is the grader's patched one."""
    go = shutil.which("go")
    if go is None:
        return None
    root = os.path.dirname(os.path.dirname(os.path.realpath(go)))
    return root if os.path.isfile(os.path.join(root, REPORTER_MARK)) else None


def split_args(args: list[str]) -> tuple[bool, list[str], list[str]]:
    """(ids qualified, build flags, test binary flags) from the order's args."""
    qualified = IDS_QUALIFIED in args
    build = [a for a in args if a.startswith("-tags=")]
    run = [a for a in args if a.startswith("-test.")]
    return qualified, build, run


def parse_listing(data: bytes) -> list[dict[str, Any]]:
    """The packages of `go list -json`'s stream of objects."""
    out: list[dict[str, Any]] = []
    doc = data.decode("utf-8", "replace")
    decoder = json.JSONDecoder()
    i = 0
    while True:
        while i < len(doc) and doc[i].isspace():
            i += 1
        if i >= len(doc):
            return out
        obj, i = decoder.raw_decode(doc, i)
        if isinstance(obj, dict):
            out.append(obj)


def is_version_element(elem: str) -> bool:
    """A major-version suffix of a module path (v2, v3, ...; not v0, v1)."""
    return len(elem) >= 2 and elem[0] == "v" and elem[1:].isdigit() and elem[1] != "0" and elem != "v1"


def binary_name(import_path: str) -> str:
    """The file `go test -c -o DIR/` writes for a package (cmd/go's DefaultExecName):
    the last element of the import path, the one before it for a /vN suffix."""
    parts = import_path.rstrip("/").split("/")
    elem = parts[-1]
    if len(parts) > 1 and is_version_element(elem):
        elem = parts[-2]
    return elem + ".test"


def groups(packages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The packages in as few builds as their binaries' names allow (two binaries of one
    name cannot share a directory)."""
    out: list[list[dict[str, Any]]] = []
    for pkg in packages:
        for group in out:
            if all(binary_name(p["ImportPath"]) != binary_name(pkg["ImportPath"]) for p in group):
                group.append(pkg)
                break
        else:
            out.append([pkg])
    return out


def bin_parent(order: Order) -> str:
    """Where the test binaries are built: on the container's own file system (its /tmp is
    a tmpfs mounted noexec), outside the repository."""
    for candidate in BIN_PARENTS:
        if os.path.isdir(candidate):
            return candidate
    return os.path.dirname(order.repo.rstrip("/")) or "/"


def panicked(rep: dict[str, Any]) -> bool:
    """The binary's reporter ended with a test's panic (its last word: exit 2)."""
    end = rep.get("end")
    if not isinstance(end, dict) or rep.get("forged") or rep.get("problem"):
        return False
    return bool(end.get("exit") == 2)


def top_level_tests(order: Order, directory: str, binary: str, env: dict[str, str]) -> list[str]:
    """The binary's top-level tests and examples, as `-test.list` prints them (run with no
    report channel: it writes no record). Code under test can print more names: a name
    that is no test selects nothing."""
    listing = run_as_user(
        order,
        ["/usr/bin/env", "-C", directory, binary, "-test.list", ".*"],
        timeout=min(60.0, remaining(order)),
        stdout_limit=order.report_limit,
        separate_stderr=True,
        env=env,
    )
    if listing["timed_out"] or listing["exit_code"] != 0:
        return []
    names = text(listing["out"].data()).split()
    return sorted({n for n in names if re.fullmatch(r"(Test|Example|Fuzz)[A-Za-z0-9_]*", n)})


def own_binaries(directory: str) -> None:
    """The built binaries become root's, read and run only: a test that runs first cannot
    swap a binary that runs after it. Anything but a regular file is removed."""
    for here, dirs, files in os.walk(directory):
        os.chown(here, 0, 0)
        os.chmod(here, 0o755)
        for name in files + [d for d in dirs if os.path.islink(os.path.join(here, d))]:
            path = os.path.join(here, name)
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode):
                os.unlink(path)
                continue
            os.chown(path, 0, 0)
            os.chmod(path, 0o555)


def _joined(parts: list[tuple[str, bytes]], limit: int) -> str:
    joined = "\n".join(f"== {label}\n{text(data)}" for label, data in parts if data or label.startswith("go test -c"))
    if len(joined) <= limit:
        return joined
    half = limit // 2
    return joined[:half] + f"\n[... {len(joined) - limit:,} characters omitted ...]\n" + joined[-half:]


def hide_canaries(output: bytes, canaries: dict[str, Any], taken_back: bool) -> bytes:
    """The binary's output without the canaries' lines (their runs, results and logs, as
    the pytest plugin keeps them out of pytest's output): the output decides nothing, and
    a submitter reading it should not learn them. Where only the canaries failed, the
    binary's closing FAIL is its PASS."""
    names = "|".join(re.escape(n) for n in canaries.get("expect", {}))
    base = re.escape(os.path.basename(canaries.get("path", "")))
    if not names or not base:
        return output
    pattern = re.compile(
        rf"^(?:(?:=== (?:RUN|PAUSE|CONT|NAME)|--- (?:FAIL|PASS|SKIP):)\s+(?:{names})(?:[\s/].*)?|\s+{base}:\d+:.*)$"
    )
    lines = [line for line in output.decode("utf-8", "replace").split("\n") if not pattern.match(line)]
    if taken_back:
        for i in range(len(lines) - 1, -1, -1):
            if lines[i].strip():
                if lines[i] == "FAIL":
                    lines[i] = "PASS"
                break
    return "\n".join(lines).encode()


def take_back_canaries(run: dict[str, Any], rep: dict[str, Any], canary_ids: set[str]) -> bool:
    """A binary whose only failures are the canaries that must fail exited 1 for them:
    its status (and its reporter's, which agreed) go back to 0, the task's tests' own."""
    end = rep.get("end")
    if not canary_ids or run["exit_code"] != 1 or run["timed_out"] or rep.get("forged") or not end:
        return False
    if end.get("exit") != 1 or rep.get("ends", 0) < rep.get("sessions", 0):
        return False
    failed = {tid for tid, o in rep.get("outcomes", {}).items() if o in ("failed", "error")}
    if failed and failed <= canary_ids:
        run["exit_code"] = 0
        rep["end"] = {**end, "exit": 0}
        return True
    return False


def run(order: Order, tree: Tree, result: dict[str, Any], canaries: dict[str, Any] | None) -> None:
    check = order.check
    if check.args is None or not check.paths:
        raise ValueError("a go check needs its packages and flags")
    if goroot() is None:
        raise RuntimeError(f"the environment's go is not the grader's (no {REPORTER_MARK} in its GOROOT)")
    qualified, build_flags, run_flags = split_args(check.args)
    env = dict(GO_ENV)
    output: list[tuple[str, bytes]] = []

    def stop(timed_out: bool) -> None:
        signed.finish(result, None, _joined(output, order.output_limit), {"problem": "the run was stopped"}, timed_out)

    # 1. the packages
    listing = run_as_user(
        order,
        ["go", "list", "-e", "-json=ImportPath,Dir,Name,TestGoFiles,XTestGoFiles,Error", *build_flags, *check.paths],
        timeout=remaining(order),
        stdout_limit=order.report_limit,
        separate_stderr=True,
        env=env,
    )
    err = listing["err"].data() if listing["err"] else b""
    if listing["timed_out"]:
        output.append(("go list", err))
        return stop(True)
    packages: list[dict[str, Any]] = []
    collect_errors: list[str] = []
    try:
        if not listing["out"].complete():
            raise ValueError("go list's output is larger than the report limit")
        packages = parse_listing(listing["out"].data())
    except ValueError as exc:
        err += f"\n{exc}\n".encode()
        collect_errors = list(check.paths)  # nothing can be told apart: every pattern failed
    if err.strip():
        output.append(("go list", err))
    testable, seen = [], set()
    for pkg in packages:
        path = pkg.get("ImportPath")
        if not isinstance(path, str) or path in seen:
            continue
        seen.add(path)
        has_tests = bool(pkg.get("TestGoFiles") or pkg.get("XTestGoFiles"))
        if has_tests and isinstance(pkg.get("Dir"), str):
            testable.append(pkg)
        elif pkg.get("Error"):
            collect_errors.append(path)
            problem = pkg["Error"].get("Err") if isinstance(pkg["Error"], dict) else pkg["Error"]
            output.append((f"go list: {path}", f"{problem}\n".encode()))
    testable.sort(key=lambda p: p["ImportPath"])

    # 2. every test binary, before any test runs
    bin_dir = tempfile.mkdtemp(prefix=".grader-go-", dir=bin_parent(order))
    os.chown(bin_dir, order.uid, order.gid)
    binaries: dict[str, str] = {}
    for n, group in enumerate(groups(testable)):
        out_dir = os.path.join(bin_dir, f"g{n}")
        os.mkdir(out_dir, 0o755)
        os.chown(out_dir, order.uid, order.gid)
        build = run_as_user(
            order,
            ["go", "test", "-c", "-vet=off", "-o", out_dir + "/", *build_flags, *[p["ImportPath"] for p in group]],
            timeout=remaining(order),
            stdout_limit=order.output_limit,
            env=env,
        )
        output.append((f"go test -c ({len(group)} package{'s' if len(group) > 1 else ''})", build["out"].data()))
        if build["timed_out"]:
            return stop(True)
        for p in group:
            binaries[p["ImportPath"]] = os.path.join(out_dir, binary_name(p["ImportPath"]))
    own_binaries(bin_dir)

    # 3. each binary in its package's directory, a report channel each
    canary_dir = None
    if canaries and "expect" in canaries:
        canary_dir = os.path.normpath(os.path.join(order.repo, canaries.get("dir", "")))
    canary_pkg = None
    units: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    settings = {"repo": order.repo}
    # the task's own selection is left as it is: no test runs again outside it
    selecting = any(f.startswith(CANARY_BLOCKERS) for f in run_flags)
    for pkg in testable:
        path, binary = pkg["ImportPath"], binaries[pkg["ImportPath"]]
        if not os.path.isfile(binary):
            collect_errors.append(path)
            continue
        here = canaries is not None and canary_dir is not None and os.path.normpath(pkg["Dir"]) == canary_dir
        canary_pkg = path if here else canary_pkg
        base = ["/usr/bin/env", "-C", pkg["Dir"], binary, "-test.paniconexit0", *run_flags]
        pending: list[str] | None = None
        for attempt in range(MAX_RERUNS + 1):
            selected = [f"-test.run=^({'|'.join(pending)})$"] if pending else []
            unit_run, rep = signed.run_signed(order, base + selected, settings=settings, env=env)
            shown = unit_run["out"].data()
            if here and canaries is not None:
                taken_back = take_back_canaries(unit_run, rep, set(canaries["expect"]))
                shown = hide_canaries(shown, canaries, taken_back)
            reported = {tid.split("/", 1)[0] for tid in rep.get("outcomes", {})}
            if qualified and "outcomes" in rep:
                rep["outcomes"] = {f"{path}::{tid}": o for tid, o in rep["outcomes"].items()}
            label = path if attempt == 0 else f"{path} (run again after a panic, {attempt}: the tests it left unrun)"
            units.append((label, unit_run, rep))
            output.append((label, shown))
            if unit_run["timed_out"] or not panicked(rep) or remaining(order) <= 0:
                break
            # a test panicked: the process ended there (its end says 2), the tests after it
            # never ran. They run again, in a process of their own, for their own outcomes;
            # the panic keeps this package's status failed.
            if pending is None:
                pending = top_level_tests(order, pkg["Dir"], binary, env)
            pending = [name for name in pending or [] if name not in reported]
            if not pending or selecting:
                break
        if units[-1][1]["timed_out"]:
            break
    timed_out = any(r["timed_out"] for _, r, _ in units)

    if canaries and "expect" in canaries:
        if canary_pkg is None:
            # the canaries' package did not run (it did not build, or the check's paths
            # name other packages): nothing to judge them by
            del canaries["expect"]
            canaries["skipped"] = "their package's tests did not run"
        elif qualified:
            canaries["expect"] = {f"{canary_pkg}::{tid}": want for tid, want in canaries["expect"].items()}

    if units:
        status, report = signed.merge(units, LABEL)
    else:
        status, report = None, {"forged": None, "end": None, "ends": 1, "sessions": 1, "outcomes": {}, "integrity": []}
        report["end"] = {"t": "end", "exit": 0}
    report["collect_errors"] = sorted(set(report.get("collect_errors", [])) | set(collect_errors))
    if collect_errors:
        status = EXIT_BUILD
    elif not units:
        status = EXIT_NO_TESTS
    if report.get("end") is not None and status is not None:
        report["end"] = {"t": "end", "exit": status}
    signed.split_canaries(report, canaries)
    signed.finish(result, status, _joined(output, order.output_limit), report, timed_out)
