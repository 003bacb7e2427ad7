"""cargo: a Rust crate's tests, built by cargo as the unprivileged user and run by the
supervisor itself, one test binary at a time, each binary's own libtest output read
strictly (../libtest.py). There is no reporter and no report channel: the supervisor is the
parent of every test process, reads each one's stdout from its own pipe and builds the
report in its own memory, where no process of the run can reach it.

Why not a reporter process beside the tests (the prototype in reporters/rust/ was one):
libtest cannot load a reporter, so whatever reads its stream is a parser outside the test
binary, and the only question is which process parses. A parser running as the
unprivileged user would share a uid with the tests (they could signal it, and under gVisor
list its descriptors), would need the run's key to sign what it parsed, and would need
prctl tricks to stay out of reach; the supervisor is root and PID 1 already, kills every
process a binary leaves before the next one starts (proc.run_as_user), and so needs none
of that. What the tests can shape is exactly their own binary's stdout, and that is what
the strict parse judges.

The run, in the container:

1. before the patch, target/ (the dependencies and the base's test binaries, prebuilt when
   the instance image was built) becomes root's, so a patch that writes into it does not
   apply; the repository's tests/ (and benches/ and examples/ where the run builds them,
   and the test targets the base's Cargo.toml names) join the protected paths;
2. after it, target/ is the user's again and `cargo test --no-run --offline
   --message-format=json ARGS` builds every selected test binary as the user (a target
   that does not compile is built alone again, then is a collect error);
3. each binary is copied into a sealed memfd at once (root's, read and execute for all,
   no write for anyone) and always run from that copy: a test cannot replace another
   target's binary on disk;
4. per binary, lib first: `--list --format terse`, then the JSON run with one test thread,
   both as the user with RUSTC_BOOTSTRAP=1 in the binary's environment only (libtest's
   JSON output is an unstable option; nothing unstable is compiled), its working
   directory the package's as under `cargo test`; every process it left is killed;
5. canaries: a test target of this run (tests/<drawn name>.rs, root-owned) holding a copy
   of a hidden test target and tests named like the task's that must fail and must pass;
   the copy's tests must pass where their originals passed.

Test ids: the lib's unit tests as libtest names them (`tests::it_parses`), every other
target's as `<target>::<name>` (tests/parse.rs gives `parse::it_parses`, a bin `cli` gives
`cli::tests::x`). Doc tests are not run (they have no list and no binary of their own).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import random
import re
import shutil
import stat
import time
from typing import Any

from .. import libtest
from ..order import CheckSpec, Order
from ..proc import remaining, run_as_user, text
from ..tree import Tree

PROTECT: dict[str, list[str]] = {
    # what cargo and rustc read by themselves: the manifests (features, targets, build
    # scripts, proc-macro crates, dependencies, profiles), the lock file, build scripts, the
    # configuration (.cargo/config.toml: rustflags, the linker, a runner for test binaries),
    # the toolchain files
    "names": ["Cargo.toml", "Cargo.lock", "build.rs", "rust-toolchain", "rust-toolchain.toml"],
    "suffixes": [],
    "prefixes": [],
    "dir_suffixes": [".cargo"],
    # Rust has no test file names: test directories are found by what they hold (a hidden
    # test), and before_patch adds the crate's own tests/ (see protect_globs)
    "test_modules": [],
    "test_dir_names": ["tests", "benches", "examples"],
}

TESTS = True
COMMAND = "none"
LABEL = "cargo test"
EXIT_PASSED, EXIT_FAILED = 0, 1
EXIT_BUILD, EXIT_NOTHING = 2, 3
EXIT_MEANING: dict[int, str] = {
    EXIT_BUILD: "a test target did not compile or list its tests (a collect error: its tests did not run)",
    EXIT_NOTHING: "no test binary was built",
}
DECIDED_BY = (
    "libtest's own output, read strictly by the grader outside the test process: each test binary's "
    "listed tests, each announced and judged exactly once in order, with a summary and an exit status "
    "that agree (a contradiction fails every test of the binary as tampering). Not detected: code under "
    "test that writes a complete, consistent stream for its own binary and exits 0 before libtest does"
)

CARGO = "cargo"
BUILD_LIMIT = 32 << 20  # bytes of cargo's JSON messages read
RUN_LIMIT = 16 << 20  # bytes of one binary's stdout read (a longer stream fails its tests)
SHOWN_OUTPUT = 4000  # characters of a failed test's output, or a binary's stderr, shown
LIB_KINDS = {"lib", "rlib", "dylib", "cdylib", "staticlib", "proc-macro"}
TEST_KINDS = LIB_KINDS | {"bin", "test", "bench", "example"}

# cargo test's arguments a task may give (`args`): features, and which targets run.
# Anything else (a profile, a target directory, --config, -Z, arguments for the test
# binaries after --) changes what the runner builds or reads, and is refused.
VALUE_ARGS = {"--features": "--features", "-F": "--features"}
FLAG_ARGS = {"--all-features", "--no-default-features"}
SELECT_FLAGS = {"--lib", "--bins", "--tests", "--examples", "--benches", "--all-targets"}
SELECT_VALUES = {"--bin", "--test", "--example", "--bench"}
CANARY_FILLER = (
    "value values empty result basic single order default missing mixed simple large small edge "
    "round split case parse format text number input output"
).split()


# --- on the host: the task's check -> the order's ---------------------------------------


def listed_files(ids: list[str]) -> list[str]:
    """Rust's test ids name no file (`parse::it_works`): the hidden test files are
    protected as hidden tests."""
    return []


def cargo_args(args: list[Any]) -> list[str]:
    """The task's `args`, checked and in one spelling (`--features X`). Raises ValueError."""
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if not isinstance(arg, str):
            raise ValueError(f"cargo argument {arg!r} is not a string")
        name, eq, value = arg.partition("=")
        if name in VALUE_ARGS or name in SELECT_VALUES:
            if not eq:
                if i >= len(args) or not isinstance(args[i], str) or args[i].startswith("-"):
                    raise ValueError(f"cargo argument {name} needs a value")
                value = args[i]
                i += 1
            if not value or "\n" in value:
                raise ValueError(f"cargo argument {name} has an empty or multi-line value")
            out += [VALUE_ARGS.get(name, name), value]
        elif arg in FLAG_ARGS or arg in SELECT_FLAGS:
            out.append(arg)
        else:
            allowed = sorted(set(VALUE_ARGS) | FLAG_ARGS | SELECT_FLAGS | SELECT_VALUES)
            raise ValueError(
                f"cargo argument {arg!r} is not one the cargo runner passes (it takes: {', '.join(allowed)})"
            )
    return out


