"""`grader worker`: the worker processes on one host, restarted when one dies, and the
reconciler in their parent.

Each worker is a forked process running an RQ SimpleWorker over the queues of the
environments this host takes grades of, the queue of grades of no known environment and
the webhook queue, taking turns between them (round robin: one environment's backlog
does not starve another's; within a queue, first in first out, but for a job whose
container or keeper the worker holds, which it takes from the first few before the head,
each head passed over at most a few times: jobs.take_warm); the jobs are grader/jobs.py's
entry points. The parent starts them, starts a new one for each that
exits, passes the reconciler (jobs.reconcile) once at start and then every
`reconcile_interval` seconds, and every 10 s tells the API whether this host's Docker
engine answers (/readyz) and looks again at which environments it has: with
GRADER_WORKER_ENVIRONMENTS=auto, those whose environment image the engine has, less any
whose instance image a worker here could not verify in the last UNVERIFIED_TTL seconds.
When that changes, each worker finishes its current job and starts again on the new
queues. SIGTERM or SIGINT stops the parent, which asks each worker to finish its current
job and waits for it.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from multiprocessing.process import BaseProcess
from types import FrameType
from typing import TYPE_CHECKING, Any

from rq import Queue, SimpleWorker
from rq.exceptions import NoSuchJobError
from rq.job import Job
from rq.worker import DequeueStrategy

from grader import jobs
from grader.config import Settings
from grader.errors import GraderError, StoreError
from grader.handles import DOCKER_KEY, UNVERIFIED_KEY, Handles, host, host_name

if TYPE_CHECKING:
    from redis import Redis

    from grader.images import Images

log = logging.getLogger(__name__)


class _WarmFirst(Queue):
    """RQ's queue, whose worker first looks for a job it holds the container of
    (jobs.take_warm), then pops the head as RQ does."""

    @classmethod
    def dequeue_any(
        cls,
        queues: Iterable[Queue],
        timeout: int | None,
        connection: Redis,
        job_class: type[Job] | None = None,
        serializer: Any = None,
        death_penalty_class: Any = None,
    ) -> tuple[Job, Queue] | None:
        queues = list(queues)
        try:
            taken = jobs.take_warm(queues, connection)
            if taken is not None:
                job_id, queue = taken
                return (job_class or Job).fetch(job_id, connection=connection, serializer=serializer), queue
        except NoSuchJobError:
            pass  # taken off its queue and gone since, as RQ's own pop passes over one
        except Exception as exc:  # noqa: BLE001 - the order of work is a hint: RQ's pop below
            log.debug("looking for a job whose container is warm: %s", exc)
        return super().dequeue_any(
            queues,
            timeout,
            connection=connection,
            job_class=job_class,
            serializer=serializer,
            death_penalty_class=death_penalty_class,
        )


def run_worker(
    svc: Handles, *, burst: bool = False, name: str | None = None, environments: Sequence[str] | None = None
) -> None:
    """One RQ worker over the grades of `environments` (every known one when None), those of
    no known environment, and the callbacks."""
    jobs.use(svc)
    queues = [q.name for q in [*svc.grade_queues(environments), svc.webhook_queue]]  # made as _WarmFirst
    worker = SimpleWorker(queues, connection=svc.redis, name=name, queue_class=_WarmFirst)
    worker.work(burst=burst, with_scheduler=True, logging_level="INFO", dequeue_strategy=DequeueStrategy.ROUND_ROBIN)


def ready_environments(svc: Handles, images: Images | None = None) -> list[str] | None:
    """The environments this host takes grades of now (GRADER_WORKER_ENVIRONMENTS); None
    when its engine cannot say (the workers keep what they had)."""
    want = svc.settings.worker_environments.strip()
    if want == "all":
        return svc.environments()
    if want != "auto":
        have = sorted({n.strip() for n in want.split(",") if n.strip()})
    else:
        from grader.images import Images  # the Docker SDK: loaded by the worker only

        images = images or Images(svc.settings)
        try:
            have = [e.name for e in images.environments() if images.engine.image_id(images.env_tag(e)) is not None]
        except GraderError as exc:
            log.warning("cannot tell which environment images this host has: %s", exc)
            return None
    try:
        prefix = f"{UNVERIFIED_KEY}{host(svc.settings)}:"
        refused = {k.decode()[len(prefix) :] for k in svc.redis.scan_iter(match=f"{prefix}*")}
    except Exception as exc:  # Redis away: no grade can be taken anyway
        log.warning("reading this host's refused environments: %s", exc)
        refused = set()
    return [e for e in have if e not in refused]


def run_workers(svc: Handles, count: int, *, stop: threading.Event | None = None) -> None:
    """`grader worker`: `count` worker processes, restarted when one dies, and the reconciler
    in this parent, once at start and then every `reconcile_interval` seconds."""
    ctx = mp.get_context("fork")
    stop = stop or threading.Event()
    procs: dict[int, BaseProcess] = {}
    from grader.images import Images

    images = Images(svc.settings)  # one engine client for the parent's looks every 10 s
    envs: list[str] = ready_environments(svc, images) or []
    asked: set[int] = set()  # workers told to finish their job and stop
    log.info("taking the grades of: %s", ", ".join(envs) or "no environment yet")

    def spawn(i: int) -> None:
        svc.db.dispose()  # no pooled connection crosses a fork
        p = ctx.Process(target=_worker_main, args=(svc.settings, i, envs), name=f"grader-worker-{i}", daemon=False)
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
            now = ready_environments(svc, images)
            if now is not None and now != envs:
                log.warning(
                    "this host now takes the grades of: %s (was: %s); each worker starts again after its current job",
                    ", ".join(now) or "no environment",
                    ", ".join(envs) or "none",
                )
                envs = now
                for p in procs.values():
                    # RQ's warm shutdown (once: a second SIGTERM would stop the grade in flight);
                    # started again below on the new queues
                    if p.is_alive() and p.pid is not None and p.pid not in asked:
                        asked.add(p.pid)
                        os.kill(p.pid, signal.SIGTERM)
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
        svc.redis.set(f"{DOCKER_KEY}{host(svc.settings)}", state, ex=30)
    except Exception as exc:
        log.warning("reporting Docker's state to Redis: %s", exc)


def _worker_main(settings: Settings, index: int, environments: list[str]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; SIGTERM is RQ's warm shutdown
    svc = Handles(settings)
    name = f"{host_name(settings)}-{index}"
    try:
        run_worker(svc, name=name, environments=environments)
    except Exception:
        log.exception("worker %s crashed", name)
        sys.exit(1)
    finally:  # a forked child ends without atexit: put its warm containers away now
        jobs.release()
