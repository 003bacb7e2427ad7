"""The route that serves a task's starting repository: the bundle with its sha256, built
once, and 304 for a client that has it. The bundle itself and a checkout made from it are
tests/unit/test_task_repository.py; the CLI's side, tests/*/test_tasks_remote*.py."""

from __future__ import annotations

import hashlib

import pytest

from helpers.service import Api


# --- the route ----------------------------------------------------------------------------------
@pytest.fixture
def database_url(tmp_path) -> str:
    """SQLite alone here."""
    return f"sqlite:///{tmp_path}/grader.db"


@pytest.fixture
def service_options(tmp_path):
    """The bundles in this test's own cache."""
    return {"cache_dir": tmp_path / "cache"}


@pytest.fixture
def team() -> str:
    return "remote-team"


@pytest.mark.service
def test_the_route_serves_the_bundle_with_its_sha256_once_built_and_answers_304(api, app, svc):
    task = svc.task("notes-merge-release")
    path = task.public_view()["repo"]["download"]
    assert path == "/v1/tasks/notes-merge-release/repository"
    r = api.get(path)
    assert r.status_code == 200 and r.mimetype == "application/x-git-bundle"
    body = r.get_data()
    sha = hashlib.sha256(body).hexdigest()
    assert body.startswith(b"# v2 git bundle\n")
    assert r.headers["X-Content-SHA256"] == sha and r.headers["ETag"] == f'"{sha}"'
    assert (r.headers["X-Grader-Commit"], r.headers["X-Grader-Merge"]) == (task.repo.commit, task.repo.merge)
    assert {"private", "no-cache"} <= {d.strip() for d in r.headers["Cache-Control"].split(",")}
    assert "notes-merge-release.bundle" in r.headers["Content-Disposition"]
    again = api.get(path, headers={"If-None-Match": r.headers["ETag"]})
    assert again.status_code == 304 and again.get_data() == b""
    assert api.get(path, headers={"If-None-Match": '"something-else"'}).get_data() == body
    built = list((svc.settings.cache_dir / "bundles").glob("*.bundle"))
    assert [p.name for p in built] == [f"notes-merge-release-{svc.task_hash('notes-merge-release')[:16]}.bundle"]
    plain = api.get("/v1/tasks/calc-mean-empty/repository")
    assert plain.status_code == 200 and "X-Grader-Merge" not in plain.headers
    assert plain.headers["X-Grader-Commit"] == svc.task("calc-mean-empty").repo.commit
    # like every task route: a key, a task that exists, no parameter it does not take
    assert Api(app.test_client(), None).get(path).status_code == 401
    assert Api(app.test_client(), "grk_wrong").get(path).status_code == 401
    missing = api.get("/v1/tasks/nope/repository")
    assert missing.status_code == 404 and missing.json["error"]["message"] == "no task 'nope'"
    assert api.get(path + "?depth=1").status_code == 400
