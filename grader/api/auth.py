"""Bearer API keys. Every /v1 route needs a key; the team it belongs to is `g.team`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

from flask import current_app, g, request

from grader import budget
from grader.api.errors import ApiError
from grader.api.inflight import read_body, unannounced
from grader.store.keys import authenticate

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Caller:
    team_id: int
    name: str
    admin: bool
    daily_quota: int | None
    queued_quota: int | None
    webhook_secret: str


@budget.timed("auth: key lookup")
def current() -> Caller:
    header = request.headers.get("Authorization", "")
    scheme, _, key = header.partition(" ")
    if not header:
        raise ApiError(401, "unauthorized", "send your API key as 'Authorization: Bearer <key>'")
    if scheme.lower() != "bearer" or not key.strip():
        raise ApiError(401, "unauthorized", "the Authorization header must be 'Bearer <key>'")
    svc = current_app.extensions["grader"]
    with svc.db.rows() as conn:
        team = authenticate(conn, key.strip())
    if team is None:
        raise ApiError(401, "unauthorized", "this API key is not valid (unknown or revoked)")
    return Caller(team.id, team.name, team.admin, team.daily_quota, team.queued_quota, team.webhook_secret)


def required(view: Callable[P, R]) -> Callable[P, R]:
    """A team's key, one of the team's places on this process, and its body paid for from
    the team's bytes a second as it is read, chunked or not (grader/api/inflight.py)."""

    @functools.wraps(view)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        g.caller = current()
        if g.caller.admin:
            _body(None)
            return view(*args, **kwargs)
        with current_app.extensions["grader.inflight"].hold(g.caller.team_id):
            _body(g.caller.team_id)
            return view(*args, **kwargs)

    return wrapper


@budget.timed("auth: body size and bytes charged (Redis)")
def _body(team_id: int | None) -> None:
    """The request's body checked against the size limit and paid for by `team_id` (None:
    a host, who pays nothing): from its Content-Length before any of it is read, else as
    it is read. Over the limit is 413 either way, before the bucket is charged."""
    limit = current_app.config["MAX_CONTENT_LENGTH"]
    ingest = current_app.extensions["grader.ingest"]
    length = request.content_length
    if length is not None:
        if limit is not None and length > limit:
            raise ApiError(413, "body_too_large", f"the request body is larger than the limit of {limit} bytes")
        if team_id is not None:
            ingest.charge(team_id, length)
    elif unannounced(request.environ):
        read_body(
            request.environ,
            limit if limit is not None else 2**63,
            None if team_id is None else functools.partial(ingest.charge, team_id),
        )
        request.__dict__.pop("content_length", None)  # Werkzeug's cached None: the length is known now


def admin_required(view: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(view)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        g.caller = current()
        if not g.caller.admin:
            raise ApiError(403, "forbidden", "this route needs an admin key")
        _body(None)
        return view(*args, **kwargs)

    return wrapper


def optional() -> Caller | None:
    """The caller when a key is sent (a wrong key is still 401), else None: public pages."""
    if not request.headers.get("Authorization"):
        return None
    return current()
