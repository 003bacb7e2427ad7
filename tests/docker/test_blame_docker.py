"""Whose fault an ERROR is, end to end: submissions through the API, RQ workers (in this
process, burst mode) on a real Redis, the database, and grading in Docker.

To make one submission's grade ERROR on demand, the grader's sandbox is the real Docker
sandbox wrapped so that a run whose patch carries a marker fails in the machinery, as a
harness the submission broke would; every other run, the gold patch's included, runs for
real in Docker. A machinery fault is real: an instance image missing with builds off, and
a sandbox whose engine address answers nothing (the images are still found, so the
grade fails where the patch would have run). The lease test kills real worker processes
of `grader worker`."""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest

from grader import jobs
from grader.app import create_app
from grader.client import Client
from grader.errors import SandboxError
from grader.pipeline import Grader
from grader.sandbox.base import Sandbox
from grader.sandbox.docker import DockerEngine, DockerSandbox
from grader.store import submissions as subs
from grader.store.models import Submission
from helpers.mini import FIXED
from helpers.service import ROOT, Api, Ledger, Stack, make_service, new_key, work

pytestmark = [pytest.mark.docker, pytest.mark.service]

BREAKS = "BREAKS-THE-HARNESS"  # every run of a patch carrying it ERRORs
BREAKS_ONCE = "BREAKS-THE-HARNESS-ONCE"  # only its first run does: a transient fault
BUG = "TRIPS-A-GRADER-BUG"  # an unexpected exception of ours, not a GraderError


class Faulty(Sandbox):
    """The real Docker sandbox, except for runs of patches that carry a marker. It counts
    the runs that reached Docker, by patch, so a test can tell the gold was graded."""

    name = "docker"

    def __init__(self, real: Sandbox):
        self.real = real
        self.private_kernel = real.private_kernel
        self.real_runs: list[bytes] = []
        self.seen: set[bytes] = set()

    def run(self, spec):
        patch = spec.files.get("run/submission.patch", b"")
        if BREAKS_ONCE.encode() in patch:
            if patch not in self.seen:
                self.seen.add(patch)
                raise SandboxError("the supervisor's report was unreadable (injected, once)")
        elif BREAKS.encode() in patch:
            raise SandboxError("the supervisor's report was unreadable (injected)")
        elif BUG.encode() in patch:
            raise KeyError("an unexpected failure of ours (injected)")
        self.real_runs.append(patch)
        return self.real.run(spec)

    def reap_orphans(self) -> int:
        return self.real.reap_orphans()

    def close(self) -> None:
        self.real.close()


def _service(database_url, redis_url, settings, **overrides):
    overrides = {"retry_backoff": 0, "max_retries": 2, "max_attempts": 5, "gold_ttl": 300, "cache": False, **overrides}
    return make_service(
        database_url, redis_url, tasks_dir=settings.tasks_dir, cache_dir=settings.cache_dir, **overrides
    )


@pytest.fixture
def svc(database_url, redis_url, settings):
    s = _service(database_url, redis_url, settings)
    yield s
    s.close()


@pytest.fixture
def faulty(svc) -> Faulty:
    sandbox = Faulty(DockerSandbox(max_warm=0))
    jobs.use(svc, Grader(svc.settings, sandbox=sandbox))
    yield sandbox
    sandbox.close()


@pytest.fixture
def api(svc) -> Api:
    return Api(create_app(service=svc, migrate=False).test_client(), new_key(svc, "team"))


def row(svc, sid) -> Submission:
    with svc.db.read() as s:
        return s.get(Submission, sid)


def submit(api, patch: str, task: str = "mini") -> str:
    r = api.post("/v1/submissions", json={"task_id": task, "patch": patch})
    assert r.status_code == 202, r.json
    return r.json["id"]


def marked(mini, marker: str, *, fixed: bool = False, tag: str = "") -> str:
    """A patch that adds a note carrying `marker` (and fixes the bug if `fixed`)."""
    files = {"NOTES.txt": f"{marker}\n{tag}\n"}
    if fixed:
        files["calc/__init__.py"] = FIXED
    return mini.diff(files).decode()


