"""GitGoodBench samples as tasks: merge-conflict samples as exact-match tasks, file-commit
chains as history tasks.

Fields read: id, name (the repository, owner/name; `repo` is accepted too), sample_type
(`merge` or `file_commit_chain`), difficulty, programming_language, and from `scenario`
(an object, or the JSON-encoded string the published dataset holds): for a merge,
merge_commit_hash, parents (exactly two) and files_in_merge_conflict; for a chain, file,
oldest_commit and newest_commit.

A file-commit chain (GitGoodBench's Interactive Rebase and Iterative Committing of Changes
scenarios) becomes a `history` task: the oldest commit's first parent is the base, the
first-parent chain up to the newest commit is the reference history (its last tree the
expected tree), the reference as `git format-patch` output the gold patch. The criteria
are the check's defaults, loosened only where the real chain itself would fail them (a
subject line longer than 72 characters, a fixup! commit), and the report says so.

The task starts where GitGoodBench's agent starts: the first parent checked out and the
second merged into it without committing (`repo.merge`), so the conflicted files hold
real markers, MERGE_HEAD is set and the index has unmerged entries. That state is made
here by the grader's own checkout code, so the gold patch (the conflicted files, markers
and all, taken to the merge commit's versions) applies to exactly what a submitter gets.
The check is an exact match of the conflicted files against the merge commit.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from grader.importers.common import (
    Context,
    DatasetError,
    Draft,
    commit_sha,
    convert_rows,
    limits,
    task_id,
    text_field,
)
from grader.tasks.model import Repo, Task
from grader.tasks.prepare import checkout_base, git

DIFFICULTIES = ("easy", "medium", "hard")
ENVIRONMENT = "python-3.11"  # an exact match runs no project code; any environment with git does


def scenario(row: dict[str, Any], where: str) -> dict[str, Any]:
    value = row.get("scenario")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{where}: scenario is a string but not JSON: {exc.msg}") from exc
    if not isinstance(value, dict):
        raise DatasetError(f"{where}: scenario is missing or not an object")
    return value


def repository(row: dict[str, Any], where: str) -> str:
    name = text_field(row, "name", where, required=False) or text_field(row, "repo", where)
    if name.count("/") != 1:
        raise DatasetError(f"{where}: repository {name!r} is not owner/name")
    return name


def sample_metadata(
    row: dict[str, Any], ctx: Context, name: str, newest: str, raw_id: str, notes: list[str], where: str
) -> dict[str, Any]:
    """The task's metadata: the sample's language and difficulty (one the model does not
    know is left out, and noted), the date of its newest commit."""
    difficulty = str(row.get("difficulty") or "").strip().lower() or None
    if difficulty is not None and difficulty not in DIFFICULTIES:
        notes.append(f"difficulty {difficulty!r} is not one of {', '.join(DIFFICULTIES)}: left out")
        difficulty = None
    metadata = {
        "suite": ctx.suite,
        "language": str(row.get("programming_language") or "").lower() or None,
        "difficulty": difficulty,
        "created_at": ctx.repos.commit_date(name, newest, where),
        "source": f"GitGoodBench {raw_id} ({name})",
    }
    return {k: v for k, v in metadata.items() if v is not None}


def conflicted_checkout(ctx: Context, name: str, ours: str, theirs: str, dest: Path, where: str) -> list[str]:
    """Write the conflicted state to `dest` with the grader's own checkout (from the local
    clone) and return the paths git left unmerged."""
    local = ctx.repos.local(name, where)
    probe = Task(
        id="import-probe",
        instruction="-",
        environment=ENVIRONMENT,
        repo=Repo(path=local.name, commit=ours, merge=theirs),
        check={"type": "exact_match", "files": {"-": "-"}},
        root=local.parent,
    )
    checkout_base(probe, dest, ctx.cache_dir)
    out = git("diff", "--name-only", "-z", "--diff-filter=U", cwd=dest).stdout.decode("utf-8", "surrogateescape")
    return sorted({p for p in out.split("\0") if p})


def gold_patch(
    ctx: Context, name: str, ours: str, theirs: str, merged: str, listed: list[str], where: str
) -> tuple[bytes, list[str], list[str]]:
    """(the gold patch, the paths the exact match compares, notes)."""
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="grader-ggb-") as tmp:
        work = Path(tmp) / "repo"
        conflicted = conflicted_checkout(ctx, name, ours, theirs, work, where)
        if not conflicted:
            raise DatasetError(
                f"{where}: merging {theirs[:12]} into {ours[:12]} does not conflict here "
                f"(git {git('version').stdout.decode().split()[-1]})"
            )
        if listed and set(listed) != set(conflicted):
            notes.append(
                f"the sample lists conflicts in {', '.join(sorted(listed))}; git's merge here conflicts "
                f"in {', '.join(conflicted)}: all of them are compared"
            )
        paths = sorted(set(conflicted) | set(listed))
        resolved: dict[str, bytes] = {}
        for rel in paths:
            content = ctx.repos.show(name, merged, rel, where)
            if content is None:
                raise DatasetError(
                    f"{where}: {rel} is not in the merge commit {merged[:12]} (a delete/modify "
                    f"conflict): an exact-match task cannot expect a missing file"
                )
            resolved[rel] = content
        git("add", "--", *paths, cwd=work)
        for rel, content in resolved.items():
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_bytes(content)
        patch = git("diff", "--binary", "--", *paths, cwd=work).stdout
    return patch, paths, notes


def convert_row(row: dict[str, Any], ctx: Context) -> Draft:
    raw_id = str(row.get("id") or "").strip()
    if not raw_id:
        raise DatasetError("a GitGoodBench sample without id")
    where = f"GitGoodBench sample {raw_id}"
    tid = task_id(raw_id, where)
    sample_type = str(row.get("sample_type") or "merge")
    if sample_type == "file_commit_chain":
        return convert_chain(row, ctx, raw_id, tid, where)
    if sample_type != "merge":
        raise DatasetError(
            f"{where}: sample_type {sample_type!r}: only merge and file_commit_chain samples are imported"
        )
    name = repository(row, where)
    sc = scenario(row, where)
    merged = commit_sha(sc.get("merge_commit_hash"), "scenario.merge_commit_hash", where)
    parents = sc.get("parents")
    if not isinstance(parents, list) or len(parents) != 2:
        raise DatasetError(f"{where}: scenario.parents must list the merge commit's two parents")
    ours, theirs = (commit_sha(p, "a parent", where) for p in parents)
    listed = sc.get("files_in_merge_conflict") or []
    if isinstance(listed, str):
        listed = json.loads(listed) if listed.strip().startswith("[") else [listed]
    if not isinstance(listed, list) or not all(isinstance(p, str) for p in listed):
        raise DatasetError(f"{where}: scenario.files_in_merge_conflict must be a list of paths")
    notes: list[str] = []
    for sha in (merged, ours, theirs):
        ctx.repos.require_commit(name, sha, where)
    actual = ctx.repos.parents(name, merged, where)
    if actual != [ours, theirs]:
        raise DatasetError(
            f"{where}: the parents of {merged[:12]} are {', '.join(actual) or 'none'}, "
            f"not the sample's {ours}, {theirs}"
        )
    patch, paths, more = gold_patch(ctx, name, ours, theirs, merged, listed, where)
    notes += more
    files_text = ", ".join(paths)
    definition = {
        "id": tid,
        "instruction": (
            f"A merge is in progress in this repository: commit {theirs} is being merged into "
            f"{ours} (HEAD) and conflicts in {files_text}. Resolve the conflicts, keeping what each "
            f"side meant, and leave no conflict markers."
        ),
        "metadata": sample_metadata(row, ctx, name, merged, raw_id, notes, where),
        "environment": ENVIRONMENT,
        "limits": limits(ctx),
        "gold_patch": "gold.patch",
        "check": {"type": "exact_match", "expected_commit": merged, "paths": paths},
    }
    return Draft(
        id=tid,
        source_id=raw_id,
        repo_name=name,
        commit=ours,
        merge=theirs,
        extra_commits=[merged],
        definition=definition,
        files={"gold.patch": patch},
        notes=notes,
    )


def convert_chain(row: dict[str, Any], ctx: Context, raw_id: str, tid: str, where: str) -> Draft:
    """A file-commit chain sample as a history task (the module's docstring)."""
    name = repository(row, where)
    sc = scenario(row, where)
    oldest = commit_sha(sc.get("oldest_commit"), "scenario.oldest_commit", where)
    newest = commit_sha(sc.get("newest_commit"), "scenario.newest_commit", where)
    file = sc.get("file")
    if not isinstance(file, str) or not file:
        raise DatasetError(f"{where}: scenario.file must name the file the chain changes")
    for sha in (oldest, newest):
        ctx.repos.require_commit(name, sha, where)
    parents = ctx.repos.parents(name, oldest, where)
    if len(parents) != 1:
        raise DatasetError(
            f"{where}: the oldest commit {oldest[:12]} has {len(parents)} parents; a chain starts at a commit with one"
        )
    base = parents[0]
    local = ctx.repos.local(name, where)
    chain = git("rev-list", "--reverse", "--first-parent", f"{base}..{newest}", cwd=local).stdout.decode().split()
    if not chain or chain[0] != oldest:
        raise DatasetError(f"{where}: {oldest[:12]} is not on the first-parent chain of {newest[:12]}")
    notes: list[str] = []
    merges = [c for c in chain if len(ctx.repos.parents(name, c, where)) > 1]
    if merges:
        raise DatasetError(
            f"{where}: the chain holds merge commit(s) {', '.join(c[:12] for c in merges)}: a series cannot"
        )
    if len(chain) < 2:
        raise DatasetError(f"{where}: the chain is one commit: there is no history to grade")
    untouched = [
        c for c in chain if not git("diff-tree", "--no-commit-id", "--name-only", "-r", c, "--", file, cwd=local).stdout
    ]
    if untouched:
        notes.append(f"{len(untouched)} commit(s) of the chain do not change {file}: they are part of the reference")
    subjects = git("log", "--format=%s", f"{base}..{newest}", cwd=local).stdout.decode("utf-8", "replace").splitlines()
    check: dict[str, Any] = {"type": "history", "reference": newest, "max_commits": 2 * len(chain)}
    longest = max((len(s) for s in subjects), default=0)
    if longest > 72:
        check["subject_max"] = longest
        notes.append(f"the chain's longest subject line is {longest} characters: the task allows that many")
    if any(s.startswith(("fixup!", "squash!", "amend!")) for s in subjects):
        check["no_fixups"] = False
        notes.append("the chain itself holds fixup!/squash!/amend! commits: that criterion is off")
    gold = git("format-patch", "--stdout", "--no-signature", f"{base}..{newest}", cwd=local).stdout
    change = git("diff", "--no-color", "--no-ext-diff", base, newest, cwd=local).stdout.decode("utf-8", "replace")
    definition = {
        "id": tid,
        "instruction": (
            f"Commit this change (centred on {file}) as a history of cohesive commits, each a reasonable "
            f"unit with a message, and submit it as `git format-patch --stdout` output from the base "
            f"commit {base}. The change:\n\n{change}"
        ),
        "metadata": sample_metadata(row, ctx, name, newest, raw_id, notes, where),
        "environment": ENVIRONMENT,
        "limits": limits(ctx),
        "gold_patch": "gold.patch",
        "check": check,
    }
    return Draft(
        id=tid,
        source_id=raw_id,
        repo_name=name,
        commit=base,
        merge=None,
        extra_commits=[newest],
        definition=definition,
        files={"gold.patch": gold},
        notes=notes,
    )


def convert(rows: list[dict[str, Any]], ctx: Context) -> tuple[list[Draft], list[tuple[str, str]]]:
    return convert_rows(rows, lambda row: convert_row(row, ctx), "id")
