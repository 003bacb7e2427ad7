"""A burst through the whole service, CI-sized: benchmarks/load.py with 400 submissions, and 12
graded in containers (`make stress` runs 10,000). The counts must reconcile exactly: what the API accepted,
what the database holds, what was graded; nothing lost. The figures it prints (rates,
latencies, memory) are for reading, never asserted."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import ROOT

pytestmark = pytest.mark.service


def test_a_burst_of_400_is_accepted_graded_and_reconciled():
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "load.py"), "--count", "400", "--baseline", "20"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    print(run.stdout)
    assert run.returncode == 0, run.stdout + run.stderr
    figures = json.loads((ROOT / "benchmarks" / "out" / "load.json").read_text())
    assert figures["accepted"] == figures["in_database"] == figures["done"] == 400
    assert figures["lost"] == 0 and figures["verdicts"] == {"PATCH FAILED": 400}


@pytest.mark.docker
def test_a_burst_graded_in_containers_reconciles():
    """The same through real grades: every patch is the gold patch plus a file of its own."""
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "load.py"),
            "--count",
            "12",
            "--baseline",
            "4",
            "--batch",
            "10",
            "--containers",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    print(run.stdout)
    assert run.returncode == 0, run.stdout + run.stderr
    figures = json.loads((ROOT / "benchmarks" / "out" / "load-containers.json").read_text())
    assert figures["accepted"] == figures["in_database"] == figures["done"] == 12
    assert figures["lost"] == 0 and figures["verdicts"] == {"PASS": 12}


def _answered(statuses: dict[str, int], n: int) -> bool:
    return sum(statuses.values()) == n and all(code.startswith("2") for code in statuses)


def test_fairness_times_the_victim_idle_and_under_attack(tmp_path):
    """benchmarks/fairness.py, small: the victim's rounds are all timed in both phases, and
    every one of the hostile team's requests is accounted for (held or answered at once)."""
    out = tmp_path / "fairness.json"
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "fairness.py"),
            "--rounds",
            "10",
            "--interval",
            "0.05",
            "--batch",
            "500",
            "--long-polls",
            "20",
            "--streams",
            "1",
            "--archive-patches",
            "20",
            "--publish",
            "40",
            "--public-runs",
            "300",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    print(run.stdout)
    assert run.returncode == 0, run.stdout + run.stderr
    for line in (
        "POST /v1/submissions",
        "GET /v1/submissions/<id>",
        "GET /v1/account",
        "worst p99(attack) / p99(idle)",
    ):
        assert line in run.stdout
    figures = json.loads(out.read_text())["attacks"]
    assert list(figures) == [
        "round1",
        "slow-direct",
        "slow-proxy",
        "chunked",
        "chunked-proxy",
        "archive",
        "mass-publish",
    ]
    for name, attack in figures.items():
        for kind, f in attack["victim"].items():
            if not isinstance(f, dict):  # worst_p99_ratio
                continue
            # every round answered 2xx (a POST 202, or 200 when its verdict came from the cache)
            assert f["idle"]["n"] == 10 and _answered(f["statuses_idle"], 10), (name, kind, f)
            if name == "slow-direct":  # gunicorn alone: its threads held, what the proxy is for
                continue
            assert f["attack"]["n"] == 10 and _answered(f["statuses_attack"], 10), (name, kind, f)
            assert f["p99_ratio"] > 0
    # the slow clients meet nginx and never reach gunicorn; chunked bodies are paid for as read
    # (over the limit 413, past the team's bytes 429, whichever door); the logs archive is
    # built once and shared, the rest refused while one is built; publication is bounded a day
    slow = figures["slow-proxy"]["hostile"]["statuses"]  # "header: 408", "body: 429", "body: closed", ...
    assert not [how for how in slow if how.split(": ")[1][:1] in ("2", "5")], slow
    for name in ("chunked", "chunked-proxy"):
        assert set(figures[name]["hostile"]["statuses"]) <= {"413", "429", "0"}, figures[name]["hostile"]
        assert "413" in figures[name]["hostile"]["statuses"], figures[name]["hostile"]
    assert figures["archive"]["hostile"]["statuses"].get("200", 0) >= 1, figures["archive"]["hostile"]
    assert figures["mass-publish"]["publish_answers"] == {"200": 10, "429": 30}
    hostile = figures["round1"]["hostile"]
    assert hostile["batch"]["accepted"] == 500 and hostile["statuses"]["batch"] == {"202": 1}
    polls = hostile["long_polls"]
    assert (
        polls["sent"]
        == 20
        == polls["held"] + polls["answered_at_once"]
        == sum(hostile["statuses"]["long-poll"].values())
    )
    assert polls["held"] == polls["held_until_verdict"] + polls["held_until_wait_ran_out"]
    # over GRADER_MAX_PATCH_BYTES: refused at intake (413), or before the body is read when the
    # team is past its requests in progress or its bytes a second (429; the client may then see
    # its connection closed under the body it was still sending: 0); never accepted
    patches = hostile["statuses"]["2 MiB patch"]
    assert "413" in patches and set(patches) <= {"413", "429", "0"}, patches


def test_throughput_counts_every_accepted_post_stored_and_queued(tmp_path):
    """benchmarks/throughput.py, small: figures printed, and every 202 is in the database and on the queue."""
    out = tmp_path / "throughput.json"
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "throughput.py"),
            "--clients",
            "4",
            "--client-processes",
            "2",
            "--seconds",
            "2",
            "--warmup",
            "0.5",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    print(run.stdout)
    assert run.returncode == 0, run.stdout + run.stderr
    for line in ("accepted", "p99", "CPU over the window", "clients", "bookkeeping"):
        assert line in run.stdout
    f = json.loads(out.read_text())
    assert f["reconciles"] and f["accepted_all"] == f["in_database"] == f["on_queue"] > 0
    assert f["statuses"] == {"202": f["accepted_all"]}  # nothing refused, nothing failed
    assert 0 < f["accepted"] <= f["accepted_all"] and f["client_cpu_ms_per_request"] > 0
