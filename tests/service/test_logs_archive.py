"""A run's logs archive (GET /v1/runs/<id>/logs), issue 20, through gunicorn on SQLite and
PostgreSQL.

The archive was built from scratch for every download, whole, whatever its size: a run of
200 large refused patches gave a 154 MB archive costing 22 s of an API thread each time,
and 8 concurrent downloads were all built in full at once. Now an archive is built once
per state of the run and kept (served from disk after), each at most
GRADER_MAX_ARCHIVE_BYTES of contents (a larger run comes in pages, Link: rel=next), and
a team has at most one being built across the service (the others: 429 archive_busy)."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from grader.client import Client
from grader.store import submissions as subs
from grader.store.models import Status, Submission, Team, utcnow
from grader.store.runs import ensure_runs
from helpers.service import api_process, make_service, new_key

pytestmark = pytest.mark.service


def _store_run(svc, team: str, run: str, count: int, patch_bytes: int) -> list[str]:
    """`count` finished submissions of `run`, written straight to the database (fast)."""
    with svc.db.read() as s:
        team_id = s.query(Team).filter_by(name=team).one().id
    ensure_runs(svc.db, team_id, {run})
    rows = []
    for i in range(count):
        patch = (f"--- a/x\n+++ b/x\n@@ -0,0 +1 @@\n+{run}-{i}" + "y" * patch_bytes + "\n").encode()
        rows.append(
            Submission(
                id=subs.new_id(),
                team_id=team_id,
                task_id="calc-mean-empty",
                patch=patch,
                patch_sha256=hashlib.sha256(patch).hexdigest(),
                run_id=run,
                trial=i,
                status=Status.DONE.value,
                verdict="PATCH FAILED",
                queued_at=utcnow(),
                finished_at=utcnow(),
                attempts=1,
                errors=0,
                cached=False,
            )
        )
    with svc.db.write() as s:
        subs.insert_many(s, rows)
    return [r.id for r in rows]


def _members(data: bytes) -> dict[str, bytes]:
    t = tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")
    return {m.name: t.extractfile(m).read() for m in t.getmembers()}


def _index(data: bytes, run: str) -> dict:
    return json.loads(_members(data)[f"{run}/index.json"])


def _get(url: str, key: str, ref: str, **params) -> requests.Response:
    return requests.get(
        f"{url}/v1/runs/{ref}/logs", params=params, headers={"Authorization": f"Bearer {key}"}, timeout=300
    )


def _until_built(url: str, key: str, ref: str, **params) -> requests.Response:
    """Asked again while the team's one build is under way (429 archive_busy)."""
    deadline = time.monotonic() + 240
    while True:
        r = _get(url, key, ref, **params)
        if r.status_code != 429:
            return r
        assert r.json()["error"]["code"] == "archive_busy" and int(r.headers["Retry-After"]) >= 1
        assert time.monotonic() < deadline
        time.sleep(0.3)


def test_an_archive_is_built_once_per_state_of_the_run(database_url, redis_url, tmp_path):
    svc = make_service(database_url, redis_url)
    key = new_key(svc, "team-a")
    ids = _store_run(svc, "team-a", "big", 300, 16 * 1024)
    try:
        with api_process(database_url, redis_url, tmp_path, "--workers", "2") as url:
            with ThreadPoolExecutor(8) as pool:
                first = list(pool.map(lambda _: _get(url, key, "big"), range(8)))
            busy = [r for r in first if r.status_code == 429]
            assert all(r.json()["error"]["code"] == "archive_busy" for r in busy)
            done = [r for r in first if r.status_code == 200] + [_until_built(url, key, "big") for _ in busy]
            # one archive for all, byte for byte: built once (each build stamps its own time)
            assert len(done) == 8 and len({r.content for r in done}) == 1
            index = _index(done[0].content, "big")
            assert [s["id"] for s in index["submissions"]] == ids and index["complete"]
            # another download of the same state is served from disk
            assert _get(url, key, "big").content == done[0].content
            # a new submission is a new state: built again, with it
            more = _store_run(svc, "team-a", "big", 1, 10)
            again = _until_built(url, key, "big")
            assert again.content != done[0].content
            assert [s["id"] for s in _index(again.content, "big")["submissions"]] == ids + more
            # another format is another archive
            assert _until_built(url, key, "big", format="zip").headers["Content-Type"] == "application/zip"
    finally:
        svc.close()


def test_a_run_larger_than_an_archive_comes_in_pages(database_url, redis_url, tmp_path):
    svc = make_service(database_url, redis_url)
    key = new_key(svc, "team-a")
    ids = _store_run(svc, "team-a", "wide", 40, 8 * 1024)
    cap = 64 * 1024
    try:
        with api_process(database_url, redis_url, tmp_path, GRADER_MAX_ARCHIVE_BYTES=str(cap)) as url:
            seen, after, pages = [], "", 0
            while True:
                r = _until_built(url, key, "wide", **({"after": after} if after else {}))
                assert r.status_code == 200
                files = _members(r.content)
                index = json.loads(files.pop("wide/index.json"))
                assert sum(len(v) for v in files.values()) <= cap  # each page within the bound
                seen += [s["id"] for s in index["submissions"]]
                pages += 1
                after = r.headers.get("Grader-Next-After", "")
                assert (index["next_after"] or "") == after and index["complete"] == (not after)
                if not after:
                    assert "Link" not in r.headers
                    break
                assert f"after={after}" in r.headers["Link"] and 'rel="next"' in r.headers["Link"]
            assert seen == ids and pages >= 5  # every submission once, in order
            # the client follows the pages: NAME.tar.gz, NAME.2.tar.gz, ...
            written = Client(url, key).run_logs_pages("wide", tmp_path / "wide-logs.tar.gz")
            assert [p.name for p, _ in written][:2] == ["wide-logs.tar.gz", "wide-logs.2.tar.gz"]
            got = []
            for path, size in written:
                assert path.stat().st_size == size
                got += [s["id"] for s in _index(path.read_bytes(), "wide")["submissions"]]
            assert got == ids
            bad = _get(url, key, "wide", after="../etc")
            assert bad.status_code == 422
    finally:
        svc.close()


def test_one_build_per_team_and_other_teams_are_not_held(database_url, redis_url, tmp_path):
    """One team asks for the archives of three large runs at once, twice over: at most one is
    built at a time for it, the rest answered 429 at once; another team's archive, asked
    meanwhile, is built and served."""
    svc = make_service(database_url, redis_url)
    greedy, honest = new_key(svc, "greedy"), new_key(svc, "honest")
    for n in range(3):
        _store_run(svc, "greedy", f"r{n}", 200, 32 * 1024)
    _store_run(svc, "honest", "mine", 5, 100)
    try:
        with api_process(database_url, redis_url, tmp_path, "--workers", "2") as url:
            with ThreadPoolExecutor(7) as pool:
                mass = [pool.submit(_get, url, greedy, f"r{n % 3}", format=("zip", "tar.gz")[n // 3]) for n in range(6)]
                time.sleep(0.05)
                own = pool.submit(_until_built, url, honest, "mine").result()
                codes = sorted(f.result().status_code for f in mass)
            assert own.status_code == 200 and len(_index(own.content, "mine")["submissions"]) == 5
            assert codes.count(200) >= 1 and codes.count(429) >= 1, codes
            assert set(codes) <= {200, 429}
    finally:
        svc.close()
