"""SWE-bench instances as tasks, in any language the grader has a runner for (SWE-bench,
SWE-bench Multilingual, Multi-SWE-bench).

Fields read: instance_id, repo, base_commit, problem_statement (the instruction), patch
(the gold patch), test_patch (the hidden tests), FAIL_TO_PASS and PASS_TO_PASS (lists,
or JSON-encoded lists as the published dataset has them), version, created_at, and
difficulty where SWE-bench Verified gives it. Multi-SWE-bench's spellings are read too:
org + repo, base.sha, fix_patch, body/title, f2p_tests and p2p_tests (mappings keyed by
test id), language/lang.

The environment comes from the instance's own fields, else from the --env-map entry of
its repository (and version): `python` (a Python version) for a Python instance, or
`language` (and `language_version`) for any, or `environment` naming one directly;
`requirements` (pip, Python only) and `install` (run in the repository when the image is
built); `test_cmd`, `runner` (or `log_parser`: pytest, unittest, tap, node-test, jest,
mocha, vitest, go, go-json, cargo, libtest, junit, ctest) and `junit`.

The test command is SWE-bench's for pytest repositories: pytest on the files the
test_patch touches (not its fixtures: SWE-bench's NON_TEST_EXTS are left out). Another
runner runs those files (or packages, classes) itself through its reporter, `{test_files}`
in a test_cmd standing for them. A test_cmd that runs unittest (`python -m unittest ...`)
or a Django-style `runtests.py` (SWE-bench's Django rows: `./tests/runtests.py
--verbosity 2 --settings=test_sqlite --parallel 1`) takes the unittest runner, whose
reporter decides test by test (the test files become its labels), never the exit status.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from grader.box.runners import test_runner, test_runners
from grader.box.runners import unittest as unittest_runner
from grader.importers import node
from grader.importers.common import (
    LANGUAGES,
    Context,
    DatasetError,
    Draft,
    convert_rows,
    date_field,
    environment_for,
    environment_for_language,
    install_step,
    limits,
    sha_field,
    string_list,
    task_id,
    text_field,
)
from grader.patch import inspect_patch

# SWE-bench's harness leaves files with these endings out of the test directives.
NON_TEST_EXTS = (".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml")
ENV_KEYS = (
    "python",
    "language",
    "language_version",
    "environment",
    "requirements",
    "install",
    "test_cmd",
    "junit",
    "runner",
    "log_parser",
)
# A log parser's name, as the multilingual benchmarks write it, to the runner that reads
# outcomes the grader's way (its own reporter, never the log).
PARSERS = {
    "go-json": "go",
    "gotest": "go",
    "go test": "go",
    "libtest": "cargo",
    "rust": "cargo",
    "django": "unittest",
    "node": "node-test",
    "node-tap": "tap",
    "tape": "tap",
}
# The runner a language gets when its row names none.
DEFAULT_RUNNERS = {"python": "pytest", "go": "go", "rust": "cargo", "java": "junit", "c": "ctest"}
# a JavaScript row's language as the task's metadata says it
JS_NAMES = {"javascript": "javascript", "js": "javascript", "node": "javascript", "nodejs": "javascript"}
JS_NAMES |= {"typescript": "typescript", "ts": "typescript"}
# SWE-bench Verified's annotators' estimates of the time a fix takes.
DIFFICULTY = {"<15 min fix": "easy", "15 min - 1 hour": "medium", "1-4 hours": "hard", ">4 hours": "hard"}
SETUP_FILES = ("setup.py", "pyproject.toml")
DEFAULT_INSTALL = "pip install -e ."


@dataclass(frozen=True)
class EnvSpec:
    """How an instance's environment is made and its tests run."""

    python: str | None
    requirements: list[str] = field(default_factory=list)
    install: str | None = None
    test_cmd: str | None = None
    junit: str | None = None
    language: str = "python"
    language_version: str | None = None
    environment: str | None = None
    runner: str | None = None


