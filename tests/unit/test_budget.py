"""grader/budget.py: a request's stages, each without the stages inside it, adding up to the
request; nothing recorded when off or outside a request; the totals written and read back."""

from __future__ import annotations

import pytest

from grader import budget


@pytest.fixture
def on(tmp_path, monkeypatch):
    monkeypatch.setattr(budget, "_totals", {})
    monkeypatch.setattr(budget, "_dumped", [0.0])
    monkeypatch.setattr(budget, "DUMP_EVERY", 1e9)  # written when the test says
    monkeypatch.setattr(budget, "_on", False)
    monkeypatch.setattr(budget, "_dir", None)
    budget.enable(tmp_path)
    yield tmp_path
    monkeypatch.setattr(budget, "_on", False)


def _app(body):
    def app(environ, start_response):
        body()
        return [b"ok"]

    return budget.Request(app)


def _run(app, method="POST", path="/v1/submissions"):
    return app({"REQUEST_METHOD": method, "PATH_INFO": path}, lambda *a: None)


def test_off_records_nothing_and_timed_calls_through(monkeypatch):
    monkeypatch.setattr(budget, "_on", False)
    monkeypatch.setattr(budget, "_totals", {})

    @budget.timed("f")
    def f(x):
        return x + 1

    with budget.stage("s"):
        assert f(1) == 2
    assert not budget.enabled()
    assert budget._totals == {}


def test_stages_are_counted_without_their_inner_stages_and_add_up_to_the_request(on):
    @budget.timed("inner")
    def inner():
        sum(range(2000))

    def body():
        with budget.stage("outer"):
            sum(range(5000))
            inner()
            inner()
        inner()

    assert _run(_app(body)) == [b"ok"]
    stages = budget._totals["POST /v1/submissions"]
    assert stages[""][0] == 1  # one request
    assert stages["outer"][0] == 1 and stages["inner"][0] == 3 and stages[budget.REST][0] == 1
    parts = [v for k, v in stages.items() if k]
    assert sum(v[1] for v in parts) == pytest.approx(stages[""][1], abs=1e-9)  # CPU
    assert sum(v[2] for v in parts) == pytest.approx(stages[""][2], abs=1e-9)  # wall


def test_statements_are_stages_named_by_their_verb_and_one_left_open_is_closed(on):
    def body():
        with budget.stage("reading"):
            budget.begin_statement("  select x from y")
            budget.end_statement()
            budget.begin_statement("BEGIN IMMEDIATE")
            budget.end_statement()
            budget.begin_statement("INSERT INTO t VALUES (1)")  # raised: its end never came
        budget.end_statement()  # nothing open: a no-op

    _run(_app(body))
    stages = budget._totals["POST /v1/submissions"]
    assert {k for k in stages if k.startswith("database statement: ")} == {
        "database statement: SELECT (reading)",
        "database statement: BEGIN IMMEDIATE (reading)",
        "database statement: INSERT (reading)",
    }
    assert stages["reading"][0] == 1


def test_outside_a_request_nothing_is_recorded(on):
    with budget.stage("alone"):
        budget.begin_statement("SELECT 1")
        budget.end_statement()
    assert budget._totals == {}


def test_routes_are_apart_and_the_totals_are_written_and_read_back(on):
    _run(_app(lambda: None))
    _run(_app(lambda: None), "GET", "/healthz")
    _run(_app(lambda: None), "GET", "/v1/submissions/a1")
    _run(_app(lambda: None), "GET", "/v1/submissions/b2")
    budget.dump()
    (only,) = budget.read(on).values()
    assert set(only["routes"]) == {"POST /v1/submissions", "GET /healthz", "GET /v1/submissions/…"}
    assert only["routes"]["GET /v1/submissions/…"][""][0] == 2
    assert only["routes"]["GET /healthz"][""][0] == 1
    assert only["process_cpu"] > 0
