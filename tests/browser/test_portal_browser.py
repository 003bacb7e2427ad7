"""The portal in a real browser: headless Chromium (Debian's chromium and chromedriver)
drives a live HTTP server of the app over real grades (Docker), a real Redis and a real
database. Each page's content is checked, a screenshot of each is saved, and pages must
not scroll sideways at a laptop's width or log browser errors."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from werkzeug.serving import make_server

from grader import jobs
from grader.app import create_app
from grader.pipeline import Grader
from helpers import ROOT
from helpers.browser import chromium
from helpers.service import Api, make_service, new_key, work

pytestmark = [pytest.mark.docker, pytest.mark.service, pytest.mark.browser]
SHOTS = Path(os.environ.get("GRADER_SCREENSHOTS", ROOT / "benchmarks" / "out" / "screenshots"))


@pytest.fixture(scope="module")
def site(tmp_path_factory, redis_server, settings, mini):
    """Two public runs graded for real on the mini tasks: 'gold' passes everything, 'empty'
    fails everything; a third team's private run; a live server on a free port."""
    from helpers.mini import FIXED

    redis_server.flush()
    db = tmp_path_factory.mktemp("portal") / "grader.db"
    svc = make_service(
        f"sqlite:///{db}", redis_server.url, tasks_dir=settings.tasks_dir, cache_dir=settings.cache_dir, retry_backoff=0
    )
    jobs.use(svc, Grader(svc.settings))
    app = create_app(service=svc, migrate=False)
    keys = {name: new_key(svc, name) for name in ("alpha", "beta", "gamma")}
    gold = mini.diff({"calc/__init__.py": FIXED}).decode()
    c = app.test_client()
    for team, run, patch, method in (
        ("alpha", "gold-run", gold, "Careful Agent"),
        ("beta", "empty-run", "", "Lazy Agent"),
        ("gamma", "secret-run", gold, None),
    ):
        api = Api(c, keys[team])
        items = [
            {"task_id": t, "patch": patch + ("\n" * trial if patch else ""), "trial": trial}
            for t in ("mini", "mini-nolist")
            for trial in range(2)
        ]
        assert api.post("/v1/submissions/batch", json={"run_id": run, "submissions": items}).status_code == 202
        if method:
            r = c.patch(
                f"/v1/runs/{run}",
                json={"public": True, "method": method},
                headers={"Authorization": f"Bearer {keys[team]}"},
            )
            assert r.status_code == 200
    work(svc)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    browser = chromium()
    SHOTS.mkdir(parents=True, exist_ok=True)
    yield {"url": f"http://127.0.0.1:{server.server_port}", "svc": svc, "keys": keys, "b": browser}
    browser.quit()
    server.shutdown()
    svc.close()