def selects(args: list[str]) -> bool:
    """Whether cargo test's arguments name targets themselves."""
    return any(a in SELECT_FLAGS or a in SELECT_VALUES for a in args)


def target_of(rel: str) -> list[str] | None:
    """The cargo test selector for a repository file of a test target, by cargo's own
    layout: tests/X.rs and tests/X/main.rs -> --test X, src/bin/X.rs -> --bin X,
    benches/ and examples/ likewise, any other .rs file under src/ -> --lib (a unit test
    module). None for a file that is no target (data, a helper module of tests/)."""
    parts = rel.split("/")
    stem = parts[-1][:-3] if parts[-1].endswith(".rs") else None
    if stem is None:
        return None
    kinds = {"tests": "--test", "benches": "--bench", "examples": "--example"}
    if len(parts) == 2 and parts[0] in kinds:
        return [kinds[parts[0]], stem]
    if len(parts) == 3 and parts[0] in kinds and parts[2] == "main.rs":
        return [kinds[parts[0]], parts[1]]
    if parts[:2] == ["src", "bin"] and len(parts) == 3:
        return ["--bin", stem]
    if parts[0] == "src" and len(parts) >= 2:
        return ["--lib"]
    return None


def is_copyable(rel: str) -> bool:
    """A hidden test target of one file (tests/X.rs), which a canary target can copy."""
    parts = rel.split("/")
    return len(parts) == 2 and parts[0] == "tests" and parts[1].endswith(".rs")


