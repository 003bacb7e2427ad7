"""vitest: the repository's own vitest (node_modules/vitest) with its own configuration
(vitest.config.* or vite.config.*, as vitest finds it at the base commit, named by --config),
`vitest run` with the signed reporter (grader/box/reporters/node/vitest-reporter.mjs) loaded by
absolute path from the root-owned reporters directory, jest's default-style output kept for
people. Ids are `<test file>::<describe > ... > test>`. A file that fails to load or whose
process crashes counts its tests failed, never passed.

Where the code runs: vitest's main process reads the configuration (the repository's
config file and what it imports, bundled by vite, and the plugins it names), loads the
reporters, then forks the test processes; the tests never run in it. The run is forced
onto the `forks` pool (`vmForks` where the repository uses a vm pool), one file at a
time: the channel's key and pipe stay in the main process, out of the tests' address
space (a `threads` worker would share it). Before the patch, vitest itself reads the
configuration (grader/box/reporters/node/vitest-probe.mjs, as the unprivileged user, on the
base's files): every repository file the configuration is built from, its setup files,
global setup, a custom environment and the alias targets that are files are then
protected like the configuration, restored to the base after the patch, sealed and
watched while the tests run: what runs in the main process before the reporter is the
base's.

The task's vitest options go in `args`; options that replace the reporters, the pool, the
configuration, or load code are refused."""

from __future__ import annotations

import json
import stat
from typing import Any

from ..order import CheckSpec, Order
from ..tree import Tree, rel_ok
from . import nodejs

PROTECT = nodejs.NODE_PROTECT
TESTS = True
COMMAND = "optional"  # a build step run before the tests; the tests decide
DECIDED_BY = "test report"
ID_STYLE = nodejs.ID_STYLE  # listed ids may be written as other benchmarks write them
LABEL = "vitest"
# vitest's own statuses: 0 every test passed, 1 a test or a file failed (or an error vitest
# could not attribute to a test)
EXIT_PASSED, EXIT_FAILED = 0, 1
EXIT_MEANING: dict[int, str] = {}

# vitest options the runner sets itself, or that would load code, replace the reporters,
# move the tests into this process's threads, watch, write files or reach another root
REFUSED = (
    "--config",
    "-c",
    "--root",
    "-r",
    "--dir",
    "--reporter",
    "--outputFile",
    "--pool",
    "--poolOptions",
    "--workspace",
    "--environment",
    "--browser",
    "--typecheck",
    "--coverage",
    "--watch",
    "-w",
    "--ui",
    "--api",
    "--open",
    "--standalone",
    "--update",
    "-u",
    "--cache",
    "--clearCache",
    "--mergeReports",
    "--maxWorkers",
    "--minWorkers",
    "--fileParallelism",
    "--no-file-parallelism",
    "--threads",
    "--single-thread",
    "--singleThread",
    "--execArgv",
    "--inspect",
    "--inspectBrk",
    "--inspect-brk",
    "--configLoader",
    "--diff",
    "--globalSetup",
    "--setupFiles",
)
# options that stop the run early or select tests: no canaries with them
BLOCKERS = (
    "-t",
    "--testNamePattern",
    "--bail",
    "--changed",
    "--related",
    "--shard",
    "--project",
    "--exclude",
    "--allowOnly",
)
VITEST_BINS = ("node_modules/vitest/vitest.mjs", "node_modules/vitest/dist/cli.js")

listed_files = nodejs.listed_files


def plan(check: dict[str, Any], hidden: dict[str, str | None]) -> CheckSpec:
    """`paths`: the test files vitest runs (its filters), default the hidden test files and
    the files the lists name; `args`: vitest's own options (never a reporter, a pool, a
    configuration, a setup file)."""
    spec = nodejs.plan_check("vitest", check, hidden, REFUSED)
    for arg in spec.args or []:
        if arg.startswith("--coverage.") or arg.startswith("--poolOptions.") or arg.startswith("--browser."):
            raise ValueError(f"the vitest runner sets {arg.split('=', 1)[0]} itself (or never): not in args")
    return spec


def make_canaries(order: Order, tree: Tree) -> dict[str, Any] | None:
    return nodejs.make_canaries(order, tree, "vitest", BLOCKERS, per_unit=False, transformed=True)


def vitest_bin(tree: Tree) -> str:
    found = next((b for b in VITEST_BINS if tree.lstat(b) is not None), None)
    if found is None:
        raise ValueError(
            "vitest is not installed in the repository (node_modules/vitest): the task's install must bring it"
        )
    return found


