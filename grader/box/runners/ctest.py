"""ctest: C and C++ projects built with CMake. The build runs as the unprivileged user (the
task's command, or CMake's defaults); then the supervisor itself lists the tests with ctest,
hands the tree to root and runs each test as the unprivileged user, one at a time, judging it
from its own exit status (grader/box/native.py). Outcomes never come from text a test prints,
nor from a file or a process the tests can reach.

Test ids are the names `ctest -N` lists. Canaries: a small C program of this run, named like
the task's tests and linked with a hidden test's own link line (so with the library under
test), registered as extra tests beside the hidden ones: some must fail, some must pass.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import shlex
import shutil
import stat
import time
from typing import Any

from .. import native
from ..order import CheckSpec, Order
from ..proc import remaining, run_as_user, text
from ..tree import Tree, rel_ok

# The build files that define or run the tests, and the test sources: restored to the base
# whatever the patch did. Every CMakeLists.txt and *.cmake is protected, not only the ones
# with add_test: any of them can define a test, redefine a test's target or set WILL_FAIL on
# it (set_tests_properties(... DIRECTORY ...)). The cost: a patch cannot add a source file to
# the library's CMake build (docs/runners/ctest.md: include it from a file the build already
# compiles instead).
CMAKE_NAMES = [
    "CMakeLists.txt",
    "CMakePresets.json",
    "CMakeUserPresets.json",
    "CTestTestfile.cmake",
    "CTestConfig.cmake",
    "CTestCustom.cmake",
    "CMakeCache.txt",
]
C_TEST_MODULES = [
    f"{stem}.{ext}"
    for stem in ("test_*", "*_test", "*_tests", "test-*", "*-test", "*_unittest", "*_unittests")
    for ext in ("c", "cc", "cpp", "cxx", "h", "hh", "hpp")
]
PROTECT: dict[str, list[str]] = {
    "names": CMAKE_NAMES,
    "suffixes": [".cmake", ".cmake.in"],
    "prefixes": [],
    "dir_suffixes": [],
    "test_modules": C_TEST_MODULES,
    "test_dir_names": ["tests", "test", "testing", "unittests"],
}

# The check's exit status is the supervisor's own summary of the tests it ran: 0 when none
# failed, 1 when some did, 4 when the tests could not be listed.
EXIT_PASSED, EXIT_FAILED = 0, 1
EXIT_MEANING: dict[int, str] = {4: "the tests could not be listed (the build left no usable test list)"}
LABEL = "ctest"

TESTS = True
COMMAND = "optional"
DECIDED_BY = "the exit status of each test process, run by the grader itself one at a time"

DEFAULT_BUILD_DIR = "build"
OPTIONS = {"--build-dir": str, "--timeout": float, "--make-arg": str}
FLAGS = ("--no-freeze",)


# --- the task's check -----------------------------------------------------------------------


def parse_args(args: list[str]) -> dict[str, Any]:
    """The runner's own options (a task's `args`): --build-dir DIR (default build), --timeout
    SECONDS (per test), --no-freeze (the tree stays the user's: for suites whose tests must
    write into it; weaker), --make-arg ARG (automake: more arguments for make check)."""
    out: dict[str, Any] = {"build_dir": DEFAULT_BUILD_DIR, "timeout": None, "no_freeze": False, "make_args": []}
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        if arg in FLAGS:
            out["no_freeze"] = True
            i += 1
            continue
        if name not in OPTIONS:
            raise ValueError(f"unknown runner argument {arg!r} (known: {', '.join([*OPTIONS, *FLAGS])})")
        if not eq:
            if i + 1 >= len(args):
                raise ValueError(f"{name} needs a value")
            value = args[i + 1]
            i += 1
        i += 1
        if name == "--build-dir":
            value = value.rstrip("/")
            if not rel_ok(value):
                raise ValueError(f"--build-dir {value!r} is not a directory inside the repository")
            out["build_dir"] = value
        elif name == "--timeout":
            try:
                seconds = float(value)
            except ValueError:
                raise ValueError(f"--timeout {value!r} is not a number of seconds") from None
            if not seconds > 0:
                raise ValueError("--timeout must be positive")
            out["timeout"] = seconds
        else:
            out["make_args"].append(value)
    return out


def words(ids: list[str]) -> list[str]:
    """Words of the task's own test names, for canaries that look like them."""
    out: set[str] = set()
    for tid in ids:
        name = tid.rsplit("/", 1)[-1]
        name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
        out |= {w.lower() for w in re.split(r"[^A-Za-z0-9]+", name) if re.fullmatch(r"[A-Za-z][A-Za-z0-9]{1,15}", w)}
    return sorted(out - {"test", "tests"})


