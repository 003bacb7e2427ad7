"""/v1/submissions: accept, batch, read, list, cancel.

A submission is written to the database before it is put on the queue, so that once the
API has answered 202 nothing can lose it: if Redis is away, the reconciler enqueues it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, cast

from flask import Blueprint, Response, current_app, g, jsonify, request
from flask.typing import ResponseReturnValue
from pydantic import ValidationError
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from grader import webhooks
from grader.api import auth
from grader.api.errors import ApiError, json_body, parse_json, validation_error
from grader.api.schemas import BatchIn, PredictionIn, SubmissionIn
from grader.api.waiting import Refused
from grader.errors import StoreError, TaskNotFound
from grader.service import Service
from grader.store import runs as store_runs
from grader.store import submissions as subs
from grader.store.models import Run, Status, Submission, utcnow
from grader.tasks.model import PROMPT_VARIANTS
from grader.version import GRADER_VERSION
from grader.views import shown_to, submission_view

log = logging.getLogger(__name__)
bp = Blueprint("submissions", __name__, url_prefix="/v1/submissions")
JSONL_TYPES = ("application/x-ndjson", "application/jsonl", "application/json-lines", "application/x-jsonlines")


def _svc() -> Service:
    svc: Service = current_app.extensions["grader"]
    return svc


# --- reading bodies ----------------------------------------------------------------------------
def _jsonl_body() -> list[Any]:
    raw = request.get_data(cache=False)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(400, "bad_request", f"the request body is not UTF-8: {exc}") from None
    items = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        items.append(parse_json(line, f"line {n} of the JSONL body"))
    if not items:
        raise ApiError(400, "bad_request", "the JSONL body holds no items")
    return items


def _wait_seconds() -> float:
    raw = request.args.get("wait")
    if raw is None:
        return 0.0
    try:
        wait = float(raw)
    except ValueError:
        raise ApiError(422, "invalid_fields", f"wait must be a number of seconds, not {raw!r}") from None
    if not (0 <= wait < float("inf")):
        raise ApiError(422, "invalid_fields", "wait must be zero or more seconds")
    return min(wait, _svc().settings.max_wait)


def _request_hash(item: SubmissionIn) -> str:
    return hashlib.sha256(json.dumps(item.model_dump(exclude_none=True), sort_keys=True).encode()).hexdigest()


def _idempotency_key() -> str | None:
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return None
    key = key.strip()
    if not key or len(key) > 180:
        raise ApiError(422, "invalid_fields", "Idempotency-Key must be 1 to 180 characters")
    return key


# --- intake ------------------------------------------------------------------------------------
@dataclass
class Quota:
    """How many more submissions may be accepted now, and what to answer once none may."""

    room: int
    reason: ApiError


def _quota(svc: Service, caller: auth.Caller, s: Session) -> Quota:
    """Counted in the intake's write transaction, under the team's lock (subs.lock_team), so
    that no concurrent request of the team can count the same room; near the queue's bound,
    under the queue's lock too, so that no two teams can count its last room."""
    st = svc.settings
    today, active, queued = (
        subs.count_today(s, caller.team_id),
        subs.count_active(s, caller.team_id),
        subs.count_queued(s),
    )
    if st.queue_max - queued <= QUEUE_NEAR:
        subs.lock_queue(s)
        queued = subs.count_queued(s)  # again, now that no other team's intake can be counting
    daily = caller.daily_quota if caller.daily_quota is not None else st.daily_quota
    at_once = caller.queued_quota if caller.queued_quota is not None else st.queued_quota
    limits = [
        (
            daily - today,
            ApiError(
                429,
                "quota_exceeded",
                f"your team's quota of {daily} submissions a day is used up",
                retry_after=_seconds_to_midnight(),
            ),
        ),
        (
            at_once - active,
            ApiError(
                429,
                "quota_exceeded",
                f"your team already has {active} submissions queued or running; the limit is {at_once}",
                retry_after=30,
            ),
        ),
        (
            st.queue_max - queued,
            ApiError(503, "queue_full", f"the queue is at its bound of {st.queue_max}; retry later", retry_after=30),
        ),
    ]
    room, reason = min(limits, key=lambda r: r[0])  # the binding limit, and what to say when it is reached
    return Quota(max(room, 0), reason)