def gold_runs(faulty: Faulty, mini) -> int:
    gold = mini.diff({"calc/__init__.py": FIXED})
    return sum(p == gold for p in faulty.real_runs)


# --- A: a submission cannot launder its failure into ERROR -----------------------------------------
@pytest.mark.parametrize("database_url", ["sqlite", "postgresql"], indirect=True)
def test_a_grade_that_errors_every_time_while_the_gold_passes_is_fail_and_charged(svc, faulty, api, mini):
    sid = submit(api, marked(mini, BREAKS))  # without the fix: a FAIL it tries to hide as ERROR
    work(svc)
    got = api.get(f"/v1/submissions/{sid}").json
    assert (got["status"], got["verdict"], got["charged"]) == ("done", "FAIL", True)
    assert (got["attempts"], got["errors"]) == (3, 3)  # the first grade and max_retries=2 more, then judged
    assert got["result"]["explanation"].startswith(
        "The submission broke the grading harness: its grade failed in "
        "the machinery on 3 attempt(s) (the supervisor's report was "
        "unreadable (injected))"
    )
    held = row(svc, sid).result
    assert held["blame"]["at_fault"] == "submission" and held["blame"]["gold"] == "PASS"
    assert "unreadable (injected)" in held["blame"]["error"] and held["error"] is None
    assert held["provenance"]["image_id"].startswith("sha256:")
    assert gold_runs(faulty, mini) == 1  # the gold was graded, for real, in Docker
    assert jobs.reconcile(svc, grace=0)["requeued_expired_leases"] == 0


def test_a_bug_of_ours_the_submission_trips_every_time_is_charged_too(svc, faulty, api, mini):
    sid = submit(api, marked(mini, BUG))
    work(svc)
    got = row(svc, sid)
    assert (got.verdict, got.attempts, got.errors) == ("FAIL", 3, 3)
    assert got.result["blame"]["at_fault"] == "submission" and "KeyError" in got.result["blame"]["error"]


def test_a_flood_of_harness_breakers_grades_the_gold_once(svc, faulty, api, mini):
    ids = [submit(api, marked(mini, BREAKS, tag=str(i))) for i in range(5)]
    work(svc)
    assert [(row(svc, i).verdict, row(svc, i).attempts) for i in ids] == [("FAIL", 3)] * 5
    # each was first ERRORing before the one gold grade, which therefore answers for all of them
    assert gold_runs(faulty, mini) == 1
    assert sum(row(svc, i).result["blame"]["gold_cached"] for i in ids) == 4


def test_honest_submissions_are_not_hurt(svc, faulty, api, mini):
    gold = mini.diff({"calc/__init__.py": FIXED}).decode()
    clean = submit(api, gold)
    once = submit(api, marked(mini, BREAKS_ONCE, fixed=True))  # a transient machinery fault, once
    empty = submit(api, "")
    work(svc)
    assert (row(svc, clean).verdict, row(svc, clean).attempts, row(svc, clean).result.get("blame")) == ("PASS", 1, None)
    assert (row(svc, once).verdict, row(svc, once).attempts, row(svc, once).errors) == ("PASS", 2, 1)
    assert row(svc, empty).verdict == "FAIL" and row(svc, empty).result.get("blame") is None
    assert gold_runs(faulty, mini) == 1  # only the honest gold submission itself: no judging was needed


