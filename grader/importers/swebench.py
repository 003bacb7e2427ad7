"""SWE-bench instances as tasks.

Fields read: instance_id, repo, base_commit, problem_statement (the instruction), patch
(the gold patch), test_patch (the hidden tests), FAIL_TO_PASS and PASS_TO_PASS (lists,
or JSON-encoded lists as the published dataset has them), version, created_at, and
difficulty where SWE-bench Verified gives it. The environment comes from the instance's
own `python`, `requirements` and `install` fields, else from the --env-map entry of its
repository (and version); `test_cmd` (and `junit`) in either overrides the test command.

The test command is SWE-bench's for pytest repositories: pytest on the files the
test_patch touches (not its fixtures: SWE-bench's NON_TEST_EXTS are left out), with
per-test outcomes read from pytest's JUnit report.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from grader.importers.common import (
    Context,
    DatasetError,
    Draft,
    convert_rows,
    date_field,
    environment_for,
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
ENV_KEYS = ("python", "requirements", "install", "test_cmd", "junit")
# SWE-bench Verified's annotators' estimates of the time a fix takes.
DIFFICULTY = {"<15 min fix": "easy", "15 min - 1 hour": "medium", "1-4 hours": "hard", ">4 hours": "hard"}
SETUP_FILES = ("setup.py", "pyproject.toml")
DEFAULT_INSTALL = "pip install -e ."


@dataclass(frozen=True)
class EnvSpec:
    """How an instance's environment is made and its tests run."""

    python: str
    requirements: list[str] = field(default_factory=list)
    install: str | None = None
    test_cmd: str | None = None
    junit: str | None = None


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


def env_spec(row: dict[str, Any], env_map: dict[str, dict[str, Any]] | None, where: str) -> EnvSpec:
    """The instance's own fields over its version's entry over its repository's entry."""
    merged: dict[str, Any] = {}
    entry = (env_map or {}).get(str(row.get("repo")))
    if entry:
        merged.update({k: v for k, v in entry.items() if k in ENV_KEYS})
        versions = {str(k): v for k, v in (entry.get("versions") or {}).items()}
        merged.update(versions.get(str(row.get("version")), {}))
    merged.update({k: row[k] for k in ENV_KEYS if row.get(k) is not None})
    if not merged.get("python"):
        raise DatasetError(
            f"{where}: no environment: give the instance the fields python (and optionally "
            f"requirements, install), or an entry for {row.get('repo')!r} in --env-map"
        )
    requirements = merged.get("requirements") or []
    if isinstance(requirements, str):
        requirements = [line for line in requirements.splitlines() if line.strip()]
    if not isinstance(requirements, list) or not all(isinstance(r, str) for r in requirements):
        raise DatasetError(f"{where}: requirements must be a list of pip requirement strings")
    for key in ("install", "test_cmd", "junit"):
        if merged.get(key) is not None and not isinstance(merged[key], str):
            raise DatasetError(f"{where}: {key} must be a string")
    return EnvSpec(
        python=str(merged["python"]),
        requirements=requirements,
        install=merged.get("install"),
        test_cmd=merged.get("test_cmd"),
        junit=merged.get("junit"),
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


def test_check(
    spec: EnvSpec, files: list[str], fail_to_pass: list[str], pass_to_pass: list[str], notes: list[str]
) -> dict[str, Any]:
    """The `tests` check. A pytest test_cmd keeps the grader's own pytest runner (its
    options become pytest_args; the test files are appended, as SWE-bench appends its
    directives); any other command runs with sh, `{test_files}` in it replaced by the
    test files."""
    check: dict[str, Any] = {"type": "tests", "test_patch": "test.patch"}
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
    if not fail_to_pass:
        raise DatasetError(f"{where}: FAIL_TO_PASS is missing or empty")
    created = date_field(row.get("created_at"), "created_at", where)
    spec = env_spec(row, env_map, where)
    environment = environment_for(spec.python, ctx.environments_dir, where)
    notes: list[str] = []
    files = test_files(test_patch)
    if not files:
        raise DatasetError(f"{where}: test_patch changes no test file")
    check = test_check(spec, files, fail_to_pass, pass_to_pass, notes)

    ctx.repos.require_commit(repo, base, where)
    install = spec.install
    if install is None and any(ctx.repos.has_file(repo, base, f, where) for f in SETUP_FILES):
        install = DEFAULT_INSTALL
    version = row.get("version")
    metadata = {
        "suite": ctx.suite,
        "language": "python",
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
    )


def convert(
    rows: list[dict[str, Any]], ctx: Context, *, env_map: dict[str, dict[str, Any]] | None = None
) -> tuple[list[Draft], list[tuple[str, str]]]:
    return convert_rows(rows, lambda row: convert_row(row, ctx, env_map), "instance_id")
