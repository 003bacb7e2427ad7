"""junit: Java projects in the Maven layout (src/main/java, src/test/java and their
resources), compiled with javac and run with the JUnit Platform console launcher in the
java-21 environment, outcomes only from the signed records of the grader's JUnit listener
(grader/box/reporters/java/README.md), never from what the tests print or write.

The steps, all as the unprivileged user but the ones marked root:

1. (root) the test sources go back to the base: every file under src/test/ the patch added
   or changed (test helpers, test resources, META-INF/services registrations there) is
   restored or removed, but for the hidden tests and the canaries, and the whole src/test/
   tree becomes root's and read-only for the run;
2. one javac: the main sources the patch changed (with every main source that names what
   they define, transitively) against the base release's classes compiled when the instance
   image was built (`junit-run --prebuild`, /opt/java-build), and the test classes the check
   runs with the test sources they use (-sourcepath src/test/java, sources preferred). A main
   source that does not compile fails every test (exit status 3, no test runs); a test class
   that does not compile is a collect error (its tests did not run), the others run. Without
   a prebuilt base every main source is compiled;
3. (root) the classes become root's and read-only; the launcher JVM runs the selected
   classes with the listener on its class path and a report channel of its own.

Test ids: `fully.qualified.Class.method` (`method[N]` for the N-th invocation of a
parameterized or repeated test, `Outer$Inner.method` for a @Nested class); a task's lists
may also say `pkg.Class#method`, and `pkg.Class` for every test of a class (passed when at
least one ran and none failed). The canaries: a test class of this run in a hidden test's
package, named like the task's tests, some of whose methods must fail and some pass; their
failures are taken back out of the launcher's exit status.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import resource
import shutil
import stat
import struct
import subprocess
import tempfile
from typing import Any

from .. import signed
from ..hidden import hidden_manifest
from ..order import CheckSpec, Order
from ..proc import remaining, run_as_user, text
from ..tree import Tree, rel_ok

# --- what a patch may not change ---------------------------------------------------------

# Restored to the base after the patch, anywhere in the repository (a file the patch adds
# there is removed): the build's configuration (Maven, Gradle, Ant; the task's check does
# not run them, but the image's install step did and a task's own command may), JUnit's
# configuration and its ServiceLoader registrations (extensions, listeners, engines run
# code before and around every test), a module descriptor (it would change how javac
# resolves the sources), and compiled code a patch brings: jars, class files, native
# libraries (*.so is removed as bytecode by the supervisor). The test classes (*Test.java
# and the other names Surefire runs) are protected by name; every other file under
# src/test/ (helpers, resources, META-INF/services) is put back by this runner (step 1).
JUNIT_SERVICES = [
    "org.junit.platform.launcher.TestExecutionListener",
    "org.junit.platform.launcher.LauncherSessionListener",
    "org.junit.platform.launcher.LauncherDiscoveryListener",
    "org.junit.platform.launcher.PostDiscoveryFilter",
    "org.junit.platform.engine.TestEngine",
    "org.junit.jupiter.api.extension.Extension",
]
PROTECT: dict[str, list[str]] = {
    "names": [
        "pom.xml",
        "build.gradle",
        "build.gradle.kts",
        "settings.gradle",
        "settings.gradle.kts",
        "gradle.properties",
        "gradle-wrapper.properties",
        "gradlew",
        "mvnw",
        "build.xml",
        "module-info.java",
        "junit-platform.properties",
        *JUNIT_SERVICES,
    ],
    "suffixes": [".jar", ".class", ".war", ".jmod", ".dylib", ".jnilib", ".dll"],
    "prefixes": [],
    "dir_suffixes": [".mvn"],
    "test_modules": ["*Test.java", "Test*.java", "*Tests.java", "*TestCase.java", "*IT.java"],
    "test_dir_names": [],
}

TESTS = True
COMMAND = "none"
DECIDED_BY = "test report"
LABEL = "JUnit"
EXIT_PASSED, EXIT_FAILED = 0, 1
EXIT_NO_TESTS, EXIT_MAIN = 2, 3
EXIT_MEANING: dict[int, str] = {
    EXIT_NO_TESTS: "the launcher found no tests",
    EXIT_MAIN: "the main sources (src/main/java) do not compile: no test ran",
    255: "the JUnit launcher could not start",
}

MAIN, TEST = "src/main/java", "src/test/java"
MAIN_RESOURCES, TEST_RESOURCES = "src/main/resources", "src/test/resources"
TEST_TREE = "src/test"  # everything the task's tests are made of
PREBUILT = "/opt/java-build"  # junit-run --prebuild, at instance image build
DEPS = "/opt/java-deps"  # maven-fetch, at instance image build
JAVA_SHARE = "/usr/share/java"  # Debian's junit5
REPORTER_JARS = "/usr/share/grader-java"  # the environment's build of reporters/java
RUNNER_JARS = [
    "junit-platform-console.jar",
    "junit-platform-launcher.jar",
    "junit-platform-engine.jar",
    "junit-platform-commons.jar",
    "junit-platform-reporting.jar",
    "junit-jupiter-engine.jar",
    "junit-jupiter-api.jar",
    "junit-jupiter-params.jar",
    "opentest4j.jar",
    "apiguardian-api.jar",
    "picocli.jar",
    "univocity-parsers.jar",
]
API_JARS = [
    "junit-jupiter-api.jar",
    "junit-jupiter-params.jar",
    "opentest4j.jar",
    "apiguardian-api.jar",
    "junit-platform-commons.jar",
]
# The JVMs are short: C1 only and the serial collector cost less CPU than C2's compiler
# threads and a parallel collector save (measured: javac of one file 1.7 -> 1.2 s of CPU, the
# launcher on one test class 1.9 -> 1.0 s).
JVM_FAST = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:-UsePerfData"]
# The environment's class-data-sharing archives (environments/java-21/cds-train): javac's and
# the launcher's classes as the JVM maps them, not read and verified again from the jars
# (javac 0.80 -> 0.50 s of CPU, the launcher 1.0 -> 0.7 s, in the java-mini image). Root's,
# read-only, in the image; the JVM uses one only when its build and the start of its class
# path are the archive's, and reads the jars otherwise. Its messages about a mismatch are kept
# out of the output (they would land in the tests'). An image built before has none: its JVMs
# run as before.
CDS = REPORTER_JARS + "/cds"
CDS_QUIET = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off"]


def cds(jvm: str) -> list[str]:
    """The JVM options that map `jvm`'s archive ("javac", "launcher"), if the image has it."""
    path = f"{CDS}/{jvm}.jsa"
    if not os.path.isfile(path):
        return []
    return [f"-XX:SharedArchiveFile={path}", *CDS_QUIET]


