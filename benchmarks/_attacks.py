"""The hostile clients of issue 20, for benchmarks/fairness.py: each starts in the
background, runs until stopped, and says what it got back (`statuses`, and its own
figures in `report()`). Every one of them comes from HOSTILE_ADDRESS, so that behind nginx
its per-address bounds count the hostile team and not the victim.

- SlowClients: connections that send their headers, or their body, a byte every 5 s;
- ChunkedStream: 8 MiB bodies sent with Transfer-Encoding: chunked, back to back;
- Downloaders: 8 clients downloading a large run's logs archive again and again;
- Readers: 32 anonymous readers of the leaderboard (API and portal pages), four reads a second each;
- many_public_runs: 10,000 public runs written straight into the database, as if
  published over months by a hundred teams (the per-team bound on publishing stops one
  team from doing it through the API: fairness.py shows that too).
"""

from __future__ import annotations

import errno
import json
import secrets
import select
import socket
import threading
import time
from collections import Counter
from urllib.parse import urlsplit

import requests

from _service import HOSTILE_ADDRESS, TASK, cheap_patch, source_session

PACE = 5.0  # seconds between two bytes of a slow client


class SlowClients:
    """`headers` connections sending their request's header a byte every PACE seconds and
    `bodies` sending a whole header (half of them with the hostile team's key) announcing
    a 100 kB body, then the body a byte every PACE seconds; one the server closes is opened
    again. `statuses` counts how the server ended them."""

    def __init__(self, url: str, key: str, *, headers: int = 200, bodies: int = 200):
        self.url, self.key = url, key
        self.want = {"header": headers, "body": bodies}
        self.open: dict[socket.socket, str] = {}
        self.statuses: Counter[str] = Counter()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _connect(self, kind: str, n: int) -> None:
        parts = urlsplit(self.url)
        try:
            conn = socket.create_connection(
                (parts.hostname, parts.port), timeout=10, source_address=(HOSTILE_ADDRESS, 0)
            )
        except OSError:
            self.statuses[f"{kind}: refused"] += 1
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
            return
        self.open[conn] = kind

    def _end(self, conn: socket.socket, how: str) -> None:
        kind = self.open.pop(conn)
        conn.close()
        self.statuses[f"{kind}: {how}"] += 1

    def _run(self) -> None:
        n = 0
        while not self.stop.is_set():
            for kind, want in self.want.items():
                while sum(1 for k in self.open.values() if k == kind) < want and not self.stop.is_set():
                    n += 1
                    self._connect(kind, n)
            socks = list(self.open)
            for at in range(0, len(socks), 500):
                readable, _, _ = select.select(socks[at : at + 500], [], [], 0)
                for conn in readable:
                    try:
                        data = conn.recv(4096)
                    except OSError:
                        data = b""
                    self._end(conn, data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/") else "closed")
            for conn in list(self.open):
                try:
                    conn.send(b"a" if self.open[conn] == "header" else b" ")
                except OSError as exc:
                    self._end(conn, "closed" if exc.errno != errno.EAGAIN else "full")
            self.stop.wait(PACE)
        for conn in list(self.open):
            self.open.pop(conn)
            conn.close()

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(timeout=60)

    def report(self) -> dict:
        return {"statuses": dict(self.statuses)}


class ChunkedStream:
    """`streams` senders of `size`-byte bodies with Transfer-Encoding: chunked, one after
    another each (what the byte bucket never charged before)."""

    def __init__(self, url: str, key: str, *, streams: int = 2, size: int = 8 * 2**20):
        self.url, self.key, self.size = url, key, size
        self.statuses: Counter[int] = Counter()
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._send, args=(s,), daemon=True) for s in range(streams)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def _send(self, s: int) -> None:
        http = source_session(HOSTILE_ADDRESS, self.key)
        n = 0
        while not self.stop.is_set():
            n += 1
            body = json.dumps({"task_id": TASK, "patch": cheap_patch(f"chunked-{s}-{n}", pad=self.size)}).encode()
            pieces = (body[i : i + 65536] for i in range(0, len(body), 65536))
            try:
                code = http.post(
                    f"{self.url}/v1/submissions", data=pieces, headers={"Content-Type": "application/json"}, timeout=180
                ).status_code
            except requests.RequestException:
                code = 0
            with self.lock:
                self.statuses[code] += 1

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=180)

    def report(self) -> dict:
        return {"statuses": dict(self.statuses)}


