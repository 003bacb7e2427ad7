"""One rule for what stands for a task with several trials, on every surface; the
leaderboard over the suite's whole task set; a published run is locked; a run is deleted
only by its team before it is published; the portal reads as a person reads it.

Submissions are finished through the store's own moves with known verdicts (as in
tests/test_runs_api.py), on SQLite and PostgreSQL, and read back through the API, the
portal pages (Flask's test client) and the CLI (CliRunner against the app over HTTP)."""

from __future__ import annotations

import html as html_lib
import json
import re

import pytest
from click.testing import CliRunner

from grader.cli import main
from grader.store import submissions as subs
from grader.store.models import Submission
from grader.verdict import Provenance, Result, Verdict
from helpers.service import Api, new_key, submit_run

pytestmark = pytest.mark.service

# One 3-trial run over five tasks of the examples suite (10 tasks). The newest trial of
# calc-mean-empty fails and that of calc-median-even passes; calc-add-mode passed once:
# a rule by the newest trial, or by "any trial passed", gives other answers.
R3 = {
    "calc-mean-empty": ["PASS", "PASS", "FAIL"],  # 2 of 3: resolved
    "calc-median-even": ["FAIL", "FAIL", "PASS"],  # 1 of 3: not
    "notes-merge-greeting": ["FAIL", "FAIL", "FAIL"],  # 0 of 3
    "notes-merge-release": ["PASS", "PASS", "PASS"],  # 3 of 3: resolved
    "calc-add-mode": ["PATCH FAILED", "PASS", "TIMED OUT"],
}  # 1 of 3, 2 graded: not
RESOLVED = ["calc-mean-empty", "notes-merge-release"]
# solve rate: (2/3 + 1/3 + 0 + 1 + 1/3) / 5 = (7/3) / 5 = 46.7%; success: (1 + 1 + 1 + 1 + 1/3) / 5 = 86.7%


def cli(url: str, key: str, *args: str, code: int = 0, stdin: str | None = None) -> str:
    result = CliRunner().invoke(main, [*args, "--url", url, "--api-key", key], input=stdin, catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result.output


def finish_all(svc, verdicts: dict[str, str]) -> None:
    """Finish the submissions named (others stay queued) with the verdict given for each."""
    with svc.db.read() as s:
        rows = s.query(Submission).filter(Submission.id.in_(list(verdicts))).all()
    for row in rows:
        c = subs.claim(svc.db, row.id, row.job_id, "test-host", 60)
        subs.finish(
            svc.db,
            c,
            Result(
                task_id=row.task_id,
                verdict=Verdict(verdicts[row.id]),
                explanation="set",
                durations={"total": 1.0},
                provenance=Provenance(
                    patch_sha256=row.patch_sha256, task_hash=row.task_hash, image_id="img", grader_version="t"
                ),
            ),
        )


def publish(api: Api, run: str, **fields) -> dict:
    r = api.client.patch(
        f"/v1/runs/{run}", json={"public": True, **fields}, headers={"Authorization": f"Bearer {api.key}"}
    )
    assert r.status_code == 200, r.json
    return r.json


def text(response) -> str:
    """A page's text as a person reads it: tags out, whitespace collapsed."""
    html = response.get_data(as_text=True)
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S)
    return html_lib.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).replace(" .", ".").strip())


