"""The OpenAPI 3.1 document, built from the request and response models, and a readable
docs page rendered from it on the server (no JavaScript from a CDN: it works air-gapped).
A test checks that every route the app serves is documented here and nothing more."""

from __future__ import annotations

import functools
import json
import re
from typing import Any, cast

from flask import Blueprint, Flask, Response, jsonify, render_template, request
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from grader import schemas as m
from grader.version import GRADER_VERSION

bp = Blueprint("openapi", __name__)

_MODELS: list[type[BaseModel]] = [
    m.SubmissionIn,
    m.PredictionIn,
    m.BatchIn,
    m.SubmissionOut,
    m.SubmissionPage,
    m.BatchOut,
    m.ErrorOut,
    m.TaskOut,
    m.TaskPage,
    m.AccountOut,
    m.TeamIn,
    m.KeyOut,
    m.Health,
    m.WorkersOut,
    m.RunOut,
    m.RunPage,
    m.RunView,
    m.RunPatch,
    m.Leaderboard,
    m.CompareOut,
    m.SwebenchReport,
    m.PhaseIn,
    m.PhaseOut,
    m.PhasePage,
    m.QuotasIn,
    m.SuiteValidationIn,
    m.KeyInfo,
    m.KeyPage,
    m.RegradeOut,
]


def _ref(model: type[BaseModel]) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _json(model: type[BaseModel], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(model)}}}


def _errors(*codes: int) -> dict[str, Any]:
    text = {
        400: "malformed request",
        401: "missing or invalid API key",
        403: "needs an admin key; a private phase's per-task results; a phase outside its window",
        404: "not found (or another team's)",
        409: "conflict (an attempt the run already holds; a run being stored into, published, or deleted meanwhile)",
        413: "body too large",
        422: "invalid fields",
        429: "over quota, or past the team's requests in progress, bytes a second, publications a day or "
        "archive builds (see Retry-After)",
        503: "queue full or storage down (see Retry-After)",
    }
    return {str(c): _json(m.ErrorOut, text[c]) for c in codes}


_P = {
    "id": {"name": "submission_id", "in": "path", "required": True, "schema": {"type": "string", "maxLength": 32}},
    "task": {"name": "task_id", "in": "path", "required": True, "schema": {"type": "string"}},
    "run_ref": {
        "name": "run",
        "in": "path",
        "required": True,
        "description": "the run's id, or your run_id",
        "schema": {"type": "string"},
    },
    "wait": {
        "name": "wait",
        "in": "query",
        "required": False,
        "description": "seconds to hold for the verdict "
        "(capped by the server's maximum). A team holds at most GRADER_MAX_WAITING_PER_TEAM requests at once; "
        "past that bound the request is answered at once (202) with a `Grader-Wait: not held: ...` header "
        "and Retry-After, and the client polls GET",
        "schema": {"type": "number", "minimum": 0},
    },
    "idem": {
        "name": "Idempotency-Key",
        "in": "header",
        "required": False,
        "description": "a retried request with the same key returns the first answer",
        "schema": {"type": "string", "maxLength": 180},
    },
    "slug": {"name": "slug", "in": "path", "required": True, "schema": {"type": "string"}},
    "team": {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
    "key_id": {"name": "key_id", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 0}},
    "phase": {
        "name": "phase",
        "in": "query",
        "required": False,
        "description": "a challenge phase's own board (GET /v1/phases); without it, the runs of no phase",
        "schema": {"type": "string"},
    },
    "run": {
        "name": "run_id",
        "in": "query",
        "required": False,
        "description": "only this run's submissions",
        "schema": {"type": "string"},
    },
    "status": {
        "name": "status",
        "in": "query",
        "required": False,
        "description": "only submissions in this state",
        "schema": {"type": "string", "enum": ["queued", "running", "done", "cancelled"]},
    },
    "limit": {
        "name": "limit",
        "in": "query",
        "required": False,
        "description": "submissions per page",
        "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
    },
    "cursor": {
        "name": "cursor",
        "in": "query",
        "required": False,
        "description": "the previous page's next_cursor",
        "schema": {"type": "string"},
    },
}
_AUTH: list[dict[str, list[str]]] = [{"bearer": []}]
_OPTIONAL: list[dict[str, list[str]]] = [{}, {"bearer": []}]  # public runs need no key; a key shows the team's own too
_DATE_OR_EMPTY = {"anyOf": [{"type": "string", "format": "date"}, {"type": "string", "maxLength": 0}]}
_WINDOW = [
    {
        "name": "suite",
        "in": "query",
        "required": False,
        "description": "only tasks of this suite",
        "schema": {"type": "string"},
    },
    {
        "name": "variant",
        "in": "query",
        "required": False,
        "description": "only attempts with this prompt variant (minimal, concise, contextual, guided)",
        "schema": {"type": "string"},
    },
    {
        "name": "language",
        "in": "query",
        "required": False,
        "description": "only tasks in this language (python, javascript, go, rust, java, c, ...)",
        "schema": {"type": "string"},
    },
    {
        "name": "since",
        "in": "query",
        "required": False,
        "description": "tasks created on or after (empty: no bound)",
        "schema": _DATE_OR_EMPTY,
    },
    {
        "name": "until",
        "in": "query",
        "required": False,
        "description": "tasks created on or before (empty: no bound)",
        "schema": _DATE_OR_EMPTY,
    },
]


