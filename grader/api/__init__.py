"""The REST API: `create_app()` builds it; one blueprint per resource."""

from __future__ import annotations

import logging

from flask import Flask

from grader.config import Settings, get_settings
from grader.service import Service

__all__ = ["create_app"]


def create_app(settings: Settings | None = None, *, service: Service | None = None, migrate: bool = True) -> Flask:
    """The Flask app over `service` (made from `settings` when not given). The schema is
    migrated first unless `migrate` is off (`grader serve` migrates once before forking)."""
    from grader.api import errors, openapi, submissions, system, tasks

    settings = service.settings if service else (settings or get_settings())
    settings.require_production_secrets()
    svc = service or Service(settings)
    if migrate:
        svc.db.migrate()
    app = Flask(__name__)
    app.config.update(
        MAX_CONTENT_LENGTH=settings.max_request_bytes,
        JSON_SORT_KEYS=False,
        SECRET_KEY=settings.secret_key.get_secret_value() if settings.secret_key else None,
        GRADER_PRODUCTION=settings.mode == "production",
    )
    app.json.sort_keys = False
    app.extensions["grader"] = svc
    errors.init_app(app)
    for module in (submissions, tasks, system, openapi):
        app.register_blueprint(module.bp)
    logging.getLogger("grader").setLevel(logging.INFO)
    return app