def test_an_honest_error_refused_a_retry_by_the_budget_gets_one_retry_once_the_gold_passes(
    database_url, redis_url, settings, mini
):
    svc = _service(database_url, redis_url, settings, retry_budget=0)  # every retry refused
    sandbox = Faulty(DockerSandbox(max_warm=0))
    jobs.use(svc, Grader(svc.settings, sandbox=sandbox))
    try:
        api = Api(create_app(service=svc, migrate=False).test_client(), new_key(svc, "team"))
        honest = submit(api, marked(mini, BREAKS_ONCE, fixed=True))
        breaker = submit(api, marked(mini, BREAKS))
        work(svc)
        # the honest one ERRORed once and was not charged for it: the gold passed, so it was tried again
        assert (row(svc, honest).verdict, row(svc, honest).attempts) == ("PASS", 2)
        # the harness breaker, refused its retries, still ends charged after its second ERROR
        assert (row(svc, breaker).verdict, row(svc, breaker).attempts, row(svc, breaker).errors) == ("FAIL", 2, 2)
    finally:
        sandbox.close()
        svc.close()


# --- an ERROR of the machinery stays ERROR, uncharged ----------------------------------------------
@pytest.fixture
def unbuilt(svc):
    """`mini-unbuilt`: the mini task under another definition hash, whose image is never built."""
    task_dir, twin = svc.settings.tasks_dir / "mini", svc.settings.tasks_dir / "mini-unbuilt"
    twin.mkdir()
    for f in task_dir.iterdir():
        (twin / f.name).write_bytes(f.read_bytes())
    text = (twin / "task.yaml").read_text()
    text = text.replace("id: mini", "id: mini-unbuilt").replace("timeout: 20", "timeout: 22")
    (twin / "task.yaml").write_text(text)
    svc._tasks = None
    yield "mini-unbuilt"
    for f in twin.iterdir():
        f.unlink()
    twin.rmdir()
    svc._tasks = None


def test_a_missing_image_with_builds_off_stays_error(svc, unbuilt, api, mini):
    svc.settings.__dict__["build_missing_images"] = False
    sandbox = Faulty(DockerSandbox(max_warm=0))
    jobs.use(svc, Grader(svc.settings, sandbox=sandbox))
    try:
        ids = [submit(api, marked(mini, BREAKS), unbuilt), submit(api, "", unbuilt)]
        work(svc)
        for sid in ids:
            got = api.get(f"/v1/submissions/{sid}").json
            assert (got["verdict"], got["charged"], got["attempts"]) == ("ERROR", False, 3)
            held = row(svc, sid).result
            assert held["blame"]["at_fault"] == "machinery" and held["blame"]["gold"] is None
            assert "grader tasks build" in held["error"]
        assert sandbox.real_runs == []  # before the sandbox: no gold was graded to find that out
    finally:
        sandbox.close()


def test_an_unreachable_engine_stays_error_and_the_breaker_stops_the_churn(svc, api, mini):
    # the images are found on the real engine; the sandbox's engine address answers nothing
    dead = DockerSandbox(engine=DockerEngine(base_url=f"unix:///tmp/no-docker-{uuid.uuid4().hex}.sock"), max_warm=0)
    jobs.use(svc, Grader(svc.settings, sandbox=dead))
    gold = mini.diff({"calc/__init__.py": FIXED}).decode()
    first = [submit(api, marked(mini, BREAKS, tag=str(i))) for i in range(2)] + [submit(api, gold + "\n")]
    work(svc)
    for sid in first:
        got = api.get(f"/v1/submissions/{sid}").json
        assert (got["verdict"], got["charged"]) == ("ERROR", False), got
        assert row(svc, sid).result["blame"]["at_fault"] == "machinery"
    judged = [row(svc, i).result["blame"] for i in first]
    assert any(b["gold"] == "ERROR" and not b["gold_cached"] for b in judged)  # the gold failed the same way
    # the gold has shown the machinery broken for this task here: later ERRORs are final at once
    later = [submit(api, marked(mini, "x", tag=str(i))) for i in range(4)]
    work(svc)
    assert [(row(svc, i).verdict, row(svc, i).attempts) for i in later] == [("ERROR", 1)] * 4
    assert all(row(svc, i).result["blame"]["gold"] == "ERROR" for i in later)