def _paths() -> dict[str, Any]:
    sub = {"200": _json(m.SubmissionOut, "the submission")}
    return {
        "/v1/submissions": {
            "post": {
                "summary": "Submit a patch for grading",
                "tags": ["submissions"],
                "security": _AUTH,
                "parameters": [_P["wait"], _P["idem"]],
                "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(m.SubmissionIn)}}},
                "responses": {
                    "202": _json(m.SubmissionOut, "accepted; poll Location"),
                    "200": _json(m.SubmissionOut, "already done (within wait, from the cache, or replayed)"),
                    **_errors(400, 401, 403, 409, 413, 422, 429, 503),
                },
            },
            "get": {
                "summary": "List your submissions, oldest first",
                "tags": ["submissions"],
                "security": _AUTH,
                "parameters": [_P["run"], _P["status"], _P["limit"], _P["cursor"]],
                "responses": {"200": _json(m.SubmissionPage, "a page; follow next_cursor"), **_errors(401, 422)},
            },
        },
        "/v1/submissions/batch": {
            "post": {
                "summary": "Submit many patches (ours, or SWE-bench predictions; JSON list or JSONL)",
                "tags": ["submissions"],
                "security": _AUTH,
                "parameters": [_P["run"], _P["idem"]],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "oneOf": [
                                    _ref(m.BatchIn),
                                    {"type": "array", "items": {"anyOf": [_ref(m.SubmissionIn), _ref(m.PredictionIn)]}},
                                ]
                            }
                        },
                        "application/x-ndjson": {"schema": {"type": "string"}},
                    },
                },
                "responses": {
                    "202": _json(m.BatchOut, "each item's id or error, in input order"),
                    **_errors(400, 401, 403, 409, 413, 422, 429, 503),
                },
            },
        },
        "/v1/submissions/{submission_id}": {
            "get": {
                "summary": "A submission, with its result when done",
                "tags": ["submissions"],
                "security": _AUTH,
                "parameters": [_P["id"]],
                "responses": {**sub, **_errors(401, 404)},
            },
            "delete": {
                "summary": "Cancel a queued submission",
                "tags": ["submissions"],
                "security": _AUTH,
                "parameters": [_P["id"]],
                "responses": {**sub, **_errors(401, 404, 409)},
            },
        },
        "/v1/tasks": {
            "get": {
                "summary": "Every task's public view (of one suite with ?suite=)",
                "tags": ["tasks"],
                "security": _AUTH,
                "parameters": [_WINDOW[0]],
                "responses": {"200": _json(m.TaskPage, "the tasks"), **_errors(401, 422)},
            }
        },
        "/v1/tasks/{task_id}": {
            "get": {
                "summary": "One task's public view",
                "tags": ["tasks"],
                "security": _AUTH,
                "parameters": [_P["task"]],
                "responses": {"200": _json(m.TaskOut, "the task"), **_errors(401, 404)},
            }
        },
        "/v1/tasks/{task_id}/repository": {
            "get": {
                "summary": "The task's starting repository: a git bundle of the base commit's history (and the merge "
                "commit's, for a conflict task), nothing later; `grader tasks checkout` reaches the start state",
                "description": "Fetch `X-Grader-Commit` (and `X-Grader-Merge`) from the bundle, check the commit out "
                "detached, and for a conflict task run `git merge --no-commit --no-ff <merge>`; the "
                "task's public view lists the commands. Send the ETag back as If-None-Match: 304 while "
                "it is unchanged.",
                "tags": ["tasks"],
                "security": _AUTH,
                "parameters": [
                    _P["task"],
                    {
                        "name": "If-None-Match",
                        "in": "header",
                        "required": False,
                        "description": "the ETag of a bundle you have",
                        "schema": {"type": "string"},
                    },
                ],
                "responses": {
                    "200": {
                        "description": "the bundle",
                        "headers": {
                            "ETag": {"description": "the quoted sha256 of the bundle", "schema": {"type": "string"}},
                            "X-Content-SHA256": {
                                "description": "the sha256 of the bundle (hex)",
                                "schema": {"type": "string"},
                            },
                            "X-Grader-Commit": {"description": "the base commit", "schema": {"type": "string"}},
                            "X-Grader-Merge": {
                                "description": "a conflict task's commit to merge without committing",
                                "schema": {"type": "string"},
                            },
                        },
                        "content": {"application/x-git-bundle": {"schema": {"type": "string", "format": "binary"}}},
                    },
                    "304": {"description": "unchanged since the ETag sent in If-None-Match"},
                    **_errors(401, 404),
                },
            }
        },
        "/v1/account": {
            "get": {
                "summary": "Your team, quotas, usage and webhook secret",
                "tags": ["account"],
                "security": _AUTH,
                "responses": {"200": _json(m.AccountOut, "your account"), **_errors(401)},
            }
        },
        "/v1/workers": {
            "get": {
                "summary": "Workers and the queue's depth (what each worker grades: admin keys only)",
                "tags": ["system"],
                "security": _AUTH,
                "responses": {"200": _json(m.WorkersOut, "workers"), **_errors(401)},
            }
        },
        "/v1/admin/teams": {
            "get": {
                "summary": "Teams (admin)",
                "tags": ["admin"],
                "security": _AUTH,
                "responses": {
                    "200": {"description": "teams", "content": {"application/json": {"schema": {"type": "object"}}}},
                    **_errors(401, 403),
                },
            },
            "post": {
                "summary": "Create a team or give it a new key (admin); the key is shown once",
                "tags": ["admin"],
                "security": _AUTH,
                "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(m.TeamIn)}}},
                "responses": {"201": _json(m.KeyOut, "the new key"), **_errors(401, 403, 409, 422)},
            },
        },
        "/v1/phases": {
            "get": {
                "summary": "A challenge's phases: each a suite offered in a window, with per-team limits and a board",
                "tags": ["phases"],
                "responses": {"200": _json(m.PhasePage, "every phase")},
            }
        },
        "/v1/phases/{slug}": {
            "get": {
                "summary": "One phase: its window (open or why not), limits, private split and publication rule",
                "tags": ["phases"],
                "parameters": [_P["slug"]],
                "responses": {"200": _json(m.PhaseOut, "the phase"), **_errors(404)},
            }
        },
        "/v1/admin/phases/{slug}": {
            "put": {
                "summary": "Create a phase, or change the fields given of one (admin)",
                "tags": ["admin"],
                "security": _AUTH,
                "parameters": [_P["slug"]],
                "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(m.PhaseIn)}}},
                "responses": {
                    "200": _json(m.PhaseOut, "changed"),
                    "201": _json(m.PhaseOut, "created"),
                    **_errors(400, 401, 403, 409, 422),
                },
            }
        },
        "/v1/admin/teams/{name}": {
            "patch": {
                "summary": "Set a team's quotas (admin; null: the service's default)",
                "tags": ["admin"],
                "security": _AUTH,
                "parameters": [_P["team"]],
                "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(m.QuotasIn)}}},
                "responses": {
                    "200": {
                        "description": "the team's quotas",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                    **_errors(400, 401, 403, 404, 422),
                },
            }
        },
        "/v1/admin/teams/{name}/keys": {
            "get": {
                "summary": "A team's keys by their prefixes, live and revoked (admin)",
                "tags": ["admin"],
                "security": _AUTH,
                "parameters": [_P["team"]],
                "responses": {"200": _json(m.KeyPage, "the keys"), **_errors(401, 403, 404)},
            }
        },
        "/v1/admin/keys/{key_id}": {
            "delete": {
                "summary": "Revoke one key (admin): its requests and sessions are refused; the team's other keys go on",
                "tags": ["admin"],
                "security": _AUTH,
                "parameters": [_P["key_id"]],
                "responses": {"200": _json(m.KeyInfo, "the key, revoked"), **_errors(401, 403, 404)},
            }
        },
        "/v1/admin/runs/{run}/regrade": {
            "post": {
                "summary": "Re-grade a run's ERRORs (admin): each sent again as it was, replacing its ERROR in the run",
                "tags": ["admin"],
                "security": _AUTH,
                "parameters": [_P["run_ref"]],
                "responses": {"200": _json(m.RegradeOut, "what was sent again"), **_errors(401, 403, 404)},
            }
        },
        "/v1/admin/tasks/reload": {
            "post": {
                "summary": "Read the tasks directory again (admin)",
                "tags": ["admin"],
                "security": _AUTH,
                "responses": {"200": {"description": "reloaded"}, **_errors(401, 403, 422)},
            }
        },
        "/v1/admin/suites": {
            "get": {
                "summary": "The suites in service (admin): tasks, languages, feedback policies, gold patches and "
                "validation status (validated, changed since validated, never)",
                "tags": ["admin"],
                "security": _AUTH,
                "responses": {
                    "200": {
                        "description": "every suite served, each with its validation status",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                    **_errors(401, 403),
                },
            }
        },
        "/v1/admin/suites/validations": {
            "post": {
                "summary": "Record a validation run elsewhere (admin): `grader tasks validate --json`'s output, of "
                "whole suites; all or nothing",
                "tags": ["admin"],
                "security": _AUTH,
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref(m.SuiteValidationIn)}},
                },
                "responses": {
                    "201": {
                        "description": "recorded: each suite's validation status now",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                    **_errors(401, 403, 422),
                },
            }
        },
        "/v1/runs": {
            "get": {
                "summary": "Your team's runs and every public one",
                "tags": ["runs"],
                "security": _OPTIONAL,
                "responses": {"200": _json(m.RunPage, "runs"), **_errors(401)},
            }
        },
        "/v1/runs/{run}": {
            "get": {
                "summary": "A run's figures and per-task table",
                "tags": ["runs"],
                "security": _OPTIONAL,
                "parameters": [_P["run_ref"], *_WINDOW],
                "responses": {"200": _json(m.RunView, "the run"), **_errors(401, 404, 422)},
            },
            "patch": {
                "summary": "Describe a run, make it public (the host also marks baseline, hidden, verified)",
                "tags": ["runs"],
                "security": _AUTH,
                "parameters": [_P["run_ref"]],
                "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(m.RunPatch)}}},
                "responses": {"200": _json(m.RunOut, "the run"), **_errors(401, 403, 404, 409, 422, 429)},
            },
            "delete": {
                "summary": "Delete your run before it is published: its submissions stay yours, without a "
                "run, and the run id can be used again (409 once published); where the host refunds deleted "
                "runs (GRADER_QUOTA_REFUND_DELETED), its queued submissions are cancelled and those never "
                "graded are given back to today's quota",
                "tags": ["runs"],
                "security": _AUTH,
                "parameters": [_P["run_ref"]],
                "responses": {
                    "200": {
                        "description": "deleted: the run as it was, how many submissions left it, how many "
                        "queued ones were cancelled and how many were given back to today's quota",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                    **_errors(401, 403, 404, 409),
                },
            },
        },
        "/v1/runs/{run}/report": {
            "get": {
                "summary": "The run in SWE-bench's report format",
                "tags": ["runs"],
                "security": _OPTIONAL,
                "parameters": [
                    _P["run_ref"],
                    {
                        "name": "format",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "string", "enum": ["swebench"]},
                    },
                ],
                "responses": {"200": _json(m.SwebenchReport, "the report"), **_errors(401, 403, 404, 422)},
            }
        },
        "/v1/runs/{run}/predictions": {
            "get": {
                "summary": "Your run's patches as SWE-bench predictions, one per task: its newest trial whose outcome "
                "is the task's (a PASS for a resolved task)",
                "tags": ["runs"],
                "security": _AUTH,
                "parameters": [_P["run_ref"]],
                "responses": {
                    "200": {
                        "description": "the predictions",
                        "content": {"application/json": {"schema": {"type": "array", "items": _ref(m.PredictionIn)}}},
                    },
                    **_errors(401, 403, 404),
                },
            }
        },
        "/v1/runs/{run}/logs": {
            "get": {
                "summary": "Your run's logs in one archive: per task and trial the patch submitted, the test output "
                "and the result, as the feedback policy shows them, with index.json. Built once per state of the "
                "run; a run larger than GRADER_MAX_ARCHIVE_BYTES comes in pages (Link: rel=next)",
                "tags": ["runs"],
                "security": _AUTH,
                "parameters": [
                    _P["run_ref"],
                    {
                        "name": "format",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "string", "enum": ["tar.gz", "zip"], "default": "tar.gz"},
                    },
                    {
                        "name": "after",
                        "in": "query",
                        "required": False,
                        "description": "the page of the submissions after this id: the previous page's "
                        "Grader-Next-After (its Link: rel=next gives the whole URL)",
                        "schema": {"type": "string", "pattern": "^[0-9a-f]{1,32}$"},
                    },
                ],
                "responses": {
                    "200": {
                        "description": "the archive (Content-Disposition: attachment); when the run goes on in "
                        "another page, Link: <...>; rel=next and Grader-Next-After name it",
                        "content": {
                            "application/gzip": {"schema": {"type": "string", "format": "binary"}},
                            "application/zip": {"schema": {"type": "string", "format": "binary"}},
                        },
                    },
                    **_errors(401, 403, 404, 422, 429),
                },
            }
        },
        "/v1/leaderboard": {
            "get": {
                "summary": "Public runs ranked by the tasks of their suites' whole task set they resolve; incomplete "
                "runs only on request, never ranked; a page at a time",
                "tags": ["runs"],
                "security": _OPTIONAL,
                "parameters": [
                    *_WINDOW,
                    _P["phase"],
                    {
                        "name": "offset",
                        "in": "query",
                        "required": False,
                        "description": "runs of the board to skip (the previous page's next_offset)",
                        "schema": {"type": "integer", "minimum": 0, "maximum": 10**9, "default": 0},
                    },
                    {
                        "name": "limit",
                        "in": "query",
                        "required": False,
                        "description": "runs on the page",
                        "schema": {"type": "integer", "minimum": 1, "maximum": 500, "default": 100},
                    },
                    {
                        "name": "include_incomplete",
                        "in": "query",
                        "required": False,
                        "description": "1, true or yes (any case) lists incomplete runs too, "
                        "unranked; any other value does not",
                        "schema": {"type": "string"},
                    },
                ],
                "responses": {"200": _json(m.Leaderboard, "the leaderboard"), **_errors(401, 422)},
            }
        },
        "/v1/compare": {
            "get": {
                "summary": "Two runs on their common tasks",
                "tags": ["runs"],
                "security": _OPTIONAL,
                "parameters": [
                    {
                        "name": "a",
                        "in": "query",
                        "required": True,
                        "description": "a run: its id, or your run_id",
                        "schema": {"type": "string"},
                    },
                    {
                        "name": "b",
                        "in": "query",
                        "required": True,
                        "description": "the run to compare it with",
                        "schema": {"type": "string"},
                    },
                    *_WINDOW,
                ],
                "responses": {"200": _json(m.CompareOut, "the comparison"), **_errors(401, 403, 404, 422)},
            }
        },
        "/healthz": {
            "get": {
                "summary": "The process is alive",
                "tags": ["system"],
                "responses": {"200": _json(m.Health, "alive")},
            }
        },
        "/readyz": {
            "get": {
                "summary": "Redis, the database and Docker answer (which is down, not where); refused task files",
                "tags": ["system"],
                "responses": {"200": _json(m.Health, "ready"), "503": _json(m.Health, "not ready")},
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics",
                "tags": ["system"],
                "responses": {
                    "200": {
                        "description": "text exposition format",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    }
                },
            }
        },
        "/openapi.json": {
            "get": {
                "summary": "This document",
                "tags": ["system"],
                "responses": {"200": {"description": "OpenAPI 3.1"}},
            }
        },
        "/docs": {
            "get": {
                "summary": "This document as a page",
                "tags": ["system"],
                "responses": {"200": {"description": "HTML"}},
            }
        },
    }


