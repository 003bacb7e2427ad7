"""End-to-end grading throughput against the same tests run bare, in one run, and where a
grade's time goes (issue 21).

Two measurements on the same cores, one after the other, each with every core busy:

- **bare**: the suite's tests run without the grader, `--streams` at once (default: one a
  core). Each stream has one long-lived container per task image (started before the
  clock starts: runc's namespaces cost a process nothing once it runs) and runs, round
  after round, what a developer runs after an edit: the repository reset to the base,
  the hidden tests put in place, the gold patch applied with git, the task's pytest
  command with the check's environment (plugin auto-loading off, bytecode from the
  image's cache). Rounds of a task run in one `docker exec`, so its cost is paid once a
  task, not once a run. Measured before and after the service, and averaged, so that
  the machine's other load weighs on both sides alike.
- **service**: Redis, `grader serve` (gunicorn), `grader worker --count W` and a database
  (SQLite, or a private PostgreSQL with --postgres) on this machine; `--count` distinct
  submissions (each task's gold patch plus a new file of its own, so the cache cannot
  answer) sent in one batch, then every one graded in its own container, as the service
  always grades. graded/s is the count over the time from the POST to the last verdict.

It prints both rates and their ratio, then the **budget**: the mean seconds per grade of
each stage and its share of the workers' time (W x the grading window), from the
grade's own `durations` (the container's acquire, delivery, wait, read-back and removal;
the supervisor's snapshot, apply, test placement, run and verify), the job's stages kept
in its RQ job's meta (grader/jobs.py: the database's claim, read and finish, the cache
lookup, masking, notify) and RQ's own timestamps (queue wait, RQ's bookkeeping inside a
job and between two jobs of one worker). And where the machine's CPU went meanwhile.

A run whose bare side is not faster than the service measures the instrument, not the
grader (a bare run that does not run the tests, a machine busy with something else):
it exits 2 with no figures, as benchmarks/overhead.py does. A submission not graded, or
graded otherwise than PASS, exits 1.

    .venv/bin/python benchmarks/speed.py                            # the example suite
    .venv/bin/python benchmarks/speed.py --suite realworld          # build/realworld (tasks/releases.py realworld)
    .venv/bin/python benchmarks/speed.py --count 200 --workers 3 --postgres
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import itertools
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import requests

from _service import ROOT, Running, container_cgroup, cpu_seconds, descendants, machine_cpu, private_postgres

sys.path.insert(0, str(ROOT))

from grader.box.paths import PYCACHE, REPO_DIR, UID  # noqa: E402
from grader.box.runners import runner  # noqa: E402
from grader.box.runners.common import python_env  # noqa: E402
from grader.config import get_settings  # noqa: E402
from grader.grading.spec import CONTAINER_ENV, runner_name  # noqa: E402
from grader.images import Images  # noqa: E402
from grader.sandbox.docker.containers import LABEL  # noqa: E402
from grader.sandbox.docker.lanes import LANE_LABEL  # noqa: E402
from grader.tasks.loader import TaskSet  # noqa: E402
from grader.tasks.model import Task, TestsCheck  # noqa: E402

OUT = ROOT / "benchmarks" / "out"
SUITES = {"examples": ROOT / "tasks" / "examples", "realworld": ROOT / "build" / "realworld"}
BUILT = ("target/", "build/", "node_modules/")  # what an image built into the repository: kept by the reset


class MeasurementBroken(Exception):
    """Raised when the bare side does not run what the grade runs, or is not faster:
    a ratio taken then would measure the instrument."""


def unique_patch(gold: str, i: int) -> str:
    """The gold patch and a new file of its own: a distinct submission the cache cannot answer."""
    return (
        gold + f"diff --git a/speed/{i}.txt b/speed/{i}.txt\nnew file mode 100644\n--- /dev/null\n"
        f"+++ b/speed/{i}.txt\n@@ -0,0 +1 @@\n+{i}\n"
    )


def _epoch(t: dt.datetime | None) -> float | None:
    if t is None:
        return None
    return (t if t.tzinfo else t.replace(tzinfo=dt.UTC)).timestamp()


# --- bare: the tests alone, `streams` at once ----------------------------------------------------
class BareTask:
    """What one task's bare round runs: the pytest command and the files it needs."""

    def __init__(self, task: Task, image: str, hidden_dir: Path, manifest: dict[str, str | None], patch: str):
        check = task.check
        assert isinstance(check, TestsCheck)
        plan = runner("pytest").plan(check.model_dump(mode="json"), manifest)
        self.task, self.image, self.hidden_dir = task, image, hidden_dir
        self.patch_dir = Path(tempfile.mkdtemp(prefix="grader-speed-patch."))
        (self.patch_dir / "submission.patch").write_text(patch)
        self.patch_dir.chmod(0o755)
        (self.patch_dir / "submission.patch").chmod(0o644)
        keep = " ".join(f"-e {d}" for d in BUILT)
        steps = [f"git reset -q --hard && git clean -fdqx {keep}"]
        for rel, sha in sorted(manifest.items()):
            if sha is None:
                steps.append(f"rm -f '{rel}'")
            else:
                steps.append(f"mkdir -p \"$(dirname '{rel}')\" && cp '/bare/hidden/files/{rel}' '{rel}'")
        steps.append("git apply /bare/patch/submission.patch")
        plugins = " ".join(f"-p {p}" for p in plan.plugins)
        args = " ".join(f"'{a}'" for a in plan.args)
        # the tests' own exit status is theirs (a hidden file may hold tests no list names that
        # fail either way, as they do in the grade); everything before them must succeed
        test = f"python -m pytest -q -p no:cacheprovider {plugins} {args} >/dev/null 2>&1; echo pytest-exit=$? >&2"
        self.round = " && ".join(steps) + " && { " + test + "; }"

    def loop(self, rounds: int) -> list[str]:
        return ["sh", "-c", f"set -e; for i in $(seq {rounds}); do {self.round} || exit 99; done"]


