"""Suites' validations: recorded whole (a row per suite and validation), read back as each
suite's latest, and compared with the suite as it is served now.

A validation says which tasks it was of by each task's definition hash (grader/tasks:
the definition and every file it references), and the suite's identity is the hash of
those pairs. A suite whose tasks, or their hidden tests, gold patches or repositories,
changed since is "changed since validated", never shown as validated: what was validated
is not what is served."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from grader.store.models import SuiteValidation, utcnow

OUTCOMES = ("valid", "invalid", "flaky")  # a task's: flaky when its verdicts changed between runs


def identity(task_hashes: Mapping[str, str]) -> str:
    """A task set's identity: sha256 over its (task id, definition hash) pairs, sorted."""
    return hashlib.sha256(json.dumps(sorted(task_hashes.items())).encode()).hexdigest()


def record(
    s: Session,
    suite: str,
    outcomes: Mapping[str, tuple[str, str]],
    *,
    repeat: int,
    grader_version: str,
    recorded_by: str,
) -> SuiteValidation:
    """Store a validation of `suite`: `outcomes` is every task's (definition hash, outcome)."""
    bad = sorted({o for _, o in outcomes.values()} - set(OUTCOMES))
    if bad:
        raise ValueError(f"an outcome is one of {', '.join(OUTCOMES)}, not {', '.join(bad)}")
    counts = {o: sum(1 for _, got in outcomes.values() if got == o) for o in OUTCOMES}
    row = SuiteValidation(
        suite=suite,
        validated_at=utcnow(),
        recorded_by=recorded_by[:200],
        repeat=repeat,
        grader_version=grader_version[:40],
        tasks=len(outcomes),
        task_set_hash=identity({t: h for t, (h, _) in outcomes.items()}),
        outcomes={t: {"hash": h, "outcome": o} for t, (h, o) in sorted(outcomes.items())},
        **counts,
    )
    s.add(row)
    return row


def latest(s: Session) -> dict[str, SuiteValidation]:
    """Each suite's latest validation, by suite."""
    newest = select(func.max(SuiteValidation.id)).group_by(SuiteValidation.suite)
    return {v.suite: v for v in s.scalars(select(SuiteValidation).where(SuiteValidation.id.in_(newest)))}


def status(current: Mapping[str, str], v: SuiteValidation | None) -> dict[str, Any]:
    """A suite's validation status against its tasks as served now (`current`: task id ->
    definition hash): `state` is "validated" (the same tasks, unchanged), "changed" (the
    tasks added, removed and changed since are named) or "never"; with the latest
    validation's figures when there is one."""
    out: dict[str, Any] = {"state": "never", "tasks_now": len(current), "task_set_hash_now": identity(current)}
    if v is None:
        return out
    then = {t: str(o["hash"]) for t, o in v.outcomes.items()}
    out |= {
        "state": "validated" if then == dict(current) else "changed",
        "validated_at": v.validated_at.isoformat(),
        "recorded_by": v.recorded_by,
        "repeat": v.repeat,
        "grader_version": v.grader_version,
        "tasks": v.tasks,
        "valid": v.valid,
        "invalid": v.invalid,
        "flaky": v.flaky,
        "task_set_hash": v.task_set_hash,
        "not_valid": sorted(t for t, o in v.outcomes.items() if o["outcome"] != "valid"),
        "added": sorted(set(current) - set(then)),
        "removed": sorted(set(then) - set(current)),
        "changed": sorted(t for t in set(then) & set(current) if then[t] != current[t]),
    }
    return out
