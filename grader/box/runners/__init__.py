"""The runners: one module each, registered here by name (a check's `kind`).

A runner module defines `run(job, tree, result, canaries)`, which runs the check as the
unprivileged user and records in `result` what the host needs to decide (the exit status,
the output, the verified report); optionally `before_patch(job, tree)` (read what must
come from the base commit, before the patch can change it) and `make_canaries(job,
tree)` (hidden tests of this run that must fail and must pass).
"""

from __future__ import annotations

from types import ModuleType

from . import command, exact_match, output, pytest

RUNNERS: dict[str, ModuleType] = {
    "pytest": pytest,
    "command": command,
    "output": output,
    "exact_match": exact_match,
}


def runner(kind: str) -> ModuleType:
    try:
        return RUNNERS[kind]
    except KeyError:
        raise ValueError(f"unknown check kind {kind!r}") from None
