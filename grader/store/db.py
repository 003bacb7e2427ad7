"""The database connection: SQLite in WAL mode by default (one file, no server, several
processes on one host), PostgreSQL by URL for several hosts. The schema is migrated by
Alembic when the service or a worker starts, under a lock so that many processes starting
together migrate once."""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import zlib
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from filelock import FileLock
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from grader import budget
from grader.errors import StoreError

MIGRATIONS = Path(__file__).parent / "migrations"
COMMIT = "database: commit (the flush, and the write to the log)"  # a stage of grader/budget.py
_LOCK_ID = zlib.crc32(b"grader-migrations")  # pg_advisory_lock key
POOL_SIZE, POOL_OVERFLOW = 16, 10  # connections kept open a process (settings.database_pool), and more at a busy moment
WRITER_TURN_WAIT = 30.0  # seconds a thread waits for its process's turn to write to SQLite (its busy timeout)


def _sqlite_engine(url: str, *, immediate: bool, pool_size: int) -> Engine:
    # no pre-ping: a file has no connection to lose, and the ping was one more statement
    # for every session of every request
    engine = create_engine(
        url,
        connect_args={"timeout": 30, "check_same_thread": False},
        pool_size=pool_size,
        max_overflow=POOL_OVERFLOW,
    )

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # SQLAlchemy's BEGIN below, not the driver's
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        # a writer takes the write lock up front: a read that later upgrades to a write can
        # fail at once with SQLITE_BUSY, whatever the busy timeout
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


T = TypeVar("T")


class _HostTurn:
    """The turn to write to one SQLite file among the processes of this host: an exclusive
    flock on a file beside it (PATH.write.lock), taken before BEGIN IMMEDIATE and given back
    after the transaction ends. SQLite keeps no queue of writers: one that finds the file
    locked sleeps and polls again, up to 100 ms apart, and while one API process's writes
    follow one another with no gap between them, the other's writer can lose poll after poll
    (seconds, at 32 clients over two processes). A writer waiting for the flock is woken by
    the kernel as soon as the holder lets go. The flock goes with its process if that dies;
    SQLite's busy timeout still stands behind it for writers that take no turn (a migration,
    the sqlite3 shell)."""

    def __init__(self, path: str):
        self.path = path

    def take(self, timeout: float) -> int | None:
        """A descriptor that holds the turn (give it back with `give`), or None if the turn
        did not come within `timeout` seconds."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)  # one per turn: flocks of two do not mix
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            pass
        except BaseException:
            os.close(fd)
            raise
        # waited for in the kernel, by a thread of its own, so that the wait can end at `timeout`
        outcome: list[str] = []
        guard, came = threading.Lock(), threading.Event()

        def wait() -> None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                got = "taken"
            except OSError:
                got = "failed"
            with guard:
                if outcome:  # given up on: let go at once
                    os.close(fd)
                    return
                outcome.append(got)
            came.set()

        threading.Thread(target=wait, name="grader-sqlite-turn", daemon=True).start()
        came.wait(timeout)
        with guard:
            if outcome == ["taken"]:
                return fd
            if outcome:  # failed
                os.close(fd)
            outcome.append("given up")
        return None

    @staticmethod
    def give(fd: int) -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)  # even if a forked child holds a copy of the descriptor
        finally:
            os.close(fd)


class _Shared(Generic[T]):
    """One thread's work waiting for a shared write transaction (Database.write_shared)."""

    __slots__ = ("work", "done", "result", "error", "lead", "ran")

    def __init__(self, work: Callable[[Session], T]):
        self.work = work
        self.done = threading.Event()
        self.result: T | None = None
        self.error: BaseException | None = None
        self.lead = False  # woken to run the next group, not because its work is done
        self.ran = False  # its result is in, committed

    def finish(self, result: T) -> None:
        self.result, self.ran = result, True

    def outcome(self) -> T:
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]  # set by finish, unless error is


class _Group:
    """The works of one key waiting for their shared transaction, and whether a thread is
    running (or about to run) one."""

    __slots__ = ("waiting", "leading")

    def __init__(self) -> None:
        self.waiting: list[_Shared[Any]] = []
        self.leading = False


S = TypeVar("S", Session, Connection)


@contextlib.contextmanager
def _closing(session: S) -> Iterator[S]:
    try:
        yield session
    finally:
        with budget.stage("database: session close (rollback, connection back to the pool)"):
            session.close()