def words(test_ids: list[str]) -> list[str]:
    """Words of the task's own test names (`parse::empty_version_01` -> empty, version)."""
    out: set[str] = set()
    for tid in test_ids:
        name = tid.rsplit("::", 1)[-1]
        out |= {w.lower() for w in name.split("_") if re.fullmatch(r"[a-z][a-z0-9]{1,15}", w.lower())}
    return sorted(out - {"test", "tests"})


def plan(check: dict[str, Any], hidden: dict[str, str | None]) -> CheckSpec:
    """The order's check from the task's: cargo test's arguments (the task's, then the
    targets of `paths`, or of the hidden test files, unless the task's arguments select
    targets themselves), and canaries beside the hidden tests."""
    args = cargo_args(list(check.get("args") or []))
    listed = list(check.get("fail_to_pass") or []) + list(check.get("pass_to_pass") or [])
    placed = sorted(p for p, d in hidden.items() if d is not None)
    paths = list(check.get("paths") or [])
    selectors: list[list[str]] = []
    for p in paths:
        sel = target_of(p) if isinstance(p, str) else None
        if sel is None:
            raise ValueError(f"cargo path {p!r} is not the file of a test target (tests/X.rs, src/..., src/bin/X.rs)")
        selectors.append(sel)
    if not paths:
        selectors = [s for s in (target_of(p) for p in placed) if s is not None]
    if not selects(args):
        for sel in selectors:
            if not any(args[i : i + len(sel)] == sel for i in range(len(args))):
                args += sel
    return CheckSpec(
        kind="cargo",
        args=args,
        canaries=bool(check.get("canaries", True)),
        canary_dir="tests",
        canary_words=words(listed),
        canary_sources=[p for p in placed if is_copyable(p)][:1],
    )


# --- before the patch: target/ is root's, the test locations are protected ---------------------


def chown_tree(path: str, uid: int, gid: int) -> int:
    """Give a directory tree to uid:gid without following a link; returns the entries."""
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            return 0
    except FileNotFoundError:
        return 0
    n = 1
    os.chown(path, uid, gid, follow_symlinks=False)
    for _, dirs, files, dirfd in os.fwalk(path, follow_symlinks=False):
        for name in dirs + files:
            os.chown(name, uid, gid, dir_fd=dirfd, follow_symlinks=False)
            n += 1
    return n


MANIFEST_TARGET = re.compile(r"^\s*\[\[\s*(test|bench|example)\s*\]\]\s*$")
MANIFEST_PATH = re.compile(r"^\s*path\s*=\s*[\"']([^\"']+)[\"']\s*$")
MANIFEST_SECTION = re.compile(r"^\s*\[")


def manifest_targets(manifest: str) -> list[tuple[str, str]]:
    """The (kind, path) of the [[test]], [[bench]] and [[example]] targets a Cargo.toml
    places explicitly."""
    out, kind = [], None
    for line in manifest.splitlines():
        m = MANIFEST_TARGET.match(line)
        if m:
            kind = m.group(1)
            continue
        if MANIFEST_SECTION.match(line):
            kind = None
            continue
        p = MANIFEST_PATH.match(line)
        if kind and p:
            out.append((kind, p.group(1).lstrip("./")))
    return out


