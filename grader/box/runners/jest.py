"""jest: the repository's own jest (node_modules/jest), one process in band (-i: the tests
run in the process whose signed reporter, grader/box/reporters/node/jest-reporter.cjs, jest
loads before any test; no worker's IPC to forge). Ids are `<test file>::<describe > ... >
it>`. A file that fails to load or whose run errs (jest's testExecError) counts its tests
failed, never passed.

Two modes, chosen by the repository at the base commit:

- **its own configuration** (a jest.config.{js,ts,mjs,cjs,mts,cts,json} at its root, or a
  "jest" key in package.json): read before the patch by jest itself (`--showConfig`, as
  the unprivileged user, on the base's files) and frozen into an inline JSON --config, so
  that no configuration file is evaluated while the submission's code is there. What the
  grader owns is set over it: the reporters (the signed one and jest's default), the
  cache directory, no watchman, every test path given run (single project). Every file of
  the repository the configuration names as a module jest loads (setup files, global
  setup and teardown, a transform, an environment, a resolver, a sequencer, a snapshot
  resolver or serializer, a moduleNameMapper target that is a file, unless it maps the
  package's own name: that is the library) is protected like the configuration: restored
  to the base after the patch, sealed and watched while the tests run.
- **plain** (no configuration): the old inline one, `transform: {}` (plain CommonJS tests)
  and node's environment.

The task's jest options go in `args` (never one that loads code or replaces the reporter)."""

from __future__ import annotations

import json
import stat
from typing import Any

from ..order import CheckSpec, Order
from ..tree import Tree, rel_ok
from . import nodejs

PROTECT = nodejs.NODE_PROTECT
TESTS = True
COMMAND = "optional"  # a build step run before the tests (tsc, say); the tests decide
DECIDED_BY = "test report"
ID_STYLE = nodejs.ID_STYLE  # listed ids may be written as other benchmarks write them
LABEL = "jest"
# jest's own statuses: 0 every test passed, 1 a test (or a file) failed
EXIT_PASSED, EXIT_FAILED = 0, 1
EXIT_MEANING: dict[int, str] = {}

# jest options the runner sets itself, or that would load repository code (a setup file, a
# transform, an environment, a resolver, a runner) or run in other processes
REFUSED = (
    "--config",
    "-c",
    "--reporters",
    "--setupFiles",
    "--setupFilesAfterEnv",
    "--globalSetup",
    "--globalTeardown",
    "--testRunner",
    "--runner",
    "--resolver",
    "--transform",
    "--testEnvironment",
    "--env",
    "--projects",
    "--selectProjects",
    "--rootDir",
    "--watch",
    "--watchAll",
    "--json",
    "--outputFile",
    "--testResultsProcessor",
    "--snapshotResolver",
    "--moduleNameMapper",
    "--maxWorkers",
    "-w",
    "--runInBand",
    "--shard",
    "--cacheDirectory",
    "--haste",
    "--listTests",
    "--showConfig",
    "--init",
)
# options that stop the run early or select tests: no canaries with them
BLOCKERS = (
    "-t",
    "--testNamePattern",
    "-b",
    "--bail",
    "-o",
    "--onlyChanged",
    "-f",
    "--onlyFailures",
    "--findRelatedTests",
    "--testPathPattern",
    "--changedSince",
    "--lastCommit",
)
JEST_BINS = ("node_modules/jest/bin/jest.js", "node_modules/jest-cli/bin/jest.js")
CACHE = "/tmp/.grader-jest-cache"
# where jest finds a repository's configuration by itself (its root), first found first
CONFIG_FILES = tuple(f"jest.config.{ext}" for ext in ("js", "ts", "mjs", "cjs", "mts", "cts", "json"))
# a project's settings, as --showConfig prints them, that are options of an inline
# configuration too (jest 24-30); the others (id, cwd, cache, ...) are left out
PROJECT_OPTIONS = (
    "automock clearMocks collectCoverageFrom coverageDirectory coveragePathIgnorePatterns dependencyExtractor "
    "detectLeaks detectOpenHandles displayName errorOnDeprecated extensionsToTreatAsEsm fakeTimers filter "
    "forceCoverageMatch globalSetup globalTeardown globals haste injectGlobals moduleDirectories "
    "moduleFileExtensions moduleNameMapper modulePathIgnorePatterns modulePaths openHandlesTimeout prettierPath "
    "resetMocks resetModules resolver restoreMocks rootDir roots runner runtime sandboxInjectedGlobals setupFiles "
    "setupFilesAfterEnv skipFilter skipNodeResolution slowTestThreshold snapshotFormat snapshotResolver "
    "snapshotSerializers testEnvironment testEnvironmentOptions testLocationInResults testMatch "
    "testPathIgnorePatterns testRegex testRunner timers transform transformIgnorePatterns "
    "unmockedModulePathPatterns watchPathIgnorePatterns workerIdleMemoryLimit"
).split()
# the whole run's settings kept from the repository's configuration (reporters, coverage,
# bail, the failure exit status, watching, sharding are the grader's)
GLOBAL_OPTIONS = ("testTimeout", "maxConcurrency", "randomize", "testSequencer", "snapshotFormat", "verbose")
# settings that name modules jest loads (as paths once --showConfig resolved them)
MODULE_SETTINGS = (
    "setupFiles",
    "setupFilesAfterEnv",
    "globalSetup",
    "globalTeardown",
    "testEnvironment",
    "resolver",
    "runner",
    "testRunner",
    "runtime",
    "snapshotResolver",
    "snapshotSerializers",
    "dependencyExtractor",
    "filter",
    "testSequencer",
    "prettierPath",
)