def bare_env() -> dict[str, str]:
    return {**CONTAINER_ENV, **python_env(SimpleNamespace(pycache=PYCACHE))}  # type: ignore[arg-type]


def measure_bare(client, tasks: list[BareTask], streams: int, rounds: int) -> dict:
    """`streams` threads, each with one container per task, each running every task's
    rounds in one exec; the clock runs from all containers started to the last round."""
    containers: list[list] = []
    env = bare_env()
    try:
        for _ in range(streams):
            mine = []
            containers.append(mine)
            for bt in tasks:
                mine.append(
                    client.containers.run(
                        bt.image,
                        ["sleep", "infinity"],
                        detach=True,
                        network_mode="none",
                        user=f"{UID}:{UID}",
                        working_dir=REPO_DIR,
                        environment=env,
                        labels={"grader.bench": "speed"},
                        volumes={
                            str(bt.hidden_dir): {"bind": "/bare/hidden", "mode": "ro"},
                            str(bt.patch_dir): {"bind": "/bare/patch", "mode": "ro"},
                        },
                    )
                )
        # one round of each first: warms the page cache as the grades' warm-up does
        for c, bt in zip(containers[0], tasks, strict=True):
            code, out = c.exec_run(bt.loop(1))
            if code != 0:
                raise MeasurementBroken(f"{bt.task.id}: a bare round failed before its tests: {out[-1500:]!r}")
        failures: list[str] = []
        codes: dict[str, int] = {}
        lock = threading.Lock()
        start = threading.Barrier(streams + 1)

        def stream(s: int) -> None:
            start.wait()
            for c, bt in zip(containers[s], tasks, strict=True):
                code, out = c.exec_run(bt.loop(rounds), demux=True)
                with lock:
                    if code != 0:
                        failures.append(f"{bt.task.id}: exit {code}: {(out[1] or b'')[-500:]!r}")
                    for word in (out[1] or b"").decode(errors="replace").split():
                        if word.startswith("pytest-exit="):
                            code_ = word.partition("=")[2]
                            codes[code_] = codes.get(code_, 0) + 1

        def cpu() -> list[float]:
            """CPU seconds of each task's bare containers so far, in the tasks' order (their
            cgroups: exact, nothing sampled)."""
            ns = [
                [container_cgroup("cpuacct", mine[i].id, "cpuacct.usage", "cpu.stat") for mine in containers]
                for i in range(len(tasks))
            ]
            if any(None in per_task for per_task in ns):
                raise MeasurementBroken("a bare container's cgroup cannot be read (its CPU is part of the figures)")
            return [sum(n or 0 for n in per_task) / 1e9 for per_task in ns]

        threads = [threading.Thread(target=stream, args=(s,)) for s in range(streams)]
        for t in threads:
            t.start()
        cpu0 = cpu()
        start.wait()
        t0 = time.monotonic()
        for t in threads:
            t.join()
        seconds = time.monotonic() - t0
        by_task = [b - a for a, b in zip(cpu0, cpu(), strict=True)]
    finally:
        for mine in containers:
            for c in mine:
                with contextlib.suppress(Exception):
                    c.remove(force=True)
    if failures:
        raise MeasurementBroken("bare rounds failed before their tests: " + "; ".join(failures[:3]))
    runs = streams * rounds * len(tasks)
    ran = sum(n for code, n in codes.items() if code in ("0", "1"))
    if ran != runs:
        raise MeasurementBroken(f"of {runs} bare runs, {ran} ran their tests (pytest's exit statuses: {codes})")
    return {
        "runs": runs,
        "seconds": round(seconds, 3),
        "per_s": runs / seconds,
        "cpu_s": sum(by_task),
        # a task's CPU a run (its streams' containers, all their rounds)
        "cpu_s_by_task": {bt.task.id: c / (streams * rounds) for bt, c in zip(tasks, by_task, strict=True)},
        "pytest_exit": codes,
    }


