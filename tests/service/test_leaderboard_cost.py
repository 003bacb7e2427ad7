"""What a read of the leaderboard costs, whatever anyone publishes (issue 20), on SQLite and
PostgreSQL.

One team published 1,000 one-submission runs in about 3 s; the anonymous leaderboard page
and /v1/leaderboard then took 41-44 s each (1 s before), every figure of every public run
computed for every read, and 32 anonymous readers made other teams' requests time out.
Now each run's figures are stored with it (computed again only when it changed) and the
board is read a page at a time from them: a page of 10,000 public runs costs what a page
of 10 does; publishing is bounded per team and day (tests/service/test_run_integrity.py)."""

from __future__ import annotations

import contextlib
import multiprocessing
import secrets
import statistics
import threading
import time
from contextlib import contextmanager

import pytest
from sqlalchemy import event, select

from grader import runs as R
from grader.store import runs as store_runs
from grader.store import submissions as subs
from grader.store.models import Run, Submission
from helpers.hostile_clients import many_public_runs
from helpers.proxy import PROXIED, nginx_in_front, source_session
from helpers.service import Api, api_process, new_key, submit_run

pytestmark = pytest.mark.service
TASK = "calc-mean-empty"
VICTIM, HOSTILE = "127.0.0.2", "127.0.0.3"  # two client addresses of this machine


def _finish(svc, ids: dict[str, str]) -> None:
    from grader.verdict import Provenance, Result, Verdict

    for sid, verdict in ids.items():
        with svc.db.read() as s:
            row = s.get(Submission, sid)
        c = subs.claim(svc.db, sid, row.job_id, "test", 60)
        subs.finish(
            svc.db,
            c,
            Result(
                task_id=row.task_id,
                verdict=Verdict(verdict),
                explanation="set by the test",
                provenance=Provenance(patch_sha256=row.patch_sha256, grader_version="t"),
            ),
        )


def _publish(api: Api, run: str) -> None:
    r = api.client.patch(f"/v1/runs/{run}", json={"public": True}, headers=api._h(None))
    assert r.status_code == 200, r.json


@contextmanager
def _counting(svc, monkeypatch):
    """Counts the SQL statements run and the runs whose figures are computed (R._view)."""
    seen = {"statements": [], "views": 0}
    real = R._view

    def view(*a, **kw):
        seen["views"] += 1
        return real(*a, **kw)

    monkeypatch.setattr(R, "_view", view)
    listener = lambda conn, cur, statement, *a: seen["statements"].append(statement)  # noqa: E731
    engines = {svc.db.engine, svc.db._write_engine}
    for e in engines:
        event.listen(e, "before_cursor_execute", listener)
    try:
        yield seen
    finally:
        for e in engines:
            event.remove(e, "before_cursor_execute", listener)
        monkeypatch.setattr(R, "_view", real)


def _ten_public_runs(app, svc) -> list[Api]:
    teams = [Api(app.test_client(), new_key(svc, f"team-{n}")) for n in range(2)]
    for n in range(10):
        api = teams[n % 2]
        _finish(svc, submit_run(api, f"run-{n}", {TASK: ["PASS" if n % 3 else "FAIL"]}, patch=f"p{n}"))
        _publish(api, f"run-{n}")
    return teams


def _timed(client, path: str, rounds: int = 7) -> float:
    took = []
    for _ in range(rounds):
        t = time.perf_counter()
        r = client.get(path)
        took.append(time.perf_counter() - t)
        assert r.status_code == 200
    return statistics.median(took)


def test_a_page_costs_the_same_for_sixty_runs_and_ten_thousand(app, svc, monkeypatch):
    """Sixty runs fill a page of the API (10) and of the portal (50): the baseline."""
    _ten_public_runs(app, svc)
    anyone = app.test_client()
    assert len(anyone.get("/v1/leaderboard").json["items"]) == 10  # the figures computed and stored
    cost, have = {}, 10
    for runs in (60, 10_000):
        many_public_runs(svc.db, runs - have, "run-1", task=TASK)
        have = runs
        with _counting(svc, monkeypatch) as seen:
            api = anyone.get("/v1/leaderboard?limit=10").json
            page = anyone.get("/leaderboard")
        assert api["total"] == runs and len(api["items"]) == 10 and page.status_code == 200
        assert seen["views"] == 0, "a page computed figures"
        assert not any("FROM submissions" in q or "JOIN submissions" in q for q in seen["statements"])
        cost[runs] = (
            len(seen["statements"]),
            _timed(anyone, "/v1/leaderboard?limit=10"),
            _timed(anyone, "/leaderboard"),
        )
    assert cost[60][0] == cost[10_000][0]  # as many statements
    # the times are printed, not asserted (a test holds no timing: this machine is shared);
    # benchmarks/fairness.py's mass-publish attack measures the board's read time
    for n, what in ((1, "the API's page"), (2, "the portal's page")):
        print(f"{what}: {cost[10_000][n] * 1000:.0f} ms with 10,000 runs, {cost[60][n] * 1000:.0f} with 60")


