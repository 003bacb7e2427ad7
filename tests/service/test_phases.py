"""Challenge phases (issue 22) through the API and the portal, on SQLite and PostgreSQL:
the host sets a phase up; a submission outside its window is refused with the reason, past
its limits too; a run belongs to the phase it was made for; a phase has a board of its own;
a private phase's per-task results never reach its participants (submission, listing, run,
report, logs, comparison, the portal's pages), its aggregate only once it has ended and the
host reveals it; a phase whose host reviews runs first keeps a run asking to be public off
its board until the host verifies it. Verdicts are set through the store's own moves."""

from __future__ import annotations

import datetime as dt
import html

import pytest

from helpers.service import Api, finish_queued_as, new_key

pytestmark = pytest.mark.service
TASK, OTHER = "calc-mean-empty", "calc-median-even"


def at(days: float) -> str:
    return (dt.datetime.now(dt.UTC) + dt.timedelta(days=days)).isoformat()


def finish(svc, verdict: str = "PASS") -> None:
    finish_queued_as(
        svc, verdict, "set by the test: 1 of 2 required test(s) did not pass: tests/test_mean.py::test_empty"
    )


def main(page: str) -> str:
    """A portal page's content, past its style sheet (which names every verdict's class)."""
    return page[page.index("<main>") :]


@pytest.fixture
def host(app, svc) -> Api:
    return Api(app.test_client(), new_key(svc, "host", admin=True))


def put(host: Api, slug: str, **fields):
    return host.client.put(f"/v1/admin/phases/{slug}", json=fields, headers={"Authorization": f"Bearer {host.key}"})


def test_the_host_sets_up_phases_and_their_windows_limits_and_runs_hold(app, svc, host):
    team = Api(app.test_client(), new_key(svc, "alpha"))
    anon = Api(app.test_client(), None)
    r = put(host, "dev", name="Dev", suite="examples", daily_limit=2, total_limit=3)
    assert r.status_code == 201 and r.json["open"]
    assert put(host, "dev", description="the public dev phase").status_code == 200
    assert (
        team.client.put("/v1/admin/phases/x", json={}, headers={"Authorization": f"Bearer {team.key}"}).status_code
        == 403
    )
    bad = put(host, "x", name="X", suite="nope")
    assert bad.status_code == 422 and "the suites are: examples" in bad.json["error"]["message"]
    assert put(host, "x", name="X", suite="examples", starts_at=at(2), ends_at=at(1)).status_code == 422
    assert put(host, "later", name="Later", suite="examples", starts_at=at(1)).status_code == 201
    assert put(host, "over", name="Over", suite="examples", starts_at=at(-3), ends_at=at(-1)).status_code == 201
    listed = anon.get("/v1/phases").json["items"]
    assert {p["slug"]: p["open"] for p in listed} == {"dev": True, "later": False, "over": False}

    def send(phase, task=TASK, run="r-" + "x", **kw):
        return team.post(
            "/v1/submissions",
            json={"task_id": task, "patch": kw.pop("patch", "p"), "phase": phase, "run_id": run, **kw},
        )

    # outside the window: refused with the reason, nothing stored
    before, after = send("later", run="a"), send("over", run="b")
    assert before.status_code == 403 and "opens at" in before.json["error"]["message"]
    assert after.status_code == 403 and after.json["error"]["code"] == "phase_closed"
    assert (
        "ended at" in after.json["error"]["message"] and "takes no more submissions" in after.json["error"]["message"]
    )
    unknown = send("nope", run="c")
    assert unknown.status_code == 422 and unknown.json["error"]["code"] == "unknown_phase"
    # the limits: two a day
    assert send("dev", run="d", trial=0).status_code == 202
    assert send("dev", run="d", trial=1).status_code == 202
    third = send("dev", run="d", trial=2)
    assert (
        third.status_code == 429 and "2 submissions a day to phase 'dev' are used up" in third.json["error"]["message"]
    )
    # a run belongs to the phase it was made for
    moved = team.post("/v1/submissions", json={"task_id": OTHER, "patch": "q", "run_id": "d"})
    assert moved.status_code == 409 and moved.json["error"]["code"] == "run_phase"
    assert "was made for phase 'dev'" in moved.json["error"]["message"]
    # the host is bound by neither the window nor the limits (its baselines)
    assert (
        host.post(
            "/v1/submissions", json={"task_id": TASK, "patch": "h", "phase": "over", "run_id": "base"}
        ).status_code
        == 202
    )
    # a phase's board is its own; the open board holds the runs of no phase
    finish(svc)
    team.client.patch("/v1/runs/d", json={"public": True}, headers={"Authorization": f"Bearer {team.key}"})
    assert [x["name"] for x in anon.get("/v1/leaderboard?phase=dev").json["items"]] == ["d"]
    assert anon.get("/v1/leaderboard").json["items"] == []
    r = anon.get("/v1/leaderboard?phase=nope")
    assert r.status_code == 422
    assert "there is no phase 'nope'; the phases are: dev, over, later" in r.json["error"]["message"]
    # the how-to pages say the window, the limits, how to submit and the scoring
    page = html.unescape(anon.get("/phases/dev").get_data(as_text=True))
    for said in (
        "Open now.",
        "2 submissions a UTC day per team",
        "3 submissions in all",
        "--phase dev",
        "whole task set",
    ):
        assert said in page, said
    assert "ended at" in html.unescape(anon.get("/phases/over").get_data(as_text=True))
    assert "grader tasks checkout" in anon.get("/suites/examples").get_data(as_text=True)
    assert anon.get("/phases/nope").status_code == 404


