"""What a JavaScript or TypeScript row leaves out, read from its repository at the base
commit: the language, the install step, the runner, the test files.

SWE-bench Multilingual and Multi-SWE-bench rows name a repository, a base commit, a patch,
a test patch and the lists, and often nothing of how to install or run it; RES-Q's
JavaScript rows name a test script. The repository says the rest:

- **the language**: a package.json at the root (TypeScript when the test patch's test
  files are .ts/.tsx, or the repository has a tsconfig.json);
- **the install** (run when the instance image is built, network on; lifecycle scripts off,
  so nothing of the repository runs as root): `npm ci` with package-lock.json or
  npm-shrinkwrap.json; a yarn.lock of yarn 1 with `yarn install --frozen-lockfile` of the
  version package.json's "packageManager" names (else 1.22.22), fetched by npx at an exact
  version; a pnpm-lock.yaml with `pnpm install --frozen-lockfile` of the packageManager's
  version (else the newest pnpm of the lock file's major: 6.x locks pnpm 8, 9.x pnpm 9,
  5.x pnpm 7); `npm install` without a lock file. A lock file of yarn 2+ (Plug'n'Play) is
  refused: its install must be given;
- **the runner**: the row's log_parser or runner (SWE-bench's and Multi-SWE-bench's parser
  names: jest, jest_json, vitest, mocha, mocha_v2, tap, node...), else its test_cmd, else
  package.json's scripts.test, else its devDependencies (jest, ts-jest, babel-jest, vitest,
  mocha, tape, tap); karma, ava, jasmine and a browser have no runner here;
- **the test files**: the JavaScript/TypeScript test files the test patch adds or changes
  (`*.test.*`, `*.spec.*`, `__tests__/`, or the files directly in `test/` or `tests/`),
  never its fixtures, snapshots, mocks or helpers.

Anything that cannot be inferred fails the row with a message naming the --env-map keys to
give.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from grader.importers.common import DatasetError, Repositories

NPM_FLAGS = "--ignore-scripts --no-audit --no-fund"
YARN1 = "1.22.22"
# the newest pnpm of each lock file major it writes (lockfileVersion -> pnpm)
PNPM = {"5": "7.33.7", "6": "8.15.9", "7": "9.15.9", "9": "9.15.9"}
JS_FILE = re.compile(r"\.(?:[cm]?[jt]sx?)$")
TS_FILE = re.compile(r"\.(?:[cm]?tsx?)$")
TEST_NAME = re.compile(r"(?:^|[./_-])(?:test|spec)\.[cm]?[jt]sx?$")
NOT_TESTS = {
    "fixtures",
    "__fixtures__",
    "fixture",
    "__mocks__",
    "__snapshots__",
    "helpers",
    "utils",
    "support",
    "node_modules",
}
# a log parser's name (SWE-bench's, Multi-SWE-bench's, prefix `parse_log_` dropped) -> runner
PARSERS = {
    "jest": "jest",
    "jest_json": "jest",
    "jest-json": "jest",
    "calypso": "jest",
    "react_pdf": "jest",
    "vitest": "vitest",
    "vitest_json": "vitest",
    "mocha": "mocha",
    "mocha_v2": "mocha",
    "marked": "mocha",
    "tap": "tap",
    "tape": "tap",
    "node-tap": "tap",
    "node": "node-test",
    "node_test": "node-test",
    "node-test": "node-test",
}
UNSUPPORTED = {"karma", "ava", "jasmine", "chart_js", "p5js", "playwright", "cypress", "web-test-runner", "qunit"}
# what a test command or package.json names -> runner (first match wins, in this order)
COMMANDS = (
    (re.compile(r"\bvitest\b"), "vitest"),
    (re.compile(r"\b(?:jest|react-scripts test|craco test)\b"), "jest"),
    (re.compile(r"\bmocha\b"), "mocha"),
    (re.compile(r"\bnode\s+(?:[^|&;]*\s)?--test\b"), "node-test"),
    (re.compile(r"\b(?:tape|tap)\b"), "tap"),
)
DEPENDENCIES = {
    "vitest": "vitest",
    "jest": "jest",
    "jest-cli": "jest",
    "ts-jest": "jest",
    "babel-jest": "jest",
    "mocha": "mocha",
    "tape": "tap",
    "tap": "tap",
}
UNSUPPORTED_COMMANDS = re.compile(r"\b(karma|ava|jasmine|playwright|cypress|qunit|web-test-runner|wtr)\b")


@dataclass(frozen=True)
class NodeRepo:
    """What the base commit says of a JavaScript repository."""

    package: dict[str, Any]
    lock: str | None  # the lock file's name
    lock_text: str
    typescript: bool


def read_repo(repos: Repositories, name: str, base: str, where: str) -> NodeRepo | None:
    """The repository's package.json and lock file at the base; None without package.json."""
    raw = repos.show(name, base, "package.json", where)
    if raw is None:
        return None
    try:
        package = json.loads(raw)
    except ValueError as exc:
        raise DatasetError(f"{where}: package.json at the base commit is not JSON: {exc}") from None
    if not isinstance(package, dict):
        raise DatasetError(f"{where}: package.json at the base commit is not an object")
    lock, text = None, ""
    for candidate in ("package-lock.json", "npm-shrinkwrap.json", "pnpm-lock.yaml", "yarn.lock"):
        data = repos.show(name, base, candidate, where)
        if data is not None:
            lock, text = candidate, data.decode("utf-8", errors="replace")
            break
    typescript = repos.has_file(name, base, "tsconfig.json", where)
    return NodeRepo(package=package, lock=lock, lock_text=text, typescript=typescript)