def plan_check(kind: str, check: dict[str, Any], hidden: dict[str, str | None]) -> CheckSpec:
    args = list(check.get("args") or [])
    parse_args(args)  # refuse what the runner does not know, at load time
    listed = list(check.get("fail_to_pass") or []) + list(check.get("pass_to_pass") or [])
    sources = sorted(p for p, d in hidden.items() if d is not None)
    c_sources = [p for p in sources if p.endswith((".c", ".cc", ".cpp", ".cxx"))] or sources
    home = c_sources[0].rsplit("/", 1)[0] if c_sources and "/" in c_sources[0] else ""
    return CheckSpec(
        kind=kind,
        command=check.get("command"),
        args=args,
        paths=list(check.get("paths") or []),
        canaries=bool(check.get("canaries", True)),
        canary_dir=home,
        canary_words=words(listed),
        canary_sources=c_sources[:3],
    )


def plan(check: dict[str, Any], hidden: dict[str, str | None]) -> CheckSpec:
    """The order's check from the task's: `command` builds (default: CMake's, in --build-dir),
    `args` are the runner's options, `paths` (optional) the ctest names to run."""
    return plan_check("ctest", check, hidden)


def listed_files(ids: list[str]) -> list[str]:
    """ctest's ids name tests, not files: the hidden tests are protected by their own paths."""
    return []


# --- the build tree the image prepared ------------------------------------------------------


def before_patch(order: Order, tree: Tree) -> None:
    """A build tree the instance image configured (its CMakeCache.txt is there) is handed to
    root for the patch: the patch can neither change nor add a file in it (a patch that tries
    does not apply). It goes back to the unprivileged user for the build."""
    rel = parse_args(order.check.args or [])["build_dir"]
    if tree.lstat(rel) is None:
        return
    if tree.lstat(rel + "/CMakeCache.txt") is None and tree.lstat(rel + "/Makefile") is None:
        raise ValueError(f"the base commit has {rel}/ but it is not a configured build tree: choose --build-dir")
    native.freeze([os.path.join(order.repo, rel)])


def unlink_outputs(build: str) -> list[str]:
    """Remove what the image's build linked (executables, shared and static libraries: every
    ELF file or archive outside CMakeFiles/ that is not an object file), keeping the objects.
    The build then relinks everything from objects that are up to date, and a target whose
    sources no longer compile is left missing instead of stale: a hidden test that does not
    compile with the patch fails, it does not run the base's executable."""
    removed = []
    for dirpath, dirnames, filenames in os.walk(build, followlinks=False):
        dirnames[:] = [d for d in dirnames if d != "CMakeFiles"]
        for name in filenames:
            if name.endswith((".o", ".obj")):
                continue
            path = os.path.join(dirpath, name)
            try:
                if not stat.S_ISREG(os.lstat(path).st_mode):
                    continue
                with open(path, "rb") as f:
                    magic = f.read(8)
            except OSError:
                continue
            if magic.startswith(b"\x7fELF") or magic == b"!<arch>\n":
                os.unlink(path)
                removed.append(path)
    return removed


def restore_prepared(order: Order, tree: Tree, rel: str) -> bool:
    """The image's build tree given back to the unprivileged user (True), or whatever the
    patch left at its place removed (False)."""
    parent = rel.rsplit("/", 1)[0] if "/" in rel else ""
    if parent:
        tree.mkdir(parent)  # real directories all the way: a link the patch made is replaced
    st = tree.lstat(rel)
    if st is not None and stat.S_ISDIR(st.st_mode) and st.st_uid == 0:
        native.thaw([os.path.join(order.repo, rel)], order.uid, order.gid)
        unlink_outputs(os.path.join(order.repo, rel))
        return True
    tree.remove(rel)
    return False


