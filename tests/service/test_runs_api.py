"""Runs, the leaderboard, comparison and the SWE-bench report through the API, on SQLite
and PostgreSQL. Submissions are finished through the store's own moves with known
verdicts, so the figures can be checked by hand; real grading of runs is proven in
tests/test_portal_browser.py."""

from __future__ import annotations

import json
import threading

import pytest
from click.testing import CliRunner

from grader.cli import main
from grader.client import parse_predictions, read_predictions
from grader.store import submissions as subs
from grader.store.models import Submission
from grader.verdict import Provenance, Result, Verdict
from helpers.service import Api, new_key, submit_run

pytestmark = pytest.mark.service
EMPTY_SHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def finish_all(svc, verdicts: dict[str, str]) -> None:
    """Finish every queued submission with the verdict named for its id."""
    with svc.db.read() as s:
        rows = s.query(Submission).filter(Submission.status == "queued").all()
    for row in rows:
        c = subs.claim(svc.db, row.id, row.job_id, "test-host", 60)
        v = Verdict(verdicts[row.id])
        subs.finish(
            svc.db,
            c,
            Result(
                task_id=row.task_id,
                verdict=v,
                explanation="set by the test",
                durations={"total": 1.0},
                provenance=Provenance(
                    patch_sha256=row.patch_sha256, task_hash=row.task_hash, image_id="img", grader_version="t"
                ),
            ),
        )


def test_run_figures_visibility_and_metadata(app, svc):
    a = Api(app.test_client(), new_key(svc, "alpha"))
    b = Api(app.test_client(), new_key(svc, "beta"))
    anon = Api(app.test_client(), None)
    ids = submit_run(
        a,
        "r1",
        {
            "calc-mean-empty": ["PASS", "FAIL"],
            "calc-median-even": ["PASS", "PASS"],
            "notes-merge-greeting": ["PATCH FAILED", "FAIL"],
        },
    )
    finish_all(svc, ids)
    view = a.get("/v1/runs/r1").json  # by name, within the team
    m = view["metrics"]
    assert view["complete"] and view["submissions"] == 6 and view["pending"] == 0
    # per task: 1 of 2 passed (a tie: not resolved), 2 of 2 (resolved), 0 of 2 (one graded FAIL)
    assert (m["resolved"]["numerator"], m["resolved"]["denominator"]) == (1, 3)
    assert m["solve_rate"]["numerator"] == 1.5 and m["solve_rate"]["denominator"] == 3  # (1/2 + 1 + 0) / 3
    assert m["success_rate"]["numerator"] == 2.5  # (1 + 1 + 1/2) / 3: PATCH FAILED is not 'graded'
    # over the examples suite's 10 tasks, 3 attempted
    assert view["suites"] == ["examples"]
    assert (m["task_set"]["tasks"], m["task_set"]["attempted"], m["task_set"]["resolved"]["numerator"]) == (10, 3, 1)
    assert m["per_task"]["calc-median-even"]["stability"] == "stable_pass"
    assert m["per_task"]["calc-mean-empty"]["stability"] == "flaky"
    # private by default: another team and the public cannot see it, by id or by name
    run_id = view["id"]
    assert b.get(f"/v1/runs/{run_id}").status_code == 404 and anon.get(f"/v1/runs/{run_id}").status_code == 404
    assert b.get("/v1/runs/r1").status_code == 404
    assert anon.get("/v1/leaderboard").json["items"] == []
    # the team describes it and makes it public; only an admin marks it
    r = a.client.patch(
        f"/v1/runs/{run_id}",
        json={"method": "M", "paper_url": "https://example.org/p", "public": True},
        headers={"Authorization": f"Bearer {a.key}"},
    )
    assert r.status_code == 200 and r.json["public"] and r.json["method"] == "M"
    r = a.client.patch(f"/v1/runs/{run_id}", json={"verified": True}, headers={"Authorization": f"Bearer {a.key}"})
    assert r.status_code == 403
    r = b.client.patch(f"/v1/runs/{run_id}", json={"public": False}, headers={"Authorization": f"Bearer {b.key}"})
    assert r.status_code == 404
    r = a.client.patch(
        f"/v1/runs/{run_id}", json={"paper_url": "javascript:alert(1)"}, headers={"Authorization": f"Bearer {a.key}"}
    )
    assert r.status_code == 422
    # a mark is true or false, never null (it was stored as NULL and answered 503)
    r = a.client.patch(f"/v1/runs/{run_id}", json={"public": None}, headers={"Authorization": f"Bearer {a.key}"})
    assert r.status_code == 422 and "public" in r.json["error"]["message"]
    assert anon.get(f"/v1/runs/{run_id}").status_code == 200
    board = anon.get("/v1/leaderboard").json["items"]
    assert [(x["name"], x["rank"]) for x in board] == [("r1", 1)]
    admin = Api(app.test_client(), new_key(svc, "host", admin=True))
    r = admin.client.patch(
        f"/v1/runs/{run_id}", json={"hidden": True}, headers={"Authorization": f"Bearer {admin.key}"}
    )
    assert r.status_code == 200
    assert anon.get("/v1/leaderboard").json["items"] == [] and anon.get(f"/v1/runs/{run_id}").status_code == 404
    assert a.get(f"/v1/runs/{run_id}").status_code == 200  # its team still sees it


