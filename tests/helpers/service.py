"""Shared by the service tests: a Handles over a test's database and Redis, a small
authenticated wrapper around Flask's test client, an RQ worker in this process (`work`),
a webhook receiver (`Receiver`), the whole service as real processes (`Stack`), and what
the fault tests watch it with (`Ledger`, the containers it left)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import requests
from rq import SimpleWorker

from grader.config import get_settings
from grader.handles import Handles
from grader.store.keys import create_key
from helpers import ROOT

BIN = Path(sys.executable).parent / "grader"


def make_service(
    database_url: str, redis_url: str, tasks_dir: Path = ROOT / "tasks" / "examples", **overrides
) -> Handles:
    overrides = {"callback_allow_private": True, **overrides}
    settings = get_settings(
        tasks_dir=tasks_dir,
        environments_dir=ROOT / "environments",
        database_url=database_url,
        redis_url=redis_url,
        **overrides,
    )
    svc = Handles(settings)
    svc.db.migrate()
    return svc


def new_key(svc: Handles, team: str, **kw) -> str:
    with svc.db.write() as s:
        return create_key(s, team, **kw)


class Api:
    def __init__(self, client, key: str | None):
        self.client, self.key = client, key

    def _h(self, headers):
        h = {"Authorization": f"Bearer {self.key}"} if self.key else {}
        return {**h, **(headers or {})}

    def get(self, path, headers=None):
        return self.client.get(path, headers=self._h(headers))

    def post(self, path, json=None, headers=None, data=None, content_type=None):
        if data is not None:
            return self.client.post(
                path, data=data, headers=self._h(headers), content_type=content_type or "application/json"
            )
        return self.client.post(path, json=json, headers=self._h(headers))

    def delete(self, path, headers=None):
        return self.client.delete(path, headers=self._h(headers))


def work(svc: Handles) -> None:
    """Run every queued job (grading and webhooks) to the end, in this process."""
    SimpleWorker([*svc.grade_queues(), svc.webhook_queue], connection=svc.redis).work(
        burst=True, logging_level="WARNING"
    )


class Receiver:
    """A local HTTP endpoint that answers each POST with the next scripted status."""

    def __init__(self, statuses):
        self.statuses, self.got = list(statuses), []
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.got.append((dict(self.headers), body))
                code = outer.statuses.pop(0) if outer.statuses else 200
                self.send_response(code)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"

    def close(self):
        self.server.shutdown()


def submit_run(api: Api, run: str, outcomes: dict[str, list[str]], patch: str = "x") -> dict[str, str]:
    """outcomes: task -> verdict per trial. Returns submission id -> verdict."""
    items, verdicts = [], []
    for task_id, trials in outcomes.items():
        for trial, v in enumerate(trials):
            items.append({"task_id": task_id, "patch": f"{patch}{run}{trial}", "trial": trial})
            verdicts.append(v)
    r = api.post("/v1/submissions/batch", json={"run_id": run, "submissions": items})
    assert r.status_code == 202, r.json
    return {it["id"]: v for it, v in zip(r.json["items"], verdicts, strict=True)}


# --- the service as real processes ------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def api_process(database_url: str, redis_url: str, tmp_path: Path, *args: str, **env: str) -> Iterator[str]:
    """`grader serve` alone (no worker: what is accepted stays queued) on this database,
    with extra arguments and GRADER_* variables; yields its URL once it answers."""
    port = _free_port()
    env = {
        "GRADER_DATABASE_URL": database_url,
        "GRADER_REDIS_URL": redis_url,
        "GRADER_TASKS_DIR": str(ROOT / "tasks" / "examples"),
        "GRADER_ENVIRONMENTS_DIR": str(ROOT / "environments"),
        "GRADER_CACHE": "false",
        "GRADER_CACHE_DIR": str(tmp_path / "cache"),
        **env,
    }
    log_path = tmp_path / "api.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(BIN), "serve", "--bind", f"127.0.0.1:{port}", *(args or ("--workers", "2"))],
            env={**os.environ, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if requests.get(f"{url}/healthz", timeout=2).status_code < 500:
                        break
                except requests.RequestException:
                    pass
                assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.3)
            yield url
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)


@contextlib.contextmanager
def worker_process(database_url: str, redis_url: str, tmp_path: Path, **env: str) -> Iterator[subprocess.Popen]:
    """`grader worker --count 1` on this database and Redis, with GRADER_* `env`, for the
    tests that need verdicts without Docker (a patch the vetting refuses is PATCH FAILED
    before any container: cheap_patch in benchmarks/_service.py makes one)."""
    env = {
        "GRADER_DATABASE_URL": database_url,
        "GRADER_REDIS_URL": redis_url,
        "GRADER_TASKS_DIR": str(ROOT / "tasks" / "examples"),
        "GRADER_ENVIRONMENTS_DIR": str(ROOT / "environments"),
        "GRADER_CACHE": "false",
        "GRADER_CACHE_DIR": str(tmp_path / "cache"),
        # every environment's grades, whatever images the machine has: these need none
        "GRADER_WORKER_ENVIRONMENTS": "all",
        **env,
    }
    with open(tmp_path / "worker.log", "wb") as log:
        proc = subprocess.Popen(
            [str(BIN), "worker", "--count", "1"],
            env={**os.environ, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            yield proc
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def outside_patch(tag: str, pad: int = 0) -> str:
    """A unique patch the vetting refuses (a path outside the repository): PATCH FAILED by
    a worker without a container, and never answered from the cache of another's."""
    return f"--- a/../outside-{tag}.txt\n+++ b/../outside-{tag}.txt\n@@ -0,0 +1 @@\n+{tag}{'x' * pad}\n"


