"""The whole service as it runs: `grader serve` (gunicorn) and `grader worker` as real
processes, a real Redis, SQLite or a real PostgreSQL, and Docker grading. Submissions go
through the Python client and the `grader submit` command; a worker is SIGKILLed in the
middle of a grade and the submission still reaches exactly one verdict."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time

import pytest
import requests

from grader.client import Client
from helpers.service import BIN

pytestmark = [pytest.mark.docker, pytest.mark.service]


def test_grades_through_gunicorn_and_worker_processes(stack, mini, tmp_path):
    from helpers.mini import FIXED

    gold = mini.diff({"calc/__init__.py": FIXED}).decode()
    c = Client(stack.url, stack.key)
    # two trials of one task in one run (a second attempt at a trial the run holds is 409)
    a = c.submit("mini", gold, run_id="e2e", system="gold", trial=1, wait=30)
    b = c.submit("mini", "", run_id="e2e", system="empty", trial=2, wait=30)
    assert (a["verdict"], b["verdict"]) == ("PASS", "FAIL"), stack.tail()
    assert a["host"] and a["result"]["tests"]["fail_to_pass"]["success"]
    # the CLI: one patch with --wait, then SWE-bench predictions as a batch
    patch = tmp_path / "gold.patch"
    patch.write_text(gold)
    env = {**os.environ, "GRADER_API_URL": stack.url, "GRADER_API_KEY": stack.key}
    one = subprocess.run(
        [str(BIN), "submit", "--task", "mini", "--patch", str(patch), "--wait", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert one.returncode == 0, one.stderr
    assert json.loads(one.stdout)["verdict"] == "PASS"
    preds = tmp_path / "preds.jsonl"
    # three trials of one task (a run holds one attempt a trial), each saying what it cost
    preds.write_text(
        "\n".join(
            json.dumps(
                {
                    "instance_id": "mini",
                    "model_name_or_path": "m",
                    "model_patch": p,
                    "trial": n,
                    "cost_usd": 0.25 * (n + 1),
                    "input_tokens": 1000,
                    "output_tokens": 200,
                    "reasoning_level": "low",
                }
            )
            for n, p in enumerate((gold, "", "not a diff"))
        )
    )
    many = subprocess.run(
        [str(BIN), "submit", "--predictions", str(preds), "--run-id", "preds", "--wait"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert many.returncode == 0, many.stdout + many.stderr
    verdicts = sorted(s["verdict"] for s in c.list(run_id="preds"))
    assert verdicts == ["FAIL", "PASS", "PATCH FAILED"]
    # what the campaign cost, graded for real: the total over the attempts, the mean per trial
    usage = c.session.get(f"{stack.url}/v1/runs/preds", headers={"Authorization": f"Bearer {stack.key}"}).json()
    spent = usage["metrics"]["usage"]
    assert spent["cost_usd"]["total"] == 1.5 and spent["cost_usd"]["per_trial"] == 0.5, spent
    assert spent["input_tokens"]["total"] == 3000 and spent["reasoning_levels"] == {"low": 3}, spent
    metrics = requests.get(f"{stack.url}/metrics", timeout=10).text
    assert 'grader_submissions_total{verdict="PASS"} 3.0' in metrics
    assert 'grader_submissions_total{verdict="PATCH FAILED"} 1.0' in metrics
    workers = c.session.get(f"{stack.url}/v1/workers", headers={"Authorization": f"Bearer {stack.key}"}).json()
    assert len(workers["workers"]) == 2
    # the run's figures in the terminal: 1 PASS and 1 FAIL on one task, one trial each
    shown = subprocess.run([str(BIN), "runs", "show", "e2e"], env=env, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "solve rate" in shown.stdout and "50.0% (1/2)" in shown.stdout
    board = subprocess.run([str(BIN), "leaderboard", "--all"], env=env, capture_output=True, text=True, timeout=60)
    assert board.returncode == 0 and "no public run" in board.stdout  # nothing published yet, and it says so
    published = subprocess.run(
        [str(BIN), "runs", "publish", "e2e", "--method", "E2E", "--description", "one task"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert published.returncode == 0, published.stderr
    board = subprocess.run([str(BIN), "leaderboard", "--all"], env=env, capture_output=True, text=True, timeout=60)
    assert board.returncode == 0 and " e2e " in board.stdout and "E2E" in board.stdout, board.stdout


def test_a_worker_killed_mid_grade_loses_nothing(stack, mini):
    from helpers.mini import FIXED

    slow = mini.diff({"calc/__init__.py": "import time\ntime.sleep(5)\n" + FIXED}).decode()
    c = Client(stack.url, stack.key)
    sid = c.submit("mini", slow)["id"]
    deadline = time.monotonic() + 60
    while (sub := c.get(sid))["status"] != "running":
        assert time.monotonic() < deadline, stack.tail()
        time.sleep(0.1)
    time.sleep(1.0)  # inside the container now
    host, _, pid = sub["host"].rpartition(":")
    os.kill(int(pid), signal.SIGKILL)
    final = c.wait([sid], timeout=120)[sid]
    assert final["status"] == "done", stack.tail()
    assert final["verdict"] == "PASS" and final["attempts"] == 2
    assert final["host"] != sub["host"]
    # the dead worker's container is reaped by its successor
    import docker

    client = docker.from_env()
    deadline = time.monotonic() + 30
    while client.containers.list(all=True, filters={"label": f"grader.owner={socket.gethostname()}:{pid}"}):
        assert time.monotonic() < deadline, "the killed worker's container was never removed"
        time.sleep(0.5)