def protect_globs(args: list[str], manifest: str) -> list[str]:
    """The crate's test locations, protected where the run builds them: tests/ always,
    benches/ and examples/ when cargo test builds them (without target selectors it builds
    the examples; --all-targets, --benches, --examples, --bench, --example name them), and
    the explicit targets of the base's Cargo.toml of those kinds."""
    builds = {"test"}
    if not selects(args) or "--all-targets" in args or {"--examples", "--example"} & set(args):
        builds.add("example")
    if "--all-targets" in args or {"--benches", "--bench"} & set(args):
        builds.add("bench")
    dirs = {"test": "tests/*", "bench": "benches/*", "example": "examples/*"}
    globs = [dirs[k] for k in ("test", "bench", "example") if k in builds]
    globs += [p for kind, p in manifest_targets(manifest) if kind in builds]
    return globs


def before_patch(order: Order, tree: Tree) -> None:
    # a patch may not bring build artifacts: target/ is root's while it is applied (the
    # apply chain runs as the user), so a patch that writes there does not apply
    chown_tree(os.path.join(order.repo, "target"), 0, 0)
    if order.protect.tests:
        manifest = (tree.read("Cargo.toml") or b"").decode("utf-8", errors="replace")
        order.protect.globs = list(order.protect.globs) + protect_globs(list(order.check.args or []), manifest)


# --- canaries ---------------------------------------------------------------------------------


def canary_body(rng: random.Random, must_pass: bool) -> str:
    """One test body in a shape tasks' tests have; its assertion holds iff must_pass."""
    shape = rng.randrange(5)
    off = 0 if must_pass else rng.choice([-2, -1, 1, 3])
    if shape == 0:
        xs = [rng.randint(-50, 99) for _ in range(rng.randint(3, 6))]
        return f"    let total: i64 = {xs!r}.iter().sum();\n    assert_eq!(total, {sum(xs) + off});\n"
    if shape == 1:
        word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 8)))
        k = rng.randint(2, 9)
        return f'    let text = "{word}".repeat({k});\n    assert_eq!(text.len(), {len(word) * k + abs(off)});\n'
    if shape == 2:
        xs = rng.sample(range(100), rng.randint(4, 7))
        i = rng.randrange(len(xs))
        want = sorted(xs)[i] + abs(off)
        return f"    let mut items = vec!{xs!r};\n    items.sort();\n    assert_eq!(items[{i}], {want});\n"
    if shape == 3:
        n, k = rng.randint(10, 999), rng.randint(2, 9)
        return f'    let value: i64 = "{n}".parse().unwrap();\n    assert_eq!(value * {k}, {n * k + off});\n'
    a = rng.randint(1, 500)
    quotient = "None" if must_pass else f"Some({a})"
    return f"    assert_eq!({a}i32.checked_div(0), {quotient});\n"


def manifest_value(manifest: str, section: str, key: str) -> str | None:
    """A plain `key = value` of a Cargo.toml section, as written (quotes stripped)."""
    current = None
    for line in manifest.splitlines():
        s = line.strip()
        if s.startswith("["):
            current = s.strip("[] ")
            continue
        if current == section and "=" in s:
            k, _, v = s.partition("=")
            if k.strip() == key:
                return v.split("#", 1)[0].strip().strip("\"'")
    return None


