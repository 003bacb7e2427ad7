"""What a campaign cost (issue 23, GitBench): per attempt cost_usd, tokens, API and
wall-clock seconds and the reasoning level, through the API (single, batch, SWE-bench
prediction lines), kept, summed into the run's figures (the mean per complete trial and
the campaign total), exported, on the leaderboard and the portal's pages; a run of one
trial shown without stability or pass_any@n, and only results imported from elsewhere (or
a run of prediction lines from before runs recorded their origin) marked legacy. SQLite
and PostgreSQL, a real Redis. Grades are
finished through the store's own moves with known verdicts, so every figure is checked
against numbers worked out by hand."""

from __future__ import annotations

import io
import json
import re
import zipfile

import pytest
from click.testing import CliRunner

from grader.cli import main
from grader.store import submissions as subs
from grader.store.models import Run, Submission
from grader.verdict import Provenance, Result, Verdict
from helpers.service import Api, new_key

pytestmark = pytest.mark.service
A, B = "calc-mean-empty", "calc-median-even"


def finish(svc, verdict_of) -> None:
    """Finish every queued submission with verdict_of(row)."""
    with svc.db.read() as s:
        rows = s.query(Submission).filter(Submission.status == "queued").all()
    for row in rows:
        c = subs.claim(svc.db, row.id, row.job_id, "test-host", 60)
        subs.finish(
            svc.db,
            c,
            Result(
                task_id=row.task_id,
                verdict=Verdict(verdict_of(row)),
                explanation="set by the test",
                provenance=Provenance(patch_sha256=row.patch_sha256, grader_version="t"),
            ),
        )


def _pass_if_said(row: Submission) -> str:
    return "PASS" if b"PASS" in row.patch else "FAIL"


def page_of(api: Api, run: str) -> str:
    """The run's portal page, as anyone reads it once the run is public."""
    r = api.client.patch(f"/v1/runs/{run}", json={"public": True}, headers=api._h(None))
    assert r.status_code == 200, r.json
    got = api.client.get(f"/runs/{r.json['id']}")
    assert got.status_code == 200
    return got.get_data(as_text=True)


def item(task: str, trial: int, cost: float, tin: int, tout: int, api: float, wall: float, verdict: str) -> dict:
    return {
        "task_id": task,
        "patch": f"{verdict} {task} {trial}",
        "trial": trial,
        "cost_usd": cost,
        "input_tokens": tin,
        "output_tokens": tout,
        "api_seconds": api,
        "wall_seconds": wall,
    }


def test_a_submission_keeps_and_shows_what_it_cost(api, svc):
    body = {
        "task_id": A,
        "patch": "",
        "run_id": "one",
        "cost_usd": 0.125,
        "input_tokens": 48_210,
        "output_tokens": 2_310,
        "api_seconds": 41.5,
        "wall_seconds": 95.25,
        "reasoning_level": "high",
    }
    r = api.post("/v1/submissions", json=body)
    assert r.status_code in (200, 202), r.json
    got = api.get(f"/v1/submissions/{r.json['id']}").json
    for k, v in body.items():
        if k not in ("task_id", "patch", "run_id"):
            assert got[k] == v, k
    assert got["imported"] is False
    # the listing shows them too
    listed = api.get("/v1/submissions?run_id=one").json["items"]
    assert listed[0]["cost_usd"] == 0.125 and listed[0]["reasoning_level"] == "high"
    # an integral cost is a number too (JSON has one number type), and 0 is a cost
    r = api.post("/v1/submissions", json={"task_id": B, "patch": "", "run_id": "one", "cost_usd": 3, "input_tokens": 0})
    assert r.status_code in (200, 202), r.json
    assert api.get(f"/v1/submissions/{r.json['id']}").json["cost_usd"] == 3


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("cost_usd", -0.01, "greater than or equal to 0"),
        ("cost_usd", 1e9, "less than or equal to"),
        ("cost_usd", "0.3", "valid number"),
        ("cost_usd", True, "valid number"),
        ("input_tokens", -1, "greater than or equal to 0"),
        ("input_tokens", 10**12, "less than or equal to"),
        ("output_tokens", 1.5, "valid integer"),
        ("output_tokens", "12", "valid integer"),
        ("api_seconds", -3, "greater than or equal to 0"),
        ("wall_seconds", 10**9, "less than or equal to"),
        ("reasoning_level", "ultra", "none"),
        ("reasoning_level", 3, "none"),
    ],
)
def test_bad_usage_is_422_naming_the_field(api, svc, field, value, said):
    body = {"task_id": A, "patch": "", "run_id": "bad", field: value}
    r = api.post("/v1/submissions", json=body)
    assert r.status_code == 422, r.json
    assert field in r.json["error"]["message"] and said in r.json["error"]["message"], r.json
    assert [d["field"] for d in r.json["error"]["details"]] == [field]
    # in a batch: that item refused, naming it; its neighbour taken
    r = api.post(
        "/v1/submissions/batch",
        json={"run_id": "bad", "submissions": [body | {"run_id": None}, {"task_id": B, "patch": "", "cost_usd": 1}]},
    )
    assert r.status_code == 202, r.json
    bad, good = r.json["items"]
    assert bad["error"]["code"] == "invalid_fields" and field in bad["error"]["message"]
    assert good["id"] and r.json["accepted"] == 1
    with svc.db.read() as s:
        assert s.query(Submission).count() == 1  # nothing of the refused item was kept


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_a_non_finite_cost_is_422_not_500(api, literal):
    for field in ("cost_usd", "api_seconds", "wall_seconds"):
        raw = f'{{"task_id": "{A}", "patch": "", "{field}": {literal}}}'
        r = api.post("/v1/submissions", data=raw, content_type="application/json")
        assert r.status_code == 422, (field, literal, r.status_code, r.get_data(as_text=True))
        assert field in r.json["error"]["message"]


