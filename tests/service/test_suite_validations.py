"""Suites' validation status, stored and shown to the host (issue 22), on SQLite and
PostgreSQL: `grader tasks validate` with the service's database configured records each
suite it validates whole, the host may record one run elsewhere (POST
/v1/admin/suites/validations), and /host/suites and GET /v1/admin/suites say "never
validated", "validated N/M on DATE" or "changed since validated" (a task changed after its
validation). Only an admin sees any of it. Grading is not what is tested here: the CLI's
validations are scripted (no Docker)."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from click.testing import CliRunner

from grader.app import create_app
from grader.cli import main
from grader.store.models import SuiteValidation
from grader.validate import TaskValidation
from grader.verdict import Verdict
from helpers import ROOT
from helpers.service import Api, make_service, new_key

pytestmark = pytest.mark.service


@pytest.fixture
def tasks_dir(tmp_path):
    """A copy of the example tasks (one suite, 'examples', of ten), to change under the service."""
    out = tmp_path / "tasks"
    shutil.copytree(ROOT / "tasks" / "examples", out)
    return out


@pytest.fixture
def svc(database_url, redis_url, tasks_dir):
    s = make_service(database_url, redis_url, tasks_dir=tasks_dir)
    yield s
    s.close()


@pytest.fixture
def host(app, svc):
    return Api(app.test_client(), new_key(svc, "host", admin=True))


def signed_in(app, key: str):
    b = app.test_client()
    assert b.post("/login", data={"key": key}).status_code == 302
    return b


def cell(page: str, suite: str = "examples") -> str:
    """The validation cell of a suite's row, as text."""
    m = re.search(rf'<td class="validation" data-state="(\w+)" id="validation-{suite}">(.*?)</td>', page, re.S)
    assert m, page
    return m.group(1) + ": " + " ".join(re.sub(r"<[^>]+>", " ", m.group(2)).split())


def scripted(outcomes: dict[str, str]):
    """validate_task as the CLI calls it, answering each task's outcome without grading."""

    def validate_task(grader, task, repeat=1, progress=None):
        outcome = outcomes.get(task.id, "valid")
        gold = {"valid": [Verdict.PASS] * repeat, "invalid": [Verdict.FAIL] * repeat}.get(
            outcome, [Verdict.PASS, Verdict.FAIL][:repeat]
        )
        problems = [] if outcome == "valid" else [f"gold patch: {outcome}"]
        return TaskValidation(
            task.id,
            [Verdict.FAIL] * repeat,
            gold,
            problems,
            suite=task.metadata.suite,
            task_hash=task.definition_hash(),
        )

    return validate_task


@pytest.fixture
def validate_cli(monkeypatch, tmp_path_factory, database_url, tasks_dir):
    """`grader tasks validate` through click against the service's database, grading
    nothing: `outcomes` scripts each task's outcome. Its cache (the answers-across-tasks
    check's, keyed by the tasks' hashes) is shared by the module's tests."""
    from grader.config import _from_env

    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "validate-cache"))
    monkeypatch.setattr("grader.cli.local.Grader", lambda *a, **k: None)

    def run(*args, outcomes=None, env_db=True):
        if env_db:
            monkeypatch.setenv("GRADER_DATABASE_URL", database_url)
        else:
            monkeypatch.delenv("GRADER_DATABASE_URL", raising=False)
        _from_env.cache_clear()  # the environment is read once per process
        monkeypatch.setattr("grader.cli.local.validate_task", scripted(outcomes or {}))
        return CliRunner().invoke(
            main, ["tasks", "validate", "--tasks-dir", str(tasks_dir), *args], catch_exceptions=False
        )

    yield run
    _from_env.cache_clear()


def test_the_host_sees_never_then_validated_then_changed(app, svc, host, tasks_dir, validate_cli):
    browser = signed_in(app, host.key)
    assert cell(browser.get("/host/suites").get_data(as_text=True)) == "never: never validated"
    [row] = host.get("/v1/admin/suites").json["items"]
    assert (row["suite"], row["tasks"], row["validation"]["state"]) == ("examples", 10, "never")

    # validated, with the service's database configured: recorded without asking
    r = validate_cli("--repeat", "3", outcomes={"calc-add-mode": "invalid", "calc-mean-empty": "flaky"})
    assert r.exit_code == 1  # two tasks failed validation
    assert "suite examples: validation recorded (8/10 valid, 1 invalid, 1 flaky)" in r.output
    page = browser.get("/host/suites").get_data(as_text=True)
    said = cell(page)
    assert (
        said.startswith("validated: validated 8/10 on 20")
        and "1 invalid, 1 flaky: calc-add-mode, calc-mean-empty" in said
    )
    assert "repeat 3" in said and "grader tasks validate on" in said
    v = host.get("/v1/admin/suites").json["items"][0]["validation"]
    assert (v["state"], v["tasks"], v["valid"], v["invalid"], v["flaky"], v["repeat"]) == ("validated", 10, 8, 1, 1, 3)
    assert v["task_set_hash"] == v["task_set_hash_now"] and v["grader_version"]

    # a task changes after its validation (its hidden test here): the suite is no longer validated
    hidden = tasks_dir / "calc-median-even" / "test.patch"
    hidden.write_text(hidden.read_text() + "\n")
    assert host.post("/v1/admin/tasks/reload").status_code == 200
    said = cell(browser.get("/host/suites").get_data(as_text=True))
    assert said.startswith("changed: changed since validated on 20") and "(8/10 valid then): 1 changed" in said
    v = host.get("/v1/admin/suites").json["items"][0]["validation"]
    assert (v["state"], v["changed"], v["added"], v["removed"]) == ("changed", ["calc-median-even"], [], [])
    assert v["task_set_hash"] != v["task_set_hash_now"]

    # validated again: validated as it is now
    assert validate_cli().exit_code == 0
    assert cell(browser.get("/host/suites").get_data(as_text=True)).startswith("validated: validated 10/10 on 20")


