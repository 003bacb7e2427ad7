"""The leaderboard at scale (issue 22): many public runs of many graded tasks, read through
the service.

Writes a suite of --tasks tasks (copies of an example task, dated over five years), starts
a private PostgreSQL (--sqlite: SQLite in the service's directory), Redis and `grader
serve` (gunicorn, one process: the filtered boards are kept per process, so that cold and
warm are told apart), and writes public runs of about --tasks graded submissions each
straight into the store's tables in bulk (benchmarks/_board_data.py: COPY on PostgreSQL).
First --base-runs runs (the baseline), then up to --runs; at each size, in the same run:

- the first read after the runs' figures were marked stale (every run's figures computed
  again: as after loading, a migration or a change of the task set): its time, per run,
  the API process's peak memory, and the time of another reader's page asked for 1 s
  into it;
- --rounds warm reads of `GET /v1/leaderboard` (its default page, 100 runs) and of the
  portal's `/leaderboard` (50 runs), p50 / p95, and their size;
- --verdicts times: one new verdict written to one run (a submission added and finished
  through grader/store/submissions.py, as a worker finishes one), then the next read: its
  time, and how many runs' figures were computed for it (by their figures_at);
- the board filtered by suite and by a time window (a year of the five), the first read
  after the last change (cold) and --rounds more (warm);
- the SQL statements of a warm page of each (the Flask app in this process over the same
  database, as tests/service/test_leaderboard_cost.py counts them), how many of them read
  submissions and how many runs' figures they computed.

Every read is keyed (a team's API key; a signed-in portal session), so that none is the
answer another reader got (anonymous readers share one per state of the board). The load
average is printed beside every figure: this machine is shared.

    .venv/bin/python benchmarks/board.py                          # 1,000 runs of 2,000 tasks, baseline 10
    .venv/bin/python benchmarks/board.py --runs 100 --tasks 200   # smaller
    .venv/bin/python benchmarks/board.py --sqlite
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import requests

from _board_data import SUITE, load_runs, task_id, write_tasks
from _service import ROOT, Running, descendants, percentile, private_postgres

OUT = ROOT / "benchmarks" / "out"
FILTERS = {"suite": f"suite={SUITE}", "window": "since=2023-01-01&until=2023-12-31"}


def loadavg() -> str:
    return "load " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def summary(ms: list[float]) -> dict[str, Any]:
    q = sorted(ms)
    return {
        "n": len(q),
        "p50_ms": round(statistics.median(q), 1),
        "p95_ms": round(percentile(q, 0.95), 1),
        "max_ms": round(q[-1], 1),
    }


class Readers:
    """A team's keyed API client and its signed-in portal session: reads never served
    from what another reader got."""

    def __init__(self, url: str, key: str):
        self.url = url
        self.api = requests.Session()
        self.api.headers["Authorization"] = f"Bearer {key}"
        self.portal = requests.Session()
        r = self.portal.post(f"{url}/login", data={"key": key}, headers={"Origin": url}, allow_redirects=False)
        if r.status_code != 302:
            raise RuntimeError(f"could not sign in to the portal: {r.status_code}")

    def get(self, path: str) -> tuple[float, int]:
        """One read: milliseconds and bytes."""
        http = self.portal if not path.startswith("/v1/") else self.api
        t = time.perf_counter()
        r = http.get(f"{self.url}{path}", timeout=3600)
        ms = (time.perf_counter() - t) * 1000
        if r.status_code != 200:
            raise RuntimeError(f"GET {path}: {r.status_code} {r.text[:300]}")
        return ms, len(r.content)

    def rounds(self, path: str, n: int) -> dict[str, Any]:
        ms, size = [], 0
        for _ in range(n):
            took, size = self.get(path)
            ms.append(took)
        return {**summary(ms), "bytes": size, "load": os.getloadavg()[0]}


def api_memory(svc: Running) -> dict[str, int]:
    """The gunicorn worker's resident memory now and at its peak, in MiB."""
    out = {"rss_mib": 0, "peak_mib": 0}
    assert svc.api is not None
    for pid in descendants(svc.api.pid)[1:]:  # the master first: its workers after
        try:
            status = dict(
                line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
            )
        except OSError:
            continue
        out["rss_mib"] += int(status.get("VmRSS", "0 kB").split()[0]) // 1024
        out["peak_mib"] += int(status.get("VmHWM", "0 kB").split()[0]) // 1024
    return out


