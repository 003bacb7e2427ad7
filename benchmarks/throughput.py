"""Single-POST acceptance throughput at 32 concurrent clients, and what each party spent.

Starts Redis and `grader serve` (gunicorn; no grading worker, so what is accepted stays
queued and the API's intake is all that is measured) on SQLite in a temporary directory,
a private PostgreSQL (--postgres) or an empty database you name (--database-url). Then
--clients clients (threads in --client-processes processes, each with its own keep-alive
connection) POST single submissions, one after another each, for --seconds after a
--warmup. It prints accepted/s and p50 / p99 latency, and where the machine's CPU went
over the measured window: the clients, the API processes, Redis, PostgreSQL, and
everything else on the machine. The client shares the machine with the service, so its
share is part of the figures: the CPU per accepted POST of the API alone bounds what the
cores left to it can take.

The bookkeeping must hold: every POST answered 202 is in the database and on the queue.

Separate from benchmarks/fairness.py because it measures another thing: one team's
greed at full speed, not another team's requests under an attack, and it needs its
clients in processes of their own (a Python client in one process cannot make 32
concurrent requests without becoming the bottleneck it is trying to measure).

--profile N profiles N POSTs in this process through the real app (Flask's test client,
the real store and Redis; no HTTP server) and prints where the time went.

    .venv/bin/python benchmarks/throughput.py                  # SQLite
    .venv/bin/python benchmarks/throughput.py --postgres
    .venv/bin/python benchmarks/throughput.py --profile 500 --backlog 8000
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import multiprocessing
import os
import resource
import statistics
import sys
import threading
import time

from _service import (
    ROOT,
    TASK,
    Running,
    cheap_patch,
    cpu_seconds,
    descendants,
    machine_cpu,
    percentile,
    private_postgres,
)

OUT = ROOT / "benchmarks" / "out"


def _client_process(
    port: int, key: str, threads: int, tag: str, start_at: float, stop_at: float, warm_until: float, results
) -> None:
    """`threads` clients, each POSTing one submission after another until stop_at; sends
    back (latency ms, status, measured) for each request."""
    out: list[tuple[float, int, bool]] = []
    lock = threading.Lock()

    def client(c: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        mine, n = [], 0
        time.sleep(max(0.0, start_at - time.time()))
        while time.time() < stop_at:
            n += 1
            body = json.dumps({"task_id": TASK, "patch": cheap_patch(f"{tag}-{c}-{n}")})
            t = time.time()
            try:
                conn.request("POST", "/v1/submissions", body=body, headers=headers)
                r = conn.getresponse()
                r.read()
                status = r.status
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                status = 0
            mine.append(((time.time() - t) * 1000, status, t >= warm_until))
        conn.close()
        with lock:
            out.extend(mine)

    workers = [threading.Thread(target=client, args=(c,)) for c in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    results.put(out)


def measure(args: argparse.Namespace, database_url: str | None, db_pids) -> dict:
    lifted = "10000000"
    env = {"GRADER_DAILY_QUOTA": lifted, "GRADER_QUEUED_QUOTA": lifted, "GRADER_QUEUE_MAX": lifted}
    with Running(
        env,
        database_url=database_url,
        processes=args.serve_processes,
        threads=args.threads,
        appendonly=True,
        prefix="grader-throughput.",
    ) as svc:
        keys = [svc.key(f"team-{t}") for t in range(args.teams)]
        ctx = multiprocessing.get_context("fork")
        results = ctx.Queue()
        per = [
            args.clients // args.client_processes + (1 if i < args.clients % args.client_processes else 0)
            for i in range(args.client_processes)
        ]
        start_at = time.time() + 1.0
        warm_until, stop_at = start_at + args.warmup, start_at + args.warmup + args.seconds
        port = int(svc.url.rsplit(":", 1)[1])
        procs = [
            ctx.Process(
                target=_client_process,
                args=(port, keys[i % len(keys)], n, f"p{i}", start_at, stop_at, warm_until, results),
            )
            for i, n in enumerate(per)
            if n
        ]
        children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        for p in procs:
            p.start()
        time.sleep(max(0.0, warm_until - time.time()))
        api_pids, redis_pids = descendants(svc.api.pid), [svc.redis.pid]
        dbp = db_pids() if db_pids else []
        t0, api0, redis0, db0, busy0 = (
            time.time(),
            cpu_seconds(api_pids),
            cpu_seconds(redis_pids),
            cpu_seconds(dbp),
            machine_cpu(),
        )
        time.sleep(max(0.0, stop_at - time.time()))
        t1, api1, redis1, db1, busy1 = (
            time.time(),
            cpu_seconds(api_pids),
            cpu_seconds(redis_pids),
            cpu_seconds(dbp),
            machine_cpu(),
        )
        dbp_after = db_pids() if db_pids else []
        db1 += cpu_seconds([p for p in dbp_after if p not in dbp])  # connections opened meanwhile
        samples: list[tuple[float, int, bool]] = []
        for _ in procs:
            samples += results.get(timeout=120)
        for p in procs:
            p.join(timeout=60)
        children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        client_cpu = (children1.ru_utime + children1.ru_stime) - (children0.ru_utime + children0.ru_stime)
        client_seconds = stop_at - start_at  # the clients ran from start_at, warm-up included
        # the bookkeeping: every 202 stored and queued
        from redis import Redis

        from grader.store.db import Database
        from grader.store.models import Submission

        db = Database(svc.database_url)
        with db.read() as s:
            in_db = s.query(Submission).count()
        db.dispose()
        redis = Redis.from_url(svc.env["GRADER_REDIS_URL"])
        # every grading queue: the plain one and one per environment (grader-env-NAME)
        queued = sum(
            redis.llen(k)
            for k in redis.scan_iter(match="rq:queue:grader*")
            if k in (b"rq:queue:grader",) or k.startswith(b"rq:queue:grader-env-")
        )
    measured = [(ms, code) for ms, code, m in samples if m]
    ok = sorted(ms for ms, code in measured if code == 202)
    codes: dict[int, int] = {}
    for _, code, _ in samples:
        codes[code] = codes.get(code, 0) + 1
    accepted_all = codes.get(202, 0)
    window = args.seconds
    machine = (busy1 - busy0) * window / (t1 - t0)  # CPU figures over the window, for the samples' small drift
    cores = os.cpu_count() or 1
    api, rds, dbc = [(b - a) * window / (t1 - t0) for a, b in ((api0, api1), (redis0, redis1), (db0, db1))]
    client_w = client_cpu * window / client_seconds  # the clients' CPU over the measured window, pro rata
    # what one accepted POST costs the machine, every party counted: the bound on accepted/s
    per_post = round((api + rds + dbc + client_w) * 1000 / len(ok), 2) if ok else None
    return {
        "database": "sqlite" if database_url is None else database_url.split(":")[0],
        "clients": args.clients,
        "client_processes": args.client_processes,
        "teams": args.teams,
        "api_processes": args.serve_processes,
        "api_threads": args.threads or "default",
        "seconds": window,
        "accepted": len(ok),
        "accepted_per_s": round(len(ok) / window, 1),
        "p50_ms": round(statistics.median(ok), 1) if ok else None,
        "p99_ms": round(percentile(ok, 0.99), 1) if ok else None,
        "max_ms": round(ok[-1], 1) if ok else None,
        "statuses": {str(k): v for k, v in sorted(codes.items())},
        "cores": cores,
        "cpu_s": {
            "machine": round(machine, 2),
            "clients": round(client_w, 2),
            "api": round(api, 2),
            "redis": round(rds, 2),
            "postgres": round(dbc, 2) if db_pids else None,
            "everything_else": round(machine - client_w - api - rds - (dbc if db_pids else 0), 2),
        },
        "machine_busy_share": round(machine / (cores * window), 3),
        "client_share_of_machine": round(client_w / (cores * window), 3),
        "api_cpu_ms_per_accepted": round(api * 1000 / len(ok), 2) if ok else None,
        "client_cpu_ms_per_request": round(client_cpu * 1000 / max(len(samples), 1), 3),
        "cpu_ms_per_post": per_post,
        "ceiling_per_s": round(cores * 1000 / per_post) if per_post else None,
        "accepted_all": accepted_all,
        "in_database": in_db,
        "on_queue": queued,
        "reconciles": accepted_all == in_db == queued,
    }


def report(f: dict) -> None:
    print(
        f"{f['clients']} clients ({f['client_processes']} processes, {f['teams']} team(s)) for {f['seconds']:g} s, "
        f"database {f['database']}, API {f['api_processes']} processes x {f['api_threads']} threads"
    )
    print(
        f"accepted {f['accepted']} ({f['accepted_per_s']:.0f}/s); latency of an accepted POST p50 {f['p50_ms']} ms, "
        f"p99 {f['p99_ms']} ms, max {f['max_ms']} ms; answers by status {f['statuses']}"
    )
    c, cores = f["cpu_s"], f["cores"]

    def share(s: float | None) -> str:
        return f"{s / (cores * f['seconds']):.0%}" if s is not None else "-"

    print(
        f"CPU over the window ({cores:g} cores x {f['seconds']:g} s = {cores * f['seconds']:.0f} s): machine busy "
        f"{c['machine']} s ({share(c['machine'])}): clients {c['clients']} s ({share(c['clients'])}), "
        f"API {c['api']} s ({share(c['api'])}), Redis {c['redis']} s ({share(c['redis'])}), PostgreSQL "
        f"{c['postgres'] if c['postgres'] is not None else '-'} s ({share(c['postgres'])}), "
        f"everything else {c['everything_else']} s ({share(c['everything_else'])})"
    )
    print(
        f"per accepted POST: API {f['api_cpu_ms_per_accepted']} ms of CPU; per request: client "
        f"{f['client_cpu_ms_per_request']} ms of CPU"
    )
    if f["ceiling_per_s"]:
        print(
            f"ceiling: {f['cpu_ms_per_post']} ms of CPU per POST (API, clients, Redis, PostgreSQL), so {cores:g} "
            f"cores doing nothing else could accept at most {f['ceiling_per_s']:.0f}/s"
        )
    print(
        f"bookkeeping: accepted {f['accepted_all']} (warm-up included) = in the database {f['in_database']} = "
        f"on the queue {f['on_queue']}: {'yes' if f['reconciles'] else 'NO'}"
    )


def profile(n: int, database_url: str | None, backlog: int = 0) -> None:
    """n POSTs through the real app in this process, under cProfile, after `backlog`
    submissions were queued (intake counts the queued ones in every write transaction)."""
    import cProfile
    import pstats
    import tempfile
    from pathlib import Path

    from grader.app import create_app
    from grader.config import get_settings
    from grader.store.keys import create_key

    with Running(prefix="grader-profile.", database_url=database_url) as svc:  # Redis (and a database)
        state = Path(tempfile.mkdtemp(dir=svc.state))
        settings = get_settings(
            database_url=svc.database_url,
            redis_url=svc.env["GRADER_REDIS_URL"],
            tasks_dir=ROOT / "tasks",
            cache_dir=state,
            daily_quota=10**7,
            queued_quota=10**7,
            queue_max=10**7,
        )
        app = create_app(settings)
        with app.extensions["grader"].db.write() as s:
            key = create_key(s, "profile")
        client = app.test_client()
        headers = {"Authorization": f"Bearer {key}"}

        def post(i: int) -> None:
            r = client.post(
                "/v1/submissions", json={"task_id": TASK, "patch": cheap_patch(f"profile-{i}")}, headers=headers
            )
            assert r.status_code == 202, r.data

        for at in range(0, backlog, 1000):
            r = client.post(
                "/v1/submissions/batch",
                headers=headers,
                json=[
                    {"task_id": TASK, "patch": cheap_patch(f"backlog-{j}")} for j in range(at, min(backlog, at + 1000))
                ],
            )
            assert r.status_code == 202, r.data
        for i in range(50):
            post(-1 - i)
        t = time.perf_counter()
        for i in range(n):
            post(i)
        plain = (time.perf_counter() - t) / n
        prof = cProfile.Profile()
        with contextlib.ExitStack():
            prof.enable()
            for i in range(n, 2 * n):
                post(i)
            prof.disable()
    print(
        f"{n} POSTs in-process through the real app, {backlog} queued before: {plain * 1000:.2f} ms each "
        "without the profiler"
    )
    stats = pstats.Stats(prof)
    stats.sort_stats("cumulative").print_stats(r"grader/|redis/client|sqlalchemy/engine/base.*execute\b|pydantic", 40)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--client-processes", type=int, default=4, help="processes the clients' threads run in")
    ap.add_argument("--seconds", type=float, default=20.0, help="the measured window")
    ap.add_argument("--warmup", type=float, default=3.0, help="seconds of the same load before the window")
    ap.add_argument(
        "--teams",
        type=int,
        default=4,
        help="the clients' teams (clients are spread over them; one team may have at most "
        "GRADER_MAX_INFLIGHT_PER_TEAM requests in progress on an API process, so 32 clients of one team "
        "would measure that bound's 429s)",
    )
    ap.add_argument("--serve-processes", type=int, default=2, help="gunicorn processes (`grader serve --workers`)")
    ap.add_argument("--threads", type=int, default=None, help="threads per gunicorn process [serve's default]")
    ap.add_argument("--postgres", action="store_true", help="on a private PostgreSQL server (fsync off)")
    ap.add_argument("--database-url", default=None, help="an empty database [default: SQLite in a temporary dir]")
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="profile N POSTs in-process instead")
    ap.add_argument("--backlog", type=int, default=0, help="with --profile: submissions queued before")
    ap.add_argument("--out", default=None, help="where the figures go as JSON [benchmarks/out/throughput-DB.json]")
    args = ap.parse_args()
    with private_postgres() if args.postgres else contextlib.nullcontext() as pg:
        url = pg.url if pg is not None else args.database_url
        if args.profile:
            profile(args.profile, url, args.backlog)
            return 0
        figures = measure(args, url, (lambda: descendants(pg.postmaster())) if pg is not None else None)
    report(figures)
    OUT.mkdir(parents=True, exist_ok=True)
    out = args.out or str(OUT / f"throughput-{figures['database'].split('+')[0]}.json")
    with open(out, "w") as fh:
        json.dump(figures, fh, indent=1)
    return 0 if figures["reconciles"] else 1


if __name__ == "__main__":
    sys.exit(main())
