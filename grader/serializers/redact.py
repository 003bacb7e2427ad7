"""Keep a task's secrets out of what the API sends. Results quote the run (test output,
tracebacks, diffs against expected files), and a traceback can quote a hidden test, a
diff an expected line. Every line of a task's hidden tests, expected files and gold
patch that carries information is collected once per task, and any such line in a
result's text is replaced before the result leaves the server.

Masking recognises lines as they are: code that prints a hidden file encoded (base64,
hex, a prefix on every line) defeats it. What stops that is the feedback policy
(grader/serializers/feedback.py), which leaves the output out of what a submitter sees.

A line the submitter's own patch holds is never masked in its result (`own_lines`): a
team that wrote the gold's line itself, or quotes a line of the base, learns nothing
from seeing it, and a result that hid its own code from it would read as nonsense. The
price: a team can confirm a guess of a secret line by putting it in its patch and
seeing whether the output quotes it unmasked; under `full` the output is already the
submitter's to read, and under `tests` and `verdict` no output is shown."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.errors import TaskError
from grader.tasks.model import ExactMatchCheck, Task

MASK = "[hidden by grader]"
_MIN = 8  # shorter lines ("pass", "}", "return x") say nothing about the secret
_WORD = re.compile(r"[A-Za-z0-9]")


def _lines(text: str, *, diff: bool) -> set[str]:
    out = set()
    for line in text.splitlines():
        if diff:
            if not line.startswith("+") or line.startswith("+++"):
                continue
            line = line[1:]
        s = line.strip()
        if len(s) >= _MIN and _WORD.search(s):
            out.add(s)
    return out


@dataclass(frozen=True)
class Secrets:
    """A task's secret lines, and what could not be read for them (whose lines, if a
    result quotes them, go unmasked: the caller shows less instead)."""

    lines: frozenset[str]
    unread: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return not self.unread


def secret_lines(task: Task, cache: Path | None = None, task_hash: str | None = None) -> Secrets:
    """Every informative line of the task's hidden tests, expected files and gold patch.
    Expected files taken from a commit (`expected_commit`) are read as grading reads
    them, from the task prepared in `cache` (prepared once per definition hash)."""
    secrets: set[str] = set()
    unread: list[str] = []
    refs = [r for r in task.referenced_files() if r != task.repo.bundle]
    patches = {task.gold_patch}
    check = task.check
    test_patch = getattr(check, "test_patch", None)
    if test_patch:
        patches.add(test_patch)
    for rel in refs:
        try:
            text = task.read(rel).decode("utf-8", errors="replace")
        except (TaskError, OSError) as exc:
            unread.append(f"{rel}: {exc}")
            continue
        secrets |= _lines(text, diff=rel in patches)
    if isinstance(check, ExactMatchCheck) and check.expected_commit:
        try:
            if cache is None:
                raise TaskError("no cache to prepare the task in")
            from grader.tasks.prepare import prepare

            expected = prepare(task, cache, task_hash).expected_files()
        except (TaskError, OSError) as exc:
            unread.append(f"the expected files of commit {check.expected_commit}: {exc}")
        else:
            for data in expected.values():
                secrets |= _lines(data.decode("utf-8", errors="replace"), diff=False)
    return Secrets(frozenset(secrets), tuple(unread))


def own_lines(patch: bytes | str | None) -> frozenset[str]:
    """Every line of a submitted patch that masking could match (added, removed and
    context lines, without their diff prefix; headers aside): the submitter's own."""
    if not patch:
        return frozenset()
    text = patch.decode("utf-8", errors="replace") if isinstance(patch, bytes) else patch
    out = set()
    for line in text.splitlines():
        if line.startswith(("+++ ", "--- ")) or not line or line[0] not in "+- ":
            continue
        s = line[1:].strip()
        if len(s) >= _MIN:
            out.add(s)
    return frozenset(out)


def redact(value: Any, secrets: frozenset[str], own: frozenset[str] = frozenset()) -> Any:
    """`value` with every secret line masked, except the lines in `own` (own_lines of
    the submitter's patch)."""
    if own:
        secrets = secrets - own
    if not secrets:
        return value
    if isinstance(value, str):
        if len(value) < _MIN:
            return value
        lines = value.split("\n")
        changed = False
        for i, line in enumerate(lines):
            s = line.strip()
            if len(s) < _MIN:
                continue
            # a diff or traceback prefixes the quoted line: "+    assert ...", ">       assert ..."
            core = s[1:].strip() if s[0] in "+- >" else s
            if s in secrets or core in secrets:
                lines[i] = line[: len(line) - len(line.lstrip())] + MASK
                changed = True
        return "\n".join(lines) if changed else value
    if isinstance(value, dict):
        return {k: redact(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v, secrets) for v in value]
    return value
