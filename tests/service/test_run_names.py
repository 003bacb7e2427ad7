"""Run names against run ids (issue 20), on SQLite and PostgreSQL.

A team that named its run after another team's (public) run id got the other team's run
when it asked for its own by name, and could not delete its own by name; names were not
NFC-normalised (two runs that look alike), and a name with `/` was reachable only by id.
Now a team's own name wins for that team, names shaped like an id are refused, and a name
is NFC and one segment of a URL path (grader/names.py), refused with a 422 that says why."""

from __future__ import annotations

import secrets
import unicodedata
from urllib.parse import quote

import pytest
import requests

from grader.store.models import Run
from helpers.service import Api, api_process, new_key

pytestmark = pytest.mark.service


def _submit(api: Api, run: str, n: int = 0, *, query: bool = False):
    item = {"task_id": "calc-mean-empty", "patch": f"x{n}{secrets.token_hex(4)}"}
    if query:
        return api.post(f"/v1/submissions/batch?run_id={quote(run)}", json=[item])
    return api.post("/v1/submissions", json={**item, "run_id": run, "trial": n})  # one attempt per trial of a run


def _run_of(svc, team: str, name: str) -> Run:
    with svc.db.read() as s:
        from grader.store.models import Team

        return s.query(Run).join(Team).filter(Team.name == team, Run.name == name).one()


@pytest.fixture
def two(app, svc):
    return Api(app.test_client(), new_key(svc, "team-a")), Api(app.test_client(), new_key(svc, "team-b"))


def test_a_name_shaped_like_an_id_is_refused(two):
    a, b = two
    assert _submit(a, "public-run").status_code == 202
    published = a.client.patch("/v1/runs/public-run", json={"public": True}, headers=a._h(None))
    victim_id = published.json["id"]
    for how in (False, True):  # the item's field, and the batch's ?run_id=
        r = _submit(b, victim_id, query=how)
        assert r.status_code == 422, r.json
        assert "id" in (r.json.get("error") or r.json["items"][0]["error"])["message"]
    assert b.get(f"/v1/runs/{victim_id}").json["team"] == "team-a"  # the public run, by its id, as before


def test_a_teams_own_name_wins_over_another_teams_id(two, svc):
    """A run named before names shaped like ids were refused: its team reaches it by that
    name, reads and deletes its own; the other team's run is untouched."""
    a, b = two
    assert _submit(a, "public-run").status_code == 202
    victim_id = a.client.patch("/v1/runs/public-run", json={"public": True}, headers=a._h(None)).json["id"]
    assert _submit(b, "mine").status_code == 202
    with svc.db.write() as s:  # what an older service let team-b call its run
        s.query(Run).filter(Run.id == _run_of(svc, "team-b", "mine").id).update({"name": victim_id})
        from grader.store.models import Submission

        s.query(Submission).filter(Submission.run_id == "mine").update({"run_id": victim_id})
    own = b.get(f"/v1/runs/{victim_id}")
    assert own.status_code == 200 and own.json["team"] == "team-b" and own.json["name"] == victim_id
    deleted = b.delete(f"/v1/runs/{victim_id}")
    assert deleted.status_code == 200 and deleted.json["deleted"]["team"] == "team-b"
    assert a.get(f"/v1/runs/{victim_id}").json["team"] == "team-a"  # still there, still public
    assert b.get(f"/v1/runs/{victim_id}").json["team"] == "team-a"  # now by its id, read-only
    assert b.delete(f"/v1/runs/{victim_id}").status_code == 404  # another team's run: not b's to delete


BAD = ["a/b", "../up", "..", ".", "a?b", "a#b", "50%", "two words", "tab\there", "back\\slash", "", "0123456789abcdef"]


@pytest.mark.parametrize("name", BAD)
@pytest.mark.parametrize("query", [False, True])
def test_a_name_no_url_path_can_carry_is_422_saying_why(api, name, query):
    r = _submit(api, name, query=query)
    if query and not name:
        assert r.status_code == 202  # ?run_id= empty: no run, as before
        return
    assert r.status_code == 422, (name, r.json)
    error = r.json.get("error") if not query or "error" in r.json else r.json["items"][0]["error"]
    assert "run_id" in (error.get("details") or [{"field": "run_id"}])[0]["field"]
    assert "run name" in error["message"] or "run_id" in error["message"]


def test_names_are_nfc_one_run_for_both_spellings(api):
    decomposed, composed = "cafe\u0301-run", "caf\u00e9-run"
    assert unicodedata.normalize("NFC", decomposed) == composed
    first, second = _submit(api, decomposed, 1), _submit(api, composed, 2)
    assert first.status_code == 202 and second.status_code == 202
    assert first.json["run_id"] == second.json["run_id"] == composed
    runs = [r for r in api.get("/v1/runs").json["items"] if r["name"].startswith("caf")]
    assert len(runs) == 1 and runs[0]["name"] == composed
    for spelling in (decomposed, composed):
        shown = api.get(f"/v1/runs/{quote(spelling)}")
        assert shown.status_code == 200 and shown.json["submissions"] == 2
    listed = api.get(f"/v1/submissions?run_id={quote(decomposed)}").json["items"]
    assert len(listed) == 2


HONEST = ["agent-1", "gpt-4o@2024-05-13", "モデル.v2", "run_3+tools", "a:b=c,d~e", "x" * 200]


def test_honest_names_are_reachable_by_name_through_gunicorn(database_url, redis_url, tmp_path, svc):
    key = new_key(svc, "team-a")
    auth = {"Authorization": f"Bearer {key}"}
    with api_process(database_url, redis_url, tmp_path) as url:
        for n, name in enumerate(HONEST):
            r = requests.post(
                f"{url}/v1/submissions",
                json={"task_id": "calc-mean-empty", "patch": f"h{n}", "run_id": name},
                headers=auth,
                timeout=60,
            )
            assert r.status_code == 202, (name, r.text)
            shown = requests.get(f"{url}/v1/runs/{quote(name)}", headers=auth, timeout=60)
            assert shown.status_code == 200 and shown.json()["name"] == name, name
            page = requests.get(f"{url}/runs/{quote(name)}", headers=auth, timeout=60)
            assert page.status_code in (200, 404)  # the portal's page needs a signed-in browser for a private run
            gone = requests.delete(f"{url}/v1/runs/{quote(name)}", headers=auth, timeout=60)
            assert gone.status_code == 200 and gone.json()["deleted"]["name"] == name