def drop_scratch(build: str) -> None:
    """Remove ctest's own scratch directory (build/Testing, made by `include(CTest)` at configure
    time): in the frozen tree ctest could not write its LastTest.log there and its listing would
    end with 8. Where no Testing/ exists, ctest makes none it cannot write and lists as usual.
    The supervisor runs the tests itself: nothing of it is needed."""
    path = os.path.join(build, "Testing")
    st = os.lstat(path) if os.path.lexists(path) else None
    if st is None:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path, ignore_errors=True)
    else:
        os.unlink(path)


# --- canaries -------------------------------------------------------------------------------


def _canary_case(rng: random.Random, must_pass: bool) -> str:
    """The body of one canary case, in a shape tests have; it returns 0 iff must_pass."""
    xs = [rng.randint(-50, 99) for _ in range(rng.randint(3, 6))]
    want = sum(xs) if must_pass else sum(xs) + rng.choice([-2, -1, 1, 3])
    lines = [
        "int v[] = {" + ", ".join(str(x) for x in xs) + "};",
        "long s = 0;",
        "for (unsigned i = 0; i < sizeof v / sizeof v[0]; i++)",
        "    s += v[i];",
    ]
    fail = rng.randrange(5)
    if must_pass or fail == 0:
        lines.append(f"return s == {want} ? 0 : 1;")
    elif fail == 1:
        lines += [f"if (s != {want})", "    exit(3);", "return 0;"]
    elif fail == 2:
        lines += [f"if (s != {want})", "    abort();", "return 0;"]
    elif fail == 3:
        lines += [f"if (s != {want})", "    raise(SIGSEGV);", "return 0;"]
    else:
        lines += [
            f"if (s != {want}) {{",
            '    fprintf(stderr, "mismatch\\n");',
            f"    return {rng.randint(1, 9)};",
            "}",
        ]
        lines.append("return 0;")
    return "".join(f"        {line}\n" for line in lines)


def make_canaries(order: Order, tree: Tree) -> dict[str, Any] | None:
    """One C source of this run, beside the hidden tests, named like the task's tests: each
    canary is a ctest test running its executable with a token of this run; some must fail
    (exit status, exit(), abort(), SIGSEGV), some must pass. The executable is linked with a
    hidden test's own link line, so the library under test is loaded in it as in the tests."""
    check = order.check
    if not check.canaries:
        return None
    rng = random.SystemRandom()
    pool = sorted(set(check.canary_words) | {"basic", "value", "values", "empty", "simple", "large", "small", "edge"})
    pool = [w for w in pool if re.fullmatch(r"[a-z][a-z0-9]{1,15}", w)]
    folder = check.canary_dir
    while True:
        stem = "_".join(rng.sample(pool, 2))
        rel = f"{folder}/{stem}.c" if folder else f"{stem}.c"
        if tree.lstat(rel) is None:
            break
    kinds = [True] * rng.randint(2, 3) + [False] * rng.randint(2, 3)
    rng.shuffle(kinds)
    expect: dict[str, str] = {}
    tokens: dict[str, str] = {}
    body = ""
    for must_pass in kinds:
        while True:
            name = "_".join(rng.sample(pool, rng.randint(1, 3)))
            if name not in expect and name != stem:
                break
        token = os.urandom(6).hex()
        tokens[name] = token
        expect[name] = "passed" if must_pass else "failed"
        body += f'    if (strcmp(argv[1], "{token}") == 0) {{\n{_canary_case(rng, must_pass)}    }}\n'
    source = (
        "#include <signal.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n\n"
        "int main(int argc, char **argv)\n{\n    if (argc < 2)\n        return 2;\n" + body + "    return 2;\n}\n"
    )
    data = source.encode()
    tree.write(rel, data, mode=0o444, owner=(0, 0))
    return {"path": rel, "digest": hashlib.sha256(data).hexdigest(), "expect": expect, "tokens": tokens}


def link_lines(build: str, home: str, prefer: list[str]) -> list[str]:
    """CMake's link.txt files of the executables in the build directory of `home` (the hidden
    tests' directory), else anywhere in the build tree; those of listed tests first."""
    found: list[str] = []
    for top in ([os.path.join(build, home)] if home else []) + [build]:
        for dirpath, _dirnames, filenames in os.walk(top, followlinks=False):
            if "link.txt" in filenames and dirpath.endswith(".dir"):
                found.append(os.path.join(dirpath, "link.txt"))
        if found:
            break

    def rank(path: str) -> tuple[int, str]:
        target = os.path.basename(os.path.dirname(path))[: -len(".dir")]
        return (0 if target in prefer else 1, path)

    return sorted(found, key=rank)


