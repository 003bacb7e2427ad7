"""Portal sessions (issue 11): a form sent from another site changes nothing (sign-in
included: a page elsewhere must not sign a browser in as the attacker's team), and signing
out ends the session on the server, so a copy of the cookie taken before is signed out too."""

from __future__ import annotations

import http.server
import threading

import pytest
from werkzeug.serving import make_server

from grader.app import create_app
from service_helpers import make_service, new_key

pytestmark = pytest.mark.service


@pytest.fixture
def portal(database_url, redis_url):
    svc = make_service(database_url, redis_url)
    app = create_app(service=svc, migrate=False)
    yield app, svc
    svc.close()


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


@pytest.mark.browser
def test_a_page_elsewhere_cannot_sign_a_browser_in(redis_url, tmp_path):
    """Headless Chromium opens a page on another origin that submits a sign-in form to the
    portal with the attacker's key; the browser must not be signed in. (The check is the
    portal's; SQLite alone.)"""
    database_url = f"sqlite:///{tmp_path}/grader.db"
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from test_portal_browser import _browser

    svc = make_service(database_url, redis_url)
    key = new_key(svc, "attacker")
    server = make_server("127.0.0.1", 0, create_app(service=svc, migrate=False), threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    site = f"http://127.0.0.1:{server.server_port}"
    page = (
        f'<html><body><form method="post" action="{site}/login"><input name="key" value="{key}"></form>'
        "<script>document.forms[0].submit()</script></body></html>"
    ).encode()

    class Evil(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args):
            pass

    evil = http.server.HTTPServer(("127.0.0.1", 0), Evil)
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    b = _browser()
    try:
        b.get(f"http://localhost:{evil.server_address[1]}/")
        WebDriverWait(b, 30).until(lambda d: d.current_url.startswith(site))  # the form went
        assert "another site" in b.find_element(By.TAG_NAME, "body").text
        b.get(f"{site}/me")
        assert "/login" in b.current_url
        assert b.find_elements(By.ID, "signed-in") == []
        # the same sign-in from the portal's own page works
        b.find_element(By.ID, "key").send_keys(key)
        b.find_element(By.ID, "login-button").click()
        assert b.find_element(By.ID, "signed-in").text == "attacker"
    finally:
        b.quit()
        evil.shutdown()
        server.shutdown()
        svc.close()