# --- 1. one run, one set of figures, everywhere ------------------------------------------------------------
def test_a_three_trial_run_gives_the_same_figures_on_every_surface(app, svc, served):
    a, b = Api(app.test_client(), new_key(svc, "alpha")), Api(app.test_client(), new_key(svc, "beta"))
    ids = submit_run(a, "r3", R3)
    finish_all(svc, ids)
    # B: one trial of each of the same tasks, all passed
    finish_all(svc, submit_run(b, "b1", {t: ["PASS"] for t in R3}))

    # the API's run view
    view = a.get("/v1/runs/r3").json
    m = view["metrics"]
    assert [t for t, rec in m["per_task"].items() if rec["resolved"]] == RESOLVED
    assert (m["resolved"]["numerator"], m["resolved"]["denominator"], m["tasks"], m["trials"]) == (2, 5, 5, 3)
    assert m["solve_rate"]["value"] == pytest.approx(7 / 15) and m["solve_rate"]["denominator"] == 5
    assert m["success_rate"]["value"] == pytest.approx((4 + 1 / 3) / 5)
    assert list(m["pass_at_k"]) == ["1", "2", "3"] and m["pass_at_k"]["1"]["value"] == m["solve_rate"]["value"]
    ts = m["task_set"]
    assert (ts["tasks"], ts["attempted"], ts["resolved"]["numerator"]) == (10, 5, 2)

    # SWE-bench's report: resolved_ids are the tasks show counts resolved; total = the suite's size
    rep = a.get("/v1/runs/r3/report").json
    assert rep["resolved_ids"] == RESOLVED and rep["resolved_instances"] == 2
    assert rep["total_instances"] == 10 and rep["submitted_instances"] == rep["completed_instances"] == 5
    assert sorted(rep["unresolved_ids"]) == sorted(set(R3) - set(RESOLVED))

    # the predictions: for each task a trial whose outcome is the task's, so grading them once gives the report back
    verdict_of = {}
    with svc.db.read() as s:
        for row in s.query(Submission).filter(Submission.run_id == "r3"):
            verdict_of[row.task_id, row.patch.decode()] = ids[row.id]
    preds = a.get("/v1/runs/r3/predictions").json
    assert [p["instance_id"] for p in preds] == sorted(R3)
    assert (
        sorted(p["instance_id"] for p in preds if verdict_of[p["instance_id"], p["model_patch"]] == "PASS") == RESOLVED
    )

    # the comparison's per-task outcomes
    b1 = publish(b, "b1")["id"]  # public, so that alpha may compare with it
    comp = a.get(f"/v1/compare?a=r3&b={b1}").json["comparison"]
    assert sorted(t for t, x in comp["per_task"].items() if x["a"] == "resolved") == RESOLVED
    assert (comp["common_tasks"], comp["wins"], comp["losses"], comp["ties"]) == (5, 0, 3, 2)
    assert comp["per_task"]["calc-mean-empty"] == {
        "a": "resolved",
        "b": "resolved",
        "outcome": "both",
        "a_passed": 2,
        "a_trials": 3,
        "b_passed": 1,
        "b_trials": 1,
    }

    # the leaderboard, once both are public: over the suite's 10 tasks
    run_id = publish(a, "r3", method="Three Tries")["id"]
    board = {x["name"]: x for x in a.get("/v1/leaderboard").json["items"]}
    row = board["r3"]["metrics"]["task_set"]
    got = (row["resolved"]["numerator"], row["resolved"]["denominator"], row["attempted"], row["tasks"])
    assert got == (2, 10, 5, 10)
    assert [(x["name"], x["rank"]) for x in a.get("/v1/leaderboard").json["items"]] == [("b1", 1), ("r3", 2)]

    # the run page (no key: it is public) and the leaderboard page
    anon = app.test_client()
    page = text(anon.get(f"/runs/{run_id}"))
    assert "tasks resolved 2 of 5 40.0%" in page
    assert "2 of 10 tasks resolved (20.0%)" in page and "5 of 10 tasks attempted" in page
    assert "solve rate 46.7% 2.33/5" in page  # 7/3 to 3 significant digits
    for task_id, trials in R3.items():
        assert f"{task_id} 3 {trials.count('PASS')} {'yes' if task_id in RESOLVED else 'no'}" in page
    board_page = text(anon.get("/leaderboard"))
    assert re.search(r"2 r3 alpha Three Tries 2 of 10 20\.0% .*? 5 / 10", board_page), board_page

    # the command line, through the client over HTTP
    key = a.key
    shown = cli(served, key, "runs", "show", "r3")
    assert "resolved" in shown and "2 of 5 (40.0%)" in shown and "46.7% (2.33/5)" in shown
    assert "2 of 10 (20.0%)" in shown  # over the suite
    for task_id in R3:
        line = next(ln for ln in shown.splitlines() if task_id in ln)
        assert (" yes " in line) == (task_id in RESOLVED), line
    compared = cli(served, key, "runs", "compare", "r3", b1)
    assert re.search(r"A resolved, B not\s*│\s*0", compared) and re.search(r"B resolved, A not\s*│\s*3", compared)
    for task_id in R3:
        line = next(ln for ln in compared.splitlines() if task_id in ln)
        assert line.count("unresolved") == (0 if task_id in RESOLVED else 1), line
    board_text = cli(served, key, "leaderboard")
    line = next(ln for ln in board_text.splitlines() if " r3 " in ln)
    assert "2 of 10 (20.0%)" in line and "5 / 10" in line
    assert json.loads(cli(served, key, "runs", "export", "r3", "--format", "report"))["resolved_ids"] == RESOLVED


