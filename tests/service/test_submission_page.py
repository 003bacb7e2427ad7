"""The submission page through Flask's test client, over a real database (SQLite and
PostgreSQL) and Redis: failures first, grouped by FAIL_TO_PASS / PASS_TO_PASS, the
submitted diff shown, the timings folded away; and masking (grader/serializers/redact.py) never
hides a line of the submitter's own patch, on the page as in the API, while the same
secret line in another submission's result stays masked."""

from __future__ import annotations

import html
import re

import pytest

from grader.serializers.redact import MASK, own_lines, redact
from grader.store import submissions as subs
from grader.store.models import Submission
from grader.verdict import Provenance, Result, Verdict
from grader.verdict import TestOutcomes as Outcomes
from helpers.service import Api, new_key

pytestmark = pytest.mark.service
TASK = "calc-mean-empty"
GOLD_LINE = 'raise ValueError("mean() of an empty sequence")'  # a line of the task's gold patch: a secret
HIDDEN_LINE = "with pytest.raises(ValueError):"  # a line of its hidden test: a secret
F2P = "tests/test_mean.py::test_empty_raises"
P2P = ["tests/test_mean.py::test_mean_values", "tests/test_stats_basic.py::test_mean_of_three"]
OWN_PATCH = (
    "diff --git a/calc/stats.py b/calc/stats.py\n--- a/calc/stats.py\n+++ b/calc/stats.py\n"
    '@@ -3,6 +3,8 @@\n \n def mean(values):\n     """The arithmetic mean of a sequence of numbers."""\n'
    f"+    if len(values) == 0:\n+        {GOLD_LINE}\n     return sum(values) / len(values)\n"
)
OTHER_PATCH = OWN_PATCH.replace(GOLD_LINE, 'raise ValueError("no values")')


def output_quoting_secrets() -> str:
    return (
        "tests/test_mean.py F..\n"
        "    def test_empty_raises():\n"
        f">       {HIDDEN_LINE}\n"
        "calc/stats.py:6: in mean\n"
        f"    {GOLD_LINE}\n"
        "E   Failed: DID NOT RAISE <class 'ValueError'>\n"
    )


def finish(svc, sid: str) -> None:
    """FAIL: the FAIL_TO_PASS test and one PASS_TO_PASS test failed, one passed, and a test
    the task does not list failed too."""
    with svc.db.read() as s:
        row = s.get(Submission, sid)
    tests = Outcomes(
        fail_to_pass={"success": [], "failure": [F2P]},
        pass_to_pass={"success": [P2P[0]], "failure": [P2P[1]]},
        all={
            P2P[0]: "passed",
            F2P: "failed",
            P2P[1]: "error",
            "tests/test_extra.py::test_x": "failed",
            "tests/test_extra.py::test_ok": "passed",
        },
    )
    c = subs.claim(svc.db, row.id, row.job_id, "test-host", 60)
    assert subs.finish(
        svc.db,
        c,
        Result(
            task_id=TASK,
            verdict=Verdict.FAIL,
            explanation="2 of 3 required test(s) did not pass.",
            tests=tests,
            output=output_quoting_secrets(),
            durations={"validate": 0.01, "apply": 0.2, "check": 0.9, "total": 1.25},
            provenance=Provenance(patch_sha256=row.patch_sha256, grader_version="t"),
        ),
    )


def page(app, key: str, sid: str) -> str:
    client = app.test_client()
    assert client.post("/login", data={"key": key}).status_code == 302
    r = client.get(f"/submissions/{sid}")
    assert r.status_code == 200
    return r.get_data(as_text=True)