def make_canaries(order: Order, tree: Tree) -> dict[str, Any] | None:
    """A test target of this run only, tests/<drawn>.rs, root-owned: a copy of the first
    one-file hidden test target (so it calls the library as the task's tests do, and its
    tests must pass wherever their originals passed) and tests named like the task's, some
    that must fail and some that must pass. Returns what the report must say of each."""
    check = order.check
    if not check.canaries:
        return None
    manifest = (tree.read("Cargo.toml") or b"").decode("utf-8", errors="replace")
    if manifest_value(manifest, "package", "autotests") == "false":
        return {"skipped": "the crate's Cargo.toml turns autotests off: a canary target would not be built"}
    rng = random.SystemRandom()
    source = ""
    copy_of = None
    for rel in check.canary_sources:
        data = tree.read(rel)
        if data is not None:
            source = data.decode("utf-8", errors="replace")
            copy_of = rel.rsplit("/", 1)[-1][:-3]
            break
    pool = sorted({w for w in check.canary_words if re.fullmatch(r"[a-z][a-z0-9]{1,15}", w)} | set(CANARY_FILLER))
    package = (manifest_value(manifest, "package", "name") or "").replace("-", "_")
    taken = set(re.findall(r"\b[A-Za-z_][A-Za-z0-9_]*\b", source)) | {package}

    def draw(n: int) -> str:
        while True:
            name = "_".join(rng.sample(pool, n))
            if name not in taken:
                taken.add(name)
                return name

    while True:
        target = draw(2)
        rel = f"tests/{target}.rs"
        if tree.lstat(rel) is None and tree.lstat(f"tests/{target}") is None:
            break
    expect: dict[str, str] = {}
    kinds = [True] * rng.randint(2, 3) + [False] * rng.randint(2, 3)
    rng.shuffle(kinds)
    body = source if source.endswith("\n") or not source else source + "\n"
    for must_pass in kinds:
        name = draw(rng.randint(2, 3))
        body += f"\n#[test]\nfn {name}() {{\n" + canary_body(rng, must_pass) + "}\n"
        expect[f"{target}::{name}"] = "passed" if must_pass else "failed"
    data = body.encode()
    tree.write(rel, data, mode=0o444, owner=(0, 0))
    return {"path": rel, "digest": hashlib.sha256(data).hexdigest(), "expect": expect, "copy_of": copy_of}


# --- in the container: build, run, read ----------------------------------------------------------


class Target:
    """A test binary cargo built: its target's name and kinds, its source, the executable."""

    def __init__(self, name: str, kinds: list[str], src: str, exe: str | None = None):
        self.name, self.kinds, self.src, self.exe = name, kinds, src, exe
        self.fd: int | None = None
        self.tested = True  # cargo metadata's `test`: built by cargo test without selectors

    @property
    def prefix(self) -> str:
        """libtest's names as they are for the lib, `<target>::` before them otherwise."""
        return "" if LIB_KINDS & set(self.kinds) else self.name + "::"

    def key(self) -> tuple[str, tuple[str, ...]]:
        return self.name, tuple(sorted("lib" if k in LIB_KINDS else k for k in self.kinds))

    def selector(self) -> list[str]:
        kind = "lib" if LIB_KINDS & set(self.kinds) else self.kinds[0]
        return ["--lib"] if kind == "lib" else [f"--{kind}", self.name]


def relative(path: str, root: str) -> str:
    return os.path.relpath(path, root) if path.startswith(root.rstrip("/") + "/") else path


def cargo_env(order: Order) -> dict[str, str]:
    return {
        "CARGO_NET_OFFLINE": "true",
        "CARGO_TERM_COLOR": "never",
        "CARGO_TERM_PROGRESS_WHEN": "never",
    }


def without_selectors(args: list[str]) -> list[str]:
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in SELECT_VALUES:
            skip = True
        elif a not in SELECT_FLAGS:
            out.append(a)
    return out


class Build:
    def __init__(self) -> None:
        self.targets: dict[tuple[str, tuple[str, ...]], Target] = {}
        self.errors: set[tuple[str, tuple[str, ...]]] = set()  # targets the compiler refused
        self.lib_failed = False
        self.messages: list[str] = []
        self.ok = False
        self.timed_out = False
        self.seconds = 0.0
        self.stderr = ""


