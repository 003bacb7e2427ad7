"""Portal sessions in a real browser (issue 11): a page elsewhere cannot sign headless
Chromium in as the attacker's team. The rest of the portal's session rules, through
Flask's test client, are tests/service/test_portal_sessions.py."""

from __future__ import annotations

import http.server
import threading

import pytest
from werkzeug.serving import make_server

from grader.app import create_app
from helpers.service import make_service, new_key

pytestmark = pytest.mark.service


@pytest.mark.browser
def test_a_page_elsewhere_cannot_sign_a_browser_in(redis_url, tmp_path):
    """Headless Chromium opens a page on another origin that submits a sign-in form to the
    portal with the attacker's key; the browser must not be signed in. (The check is the
    portal's; SQLite alone.)"""
    database_url = f"sqlite:///{tmp_path}/grader.db"
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from helpers.browser import chromium

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
    b = chromium()
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
