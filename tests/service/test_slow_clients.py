"""Slow clients against the deployment as shipped (issue 20): nginx, configured by
`grader proxy config`, in front of `grader serve` (gunicorn), with a grading worker.

gunicorn's threads read requests themselves: 100 connections that never finish their
headers, or that send their body a byte every 5 s, held every thread of the API and
every other team's request timed out after 30 s. Behind nginx a slow client holds one of
nginx's sockets until its timeout, never a thread: here 200 slow-header and 200 slow-body
connections (half of the bodies with a valid key) come from one address while another
team, from another address, sends its GET, POST and long-poll; each must be answered as
it is idle (a timed bound is the benchmark's: benchmarks/fairness.py's slow-proxy attack
prints the p99s idle and under attack and their ratio; here they are printed only). SQLite
only: the store is not what is measured."""

from __future__ import annotations

import time

import pytest

from helpers.hostile_clients import PACE, SlowClients
from helpers.proxy import PROXIED, nginx_in_front, source_session
from helpers.service import api_process, make_service, new_key, outside_patch, worker_process

pytestmark = pytest.mark.service
TASK = "calc-mean-empty"
VICTIM, HOSTILE = "127.0.0.2", "127.0.0.3"  # two client addresses of this machine
ROUNDS = 15


@pytest.fixture
def database_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path}/grader.db"


def _p99(values: list[float]) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * 0.99))]


class Victim:
    """Another team, from another address: a GET of its submission, a POST, a long-poll."""

    KINDS = ("GET", "POST", "long-poll")

    def __init__(self, url: str, key: str):
        self.url, self.http, self.n = url, source_session(VICTIM, key), 0
        self.sub = self._post()[1]

    def _post(self, wait: str = "") -> tuple[float, str]:
        self.n += 1
        t = time.monotonic()
        r = self.http.post(
            f"{self.url}/v1/submissions{wait}", json={"task_id": TASK, "patch": outside_patch(f"v{self.n}")}, timeout=60
        )
        took = time.monotonic() - t
        assert r.status_code in (200, 202), r.text
        return took, r.json()["id"]

    def rounds(self, count: int) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {k: [] for k in self.KINDS}
        for _ in range(count):
            t = time.monotonic()
            r = self.http.get(f"{self.url}/v1/submissions/{self.sub}", timeout=60)
            out["GET"].append(time.monotonic() - t)
            assert r.status_code == 200, r.text
            out["POST"].append(self._post()[0])
            took, sid = self._post("?wait=20")
            out["long-poll"].append(took)
            done = self.http.get(f"{self.url}/v1/submissions/{sid}", timeout=60).json()
            assert done["verdict"] == "PATCH FAILED", done  # held until the worker's verdict, not the wait's end
            time.sleep(0.1)
        return out


def test_slow_clients_hold_nginx_sockets_not_the_apis_threads(database_url, redis_url, tmp_path):
    svc = make_service(database_url, redis_url)
    hostile, victim_key = new_key(svc, "hostile"), new_key(svc, "victim")
    svc.close()
    env = {"GRADER_MAX_WAIT": "30"}
    with (
        api_process(database_url, redis_url, tmp_path, "--workers", "2", **env, **PROXIED) as api,
        worker_process(database_url, redis_url, tmp_path, **env),
        nginx_in_front(api, **env) as url,
    ):
        victim = Victim(url, victim_key)
        victim.rounds(3)  # warm: both API processes, the worker, the connection
        idle = victim.rounds(ROUNDS)
        attack = SlowClients(url, hostile, address=HOSTILE, headers=200, bodies=200)
        attack.start()
        try:
            deadline = time.monotonic() + 60
            while attack.opened["header"] < 200 or attack.opened["body"] < 200:
                assert time.monotonic() < deadline, attack.opened
                time.sleep(0.2)
            time.sleep(1.0)
            began = time.monotonic()
            under = victim.rounds(ROUNDS)
            while time.monotonic() - began < 3 * PACE:  # past nginx's header timeout, with the slow ones back
                more = victim.rounds(1)
                for kind in Victim.KINDS:
                    under[kind] += more[kind]
            # the attack stood throughout: slow bodies are still held open (up to the
            # per-address bound), and the slow headers were timed out and came again
            held_bodies = attack.held("body")
        finally:
            attack.finish()
    # every round of the victim was answered as it should be while the attack stood (each
    # request asserted in Victim.rounds; before nginx, every one timed out after 30 s); the
    # p99s are printed, not asserted: benchmarks/fairness.py's slow-proxy attack holds the 3x
    for kind in Victim.KINDS:
        assert len(under[kind]) >= ROUNDS, (kind, len(under[kind]))
        print(f"{kind}: p99 {_p99(under[kind]) * 1000:.0f} ms under attack, {_p99(idle[kind]) * 1000:.0f} ms idle")
    assert held_bodies >= 50, (held_bodies, attack.ended)
    refused = sum(n for (kind, how), n in attack.ended.items() if kind == "body" and how == "429")
    assert refused >= 100, attack.ended  # past the per-address bound: answered at once, nothing held
    assert attack.ended[("header", "closed")] >= 150, attack.ended  # cut off at nginx's header timeout
    assert not any(how.startswith("5") for (_, how) in attack.ended), attack.ended