def test_run_figures_are_per_complete_trial_and_in_all(api, svc):
    """Two tasks, trials 0 and 1 complete, trial 2 only at A: the mean is over the two
    complete trials, the total over all five attempts; API and wall time apart."""
    items = [
        item(A, 0, 1.00, 1000, 100, 10.0, 30.0, "PASS"),
        item(B, 0, 3.00, 3000, 300, 20.0, 50.0, "FAIL"),
        item(A, 1, 2.00, 2000, 200, 15.0, 40.0, "PASS"),
        item(B, 1, 2.00, 1000, 100, 5.0, 20.0, "PASS"),
        item(A, 2, 10.00, 9000, 900, 60.0, 99.0, "FAIL"),
    ]
    r = api.post("/v1/submissions/batch", json={"run_id": "r3", "reasoning_level": "medium", "submissions": items})
    assert r.status_code == 202 and r.json["accepted"] == 5, r.json
    finish(svc, _pass_if_said)
    u = api.get("/v1/runs/r3").json["metrics"]["usage"]
    assert (u["trials"], u["complete_trials"]) == (3, 2)
    assert u["cost_usd"] == {"total": 18.0, "per_trial": 4.0, "reported": 5, "attempts": 5}  # (1+3+2+2) / 2
    assert u["input_tokens"]["total"] == 16000 and u["input_tokens"]["per_trial"] == 3500
    assert u["output_tokens"]["total"] == 1600 and u["output_tokens"]["per_trial"] == 350
    assert u["api_seconds"]["total"] == 110.0 and u["api_seconds"]["per_trial"] == 25.0
    assert u["wall_seconds"]["total"] == 239.0 and u["wall_seconds"]["per_trial"] == 70.0
    assert u["reasoning_levels"] == {"medium": 5}  # the batch's default, for items that give none
    # a one-trial run of the same attempts compares per trial with it
    api.post("/v1/submissions/batch", json={"run_id": "r1", "submissions": [items[0] | {"trial": 0}, items[1]]})
    finish(svc, _pass_if_said)
    one = api.get("/v1/runs/r1").json["metrics"]["usage"]
    assert one["cost_usd"]["per_trial"] == 4.0 and one["cost_usd"]["total"] == 4.0 and one["complete_trials"] == 1


def test_an_unreported_cost_leaves_no_mean_but_a_counted_total(api, svc):
    items = [item(A, 0, 1.5, 10, 1, 1.0, 2.0, "PASS"), {"task_id": B, "patch": "FAIL b", "trial": 0}]
    api.post("/v1/submissions/batch", json={"run_id": "part", "submissions": items})
    finish(svc, _pass_if_said)
    u = api.get("/v1/runs/part").json["metrics"]["usage"]
    assert u["cost_usd"] == {"total": 1.5, "per_trial": None, "reported": 1, "attempts": 2}
    page = page_of(api, "part")
    assert "1 of 2 attempts said" in page


