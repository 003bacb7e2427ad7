"""Gold patches, hidden tests and expected files never leave the server, by any route.

Real grades (Docker) of the example tasks produce results that quote the run: a FAIL's
pytest traceback quotes the hidden test, an exact-match FAIL's diff quotes the expected
file. The raw results in the database do hold those lines (so this test can fail); every
route the app serves, and the webhook body, must not."""

from __future__ import annotations

import json
import re
from urllib.parse import urlencode

import pytest
from sqlalchemy import select

from grader import jobs
from grader.api.openapi import query_names
from grader.app import create_app
from grader.pipeline import Grader
from grader.serializers.redact import MASK
from grader.store.models import Run, Submission
from helpers.service import Api, Receiver, make_service, new_key, work

pytestmark = [pytest.mark.docker, pytest.mark.service]
TASKS = ["calc-mean-empty", "notes-changelog-entry", "calc-median-even"]


def _secret_files(task) -> list[tuple[str, bool]]:
    """(text, is a diff) of every secret file: for a diff only its added lines are secret,
    its context lines are the public base."""
    patches = {task.gold_patch, getattr(task.check, "test_patch", None)}
    return [(task.read(rel).decode(), rel in patches) for rel in task.referenced_files() if rel != task.repo.bundle]


def _lines(text: str, diff: bool) -> set[str]:
    out = set()
    for line in text.splitlines():
        if diff and (not line.startswith("+") or line.startswith("+++")):
            continue
        s = line[1:].strip() if diff else line.strip()
        if len(s) >= 12:
            out.add(s)
    return out


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _leaks(body: str, files: list[str], lines: set[str]) -> list[str]:
    found = [f"a whole secret file ({f[:40]!r}...)" for f in files if len(f) > 40 and f in body]
    try:
        strings = list(_strings(json.loads(body)))
    except json.JSONDecodeError:
        strings = [body]
    for text in strings:
        for line in text.splitlines():
            s = re.sub(r"^[>+\- ]+", "", line).strip()
            if s in lines:
                found.append(s)
    return found


def _archive(data: bytes) -> dict[str, bytes]:
    import io
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as t:
        return {m.name: t.extractfile(m).read() for m in t.getmembers()}


def _without_own_patch(page: str, sent: set[str]) -> str:
    """A submission's page without the diff its team sent (checked to be one it sent)."""
    import html

    block = re.search(r'<pre id="patch" class="diff">(.*?)</pre>', page, re.S)
    if block is None:
        assert 'id="patch"' in page  # the empty patch, said in words
        return page
    shown = html.unescape(re.sub(r"<[^>]+>", "", block.group(1)))
    assert shown.rstrip("\n") in {s.rstrip("\n") for s in sent}
    return page.replace(block.group(0), "")


@pytest.fixture
def graded(database_url, redis_url):
    svc = make_service(database_url, redis_url, retry_backoff=0, signup="open")  # every page served, /signup too
    jobs.use(svc, Grader(svc.settings))
    app = create_app(service=svc, migrate=False)
    api = Api(app.test_client(), new_key(svc, "team", admin=True))
    rx = Receiver([])
    ids = []
    for task_id in TASKS:
        gold = svc.task(task_id).gold_patch_text().decode()
        for trial, patch in enumerate(("", gold)):  # two trials: a run holds one attempt per task and trial
            r = api.post(
                "/v1/submissions",
                json={"task_id": task_id, "patch": patch, "callback_url": rx.url, "run_id": "leak", "trial": trial},
            )
            ids.append(r.json["id"])
    work(svc)
    yield svc, app, api, ids, rx
    rx.close()
    svc.close()