# --- the service ---------------------------------------------------------------------------------
class CpuWindow:
    """Busy CPU seconds of the machine and of named groups of processes over a window."""

    DAEMONS = ("dockerd", "containerd", "containerd-shim", "containerd-shim-runc-v2", "runc", "docker-proxy")

    def __init__(self, svc: Running):
        self.svc = svc

    def _groups(self) -> dict[str, list[int]]:
        daemons = []
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit():
                with contextlib.suppress(OSError):
                    if (proc / "comm").read_text().strip() in self.DAEMONS:
                        daemons.append(int(proc.name))
        assert self.svc.api is not None and self.svc.redis is not None and self.svc.grading is not None
        return {
            "api": descendants(self.svc.api.pid),
            "workers": descendants(self.svc.grading.pid),
            "redis": [self.svc.redis.pid],
            "docker daemons (the machine's)": daemons,
        }

    def __enter__(self) -> CpuWindow:
        self.t0, self.busy0 = time.monotonic(), machine_cpu()
        self.before = {k: (pids, cpu_seconds(pids)) for k, pids in self._groups().items()}
        return self

    def __exit__(self, *exc) -> None:
        self.seconds, self.busy = time.monotonic() - self.t0, machine_cpu() - self.busy0
        now = self._groups()
        self.used = {}
        for k, (pids, cpu0) in self.before.items():
            # processes started meanwhile count whole; those gone since are lost (a floor)
            self.used[k] = cpu_seconds(pids) - cpu0 + cpu_seconds([p for p in now[k] if p not in pids])

    def figures(self) -> dict:
        cores = os.cpu_count() or 1
        rest = self.busy - sum(self.used.values())
        out = {k: round(v, 2) for k, v in self.used.items()}
        out["containers and everything else"] = round(rest, 2)
        return {"cores": cores, "seconds": round(self.seconds, 2), "busy": round(self.busy, 2), "by": out}


