"""What the API and the workers share: the settings, the database, Redis and its queues,
and the task set. Built once per process from the settings; nothing is bound at import."""

from __future__ import annotations

import datetime as dt
import functools
import logging
import os
import socket
import threading
from collections.abc import Sequence

from redis import Redis
from redis.exceptions import RedisError
from rq import Queue
from rq.job import Job
from rq.queue import EnqueueData

from grader.config import DEFAULT_TIMEOUT, Settings, get_settings
from grader.errors import StoreError, TaskError, TaskNotFound
from grader.store.db import Database
from grader.tasks.loader import TaskSet, TasksRefused
from grader.tasks.model import Task

log = logging.getLogger(__name__)

GRADE_JOB = "grader.jobs.grade_submission"
WEBHOOK_JOB = "grader.jobs.deliver_webhook"
DOCKER_KEY = "grader:docker:"  # + host: what `grader worker` last saw of its Docker engine (/readyz reads it)
# Seconds Redis keeps a job once it ends (the database keeps the submission regardless).
RESULT_TTL = 3600  # a grading job that finished
FAILURE_TTL = 86400  # a job that failed (a grading or a webhook delivery), to be looked at


UNVERIFIED_KEY = "grader:unverified:"  # + host:environment: an instance image there failed its check (workers.py)
UNVERIFIED_TTL = 600  # seconds the host takes none of that environment's grades after such a refusal


def host_name(settings: Settings | None = None) -> str:
    """This worker process as claims and worker names give it: the host (GRADER_HOST_NAME,
    else the machine's hostname) and the pid."""
    return f"{host(settings)}:{os.getpid()}"


def host(settings: Settings | None = None) -> str:
    return (settings or get_settings()).host_name or socket.gethostname()


def grade_queue_name(queue_name: str, environment: str | None) -> str:
    """The RQ queue of an environment's grades (NAME-env-ENVIRONMENT); NAME itself for
    grades no environment is known for (a task removed since it was accepted, jobs queued
    before queues were per environment), which every worker takes."""
    return queue_name if environment is None else f"{queue_name}-env-{environment}"


