"""`grader worker`: the worker processes on one host, restarted when one dies, and the
reconciler in their parent.

Each worker is a forked process running an RQ SimpleWorker over the grading and the
webhook queues (the jobs are grader/jobs.py's entry points); the parent starts them,
starts a new one for each that exits, passes the reconciler (jobs.reconcile) once at
start and then every `reconcile_interval` seconds, and tells the API every 10 s whether
this host's Docker engine answers (/readyz). SIGTERM or SIGINT stops the parent, which
asks each worker to finish its current job and waits for it.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from multiprocessing.process import BaseProcess
from types import FrameType

from rq import SimpleWorker

from grader import jobs
from grader.config import Settings
from grader.errors import GraderError, StoreError
from grader.handles import DOCKER_KEY, Handles, host_name

log = logging.getLogger(__name__)


def run_worker(svc: Handles, *, burst: bool = False, name: str | None = None) -> None:
    jobs.use(svc)
    worker = SimpleWorker([svc.queue, svc.webhook_queue], connection=svc.redis, name=name)
    worker.work(burst=burst, with_scheduler=True, logging_level="INFO")


def run_workers(svc: Handles, count: int, *, stop: threading.Event | None = None) -> None:
    """`grader worker`: `count` worker processes, restarted when one dies, and the reconciler
    in this parent, once at start and then every `reconcile_interval` seconds."""
    ctx = mp.get_context("fork")
    stop = stop or threading.Event()
    procs: dict[int, BaseProcess] = {}

    def spawn(i: int) -> None:
        svc.db.dispose()  # no pooled connection crosses a fork
        p = ctx.Process(target=_worker_main, args=(svc.settings, i), name=f"grader-worker-{i}", daemon=False)
        p.start()
        procs[i] = p

    def _term(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _term)
    signal.signal(signal.SIGINT, _term)
    for i in range(count):
        spawn(i)
    next_pass = next_report = 0.0
    while not stop.is_set():
        if time.monotonic() >= next_report:
            report_docker(svc)
            next_report = time.monotonic() + 10
        for i, p in list(procs.items()):
            if not p.is_alive():
                log.warning("worker %d exited (%s); starting a new one", i, p.exitcode)
                spawn(i)
        if time.monotonic() >= next_pass:
            try:
                jobs.reconcile(svc)
            except (StoreError, GraderError, Exception) as exc:  # keep supervising through outages
                log.warning("reconciler pass failed: %s", exc)
            next_pass = time.monotonic() + svc.settings.reconcile_interval
        stop.wait(1.0)
    for p in procs.values():
        if p.is_alive() and p.pid is not None:  # alive: started, so it has a pid
            os.kill(p.pid, signal.SIGTERM)  # RQ finishes the current job, then exits
    for p in procs.values():
        p.join(timeout=svc.settings.job_timeout_margin)


def report_docker(svc: Handles) -> None:
    """Tell the API (/readyz) whether this host's engine answers; the report expires with us."""
    from grader.sandbox.docker import DockerEngine

    engine = DockerEngine()
    state = "ok" if engine.available() else "Docker engine does not answer"
    try:
        svc.redis.set(f"{DOCKER_KEY}{host_name().split(':')[0]}", state, ex=30)
    except Exception as exc:
        log.warning("reporting Docker's state to Redis: %s", exc)


def _worker_main(settings: Settings, index: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; SIGTERM is RQ's warm shutdown
    svc = Handles(settings)
    name = f"{host_name()}-{index}"
    try:
        run_worker(svc, name=name)
    except Exception:
        log.exception("worker %s crashed", name)
        sys.exit(1)
    finally:  # a forked child ends without atexit: put its warm containers away now
        jobs.release()
