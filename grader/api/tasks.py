"""/v1/tasks: the public view of each task, and its starting repository, and nothing else of it."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from flask import Blueprint, Response, current_app, jsonify, request, send_file

from grader.api import auth
from grader.api.errors import ApiError
from grader.errors import TaskError, TaskNotFound
from grader.tasks.bundle import repository_bundle
from grader.tasks.model import Task

if TYPE_CHECKING:
    from grader.handles import Handles

bp = Blueprint("tasks", __name__, url_prefix="/v1/tasks")
log = logging.getLogger(__name__)
BUNDLE_TYPE = "application/x-git-bundle"


@bp.get("")
@auth.required
def index() -> Response:
    svc: Handles = current_app.extensions["grader"]
    suite = request.args.get("suite") or None
    suites = sorted({t.metadata.suite for t in svc.tasks})
    if suite is not None and suite not in suites:
        raise ApiError(
            422, "invalid_fields", f"there is no suite {suite!r}; the suites are: {', '.join(suites) or 'none'}"
        )
    tasks = sorted((t for t in svc.tasks if suite is None or t.metadata.suite == suite), key=lambda t: t.id)
    return jsonify({"items": [t.public_view() for t in tasks]})


def _task(task_id: str) -> Task:
    svc: Handles = current_app.extensions["grader"]
    try:
        return svc.task(task_id)
    except TaskNotFound:
        raise ApiError(404, "not_found", f"no task {task_id!r}") from None


@bp.get("/<task_id>")
@auth.required
def show(task_id: str) -> Response:
    return jsonify(_task(task_id).public_view())


@bp.get("/<task_id>/repository")
@auth.required
def repository(task_id: str) -> Response:
    """The starting repository as a git bundle (grader/tasks/bundle.py). Its sha256 is the
    ETag, so a client that has it asks with If-None-Match and gets 304; `no-cache` makes
    every use ask, since a reloaded task may start elsewhere under the same URL."""
    task = _task(task_id)
    svc: Handles = current_app.extensions["grader"]
    try:
        bundle = repository_bundle(task, svc.settings.cache_dir, svc.task_hash(task_id))
    except TaskError as exc:  # the task's repository source is broken or gone: the host's to fix
        log.error("cannot pack the repository of task %s: %s", task_id, exc)
        raise ApiError(
            500, "internal_error", f"the repository of task {task_id!r} cannot be packed; the host's log says why"
        ) from None
    response = send_file(
        bundle.path,
        mimetype=BUNDLE_TYPE,
        as_attachment=True,
        download_name=f"{task_id}.bundle",
        etag=bundle.sha256,
        conditional=True,
    )
    response.cache_control.private = True
    response.cache_control.no_cache = True
    response.headers["X-Content-SHA256"] = bundle.sha256
    response.headers["X-Grader-Commit"] = bundle.commit
    if bundle.merge:
        response.headers["X-Grader-Merge"] = bundle.merge
    return response