JAVAC_OPTIONS = ["-proc:none", "-nowarn", "-Xlint:none", "-Xmaxerrs", "10000", "-implicit:class"]
QUIET = ["-XDsuppressNotes"]  # no "Note: ... uses a deprecated API" lines
ERROR = re.compile(r"^(.+?\.java):\d+: error:", re.M)
IDENT = re.compile(rb"[A-Za-z_$][A-Za-z0-9_$]*")
DECLARED = re.compile(rb"\b(?:class|interface|enum|record)\s+([A-Za-z_$][A-Za-z0-9_$]*)")
PACKAGE = re.compile(rb"^\s*package\s+([A-Za-z_][\w.]*)\s*;", re.M)
TEST_METHOD = re.compile(rb"@(?:org\.junit\.jupiter\.api\.)?(?:Test|ParameterizedTest)\b[^;{]*?\bvoid\s+(\w+)\s*\(")
IMPORT = re.compile(rb"^\s*import\s+(static\s+)?([A-Za-z_][\w.]*(?:\.\*)?)\s*;", re.M)
GRADER_ID = "--grader-id="  # the runner's own word in CheckSpec.args: a listed id to answer
OPTIONS = ("--jvm-arg=", "--encoding=")


# --- on the host: the task's check -> the order's ------------------------------------------


def class_of(test_id: str) -> tuple[str, str]:
    """(class, method) of a test id: `pkg.Class.method`, `pkg.Class#method`, with an
    invocation `[N]` or parameter types `(java.lang.String)` kept on the method; a whole class
    (`pkg.Class`) gives its name and ''."""
    if "#" in test_id:
        cls, _, method = test_id.partition("#")
        return cls, method
    head, cut = test_id, len(test_id)
    for mark in ("[", "("):
        i = test_id.find(mark)
        if 0 <= i < cut:
            cut = i
    head = test_id[:cut]
    cls, dot, method = head.rpartition(".")
    if not dot or not method or method[:1].isupper():
        return test_id, ""  # the last name is a class's: the whole class
    return cls, method + test_id[cut:]


def source_of(cls: str, root: str = TEST) -> str:
    """The source file of a (possibly nested) class in the Maven layout."""
    return f"{root}/{cls.split('$', 1)[0].replace('.', '/')}.java"


def listed_files(ids: list[str]) -> list[str]:
    """The test sources the task's ids name, protected with the hidden tests."""
    return sorted({source_of(class_of(tid)[0]) for tid in ids if class_of(tid)[0]})


def is_test_source(rel: str) -> bool:
    return rel.startswith(TEST + "/") and rel.endswith(".java") and rel.count("/") >= 3


def check_path(p: str) -> str:
    """A path to run: a test source (src/test/java/pkg/FooTest.java) or a class name."""
    if p.endswith(".java"):
        if not rel_ok(p) or not is_test_source(p):
            raise ValueError(f"test path {p!r} is not a test source under {TEST}/")
        return p
    if not re.fullmatch(r"[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*", p):
        raise ValueError(f"test path {p!r} is neither a test source nor a class name")
    return source_of(p)


def words(test_ids: list[str]) -> list[str]:
    """Words of the task's own test names (camelCase and snake_case split), for canaries
    that look like them."""
    out: set[str] = set()
    for tid in test_ids:
        cls, method = class_of(tid)
        name = cls.rsplit(".", 1)[-1].split("$")[-1] + "_" + re.split(r"[\[(]", method)[0]
        for w in re.split(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])", name):
            if re.fullmatch(r"[A-Za-z][a-z0-9]{1,15}", w) and w.lower() not in ("test", "tests"):
                out.add(w.lower())
    return sorted(out)


def plan(check: dict[str, Any], hidden: dict[str, str | None]) -> CheckSpec:
    """`paths`: the test classes to run, as sources or class names (default: the hidden test
    sources and the classes the lists name); `args`: --jvm-arg=ARG (the launcher's JVM) and
    --encoding=NAME (default: pom.xml's project.build.sourceEncoding, else UTF-8)."""
    listed = list(check.get("fail_to_pass") or []) + list(check.get("pass_to_pass") or [])
    hidden_tests = sorted(p for p, d in hidden.items() if d is not None and is_test_source(p))
    paths = [check_path(str(p)) for p in check.get("paths") or []]
    paths = paths or sorted(set(hidden_tests) | set(listed_files(listed)))
    if not paths:
        raise ValueError("a junit check needs paths or hidden test sources")
    args = [str(a) for a in check.get("args") or []]
    for arg in args:
        if not arg.startswith(OPTIONS):
            raise ValueError(f"unknown junit runner argument {arg!r} (known: --jvm-arg=ARG, --encoding=NAME)")
    # ids the report must answer in the task's own form: `#` ones, and those that may name a
    # class (or every invocation of a method) rather than one test
    special = sorted({tid for tid in listed if "#" in tid or not class_of(tid)[1]})
    named = set(listed_files(listed))
    # the canaries' model: a hidden test the lists name, else one the check runs
    sources = (
        [p for p in hidden_tests if p in named] or [p for p in hidden_tests if p in paths] or hidden_tests or paths
    )
    home = sources[0].rsplit("/", 1)[0]
    return CheckSpec(
        kind="junit",
        args=[GRADER_ID + tid for tid in special] + args,
        paths=sorted(dict.fromkeys(paths)),
        canaries=bool(check.get("canaries", True)),
        canary_dir=home,
        canary_words=words(listed),
        canary_sources=sources[:1],
    )


