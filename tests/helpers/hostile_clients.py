"""Hostile clients and hostile volumes shared by the service tier's tests of issue 20 and
benchmarks/fairness.py (which puts tests/ on its path): the tests assert what is answered
and refused, the benchmark prints the times, and both drive the same attack.

- SlowClients: connections that send their headers, or their body, a byte every PACE s;
- many_public_runs: public runs written straight into the database, as if published over
  months by a hundred teams (the per-team bound on publishing stops one team doing it
  through the API)."""

from __future__ import annotations

import errno
import secrets
import select
import socket
import threading
from collections import Counter
from typing import Any

from helpers.proxy import connect_from

PACE = 5.0  # seconds between two bytes of a slow client


class SlowClients:
    """`headers` connections from `address` sending their request's header a byte every
    PACE seconds, and `bodies` sending a whole header announcing a 100 kB body (every other
    one with `key`), then the body a byte every PACE seconds; a connection the server
    closes is opened again, so the pressure stays. `ended` counts how the server ended
    them, by (kind, how): the status it answered, 'closed' without an answer, 'refused'
    when it would not connect, 'ours' when the attack stopped."""

    def __init__(self, url: str, key: str, *, address: str, headers: int = 200, bodies: int = 200):
        self.url, self.key, self.address = url, key, address
        self.want = {"header": headers, "body": bodies}
        self.open: dict[socket.socket, str] = {}
        self.ended: Counter[tuple[str, str]] = Counter()
        self.opened: Counter[str] = Counter()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(timeout=60)

    def held(self, kind: str) -> int:
        return sum(1 for k in self.open.values() if k == kind)

    def report(self) -> dict:
        return {"statuses": {f"{kind}: {how}": n for (kind, how), n in self.ended.items()}}

    def _connect(self, kind: str, n: int) -> None:
        try:
            conn = connect_from(self.address, self.url)
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
                self._end(conn, data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/") else "closed")

    def _run(self) -> None:
        n = 0
        while not self.stop.is_set():
            for kind, want in self.want.items():
                while self.held(kind) < want and not self.stop.is_set():
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


def many_public_runs(db: Any, count: int, like_run: str, *, task: str, prefix: str = "bulk") -> None:
    """`count` more public runs on the store `db`, each with one finished submission of
    `task`, spread over 100 new teams, their stored figures and board columns those of the
    run named `like_run` as the service computed them."""
    from sqlalchemy import insert, select

    from grader.store import submissions as subs
    from grader.store.keys import create_team
    from grader.store.models import Run, RunFigures, Status, Submission, utcnow

    with db.read() as s:
        model = s.scalar(select(Run).where(Run.name == like_run))
        stored = s.get(RunFigures, model.id)
        figures, summary = stored.figures, stored.summary
    with db.write() as s:
        teams = [create_team(s, f"{prefix}-{secrets.token_hex(4)}-{n}").id for n in range(100)]
    now = utcnow()
    board = {c: getattr(model, c) for c in BOARD_COLUMNS}
    runs, rows = [], []
    for n in range(count):
        team, name = teams[n % 100], f"{prefix}-{n}"
        runs.append(
            {
                "id": secrets.token_hex(8),
                "team_id": team,
                "name": name,
                "public": True,
                "baseline": False,
                "hidden": False,
                "verified": False,
                "created_at": now,
                "published_at": now,
                "figures_stale": False,
                "figures_at": now,
                **board,
            }
        )
        rows.append(
            {
                "id": subs.new_id(),
                "team_id": team,
                "task_id": task,
                "patch": b"x",
                "patch_sha256": "0" * 64,
                "run_id": name,
                "status": Status.DONE.value,
                "verdict": "PASS",
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
            s.execute(
                insert(RunFigures),
                [{"run_id": r["id"], "figures": figures, "summary": summary} for r in runs[at : at + 2000]],
            )
            s.execute(insert(Submission), rows[at : at + 2000])


# what the leaderboard reads of a run, copied from the model run
BOARD_COLUMNS = (
    "figures_key",
    "board_listed",
    "board_complete",
    "board_resolved",
    "board_solve",
    "board_success",
    "board_attempted",
    "board_tasks",
)