def _manager(package: dict[str, Any], tool: str) -> str | None:
    """The exact version package.json's "packageManager" pins for `tool` (yarn@1.22.19+sha...)."""
    value = package.get("packageManager")
    if isinstance(value, str):
        m = re.fullmatch(re.escape(tool) + r"@(\d+\.\d+\.\d+)(?:\+\S+)?", value.strip())
        if m:
            return m.group(1)
    return None


def install(repo: NodeRepo, where: str) -> str:
    """The instance image's install step for the repository's own dependencies."""
    if repo.lock in ("package-lock.json", "npm-shrinkwrap.json"):
        return f"npm ci {NPM_FLAGS}"
    if repo.lock == "yarn.lock":
        if "__metadata:" in repo.lock_text[:2000]:
            raise DatasetError(
                f"{where}: yarn.lock is a yarn 2+ (Plug'n'Play) lock file: give the install step "
                f"(--env-map: install) that leaves node_modules/ in the repository"
            )
        version = _manager(repo.package, "yarn") or YARN1
        if not version.startswith("1."):
            raise DatasetError(f"{where}: packageManager names yarn {version}: give install (--env-map)")
        return (
            f"npx --yes yarn@{version} install --frozen-lockfile --ignore-scripts --non-interactive "
            f"--network-timeout 600000"
        )
    if repo.lock == "pnpm-lock.yaml":
        m = re.search(r"(?m)^lockfileVersion:\s*['\"]?(\d+)", repo.lock_text)
        pnpm = _manager(repo.package, "pnpm") or (PNPM.get(m.group(1)) if m else None)
        if pnpm is None:
            raise DatasetError(
                f"{where}: pnpm-lock.yaml of an unknown lockfileVersion: give install (--env-map), "
                f"or packageManager in package.json"
            )
        return f"npx --yes pnpm@{pnpm} install --frozen-lockfile --ignore-scripts"
    return f"npm install {NPM_FLAGS}"


def parser_runner(name: str, where: str) -> str:
    """The runner for a log parser's (or a runner's) name as the benchmarks write it."""
    key = name.strip().lower().removeprefix("parse_log_")
    if key in PARSERS:
        return PARSERS[key]
    if key in UNSUPPORTED or any(key.startswith(u) for u in ("karma", "jasmine", "ava")):
        raise DatasetError(
            f"{where}: log parser {name!r}: its tests run under a runner the grader has none of "
            f"(jest, vitest, mocha, tap, node-test): give runner (--env-map)"
        )
    return key


def command_runner(command: str) -> str | None:
    """The runner a test command runs, if it names one."""
    if UNSUPPORTED_COMMANDS.search(command):
        return None
    for pattern, runner in COMMANDS:
        if pattern.search(command):
            return runner
    return None


def infer_runner(repo: NodeRepo, test_cmd: str | None, where: str) -> str:
    """The runner of a row that names none: its test command, package.json's scripts.test,
    else the single test runner among its dependencies."""
    scripts = repo.package.get("scripts") if isinstance(repo.package.get("scripts"), dict) else {}
    assert isinstance(scripts, dict)
    for command in (test_cmd, scripts.get("test")):
        if not isinstance(command, str):
            continue
        found = command_runner(command)
        if found:
            return found
        bad = UNSUPPORTED_COMMANDS.search(command)
        if bad:
            raise DatasetError(
                f"{where}: the tests run under {bad.group(1)}, which the grader has no runner for "
                f"(jest, vitest, mocha, tap, node-test): give runner (--env-map)"
            )
    deps: dict[str, Any] = {}
    for key in ("devDependencies", "dependencies"):
        if isinstance(repo.package.get(key), dict):
            deps.update(repo.package[key])
    found_all = sorted({DEPENDENCIES[d] for d in deps if d in DEPENDENCIES})
    if len(found_all) == 1:
        return found_all[0]
    if found_all:
        raise DatasetError(
            f"{where}: the repository depends on several test runners ({', '.join(found_all)}) and its "
            f"test script names none: give runner (or log_parser) in --env-map"
        )
    raise DatasetError(
        f"{where}: no test runner found in package.json (scripts.test, devDependencies): give runner "
        f"(jest, vitest, mocha, tap, node-test) in --env-map"
    )


def test_files(files: list[str], runner: str) -> list[str]:
    """The test files among the files a test patch adds or changes (not fixtures, helpers,
    snapshots or mocks)."""
    out = []
    for rel in files:
        if not JS_FILE.search(rel) or rel.endswith(".d.ts"):
            continue
        parts = rel.split("/")
        if any(p in NOT_TESTS for p in parts[:-1]):
            continue
        if TEST_NAME.search(parts[-1]) or "__tests__" in parts[:-1]:
            out.append(rel)
        elif runner in ("mocha", "tap", "node-test") and len(parts) >= 2 and parts[-2] in ("test", "tests"):
            out.append(rel)
    return out


def language(repo: NodeRepo, files: list[str]) -> str:
    return "typescript" if repo.typescript or any(TS_FILE.search(f) for f in files) else "javascript"


def is_node_row(repo: NodeRepo | None, files: list[str]) -> bool:
    """A row whose repository is a package and whose test patch is JavaScript/TypeScript."""
    return repo is not None and any(JS_FILE.search(f) for f in files)