# --- class files -------------------------------------------------------------------------


def class_source(data: bytes) -> str | None:
    """The source file a class file was compiled from, as a path of its package
    (`org/x/Foo.java` for org/x/Foo$1.class): its this_class and SourceFile attribute."""
    try:
        if data[:4] != b"\xca\xfe\xba\xbe":
            return None
        count = struct.unpack_from(">H", data, 8)[0]
        pool: dict[int, Any] = {}
        i, pos = 1, 10
        while i < count:
            tag = data[pos]
            if tag == 1:
                n = struct.unpack_from(">H", data, pos + 1)[0]
                pool[i] = data[pos + 3 : pos + 3 + n].decode("utf-8", "replace")
                pos += 3 + n
            elif tag in (7, 8, 16, 19, 20):
                pool[i] = struct.unpack_from(">H", data, pos + 1)[0]
                pos += 3
            elif tag == 15:
                pos += 4
            elif tag in (3, 4, 9, 10, 11, 12, 17, 18):
                pos += 5
            elif tag in (5, 6):
                pos += 9
                i += 1
            else:
                return None
            i += 1
        this = pool.get(pool.get(struct.unpack_from(">H", data, pos + 2)[0], 0), "")
        pos += 6
        interfaces = struct.unpack_from(">H", data, pos)[0]
        pos += 2 + 2 * interfaces
        for _ in range(2):  # fields, then methods
            members = struct.unpack_from(">H", data, pos)[0]
            pos += 2
            for _ in range(members):
                attrs = struct.unpack_from(">H", data, pos + 6)[0]
                pos += 8
                for _ in range(attrs):
                    pos += 6 + struct.unpack_from(">I", data, pos + 2)[0]
        attrs = struct.unpack_from(">H", data, pos)[0]
        pos += 2
        for _ in range(attrs):
            name, length = struct.unpack_from(">HI", data, pos)
            if pool.get(name) == "SourceFile":
                source = pool.get(struct.unpack_from(">H", data, pos + 6)[0])
                if isinstance(this, str) and isinstance(source, str) and "/" not in source:
                    package = this.rsplit("/", 1)[0] + "/" if "/" in this else ""
                    return package + source
                return None
            pos += 6 + length
    except (struct.error, IndexError):
        return None
    return None


def class_sources(classes_dir: str) -> dict[str, str]:
    """Every class file under a directory (relative path) -> its source (a package path)."""
    out: dict[str, str] = {}
    for root, dirs, files in os.walk(classes_dir):
        dirs.sort()
        for name in files:
            if name.endswith(".class"):
                path = os.path.join(root, name)
                with open(path, "rb") as f:
                    source = class_source(f.read())
                if source is not None:
                    out[os.path.relpath(path, classes_dir)] = source
    return out


# --- what changed since the base ----------------------------------------------------------


def files_under(repo: str, root: str, java: bool | None) -> dict[str, str | None]:
    """rel path -> sha256 of every file under `root` (java: .java only; False: the others;
    None: all), None for what is not a regular file (a link is never followed)."""
    out: dict[str, str | None] = {}
    top = os.path.join(repo, root)
    if not os.path.isdir(top) or os.path.islink(top):
        return out
    for here, dirs, files in os.walk(top, followlinks=False):
        dirs.sort()
        for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(here, d))]):
            path = os.path.join(here, name)
            rel = os.path.relpath(path, repo)
            if java is not None and name.endswith(".java") != java:
                continue
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode):
                out[rel] = None
                continue
            with open(path, "rb") as f:
                out[rel] = hashlib.sha256(f.read()).hexdigest()
    return out


# comments, string and character literals (text blocks too): what names no type
CODE_NOISE = re.compile(
    rb'"""(?:[^"\\]|\\.|"(?!""))*"""|"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|//[^\n]*|/\*.*?\*/',
    re.S,
)


def code(data: bytes) -> bytes:
    """Java source less its comments and literals."""
    return CODE_NOISE.sub(b" ", data)


def identifiers(data: bytes) -> set[bytes]:
    return set(IDENT.findall(code(data)))


def dependents(sources: dict[str, bytes], changed: set[str], names: dict[str, set[bytes]]) -> set[str]:
    """The sources to recompile: the changed ones and every source that names (as a word) a
    type a recompiled or deleted source defines, transitively. A source that does not name a
    changed type cannot depend on it: Java reaches a type only by its name (a constant
    javac inlined, an overload or a signature resolved at compile time included). `names`:
    source -> the simple names it defines, for the changed and deleted ones (a source found
    to depend defines its file's name and the types it declares)."""
    words = {rel: identifiers(data) for rel, data in sources.items()}
    todo = sorted(changed)
    out = {rel for rel in changed if rel in sources}
    seen: set[bytes] = set()
    while todo:
        rel = todo.pop()
        defined = names.get(rel)
        if defined is None:
            defined = defined_names(rel, sources.get(rel), {})
        defined = defined - seen
        seen |= defined
        if not defined:
            continue
        for other, ws in words.items():
            if other not in out and ws & defined:
                out.add(other)
                todo.append(other)
    return out


