"""Work goes where its container is: a worker takes, from the first jobs of its next queue,
one whose task it holds a container or keeper of, before the head (grader/jobs.py:
take_warm; grader/workers.py: the queue class its RQ worker dequeues with). Against real
Redis and RQ; the grader here is a stand-in that says which tasks it holds, since what
is held is the sandbox's business (tests/docker: Grader.is_warm under runc, gVisor and the
pool). What must hold: a held job is taken before the head; the head is passed over at
most AFFINITY_PASSES times; every job is taken exactly once when workers race; nothing of
this with GRADER_AFFINITY off, or for jobs that are not a task's grade."""

from __future__ import annotations

import random
import threading

import pytest
from rq import SimpleWorker

from grader import jobs
from grader.workers import _WarmFirst


class _Holds:
    """A grader that holds a container of each task in `held` (a set it may change)."""

    def __init__(self, *held: str) -> None:
        self.held = set(held)
        self.asked: list[str] = []

    def is_warm(self, task) -> bool:
        self.asked.append(task.id)
        return task.id in self.held


@pytest.fixture
def holds(svc):
    grader = _Holds()
    jobs.use(svc, grader)  # type: ignore[arg-type]
    yield grader
    jobs.use(svc)


def take(svc):
    """What a worker of every queue dequeues next (no wait), as its job id and queue name."""
    got = _WarmFirst.dequeue_any([*svc.grade_queues(), svc.webhook_queue], None, connection=svc.redis)
    return None if got is None else (got[0].id, got[1].name)


def queued(svc) -> list[str]:
    return svc.grade_queue("python-3.11").get_job_ids()


def enqueue(svc, *tasks: str) -> list[str]:
    ids = []
    for n, task in enumerate(tasks):
        svc.enqueue(f"s-{n}", f"j-{n}", task)
        ids.append(f"j-{n}")
    return ids


def test_a_worker_takes_the_job_it_holds_the_container_of_before_the_head(svc, holds):
    ids = enqueue(
        svc, "calc-add-mode", "calc-mean-empty", "calc-median-even", "calc-median-even", "notes-merge-greeting"
    )
    holds.held = {"calc-median-even"}
    assert take(svc) == ("j-2", "grader-env-python-3.11")  # the first held, not the head
    assert queued(svc) == [ids[0], ids[1], ids[3], ids[4]]  # the rest in their order
    assert holds.asked[:3] == ["calc-add-mode", "calc-mean-empty", "calc-median-even"]
    holds.held = {"calc-add-mode", "calc-median-even"}
    assert take(svc)[0] == "j-0"  # the head held: the head
    holds.held = set()
    assert take(svc)[0] == "j-1"  # nothing held: the head, as RQ pops it
    assert queued(svc) == [ids[3], ids[4]]


def test_only_the_first_jobs_of_a_queue_are_looked_at(svc, holds):
    tasks = ["calc-add-mode"] * jobs.AFFINITY_WINDOW + ["calc-median-even"]
    enqueue(svc, *tasks)
    holds.held = {"calc-median-even"}
    assert take(svc)[0] == "j-0"  # the held job is beyond the window: the head
    assert holds.asked == ["calc-add-mode"] * jobs.AFFINITY_WINDOW


def test_a_head_is_passed_over_at_most_a_bounded_number_of_times(svc, holds):
    """A stream of held jobs behind a head nobody holds: the head waits behind at most
    AFFINITY_PASSES of them."""
    enqueue(svc, "notes-merge-greeting", *["calc-median-even"] * 8)
    holds.held = {"calc-median-even"}
    taken = [take(svc)[0] for _ in range(jobs.AFFINITY_PASSES + 1)]
    assert taken == [f"j-{n}" for n in range(1, jobs.AFFINITY_PASSES + 1)] + ["j-0"]
    assert svc.redis.ttl(f"{jobs.PASSED_KEY}j-0") > 0  # the count goes away on its own


def test_nothing_of_it_when_affinity_is_off(svc, holds):
    enqueue(svc, "calc-add-mode", "calc-median-even")
    holds.held = {"calc-median-even"}
    svc.settings.affinity = False
    try:
        assert take(svc)[0] == "j-0"
    finally:
        svc.settings.affinity = True
    assert holds.asked == []


def test_jobs_that_are_no_grade_of_a_known_task_are_taken_in_order(svc, holds):
    """A job whose task is no longer served, or whose meta says nothing of a task (a job
    not made by the service), is held by nobody; the queue keeps its order."""
    svc.enqueue("s-0", "j-0", "no-such-task")
    svc.queue.enqueue("grader.jobs.grade_submission", "s-x", job_id="j-bare")
    svc.enqueue("s-1", "j-1", "no-such-task")
    holds.held = {"no-such-task"}
    assert [take(svc)[0] for _ in range(3)] == ["j-0", "j-bare", "j-1"]
    assert take(svc) is None