def test_a_task_removed_or_added_after_validation_shows_the_suite_changed(app, svc, host, tasks_dir, validate_cli):
    assert validate_cli().exit_code == 0
    shutil.rmtree(tasks_dir / "notes-summary-mode")
    assert host.post("/v1/admin/tasks/reload").status_code == 200
    v = host.get("/v1/admin/suites").json["items"][0]["validation"]
    assert (v["state"], v["removed"], v["tasks_now"], v["tasks"]) == ("changed", ["notes-summary-mode"], 9, 10)
    assert "1 removed" in cell(signed_in(app, host.key).get("/host/suites").get_data(as_text=True))


def test_only_a_whole_suite_is_recorded(svc, host, validate_cli):
    r = validate_cli("calc-add-mode", "calc-mean-empty")
    assert r.exit_code == 0
    assert "suite examples: 2 of its 10 task(s) validated; not recorded" in r.output
    assert validate_cli("--no-record").exit_code == 0  # asked not to
    assert validate_cli(env_db=False).exit_code == 0  # no database configured: nothing written unasked
    with svc.db.read() as s:
        assert s.query(SuiteValidation).count() == 0
    assert host.get("/v1/admin/suites").json["items"][0]["validation"]["state"] == "never"


def test_the_host_records_a_validation_run_elsewhere(svc, host, validate_cli):
    """`grader tasks validate --json`'s output, POSTed: whole suites only, all or nothing."""
    r = validate_cli("--json", "--no-record", "--repeat", "2", outcomes={"notes-merge-release": "invalid"})
    body = json.loads(r.stdout)
    assert body["repeat"] == 2 and len(body["tasks"]) == 10
    part = {**body, "tasks": body["tasks"][:9]}
    r = host.post("/v1/admin/suites/validations", json=part)
    assert r.status_code == 422 and "suite 'examples' has 10 task(s)" in r.json["error"]["message"]
    assert "not validated: " in r.json["error"]["message"]
    other = {**body, "tasks": [{**t, "suite": "nope"} if i == 0 else t for i, t in enumerate(body["tasks"])]}
    r = host.post("/v1/admin/suites/validations", json=other)
    assert r.status_code == 422 and "there is no suite 'nope'" in r.json["error"]["message"]
    twice = {**body, "tasks": [*body["tasks"], body["tasks"][0]]}
    assert host.post("/v1/admin/suites/validations", json=twice).status_code == 422
    with svc.db.read() as s:
        assert s.query(SuiteValidation).count() == 0  # nothing of a refused one
    r = host.post("/v1/admin/suites/validations", json=body)
    assert r.status_code == 201, r.json
    v = r.json["recorded"]["examples"]
    assert (v["state"], v["valid"], v["invalid"], v["repeat"], v["not_valid"]) == (
        "validated",
        9,
        1,
        2,
        ["notes-merge-release"],
    )
    assert v["recorded_by"] == "host (POST /v1/admin/suites/validations)"


def test_a_team_sees_none_of_it(app, svc, host, validate_cli):
    assert validate_cli().exit_code == 0
    team = Api(app.test_client(), new_key(svc, "team-a"))
    assert team.get("/v1/admin/suites").status_code == 403
    assert Api(app.test_client(), None).get("/v1/admin/suites").status_code == 401
    body = {"grader_version": "x", "repeat": 1, "tasks": []}
    assert team.post("/v1/admin/suites/validations", json=body).status_code == 403
    assert signed_in(app, team.key).get("/host/suites").status_code == 403
    assert app.test_client().get("/host/suites").status_code == 302  # signed out: sign in first
    # nor on the pages a team reads
    for path in ("/suites/examples", "/tasks", "/phases"):
        page = signed_in(app, team.key).get(path).get_data(as_text=True)
        assert "validated" not in page and "grader tasks validate on" not in page, path


def test_an_app_over_the_same_database_shows_what_another_recorded(database_url, redis_url, tasks_dir, svc, host):
    """The status is in the database, not the process: a second API process shows it."""
    body = {
        "grader_version": "9.9",
        "repeat": 1,
        "tasks": [
            {"task_id": t.id, "suite": "examples", "task_hash": svc.task_hash(t.id), "ok": True, "flaky": False}
            for t in svc.tasks
        ],
    }
    assert host.post("/v1/admin/suites/validations", json=body).status_code == 201
    other = make_service(database_url, redis_url, tasks_dir=tasks_dir)
    try:
        admin = Api(create_app(service=other, migrate=False).test_client(), host.key)
        v = admin.get("/v1/admin/suites").json["items"][0]["validation"]
        assert (v["state"], v["grader_version"], v["valid"]) == ("validated", "9.9", 10)
    finally:
        other.close()