ACCESS = {  # who may call an operation, said on every operation as x-access (and on /docs)
    "none": "no key",
    "team": "a team's key",
    "admin": "an admin key",
    "optional": "no key for public runs; a team's key also shows its own runs",
}


def _access(path: str, method: str, op: dict[str, Any]) -> str:
    if op.get("security") == _OPTIONAL:
        return "optional"
    if op.get("security") != _AUTH:
        return "none"
    return "admin" if path.startswith("/v1/admin/") else "team"


def _with_examples(paths: dict[str, Any]) -> dict[str, Any]:
    """Every operation's example (grader/api/examples.py) in OpenAPI's own fields: the
    request body's `example`, the shown answer's `example`; the concrete request (path,
    query, headers) as x-example; who may call it as x-access."""
    import copy

    from grader.api.examples import ERRORS, EXAMPLES

    for path, ops in paths.items():
        for method, op in ops.items():
            op["responses"] = copy.deepcopy(op["responses"])  # some are shared between operations
            op["x-access"] = _access(path, method, op)
            ex = EXAMPLES.get((method, path))
            if ex is None:
                continue  # tests/unit/test_docs.py requires one for every operation
            op["x-example"] = {
                "path": ex["path"],
                "query": ex.get("query", {}),
                "headers": ex.get("headers", {}),
                "status": ex["status"],
            }
            if "body" in ex:
                op["requestBody"]["content"]["application/json"]["example"] = ex["body"]
            answer = op["responses"][ex["status"]]
            if "response" in ex:
                media = answer.setdefault("content", {"application/json": {"schema": {"type": "object"}}})
                media["application/json"]["example"] = ex["response"]
            elif "response_text" in ex:
                answer["content"]["text/plain"]["example"] = ex["response_text"]
            else:
                op["x-example"]["note"] = ex["response_note"]
            if (method, path) in ERRORS:
                code, body = ERRORS[(method, path)]
                op["responses"][code]["content"]["application/json"]["example"] = body
    return paths


