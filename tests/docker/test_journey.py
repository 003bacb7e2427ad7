"""A remote team's whole journey, as the README's quick start tells it, against a live
service (real HTTP) from a directory with no task folders, every grade made in Docker by
a worker: fetch a task's repository over the API, fix it, submit a single patch and a
3-trial predictions file, read one score from the report, `runs show`, compare, the
leaderboard and the run page, publish, and find the run ranked over the whole suite."""

from __future__ import annotations

import html
import json
import re
import subprocess

import pytest

from helpers.remote import cli, use_service
from helpers.service import ROOT, new_key, work

pytestmark = [pytest.mark.docker, pytest.mark.service]


def git(*args, cwd) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def ok(result) -> str:
    assert result.exit_code == 0, result.output
    return result.stdout


def test_a_remote_team_goes_from_nothing_to_a_ranked_run(live, team_dir, monkeypatch, tmp_path):
    from grader.tasks.loader import TaskSet

    suite = TaskSet(ROOT / "tasks" / "examples")  # the test knows the answers; the team's machine has no task folder
    svc, url = live(ROOT / "tasks" / "examples", tmp_path / "service-cache")
    use_service(monkeypatch, url, new_key(svc, "remote-team"))
    assert not any(team_dir.iterdir())

    # 1. the tasks and one task's repository, over the API
    listed = json.loads(ok(cli("tasks", "list", "--json")))
    assert len(listed) == len(suite) == 10
    ok(cli("tasks", "checkout", "calc-mean-empty", "work"))
    work_dir = team_dir / "work"
    assert git("log", "--format=%H", "--all", cwd=work_dir).split() == [suite.get("calc-mean-empty").repo.commit]

    # 2. fix it (the gold patch stands in for the team's work) and submit the diff
    subprocess.run(["git", "apply"], input=suite.get("calc-mean-empty").gold_patch_text(), cwd=work_dir, check=True)
    (team_dir / "fix.patch").write_text(git("diff", cwd=work_dir))
    sent = json.loads(
        ok(cli("submit", "--task", "calc-mean-empty", "--patch", "fix.patch", "--run-id", "solo", "--json"))
    )
    work(svc)
    single = json.loads(ok(cli("status", sent["id"], "--json")))
    assert (single["status"], single["verdict"]) == ("done", "PASS"), single

    # 3. a 3-trial predictions file: calc-mean-empty PASS, PASS, FAIL (resolved by the
    #    majority); calc-median-even FAIL, FAIL, PASS (not resolved)
    gold = {t: suite.get(t).gold_patch_text().decode() for t in ("calc-mean-empty", "calc-median-even")}
    lines = []
    for task_id, patches in (
        ("calc-mean-empty", [gold["calc-mean-empty"], gold["calc-mean-empty"], ""]),
        ("calc-median-even", ["", "", gold["calc-median-even"]]),
    ):
        for trial, patch in enumerate(patches):
            lines.append(
                json.dumps(
                    {"instance_id": task_id, "model_name_or_path": "my-agent", "model_patch": patch, "trial": trial}
                )
            )
    (team_dir / "journey.jsonl").write_text("\n".join(lines) + "\n")
    ok(cli("submit", "--predictions", "journey.jsonl", "--json"))  # the run id is the file's name
    work(svc)

    # 4. one score everywhere: 1 resolved of 2 attempted, of 10 in the suite
    shown = json.loads(ok(cli("runs", "show", "journey", "--json")))
    m = shown["metrics"]
    assert (m["resolved"]["numerator"], m["resolved"]["denominator"], m["trials"]) == (1, 2, 3)
    assert [t for t, rec in m["per_task"].items() if rec["resolved"]] == ["calc-mean-empty"]
    assert (m["task_set"]["tasks"], m["task_set"]["attempted"], m["task_set"]["resolved"]["numerator"]) == (10, 2, 1)
    assert m["solve_rate"]["value"] == pytest.approx((2 / 3 + 1 / 3) / 2)
    report = json.loads(ok(cli("runs", "export", "journey", "--format", "report")))
    assert report["resolved_ids"] == ["calc-mean-empty"] and report["total_instances"] == 10
    compared = ok(cli("runs", "compare", "journey", "solo"))
    line = next(ln for ln in compared.splitlines() if "calc-mean-empty" in ln)
    assert line.count("unresolved") == 0, compared

    # 5. publish, and find the run ranked over the full suite
    ok(cli("runs", "publish", "journey", "--method", "My Agent", "--description", "three tries each"))
    board = json.loads(ok(cli("leaderboard", "--json")))
    items = board["items"] if isinstance(board, dict) else board
    row = next(x for x in items if x["name"] == "journey")
    ts = row["metrics"]["task_set"]
    assert (ts["resolved"]["numerator"], ts["resolved"]["denominator"], ts["attempted"]) == (1, 10, 2)
    assert row["rank"] == 1 and row["method"] == "My Agent"

    # the run page, as anyone sees it (it is public now)
    import requests

    page = html.unescape(re.sub(r"<[^>]+>", " ", requests.get(f"{url}/runs/{row['id']}", timeout=10).text))
    page = re.sub(r"\s+", " ", page)
    assert "1 of 10 tasks resolved (10.0%)" in page and "2 of 10 tasks attempted" in page, page[:2000]
    # and it is locked: a retry needs a new run id
    again = cli("submit", "--task", "calc-median-even", "--patch", "fix.patch", "--run-id", "journey")
    assert again.exit_code != 0 and "new run_id" in again.output, again.output
