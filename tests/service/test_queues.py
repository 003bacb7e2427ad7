"""Work goes where the image is: each environment's grades wait on a queue of their own
(grader/handles.py), and `grader worker` takes only the queues of the environments its
host has (grader/workers.py: GRADER_WORKER_ENVIRONMENTS, `auto` by the engine's images;
here named, so that no Docker is needed). The grades here are of patches the vetting
refuses: PATCH FAILED by a worker without a container."""

from __future__ import annotations

import time

import pytest
from rq import SimpleWorker

from grader.handles import UNVERIFIED_KEY, grade_queue_name, host
from grader.workers import ready_environments
from helpers import ROOT
from helpers.service import Api, make_service, new_key, outside_patch, worker_process

LANGUAGES = ROOT / "tasks" / "languages"


@pytest.fixture
def service_options():
    return {"tasks_dir": LANGUAGES}


def test_a_grade_waits_on_its_environments_queue(api, svc):
    ids = {}
    for task in ("py39-median-even", "c-median-even", "py39-median-even"):
        r = api.post("/v1/submissions", json={"task_id": task, "patch": outside_patch(f"{task}-{len(ids)}")})
        assert r.status_code == 202, r.json
        ids[r.json["id"]] = task
    py39, c = svc.grade_queue("python-3.9"), svc.grade_queue("c")
    assert (py39.name, c.name) == ("grader-env-python-3.9", "grader-env-c")
    assert [j.args[0] for j in py39.get_jobs()] == [i for i, t in ids.items() if t == "py39-median-even"]
    assert [j.args[0] for j in c.get_jobs()] == [i for i, t in ids.items() if t == "c-median-even"]
    assert svc.queue.count == 0  # no grade of a known environment waits where every worker looks
    depth = api.get("/v1/workers").json["queue"]
    assert depth["redis_queued"] == 3
    assert (depth["redis_queued:python-3.9"], depth["redis_queued:c"], depth["redis_queued:go-1.24"]) == (2, 1, 0)


def test_a_batch_keeps_its_order_within_each_environment(api, svc):
    items = [
        {"task_id": task, "patch": outside_patch(f"b{i}")}
        for i, task in enumerate(["c-median-even", "c-median-even", "go-median-even", "c-median-even"])
    ]
    r = api.post("/v1/submissions/batch", json=items)
    assert r.status_code == 202, r.json
    ids = [item["id"] for item in r.json["items"]]
    assert [j.args[0] for j in svc.grade_queue("c").get_jobs()] == [ids[0], ids[1], ids[3]]
    assert [j.args[0] for j in svc.grade_queue("go-1.24").get_jobs()] == [ids[2]]


def test_a_grade_of_a_task_no_longer_served_goes_where_every_worker_looks(svc):
    svc.enqueue("s-1", "s-1-job", "no-such-task")
    assert [j.id for j in svc.queue.get_jobs()] == ["s-1-job"] and svc.queue.name == grade_queue_name("grader", None)


def test_the_environments_a_host_takes(svc):
    svc.settings.worker_environments = "all"
    assert ready_environments(svc) == svc.environments()
    assert {"c", "python-3.9", "python-3.11"} <= set(svc.environments())
    svc.settings.worker_environments = "python-3.9, c"
    assert ready_environments(svc) == ["c", "python-3.9"]
    # an instance image of c that failed its check here: none of c's grades for a while
    svc.redis.set(f"{UNVERIFIED_KEY}{host(svc.settings)}:c", "why", ex=60)
    svc.redis.set(f"{UNVERIFIED_KEY}another-host:python-3.9", "why", ex=60)
    assert ready_environments(svc) == ["python-3.9"]


