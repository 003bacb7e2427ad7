"""An example request and response for every operation of the API, put into the OpenAPI
document (grader/api/openapi.py) as OpenAPI's own `example` fields and shown on /docs.

Each example was taken from a real exchange with the service (ids, hashes and times
included) and trimmed; a test validates every example against the schema its operation
documents, so an example cannot drift from what the API takes and answers.

`EXAMPLES[(method, path)]` holds:
- `path`: the concrete path of the request (`{submission_id}` and such filled in),
- `query`, `headers`: what the request sends besides the key (optional),
- `body`: the JSON body sent (operations that take one),
- `status` and `response`: the answer shown (JSON), or `response_text` for a text
  answer, or `response_note` for a binary one (an archive, a git bundle).
"""

from __future__ import annotations

from typing import Any

SID = "01a20b1e13a20000efb0c31c"
RUN_ID = "d777eb3ee611ea71"
SHA = "8791e77d5baf0120cc695ca40f18515335c30400202c1457aae82d705b181546"  # sha256 of PATCH
PATCH = (
    "diff --git a/calc/stats.py b/calc/stats.py\n--- a/calc/stats.py\n+++ b/calc/stats.py\n@@ -3,6 +3,8 @@\n"
    ' \n def mean(values):\n     """The arithmetic mean of a sequence of numbers."""\n+    if len(values) == 0:\n'
    '+        raise ValueError("no mean of nothing")\n     return sum(values) / len(values)\n \n \n'
)
F2P, P2P = (
    "tests/test_mean.py::test_empty_raises",
    ["tests/test_mean.py::test_mean_values", "tests/test_stats_basic.py::test_mean_of_three"],
)


def _fig(num: float, den: int, lo: float | None, hi: float | None) -> dict[str, Any]:
    return {
        "value": round(num / den, 3) if den else None,
        "numerator": num,
        "denominator": den,
        "ci": [lo, hi] if lo is not None else None,
    }


# (not the task's gold patch, which is a secret of the task: /openapi.json and /docs are public)

RESULT: dict[str, Any] = {
    "task_id": "calc-mean-empty",
    "verdict": "PASS",
    "explanation": "All 3 required test(s) passed.",
    "tests": {
        "fail_to_pass": {"success": [F2P], "failure": []},
        "pass_to_pass": {"success": P2P, "failure": []},
        "all": {F2P: "passed", P2P[0]: "passed", P2P[1]: "passed"},
        "exit_code": 0,
    },
    "check": {"type": "tests", "runner": "pytest"},
    "apply": {
        "method": "git apply",
        "attempts": [
            {
                "method": "git apply",
                "command": "git apply --verbose -",
                "exit_code": 0,
                "output": "Applied patch calc/stats.py cleanly.\n",
            }
        ],
        "neutralized": [],
        "restored": ["tests/test_mean.py"],
    },
    "output": "tests/test_mean.py ..  [ 66%]\ntests/test_stats_basic.py .  [100%]\n3 passed in 0.04s\n",
    "durations": {"validate": 0.002, "image": 0.01, "apply": 0.05, "check": 0.61, "total": 0.82},
    "localization": {"precision": 1.0, "recall": 1.0, "f1": 1.0, "patch_files": ["calc/stats.py"], "gold_files": []},
    "provenance": {
        "patch_sha256": SHA,
        "task_hash": "82c86327325b03bb",
        "image_id": "sha256:4b1e0c",
        "grader_version": "0.1.0",
        "runtime": "runc",
    },
    "tampered": [],
    "audit": [],
    "error": None,
}


def submission(status: str = "done", **extra: Any) -> dict[str, Any]:
    done = status == "done"
    return {
        "id": SID,
        "task_id": "calc-mean-empty",
        "status": status,
        "verdict": "PASS" if done else None,
        "charged": True if done else None,
        "cached": False,
        "run_id": "my-run",
        "system": "agent-1",
        "trial": 0,
        "prompt_variant": "minimal",
        "metadata": {"seed": 7},
        "callback_url": None,
        "webhook_status": None,
        "attempts": 1 if status != "queued" else 0,
        "errors": 0,
        "patch_sha256": SHA,
        "queued_at": "2026-11-24T01:14:10.210362Z",
        "started_at": "2026-11-24T01:14:10.221531Z" if status != "queued" else None,
        "finished_at": "2026-11-24T01:14:11.043649Z" if done else None,
        "host": "worker-1:4242" if status != "queued" else None,
        "links": {"self": f"/v1/submissions/{SID}"},
        **extra,
    }