def test_exports_carry_what_it_cost_and_read_back_as_a_run_of_one_trial(api, svc):
    items = [item(A, 0, 0.5, 100, 10, 1.0, 2.0, "PASS"), item(B, 0, 0.25, 50, 5, 0.5, 1.0, "FAIL")]
    items[0]["reasoning_level"] = "low"
    api.post("/v1/submissions/batch", json={"run_id": "src", "submissions": items})
    finish(svc, _pass_if_said)
    report = api.get("/v1/runs/src/report").json
    assert report["usage"]["cost_usd"]["total"] == 0.75 and report["usage"]["complete_trials"] == 1
    preds = {p["instance_id"]: p for p in api.get("/v1/runs/src/predictions").json}
    assert preds[A]["cost_usd"] == 0.5 and preds[A]["input_tokens"] == 100 and preds[A]["reasoning_level"] == "low"
    assert preds[B]["wall_seconds"] == 1.0 and "reasoning_level" not in preds[B]
    # the logs archive's index says what each attempt cost
    r = api.get("/v1/runs/src/logs?format=zip")
    assert r.status_code == 200, r.status_code
    with zipfile.ZipFile(io.BytesIO(r.data)) as z:
        index = json.loads(z.read(next(n for n in z.namelist() if n.endswith("index.json"))))
    said = {e["task_id"]: (e["cost_usd"], e["input_tokens"], e["reasoning_level"]) for e in index["submissions"]}
    assert said == {A: (0.5, 100, "low"), B: (0.25, 50, None)}
    # the export read back as SWE-bench predictions and graded here: the fields kept; a run
    # of one trial (no stability, no pass_any@n), not legacy: nothing of it came graded
    r = api.post("/v1/submissions/batch", json={"run_id": "back", "submissions": list(preds.values())})
    assert r.status_code == 202 and r.json["accepted"] == 2 and not any(i.get("ignored") for i in r.json["items"])
    finish(svc, _pass_if_said)
    view = api.get("/v1/runs/back").json
    m = view["metrics"]
    assert view["origin"] == "graded"
    assert m["legacy"] is False and m["single_trial"] is True
    assert m["stability"] is None and m["pass_any_at_n"] is None
    assert all(t["stability"] is None for t in m["per_task"].values())
    assert m["usage"]["cost_usd"]["total"] == 0.75
    assert api.get(f"/v1/submissions/{r.json['items'][0]['id']}").json["imported"] is True  # how it was sent
    page = page_of(api, "back")
    assert 'id="one-trial"' in page and 'id="legacy"' not in page and '"muted">legacy<' not in page
    assert 'id="card-pass-any"' not in page and 'id="stability"' not in page
    # the source run, one patch a task: a run of one trial just the same
    src = api.get("/v1/runs/src").json["metrics"]
    assert src["legacy"] is False and src["single_trial"] is True and src["pass_any_at_n"] is None
    assert (src["resolved"], src["solve_rate"]) == (m["resolved"], m["solve_rate"])
    page = page_of(api, "src")
    assert 'id="one-trial"' in page and 'id="legacy"' not in page and 'id="card-pass-any"' not in page


def test_a_run_from_before_origins_were_recorded_stays_legacy(api, svc):
    """A run made before migration 0014 has no origin: a run of prediction lines of one trial
    is legacy as it was; one whose origin says imported is legacy with the words for it."""
    lines = [{"instance_id": t, "model_patch": "PASS", "model_name_or_path": "m"} for t in (A, B)]
    api.post("/v1/submissions/batch", json={"run_id": "old", "submissions": lines})
    finish(svc, _pass_if_said)
    assert api.get("/v1/runs/old").json["metrics"]["legacy"] is False  # made now: graded here

    def origin(value):
        with svc.db.write() as s:
            run = s.query(Run).filter_by(name="old").one()
            run.origin, run.figures_stale = value, True  # as migration 0014 left an older run

    origin(None)
    view = api.get("/v1/runs/old").json
    m = view["metrics"]
    assert view["origin"] is None and m["legacy"] is True and m["single_trial"] is True
    assert m["stability"] is None and m["pass_any_at_n"] is None
    page = page_of(api, "old")
    assert 'id="legacy"' in page and "made before the service recorded" in page and 'id="one-trial"' in page
    origin("imported")
    assert api.get("/v1/runs/old").json["metrics"]["legacy"] is True
    page = page_of(api, "old")
    assert 'id="legacy"' in page and "graded elsewhere and brought in" in page


