"""Build the history and bisect tasks cut from real release history (README.md here).

    .venv/bin/python tasks/history-real/build.py              # download (cached), write build/history-real
    .venv/bin/python tasks/history-real/build.py --validate   # then grade each task's reference and its
                                                              # wrong answers, 3 times each, in Docker

The projects and their pinned sdists are the real-world suite's (tasks/realworld/
manifest.toml); chains.toml says which releases make which task. Nothing third-party is
committed: the sdists are downloaded and checked against their sha256 by the shared
builder (tasks/releases.py) and the suite is written to build/history-real, to a
temporary directory first and renamed into place when complete.

For every history task it also writes, beside the task, the two histories that must FAIL:
`squashed.patch` (the whole change as one commit) and `scrambled.patch` (the change's hunks
regrouped into as many commits as the reference has, so the grouping is no better than
chance, as the adjusted Rand index measures it); the reference itself is the gold patch.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import sys
import tempfile
import tomllib
from collections.abc import Hashable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))

import releases  # noqa: E402
import yaml  # noqa: E402

from grader.box.runners.bisect import ANSWER_FILE  # noqa: E402
from grader.box.runners.history import DIFF_ARGS  # noqa: E402
from grader.checks.history import hunk_labels  # noqa: E402
from grader.metrics import adjusted_rand_index  # noqa: E402

OUT = ROOT / "build" / "history-real"
REALWORLD = ROOT / "tasks" / "realworld"
ENVIRONMENT = "python-3.11"  # a history or bisect check runs nothing of the project
MAX_SCRAMBLED_ARI = 0.25  # well under the tasks' pass mark (0.5)
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,(\d+))? @@")
SUITE_YAML = "defaults:\n  feedback: tests\n  protect: {tests: false}\n"


def log(msg: str) -> None:
    print(msg, file=sys.stderr)


def git(repo: Path, *args: str, text: bool = True) -> Any:
    return releases.git(repo, *args, text=text)


def commit(repo: Path, message: str, stamp: str) -> str:
    git(repo, "add", "-A", "-f", ".")
    who = {
        "GIT_AUTHOR_NAME": "PyPI sdist",
        "GIT_AUTHOR_EMAIL": "sdist@pypi.invalid",
        "GIT_AUTHOR_DATE": stamp,
        "GIT_COMMITTER_NAME": "grader",
        "GIT_COMMITTER_EMAIL": "grader@localhost",
        "GIT_COMMITTER_DATE": stamp,
    }
    releases.git(repo, "commit", "-q", "--no-verify", "-m", message, env=who)
    return str(git(repo, "rev-parse", "HEAD").strip())


def stamp_of(release: releases.Release) -> str:
    return release.uploaded.strftime("%Y-%m-%dT%H:%M:%SZ")


# --- the wrong histories: squashed, and the hunks regrouped ----------------------------------
def file_hunks(diff: str) -> dict[str, list[tuple[int, int, list[str]]]]:
    """path -> its hunks of a -U0 diff: (first old line, old line count, the new lines)."""
    out: dict[str, list[tuple[int, int, list[str]]]] = {}
    path = ""
    lines = diff.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.startswith("+++ "):
            path = line[6:] if line != "+++ /dev/null" else path
        elif line.startswith("--- ") and line != "--- /dev/null":
            path = line[6:]
        elif m := _HUNK.match(line):
            old = int(m.group(2)) if m.group(2) is not None else 1
            new = int(m.group(3)) if m.group(3) is not None else 1
            added: list[str] = []
            seen_old = seen_new = 0
            while (seen_old < old or seen_new < new) and i < len(lines):
                body = lines[i]
                i += 1
                if body.startswith("-"):
                    seen_old += 1
                elif body.startswith("+"):
                    added.append(body[1:] + "\n")
                    seen_new += 1
            if i < len(lines) and lines[i].startswith("\\") and added and seen_new == new:
                added[-1] = added[-1][:-1]
            out.setdefault(path, []).append((int(m.group(1)), old, added))
    return out


def apply_hunks(base: str, hunks: list[tuple[int, int, list[str]]]) -> str:
    """`base` with some of its -U0 hunks applied (all in the base's line numbers)."""
    lines = base.splitlines(keepends=True)
    out: list[str] = []
    pos = 0
    for start, count, added in sorted(hunks):
        cut = start if count == 0 else start - 1
        out += lines[pos:cut]
        out += added
        pos = cut + count
    return "".join(out + lines[pos:])


def regrouped(repo: Path, base: str, ref: str, groups: list[int], messages: list[str], stamp: str) -> str:
    """A history from `base` to `ref`'s tree whose commit j holds the hunks `groups` puts in
    group j (of the whole change's hunks, in diff order)."""
    total = git(repo, "diff", *DIFF_ARGS, base, ref)
    per_file = file_hunks(total)
    order = [(path, n) for path, hunks in per_file.items() for n in range(len(hunks))]
    if len(order) != len(groups):
        raise SystemExit(f"{repo}: {len(order)} hunks read, {len(groups)} grouped")
    git(repo, "checkout", "-q", "-f", "-B", "regrouped", base)
    for j in sorted(set(groups)):
        done = {key for key, g in zip(order, groups, strict=True) if g <= j}
        for path, hunks in per_file.items():
            chosen = [h for n, h in enumerate(hunks) if (path, n) in done]
            if len(chosen) == len(hunks):
                shown = git(repo, "ls-tree", ref, "--", path).strip()
                if shown:
                    (repo / path).parent.mkdir(parents=True, exist_ok=True)
                    (repo / path).write_bytes(git(repo, "show", f"{ref}:{path}", text=False))
                elif (repo / path).exists():
                    (repo / path).unlink()
            else:
                listed = git(repo, "ls-tree", base, "--", path).strip()
                before = git(repo, "show", f"{base}:{path}") if listed else ""
                (repo / path).parent.mkdir(parents=True, exist_ok=True)
                (repo / path).write_text(apply_hunks(before, chosen))
        commit(repo, messages[j], stamp)
    head = str(git(repo, "rev-parse", "HEAD").strip())
    if git(repo, "rev-parse", f"{head}^{{tree}}") != git(repo, "rev-parse", f"{ref}^{{tree}}"):
        raise SystemExit(f"{repo}: the regrouped history does not end at the reference's tree")
    return head


def scramble(reference: list[Hashable], commits: int, seed: str) -> list[int]:
    """A grouping of the hunks into `commits` groups whose adjusted Rand index against the
    reference's grouping is at most MAX_SCRAMBLED_ARI (every group used)."""
    n = len(reference)
    best = [i % commits for i in range(n)]
    rng = random.Random(seed)
    for _ in range(2000):
        if len(set(best)) == min(commits, n) and adjusted_rand_index(reference, best) <= MAX_SCRAMBLED_ARI:
            return best
        best = [rng.randrange(commits) for _ in range(n)]
    raise SystemExit(f"{seed}: no grouping of its {n} hunks is far enough from the reference's")


# --- the tasks -------------------------------------------------------------------------------
def write_task(
    out: Path, tid: str, instruction: str, created: Any, source: str, commit: str, check: dict, gold: bytes
) -> Path:
    """The task directory: its task.yaml (repository from its own bundle) and gold.patch."""
    d = out / tid
    d.mkdir()
    doc = {
        "id": tid,
        "instruction": instruction,
        "metadata": {
            "suite": "history-real",
            "language": "python",
            "difficulty": "medium",
            "created_at": created,
            "source": source,
        },
        "repo": {"bundle": f"../repos/{tid}.bundle", "commit": commit},
        "environment": ENVIRONMENT,
        "limits": {"timeout": 60},
        "gold_patch": "gold.patch",
        "check": check,
    }
    (d / "task.yaml").write_text(yaml.safe_dump(doc, sort_keys=False, width=100))
    (d / "gold.patch").write_bytes(gold)
    return d
def history_task(m: releases.Manifest, chain: dict[str, Any], work: Path, out: Path, cache: Path) -> str:
    project, paths, versions = chain["project"], chain["paths"], chain["releases"]
    tid = f"history-{project}-{versions[0]}-{versions[-1]}"
    repo = work / tid
    repo.mkdir(parents=True)
    git(repo, "init", "-q", ".")
    first = m.release(project, versions[0])
    files = dict(releases.release_files(first, cache, log))
    releases.write_tree(repo, files)
    base = commit(repo, f"{project} {versions[0]}\n\nThe source distribution from PyPI, unchanged.\n", stamp_of(first))
    made: list[str] = []
    for version in versions[1:]:
        release = m.release(project, version)
        newer = releases.release_files(release, cache, log)
        changed = [p for p in paths if newer.get(p) != files.get(p)]
        if not changed:
            continue
        for p in changed:
            if p in newer:
                files[p] = newer[p]
            else:
                files.pop(p, None)
        releases.write_tree(repo, files)
        body = "\n".join(f"- {p}" for p in changed)
        made.append(commit(repo, f"Take {project} {version}'s changes\n\nAs released in {project} {version}:\n{body}\n", stamp_of(release)))
    if len(made) < 2:
        raise SystemExit(f"{tid}: the chain makes {len(made)} commit(s); a history needs two or more")
    ref = made[-1]
    reference = git(repo, "format-patch", "--stdout", f"{base}..{ref}", text=False)
    total = git(repo, "diff", *DIFF_ARGS, base, ref)
    diffs = [git(repo, "diff", *DIFF_ARGS, p, c) for p, c in zip([base, *made[:-1]], made, strict=True)]
    labels = hunk_labels(total, diffs)
    if len(labels) < 3:
        raise SystemExit(f"{tid}: the change has {len(labels)} hunk(s); too few to group")
    last = stamp_of(m.release(project, versions[-1]))
    squashed_head = regrouped(repo, base, ref, [0] * len(labels), [f"Take {project} {versions[-1]}'s changes"], last)
    squashed = git(repo, "format-patch", "--stdout", f"{base}..{squashed_head}", text=False)
    groups = scramble(labels, len(made), tid)
    scrambled_head = regrouped(
        repo, base, ref, groups, [f"Part {j + 1} of {project} {versions[-1]}'s changes" for j in range(len(made))], last
    )
    scrambled = git(repo, "format-patch", "--stdout", f"{base}..{scrambled_head}", text=False)
    git(repo, "checkout", "-q", "-f", ref)
    git(repo, "branch", "-f", "reference", ref)
    (out / "repos").mkdir(exist_ok=True)
    git(repo, "bundle", "create", "-q", str(out / "repos" / f"{tid}.bundle"), "reference")
    shown = git(repo, "diff", "--no-color", "--no-ext-diff", base, ref)
    d = write_task(
        out,
        tid,
        f"Commit this change to {', '.join(paths)} (from {project} {versions[0]} to {versions[-1]}) as a "
        f"history of cohesive commits, each a reasonable unit with a message, and submit it as "
        f"`git format-patch --stdout` output from the base commit. The change:\n\n{shown}",
        m.release(project, versions[-1]).uploaded.date(),
        f"{project} {' -> '.join(versions)} (PyPI sdists), a file-commit chain of {', '.join(paths)}",
        base,
        {"type": "history", "reference": ref, "max_commits": 3 * len(made), "cohesion": 0.5},
        reference,
    )
    (d / "squashed.patch").write_bytes(squashed)
    (d / "scrambled.patch").write_bytes(scrambled)
    scrambled_ari = adjusted_rand_index(labels, groups)
    log(f"{tid}: {len(made)} commits, {len(labels)} hunks, scrambled ARI {scrambled_ari:.3f}")
    return tid


def bisect_task(m: releases.Manifest, chain: dict[str, Any], lists: dict[str, Any], work: Path, out: Path, cache: Path) -> str:
    project, versions, source = chain["project"], chain["releases"], chain["task"]
    spec = next(s for s in m.tasks if s.id == source)
    if spec.project != project or spec.new not in versions or versions.index(spec.new) == 0:
        raise SystemExit(f"bisect {source}: its newer release {spec.new} must follow the first of the chain")
    test = lists[source]["fail_to_pass"][0]
    tid = f"bisect-{source}"
    repo = work / tid
    repo.mkdir(parents=True)
    git(repo, "init", "-q", ".")
    shas: dict[str, str] = {}
    parent = None
    for version in versions:
        release = m.release(project, version)
        parent = releases.commit_tree(repo, release, m.registry(project), releases.release_files(release, cache, log), parent)
        shas[version] = parent
    assert parent is not None
    git(repo, "branch", "-f", "head", parent)
    (out / "repos").mkdir(exist_ok=True)
    git(repo, "bundle", "create", "-q", str(out / "repos" / f"{tid}.bundle"), "head")
    culprit = shas[spec.new]
    first = shas[versions[0]]
    d = write_task(
        out,
        tid,
        f"The test `{test}` passes at HEAD (commit {parent}) and fails at the first commit of this history "
        f"({first}), where its behaviour is not yet there. Find the commit that made it pass (git bisect, "
        f"with --term-old=broken --term-new=fixed, say), and answer with a patch that adds the file "
        f"{ANSWER_FILE} holding that commit's id (full, or an abbreviation that names one commit).",
        m.release(project, versions[-1]).uploaded.date(),
        f"{project} {versions[0]} .. {versions[-1]} (PyPI sdists); the change of {source}",
        parent,
        {"type": "bisect", "commit": culprit},
        answer(culprit),
    )
    previous = versions[versions.index(spec.new) - 1]
    (d / "wrong.patch").write_bytes(answer(shas[previous]))
    log(f"{tid}: {len(versions)} commits, culprit {project} {spec.new} ({culprit[:12]})")
    return tid


def answer(sha: str) -> bytes:
    return (
        f"diff --git a/{ANSWER_FILE} b/{ANSWER_FILE}\nnew file mode 100644\n--- /dev/null\n+++ b/{ANSWER_FILE}\n"
        f"@@ -0,0 +1 @@\n+{sha}\n"
    ).encode()


def build(out: Path) -> list[str]:
    m = releases.load_manifest(REALWORLD / "manifest.toml")
    lists = json.loads((REALWORLD / "lists.json").read_text())
    chains = tomllib.loads((HERE / "chains.toml").read_text())
    cache = releases.grader_cache() / "releases"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    made: list[str] = []
    try:
        with tempfile.TemporaryDirectory(prefix="grader-history-") as work:
            for chain in chains.get("history", []):
                made.append(history_task(m, chain, Path(work), tmp, cache))
            for chain in chains.get("bisect", []):
                made.append(bisect_task(m, chain, lists, Path(work), tmp, cache))
        (tmp / "suite.yaml").write_text(SUITE_YAML)
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return made


# --- validation: the reference PASSes, the wrong answers FAIL, three times each ---------------
def validate(out: Path, repeat: int) -> dict[str, Any]:
    from grader.config import get_settings
    from grader.pipeline import Grader
    from grader.tasks.loader import TaskSet

    settings = get_settings(tasks_dir=out, environments_dir=ROOT / "environments")
    grader = Grader(settings)
    report: dict[str, Any] = {}
    for task in TaskSet(out):
        d = task.root
        wanted = (
            {"gold.patch": "PASS", "squashed.patch": "FAIL", "scrambled.patch": "FAIL"}
            if task.check.type == "history"
            else {"gold.patch": "PASS", "wrong.patch": "FAIL"}
        )
        rows = {}
        for name, want in wanted.items():
            got = [grader.grade(task, (d / name).read_bytes()) for _ in range(repeat)]
            rows[name] = {
                "want": want,
                "got": [r.verdict.value for r in got],
                "score": [(r.check or {}).get("score") for r in got],
                "explanation": got[-1].explanation[:300],
            }
            ok = all(r.verdict.value == want for r in got)
            log(f"{task.id} {name}: {' '.join(r.verdict.value for r in got)} {'ok' if ok else 'WRONG'}")
        report[task.id] = rows
    return report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--validate", action="store_true", help="grade every task's right and wrong answers in Docker")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-build", action="store_true", help="validate what is built")
    args = ap.parse_args()
    if not args.no_build:
        made = build(args.out)
        log(f"wrote {len(made)} tasks to {args.out}")
    if args.validate:
        report = validate(args.out, args.repeat)
        (args.out / "validation.json").write_text(json.dumps(report, indent=2))
        wrong = [
            f"{tid} {name}" for tid, rows in report.items() for name, row in rows.items() if set(row["got"]) != {row["want"]}
        ]
        log(f"validated {len(report)} tasks x {args.repeat}: {'all as expected' if not wrong else 'WRONG: ' + ', '.join(wrong)}")
        return 1 if wrong else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