def defined_names(rel: str, data: bytes | None, base_classes: dict[str, str]) -> set[bytes]:
    """The simple names a source defines: its file name, the top-level and nested types it
    declares (now) and the classes the base compiled from it."""
    stem = rel.rsplit("/", 1)[-1][: -len(".java")]
    out = {stem.encode()}
    if data is not None:
        out |= set(DECLARED.findall(code(data)))
    package_rel = rel.split("/", 3)[-1] if rel.count("/") >= 3 else rel
    for cls, src in base_classes.items():
        if src == package_rel:
            for part in cls[: -len(".class")].rsplit("/", 1)[-1].split("$"):
                if part and not part.isdigit():
                    out.add(part.encode())
    return out


# --- the reporter ----------------------------------------------------------------------------


def reporter_listing(directory: str) -> bytes:
    """`sha256  path` of every file the reporter's jars are built from (src/, build.sh), as
    build.sh writes it next to them (SOURCES)."""
    rels = ["build.sh"]
    for here, dirs, files in os.walk(os.path.join(directory, "src")):
        dirs.sort()
        rels += [os.path.relpath(os.path.join(here, f), directory) for f in files]
    lines = []
    for rel in sorted(rels):
        with open(os.path.join(directory, rel), "rb") as f:
            lines.append(f"{hashlib.sha256(f.read()).hexdigest()}  {rel}\n")
    return "".join(lines).encode()


def reporter(order: Order) -> tuple[str, str, str]:
    """(report module jar, listener jar, launch.py) of the reporter this archive ships,
    installed root-owned for this run: the environment's jars when they were built from the
    same files, else built here (as root, from our own sources)."""
    d = signed.install_reporters("java")
    launch = os.path.join(d, "launch.py")
    try:
        with open(os.path.join(REPORTER_JARS, "SOURCES"), "rb") as f:
            same = f.read() == reporter_listing(d)
    except OSError:
        same = False
    if same:
        return f"{REPORTER_JARS}/grader-report.jar", f"{REPORTER_JARS}/grader-junit-listener.jar", launch
    out = os.path.join(d, "jars")
    proc = subprocess.run(
        ["sh", os.path.join(d, "build.sh"), out],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=max(1.0, remaining(order)),
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp", "LANG": "C.UTF-8"},
    )
    if proc.returncode:
        raise RuntimeError(f"the JUnit reporter does not build: {text(proc.stdout)[-2000:]}")
    return f"{out}/grader-report.jar", f"{out}/grader-junit-listener.jar", launch


# --- the run -------------------------------------------------------------------------------

_BASE_TESTS: dict[str, tuple[int, bytes] | str] = {}  # before_patch: src/test/ as it was


def before_patch(order: Order, tree: Tree) -> None:
    """src/test/ at the base (every file: sources, resources, service registrations), to put
    back after the patch whatever the supervisor's protected names do not cover."""
    _BASE_TESTS.clear()
    top = os.path.join(order.repo, TEST_TREE)
    if not os.path.isdir(top) or os.path.islink(top):
        return
    for here, dirs, files in os.walk(top, followlinks=False):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(here, d))]:
            path = os.path.join(here, name)
            rel = os.path.relpath(path, order.repo)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                _BASE_TESTS[rel] = os.readlink(path)
            elif stat.S_ISREG(st.st_mode):
                data = tree.read(rel)
                if data is not None:
                    _BASE_TESTS[rel] = (stat.S_IMODE(st.st_mode), data)


def restore_tests(order: Order, tree: Tree, keep: set[str]) -> list[str]:
    """Every file under src/test/ back to the base but `keep` (the hidden tests, the
    canaries): returns the paths put back or removed."""
    if not order.protect.tests:
        return []
    owner = (order.uid, order.gid)
    now = files_under(order.repo, TEST_TREE, None)
    done = []
    for rel in sorted(set(now) | set(_BASE_TESTS)):
        if rel in keep:
            continue
        base = _BASE_TESTS.get(rel)
        if base is None:
            tree.remove(rel)
        elif isinstance(base, str):
            if rel in now and now[rel] is None and os.readlink(os.path.join(order.repo, rel)) == base:
                continue
            tree.symlink(rel, base, owner=owner)
        else:
            mode, data = base
            if now.get(rel) == hashlib.sha256(data).hexdigest():
                continue
            tree.write(rel, data, mode=mode, owner=owner)
        done.append(rel)
    return done


def seal(path: str) -> None:
    """Everything under `path` root's and read-only (directories 0755): nothing the tests run
    can change the test sources, their resources or the compiled classes while they run."""
    if not os.path.isdir(path) or os.path.islink(path):
        return
    for here, dirs, files in os.walk(path, followlinks=False):
        for name in files + dirs:
            p = os.path.join(here, name)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                os.lchown(p, 0, 0)
                continue
            mode = 0o755 if stat.S_ISDIR(st.st_mode) else stat.S_IMODE(st.st_mode) & 0o555
            if st.st_uid == 0 and st.st_gid == 0 and stat.S_IMODE(st.st_mode) == mode:
                continue  # already so (the hidden tests, the canaries): their change time stays
            os.chown(p, 0, 0)  # first: root may chmod only what it owns
            os.chmod(p, mode)
    os.chown(path, 0, 0)
    os.chmod(path, 0o755)


