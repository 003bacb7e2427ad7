"""What every runner that speaks the signed channel shares: its reporter files put where the
test process can read them and not change them, one or several processes run with a
channel each, and their reports folded into one.

A runner that runs one process for all its tests (pytest, jest in band, a JUnit launcher)
calls `run_signed` once; one that runs a process per test file or package (tape, node:test
in process, Go test binaries) calls it per unit, and `merge` folds the reports: outcomes
together, the first forgery kept, and each process's own last word checked against its
own exit status here, where both are known (a unit whose reporter said one status and
whose process exited with another is evidence, whatever the others did). The merged
report's `end` carries the run's overall status, 0 when every unit exited 0, else 1, and
the runner reports that same status as the check's exit status, so the host's agreement
rule (EXIT_PASSED 0, EXIT_FAILED 1) holds for a merged run as for a single one.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from . import resource, resource_names
from .channel import Channel
from .order import Order
from .proc import remaining, run_as_user, text


def install_reporters(directory: str) -> str:
    """The package's reporters/<directory>/ files copied to a new directory of this run,
    root-owned, 0755 (files 0444), outside the repository: the test process loads them by
    absolute path and cannot change them. Returns the directory."""
    d = tempfile.mkdtemp(prefix=".grader-", dir="/tmp")
    os.chmod(d, 0o755)
    for rel in resource_names(f"reporters/{directory}"):
        dest = os.path.join(d, rel)
        os.makedirs(os.path.dirname(dest), 0o755, exist_ok=True)
        with open(dest, "wb") as f:
            f.write(resource(f"reporters/{directory}/{rel}"))
            os.fchmod(f.fileno(), 0o444)
    for root, dirs, _ in os.walk(d):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
    return d


def run_signed(
    order: Order,
    argv: list[str],
    *,
    settings: dict[str, Any],
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    stdout_limit: int | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run `argv` as the unprivileged user with a report channel of its own: (the run, the
    verified report). The report's canary outcomes are left in it (see `merge`)."""
    channel = Channel(order, settings)
    try:
        run = run_as_user(
            order,
            argv,
            timeout=remaining(order) if timeout is None else min(timeout, remaining(order)),
            stdout_limit=stdout_limit or order.output_limit,
            pass_fds=channel.fds(),
            env={**(env or {}), **channel.env()},
        )
    finally:
        channel.close()
    return run, channel.read(None)


def merge(units: list[tuple[str, dict[str, Any], dict[str, Any]]], runner: str) -> tuple[int | None, dict[str, Any]]:
    """Fold the (label, run, report) of each unit into one report, and the run's exit
    status: 0 when every unit's process exited 0, 1 otherwise (None when nothing ran)."""
    out: dict[str, Any] = {
        "forged": None,
        "end": None,
        "ends": 0,
        "sessions": 0,
        "outcomes": {},
        "collect_errors": [],
        "integrity": [],
    }
    rank = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
    statuses: list[int | None] = []
    ended_all = True
    for label, run, rep in units:
        statuses.append(run["exit_code"])
        if rep.get("problem"):
            out["problem"] = out.get("problem") or f"{label}: {rep['problem']}"
            continue
        out["forged"] = out["forged"] or (f"{label}: {rep['forged']}" if rep.get("forged") else None)
        out["collect_errors"] += rep.get("collect_errors", [])
        out["integrity"] += [f"{label}: {w}" for w in rep.get("integrity", [])]
        for tid, outcome in rep.get("outcomes", {}).items():
            if tid not in out["outcomes"] or rank[outcome] > rank[out["outcomes"][tid]]:
                out["outcomes"][tid] = outcome
        end = rep.get("end")
        if end is None or rep.get("ends", 0) < rep.get("sessions", 0) or not rep.get("sessions"):
            ended_all = False
            if run["exit_code"] == 0:
                # exited 0 without its reporter's last word: something ended it early
                out["forged"] = out["forged"] or f"{label}: the process exited 0 before {runner} reported its end"
        elif end["exit"] != run["exit_code"] and not run["timed_out"]:
            out["integrity"].append(
                f"{label}: {runner} finished with exit status {end['exit']} but its process exited with "
                f"{run['exit_code']}: something else ended the run"
            )
    overall = None if not statuses else (0 if all(s == 0 for s in statuses) else 1)
    out["sessions"] = out["ends"] = 1 if units else 0
    if ended_all and units:
        out["end"] = {"t": "end", "exit": overall}
    else:
        out["ends"] = 0
    return overall, out


def split_canaries(report: dict[str, Any], canaries: dict[str, Any] | None) -> None:
    """Take the canaries' outcomes out of the report (the host judges them apart)."""
    if canaries and "expect" in canaries:
        canaries["got"] = {tid: report.get("outcomes", {}).pop(tid, None) for tid in canaries["expect"]}


def finish(result: dict[str, Any], exit_code: int | None, output: str, report: dict[str, Any], timed_out: bool) -> None:
    result["exit_code"] = exit_code
    result["timed_out"] = result.get("timed_out", False) or timed_out
    result["output"] = output
    result["report"] = report


def output_of(units: list[tuple[str, dict[str, Any], dict[str, Any]]], limit: int) -> str:
    """The units' output, each under its label, cut to `limit` bytes (head and tail)."""
    parts = [f"== {label}\n{text(run['out'].data())}" for label, run, _ in units]
    joined = "\n".join(parts)
    if len(joined) <= limit:
        return joined
    half = limit // 2
    return joined[:half] + f"\n[... {len(joined) - limit:,} characters omitted ...]\n" + joined[-half:]
