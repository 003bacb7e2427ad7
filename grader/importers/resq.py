"""RES-Q rows as tasks.

Fields read: id, repo_url, instruction, base_commit, test_script, testbed_environment
(a Python version: 'python3.11', '3.11'; for a JavaScript row a Node.js one: 'node',
'node18', or none: the newest Node.js environment), requirements_txt (a requirements
file's text), solution_patch (the gold patch),
modified_files (checked against the files the solution patch touches), language (Python,
JavaScript or TypeScript), and solution_commit when present (its date becomes the task's
created_at). The repository comes from --repo-dir/<owner>__<name> when a clone is there,
else from repo_url.

RES-Q's harness writes test_script into the repository root and runs it with the
testbed's interpreter; its exit status decides. Here it is a hidden file at the root, and
the check is `runner: command` running it the same way: `python` for a Python row, `node`
for a JavaScript one (an ES module, one that imports or exports at the top level, as
.mjs). A script that starts with a shell shebang (#!/bin/sh, #!/bin/bash, #!/usr/bin/env
bash) is run with that shell. The task's public view says the exit status decides.
Python requirements are pip-installed; a JavaScript row's repository gets the install its
lock file calls for (grader/importers/node.py: `npm ci`, yarn 1 or pnpm at an exact
version, or `npm install` without a lock file), lifecycle scripts off, and its
requirements lines are npm package specs installed with npm: all when the instance image
is built, never in a grading run, which has no network.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from grader.importers import node
from grader.importers.common import (
    Context,
    DatasetError,
    Draft,
    convert_rows,
    environment_for,
    environment_for_language,
    install_step,
    limits,
    repo_name_from_url,
    requirement_lines,
    sha_field,
    task_id,
    text_field,
)
from grader.patch import touched_files

SCRIPT = "resq_test_script"
_SHELL = re.compile(r"^#!\s*(?:/usr)?/bin/(?:env\s+)?(sh|bash|dash)\b")


_ESM = re.compile(r"^\s*(import\s[^(]|import\s*\{|export\s)", re.M)
JS_LANGUAGES = ("javascript", "typescript", "js", "ts", "node")
NPM_FLAGS = "--ignore-scripts --no-audit --no-fund"


def test_command(script: str, language: str = "python") -> tuple[str, str]:
    """(the hidden file's name, the command that runs it)."""
    m = _SHELL.match(script)
    if m:
        return f"{SCRIPT}.sh", f"{m.group(1)} {SCRIPT}.sh"
    if language in JS_LANGUAGES:
        name = f"{SCRIPT}.mjs" if _ESM.search(script) else f"{SCRIPT}.js"
        return name, f"node {name}"
    return f"{SCRIPT}.py", f"python {SCRIPT}.py"


def npm_install(
    requirements: list[str], has_lock: bool, has_package: bool, where: str, own: str | None = None
) -> str | None:
    """The instance image's install step for a JavaScript row: the repository's own
    dependencies (`own`, as grader/importers/node.py reads them from its lock file; else npm
    ci with package-lock.json), then the row's npm package specs."""
    steps = []
    if own:
        steps.append(own)
    elif has_package:
        steps.append(f"npm ci {NPM_FLAGS}" if has_lock else f"npm install {NPM_FLAGS}")
    specs = [r for r in requirements if not r.startswith("-")]
    if specs:
        for spec in specs:
            if not re.fullmatch(r"[@\w./:^~<>=*-]+", spec):
                raise DatasetError(f"{where}: {spec!r} is not an npm package spec")
        steps.append(f"npm install --no-save {NPM_FLAGS} " + " ".join(shlex.quote(x) for x in specs))
    return " && ".join(steps) or None


def convert_row(row: dict[str, Any], ctx: Context) -> Draft:
    raw_id = row.get("id")
    raw_id = str(raw_id) if raw_id not in (None, "") else None
    if raw_id is None:
        raise DatasetError("a RES-Q row without id")
    where = f"RES-Q task {raw_id}"
    tid = task_id(raw_id if raw_id[:1].isalnum() else f"resq-{raw_id}", where)
    url = text_field(row, "repo_url", where).strip()
    name = repo_name_from_url(url, where)
    ctx.repos.set_url(name, url)
    base = sha_field(row, "base_commit", where)
    instruction = text_field(row, "instruction", where)
    script = text_field(row, "test_script", where)
    gold = text_field(row, "solution_patch", where)
    language = (text_field(row, "language", where, required=False) or "python").strip().lower()
    testbed = text_field(row, "testbed_environment", where, required=language == "python") or ""
    requirements = requirement_lines(row.get("requirements_txt") or "")
    if language == "python":
        environment = environment_for(testbed, ctx.environments_dir, where)
    elif language in JS_LANGUAGES:
        version = re.search(r"[0-9]+(\.[0-9]+)?", testbed)
        environment = environment_for_language(
            "javascript", version.group(0) if version else None, ctx.environments_dir, where
        )
    else:
        raise DatasetError(f"{where}: language {language!r}: RES-Q tasks are Python or JavaScript")
    notes: list[str] = []

    modified = row.get("modified_files") or []
    listed = {m.get("path") for m in modified if isinstance(m, dict)} | {m for m in modified if isinstance(m, str)}
    touched = touched_files(gold.encode())
    if listed and listed != touched:
        notes.append(
            f"modified_files ({', '.join(sorted(p for p in listed if p))}) differ from the files the "
            f"solution patch touches ({', '.join(sorted(touched))})"
        )

    ctx.repos.require_commit(name, base, where)
    created = None
    solution = str(row.get("solution_commit") or "").strip().lower()
    if solution and ctx.repos.has_commit(name, solution, where):
        created = ctx.repos.commit_date(name, solution, where)
    script_name, command = test_command(script, language)
    if language in JS_LANGUAGES:
        repo_js = node.read_repo(ctx.repos, name, base, where)
        own = node.install(repo_js, where) if repo_js is not None else None
        install = npm_install(requirements, False, False, where, own)
    else:
        install = install_step(requirements, None, where)
    metadata = {"suite": ctx.suite, "language": language, "created_at": created, "source": f"RES-Q {raw_id} ({url})"}
    definition = {
        "id": tid,
        "instruction": instruction,
        "metadata": {k: v for k, v in metadata.items() if v is not None},
        "environment": environment,
        "install": install,
        "limits": limits(ctx),
        "gold_patch": "gold.patch",
        "check": {
            "type": "tests",
            "runner": "command",
            "command": command,
            "hidden_tests": {script_name: f"hidden/{script_name}"},
        },
    }
    files = {"gold.patch": gold.encode(), f"hidden/{script_name}": script.encode()}
    return Draft(id=tid, source_id=raw_id, repo_name=name, commit=base, definition=definition, files=files, notes=notes)


def convert(rows: list[dict[str, Any]], ctx: Context) -> tuple[list[Draft], list[tuple[str, str]]]:
    return convert_rows(rows, lambda row: convert_row(row, ctx), "id")