def _seconds_to_midnight() -> int:
    now = utcnow()
    return int((subs.start_of_day(now) + dt.timedelta(days=1) - now).total_seconds()) + 1


@dataclass
class Accepted:
    row: Submission
    replayed: bool = False
    enqueue: bool = True


@dataclass
class Intake:
    items: list[Accepted | ApiError] = field(default_factory=list)


def _check_item(svc: Service, item: SubmissionIn) -> None:
    try:
        svc.task(item.task_id)
    except TaskNotFound:
        raise ApiError(422, "unknown_task", f"no task {item.task_id!r}; GET /v1/tasks lists them") from None
    if item.prompt_variant is not None and item.prompt_variant not in PROMPT_VARIANTS:
        raise ApiError(422, "invalid_fields", f"prompt_variant must be one of {list(PROMPT_VARIANTS)}")
    if item.callback_url is not None:
        try:
            webhooks.check_url(item.callback_url, allow_private=svc.settings.callback_allow_private)
        except webhooks.CallbackRefused as exc:
            raise ApiError(422, "invalid_callback_url", str(exc)) from None


def _locked(run: Run) -> ApiError:
    """A published run takes no more trials (grader/store/runs.py says why)."""
    return ApiError(
        409,
        "run_locked",
        f"run {run.name!r} was published on {run.published_at:%Y-%m-%d} and takes no "
        "more submissions; submit with a new run_id",
    )


CHUNK = 500  # items stored per write transaction: how long one batch holds the database at a time
# Within this many submissions of GRADER_QUEUE_MAX, intake counts the queue under a lock
# across teams (subs.lock_queue): exact there, and no cost to intake while the queue is far
# from its bound. Far from it, only chunks already counting at once (each at most CHUNK
# items) could overshoot, and more than QUEUE_NEAR / CHUNK = 16 of them would be needed.
QUEUE_NEAR = 16 * CHUNK

# SQLite has no queue of writers: one that finds the database locked sleeps and polls again,
# at most 100 ms apart (SQLite's busy handler). A batch that began its next chunk at once
# would win nearly every poll and starve other teams' writes for seconds; a pause between
# chunks at least as long as that longest poll lets every writer that is waiting in.
# PostgreSQL queues its lock waiters, and locks only the team's row: no pause there.
SQLITE_CHUNK_PAUSE = 0.1


def _new_row(svc: Service, caller: auth.Caller, item: SubmissionIn, key: str | None, request_hash: str) -> Submission:
    patch = item.patch.encode("utf-8")
    return Submission(
        id=subs.new_id(),
        team_id=caller.team_id,
        task_id=item.task_id,
        patch=patch,
        patch_sha256=hashlib.sha256(patch).hexdigest(),
        task_hash=svc.task_hash(item.task_id),
        run_id=item.run_id,
        system=item.system,
        trial=item.trial,
        prompt_variant=item.prompt_variant,
        meta=item.metadata,
        callback_url=item.callback_url,
        idempotency_key=key,
        request_hash=request_hash,
        status=Status.QUEUED.value,
        queued_at=utcnow(),
        attempts=0,
        errors=0,
        cached=False,
    )


def _too_large(svc: Service, item: SubmissionIn) -> ApiError | None:
    limit = svc.settings.max_patch_bytes
    size = len(item.patch.encode("utf-8"))
    if size <= limit:
        return None
    return ApiError(
        413, "patch_too_large", f"the patch is {size} bytes; the limit is {limit} bytes (GRADER_MAX_PATCH_BYTES)"
    )


def _conflict() -> ApiError:
    return ApiError(409, "idempotency_conflict", "this Idempotency-Key was used before with a different request")


