"""The rough edges a team met on its first journey (issue 22), through the API and the
command line on SQLite and PostgreSQL: a single submission that would add a second
attempt at a run's (task, trial) is refused unless it names a new trial or overwrites;
the leaderboard ranks runs over different task sets in tables of their own, the default
view included, and an unknown suite is an error naming the suites; `--suite` where a team
picks tasks; the first summary after a submit is the run's score.

The service serves two suites here: the examples' calc tasks, one of them moved to a
suite of its own ("second"). Verdicts are set through the store's own moves."""

from __future__ import annotations

import html
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli import main
from grader.store import submissions as subs
from grader.store.models import Submission
from grader.verdict import Provenance, Result, Verdict
from helpers import ROOT
from helpers.service import Api, new_key

pytestmark = pytest.mark.service
FIRST, SECOND, OTHER = "calc-mean-empty", "calc-median-even", "calc-add-mode"


@pytest.fixture
def service_options(tmp_path: Path) -> dict:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    shutil.copytree(ROOT / "tasks" / "examples" / "repos", tasks / "repos")
    shutil.copy(ROOT / "tasks" / "examples" / "suite.yaml", tasks / "suite.yaml")
    for task in (FIRST, SECOND, OTHER):
        shutil.copytree(ROOT / "tasks" / "examples" / task, tasks / task)
    moved = tasks / SECOND / "task.yaml"
    moved.write_text(moved.read_text().replace("suite: examples", "suite: second"))
    return {"tasks_dir": tasks}


def finish(svc, verdicts: dict[str, str]) -> None:
    """Finish each queued submission named in `verdicts` with its verdict."""
    for sid, v in verdicts.items():
        with svc.db.read() as s:
            row = s.get(Submission, sid)
        c = subs.claim(svc.db, row.id, row.job_id, "test-host", 60)
        assert c is not None
        result = Result(
            task_id=row.task_id,
            verdict=Verdict(v),
            explanation="set by the test",
            durations={"total": 1.0},
            provenance=Provenance(
                patch_sha256=row.patch_sha256, task_hash=row.task_hash, image_id="img", grader_version="t"
            ),
        )
        assert subs.finish(svc.db, c, result)


def post(api: Api, task: str, patch: str, run: str, **kw):
    return api.post("/v1/submissions", json={"task_id": task, "patch": patch, "run_id": run, **kw})


def test_a_single_submit_never_becomes_a_second_trial_silently(app, svc):
    api = Api(app.test_client(), new_key(svc, "alpha"))
    first = post(api, FIRST, "fail", "r")
    assert first.status_code == 202
    finish(svc, {first.json["id"]: "FAIL"})
    # the fixed patch, sent again at the same (task, trial): refused, with what to do instead
    again = post(api, FIRST, "fixed", "r")
    assert again.status_code == 409 and again.json["error"]["code"] == "attempt_exists"
    message = again.json["error"]["message"]
    assert "already holds an attempt at 'calc-mean-empty'" in message and "overwrite" in message and "trial" in message
    # the run is as it was: one FAIL, not a 1-of-2 tie
    assert api.get("/v1/runs/r").json["submissions"] == 1
    # overwrite: the fixed patch replaces the FAIL in the run; the FAIL stays in the team's history
    replaced = post(api, FIRST, "fixed", "r", overwrite=True)
    assert replaced.status_code == 202
    finish(svc, {replaced.json["id"]: "PASS"})
    view = api.get("/v1/runs/r").json
    assert view["submissions"] == 1 and view["metrics"]["resolved"]["numerator"] == 1
    assert api.get(f"/v1/submissions/{first.json['id']}").json["run_id"] is None
    # a new trial is its own attempt; the same trial again is refused
    assert post(api, FIRST, "t1", "r", trial=1).status_code == 202
    assert post(api, FIRST, "t1b", "r", trial=1).status_code == 409
    # another team's run of the same name is its own: no request of one team holds another's
    beta = Api(app.test_client(), new_key(svc, "beta"))
    assert post(beta, FIRST, "b", "r").status_code == 202
    # overwrite is for one submission: a batch item saying it is refused, by name
    batch = api.post("/v1/submissions/batch", json=[{"task_id": SECOND, "patch": "x", "overwrite": True}])
    assert (
        batch.status_code == 422
        and "overwrite is for a single submission" in batch.json["items"][0]["error"]["message"]
    )