PHASE: dict[str, Any] = {
    "slug": "test",
    "name": "Test phase",
    "suite": "examples",
    "description": None,
    "starts_at": "2026-12-01T00:00:00+00:00",
    "ends_at": "2026-12-15T00:00:00+00:00",
    "open": False,
    "closed_because": "phase 'test' opens at 2026-12-01 00:00 UTC; it takes no submission before then",
    "daily_limit": 5,
    "total_limit": 20,
    "private": True,
    "reveal": False,
    "auto_publish": True,
    "links": {"self": "/v1/phases/test", "page": "/phases/test"},
}

RUN = {
    "id": RUN_ID,
    "name": "my-run",
    "team": "team-a",
    "method": "Agent 1",
    "description": "3 trials per task",
    "project_url": "https://example.org/agent-1",
    "paper_url": None,
    "public": True,
    "baseline": False,
    "hidden": False,
    "verified": False,
    "created_at": "2026-11-24T01:14:10.212516",
    "origin": "graded",
    "links": {"self": f"/v1/runs/{RUN_ID}", "page": f"/runs/{RUN_ID}"},
}
METRICS = {
    "attempts": 6,
    "valid": 6,
    "errors": 0,
    "incomplete": False,
    "trials": 3,
    "tasks": 2,
    "resolved": _fig(1, 2, 0.095, 0.905),
    "solve_rate": _fig(0.667, 2, 0.045, 0.841),
    "success_rate": _fig(2, 2, 0.342, 1.0),
    "pass_at_k": {"1": _fig(0.667, 2, 0.045, 0.841)},
    "pass_any_at_n": _fig(1, 2, 0.095, 0.905),
    "stability": {"stable_pass": 0, "stable_fail": 1, "flaky": 1},
    "legacy": False,
    "single_trial": False,
    "per_task": {
        "calc-mean-empty": {
            "n": 3,
            "c": 2,
            "resolved": True,
            "stability": "flaky",
            "verdicts": ["PASS", "PASS", "FAIL"],
        },
        "calc-median-even": {
            "n": 3,
            "c": 0,
            "resolved": False,
            "stability": "stable_fail",
            "verdicts": ["FAIL", "FAIL", "FAIL"],
        },
    },
    "task_set": {"tasks": 10, "attempted": 2, "resolved": _fig(1, 10, 0.018, 0.404)},
}
RUN_VIEW: dict[str, Any] = {
    **RUN,
    "submissions": 6,
    "pending": 0,
    "errors": 0,
    "complete": True,
    "filters": {"suite": None, "variant": None, "since": None, "until": None},
    "metrics": METRICS,
}
TASK = {
    "id": "calc-mean-empty",
    "instruction": "Make calc.mean raise ValueError for an empty sequence.",
    "prompts": {"minimal": "Fix mean on empty input."},
    "metadata": {"suite": "examples", "language": "python", "difficulty": "easy", "created_at": "2021-03-14"},
    "environment": "python-3.11",
    "check": "tests",
    "feedback": "full",
    "limits": {"timeout": 60.0, "memory": "512m", "cpus": 1.0, "pids": 256},
    "repo": {
        "commit": "9bda40376d06d9added6cefc409c68497874f1c0",
        "download": "/v1/tasks/calc-mean-empty/repository",
        "checkout": "grader tasks checkout calc-mean-empty DIR",
    },
}
ERROR_404 = {"error": {"code": "not_found", "message": "no run 'nope'"}}