def test_a_worker_takes_only_its_hosts_environments(database_url, redis_server, tmp_path):
    """The py39 grade is submitted first and a worker without python-3.9 grades the C one
    after it: it never looked at py39's queue. A worker of a host that has it then does."""
    redis_server.flush()
    svc = make_service(database_url, redis_server.url, tasks_dir=LANGUAGES)
    try:
        from grader.app import create_app

        api = Api(create_app(service=svc, migrate=False).test_client(), new_key(svc, "t"))
        first = api.post("/v1/submissions", json={"task_id": "py39-median-even", "patch": outside_patch("w1")})
        second = api.post("/v1/submissions", json={"task_id": "c-median-even", "patch": outside_patch("w2")})
        env = {"GRADER_TASKS_DIR": str(LANGUAGES), "GRADER_HOST_NAME": "host-c"}
        with worker_process(database_url, redis_server.url, tmp_path, GRADER_WORKER_ENVIRONMENTS="c", **env):
            _wait_done(api, second.json["id"], tmp_path)
            assert api.get(f"/v1/submissions/{first.json['id']}").json["status"] == "queued"
            assert api.get(f"/v1/submissions/{second.json['id']}").json["verdict"] == "PATCH FAILED"
        host_key = new_key(svc, "ops", admin=True)
        admin = Api(api.client, host_key)
        assert admin.get(f"/v1/submissions/{second.json['id']}").json["host"].startswith("host-c:")
        (tmp_path / "second").mkdir()
        env = {"GRADER_TASKS_DIR": str(LANGUAGES), "GRADER_HOST_NAME": "host-py"}
        with worker_process(database_url, redis_server.url, tmp_path / "second", **env):  # every environment
            _wait_done(api, first.json["id"], tmp_path / "second")
        done = admin.get(f"/v1/submissions/{first.json['id']}").json
        assert done["verdict"] == "PATCH FAILED" and done["host"].startswith("host-py:")
    finally:
        svc.close()


def test_an_in_process_worker_over_every_queue_drains_them(api, svc):
    from grader import jobs

    api.post("/v1/submissions", json={"task_id": "go-median-even", "patch": outside_patch("d1")})
    jobs.use(svc)
    SimpleWorker([*svc.grade_queues(), svc.webhook_queue], connection=svc.redis).work(burst=True)
    assert sum(q.count for q in svc.grade_queues()) == 0