listed_files = nodejs.listed_files


def plan(check: dict[str, Any], hidden: dict[str, str | None]) -> CheckSpec:
    return nodejs.plan_check("jest", check, hidden, REFUSED)


def make_canaries(order: Order, tree: Tree) -> dict[str, Any] | None:
    own = order.check.base_config is not None
    return nodejs.make_canaries(order, tree, "jest", BLOCKERS, per_unit=False, transformed=own)


def config(order: Order, reporters: str) -> dict[str, Any]:
    """The plain configuration, inline: node's environment, no transform (no babel config
    of the repository is read), the signed reporter beside jest's default one."""
    return {
        "rootDir": order.repo,
        "testEnvironment": "node",
        "transform": {},
        "reporters": ["default", f"{reporters}/jest-reporter.cjs"],
        "cacheDirectory": CACHE,
        "watchman": False,
        "testMatch": ["**/*"],
        "testPathIgnorePatterns": ["/node_modules/"],
    }


# --- the repository's own configuration ---------------------------------------------------------


def jest_bin(tree: Tree) -> str:
    jest = next((b for b in JEST_BINS if tree.lstat(b) is not None), None)
    if jest is None:
        raise ValueError(
            "jest is not installed in the repository (node_modules/jest): the task's install must bring it"
        )
    return jest


def repository_config(tree: Tree) -> str | None:
    """The repository's jest configuration at its root, as jest would find it: a
    jest.config.* file, else package.json when it has a "jest" key; None for none."""
    for name in CONFIG_FILES:
        st = tree.lstat(name)
        if st is not None and stat.S_ISREG(st.st_mode):
            return name
    data = tree.read("package.json")
    if data is not None:
        try:
            doc = json.loads(data)
        except ValueError:
            return None
        if isinstance(doc, dict) and isinstance(doc.get("jest"), (dict, str)):
            return "package.json"
    return None


def shown_config(text_: str) -> dict[str, Any]:
    """The JSON document `jest --showConfig` printed (after any line a configuration
    printed itself)."""
    start = text_.find('{\n  "configs"')
    if start < 0:
        start = text_.find("{")
    try:
        doc = json.loads(text_[start:]) if start >= 0 else None
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("configs"), list) or not doc["configs"]:
        raise ValueError(f"jest --showConfig printed no configuration: {text_[-1500:]}")
    return doc


def project_options(project: dict[str, Any], *, single: bool) -> dict[str, Any]:
    """One project's settings as inline options: moduleNameMapper and transform back into
    the mappings jest takes (--showConfig prints them as lists of pairs)."""
    out = {k: v for k, v in project.items() if k in PROJECT_OPTIONS}
    mapper = project.get("moduleNameMapper")
    if isinstance(mapper, list):
        out["moduleNameMapper"] = {str(p[0]): p[1] for p in mapper if isinstance(p, list) and len(p) == 2}
    transform = project.get("transform")
    if isinstance(transform, list):
        out["transform"] = {
            str(t[0]): [t[1], t[2] if len(t) > 2 and t[2] is not None else {}]
            for t in transform
            if isinstance(t, list) and len(t) >= 2
        }
    if single:
        # the runner names the test files itself (--runTestsByPath): every one of them runs
        out["testMatch"], out["testRegex"] = ["**/*"], []
    return out


def frozen_config(doc: dict[str, Any], reporters: str) -> dict[str, Any]:
    """The inline configuration of a run: the repository's, as jest resolved it at the base,
    with what the grader owns set over it."""
    projects = [p for p in doc["configs"] if isinstance(p, dict)]
    glob = doc.get("globalConfig") if isinstance(doc.get("globalConfig"), dict) else {}
    assert isinstance(glob, dict)
    out: dict[str, Any] = {k: glob[k] for k in GLOBAL_OPTIONS if k in glob}
    if len(projects) == 1:
        out.update(project_options(projects[0], single=True))
    else:
        out["projects"] = [project_options(p, single=False) for p in projects]
        out["rootDir"] = glob.get("rootDir")
    if str(out.get("testSequencer", "")).endswith("/@jest/test-sequencer/build/index.js"):
        del out["testSequencer"]  # jest's own
    out.update(
        {
            "reporters": ["default", f"{reporters}/jest-reporter.cjs"],
            "cacheDirectory": CACHE,
            "watchman": False,
        }
    )
    return out


