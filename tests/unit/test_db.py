"""grader/store/db.py: write transactions shared by threads (Database.write_shared) on SQLite:
every work committed and answered to its own thread, each seeing the works before it, and
one work's failure left to that work alone."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import func, select

from grader.errors import StoreError
from grader.store.db import Database
from grader.store.models import Team

THREADS = 12


@pytest.fixture
def db(tmp_path):
    d = Database(f"sqlite:///{tmp_path}/grader.db")
    d.migrate()
    yield d
    d.dispose()


def _held_first(db: Database, works):
    """Run works[0] in one thread, and the others in threads of their own while it holds its
    transaction (so they wait together for the next one); each thread's outcome."""
    release = threading.Event()
    outcomes: list[object] = [None] * len(works)

    def first(s):
        release.wait(30)
        return works[0](s)

    def call(i, work):
        try:
            outcomes[i] = db.write_shared(work)
        except Exception as exc:  # noqa: BLE001 - the outcome the test reads
            outcomes[i] = exc

    threads = [threading.Thread(target=call, args=(0, first))]
    threads[0].start()
    while None not in db._groups:  # the first leads the process's group (SQLite: one group, of no key)
        time.sleep(0.001)
    threads += [threading.Thread(target=call, args=(i, w)) for i, w in enumerate(works) if i]
    for t in threads[1:]:
        t.start()
    while len(db._groups[None].waiting) < len(works) - 1:  # every other work waits for the next group
        time.sleep(0.001)
    release.set()
    for t in threads:
        t.join(60)
    return outcomes


def _team(name):
    def work(s):
        before = s.scalar(select(func.count()).select_from(Team))
        s.add(Team(name=name, webhook_secret="x"))
        s.flush()
        return before, s  # the session itself, kept: an id alone may be reused once it is gone

    return work


def test_works_asked_meanwhile_share_one_transaction_and_each_sees_the_ones_before(db):
    outcomes = _held_first(db, [_team(f"t{i}") for i in range(THREADS)])
    counts = [c for c, _ in outcomes]
    sessions = {id(s) for _, s in outcomes}  # all alive, held by outcomes
    assert sorted(counts) == list(range(THREADS))  # one after another, each counting the ones before
    assert len(sessions) == 2  # the first alone, then every other work in one group
    with db.read() as s:
        assert s.scalar(select(func.count()).select_from(Team)) == THREADS


def test_a_work_that_raises_fails_alone(db):
    def broken(s):
        s.add(Team(name="broken", webhook_secret="x"))
        s.flush()
        raise ValueError("this work's own fault")

    works = [_team("t0"), _team("t1"), broken, _team("t3"), _team("t4")]
    outcomes = _held_first(db, works)
    assert isinstance(outcomes[2], ValueError)
    assert all(isinstance(o, tuple) for i, o in enumerate(outcomes) if i != 2)
    with db.read() as s:
        names = set(s.scalars(select(Team.name)))
    assert names == {"t0", "t1", "t3", "t4"}


def test_a_failed_statement_is_a_store_error_of_that_work_only(db):
    works = [_team("t0"), _team("same"), _team("same"), _team("t3")]  # the name is unique
    outcomes = _held_first(db, works)
    assert isinstance(outcomes[2], StoreError)  # the second "same": the first was stored alone before it
    assert [isinstance(o, tuple) for o in outcomes] == [True, True, False, True]
    with db.read() as s:
        assert set(s.scalars(select(Team.name))) == {"t0", "same", "t3"}


def test_one_thread_alone_is_answered_at_once(db):
    assert db.write_shared(_team("alone"))[0] == 0
    assert not db._groups  # nothing left waiting, nobody leading


# --- the host's turn to write: a flock that another process's writer waits for in the kernel --------
def test_a_turn_is_one_holders_and_the_next_waiter_gets_it_when_given(tmp_path):
    from grader.store.db import _HostTurn

    turn = _HostTurn(str(tmp_path / "grader.db.write.lock"))
    held = turn.take(5)
    assert held is not None
    assert turn.take(0.05) is None  # another descriptor, as another process's: refused while held
    got: list[int | None] = []
    waiter = threading.Thread(target=lambda: got.append(turn.take(30)))
    waiter.start()
    turn.give(held)
    waiter.join(30)
    assert got and got[0] is not None
    turn.give(got[0])


def test_a_waiter_that_gave_up_lets_go_when_the_turn_comes(tmp_path):
    from grader.store.db import _HostTurn

    turn = _HostTurn(str(tmp_path / "grader.db.write.lock"))
    held = turn.take(5)
    assert held is not None and turn.take(0.05) is None  # its waiting thread still waits in the kernel
    turn.give(held)
    again = turn.take(30)  # the given-up waiter took the turn and let go of it at once
    assert again is not None
    turn.give(again)


def test_a_second_database_on_the_file_waits_for_the_first_ones_write(tmp_path):
    """Two Database objects on one file stand for two processes: the second's write begins
    after the first's commits, and sees it."""
    url = f"sqlite:///{tmp_path}/grader.db"
    first, second = Database(url), Database(url)
    first.migrate()
    seen: list[int] = []
    inside = threading.Event()

    def later():
        inside.wait(30)
        with second.write() as s:
            seen.append(s.scalar(select(func.count()).select_from(Team)) or 0)

    t = threading.Thread(target=later)
    t.start()
    with first.write() as s:
        inside.set()
        while not second._depth:  # the second holds its process's turn and waits for the host's
            time.sleep(0.001)
        s.add(Team(name="first", webhook_secret="x"))
    t.join(30)
    assert seen == [1]
    first.dispose()
    second.dispose()


def test_threads_as_many_as_the_pool_keep_their_connections(tmp_path):
    """A pool as large as the threads that query at once keeps every connection it opened:
    a second busy moment opens none (a smaller pool closes its extra ones after each)."""
    from sqlalchemy import event, text

    db = Database(f"sqlite:///{tmp_path}/grader.db", pool_size=8)
    db.migrate()
    opened: list[int] = []
    event.listen(db.engine, "connect", lambda *_: opened.append(1))
    together = threading.Barrier(8)

    def read():
        with db.read() as s:
            s.execute(text("SELECT 1")).scalar()  # the session holds its connection until it closes
            together.wait(30)  # all 8 at once

    for _ in range(2):
        threads = [threading.Thread(target=read) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert len(opened) == 8
    db.dispose()
