"""The host's pages of the portal (issue 22), on SQLite and PostgreSQL: only an admin key
gets them; the runs filtered by flags with the host's actions (hide, approve a review,
re-grade ERRORs) changing what others see; teams and keys (a key shown once, several keys,
one revoked, quotas). Verdicts are set through the store's own moves."""

from __future__ import annotations

import re

import pytest

from grader.store.models import Submission, Team
from helpers.service import Api, finish_queued_as, new_key

pytestmark = pytest.mark.service
TASK = "calc-mean-empty"


def browser_for(app, key: str):
    b = app.test_client()
    assert b.post("/login", data={"key": key}).status_code == 302
    return b


def test_the_host_filters_runs_and_hides_approves_and_regrades(app, svc):
    team = Api(app.test_client(), new_key(svc, "alpha"))
    other = Api(app.test_client(), new_key(svc, "beta"))
    host_key = new_key(svc, "host", admin=True)
    assert app.test_client().get("/host").status_code == 302  # signed out: sign in first
    assert browser_for(app, team.key).get("/host").status_code == 403
    host = browser_for(app, host_key)
    suites = host.get("/host/suites").get_data(as_text=True)
    assert re.search(r'<tr data-suite="examples"><td>examples</td><td class="num">10</td>', suites)
    assert 'id="refused-none"' in suites and browser_for(app, team.key).get("/host/suites").status_code == 403
    assert team.post("/v1/submissions", json={"task_id": TASK, "patch": "p", "run_id": "shown"}).status_code == 202
    finish_queued_as(svc, "PASS")
    assert team.post("/v1/submissions", json={"task_id": TASK, "patch": "e", "run_id": "broken"}).status_code == 202
    finish_queued_as(svc, "ERROR")
    team.client.patch("/v1/runs/shown", json={"public": True}, headers={"Authorization": f"Bearer {team.key}"})
    shown_id = team.get("/v1/runs/shown").json["id"]
    assert f'data-run="{shown_id}"' in app.test_client().get("/leaderboard").get_data(as_text=True)
    page = host.get("/host?flag=errors").get_data(as_text=True)
    assert re.findall(r'data-name="([^"]+)"', page) == ["broken"] and "re-grade its 1 ERROR(s)" in page
    # hide: off the board for everyone, off another team's list; its own team still sees it
    r = host.post(f"/host/runs/{shown_id}", data={"action": "hide", "back": "/host?flag=public"})
    assert r.status_code == 302 and r.headers["Location"].endswith("/host?flag=public")
    assert f'data-run="{shown_id}"' not in app.test_client().get("/leaderboard").get_data(as_text=True)
    assert all(x["name"] != "shown" for x in other.get("/v1/runs").json["items"])
    assert other.get(f"/v1/runs/{shown_id}").status_code == 404
    assert team.get("/v1/runs/shown").json["hidden"] is True
    assert re.findall(r'data-name="([^"]+)"', host.get("/host?flag=hidden").get_data(as_text=True)) == ["shown"]
    # re-grade the ERRORs: sent again as they were, replacing the ERROR in the run
    broken_id = team.get("/v1/runs/broken").json["id"]
    r = host.post(f"/host/runs/{broken_id}", data={"action": "regrade"})
    assert r.status_code == 302
    with svc.db.read() as s:
        rows = s.query(Submission).filter(Submission.patch == b"e").order_by(Submission.id).all()
        assert [(x.verdict, x.run_id) for x in rows] == [("ERROR", None), (None, "broken")]
    assert host.post(f"/host/runs/{broken_id}", data={"action": "explode"}).status_code == 422
    # the form from another site changes nothing
    r = host.post(f"/host/runs/{shown_id}", data={"action": "unhide"}, headers={"Origin": "http://evil.example"})
    assert r.status_code == 403 and team.get("/v1/runs/shown").json["hidden"] is True