def test_leaderboard_ranks_complete_runs_and_filters(app, svc):
    a = Api(app.test_client(), new_key(svc, "alpha"))
    b = Api(app.test_client(), new_key(svc, "beta"))
    finish_all(svc, submit_run(a, "good", {"calc-mean-empty": ["PASS"], "notes-merge-greeting": ["PASS"]}))
    finish_all(svc, submit_run(b, "meh", {"calc-mean-empty": ["PASS"], "notes-merge-greeting": ["FAIL"]}))
    finish_all(svc, submit_run(b, "broken", {"calc-mean-empty": ["PASS"], "notes-merge-greeting": ["ERROR"]}))
    submit_run(a, "pending", {"calc-mean-empty": ["PASS"]})  # never finished
    for api, run in ((a, "good"), (b, "meh"), (b, "broken"), (a, "pending")):
        api.client.patch(f"/v1/runs/{run}", json={"public": True}, headers={"Authorization": f"Bearer {api.key}"})
    board = a.get("/v1/leaderboard").json["items"]
    assert [(x["name"], x["rank"]) for x in board] == [("good", 1), ("meh", 2)]
    board = a.get("/v1/leaderboard?include_incomplete=1").json["items"]
    assert [x["name"] for x in board[:2]] == ["good", "meh"]
    assert {(x["name"], x["rank"], x["complete"]) for x in board[2:]} == {
        ("broken", None, False),
        ("pending", None, False),
    }
    broken = next(x for x in board if x["name"] == "broken")
    assert broken["errors"] == 1 and broken["metrics"]["solve_rate"]["denominator"] == 1  # ERROR left out
    # a suite filter and a time window: calc-mean-empty was created 2021-03-14, notes-merge-greeting later
    created = {t: svc.task(t).metadata.created_at for t in ("calc-mean-empty", "notes-merge-greeting")}
    since = max(created.values()).isoformat()
    windowed = a.get(f"/v1/leaderboard?since={since}").json["items"]
    good = next(x for x in windowed if x["name"] == "good")
    assert good["metrics"]["tasks"] == 1 and "per_task" not in good["metrics"]  # the table is the run's own view's
    assert list(a.get(f"/v1/runs/good?since={since}").json["metrics"]["per_task"]) == [max(created, key=created.get)]
    assert a.get("/v1/leaderboard?since=yesterday").status_code == 422
    assert a.get("/v1/leaderboard?since=2024-01-02&until=2024-01-01").status_code == 422


