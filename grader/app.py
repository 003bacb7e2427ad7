"""The web application: the REST API (grader/api/) and the portal (grader/portal/) in one
Flask app. `create_app()` is the one place the two halves meet, so neither package
imports the other; both stand on what lies below them (grader/serializers/, grader/runs.py,
grader/handles.py)."""

from __future__ import annotations

import datetime as dt
import logging
import os
import secrets
from pathlib import Path
from typing import cast

from flask import Flask
from flask.json.provider import DefaultJSONProvider

from grader import api, portal
from grader.config import Settings, get_settings
from grader.handles import Handles

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
    logging.getLogger("grader").setLevel(logging.INFO)
    return app


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