def test_an_outage_after_a_gold_pass_is_not_charged_to_a_submission_caught_in_it(svc, faulty, api, mini):
    first = submit(api, marked(mini, BREAKS))
    work(svc)
    assert row(svc, first).verdict == "FAIL"  # the gold passed, and that answer is kept for gold_ttl
    # then the engine stops answering the sandbox: an honest submission ERRORs every time
    dead = DockerSandbox(engine=DockerEngine(base_url=f"unix:///tmp/no-docker-{uuid.uuid4().hex}.sock"), max_warm=0)
    jobs.use(svc, Grader(svc.settings, sandbox=dead))
    honest = submit(api, mini.diff({"calc/__init__.py": FIXED + "# mine\n"}).decode())
    work(svc)
    got = row(svc, honest)
    # the kept PASS is older than its first ERROR, so the gold was graded again, and failed
    assert (got.verdict, got.attempts) == ("ERROR", 3)
    assert (got.result["blame"]["at_fault"], got.result["blame"]["gold"], got.result["blame"]["gold_cached"]) == (
        "machinery",
        "ERROR",
        False,
    )


def test_when_everything_errors_the_retry_budget_bounds_the_retries(database_url, redis_url, settings, mini):
    # one window for the whole test (a fixed window's edge would let another budget through)
    svc = _service(database_url, redis_url, settings, retry_budget=2, retry_window=1e9, max_retries=5, max_attempts=10)
    dead = DockerSandbox(engine=DockerEngine(base_url=f"unix:///tmp/no-docker-{uuid.uuid4().hex}.sock"), max_warm=0)
    jobs.use(svc, Grader(svc.settings, sandbox=dead))
    try:
        api = Api(create_app(service=svc, migrate=False).test_client(), new_key(svc, "team"))
        ids = [submit(api, marked(mini, "y", tag=str(i))) for i in range(6)]
        work(svc)
        rows = [row(svc, i) for i in ids]
        assert {(r.status, r.verdict) for r in rows} == {("done", "ERROR")}
        # six first grades and at most the budget's two retries (per-submission bounds alone: 36 grades)
        assert sum(r.attempts for r in rows) <= 6 + 2
    finally:
        svc.close()


# --- B: a submission whose worker keeps being lost -------------------------------------------------
def _lose_worker(svc, sid) -> None:
    """A worker claims the submission and dies holding it; the reconciler re-queues it."""
    job_id = row(svc, sid).job_id
    assert subs.claim(svc.db, sid, job_id, "gone-host:1", lease=-1) is not None
    assert jobs.reconcile(svc, grace=0)["requeued_expired_leases"] == 1


def test_the_attempt_bound_stops_a_submission_whose_lease_keeps_expiring(svc, faulty, api, mini):
    sid = submit(api, marked(mini, "kills-its-worker"))
    for _ in range(5):  # max_attempts
        _lose_worker(svc, sid)
    assert row(svc, sid).attempts == 5
    work(svc)  # attempt 6 judges it without running its patch: the gold passes
    got = api.get(f"/v1/submissions/{sid}").json
    assert (got["status"], got["verdict"], got["charged"], got["attempts"]) == ("done", "FAIL", True, 6)
    assert "started 5 times without a verdict" in got["result"]["explanation"]
    assert not any(b"kills-its-worker" in p for p in faulty.real_runs)  # its patch did not run again
    assert gold_runs(faulty, mini) == 1
    assert jobs.reconcile(svc, grace=0)["requeued_expired_leases"] == 0