def _wait_done(api: Api, sid: str, logs, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while api.get(f"/v1/submissions/{sid}").json["status"] != "done":
        assert time.monotonic() < deadline, (logs / "worker.log").read_text()[-3000:]
        time.sleep(0.2)


def test_an_unverifiable_image_is_error_retried_and_its_environment_left(api, svc):
    """The worker's grade on an instance image it cannot verify is ERROR before any
    container (not charged, retried), and its host takes no more of that environment's
    grades for a while, so the retry goes to a host that has the image as it should be."""
    from grader import jobs
    from grader.errors import ImageUnverified
    from grader.pipeline import Grader
    from grader.sandbox.fake import FakeRun, FakeSandbox

    class Refusing:
        def instance_image(self, task, *, build=True, log=None, task_hash=None):
            raise ImageUnverified(f"instance image of {task.id} cannot be verified by hash", task.environment)

    ran: list = []
    sandbox = FakeSandbox(lambda spec: ran.append(spec) or FakeRun(report={}))
    jobs.use(svc, Grader(svc.settings, sandbox=sandbox, images=Refusing()))  # type: ignore[arg-type]
    patch = "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+x\n"
    sid = api.post("/v1/submissions", json={"task_id": "c-median-even", "patch": patch}).json["id"]
    SimpleWorker([svc.grade_queue("c")], connection=svc.redis).work(burst=True)
    admin = Api(api.client, new_key(svc, "ops", admin=True))
    sub = admin.get(f"/v1/submissions/{sid}").json
    assert (sub["status"], sub["verdict"], sub["errors"]) == ("queued", None, 1), sub
    assert ran == []
    assert b"cannot be verified" in svc.redis.get(f"{UNVERIFIED_KEY}{host(svc.settings)}:c")
    svc.settings.worker_environments = "c,go-1.24"
    assert ready_environments(svc) == ["go-1.24"]


def test_a_burst_worker_drains_its_hosts_environments_only(database_url, redis_server, tmp_path):
    import os
    import subprocess

    from helpers.service import BIN

    redis_server.flush()
    svc = make_service(database_url, redis_server.url, tasks_dir=LANGUAGES)
    try:
        from grader.app import create_app

        api = Api(create_app(service=svc, migrate=False).test_client(), new_key(svc, "t"))
        py39 = api.post("/v1/submissions", json={"task_id": "py39-median-even", "patch": outside_patch("u1")})
        c = api.post("/v1/submissions", json={"task_id": "c-median-even", "patch": outside_patch("u2")})
        env = {
            **os.environ,
            "GRADER_DATABASE_URL": database_url,
            "GRADER_REDIS_URL": redis_server.url,
            "GRADER_TASKS_DIR": str(LANGUAGES),
            "GRADER_ENVIRONMENTS_DIR": str(ROOT / "environments"),
            "GRADER_CACHE_DIR": str(tmp_path / "cache"),
            "GRADER_WORKER_ENVIRONMENTS": "c",
        }
        done = subprocess.run([str(BIN), "worker", "--burst"], env=env, capture_output=True, timeout=300)
        assert done.returncode == 0, done.stderr.decode()[-3000:]
        assert api.get(f"/v1/submissions/{c.json['id']}").json["verdict"] == "PATCH FAILED"
        assert api.get(f"/v1/submissions/{py39.json['id']}").json["status"] == "queued"
        assert [j.args[0] for j in svc.grade_queue("python-3.9").get_jobs()] == [py39.json["id"]]
    finally:
        svc.close()


class _Prewarms:
    """A grader that records the tasks a worker asks it to start a container for, and holds
    a container of each task in `held`."""

    def __init__(self):
        self.tasks: list[str] = []
        self.held: set[str] = set()

    def is_warm(self, task):
        return task.id in self.held

    def prewarm(self, task):
        self.tasks.append(task.id)
        return True


def test_a_worker_starts_a_container_for_the_next_jobs_task_in_its_queue(svc):
    """jobs._prewarm_next: the task of the job at the head of the running job's queue, read
    from the job's meta; not the running job's own task (its run's refill starts that one),
    nothing for an empty queue, and nothing when GRADER_PREWARM_NEXT is off."""
    from rq.job import Job

    from grader import jobs

    for sid, task in (("p-1", "c-median-even"), ("p-2", "c-median-even"), ("p-3", "c-median-even")):
        svc.enqueue(sid, f"{sid}-job", task)
    svc.enqueue("q-1", "q-1-job", "py39-median-even")
    running = Job.fetch("p-1-job", connection=svc.redis)
    assert running.meta == {"task": "c-median-even"}
    svc.grade_queue("c").remove("p-1-job")  # taken: the head is now p-2, of the same task
    grader = _Prewarms()
    jobs._prewarm_next(svc, grader, running, "c-median-even")
    assert grader.tasks == []
    svc.grade_queue("c").remove("p-2-job")
    jobs._prewarm_next(svc, grader, running, "py39-median-even")  # p-3's task is another
    assert grader.tasks == ["c-median-even"]
    svc.grade_queue("c").remove("p-3-job")
    jobs._prewarm_next(svc, grader, running, "py39-median-even")  # its queue is empty
    assert grader.tasks == ["c-median-even"]
    other = Job.fetch("q-1-job", connection=svc.redis)
    svc.grade_queue("python-3.9").remove("q-1-job")
    svc.enqueue("q-2", "q-2-job", "py39-median-even")
    svc.enqueue("q-3", "q-3-job", "c-median-even")  # on the c queue: not q-1's
    jobs._prewarm_next(svc, grader, other, "c-median-even")
    assert grader.tasks == ["c-median-even", "py39-median-even"]
    svc.settings.prewarm_next = False
    try:
        jobs._prewarm_next(svc, grader, other, "c-median-even")
    finally:
        svc.settings.prewarm_next = True
    assert grader.tasks == ["c-median-even", "py39-median-even"]