def _prior(prior: Submission, request_hash: str | None, item_hash: str | None = None) -> Accepted | ApiError:
    """What a request answers when its key is taken: the first submission if it is the same
    request. `item_hash`: a batch item's own hash, which is what batches stored before
    whole-batch hashes (grader 0.1 before issue 11) kept, so that their retries still replay."""
    same = prior.request_hash in (request_hash, item_hash)
    return Accepted(prior, replayed=True, enqueue=False) if same else _conflict()


def _cache_hits(svc: Service, rows: list[Submission]) -> dict[tuple[str | None, str], Submission]:
    """Earlier grades of these patches, looked up by hash before the write transaction begins."""
    if not svc.settings.cache:
        return {}
    hits: dict[tuple[str | None, str], Submission] = {}
    images: dict[str, str | None] = {}
    with svc.db.read() as s:
        for row in rows:
            pair = (row.task_hash, row.patch_sha256)
            if row.task_hash is None or pair in hits:
                continue
            if row.task_hash not in images:
                images[row.task_hash] = subs.newest_image(s, row.task_hash, GRADER_VERSION)
            if images[row.task_hash] is None:
                continue
            hit = subs.cached_result(s, row.task_hash, row.patch_sha256, GRADER_VERSION, images[row.task_hash])
            if hit is not None:
                hits[pair] = hit
    return hits


def _answer_from_cache(row: Submission, hit: Submission) -> None:
    now = utcnow()
    row.status, row.verdict, row.result, row.cached = Status.DONE.value, hit.verdict, hit.result, True
    row.started_at = row.finished_at = now
    row.image_id, row.grader_version, row.duration = hit.image_id, hit.grader_version, hit.duration


def accept(
    svc: Service,
    caller: auth.Caller,
    items: list[SubmissionIn | ApiError],
    keys: list[str | None],
    *,
    batch_hash: str | None = None,
) -> Intake:
    """Validate, de-duplicate by idempotency key, apply quotas, store and enqueue, keeping order.

    Items are stored CHUNK at a time, each chunk one write transaction that locks the team,
    re-checks the keys and counts the quota before inserting: a large batch lets other teams'
    requests in between its chunks, and concurrent requests of one team cannot both take the
    last of a quota or both take one key. `batch_hash`: the items are one batch under one key,
    each stored with the whole batch's hash, so that a key reused for a batch that differs in
    any item (or in their number) refuses every item, before anything is stored."""
    out: list[Accepted | ApiError | None] = [None] * len(items)
    wanted = [k for k in keys if k]
    with svc.db.read() as s:
        seen = subs.by_idempotency_key(s, caller.team_id, wanted)
        locked = (
            {}
            if caller.admin
            else store_runs.locked_names(
                s, caller.team_id, {i.run_id for i in items if not isinstance(i, ApiError) and i.run_id}
            )
        )
    todo: list[tuple[int, Submission]] = []
    for n, (item, key) in enumerate(zip(items, keys, strict=True)):
        if isinstance(item, ApiError):
            out[n] = item
            continue
        request_hash = batch_hash or _request_hash(item)
        if key and key in seen:
            out[n] = _prior(seen[key], request_hash, _request_hash(item) if batch_hash else None)
            continue
        if item.run_id in locked:
            out[n] = _locked(locked[item.run_id])
            continue
        try:
            _check_item(svc, item)
        except ApiError as err:
            out[n] = err
            continue
        too_large = _too_large(svc, item)
        if too_large is not None:
            out[n] = too_large
            continue
        todo.append((n, _new_row(svc, caller, item, key, request_hash)))
    if batch_hash and any(isinstance(o, ApiError) and o.code == "idempotency_conflict" for o in out):
        return Intake(
            [_conflict() if not isinstance(o, ApiError) or o.code != "idempotency_conflict" else o for o in out]
        )
    fresh: list[Accepted] = []
    if todo:
        hits = _cache_hits(svc, [row for _, row in todo])
        store_runs.ensure_runs(svc.db, caller.team_id, {row.run_id for _, row in todo if row.run_id})
        for at in range(0, len(todo), CHUNK):
            if at and svc.db.is_sqlite:
                time.sleep(SQLITE_CHUNK_PAUSE)
            fresh += _store(svc, caller, todo[at : at + CHUNK], hits, out)
    for acc in fresh:
        if acc.row.webhook_status == "pending":
            _after_cached(svc, acc.row.id)
    queued = [(a.row.id, a.row.job_id, a.row.task_id) for a in fresh if a.enqueue]
    if queued:
        try:
            svc.enqueue_many(queued)
        except StoreError as exc:  # stored already: the reconciler will enqueue them
            log.warning("enqueueing %d submission(s) failed (%s); the reconciler will", len(queued), exc)
    return Intake(cast("list[Accepted | ApiError]", out))  # every item is answered by now


