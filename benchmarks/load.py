"""A burst of N submissions through the whole service, and what it cost.

Starts Redis, `grader serve` (gunicorn) and `grader worker` on this machine (SQLite, in a
temporary directory), sends N submissions of a cheap task in batches as fast as the API
takes them, waits until every one is graded, and prints:

- accepted / rejected, the accept rate, and how long the burst took to submit;
- grading throughput, and p50 / p95 of the time from acceptance to verdict;
- RSS of the API processes and the worker processes at the start, peak and end;
- the reconciliation: accepted by the API vs held by the database vs graded, and lost.

"Cheap": each patch is unique and is refused by the grading core's vetting (a path
outside the repository), so every submission takes the whole path through the API,
database, Redis, a worker and the grading pipeline, and gets PATCH FAILED without a
container: this measures the service, not Docker. With `--containers` each patch is
instead the task's gold patch plus a unique new file, graded for real in a container
(PASS): this measures the service with Docker. As a baseline measured in the same run,
the same kind of patches are graded by the grading core in this process, without the
service.

    .venv/bin/python benchmarks/load.py --count 10000 --workers 2
    .venv/bin/python benchmarks/load.py --count 1000 --containers
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import requests

from _service import ROOT, TASK, Running, cheap_patch

OUT = ROOT / "benchmarks" / "out"


def patch(i: int, gold: str | None = None) -> str:
    """The i-th unique patch: refused by the vetting, or (given the gold patch) the gold
    patch and a new file of its own, so that no two share a cache entry."""
    if gold is None:
        return cheap_patch(i)
    return (
        gold + f"diff --git a/load/{i}.txt b/load/{i}.txt\nnew file mode 100644\n--- /dev/null\n"
        f"+++ b/load/{i}.txt\n@@ -0,0 +1 @@\n+{i}\n"
    )


def rss_of(pattern: str) -> int:
    """Total resident memory (bytes) of the processes whose command line contains pattern."""
    total = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if pattern in cmd and "load.py" not in cmd:
                for line in (proc / "status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=10_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--baseline", type=int, default=500, help="submissions graded in-process for the baseline")
    ap.add_argument("--containers", action="store_true", help="grade every patch in a container (PASS)")
    args = ap.parse_args()
    from grader.config import get_settings
    from grader.tasks.loader import TaskSet

    settings = get_settings(tasks_dir=ROOT / "tasks")
    task = TaskSet(settings.tasks_dir).get(TASK)
    gold = task.gold_patch_text().decode() if args.containers else None

    env = {
        "GRADER_CACHE": "false",
        "GRADER_DAILY_QUOTA": str(args.count * 2),
        "GRADER_QUEUED_QUOTA": str(args.count * 2),
        "GRADER_QUEUE_MAX": str(args.count * 2),
    }
    with Running(env, workers=args.workers, prefix="grader-load.") as svc:
        key = svc.key("load")
        url = svc.url
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {key}"
        samples = []

        def sample() -> None:
            samples.append({"api": rss_of("grader-api") or rss_of(" serve "), "workers": rss_of(" worker ")})

        sample()
        t0 = time.monotonic()
        accepted, rejected, ids = 0, 0, []
        for start in range(0, args.count, args.batch):
            items = [
                {"task_id": TASK, "patch": patch(i, gold)} for i in range(start, min(args.count, start + args.batch))
            ]
            r = session.post(f"{url}/v1/submissions/batch", json={"run_id": "load", "submissions": items}, timeout=300)
            r.raise_for_status()
            body = r.json()
            accepted += body["accepted"]
            rejected += body["rejected"]
            ids += [it["id"] for it in body["items"] if "id" in it]
            sample()
        submit_s = time.monotonic() - t0
        # wait for every verdict
        while True:
            w = session.get(f"{url}/v1/workers", timeout=30).json()["queue"]
            sample()
            if w["queued"] == 0 and w["running"] == 0:
                break
            time.sleep(1.0)
        total_s = time.monotonic() - t0
        sample()
        # reconcile against the database
        sys.path.insert(0, str(ROOT))
        from grader.store.db import Database
        from grader.store.models import Submission

        db = Database(svc.database_url)
        with db.read() as s:
            rows = s.query(Submission.status, Submission.verdict, Submission.queued_at, Submission.finished_at).all()
        in_db = len(rows)
        done = [r for r in rows if r.status == "done"]
        latencies = sorted((r.finished_at - r.queued_at).total_seconds() for r in done)
        verdicts: dict[str, int] = {}
        for r in done:
            verdicts[r.verdict] = verdicts.get(r.verdict, 0) + 1
        # baseline: the same kind of patch graded by the core in this process
        from grader.pipeline import Grader

        grader = Grader(settings)
        b0 = time.monotonic()
        for i in range(args.baseline):
            grader.grade(task, patch(args.count + i, gold).encode())
        base_rate = args.baseline / (time.monotonic() - b0)
        figures = {
            "count": args.count,
            "workers": args.workers,
            "containers": args.containers,
            "accepted": accepted,
            "rejected": rejected,
            "submit_seconds": round(submit_s, 2),
            "accept_rate_per_s": round(accepted / submit_s, 1),
            "total_seconds": round(total_s, 2),
            "graded_per_s": round(len(done) / total_s, 1),
            "latency_p50_s": round(statistics.median(latencies), 2) if latencies else None,
            "latency_p95_s": round(latencies[int(0.95 * (len(latencies) - 1))], 2) if latencies else None,
            "in_database": in_db,
            "done": len(done),
            "verdicts": verdicts,
            "lost": accepted - len(done),
            "reconciles": accepted == in_db == len(done) and len(set(ids)) == accepted,
            "rss_api_mib": {
                k: round(v / 2**20, 1)
                for k, v in (
                    ("start", samples[0]["api"]),
                    ("peak", max(x["api"] for x in samples)),
                    ("end", samples[-1]["api"]),
                )
            },
            "rss_workers_mib": {
                k: round(v / 2**20, 1)
                for k, v in (
                    ("start", samples[0]["workers"]),
                    ("peak", max(x["workers"] for x in samples)),
                    ("end", samples[-1]["workers"]),
                )
            },
            "baseline_in_process_per_s": round(base_rate, 1),
            "service_vs_in_process": round((len(done) / total_s) / base_rate, 2),
        }
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / ("load-containers.json" if args.containers else "load.json")).write_text(json.dumps(figures, indent=1))
        for k, v in figures.items():
            print(f"{k:28} {v}")
        return 0 if figures["reconciles"] else 1


if __name__ == "__main__":
    sys.exit(main())