def own_name(tree: Tree) -> str:
    """The package's own name (package.json's "name"), "" without one."""
    try:
        doc = json.loads(tree.read("package.json") or b"{}")
    except ValueError:
        return ""
    name = doc.get("name") if isinstance(doc, dict) else None
    return name if isinstance(name, str) else ""


def names_itself(pattern: Any, name: str) -> bool:
    """Whether a moduleNameMapper pattern maps the package's own name (or a subpath of it):
    `^@reduxjs/toolkit$` -> src/index.ts is the library's own code, not a test's stand-in."""
    if not name or not isinstance(pattern, str):
        return False
    literal = pattern.strip("^$").replace("\\", "")
    return literal == name or literal.startswith(name + "/")


def module_files(doc: dict[str, Any], repo: str, name: str = "") -> list[str]:
    """The files of the repository (outside node_modules/, which is protected whole) that
    the configuration names as modules jest loads, relative to the repository. A
    moduleNameMapper entry for the package's own `name` maps to the library's own code,
    which stays the submission's to change."""
    named: list[Any] = []
    glob = doc.get("globalConfig") if isinstance(doc.get("globalConfig"), dict) else {}
    for where in [glob, *doc["configs"]]:
        if not isinstance(where, dict):
            continue
        for key in MODULE_SETTINGS:
            value = where.get(key)
            named += value if isinstance(value, list) else [value]
        haste = where.get("haste")
        if isinstance(haste, dict):
            named.append(haste.get("hasteImplModulePath"))
        for t in where.get("transform") or []:
            if isinstance(t, list) and len(t) >= 2:
                named.append(t[1])
        for m in where.get("moduleNameMapper") or []:
            if isinstance(m, list) and len(m) == 2 and not names_itself(m[0], name):
                named += m[1] if isinstance(m[1], list) else [m[1]]
    out = set()
    for path in named:
        if not isinstance(path, str) or not path.startswith(repo + "/") or "$" in path:
            continue
        rel = path[len(repo) + 1 :]
        if rel_ok(rel) and "node_modules" not in rel.split("/"):
            out.add(rel)
    return sorted(out)


def before_patch(order: Order, tree: Tree) -> None:
    """With a configuration of the repository's own: jest reads it at the base (before the
    patch, so no submitted code runs), the run gets it frozen, and the files it names as
    modules are protected with the hidden tests. Given by the host (what an earlier grade of
    the same image read), it is not read again."""
    if order.check.base_config is None:
        where = repository_config(tree)
        if where is None:
            return
        order.check.base_config = read_config(order, tree, where)
    order.protect.files = sorted(set(order.protect.files) | set(order.check.base_config["files"]))


def read_config(order: Order, tree: Tree, where: str) -> dict[str, Any]:
    """What jest prints of the repository's configuration at `where`, read at the base."""
    jest = jest_bin(tree)
    argv = ["node", jest, "--showConfig", "--ci", "-i", "--watchman=false", "--config", where]
    out = nodejs.config_at_base(
        order, argv, f"jest could not read the repository's configuration ({where})", stdout_limit=8 << 20
    )
    doc = shown_config(out)
    files = [
        rel
        for rel in module_files(doc, order.repo, own_name(tree))
        if (st := tree.lstat(rel)) is not None and stat.S_ISREG(st.st_mode)
    ]
    return {"file": where, "shown": doc, "files": files}


def run(order: Order, tree: Tree, result: dict[str, Any], canaries: dict[str, Any] | None) -> None:
    check = order.check
    jest = jest_bin(tree)
    reporters = nodejs.reporter_dir()
    prelude, made, guard = nodejs.prepare(order, tree, result, canaries)
    extra = [canaries["path"]] if canaries and "expect" in canaries and "path" in canaries else []
    own = check.base_config
    inline = frozen_config(own["shown"], reporters) if own else config(order, reporters)
    argv = [
        "node",
        jest,
        "--ci",
        "-i",
        "--no-cache",
        "--config",
        json.dumps(inline),
        *(check.args or []),
        "--runTestsByPath",
        *extra,
        *check.paths,
    ]
    configured = list(own["files"]) if own else []
    nodejs.run_units(
        order,
        tree,
        result,
        canaries,
        [("jest", list(check.paths), argv)],
        "jest",
        guard,
        prelude=prelude,
        extra_sealed=made + configured,
        watched_extra=configured,
    )