def _wait_for_text(b, text: str) -> None:
    """A click that submits a form may return before the answer is shown."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def shown(d) -> bool:
        # the page may be replaced between finding its body and reading it: look again.
        # chromedriver says so as a stale element or, as often, as an inspector error
        try:
            return text in d.find_element(By.TAG_NAME, "body").text
        except WebDriverException as exc:
            if isinstance(exc, StaleElementReferenceException) or "does not belong to the document" in str(exc):
                return False
            raise

    WebDriverWait(b, 10).until(shown)


def visit(site, path: str, shot: str):
    from selenium.webdriver.common.by import By

    b = site["b"]
    b.get(site["url"] + path)
    b.save_screenshot(str(SHOTS / f"{shot}.png"))
    width = b.execute_script("return document.documentElement.scrollWidth")
    assert width <= 1280, f"{path} scrolls sideways ({width}px wide)"
    severe = [e for e in b.get_log("browser") if e["level"] == "SEVERE" and "favicon" not in e["message"]]
    assert severe == [], severe
    return b.find_element(By.TAG_NAME, "body")


def test_leaderboard_ranks_and_sorts(site):
    from selenium.webdriver.common.by import By

    body = visit(site, "/leaderboard", "leaderboard")
    rows = site["b"].find_elements(By.CSS_SELECTOR, "#leaderboard tbody tr.run-row")
    names = [r.find_elements(By.TAG_NAME, "td")[1].text for r in rows]
    assert names == ["gold-run", "empty-run"]
    assert "secret-run" not in body.text  # private runs stay off the leaderboard
    first = rows[0].text
    # ranked over the mini suite's 2 tasks: both resolved (every trial passed), both attempted
    assert "Careful Agent" in first and "2 of 2" in first and "100.0%" in first and "2 / 2" in first
    # click the run column header twice: ascending by name puts empty-run first
    site["b"].find_element(By.LINK_TEXT, "run").click()
    site["b"].find_element(By.PARTIAL_LINK_TEXT, "run ▼").click()
    _wait_for_text(site["b"], "run ▲")
    rows = site["b"].find_elements(By.CSS_SELECTOR, "#leaderboard tbody tr.run-row")
    assert [r.find_elements(By.TAG_NAME, "td")[1].text for r in rows] == ["empty-run", "gold-run"]
    site["b"].save_screenshot(str(SHOTS / "leaderboard-sorted.png"))


def test_run_page_figures_grid_and_charts(site):
    from selenium.webdriver.common.by import By

    site["b"].get(site["url"] + "/leaderboard")
    site["b"].find_element(By.LINK_TEXT, "gold-run").click()
    _wait_for_text(site["b"], "Per task")
    body = site["b"].find_element(By.TAG_NAME, "body")
    site["b"].save_screenshot(str(SHOTS / "run.png"))
    assert "gold-run" in body.text and "Careful Agent" in body.text
    cards = site["b"].find_element(By.ID, "figures").text
    assert "100.0%" in cards and "pass@1" in cards
    per_task = site["b"].find_elements(By.CSS_SELECTOR, "#per-task tbody tr")
    assert {r.get_attribute("data-task") for r in per_task} == {"mini", "mini-nolist"}
    assert all("stable pass" in r.text for r in per_task)
    stability = site["b"].find_element(By.ID, "stability").text
    assert "stability over the 2 task(s) with several trials: stable pass 2 · stable fail 0 · flaky 0" in stability
    assert "2 of 2" in site["b"].find_element(By.ID, "card-resolved").text
    glossary = site["b"].find_element(By.ID, "glossary").text
    assert "more than half" in glossary and "solve rate" in glossary and "pass@k" in glossary
    bars = site["b"].find_elements(By.CSS_SELECTOR, "figure.chart svg rect")
    assert bars, "the breakdown charts drew no bars"


def test_compare_page(site):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    b = site["b"]
    visit(site, "/compare", "compare-empty")
    Select(b.find_element(By.NAME, "a")).select_by_visible_text("gold-run (alpha)")
    Select(b.find_element(By.NAME, "b")).select_by_visible_text("empty-run (beta)")
    b.find_element(By.CSS_SELECTOR, "form.filters button").click()
    b.save_screenshot(str(SHOTS / "compare.png"))
    text = b.find_element(By.ID, "comparison").text
    assert "2 · 0 · 0" in text  # gold wins both common tasks
    assert "McNemar" in text


def test_task_page_shows_only_the_public_instruction(site):
    body = visit(site, "/tasks/mini", "task")
    task = site["svc"].task("mini")
    assert task.instruction in body.text
    source = site["b"].page_source
    hidden = task.read(next(iter(task.check.hidden_tests.values()))).decode()
    assert "def test_empty" in hidden and "def test_empty" not in source
    assert "raise ValueError('empty')" not in source  # the gold patch's line


def test_submission_logs_need_the_owning_team(site):
    from selenium.webdriver.common.by import By

    b = site["b"]
    with site["svc"].db.read() as s:
        from grader.store.models import Submission

        sid = s.query(Submission).filter_by(run_id="empty-run").first().id
    b.delete_all_cookies()
    b.get(f"{site['url']}/submissions/{sid}")
    assert "/login" in b.current_url
    b.find_element(By.ID, "key").send_keys("grk_not-a-key")
    b.find_element(By.ID, "login-button").click()
    _wait_for_text(b, "not valid")
    b.find_element(By.ID, "key").send_keys(site["keys"]["beta"])
    b.find_element(By.ID, "login-button").click()
    assert b.find_element(By.ID, "signed-in").text == "beta"
    b.get(f"{site['url']}/submissions/{sid}")
    b.save_screenshot(str(SHOTS / "submission.png"))
    body = b.find_element(By.TAG_NAME, "body").text
    assert "FAIL" in body and "mini" in body
    # the mini task's feedback is `tests`: its listed tests' outcomes, never the output quoting the hidden test
    assert "tests/test_mean.py::test_empty" in b.find_element(By.ID, "tests").text
    assert "feedback policy is tests" in b.find_element(By.ID, "feedback").text
    assert b.find_elements(By.ID, "output") == []
    assert "def test_empty" not in b.page_source
    # another team signed in sees no such submission
    b.find_element(By.CSS_SELECTOR, "header form button").click()
    _wait_for_text(b, "Sign in")
    b.get(f"{site['url']}/login")
    b.find_element(By.ID, "key").send_keys(site["keys"]["alpha"])
    b.find_element(By.ID, "login-button").click()
    _wait_for_text(b, "Signed in as alpha")
    b.get(f"{site['url']}/submissions/{sid}")
    assert "404" in b.find_element(By.TAG_NAME, "h1").text
    # and a team's private run is on its own page
    b.get(f"{site['url']}/me")
    assert "gold-run" in b.find_element(By.ID, "my-runs").text


def test_a_submission_page_folds_what_passed_and_shows_the_diff(site):
    """A PASS on its team's page: the submitted diff shown (the gold's own lines, unmasked:
    the team wrote them), the tests that all passed folded, the timings folded away."""
    from selenium.webdriver.common.by import By

    from grader.store.models import Submission

    b = site["b"]
    with site["svc"].db.read() as s:
        sub = s.query(Submission).filter_by(run_id="gold-run", task_id="mini", trial=0).one()
    b.delete_all_cookies()
    b.get(f"{site['url']}/login")
    b.find_element(By.ID, "key").send_keys(site["keys"]["alpha"])
    b.find_element(By.ID, "login-button").click()
    _wait_for_text(b, "Signed in as alpha")
    b.get_log("browser")  # what earlier tests' refused sign-ins logged (401, 404) is theirs
    body = visit(site, f"/submissions/{sub.id}", "submission-pass")
    assert "PASS" in body.text
    patch = b.find_element(By.ID, "patch")
    assert patch.is_displayed() and "raise ValueError('empty')" in patch.text and "+++ b/calc/__init__.py" in patch.text
    f2p = b.find_element(By.ID, "tests-fail_to_pass")
    assert "all 1 passed" in f2p.text and "tests/test_mean.py::test_empty" not in f2p.text  # folded
    f2p.find_element(By.TAG_NAME, "summary").click()
    assert "tests/test_mean.py::test_empty" in f2p.text
    details = b.find_element(By.CSS_SELECTOR, "#timings table")
    assert not details.is_displayed()
    b.find_element(By.CSS_SELECTOR, "#timings summary").click()
    assert details.is_displayed() and "attempts" in details.text and sub.patch_sha256 in details.text
    # mini's feedback is `tests`: no durations, no start or finish time (a sleep chooses them)
    assert not b.find_elements(By.ID, "durations")
    assert "withheld" in b.find_element(By.ID, "timings").text


def test_docs_page_sits_in_the_portal(site):
    from selenium.webdriver.common.by import By

    b = site["b"]
    b.get_log("browser")  # earlier tests' entries are theirs
    body = visit(site, "/docs", "docs")
    assert "Example request" in body.text and "Who may call what" in body.text
    b.find_element(By.CSS_SELECTOR, '.toc a[href="#get-/v1/runs/{run}/logs"]').click()
    assert b.execute_script("return decodeURIComponent(location.hash)") == "#get-/v1/runs/{run}/logs"
    b.find_element(By.LINK_TEXT, "Leaderboard").click()
    _wait_for_text(b, "Leaderboard")
    assert b.current_url.endswith("/leaderboard")