def test_the_host_makes_teams_and_keys_revokes_one_and_sets_quotas(app, svc):
    host = browser_for(app, new_key(svc, "host", admin=True))
    bad = host.post("/host/teams", data={"name": "no spaces", "daily_quota": "x"})
    page = bad.get_data(as_text=True)
    assert bad.status_code == 422 and 'id="name-error"' in page and 'id="daily_quota-error"' in page
    r = host.post("/host/teams", data={"name": "gamma", "daily_quota": "3", "queued_quota": ""})
    first = re.search(r'<code id="key-value">([^<]+)</code>', r.get_data(as_text=True)).group(1)
    assert r.status_code == 200 and first.startswith("grk_")
    assert first not in host.get("/host/teams").get_data(as_text=True)  # shown once: the list has its prefix only
    r = host.post("/host/teams/gamma/keys")
    second = re.search(r'<code id="key-value">([^<]+)</code>', r.get_data(as_text=True)).group(1)
    for key in (first, second):
        assert Api(app.test_client(), key).get("/v1/account").status_code == 200
    with svc.db.read() as s:
        team = s.query(Team).filter_by(name="gamma").one()
        assert team.daily_quota == 3 and team.queued_quota is None
        key_id = sorted(team.keys, key=lambda k: k.id)[0].id
    assert host.post(f"/host/keys/{key_id}/revoke").status_code == 302
    assert Api(app.test_client(), first).get("/v1/account").status_code == 401
    assert Api(app.test_client(), second).get("/v1/account").status_code == 200
    assert host.post(f"/host/keys/{key_id}/revoke").status_code == 404
    assert host.post(f"/host/keys/{2**31}/revoke").status_code == 404  # past PostgreSQL's integer
    assert host.post("/host/teams/gamma/quotas", data={"daily_quota": "", "queued_quota": "7"}).status_code == 302
    with svc.db.read() as s:
        team = s.query(Team).filter_by(name="gamma").one()
        assert (team.daily_quota, team.queued_quota) == (None, 7)
    assert host.post("/host/teams/gamma/quotas", data={"daily_quota": "-1"}).status_code == 422


def test_the_same_through_the_admin_api(app, svc):
    team = Api(app.test_client(), new_key(svc, "alpha"))
    host = Api(app.test_client(), new_key(svc, "host", admin=True))
    second = new_key(svc, "alpha")
    h = {"Authorization": f"Bearer {host.key}"}
    assert (
        team.client.patch("/v1/admin/teams/alpha", json={}, headers={"Authorization": f"Bearer {team.key}"}).status_code
        == 403
    )
    r = host.client.patch("/v1/admin/teams/alpha", json={"daily_quota": 5}, headers=h)
    assert r.status_code == 200 and r.json == {"name": "alpha", "daily_quota": 5, "queued_quota": None}
    assert host.client.patch("/v1/admin/teams/alpha", json={"daily_quota": -1}, headers=h).status_code == 422
    assert host.client.patch("/v1/admin/teams/nobody", json={}, headers=h).status_code == 404
    keys = host.get("/v1/admin/teams/alpha/keys").json["items"]
    assert [k["prefix"] for k in keys] == [team.key[:12], second[:12]] and all(k["revoked_at"] is None for k in keys)
    gone = host.delete(f"/v1/admin/keys/{keys[0]['id']}")
    assert gone.status_code == 200 and gone.json["revoked_at"]
    assert team.get("/v1/account").status_code == 401
    assert Api(app.test_client(), second).get("/v1/account").status_code == 200
    assert host.delete(f"/v1/admin/keys/{keys[0]['id']}").status_code == 404
    # ids that can name no key are a miss on every database, never its error (PostgreSQL's
    # integer is 32 bits: 2**31 was its "integer out of range", answered 503)
    for nobody in (str(2**31), str(2**31 - 1), "9" * 18, "\u00b2", "1" * 5000, "-1"):
        r = host.delete(f"/v1/admin/keys/{nobody}")
        assert r.status_code == 404 and r.json["error"]["code"] == "not_found", (nobody, r.status_code)
    # re-grade a run's ERRORs
    alpha = Api(app.test_client(), second)
    assert alpha.post("/v1/submissions", json={"task_id": TASK, "patch": "e", "run_id": "broken"}).status_code == 202
    finish_queued_as(svc, "ERROR")
    r = host.post("/v1/admin/runs/" + alpha.get("/v1/runs/broken").json["id"] + "/regrade")
    assert r.status_code == 200 and (r.json["sent"], r.json["refused"]) == (1, 0)
    assert alpha.get("/v1/runs/broken").json["pending"] == 1 and alpha.get("/v1/runs/broken").json["errors"] == 0
