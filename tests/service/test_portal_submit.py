"""The portal's Submit, Follow and Publish (issue 22) through the app, signed in, on SQLite
and PostgreSQL: an upload goes through the API's intake (its checks, quotas, run rules and
Idempotency-Keys), every refused line is shown against its line with nothing taken unless
the team chose so, the run page follows its grading (reloading itself while anything is
queued or running) and publishes it from a form whose errors are tied to their fields.
Verdicts are set through the store's own moves; real grades in a browser are
tests/browser/test_portal_journey_browser.py's."""

from __future__ import annotations

import html
import io
import json
import re

import pytest

from grader.store.models import Run, Submission
from helpers.service import finish_queued_as, new_key

pytestmark = pytest.mark.service
TASK, OTHER = "calc-mean-empty", "calc-median-even"


def signed_in(app, svc, team: str = "team-a", **quotas):
    browser = app.test_client()
    assert browser.post("/login", data={"key": new_key(svc, team, **quotas)}).status_code == 302
    return browser


def form_id(page: str) -> str:
    return re.search(r'name="form_id" value="([^"]+)"', page).group(1)


def upload(browser, text: str, name: str = "agent-1.jsonl", **fields):
    page = browser.get("/submit").get_data(as_text=True)
    data = {"kind": "predictions", "form_id": form_id(page), **fields}
    data["predictions"] = (io.BytesIO(text.encode()), name)
    return browser.post("/submit", data=data, content_type="multipart/form-data"), data


def lines(*preds) -> str:
    return "".join(json.dumps(p) + "\n" for p in preds)


def pred(task: str, patch: str) -> dict:
    return {"instance_id": task, "model_name_or_path": "agent", "model_patch": patch}


def stored(svc) -> list[Submission]:
    with svc.db.read() as s:
        return s.query(Submission).order_by(Submission.id).all()


def test_a_broken_upload_shows_every_error_and_takes_nothing(app, svc):
    browser = signed_in(app, svc)
    assert app.test_client().get("/submit").status_code == 302  # signed out: to the sign-in page
    text = lines(pred(TASK, "good")) + "{not json\n" + lines(pred("no-such-task", "x"), {"model_patch": "y"})
    r, _ = upload(browser, text)
    page = html.unescape(r.get_data(as_text=True))
    assert r.status_code == 422 and "Nothing was submitted: 3 of 4 line(s) cannot be taken" in page
    rows = re.findall(r"<tr class=\"(ok|refused)\"><td>(line \d)</td>", page)
    assert rows == [("ok", "line 1"), ("refused", "line 2"), ("refused", "line 3"), ("refused", "line 4")]
    assert "not valid JSON" in page and "no task 'no-such-task'" in page and "unknown field 'model_patch'" in page
    assert stored(svc) == []
    # the team chose to take the valid lines: one is taken, the refused ones still listed
    r, _ = upload(browser, text, partial="1")
    page = html.unescape(r.get_data(as_text=True))
    assert r.status_code == 200 and "1 submission(s) accepted" in page and "no task 'no-such-task'" in page
    assert [(x.task_id, x.run_id) for x in stored(svc)] == [(TASK, "agent-1")]
    # a field at fault is named, its input marked invalid and described by its error
    r, _ = upload(browser, lines(pred(OTHER, "z")), metadata="[1, 2", trial="-3", run_id="x" * 16)
    page = r.get_data(as_text=True)
    assert r.status_code == 422
    for name in ("metadata", "trial"):
        assert f'id="{name}-error"' in page
        tag = re.search(rf'<(?:input|textarea)[^>]*id="{name}"[^>]*>', page).group(0)
        assert 'aria-invalid="true"' in tag and f"{name}-error" in tag
    assert "autofocus" in re.search(r'<(?:input|textarea)[^>]*id="trial"[^>]*>', page).group(0) or "autofocus" in (
        re.search(r'<(?:input|textarea)[^>]*id="metadata"[^>]*>', page).group(0)
    )
    assert len(stored(svc)) == 1


