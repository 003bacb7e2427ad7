"""Bad requests: schemathesis against /openapi.json, through the real app in-process (WSGI)
over a real Redis and a real database (SQLite, and a real PostgreSQL).

Every operation gets generated requests, valid ones (positive) and ones the document
says are invalid (negative), sent as four callers: a team's key, an admin's key, no key
and a wrong key. Path ids are drawn from generated text and from records that exist: the
team's own submissions (done with real grades, queued, cancelled), another team's, runs
private and public, tasks. Valid submissions sometimes name a real task, so that they are
accepted (until the team's small quota answers 429).

Every answer must: not be a 5xx; use a status code the document lists for the operation
(a 401 included); have the documented content type and a body valid against the
documented schema; reject invalid data with a 4xx. Only schemathesis's "valid data must
be accepted" check is left out: a schema-valid body may still name a task that does not
exist, a private callback host, or come when the quota is used up; those documented
4xx answers are counted instead, with every other status, in benchmarks/out/fuzz.json
(printed too, seen with -s).

GRADER_FUZZ_EXAMPLES sets the examples per operation (default 100: about 2,400 requests
on SQLite; PostgreSQL gets a third of that). `make stress` runs more.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections import Counter

import pytest
import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from grader import jobs
from grader.api.openapi import document
from grader.app import create_app
from grader.pipeline import Grader
from helpers import ROOT
from helpers.service import make_service, new_key, work

pytestmark = [pytest.mark.service, pytest.mark.docker]
EXAMPLES = int(os.environ.get("GRADER_FUZZ_EXAMPLES", "100"))
CALLERS = ["team", "team", "team", "admin", "none", "wrong"]  # drawn uniformly: half the requests as the team
TALLY: Counter = Counter()
REFUSED: list = []
OUT = ROOT / "benchmarks" / "out" / "fuzz.json"


@pytest.fixture(scope="module", autouse=True)
def tally():
    """The whole module's figures, once its tests are done whatever their order (the README
    quotes them): written to benchmarks/out/fuzz.json and printed (seen with -s). They are
    figures, not checks: each operation's test did the checking. The counts run over the
    session: a shuffled run that sets this module up twice still writes them all."""
    yield
    if not TALLY:
        return
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps(
            {"examples": EXAMPLES, "tally": dict(sorted(TALLY.items())), "refused": [repr(r) for r in REFUSED[:40]]},
            indent=2,
        )
    )
    print("\nschemathesis tally:", dict(sorted(TALLY.items())), f"(written to {OUT})")
    for r in REFUSED[:40]:
        print("REFUSED", r)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def world(request, tmp_path_factory, redis_server, settings, mini):
    """The app over a database holding real records of three teams, and what names them."""
    from helpers.mini import FIXED

    redis_server.flush()
    if request.param == "sqlite":
        url, drop = f"sqlite:///{tmp_path_factory.mktemp('fuzz')}/grader.db", None
    else:
        pg = request.getfixturevalue("postgres_server")
        name = f"fuzz_{uuid.uuid4().hex[:8]}"
        url, drop = pg.create_database(name), (lambda: pg.drop_database(name))
    svc = make_service(
        url,
        redis_server.url,
        tasks_dir=settings.tasks_dir,
        cache_dir=settings.cache_dir,
        max_wait=0.2,
        callback_allow_private=False,
    )
    jobs.use(svc, Grader(svc.settings))
    app = create_app(service=svc, migrate=False)
    keys = {
        "team": new_key(svc, "fuzzer", queued_quota=25),
        "admin": new_key(svc, "host", admin=True),
        "other": new_key(svc, "other"),
        "wrong": "grk_" + "A" * 43,
    }
    client = app.test_client()

    def post(who, body, status=202):
        r = client.post("/v1/submissions", json=body, headers={"Authorization": f"Bearer {keys[who]}"})
        assert r.status_code == status, r.get_data(as_text=True)
        return r.json["id"]

    gold = mini.diff({"calc/__init__.py": FIXED}).decode()
    done = [
        post("team", {"task_id": "mini", "patch": p, "run_id": "fuzz-run", "trial": i})
        for i, p in enumerate((gold, "", "not a diff"))
    ]
    public = post("team", {"task_id": "mini", "patch": gold, "run_id": "fuzz-public"})
    others = [post("other", {"task_id": "mini", "patch": "", "run_id": "other-run"})]
    work(svc)  # real grades: PASS, FAIL, PATCH FAILED, PASS, FAIL
    # the cache answers (a new trial: a run holds one attempt per task and trial)
    cached = post("team", {"task_id": "mini", "patch": "", "run_id": "fuzz-run", "trial": 3}, status=200)
    queued = [
        post(
            "team",
            {
                "task_id": "mini",
                "patch": mini.diff({"README.md": f"queued {i}\n"}).decode(),
                "run_id": "fuzz-run",
                "trial": 4 + i,
            },
        )
        for i in range(3)
    ]
    cancelled = queued.pop()
    assert (
        client.delete(f"/v1/submissions/{cancelled}", headers={"Authorization": f"Bearer {keys['team']}"}).status_code
        == 200
    )
    r = client.patch(
        "/v1/runs/fuzz-public",
        json={"public": True, "method": "gold"},
        headers={"Authorization": f"Bearer {keys['team']}"},
    )
    assert r.status_code == 200
    run_ids = {
        r["name"]: r["id"]
        for r in client.get("/v1/runs", headers={"Authorization": f"Bearer {keys['admin']}"}).json["items"]
    }
    known = {
        "submission_id": done + [public, cached] + queued + [cancelled] + others + ["0" * 24],
        "task_id": ["mini", "mini-nolist", "no-such-task"],
        "run": ["fuzz-run", "fuzz-public", "other-run", *run_ids.values(), "no-such-run"],
        "a": ["fuzz-run", "fuzz-public", run_ids["other-run"]],
        "b": ["fuzz-public", "fuzz-run", run_ids["fuzz-public"]],
    }
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app)
    yield request.param, schema, keys, known
    svc.close()
    if drop:
        drop()


def _operations():
    return [(path, method) for path, ops in document()["paths"].items() for method in ops]


def _strategy(operation):
    modes = [operation.as_strategy(GenerationMode.POSITIVE)]
    try:
        modes.append(operation.as_strategy(GenerationMode.NEGATIVE))
    except Exception:  # nothing in the operation can be made invalid
        pass
    return st.one_of(*modes)


def _with_known_records(case, draw, known: dict) -> None:
    """Point a valid case at records that exist: ids in the path, names in the query, a
    real task in a submission's body. Invalid cases are left as generated."""
    for name in list(case.path_parameters or {}):
        if name in known and draw(st.booleans()):
            case.path_parameters[name] = draw(st.sampled_from(known[name]))
    for name in ("a", "b"):
        if case.query and name in case.query and draw(st.booleans()):
            case.query[name] = draw(st.sampled_from(known[name]))
    body = case.body
    items = body if isinstance(body, list) else body.get("submissions") if isinstance(body, dict) else None
    for item in ([body] if isinstance(body, dict) and "task_id" in body else []) + [
        i for i in (items or []) if isinstance(i, dict)
    ]:
        if "task_id" in item and draw(st.booleans()):
            item["task_id"] = "mini"
            item.pop("callback_url", None)