def test_predictions_with_trials_show_their_stability(api, svc):
    lines = [{"instance_id": A, "model_patch": "PASS", "trial": t, "model_name_or_path": "m"} for t in (0, 1)]
    api.post("/v1/submissions/batch", json={"run_id": "imp2", "submissions": lines})
    finish(svc, _pass_if_said)
    m = api.get("/v1/runs/imp2").json["metrics"]
    assert m["legacy"] is False and m["single_trial"] is False
    assert m["stability"] == {"stable_pass": 1, "stable_fail": 0, "flaky": 0}


def test_the_run_page_shows_what_it_cost(api, svc):
    items = [item(A, 0, 1.25, 1500, 150, 12.0, 30.0, "PASS"), item(B, 0, 0.75, 500, 50, 8.0, 20.0, "FAIL")]
    api.post("/v1/submissions/batch", json={"run_id": "page", "reasoning_level": "xhigh", "submissions": items})
    finish(svc, _pass_if_said)
    page = page_of(api, "page")
    table = page[page.index('id="usage-table"') :]
    table = table[: table.index("</table>")]

    def row(key: str) -> str:
        cells = table.split(f'data-usage="{key}"')[1].split("</tr>")[0]
        return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", cells))

    assert "$2.00" in row("cost_usd")  # one complete trial: the mean is the total
    assert "2k" in row("input_tokens") and "200" in row("output_tokens")
    assert "20.0 s" in row("api_seconds") and "50.0 s" in row("wall_seconds")
    assert "xhigh (2)" in row("reasoning_level")


def test_the_leaderboard_shows_cost_beside_solve_rate_and_draws_it(app, svc, served):
    a = Api(app.test_client(), new_key(svc, "alpha"))
    b = Api(app.test_client(), new_key(svc, "beta"))
    admin = Api(app.test_client(), new_key(svc, "host", admin=True))
    a.post("/v1/submissions/batch", json={"run_id": "cheap", "submissions": [item(A, 0, 0.5, 1, 1, 1, 1, "PASS")]})
    b.post(
        "/v1/submissions/batch",
        json={"run_id": "dear", "submissions": [item(A, t, 4.0, 1, 1, 1, 1, "FAIL") for t in (0, 1)]},
    )
    finish(svc, _pass_if_said)
    ids = {}
    for api, run in ((a, "cheap"), (b, "dear")):
        r = api.client.patch(f"/v1/runs/{run}", json={"public": True}, headers=api._h(None))
        assert r.status_code == 200, r.json
        ids[run] = r.json["id"]
    board = Api(app.test_client(), None).get("/v1/leaderboard").json["items"]
    costs = {x["name"]: x["metrics"]["usage"]["cost_usd"]["per_trial"] for x in board}
    assert costs == {"cheap": 0.5, "dear": 4.0}  # dear: 8.0 over its 2 complete trials
    printed = CliRunner().invoke(main, ["leaderboard", "--url", served, "--api-key", new_key(svc, "reader")])
    assert printed.exit_code == 0, printed.output
    text = re.sub(r"\s+", " ", printed.output)
    assert "cost / trial" in text and "$0.50" in text and "$4.00" in text, text
    page = Api(app.test_client(), None).get("/leaderboard").get_data(as_text=True)
    cells = re.findall(r'<td class="num cost"[^>]*>([^<]*)</td>', page)
    assert sorted(cells) == ["$0.50", "$4.00"]
    svg = page[page.index('class="chart cost-chart"') :]
    points = dict(re.findall(r'<g class="point" data-run="([0-9a-f]+)"><circle cx="([\d.]+)"', svg))
    assert set(points) == set(ids.values())
    assert float(points[ids["cheap"]]) < float(points[ids["dear"]])  # x is cost
    # a run that said no cost is named, not drawn at 0
    admin.post("/v1/submissions/batch", json={"run_id": "silent", "submissions": [{"task_id": A, "patch": "PASS"}]})
    finish(svc, _pass_if_said)
    admin.client.patch("/v1/runs/silent", json={"public": True}, headers=admin._h(None))
    page = Api(app.test_client(), None).get("/leaderboard").get_data(as_text=True)
    assert "Not drawn (no cost said for a complete trial): silent" in page
    assert len(re.findall(r'<g class="point"', page)) == 2