def test_an_upload_is_taken_whole_once_followed_and_published(app, svc):
    browser = signed_in(app, svc)
    r, sent = upload(browser, lines(pred(TASK, "a"), pred(OTHER, "b")), system="sys", metadata='{"t": 0}')
    assert r.status_code == 302 and r.headers["Location"].endswith("/runs/agent-1")
    rows = stored(svc)
    assert [(x.task_id, x.run_id, x.system, x.meta) for x in rows] == [
        (TASK, "agent-1", "agent", {"t": 0}),
        (OTHER, "agent-1", "agent", {"t": 0}),
    ]
    # the same form sent again (a double click, a reload) is taken once
    sent["predictions"] = (io.BytesIO(lines(pred(TASK, "a"), pred(OTHER, "b")).encode()), "agent-1.jsonl")
    again = browser.post("/submit", data=sent, content_type="multipart/form-data")
    assert again.status_code == 302 and len(stored(svc)) == 2
    # a new form into the same run: its attempts are held, so nothing is taken
    r, _ = upload(browser, lines(pred(TASK, "c")))
    assert r.status_code == 409 and "already holds an attempt at 'calc-mean-empty'" in html.unescape(
        r.get_data(as_text=True)
    )
    # Follow: while queued the page reloads itself (no script) and shows the progress
    page = browser.get("/runs/agent-1").get_data(as_text=True)
    assert '<meta http-equiv="refresh" content="5">' in page
    assert 'id="progress-queued">2 queued' in page and "0 of 2 done" in page
    finish_queued_as(svc)
    page = browser.get("/runs/agent-1").get_data(as_text=True)
    assert 'http-equiv="refresh"' not in page and "2 of 2 done" in page
    # Publish: a URL that is not one is refused against its field; nothing changes
    bad = {"method": "My Agent", "description": "d", "project_url": "ftp://x", "paper_url": "", "public": "1"}
    r = browser.post("/runs/agent-1/publish", data=bad)
    page = r.get_data(as_text=True)
    assert r.status_code == 422 and 'id="project_url-error"' in page
    assert 'aria-invalid="true"' in re.search(r'<input[^>]*id="project_url"[^>]*>', page).group(0)
    with svc.db.read() as s:
        assert not s.query(Run).filter_by(name="agent-1").one().public
    good = {**bad, "project_url": "https://example.org/agent"}
    r = browser.post("/runs/agent-1/publish", data=good)
    assert r.status_code == 302
    board = app.test_client().get("/leaderboard").get_data(as_text=True)
    assert "agent-1" in board and "My Agent" in board
    # another team cannot publish (or see) it through the form
    other = signed_in(app, svc, "team-b")
    assert other.post("/runs/agent-1/publish", data=good).status_code == 404
    # and a form from another site changes nothing
    r = browser.post("/runs/agent-1/publish", data={**good, "public": "0"}, headers={"Origin": "http://evil.example"})
    assert r.status_code == 403


def test_one_patch_the_run_rule_and_the_quota(app, svc):
    browser = signed_in(app, svc, daily_quota=2)
    page = browser.get("/submit?kind=patch").get_data(as_text=True)
    data = {"kind": "patch", "form_id": form_id(page), "task_id": TASK, "patch": "p1", "run_id": "solo"}
    r = browser.post("/submit", data=data)
    assert r.status_code == 302 and r.headers["Location"].endswith("/runs/solo")
    # the same task and trial again: refused against the patch, with what to do
    data["form_id"] = "second"
    r = browser.post("/submit", data={**data, "patch": "p2"})
    page = html.unescape(r.get_data(as_text=True))
    assert r.status_code == 409 and 'id="patch-error"' in page and "overwrite" in page
    r = browser.post("/submit", data={**data, "patch": "p2", "overwrite": "1", "form_id": "third"})
    assert r.status_code == 302
    with svc.db.read() as s:
        assert [x.patch for x in s.query(Submission).filter_by(run_id="solo")] == [b"p2"]
    # the daily quota of 2 is spent: the page says so and takes nothing
    r, _ = upload(browser, lines(pred(OTHER, "q")))
    assert r.status_code == 429 and "quota of 2 submissions a day is used up" in r.get_data(as_text=True)
    assert len(stored(svc)) == 2
