"""/v1/phases: a challenge's phases, public; /v1/admin/phases/<slug>: the host sets one up.

A phase is a suite offered between two times, with per-team limits, a board of its own
(GET /v1/leaderboard?phase=) and optionally a private split (grader/store/phases.py says
what its participants see). What a submission to it goes through is intake's."""

from __future__ import annotations

import datetime as dt

from flask import Blueprint, Response, current_app, jsonify
from pydantic import ValidationError

from grader import names
from grader.api import auth
from grader.api.errors import ApiError, json_body, validation_error
from grader.handles import Handles
from grader.schemas import PhaseIn
from grader.store import phases as store_phases

bp = Blueprint("phases", __name__)


def _svc() -> Handles:
    svc: Handles = current_app.extensions["grader"]
    return svc


@bp.get("/v1/phases")
def index() -> Response:
    with _svc().db.read() as s:
        return jsonify({"items": [store_phases.view(p) for p in store_phases.all_(s)]})


@bp.get("/v1/phases/<slug>")
def show(slug: str) -> Response:
    with _svc().db.read() as s:
        phase = store_phases.by_slug(s, {slug}).get(slug)
        if phase is None:
            raise ApiError(404, "not_found", f"no phase {slug!r}")
        return jsonify(store_phases.view(phase))


@bp.put("/v1/admin/phases/<slug>")
@auth.admin_required
def put(slug: str) -> tuple[Response, int]:
    """Create the phase `slug`, or change the fields given of the one there is."""
    svc = _svc()
    try:
        names.run_name(slug)  # one segment of a URL path, as a run's name is
        if len(slug) > 100:
            raise names.NameRefused("a phase's slug is at most 100 characters")
    except names.NameRefused as exc:
        raise ApiError(
            422, "invalid_fields", f"slug: {exc}", details=[{"field": "slug", "problem": str(exc)}]
        ) from None
    try:
        given = PhaseIn.model_validate(json_body()).model_dump(exclude_unset=True)
    except ValidationError as exc:
        raise validation_error(exc) from None
    for name in ("private", "reveal", "auto_publish", "name", "suite"):
        if name in given and given[name] is None:
            raise ApiError(
                422, "invalid_fields", f"{name} cannot be null", details=[{"field": name, "problem": "null"}]
            )
    suites = sorted({t.metadata.suite for t in svc.tasks})
    if given.get("suite") is not None and given["suite"] not in suites:
        raise ApiError(
            422,
            "invalid_fields",
            f"there is no suite {given['suite']!r}; the suites are: {', '.join(suites) or 'none'}",
        )
    with svc.db.write() as s:
        have = store_phases.by_slug(s, {slug}).get(slug)
        if have is None and not (given.get("name") and given.get("suite")):
            raise ApiError(422, "invalid_fields", "a new phase needs its name and suite")
        if (
            have is not None
            and "suite" in given
            and given["suite"] != have.suite
            and store_phases.used_at_all(s, have.id)
        ):
            raise ApiError(409, "conflict", f"phase {slug!r} has submissions: its suite cannot change")
        starts = given.get("starts_at", have.starts_at if have else None)
        ends = given.get("ends_at", have.ends_at if have else None)
        if starts is not None and ends is not None and _aware(ends) <= _aware(starts):
            raise ApiError(422, "invalid_fields", "ends_at must be after starts_at")
        for k in ("starts_at", "ends_at"):
            if given.get(k) is not None:
                given[k] = _aware(given[k])
        phase, new = store_phases.put(s, slug, given)
        view = store_phases.view(phase)
    return jsonify(view), 201 if new else 200


def _aware(t: dt.datetime) -> dt.datetime:
    """A time given without a zone is UTC's."""
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)
