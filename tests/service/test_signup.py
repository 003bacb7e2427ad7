"""Self-service sign-up (grader/portal/signup.py): closed by default; where the host opens
it, a team and its first key made on /signup (the key shown once, working at once on the
API, with the sign-up quotas), a bad or taken name refused on the page naming the field,
the per-address and per-day bounds answered 429 with nothing made, a cross-site form
refused. Real Redis (the counts) and the real store, SQLite and PostgreSQL."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import func, select

from grader.app import create_app
from grader.store.models import Team
from helpers.service import make_service, new_key

pytestmark = pytest.mark.service


@pytest.fixture
def service_options():
    return {"signup": "open", "signup_per_address": 2, "signup_per_day": 3}


def _teams(svc) -> int:
    with svc.db.read() as s:
        return s.scalar(select(func.count()).select_from(Team))


def _key(page: str) -> str:
    found = re.search(r'<code id="key-value">(grk_[^<]+)</code>', page)
    assert found, page
    return found.group(1)


def test_closed_by_default_and_nothing_is_made(database_url, redis_url, tmp_path):
    svc = make_service(database_url, redis_url)
    try:
        client = create_app(service=svc, migrate=False).test_client()
        before = _teams(svc)
        assert "signup-link" not in client.get("/login").get_data(as_text=True)
        for r in (client.get("/signup"), client.post("/signup", data={"name": "newcomers"})):
            assert r.status_code == 404 and "ask its host" in r.get_data(as_text=True)
        assert _teams(svc) == before
    finally:
        svc.close()


def test_a_team_signs_up_and_its_key_works_at_once(app, svc):
    client = app.test_client()
    assert "signup-link" in client.get("/login").get_data(as_text=True)
    form = client.get("/signup")
    assert form.status_code == 200 and 'id="signup-form"' in form.get_data(as_text=True)
    made = client.post("/signup", data={"name": "newcomers"})
    assert made.status_code == 201, made.get_data(as_text=True)
    key = _key(made.get_data(as_text=True))
    account = app.test_client().get("/v1/account", headers={"Authorization": f"Bearer {key}"})
    assert account.status_code == 200 and account.json["team"] == "newcomers"
    with svc.db.read() as s:
        team = s.scalar(select(Team).where(Team.name == "newcomers"))
        assert (team.admin, team.daily_quota, team.queued_quota) == (False, 1_000, 200)
    again = client.get("/signup").get_data(as_text=True)
    assert key not in again  # shown on that answer only


@pytest.mark.parametrize(
    "name, status, says",
    [
        ("", 422, "A team&#39;s name is 1 to 100 letters"),
        ("bad name!", 422, "A team&#39;s name is 1 to 100 letters"),
        ("x" * 101, 422, "A team&#39;s name is 1 to 100 letters"),
        ("taken", 422, "There is a team &#39;taken&#39; already"),
    ],
)
def test_a_bad_or_taken_name_is_refused_on_the_page(app, svc, name, status, says):
    new_key(svc, "taken")
    before = _teams(svc)
    r = app.test_client().post("/signup", data={"name": name})
    assert r.status_code == status and says in r.get_data(as_text=True)
    assert 'aria-invalid="true"' in r.get_data(as_text=True) and _teams(svc) == before


def test_one_address_and_the_whole_service_are_bounded_a_day(app, svc):
    client = app.test_client()
    assert client.post("/signup", data={"name": "a1"}).status_code == 201
    assert client.post("/signup", data={"name": "a2"}).status_code == 201
    for n in range(6):  # the address's bound is 2; hammering it, or naming other addresses itself, spends nothing
        third = client.post("/signup", data={"name": f"a3-{n}"}, headers={"X-Forwarded-For": f"10.1.1.{n}"})
        assert third.status_code == 429 and "This address has signed up 2 teams today" in third.get_data(as_text=True)
    other = app.test_client()
    elsewhere = other.post("/signup", data={"name": "b1"}, environ_base={"REMOTE_ADDR": "10.0.0.9"})
    assert elsewhere.status_code == 201  # the service's third of the day
    last = other.post("/signup", data={"name": "b2"}, environ_base={"REMOTE_ADDR": "10.0.0.10"})
    assert last.status_code == 429 and "all the sign-ups it takes today" in last.get_data(as_text=True)
    with svc.db.read() as s:
        names = set(s.scalars(select(Team.name)))
    assert {"a1", "a2", "b1"} <= names and not {"b2"} & names and not any(n.startswith("a3") for n in names)


def test_a_cross_site_sign_up_is_refused(app, svc):
    r = app.test_client().post(
        "/signup", data={"name": "forged"}, headers={"Origin": "https://evil.example", "Host": "localhost"}
    )
    assert r.status_code == 403
    with svc.db.read() as s:
        assert s.scalar(select(Team).where(Team.name == "forged")) is None
