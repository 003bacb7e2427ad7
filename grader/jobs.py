"""RQ entry points and the reconciler.

A job carries only a submission id. It claims the submission (queued -> running) with a
compare-and-set, keeps a lease on it while the grade runs, and finishes it only if it still
holds the claim. A grade that ERRORs is put back on the queue with backoff, within bounds
per submission and across the service; then the task's gold patch judges whose fault it
was (grader/blame.py): a submission cannot launder its failure into an uncharged ERROR.
The reconciler re-enqueues what the database holds as queued or running but no live job
owns: after a worker was killed (its lease runs out) or Redis lost its data, a bounded
number of times. Together they make sure nothing accepted is lost, nothing is graded
twice into different results, and nothing is graded forever.

What follows a verdict (waking held requests, the callback) is grader/notify.py; the
worker processes that run these jobs, and the reconciler's loop, are grader/workers.py.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from grader import blame, notify, serializers
from grader.errors import GraderError, StoreError, TaskError, TaskNotFound
from grader.grading.adjudicate import Ask, Case, Facts, Final, Policy, Retry, adjudicate, removed_task
from grader.handles import UNVERIFIED_KEY, UNVERIFIED_TTL, Handles, host, host_name
from grader.pipeline import Grader
from grader.store import cache
from grader.store import submissions as subs
from grader.store.models import Status, Submission, utcnow
from grader.verdict import Provenance, Result, Verdict
from grader.version import GRADER_VERSION

if TYPE_CHECKING:
    from redis import Redis
    from rq import Queue
    from rq.job import Job

    from grader.tasks.model import Task

log = logging.getLogger(__name__)

_service: Handles | None = None
_grader: Grader | None = None


def context() -> tuple[Handles, Grader]:
    """The worker process's service and grader, made once: the grader keeps warm containers."""
    global _service, _grader
    if _service is None:
        _service = Handles()
        _grader = Grader(_service.settings)
    assert _grader is not None  # set with the service, here or by use()
    return _service, _grader


def use(service: Handles, grader: Grader | None = None) -> None:
    """Set the process's service (tests, and `grader worker` after it migrated the schema)."""
    global _service, _grader
    _service, _grader = service, grader or Grader(service.settings)


def release() -> None:
    """Put this process's warm containers away (a forked worker ends without atexit)."""
    if _grader is not None and _grader._sandbox is not None:
        _grader._sandbox.close()


# --- grading ---------------------------------------------------------------------------------
class _Lease(threading.Thread):
    def __init__(self, svc: Handles, claim: subs.Claim):
        super().__init__(daemon=True, name=f"lease-{claim.submission_id}")
        self.svc, self.claim = svc, claim
        self.stop = threading.Event()
        self.lost = False

    def run(self) -> None:
        every = max(1.0, self.svc.settings.lease_seconds / 3)
        while not self.stop.wait(every):
            try:
                if not subs.renew(self.svc.db, self.claim, self.svc.settings.lease_seconds):
                    self.lost = True
                    return
            except StoreError as exc:  # the database may come back before the lease ends
                log.warning("renewing the lease on %s: %s", self.claim.submission_id, exc)


