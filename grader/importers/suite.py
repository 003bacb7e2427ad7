"""Drafts into a suite: write each task directory, check it on the host, validate it in
containers as `grader tasks validate` does, and keep only the tasks that pass.

Everything is written to a staging directory in the cache first (outside the tasks
directory, so a half-done import is never loaded as a suite); only tasks that pass move
to the output directory, each replacing an earlier import of the same id. Every task's
outcome, with the problems that rejected it, goes to `import-report.json` in the output
directory.

The repository source is, by default, one bundle per repository in `<out>/repos/`,
holding only the history of the commits the suite's tasks start from (and, for merge
tasks, the merge commit the exact match reads): the suite is self-contained and grades
offline, and no fix commit is in it. `repo_source="url"` writes the repository's URL
instead (a small suite; the grader fetches at preparation and needs the network).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from grader.errors import GraderError, TaskError
from grader.importers.common import DatasetError, Draft, Repositories, ordered_definition, repo_key
from grader.tasks.loader import dump_task_yaml, load_task_file, task_heads
from grader.tasks.model import Repo, Task
from grader.tasks.prepare import git, prepare

REPORT = "import-report.json"
Progress = Callable[[str], None]


@dataclass
class Outcome:
    task_id: str
    source_id: str
    kept: bool = False
    validated: bool = False
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)
    gold: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        if not self.kept:
            return "rejected"
        if self.problems:
            return "kept, invalid"
        return "kept" if self.validated else "kept, not validated"


@dataclass
class ImportReport:
    source: str
    suite: str
    out: Path
    validated: bool
    outcomes: list[Outcome] = field(default_factory=list)
    not_converted: list[tuple[str, str]] = field(default_factory=list)

    @property
    def kept(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.kept]

    @property
    def invalid(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.problems]

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "suite": self.suite,
            "out": str(self.out),
            "validated": self.validated,
            "tasks": [
                {
                    "task_id": o.task_id,
                    "source_id": o.source_id,
                    "status": o.status,
                    "problems": o.problems,
                    "notes": o.notes,
                    "empty": o.empty,
                    "gold": o.gold,
                }
                for o in self.outcomes
            ],
            "not_converted": [{"source_id": s, "error": e} for s, e in self.not_converted],
        }


def repo_entry(draft: Draft, repos: Repositories, repo_source: str) -> dict[str, Any]:
    entry: dict[str, Any] = (
        {"bundle": f"../repos/{repo_key(draft.repo_name)}.bundle"}
        if repo_source == "bundle"
        else {"url": repos.url(draft.repo_name)}
    )
    entry["commit"] = draft.commit
    if draft.merge:
        entry["merge"] = draft.merge
    return entry


def write_task_dir(dest: Path, draft: Draft, repo: dict[str, Any]) -> Path:
    """task.yaml and the files beside it; returns the task file."""
    dest.mkdir(parents=True)
    for rel, data in draft.files.items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    definition = ordered_definition({**draft.definition, "repo": repo})
    (dest / "task.yaml").write_text(dump_task_yaml(definition), encoding="utf-8")
    return dest / "task.yaml"


def host_problems(task: Task, cache: Path, local: Path | None) -> list[str]:
    """What can be checked without a container: the base state can be made (for a URL
    source, from the local clone), the hidden tests and expected files can be read, and
    the gold patch applies with `git apply`."""
    probe = task
    if local is not None and task.repo.url:
        probe = task.model_copy(
            update={
                "repo": Repo(path=os.path.relpath(local, task.root), commit=task.repo.commit, merge=task.repo.merge)
            }
        )
    try:
        prepared = prepare(probe, cache)
    except TaskError as exc:
        return [f"the task cannot be prepared: {exc}"]
    gold = task.gold_patch_text()
    if gold is None:
        return ["the task has no gold patch"]
    if not task.repo.merge:
        applied = git("apply", "--check", "-", cwd=prepared.repo, input=gold, check=False)
        if applied.returncode:
            return [
                f"the gold patch does not apply at the base commit: "
                f"{applied.stderr.decode(errors='replace').strip()[:500]}"
            ]
    return []


def _ids_elsewhere(tasks_dir: Path, out: Path) -> dict[str, Path]:
    """Task ids defined under the tasks directory but outside `out`: an import must not
    shadow them (the loader refuses a suite with an id twice)."""
    if not tasks_dir.is_dir():
        return {}
    out = out.resolve()
    return {str(head["id"]): path for path, head in task_heads(tasks_dir) if not path.resolve().is_relative_to(out)}


def _derive(draft: Draft, task: Task, deriver: Callable[[Task], Any] | None, outcome: Outcome) -> bool:
    """Put the lists `deriver` finds into `draft`'s check (True), or say in `outcome` why
    there are none (False)."""
    if deriver is None:
        outcome.problems.append("no FAIL_TO_PASS: its lists are derived by grading, which was not asked for")
        return False
    try:
        derived = deriver(task)
    except GraderError as exc:
        outcome.problems.append(f"its test lists cannot be derived: {exc}")
        return False
    if derived.problem:
        outcome.problems.append(f"its test lists cannot be derived: {derived.problem}")
        return False
    draft.definition["check"].update(fail_to_pass=derived.fail_to_pass, pass_to_pass=derived.pass_to_pass)
    left_out = f"; left out, failing with the gold or flaky: {', '.join(derived.dropped)}" if derived.dropped else ""
    outcome.notes.append(
        f"FAIL_TO_PASS ({len(derived.fail_to_pass)}) and PASS_TO_PASS ({len(derived.pass_to_pass)}) "
        f"derived by running the tests{left_out}"
    )
    return True


def write_suite(
    drafts: list[Draft],
    *,
    source: str,
    suite: str,
    out: Path,
    repos: Repositories,
    cache_dir: Path,
    tasks_dir: Path | None = None,
    repo_source: Literal["bundle", "url"] = "bundle",
    validator: Callable[[Task], Any] | None = None,
    deriver: Callable[[Task], Any] | None = None,
    keep_invalid: bool = False,
    not_converted: list[tuple[str, str]] | None = None,
    progress: Progress | None = None,
) -> ImportReport:
    """Write, check and (with `validator`, which returns a TaskValidation) validate the
    drafts; move the tasks that pass (all of them with `keep_invalid`) to `out`. A draft
    whose lists are to be derived gets them from `deriver` (grader.validate.derive_lists,
    which returns DerivedLists) before it is validated; without one it is rejected."""
    say = progress or (lambda _: None)
    out = Path(out)
    report = ImportReport(
        source=source, suite=suite, out=out, validated=validator is not None, not_converted=list(not_converted or [])
    )
    seen: dict[str, str] = {}
    for d in drafts:
        if d.id in seen:
            raise DatasetError(f"instances {seen[d.id]} and {d.source_id} both become task {d.id}")
        seen[d.id] = d.source_id
    elsewhere = _ids_elsewhere(tasks_dir, out) if tasks_dir is not None else {}
    clashes = {d.id: elsewhere[d.id] for d in drafts if d.id in elsewhere}
    if clashes:
        shown = "; ".join(f"{i} ({p})" for i, p in sorted(clashes.items())[:10])
        raise DatasetError(f"task ids already defined outside {out}: {shown}")

    (cache_dir / "imports").mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="import-", dir=cache_dir / "imports"))
    try:
        if repo_source == "bundle":
            by_repo: dict[str, list[str]] = {}
            for d in drafts:
                by_repo.setdefault(d.repo_name, []).extend(d.commits)
            for name, commits in sorted(by_repo.items()):
                say(f"bundling the history of {len(set(commits))} commit(s) of {name}")
                bundle = f"{repo_key(name)}.bundle"
                repos.write_bundle(name, sorted(set(commits)), staging / "repos" / bundle, out / "repos" / bundle)

        for d in drafts:
            outcome = Outcome(task_id=d.id, source_id=d.source_id, notes=list(d.notes))
            report.outcomes.append(outcome)
            repo = repo_entry(d, repos, repo_source)
            task = load_task_file(write_task_dir(staging / d.id, d, repo))
            say(f"checking {d.id}")
            outcome.problems += host_problems(task, cache_dir, repos.local(d.repo_name, d.source_id))
            if d.derive_lists and not outcome.problems:
                say(f"deriving the test lists of {d.id} (empty patch, gold patch)")
                if _derive(d, task, deriver, outcome):  # the lists are in the draft: written again
                    shutil.rmtree(staging / d.id)
                    task = load_task_file(write_task_dir(staging / d.id, d, repo))
            if validator is not None and not outcome.problems:
                say(f"validating {d.id} (empty patch, gold patch)")
                try:
                    result = validator(task)
                except GraderError as exc:
                    outcome.problems.append(f"validation failed: {exc}")
                else:
                    outcome.validated = True
                    outcome.problems += result.problems
                    outcome.empty = [str(v) for v in result.empty]
                    outcome.gold = [str(v) for v in result.gold]
            outcome.kept = keep_invalid or not outcome.problems

        out.mkdir(parents=True, exist_ok=True)
        kept_repos = {d.repo_name for d, o in zip(drafts, report.outcomes, strict=True) if o.kept}
        if repo_source == "bundle":
            for name in sorted(kept_repos):
                bundle = f"{repo_key(name)}.bundle"
                (out / "repos").mkdir(exist_ok=True)
                shutil.move(str(staging / "repos" / bundle), str(out / "repos" / bundle))
        for o in report.outcomes:
            if o.kept:
                dest = out / o.task_id
                if dest.exists():
                    shutil.rmtree(dest)
                shutil.move(str(staging / o.task_id), str(dest))
        (out / REPORT).write_text(json.dumps(report.as_dict(), indent=1) + "\n", encoding="utf-8")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return report
