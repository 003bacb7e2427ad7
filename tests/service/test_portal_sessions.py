"""Portal sessions (issue 11): a form sent from another site changes nothing (sign-in
included: a page elsewhere must not sign a browser in as the attacker's team), and signing
out ends the session on the server, so a copy of the cookie taken before is signed out too."""

from __future__ import annotations

import pytest

from helpers.service import new_key

pytestmark = pytest.mark.service


@pytest.fixture
def portal(app, svc):
    return app, svc


def _signed_in_as(client) -> str | None:
    r = client.get("/me")
    if r.status_code == 302:
        return None
    assert r.status_code == 200
    text = r.get_data(as_text=True)
    start = text.index('id="signed-in">') + len('id="signed-in">')
    return text[start : text.index("<", start)]


def test_signing_out_ends_the_session_on_the_server(portal):
    app, svc = portal
    key = new_key(svc, "team-a")
    browser = app.test_client()
    assert browser.post("/login", data={"key": key}).status_code == 302
    assert _signed_in_as(browser) == "team-a"
    stolen = browser.get_cookie("session").value
    assert browser.post("/logout").status_code == 302
    assert _signed_in_as(browser) is None
    replay = app.test_client()
    replay.set_cookie("session", stolen)
    assert _signed_in_as(replay) is None
    # a second sign-in is a new session; ending it leaves nothing of the first alive either
    assert browser.post("/login", data={"key": key}).status_code == 302
    assert _signed_in_as(browser) == "team-a" and _signed_in_as(replay) is None


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        {"Referer": "http://evil.example/page"},
        {"Origin": "http://localhost.evil.example"},
    ],
)
def test_a_form_from_another_site_is_refused(portal, headers):
    app, svc = portal
    key = new_key(svc, "attacker")
    victim = app.test_client()
    r = victim.post("/login", data={"key": key}, headers=headers)
    assert r.status_code == 403 and "another site" in r.get_data(as_text=True)
    assert _signed_in_as(victim) is None
    assert victim.post("/login", data={"key": key}, headers={"Origin": "http://localhost"}).status_code == 302
    assert victim.post("/logout", headers=headers).status_code == 403
    assert _signed_in_as(victim) == "attacker"
