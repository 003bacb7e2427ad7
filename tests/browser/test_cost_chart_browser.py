"""The leaderboard's cost against solve rate chart (issue 23) and the run page's cost table
in headless Chromium, against a live HTTP server of the app over a real Redis and
database. The runs' grades are finished through the store's own moves with known
verdicts (the chart draws figures; grading for real is the journey tests' part), so this
file needs no Docker."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from werkzeug.serving import make_server

from grader.app import create_app
from grader.store import submissions as subs
from grader.store.models import Submission
from grader.verdict import Provenance, Result, Verdict
from helpers import ROOT
from helpers.browser import chromium
from helpers.service import Api, make_service, new_key

pytestmark = [pytest.mark.service, pytest.mark.browser]
TASKS = ("calc-mean-empty", "calc-median-even", "notes-merge-greeting")
# run -> (team, cost per attempt, trials, PASSes per trial)
SHOTS = Path(os.environ.get("GRADER_SCREENSHOTS", ROOT / "benchmarks" / "out" / "screenshots"))
RUNS = {"frugal": ("alpha", 0.05, 1, 1), "middling": ("beta", 0.4, 2, 2), "lavish": ("gamma", 2.5, 3, 3)}


@pytest.fixture(scope="module")
def site(tmp_path_factory, redis_server):
    redis_server.flush()
    db = tmp_path_factory.mktemp("cost") / "grader.db"
    svc = make_service(f"sqlite:///{db}", redis_server.url)
    app = create_app(service=svc, migrate=False)
    c = app.test_client()
    ids = {}
    for run, (team, cost, trials, passes) in RUNS.items():
        api = Api(c, new_key(svc, team))
        items = [
            {
                "task_id": t,
                "patch": ("PASS" if i < passes else "FAIL") + f" {run} {trial}",
                "trial": trial,
                "cost_usd": cost,
                "input_tokens": 1000,
                "api_seconds": 2.0,
                "wall_seconds": 5.0,
                "reasoning_level": "medium",
            }
            for trial in range(trials)
            for i, t in enumerate(TASKS)
        ]
        assert api.post("/v1/submissions/batch", json={"run_id": run, "submissions": items}).status_code == 202
        with svc.db.read() as s:
            queued = s.query(Submission).filter(Submission.status == "queued").all()
        for row in queued:
            claim = subs.claim(svc.db, row.id, row.job_id, "test-host", 60)
            verdict = Verdict.PASS if row.patch.startswith(b"PASS") else Verdict.FAIL
            result = Result(
                task_id=row.task_id,
                verdict=verdict,
                explanation="set by the test",
                provenance=Provenance(patch_sha256=row.patch_sha256, grader_version="t"),
            )
            subs.finish(svc.db, claim, result)
        r = c.patch(f"/v1/runs/{run}", json={"public": True}, headers=api._h(None))
        assert r.status_code == 200, r.json
        ids[run] = r.json["id"]
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    browser = chromium(javascript=False)
    yield {"url": f"http://127.0.0.1:{server.server_port}", "b": browser, "ids": ids}
    browser.quit()
    server.shutdown()
    svc.close()


def test_the_chart_draws_a_point_per_run_cost_against_solve_rate(site):
    from selenium.webdriver.common.by import By

    b = site["b"]
    b.get(site["url"] + "/leaderboard")
    charts = b.find_elements(By.CSS_SELECTOR, "figure.cost-chart svg")
    assert len(charts) == 1  # one table (the examples suite), one chart
    svg = charts[0]
    SHOTS.mkdir(parents=True, exist_ok=True)
    svg.screenshot(str(SHOTS / "leaderboard-cost-chart.png"))
    assert svg.is_displayed() and svg.size["width"] > 300 and svg.size["height"] > 200
    points = {
        g.get_attribute("data-run"): g.find_element(By.TAG_NAME, "circle")
        for g in svg.find_elements(By.CSS_SELECTOR, "g.point")
    }
    assert set(points) == set(site["ids"].values())
    where = {run: points[site["ids"][run]].rect for run in RUNS}
    for circle in points.values():
        assert circle.is_displayed() and circle.rect["width"] > 0
    # x is cost per complete trial, y solve rate (up the page is higher): frugal is cheapest
    # and solves least, lavish the dearest (3 tasks at $2.50) and solves most
    assert where["frugal"]["x"] < where["middling"]["x"] < where["lavish"]["x"]
    assert where["frugal"]["y"] > where["middling"]["y"] > where["lavish"]["y"]
    titles = [c.find_element(By.TAG_NAME, "title").get_attribute("textContent") for c in points.values()]
    assert any("lavish: $7.50 a trial" in t for t in titles), titles
    # the board's cost column beside the solve rate
    cells = {
        row.get_attribute("data-run"): row.find_element(By.CSS_SELECTOR, "td.cost").text
        for row in b.find_elements(By.CSS_SELECTOR, "tr.run-row")
    }
    assert cells == {site["ids"]["frugal"]: "$0.15", site["ids"]["middling"]: "$1.20", site["ids"]["lavish"]: "$7.50"}
    assert b.execute_script("return document.documentElement.scrollWidth <= window.innerWidth + 1")


def test_the_run_page_shows_what_it_cost(site):
    from selenium.webdriver.common.by import By

    b = site["b"]
    b.get(site["url"] + f"/runs/{site['ids']['lavish']}")
    table = b.find_element(By.ID, "usage-table")
    assert table.is_displayed()
    rows = {r.get_attribute("data-usage"): r.text for r in table.find_elements(By.CSS_SELECTOR, "tbody tr")}
    assert "$7.50" in rows["cost_usd"] and "$22.50" in rows["cost_usd"]  # a trial, and the 3 in all
    assert "6.0 s" in rows["api_seconds"] and "15.0 s" in rows["wall_seconds"]
    assert "medium (9)" in rows["reasoning_level"]