def test_every_job_is_taken_exactly_once_by_workers_that_race(svc, holds, redis_url):
    """Four workers dequeue at once, each holding tasks at random: LREM and RQ's own pop
    take every job once, none twice, none lost."""
    from redis import Redis

    tasks = ["calc-add-mode", "calc-mean-empty", "calc-median-even", "notes-merge-greeting"]
    ids = enqueue(svc, *(random.choice(tasks) for _ in range(300)))
    holds.is_warm = lambda task: random.random() < 0.4  # type: ignore[method-assign]
    taken: list[list[str]] = [[] for _ in range(4)]

    def worker(n: int) -> None:
        connection = Redis.from_url(redis_url)
        while (got := _WarmFirst.dequeue_any(svc.grade_queues(), None, connection=connection)) is not None:
            taken[n].append(got[0].id)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    every = [i for got in taken for i in got]
    assert sorted(every) == sorted(ids) and len(every) == len(set(every)) == 300
    assert all(got for got in taken)  # each worker took some
    assert sum(got != sorted(got, key=ids.index) for got in taken) >= 1  # some taken out of order


def test_an_rq_worker_runs_the_job_it_took_out_of_order(svc, holds):
    """A real RQ SimpleWorker with the queue class: the job taken before the head is run as
    any job is (started, finished, its result kept), and so is the head after it."""
    q = svc.grade_queue("python-3.11")
    first = q.enqueue("builtins.len", "ab", job_id="k-0", meta={"task": "calc-add-mode"})
    second = q.enqueue("builtins.len", "abc", job_id="k-1", meta={"task": "calc-median-even"})
    holds.held = {"calc-median-even"}
    order: list[str] = []

    class Recording(SimpleWorker):
        def execute_job(self, job, queue):
            order.append(job.id)
            return super().execute_job(job, queue)

    Recording([q.name], connection=svc.redis, queue_class=_WarmFirst).work(burst=True)
    assert order == ["k-1", "k-0"]
    first.refresh()
    second.refresh()
    assert (first.get_status(), first.return_value(), second.get_status(), second.return_value()) == (
        "finished",
        2,
        "finished",
        3,
    )


def test_no_container_is_started_ahead_for_a_job_when_the_worker_holds_one_of_the_next(svc, holds):
    """jobs._prewarm_next with affinity: a worker that holds the task of one of the first jobs
    (or grades one of their tasks now) takes that one next, so it starts nothing for the head,
    which is another worker's; holding none, it starts the head's; with affinity off, the head's
    whatever it holds."""
    from rq.job import Job

    enqueue(svc, "calc-add-mode", "calc-mean-empty", "calc-median-even")
    running = Job.fetch("j-0", connection=svc.redis)
    svc.grade_queue("python-3.11").remove("j-0")
    started: list[str] = []
    holds.prewarm = lambda task: started.append(task.id)  # type: ignore[attr-defined]
    holds.held = {"calc-median-even"}
    jobs._prewarm_next(svc, holds, running, "notes-merge-greeting")
    assert started == []  # it takes j-2 next
    jobs._prewarm_next(svc, holds, running, "calc-median-even")
    assert started == []
    holds.held = set()
    jobs._prewarm_next(svc, holds, running, "calc-median-even")
    assert started == []  # j-2 is of the task it grades now
    jobs._prewarm_next(svc, holds, running, "notes-merge-greeting")
    assert started == ["calc-mean-empty"]  # nothing of the window held: the head's
    holds.held = {"calc-median-even"}
    svc.settings.affinity = False
    try:
        jobs._prewarm_next(svc, holds, running, "notes-merge-greeting")
    finally:
        svc.settings.affinity = True
    assert started == ["calc-mean-empty", "calc-mean-empty"]


def test_no_job_is_overtaken_by_more_than_the_bound(svc, holds):
    """Each job taken before the head counts as a pass over the head, so while a job moves up
    through the window's other places it is overtaken at most AFFINITY_PASSES times at each:
    at most AFFINITY_PASSES x (AFFINITY_WINDOW - 1) jobs that came after it, and that many
    in the worst order (unheld jobs ahead of it, held ones behind)."""
    unheld = ["notes-merge-greeting"] * (jobs.AFFINITY_WINDOW - 1)
    ids = enqueue(svc, *unheld, "notes-changelog-entry", *["calc-median-even"] * 30)
    holds.held = {"calc-median-even"}
    target = ids[len(unheld)]
    order = []
    while (got := take(svc)) is not None and got[0] != target:
        order.append(got[0])
    overtaken = [i for i in order if ids.index(i) > ids.index(target)]
    bound = jobs.AFFINITY_PASSES * (jobs.AFFINITY_WINDOW - 1)
    assert len(overtaken) == bound