def source_encoding(tree: Tree) -> str:
    data = tree.read("pom.xml") or b""
    m = re.search(rb"<project\.build\.sourceEncoding>\s*([\w.:-]+)\s*<", data)
    return m.group(1).decode() if m else "UTF-8"


def copy_resources(repo: str, root: str, dest: str, rels: list[str] | None = None) -> None:
    """Resource files (every non-.java file under `root`, or only `rels`) copied under `dest`,
    less JUnit's configuration where it comes from the library's own resources."""
    top = os.path.join(repo, root)
    chosen = rels if rels is not None else [r for r, d in files_under(repo, root, False).items() if d is not None]
    for rel in chosen:
        inside = os.path.relpath(os.path.join(repo, rel), top)
        name = inside.rsplit("/", 1)[-1]
        if root == MAIN_RESOURCES and (
            name == "junit-platform.properties" or inside.startswith("META-INF/services/org.junit.")
        ):
            continue
        src = os.path.join(repo, rel)
        if os.path.islink(src) or not os.path.isfile(src):
            continue
        target = os.path.join(dest, inside)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(src, target)


def prebuilt() -> dict[str, Any] | None:
    try:
        with open(os.path.join(PREBUILT, "build.json")) as f:
            info: dict[str, Any] = json.load(f)
    except (OSError, ValueError):
        return None
    if info.get("version") != 1 or info.get("main") != MAIN or info.get("test") != TEST:
        return None
    return info


class Build:
    """What one grade compiles: the main sources to recompile (with the base's classes
    copied less what they replace) and the test classes, in one javac."""

    def __init__(self, order: Order, tree: Tree, work: str, encoding: str):
        self.order, self.tree, self.work = order, tree, work
        self.encoding = encoding
        self.info = prebuilt()
        listing = os.listdir(DEPS) if os.path.isdir(DEPS) else []
        self.deps = sorted(os.path.join(DEPS, f) for f in listing if f.endswith(".jar"))
        self.classes = os.path.join(work, "classes")  # this run's javac output: main delta + tests
        self.main = os.path.join(PREBUILT, "main") if self.info else os.path.join(work, "main")
        self.recompile: list[str] = []
        self.log: list[str] = []
        self.javac_runs = 0
        self.javac_cpu = 0.0

    def prepare_main(self) -> None:
        """Decide which main sources to recompile; copy the base's classes less the stale ones
        when anything of main changed."""
        info = self.info or {"sources": {}, "resources": {}}
        now = files_under(self.order.repo, MAIN, True)
        changed = {rel for rel, digest in now.items() if info["sources"].get(rel) != digest}
        deleted = set(info["sources"]) - set(now)
        res_now = files_under(self.order.repo, MAIN_RESOURCES, False)
        res_changed = res_now != {k: v for k, v in info["resources"].items()}
        if not changed and not deleted and not res_changed and self.info:
            self.log.append("main: unchanged since the base, its prebuilt classes are used as they are")
            return
        base_dir = os.path.join(PREBUILT, "main")
        base_classes = class_sources(base_dir) if self.info else {}
        data = {rel: self.tree.read(rel) or b"" for rel in now}
        names = {rel: defined_names(rel, data.get(rel), base_classes) for rel in changed | deleted}
        recompile = dependents(data, changed | deleted, names)
        self.recompile = sorted(r for r in recompile if now.get(r) is not None or r in changed)
        stale = {src for src in (set(recompile) | deleted)}
        stale_pkg = {rel.split("/", 3)[-1] for rel in stale}
        self.main = os.path.join(self.work, "main")
        os.makedirs(self.main)
        if self.info:
            resources = {os.path.relpath(r, MAIN_RESOURCES) for r in info["resources"]}
            for here, _, files in os.walk(base_dir):
                for name in files:
                    path = os.path.join(here, name)
                    rel = os.path.relpath(path, base_dir)
                    if rel in resources or base_classes.get(rel) in stale_pkg:
                        continue
                    if rel.endswith(".class") and rel not in base_classes:
                        continue  # a class file we cannot attribute: recompiled if needed
                    os.makedirs(os.path.dirname(os.path.join(self.main, rel)), exist_ok=True)
                    shutil.copyfile(path, os.path.join(self.main, rel))
        copy_resources(self.order.repo, MAIN_RESOURCES, self.main)
        self.log.append(
            f"main: {len(changed)} changed and {len(deleted)} deleted source(s); "
            f"{len(self.recompile)} recompiled against the base's classes"
            + ("" if self.info else " (no prebuilt base in this image: every main source)")
        )

    def javac(self, files: list[str]) -> dict[str, Any]:
        shutil.rmtree(self.classes, ignore_errors=True)
        os.makedirs(self.classes)
        os.chown(self.classes, self.order.uid, self.order.gid)
        options = list(self.info["javac"]) if self.info else list(JAVAC_OPTIONS)
        release = str(self.info.get("release") or "") if self.info else ""
        cp = [self.main, *self.deps, *(f"{JAVA_SHARE}/{j}" for j in API_JARS)]
        argfile = os.path.join(self.work, "javac.files")
        with open(argfile, "w") as f:
            f.write("\n".join('"' + p.replace("\\", "\\\\") + '"' for p in files) + "\n")
        os.chmod(argfile, 0o644)
        argv = [
            "javac",
            *(f"-J{o}" for o in JVM_FAST + cds("javac")),
            *options,
            "-encoding",
            self.encoding,
            "-d",
            self.classes,
            "-cp",
            os.pathsep.join(cp),
            "-sourcepath",
            TEST,
            "-Xprefer:source",
            *QUIET,
            *(["--release", release] if release else []),
            "@" + argfile,
        ]
        before = children_cpu()
        run = run_as_user(
            self.order, argv, timeout=max(0.5, remaining(self.order)), stdout_limit=self.order.output_limit
        )
        self.javac_runs += 1
        self.javac_cpu += children_cpu() - before
        return run

    def compile(self, tests: list[str]) -> tuple[bool, list[str], str, dict[str, Any] | None]:
        """(main compiled, test sources that did not compile, javac's output, a run that
        timed out). The tests that do not compile are left out and the rest compiled again;
        errors only in test sources the given ones use are put on the files that fail alone."""
        output: list[str] = []
        broken: list[str] = []
        tests = list(tests)
        while True:
            run = self.javac(self.recompile + tests)
            out = text(run["out"].data())
            if run["timed_out"]:
                return False, broken, "\n".join(output + [out]), run
            if run["exit_code"] == 0:
                if out.strip():
                    output.append(out)
                return True, broken, "\n".join(output), None
            output.append(out)
            bad = {os.path.normpath(p) for p in ERROR.findall(out)}
            if any(p.startswith(MAIN + "/") for p in bad) or not bad:
                return False, broken, "\n".join(output), None
            bad_tests = [t for t in tests if os.path.normpath(t) in bad]
            if not bad_tests:  # in a test source the given ones use: which of them fail alone
                bad_tests = []
                for t in tests:
                    alone = self.javac(self.recompile + [t])
                    if alone["timed_out"]:
                        return False, broken, "\n".join(output), alone
                    if alone["exit_code"]:
                        bad_tests.append(t)
                if not bad_tests:
                    return False, broken, "\n".join(output), None
            broken += bad_tests
            tests = [t for t in tests if t not in bad_tests]
            if not tests and not self.recompile:
                return True, broken, "\n".join(output), None