def _strict(paths: dict[str, Any]) -> dict[str, Any]:
    """Every operation refuses query parameters it does not take (400): a misspelt
    `?runid=` must not silently answer with every submission unfiltered."""
    for ops in paths.values():
        for op in ops.values():
            op["responses"].setdefault("400", _json(m.ErrorOut, "malformed request (an unknown query parameter)"))
    return paths


@functools.cache
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
    def _sane_request() -> None:
        """Refuse, after the key is checked, a request that names nothing: a NUL in its
        path or query (no database stores one in text; PostgreSQL refuses it), or a query
        parameter its operation does not take."""
        nul = "\x00" in request.path or any("\x00" in k or "\x00" in v for k, v in request.args.items(multi=True))
        known, needs_key = (query_names(request.url_rule.rule, request.method) if request.url_rule else None) or (
            None,
            False,
        )
        unknown = sorted(set(request.args) - known) if known is not None else []
        if not (nul or unknown):
            return
        if needs_key or (known is not None and request.headers.get("Authorization")):
            auth.current()  # a caller without a valid key learns nothing more than 401
        if nul:
            raise ApiError(400, "bad_request", "the path or the query holds a NUL character")
        assert known is not None and request.url_rule is not None  # unknown names come from a known operation
        takes = ", ".join(sorted(known)) or "none"
        raise ApiError(
            400,
            "unknown_parameter",
            f"unknown query parameter(s) {', '.join(map(repr, unknown))} "
            f"for {request.method} {request.url_rule.rule}; it takes: {takes}",
        )


