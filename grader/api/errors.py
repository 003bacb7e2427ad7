"""The one exception the API raises for a bad request, and the handlers that render every
error, ours or Flask's, as `{"error": {"code", "message"}}` with the right status."""

from __future__ import annotations

import json
import logging
from typing import Any, NoReturn

from flask import Flask, Response, jsonify, render_template, request
from flask.typing import ResponseReturnValue
from pydantic import ValidationError
from sqlalchemy.exc import IntegrityError
from werkzeug.exceptions import HTTPException

from grader.errors import StoreError
from grader.intake import Refusal

log = logging.getLogger(__name__)


class ApiError(Exception):
    """Raised when a request cannot be served as asked; rendered as JSON with `status`."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        retry_after: int | None = None,
        details: list[dict[str, Any]] | None = None,
    ):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.retry_after, self.details = retry_after, details

    def body(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            err["details"] = self.details
        return {"error": err}


# What intake refuses (grader/intake.py's Refusal.reason), as the HTTP status it is answered
# with: the one place a refusal of the domain becomes a status.
REFUSAL_STATUS = {
    "invalid_fields": 422,
    "unknown_task": 422,
    "invalid_callback_url": 422,
    "patch_too_large": 413,
    "run_locked": 409,
    "run_deleted": 409,
    "attempt_exists": 409,
    "withheld": 422,
    "unknown_phase": 422,
    "phase_closed": 403,
    "phase_limit": 429,
    "run_phase": 409,
    "run_busy": 409,
    "publish_quota": 429,
    "forbidden": 403,
    "not_found": 404,
    "idempotency_conflict": 409,
    "quota_exceeded": 429,
    "queue_full": 503,
}


def refused(refusal: Refusal) -> ApiError:
    """The answer to a refusal of intake: its reason as the code, the status the table gives it."""
    return ApiError(
        REFUSAL_STATUS[refusal.reason],
        refusal.reason,
        refusal.message,
        retry_after=refusal.retry_after,
        details=refusal.details,
    )


def _refuse_constant(name: str) -> NoReturn:
    raise ApiError(
        422,
        "invalid_fields",
        f"{name} is not a JSON number (JSON has no NaN or Infinity); send a finite number, a string or null",
    )


class _Constant(str):
    """NaN or Infinity where it stood in a body, found to name its field."""


def _constants(value: Any, at: str = "") -> list[tuple[str, str]]:
    if isinstance(value, _Constant):
        return [(at, str(value))]
    if isinstance(value, dict):
        return [c for k, v in value.items() for c in _constants(v, f"{at}.{k}" if at else str(k))]
    if isinstance(value, list):
        return [c for i, v in enumerate(value) for c in _constants(v, f"{at}[{i}]")]
    return []


def _refuse_constants(raw: bytes | str) -> NoReturn:
    """The 422 for a body holding NaN or Infinity, naming each field that does (a cost of
    NaN says cost_usd), as validation names a field."""
    try:
        found = _constants(json.loads(raw, parse_constant=_Constant))
    except (ValueError, RecursionError):  # broken or too deep past the constant: say what the first read met
        found = []
    details = [{"field": at or "body", "problem": f"{c} is not a JSON number"} for at, c in found]
    if not details:
        _refuse_constant("NaN")
    raise ApiError(
        422,
        "invalid_fields",
        "; ".join(f"{d['field']}: {d['problem']}" for d in details[:5])
        + " (JSON has no NaN or Infinity); send a finite number, a string or null",
        details=details,
    )


def parse_json(raw: bytes | str, where: str = "the request body") -> Any:
    """`raw` as strict JSON: malformed or nested too deep to parse is a 400; NaN and
    Infinity (which Python's parser takes but no JSON parser reads back) are a 422 naming
    the fields that hold them."""
    try:
        return json.loads(raw, parse_constant=_refuse_constant)
    except ApiError:
        _refuse_constants(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(400, "bad_request", f"{where} is not valid JSON: {exc}") from None
    except RecursionError:
        raise ApiError(400, "bad_request", f"{where} is nested too deeply to parse") from None


def json_body() -> Any:
    """The request's body as JSON, or a 400 saying what is wrong with it."""
    raw = request.get_data(cache=False)
    if not raw.strip():
        raise ApiError(400, "bad_request", "the request body is empty; send JSON")
    return parse_json(raw)


def validation_error(exc: ValidationError, where: str = "body") -> ApiError:
    from grader.schemas import problems

    message, details = problems(exc, where)
    return ApiError(422, "invalid_fields", message, details=details)


_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "body_too_large",
    415: "unsupported_media_type",
    422: "invalid_fields",
    429: "too_many_requests",
    500: "internal_error",
    503: "unavailable",
}


def render(err: ApiError) -> Response:
    response = jsonify(err.body())
    response.status_code = err.status
    if err.retry_after is not None:
        response.headers["Retry-After"] = str(int(err.retry_after))
    if err.status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="grader"'
    return response


_MACHINE = ("/v1/", "/healthz", "/readyz", "/metrics", "/openapi.json")


def _for_people() -> bool:
    """Portal pages get an HTML error page; the API and probes always get JSON."""
    return not request.path.startswith(_MACHINE) and request.path != "/v1"


def _page(code: int, name: str, message: str) -> tuple[str, int]:
    return render_template("error.html", code=code, name=name, message=message), code


def init_app(app: Flask) -> None:
    app.register_error_handler(ApiError, render)
    app.register_error_handler(Refusal, lambda r: render(refused(r)))

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException) -> ResponseReturnValue:
        code = exc.code or 500
        message = exc.description or exc.name
        if code == 413:
            message = f"the request body is larger than the limit of {request.max_content_length} bytes"
        if _for_people():
            return _page(code, exc.name, message)
        response = render(ApiError(code, _CODES.get(code, "http_error"), message))
        valid = getattr(exc, "valid_methods", None)
        if code == 405 and valid:
            response.headers["Allow"] = ", ".join(valid)
        return response

    @app.errorhandler(StoreError)
    def _store(exc: StoreError) -> ResponseReturnValue:
        if isinstance(exc.__cause__, IntegrityError):  # the database refused what a route wrote: a bug, not an outage
            return _bug(exc)
        log.warning("storage unavailable: %s", exc)
        return render(
            ApiError(503, "unavailable", "the service's storage is unavailable; retry shortly", retry_after=5)
        )

    @app.errorhandler(Exception)
    def _bug(exc: Exception) -> ResponseReturnValue:
        log.exception("unhandled error")
        detail = "" if app.config.get("GRADER_PRODUCTION") else f": {type(exc).__name__}: {exc}"
        if _for_people():
            return _page(500, "Internal Server Error", "The service failed on this request" + detail)
        return render(ApiError(500, "internal_error", "the service failed on this request" + detail))
