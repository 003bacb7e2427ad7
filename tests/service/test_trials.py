"""Trials and the other fields of an attempt through the batch route, on SQLite and
PostgreSQL: a SWE-bench prediction line keeps its `trial` (it used to be dropped, every
trial stored as null), a batch gives defaults to its items, a field that is not kept is
named in the answer, and an unknown field of a body is refused with the allowed ones."""

from __future__ import annotations

import json

import pytest

from grader.store.models import Submission

pytestmark = pytest.mark.service


@pytest.fixture
def team() -> str:
    return "team-t"


def stored(svc, ids: list[str]) -> list[tuple]:
    with svc.db.read() as s:
        rows = {r.id: r for r in s.query(Submission).filter(Submission.id.in_(ids))}
    return [
        (rows[i].task_id, rows[i].trial, rows[i].prompt_variant, rows[i].meta, rows[i].system, rows[i].run_id)
        for i in ids
    ]


def test_a_prediction_line_keeps_its_trial_and_the_other_fields_of_an_attempt(api, svc):
    lines = [
        {
            "instance_id": "calc-mean-empty",
            "model_name_or_path": "m",
            "model_patch": f"p{t}",
            "trial": t,
            "prompt_variant": "minimal",
            "metadata": {"seed": t},
        }
        for t in range(3)
    ]
    lines.append({"instance_id": "calc-median-even", "model_patch": "", "trial": 0})
    jsonl = "".join(json.dumps(x) + "\n" for x in lines)
    r = api.post("/v1/submissions/batch?run_id=three", data=jsonl, content_type="application/x-ndjson")
    assert r.status_code == 202 and r.json["accepted"] == 4, r.json
    assert stored(svc, [it["id"] for it in r.json["items"]]) == [
        ("calc-mean-empty", 0, "minimal", {"seed": 0}, "m", "three"),
        ("calc-mean-empty", 1, "minimal", {"seed": 1}, "m", "three"),
        ("calc-mean-empty", 2, "minimal", {"seed": 2}, "m", "three"),
        ("calc-median-even", 0, None, None, None, "three"),
    ]
    assert all("ignored" not in it for it in r.json["items"])
    # the API shows the trial back
    assert api.get(f"/v1/submissions/{r.json['items'][2]['id']}").json["trial"] == 2


def test_a_bad_trial_on_a_prediction_is_refused_with_its_reason(api):
    r = api.post(
        "/v1/submissions/batch",
        json=[
            {"instance_id": "calc-mean-empty", "model_patch": "", "trial": "1"},  # a string: JSON's types are strict
            {"instance_id": "calc-mean-empty", "model_patch": "", "trial": -1},
            {"instance_id": "calc-mean-empty", "model_patch": "", "prompt_variant": "chatty"},
            {"instance_id": "calc-mean-empty", "model_patch": "", "trial": 4},
        ],
    )
    assert r.status_code == 202 and r.json["accepted"] == 1
    errors = [it.get("error", {}).get("message", "") for it in r.json["items"]]
    assert "trial" in errors[0] and "trial" in errors[1] and "prompt_variant" in errors[2] and errors[3] == ""


def test_a_batch_gives_its_defaults_to_items_that_say_nothing(api, svc):
    r = api.post(
        "/v1/submissions/batch",
        json={
            "run_id": "defaults",
            "system": "sys",
            "trial": 5,
            "prompt_variant": "guided",
            "metadata": {"k": "batch"},
            "submissions": [
                {"instance_id": "calc-mean-empty", "model_patch": "a"},  # every default
                {
                    "instance_id": "calc-mean-empty",
                    "model_patch": "b",
                    "trial": 6,  # its own win
                    "model_name_or_path": "own",
                    "metadata": {"k": "own"},
                },
                {"task_id": "calc-median-even", "patch": "c"},  # our format too
                {"task_id": "calc-median-even", "patch": "d", "trial": 0, "prompt_variant": "minimal"},
            ],
        },
    )
    assert r.status_code == 202 and r.json["accepted"] == 4, r.json
    assert stored(svc, [it["id"] for it in r.json["items"]]) == [
        ("calc-mean-empty", 5, "guided", {"k": "batch"}, "sys", "defaults"),
        ("calc-mean-empty", 6, "guided", {"k": "own"}, "own", "defaults"),
        ("calc-median-even", 5, "guided", {"k": "batch"}, "sys", "defaults"),
        ("calc-median-even", 0, "minimal", {"k": "batch"}, "sys", "defaults"),
    ]


def test_fields_a_prediction_carries_that_are_not_kept_are_named(api):
    r = api.post(
        "/v1/submissions/batch",
        json=[
            {"instance_id": "calc-mean-empty", "model_patch": "", "cost": 0.3, "full_output": "..."},
            {"instance_id": "calc-mean-empty", "model_patch": "x", "trial": 1},
        ],
    )
    assert r.status_code == 202
    assert r.json["items"][0]["ignored"] == ["cost", "full_output"] and "ignored" not in r.json["items"][1]


@pytest.mark.parametrize(
    "path,method,body,named,allowed",
    [
        (
            "/v1/submissions",
            "post",
            {"task_id": "calc-mean-empty", "patch": "", "trail": 1},
            "'trail' (did you mean 'trial'?)",
            "task_id, patch, run_id, system, trial, prompt_variant, metadata, callback_url",
        ),
        (
            "/v1/submissions/batch",
            "post",
            {"submissions": [], "runid": "x"},
            "'runid' (did you mean 'run_id'?)",
            "run_id, system, trial",
        ),
        (
            "/v1/runs/unknown-fields",
            "patch",
            {"methd": "M", "public": True},
            "'methd' (did you mean 'method'?)",
            "method, description, project_url, paper_url, public, baseline (admin only)",
        ),
    ],
)
def test_an_unknown_field_is_refused_with_the_fields_the_body_takes(api, path, method, body, named, allowed):
    api.post("/v1/submissions", json={"task_id": "calc-mean-empty", "patch": "", "run_id": "unknown-fields"})
    r = getattr(api.client, method)(path, json=body, headers={"Authorization": f"Bearer {api.key}"})
    assert r.status_code == 422 and r.json["error"]["code"] == "invalid_fields", r.json
    message = r.json["error"]["message"]
    assert named in message and allowed in message, message


def test_an_unknown_field_of_a_batch_item_is_refused_with_the_allowed_ones(api):
    r = api.post("/v1/submissions/batch", json=[{"task_id": "calc-mean-empty", "patch": "", "variant": "minimal"}])
    assert r.status_code == 422
    message = r.json["items"][0]["error"]["message"]
    assert "'variant'" in message and "prompt_variant" in message
