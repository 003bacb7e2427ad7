"""Health, readiness, workers, Prometheus metrics, the caller's account, and admin routes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

from flask import Blueprint, Response, current_app, g, jsonify
from flask.typing import ResponseReturnValue
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from grader import suites
from grader.api import auth
from grader.api.errors import ApiError, json_body, validation_error
from grader.errors import StoreError
from grader.handles import DOCKER_KEY, Handles
from grader.schemas import QuotasIn, SuiteValidationIn, TeamIn
from grader.store import submissions as subs
from grader.store.keys import create_key
from grader.store.models import ApiKey, Team, row_id

if TYPE_CHECKING:
    from rq import Queue

bp = Blueprint("system", __name__)
DURATION_BUCKETS = [0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800]


def _svc() -> Handles:
    svc: Handles = current_app.extensions["grader"]
    return svc


@bp.get("/healthz")
def healthz() -> Response:
    return jsonify({"status": "ok"})


def docker_status(svc: Handles) -> tuple[bool, str]:
    """Whether a Docker engine that can grade answers: this host's, or one a live worker reports."""
    from grader.sandbox.docker import DockerEngine

    if DockerEngine().available():
        return True, "this host's engine answers"
    reports: dict[str, str] = {}
    try:
        for key in svc.redis.scan_iter(f"{DOCKER_KEY}*", count=100):
            # bytes: the service's Redis client does not decode responses
            reports[cast(bytes, key).decode()[len(DOCKER_KEY) :]] = cast(bytes, svc.redis.get(key) or b"").decode()
    except Exception as exc:  # Redis is checked on its own
        return False, f"no local engine, and worker reports unreadable: {exc}"
    ok = [h for h, v in reports.items() if v == "ok"]
    if ok:
        return True, f"workers on {', '.join(sorted(ok))} report their engine answers"
    if reports:
        return False, "; ".join(f"{h}: {v}" for h, v in sorted(reports.items()))
    return False, "no Docker engine answers here and no worker has reported one"


_DOWN = {"database": "the database does not answer", "redis": "Redis does not answer"}


def _host_asking() -> bool:
    """Whether an admin key came with the request; a missing or wrong key only means the
    answer says less (probes send none), never a refusal."""
    try:
        caller = auth.optional()
    except ApiError:
        return False
    return bool(caller and caller.admin)


@bp.get("/readyz")
def readyz() -> ResponseReturnValue:
    """Which dependency is down. Only hosts see where it lives (addresses, ports, worker
    hosts): an error such as 'connecting to 10.0.0.7:6379' maps the network for anyone."""
    svc = _svc()
    host = _host_asking()
    checks: dict[str, dict[str, Any]] = {}
    ready = True
    for name, probe in (("database", svc.db.ping), ("redis", svc.ping_redis)):
        try:
            probe()
            checks[name] = {"ok": True}
        except StoreError as exc:
            checks[name] = {"ok": False, "detail": str(exc) if host else _DOWN[name]}
            ready = False
    ok, detail = docker_status(svc)
    checks["docker"] = {
        "ok": ok,
        "detail": detail if host else ("a Docker engine answers" if ok else "no Docker engine that can grade answers"),
    }
    ready = ready and ok
    # a refused task file is named, not a reason to leave the pool: the others serve
    tasks_ok, refused = svc.tasks_status()
    checks["tasks"] = {
        "ok": tasks_ok,
        "refused": refused,
        "detail": "every task file loaded"
        if tasks_ok
        else f"task files refused (the valid tasks serve): {', '.join(refused)}",
    }
    return jsonify({"status": "ready" if ready else "not ready", "checks": checks}), 200 if ready else 503


def _queue_depth(svc: Handles) -> dict[str, int]:
    """The database's queued and running counts, and Redis's jobs: every grading queue's
    together, and each environment's waiting as `redis_queued:NAME` (a grade waits there
    until a host that has the environment's image takes it: a depth that only grows names
    an environment no host serves)."""
    from rq.registry import StartedJobRegistry

    with svc.db.read() as s:
        queued = subs.count_queued(s)
        active = subs.count_active(s)
    envs = svc.environments()
    queues = svc.grade_queues(envs)  # that of grades of no known environment, then one per environment
    counts = [q.count for q in queues]
    return {
        "queued": queued,
        "running": active - queued,
        "redis_queued": sum(counts),
        "redis_scheduled": sum(_scheduled(q) for q in queues),
        "redis_started": sum(StartedJobRegistry(queue=q).count for q in queues),
        "webhooks_queued": svc.webhook_queue.count,
        **{f"redis_queued:{env}": n for env, n in zip(envs, counts[1:], strict=True)},
    }


def _scheduled(queue: Queue) -> int:
    from rq.registry import ScheduledJobRegistry

    # rq's ScheduledJobRegistry.__init__ is not annotated
    return int(ScheduledJobRegistry(queue=queue).count)  # type: ignore[no-untyped-call]