class _Stages:
    """Seconds per stage of one job, kept in its RQ job's meta ("stages") as it ends, so
    that a benchmark (benchmarks/speed.py) or an operator (`rq info`, the job's hash) sees
    where a grade's time went outside the container: the database's claim, read and
    finish, the cache lookup, the verdict's masking, what follows it."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.monotonic() - t

    def save(self, job: Job | None) -> None:
        """One write to Redis; a failure loses the figures, never the grade."""
        if job is None:
            return
        job.meta["stages"] = {
            k: round(v, 5) for k, v in {**self.seconds, "job": time.monotonic() - self.started}.items()
        }
        try:
            job.save_meta()  # type: ignore[no-untyped-call]
        except Exception as exc:  # noqa: BLE001 - the verdict is written already
            log.debug("saving the stages of job %s: %s", job.id, exc)


def grade_submission(submission_id: str) -> str:
    from rq import get_current_job

    stages = _Stages()
    job = get_current_job()
    try:
        return _grade_submission(submission_id, job, stages)
    finally:
        stages.save(job)


def _grade_submission(submission_id: str, job: Job | None, stages: _Stages) -> str:
    svc, grader = context()
    st = svc.settings
    job_id = job.id if job is not None else None
    with stages("claim"):
        claim = subs.claim(svc.db, submission_id, job_id, host_name(st), st.lease_seconds)
    if claim is None:
        return "not claimed: cancelled, finished or owned by another job"
    lease = _Lease(svc, claim)
    lease.start()
    retry = errored = cached = False
    try:
        with stages("load"), svc.db.read() as s:
            sub = s.get(Submission, submission_id)
            assert sub is not None  # just claimed
            task_id, patch, errors, sha = sub.task_id, sub.patch, sub.errors, sub.patch_sha256
            first_error, started = _epoch(sub.first_error_at), _epoch(sub.started_at)

        def lookup(p: Provenance) -> Result | None:
            nonlocal cached
            if not st.cache:
                return None
            with stages("cache_lookup"), svc.db.read() as s:
                hit = (
                    cache.lookup(s, p.task_hash, p.patch_sha256, p.grader_version, p.image_id)
                    if p.task_hash and p.image_id
                    else None
                )
                if hit is None or hit.id == submission_id:
                    return None
                cached = True
                return Result.model_validate(hit.result)

        def case(**kw: Any) -> Case:
            return Case(
                task_id=task_id,
                patch_sha256=sha,
                grader_version=GRADER_VERSION,
                attempts=claim.attempts,
                max_attempts=st.max_attempts,
                **kw,
            )

        policy = Policy(max_retries=st.max_retries, max_attempts=st.max_attempts)
        try:
            with stages("task"):
                task = svc.task(task_id)
        except TaskNotFound as exc:  # removed since it was accepted: the service's fault, not theirs
            task = None
            first = case(errors=errors + 1)
            facts = Facts(case=replace(first, last=removed_task(first, str(exc))), task_missing=True)
        if task is not None and claim.attempts > st.max_attempts:
            # started too often without a verdict (its workers were lost): judged without
            # running the patch again, so this attempt cannot be lost the same way
            facts = Facts(case=case(errors=errors, lost=True, failing_since=started, task_hash=task.definition_hash()))
        elif task is not None:
            with stages("prewarm"):
                _prewarm_next(svc, grader, job, task_id)
            with stages("grade"):
                graded = grader.grade(task, patch, lookup=lookup)
            _refuse_unverified(svc, grader)
            p = graded.provenance
            erred = graded.verdict is Verdict.ERROR
            facts = Facts(
                case=case(
                    errors=errors + (1 if erred else 0),
                    last=graded,
                    task_hash=p.task_hash,
                    failing_since=first_error if first_error is not None else time.time(),
                ),
                breaker=blame.known_broken(_gold_cache(svc), _gold_key(svc, p)) if erred else None,
            )
        with stages("settle"):
            step = _settle(svc, grader, task, facts, policy)
        if isinstance(step, Retry):
            retry, result = True, facts.case.last or removed_task(facts.case, step.reason)
        else:
            result = step.result
            # ERROR after being graded: counted; the removed task's and a judged one's stay as decided
            errored = (
                task is not None
                and not facts.case.lost
                and (facts.case.last is not None)
                and (facts.case.last.verdict is Verdict.ERROR)
            )
    finally:
        lease.stop.set()

    if retry:
        new_job = subs.retry_later(svc.db, claim, result.error or result.explanation)
        if new_job is None:
            return "claim lost; the retry is someone else's"
        delay = st.retry_backoff * (2 ** min(errors, 16))
        log.warning(
            "submission %s: ERROR (%s); retry %d in %.0f s",
            submission_id,
            (result.error or "").splitlines()[0] if result.error else "",
            errors + 1,
            delay,
        )
        try:
            svc.enqueue(submission_id, new_job, task_id, delay=delay)
        except StoreError as exc:
            log.warning("re-enqueueing %s failed (%s); the reconciler will", submission_id, exc)
        return f"ERROR, retry {errors + 1} queued"
    with stages("mask"):
        shown = _masked(svc, task_id, result, patch)
    with stages("finish"):
        finished = subs.finish(svc.db, claim, result, cached=cached, errored=errored, shown=shown)
    if not finished:
        log.warning(
            "submission %s: claim lost before finishing; this grade (%s) is discarded", submission_id, result.verdict
        )
        return "claim lost; result discarded"
    if result.blame is not None:
        log.warning(
            "submission %s: %s, judged the %s's fault: %s",
            submission_id,
            result.verdict,
            result.blame.at_fault,
            result.blame.reason,
        )
    with stages("notify"):
        notify.after_finish(svc, submission_id)
    return result.verdict.value


def _prewarm_next(svc: Handles, grader: Grader, job: Job | None, current: str) -> None:
    """While this grade runs, have a container started for the task of the job this worker
    is likely to take next from this job's queue: a suite of many tasks otherwise finds no idle container of the next
    task's shape (a worker keeps one for each of its last few shapes) and starts one cold,
    a second of a grade's time, in its path. Another worker may take that job first: the
    container then waits for the task's next grade here, or is dropped for a newer shape.
    The same task as this one is left to the refill after this run. With GRADER_AFFINITY,
    none when one of the first AFFINITY_WINDOW jobs is of this task or of one it holds: it
    takes that one next (take_warm). Never an error: the grade starts cold, as before."""
    if job is None or not (svc.settings.prewarm and svc.settings.prewarm_next):
        return
    from rq import Queue
    from rq.job import Job

    try:
        queue = Queue(job.origin, connection=svc.redis)
        # the other workers grading from this queue started before this one, so they finish
        # first and take the jobs at the head: this worker's next is the one after theirs
        ahead = max(0, queue.started_job_registry.get_job_count(cleanup=False) - 1)
        window = AFFINITY_WINDOW if svc.settings.affinity else 0
        tasks = [_task_of(j) for j in Job.fetch_many(queue.get_job_ids(0, max(ahead + 1, window)), svc.redis)]
        if any(t is not None and (t == current or _held(svc, grader, t)) for t in tasks[:window]):
            return  # it takes one it holds next (take_warm): a start now would be for another worker's job
        task_id = tasks[ahead] if len(tasks) > ahead else None
        if task_id and task_id != current:
            grader.prewarm(svc.task(task_id))
    except Exception as exc:  # noqa: BLE001 - a container not started ahead is only a cold start
        log.debug("starting a container for the next grade: %s", exc)


AFFINITY_WINDOW = 4  # the jobs at the head of a queue a worker looks at for one it holds warm
AFFINITY_PASSES = 3  # how many times a job at the head of its queue may be passed over
PASSED_KEY = "grader:passed:"  # + job id: how many times it was passed over at its queue's head
PASSED_TTL = 3600


def take_warm(queues: Sequence[Queue], connection: Redis) -> tuple[str, Queue] | None:
    """Work goes where its container is. Of the first AFFINITY_WINDOW jobs of the first
    non-empty queue (in the worker's order: round robin), the first whose task this worker
    holds a container or keeper of, idle or being started (Grader.is_warm); taken off the
    queue here (LREM: of two workers, one has it) when it is not the head, else None and
    RQ pops the head as always. Each worker keeps the keepers of the tasks it grades, so
    without this the workers of a host each start a keeper of every task (a start costs
    0.4 to 0.5 s of the machine's CPU; with more tasks than a worker keeps, nearly every
    grade). A head is passed over at most AFFINITY_PASSES times, then taken whoever holds
    it; every job taken before the head is a pass over it, so a job is overtaken by at most
    AFFINITY_PASSES x (AFFINITY_WINDOW - 1) jobs that came after it. None when
    GRADER_AFFINITY is off."""
    svc, grader = context()
    if not svc.settings.affinity:
        return None
    from rq.job import Job
    from rq.utils import as_text

    for queue in queues:
        ids = [as_text(i) for i in connection.lrange(queue.key, 0, AFFINITY_WINDOW - 1)]
        if not ids:
            continue
        if len(ids) == 1:
            return None
        tasks = map(_task_of, Job.fetch_many(ids, connection=connection))
        warm = next((n for n, task in enumerate(tasks) if _held(svc, grader, task)), None)
        if not warm:  # none held, or the head: RQ's own pop
            return None
        passed = f"{PASSED_KEY}{ids[0]}"
        with connection.pipeline() as pipe:
            pipe.incr(passed)
            pipe.expire(passed, PASSED_TTL)
            times, _ = pipe.execute()
        if times > AFFINITY_PASSES or connection.lrem(queue.key, 1, ids[warm]) != 1:
            return None  # passed over enough; or another worker took it first
        return ids[warm], queue
    return None


def _task_of(job: Job | None) -> str | None:
    """The task a grade's job names in its meta (None for another job, or one gone)."""
    task_id = job.meta.get("task") if job is not None else None
    return task_id if isinstance(task_id, str) else None


def _held(svc: Handles, grader: Grader, task_id: str | None) -> bool:
    """Whether this worker holds a container or keeper of the task (one no longer served, or
    no task, is held by nobody)."""
    if task_id is None:
        return False
    try:
        return grader.is_warm(svc.task(task_id))
    except GraderError:
        return False


def _masked(svc: Handles, task_id: str, result: Result, patch: bytes | None) -> dict[str, Any] | None:
    """The result as each viewer may see it, masked once as the verdict is written
    (grader/serializers: masked), so that no read reaches the task's repository. Should masking
    itself fail, the verdict is written all the same, without it: the row is then masked as
    it is read, as rows written before this were."""
    try:
        return serializers.masked(svc, task_id, result.model_dump(mode="json"), patch)
    except Exception:  # noqa: BLE001 - the verdict must not be lost to its view; logged, and masked on read
        log.exception("masking the result of task %s failed; it is masked when read", task_id)
        return None


def _epoch(t: dt.datetime | None) -> float | None:
    if t is None:
        return None
    if t.tzinfo is None:  # SQLite hands back naive datetimes; they were stored as UTC
        t = t.replace(tzinfo=dt.UTC)
    return t.timestamp()


def _settle(svc: Handles, grader: Grader, task: Task | None, facts: Facts, policy: Policy) -> Final | Retry:
    """Adjudicate (grader/grading/adjudicate.py) until it decides, fetching each fact it asks
    for: the retry budget (counted in Redis, service-wide), the gold patch's answer (graded
    here, or a recent one from the gold cache). Judging that fails in the machinery leaves
    the submission abandoned: ERROR, the machinery's."""
    st = svc.settings
    while True:
        step = adjudicate(facts, policy)
        if not isinstance(step, Ask):
            return step
        if step.what == "budget":
            budget = blame.RetryBudget(svc.redis, f"{st.queue_name}:retry-budget:", st.retry_budget, st.retry_window)
            facts = facts.told(budget=budget.take())
            continue
        assert task is not None  # a missing task is never judged on its gold
        image_id = facts.case.last.provenance.image_id if facts.case.last is not None else None
        try:
            facts = facts.told(gold=_gold(svc, grader, task, image_id, step.since))
        except GraderError as exc:
            log.warning("judging %s failed: %s", facts.case.patch_sha256[:12], exc)
            return Final(blame.abandoned(facts.case, f"Judging it failed in the machinery: {exc}"))


def _refuse_unverified(svc: Handles, grader: Grader) -> None:
    """An instance image that failed its check by hash here: this host takes none of its
    environment's grades for UNVERIFIED_TTL seconds (workers.py reads it), so the ERROR's
    retry is graded by another host that has the environment, if one does."""
    for env, why in grader.take_unverified().items():
        log.error("this host takes no grades of %s for %d s: %s", env, UNVERIFIED_TTL, why)
        try:
            svc.redis.set(f"{UNVERIFIED_KEY}{host(svc.settings)}:{env}", why[:2000], ex=UNVERIFIED_TTL)
        except Exception as exc:  # noqa: BLE001 - the ERROR stands; this host may take the retry itself
            log.warning("recording the refusal of %s: %s", env, exc)


def _gold_key(svc: Handles, p: Provenance) -> str | None:
    if p.image_id is None or p.task_hash is None:
        return None
    return blame.gold_key(host(svc.settings), p.task_hash, p.image_id, GRADER_VERSION)


def _gold_cache(svc: Handles) -> blame.GoldCache:
    return blame.GoldCache(svc.redis, f"{svc.settings.queue_name}:gold:", svc.settings.gold_ttl)


def _gold(
    svc: Handles, grader: Grader, task: Task, image_id: str | None, since: float | None
) -> blame.GoldAnswer | None:
    """The gold patch's answer on this host's machinery (grader/blame.py), graded through
    the same Grader, or a recent one; None if the task has no gold patch."""
    try:
        gold = task.gold_patch_text()
    except TaskError as exc:  # named but unreadable: the task is broken, which is no submission's fault
        return blame.GoldAnswer(verdict=Verdict.ERROR, at=time.time(), error=str(exc))
    if gold is None:
        return None
    task_hash = task.definition_hash()
    if image_id is None:  # judging lost grades: find the image the gold would run on
        try:
            image_id, _ = grader.images.instance_image(
                task, build=svc.settings.build_missing_images, task_hash=task_hash
            )
        except GraderError as exc:
            return blame.GoldAnswer(verdict=Verdict.ERROR, at=time.time(), error=str(exc))

    def grade() -> blame.GoldAnswer:
        at = time.time()
        log.info("grading the gold patch of %s to judge an ERROR", task.id)
        return blame.GoldAnswer.of(grader.grade(task, gold), at)

    return blame.gold_answer(
        _gold_cache(svc), blame.gold_key(host(svc.settings), task_hash, image_id, GRADER_VERSION), grade, since=since
    )


# --- webhooks --------------------------------------------------------------------------------
def deliver_webhook(submission_id: str, attempt: int = 0) -> str:
    """RQ's entry point for one attempt at a callback (service.WEBHOOK_JOB); grader/notify.py
    delivers it."""
    svc, _ = context()
    return notify.deliver(svc, submission_id, attempt)


# --- the reconciler --------------------------------------------------------------------------
def reconcile(svc: Handles, *, grace: float = 10.0) -> dict[str, int]:
    """One pass: re-enqueue queued submissions whose job is gone, re-queue running ones whose
    lease ran out, and restart callbacks left pending. Safe to run anywhere, any number of
    times at once: every move is a compare-and-set.

    A running submission is re-queued only while it has been started at most
    `max_attempts` times; the next worker then judges it without grading the patch
    (grader/blame.py). If that judging attempt is lost too, it is finished here as ERROR
    (`abandoned`): nothing of the submission runs in it, and re-queueing it again would
    never end."""
    counts = {"requeued_lost_jobs": 0, "requeued_expired_leases": 0, "abandoned": 0, "webhooks": 0}
    now = utcnow()
    todo: list[tuple[str, str, str]] = []
    with svc.db.read() as s:
        expired = subs.expired_leases(s, now)
    for sid, token in expired:
        with svc.db.read() as s:
            sub = s.get(Submission, sid)
            assert sub is not None  # listed just above; submissions are never deleted
            case = blame.Case(
                task_id=sub.task_id,
                patch_sha256=sub.patch_sha256,
                grader_version=GRADER_VERSION,
                errors=sub.errors,
                attempts=sub.attempts,
                max_attempts=svc.settings.max_attempts,
                lost=True,
                task_hash=sub.task_hash,
            )
        if case.attempts > svc.settings.max_attempts:
            final = blame.abandoned(case)
            with svc.db.read() as s:
                patch = s.scalar(select(Submission.patch).where(Submission.id == sid))
            if subs.finish_abandoned(svc.db, sid, token, final, shown=_masked(svc, case.task_id, final, patch)):
                log.warning(
                    "submission %s: started %d times without a verdict, the last to judge it; finished as ERROR",
                    sid,
                    case.attempts,
                )
                counts["abandoned"] += 1
                notify.after_finish(svc, sid)
            continue
        job_id = subs.reassign_job(svc.db, sid, None, running_token=token)
        if job_id:
            with svc.db.read() as s:
                moved = s.get(Submission, sid)
                assert moved is not None
                todo.append((sid, job_id, moved.task_id))
            counts["requeued_expired_leases"] += 1
    with svc.db.read() as s:
        # give a just-accepted submission a moment to reach Redis before calling its job lost
        queued = [
            (r.id, r.job_id, r.task_id)
            for r in subs.queued_or_running(s, older_than=now - dt.timedelta(seconds=grace))
            if r.status == Status.QUEUED.value
        ]
    for sid, job_id, task_id in queued:
        if svc.job_alive(job_id):
            continue
        new = subs.reassign_job(svc.db, sid, job_id)
        if new:
            todo.append((sid, new, task_id))
            counts["requeued_lost_jobs"] += 1
    if todo:
        svc.enqueue_many(todo)
    with svc.db.read() as s:
        pending = list(
            s.scalars(
                select(Submission.id).where(
                    Submission.webhook_status == "pending", Submission.finished_at < now - dt.timedelta(minutes=30)
                )
            )
        )
        done_no_hook = list(
            s.scalars(
                select(Submission.id).where(
                    Submission.status == Status.DONE.value,
                    Submission.callback_url.is_not(None),
                    Submission.webhook_status.is_(None),
                )
            )
        )
    for sid in done_no_hook:
        notify.after_finish(svc, sid)
        counts["webhooks"] += 1
    for sid in pending:  # a callback chain lost with Redis: start it again
        svc.enqueue_webhook(sid)
        counts["webhooks"] += 1
    if any(counts.values()):
        log.info("reconciler: %s", counts)
    return counts