def test_compare_and_swebench_report(app, svc):
    a = Api(app.test_client(), new_key(svc, "alpha"))
    finish_all(
        svc,
        submit_run(
            a, "A", {"calc-mean-empty": ["PASS"], "calc-median-even": ["FAIL"], "notes-merge-greeting": ["FAIL"]}
        ),
    )
    finish_all(
        svc,
        submit_run(
            a,
            "B",
            {
                "calc-mean-empty": ["PASS"],
                "calc-median-even": ["PASS"],
                "notes-merge-greeting": ["PASS"],
                "notes-merge-release": ["PASS"],
            },
        ),
    )
    c = a.get("/v1/compare?a=A&b=B").json
    comp = c["comparison"]
    assert (c["a"]["name"], c["b"]["name"]) == ("A", "B")
    assert comp["wins"] == 0 and comp["losses"] == 2 and comp["ties"] == 1
    assert comp["mcnemar_p"] == pytest.approx(0.5)  # 2 discordant pairs, all one way: 2 * (1/4)
    assert a.get("/v1/compare?a=A").status_code == 422
    assert a.get("/v1/compare?a=A&b=nope").status_code == 404
    # SWE-bench's report, under the same rule as every figure: a task's trials decide it, not its newest
    # submission. calc-mean-empty now has PASS, then an empty patch's FAIL: a tie, unresolved (the newest
    # submission alone said empty_patch, the first alone resolved). A task given only the empty patch is
    # empty_patch.
    r = a.post("/v1/submissions", json={"task_id": "calc-mean-empty", "patch": "", "run_id": "A"})
    finish_all(svc, {r.json["id"]: "FAIL"})
    r = a.post("/v1/submissions", json={"task_id": "notes-merge-release", "patch": "", "run_id": "A"})
    finish_all(svc, {r.json["id"]: "FAIL"})
    rep = a.get("/v1/runs/A/report?format=swebench").json
    # total_instances: the examples suite's 10 tasks, as SWE-bench's is the dataset's size
    assert rep["total_instances"] == 10 and rep["submitted_ids"] == [
        "calc-mean-empty",
        "calc-median-even",
        "notes-merge-greeting",
        "notes-merge-release",
    ]
    assert rep["empty_patch_ids"] == ["notes-merge-release"] and rep["resolved_ids"] == []
    assert rep["unresolved_ids"] == ["calc-mean-empty", "calc-median-even", "notes-merge-greeting"]
    assert rep["completed_instances"] == 3
    assert a.get("/v1/runs/A").json["metrics"]["resolved"]["numerator"] == 0
    assert a.get("/v1/runs/A/report?format=csv").status_code == 422


# --- predictions out --------------------------------------------------------------------------------------
PATCH_A = (
    "diff --git a/calc/stats.py b/calc/stats.py\n--- a/calc/stats.py\n+++ b/calc/stats.py\n"
    "@@ -1,2 +1,2 @@\n-\tdef mean(xs):  # moyenne\n+\tdef mean(xs):  # moyenne, \u00e9t\u00e9 \u2713\n  x\r\n"
)


def test_predictions_out_round_trip_through_the_api(app, svc):
    """A run submitted as SWE-bench predictions comes back as the same predictions, one per
    task (its newest submission, as the report counts it), and submitting those again
    makes a run with the same predictions."""
    a = Api(app.test_client(), new_key(svc, "alpha"))
    given = [
        {"instance_id": "calc-mean-empty", "model_name_or_path": "m-1", "model_patch": PATCH_A},
        {"instance_id": "notes-merge-greeting", "model_name_or_path": "m-1", "model_patch": "old"},
        {"instance_id": "calc-median-even", "model_patch": ""},
        {"instance_id": "notes-merge-greeting", "model_name_or_path": "m-2", "model_patch": "newer\n"},
    ]
    sent = a.post("/v1/submissions/batch?run_id=P", json=given).json
    assert sent["accepted"] == 3 and sent["items"][3]["error"]["code"] == "attempt_exists"  # one attempt a trial
    newer = {"task_id": "notes-merge-greeting", "system": "m-2", "patch": "newer\n", "run_id": "P", "overwrite": True}
    assert a.post("/v1/submissions", json=newer).status_code == 202  # replaced, as a single submission may
    preds = a.get("/v1/runs/P/predictions").json
    assert preds == [
        {"instance_id": "calc-mean-empty", "model_name_or_path": "m-1", "model_patch": PATCH_A},
        {"instance_id": "calc-median-even", "model_name_or_path": "P", "model_patch": ""},  # no system: the run
        {"instance_id": "notes-merge-greeting", "model_name_or_path": "m-2", "model_patch": "newer\n"},
    ]
    report = a.get("/v1/runs/P/report").json
    assert report["submitted_ids"] == [p["instance_id"] for p in preds]
    assert report["empty_patch_ids"] == ["calc-median-even"]
    # out as JSONL, read back as a predictions file, in again: the same predictions
    jsonl = "".join(json.dumps(p) + "\n" for p in preds)
    assert parse_predictions(jsonl) == preds
    assert a.post("/v1/submissions/batch?run_id=Q", json=parse_predictions(jsonl)).status_code == 202
    assert a.get("/v1/runs/Q/predictions").json == preds
    # the patches are the team's own: not another team's, not the public's, even for a public run
    b = Api(app.test_client(), new_key(svc, "beta"))
    run_id = a.get("/v1/runs/P").json["id"]
    a.client.patch(f"/v1/runs/{run_id}", json={"public": True}, headers={"Authorization": f"Bearer {a.key}"})
    assert b.get(f"/v1/runs/{run_id}").status_code == 200
    assert b.get(f"/v1/runs/{run_id}/predictions").status_code == 404
    assert Api(app.test_client(), None).get(f"/v1/runs/{run_id}/predictions").status_code == 401
    admin = Api(app.test_client(), new_key(svc, "host", admin=True))
    assert admin.get(f"/v1/runs/{run_id}/predictions").json == preds
    assert a.get("/v1/runs/nope/predictions").status_code == 404