@functools.lru_cache(maxsize=1)
def document() -> dict[str, Any]:
    inputs: list[tuple[type[BaseModel], JsonSchemaMode]] = [(model, "validation") for model in _MODELS]
    _, defs = models_json_schema(inputs, ref_template="#/components/schemas/{model}")
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "grader",
            "version": GRADER_VERSION,
            "description": "Grade a unified-diff patch against a task in an isolated container: PASS, FAIL, "
            "PATCH FAILED or TIMED OUT, with per-test outcomes, the apply log and durations. "
            "ERROR is a fault of the grading machinery: retried, never charged.",
        },
        "servers": [{"url": "/"}],
        "paths": _with_examples(_strict(_paths())),
        "components": {
            "schemas": defs.get("$defs", {}),
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "a team's API key (grader keys create TEAM)",
                }
            },
        },
    }


@bp.get("/openapi.json")
def spec() -> Response:
    return jsonify(document())


# The portal's pages, as /docs lists them (a test checks that every page is here).
PORTAL_PAGES = {
    "portal.home": ("Home", "goes to the leaderboard", "anyone"),
    "portal.leaderboard_page": (
        "Leaderboard",
        "public runs ranked over their suites' whole task set, one table per suite; sortable, "
        "filtered by suite, prompt variant and time window; incomplete runs on request",
        "anyone",
    ),
    "portal.run_page": (
        "A run",
        "its figures with intervals, the per-task grid of trials and breakdown charts; "
        "its own team also gets a link to each submission, its progress while it grades (the page "
        "reloads itself meanwhile) and the publish form",
        "anyone for a public run; its team",
    ),
    "portal.compare_page": (
        "Compare",
        "two runs on their common tasks: wins, losses, the difference, McNemar's p",
        "anyone (the runs one may see)",
    ),
    "portal.tasks_page": ("Tasks", "every task's public view", "anyone"),
    "portal.task_page": ("A task", "its instruction, prompts, metadata and how to get its repository", "anyone"),
    "portal.submission_page": (
        "A submission",
        "its verdict and explanation, failures first by FAIL_TO_PASS / "
        "PASS_TO_PASS, the submitted diff, the output as the task's feedback policy allows, "
        "timings folded away",
        "its team, signed in",
    ),
    "portal.login": ("Sign in", "with the team's API key (the session keeps only its hash)", "anyone"),
    "portal.logout": ("Sign out", "a button in the header", "signed in"),
    "portal.my_runs": ("Your runs", "the team's runs, private ones included, and its recent submissions", "signed in"),
    "portal.submit_page": (
        "Submit",
        "upload predictions (JSONL or JSON) or one patch for one task, with a run id, system, trial and "
        "metadata, through the API's intake; every refused line shown with its reason, nothing taken "
        "unless every line is (or the team ticks to take the valid ones)",
        "signed in",
    ),
    "portal.phases_page": ("Challenges", "every phase: its suite, window, limits and split; the suites", "anyone"),
    "portal.phase_page": (
        "A phase: how to take part",
        "its window, the tasks and how to get their code, how to submit (portal, CLI, API), its limits and "
        "scoring; a link to its board",
        "anyone",
    ),
    "portal.suite_page": ("A suite: how to take part", "the same for a suite outside any phase", "anyone"),
    "portal.host_runs": (
        "Host: runs",
        "every run filtered by team, suite, phase and flags (awaiting review, ERRORs, tampering, audit "
        "findings, hidden), the runs awaiting review first, with the host's actions on each",
        "an admin key, signed in",
    ),
    "portal.host_act": (
        "Host: act on a run",
        "hide, verify, mark a baseline (and undo each), approve or refuse a review, re-grade its ERRORs",
        "an admin key, signed in",
    ),
    "portal.host_teams": (
        "Host: teams and keys",
        "every team and its keys; a new team with quotas, its key shown once",
        "an admin key, signed in",
    ),
    "portal.host_suites": (
        "Host: suites",
        "the suites in service: tasks, gold patches, languages, feedback policies, validation status "
        "(validated N/M on a date, changed since validated, never validated); refused task files",
        "an admin key, signed in",
    ),
    "portal.host_new_key": ("Host: another key", "for a team, shown once", "an admin key, signed in"),
    "portal.host_revoke": ("Host: revoke a key", "one key of a team; the others stay", "an admin key, signed in"),
    "portal.host_quotas": ("Host: quotas", "a team's submissions a day and queued at once", "an admin key, signed in"),
    "portal.publish_run": (
        "Publish a run",
        "the run page's form: method, description, project and paper URLs, public or private",
        "the run's team, signed in",
    ),
}