def _store(
    svc: Service,
    caller: auth.Caller,
    chunk: list[tuple[int, Submission]],
    hits: dict[tuple[str | None, str], Submission],
    out: list[Accepted | ApiError | None],
) -> list[Accepted]:
    """One write transaction for `chunk`; the rows it stored. Under the team's lock a key
    taken since the read above is seen here; should an insert still collide on one (the
    unique index is the last word), the chunk is tried again and its keys answered then."""
    cached = [hits.get((row.task_hash, row.patch_sha256)) for _, row in chunk]
    for attempt in range(3):
        answers: dict[int, Accepted | ApiError] = {}
        try:
            with svc.db.write() as s:
                subs.lock_team(s, caller.team_id)
                seen = subs.by_idempotency_key(
                    s, caller.team_id, [r.idempotency_key for _, r in chunk if r.idempotency_key]
                )
                quota = _quota(svc, caller, s)
                add = []
                for (n, template), hit in zip(chunk, cached, strict=True):
                    if template.idempotency_key in seen:
                        answers[n] = _prior(seen[template.idempotency_key], template.request_hash)
                        continue
                    if quota.room <= 0:
                        answers[n] = quota.reason
                        continue
                    quota.room -= 1
                    row = _copy(template)
                    if hit is not None:
                        _answer_from_cache(row, hit)
                        row.webhook_status = "pending" if row.callback_url else None  # jobs.after_finish's move
                    else:
                        row.job_id = subs.new_job_id(row.id)
                    answers[n] = Accepted(row, enqueue=hit is None)
                    add.append(row)
                subs.insert_many(s, add)
        except StoreError as exc:
            if not isinstance(exc.__cause__, IntegrityError) or attempt == 2:
                raise
            log.info("intake collided on an Idempotency-Key; reading the keys again")
            continue
        for n, answer in answers.items():
            out[n] = answer
        return [a for a in answers.values() if isinstance(a, Accepted) and not a.replayed]
    raise AssertionError("unreachable")


def _copy(row: Submission) -> Submission:
    """A new row with the template's columns, for one attempt at storing it: an attempt that
    rolls back must leave the template as it was."""
    return Submission(**{c.key: getattr(row, c.key) for c in Submission.__mapper__.column_attrs})


def _after_cached(svc: Service, submission_id: str) -> None:
    """Queue the callback of a submission answered from the cache (marked pending as it was stored)."""
    try:
        svc.enqueue_webhook(submission_id)
    except StoreError as exc:
        log.warning("queueing the callback of cached %s failed (%s); the reconciler will", submission_id, exc)


def _hold(svc: Service, team_id: str, ids: list[str], seconds: float) -> str | None:
    """Hold the request until these submissions are done, or `seconds` pass; the reason it
    was not held, if a bound of grader/api/waiting.py refused it."""

    def open_(wanted: list[str]) -> int:
        with svc.db.read() as s:
            return (
                s.query(Submission.id)
                .filter(Submission.id.in_(wanted), Submission.status.in_([Status.QUEUED.value, Status.RUNNING.value]))
                .count()
            )

    waits = current_app.extensions["grader.waits"]
    try:
        with waits.slot(team_id):
            waits.wait(ids, open_, seconds)
    except Refused as exc:
        return str(exc)
    return None


def _load(svc: Service, submission_id: str, caller: auth.Caller) -> Submission:
    with svc.db.read() as s:
        sub = s.get(Submission, submission_id) if len(submission_id) <= 32 else None
    if sub is None or (sub.team_id != caller.team_id and not caller.admin):
        # another team's submission is not found, rather than forbidden: ids are not disclosed
        raise ApiError(404, "not_found", f"no submission {submission_id!r}")
    return sub