def test_the_cli_sends_what_it_cost(served, svc, tmp_path, monkeypatch):
    key = new_key(svc, "cli-cost")
    runner = CliRunner()
    monkeypatch.chdir(tmp_path)
    with open("p.diff", "w") as f:
        f.write("")
    args = ["submit", "--task", A, "--patch", "p.diff", "--run-id", "cli", "--cost-usd", "0.2"]
    args += ["--input-tokens", "300", "--output-tokens", "40", "--api-seconds", "3.5", "--wall-seconds", "9"]
    args += ["--reasoning-level", "minimal", "--json", "--url", served, "--api-key", key]
    result = runner.invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    sub = json.loads(result.output)
    assert (sub["cost_usd"], sub["input_tokens"], sub["output_tokens"]) == (0.2, 300, 40)
    assert (sub["api_seconds"], sub["wall_seconds"], sub["reasoning_level"]) == (3.5, 9.0, "minimal")
    finish(svc, _pass_if_said)
    shown = runner.invoke(main, ["runs", "show", "cli", "--url", served, "--api-key", key], catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    text = re.sub(r"\s+", " ", shown.output)
    assert "what it cost: 1 complete trial(s) of 1" in text and "cost │ $0.20 │ $0.20" in text, text
    assert "model API time │ 3.5 s" in text and "wall-clock time │ 9.0 s" in text
    assert "reasoning level │ minimal (1)" in text
    # a negative cost never leaves the machine; a cost with --predictions is a usage error
    bad = runner.invoke(main, [*args[:8], "-1", "--url", served, "--api-key", key])
    assert bad.exit_code == 2 and "--cost-usd" in bad.output
    with open("preds.jsonl", "w") as f:
        f.write(json.dumps({"instance_id": B, "model_patch": "", "cost_usd": 0.4}) + "\n")
    bad = runner.invoke(
        main, ["submit", "--predictions", "preds.jsonl", "--cost-usd", "1", "--url", served, "--api-key", key]
    )
    assert bad.exit_code == 2 and "each line gives its own cost_usd" in bad.output
    ok = runner.invoke(
        main,
        ["submit", "--predictions", "preds.jsonl", "--reasoning-level", "low", "--url", served, "--api-key", key],
    )
    assert ok.exit_code == 0, ok.output
    with svc.db.read() as s:
        row = s.query(Submission).filter(Submission.task_id == B).one()
        assert (row.cost_usd, row.reasoning_level, row.imported) == (0.4, "low", True)


def test_the_portals_submit_form_takes_what_it_cost_and_refuses_it_by_field(app, svc):
    browser = app.test_client()
    assert browser.post("/login", data={"key": new_key(svc, "portal-cost")}).status_code == 302

    def send(**fields):
        page = browser.get("/submit?kind=patch").get_data(as_text=True)
        fid = re.search(r'name="form_id" value="([^"]+)"', page).group(1)
        data = {"kind": "patch", "form_id": fid, "task_id": A, "patch": "", "run_id": "form"} | fields
        return browser.post("/submit", data=data)

    for field, value, said in (
        ("cost_usd", "-2", "greater than or equal to 0"),
        ("cost_usd", "lots", "is not a number"),
        ("input_tokens", "1.5", "is not a whole number"),
        ("output_tokens", str(10**12), "less than or equal to"),
        ("api_seconds", "nan", "finite number"),
        ("reasoning_level", "ultra", "is one of none, minimal"),
    ):
        r = send(**{field: value})
        page = r.get_data(as_text=True)
        assert r.status_code == 422, (field, r.status_code)
        assert f'id="{field}-error"' in page and said in page, (field, said)
    with svc.db.read() as s:
        assert s.query(Submission).count() == 0  # nothing refused was kept
    r = send(cost_usd="0.75", input_tokens="1200", output_tokens="80", api_seconds="4.5", reasoning_level="low")
    assert r.status_code == 302, r.get_data(as_text=True)
    with svc.db.read() as s:
        row = s.query(Submission).one()
    assert (row.cost_usd, row.input_tokens, row.output_tokens, row.api_seconds) == (0.75, 1200, 80, 4.5)
    assert (row.wall_seconds, row.reasoning_level, row.imported) == (None, "low", None)