def cargo_build(order: Order, args: list[str], hide: str | None, into: Build) -> bool:
    """`cargo test --no-run` as the user; the test binaries it built go into `into`, the
    compiler's messages (not those of the target named `hide`) too. Returns success."""
    argv = [CARGO, "test", "--no-run", "--offline", "-q", "--message-format=json", *args]
    run = run_as_user(
        order,
        argv,
        timeout=remaining(order),
        stdout_limit=BUILD_LIMIT,
        separate_stderr=True,
        env=cargo_env(order),
    )
    into.seconds += run["seconds"]
    into.timed_out = into.timed_out or run["timed_out"]
    ok = False
    for line in run["out"].data().decode("utf-8", errors="replace").splitlines():
        try:
            msg = json.loads(line)
            reason = msg.get("reason")
            t = msg.get("target") or {}
            name, kinds = str(t.get("name", "")), [str(k) for k in t.get("kind") or []]
        except (ValueError, AttributeError, TypeError):
            continue
        key = Target(name, kinds, "").key()
        if reason == "compiler-artifact" and (msg.get("profile") or {}).get("test") and msg.get("executable"):
            into.targets[key] = Target(name, kinds, relative(str(t.get("src_path", "")), order.repo), msg["executable"])
        elif reason == "compiler-message":
            message = msg.get("message") or {}
            if message.get("level") in ("error", "error: internal compiler error"):
                into.errors.add(key)
                if LIB_KINDS & set(kinds):
                    into.lib_failed = True
            rendered = str(message.get("rendered") or "").rstrip()
            if name != hide and rendered and rendered not in into.messages:  # a target built again says it again
                into.messages.append(rendered)
        elif reason == "build-finished":
            ok = msg.get("success") is True
    err = text(run["err"].data()) if run["err"] is not None else ""
    if hide:
        err = "\n".join(line for line in err.splitlines() if hide not in line)
    into.stderr += err
    return ok and run["exit_code"] == 0


def metadata_targets(order: Order) -> list[Target]:
    """The package's targets cargo test can build as test binaries (cargo metadata)."""
    run = run_as_user(
        order,
        [CARGO, "metadata", "--no-deps", "--offline", "--format-version", "1"],
        timeout=min(60.0, remaining(order)),
        stdout_limit=BUILD_LIMIT,
        separate_stderr=True,
        env=cargo_env(order),
    )
    try:
        meta = json.loads(run["out"].data())
        packages = meta["packages"]
    except (ValueError, KeyError, TypeError):
        return []
    manifest = os.path.realpath(os.path.join(order.repo, "Cargo.toml"))
    out = []
    for pkg in packages:
        if not isinstance(pkg, dict) or os.path.realpath(str(pkg.get("manifest_path", ""))) != manifest:
            continue
        for t in pkg.get("targets") or []:
            kinds = [str(k) for k in t.get("kind") or []]
            if set(kinds) & TEST_KINDS:
                out.append(Target(str(t.get("name")), kinds, relative(str(t.get("src_path", "")), order.repo)))
                out[-1].tested = t.get("test") is True
    return out


def selected(targets: list[Target], args: list[str]) -> list[Target]:
    """The targets cargo test's selection arguments name (without any: its default set,
    the lib, bins and integration tests with `test = true`)."""
    picks: list[tuple[str, str]] = []  # (kind, name); "" matches any; "tested": test = true
    for i, a in enumerate(args):
        value = args[i + 1] if i + 1 < len(args) else ""
        if a == "--lib":
            picks.append(("lib", ""))
        elif a in SELECT_VALUES:
            picks.append((a[2:], value))
        elif a in ("--bins", "--examples", "--benches"):
            picks.append((a[2:-1], ""))
        elif a == "--tests":
            picks.append(("tested", ""))
        elif a == "--all-targets":
            picks.append(("", ""))
    if not picks:
        return [t for t in targets if t.tested]

    def picked(t: Target, kind: str, name: str) -> bool:
        if kind == "tested":
            return t.tested
        kinds = {"lib" if k in LIB_KINDS else k for k in t.kinds}
        return (not kind or kind in kinds) and (not name or t.name == name)

    return [t for t in targets if any(picked(t, k, n) for k, n in picks)]