def test_the_leaderboard_is_one_table_per_task_set(app, svc, served):
    api = Api(app.test_client(), new_key(svc, "alpha"))
    anon = Api(app.test_client(), None)
    runs = {"one": (FIRST, "PASS"), "two": (SECOND, "PASS"), "three": (OTHER, "FAIL")}
    for run, (task, verdict) in runs.items():
        r = post(api, task, f"p-{run}", run)
        finish(svc, {r.json["id"]: verdict})
        api.client.patch(f"/v1/runs/{run}", json={"public": True}, headers={"Authorization": f"Bearer {api.key}"})
    board = anon.get("/v1/leaderboard").json
    rows = [(x["table"], x["name"], x["rank"]) for x in board["items"]]
    # examples (2 tasks here): one resolves 1, three resolves 0; second (1 task): two resolves 1.
    # Ranked apart: "two" (1 of 1) never stands beside "one" (1 of 2) in one ranking
    assert rows == [("examples", "one", 1), ("examples", "three", 2), ("second", "two", 1)]
    # the portal's default view: a table per suite, each captioned with its suite
    page = anon.get("/leaderboard").get_data(as_text=True)
    assert page.count('class="board-table"') == 2
    assert 'data-table="examples"' in page and 'data-table="second"' in page
    # a suite's own board, and an unknown suite named as such with the suites there are
    only = anon.get("/v1/leaderboard?suite=second").json["items"]
    assert [(x["name"], x["rank"]) for x in only] == [("two", 1)]
    for path in ("/v1/leaderboard?suite=nope", "/v1/runs/one?suite=nope", "/leaderboard?suite=nope"):
        r = api.get(path)
        assert r.status_code == 422, path
        said = html.unescape(r.get_data(as_text=True))
        assert "there is no suite 'nope'; the suites are: examples, second" in said, path
    # the command line prints a table per suite
    out = CliRunner().invoke(main, ["leaderboard", "--url", served, "--api-key", api.key])
    assert out.exit_code == 0, out.output
    assert "leaderboard: suite examples" in out.output and "leaderboard: suite second" in out.output


def test_suite_where_a_team_picks_tasks_and_the_first_summary_is_the_score(app, svc, served, tmp_path):
    key = new_key(svc, "cli-team")

    def cli(*args, code=0, input=None):
        r = CliRunner().invoke(main, [*args, "--url", served, "--api-key", key], input=input, catch_exceptions=False)
        assert r.exit_code == code, (r.exit_code, r.output)
        return r

    listed = cli("tasks", "list", "--suite", "second", "--json")
    assert [t["id"] for t in __import__("json").loads(listed.stdout)] == [SECOND]
    bad = cli("tasks", "list", "--suite", "nope", code=2)
    assert "no suite 'nope'" in bad.output and "examples, second" in bad.output
    preds = tmp_path / "agent.jsonl"
    preds.write_text(
        "".join(
            f'{{"instance_id": "{t}", "model_name_or_path": "m", "model_patch": "p-{t}"}}\n' for t in (FIRST, SECOND)
        )
    )
    # --suite: a prediction of another suite is refused before anything is sent
    r = cli("submit", "--predictions", str(preds), "--suite", "examples", code=2)
    assert "1 task(s) are not in suite examples: calc-median-even; nothing was submitted" in r.output
    with svc.db.read() as s:
        assert s.query(Submission).count() == 0
    # a single patch: --overwrite needs its run; the second attempt is refused in the team's words
    cli("submit", "--task", FIRST, "--patch", "-", "--run-id", "solo", input="a")
    r = cli("submit", "--task", FIRST, "--patch", "-", "--run-id", "solo", input="b", code=2)
    assert "run solo already holds an attempt at calc-mean-empty" in r.output and "--overwrite" in r.output
    cli("submit", "--task", FIRST, "--patch", "-", "--run-id", "solo", "--overwrite", input="b")
    # the first summary after a batch is the run's score over its suite, then the batch's verdicts
    one = tmp_path / "scored.jsonl"
    one.write_text(f'{{"instance_id": "{FIRST}", "model_name_or_path": "m", "model_patch": "good"}}\n')
    done = threading_finisher(svc, "PASS")
    r = cli("submit", "--predictions", str(one), "--suite", "examples", "--wait", "--timeout", "120")
    done.join()
    first_line = r.stdout.strip().splitlines()[0]
    assert first_line.startswith("run scored: resolved 1 of 2 tasks of suite examples"), r.stdout
    assert "this batch's verdicts" in r.stdout
    # off a terminal the batch's progress is said in lines, not silently
    assert "grading: 0 of 1 done (0%)" in r.stderr and "grading: 1 of 1 done (100%)" in r.stderr
    # what is left of the quota, in the team's words (`grader quota` is the same)
    for name in ("account", "quota"):
        said = cli(name).stdout
        assert "team cli-team" in said and "submissions sent" in said and "left" in said


def threading_finisher(svc, verdict: str):
    """Finish the next queued submission with `verdict` as soon as it is there (the CLI
    waits for it meanwhile)."""
    import threading

    def run() -> None:
        import time

        for _ in range(2400):  # a bound, not a measure: the CLI's own --timeout fails the test first
            with svc.db.read() as s:
                row = s.query(Submission).filter(Submission.status == "queued", Submission.run_id == "scored").first()
            if row is not None:
                finish(svc, {row.id: verdict})
                return
            time.sleep(0.05)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t