def canary_link(link_txt: str, obj: str, exe: str) -> list[str] | None:
    """A hidden test's link command with its objects swapped for the canary's, its output for
    the canary's executable, and --no-as-needed so every library it names is loaded."""
    try:
        with open(link_txt) as f:
            lines = [line for line in f.read().splitlines() if line.strip()]
    except OSError:
        return None
    for line in lines:
        try:
            words = shlex.split(line)
        except ValueError:
            continue
        if "-o" not in words or not words:
            continue
        i = words.index("-o")
        if i + 1 >= len(words) or words[i + 1].endswith((".a", ".so")) or ".so." in words[i + 1]:
            continue
        argv = [words[0], "-Wl,--no-as-needed"]
        for n, w in enumerate(words[1:], 1):
            if n == i + 1:
                argv.append(exe)
            elif w.endswith((".o", ".obj")) and "CMakeFiles/" in w:
                continue
            elif w.startswith("@") and w.endswith(".rsp"):
                continue
            else:
                argv.append(w)
        return argv[:2] + [obj] + argv[2:]
    return None


def build_canaries(
    order: Order, canaries: dict[str, Any], build: str, prefer: list[str], env: dict[str, str]
) -> tuple[list[native.Test], str]:
    """Compile and link the canary program as the unprivileged user: its tests to add to the
    list, and what the compiler said."""
    src = os.path.join(order.repo, canaries["path"])
    stem = os.path.basename(src).rsplit(".", 1)[0]
    home = order.check.canary_dir
    where = os.path.join(build, home) if home and os.path.isdir(os.path.join(build, home)) else build
    for link_txt in link_lines(build, home, prefer)[:3]:
        cwd = os.path.dirname(os.path.dirname(os.path.dirname(link_txt)))  # the target's build directory
        name, n = stem, 1
        while os.path.lexists(os.path.join(where, name)) or os.path.lexists(os.path.join(where, f".{name}.o")):
            n += 1  # never over a file of the build (a test's own executable of that name)
            name = f"{stem}{n}"
        obj = os.path.join(where, f".{name}.o")
        exe = os.path.join(where, name)
        argv = canary_link(link_txt, obj, exe)
        if argv is None:
            continue
        said = b""
        for step, cmd_cwd in ((["cc", "-O0", "-c", src, "-o", obj], where), (argv, cwd)):
            rc, out, _, _ = native.run_as(
                step, uid=order.uid, gid=order.gid, cwd=cmd_cwd, env=env, timeout=min(120.0, remaining(order))
            )
            said += out
            if rc != 0:
                break
        else:
            tests = [
                {"name": name, "command": [exe, token], "props": {"WORKING_DIRECTORY": where}}
                for name, token in canaries["tokens"].items()
            ]
            return tests, text(said)
    return [], "the canaries could not be built"


def add_canaries(tests: list[native.Test], extra: list[native.Test], canaries: dict[str, Any]) -> list[native.Test]:
    """The canary tests at places of this run in the list, named `test_...` where most of the
    project's are, and never with the name of one of the project's tests (a number is added)."""
    names = {t["name"] for t in tests}
    prefix = "test_" if extra and sum(n.lower().startswith("test") for n in names) * 2 > len(names) else ""
    renamed: dict[str, str] = {}
    for t in extra:
        base = prefix + t["name"]
        name, n = base, 1
        while name in names or name in renamed.values():
            n += 1
            name = f"{base}{n}"
        renamed[t["name"]] = name
        t["name"] = name
    canaries["expect"] = {renamed.get(k, k): v for k, v in canaries["expect"].items()}
    out = list(tests)
    rng = random.SystemRandom()
    for t in extra:
        out.insert(rng.randint(0, len(out)), t)
    return out


# --- the run --------------------------------------------------------------------------------


def report_of(outcomes: dict[str, str], status: int, collect_errors: list[str]) -> dict[str, Any]:
    """The report in the shape channel.read_report gives, from the supervisor's own records."""
    return {
        "channel": "supervisor",
        "forged": None,
        "end": {"t": "end", "exit": status},
        "ends": 1,
        "sessions": 1,
        "outcomes": dict(outcomes),
        "collect_errors": list(collect_errors),
        "integrity": [],
    }