EXAMPLES: dict[tuple[str, str], dict[str, Any]] = {
    ("post", "/v1/submissions"): {
        "path": "/v1/submissions",
        "query": {"wait": 30},
        "headers": {"Idempotency-Key": "9d0c7e0e-try-1"},
        "body": {
            "task_id": "calc-mean-empty",
            "patch": PATCH,
            "run_id": "my-run",
            "system": "agent-1",
            "trial": 0,
            "prompt_variant": "minimal",
            "metadata": {"seed": 7},
        },
        "status": "200",
        "response": {**submission(), "feedback": "full", "result": RESULT},
    },
    ("get", "/v1/submissions"): {
        "path": "/v1/submissions",
        "query": {"run_id": "my-run", "status": "done", "limit": 1},
        "status": "200",
        "response": {"items": [submission()], "next_cursor": SID},
    },
    ("post", "/v1/submissions/batch"): {
        "path": "/v1/submissions/batch",
        "query": {"run_id": "my-run"},
        "body": {
            "system": "agent-1",
            "prompt_variant": "minimal",
            "submissions": [
                {"instance_id": "calc-mean-empty", "model_name_or_path": "agent-1", "model_patch": PATCH, "trial": 0},
                {
                    "instance_id": "calc-mean-empty",
                    "model_patch": PATCH,
                    "trial": 1,
                    "cost_usd": 0.31,
                    "input_tokens": 48210,
                    "output_tokens": 2310,
                    "api_seconds": 41.5,
                    "wall_seconds": 95.2,
                    "reasoning_level": "high",
                    "note": "second try",
                },
                {"instance_id": "no-such-task", "model_patch": ""},
            ],
        },
        "status": "202",
        "response": {
            "items": [
                {"index": 0, "id": SID, "status": "queued", "verdict": None},
                {
                    "index": 1,
                    "id": "01a20b1e13a20001158137cb",
                    "status": "queued",
                    "verdict": None,
                    "ignored": ["note"],
                },
                {
                    "index": 2,
                    "error": {"code": "unknown_task", "message": "no task 'no-such-task'; GET /v1/tasks lists them"},
                },
            ],
            "accepted": 2,
            "rejected": 1,
            "run_id": "my-run",
        },
    },
    ("get", "/v1/submissions/{submission_id}"): {
        "path": f"/v1/submissions/{SID}",
        "status": "200",
        "response": {**submission(), "feedback": "full", "result": RESULT},
    },
    ("delete", "/v1/submissions/{submission_id}"): {
        "path": f"/v1/submissions/{SID}",
        "status": "200",
        "response": {**submission("cancelled"), "feedback": "full", "result": None},
    },
    ("get", "/v1/tasks"): {"path": "/v1/tasks", "status": "200", "response": {"items": [TASK]}},
    ("get", "/v1/tasks/{task_id}"): {"path": "/v1/tasks/calc-mean-empty", "status": "200", "response": TASK},
    ("get", "/v1/tasks/{task_id}/repository"): {
        "path": "/v1/tasks/calc-mean-empty/repository",
        "headers": {"If-None-Match": '"42b428ff880daa1f0aa422ee408c7f069c3d3f4757b6c4cfd72aed94871cd14a"'},
        "status": "200",
        "response_note": "a git bundle (application/x-git-bundle, 1,207 bytes), with ETag, "
        "X-Content-SHA256 and X-Grader-Commit: "
        "9bda40376d06d9added6cefc409c68497874f1c0; 304 when the ETag still matches",
    },
    ("get", "/v1/account"): {
        "path": "/v1/account",
        "status": "200",
        "response": {
            "team": "team-a",
            "admin": False,
            "quotas": {"per_day": 20000, "queued_at_once": 10000, "refund_deleted_per_day": 0},
            "usage": {"today": 6, "queued_or_running": 0, "refunded_today": 0},
            "webhook_secret": "BB85iKOn3OFHjSFvY5k8P1rhB1UorJszbBoUrxsQuuc",
        },
    },
    ("get", "/v1/workers"): {
        "path": "/v1/workers",
        "status": "200",
        "response": {
            "workers": [
                {
                    "name": "worker-1:4242",
                    "host": "worker-1",
                    "pid": 4242,
                    "state": "busy",
                    "current_submission": SID,
                    "last_heartbeat": "2026-11-24T01:14:09.912000",
                    "successful_jobs": 1211,
                    "failed_jobs": 0,
                    "queues": ["grader", "grader-env-python-3.11", "grader-webhooks"],
                }
            ],
            "queue": {
                "queued": 4,
                "running": 1,
                "redis_queued": 4,
                "redis_scheduled": 0,
                "redis_started": 1,
                "webhooks_queued": 0,
                "redis_queued:python-3.11": 4,
            },
        },
    },
    ("get", "/v1/admin/teams"): {
        "path": "/v1/admin/teams",
        "status": "200",
        "response": {
            "items": [
                {
                    "name": "team-a",
                    "admin": False,
                    "daily_quota": None,
                    "queued_quota": None,
                    "keys": 1,
                    "created_at": "2026-11-24T01:14:10.164645",
                }
            ]
        },
    },
    ("post", "/v1/admin/teams"): {
        "path": "/v1/admin/teams",
        "body": {"name": "team-b", "daily_quota": 500},
        "status": "201",
        "response": {"team": "team-b", "key": "grk_-Y2UCJplk9GmNkoZWUwjWPVKZtrWcJVzrr-lt2DCzag"},
    },
    ("get", "/v1/phases"): {"path": "/v1/phases", "status": "200", "response": {"items": [PHASE]}},
    ("get", "/v1/phases/{slug}"): {"path": "/v1/phases/test", "status": "200", "response": PHASE},
    ("put", "/v1/admin/phases/{slug}"): {
        "path": "/v1/admin/phases/test",
        "body": {
            "name": "Test phase",
            "suite": "examples",
            "starts_at": "2026-12-01T00:00:00Z",
            "ends_at": "2026-12-15T00:00:00Z",
            "daily_limit": 5,
            "total_limit": 20,
            "private": True,
        },
        "status": "201",
        "response": PHASE,
    },
    ("patch", "/v1/admin/teams/{name}"): {
        "path": "/v1/admin/teams/team-b",
        "body": {"daily_quota": 200, "queued_quota": None},
        "status": "200",
        "response": {"name": "team-b", "daily_quota": 200, "queued_quota": None},
    },
    ("get", "/v1/admin/teams/{name}/keys"): {
        "path": "/v1/admin/teams/team-b/keys",
        "status": "200",
        "response": {
            "team": "team-b",
            "items": [
                {"id": 3, "prefix": "grk_-Y2UCJpl", "created_at": "2026-11-24T01:14:10.164645", "revoked_at": None}
            ],
        },
    },
    ("delete", "/v1/admin/keys/{key_id}"): {
        "path": "/v1/admin/keys/3",
        "status": "200",
        "response": {
            "id": 3,
            "prefix": "grk_-Y2UCJpl",
            "created_at": "2026-11-24T01:14:10.164645",
            "revoked_at": "2026-11-28T21:20:00.000000+00:00",
        },
    },
    ("post", "/v1/admin/runs/{run}/regrade"): {
        "path": "/v1/admin/runs/3f9c2a1b7d4e6f80/regrade",
        "status": "200",
        "response": {"run": "3f9c2a1b7d4e6f80", "sent": 2, "refused": 0},
    },
    ("post", "/v1/admin/tasks/reload"): {
        "path": "/v1/admin/tasks/reload",
        "status": "200",
        "response": {"tasks": 10, "reloaded_at": "2026-11-24T01:14:10.275786+00:00"},
    },
    ("get", "/v1/admin/suites"): {
        "path": "/v1/admin/suites",
        "status": "200",
        "response": {
            "items": [
                {
                    "suite": "examples",
                    "tasks": 10,
                    "languages": ["python"],
                    "feedback": {"full": 10},
                    "gold": 10,
                    "validation": {
                        "state": "validated",
                        "tasks_now": 10,
                        "task_set_hash_now": "5b1e0c2d" + "0" * 56,
                        "validated_at": "2026-12-02T09:12:44.120338+00:00",
                        "recorded_by": "grader tasks validate on grader-1",
                        "repeat": 3,
                        "grader_version": "0.1.0",
                        "tasks": 10,
                        "valid": 10,
                        "invalid": 0,
                        "flaky": 0,
                        "task_set_hash": "5b1e0c2d" + "0" * 56,
                        "not_valid": [],
                        "added": [],
                        "removed": [],
                        "changed": [],
                    },
                }
            ]
        },
    },
    ("post", "/v1/admin/suites/validations"): {
        "path": "/v1/admin/suites/validations",
        "body": {
            "grader_version": "0.1.0",
            "repeat": 3,
            "tasks": [
                {
                    "task_id": task_id,
                    "suite": "swe-lite",
                    "task_hash": digest,
                    "ok": ok,
                    "flaky": False,
                    "problems": [] if ok else ["gold patch, run 2: FAIL: 1 of 2 FAIL_TO_PASS tests failed"],
                    "empty": ["FAIL", "FAIL", "FAIL"],
                    "gold": ["PASS", "PASS", "PASS"] if ok else ["FAIL", "FAIL", "FAIL"],
                }
                for task_id, digest, ok in (
                    ("parse-1.19-typed", "9f2b7c" + "0" * 58, True),
                    ("parse-1.20-nested", "41d0aa" + "0" * 58, False),
                )
            ],
        },
        "status": "201",
        "response": {
            "recorded": {
                "swe-lite": {
                    "state": "validated",
                    "tasks_now": 2,
                    "task_set_hash_now": "c07e51" + "0" * 58,
                    "validated_at": "2026-12-02T09:12:44.120338+00:00",
                    "recorded_by": "host (POST /v1/admin/suites/validations)",
                    "repeat": 3,
                    "grader_version": "0.1.0",
                    "tasks": 2,
                    "valid": 1,
                    "invalid": 1,
                    "flaky": 0,
                    "task_set_hash": "c07e51" + "0" * 58,
                    "not_valid": ["parse-1.20-nested"],
                    "added": [],
                    "removed": [],
                    "changed": [],
                }
            }
        },
    },
    ("get", "/v1/runs"): {"path": "/v1/runs", "status": "200", "response": {"items": [RUN]}},
    ("get", "/v1/runs/{run}"): {
        "path": "/v1/runs/my-run",
        "query": {"suite": "examples"},
        "status": "200",
        "response": {**RUN_VIEW, "filters": {**RUN_VIEW["filters"], "suite": "examples"}},
    },
    ("patch", "/v1/runs/{run}"): {
        "path": "/v1/runs/my-run",
        "body": {
            "method": "Agent 1",
            "description": "3 trials per task",
            "project_url": "https://example.org/agent-1",
            "public": True,
        },
        "status": "200",
        "response": RUN,
    },
    ("delete", "/v1/runs/{run}"): {
        "path": "/v1/runs/old-run",
        "status": "200",
        "response": {
            "deleted": {**RUN, "name": "old-run", "public": False},
            "submissions_detached": 12,
            "submissions_cancelled": 0,
            "quota_refunded": 0,
        },
    },
    ("get", "/v1/runs/{run}/report"): {
        "path": "/v1/runs/my-run/report",
        "query": {"format": "swebench"},
        "status": "200",
        "response": {
            "total_instances": 10,
            "submitted_instances": 2,
            "completed_instances": 1,
            "resolved_instances": 1,
            "unresolved_instances": 0,
            "empty_patch_instances": 1,
            "error_instances": 0,
            "incomplete_instances": 0,
            "submitted_ids": ["calc-mean-empty", "calc-median-even"],
            "completed_ids": ["calc-mean-empty"],
            "resolved_ids": ["calc-mean-empty"],
            "unresolved_ids": [],
            "empty_patch_ids": ["calc-median-even"],
            "error_ids": [],
            "incomplete_ids": [],
            "schema_version": 2,
        },
    },
    ("get", "/v1/runs/{run}/predictions"): {
        "path": "/v1/runs/my-run/predictions",
        "status": "200",
        "response": [
            {"instance_id": "calc-mean-empty", "model_name_or_path": "agent-1", "model_patch": PATCH},
            {"instance_id": "calc-median-even", "model_name_or_path": "agent-1", "model_patch": ""},
        ],
    },
    ("get", "/v1/runs/{run}/logs"): {
        "path": "/v1/runs/my-run/logs",
        "query": {"format": "zip"},
        "status": "200",
        "response_note": "my-run-logs.zip: my-run/index.json, then my-run/<task>/trial-<n>/ with patch.diff, "
        "result.json, test_output.txt (when the feedback policy shows it) and apply.log",
    },
    ("get", "/v1/leaderboard"): {
        "path": "/v1/leaderboard",
        "query": {"suite": "examples", "since": "2021-01-01"},
        "status": "200",
        "response": {
            "filters": {"suite": "examples", "variant": None, "since": "2021-01-01", "until": None},
            "items": [
                {
                    **RUN_VIEW,
                    "metrics": {k: v for k, v in METRICS.items() if k != "per_task"},  # the run's own view has it
                    "rank": 1,
                }
            ],
            "total": 1,
            "ranked": 1,
            "offset": 0,
            "limit": 100,
            "next_offset": None,
        },
    },
    ("get", "/v1/compare"): {
        "path": "/v1/compare",
        "query": {"a": "my-run", "b": "baseline-run"},
        "status": "200",
        "response": {
            "a": RUN,
            "b": {**RUN, "id": "73347081bf37444f", "name": "baseline-run", "team": "host"},
            "comparison": {
                "common_tasks": 2,
                "wins": 1,
                "losses": 0,
                "ties": 1,
                "difference": _fig(1, 2, -0.2, 1.0),
                "mcnemar_p": 1.0,
            },
        },
    },
    ("get", "/healthz"): {"path": "/healthz", "status": "200", "response": {"status": "ok"}},
    ("get", "/readyz"): {
        "path": "/readyz",
        "status": "200",
        "response": {
            "status": "ready",
            "checks": {
                "database": {"ok": True},
                "redis": {"ok": True},
                "docker": {"ok": True, "detail": "this host's engine answers"},
            },
        },
    },
    ("get", "/metrics"): {
        "path": "/metrics",
        "status": "200",
        "response_text": "# HELP grader_submissions_total Submissions graded to a final verdict\n"
        '# TYPE grader_submissions_total counter\ngrader_submissions_total{verdict="PASS"} 3.0\n'
        'grader_queue_depth{where="queued"} 1.0\n',
    },
    ("get", "/openapi.json"): {
        "path": "/openapi.json",
        "status": "200",
        "response_note": "this document, as JSON (OpenAPI 3.1)",
    },
    ("get", "/docs"): {"path": "/docs", "status": "200", "response_note": "this page (HTML)"},
}