def computed_since(db: Any, since: dt.datetime) -> int:
    """How many runs' figures were stored at or after `since`."""
    from sqlalchemy import func, select

    from grader.store.models import Run

    with db.read() as s:
        return int(s.scalar(select(func.count()).select_from(Run).where(Run.figures_at >= since)) or 0)


def all_stale(db: Any) -> None:
    from sqlalchemy import update

    from grader.store.models import Run

    with db.write() as s:
        s.execute(update(Run).values(figures_stale=True))


def one_verdict(db: Any, run_name: str, task: str, trial: int, verdict: str) -> None:
    """A submission added to a run and finished as a worker finishes one (the verdict
    written, the run marked stale in the same transaction)."""
    from sqlalchemy import insert, select

    from grader.store import runs as store_runs
    from grader.store import submissions as subs
    from grader.store.models import Run, Submission, utcnow
    from grader.verdict import Provenance, Result, Verdict

    with db.read() as s:
        team_id = s.scalar(select(Run.team_id).where(Run.name == run_name))
    sid, job = subs.new_id(), f"board-bench-{run_name}-{trial}"
    with db.write() as s:
        s.execute(
            insert(Submission),
            [
                {
                    "id": sid,
                    "team_id": team_id,
                    "task_id": task,
                    "patch": b"y",
                    "patch_sha256": "1" * 64,
                    "run_id": run_name,
                    "trial": trial,
                    "status": "queued",
                    "job_id": job,
                    "queued_at": utcnow(),
                }
            ],
        )
        store_runs.mark_stale(s, team_id, {run_name})
    claim = subs.claim(db, sid, job, "board-bench", 60)
    assert claim is not None
    subs.finish(
        db,
        claim,
        Result(
            task_id=task,
            verdict=Verdict(verdict),
            explanation="written by benchmarks/board.py",
            provenance=Provenance(patch_sha256="1" * 64, grader_version="bench"),
        ),
    )


@contextlib.contextmanager
def in_process(svc: Running, tasks_dir: Path) -> Iterator[Any]:
    """The Flask app in this process over the service's database and Redis."""
    from grader.app import create_app
    from grader.config import get_settings
    from grader.handles import Handles

    handles = Handles(
        get_settings(
            tasks_dir=tasks_dir,
            environments_dir=ROOT / "environments",
            database_url=svc.database_url,
            redis_url=svc.env["GRADER_REDIS_URL"],
        )
    )
    try:
        yield handles, create_app(service=handles, migrate=False)
    finally:
        handles.close()


def statements(handles: Any, app: Any, key: str) -> dict[str, Any]:
    """The SQL statements of a warm page of the API (keyed) and of the portal (anonymous,
    the first read of this state of the board in this app: computed, not shared), those
    that read submissions, and the runs whose figures were computed."""
    client = app.test_client()
    keyed = {"Authorization": f"Bearer {key}"}
    client.get("/v1/leaderboard", headers=keyed)  # warm: nothing left to compute
    return {
        "api": _counted(handles, client, "/v1/leaderboard", keyed),
        "portal": _counted(handles, client, "/leaderboard", {}),
    }


def _counted(handles: Any, client: Any, path: str, headers: dict[str, str]) -> dict[str, int]:
    from sqlalchemy import event

    from grader import runs as R

    seen: list[str] = []
    views = [0]
    real = R._view

    def view(*a: Any, **kw: Any) -> Any:
        views[0] += 1
        return real(*a, **kw)

    def listener(conn: Any, cur: Any, statement: str, *a: Any) -> None:
        seen.append(statement)

    engines = {handles.db.engine, handles.db._write_engine}
    for e in engines:
        event.listen(e, "before_cursor_execute", listener)
    R._view = view
    try:
        status = client.get(path, headers=headers).status_code
    finally:
        R._view = real
        for e in engines:
            event.remove(e, "before_cursor_execute", listener)
    if status != 200:
        raise RuntimeError(f"GET {path} in this process: {status}")
    return {
        "statements": len(seen),
        "reading_submissions": sum("FROM submissions" in q or "JOIN submissions" in q for q in seen),
        "figures_computed": views[0],
    }