def test_no_route_sends_hidden_tests_expected_files_or_gold_patches(graded):
    svc, app, api, ids, rx = graded
    files, lines = [], set()
    for task_id in TASKS:
        for text, diff in _secret_files(svc.task(task_id)):
            files.append(text)
            lines |= _lines(text, diff)
    # the raw results do quote secrets: without the redaction this test fails
    with svc.db.read() as s:
        raw = json.dumps([s.get(Submission, i).result for i in ids])
    assert _leaks(raw, files, lines), "the grades quote no secret line; this test would prove nothing"
    bodies: dict[str, str] = {}
    sent = {svc.task(t).gold_patch_text().decode() for t in TASKS} | {""}
    with svc.db.read() as s:
        run_key = s.scalar(select(Run.id).where(Run.name == "leak"))
    portal = app.test_client()  # the portal's pages, signed in as the same team
    assert portal.post("/login", data={"key": api.key}).status_code == 302
    suite = svc.task(TASKS[0]).metadata.suite
    with svc.db.write() as s:
        from grader.store import phases as store_phases

        store_phases.put(s, "leak-phase", {"name": "Leak phase", "suite": suite})  # its pages are read too
    values = {
        "submission_id": ids,
        "sid": ids,
        "task_id": TASKS,
        "run": ["leak", run_key],
        "ref": ["leak", run_key],
        "slug": ["leak-phase"],
        "suite": [suite],
        "name": ["team"],
    }
    for rule in app.url_map.iter_rules():
        if "GET" not in rule.methods or rule.endpoint == "static":
            continue
        paths = [rule.rule]
        for name in rule.arguments:
            paths = [p.replace(f"<{name}>", v) for p in paths for v in values[name]]
        operation = query_names(rule.rule, "GET")  # None: a portal page
        takes = operation[0] if operation else frozenset()
        queries = [""] + [
            "?" + urlencode(q)
            for q in ({"run_id": "leak"}, {"run_id": "leak", "limit": 2}, {"a": "leak", "b": "leak"})
            if set(q) <= takes
        ]
        answered = []
        for path in paths:
            for query in queries:
                r = api.get(path + query) if operation else portal.get(path + query, follow_redirects=True)
                assert r.status_code < 500, (path + query, r.status_code)
                answered.append(r.status_code)
                # archives are opened below; a repository bundle holds only the base's history (its
                # objects are checked in tests/test_tasks.py), compressed: nothing to read as text
                binary = r.status_code == 200 and r.mimetype in ("application/gzip", "application/x-git-bundle")
                body = "" if binary else r.get_data(as_text=True)
                if rule.endpoint == "runs.predictions":
                    # the team's own patches come back to it, exactly as it sent them, and nothing else
                    assert {p["model_patch"] for p in r.json} <= sent and len(r.json) == len(TASKS)
                    body = json.dumps([{**p, "model_patch": None} for p in r.json])
                if binary and rule.endpoint == "logs.download":
                    # every file of the archive is read: the patches are the team's own, as sent
                    files = _archive(r.data)
                    assert sum(name.endswith("/patch.diff") for name in files) == len(ids)
                    for name, data in files.items():
                        if name.endswith("/patch.diff"):
                            assert data.decode() in sent, name
                        else:
                            bodies[f"{path}{query} {name}"] = data.decode()
                if rule.endpoint == "portal.submission_page" and r.status_code == 200:
                    body = _without_own_patch(body, sent)
                bodies[path + query] = body
        assert 200 in answered, (rule.rule, answered)  # each route was read for real at least once
    assert any(k.startswith("/runs/") for k in bodies) and any(k.startswith("/submissions/") for k in bodies)
    # replaying a POST returns the stored submission too
    r = api.post("/v1/submissions", json={"task_id": TASKS[0], "patch": ""}, headers={"Idempotency-Key": "k"})
    bodies["POST replay"] = r.get_data(as_text=True)
    bodies.update({f"webhook {i}": body.decode() for i, (_, body) in enumerate(rx.got)})
    assert len(rx.got) == len(ids)
    leaks = {where: _leaks(body, files, lines) for where, body in bodies.items()}
    assert {k: v for k, v in leaks.items() if v} == {}
    masked = [b for k, b in bodies.items() if k.startswith("/v1/submissions/") and MASK in b]
    assert masked, "the FAIL results should show where a secret line was masked"
    assert all(json.loads(api.get(f"/v1/submissions/{i}").get_data())["verdict"] in ("PASS", "FAIL") for i in ids)