def test_a_lost_judging_attempt_ends_error_instead_of_another_requeue(svc, faulty, api, mini):
    sid = submit(api, marked(mini, "kills-its-worker"))
    for _ in range(5):
        _lose_worker(svc, sid)
    # the judging attempt (the sixth) is lost too
    assert subs.claim(svc.db, sid, row(svc, sid).job_id, "gone-host:1", lease=-1).attempts == 6
    counts = jobs.reconcile(svc, grace=0)
    assert (counts["abandoned"], counts["requeued_expired_leases"]) == (1, 0)
    got = api.get(f"/v1/submissions/{sid}").json
    assert (got["status"], got["verdict"], got["charged"], got["attempts"]) == ("done", "ERROR", False, 6)
    assert jobs.reconcile(svc, grace=0) == {
        "requeued_lost_jobs": 0,
        "requeued_expired_leases": 0,
        "abandoned": 0,
        "webhooks": 0,
    }
    work(svc)  # the jobs queued for its earlier attempts find it finished
    assert (row(svc, sid).status, row(svc, sid).verdict, row(svc, sid).attempts) == ("done", "ERROR", 6)


def test_a_submission_that_lost_its_worker_once_is_graded_as_usual(svc, faulty, api, mini):
    sid = submit(api, mini.diff({"calc/__init__.py": FIXED}).decode())
    _lose_worker(svc, sid)
    work(svc)
    assert (row(svc, sid).verdict, row(svc, sid).attempts, row(svc, sid).result.get("blame")) == ("PASS", 2, None)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_real_workers_killed_every_time_are_bounded(database_url, redis_server, settings, tmp_path, mini):
    """`grader worker` as real processes: the worker grading one submission is SIGKILLed
    every time it takes it. After max_attempts=2 starts the next worker judges it (the gold
    passes): FAIL, charged. An honest submission beside it PASSes once."""
    redis_server.flush()
    env = {
        "GRADER_DATABASE_URL": database_url,
        "GRADER_REDIS_URL": redis_server.url,
        "GRADER_TASKS_DIR": str(settings.tasks_dir),
        "GRADER_CACHE_DIR": str(settings.cache_dir),
        "GRADER_ENVIRONMENTS_DIR": str(ROOT / "environments"),
        "GRADER_LEASE_SECONDS": "4",
        "GRADER_RECONCILE_INTERVAL": "1",
        "GRADER_RETRY_BACKOFF": "1",
        "GRADER_MAX_ATTEMPTS": "2",
        "GRADER_CACHE": "false",
    }
    svc = make_service(database_url, redis_server.url, tasks_dir=settings.tasks_dir)
    key = new_key(svc, f"blame-{uuid.uuid4().hex[:6]}")
    host_key = new_key(svc, f"host-{uuid.uuid4().hex[:6]}", admin=True)
    svc.close()
    stack = Stack(env, tmp_path).start()
    try:
        c = Client(stack.url, key)
        slow = mini.diff({"calc/__init__.py": "import time\ntime.sleep(4)\n# victim\n" + FIXED}).decode()
        victim = c.submit("mini", slow)["id"]
        honest = c.submit("mini", mini.diff({"calc/__init__.py": FIXED + "# honest\n"}).decode())["id"]
        ledger = Ledger(Client(stack.url, host_key), [victim, honest], stack)  # the host sees durations
        killed: set[str] = set()
        deadline = time.monotonic() + 120
        while (now := ledger.poll())[victim]["status"] != "done":
            v = now[victim]
            # kill whichever worker holds it, while it is still grading the patch (attempts <= 2)
            if v["status"] == "running" and v["attempts"] <= 2 and v["host"] not in killed:
                pid = int(v["host"].rpartition(":")[2])
                assert pid in stack.worker_children(), (v, stack.worker_children())
                os.kill(pid, signal.SIGKILL)
                killed.add(v["host"])
            assert time.monotonic() < deadline, stack.tail()
            time.sleep(0.2)
        final = ledger.settle()
        assert len(killed) == 2
        v = final[victim]
        assert (v["verdict"], v["charged"], v["attempts"]) == ("FAIL", True, 3), v
        assert "started 2 times without a verdict" in v["result"]["explanation"]
        assert (final[honest]["verdict"], final[honest]["attempts"]) == ("PASS", 1)
        ledger.assert_database_agrees(database_url, final)
        stack.assert_no_orphans()
    finally:
        stack.stop()
    stack.assert_no_containers()
