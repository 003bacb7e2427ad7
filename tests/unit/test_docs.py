"""The examples in /openapi.json: every operation has an example request and response that
the documented schemas accept, and the examples cover the document and nothing else. The
/docs page the service serves is tests/service/test_docs_service.py."""

from __future__ import annotations

import re

import jsonschema_rs  # schemathesis's validator: installed with the dev extras
import pytest

from grader.api.examples import ERRORS, EXAMPLES
from grader.api.openapi import ACCESS, document

DOC = document()
OPERATIONS = [(path, method) for path, ops in DOC["paths"].items() for method in ops]


def validate(instance, schema: dict) -> None:
    """`instance` against an OpenAPI 3.1 schema, its $refs into the document's components."""
    jsonschema_rs.Draft202012Validator({**schema, "components": DOC["components"]}).validate(instance)


@pytest.mark.parametrize("path,method", OPERATIONS, ids=lambda v: v)
def test_every_operation_has_an_example_the_schemas_accept(path, method):
    op = DOC["paths"][path][method]
    assert (method, path) in EXAMPLES, "add its example to grader/api/examples.py"
    ex = op["x-example"]
    assert op["x-access"] in ACCESS
    assert ex["status"] in op["responses"] and ex["status"].startswith("2")
    # the concrete request fits the operation: its path, its query parameters and headers, with valid values
    pattern = "^" + re.sub(r"\\{[^}]+\\}", "[^/]+", re.escape(path)) + "$"
    assert re.match(pattern, ex["path"]), (ex["path"], path)
    params = {(p["in"], p["name"]): p for p in op.get("parameters", [])}
    for where, values in (("query", ex["query"]), ("header", ex["headers"])):
        for name, value in values.items():
            assert (where, name) in params, (where, name)
            validate(
                value if where == "query" and not isinstance(value, str) else str(value),
                params[(where, name)]["schema"],
            )
    assert all(name in ex["query"] for (where, name), p in params.items() if where == "query" and p.get("required"))
    body = op.get("requestBody")
    if body is not None:
        media = body["content"]["application/json"]
        assert "example" in media, "an operation that takes a body shows one"
        validate(media["example"], media["schema"])
    # the answer shown: valid against the schema documented for it
    answer = op["responses"][ex["status"]]
    shown = [(ctype, media) for ctype, media in (answer.get("content") or {}).items() if "example" in media]
    if "note" in ex:
        assert not shown and ex["note"]
    else:
        assert len(shown) == 1
        ctype, media = shown[0]
        validate(media["example"], media["schema"])
    for code, r in op["responses"].items():
        media = (r.get("content") or {}).get("application/json", {})
        if "example" in media and not code.startswith("2"):
            validate(media["example"], media["schema"])
            assert (method, path) in ERRORS


def test_the_examples_cover_the_document_and_nothing_else():
    assert set(EXAMPLES) == {(m, p) for p, m in OPERATIONS}
    assert set(ERRORS) <= set(EXAMPLES)