@bp.get("/v1/workers")
@auth.required
def workers() -> Response:
    """Hosts see each worker (name, host, pid, the submission it grades); a team sees only
    how many workers there are and in what state, and the queue's depth: another team's
    submission ids, pids and hosts are not its business."""
    from rq import Worker

    svc = _svc()
    out: list[dict[str, Any]] = []
    for w in Worker.all(connection=svc.redis):
        if not g.caller.admin:
            out.append({"state": w.get_state()})
            continue
        job = w.get_current_job_id()
        out.append(
            {
                "name": w.name,
                "host": w.hostname,
                "pid": w.pid,
                "state": w.get_state(),
                "current_submission": job.rsplit("-", 1)[0] if job else None,
                "last_heartbeat": w.last_heartbeat.isoformat() if w.last_heartbeat else None,
                "successful_jobs": w.successful_job_count,
                "failed_jobs": w.failed_job_count,
                "queues": w.queue_names(),
            }
        )
    out.sort(key=lambda w: (w.get("name", ""), w["state"]))
    return jsonify({"workers": out, "queue": _queue_depth(svc)})


class _Collector:
    """Figures read from the database and Redis at scrape time: the same on every API
    process and host, and exact after restarts (no per-process counters to lose)."""

    def __init__(self, svc: Handles):
        self.svc = svc

    def collect(self) -> Iterator[Metric]:
        with self.svc.db.read() as s:
            counts = subs.verdict_counts(s)
            buckets, total, n = subs.duration_histogram(s, DURATION_BUCKETS)
        done = CounterMetricFamily("grader_submissions", "Submissions graded to a final verdict", labels=["verdict"])
        state = GaugeMetricFamily("grader_submissions_by_status", "Submissions in each status", labels=["status"])
        verdicts: dict[str, int] = {}
        statuses: dict[str, int] = {}
        for status, verdict, count in counts:
            statuses[status] = statuses.get(status, 0) + count
            if status == "done" and verdict:
                verdicts[verdict] = verdicts.get(verdict, 0) + count
        for verdict, count in sorted(verdicts.items()):
            done.add_metric([verdict], count)
        for status, count in sorted(statuses.items()):
            state.add_metric([status], count)
        yield done
        yield state
        depth = _queue_depth(self.svc)
        g = GaugeMetricFamily("grader_queue_depth", "Submissions waiting, and jobs in Redis", labels=["where"])
        for k, v in depth.items():
            g.add_metric([k], v)
        yield g
        h = HistogramMetricFamily("grader_grading_seconds", "Time to grade a submission (cache answers excluded)")
        h.add_metric([], [(str(b), v) for b, v in zip(DURATION_BUCKETS, buckets, strict=True)] + [("+Inf", n)], total)
        yield h
        from rq import Worker

        w = GaugeMetricFamily("grader_workers", "RQ workers registered, by state", labels=["state"])
        states: dict[str, int] = {}
        for worker in Worker.all(connection=self.svc.redis):
            states[worker.get_state()] = states.get(worker.get_state(), 0) + 1
        for worker_state, count in states.items():
            w.add_metric([worker_state], count)
        yield w


@bp.get("/metrics")
def metrics() -> Response:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(_svc()))
    return Response(generate_latest(registry), mimetype=CONTENT_TYPE_LATEST)


@bp.get("/v1/account")
@auth.required
def account() -> Response:
    svc, c = _svc(), g.caller
    st = svc.settings
    with svc.db.read() as s:
        today, active = subs.count_today(s, c.team_id), subs.count_active(s, c.team_id)
        refunded = subs.count_refunded_today(s, c.team_id)
    return jsonify(
        {
            "team": c.name,
            "admin": c.admin,
            "webhook_secret": c.webhook_secret,
            "quotas": {
                "per_day": c.daily_quota if c.daily_quota is not None else st.daily_quota,
                "queued_at_once": c.queued_quota if c.queued_quota is not None else st.queued_quota,
                "refund_deleted_per_day": st.quota_refund_deleted,
            },
            # today: what counts against per_day (refunded_today, given back by deleted runs, does not)
            "usage": {"today": today, "queued_or_running": active, "refunded_today": refunded},
        }
    )


# --- admin ----------------------------------------------------------------------------------------
@bp.get("/v1/admin/teams")
@auth.admin_required
def teams() -> Response:
    svc = _svc()
    with svc.db.read() as s:
        rows = list(s.scalars(select(Team).order_by(Team.name)))
        out = [
            {
                "name": t.name,
                "admin": t.admin,
                "daily_quota": t.daily_quota,
                "queued_quota": t.queued_quota,
                "keys": sum(1 for k in t.keys if k.revoked_at is None),
                "created_at": t.created_at.isoformat(),
            }
            for t in rows
        ]
    return jsonify({"items": out})


