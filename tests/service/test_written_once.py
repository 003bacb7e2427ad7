"""Computed once, at write time (issue 17): the result as each viewer may see it and the
attempt's metric inputs are stored with the verdict, so that a read (GET, `?wait=`, the
webhook body, the portal) never reaches a task's repository and the leaderboard is one
query plus the metrics; rows written before are filled in by the migration (metric
inputs) or masked as they are read (the views). On SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
import re

import pytest
import sqlalchemy as sa
from sqlalchemy import event, select
from sqlalchemy import text as sql

from grader import runs as R
from grader import serializers
from grader.store import submissions as subs
from grader.store.models import Run, Submission
from grader.verdict import Localization, Provenance, Result, Verdict
from grader.version import GRADER_VERSION
from helpers.service import Api, new_key, submit_run

pytestmark = pytest.mark.service

TASK = "notes-merge-release"  # feedback: full, its expected files read from a commit (prepare)


def _result(row: Submission, verdict: str, **over) -> Result:
    return Result(
        task_id=row.task_id,
        verdict=Verdict(verdict),
        explanation="set",
        durations={"total": 1.0},
        provenance=Provenance(
            patch_sha256=row.patch_sha256, task_hash=row.task_hash, image_id="img", grader_version=GRADER_VERSION
        ),
        **over,
    )


def finish(svc, ids: dict[str, str], **over) -> None:
    """Finish the submissions as the worker does: masked once, with the verdict."""
    with svc.db.read() as s:
        rows = s.query(Submission).filter(Submission.id.in_(list(ids))).all()
    for row in rows:
        result = _result(row, ids[row.id], **over)
        c = subs.claim(svc.db, row.id, row.job_id, "test-host", 60)
        shown = serializers.masked(svc, row.task_id, result.model_dump(mode="json"), row.patch)
        assert subs.finish(svc.db, c, result, shown=shown)


def test_a_read_reaches_no_task_repository(app, svc, monkeypatch):
    api = Api(app.test_client(), new_key(svc, "reader"))
    loc = Localization(precision=0.5, recall=1.0, f1=0.667, patch_files=["a"], gold_files=["b"])
    ids = submit_run(api, "r", {TASK: ["FAIL"]})
    finish(svc, ids, localization=loc, output="the output")
    (sid,) = ids
    before = api.get(f"/v1/submissions/{sid}").json
    with svc.db.read() as s:
        row = s.get(Submission, sid)
        assert row.shown is not None and (row.loc_precision, row.loc_f1, row.tampered) == (0.5, 0.667, False)
    monkeypatch.setattr(serializers, "task_secrets", lambda *a: pytest.fail("a read reached the task's secrets"))
    got = api.get(f"/v1/submissions/{sid}").json
    assert got == before
    if got["feedback"] == "full":  # its expected files could be read: full, without the gold's files
        assert got["result"]["localization"]["gold_files"] == [] and got["result"]["output"] == "the output"
    # a second submission of the same patch is answered from the cache with what the first stored
    again = api.post("/v1/submissions?wait=1", json={"task_id": TASK, "patch": "xr0", "trial": 0, "run_id": "r2"})
    assert again.status_code == 200 and again.json["cached"] and again.json["result"] == before["result"]


def test_a_row_written_before_is_masked_as_it_is_read(app, svc, monkeypatch):
    api = Api(app.test_client(), new_key(svc, "old"))
    ids = submit_run(api, "r", {TASK: ["PASS"]})
    finish(svc, ids, output="the output")
    (sid,) = ids
    written = api.get(f"/v1/submissions/{sid}").json
    with svc.db.write() as s:
        s.get(Submission, sid).shown = None  # as a row graded before migration 0006
    calls = []
    real = serializers.task_secrets
    monkeypatch.setattr(serializers, "task_secrets", lambda *a: calls.append(a) or real(*a))
    assert api.get(f"/v1/submissions/{sid}").json == written and calls


def test_the_leaderboard_reads_no_result_and_a_board_unchanged_no_submission(app, svc):
    """Its figures are computed from what the metrics read of the submissions (one query
    for the runs that changed) and stored with the runs; a read of a board nothing changed
    on reads the runs alone (issue 20: what publishing costs a reader)."""
    one, two = Api(app.test_client(), new_key(svc, "one")), Api(app.test_client(), new_key(svc, "two"))
    for api, name in ((one, "a"), (two, "b")):
        finish(svc, submit_run(api, name, {TASK: ["PASS", "FAIL", "PASS"], "calc-mean-empty": ["FAIL"]}))
        r = api.client.patch(f"/v1/runs/{name}", json={"public": True}, headers={"Authorization": f"Bearer {api.key}"})
        assert r.status_code == 200
    statements: list[str] = []
    listener = lambda conn, cur, statement, *a: statements.append(statement)  # noqa: E731
    for engine in {svc.db.engine, svc.db._write_engine}:
        event.listen(engine, "before_cursor_execute", listener)
    try:
        first = R.leaderboard(svc, R.Filters()).items
        computed = list(statements)
        statements.clear()
        board = R.leaderboard(svc, R.Filters()).items
    finally:
        for engine in {svc.db.engine, svc.db._write_engine}:
            event.remove(engine, "before_cursor_execute", listener)
    reads = [q for q in computed if "JOIN submissions" in q]
    assert len(reads) == 1, computed  # the changed runs' submissions, in one query
    assert not any(re.search(r"submissions\.(result|patch|shown)\b", q) for q in computed)
    assert not any("submissions" in q for q in statements), statements  # nothing changed: no submission read
    assert board == first
    assert sorted(x["name"] for x in board) == ["a", "b"]
    with svc.db.read() as s:
        runs = {r.name: r for r in s.scalars(select(Run))}
    for item in board:  # the same figures as one run's own view, computed (a host's is never stored), but its table
        whole = R.run_view(svc, runs[item["name"]], host=True)["metrics"]
        assert item["metrics"] == {k: v for k, v in whole.items() if k != "per_task"} and whole["per_task"]


def test_the_migration_fills_in_the_metric_inputs_of_rows_graded_before(database_url):
    from alembic import command

    from grader.store.db import Database

    db = Database(database_url)
    with db._write_engine.connect() as conn:
        command.upgrade(db._alembic(conn), "0005")
        conn.commit()
    result = {
        "task_id": "t",
        "verdict": "PASS",
        "explanation": "",
        "tampered": ["x"],
        "audit": [{"rule": "r"}],
        "localization": {"precision": 0.25, "recall": 0.5, "f1": 0.333, "patch_files": [], "gold_files": []},
    }
    cols = ("id", "team_id", "task_id", "patch", "patch_sha256", "status", "verdict", "cached", "attempts", "errors")
    old = sa.table(
        "submissions",
        *(sa.column(c) for c in cols),
        sa.column("queued_at", sa.DateTime()),
        sa.column("result", sa.JSON()),
    )
    with db._write_engine.begin() as conn:
        conn.execute(
            sql(
                "INSERT INTO teams (name, admin, webhook_secret, created_at) "
                "VALUES ('t', false, 's', '2025-01-01 00:00:00')"
            )
        )
        tid = conn.execute(sql("SELECT id FROM teams")).scalar()
        for sid, res in (("a" * 24, result), ("b" * 24, None)):
            done = res is not None
            conn.execute(
                sa.insert(old).values(
                    id=sid,
                    team_id=tid,
                    task_id="t",
                    patch=b"",
                    patch_sha256="h",
                    status="done" if done else "queued",
                    verdict="PASS" if done else None,
                    cached=False,
                    attempts=1,
                    errors=0,
                    queued_at=dt.datetime(2025, 1, 1),
                    result=res,
                )
            )
    db.migrate()
    with db.read() as s:
        done, queued = s.get(Submission, "a" * 24), s.get(Submission, "b" * 24)
        assert (done.loc_precision, done.loc_recall, done.loc_f1) == (0.25, 0.5, 0.333)
        assert (done.tampered, done.audit_flagged, done.shown) == (True, True, None)
        assert (queued.loc_f1, queued.tampered, queued.shown) == (None, None, None)
