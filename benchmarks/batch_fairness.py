"""Another team's single POST while one team's large batch is being accepted (issue 11).

Starts Redis and `grader serve` (gunicorn, 2 processes, no worker: what is accepted stays
queued) on SQLite in a temporary directory, makes two teams, and times the victim team's
single POSTs, one after another: first on the idle service, then while the bulk team's
batch of --count items is being accepted. Prints p50 / p99 / max of both, in the same run,
and how long the batch took. On a machine busy with other work the HTTP figures carry its
noise, so the database's share is measured apart too: a probe in this process takes
SQLite's write lock (BEGIN IMMEDIATE, ROLLBACK) every 10 ms and times how long it waited.
Intake stores a batch in chunks of 500 items, each its own write transaction
(grader/intake.py), so the victim waits for one chunk at most, not for the whole batch.

    .venv/bin/python benchmarks/batch_fairness.py --count 10000
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import threading
import time

import requests

from _service import TASK, Running, figures, percentile


def patch(tag: str, i: int, size: int = 0) -> str:
    """A unique patch of about `size` bytes (its added line padded)."""
    return f"--- a/{tag}-{i}.txt\n+++ b/{tag}-{i}.txt\n@@ -0,0 +1 @@\n+{i}{'x' * size}\n"


def p99(ms: list[float]) -> float:
    return percentile(ms, 0.99)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=10_000, help="items in the bulk team's batch")
    ap.add_argument("--patch-bytes", type=int, default=0, help="pad each of the batch's patches to about this size")
    ap.add_argument("--idle", type=int, default=40, help="victim POSTs timed on the idle service")
    args = ap.parse_args()
    env = {
        "GRADER_CACHE": "false",
        "GRADER_DAILY_QUOTA": str(args.count * 2),
        "GRADER_QUEUED_QUOTA": str(args.count * 2),
        "GRADER_QUEUE_MAX": str(args.count * 4),
    }
    with Running(env, appendonly=False, prefix="grader-fairness.") as svc:
        keys = {team: svc.key(team) for team in ("bulk", "victim")}
        url = svc.url
        state = svc.state
        victim = requests.Session()
        victim.headers["Authorization"] = f"Bearer {keys['victim']}"
        n = [0]

        def one() -> tuple[float, int]:
            n[0] += 1
            t = time.monotonic()
            r = victim.post(
                f"{url}/v1/submissions", json={"task_id": TASK, "patch": patch("victim", n[0])}, timeout=120
            )
            return (time.monotonic() - t) * 1000, r.status_code

        for _ in range(5):  # warm both API processes
            one()
        idle = [one()[0] for _ in range(args.idle)]
        items = [{"task_id": TASK, "patch": patch("bulk", i, args.patch_bytes)} for i in range(args.count)]
        answer: dict = {}

        def bulk() -> None:
            t = time.monotonic()
            r = requests.post(
                f"{url}/v1/submissions/batch",
                json=items,
                timeout=600,
                headers={"Authorization": f"Bearer {keys['bulk']}"},
            )
            answer.update(status=r.status_code, accepted=r.json().get("accepted"), seconds=time.monotonic() - t)

        waits: list[float] = []

        def probe() -> None:
            conn = sqlite3.connect(state / "grader.db", timeout=60, isolation_level=None)
            while thread.is_alive():
                t = time.monotonic()
                conn.execute("BEGIN IMMEDIATE")
                waits.append((time.monotonic() - t) * 1000)
                conn.execute("ROLLBACK")
                time.sleep(0.01)
            conn.close()

        thread = threading.Thread(target=bulk)
        prober = threading.Thread(target=probe)
        t0 = time.monotonic()
        thread.start()
        prober.start()
        busy, codes, at = [], [], []
        while thread.is_alive():
            at.append(time.monotonic() - t0)
            ms, code = one()
            busy.append(ms)
            codes.append(code)
        thread.join()
        prober.join()
        print(
            f"batch of {args.count}: HTTP {answer.get('status')}, accepted {answer.get('accepted')} "
            f"in {answer.get('seconds', 0):.1f} s"
        )
        print(f"victim single POST, idle:         {figures(idle)}")
        print(f"victim single POST, during batch: {figures(busy)}; answers {sorted(set(codes))}")
        print(f"wait for SQLite's write lock, during batch: {figures(waits)}")
        slow = sorted(zip(busy, at, strict=True), reverse=True)[:3]
        print("slowest during the batch: " + ", ".join(f"{ms:.0f} ms sent at +{s:.2f} s" for ms, s in slow))
        if idle and busy:
            print(f"p99 during / idle: {p99(busy) / max(p99(idle), 1e-9):.1f}x")
        return 0


if __name__ == "__main__":
    sys.exit(main())
