"""/v1/tasks: the public view of each task, and nothing else of it."""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify

from grader.api import auth
from grader.api.errors import ApiError
from grader.errors import TaskNotFound

bp = Blueprint("tasks", __name__, url_prefix="/v1/tasks")


@bp.get("")
@auth.required
def index():
    svc = current_app.extensions["grader"]
    return jsonify({"items": [t.public_view() for t in sorted(svc.tasks, key=lambda t: t.id)]})


@bp.get("/<task_id>")
@auth.required
def show(task_id: str):
    svc = current_app.extensions["grader"]
    try:
        return jsonify(svc.task(task_id).public_view())
    except TaskNotFound:
        raise ApiError(404, "not_found", f"no task {task_id!r}") from None