# --- 2. the leaderboard ranks over the suite's task set -----------------------------------------------------
def test_a_one_task_run_does_not_outrank_a_five_task_run_that_resolves_more(app, svc):
    one, five = Api(app.test_client(), new_key(svc, "one")), Api(app.test_client(), new_key(svc, "five"))
    finish_all(svc, submit_run(one, "lucky", {"calc-mean-empty": ["PASS"]}))  # 100% of what it tried
    finish_all(svc, submit_run(five, "broad", {t: ["PASS" if t in RESOLVED else "FAIL"] for t in R3}))  # 40%
    publish(one, "lucky")
    publish(five, "broad")
    items = one.get("/v1/leaderboard").json["items"]
    assert [(x["name"], x["rank"]) for x in items] == [("broad", 1), ("lucky", 2)]
    sets = {x["name"]: x["metrics"]["task_set"] for x in items}
    assert (sets["lucky"]["attempted"], sets["lucky"]["tasks"], sets["lucky"]["resolved"]["numerator"]) == (1, 10, 1)
    assert (sets["broad"]["attempted"], sets["broad"]["tasks"], sets["broad"]["resolved"]["numerator"]) == (5, 10, 2)
    # its solve rate over what it tried is still shown, and is higher: the order is not by it
    assert items[1]["metrics"]["solve_rate"]["value"] == 1.0 > items[0]["metrics"]["solve_rate"]["value"]
    # within a time window the task set is the suite's tasks created in it: 5 examples from 2024 on
    windowed = {x["name"]: x for x in one.get("/v1/leaderboard?since=2024-01-01").json["items"]}
    assert "lucky" not in windowed  # calc-mean-empty is from 2021
    assert windowed["broad"]["metrics"]["task_set"]["tasks"] == 5
    # the portal sorts by the same key, by default
    page = text(app.test_client().get("/leaderboard"))
    assert page.index("broad") < page.index("lucky") and "1 / 10" in page and "5 / 10" in page


# --- 3. a published run is locked --------------------------------------------------------------------------
def test_a_published_run_takes_no_more_submissions(app, svc):
    a = Api(app.test_client(), new_key(svc, "alpha"))
    first = a.post(
        "/v1/submissions",
        json={"task_id": "calc-mean-empty", "patch": "x", "run_id": "p"},
        headers={"Idempotency-Key": "k-1"},
    )
    assert first.status_code == 202
    finish_all(svc, {first.json["id"]: "FAIL"})
    meta = publish(a, "p")
    assert meta["locked"] and meta["published_at"]
    r = a.post("/v1/submissions", json={"task_id": "calc-mean-empty", "patch": "y", "run_id": "p", "trial": 1})
    assert r.status_code == 409 and r.json["error"]["code"] == "run_locked"
    assert "new run_id" in r.json["error"]["message"]
    # a retry of the request accepted before publication is still answered with its submission
    again = a.post(
        "/v1/submissions",
        json={"task_id": "calc-mean-empty", "patch": "x", "run_id": "p"},
        headers={"Idempotency-Key": "k-1"},
    )
    assert again.status_code == 200 and again.json["id"] == first.json["id"]
    # a batch: every item into the locked run is refused with the reason; the rest go through
    r = a.post(
        "/v1/submissions/batch",
        json={
            "submissions": [
                {"task_id": "calc-mean-empty", "patch": "z", "run_id": "p"},
                {"task_id": "calc-mean-empty", "patch": "z", "run_id": "p-2"},
            ]
        },
    )
    assert r.status_code == 202 and r.json["accepted"] == 1
    assert r.json["items"][0]["error"]["code"] == "run_locked" and "id" in r.json["items"][1]
    r = a.post("/v1/submissions/batch?run_id=p", json=[{"instance_id": "calc-mean-empty", "model_patch": "w"}])
    assert r.status_code == 409 and r.json["error"]["code"] == "run_locked"
    # made private again, it stays locked: its figures were shown
    r = a.client.patch("/v1/runs/p", json={"public": False}, headers={"Authorization": f"Bearer {a.key}"})
    assert r.status_code == 200 and r.json["locked"]
    assert (
        a.post("/v1/submissions", json={"task_id": "calc-mean-empty", "patch": "v", "run_id": "p"}).status_code == 409
    )
    assert a.get("/v1/runs/p").json["submissions"] == 1
    # the host's leave: a host key's own published run (a baseline) still takes submissions
    host = Api(app.test_client(), new_key(svc, "host", admin=True))
    assert (
        host.post("/v1/submissions", json={"task_id": "calc-mean-empty", "patch": "h", "run_id": "base"}).status_code
        == 202
    )
    host.client.patch("/v1/runs/base", json={"baseline": True}, headers={"Authorization": f"Bearer {host.key}"})
    assert (
        host.post(
            "/v1/submissions", json={"task_id": "calc-mean-empty", "patch": "h2", "run_id": "base", "trial": 1}
        ).status_code
        == 202
    )
    # a team's run the host marks a baseline is on the leaderboard: locked too
    sent = a.post("/v1/submissions", json={"task_id": "calc-mean-empty", "patch": "q", "run_id": "q"})
    assert sent.status_code == 202
    q = a.get("/v1/runs/q").json["id"]
    host.client.patch(f"/v1/runs/{q}", json={"baseline": True}, headers={"Authorization": f"Bearer {host.key}"})
    assert (
        a.post("/v1/submissions", json={"task_id": "calc-mean-empty", "patch": "q2", "run_id": "q"}).status_code == 409
    )