def test_stored_figures_follow_every_change(app, svc, monkeypatch):
    """A run published with grades still to come: each verdict, cancel or hiding changes
    its stored figures, computed again for it alone; they always equal its figures
    computed afresh."""
    host = Api(app.test_client(), new_key(svc, "host", admin=True))
    team = Api(app.test_client(), new_key(svc, "team-a"))
    ids = list(submit_run(team, "live", {TASK: ["PASS", "FAIL", "PASS"], "notes-merge-greeting": ["PASS"]}))
    _finish(svc, {ids[0]: "PASS"})
    other = list(submit_run(team, "other", {TASK: ["FAIL"]}, patch="o"))
    _finish(svc, {other[0]: "FAIL"})
    _publish(team, "live")
    _publish(team, "other")
    anyone = app.test_client()

    def stored_equals_computed() -> dict:
        board = {x["name"]: x for x in anyone.get("/v1/leaderboard?include_incomplete=1").json["items"]}
        with svc.db.read() as s:
            live = s.scalar(select(Run).where(Run.name == "live"))
        fresh = R.run_view(svc, live, host=True)
        fresh.pop("integrity")
        if "live" in board:
            shown = dict(board["live"])
            shown.pop("rank")
            assert shown == {**fresh, "metrics": R.board_metrics(fresh["metrics"])}  # without the per-task table
        assert team.get("/v1/runs/live").json == fresh  # the run's own view, stored, too
        return board

    assert stored_equals_computed()["live"]["pending"] == 3
    for change in (
        lambda: _finish(svc, {ids[1]: "FAIL"}),
        lambda: team.delete(f"/v1/submissions/{ids[2]}"),
        lambda: _finish(svc, {ids[3]: "ERROR"}),
    ):
        change()
        with _counting(svc, monkeypatch) as seen:
            board = stored_equals_computed()
        assert seen["views"] <= 2  # "live" again (the board, then its page's refresh finds it done), not "other"
    assert board["live"]["errors"] == 1 and board["live"]["pending"] == 0 and not board["live"]["complete"]
    live_id = team.get("/v1/runs/live").json["id"]
    hidden = host.client.patch(f"/v1/runs/{live_id}", json={"hidden": True}, headers=host._h(None))
    assert hidden.status_code == 200
    assert "live" not in stored_equals_computed()


def test_pages_of_the_board_rank_as_the_whole(app, svc):
    teams = [Api(app.test_client(), new_key(svc, f"team-{n}")) for n in range(3)]
    for n in range(25):
        api = teams[n % 3]
        verdicts = {TASK: ["PASS"] * (n % 4) + ["FAIL"], "notes-merge-greeting": ["PASS" if n % 2 else "FAIL"]}
        _finish(svc, submit_run(api, f"r{n}", verdicts, patch=f"q{n}"))
        _publish(api, f"r{n}")
    anyone = app.test_client()
    whole = anyone.get("/v1/leaderboard?limit=500").json
    assert whole["total"] == whole["ranked"] == 25 and whole["next_offset"] is None
    assert [x["rank"] for x in whole["items"]] == list(range(1, 26))
    paged, offset = [], 0
    while offset is not None:
        page = anyone.get(f"/v1/leaderboard?limit=10&offset={offset}").json
        paged += page["items"]
        offset = page["next_offset"]
    assert paged == whole["items"]
    keys = [R.rank_key(x) for x in whole["items"]]
    assert keys == sorted(keys, reverse=True)
    # the client reads every page; the portal pages by 50, sorts by a column, ranks as the board does
    assert len(anyone.get("/v1/leaderboard?limit=7&offset=21").json["items"]) == 4
    assert anyone.get("/v1/leaderboard?limit=0").status_code == 422
    assert anyone.get("/v1/leaderboard?offset=-1").status_code == 422
    # a page past the end, or past what a database's OFFSET can hold, is an empty page
    for far in ("3", str(2**62), "9" * 30):
        r = anyone.get(f"/leaderboard?page={far}")
        assert r.status_code == 200 and ">r0<" not in r.get_data(as_text=True), (far, r.status_code)
    by_name = anyone.get("/leaderboard?sort=name&dir=asc").get_data(as_text=True)
    assert by_name.index(">r0<") < by_name.index(">r1<") < by_name.index(">r10<") < by_name.index(">r2<")


