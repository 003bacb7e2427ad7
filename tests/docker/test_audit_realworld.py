"""The static audit on the real-world suite's 30 gold patches: no finding (the suite is
built here from its pinned sdists, as tests/docker/test_realworld_docker.py builds it)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from grader.audit import audit_patch
from grader.tasks.loader import TaskSet

ROOT = Path(__file__).resolve().parents[2]


def _gold_patches(where: Path) -> list[tuple[str, bytes]]:
    out = []
    for task in TaskSet(where):
        gold = task.gold_patch_text()
        if gold is not None:
            out.append((task.id, gold))
    return out


@pytest.mark.docker
@pytest.mark.timeout(900)
def test_the_realworld_gold_patches_give_no_finding():
    sys.path.insert(0, str(ROOT / "tasks"))
    import releases

    releases.suite("realworld").build(log=lambda *_: None)  # the task directories (no images needed)
    golds = _gold_patches(ROOT / "build" / "realworld")
    assert len(golds) == 30
    assert {tid: [f.rule for f in audit_patch(g)] for tid, g in golds if audit_patch(g)} == {}