class Database:
    """Sessions for reading and for writing; `write()` commits or rolls back as a unit.
    `pool_size`: the connections kept open (settings.database_pool): at least the threads
    that query at once, or the pool opens a connection and closes it again at every busy
    moment (on PostgreSQL a new server process each time: 313 in a run of 3,266 POSTs at 16
    threads a process and a pool of 5)."""

    def __init__(self, url: str, *, pool_size: int = POOL_SIZE):
        self.url = url
        parsed = make_url(url)
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        if self.is_sqlite:
            path = parsed.database
            if path and path != ":memory:":
                Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
            self.engine = _sqlite_engine(url, immediate=False, pool_size=pool_size)
            self._write_engine = _sqlite_engine(url, immediate=True, pool_size=pool_size)
            lock = f"{Path(path).expanduser()}.write.lock" if path and path != ":memory:" else None
            self._host_turn = _HostTurn(lock) if lock else None
        else:
            self.engine = create_engine(url, pool_pre_ping=True, pool_size=pool_size, max_overflow=POOL_OVERFLOW)
            self._write_engine = self.engine
            self._host_turn = None
        self._read = sessionmaker(self.engine, expire_on_commit=False)
        self._writer = sessionmaker(self._write_engine, expire_on_commit=False)
        # SQLite lets one writer in at a time and keeps no queue: a writer that finds the
        # lock taken sleeps and tries again, up to 100 ms apart, so with many request
        # threads writing at once some lose for seconds while others get in at once. The
        # threads of one process take their turns here instead (woken as soon as the
        # previous one commits), and the processes of the host theirs by the host's turn
        # (_HostTurn, a flock). They serialize nothing SQLite did not already; PostgreSQL
        # needs no such turn.
        self._turn = threading.RLock() if self.is_sqlite else None
        self._depth = 0  # the turn's holder's writes in progress (one unless nested); only it reads this
        self._groups: dict[Hashable, _Group] = {}  # by key: the works waiting for the next shared transaction
        self._shared_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Database({make_url(self.url).render_as_string(hide_password=True)})"

    @contextlib.contextmanager
    def read(self) -> Iterator[Session]:
        with self._wrap(), _closing(self._read()) as session:
            yield session

    @contextlib.contextmanager
    def rows(self) -> Iterator[Connection]:
        """A connection for a read of rows, not objects: a session's bookkeeping costs more
        than the reads every request makes (a key's team, the image a task was last graded
        in) take themselves."""
        with self._wrap(), _closing(self.engine.connect()) as conn:
            yield conn

    @contextlib.contextmanager
    def write(self) -> Iterator[Session]:
        with self._wrap(), self._writer_turn(), _closing(self._writer()) as session, session.begin():
            yield session

    def write_shared(self, work: Callable[[Session], T], key: Hashable = None) -> T:
        """What `work` returns, having run it in a write transaction that is committed before
        this returns. That transaction may be shared with the works of other threads of this
        process that asked meanwhile: the first of them runs every work waiting then, one
        after another in one transaction, and commits once, and the next group's first
        thread takes over after it. What a group shares is what each work would otherwise
        wait for in turn: on SQLite, which lets one writer in at a time, the turn, BEGIN and
        COMMIT and the hand-over from thread to thread, which under load took longer than the
        works themselves (every statement under the write lock waits for the interpreter's
        lock again); on PostgreSQL, the lock a work takes on the row of `key` (intake's: the
        team), which the works of one key took one after another. On PostgreSQL only works of
        the same key are grouped (other keys' go on at once, apart), and a work of no key has
        a transaction of its own; on SQLite every work is grouped. Each work sees the works
        before it, as it would have after their commits, so what it decides (a quota's room,
        a key taken) is what the same works one after another decide.

        A work that raises rolls the transaction back, and every work of the group is run
        again alone in a transaction of its own: one thread's failure is never another's.
        So `work` may run twice and must change nothing but the session until it returns,
        nor write through another session."""
        if self._turn is None and key is None:
            with self.write() as s:
                return work(s)
        key = None if self._turn is not None else key
        me = _Shared(work)
        with self._shared_lock:
            group = self._groups.setdefault(key, _Group())
            group.waiting.append(me)
            lead, group.leading = not group.leading, True
        if not lead:
            with budget.stage("database: waiting for a shared write (run by another thread)"):
                me.done.wait()
            if not me.lead:
                return me.outcome()
        try:
            with self._shared_lock:
                works, group.waiting = group.waiting, []
            self._run_group(works)
        finally:
            with self._shared_lock:
                if group.waiting:  # asked while the group ran: the first of them runs the next
                    group.waiting[0].lead = True
                    group.waiting[0].done.set()
                else:
                    group.leading = False
                    del self._groups[key]
        return me.outcome()

    def _run_group(self, group: list[_Shared[Any]]) -> None:
        try:
            try:
                with self.write() as s:
                    results = [w.work(s) for w in group]
            except Exception as exc:
                if len(group) == 1:
                    group[0].error = exc
                    return
                for w in group:  # each alone: the failure stays the work's that raised
                    try:
                        with self.write() as s:
                            result = w.work(s)
                        w.finish(result)
                    except Exception as alone:
                        w.error = alone
                return
            for w, result in zip(group, results, strict=True):
                w.finish(result)
        finally:
            for w in group:
                if not w.ran and w.error is None:
                    w.error = StoreError("database: the shared write transaction did not finish")
                w.done.set()

    @contextlib.contextmanager
    def _writer_turn(self) -> Iterator[None]:
        if self._turn is None:
            yield
            return
        with budget.stage("database: waiting for the process's write turn"):
            got = self._turn.acquire(timeout=WRITER_TURN_WAIT)
        if not got:
            raise StoreError(
                f"database: no turn to write within {WRITER_TURN_WAIT:g} s (another thread of this process held it)"
            )
        fd = None
        try:
            self._depth += 1
            if self._host_turn is not None and self._depth == 1:
                with budget.stage("database: waiting for the host's write turn (another process's)"):
                    fd = self._host_turn.take(WRITER_TURN_WAIT)
                if fd is None:
                    raise StoreError(
                        f"database: no turn to write within {WRITER_TURN_WAIT:g} s (another process held it)"
                    )
            yield
        finally:
            self._depth -= 1
            try:
                if fd is not None:
                    self._host_turn.give(fd)  # type: ignore[union-attr]  # fd is only taken with one
            finally:
                self._turn.release()

    @staticmethod
    @contextlib.contextmanager
    def _wrap() -> Iterator[None]:
        try:
            yield
        except SQLAlchemyError as exc:
            raise StoreError(f"database: {exc.__class__.__name__}: {str(exc).splitlines()[0]}") from exc

    def time_statements(self) -> None:
        """Count and time every statement, and every commit, as a stage of the request it runs
        in (grader/budget.py)."""
        for engine in {self.engine, self._write_engine}:
            event.listen(engine, "before_cursor_execute", lambda _c, _cur, sql, *_: budget.begin_statement(sql))
            event.listen(engine, "after_cursor_execute", lambda *_: budget.end_statement())
            event.listen(engine, "handle_error", lambda *_: budget.end_statement())
        for sessions in (self._read, self._writer):
            event.listen(sessions, "before_commit", lambda *_: budget.begin(COMMIT))
            event.listen(sessions, "after_commit", lambda *_: budget.end(COMMIT))
            event.listen(sessions, "after_rollback", lambda *_: budget.end(COMMIT))  # a commit that failed

    def ping(self) -> None:
        with self.read() as s:
            s.execute(text("SELECT 1"))

    def dispose(self) -> None:
        self.engine.dispose()
        self._write_engine.dispose()

    # --- schema -------------------------------------------------------------------------
    def _alembic(self, connection: Connection) -> Config:
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        cfg.attributes["connection"] = connection
        return cfg

    def current_revision(self) -> str | None:
        with self._wrap(), self.engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()

    def head_revision(self) -> str:
        head = ScriptDirectory(str(MIGRATIONS)).get_current_head()
        assert head is not None  # the migrations ship with the package
        return head

    def migrate(self) -> None:
        """Bring the schema to the newest revision; safe when many processes start together."""
        with self._wrap(), self._migration_lock():
            with self._write_engine.connect() as conn:
                command.upgrade(self._alembic(conn), "head")
                conn.commit()

    @contextlib.contextmanager
    def _migration_lock(self) -> Iterator[None]:
        if self.is_sqlite:
            path = make_url(self.url).database
            lock = FileLock(f"{path}.migrate.lock") if path and path != ":memory:" else contextlib.nullcontext()
            with lock:
                yield
            return
        with self.engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _LOCK_ID})
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _LOCK_ID})
                conn.commit()