def probed(text_: str) -> dict[str, Any]:
    """The probe's JSON line (after anything the configuration printed itself)."""
    for line in reversed(text_.splitlines()):
        if line.startswith('{"version"'):
            try:
                doc = json.loads(line)
            except ValueError:
                break
            if isinstance(doc, dict) and isinstance(doc.get("projects"), list):
                return doc
    raise ValueError(f"vitest could not read the repository's configuration: {text_[-1500:]}")


def in_repo(path: Any, repo: str) -> str | None:
    """A path of the repository (outside node_modules/, protected whole), relative to it."""
    if not isinstance(path, str):
        return None
    path = path.removeprefix("/@fs")
    if not path.startswith(repo + "/"):
        return None
    rel = path[len(repo) + 1 :].split("?", 1)[0]
    return rel if rel_ok(rel) and "node_modules" not in rel.split("/") else None


def loaded_files(doc: dict[str, Any], repo: str) -> list[str]:
    """The repository's files vitest loads as modules by its configuration: the files the
    configuration is built from, setup files, global setup, a custom environment, and the
    alias targets (a file an import is mapped to)."""
    out: set[str] = set()
    for p in doc["projects"]:
        if not isinstance(p, dict):
            continue
        named = [p.get("configFile"), p.get("environment")]
        for key in ("deps", "setupFiles", "globalSetup", "alias"):
            value = p.get(key)
            named += value if isinstance(value, list) else []
        out |= {rel for rel in (in_repo(n, repo) for n in named) if rel}
    return sorted(out)


def before_patch(order: Order, tree: Tree) -> None:
    """Vitest reads the repository's configuration at the base (no submitted code exists
    yet); the files it is built from and names as modules are protected with the hidden
    tests, and the run names the same configuration file. Given by the host (what an earlier
    grade of the same image read), it is not read again."""
    vitest_bin(tree)
    if order.check.base_config is None:
        order.check.base_config = read_config(order, tree)
    order.protect.files = sorted(set(order.protect.files) | set(order.check.base_config["files"]))


def read_config(order: Order, tree: Tree) -> dict[str, Any]:
    """What vitest's own code reads of the repository's configuration at the base."""
    probe = f"{nodejs.reporter_dir()}/vitest-probe.mjs"
    out = nodejs.config_at_base(
        order, ["node", probe], "vitest could not read the repository's configuration", stdout_limit=4 << 20
    )
    doc = probed(out)
    projects = [p for p in doc["projects"] if isinstance(p, dict)]
    if any(p.get("browser") for p in projects):
        raise ValueError("the repository runs its vitest tests in a browser: not supported (no browser here)")
    major = int(str(doc.get("version", "0")).split(".", 1)[0] or 0)
    vm = any(str(p.get("pool") or "").startswith("vm") for p in projects)
    config = in_repo(projects[0].get("configFile") if projects else None, order.repo)
    files = [
        rel for rel in loaded_files(doc, order.repo) if (st := tree.lstat(rel)) is not None and stat.S_ISREG(st.st_mode)
    ]
    return {
        "file": config,
        "files": files,
        "pool": "vmForks" if vm and major >= 2 else "forks",
        "version": doc.get("version"),
    }


def run(order: Order, tree: Tree, result: dict[str, Any], canaries: dict[str, Any] | None) -> None:
    check = order.check
    vitest = vitest_bin(tree)
    reporters = nodejs.reporter_dir()
    prelude, made, guard = nodejs.prepare(order, tree, result, canaries)
    extra = [canaries["path"]] if canaries and "expect" in canaries and "path" in canaries else []
    own = check.base_config or {"file": None, "files": [], "pool": "forks"}
    argv = [
        "node",
        vitest,
        "run",
        *(["--config", own["file"]] if own.get("file") else []),
        f"--reporter={reporters}/vitest-reporter.mjs",
        "--reporter=default",
        f"--pool={own['pool']}",
        "--no-file-parallelism",
        "--no-cache",
        *(check.args or []),
        *extra,
        *check.paths,
    ]
    loaded = list(own["files"])
    nodejs.run_units(
        order,
        tree,
        result,
        canaries,
        [("vitest", list(check.paths), argv)],
        "vitest",
        guard,
        prelude=prelude,
        extra_sealed=made + loaded,
        watched_extra=loaded,
    )