def _one_type(s: dict[str, Any]) -> str:
    if "$ref" in s:
        ref: str = s["$ref"]
        return ref.rsplit("/", 1)[-1]
    if "anyOf" in s or "oneOf" in s:
        alternatives = cast("list[dict[str, Any]]", s.get("anyOf") or s.get("oneOf"))
        return " | ".join(dict.fromkeys(_one_type(x) for x in alternatives))
    if "enum" in s:
        return "string" if all(isinstance(v, str) for v in s["enum"]) else "value"
    kind: str = s.get("type", "any")
    if kind == "array":
        return f"list of {_one_type(s.get('items') or {})}"
    if kind == "string" and s.get("format"):
        return f"string ({s['format']})"
    return kind


def _allowed(s: dict[str, Any]) -> str:
    """What values a schema allows, in words: the enum, the range, the length, the pattern."""
    parts: list[str] = []
    for alt in [s, *(s.get("anyOf") or s.get("oneOf") or [])]:
        if "enum" in alt:
            parts.append("one of " + ", ".join(json.dumps(v) for v in alt["enum"]))
        lo, hi = alt.get("minimum"), alt.get("maximum")
        if lo is not None and hi is not None:
            parts.append(f"{lo} to {hi}")
        elif lo is not None:
            parts.append(f"at least {lo}")
        elif hi is not None:
            parts.append(f"at most {hi}")
        if alt.get("minLength") and alt.get("maxLength"):
            parts.append(f"{alt['minLength']} to {alt['maxLength']} characters")
        elif alt.get("maxLength") is not None:
            parts.append(f"at most {alt['maxLength']} characters")
        if alt.get("pattern"):
            parts.append(f"matching {alt['pattern']}")
    if s.get("default") is not None:
        parts.append(f"default {json.dumps(s['default'])}")
    return "; ".join(dict.fromkeys(parts))