def _children() -> dict[int, list[int]]:
    """ppid -> pids, of every process now."""
    out: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            out.setdefault(ppid, []).append(int(d.name))
    return out


def rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Stack:
    """`grader serve` (gunicorn, 2 processes) and `grader worker` as real processes, each
    logging to a file in `logs`. It remembers every process it ever had (`seen`), so that
    the grading containers it made can be told from other graders' on the same engine
    (containers are labelled grader.owner=host:pid of the worker process that made them)."""

    def __init__(self, env: dict[str, str], logs: Path):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, **env}
        self.logs = logs
        self.procs: list[subprocess.Popen] = []
        self.seen: set[int] = set()
        self.key: str | None = None

    def start(self, workers: int = 2) -> Stack:
        for name, args in (
            ("api", ["serve", "--bind", f"127.0.0.1:{self.port}", "--workers", "2"]),
            ("worker", ["worker", "--count", str(workers)]),
        ):
            log = open(self.logs / f"{name}.log", "wb")
            self.procs.append(
                subprocess.Popen(
                    [str(BIN), *args], env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                )
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    self.observe()
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.3)
        raise AssertionError(f"the service did not become ready:\n{self.tail()}")

    def tree(self, which: str) -> list[int]:
        """The live processes of 'api' or 'worker': the command and its descendants."""
        leader = self.procs[0 if which == "api" else 1]
        kids, out, todo = _children(), [], [leader.pid]
        while todo:
            pid = todo.pop()
            out.append(pid)
            todo += kids.get(pid, [])
        return [p for p in out if Path(f"/proc/{p}").exists()]

    def observe(self) -> set[int]:
        """Every live process of the stack now; remembered in `seen`."""
        now = set(self.tree("api")) | set(self.tree("worker"))
        self.seen |= now
        return now

    def worker_children(self) -> list[int]:
        """The grading processes (children of `grader worker`)."""
        leader = self.procs[1].pid
        return sorted(_children().get(leader, []))

    def rss(self) -> dict[str, int]:
        """Resident memory in bytes of the API processes and of the worker processes."""
        return {
            "api": sum(rss_bytes(p) for p in self.tree("api")),
            "workers": sum(rss_bytes(p) for p in self.tree("worker")),
        }

    def log_text(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.logs.glob("*.log")))

    def tail(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in self.logs.glob("*.log"))

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                self.observe()
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    # --- grading containers ---------------------------------------------------------------
    def containers(self) -> list:
        """Grading containers on the engine made by a process of this stack."""
        from grader.sandbox.docker import LABEL, OWNER_LABEL, DockerEngine

        host = socket.gethostname()
        out = []
        for c in DockerEngine().client.containers.list(all=True, ignore_removed=True, filters={"label": LABEL}):
            owner_host, _, pid = (c.labels or {}).get(OWNER_LABEL, "").rpartition(":")
            if owner_host == host and pid.isdigit() and int(pid) in self.seen:
                out.append(c)
        return out

    def assert_no_orphans(self, timeout: float = 60) -> None:
        """No container of a dead process of this stack is left (the live workers' warm,
        idle ones are theirs to keep)."""
        deadline = time.monotonic() + timeout
        while True:
            live = self.observe()
            left = [c for c in self.containers() if int(c.labels["grader.owner"].rpartition(":")[2]) not in live]
            if not left:
                return
            assert time.monotonic() < deadline, [(c.name, c.status, c.labels["grader.owner"]) for c in left]
            time.sleep(1)

    def assert_no_containers(self, timeout: float = 30) -> None:
        """After `stop()`: nothing the stack made is left, idle warm containers included."""
        deadline = time.monotonic() + timeout
        while left := self.containers():
            assert time.monotonic() < deadline, [(c.name, c.status, c.labels["grader.owner"]) for c in left]
            time.sleep(0.5)