def children_cpu() -> float:
    """CPU seconds of the processes this one has waited for (user and system)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def parse_args(args: list[str]) -> tuple[list[str], list[str], str | None]:
    """(listed ids to answer, JVM arguments, encoding) from the check's args."""
    ids, jvm, encoding = [], [], None
    for arg in args:
        if arg.startswith(GRADER_ID):
            ids.append(arg[len(GRADER_ID) :])
        elif arg.startswith("--jvm-arg="):
            jvm.append(arg[len("--jvm-arg=") :])
        elif arg.startswith("--encoding="):
            encoding = arg[len("--encoding=") :]
    return ids, jvm, encoding


def is_file(tree: Tree, rel: str) -> bool:
    st = tree.lstat(rel)
    return st is not None and stat.S_ISREG(st.st_mode)


def class_name(rel: str) -> str:
    return rel[len(TEST) + 1 : -len(".java")].replace("/", ".")


def answer(outcomes: dict[str, str], ids: list[str]) -> None:
    """Outcomes under the ids the task's lists use: `pkg.Class#method` for the test
    `pkg.Class.method`; `pkg.Class` (or a method of several invocations) for every test under
    it: failed when any failed, passed when any passed and none failed, else skipped."""
    for tid in ids:
        if tid in outcomes:
            continue
        canonical = tid.replace("#", ".", 1)
        if canonical in outcomes:
            outcomes[tid] = outcomes.pop(canonical)
            continue
        marks = (canonical + ".", canonical + "$", canonical + "[", canonical + "(")
        under = [o for k, o in outcomes.items() if k.startswith(marks)]
        if not under:
            continue
        if any(o in ("failed", "error") for o in under):
            outcomes[tid] = "failed"
        elif "passed" in under:
            outcomes[tid] = "passed"
        else:
            outcomes[tid] = "skipped"


def without_canaries(code: int | None, report: dict[str, Any], canary_ids: set[str]) -> int | None:
    """The launcher's status with the canaries' failures taken back out: 0 where it exited 1
    only because must-fail canaries failed (its status and the listener's last word agree,
    no other test failed)."""
    end = report.get("end") or {}
    if code != EXIT_FAILED or report.get("forged") or report.get("problem") or end.get("exit") != code:
        return code
    outcomes = report.get("outcomes", {})
    if any(o in ("failed", "error") for tid, o in outcomes.items() if tid not in canary_ids):
        return code
    if any(o == "failed" for tid, o in outcomes.items() if tid in canary_ids):
        return EXIT_PASSED
    return code


def hide_canaries(output: str, canaries: dict[str, Any] | None) -> str:
    """The launcher's lines about the canaries left out of the output (their class's subtree
    of the tree, their blocks of the failures section), and the launcher's counts, which
    include them."""
    if not canaries or "expect" not in canaries:
        return output
    cls = str(canaries["class"])
    named = re.compile(rf"[─ ]{re.escape(cls)}\b")
    keep: list[str] = []
    subtree: int | None = None  # the column of the canary class's branch while in its subtree
    in_block = False  # in a canary's block of the failures section
    for line in output.splitlines():
        marks = [i for i in (line.find("├─"), line.find("└─")) if i >= 0]
        branch = min(marks) if marks else -1
        if subtree is not None:
            if branch > subtree or (branch < 0 and line.strip() and not line[: subtree + 1].strip(" │")):
                continue
            subtree = None
        if branch >= 0 and named.search(line):
            subtree = branch
            continue
        if line.startswith("  JUnit ") and not line.startswith("   "):  # a failure's header
            in_block = f":{cls}:" in line
            if in_block:
                continue
        elif in_block:
            if line.startswith("    ") or not line.strip():
                continue
            in_block = False
        if re.match(r"^\[\s+\d+ (containers|tests) ", line) or line.startswith(
            ("Test run finished after", "Failures (")
        ):
            continue
        keep.append(line)
    return "\n".join(keep) + ("\n" if output.endswith("\n") else "")


