"""Self-service sign-up, where the host allows it (GRADER_SIGNUP=open): anyone makes a
team and its first key on /signup, the key shown on that answer only (only its hash is
kept), as the host's own page makes one. Closed (the default), the page says to ask the
host and nothing is made.

An open door is bounded, so that it cannot be turned into a flood of teams (each with a
quota of its own): a client address signs up at most GRADER_SIGNUP_PER_ADDRESS teams a
UTC day, the whole service GRADER_SIGNUP_PER_DAY (counted in Redis, past either: 429);
a signed-up team starts with quotas of its own (GRADER_SIGNUP_DAILY_QUOTA, _QUEUED_QUOTA),
below the service's defaults, until the host sets others. The address is the client's:
behind the proxy as shipped (GRADER_PROXIED), the one nginx sets in X-Forwarded-For (it
replaces whatever the client sent); otherwise the connection's."""

from __future__ import annotations

import datetime as dt
import logging

from flask import Blueprint, abort, current_app, render_template, request
from flask.typing import ResponseReturnValue
from pydantic import ValidationError
from sqlalchemy import select

from grader.handles import Handles
from grader.store.models import Team

log = logging.getLogger(__name__)
bp = Blueprint("signup", __name__)
COUNT_KEY = "grader:signup:"  # + day, or + day + ":" + address: a count that lives two days


def _svc() -> Handles:
    return current_app.extensions["grader"]  # type: ignore[no-any-return]


def client_address(svc: Handles) -> str:
    if svc.settings.proxied:
        forwarded = request.headers.get("X-Forwarded-For", "").split(",")[-1].strip()
        if forwarded:
            return forwarded
    return request.remote_addr or "unknown"


def _room(svc: Handles) -> str | None:
    """Count one sign-up for this address, then (only if the address is within its bound,
    so that one address cannot spend everyone's) for the service today; why not, past a bound."""
    day = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    try:
        mine = _count(svc, f"{COUNT_KEY}{day}:{client_address(svc)}")
        if mine > svc.settings.signup_per_address:
            return f"This address has signed up {svc.settings.signup_per_address} teams today; try again tomorrow."
        if _count(svc, f"{COUNT_KEY}{day}") > svc.settings.signup_per_day:
            return "The service has taken all the sign-ups it takes today; try again tomorrow, or ask the host."
    except Exception as exc:  # RedisError: no count, no sign-up
        log.warning("sign-up counts unavailable: %s", exc)
        abort(503, description="Signing up is unavailable for a moment; try again shortly.")
    return None


def _count(svc: Handles, key: str) -> int:
    pipe = svc.redis.pipeline()
    pipe.incr(key)
    pipe.expire(key, 2 * 86400)
    return int(pipe.execute()[0])


@bp.route("/signup", methods=["GET", "POST"])
def page() -> ResponseReturnValue:
    svc = _svc()
    if svc.settings.signup != "open":
        return render_template("signup.html", closed=True), 404
    name = (request.form.get("name") or "").strip() if request.method == "POST" else ""
    errors: dict[str, str] = {}
    if request.method == "GET":
        return render_template("signup.html", errors=errors, said={"name": ""})
    from grader.schemas import TeamIn, problems
    from grader.store.keys import create_key

    try:
        body = TeamIn.model_validate({"name": name})
    except ValidationError as exc:
        errors["name"] = "A team's name is 1 to 100 letters, digits and . _ - (" + problems(exc)[0] + ")."
        return render_template("signup.html", errors=errors, said={"name": name}), 422
    with svc.db.read() as s:
        taken = s.scalar(select(Team.id).where(Team.name == body.name)) is not None
    if taken:
        errors["name"] = f"There is a team {body.name!r} already; choose another name."
        return render_template("signup.html", errors=errors, said={"name": name}), 422
    refused = _room(svc)
    if refused:
        return render_template("signup.html", errors={"form": refused}, said={"name": name}), 429
    with svc.db.write() as s:
        if s.scalar(select(Team.id).where(Team.name == body.name)) is not None:  # taken meanwhile
            errors["name"] = f"There is a team {body.name!r} already; choose another name."
            return render_template("signup.html", errors=errors, said={"name": name}), 422
        key = create_key(
            s,
            body.name,
            daily_quota=svc.settings.signup_daily_quota,
            queued_quota=svc.settings.signup_queued_quota,
        )
    log.info("team %s signed up from %s", body.name, client_address(svc))
    return render_template("signup.html", shown={"team": body.name, "key": key}, errors={}, said={"name": ""}), 201