# --- watching submissions through a fault ------------------------------------------------------
class Ledger:
    """Every state of some submissions seen through the API while faults happen. It fails at
    once if a submission is seen to leave a final state, to change a final verdict or its
    grade (the grade's measured duration fingerprints it), or to count fewer attempts.

    `client` reads the submissions: a host's (an admin key), who sees every field of a
    result; a team's view of a task whose feedback is `tests` carries no durations."""

    def __init__(self, client, ids=(), stack: Stack | None = None):
        self.client, self.stack = client, stack
        self.history: dict[str, list[tuple]] = {}
        self.add(ids)

    def add(self, ids) -> None:
        for i in ids:
            self.history.setdefault(i, [])

    @staticmethod
    def snapshot(sub: dict) -> tuple:
        result = sub.get("result") or {}
        return (
            sub["status"],
            sub["verdict"],
            sub["attempts"],
            sub["errors"],
            sub["host"],
            sub["finished_at"],
            (result.get("durations") or {}).get("total"),
        )

    def poll(self) -> dict[str, dict]:
        if self.stack is not None:
            self.stack.observe()
        now = {}
        for i, seen in self.history.items():
            sub = self.client.get(i)
            now[i] = sub
            snap = self.snapshot(sub)
            if seen and seen[-1] == snap:
                continue
            if seen:
                prev = seen[-1]
                assert prev[0] not in ("done", "cancelled"), f"{i} changed after it was final: {prev} -> {snap}"
                assert snap[2] >= prev[2], f"{i} counted fewer attempts: {prev} -> {snap}"
            seen.append(snap)
        return now

    def settle(self, timeout: float = 180, every: float = 0.3) -> dict[str, dict]:
        """Poll until every submission is final; then a few polls more, which must not change it."""
        deadline = time.monotonic() + timeout
        while True:
            now = self.poll()
            if all(s["status"] in ("done", "cancelled") for s in now.values()):
                break
            assert time.monotonic() < deadline, (
                {i: s["status"] for i, s in now.items()},
                self.stack.tail() if self.stack else "",
            )
            time.sleep(every)
        for _ in range(3):
            time.sleep(every)
            now = self.poll()
        return now

    def transitions(self, i: str) -> list[tuple]:
        return list(self.history[i])

    def assert_database_agrees(self, db_url: str, final: dict[str, dict]) -> None:
        """What the database holds is what the API reported: status, verdict, attempts,
        retries, who graded it, when, and the grade's duration."""
        from grader.serializers import _iso
        from grader.store.db import Database
        from grader.store.models import Submission

        db = Database(db_url)
        try:
            with db.read() as s:
                rows = {r.id: r for r in s.query(Submission).filter(Submission.id.in_(list(final)))}
                held = {
                    i: (r.status, r.verdict, r.attempts, r.errors, r.host, _iso(r.finished_at), r.duration)
                    for i, r in rows.items()
                }
        finally:
            db.dispose()
        told = {i: self.snapshot(s) for i, s in final.items()}
        assert held == told, {i: (held.get(i), told[i]) for i in told if held.get(i) != told[i]}


def finish_queued_as(svc: Handles, verdict: str = "PASS", explanation: str = "set by the test") -> None:
    """Every queued submission claimed and finished with `verdict`, as a worker would write
    it, without grading: for tests of what the service does with verdicts, not of grading."""
    from grader.store import submissions as subs
    from grader.store.models import Submission
    from grader.verdict import Provenance, Result, Verdict

    with svc.db.read() as s:
        rows = s.query(Submission).filter(Submission.status == "queued").all()
    for row in rows:
        c = subs.claim(svc.db, row.id, row.job_id, "test-host", 60)
        result = Result(
            task_id=row.task_id,
            verdict=Verdict(verdict),
            explanation=explanation,
            durations={"total": 1.0},
            provenance=Provenance(
                patch_sha256=row.patch_sha256, task_hash=row.task_hash, image_id="i", grader_version="t"
            ),
        )
        assert subs.finish(svc.db, c, result)