@pytest.fixture
def served(app):
    """The app over real HTTP, for the command-line client."""
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=False)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_runs_export_and_submit_predictions_round_trip_through_the_cli(app, svc, served, tmp_path):
    key = new_key(svc, "alpha")

    def cli(*args):
        result = CliRunner().invoke(main, [*args, "--url", served, "--api-key", key], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.stdout

    given = tmp_path / "given.json"
    given.write_text(
        json.dumps(
            [
                {"instance_id": "calc-mean-empty", "model_name_or_path": "m", "model_patch": PATCH_A},
                {"instance_id": "calc-median-even", "model_name_or_path": "m", "model_patch": ""},
            ]
        )
    )
    cli("submit", "--predictions", str(given), "--run-id", "R1")
    out = tmp_path / "R1.jsonl"
    cli("runs", "export", "R1", "--out", str(out))
    assert read_predictions(out) == json.loads(given.read_text())
    assert out.read_text().count("\n") == 2  # JSONL: one prediction a line
    cli("submit", "--predictions", str(out), "--run-id", "R2")
    assert cli("runs", "export", "R2") == out.read_text()
    report = json.loads(cli("runs", "export", "R2", "--format", "report"))
    assert report["submitted_ids"] == ["calc-mean-empty", "calc-median-even"]
    assert report["empty_patch_ids"] == ["calc-median-even"]


@pytest.mark.parametrize(
    "target,local",
    [
        ("/runs/A", True),
        ("/submissions/x?y=1", True),
        ("//evil.example/", False),
        ("/\\evil.example/", False),
        ("https://evil.example/", False),
        ("/\tx", False),
        ("runs/A", False),
        ("", False),
    ],
)
def test_signing_in_returns_only_to_a_page_of_this_site(app, svc, target, local):
    key = new_key(svc, "portal-team")
    r = app.test_client().post("/login", query_string={"next": target}, data={"key": key})
    assert r.status_code == 302
    assert r.headers["Location"] == (target if local else "/me"), r.headers["Location"]


def test_hosts_see_how_many_grades_of_a_run_showed_tampering(svc, app):
    team = Api(app.test_client(), new_key(svc, "team-t"))
    host = Api(app.test_client(), new_key(svc, "host-t", admin=True))
    ids = submit_run(team, "tamper-run", {"calc-mean-empty": ["FAIL", "PASS", "FAIL"]})
    with svc.db.read() as s:
        rows = s.query(Submission).filter(Submission.status == "queued").all()
    for n, row in enumerate(rows):
        c = subs.claim(svc.db, row.id, row.job_id, "test-host", 60)
        tampered = ["a hidden canary test that must fail was reported as passed"] if n == 0 else []
        subs.finish(
            svc.db,
            c,
            Result(
                task_id=row.task_id,
                verdict=Verdict(ids[row.id]),
                explanation="set",
                tampered=tampered,
                provenance=Provenance(patch_sha256=row.patch_sha256, grader_version="t"),
            ),
        )
    own = team.get("/v1/runs/tamper-run").json
    assert "integrity" not in own
    assert host.get(f"/v1/runs/{own['id']}").json["integrity"] == {"tampered": 1, "audit_flagged": 0}
