"""The task suites in service as the host sees them (the portal's /host/suites and
GET /v1/admin/suites): each one's tasks, languages, feedback policies and gold patches, and
its validation status against its tasks as served now (grader/store/validations.py); and
a validation the host records, which must be of a whole suite."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from grader.handles import Handles
from grader.store import validations


def in_service(svc: Handles) -> dict[str, dict[str, Any]]:
    """Every suite served, by name: its tasks counted, its languages, how many tasks have
    each feedback policy and a gold patch, and its validation status."""
    suites: dict[str, dict[str, Any]] = {}
    hashes: dict[str, dict[str, str]] = {}
    for t in svc.tasks:
        row = suites.setdefault(t.metadata.suite, {"tasks": 0, "languages": [], "feedback": {}, "gold": 0})
        row["tasks"] += 1
        if t.metadata.language not in row["languages"]:
            row["languages"] = sorted([*row["languages"], t.metadata.language])
        row["feedback"][t.feedback] = row["feedback"].get(t.feedback, 0) + 1
        row["gold"] += t.gold_patch is not None
        hashes.setdefault(t.metadata.suite, {})[t.id] = svc.task_hash(t.id)
    with svc.db.read() as s:
        found = validations.latest(s)
        for name, row in suites.items():
            row["validation"] = validations.status(hashes[name], found.get(name))
    return dict(sorted(suites.items()))


def record(
    svc: Handles, outcomes: Mapping[str, Mapping[str, tuple[str, str]]], *, repeat: int, grader_version: str, by: str
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Record validations of whole suites (suite -> task id -> (definition hash, outcome)),
    all or none: each must name a suite in service and every one of its tasks, no more.
    Returns each recorded suite's status now (a task validated in another version than
    the one served shows the suite as changed), or what is wrong, and nothing stored."""
    served: dict[str, set[str]] = {}
    for t in svc.tasks:
        served.setdefault(t.metadata.suite, set()).add(t.id)
    problems = []
    for suite, tasks in sorted(outcomes.items()):
        if suite not in served:
            problems.append(f"there is no suite {suite!r} in service; the suites are: {', '.join(sorted(served))}")
        elif set(tasks) != served[suite]:
            missing, extra = sorted(served[suite] - set(tasks)), sorted(set(tasks) - served[suite])
            problems.append(
                f"suite {suite!r} has {len(served[suite])} task(s) and a validation is of all of them: "
                + "; ".join(
                    part
                    for part in (
                        f"not validated: {', '.join(missing[:20])}" if missing else "",
                        f"not in the suite: {', '.join(extra[:20])}" if extra else "",
                    )
                    if part
                )
            )
    if problems:
        return {}, problems
    with svc.db.write() as s:
        for suite, tasks in sorted(outcomes.items()):
            validations.record(s, suite, tasks, repeat=repeat, grader_version=grader_version, recorded_by=by)
    now = in_service(svc)
    return {suite: now[suite]["validation"] for suite in sorted(outcomes)}, []