def cut(parts: list[str], limit: int) -> str:
    joined = "\n".join(parts)
    if len(joined) <= limit:
        return joined
    half = limit // 2
    return joined[:half] + f"\n[... {len(joined) - limit:,} characters omitted ...]\n" + joined[-half:]


def build_step(order: Order, command: str, result: dict[str, Any], parts: list[str]) -> bool:
    """Run the build as the unprivileged user. Its failure is the submission's (what did not
    build fails its tests); False only when the run's time ran out."""
    b = run_as_user(order, ["sh", "-c", command], timeout=remaining(order), stdout_limit=order.output_limit)
    result["build_seconds"] = b["seconds"]
    parts.append(f"== build: {command} (exit status {b['exit_code']}, {b['seconds']:.1f} s)\n{text(b['out'].data())}")
    if b["timed_out"]:
        result["timed_out"] = True
        result["exit_code"] = None
        return False
    return True


def run_listed(
    order: Order,
    result: dict[str, Any],
    canaries: dict[str, Any] | None,
    parts: list[str],
    *,
    build: str,
    opts: dict[str, Any],
    lister: Any,
    list_first: bool = False,
) -> None:
    """Canaries built, the tree frozen, the tests listed by `lister(env)` (before the freeze
    where listing builds, as make check does), run and judged."""
    env = native.base_env({**os.environ, **order.env})
    started = time.monotonic()
    collect_errors: list[str] = []
    tests: list[native.Test] = []

    def listing() -> None:
        nonlocal tests
        try:
            tests = lister(env)
        except native.ListError as exc:
            parts.append(f"== the tests could not be listed: {exc}")
            collect_errors.append(opts["build_dir"])

    if list_first:
        listing()
    extra: list[native.Test] = []
    if canaries and "expect" in canaries:
        extra, said = build_canaries(order, canaries, build, order.check.paths, env)
        if not extra:
            parts.append(f"== canaries\n{said}")
    roots = [] if opts["no_freeze"] else sorted({order.repo, build})
    native.freeze(roots)
    if not list_first:
        listing()
    if order.check.paths:
        wanted = set(order.check.paths)
        tests = [t for t in tests if t["name"] in wanted]
    if canaries and "expect" in canaries:
        tests = add_canaries(tests, extra, canaries)
    workdirs = [] if opts["no_freeze"] else native.open_workdirs(tests, roots)
    deadline = time.monotonic() + remaining(order)
    outcomes, shown, stopped = native.run_tests(
        tests,
        uid=order.uid,
        gid=order.gid,
        env=env,
        timeout=opts["timeout"] or remaining(order),
        deadline=deadline,
        workdirs=workdirs,
    )
    parts.extend(shown)
    if canaries and "expect" in canaries:
        canaries["got"] = {name: outcomes.pop(name, None) for name in canaries["expect"]}
    if canaries is not None:
        canaries.pop("tokens", None)
    status = 4 if collect_errors else (1 if "failed" in outcomes.values() else 0)
    result["exit_code"] = status
    result["timed_out"] = result.get("timed_out", False) or stopped
    result["check_seconds"] = round(time.monotonic() - started, 4)
    result["report"] = report_of(outcomes, status, collect_errors)


def run(order: Order, tree: Tree, result: dict[str, Any], canaries: dict[str, Any] | None) -> None:
    opts = parse_args(order.check.args or [])
    rel = opts["build_dir"]
    build = os.path.join(order.repo, rel)
    prepared = restore_prepared(order, tree, rel)
    configure = "" if prepared else f"cmake -S . -B {shlex.quote(rel)} && "
    command = order.check.command or f"{configure}cmake --build {shlex.quote(rel)} --parallel 2 -- -k"
    parts: list[str] = []
    try:
        if not build_step(order, command, result, parts):
            if canaries is not None:
                canaries.pop("tokens", None)
            return

        drop_scratch(build)

        def lister(env: dict[str, str]) -> list[native.Test]:
            if not os.path.isdir(build):
                raise native.ListError(f"the build left no {rel}/ directory")
            tests, _ = native.list_ctest(
                build, order.uid, order.gid, dict(env, HOME="/tmp"), min(300.0, remaining(order))
            )
            return tests

        run_listed(order, result, canaries, parts, build=build, opts=opts, lister=lister)
    finally:
        result["output"] = cut(parts, order.output_limit)