def measure(svc: Running, db: Any, readers: Readers, handles: Any, app: Any, key: str, runs: int, args) -> dict:
    print(f"\n== {runs} runs of {args.tasks} tasks ({loadavg()})", flush=True)
    out: dict[str, Any] = {"runs": runs}
    all_stale(db)
    before = dt.datetime.now(dt.UTC)
    beside: list[float] = []  # another reader's page, asked for 1 s into that first read
    other = threading.Thread(target=lambda: time.sleep(1.0) or beside.append(readers.get("/leaderboard")[0]))
    t = time.perf_counter()
    other.start()
    readers.get("/v1/leaderboard")
    took = time.perf_counter() - t
    other.join()
    computed = computed_since(db, before)
    out["cold"] = {
        "seconds": round(took, 2),
        "computed": computed,
        "ms_per_run": round(took * 1000 / max(1, computed), 1),
        "reader_beside_ms": round(beside[0], 1),
        "load": os.getloadavg()[0],
        **api_memory(svc),
    }
    print(
        f"first read, every run's figures computed: {took:.1f} s for {computed} runs, "
        f"{took * 1000 / max(1, computed):.0f} ms a run; another reader's portal page meanwhile "
        f"{beside[0] / 1000:.1f} s; API process peak {out['cold']['peak_mib']} MiB ({loadavg()})",
        flush=True,
    )
    for name, path in (("api", "/v1/leaderboard"), ("portal", "/leaderboard")):
        out[f"warm_{name}"] = w = readers.rounds(path, args.rounds)
        print(
            f"warm {path}: p50 {w['p50_ms']:.0f} ms, p95 {w['p95_ms']:.0f} ms, "
            f"{w['bytes'] / 1024:.0f} KiB ({loadavg()})",
            flush=True,
        )
    ms, counts = [], []
    for i in range(args.verdicts):  # a trial of its own, of a task no earlier size's verdict took
        run = f"r{(i * 7) % runs:05d}"
        one_verdict(db, run, task_id((runs + i) % args.tasks), 100 + i, ("PASS", "FAIL")[i % 2])
        before = dt.datetime.now(dt.UTC)
        took, _ = readers.get("/v1/leaderboard")
        ms.append(took)
        counts.append(computed_since(db, before))
    out["after_verdict"] = {**summary(ms), "computed": counts, "load": os.getloadavg()[0]}
    print(
        f"after one verdict: p50 {out['after_verdict']['p50_ms']:.0f} ms, p95 {out['after_verdict']['p95_ms']:.0f} ms; "
        f"runs computed per read: {sorted(set(counts))} ({loadavg()})",
        flush=True,
    )
    for name, query in FILTERS.items():
        cold, size = readers.get(f"/v1/leaderboard?{query}")
        warm = readers.rounds(f"/v1/leaderboard?{query}", args.rounds)
        out[f"filtered_{name}"] = {"cold_ms": round(cold, 1), "warm": warm, **api_memory(svc)}
        print(
            f"filtered by {name} ({query}): cold {cold / 1000:.1f} s, warm p50 {warm['p50_ms']:.0f} ms, "
            f"p95 {warm['p95_ms']:.0f} ms, {size / 1024:.0f} KiB; API process peak "
            f"{out[f'filtered_{name}']['peak_mib']} MiB ({loadavg()})",
            flush=True,
        )
    out["statements"] = statements(handles, app, key)
    for name, c in out["statements"].items():
        print(
            f"a warm page ({name}): {c['statements']} SQL statements, {c['reading_submissions']} reading "
            f"submissions, {c['figures_computed']} runs' figures computed",
            flush=True,
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1000, help="public runs on the board at the end")
    ap.add_argument("--tasks", type=int, default=2000, help="tasks in the suite; each run has about as many grades")
    ap.add_argument("--base-runs", type=int, default=10, help="the baseline's runs, measured first in the same run")
    ap.add_argument("--rounds", type=int, default=20, help="warm reads of each page")
    ap.add_argument("--verdicts", type=int, default=5, help="single verdicts written, each followed by a read")
    ap.add_argument("--sqlite", action="store_true", help="SQLite instead of a private PostgreSQL")
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--out", default=None, help="the figures as JSON [benchmarks/out/board-DB.json]")
    args = ap.parse_args()
    if not 0 < args.base_runs <= args.runs:
        ap.error("--base-runs must be between 1 and --runs")
    from grader.store.db import Database

    figures: dict[str, Any] = {"tasks": args.tasks, "cores": os.cpu_count(), "stages": []}
    with contextlib.ExitStack() as stack:
        tasks_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="grader-board.")))
        t = time.perf_counter()
        write_tasks(tasks_dir, args.tasks)
        print(f"{args.tasks} tasks written in {time.perf_counter() - t:.1f} s", flush=True)
        pg = None if args.sqlite else stack.enter_context(private_postgres())
        svc = stack.enter_context(
            Running(
                env={"GRADER_TASKS_DIR": str(tasks_dir)},
                database_url=pg.url if pg else None,
                processes=1,
                appendonly=False,
                prefix="grader-board.",
            )
        )
        figures["database"] = svc.database_url.split(":", 1)[0]
        db = Database(svc.database_url)
        stack.callback(db.dispose)
        key = svc.key("board-reader")
        readers = Readers(svc.url, key)
        handles, app = stack.enter_context(in_process(svc, tasks_dir))
        t = time.perf_counter()
        _ = len(handles.tasks)
        readers.get(f"/v1/tasks?suite={SUITE}")  # the API process reads its task set before anything is timed
        print(f"the task set loaded in {time.perf_counter() - t:.1f} s ({loadavg()})", flush=True)
        have = 0
        for size in sorted({args.base_runs, args.runs}):
            t = time.perf_counter()
            rows = load_runs(db, have, size - have, args.tasks, seed=args.seed)
            took = time.perf_counter() - t
            print(f"{size - have} runs, {rows:,} submissions written in {took:.1f} s ({loadavg()})", flush=True)
            have = size
            stage = measure(svc, db, readers, handles, app, key, size, args)
            stage["written"] = {"submissions": rows, "seconds": round(took, 1)}
            figures["stages"].append(stage)
    report(args, figures)
    return 0


