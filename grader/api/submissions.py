"""/v1/submissions: accept, batch, read, list, cancel.

The routes read the request and answer it; what a submission goes through on its way in
(checks, Idempotency-Keys, quotas, the cache, storing in chunks, the queue) is
grader/intake.py's, and what it refuses is answered with the status
grader/api/errors.py's REFUSAL_STATUS gives it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from flask import Blueprint, Response, current_app, g, jsonify, request
from flask.typing import ResponseReturnValue
from pydantic import ValidationError

from grader import budget, intake, names
from grader.api import auth
from grader.api.errors import ApiError, json_body, parse_json, refused, validation_error
from grader.api.waiting import Refused
from grader.handles import Handles
from grader.intake import Refusal
from grader.schemas import ATTEMPT_DEFAULTS, BatchIn, SubmissionIn, read_item
from grader.serializers import listed, shown_to
from grader.store import submissions as subs
from grader.store.models import Status, Submission

log = logging.getLogger(__name__)
bp = Blueprint("submissions", __name__, url_prefix="/v1/submissions")
JSONL_TYPES = ("application/x-ndjson", "application/jsonl", "application/json-lines", "application/x-jsonlines")


def _svc() -> Handles:
    svc: Handles = current_app.extensions["grader"]
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


def _item(sub: SubmissionIn) -> intake.Item:
    return intake.Item(**sub.model_dump())


def _idempotency_key() -> str | None:
    return intake.idempotency_key(request.headers.get("Idempotency-Key"))


def _hold(svc: Handles, team_id: str, ids: list[str], seconds: float) -> str | None:
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


def _load(svc: Handles, submission_id: str, caller: auth.Caller) -> Submission:
    with svc.db.read() as s:
        sub = s.get(Submission, submission_id) if len(submission_id) <= 32 else None
    if sub is None or (sub.team_id != caller.team_id and not caller.admin):
        # another team's submission is not found, rather than forbidden: ids are not disclosed
        raise ApiError(404, "not_found", f"no submission {submission_id!r}")
    return sub


def _full(svc: Handles, sub: Submission) -> dict[str, Any]:
    """The submission with its result as the caller may see it (grader/serializers/feedback.py)."""
    return shown_to(svc, sub, host=g.caller.admin)


# --- routes --------------------------------------------------------------------------------------
@bp.post("")
@auth.required
def create() -> Response:
    svc = _svc()
    with budget.stage("request: JSON parse"):
        body = json_body()
    if not isinstance(body, dict):
        raise ApiError(
            422,
            "invalid_fields",
            "the body must be a JSON object with task_id and patch; send several submissions to /v1/submissions/batch",
        )
    try:
        with budget.stage("request: validation (pydantic)"):
            item = _item(SubmissionIn.model_validate(body))
    except ValidationError as exc:
        raise validation_error(exc) from None
    wait = _wait_seconds()
    # a run holds one attempt per (task, trial): a second is refused unless it says overwrite
    with budget.stage("intake: the rest"):
        result = intake.accept(svc, g.caller, [item], [_idempotency_key()], exclusive=True)[0]
    if isinstance(result, Refusal):
        raise refused(result)
    sub = result.row  # a new one as this request stored it, committed: answered as it is
    not_held = None
    held = bool(wait) and sub.status not in (Status.DONE.value, Status.CANCELLED.value)
    if held:
        not_held = _hold(svc, g.caller.team_id, [sub.id], wait)
    if held or result.replayed:  # what it is now: graded meanwhile, or the first under its key
        with budget.stage("answer: the row read back"):
            sub = _load(svc, sub.id, g.caller)
    with budget.stage("answer: serialisation"):
        response = jsonify(_full(svc, sub))
    response.status_code = 200 if sub.status == Status.DONE.value or result.replayed else 202
    response.headers["Location"] = f"/v1/submissions/{sub.id}"
    if not_held is not None:
        response.headers["Grader-Wait"] = f"not held: {not_held}"
        response.headers["Retry-After"] = "2"
    if result.replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return response


def _batch_items(svc: Handles) -> tuple[list[Any], str | None, dict[str, Any]]:
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
    given = request.args.get("run_id")
    if given:
        try:
            run_id = names.run_name(given)
        except names.NameRefused as exc:
            raise ApiError(
                422, "invalid_fields", f"run_id: {exc}", details=[{"field": "run_id", "problem": str(exc)}]
            ) from None
    if not raw:
        raise ApiError(422, "invalid_fields", "the batch holds no submissions")
    if len(raw) > svc.settings.max_batch_items:
        raise ApiError(
            413,
            "body_too_large",
            f"a batch holds at most {svc.settings.max_batch_items} submissions; this one has {len(raw)}",
        )
    return raw, run_id, defaults


@bp.post("/batch")
@auth.required
def create_batch() -> ResponseReturnValue:
    svc = _svc()
    raw, run_id, defaults = _batch_items(svc)
    read = [read_item(r, run_id, defaults) for r in raw]
    key = _idempotency_key()
    keys = [f"{key}#{i}" if key else None for i in range(len(read))]
    batch_hash = hashlib.sha256(json.dumps([raw, run_id, defaults], sort_keys=True, default=str).encode()).hexdigest()
    answers = intake.accept(
        svc, g.caller, [it.sub for it in read], keys, batch_hash=batch_hash if key else None, exclusive=True
    )
    out, accepted = [], 0
    for i, (it, given) in enumerate(zip(answers, read, strict=True)):
        if isinstance(it, Refusal):
            row = {"index": i, "error": refused(it).body()["error"]}
        else:
            accepted += 1
            row = {"index": i, "id": it.row.id, "status": it.row.status, "verdict": it.row.verdict}
        if given.ignored:
            row["ignored"] = given.ignored
        out.append(row)
    body = {"items": out, "accepted": accepted, "rejected": len(out) - accepted, "run_id": run_id}
    if accepted:
        return jsonify(body), 202
    errors = [refused(it) for it in answers if isinstance(it, Refusal)]
    status = (
        503
        if all(e.status == 503 for e in errors)
        else 429
        if all(e.status in (429, 503) for e in errors)
        else 409
        if all(e.status == 409 for e in errors)
        else 403
        if all(e.status == 403 for e in errors)
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
            run_id=names.normal(request.args["run_id"]) if "run_id" in request.args else None,
            status=status,
            after=request.args.get("cursor"),
            limit=limit + 1,
        )
    more = len(rows) > limit
    rows = rows[:limit]
    return jsonify(
        {"items": [listed(svc, r, host=g.caller.admin) for r in rows], "next_cursor": rows[-1].id if more else None}
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