def _curl(method: str, op: dict[str, Any]) -> str:
    """The example request as a curl command (the key and the service's URL from the
    environment, as the CLI reads them)."""
    from urllib.parse import urlencode

    ex = op["x-example"]
    url = "$GRADER_API_URL" + ex["path"] + ("?" + urlencode(ex["query"]) if ex["query"] else "")
    lines = [f'curl{" -X " + method.upper() if method != "get" else ""} "{url}"']
    if op["x-access"] != "none":
        lines.append('-H "Authorization: Bearer $GRADER_API_KEY"')
    lines += [f"-H '{k}: {v}'" for k, v in ex["headers"].items()]
    body = (op.get("requestBody") or {}).get("content", {}).get("application/json", {}).get("example")
    if body is not None:
        lines += ["-H 'Content-Type: application/json'", "--data-binary @- <<'JSON'"]
        return " \\\n  ".join(lines) + "\n" + json.dumps(body, indent=1) + "\nJSON"
    return " \\\n  ".join(lines)


def _answer(op: dict[str, Any]) -> tuple[str, str]:
    """The example answer: its status line and its body as text."""
    ex = op["x-example"]
    status = ex["status"]
    if "note" in ex:
        return status, ex["note"]
    for media in op["responses"][status].get("content", {}).values():
        if "example" in media:
            value = media["example"]
            return status, value if isinstance(value, str) else json.dumps(value, indent=1)
    return status, ""