class Handles:
    def __init__(self, settings: Settings | None = None, *, tasks: TaskSet | None = None):
        self.settings = settings or get_settings()
        self.db = Database(self.settings.database_url, pool_size=self.settings.database_pool)
        self.redis = Redis.from_url(
            self.settings.redis_url, socket_timeout=10, socket_connect_timeout=5, health_check_interval=30
        )
        self.queue = Queue(self.settings.queue_name, connection=self.redis)  # grades of no known environment
        self.webhook_queue = Queue(f"{self.settings.queue_name}-webhooks", connection=self.redis)
        self._queues: dict[str | None, Queue] = {None: self.queue}
        self._tasks = tasks
        self._loading = threading.Lock()

    @property
    def tasks(self) -> TaskSet:
        """Loaded leniently: a broken task file is refused (`tasks.refused`) and logged,
        the others serve. Loaded once: the requests that need it first (a new process's
        readiness probes, retried every few seconds) wait for the one load, which for
        2,000 tasks is 20 s of CPU, instead of each loading it again beside the others."""
        if self._tasks is None:
            with self._loading:
                if self._tasks is None:
                    self._tasks = self._load_tasks()
        return self._tasks

    def _load_tasks(self) -> TaskSet:
        tasks = TaskSet(self.settings.tasks_dir, strict=False)
        self._refuse_answered_tasks(tasks)
        for path, why in tasks.refused.items():
            log.error("task file %s refused: %s", path, why)
        return tasks

    def _refuse_answered_tasks(self, tasks: TaskSet) -> None:
        """A task whose answer sits in another served task's public material (a later base
        of one history) is not served beside it, unless the suite says the host chose to
        (suite.yaml, serve_together). Found once per task set (cached by its hashes)."""
        from grader.tasks.leaks import find_leaks_cached, unchosen
        from grader.tasks.loader import serve_together

        together = serve_together(self.settings.tasks_dir)
        if together == "all" or len(tasks) < 2:
            return
        try:
            leaks = find_leaks_cached(list(tasks), self.settings.cache_dir)
        except Exception as exc:  # noqa: BLE001 - a repository the check cannot read serves as before, logged
            log.error("could not look for answers across tasks: %s", exc)
            return
        for leak in unchosen(leaks, together):
            tasks.refuse(
                leak.secret,
                f"its answer is in the public material of {leak.public}, served beside it "
                "(list the pair under serve_together in suite.yaml to serve them together)",
            )

    def reload_tasks(self) -> TaskSet:
        """Read the tasks directory again. Any refused file keeps the previous set in
        service, whole (a TaskError naming what failed): a fix half-applied is worse
        than none. With no previous set, the valid tasks serve."""
        fresh = self._load_tasks()
        if fresh.refused and self._tasks is not None:
            raise TasksRefused(
                "the tasks directory holds invalid task files; the previous set stays in service: "
                + "; ".join(f"{p}: {why}" for p, why in fresh.refused.items()),
                fresh.refused,
            )
        self._tasks = fresh
        self.task_hash.cache_clear()
        return fresh

    def tasks_status(self) -> tuple[bool, list[str]]:
        """Whether every task file loaded, and the refused ones' paths (no reasons: a
        reason may quote a task's hidden content; hosts read them in the log)."""
        try:
            refused = sorted(self.tasks.refused)
        except TaskError:
            return False, ["the tasks directory cannot be read"]
        return not refused, refused

    def task(self, task_id: str) -> Task:
        return self.tasks.get(task_id)

    @functools.lru_cache(maxsize=4096)  # noqa: B019 (one Handles a process, kept for its life: the cache holds it no longer)
    def task_hash(self, task_id: str) -> str:
        return self.task(task_id).definition_hash()

    def job_timeout(self, task_id: str) -> int:
        try:
            timeout = self.task(task_id).limits.timeout
        except TaskNotFound:
            timeout = DEFAULT_TIMEOUT
        # twice: a job that judges an ERROR may grade the task's gold patch after the submission's
        return int(2 * timeout + self.settings.job_timeout_margin)

    # --- queueing -------------------------------------------------------------------------
    def grade_queue(self, environment: str | None) -> Queue:
        """The queue of one environment's grades (grade_queue_name)."""
        if environment not in self._queues:
            name = grade_queue_name(self.settings.queue_name, environment)
            self._queues[environment] = Queue(name, connection=self.redis)
        return self._queues[environment]

    def queue_for(self, task_id: str) -> Queue:
        """Where a task's grades wait: its environment's queue, taken only by hosts that have
        the environment's image (workers.py), so a host never turns a grade into a build of one."""
        try:
            return self.grade_queue(self.task(task_id).environment)
        except TaskError:  # removed or unreadable: any worker finishes it (as ERROR, the service's fault)
            return self.queue

    def environments(self) -> list[str]:
        """Every environment a grade can be queued for: the served tasks' and the
        environments directory's."""
        names = {t.environment for t in self.tasks}
        root = self.settings.environments_dir
        if root.is_dir():
            names |= {p.name for p in root.iterdir() if (p / "Dockerfile").is_file()}
        return sorted(names)

    def grade_queues(self, environments: Sequence[str] | None = None) -> list[Queue]:
        """The queue of grades of no known environment, then each environment's (every one
        known when `environments` is None)."""
        envs = self.environments() if environments is None else environments
        return [self.queue, *(self.grade_queue(e) for e in envs)]

    def enqueue(self, submission_id: str, job_id: str, task_id: str, *, delay: float = 0.0) -> None:
        """Put the grading job for a submission on its environment's queue. Raises StoreError
        if Redis is unreachable: the database already holds the submission, and the reconciler
        enqueues it."""
        kwargs = dict(
            job_id=job_id,
            job_timeout=self.job_timeout(task_id),
            result_ttl=RESULT_TTL,
            failure_ttl=FAILURE_TTL,
            description=f"grade {submission_id} ({task_id})",
            meta={"task": task_id},  # what the worker before it starts a container for (jobs.py)
        )
        queue = self.queue_for(task_id)
        try:
            if delay > 0:
                queue.enqueue_in(dt.timedelta(seconds=delay), GRADE_JOB, submission_id, **kwargs)
            else:
                queue.enqueue(GRADE_JOB, submission_id, **kwargs)
        except RedisError as exc:
            raise StoreError(f"redis: {exc}") from exc

    def enqueue_many(self, items: Sequence[tuple[str, str | None, str]]) -> None:
        """(submission id, job id, task id) each, each to its environment's queue in input
        order; one round trip per 500."""
        try:
            data = [
                (
                    self.queue_for(tid),
                    Queue.prepare_data(
                        GRADE_JOB,
                        args=(sid,),
                        job_id=jid,
                        timeout=self.job_timeout(tid),
                        result_ttl=RESULT_TTL,
                        failure_ttl=FAILURE_TTL,
                        description=f"grade {sid} ({tid})",
                        meta={"task": tid},
                    ),
                )
                for sid, jid, tid in items
            ]
            for i in range(0, len(data), 500):
                with self.redis.pipeline() as pipe:
                    for queue, chunk in _runs(data[i : i + 500]):
                        queue.enqueue_many(chunk, pipeline=pipe)
                    pipe.execute()
        except RedisError as exc:
            raise StoreError(f"redis: {exc}") from exc

    def job_alive(self, job_id: str | None) -> bool:
        """Whether Redis holds a job that will still run (queued, scheduled, deferred or started)."""
        if not job_id:
            return False
        try:
            job = Job.fetch(job_id, connection=self.redis)
        except Exception:  # NoSuchJobError, or an unreadable job hash
            return False
        return job.get_status(refresh=False) in ("queued", "scheduled", "deferred", "started")

    def cancel_job(self, job_id: str | None) -> None:
        if not job_id:
            return
        try:
            Job.fetch(job_id, connection=self.redis).cancel()
        except Exception:  # gone already: the job would skip the cancelled submission anyway
            pass

    def enqueue_webhook(self, submission_id: str, *, attempt: int = 0, delay: float = 0.0) -> None:
        kwargs = dict(job_timeout=int(self.settings.webhook_timeout * 3 + 30), result_ttl=600, failure_ttl=FAILURE_TTL)
        try:
            if delay > 0:
                self.webhook_queue.enqueue_in(
                    dt.timedelta(seconds=delay), WEBHOOK_JOB, submission_id, attempt, **kwargs
                )
            else:
                self.webhook_queue.enqueue(WEBHOOK_JOB, submission_id, attempt, **kwargs)
        except RedisError as exc:
            raise StoreError(f"redis: {exc}") from exc

    # --- health ---------------------------------------------------------------------------
    @property
    def done_channel(self) -> str:
        """The Redis channel on which each finished submission's id is published (grader/api/waiting.py)."""
        return f"{self.settings.queue_name}:done"

    def announce_done(self, submission_id: str) -> None:
        """Wake the requests held for this submission's verdict. Best effort: a held request
        also reads the database every few seconds, so a message lost only delays it."""
        try:
            self.redis.publish(self.done_channel, submission_id)
        except RedisError as exc:
            log.warning("announcing %s failed (%s); requests waiting for it will read the database", submission_id, exc)

    def ping_redis(self) -> None:
        try:
            self.redis.ping()
        except RedisError as exc:
            raise StoreError(f"redis: {exc}") from exc

    def close(self) -> None:
        self.db.dispose()
        self.redis.close()


def _runs(data: Sequence[tuple[Queue, EnqueueData]]) -> list[tuple[Queue, list[EnqueueData]]]:
    """Consecutive items bound for one queue, together, in order."""
    out: list[tuple[Queue, list[EnqueueData]]] = []
    for queue, item in data:
        if out and out[-1][0] is queue:
            out[-1][1].append(item)
        else:
            out.append((queue, [item]))
    return out