def run(order: Order, tree: Tree, result: dict[str, Any], canaries: dict[str, Any] | None) -> None:
    check = order.check
    ids, jvm_args, encoding = parse_args(list(check.args or []))
    keep = set(hidden_manifest(order))  # placed, or removed when the test patch deletes them
    if canaries and "expect" in canaries:
        keep.add(canaries["path"])
    restored = restore_tests(order, tree, keep)
    if restored:
        result["protected_restored"] = sorted(set(result.get("protected_restored") or []) | set(restored))
    seal(os.path.join(order.repo, TEST_TREE))
    report_jar, listener_jar, launch = reporter(order)

    work = tempfile.mkdtemp(prefix=".grader-junit-", dir="/tmp")
    os.chmod(work, 0o755)
    build = Build(order, tree, work, encoding or source_encoding(tree))
    build.prepare_main()
    selected = [p for p in check.paths if p != (canaries or {}).get("path")]
    present = [p for p in selected if is_file(tree, p)]
    canary_src = [canaries["path"]] if canaries and "expect" in canaries else []
    main_ok, broken, javac_out, timed = build.compile(present + canary_src)
    build.log.append(f"javac: {build.javac_runs} run(s), {build.javac_cpu:.1f} s of CPU")
    prelude = "".join(f"junit: {line}\n" for line in build.log)
    prelude += f"== javac\n{javac_out}\n" if javac_out.strip() else ""
    if timed is not None:
        signed.finish(result, None, prelude, {"problem": "javac ran out of time"}, True)
        return
    if not main_ok:
        report: dict[str, Any] = {
            "forged": None,
            "end": {"t": "end", "exit": EXIT_MAIN},
            "ends": 1,
            "sessions": 1,
            "outcomes": {},
            "collect_errors": sorted(selected),
            "integrity": [],
        }
        signed.split_canaries(report, canaries)
        output = prelude + "junit: the main sources do not compile: no test ran\n"
        signed.finish(result, EXIT_MAIN, output, report, False)
        return
    if build.info:  # the base's test classes, for what a test loads by name only
        copy_changed_test_resources(order, build)
    else:
        copy_resources(order.repo, TEST_RESOURCES, build.classes)
    seal(work)

    missing = [p for p in selected if p not in present]
    errors = sorted(set(p for p in broken if p in selected) | set(missing))
    selectors: list[str] = []
    for p in selected + canary_src:
        if p in broken or p in missing:
            continue
        if os.path.isfile(os.path.join(build.classes, p[len(TEST) + 1 : -len(".java")] + ".class")):
            selectors += ["--select-class", class_name(p)]
        elif p in selected:
            errors.append(p)
    if not selectors:
        selectors = ["--select-package", "grader.junit.run.nothing"]
    java = shutil.which("java") or "java"
    classpath = [build.classes, build.main]
    if build.info:
        classpath.append(os.path.join(PREBUILT, "test"))
    classpath += build.deps
    argv = [
        "python3",
        "-I",
        launch,
        os.path.realpath(java),
        "-XX:+DisableAttachMechanism",
        *JVM_FAST,
        *cds("launcher"),
        "-Djava.awt.headless=true",
        "--module-path",
        report_jar,
        "--add-modules",
        "grader.report",
        "--add-opens",
        "java.base/java.io=grader.report",
        f"-Dgrader.test.root={TEST}",
        "-Dgrader.collect.errors=" + os.pathsep.join(sorted(set(errors))),
        *jvm_args,
        "-cp",
        os.pathsep.join([*(f"{JAVA_SHARE}/{j}" for j in RUNNER_JARS), listener_jar]),
        "org.junit.platform.console.ConsoleLauncher",
        "execute",
        "--disable-banner",
        "--disable-ansi-colors",
        "--details=tree",
        "--class-path",
        os.pathsep.join(classpath),
        *selectors,
    ]
    before = children_cpu()
    run_, rep = signed.run_signed(order, argv, settings={"repo": order.repo}, env={})
    prelude += f"junit: the launcher: {children_cpu() - before:.1f} s of CPU\n"
    canary_ids = set(canaries["expect"]) if canaries and "expect" in canaries else set()
    code = without_canaries(run_["exit_code"], rep, canary_ids)
    if rep.get("end") is not None and code != run_["exit_code"]:
        rep["end"] = {**rep["end"], "exit": code}
    if canaries and "expect" in canaries:
        rep["collect_errors"] = [c for c in rep.get("collect_errors", []) if c != canaries["path"]]
    signed.split_canaries(rep, canaries)
    answer(rep.setdefault("outcomes", {}), ids)
    output = prelude + hide_canaries(text(run_["out"].data()), canaries)
    signed.finish(result, code, output, rep, run_["timed_out"])
    result["check_seconds"] = run_["seconds"]


def copy_changed_test_resources(order: Order, build: Build) -> None:
    """The test resources that differ from the base's (the hidden tests may bring some): the
    base's are on the class path with its prebuilt test classes."""
    info = build.info or {}
    base = info.get("test_resource_files") or {}
    now = files_under(order.repo, TEST_RESOURCES, None)
    changed = [rel for rel, digest in now.items() if digest is not None and base.get(rel) != digest]
    if changed:
        copy_resources(order.repo, TEST_RESOURCES, build.classes, changed)


# --- canaries ---------------------------------------------------------------------------------

# never a canary method's name: Java's reserved words and literals
JAVA_RESERVED = set(
    "abstract assert boolean break byte case catch char class const continue default do double else enum extends "
    "false final finally float for goto if implements import instanceof int interface long native new null package "
    "private protected public return short static strictfp super switch synchronized this throw throws transient true "
    "try void volatile while var yield record sealed permits".split()
)
FILLER = (
    "value values empty result basic single order default missing mixed simple large small edge "
    "round split case encode decode parse format string number input output null"
).split()