@pytest.mark.parametrize("path,method", _operations(), ids=lambda v: v)
def test_operation_answers_as_documented(world, path, method):
    db, schema, keys, known = world
    operation = schema[path][method.upper()]
    examples = EXAMPLES if db == "sqlite" else max(10, EXAMPLES // 3)
    seen: Counter = Counter()

    @given(case=_strategy(operation), caller=st.sampled_from(CALLERS), data=st.data())
    @hsettings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    def check(case, caller, data):
        mode = case.meta.generation.mode if case.meta else GenerationMode.POSITIVE
        if mode.is_positive:
            _with_known_records(case, data.draw, known)
        # the key goes as an explicit header, so that schemathesis knows it is meant to be
        # valid (and probes the same request without it, and with a wrong one, on a 2xx)
        # ... unless the headers are the only invalid part: then the missing or mangled
        # Authorization header may be all that makes the case invalid, and it goes as generated
        invalid = {loc for loc, info in (case.meta.components.items() if case.meta else ()) if info.mode.is_negative}
        only_headers = not mode.is_positive and invalid == {ParameterLocation.HEADER}
        auth = {"Authorization": f"Bearer {keys[caller]}"} if caller != "none" and not only_headers else {}
        # With the key put back into headers generated invalid, schemathesis may still count
        # the case invalid for a part that did not survive the wire (an extra query parameter
        # without a value): "invalid data must be rejected" is then not asked of it; every
        # other check is.
        excluded = [positive_data_acceptance] + (
            [negative_data_rejection] if auth and ParameterLocation.HEADER in invalid else []
        )
        t = time.monotonic()
        response = case.call(headers=auth)
        seen["seconds"] += time.monotonic() - t
        seen["requests"] += 1
        seen[f"{mode.value} {response.status_code}"] += 1
        assert response.status_code < 500, (
            case.method,
            case.formatted_path,
            case.query,
            response.status_code,
            response.text[:500],
        )
        if caller in ("none", "wrong") and operation.definition.raw.get("security") == [{"bearer": []}]:
            assert response.status_code == 401, (caller, response.status_code)
        if response.status_code == 401:
            assert keys["wrong"] not in response.text and keys["team"] not in response.text
        case.validate_response(response, headers=auth, excluded_checks=excluded)
        if mode.is_positive and response.status_code == 422:
            body = response.json()
            seen[f"422 {body.get('error', {}).get('code')}"] += 1
            if body.get("error", {}).get("code") == "invalid_fields":
                REFUSED.append((case.method, case.formatted_path, case.query, case.body, body["error"]["message"]))

    check()
    assert seen["requests"] > 0
    TALLY.update({k: v for k, v in seen.items() if k != "seconds"})
    TALLY[f"{db} requests"] += seen["requests"]
    TALLY[f"{db} seconds"] += seen["seconds"]
    print(
        f"\n{db} {method.upper()} {path}: {seen['requests']} requests, "
        + ", ".join(f"{k}: {v}" for k, v in sorted(seen.items()) if k not in ("requests", "seconds"))
    )