def build(order: Order, args: list[str], canary: str | None) -> tuple[Build, list[Target]]:
    """Every selected test binary built; the selected targets that did not build."""
    b = Build()
    b.ok = cargo_build(order, args, canary, b)
    failed: list[Target] = []
    if b.ok or b.timed_out:
        return b, failed
    for t in selected(metadata_targets(order), args):
        if t.key() in b.targets or t.name == canary:
            continue
        if not b.lib_failed and t.key() not in b.errors and remaining(order) > 0:
            # cargo stops at the first target that does not compile: the others alone
            cargo_build(order, [*without_selectors(args), *t.selector()], canary, b)
        if t.key() not in b.targets:
            failed.append(t)
    return b, failed


def snapshot(path: str) -> int:
    """The binary in a sealed memfd of root's, readable and executable by all (gVisor will
    not execute a file it may not read), writable by no one."""
    fd = os.memfd_create("libtest-" + os.path.basename(path), os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            while chunk:
                chunk = chunk[os.write(fd, chunk) :]
    seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    os.fchmod(fd, 0o555)
    return fd


def binary_env(order: Order, cargo_path: str) -> dict[str, str]:
    """What `cargo test` gives a test binary, less LD_LIBRARY_PATH: cargo points it at
    target/, which the tests can write, and a library dropped there by one binary would be
    loaded into the next (crates with dylib dependencies are not supported)."""
    return {
        "CARGO": cargo_path,
        "CARGO_MANIFEST_DIR": order.repo,
        "CARGO_MANIFEST_PATH": os.path.join(order.repo, "Cargo.toml"),
        "LD_LIBRARY_PATH": "",
    }


def run_binary(order: Order, t: Target, argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    assert t.fd is not None
    return run_as_user(
        order,
        [f"/proc/self/fd/{t.fd}", *argv],
        timeout=remaining(order),
        stdout_limit=RUN_LIMIT,
        separate_stderr=True,
        pass_fds=(t.fd,),
        env=env,
    )


def cut(s: str, limit: int) -> str:
    return s if len(s) <= limit else s[: limit // 2] + "\n[...]\n" + s[-limit // 2 :]


def run(order: Order, tree: Tree, result: dict[str, Any], canaries: dict[str, Any] | None) -> None:
    started = time.monotonic()
    args = list(order.check.args or [])
    chown_tree(os.path.join(order.repo, "target"), order.uid, order.gid)
    canary = None
    if canaries and "expect" in canaries:
        canary = canaries["path"].rsplit("/", 1)[-1][:-3]
        if selects(args) and not ({"--tests", "--all-targets"} & set(args)):
            args += ["--test", canary]
    parts: list[str] = []
    b, failed = build(order, args, canary)
    parts.append(f"== cargo test --no-run ({b.seconds:.1f} s)")
    parts += b.messages
    if b.stderr.strip():
        parts.append(b.stderr.rstrip())
    collect = [t.src for t in failed]
    for t in failed:
        parts.append(f"collect error: {t.src} ({t.name}) did not compile")
    if b.timed_out:
        finish(order, result, None, parts, {}, collect, [], started, timed_out=True)
        return
    try:
        for t in b.targets.values():
            assert t.exe is not None
            t.fd = snapshot(t.exe)  # every binary copied before any of them runs
        run_binaries(order, result, b, canary, canaries, parts, collect, started)
    finally:
        for t in b.targets.values():
            if t.fd is not None:
                os.close(t.fd)


def run_binaries(
    order: Order,
    result: dict[str, Any],
    b: Build,
    canary: str | None,
    canaries: dict[str, Any] | None,
    parts: list[str],
    collect: list[str],
    started: float,
) -> None:
    """List and run each binary from its copy, read it, and finish the result."""
    outcomes: dict[str, str] = {}
    integrity: list[str] = []
    copies: dict[str, str] = {}  # the canary target's copies of the hidden tests: name -> outcome
    originals: dict[str, str] = {}  # the copied target's own outcomes: name -> outcome
    cargo_path = shutil.which(CARGO) or CARGO
    sequence = sorted(b.targets.values(), key=lambda t: (t.name == canary, t.prefix != "", t.name))
    for t in sequence:
        mine = t.name == canary
        env = binary_env(order, cargo_path)
        listing = run_binary(order, t, libtest.list_args(), env)
        if listing["timed_out"]:
            finish(order, result, None, parts, outcomes, collect, integrity, started, timed_out=True)
            return
        listed, why = libtest.parse_list(listing["out"].data(), listing["exit_code"])
        if listed is None or not listing["out"].complete():
            if not mine:
                collect.append(t.src)
                parts.append(f"collect error: {t.src}: {why or 'its test list was too long'}")
            continue
        ran = run_binary(order, t, libtest.run_args(), {**env, "RUSTC_BOOTSTRAP": "1"})
        if ran["timed_out"]:
            finish(order, result, None, parts, outcomes, collect, integrity, started, timed_out=True)
            return
        reading = libtest.parse_json(ran["out"].data(), listed, ran["exit_code"], t.src)
        if not ran["out"].complete():
            reading.contradictions.clear()
            reading.verdicts.clear()
            reading.notes.append(f"{t.src}: its output passed {RUN_LIMIT:,} bytes: its tests count as failed")
        integrity += reading.contradictions
        if mine:
            for name, (outcome, _) in reading.outcomes().items():
                copies[name] = outcome
            continue
        parts.append(f"\n== {t.src} ({len(listed)} tests, exit status {ran['exit_code']})")
        for name, (outcome, _) in reading.outcomes().items():
            tid = t.prefix + name
            if tid in outcomes and outcomes[tid] != outcome:
                reading.notes.append(f"{tid} is the id of tests in two targets: the worse outcome counts")
            if tid not in outcomes or outcome == "failed":
                outcomes[tid] = outcome
            if canaries and t.name == canaries.get("copy_of"):
                originals[name] = outcome
            parts.append(f"test {tid} ... {outcome}")
        for name, out in reading.failure_output.items():
            parts.append(f"---- {t.prefix}{name} output ----\n{cut(out.rstrip(), SHOWN_OUTPUT)}")
        err = text(ran["err"].data()) if ran["err"] is not None else ""
        if err.strip():
            parts.append(f"---- {t.src} stderr ----\n{cut(err.rstrip(), SHOWN_OUTPUT)}")
        parts += [f"CONTRADICTION: {c}" for c in reading.contradictions]
        parts += [f"note: {n}" for n in reading.notes]
    if canaries and "expect" in canaries:
        expect: dict[str, str] = canaries["expect"]
        got = {tid: copies.get(tid.split("::", 1)[1]) for tid in expect}
        # the copy's tests must pass wherever their originals passed
        for name, outcome in originals.items():
            if outcome == "passed" and name in copies:
                expect[f"{canary}::{name}"] = "passed"
                got[f"{canary}::{name}"] = copies[name]
        canaries["got"] = got
    if not b.targets and not collect:
        status = EXIT_NOTHING
    elif any(o == "failed" for o in outcomes.values()):
        status = EXIT_FAILED
    elif collect:
        status = EXIT_BUILD
    else:
        status = EXIT_PASSED
    finish(order, result, status, parts, outcomes, collect, integrity, started)


def finish(
    order: Order,
    result: dict[str, Any],
    status: int | None,
    parts: list[str],
    outcomes: dict[str, str],
    collect: list[str],
    integrity: list[str],
    started: float,
    *,
    timed_out: bool = False,
) -> None:
    result["exit_code"] = status
    result["timed_out"] = result.get("timed_out", False) or timed_out
    result["check_seconds"] = round(time.monotonic() - started, 4)
    result["output"] = cut("\n".join(parts), order.output_limit)
    result["report"] = {
        "channel": "framed",
        "forged": None,
        "end": None if status is None else {"t": "end", "exit": status, "collected": len(outcomes)},
        "ends": 0 if status is None else 1,
        "sessions": 1,
        "outcomes": outcomes,
        "collect_errors": collect,
        "integrity": integrity,
    }