def camel(ws: list[str]) -> str:
    return "".join(w[:1].upper() + w[1:] for w in ws)


def canary_assertion(rng: random.Random, must_pass: bool) -> str:
    """One check in a shape tasks' tests have, true iff must_pass."""
    a = "org.junit.jupiter.api.Assertions"
    shape = rng.randrange(5)
    if shape == 0:
        xs = [rng.randint(-50, 99) for _ in range(rng.randint(3, 6))]
        want = sum(xs) + (0 if must_pass else rng.choice([-2, -1, 1, 3]))
        return (
            f"        int total = 0;\n        for (int x : new int[] {{{', '.join(map(str, xs))}}}) {{\n"
            f"            total += x;\n        }}\n        {a}.assertEquals({want}, total);\n"
        )
    if shape == 1:
        word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 8)))
        k = rng.randint(2, 9)
        want = len(word) * k + (0 if must_pass else 1)
        return f'        {a}.assertEquals({want}, "{word}".repeat({k}).length());\n'
    if shape == 2:
        seed = f"{rng.getrandbits(48):012x}"
        digest = hashlib.sha256(seed.encode()).hexdigest()[:10]
        if not must_pass:
            digest = digest[:-1] + ("0" if digest[-1] != "0" else "1")
        return (
            '        byte[] hash = java.security.MessageDigest.getInstance("SHA-256")\n'
            f'                .digest("{seed}".getBytes(java.nio.charset.StandardCharsets.UTF_8));\n'
            f'        {a}.assertEquals("{digest}", java.util.HexFormat.of().formatHex(hash).substring(0, 10));\n'
        )
    if shape == 3:
        xs = rng.sample(range(100), rng.randint(4, 7))
        i = rng.randrange(len(xs))
        want = sorted(xs)[i] + (0 if must_pass else 1)
        return (
            f"        int[] items = {{{', '.join(map(str, xs))}}};\n        java.util.Arrays.sort(items);\n"
            f"        {a}.assertEquals({want}, items[{i}]);\n"
        )
    exc = "ArithmeticException" if must_pass else rng.choice(["IllegalStateException", "IllegalArgumentException"])
    n = rng.randint(1, 99)
    return (
        f"        int zero = {n} - {n};\n        {a}.assertThrows({exc}.class, () -> {{ int unused = {n} / zero; }});\n"
    )


def make_canaries(order: Order, tree: Tree) -> dict[str, Any] | None:
    """A test class of this run in the package of the first hidden test (its directory),
    named like the task's test classes, with test methods named like theirs: some must fail,
    some must pass. It imports what that hidden test imports, so it compiles exactly when the
    hidden test's imports do."""
    check = order.check
    if not check.canaries:
        return None
    folder = check.canary_dir
    if not folder.startswith(TEST + "/"):
        return {"skipped": f"the tests are not under {TEST}/"}
    source = b""
    for rel in check.canary_sources:
        source = tree.read(rel) or b""
        if source:
            break
    package = folder[len(TEST) + 1 :].replace("/", ".")
    m = PACKAGE.search(source)
    if m and m.group(1).decode() != package:
        return {"skipped": "the hidden test's package is not its directory"}
    rng = random.SystemRandom()
    vocabulary = sorted(set(check.canary_words) | set(FILLER))
    model = check.paths[0].rsplit("/", 1)[-1][: -len(".java")] if check.paths else "Test"
    imports = []
    for static, name in IMPORT.findall(source):
        line = f"import {'static ' if static else ''}{name.decode()};"
        if line not in imports:
            imports.append(line)
    imported = {line.rstrip(";").rsplit(".", 1)[-1] for line in imports}
    cls = ""
    for _ in range(200):
        stem = camel(rng.sample(vocabulary, rng.randint(1, 2)))
        cls = (
            ("Test" + stem)
            if model.startswith("Test") and not model.endswith(("Test", "Tests"))
            else stem + ("Tests" if model.endswith("Tests") else "Test")
        )
        rel = f"{folder}/{cls}.java"
        in_main = f"{MAIN}/{folder[len(TEST) + 1 :]}/{cls}.java"
        free = tree.lstat(rel) is None and tree.lstat(in_main) is None
        if free and cls not in imported and cls.encode() not in source:
            break
    else:
        return {"skipped": "no free name for the canary class"}
    declared = TEST_METHOD.findall(source)
    methods_style = "test" if not declared or 2 * sum(n.startswith(b"test") for n in declared) >= len(declared) else ""
    kinds = [True] * rng.randint(2, 3) + [False] * rng.randint(2, 3)
    rng.shuffle(kinds)
    taken: set[str] = set()
    body = ""
    expect: dict[str, str] = {}
    for must_pass in kinds:
        for _ in range(200):
            ws = rng.sample(vocabulary, rng.randint(1, 3))
            name = ("test" + camel(ws)) if methods_style else (ws[0] + camel(ws[1:]))
            if name not in taken and name not in JAVA_RESERVED and name.encode() not in source:
                break
        taken.add(name)
        check_ = canary_assertion(rng, must_pass)
        body += f"\n    @org.junit.jupiter.api.Test\n    void {name}() throws Exception {{\n{check_}    }}\n"
        expect[f"{package}.{cls}.{name}"] = "passed" if must_pass else "failed"
    text_ = f"package {package};\n\n" + "".join(f"{i}\n" for i in imports[:40]) + f"\nclass {cls} {{{body}}}\n"
    data = text_.encode()
    tree.write(rel, data, mode=0o444, owner=(0, 0))
    return {"path": rel, "digest": hashlib.sha256(data).hexdigest(), "expect": expect, "class": cls}
