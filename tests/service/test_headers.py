"""What every answer says to browsers and caches, and a run's links (issue 20).

Signed-in portal pages were cacheable (no Cache-Control: no-store) and could be framed by
any site; no answer said nosniff. A run's project_url and paper_url took `http:///` and
`https://[::1` and the portal rendered them as links. Through the Flask app for the
breadth of routes, and through the deployment as shipped (nginx in front of gunicorn),
which must pass the headers on as the app set them."""

from __future__ import annotations

import pytest
import requests

from helpers.proxy import PROXIED, nginx_in_front
from helpers.service import api_process, new_key

pytestmark = pytest.mark.service

ANONYMOUS = ["/leaderboard", "/tasks", "/login", "/docs", "/openapi.json", "/healthz", "/v1/leaderboard", "/nowhere"]


def _frames_refused(headers) -> None:
    assert headers["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize("path", ANONYMOUS)
def test_no_answer_can_be_framed_or_sniffed(app, path):
    r = app.test_client().get(path)
    _frames_refused(r.headers)


@pytest.mark.parametrize("path", ["/leaderboard", "/tasks", "/v1/leaderboard", "/openapi.json"])
def test_public_answers_to_anonymous_callers_stay_cacheable(app, path):
    # the honest reader: a public page nobody signed in to may be kept by a cache
    r = app.test_client().get(path)
    assert r.status_code == 200
    assert "no-store" not in r.headers.get("Cache-Control", "")
    assert {"Authorization", "Cookie"} <= set(r.vary)  # a cache must tell a signed-in request apart


def test_signed_in_pages_are_never_stored(app, svc):
    key = new_key(svc, "team-a")
    browser = app.test_client()
    signed_in = browser.post("/login", data={"key": key})
    assert signed_in.status_code == 302 and "no-store" in signed_in.headers["Cache-Control"]
    for path in ("/me", "/leaderboard", "/tasks", "/login"):  # the page names the team: private
        r = browser.get(path)
        assert r.status_code == 200, path
        assert r.headers["Cache-Control"] == "no-store", path
        _frames_refused(r.headers)
    out = browser.post("/logout")
    assert "no-store" in out.headers["Cache-Control"]


@pytest.mark.parametrize("path", ["/v1/account", "/v1/submissions", "/v1/runs", "/v1/leaderboard", "/v1/nowhere"])
def test_answers_to_a_key_are_never_stored(api, path):
    r = api.get(path)
    assert r.headers["Cache-Control"] == "no-store", (path, r.status_code)
    _frames_refused(r.headers)


def test_a_wrong_key_is_not_stored_either(app):
    r = app.test_client().get("/v1/account", headers={"Authorization": "Bearer grk_wrong"})
    assert r.status_code == 401 and r.headers["Cache-Control"] == "no-store"


# --- a run's links -------------------------------------------------------------------------------------
def _run(api) -> int:
    return api.post("/v1/submissions", json={"task_id": "calc-mean-empty", "patch": "", "run_id": "r1"}).status_code


BAD_URLS = [
    "http:///",
    "https://[::1",
    "https://[zz]/x",
    "http://a..b/",
    "http://-bad-.example/",
    "https://user:pw@example.org/",
    "https://example.org:99999/",
    "javascript:alert(1)",
    "https://exa mple.org/",
    "ftp://example.org/",
]


@pytest.mark.parametrize("field", ["project_url", "paper_url"])
@pytest.mark.parametrize("url", BAD_URLS)
def test_a_run_link_that_is_no_url_is_422_naming_the_field(api, field, url):
    assert _run(api) == 202
    r = api.client.patch("/v1/runs/r1", json={field: url}, headers=api._h(None))
    assert r.status_code == 422, (url, r.json)
    assert r.json["error"]["details"][0]["field"] == field


@pytest.mark.parametrize(
    "url", ["https://example.org/agent-1", "http://bücher.example/paper.pdf", "https://[2001:db8::1]:8443/x"]
)
def test_a_real_link_is_kept_and_shown(api, app, url):
    assert _run(api) == 202
    r = api.client.patch("/v1/runs/r1", json={"project_url": url, "public": True}, headers=api._h(None))
    assert r.status_code == 200 and r.json["project_url"] == url
    page = app.test_client().get(f"/runs/{r.json['id']}").get_data(as_text=True)
    assert f'href="{url}"' in page


# --- through the deployment -----------------------------------------------------------------------------
@pytest.fixture
def database_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path}/grader.db"


def test_the_headers_pass_through_the_proxy(database_url, redis_url, tmp_path, svc):
    key = new_key(svc, "team-a")
    with api_process(database_url, redis_url, tmp_path, **PROXIED) as api, nginx_in_front(api) as url:
        for base in (api, url):
            public = requests.get(f"{base}/leaderboard", timeout=30)
            _frames_refused(public.headers)
            assert "no-store" not in public.headers.get("Cache-Control", "")
            private = requests.get(f"{base}/v1/account", headers={"Authorization": f"Bearer {key}"}, timeout=30)
            assert private.status_code == 200 and private.headers["Cache-Control"] == "no-store"
            _frames_refused(private.headers)