def _full(svc: Service, sub: Submission) -> dict[str, Any]:
    """The submission with its result as the caller may see it (grader/views/feedback.py)."""
    return shown_to(svc, sub, host=g.caller.admin)


# --- routes --------------------------------------------------------------------------------------
@bp.post("")
@auth.required
def create() -> Response:
    svc = _svc()
    body = json_body()
    if not isinstance(body, dict):
        raise ApiError(
            422,
            "invalid_fields",
            "the body must be a JSON object with task_id and patch; send several submissions to /v1/submissions/batch",
        )
    try:
        item = SubmissionIn.model_validate(body)
    except ValidationError as exc:
        raise validation_error(exc) from None
    wait = _wait_seconds()
    result = accept(svc, g.caller, [item], [_idempotency_key()]).items[0]
    if isinstance(result, ApiError):
        raise result
    sub = result.row
    refused = None
    if wait and sub.status not in (Status.DONE.value, Status.CANCELLED.value):
        refused = _hold(svc, g.caller.team_id, [sub.id], wait)
    sub = _load(svc, sub.id, g.caller)
    response = jsonify(_full(svc, sub))
    response.status_code = 200 if sub.status == Status.DONE.value or result.replayed else 202
    response.headers["Location"] = f"/v1/submissions/{sub.id}"
    if refused is not None:
        response.headers["Grader-Wait"] = f"not held: {refused}"
        response.headers["Retry-After"] = "2"
    if result.replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return response


ATTEMPT_DEFAULTS = ("system", "trial", "prompt_variant", "metadata", "callback_url")  # a batch's, for its items


def _batch_items(svc: Service) -> tuple[list[Any], str | None, dict[str, Any]]:
    """The items, the run and the batch's defaults for what an item does not say."""
    defaults: dict[str, Any] = {}
    if request.mimetype in JSONL_TYPES:
        raw, run_id = _jsonl_body(), None
    else:
        body = json_body()
        if isinstance(body, list):
            raw, run_id = body, None
        elif isinstance(body, dict):
            try:
                batch = BatchIn.model_validate(body)
            except ValidationError as exc:
                raise validation_error(exc) from None
            raw, run_id = batch.submissions, batch.run_id
            defaults = {k: getattr(batch, k) for k in ATTEMPT_DEFAULTS if getattr(batch, k) is not None}
        else:
            raise ApiError(
                422,
                "invalid_fields",
                "the body must be a JSON list, a JSON object with 'submissions', "
                "or JSONL (Content-Type: application/x-ndjson)",
            )
    run_id = request.args.get("run_id") or run_id
    if not raw:
        raise ApiError(422, "invalid_fields", "the batch holds no submissions")
    if len(raw) > svc.settings.max_batch_items:
        raise ApiError(
            413,
            "body_too_large",
            f"a batch holds at most {svc.settings.max_batch_items} submissions; this one has {len(raw)}",
        )
    return raw, run_id, defaults


@dataclass
class Item:
    """One batch item as read: the submission, or why it is refused; and the fields of a
    SWE-bench prediction that are not kept (said in the answer, never dropped silently)."""

    sub: SubmissionIn | ApiError
    ignored: list[str] = field(default_factory=list)


def _batch_item(raw: Any, run_id: str | None, defaults: dict[str, Any]) -> Item:
    if not isinstance(raw, dict):
        return Item(ApiError(422, "invalid_fields", "each item must be a JSON object"))
    try:
        if "instance_id" in raw:  # SWE-bench's prediction format
            p = PredictionIn.model_validate(raw)
            own = {k: getattr(p, k) for k in ATTEMPT_DEFAULTS if k != "system" and getattr(p, k) is not None}
            sub = SubmissionIn.model_validate(
                {
                    **defaults,
                    **own,
                    "task_id": p.instance_id,
                    "patch": p.model_patch or "",
                    "run_id": run_id,
                    "system": p.model_name_or_path or defaults.get("system"),
                }
            )
            return Item(sub, sorted(p.model_extra or {}))
        merged = {"run_id": run_id, **defaults, **raw}
        return Item(SubmissionIn.model_validate({k: v for k, v in merged.items() if v is not None or k in raw}))
    except ValidationError as exc:
        return Item(validation_error(exc, "item"))