def report(args: argparse.Namespace, figures: dict) -> None:
    out = Path(args.out or OUT / f"board-{figures['database'].split('+')[0]}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=1))
    stages = figures["stages"]
    base, full = stages[0], stages[-1]
    print(
        f"\n{full['runs']} runs against {base['runs']} (the baseline, in the same run), "
        f"{args.tasks} tasks, {figures['database']}:"
    )
    rows = [
        ("first read, ms a run's figures", ("cold", "ms_per_run")),
        ("another reader meanwhile, ms", ("cold", "reader_beside_ms")),
        ("warm /v1/leaderboard p50 ms", ("warm_api", "p50_ms")),
        ("warm /v1/leaderboard p95 ms", ("warm_api", "p95_ms")),
        ("warm /leaderboard p50 ms", ("warm_portal", "p50_ms")),
        ("warm /leaderboard p95 ms", ("warm_portal", "p95_ms")),
        ("after one verdict p50 ms", ("after_verdict", "p50_ms")),
    ]
    for name in FILTERS:
        rows += [
            (f"filtered by {name}, cold ms", (f"filtered_{name}", "cold_ms")),
            (f"filtered by {name}, warm p50 ms", (f"filtered_{name}", "warm", "p50_ms")),
        ]
    for what, path in rows:
        a, b = _at(base, path), _at(full, path)
        print(f"  {what:36} {a:>10.1f} {b:>10.1f}   x{b / a if a else float('nan'):.1f}")
    print(f"figures written to {out}")


def _at(stage: dict, path: tuple[str, ...]) -> float:
    for key in path:
        stage = stage[key]
    return float(stage)


if __name__ == "__main__":
    sys.exit(main())
