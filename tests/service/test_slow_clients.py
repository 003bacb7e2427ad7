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

import errno
import select
import socket
import threading
import time
from collections import Counter

import pytest

from helpers.proxy import PROXIED, connect_from, nginx_in_front, source_session
from helpers.service import api_process, make_service, new_key, outside_patch, worker_process

pytestmark = pytest.mark.service
TASK = "calc-mean-empty"
VICTIM, HOSTILE = "127.0.0.2", "127.0.0.3"  # two client addresses of this machine
PACE = 5.0  # seconds between two bytes of a slow client
ROUNDS = 15


@pytest.fixture
def database_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path}/grader.db"


class SlowClients:
    """`headers` connections that send their request's header a byte every PACE seconds,
    and `bodies` that send a whole header announcing a body and then its body a byte every
    PACE seconds (every other one with `key`); a connection the server closes is opened
    again, so the pressure stays. `ended` counts how the server ended them: the status it
    answered, or 'closed' without an answer."""

    def __init__(self, url: str, *, headers: int, bodies: int, key: str):
        self.url, self.key = url, key
        self.want = {"header": headers, "body": bodies}
        self.open: dict[socket.socket, str] = {}
        self.ended: Counter[tuple[str, str]] = Counter()
        self.opened: Counter[str] = Counter()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _connect(self, kind: str, n: int) -> None:
        try:
            conn = connect_from(HOSTILE, self.url)
        except OSError:
            self.ended[(kind, "refused")] += 1
            return
        conn.setblocking(False)
        if kind == "header":
            first = f"GET /v1/account HTTP/1.1\r\nHost: grader\r\nX-Slow-{n}: "
        else:
            auth = f"Authorization: Bearer {self.key}\r\n" if n % 2 else ""
            first = (
                f"POST /v1/submissions HTTP/1.1\r\nHost: grader\r\n{auth}Content-Type: application/json\r\n"
                "Content-Length: 100000\r\n\r\n{"
            )
        try:
            conn.send(first.encode())
        except OSError:
            conn.close()
            self.ended[(kind, "closed")] += 1
            return
        self.open[conn] = kind
        self.opened[kind] += 1

    def _end(self, conn: socket.socket, how: str) -> None:
        kind = self.open.pop(conn)
        conn.close()
        self.ended[(kind, how)] += 1

    def _answered(self) -> None:
        """Read what the server said to any of them, and forget those it closed."""
        socks = list(self.open)
        for at in range(0, len(socks), 500):
            readable, _, _ = select.select(socks[at : at + 500], [], [], 0)
            for conn in readable:
                try:
                    data = conn.recv(4096)
                except OSError:
                    data = b""
                status = data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/") else "closed"
                self._end(conn, status)

    def _run(self) -> None:
        n = 0
        while not self.stop.is_set():
            for kind, want in self.want.items():
                while sum(1 for k in self.open.values() if k == kind) < want and not self.stop.is_set():
                    n += 1
                    self._connect(kind, n)
            self._answered()
            for conn in list(self.open):
                try:
                    conn.send(b"a" if self.open[conn] == "header" else b" ")
                except OSError as exc:
                    self._end(conn, "closed" if exc.errno != errno.EAGAIN else "full")
            self.stop.wait(PACE)
        for conn in list(self.open):
            self._end(conn, "ours")

    def held(self, kind: str) -> int:
        return sum(1 for k in self.open.values() if k == kind)


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
        attack = SlowClients(url, headers=200, bodies=200, key=hostile)
        attack.thread.start()
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
            attack.stop.set()
            attack.thread.join(timeout=60)
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