def test_a_run_published_before_the_lock_existed_is_locked_by_the_migration(database_url):
    from alembic import command
    from sqlalchemy import text as sql

    from grader.store.db import Database

    db = Database(database_url)
    with db._write_engine.connect() as conn:
        command.upgrade(db._alembic(conn), "0003")
        conn.commit()
    with db._write_engine.begin() as conn:
        conn.execute(
            sql(
                "INSERT INTO teams (name, admin, webhook_secret, created_at) "
                "VALUES ('t', false, 's', '2025-01-01 00:00:00')"
            )
        )
        tid = conn.execute(sql("SELECT id FROM teams")).scalar()
        for rid, name, public in (("a" * 16, "shown", 1), ("b" * 16, "private", 0)):
            conn.execute(
                sql(
                    "INSERT INTO runs (id, team_id, name, public, baseline, hidden, verified, created_at) "
                    "VALUES (:id, :t, :n, :p, false, false, false, '2025-02-03 00:00:00')"
                ),
                {"id": rid, "t": tid, "n": name, "p": bool(public)},
            )
    db.migrate()
    with db._write_engine.connect() as conn:
        got = dict(conn.execute(sql("SELECT name, published_at FROM runs")).all())
    assert got["private"] is None and str(got["shown"]).startswith("2025-02-03")


# --- 4. deleting a run -------------------------------------------------------------------------------------
def test_a_team_deletes_its_run_before_it_is_published(app, svc, served):
    a, b = Api(app.test_client(), new_key(svc, "alpha")), Api(app.test_client(), new_key(svc, "beta"))
    host = Api(app.test_client(), new_key(svc, "host", admin=True))
    ids = submit_run(a, "draft", {"calc-mean-empty": ["PASS", "FAIL"]})
    finish_all(svc, ids)
    run_id = a.get("/v1/runs/draft").json["id"]
    assert b.delete(f"/v1/runs/{run_id}").status_code == 404  # another team's run does not exist for it
    assert Api(app.test_client(), None).delete(f"/v1/runs/{run_id}").status_code == 401
    r = host.delete(f"/v1/runs/{run_id}")
    assert r.status_code == 403 and "hide" in r.json["error"]["message"]
    r = a.delete("/v1/runs/draft")
    assert r.status_code == 200 and r.json["submissions_detached"] == 2 and r.json["deleted"]["id"] == run_id
    assert a.get("/v1/runs/draft").status_code == 404 and a.get(f"/v1/runs/{run_id}").status_code == 404
    # the submissions stay the team's, without a run
    for sid in ids:
        sub = a.get(f"/v1/submissions/{sid}").json
        assert sub["run_id"] is None and sub["verdict"] in ("PASS", "FAIL")
    # the run id can be used again: a new run, with only the new submission
    r = a.post("/v1/submissions", json={"task_id": "calc-mean-empty", "patch": "n", "run_id": "draft"})
    assert r.status_code == 202
    again = a.get("/v1/runs/draft").json
    assert again["id"] != run_id and again["submissions"] == 1
    # once published, never: not even when made private again
    finish_all(svc, {r.json["id"]: "FAIL", **submit_run(a, "shown", {"calc-mean-empty": ["PASS"]})})
    publish(a, "shown")
    a.client.patch("/v1/runs/shown", json={"public": False}, headers={"Authorization": f"Bearer {a.key}"})
    r = a.delete("/v1/runs/shown")
    assert r.status_code == 409 and r.json["error"]["code"] == "run_locked"
    # the command line asks first, and says what happened
    submit_run(a, "cli-draft", {"calc-median-even": ["FAIL"]})
    out = cli(served, a.key, "runs", "delete", "cli-draft", stdin="n\n", code=1)
    assert "delete run cli-draft?" in out and a.get("/v1/runs/cli-draft").status_code == 200
    out = cli(served, a.key, "runs", "delete", "cli-draft", "--yes")
    assert "deleted; 1 submission(s) kept without a run" in out
    out = cli(served, a.key, "runs", "delete", "shown", "--yes", code=2)
    assert "cannot be deleted" in out