def test_a_private_phase_shows_its_team_no_per_task_result(app, svc, host):
    team = Api(app.test_client(), new_key(svc, "alpha"))
    anon = Api(app.test_client(), None)
    assert put(host, "test", name="Test", suite="examples", private=True).status_code == 201
    sent = team.post("/v1/submissions", json={"task_id": TASK, "patch": "p", "phase": "test", "run_id": "t"})
    assert sent.status_code == 202
    finish(svc, "FAIL")
    sid = sent.json["id"]
    got = team.get(f"/v1/submissions/{sid}").json
    assert got["status"] == "done" and got["verdict"] is None and got["result"] is None and got["feedback"] == "private"
    assert "private split" in got["withheld"]
    assert all(x["verdict"] is None for x in team.get("/v1/submissions").json["items"])
    view = team.get("/v1/runs/t").json
    assert view["metrics"] == {} and "private split" in view["withheld"]
    for path in ("/v1/runs/t/report", "/v1/runs/t/logs", "/v1/runs/t/predictions", "/v1/compare?a=t&b=t"):
        r = team.get(path)
        assert r.status_code == 403 and r.json["error"]["code"] == "private_phase", path
    # the host sees everything
    assert host.get(f"/v1/submissions/{sid}").json["verdict"] == "FAIL"
    # the portal: the submission page and the run page show no verdict, no per-task grid
    browser = app.test_client()
    assert browser.post("/login", data={"key": team.key}).status_code == 302
    page = main(browser.get(f"/submissions/{sid}").get_data(as_text=True))
    assert "FAIL" not in page and "test_empty" not in page and 'id="withheld"' in page
    assert browser.get("/compare?a=t&b=t").status_code == 403  # per task, by comparison: never
    page = main(browser.get("/runs/t").get_data(as_text=True))
    assert 'id="withheld"' in page and 'id="per-task"' not in page and 'class="cell' not in page
    # public and on the phase's board: nothing of it shows before the end
    team.client.patch("/v1/runs/t", json={"public": True}, headers={"Authorization": f"Bearer {team.key}"})
    board = anon.get("/v1/leaderboard?phase=test").json["items"]
    assert [x["metrics"] for x in board] == [{}]
    # ended, and revealed by the host: the aggregate only, never the per-task table
    assert put(host, "test", starts_at=at(-2), ends_at=at(-1)).status_code == 200
    assert anon.get("/v1/leaderboard?phase=test").json["items"][0]["metrics"] == {}
    assert put(host, "test", reveal=True).status_code == 200
    row = anon.get("/v1/leaderboard?phase=test&limit=100").json["items"][0]
    assert row["metrics"]["task_set"]["resolved"]["numerator"] == 0 and "per_task" not in row["metrics"]
    assert "breakdowns" not in row["metrics"] and "per_task" not in row["metrics"]["task_set"]
    view = team.get("/v1/runs/t").json
    assert "per_task" not in view["metrics"] and view["metrics"]["resolved"]["denominator"] == 1
    assert team.get(f"/v1/submissions/{sid}").json["verdict"] is None  # per task: never


def test_a_phase_whose_host_reviews_runs_keeps_them_off_its_board_until_verified(app, svc, host):
    team = Api(app.test_client(), new_key(svc, "alpha"))
    anon = Api(app.test_client(), None)
    assert put(host, "rev", name="Reviewed", suite="examples", auto_publish=False).status_code == 201
    assert (
        team.post("/v1/submissions", json={"task_id": TASK, "patch": "p", "phase": "rev", "run_id": "r"}).status_code
        == 202
    )
    finish(svc)
    auth = {"Authorization": f"Bearer {team.key}"}
    asked = team.client.patch("/v1/runs/r", json={"public": True, "method": "M"}, headers=auth).json
    assert asked["public"] is False and asked["review_requested_at"] and asked["locked"]
    assert anon.get("/v1/leaderboard?phase=rev").json["items"] == []
    # locked while reviewed: what the host reviews does not change meanwhile
    more = team.post("/v1/submissions", json={"task_id": OTHER, "patch": "q", "phase": "rev", "run_id": "r"})
    assert more.status_code == 409 and more.json["error"]["code"] == "run_locked"
    run_id = asked["id"]
    verified = host.client.patch(
        f"/v1/runs/{run_id}", json={"verified": True}, headers={"Authorization": f"Bearer {host.key}"}
    ).json
    assert verified["public"] and verified["verified"] and verified["review_requested_at"] is None
    assert [x["name"] for x in anon.get("/v1/leaderboard?phase=rev").json["items"]] == ["r"]