@bp.post("/v1/admin/teams")
@auth.admin_required
def create_team() -> ResponseReturnValue:
    svc = _svc()
    try:
        body = TeamIn.model_validate(json_body())
    except ValidationError as exc:
        raise validation_error(exc) from None
    try:
        with svc.db.write() as s:
            key = create_key(
                s, body.name, admin=body.admin, daily_quota=body.daily_quota, queued_quota=body.queued_quota
            )
    except StoreError as exc:
        if isinstance(exc.__cause__, IntegrityError):
            raise ApiError(409, "conflict", f"team {body.name!r} was created concurrently; retry") from None
        raise
    return jsonify({"team": body.name, "key": key}), 201


@bp.patch("/v1/admin/teams/<name>")
@auth.admin_required
def set_quotas(name: str) -> Response:
    """A team's quotas (the fields given; null: the service's default)."""
    svc = _svc()
    try:
        given = QuotasIn.model_validate(json_body()).model_dump(exclude_unset=True)
    except ValidationError as exc:
        raise validation_error(exc) from None
    with svc.db.write() as s:
        team = s.scalar(select(Team).where(Team.name == name))
        if team is None:
            raise ApiError(404, "not_found", f"no team {name!r}")
        for k, v in given.items():
            setattr(team, k, v)
        out = {"name": team.name, "daily_quota": team.daily_quota, "queued_quota": team.queued_quota}
    return jsonify(out)


@bp.get("/v1/admin/teams/<name>/keys")
@auth.admin_required
def team_keys(name: str) -> Response:
    """A team's keys, live and revoked, by their prefixes (a key itself is shown once, when made)."""
    with _svc().db.read() as s:
        team = s.scalar(select(Team).where(Team.name == name))
        if team is None:
            raise ApiError(404, "not_found", f"no team {name!r}")
        items = [
            {
                "id": k.id,
                "prefix": k.prefix,
                "created_at": k.created_at.isoformat(),
                "revoked_at": k.revoked_at.isoformat() if k.revoked_at else None,
            }
            for k in sorted(team.keys, key=lambda k: k.id)
        ]
    return jsonify({"team": name, "items": items})


@bp.delete("/v1/admin/keys/<key_id>")
@auth.admin_required
def revoke_key(key_id: str) -> Response:
    """Revoke one key: its requests and portal sessions are refused from now on; the team's
    other keys go on."""
    number = row_id(key_id)
    if number is None:
        raise ApiError(404, "not_found", f"no live key {key_id!r}")
    with _svc().db.write() as s:
        key = s.get(ApiKey, number)
        if key is None or key.revoked_at is not None:
            raise ApiError(404, "not_found", f"no live key {key_id}")
        key.revoked_at = dt.datetime.now(dt.UTC)
        out = {
            "id": key.id,
            "prefix": key.prefix,
            "created_at": key.created_at.isoformat(),
            "revoked_at": key.revoked_at.isoformat(),
        }
    return jsonify(out)


@bp.post("/v1/admin/tasks/reload")
@auth.admin_required
def reload_tasks() -> Response:
    """Read the tasks directory again (after adding or changing tasks). An invalid task
    file keeps the previous set in service and is named, with its reason, in a 422."""
    from grader.errors import TaskError
    from grader.tasks.loader import TasksRefused

    svc = _svc()
    try:
        tasks = svc.reload_tasks()
    except TasksRefused as exc:
        raise ApiError(
            422,
            "invalid_tasks",
            str(exc),
            details=[{"field": path, "problem": why} for path, why in exc.refused.items()],
        ) from None
    except TaskError as exc:
        raise ApiError(422, "invalid_tasks", f"{exc}; the previous set stays in service") from None
    return jsonify({"tasks": len(tasks), "reloaded_at": dt.datetime.now(dt.UTC).isoformat()})


@bp.get("/v1/admin/suites")
@auth.admin_required
def suites_in_service() -> Response:
    """The suites in service, as the portal's /host/suites shows them: tasks, languages,
    feedback policies, gold patches and validation status (grader/suites.py)."""
    return jsonify({"items": [{"suite": name, **row} for name, row in suites.in_service(_svc()).items()]})


@bp.post("/v1/admin/suites/validations")
@auth.admin_required
def record_validation() -> ResponseReturnValue:
    """Record a validation the host ran elsewhere (`grader tasks validate --json`'s output):
    each suite in it must be validated whole; all or nothing."""
    try:
        body = SuiteValidationIn.model_validate(json_body())
    except ValidationError as exc:
        raise validation_error(exc) from None
    outcomes: dict[str, dict[str, tuple[str, str]]] = {}
    for item in body.tasks:
        outcomes.setdefault(item.suite, {})[item.task_id] = (item.task_hash, item.outcome)
    if sum(len(v) for v in outcomes.values()) != len(body.tasks):
        raise ApiError(422, "invalid_fields", "a task is named twice in the validation")
    recorded, problems = suites.record(
        _svc(),
        outcomes,
        repeat=body.repeat,
        grader_version=body.grader_version,
        by=f"{g.caller.name} (POST /v1/admin/suites/validations)",
    )
    if problems:
        raise ApiError(
            422,
            "invalid_fields",
            "; ".join(problems),
            details=[{"field": "tasks", "problem": p} for p in problems],
        )
    return jsonify({"recorded": recorded}), 201