def test_failures_first_grouped_the_diff_shown_and_timings_folded(app, svc):
    api = Api(app.test_client(), new_key(svc, "page-team"))
    sid = api.post("/v1/submissions", json={"task_id": TASK, "patch": OWN_PATCH, "run_id": "p", "trial": 2}).json["id"]
    finish(svc, sid)
    body = page(app, api.key, sid)
    # grouped: FAIL_TO_PASS, then PASS_TO_PASS, then the tests the task does not list; failures first in each
    order = [
        body.index(x)
        for x in (
            'id="tests-fail_to_pass"',
            F2P,
            'id="tests-pass_to_pass"',
            P2P[1],
            P2P[0],
            'id="tests-other"',
            "test_extra.py::test_x",
            "test_extra.py::test_ok",
        )
    ]
    assert order == sorted(order), order
    assert re.search(r'id="tests-fail_to_pass" open>\s*<summary>FAIL_TO_PASS: <span class="fails">1 of 1 failed', body)
    assert re.search(r'id="tests-pass_to_pass" open>\s*<summary>PASS_TO_PASS: <span class="fails">1 of 2 failed', body)
    assert body.index('<tr class="failed"><td><code>' + P2P[1]) < body.index("<tr><td><code>" + P2P[0])
    # the submitted diff, line by line, as sent
    diff = re.search(r'<pre id="patch" class="diff">(.*?)</pre>', body, re.S).group(1)
    assert html.unescape(re.sub(r"<[^>]+>", "", diff)) == OWN_PATCH.rstrip("\n") + "\n"
    assert f'<span class="add">+        {GOLD_LINE}</span>' in html.unescape(diff)
    # the stage timings are folded away (a closed <details>), the total said on it
    timings = re.search(r'<details class="fold" id="timings">(.*?)</details>', body, re.S)
    assert timings and "graded in 1.25 s" in timings.group(1) and 'id="durations"' in timings.group(1)
    assert 'id="durations"' not in body.replace(timings.group(0), "")
    assert "trial 2" in body


def test_masking_never_hides_the_submitters_own_lines(app, svc):
    api = Api(app.test_client(), new_key(svc, "own-team"))
    own = api.post("/v1/submissions", json={"task_id": TASK, "patch": OWN_PATCH}).json["id"]
    other = api.post("/v1/submissions", json={"task_id": TASK, "patch": OTHER_PATCH}).json["id"]
    for sid in (own, other):
        finish(svc, sid)
    # the API: the gold's line is the submitter's own in one submission and a secret in the other
    out_own = api.get(f"/v1/submissions/{own}").json["result"]["output"]
    out_other = api.get(f"/v1/submissions/{other}").json["result"]["output"]
    assert GOLD_LINE in out_own and GOLD_LINE not in out_other
    assert out_other.count(MASK) == out_own.count(MASK) + 1
    assert HIDDEN_LINE not in out_own and "def test_empty_raises" not in out_own  # other secrets stay masked
    # the page says the same
    body = html.unescape(page(app, api.key, own))
    shown = body[body.index('<pre id="output">') :]
    shown = shown[: shown.index("</pre>")]
    assert GOLD_LINE in shown and HIDDEN_LINE not in shown and MASK in shown
    body = html.unescape(page(app, api.key, other))
    shown = body[body.index('<pre id="output">') :]
    assert GOLD_LINE not in shown[: shown.index("</pre>")]


def test_an_empty_patch_and_a_page_without_results(app, svc):
    api = Api(app.test_client(), new_key(svc, "empty-team"))
    sid = api.post("/v1/submissions", json={"task_id": TASK, "patch": ""}).json["id"]
    body = page(app, api.key, sid)  # queued: no result yet
    assert "The empty patch" in body and 'id="tests"' not in body and 'id="timings"' in body


def test_own_lines_are_the_patch_body_without_headers():
    lines = own_lines(OWN_PATCH.encode())
    assert GOLD_LINE in lines and "def mean(values):" in lines and "return sum(values) / len(values)" in lines
    assert not any(x.startswith(("a/calc", "b/calc", "git ")) for x in lines)
    secrets = frozenset({GOLD_LINE, HIDDEN_LINE})
    text = f"  {GOLD_LINE}\n>   {HIDDEN_LINE}\n"
    assert redact(text, secrets, lines) == f"  {GOLD_LINE}\n{MASK}\n"
    assert redact({"a": [text]}, secrets, lines) == {"a": [f"  {GOLD_LINE}\n{MASK}\n"]}
    assert redact(text, secrets) == f"  {MASK}\n{MASK}\n"
