"""A burst of N submissions through the whole service, and what it cost.

Starts Redis, `grader serve` (gunicorn) and `grader worker` on this machine (SQLite, in a
temporary directory), sends N submissions of a cheap task in batches as fast as the API
takes them, waits until every one is graded, and prints:

- accepted / rejected, the accept rate, and how long the burst took to submit;
- grading throughput, and p50 / p95 of the time from acceptance to verdict;
- RSS of the API processes and the worker processes at the start, peak and end;
- the reconciliation: accepted by the API vs held by the database vs graded, and lost;
- with `--containers`, what a grade cost (`Costs`, sampled every 0.5 s): CPU seconds of the
  worker processes and of the grading containers they made (their cgroups), per grade,
  and each container's peak memory (cgroup v1's max_usage, v2's memory.peak): the
  figures docs/deploy.md sizes hosts by. Sampling misses what a container spends in its
  last half second, so the CPU is a floor.

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
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import requests

from _service import ROOT, TASK, Running, cheap_patch, container_cgroup, descendants

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


class Costs(threading.Thread):
    """CPU of the `grader worker` processes under `leader`, and CPU and peak memory of
    each grading container they own, sampled until stopped (the last value seen counts)."""

    TICK = os.sysconf("SC_CLK_TCK")

    def __init__(self, leader: int):
        super().__init__(daemon=True)
        from grader.sandbox.docker import LABEL, OWNER_LABEL, DockerEngine

        self.leader, self.label, self.owner = leader, LABEL, OWNER_LABEL
        self.client = DockerEngine().client
        self.cpu: dict[int, float] = {}
        self.boxes: dict[str, tuple[float, int]] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.5):
            pids = descendants(self.leader)
            for pid in pids:
                try:
                    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                    self.cpu[pid] = (int(f[11]) + int(f[12])) / self.TICK
                except (OSError, IndexError, ValueError):
                    pass
            try:
                boxes = self.client.containers.list(filters={"label": self.label}, ignore_removed=True)
            except Exception:  # noqa: BLE001 - the next sample tries again
                continue
            for c in boxes:
                pid = (c.labels or {}).get(self.owner, "").rpartition(":")[2]
                if not pid.isdigit() or int(pid) not in pids:
                    continue
                ns = container_cgroup("cpuacct", c.id, "cpuacct.usage", "cpu.stat")
                peak = container_cgroup("memory", c.id, "memory.max_usage_in_bytes", "memory.peak")
                if ns is not None and peak is not None:
                    self.boxes[c.id] = (ns / 1e9, peak)

    def figures(self, graded: int) -> dict:
        ran = [b for b in self.boxes.values() if b[0] >= 0.05]  # a warm container never used spends ~0
        peaks = sorted(b[1] / 2**20 for b in ran)
        box_cpu, worker_cpu = sum(b[0] for b in self.boxes.values()), sum(self.cpu.values())
        return {
            "worker_cpu_s": round(worker_cpu, 2),
            "container_cpu_s": round(box_cpu, 2),
            "cpu_s_per_grade": round((worker_cpu + box_cpu) / graded, 3) if graded else None,
            "grades_per_core_s": round(graded / (worker_cpu + box_cpu), 2) if worker_cpu + box_cpu else None,
            "containers_used": len(ran),
            "container_peak_mib": {
                "p50": round(statistics.median(peaks), 1) if peaks else None,
                "max": round(peaks[-1], 1) if peaks else None,
            },
        }


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
        costs = None
        if args.containers and svc.grading is not None:
            costs = Costs(svc.grading.pid)
            costs.start()
        t0 = time.monotonic()
        accepted, rejected, ids = 0, 0, []
        for start in range(0, args.count, args.batch):
            items = [
                {"task_id": TASK, "patch": patch(i, gold), "trial": i}  # one attempt a trial in a run
                for i in range(start, min(args.count, start + args.batch))
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
        if costs is not None:
            costs.stop.set()
            costs.join()
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
        if costs is not None:
            figures["cost"] = costs.figures(len(done))
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / ("load-containers.json" if args.containers else "load.json")).write_text(json.dumps(figures, indent=1))
        for k, v in figures.items():
            print(f"{k:28} {v}")
        return 0 if figures["reconciles"] else 1


if __name__ == "__main__":
    sys.exit(main())
