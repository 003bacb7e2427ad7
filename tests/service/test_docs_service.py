"""/docs as the service serves it: parameters are shown with their types and allowed
values, each operation says who may call it, the refusals shown are the service's own
words, and the page carries the portal's navigation. That every operation has an example
request and response the documented schemas accept is tests/unit/test_docs.py."""

from __future__ import annotations

import html
import json
import re

import pytest

from grader.api.examples import ERRORS, EXAMPLES
from grader.api.openapi import ACCESS, PORTAL_PAGES, document
from helpers.service import Api, new_key

DOC = document()


OPERATIONS = [(path, method) for path, ops in DOC["paths"].items() for method in ops]


@pytest.fixture
def database_url(tmp_path) -> str:
    """SQLite alone here."""
    return f"sqlite:///{tmp_path}/grader.db"


def sections(page: str) -> dict[str, str]:
    """Each operation's part of the page, as text, by its anchor."""
    parts = re.split(r'(?=<div class="op" id=")', page)
    out = {}
    for part in parts[1:]:
        anchor = re.match(r'<div class="op" id="([^"]+)"', part).group(1)
        out[anchor] = html.unescape(re.sub(r"<[^>]+>", " ", part))
    return out


@pytest.mark.service
def test_the_docs_page_shows_every_operation_with_its_examples_types_and_access(app):
    page = app.test_client().get("/docs")
    assert page.status_code == 200 and page.mimetype == "text/html"
    body = page.get_data(as_text=True)
    parts = sections(body)
    for path, method in OPERATIONS:
        op = DOC["paths"][path][method]
        text = " ".join(parts[f"{method}-{path}"].split())
        assert f"{method.upper()} {path}" in text and ACCESS[op["x-access"]] in text
        for p in op.get("parameters", []):
            assert p["name"] in text
            schema = p["schema"]
            if "type" in schema:
                assert schema["type"] in text, (path, p["name"])
            for value in schema.get("enum", []):
                assert json.dumps(value) in text, (path, p["name"], value)
            if "maximum" in schema:
                assert f"{schema.get('minimum')} to {schema['maximum']}" in text
        ex = EXAMPLES[(method, path)]
        assert ex["path"] in text and f"Example response: {ex['status']}" in text
        if "response" in ex:  # the JSON shown is the example itself
            shown = re.search(r'<pre class="response">(.*?)</pre>', body[body.index(f'id="{method}-{path}"') :], re.S)
            assert json.loads(html.unescape(shown.group(1))) == ex["response"]
        if "body" in ex:
            assert '"' + next(iter(ex["body"])) + '"' in text
        if op["x-access"] == "none":
            assert "Authorization" not in parts[f"{method}-{path}"]
        else:
            assert "Authorization: Bearer $GRADER_API_KEY" in text
    # allowed values of body fields are on the page too: the prompt variants, the trial's range
    submission_in = " ".join(parts["schema-SubmissionIn"].split())
    assert '"minimal", "concise", "contextual", "guided"' in submission_in and "0 to 1000000" in submission_in
    # who may call what, in one table: a row per level, linking exactly its operations
    table = body[body.index('id="access-levels"') : body.index('id="operations"')]
    rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)
    assert len(rows) == len(ACCESS)
    linked = {}
    for level, row in zip(ACCESS, rows, strict=True):
        assert ACCESS[level] in html.unescape(row)
        linked[level] = set(re.findall(r'href="#([^"]+)"', row))
        assert linked[level] == {f"{m}-{p}" for p, m in OPERATIONS if DOC["paths"][p][m]["x-access"] == level}
    assert linked["admin"] == {
        "get-/v1/admin/teams",
        "post-/v1/admin/teams",
        "post-/v1/admin/tasks/reload",
        "get-/v1/admin/suites",
        "post-/v1/admin/suites/validations",
        "put-/v1/admin/phases/{slug}",
        "patch-/v1/admin/teams/{name}",
        "get-/v1/admin/teams/{name}/keys",
        "delete-/v1/admin/keys/{key_id}",
        "post-/v1/admin/runs/{run}/regrade",
    }
    assert {"get-/v1/leaderboard", "get-/v1/runs/{run}", "get-/v1/compare"} <= linked["optional"]
    assert {"get-/healthz", "get-/docs"} <= linked["none"] and "get-/v1/runs/{run}/logs" in linked["team"]


@pytest.mark.service
def test_the_docs_page_carries_the_portals_navigation(app):
    body = app.test_client().get("/docs").get_data(as_text=True)
    header = body[body.index("<header>") : body.index("</header>")]
    for href in ("/leaderboard", "/compare", "/tasks", "/docs", "/login"):
        assert f'href="{href}"' in header, href
    table = body[body.index('id="portal-pages"') :]
    table = table[: table.index("</table>")]
    rules = {r.rule: r.endpoint for r in app.url_map.iter_rules() if r.endpoint.startswith("portal.")}
    assert set(rules.values()) <= set(PORTAL_PAGES), set(rules.values()) - set(PORTAL_PAGES)
    for rule in rules:
        assert f"<code>{html.escape(rule)}</code>" in table, rule
    assert '<a href="/leaderboard"><code>/leaderboard</code></a>' in table


@pytest.mark.service
def test_the_refusals_shown_are_the_services_own(app, svc):
    """The error examples are what the service answers, word for word."""
    api = Api(app.test_client(), new_key(svc, "docs-team"))
    r = api.post("/v1/submissions", json={"task_id": "calc-mean-empty", "patch": "", "trail": 1})
    assert (str(r.status_code), r.json) == ERRORS[("post", "/v1/submissions")]
    assert api.post("/v1/submissions", json={"task_id": "calc-mean-empty", "patch": "", "run_id": "r"}).status_code in (
        200,
        202,
    )
    r = api.client.patch("/v1/runs/r", json={"methd": "x"}, headers={"Authorization": f"Bearer {api.key}"})
    assert (str(r.status_code), r.json) == ERRORS[("patch", "/v1/runs/{run}")]
    r = api.get("/v1/submissions?runid=my-run")
    assert (str(r.status_code), r.json) == ERRORS[("get", "/v1/submissions")]
    r = api.get("/v1/runs/nope")
    assert (str(r.status_code), r.json) == ERRORS[("get", "/v1/runs/{run}")]
    # and the batch example, sent as shown, is answered as shown (but for the new ids)
    ex = EXAMPLES[("post", "/v1/submissions/batch")]
    r = api.post("/v1/submissions/batch?run_id=my-run", json=ex["body"])
    strip = [{k: v for k, v in it.items() if k != "id"} for it in r.json["items"]]
    assert strip == [{k: v for k, v in it.items() if k != "id"} for it in ex["response"]["items"]]
    assert (str(r.status_code), r.json["accepted"], r.json["rejected"]) == ("202", 2, 1)