def test_anonymous_readers_share_one_rendering_per_state_of_the_board(app, svc, monkeypatch):
    """Readers without a key get what another got for the same board (one board read for
    all of them), and a change (a run published) is seen by the very next read."""
    teams = _ten_public_runs(app, svc)
    calls = []
    real = R.leaderboard
    monkeypatch.setattr(R, "leaderboard", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    anyone = app.test_client()
    for path in ("/v1/leaderboard", "/leaderboard"):
        first = anyone.get(path).get_data()
        assert all(anyone.get(path).get_data() == first for _ in range(5))
    assert len(calls) == 2  # once for the API, once for the portal
    teams[0].get("/v1/leaderboard")  # a keyed read is never served from it
    assert len(calls) == 3
    _finish(svc, submit_run(teams[0], "late", {TASK: ["PASS"]}, patch="late"))
    teams[0].client.patch("/v1/runs/late", json={"public": True}, headers=teams[0]._h(None))
    assert "late" in [x["name"] for x in anyone.get("/v1/leaderboard").json["items"]]
    assert ">late<" in anyone.get("/leaderboard").get_data(as_text=True)


def test_a_changed_task_set_computes_every_run_again(app, svc, monkeypatch):
    _ten_public_runs(app, svc)
    anyone = app.test_client()
    anyone.get("/v1/leaderboard")
    monkeypatch.setattr(R, "figures_key", lambda svc: "another task set")
    with _counting(svc, monkeypatch) as seen:
        assert len(anyone.get("/v1/leaderboard").json["items"]) == 10
    assert seen["views"] == 10
    with _counting(svc, monkeypatch) as seen:
        anyone.get("/v1/leaderboard")
    assert seen["views"] == 0


def test_a_page_of_the_board_reads_no_per_task_table(app, svc, monkeypatch):
    """A run's stored figures hold its per-task table (230 KB for 2,000 tasks: a page of
    100 such runs read and sent 20 MB, benchmarks/board.py); the board shows and reads
    what it draws, a few KB a run, and the run's own view keeps the table."""
    team = Api(app.test_client(), new_key(svc, "team-a"))
    every = {t.id: ["PASS" if n % 2 else "FAIL"] for n, t in enumerate(svc.tasks)}
    _finish(svc, submit_run(team, "wide", every))
    _publish(team, "wide")
    anyone = app.test_client()
    anyone.get("/v1/leaderboard")  # its figures computed and stored
    with _counting(svc, monkeypatch) as seen:
        (item,) = anyone.get("/v1/leaderboard").json["items"]
        assert anyone.get("/leaderboard").status_code == 200
    assert "per_task" not in item["metrics"] and item["metrics"]["task_set"]["tasks"] == len(every)
    assert seen["views"] == 0
    assert not any("run_figures.figures" in q for q in seen["statements"]), "a page read a run's whole figures"
    assert any("run_figures.summary" in q for q in seen["statements"])
    own = team.get("/v1/runs/wide").json["metrics"]
    assert len(own["per_task"]) == len(every) and {k: v for k, v in own.items() if k != "per_task"} == item["metrics"]
    # a filtered board is the same shape, and so is what it keeps in memory
    (filtered,) = anyone.get("/v1/leaderboard?suite=examples").json["items"]
    assert "per_task" not in filtered["metrics"] and filtered["metrics"]["resolved"] == item["metrics"]["resolved"]


def test_many_runs_submissions_are_read_a_share_at_a_time(app, svc, monkeypatch):
    """Computing many runs' figures (the stored ones after a change of every run, a
    filtered board) reads their submissions about ROWS_A_READ at a time, never the whole
    board's in one query (2,000,000 submissions took the API process past 8 GB)."""
    teams = [Api(app.test_client(), new_key(svc, f"team-{n}")) for n in range(2)]
    for n in range(12):
        api = teams[n % 2]
        verdicts = {TASK: ["PASS"], "notes-merge-greeting": ["FAIL"], "calc-median-even": ["PASS" if n % 3 else "FAIL"]}
        _finish(svc, submit_run(api, f"run-{n}", verdicts, patch=f"s{n}"))
        _publish(api, f"run-{n}")
    monkeypatch.setattr(R, "ROWS_A_READ", 6)  # 2 runs of 3 submissions a read, after the first (R.FIRST_READ runs)
    reads: list[int] = []
    real = store_runs.metric_rows
    monkeypatch.setattr(
        store_runs, "metric_rows", lambda s, ids: reads.append(sum(map(len, (got := real(s, ids)).values()))) or got
    )
    anyone = app.test_client()
    for path in ("/v1/leaderboard", "/v1/leaderboard?suite=examples&since=2020-01-01"):
        reads.clear()
        with _counting(svc, monkeypatch) as seen:
            items = anyone.get(path).json["items"]
        queries = sum("JOIN submissions" in q for q in seen["statements"])
        assert queries > 1, f"{path}: every run's submissions read in one query"
        assert len(items) == 12 and sum(reads) == 36 and len(reads) == queries, (path, reads)
        assert reads[0] == 3 * R.FIRST_READ and max(reads[1:]) <= R.ROWS_A_READ, (path, reads)


def test_a_long_computation_of_every_runs_figures_holds_no_reader(app, svc, monkeypatch):
    """While another thread of the process computes figures (every run's again after a
    new task set or version: minutes for 1,000 runs of 2,000 tasks, when every reader of
    the process used to wait), a read of the board waits WAIT_FOR_REFRESH for it and then
    reads the board as stored; a run's own view computes that run itself meanwhile."""
    teams = _ten_public_runs(app, svc)
    anyone = app.test_client()
    stored = anyone.get("/v1/leaderboard").json["items"]
    monkeypatch.setattr(R, "figures_key", lambda svc: "another task set")  # every run to compute again
    monkeypatch.setattr(R, "WAIT_FOR_REFRESH", 0.05)
    answers = {}

    def read(name: str, client, path: str) -> None:
        answers[name] = client.get(path)

    with _counting(svc, monkeypatch) as seen:
        assert R._REFRESHING.acquire(timeout=10)  # another thread's long computation
        try:
            for name, client, path in (("board", anyone, "/v1/leaderboard"), ("run", teams[1], "/v1/runs/run-1")):
                reader = threading.Thread(target=read, args=(name, client, path), daemon=True)
                reader.start()
                reader.join(timeout=60)
                assert not reader.is_alive(), f"{path} waited for the other computation"
        finally:
            R._REFRESHING.release()
        assert answers["board"].status_code == answers["run"].status_code == 200
        assert answers["board"].json["items"] == stored  # as stored, until computed
        assert seen["views"] == 1 and answers["run"].json["name"] == "run-1"  # its own figures, computed
    with _counting(svc, monkeypatch) as seen:
        assert len(anyone.get("/v1/leaderboard").json["items"]) == 10
    assert seen["views"] == 9  # the others, now that nothing else computes


def test_the_migration_keeps_the_boards_part_of_the_stored_figures(database_url):
    """Migration 0015 fills each run's board figures from its stored ones, in the database:
    the same without the per-task table, and no run's figures computed again."""
    import sqlalchemy as sa
    from alembic import command

    from grader.store.db import Database
    from grader.store.models import RunFigures

    db = Database(database_url)
    with db._write_engine.connect() as conn:
        command.upgrade(db._alembic(conn), "0014")
        conn.commit()
    figures = {"name": "r", "metrics": {"resolved": {"numerator": 1}, "per_task": {"t": {"n": 1}}, "usage": {}}}
    with db._write_engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO teams (name, admin, webhook_secret, created_at) VALUES ('t', false, 's', '2025-01-01')"
            )
        )
        team = conn.execute(sa.text("SELECT id FROM teams")).scalar()
        conn.execute(
            sa.text(
                "INSERT INTO runs (id, team_id, name, public, baseline, hidden, verified, created_at, figures_stale) "
                "VALUES ('0123456789abcdef', :team, 'r', true, false, false, false, '2025-01-01', false)"
            ),
            {"team": team},
        )
        old = sa.table("run_figures", sa.column("run_id"), sa.column("figures", sa.JSON()))
        conn.execute(sa.insert(old).values(run_id="0123456789abcdef", figures=figures))
    db.migrate()
    try:
        with db.read() as s:
            stored = s.get(RunFigures, "0123456789abcdef")
            run = s.get(Run, "0123456789abcdef")
        assert stored.figures == figures and not run.figures_stale
        assert stored.summary == {"name": "r", "metrics": {"resolved": {"numerator": 1}, "usage": {}}}
    finally:
        db.dispose()