def load_env_map(path: Path | str) -> dict[str, dict[str, Any]]:
    """A per-repository mapping (YAML or JSON):

    owner/name:
      python: "3.11"
      requirements: [pytest==8.3.3]
      install: pip install --no-build-isolation -e .
      test_cmd: pytest -rA            # optional
      versions:                       # optional: per SWE-bench `version`, over the above
        "1.2": {python: "3.11", requirements: [...]}
    """
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise DatasetError(f"{path}: cannot read the environment map: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise DatasetError(f"{path}: the environment map is a mapping of owner/name to settings")
    for repo, entry in data.items():
        where = f"{path}: {repo}"
        if not isinstance(entry, dict):
            raise DatasetError(f"{where}: expected a mapping of {', '.join(ENV_KEYS)}, versions")
        unknown = set(entry) - set(ENV_KEYS) - {"versions"}
        if unknown:
            raise DatasetError(f"{where}: unknown keys {sorted(unknown)}; use {', '.join(ENV_KEYS)}, versions")
        versions = entry.get("versions") or {}
        if not isinstance(versions, dict) or not all(isinstance(v, dict) for v in versions.values()):
            raise DatasetError(f'{where}: versions maps a version (quoted: "3.10" is not 3.1) to settings')
        for version, sub in versions.items():
            unknown = set(sub) - set(ENV_KEYS)
            if unknown:
                raise DatasetError(f"{where}: version {version}: unknown keys {sorted(unknown)}")
    return {str(k): v for k, v in data.items()}


NO_ENVIRONMENT = (
    "no environment: give the instance the fields python (and optionally requirements, install), "
    "or language (and language_version), or environment, or an entry for {repo!r} in --env-map"
)


def env_spec(
    row: dict[str, Any], env_map: dict[str, dict[str, Any]] | None, where: str, *, required: bool = True
) -> EnvSpec:
    """The instance's own fields over its version's entry over its repository's entry.
    Without any of python, language or environment: an error, or (not `required`) a spec
    whose language is "" for the caller to infer from the repository."""
    merged: dict[str, Any] = {}
    entry = (env_map or {}).get(str(row.get("repo")))
    if entry:
        merged.update({k: v for k, v in entry.items() if k in ENV_KEYS})
        versions = {str(k): v for k, v in (entry.get("versions") or {}).items()}
        merged.update(versions.get(str(row.get("version")), {}))
    merged.update({k: row[k] for k in ENV_KEYS if row.get(k) is not None})
    if row.get("lang") and not merged.get("language"):
        merged["language"] = row["lang"]
    given = bool(merged.get("python") or merged.get("language") or merged.get("environment"))
    if not given and required:
        raise DatasetError(f"{where}: " + NO_ENVIRONMENT.format(repo=row.get("repo")))
    requirements = merged.get("requirements") or []
    if isinstance(requirements, str):
        requirements = [line for line in requirements.splitlines() if line.strip()]
    if not isinstance(requirements, list) or not all(isinstance(r, str) for r in requirements):
        raise DatasetError(f"{where}: requirements must be a list of pip requirement strings")
    for key in ("install", "test_cmd", "junit", "language", "environment", "runner", "log_parser"):
        if merged.get(key) is not None and not isinstance(merged[key], str):
            raise DatasetError(f"{where}: {key} must be a string")
    language = str(merged.get("language") or ("python" if given else "")).strip().lower()
    runner = merged.get("runner") or merged.get("log_parser")
    if runner is not None:
        runner = PARSERS.get(runner.strip().lower(), runner.strip().lower())
    python = merged.get("python")
    return EnvSpec(
        python=str(python) if python is not None else None,
        requirements=requirements,
        install=merged.get("install"),
        test_cmd=merged.get("test_cmd"),
        junit=merged.get("junit"),
        language=language,
        language_version=str(merged["language_version"]) if merged.get("language_version") is not None else None,
        environment=merged.get("environment"),
        runner=runner,
    )


def test_files(test_patch: str | bytes) -> list[str]:
    """SWE-bench's test directives for a pytest repository: the files the test patch
    adds or changes, fixtures and data (NON_TEST_EXTS) left out."""
    raw = test_patch.encode() if isinstance(test_patch, str) else test_patch
    info = inspect_patch(raw, max_bytes=len(raw) + 1)
    out = []
    for f in info.files:
        if f.status == "removed" or f.path.endswith(NON_TEST_EXTS) or f.path in out:
            continue
        out.append(f.path)
    return out


_PYTEST = (["pytest"], ["py.test"], ["python", "-m", "pytest"], ["python3", "-m", "pytest"])


def runs_unittest(test_cmd: str) -> bool:
    """Whether a test command runs unittest, or a Django-style runtests.py script."""
    try:
        _, argv = unittest_runner.split_command(test_cmd)
    except ValueError:
        return False
    return argv[:2] == ["-m", "unittest"] or argv[0].rsplit("/", 1)[-1] == "runtests.py"


def test_check(
    spec: EnvSpec, files: list[str], fail_to_pass: list[str], pass_to_pass: list[str], notes: list[str]
) -> dict[str, Any]:
    """The `tests` check. A pytest test_cmd keeps the grader's own pytest runner (its
    options become pytest_args; the test files are appended, as SWE-bench appends its
    directives); a named runner (or a language's usual one) runs the test files itself
    through its reporter, taking the test_cmd where it takes a command; any other command
    runs with sh, `{test_files}` in it replaced by the test files."""
    check: dict[str, Any] = {"type": "tests", "test_patch": "test.patch"}
    runner = spec.runner
    if runner is None and spec.test_cmd and runs_unittest(spec.test_cmd):
        runner = "unittest"  # per test through its reporter: os._exit(0) cannot fake it as it fakes an exit status
    if runner is None and spec.language != "python" and not spec.test_cmd:
        runner = DEFAULT_RUNNERS.get(LANGUAGES.get(spec.language, spec.language))
        if runner is None:
            raise DatasetError(
                f"a {spec.language} instance needs a runner (or log_parser): {', '.join(test_runners())}"
            )
    if runner is not None and runner not in ("pytest", "command"):
        if runner not in test_runners():
            raise DatasetError(f"unknown runner (log parser) {runner!r}; use one of {', '.join(test_runners())}")
        check["runner"] = runner
        check["paths"] = files
        if spec.test_cmd and runner == "unittest":
            # the runner turns the test files into its labels: where the command has them, or after it
            check["command"] = spec.test_cmd.replace("{test_files}", unittest_runner.PLACEHOLDER)
        elif spec.test_cmd and getattr(test_runner(runner), "COMMAND", "none") != "none":
            check["command"] = spec.test_cmd.replace("{test_files}", " ".join(shlex.quote(f) for f in files))
        elif spec.test_cmd:
            notes.append(f"test_cmd is not used: the {runner} runner runs the test files itself, through its reporter")
        check["fail_to_pass"], check["pass_to_pass"] = fail_to_pass, pass_to_pass
        return check
    test_cmd = spec.test_cmd or "pytest"
    argv = shlex.split(test_cmd)
    prefix = next((p for p in _PYTEST if argv[: len(p)] == p), None)
    if prefix is not None:
        if argv[len(prefix) :]:
            check["pytest_args"] = argv[len(prefix) :]
        check["paths"] = files
        check["fail_to_pass"], check["pass_to_pass"] = fail_to_pass, pass_to_pass
        return check
    check["runner"] = "command"
    check["command"] = test_cmd.replace("{test_files}", " ".join(shlex.quote(f) for f in files))
    if spec.junit:
        check["junit"] = spec.junit
        check["fail_to_pass"], check["pass_to_pass"] = fail_to_pass, pass_to_pass
    elif fail_to_pass or pass_to_pass:
        notes.append(
            "test_cmd is not pytest and names no junit report: graded by its exit status; "
            "FAIL_TO_PASS / PASS_TO_PASS are not checked"
        )
    return check


def convert_row(row: dict[str, Any], ctx: Context, env_map: dict[str, dict[str, Any]] | None = None) -> Draft:
    row = multi_swe_bench(row)
    raw_id = text_field(row, "instance_id", "an instance without instance_id")
    where = f"instance {raw_id}"
    tid = task_id(raw_id, where)
    repo = text_field(row, "repo", where)
    if repo.count("/") != 1:
        raise DatasetError(f"{where}: repo {repo!r} is not owner/name")
    base = sha_field(row, "base_commit", where)
    gold = text_field(row, "patch", where)
    test_patch = text_field(row, "test_patch", where)
    statement = text_field(row, "problem_statement", where)
    fail_to_pass = string_list(row.get("FAIL_TO_PASS"), "FAIL_TO_PASS", where)
    pass_to_pass = string_list(row.get("PASS_TO_PASS"), "PASS_TO_PASS", where)
    derive = not fail_to_pass and not pass_to_pass and ctx.derive_lists
    if not fail_to_pass and not derive:
        raise DatasetError(
            f"{where}: FAIL_TO_PASS is missing or empty"
            + ("" if pass_to_pass else " (--derive-lists N computes both lists by running the tests)")
        )
    created = date_field(row.get("created_at"), "created_at", where)
    spec = env_spec(row, env_map, where, required=False)
    files = test_files(test_patch)
    if not files:
        raise DatasetError(f"{where}: test_patch changes no test file")
    repo_js = None
    if not spec.language and not spec.python and not spec.environment:
        # nothing says: the repository at the base does (a package.json: JavaScript)
        ctx.repos.require_commit(repo, base, where)
        repo_js = node.read_repo(ctx.repos, repo, base, where)
        if repo_js is None or not node.is_node_row(repo_js, files):
            raise DatasetError(f"{where}: " + NO_ENVIRONMENT.format(repo=repo))
        spec = replace(spec, language=node.language(repo_js, files))
    notes: list[str] = []
    if LANGUAGES.get(spec.language) == "node":
        ctx.repos.require_commit(repo, base, where)
        repo_js = repo_js or node.read_repo(ctx.repos, repo, base, where)
        spec, files = node_spec(spec, repo_js, files, notes, where)
    if spec.environment:
        environment = spec.environment
        if not (ctx.environments_dir / environment / "Dockerfile").is_file():
            raise DatasetError(f"{where}: no environment {environment!r} in {ctx.environments_dir}")
    elif spec.language == "python" or spec.python:
        environment = environment_for(spec.python or spec.language_version or "3.11", ctx.environments_dir, where)
    else:
        environment = environment_for_language(spec.language, spec.language_version, ctx.environments_dir, where)
    if spec.requirements and not environment.startswith("python-"):
        raise DatasetError(f"{where}: requirements are pip requirements; a {spec.language} instance uses install")
    try:
        check = test_check(spec, files, fail_to_pass, pass_to_pass, notes)
    except DatasetError as exc:
        raise DatasetError(f"{where}: {exc}") from None
    if derive and "fail_to_pass" not in check:
        raise DatasetError(
            f"{where}: no FAIL_TO_PASS, and its test command gives no per-test outcomes to derive them from "
            "(name a runner or log_parser, or a junit report)"
        )

    ctx.repos.require_commit(repo, base, where)
    install = spec.install
    python_env = environment.startswith("python-")
    if install is None and python_env and any(ctx.repos.has_file(repo, base, f, where) for f in SETUP_FILES):
        install = DEFAULT_INSTALL
    version = row.get("version")
    metadata = {
        "suite": ctx.suite,
        "language": "python"
        if python_env
        else JS_NAMES.get(spec.language) or LANGUAGES.get(spec.language, spec.language),
        "difficulty": DIFFICULTY.get(str(row.get("difficulty"))),
        "created_at": created,
        "source": f"SWE-bench {repo}"
        + (f" {version}" if version not in (None, "") else "")
        + (f" ({raw_id})" if raw_id != tid else ""),
    }
    definition = {
        "id": tid,
        "instruction": statement,
        "metadata": {k: v for k, v in metadata.items() if v is not None},
        "environment": environment,
        "install": install_step(spec.requirements, install, where),
        "limits": limits(ctx),
        "gold_patch": "gold.patch",
        "check": check,
    }
    return Draft(
        id=tid,
        source_id=raw_id,
        repo_name=repo,
        commit=base,
        definition=definition,
        files={"gold.patch": gold.encode(), "test.patch": test_patch.encode()},
        notes=notes,
        derive_lists=derive,
    )


def node_spec(
    spec: EnvSpec, repo_js: node.NodeRepo | None, files: list[str], notes: list[str], where: str
) -> tuple[EnvSpec, list[str]]:
    """A JavaScript/TypeScript row's runner, install and test files, each from the row (or
    its --env-map entry) when it gives them, else from the repository at the base
    (grader/importers/node.py)."""
    if repo_js is None and (spec.runner is None or spec.install is None):
        raise DatasetError(
            f"{where}: a {spec.language} instance whose repository has no package.json at the base: "
            f"give runner and install (--env-map)"
        )
    runner = node.parser_runner(spec.runner, where) if spec.runner else None
    if runner is None:
        assert repo_js is not None
        runner = node.infer_runner(repo_js, spec.test_cmd, where)
    install = spec.install
    if install is None:
        assert repo_js is not None
        install = node.install(repo_js, where)
    tests = node.test_files(files, runner)
    if not tests:
        raise DatasetError(
            f"{where}: the test_patch adds or changes no JavaScript/TypeScript test file "
            f"({', '.join(files[:5])}): give the runner's paths in a test_cmd with {{test_files}}"
        )
    if spec.test_cmd:
        notes.append(f"test_cmd is not used: the {runner} runner runs the test files itself, through its reporter")
    return replace(spec, runner=runner, install=install, test_cmd=None), tests


def multi_swe_bench(row: dict[str, Any]) -> dict[str, Any]:
    """A Multi-SWE-bench row in SWE-bench's field names (a SWE-bench row is left as it is):
    org/repo, base.sha, fix_patch, title + body, f2p_tests / p2p_tests (mappings keyed by
    test id), lang."""
    if "fix_patch" not in row and "f2p_tests" not in row:
        return row
    out = dict(row)
    if row.get("org") and row.get("repo") and "/" not in str(row["repo"]):
        out["repo"] = f"{row['org']}/{row['repo']}"
    base = row.get("base")
    if isinstance(base, dict) and "base_commit" not in row:
        out["base_commit"] = base.get("sha")
    if "patch" not in row:
        out["patch"] = row.get("fix_patch")
    if "problem_statement" not in row:
        out["problem_statement"] = "\n\n".join(str(row[k]) for k in ("title", "body") if row.get(k)) or None
    for ours, theirs in (("FAIL_TO_PASS", "f2p_tests"), ("PASS_TO_PASS", "p2p_tests")):
        if ours not in row and isinstance(row.get(theirs), dict):
            out[ours] = sorted(row[theirs])
    if "instance_id" not in row and row.get("org") and row.get("number") is not None:
        out["instance_id"] = f"{row['org']}__{str(row.get('repo')).split('/')[-1]}-{row['number']}"
    if row.get("lang") and not row.get("language"):
        out["language"] = row["lang"]
    return out


def convert(
    rows: list[dict[str, Any]], ctx: Context, *, env_map: dict[str, dict[str, Any]] | None = None
) -> tuple[list[Draft], list[tuple[str, str]]]:
    return convert_rows(rows, lambda row: convert_row(row, ctx, env_map), "instance_id")