class Downloaders:
    """`count` clients downloading the run's logs archive again and again, each as soon as
    the last ended (a 429 is not waited out), following its pages."""

    def __init__(self, url: str, key: str, run: str, *, count: int = 8):
        self.url, self.key, self.run = url, key, run
        self.statuses: Counter[int] = Counter()
        self.sizes: dict[str, int] = {}
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._download, daemon=True) for _ in range(count)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def _download(self) -> None:
        http = source_session(HOSTILE_ADDRESS, self.key)
        after = ""
        while not self.stop.is_set():
            try:
                r = http.get(
                    f"{self.url}/v1/runs/{self.run}/logs", params={"after": after} if after else {}, timeout=600
                )
                code, size = r.status_code, len(r.content)
                following = r.headers.get("Grader-Next-After", "") if code == 200 else after
            except requests.RequestException:
                code, size, following = 0, 0, ""
            with self.lock:
                self.statuses[code] += 1
                if code == 200:
                    self.sizes[after or "first"] = size
            after = following
            if code != 200:
                time.sleep(0.05)

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=600)

    def report(self) -> dict:
        return {"statuses": dict(self.statuses), "page_bytes": self.sizes}


class Readers:
    """32 anonymous readers of the leaderboard, four reads a second each: every other one
    GET /v1/leaderboard, the others the portal's first five pages in turn."""

    def __init__(self, url: str, *, count: int = 32, every: float = 0.25):
        self.url, self.every = url, every
        self.statuses: Counter[int] = Counter()
        self.ms: list[float] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._read, args=(i,), daemon=True) for i in range(count)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def _read(self, i: int) -> None:
        http, page = source_session(HOSTILE_ADDRESS), 0
        while not self.stop.is_set():
            page += 1
            path = "/v1/leaderboard" if i % 2 else f"/leaderboard?page={page % 5 + 1}"
            t = time.monotonic()
            try:
                code = http.get(f"{self.url}{path}", timeout=120).status_code
            except requests.RequestException:
                code = 0
            with self.lock:
                self.statuses[code] += 1
                if code == 200:
                    self.ms.append((time.monotonic() - t) * 1000)
            self.stop.wait(self.every)

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=120)

    def report(self) -> dict:
        return {"statuses": dict(self.statuses)}


def many_public_runs(database_url: str, count: int, like_run: str) -> None:
    """`count` public runs with one finished submission each, over 100 teams, their stored
    figures those of the run `like_run` (by public id) as the service computed them."""
    from sqlalchemy import insert, select

    from grader.store import submissions as subs
    from grader.store.db import Database
    from grader.store.keys import create_team
    from grader.store.models import Run, RunFigures, Status, Submission, utcnow

    db = Database(database_url)
    try:
        with db.read() as s:
            model = s.get(Run, like_run)
            figures = s.scalar(select(RunFigures.figures).where(RunFigures.run_id == like_run))
        with db.write() as s:
            teams = [create_team(s, f"published-{secrets.token_hex(4)}-{n}").id for n in range(100)]
        now = utcnow()
        runs, rows = [], []
        for n in range(count):
            team, name = teams[n % 100], f"published-{n}"
            runs.append(
                {
                    "id": secrets.token_hex(8),
                    "team_id": team,
                    "name": name,
                    "public": True,
                    "created_at": now,
                    "published_at": now,
                    "figures_stale": False,
                    "figures_key": model.figures_key,
                    "figures_at": now,
                    "board_listed": True,
                    "board_complete": model.board_complete,
                    "board_resolved": model.board_resolved,
                    "board_solve": model.board_solve,
                    "board_success": model.board_success,
                    "board_attempted": model.board_attempted,
                    "board_tasks": model.board_tasks,
                }
            )
            rows.append(
                {
                    "id": subs.new_id(),
                    "team_id": team,
                    "task_id": TASK,
                    "patch": b"x",
                    "patch_sha256": "0" * 64,
                    "run_id": name,
                    "status": Status.DONE.value,
                    "verdict": "PATCH FAILED",
                    "queued_at": now,
                    "finished_at": now,
                    "attempts": 1,
                    "errors": 0,
                    "cached": False,
                }
            )
        with db.write() as s:
            for at in range(0, count, 2000):
                s.execute(insert(Run), runs[at : at + 2000])
                s.execute(insert(RunFigures), [{"run_id": r["id"], "figures": figures} for r in runs[at : at + 2000]])
                s.execute(insert(Submission), rows[at : at + 2000])
    finally:
        db.dispose()