# --- through gunicorn ------------------------------------------------------------------------------------
READ_EVERY = 0.25  # seconds a reader waits between reads: four a second each, 128 a second together


def _readers(url: str, n: int, stop, answers) -> None:
    """8 anonymous readers of the board in this process (from 127.0.0.3), each reading four
    times a second, every other one the API's first page, the others the portal's first
    five pages in turn; a 429 is not waited out. Once told to stop they go on until this
    process has been served the board five times (or a minute more has passed), so that how many
    reads were served depends on the service, not on how quickly the victim's rounds went."""
    codes: list[int] = []
    lock = threading.Lock()
    give_up: float | None = None  # set when told to stop

    def more() -> bool:
        nonlocal give_up
        if not stop.is_set():
            return True
        with lock:
            if give_up is None:
                give_up = time.monotonic() + 60
            return codes.count(200) < 5 and time.monotonic() < give_up

    def reader(i: int) -> None:
        own, page = source_session(HOSTILE), 0
        while more():
            page += 1
            path = "/v1/leaderboard" if i % 2 else f"/leaderboard?page={page % 5 + 1}"
            r = own.get(f"{url}{path}", timeout=120)
            with lock:
                codes.append(r.status_code)
            if stop.wait(READ_EVERY):  # told to stop: the same pace, not a burst
                time.sleep(READ_EVERY)

    threads = [threading.Thread(target=reader, args=(8 * n + i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    answers.put(codes)


# Two of the four pairings: the deployment as shipped (nginx in front, PostgreSQL) and gunicorn
# alone on SQLite (local use). What holds the readers back is the API's share for requests
# without a key and nginx's rate, neither of which reads the database; what a read of the
# board costs on each database is test_a_page_costs_the_same_for_sixty_runs_and_ten_thousand's.
@pytest.mark.parametrize(
    ("database_url", "via"), [("sqlite", "gunicorn"), ("postgresql", "nginx")], indirect=["database_url"]
)
def test_anonymous_readers_of_a_large_board_leave_other_teams_served(app, svc, database_url, redis_url, tmp_path, via):
    """10,000 public runs and 32 anonymous readers of the board (API and portal pages), four
    reads a second each (before, each read took 41-44 s and 32 readers held every thread):
    another team's POSTs and GETs are all answered meanwhile (their times printed; the
    benchmark holds the 3x target). Past the share of a process
    that requests without a key have together (and through nginx, past an address's
    anonymous requests a second) a reader is answered 429 at once."""
    _ten_public_runs(app, svc)
    app.test_client().get("/v1/leaderboard")
    many_public_runs(svc.db, 9_990, "run-1", task=TASK)
    victim = new_key(svc, "victim")
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(
            api_process(database_url, redis_url, tmp_path, "--workers", "2", **(PROXIED if via == "nginx" else {}))
        )
        if via == "nginx":
            url = stack.enter_context(nginx_in_front(url))
        http = source_session(VICTIM, victim)

        def rounds(n: int) -> dict[str, list[float]]:
            out: dict[str, list[float]] = {"POST": [], "GET": []}
            for _ in range(n):
                t = time.perf_counter()
                r = http.post(
                    f"{url}/v1/submissions", json={"task_id": TASK, "patch": secrets.token_hex(8)}, timeout=120
                )
                out["POST"].append(time.perf_counter() - t)
                assert r.status_code == 202
                t = time.perf_counter()
                assert http.get(f"{url}/v1/submissions/{r.json()['id']}", timeout=120).status_code == 200
                out["GET"].append(time.perf_counter() - t)
                time.sleep(0.05)
            return out

        rounds(3)
        idle = rounds(20)
        # the readers in processes of their own: in this one they would take the GIL from
        # the victim's client, and its timings would measure this process, not the service
        ctx = multiprocessing.get_context("fork")
        stop, answers = ctx.Event(), ctx.Queue()
        readers = [ctx.Process(target=_readers, args=(url, n, stop, answers), daemon=True) for n in range(4)]
        for p in readers:
            p.start()
        time.sleep(1.0)
        try:
            under = rounds(20)
        finally:
            stop.set()
            statuses = [answers.get(timeout=120) for _ in readers]
            for p in readers:
                p.join(timeout=120)
        after = rounds(20)  # idle again: this machine is shared, and its load drifts
    codes = [code for got in statuses for code in got]
    # every read answered: the board, or at once 429 (past the anonymous share, or nginx's rate)
    assert codes.count(200) >= 20 and set(codes) <= {200, 429}, set(codes)
    # every round of the victim was answered (202, then 200: asserted in rounds) while the
    # readers ran; how long it took is printed, not asserted (benchmarks/fairness.py measures it)
    assert len(under["POST"]) == len(under["GET"]) == 20
    for kind in ("POST", "GET"):
        base, hit = max(max(idle[kind]), max(after[kind])), max(under[kind])  # p99 of 20
        print(f"{kind}: {hit * 1000:.0f} ms under the readers, {base * 1000:.0f} idle")
