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

It also prints the **budget** of a POST: the API processes measure each request's stages
(grader/budget.py, turned on by GRADER_BUDGET_DIR for this run; --no-budget leaves it off)
in CPU (the thread's) and wall time, each stage without the stages inside it: reading the
JSON, validation, the key's lookup, the body's bytes charged in Redis, intake's checks,
the cache lookup, the writer's turn, each database statement by its verb, the quota's
counts, the insert, the enqueue, the answer read back and serialised, and the request's
rest (Flask); then what the processes spent outside any request (gunicorn: the HTTP
parsing, the threads' hand-offs, the access log). A stage's wall time beyond its CPU is
waiting: for a lock or a turn, for a reply, or for the interpreter's lock or a core. The
figures are over the measured window (the difference of two readings), per accepted POST,
beside the machine's busy share and load average, and against issue 21's target
(500 accepted/s, p99 under 100 ms).

--profile N profiles N POSTs in this process through the real app (Flask's test client,
the real store and Redis; no HTTP server) and prints where the time went.

--against DIR runs another checkout's API (DIR's grader/, by PYTHONPATH) and this one's in
turns, --rounds runs each, and compares them: a change's before and after under the same
load on a shared machine.

    .venv/bin/python benchmarks/throughput.py                  # SQLite
    .venv/bin/python benchmarks/throughput.py --postgres
    .venv/bin/python benchmarks/throughput.py --profile 500 --backlog 8000
    git worktree add --detach ../grader-before HEAD~1
    .venv/bin/python benchmarks/throughput.py --against ../grader-before --rounds 2 --seconds 10
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import multiprocessing
import os
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

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
TARGET_PER_S, TARGET_P99_MS = 500, 100  # issue 21
ROUTE = "POST /v1/submissions"


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


def measure(args: argparse.Namespace, database_url: str | None, db_pids, tree: Path | None = None) -> dict:
    """One run; `tree`: the API runs from that checkout's grader/ (PYTHONPATH) instead of this one's."""
    lifted = "10000000"
    env = {"GRADER_DAILY_QUOTA": lifted, "GRADER_QUEUED_QUOTA": lifted, "GRADER_QUEUE_MAX": lifted}
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    budget_dir = None if args.no_budget else Path(tempfile.mkdtemp(prefix="grader-budget."))
    if budget_dir is not None:
        env["GRADER_BUDGET_DIR"] = str(budget_dir)
    try:
        return {**_measure(args, database_url, db_pids, env, budget_dir), "commit": _commit(tree or ROOT)}
    finally:
        if budget_dir is not None:
            shutil.rmtree(budget_dir, ignore_errors=True)


def _measure(args: argparse.Namespace, database_url: str | None, db_pids, env: dict, budget_dir: Path | None) -> dict:
    from grader import budget

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
        t0, api0, redis0, db0, busy0, master0 = (
            time.time(),
            cpu_seconds(api_pids),
            cpu_seconds(redis_pids),
            cpu_seconds(dbp),
            machine_cpu(),
            cpu_seconds([svc.api.pid]),
        )
        load0 = os.getloadavg()
        stages0 = budget.read(budget_dir) if budget_dir else {}
        time.sleep(max(0.0, stop_at - time.time()))
        t1, api1, redis1, db1, busy1, master1 = (
            time.time(),
            cpu_seconds(api_pids),
            cpu_seconds(redis_pids),
            cpu_seconds(dbp),
            machine_cpu(),
            cpu_seconds([svc.api.pid]),
        )
        load1 = os.getloadavg()
        stages1 = budget.read(budget_dir) if budget_dir else {}
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
        "load_average": [round(x, 2) for x in (*load0, *load1)],
        "budget": stage_budget(stages0, stages1, len(ok), api * 1000 / len(ok) if ok else None, master1 - master0)
        if budget_dir
        else None,
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


def _commit(tree: Path) -> str:
    import subprocess

    git = ["git", "-C", str(tree)]
    try:
        head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run([*git, "status", "--porcelain", "grader"], capture_output=True, text=True)
    except OSError:
        return "?"
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def stage_budget(before: dict, after: dict, accepted: int, api_ms: float | None, master_s: float) -> dict:
    """The API processes' stage totals over the window (after less before, per process), per
    accepted POST: each stage's CPU and wall ms and how often a POST enters it; the CPU of
    the processes outside any request; and what the measurement itself costs."""
    stages: dict[str, list[float]] = {}
    posts = other_requests = 0.0
    in_requests = process = 0.0
    for pid, b in after.items():
        a = before.get(pid, {"process_cpu": 0.0, "routes": {}})
        process += b["process_cpu"] - a["process_cpu"]
        for route, totals in b["routes"].items():
            old = a["routes"].get(route, {})
            d = {k: [x - y for x, y in zip(v, old.get(k, [0, 0.0, 0.0]), strict=True)] for k, v in totals.items()}
            in_requests += d.get("", [0, 0.0, 0.0])[1]
            if route != ROUTE:
                other_requests += d.get("", [0, 0.0, 0.0])[0]
                continue
            posts += d.get("", [0, 0.0, 0.0])[0]
            for name, v in d.items():
                if name:
                    t = stages.setdefault(name, [0, 0.0, 0.0])
                    for i in range(3):
                        t[i] += v[i]
    if not posts:
        return {}
    n = posts
    request = sum(v[1] for v in stages.values())
    rows = sorted(
        ({"stage": k, "per_post": round(v[0] / n, 2), "cpu_ms": v[1] * 1000 / n, "wall_ms": v[2] * 1000 / n}
         for k, v in stages.items()),
        key=lambda r: -r["cpu_ms"],
    )  # fmt: skip
    outside = (process - in_requests) * 1000 / n
    return {
        "posts": int(posts),
        "other_requests": int(other_requests),
        "stages": [{**r, "cpu_ms": round(r["cpu_ms"], 3), "wall_ms": round(r["wall_ms"], 3)} for r in rows],
        "request_cpu_ms": round(request * 1000 / n, 3),
        "request_wall_ms": round(sum(v[2] for v in stages.values()) * 1000 / n, 3),
        "outside_requests_cpu_ms": round(outside, 3),
        "master_cpu_ms": round(master_s * 1000 / max(accepted, 1), 3),
        "workers_cpu_ms": round(process * 1000 / n, 3),
        "api_cpu_ms_per_accepted": round(api_ms, 3) if api_ms is not None else None,
        "measurement_cost_ms": round(_stage_cost() * sum(r["per_post"] for r in rows), 3),
        "stage_cost_us": round(_stage_cost() * 1000, 2),
    }


def _stage_cost() -> float:
    """What one stage of grader/budget.py costs when on, in ms (this process, a request's
    stages measured as the API's are)."""
    from grader import budget

    if not budget.enabled():
        budget.enable(Path(tempfile.mkdtemp(prefix="grader-budget-cost.")))
    app = budget.Request(lambda environ, start: [b""])
    n = 2000

    def many(environ, start):
        for _ in range(n):
            with budget.stage("x"):
                pass
        return [b""]

    best = float("inf")
    for _ in range(5):
        t = time.thread_time()
        budget.Request(many)({"REQUEST_METHOD": "GET", "PATH_INFO": "/cost"}, None)
        t1 = time.thread_time()
        app({"REQUEST_METHOD": "GET", "PATH_INFO": "/cost"}, None)
        best = min(best, ((t1 - t) - (time.thread_time() - t1)) / n)
    return best * 1000


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
    la = f["load_average"]
    print(
        f"the machine: {f['machine_busy_share']:.0%} busy over the window, load average {la[0]:.2f} "
        f"(1 min) at its start and {la[3]:.2f} at its end ({la[5]:.2f} over 15 min), {cores:g} cores; code at "
        f"{f['commit']}"
    )
    if f.get("budget"):
        report_budget(f["budget"])
    met = f["accepted_per_s"] >= TARGET_PER_S and f["p99_ms"] is not None and f["p99_ms"] < TARGET_P99_MS
    print(
        f"target (issue 21): >= {TARGET_PER_S} accepted/s with p99 < {TARGET_P99_MS} ms: "
        + ("met" if met else f"NOT met ({f['accepted_per_s']:.0f}/s, p99 {f['p99_ms']} ms)")
    )


def report_budget(b: dict) -> None:
    if not b:
        print("budget: no POST measured")
        return
    print(
        f"budget of one POST ({b['posts']} POSTs measured in the API processes over the window): "
        "CPU ms, wall ms, waiting (wall - CPU) ms, times a POST"
    )
    w = max(len(r["stage"]) for r in b["stages"]) + 1
    for r in b["stages"]:
        print(
            f"  {r['stage']:<{w}} {r['cpu_ms']:7.3f} {r['wall_ms']:8.3f} {r['wall_ms'] - r['cpu_ms']:8.3f}  "
            f"x{r['per_post']:g}"
        )
    print(
        f"  {'the request, all stages':<{w}} {b['request_cpu_ms']:7.3f} {b['request_wall_ms']:8.3f} "
        f"{b['request_wall_ms'] - b['request_cpu_ms']:8.3f}"
    )
    print(
        f"  {'gunicorn: the workers outside any request':<{w}} {b['outside_requests_cpu_ms']:7.3f}\n"
        f"  {'gunicorn: the master':<{w}} {b['master_cpu_ms']:7.3f}\n"
        f"  {'the API processes in all (/proc), per accepted POST':<{w}} {b['api_cpu_ms_per_accepted']:7.3f}\n"
        f"  of which the measurement itself (a stage costs {b['stage_cost_us']} us): about "
        f"{b['measurement_cost_ms']} ms"
    )
    sql = [r for r in b["stages"] if r["stage"].startswith("database statement: ")]
    verbs: dict[str, float] = {}
    for r in sql:
        verb = r["stage"].removeprefix("database statement: ").split(" (")[0]
        verbs[verb] = verbs.get(verb, 0) + r["per_post"]
    print(
        f"database statements: {sum(verbs.values()):.2f} a POST ("
        + ", ".join(f"{v} {n:.2f}" for v, n in verbs.items())
        + f"), {sum(r['cpu_ms'] for r in sql):.3f} ms of CPU, {sum(r['wall_ms'] for r in sql):.3f} ms of wall time"
    )
    turns = [r for r in b["stages"] if r["stage"].startswith("database: waiting")]
    waited = b["request_wall_ms"] - b["request_cpu_ms"]
    redis = [r for r in b["stages"] if "(Redis)" in r["stage"]]
    print(
        f"waiting a POST: {waited:.1f} ms, of which for a turn to write (this process's, the host's, a shared "
        f"write run by another thread) {sum(r['wall_ms'] - r['cpu_ms'] for r in turns):.1f} ms; Redis: "
        f"{sum(r['per_post'] for r in redis):.2f} round trips a POST, {sum(r['cpu_ms'] for r in redis):.3f} ms "
        f"of CPU, {sum(r['wall_ms'] for r in redis):.3f} ms of wall time"
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
    ap.add_argument("--no-budget", action="store_true", help="leave the API's stage budget off (grader/budget.py)")
    ap.add_argument("--out", default=None, help="where the figures go as JSON [benchmarks/out/throughput-DB.json]")
    ap.add_argument(
        "--against",
        type=Path,
        default=None,
        metavar="DIR",
        help="another checkout (git worktree add --detach DIR COMMIT): its API and this one's take turns, "
        "--rounds times each, in this run, and their figures are compared",
    )
    ap.add_argument("--rounds", type=int, default=2, help="with --against: runs of each side")
    args = ap.parse_args()
    if args.against is not None and args.database_url:
        ap.error("--against needs a database of its own for every run: SQLite or --postgres")
    if args.profile:
        with private_postgres() if args.postgres else contextlib.nullcontext() as pg:
            profile(args.profile, pg.url if pg is not None else args.database_url, args.backlog)
        return 0
    sides = [args.against.resolve(), None] if args.against is not None else [None]
    runs = []
    for _ in range(args.rounds if args.against is not None else 1):
        for tree in sides:
            runs.append(one(args, tree))
            if args.against is not None:
                print(summary(runs[-1]), flush=True)
    figures = runs[-1]
    report(figures)
    if args.against is not None:
        compare(runs)
    OUT.mkdir(parents=True, exist_ok=True)
    out = args.out or str(OUT / f"throughput-{figures['database'].split('+')[0]}.json")
    with open(out, "w") as fh:
        json.dump(runs if args.against is not None else figures, fh, indent=1)
    return 0 if all(f["reconciles"] for f in runs) else 1


def one(args: argparse.Namespace, tree: Path | None) -> dict:
    with private_postgres() if args.postgres else contextlib.nullcontext() as pg:
        url = pg.url if pg is not None else args.database_url
        return measure(args, url, (lambda: descendants(pg.postmaster())) if pg is not None else None, tree)


def summary(f: dict) -> str:
    la = f["load_average"]
    return (
        f"{f['commit']:>16}: {f['accepted_per_s']:6.1f} accepted/s, p50 {f['p50_ms']} ms, p99 {f['p99_ms']} ms, "
        f"API {f['api_cpu_ms_per_accepted']} ms CPU a POST; machine {f['machine_busy_share']:.0%} busy, "
        f"load average {la[0]:.1f} -> {la[3]:.1f}"
    )


def compare(runs: list[dict]) -> None:
    """Each side's runs, and the medians side by side."""
    print("the two sides, taking turns in this run (medians over their runs):")
    for commit in dict.fromkeys(f["commit"] for f in runs):
        mine = [f for f in runs if f["commit"] == commit]

        def med(key: str, mine: list[dict] = mine) -> float:
            return statistics.median(f[key] for f in mine if f[key] is not None)

        la = [f["load_average"][0] for f in mine] + [f["load_average"][3] for f in mine]
        print(
            f"  {commit:>16}: {med('accepted_per_s'):6.1f} accepted/s, p50 {med('p50_ms'):.1f} ms, "
            f"p99 {med('p99_ms'):.1f} ms, API {med('api_cpu_ms_per_accepted'):.2f} ms CPU a POST "
            f"({len(mine)} runs; machine {statistics.median(f['machine_busy_share'] for f in mine):.0%} busy, "
            f"load average {min(la):.1f} to {max(la):.1f})"
        )


if __name__ == "__main__":
    sys.exit(main())
