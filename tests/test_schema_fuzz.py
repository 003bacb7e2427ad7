"""schemathesis against /openapi.json: generated requests, valid and invalid, to every
operation, through the real app over a real Redis and a real database, with a valid key.
No 5xx, and every response must match the document (status codes, content types, bodies
against their schemas). Nothing here grades (no worker runs).

GRADER_FUZZ_EXAMPLES sets the examples per operation (default 130: about 2,300 requests
over the document's operations; `make stress` runs more)."""

from __future__ import annotations

import os

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from grader.api import create_app
from service_helpers import make_service, new_key

pytestmark = pytest.mark.service
EXAMPLES = int(os.environ.get("GRADER_FUZZ_EXAMPLES", "130"))


@pytest.fixture(scope="module")
def fuzz(tmp_path_factory, redis_server):
    redis_server.flush()
    db = tmp_path_factory.mktemp("fuzz") / "grader.db"
    svc = make_service(f"sqlite:///{db}", redis_server.url, max_wait=0.2, callback_allow_private=False)
    app = create_app(service=svc, migrate=False)
    key = new_key(svc, "fuzzer")
    yield schemathesis.openapi.from_wsgi("/openapi.json", app), key
    svc.close()


def _operations():
    from grader.api.openapi import document
    return [(path, method) for path, ops in document()["paths"].items() for method in ops]


@pytest.mark.parametrize("path,method", _operations(), ids=lambda v: v)
def test_operation_answers_as_documented(fuzz, path, method):
    schema, key = fuzz
    operation = schema[path][method.upper()]
    seen = {"requests": 0}

    @given(case=operation.as_strategy())
    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    def check(case):
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {key}"}
        response = case.call()
        seen["requests"] += 1
        assert response.status_code < 500, (case.method, case.formatted_path, response.status_code,
                                            response.text[:500])
        # a schema-valid body can still name a task that does not exist, a private callback
        # host or an exhausted quota: those 4xx answers are documented, so only the
        # "valid data must be accepted" check is left out
        case.validate_response(response, excluded_checks=[positive_data_acceptance])

    check()
    assert seen["requests"] > 0
    print(f"{method.upper()} {path}: {seen['requests']} requests")
