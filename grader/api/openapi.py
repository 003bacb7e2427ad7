"""The OpenAPI 3.1 document, built from the request and response models, and a readable
docs page rendered from it on the server (no JavaScript from a CDN: it works air-gapped).
A test checks that every route the app serves is documented here and nothing more."""

from __future__ import annotations

import functools
import re

from flask import Blueprint, Flask, jsonify, render_template, request
from pydantic.json_schema import models_json_schema

from grader.api import schemas as m
from grader.pipeline import GRADER_VERSION

bp = Blueprint("openapi", __name__)

_MODELS = [m.SubmissionIn, m.PredictionIn, m.BatchIn, m.SubmissionOut, m.SubmissionPage, m.BatchOut, m.ErrorOut,
           m.TaskOut, m.TaskPage, m.AccountOut, m.TeamIn, m.KeyOut, m.Health, m.WorkersOut, m.RunOut, m.RunPage,
           m.RunView, m.RunPatch, m.Leaderboard, m.CompareOut, m.SwebenchReport]


def _ref(model) -> dict:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _json(model, description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": _ref(model)}}}


def _errors(*codes: int) -> dict:
    text = {400: "malformed request", 401: "missing or invalid API key", 403: "needs an admin key",
            404: "not found (or another team's)", 409: "conflict", 413: "body too large",
            422: "invalid fields", 429: "over quota (see Retry-After)", 503: "queue full or storage down (see Retry-After)"}
    return {str(c): _json(m.ErrorOut, text[c]) for c in codes}


_P = {
    "id": {"name": "submission_id", "in": "path", "required": True, "schema": {"type": "string", "maxLength": 32}},
    "task": {"name": "task_id", "in": "path", "required": True, "schema": {"type": "string"}},
    "run_ref": {"name": "run", "in": "path", "required": True, "description": "the run's id, or your run_id",
                "schema": {"type": "string"}},
    "wait": {"name": "wait", "in": "query", "required": False, "description": "seconds to hold for the verdict "
             "(capped by the server's maximum)", "schema": {"type": "number", "minimum": 0}},
    "idem": {"name": "Idempotency-Key", "in": "header", "required": False, "description": "a retried request "
             "with the same key returns the first answer", "schema": {"type": "string", "maxLength": 180}},
    "run": {"name": "run_id", "in": "query", "required": False, "schema": {"type": "string"}},
    "status": {"name": "status", "in": "query", "required": False,
               "schema": {"type": "string", "enum": ["queued", "running", "done", "cancelled"]}},
    "limit": {"name": "limit", "in": "query", "required": False,
              "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}},
    "cursor": {"name": "cursor", "in": "query", "required": False, "schema": {"type": "string"}},
}
_AUTH = [{"bearer": []}]
_OPTIONAL = [{}, {"bearer": []}]  # public runs need no key; a key shows the team's own too
_DATE_OR_EMPTY = {"anyOf": [{"type": "string", "format": "date"}, {"type": "string", "maxLength": 0}]}
_WINDOW = [
    {"name": "suite", "in": "query", "required": False, "schema": {"type": "string"}},
    {"name": "variant", "in": "query", "required": False, "schema": {"type": "string"}},
    {"name": "since", "in": "query", "required": False, "description": "tasks created on or after (empty: no bound)",
     "schema": _DATE_OR_EMPTY},
    {"name": "until", "in": "query", "required": False, "description": "tasks created on or before (empty: no bound)",
     "schema": _DATE_OR_EMPTY},
]


def _paths() -> dict:
    sub = {"200": _json(m.SubmissionOut, "the submission")}
    return {
        "/v1/submissions": {
            "post": {"summary": "Submit a patch for grading", "tags": ["submissions"], "security": _AUTH,
                     "parameters": [_P["wait"], _P["idem"]],
                     "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(m.SubmissionIn)}}},
                     "responses": {"202": _json(m.SubmissionOut, "accepted; poll Location"),
                                   "200": _json(m.SubmissionOut, "already done (within wait, from the cache, or replayed)"),
                                   **_errors(400, 401, 409, 413, 422, 429, 503)}},
            "get": {"summary": "List your submissions, oldest first", "tags": ["submissions"], "security": _AUTH,
                    "parameters": [_P["run"], _P["status"], _P["limit"], _P["cursor"]],
                    "responses": {"200": _json(m.SubmissionPage, "a page; follow next_cursor"), **_errors(401, 422)}},
        },
        "/v1/submissions/batch": {
            "post": {"summary": "Submit many patches (ours, or SWE-bench predictions; JSON list or JSONL)",
                     "tags": ["submissions"], "security": _AUTH, "parameters": [_P["run"], _P["idem"]],
                     "requestBody": {"required": True, "content": {
                         "application/json": {"schema": {"oneOf": [_ref(m.BatchIn), {"type": "array", "items": {
                             "anyOf": [_ref(m.SubmissionIn), _ref(m.PredictionIn)]}}]}},
                         "application/x-ndjson": {"schema": {"type": "string"}}}},
                     "responses": {"202": _json(m.BatchOut, "each item's id or error, in input order"),
                                   **_errors(400, 401, 413, 422, 429, 503)}},
        },
        "/v1/submissions/{submission_id}": {
            "get": {"summary": "A submission, with its result when done", "tags": ["submissions"], "security": _AUTH,
                    "parameters": [_P["id"]], "responses": {**sub, **_errors(401, 404)}},
            "delete": {"summary": "Cancel a queued submission", "tags": ["submissions"], "security": _AUTH,
                       "parameters": [_P["id"]], "responses": {**sub, **_errors(401, 404, 409)}},
        },
        "/v1/tasks": {"get": {"summary": "Every task's public view", "tags": ["tasks"], "security": _AUTH,
                              "responses": {"200": _json(m.TaskPage, "the tasks"), **_errors(401)}}},
        "/v1/tasks/{task_id}": {"get": {"summary": "One task's public view", "tags": ["tasks"], "security": _AUTH,
                                        "parameters": [_P["task"]],
                                        "responses": {"200": _json(m.TaskOut, "the task"), **_errors(401, 404)}}},
        "/v1/tasks/{task_id}/repository": {"get": {
            "summary": "The task's starting repository: a git bundle of the base commit's history (and the merge "
                       "commit's, for a conflict task), nothing later; `grader tasks checkout` reaches the start state",
            "description": "Fetch `X-Grader-Commit` (and `X-Grader-Merge`) from the bundle, check the commit out "
                           "detached, and for a conflict task run `git merge --no-commit --no-ff <merge>`; the "
                           "task's public view lists the commands. Send the ETag back as If-None-Match: 304 while "
                           "it is unchanged.",
            "tags": ["tasks"], "security": _AUTH,
            "parameters": [_P["task"], {"name": "If-None-Match", "in": "header", "required": False,
                                        "description": "the ETag of a bundle you have", "schema": {"type": "string"}}],
            "responses": {
                "200": {"description": "the bundle", "headers": {
                    "ETag": {"description": "the quoted sha256 of the bundle", "schema": {"type": "string"}},
                    "X-Content-SHA256": {"description": "the sha256 of the bundle (hex)", "schema": {"type": "string"}},
                    "X-Grader-Commit": {"description": "the base commit", "schema": {"type": "string"}},
                    "X-Grader-Merge": {"description": "a conflict task's commit to merge without committing",
                                       "schema": {"type": "string"}}},
                        "content": {"application/x-git-bundle": {"schema": {"type": "string", "format": "binary"}}}},
                "304": {"description": "unchanged since the ETag sent in If-None-Match"},
                **_errors(401, 404)}}},
        "/v1/account": {"get": {"summary": "Your team, quotas, usage and webhook secret", "tags": ["account"],
                                "security": _AUTH, "responses": {"200": _json(m.AccountOut, "your account"),
                                                                 **_errors(401)}}},
        "/v1/workers": {"get": {"summary": "Workers, what they are doing, and the queue's depth", "tags": ["system"],
                                "security": _AUTH, "responses": {"200": _json(m.WorkersOut, "workers"),
                                                                 **_errors(401)}}},
        "/v1/admin/teams": {
            "get": {"summary": "Teams (admin)", "tags": ["admin"], "security": _AUTH,
                    "responses": {"200": {"description": "teams", "content": {"application/json": {
                        "schema": {"type": "object"}}}}, **_errors(401, 403)}},
            "post": {"summary": "Create a team or give it a new key (admin); the key is shown once",
                     "tags": ["admin"], "security": _AUTH,
                     "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(m.TeamIn)}}},
                     "responses": {"201": _json(m.KeyOut, "the new key"), **_errors(401, 403, 409, 422)}},
        },
        "/v1/admin/tasks/reload": {"post": {"summary": "Read the tasks directory again (admin)", "tags": ["admin"],
                                            "security": _AUTH, "responses": {"200": {"description": "reloaded"},
                                                                             **_errors(401, 403)}}},
        "/v1/runs": {"get": {"summary": "Your team's runs and every public one", "tags": ["runs"],
                             "security": _OPTIONAL, "responses": {"200": _json(m.RunPage, "runs"), **_errors(401)}}},
        "/v1/runs/{run}": {
            "get": {"summary": "A run's figures and per-task table", "tags": ["runs"], "security": _OPTIONAL,
                    "parameters": [_P["run_ref"], *_WINDOW],
                    "responses": {"200": _json(m.RunView, "the run"), **_errors(401, 404, 422)}},
            "patch": {"summary": "Describe a run, make it public (the host also marks baseline, hidden, verified)",
                      "tags": ["runs"], "security": _AUTH, "parameters": [_P["run_ref"]],
                      "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(m.RunPatch)}}},
                      "responses": {"200": _json(m.RunOut, "the run"), **_errors(401, 403, 404, 422)}},
            "delete": {"summary": "Delete your run before it is published: its submissions stay yours, without a "
                                  "run, and the run id can be used again (409 once published)",
                       "tags": ["runs"], "security": _AUTH, "parameters": [_P["run_ref"]],
                       "responses": {"200": {"description": "deleted: the run as it was, and how many submissions "
                                                            "left it", "content": {"application/json": {
                                                                "schema": {"type": "object"}}}},
                                     **_errors(401, 403, 404, 409)}},
        },
        "/v1/runs/{run}/report": {"get": {
            "summary": "The run in SWE-bench's report format", "tags": ["runs"], "security": _OPTIONAL,
            "parameters": [_P["run_ref"], {"name": "format", "in": "query", "required": False,
                                          "schema": {"type": "string", "enum": ["swebench"]}}],
            "responses": {"200": _json(m.SwebenchReport, "the report"), **_errors(401, 404, 422)}}},
        "/v1/runs/{run}/predictions": {"get": {
            "summary": "Your run's patches as SWE-bench predictions, one per task: its newest trial whose outcome "
                       "is the task's (a PASS for a resolved task)",
            "tags": ["runs"], "security": _AUTH, "parameters": [_P["run_ref"]],
            "responses": {"200": {"description": "the predictions", "content": {"application/json": {
                "schema": {"type": "array", "items": _ref(m.PredictionIn)}}}}, **_errors(401, 404)}}},
        "/v1/runs/{run}/logs": {"get": {
            "summary": "Your run's logs in one archive: per task and trial the patch submitted, the test output "
                       "and the result, as the feedback policy shows them, with index.json",
            "tags": ["runs"], "security": _AUTH,
            "parameters": [_P["run_ref"], {"name": "format", "in": "query", "required": False,
                                          "schema": {"type": "string", "enum": ["tar.gz", "zip"],
                                                     "default": "tar.gz"}}],
            "responses": {"200": {"description": "the archive (Content-Disposition: attachment)", "content": {
                "application/gzip": {"schema": {"type": "string", "format": "binary"}},
                "application/zip": {"schema": {"type": "string", "format": "binary"}}}},
                **_errors(401, 404, 422)}}},
        "/v1/leaderboard": {"get": {
            "summary": "Public runs ranked by the tasks of their suites' whole task set they resolve; incomplete "
                       "runs only on request, never ranked",
            "tags": ["runs"], "security": _OPTIONAL,
            "parameters": [*_WINDOW, {"name": "include_incomplete", "in": "query", "required": False,
                                      "description": "1, true or yes (any case) lists incomplete runs too, "
                                                     "unranked; any other value does not",
                                      "schema": {"type": "string"}}],
            "responses": {"200": _json(m.Leaderboard, "the leaderboard"), **_errors(401, 422)}}},
        "/v1/compare": {"get": {
            "summary": "Two runs on their common tasks", "tags": ["runs"], "security": _OPTIONAL,
            "parameters": [{"name": "a", "in": "query", "required": True, "schema": {"type": "string"}},
                           {"name": "b", "in": "query", "required": True, "schema": {"type": "string"}}, *_WINDOW],
            "responses": {"200": _json(m.CompareOut, "the comparison"), **_errors(401, 404, 422)}}},
        "/healthz": {"get": {"summary": "The process is alive", "tags": ["system"],
                             "responses": {"200": _json(m.Health, "alive")}}},
        "/readyz": {"get": {"summary": "Redis, the database and Docker answer", "tags": ["system"],
                            "responses": {"200": _json(m.Health, "ready"), "503": _json(m.Health, "not ready")}}},
        "/metrics": {"get": {"summary": "Prometheus metrics", "tags": ["system"], "responses": {"200": {
            "description": "text exposition format", "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
        "/openapi.json": {"get": {"summary": "This document", "tags": ["system"],
                                  "responses": {"200": {"description": "OpenAPI 3.1"}}}},
        "/docs": {"get": {"summary": "This document as a page", "tags": ["system"],
                          "responses": {"200": {"description": "HTML"}}}},
    }


def _strict(paths: dict) -> dict:
    """Every operation refuses query parameters it does not take (400): a misspelt
    `?runid=` must not silently answer with every submission unfiltered."""
    for ops in paths.values():
        for op in ops.values():
            op["responses"].setdefault("400", _json(m.ErrorOut, "malformed request (an unknown query parameter)"))
    return paths


@functools.lru_cache(maxsize=None)
def query_names(rule: str, method: str) -> tuple[frozenset[str], bool] | None:
    """The query parameters the document gives the operation behind a Flask `rule`, and
    whether it needs a key; None when the route is not an API operation (portal pages)."""
    op = document()["paths"].get(re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule), {}).get(method.lower())
    if op is None:
        return None
    return frozenset(p["name"] for p in op.get("parameters", []) if p["in"] == "query"), op.get("security") == _AUTH


def init_app(app: Flask) -> None:
    from grader.api import auth
    from grader.api.errors import ApiError

    @app.before_request
    def _sane_request():
        """Refuse, after the key is checked, a request that names nothing: a NUL in its
        path or query (no database stores one in text; PostgreSQL refuses it), or a query
        parameter its operation does not take."""
        nul = "\x00" in request.path or any("\x00" in k or "\x00" in v for k, v in request.args.items(multi=True))
        known, needs_key = (query_names(request.url_rule.rule, request.method) if request.url_rule else None) \
            or (None, False)
        unknown = sorted(set(request.args) - known) if known is not None else []
        if not (nul or unknown):
            return
        if needs_key or (known is not None and request.headers.get("Authorization")):
            auth.current()  # a caller without a valid key learns nothing more than 401
        if nul:
            raise ApiError(400, "bad_request", "the path or the query holds a NUL character")
        takes = ", ".join(sorted(known)) or "none"
        raise ApiError(400, "unknown_parameter", f"unknown query parameter(s) {', '.join(map(repr, unknown))} "
                                                 f"for {request.method} {request.url_rule.rule}; it takes: {takes}")


@functools.lru_cache(maxsize=1)
def document() -> dict:
    _, defs = models_json_schema([(model, "validation") for model in _MODELS],
                                 ref_template="#/components/schemas/{model}")
    return {
        "openapi": "3.1.0",
        "info": {"title": "grader", "version": GRADER_VERSION,
                 "description": "Grade a unified-diff patch against a task in an isolated container: PASS, FAIL, "
                                "PATCH FAILED or TIMED OUT, with per-test outcomes, the apply log and durations. "
                                "ERROR is a fault of the grading machinery: retried, never charged."},
        "servers": [{"url": "/"}],
        "paths": _strict(_paths()),
        "components": {"schemas": defs.get("$defs", {}),
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                                      "description": "a team's API key (grader keys create TEAM)"}}},
    }


@bp.get("/openapi.json")
def spec():
    return jsonify(document())


@bp.get("/docs")
def docs():
    doc = document()
    return render_template("docs.html", doc=doc, paths=doc["paths"], schemas=doc["components"]["schemas"])
