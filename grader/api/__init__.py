"""The REST API: one blueprint per resource, registered on the app by `init_app(app)`.
The app itself (with the portal beside the API) is built by grader/app.py."""

from __future__ import annotations

from flask import Flask

__all__ = ["init_app"]


def init_app(app: Flask) -> None:
    """The API's routes, error handlers and request checks on `app`, whose
    extensions["grader"] is the service. The resources are imported here, not when the
    package is: importing one module of api/ (the schemas, the examples) stays light."""
    from grader.api import errors, logs, openapi, phases, runs, submissions, system, tasks
    from grader.api.inflight import InFlight, Ingest
    from grader.api.waiting import Waits

    svc = app.extensions["grader"]
    settings = svc.settings
    app.extensions["grader.waits"] = Waits(
        svc.redis,
        svc.done_channel,
        per_process=settings.max_waiting_per_process,
        per_team=settings.max_waiting_per_team,
        max_wait=settings.max_wait,
    )
    app.extensions["grader.inflight"] = InFlight(
        settings.max_inflight_per_team, anonymous=settings.max_inflight_anonymous
    )
    app.extensions["grader.ingest"] = Ingest(
        svc.redis, settings.queue_name, rate=settings.ingest_bytes_per_second, burst=settings.max_request_bytes
    )
    from grader.runs import Recent

    app.extensions["grader.recent"] = Recent(settings.public_cache_seconds)
    errors.init_app(app)
    openapi.init_app(app)
    logs.init_app(app)
    for module in (submissions, tasks, runs, phases, system, openapi):
        app.register_blueprint(module.bp)