def _unknown_field(problem: str) -> dict[str, Any]:
    return {
        "error": {
            "code": "invalid_fields",
            "message": f"invalid body: body: {problem}",
            "details": [{"field": "body", "problem": problem}],
        }
    }


# A refusal, shown beside the success: what most clients need to handle first.
ERRORS: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {
    ("post", "/v1/submissions"): (
        "422",
        _unknown_field(
            "unknown field 'trail' (did you mean 'trial'?); the fields are: task_id, patch, run_id, system, trial, "
            "prompt_variant, metadata, callback_url, cost_usd, input_tokens, output_tokens, api_seconds, "
            "wall_seconds, reasoning_level, phase, overwrite"
        ),
    ),
    ("patch", "/v1/runs/{run}"): (
        "422",
        _unknown_field(
            "unknown field 'methd' (did you mean 'method'?); the fields are: method, description, project_url, "
            "paper_url, public, baseline (admin only), hidden (admin only), verified (admin only)"
        ),
    ),
    ("get", "/v1/runs/{run}"): ("404", ERROR_404),
    ("get", "/v1/submissions"): (
        "400",
        {
            "error": {
                "code": "unknown_parameter",
                "message": "unknown query parameter(s) 'runid' for GET /v1/submissions; it "
                "takes: cursor, limit, run_id, status",
            }
        },
    ),
}
