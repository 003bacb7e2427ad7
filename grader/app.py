"""The web application: the REST API (grader/api/) and the portal (grader/portal/) in one
Flask app. `create_app()` is the one place the two halves meet, so neither package
imports the other; both stand on what lies below them (grader/serializers/, grader/runs.py,
grader/handles.py)."""

from __future__ import annotations

import datetime as dt
import logging
import os
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from flask import Flask, Response, abort, current_app, g, request, session
from flask.json.provider import DefaultJSONProvider

from grader import api, budget, portal
from grader.api.errors import ApiError
from grader.api.inflight import ANONYMOUS, drain
from grader.config import Settings, get_settings
from grader.handles import Handles

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

__all__ = ["create_app"]


def create_app(settings: Settings | None = None, *, service: Handles | None = None, migrate: bool = True) -> Flask:
    """The Flask app over `service` (made from `settings` when not given). The schema is
    migrated first unless `migrate` is off (`grader serve` migrates once before forking)."""
    settings = service.settings if service else (settings or get_settings())
    settings.require_production_secrets()
    svc = service or Handles(settings)
    if migrate:
        svc.db.migrate()

    production = settings.mode == "production"
    # named "grader.api" as it always was (its logger's name); the pages' and the API's
    # error pages' templates are the portal's
    app = Flask(api.__name__, template_folder=str(Path(portal.__file__).parent / "templates"))
    app.config.update(
        MAX_CONTENT_LENGTH=settings.max_request_bytes,
        SECRET_KEY=settings.secret_key.get_secret_value() if settings.secret_key else _development_key(settings),
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=production,
        PERMANENT_SESSION_LIFETIME=dt.timedelta(days=7),
        GRADER_PRODUCTION=production,
    )
    cast(DefaultJSONProvider, app.json).sort_keys = False
    app.extensions["grader"] = svc
    api.init_app(app)
    portal.init_app(app)
    app.before_request(_place)
    app.teardown_request(_leave)
    app.after_request(_headers)
    if settings.proxied:
        app.wsgi_app = _Drained(app.wsgi_app, settings.max_request_bytes)  # type: ignore[method-assign]
    if settings.budget_dir is not None:  # a measurement (benchmarks/throughput.py), off by default
        budget.enable(settings.budget_dir)
        svc.db.time_statements()
        app.wsgi_app = budget.Request(app.wsgi_app)  # type: ignore[method-assign]
    logging.getLogger("grader").setLevel(logging.INFO)
    return app


PROBES = ("/healthz", "/readyz", "/metrics")  # a load balancer's and a monitor's: never refused


def _place() -> None:
    """A request that names no team by key (grader/api/auth.py bounds those) takes a place
    of its own: a signed-in portal page its team's, anything else the anonymous readers'
    one share (grader/api/inflight.py: ANONYMOUS), so that readers of the public pages
    cannot hold every thread of the process either."""
    if "Authorization" in request.headers or request.path in PROBES:
        return
    team = g.get("team")
    if team and team["admin"]:
        return
    place = current_app.extensions["grader.inflight"].hold(team["id"] if team else ANONYMOUS)
    try:
        place.__enter__()
    except ApiError:
        if request.path.startswith("/v1/"):
            raise
        abort(429, description="The service is busy with many readers at the moment; try again in a second.")
    g.grader_place = place


def _leave(_exc: BaseException | None) -> None:
    place = g.pop("grader_place", None)
    if place is not None:
        place.__exit__(None, None, None)


def _headers(response: Response) -> Response:
    """What every answer says of itself to a browser and to caches in between.

    No page of ours is meant to be framed (a framed page can be clicked on by a page that
    overlays it: CSP frame-ancestors for today's browsers, X-Frame-Options for older
    ones), and no body is to be sniffed into another type (a patch or a test output
    served as text must stay text). An answer to a caller who said who they are (an API
    key, a session cookie) or that signs someone in or out is nobody else's: no cache
    may keep it (a shared proxy, the browser's back button on a shared machine). Public
    answers to anonymous callers (the leaderboard, the docs) may be cached as before. A
    route that chose `private` itself keeps its choice: the task's repository bundle is
    the same bytes for every caller, named by its sha256 (ETag), and a client keeps it and
    asks again with If-None-Match (`private, no-cache`: no shared cache keeps it)."""
    headers = response.headers
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("X-Frame-Options", "DENY")
    csp = headers.get("Content-Security-Policy")
    if csp is None:
        headers["Content-Security-Policy"] = "frame-ancestors 'none'"
    elif "frame-ancestors" not in csp:
        headers["Content-Security-Policy"] = csp.rstrip("; ") + "; frame-ancestors 'none'"
    private = (
        "Authorization" in request.headers
        or current_app.config["SESSION_COOKIE_NAME"] in request.cookies
        or session.modified  # its cookie is set or cleared on the way out (after this hook)
        or "Set-Cookie" in headers
    )
    if private and not response.cache_control.private:
        headers["Cache-Control"] = "no-store"
    response.vary.update(("Authorization", "Cookie"))  # what decides whether an answer is private
    return response


class _Drained:
    """The app, reading what is left of each request's body after it has answered and
    before the answer goes out (grader/api/inflight.py: drain): behind a buffering proxy
    (GRADER_PROXIED) a refusal from the headers must not leave the proxy's connection
    with unread bytes. Only for what the proxy passed on (its X-Grader-Proxied, which it
    sets over any a client sent): a client that reaches gunicorn itself is refused from
    its headers as before, its body never read."""

    def __init__(self, app: WSGIApplication, limit: int):
        self.app, self.limit = app, limit

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        answer = self.app(environ, start_response)
        if environ.get("HTTP_X_GRADER_PROXIED") == "1":  # nginx says so (grader proxy config): the body is whole
            drain(environ, self.limit)
        return answer


def _development_key(settings: Settings) -> str:
    """Outside production, a random key kept in the cache directory, so that every
    process on this host signs sessions alike (production must set GRADER_SECRET_KEY)."""
    path = settings.cache_dir / "development-secret-key"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}")
        tmp.write_text(secrets.token_urlsafe(48))
        tmp.chmod(0o600)
        os.replace(tmp, path)  # a concurrent first start writes its own; one wins, both read it
    return path.read_text().strip()