@bp.post("/batch")
@auth.required
def create_batch() -> ResponseReturnValue:
    svc = _svc()
    raw, run_id, defaults = _batch_items(svc)
    read = [_batch_item(r, run_id, defaults) for r in raw]
    key = _idempotency_key()
    keys = [f"{key}#{i}" if key else None for i in range(len(read))]
    batch_hash = hashlib.sha256(json.dumps([raw, run_id, defaults], sort_keys=True, default=str).encode()).hexdigest()
    intake = accept(svc, g.caller, [it.sub for it in read], keys, batch_hash=batch_hash if key else None)
    out, accepted = [], 0
    for i, (it, given) in enumerate(zip(intake.items, read, strict=True)):
        if isinstance(it, ApiError):
            row = {"index": i, "error": it.body()["error"]}
        else:
            accepted += 1
            row = {"index": i, "id": it.row.id, "status": it.row.status, "verdict": it.row.verdict}
        if given.ignored:
            row["ignored"] = given.ignored
        out.append(row)
    body = {"items": out, "accepted": accepted, "rejected": len(out) - accepted, "run_id": run_id}
    if accepted:
        return jsonify(body), 202
    errors = [it for it in intake.items if isinstance(it, ApiError)]
    status = (
        503
        if all(e.status == 503 for e in errors)
        else 429
        if all(e.status in (429, 503) for e in errors)
        else 409
        if all(e.status == 409 for e in errors)
        else 422
    )
    first = errors[0]
    body["error"] = {
        "code": first.code if status != 422 else "invalid_items",
        "message": f"none of the {len(out)} items was accepted; the first reason: {first.message}",
    }
    response = jsonify(body)
    response.status_code = status
    if status in (429, 503):
        response.headers["Retry-After"] = str(max(e.retry_after or 30 for e in errors))
    return response


@bp.get("/<submission_id>")
@auth.required
def show(submission_id: str) -> Response:
    svc = _svc()
    return jsonify(_full(svc, _load(svc, submission_id, g.caller)))


@bp.get("")
@auth.required
def index() -> Response:
    svc = _svc()
    try:
        limit = int(request.args.get("limit", 100))
    except ValueError:
        raise ApiError(422, "invalid_fields", "limit must be an integer") from None
    if not 1 <= limit <= 1000:
        raise ApiError(422, "invalid_fields", "limit must be between 1 and 1000")
    status = request.args.get("status")
    if status is not None and status not in {s.value for s in Status}:
        raise ApiError(422, "invalid_fields", f"status must be one of {[s.value for s in Status]}")
    with svc.db.read() as s:
        rows = subs.page(
            s,
            team_id=None if g.caller.admin else g.caller.team_id,
            run_id=request.args.get("run_id"),
            status=status,
            after=request.args.get("cursor"),
            limit=limit + 1,
        )
    more = len(rows) > limit
    rows = rows[:limit]
    return jsonify(
        {"items": [submission_view(r, full=False) for r in rows], "next_cursor": rows[-1].id if more else None}
    )


@bp.delete("/<submission_id>")
@auth.required
def cancel(submission_id: str) -> Response:
    svc = _svc()
    sub = _load(svc, submission_id, g.caller)
    if not subs.cancel(svc.db, sub.id):
        sub = _load(svc, submission_id, g.caller)
        if sub.status == Status.CANCELLED.value:
            return jsonify(_full(svc, sub))
        raise ApiError(
            409, "conflict", f"submission {sub.id} is {sub.status}; only a queued submission can be cancelled"
        )
    svc.cancel_job(sub.job_id)
    svc.announce_done(sub.id)
    return jsonify(_full(svc, _load(svc, submission_id, g.caller)))