# --- 5. read as a person reads it ---------------------------------------------------------------------------
def test_the_portal_explains_its_figures_and_says_when_there_is_nothing(app, svc):
    a, b = Api(app.test_client(), new_key(svc, "alpha")), Api(app.test_client(), new_key(svc, "beta"))
    anon = app.test_client()
    # nothing public yet
    assert "No run is public yet" in text(anon.get("/leaderboard"))
    assert "No public run has graded tasks that match these filters" in text(anon.get("/leaderboard?suite=examples"))
    # a run page with its glossary
    finish_all(svc, submit_run(a, "g", {"calc-mean-empty": ["PASS", "FAIL", "PASS"]}))
    gid = publish(a, "g")["id"]
    page = text(anon.get(f"/runs/{gid}"))
    glossary = page[page.index("What the figures mean") :]
    for term in ("resolved", "solve rate", "success rate", "pass@k", "pass_any@n", "stability", "more than half"):
        assert term in glossary, term
    assert "pass@1" in page and "pass@2" in page and "pass@3" in page and "pass@4" not in page
    # a run nothing of which is graded yet
    submit_run(a, "waiting", {"calc-mean-empty": ["PASS"]})
    wid = publish(a, "waiting")["id"]
    page = text(anon.get(f"/runs/{wid}"))
    assert "Nothing graded yet" in page and "1 submission(s) of this run are queued" in page
    # a run whose only trial was the machinery's fault: no figure, no interval over nothing
    finish_all(svc, submit_run(a, "errs", {"calc-mean-empty": ["ERROR"]}))
    eid = publish(a, "errs")["id"]
    page = text(anon.get(f"/runs/{eid}"))
    assert "[0.0, 0.0]" not in page and "—" in page and "incomplete" in page
    assert "tasks resolved — " in page and "pass_any@n —" in page
    board = text(anon.get("/leaderboard?include_incomplete=1"))
    assert "[0.0, 0.0]" not in board and "errs" in board
    # not found, said plainly, with the way on
    r = anon.get("/runs/no-such-run")
    assert r.status_code == 404
    page = text(r)
    assert "There is no run 'no-such-run' here" in page and "leaderboard" in page and "signs in" in page
    assert "There is no task 'nope'" in text(anon.get("/tasks/nope"))
    # two runs with no task in common: nothing to compare, no test
    finish_all(svc, submit_run(b, "other", {"notes-merge-greeting": ["PASS"]}))
    oid = publish(b, "other")["id"]
    comp = a.get(f"/v1/compare?a={gid}&b={oid}").json["comparison"]
    assert comp["common_tasks"] == 0 and comp["mcnemar_p"] is None
    page = text(anon.get(f"/compare?a={gid}&b={oid}"))
    assert "no graded task in common" in page and "McNemar" not in page
    # with a task in common, the p-value to 2 significant digits
    finish_all(svc, submit_run(b, "other2", {"calc-mean-empty": ["FAIL"]}))
    o2 = publish(b, "other2")["id"]
    page = text(anon.get(f"/compare?a={gid}&b={o2}"))
    assert "McNemar exact p 1" in page and "1 · 0 · 0" in page
    # the compare page offers the public runs
    assert "other (beta)" in anon.get("/compare").get_data(as_text=True)


def test_the_cli_says_when_there_is_nothing(app, svc, served):
    a = Api(app.test_client(), new_key(svc, "alpha"))
    assert "no public run matches yet" in cli(served, a.key, "leaderboard")
    submit_run(a, "queued-only", {"calc-mean-empty": ["PASS"]})
    assert "no graded submission yet: 1 queued or running" in cli(served, a.key, "runs", "show", "queued-only")
    finish_all(svc, submit_run(a, "x", {"calc-mean-empty": ["PASS"]}))
    finish_all(svc, submit_run(a, "y", {"calc-median-even": ["PASS"]}))
    out = cli(served, a.key, "runs", "compare", "x", "y")
    assert "no graded task in common" in out and "McNemar" not in out