def measure_service(args: argparse.Namespace, suite: Path, tasks: list[Task], database_url: str | None) -> dict:
    golds = {t.id: (t.gold_patch_text() or b"").decode() for t in tasks}
    if args.order == "grouped":
        order = [tasks[i * len(tasks) // args.count] for i in range(args.count)]
    else:  # a suite's run: one task after another, round and round
        order = [tasks[i % len(tasks)] for i in range(args.count)]
    # a run holds one attempt per task and trial: each submission its own trial
    items = [{"task_id": t.id, "patch": unique_patch(golds[t.id], i), "trial": i} for i, t in enumerate(order)]
    lifted = str(args.count * 4)
    env = {
        "GRADER_TASKS_DIR": str(suite),
        "GRADER_DAILY_QUOTA": lifted,
        "GRADER_QUEUED_QUOTA": lifted,
        "GRADER_QUEUE_MAX": lifted,
        "GRADER_WORKER_ENVIRONMENTS": "all",
        **dict(kv.split("=", 1) for kv in args.env),
    }
    with Running(env, database_url=database_url, workers=args.workers, prefix="grader-speed.") as svc:
        key = svc.key("speed")
        http = requests.Session()
        http.headers["Authorization"] = f"Bearer {key}"
        # the workers' first grades of each shape start cold and prepare each task: warm up
        # with a grade of each task (not counted), so the window holds the steady state
        warm = [{"task_id": t.id, "patch": unique_patch(golds[t.id], -1 - n)} for n, t in enumerate(tasks)]
        posted = http.post(
            f"{svc.url}/v1/submissions/batch", json={"run_id": "warm-up", "submissions": warm}, timeout=300
        )
        posted.raise_for_status()
        wait_graded(svc, http, len(warm), args.timeout)
        with CpuWindow(svc) as cpu, ContainersStarted() as started:
            t0 = time.time()
            posted = http.post(
                f"{svc.url}/v1/submissions/batch", json={"run_id": "speed", "submissions": items}, timeout=300
            )
            posted.raise_for_status()
            body = posted.json()
            ids = [it["id"] for it in body["items"] if "id" in it]
            wait_graded(svc, http, len(warm) + args.count, args.timeout)
            t1 = time.time()
        from redis import Redis
        from rq.job import Job

        from grader.store.db import Database
        from grader.store.models import Submission

        db = Database(svc.database_url)
        with db.read() as s:
            rows = s.query(Submission).filter(Submission.id.in_(ids)).all()
            graded = [
                {
                    "id": r.id,
                    "task": r.task_id,
                    "status": r.status,
                    "verdict": r.verdict,
                    "attempts": r.attempts,
                    "job_id": r.job_id,
                    "queued_at": _epoch(r.queued_at),
                    "durations": (r.result or {}).get("durations", {}),
                }
                for r in rows
            ]
        db.dispose()
        redis = Redis.from_url(svc.env["GRADER_REDIS_URL"])
        for g in graded:
            job = Job.fetch(g["job_id"], connection=redis) if g["job_id"] else None
            g["job"] = (
                {
                    "enqueued_at": _epoch(job.enqueued_at),
                    "started_at": _epoch(job.started_at),
                    "ended_at": _epoch(job.ended_at),
                    "worker": job.worker_name,
                    "stages": job.meta.get("stages", {}),
                }
                if job is not None
                else None
            )
    verdicts: dict[str, int] = {}
    for g in graded:
        verdicts[str(g["verdict"])] = verdicts.get(str(g["verdict"]), 0) + 1
    return {
        "accepted": body["accepted"],
        "rejected": body["rejected"],
        "in_database": len(graded),
        "done": sum(g["status"] == "done" for g in graded),
        "verdicts": verdicts,
        "seconds": round(t1 - t0, 3),
        "per_s": sum(g["status"] == "done" for g in graded) / (t1 - t0),
        "cpu": cpu.figures(),
        "containers_started": started.figures(),
        "grades": graded,
    }


class ContainersStarted:
    """The grading containers (a container per grade, or the pool's keepers) and network
    lanes' holders the engine starts while it is open, from its event stream (read live:
    the engine keeps only its last 256 events): a keeper's start is CPU spent outside any
    grade, which only this count ties to its cause."""

    def __enter__(self) -> ContainersStarted:
        import docker

        self.client = docker.from_env()
        self.stream = self.client.events(decode=True, filters={"type": "container", "event": "start", "label": LABEL})
        self.events: list[dict] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        return self

    def _read(self) -> None:
        with contextlib.suppress(Exception):  # the stream closed at the window's end
            for event in self.stream:
                self.events.append(event)

    def __exit__(self, *exc) -> None:
        time.sleep(0.5)  # the last starts' events in flight
        self.stream.close()
        self.thread.join(5)
        self.client.close()

    def figures(self) -> dict[str, int]:
        lanes = sum(LANE_LABEL in (e.get("Actor", {}).get("Attributes") or {}) for e in self.events)
        return {"grading containers or keepers": len(self.events) - lanes, "lane holders": lanes}


def wait_graded(svc: Running, http: requests.Session, total: int, timeout: float) -> None:
    """Until the service has finished `total` submissions (every one of this service)."""
    from grader.store.db import Database
    from grader.store.models import Status, Submission

    db = Database(svc.database_url)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            with db.read() as s:
                if s.query(Submission).filter(Submission.status == Status.DONE.value).count() >= total:
                    return
            time.sleep(0.2)
    finally:
        db.dispose()
    raise SystemExit(f"speed.py: not every submission was graded within {timeout:.0f} s\n{svc.log_tail()}")


# --- the budget ----------------------------------------------------------------------------------
# (name, how one grade's seconds are read from its durations d, the job's stages j and RQ's times r)
STAGES: list[tuple[str, str]] = [
    ("RQ between jobs (dequeue, job fetch, registries)", "rq_between"),
    ("RQ inside the job (status, heartbeat, result)", "rq_inside"),
    ("database: claim", "claim"),
    ("database: read the submission", "load"),
    ("task lookup", "task"),
    ("starting the next job's container (jobs.py)", "prewarm"),
    ("patch vetting", "validate"),
    ("instance image lookup", "image"),
    ("database: cache lookup", "cache_lookup"),
    ("grader's own work (audit, order, box archive, decision)", "grader_work"),
    ("container acquire (warm take or create + start)", "container_start"),
    ("file delivery (the order and patch on the container's stdin)", "container_deliver"),
    ("in-container start and exit (the delivered files to main(), the exit, the engine's wait)", "box_start"),
    ("supervisor: compiling its bytecode (a grader's first run on an interpreter)", "compile"),
    ("supervisor: snapshot and protection", "snapshot"),
    ("supervisor: apply", "apply"),
    ("supervisor: test placement", "place_tests"),
    ("supervisor: the tests' run (check)", "check"),
    ("supervisor: verify", "verify"),
    ("supervisor: the rest", "supervisor_rest"),
    ("read-back (logs, inspect)", "container_collect"),
    ("cleanup (container remove)", "container_remove"),
    ("adjudication", "settle"),
    ("masking the result", "mask"),
    ("database: finish (the verdict's write)", "finish"),
    ("notify (waiters, webhook)", "notify"),
    ("the job's unaccounted rest", "job_rest"),
]


def per_grade(g: dict, gaps: dict[str, float]) -> dict[str, float]:
    d, r = g["durations"], g["job"] or {}
    j = r.get("stages", {})
    job_stages = ("claim", "load", "task", "prewarm", "cache_lookup", "settle", "mask", "finish", "notify")
    out = {k: float(j.get(k, 0.0)) for k in job_stages}
    for k in ("validate", "image", "container_start", "container_deliver", "container_collect", "container_remove"):
        out[k] = float(d.get(k, 0.0))
    supervised = ("compile", "snapshot", "apply", "place_tests", "check", "verify")
    for k in supervised:
        out[k] = float(d.get(k, 0.0))
    sup = float(d.get("supervisor", 0.0))
    out["supervisor_rest"] = max(0.0, sup - sum(out[k] for k in supervised))
    out["box_start"] = max(0.0, float(d.get("container_wait", 0.0)) - sup)
    out["grader_work"] = max(
        0.0,
        float(j.get("grade", 0.0))
        - out["validate"]
        - out["image"]
        - out["cache_lookup"]
        - float(d.get("container", 0.0)),
    )
    job = float(j.get("job", 0.0))
    inside = sum(float(v) for k, v in j.items() if k not in ("job", "cache_lookup"))  # the lookup is in the grade
    # the grade's stages are counted one by one above: the rest of the job is what none names
    out["job_rest"] = max(0.0, job - inside)
    span = (r.get("ended_at") or 0.0) - (r.get("started_at") or 0.0)
    out["rq_inside"] = max(0.0, span - job)
    out["rq_between"] = gaps.get(g["id"], 0.0)
    out["queue_wait"] = max(0.0, (r.get("started_at") or 0.0) - (r.get("enqueued_at") or 0.0))
    out["span"] = span
    out["warm"] = float(d.get("container_warm", 0.0))
    return out


def budget(grades: list[dict], workers: int) -> dict:
    timed = [g for g in grades if g["job"] and g["job"]["started_at"] and g["job"]["ended_at"]]
    gaps: dict[str, float] = {}
    by_worker: dict[str, list[dict]] = {}
    for g in timed:
        by_worker.setdefault(g["job"]["worker"] or "?", []).append(g)
    for mine in by_worker.values():
        mine.sort(key=lambda g: g["job"]["started_at"])
        for a, b in itertools.pairwise(mine):
            gaps[b["id"]] = max(0.0, b["job"]["started_at"] - a["job"]["ended_at"])
    rows = [per_grade(g, gaps) for g in timed]
    if not rows:
        return {}
    window = max(g["job"]["ended_at"] for g in timed) - min(g["job"]["started_at"] for g in timed)
    worker_time = workers * window
    stages = {}
    for name, key in STAGES:
        total = sum(r[key] for r in rows)
        stages[name] = {"mean_s": total / len(rows), "share": total / worker_time if worker_time else 0.0}
    counted = sum(sum(r[k] for _, k in STAGES) for r in rows)
    stages["idle (no job, or before a worker's first)"] = {
        "mean_s": max(0.0, worker_time - counted) / len(rows),
        "share": max(0.0, worker_time - counted) / worker_time if worker_time else 0.0,
    }
    return {
        "grades": len(rows),
        "window_s": window,
        "workers": workers,
        "warm_share": sum(r["warm"] for r in rows) / len(rows),
        "queue_wait_mean_s": statistics.mean(r["queue_wait"] for r in rows),
        "job_mean_s": statistics.mean(r["span"] for r in rows),
        "stages": stages,
    }


def cpu_per_grade(service: dict, bare_cpu: float) -> dict:
    """CPU seconds a grade cost, by party, against a bare run's: robust where the wall-time
    rates are not (other work on the machine takes cores from both sides unevenly). The
    container's figure is its supervisor's own count (itself, from the idle loop on, and
    every process it waited for); the engine's daemons are the machine's, other users'
    containers included, so they are shown apart."""
    done = max(1, service["done"])
    by = service["cpu"]["by"]
    inside = [g["durations"].get("cpu") for g in service["grades"]]
    out = {
        "container": sum(c for c in inside if c is not None) / done,
        "workers": by["workers"] / done,
        "api": by["api"] / done,
        "redis": by["redis"] / done,
    }
    ours = sum(out.values())
    # the container's CPU by the supervisor's stages (cpu_boot: the idle loop, the interpreter
    # and the supervisor's import; the rest: after its last stage, and what it waited for there)
    staged = [g["durations"] for g in service["grades"] if "cpu_boot" in g["durations"]]
    inside_by = {
        k: sum(d.get(f"cpu_{k}", 0.0) for d in staged) / max(1, len(staged))
        for k in ("boot", "compile", "snapshot", "apply", "place_tests", "check", "verify")
    }
    inside_by["rest"] = max(0.0, sum(d.get("cpu", 0.0) for d in staged) / max(1, len(staged)) - sum(inside_by.values()))
    daemons = by["docker daemons (the machine's)"] / done
    # what the machine spent beyond every party counted: the containers' starts and stops
    # outside the daemons (runc, the shims, the kernel, the engine's short-lived helper
    # processes, which no process list catches) and any other work on the machine
    outside = max(0.0, by["containers and everything else"] / done - out["container"])
    return {
        **{k: round(v, 4) for k, v in out.items()},
        "grade": round(ours, 4),
        "docker_daemons_at_most": round(daemons, 4),
        "outside_at_most": round(outside, 4),
        "ratio_whole_machine": round(bare_cpu / (ours + daemons + outside), 3) if ours + daemons + outside else None,
        "bare_run": round(bare_cpu, 4),
        "ratio": round(bare_cpu / ours, 3) if ours else None,
        "ratio_with_daemons": round(bare_cpu / (ours + daemons), 3) if ours + daemons else None,
        "measured_in_container": sum(c is not None for c in inside),
        "container_by_stage": {k: round(v, 4) for k, v in inside_by.items()},
    }


def by_task(grades: list[dict], bare_by_task: dict[str, float]) -> list[dict]:
    """Each task's check (the tests' run under grading: the supervisor's count of its CPU)
    against the same task's bare run (its whole round: the reset, the placement, git apply
    and the pytest process), most over first: where a suite's excess comes from."""
    checks: dict[str, list[float]] = {}
    for g in grades:
        if "cpu_check" in g["durations"]:
            checks.setdefault(g["task"], []).append(g["durations"]["cpu_check"])
    rows = [
        {"task": t, "grades": len(cs), "check_cpu": statistics.mean(cs), "bare_cpu": bare_by_task[t]}
        for t, cs in checks.items()
        if t in bare_by_task
    ]
    for row in rows:
        row["over"] = row["check_cpu"] - row["bare_cpu"]
    return sorted(rows, key=lambda r: -r["over"])


def report(f: dict) -> None:
    b, s, bud = f["bare"], f["service"], f["budget"]
    print(
        f"suite {f['suite']} ({f['tasks']} tasks), {f['cores']} cores; database {f['database']}; "
        f"{f['workers']} workers, {f['streams']} bare streams"
    )
    print(
        f"bare:    {b['runs']} runs in {b['seconds']:.1f} s = {b['per_s']:.2f} runs/s "
        f"(before {b['before_per_s']:.2f}/s, after {b['after_per_s']:.2f}/s)"
    )
    print(
        f"service: {s['done']} of {s['accepted']} graded in {s['seconds']:.1f} s = {s['per_s']:.2f} graded/s; "
        f"verdicts {s['verdicts']}"
    )
    print(f"ratio:   {f['ratio']:.1%} of bare")
    print(
        f"budget per grade ({bud['grades']} grades, {bud['workers']} workers x {bud['window_s']:.1f} s; "
        f"a job {bud['job_mean_s']:.3f} s; warm containers taken {bud['warm_share']:.0%}; "
        f"queue wait in the backlog {bud['queue_wait_mean_s']:.1f} s, not worker time):"
    )
    for name, row in bud["stages"].items():
        print(f"  {name:62} {row['mean_s'] * 1000:8.1f} ms  {row['share']:6.1%}")
    print(f"  {'the tests alone, bare (for comparison)':62} {f['bare_s_per_run'] * 1000:8.1f} ms")
    cg = f["cpu_per_grade"]
    if cg["ratio"] >= 1:
        # not an overhead below zero: the bare run starts a new interpreter for its pytest, a
        # grade under the pool provider forks one loaded once (GRADER_POOL_FORK)
        versus = "the grade took no more CPU than the bare run: no overhead to show in CPU"
    else:
        versus = f"{cg['ratio']:.1%} ({cg['ratio_with_daemons']:.1%} with the daemons)"
    print(
        f"CPU per grade {cg['grade'] * 1000:.0f} ms (container {cg['container'] * 1000:.0f}, workers "
        f"{cg['workers'] * 1000:.0f}, API {cg['api'] * 1000:.0f}, Redis {cg['redis'] * 1000:.0f}; the engine's daemons "
        f"at most {cg['docker_daemons_at_most'] * 1000:.0f} more, other users' included) against a bare run's "
        f"{cg['bare_run'] * 1000:.0f} ms: {versus}"
    )
    print(
        f"  and the machine's CPU beyond every party counted (the containers' starts and stops outside the "
        f"daemons: runc, shims, the kernel, the engine's helper processes; and other work) at most "
        f"{cg['outside_at_most'] * 1000:.0f} ms a grade: {cg['ratio_whole_machine']:.1%} of the whole machine's CPU"
    )
    print(
        "  in the container, by the supervisor's stage: "
        + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in cg["container_by_stage"].items())
    )
    st = s["containers_started"]
    print(
        f"  containers the engine started in the window: {st['grading containers or keepers']} grading containers "
        f"or keepers ({st['grading containers or keepers'] / max(1, s['done']):.2f} a grade), "
        f"{st['lane holders']} network lanes' holders"
    )
    rows = f["by_task"]
    over = sum(max(0.0, r["over"]) for r in rows)
    print(
        f"  by task, the check's CPU against the task's bare round ({len(rows)} tasks; the excess over bare "
        f"summed over them, one grade each: {over * 1000:.0f} ms); the five furthest over:"
    )
    for r in rows[:5]:
        print(
            f"    {r['task'][:58]:58} check {r['check_cpu'] * 1000:6.0f} ms, bare {r['bare_cpu'] * 1000:6.0f} ms: "
            f"{r['over'] * 1000:+6.0f} ms ({max(0.0, r['over']) / over if over else 0:.0%} of the excess)"
        )
    c = s["cpu"]
    by = ", ".join(f"{k} {v} s ({v / (c['cores'] * c['seconds']):.0%})" for k, v in c["by"].items())
    print(
        f"CPU over the service's window ({c['cores']} cores x {c['seconds']} s): busy {c['busy']} s "
        f"({c['busy'] / (c['cores'] * c['seconds']):.0%}): {by}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="examples", help="examples | realworld | a tasks directory")
    ap.add_argument("--only", default=None, help="these task ids (comma-separated) of the suite")
    ap.add_argument("--count", type=int, default=200, help="submissions graded through the service")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="`grader worker --count` [cores]")
    ap.add_argument("--streams", type=int, default=os.cpu_count() or 1, help="bare runs at once [cores]")
    ap.add_argument("--rounds", type=int, default=None, help="bare rounds per task per stream, before and after")
    ap.add_argument("--order", choices=("interleaved", "grouped"), default="interleaved")
    ap.add_argument("--postgres", action="store_true", help="a private PostgreSQL (fsync off) instead of SQLite")
    ap.add_argument("--env", action="append", default=[], metavar="GRADER_X=V", help="the service's settings")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--json", type=Path, default=None, help="[benchmarks/out/speed-SUITE.json]")
    args = ap.parse_args(argv)
    suite = SUITES.get(args.suite, Path(args.suite)).resolve()
    if not suite.is_dir():
        print(f"speed.py: no suite at {suite} (the real-world suite: tasks/releases.py realworld)", file=sys.stderr)
        return 2
    settings = get_settings(tasks_dir=suite)
    taskset = TaskSet(suite)
    ids = args.only.split(",") if args.only else taskset.ids()
    tasks, skipped = [], []
    for tid in ids:
        t = taskset.get(tid)
        if isinstance(t.check, TestsCheck) and runner_name(t) == "pytest" and t.gold_patch_text():
            tasks.append(t)
        else:
            skipped.append(tid)
    if not tasks:
        print("speed.py: no pytest task with a gold patch in the suite", file=sys.stderr)
        return 2
    images = Images(settings)
    bare_tasks = []
    for i, t in enumerate(tasks):
        image, prepared = images.instance_image(t)
        bare_tasks.append(
            BareTask(
                t,
                image,
                prepared.hidden,
                prepared.hidden_manifest(),
                unique_patch(t.gold_patch_text().decode(), 10**6 + i),
            )
        )
    rounds = args.rounds or max(1, args.count // (2 * args.streams * len(tasks)))
    name = args.suite if args.suite in SUITES else suite.name
    out = args.json or OUT / f"speed-{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        before = measure_bare(images.engine.client, bare_tasks, args.streams, rounds)
        with private_postgres() if args.postgres else contextlib.nullcontext() as pg:
            service = measure_service(args, suite, tasks, pg.url if pg is not None else None)
        after = measure_bare(images.engine.client, bare_tasks, args.streams, rounds)
        runs = before["runs"] + after["runs"]
        seconds = before["seconds"] + after["seconds"]
        bare = {
            "runs": runs,
            "seconds": seconds,
            "per_s": runs / seconds,
            "cpu_s_per_run": (before["cpu_s"] + after["cpu_s"]) / runs,
            "cpu_s_by_task": {t: (c + after["cpu_s_by_task"][t]) / 2 for t, c in before["cpu_s_by_task"].items()},
            "before_per_s": before["per_s"],
            "after_per_s": after["per_s"],
            "pytest_exit": {
                k: before["pytest_exit"].get(k, 0) + after["pytest_exit"].get(k, 0)
                for k in {*before["pytest_exit"], *after["pytest_exit"]}
            },
        }
        if service["per_s"] <= 0:
            raise MeasurementBroken("nothing was graded")
        if bare["per_s"] <= service["per_s"]:
            raise MeasurementBroken(
                f"the bare runs ({bare['per_s']:.2f}/s) are not faster than the service's grades "
                f"({service['per_s']:.2f}/s), which run the same tests and more"
            )
    except MeasurementBroken as e:
        out.write_text(json.dumps({"broken": str(e)}, indent=1))  # no figures: an earlier file must not stand in
        print(f"speed.py: the measurement is broken, no figures: {e}", file=sys.stderr)
        return 2
    for bt in bare_tasks:
        with contextlib.suppress(OSError):
            (bt.patch_dir / "submission.patch").unlink()
            bt.patch_dir.rmdir()
    figures = {
        "suite": name,
        "tasks": len(tasks),
        "skipped": skipped,
        "cores": os.cpu_count(),
        "database": "postgresql" if args.postgres else "sqlite",
        "workers": args.workers,
        "streams": args.streams,
        "order": args.order,
        "env": args.env,
        "bare": bare,
        "bare_s_per_run": args.streams / bare["per_s"],
        "service": {k: v for k, v in service.items() if k != "grades"},
        "ratio": service["per_s"] / bare["per_s"],
        "budget": budget(service["grades"], args.workers),
    }
    figures["cpu_per_grade"] = cpu_per_grade(service, figures["bare"]["cpu_s_per_run"])
    figures["by_task"] = by_task(service["grades"], bare["cpu_s_by_task"])
    report(figures)
    out.write_text(json.dumps({**figures, "grades": service["grades"]}, indent=1))
    print(f"written to {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    ok = service["done"] == service["accepted"] == args.count and set(service["verdicts"]) == {"PASS"}
    if not ok:
        print("speed.py: not every submission was graded PASS", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