def _error_examples(op: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (code, json.dumps(r["content"]["application/json"]["example"], indent=1))
        for code, r in op["responses"].items()
        if not code.startswith("2") and "example" in r.get("content", {}).get("application/json", {})
    ]


def _operations(doc: dict[str, Any]) -> list[dict[str, Any]]:
    ops = []
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            status, answer = _answer(op)
            ops.append(
                {
                    "path": path,
                    "method": method,
                    "op": op,
                    "anchor": f"{method}-{path}",
                    "tag": (op.get("tags") or ["other"])[0],
                    "access": ACCESS[op["x-access"]],
                    "level": op["x-access"],
                    "params": [
                        {
                            "name": prm["name"],
                            "in": prm["in"],
                            "required": prm.get("required", False),
                            "type": _one_type(prm.get("schema") or {}),
                            "allowed": _allowed(prm.get("schema") or {}),
                            "description": prm.get("description", ""),
                        }
                        for prm in op.get("parameters", [])
                    ],
                    "body": [
                        (ctype, (c.get("schema") or {}).get("$ref", "").rsplit("/", 1)[-1] or _one_type(c["schema"]))
                        for ctype, c in (op.get("requestBody") or {}).get("content", {}).items()
                    ],
                    "curl": _curl(method, op),
                    "status": status,
                    "answer": answer,
                    "errors": _error_examples(op),
                }
            )
    return ops


def _schemas(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for name, s in doc["components"]["schemas"].items():
        required = set(s.get("required") or [])
        out.append(
            {
                "name": name,
                "description": s.get("description", ""),
                "fields": [
                    {
                        "name": prop,
                        "type": _one_type(ps),
                        "allowed": _allowed(ps),
                        "required": prop in required,
                        "description": ps.get("description", ""),
                    }
                    for prop, ps in (s.get("properties") or {}).items()
                ],
            }
        )
    return out


def _portal_pages() -> list[dict[str, Any]]:
    from flask import current_app

    pages = []
    for rule in current_app.url_map.iter_rules():
        if rule.endpoint in PORTAL_PAGES:
            title, what, who = PORTAL_PAGES[rule.endpoint]
            assert rule.methods is not None  # Flask gives every rule its methods
            methods = sorted(rule.methods - {"HEAD", "OPTIONS"})
            pages.append(
                {
                    "rule": rule.rule,
                    "link": "<" not in rule.rule and "GET" in methods,
                    "title": title,
                    "what": what,
                    "who": who,
                    "methods": methods,
                }
            )
    return pages


@bp.get("/docs")
def docs() -> str:
    doc = document()
    ops = _operations(doc)
    tags = list(dict.fromkeys(o["tag"] for o in ops))
    return render_template(
        "docs.html", doc=doc, ops=ops, tags=tags, schemas=_schemas(doc), access=ACCESS, pages=_portal_pages()
    )
