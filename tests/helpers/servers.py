"""Real Redis and PostgreSQL servers for the tests, started by the tests themselves.

CI runs on a fresh machine where `scripts/setup.sh` has installed the packages but
nothing is running, so no test may lean on a system service (not even the cluster the
Debian package may have started on port 5432). Each server here gets a free port on
127.0.0.1 and a private directory, and is stopped at the end: by its fixture, or by
`atexit` if the session dies first.

    redis = RedisServer(tmp_path); redis.start(); redis.url   # redis://127.0.0.1:PORT/0
    pg = PostgresServer(tmp_path); pg.start(); pg.url         # postgresql+psycopg://grader@127.0.0.1:PORT/grader
"""

from __future__ import annotations

import atexit
import ctypes
import glob
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import redis
from psycopg import sql

INSTALL_HINT = "run bash scripts/setup.sh (it installs redis-server and postgresql)"
START_TIMEOUT = 20.0
STOP_TIMEOUT = 20.0


class ServerError(RuntimeError):
    """Raised when a test server cannot be started or stopped; the message carries the
    tail of the server's log, since that is where the reason is."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        return f"(no log at {path}: {e})"
    return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM it if the process that started it dies, so a
    test session killed with SIGKILL (where atexit cannot run) leaves no server behind."""
    PR_SET_PDEATHSIG = 1
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


class RedisServer:
    """A `redis-server` in the foreground on a free port, persisting to an AOF fsync'd on
    every write, so that `restart()` (even after `kill()`) comes back with its data."""

    def __init__(self, tmpdir: str | os.PathLike[str]):
        self.dir = Path(tmpdir)
        self.port: int | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.dir / "redis.log"

    @classmethod
    def is_available(cls) -> bool:
        return shutil.which("redis-server") is not None

    @property
    def url(self) -> str:
        if self.port is None:
            raise ServerError("the Redis server was never started")
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        """Start on a free port, or on the port of the last run: clients keep their URL."""
        if self.proc is not None:
            raise ServerError(f"the Redis server is already running on port {self.port}")
        if not self.is_available():
            raise ServerError(f"redis-server not found: {INSTALL_HINT}")
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.port is None:
            self.port = free_port()
        argv = [
            shutil.which("redis-server"),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--daemonize",
            "no",
            "--dir",
            str(self.dir),
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
        ]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.dir,
                preexec_fn=_die_with_parent,
            )
        atexit.register(self.stop)
        self._wait_for_ping()
        return self

    def _wait_for_ping(self) -> None:
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=0.5, socket_timeout=1)
        deadline = time.monotonic() + START_TIMEOUT
        try:
            while True:
                if self.proc.poll() is not None:
                    code, self.proc = self.proc.returncode, None
                    raise ServerError(
                        f"redis-server exited with status {code} on port {self.port}; "
                        f"its log ({self.log_path}):\n{log_tail(self.log_path)}"
                    )
                try:
                    if client.ping():
                        return
                except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                    pass
                if time.monotonic() > deadline:
                    self.kill()
                    raise ServerError(
                        f"redis-server did not answer PING on port {self.port} within "
                        f"{START_TIMEOUT:.0f} s; its log ({self.log_path}):\n{log_tail(self.log_path)}"
                    )
                time.sleep(0.05)
        finally:
            client.close()

    def stop(self) -> None:
        """SIGTERM and wait (SIGKILL if it hangs). Idempotent; the data stays in `dir`."""
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._forget()

    def kill(self) -> None:
        """SIGKILL, as a crash would: whatever was fsync'd to the AOF survives."""
        if self.proc is None:
            return
        self.proc.kill()
        self.proc.wait()
        self._forget()

    def _forget(self) -> None:
        self.proc = None
        atexit.unregister(self.stop)

    def restart(self, keep_data: bool = True) -> None:
        """Stop and start again on the same port; `keep_data=False` comes back empty."""
        self.stop()
        if not keep_data:
            for name in ("dump.rdb", "appendonly.aof"):
                (self.dir / name).unlink(missing_ok=True)
            shutil.rmtree(self.dir / "appendonlydir", ignore_errors=True)  # Redis 7's AOF
        self.start()

    def flush(self) -> None:
        """Empty every database (FLUSHALL)."""
        with redis.Redis.from_url(self.url) as client:
            client.flushall()


def postgres_bin_dir() -> Path | None:
    """The highest-version `/usr/lib/postgresql/<version>/bin` that has initdb, pg_ctl
    and postgres: Debian keeps them there, off the PATH."""

    def version(d: str) -> tuple[int, ...]:
        return tuple(int(p) for p in re.findall(r"\d+", Path(d).parent.name))

    found = [
        d
        for d in glob.glob("/usr/lib/postgresql/*/bin")
        if all(os.access(os.path.join(d, b), os.X_OK) for b in ("initdb", "pg_ctl", "postgres"))
    ]
    return Path(max(found, key=version)) if found else None


class PostgresServer:
    """A throw-away PostgreSQL cluster on a free port, owned by the `postgres` user when
    we are root (the server refuses to run as root), trusting every local connection.

    As root its files live in a private directory under the system temp dir, not in
    `tmpdir`: pytest's temp dirs are mode 0700 and root's, so the `postgres` user could
    not reach them. `stop()` removes the cluster's files either way; `restart()` keeps them.
    """

    USER = "grader"
    DATABASE = "grader"

    def __init__(self, tmpdir: str | os.PathLike[str]):
        self.tmpdir = Path(tmpdir)
        self.as_root = os.geteuid() == 0
        self.port: int | None = None
        self.workdir: Path | None = None
        self.bin: Path | None = None
        self.running = False

    @classmethod
    def is_available(cls) -> bool:
        if postgres_bin_dir() is None:
            return False
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                return False
            return shutil.which("runuser") is not None
        return True

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def socket_dir(self) -> Path:
        return self.workdir / "sock"

    @property
    def log_path(self) -> Path:
        return self.workdir / "postgres.log"

    def url_for(self, database: str) -> str:
        if self.port is None:
            raise ServerError("the PostgreSQL server was never started")
        return f"postgresql+psycopg://{self.USER}@127.0.0.1:{self.port}/{database}"

    @property
    def url(self) -> str:
        return self.url_for(self.DATABASE)

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a server binary, as the `postgres` user when we are root."""
        cmd = [str(self.bin / argv[0]), *argv[1:]]
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        proc = subprocess.run(
            cmd, cwd=self.workdir, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120
        )
        if check and proc.returncode != 0:
            raise ServerError(
                f"{' '.join(cmd)} exited with status {proc.returncode}:\n"
                f"{proc.stdout}{proc.stderr}\nserver log ({self.log_path}):\n{log_tail(self.log_path)}"
            )
        return proc

    def start(self) -> PostgresServer:
        """initdb a fresh cluster, start it on a free port and create database `grader`."""
        if self.running:
            raise ServerError(f"the PostgreSQL server is already running on port {self.port}")
        self.bin = postgres_bin_dir()
        if not self.is_available():
            raise ServerError(
                f"PostgreSQL server binaries (initdb, pg_ctl, postgres under /usr/lib/postgresql/*/bin"
                f"{', the postgres user, runuser' if self.as_root else ''}) not found: {INSTALL_HINT}"
            )
        if self.as_root:
            self.workdir = Path(tempfile.mkdtemp(prefix="grader-pg-"))
        else:
            self.workdir = self.tmpdir / "postgres"
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir.mkdir(parents=True)
        self.socket_dir.mkdir()
        if self.as_root:
            pw = pwd.getpwnam("postgres")
            for path in (self.workdir, self.socket_dir):
                os.chown(path, pw.pw_uid, pw.pw_gid)
        atexit.register(self.stop)
        try:
            self._initdb()
            self.port = free_port()
            self.running = True
            self._run(
                "pg_ctl",
                "-D",
                str(self.data_dir),
                "-o",
                self._server_options(),
                "-l",
                str(self.log_path),
                "-w",
                "-t",
                str(int(START_TIMEOUT)),
                "start",
            )
            with self._admin() as conn:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.DATABASE)))
        except BaseException:
            self.stop()  # the error message already holds the log's tail
            raise
        return self

    def _initdb(self) -> None:
        base = ["initdb", "-D", str(self.data_dir), "-A", "trust", "-U", self.USER, "--encoding", "UTF8"]
        first = self._run(*base, "--locale", "C.UTF-8", check=False)
        if first.returncode != 0:  # no C.UTF-8 locale on this machine: the byte-order "C" locale will do
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self._run(*base, "--no-locale")

    def _server_options(self) -> str:
        return f"-p {self.port} -k {self.socket_dir} -c listen_addresses=127.0.0.1 -c fsync=off"

    def _admin(self) -> psycopg.Connection:
        return psycopg.connect(
            host="127.0.0.1", port=self.port, user=self.USER, dbname="postgres", autocommit=True, connect_timeout=10
        )

    def create_database(self, name: str) -> str:
        """Create an empty database and return its SQLAlchemy URL."""
        with self._admin() as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        """Drop a database, closing whatever connections a test's pool left open on it."""
        with self._admin() as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def restart(self) -> None:
        """Stop (fast) and start again on the same port, with the same data."""
        if not self.running:
            raise ServerError("the PostgreSQL server is not running")
        self._run(
            "pg_ctl",
            "-D",
            str(self.data_dir),
            "-o",
            self._server_options(),
            "-l",
            str(self.log_path),
            "-m",
            "fast",
            "-w",
            "-t",
            str(int(START_TIMEOUT)),
            "restart",
        )

    def stop(self) -> None:
        """Stop the server and remove its files. Idempotent."""
        if self.workdir is None:
            return
        try:
            if self.running and (self.data_dir / "postmaster.pid").exists():
                proc = self._run(
                    "pg_ctl",
                    "-D",
                    str(self.data_dir),
                    "-m",
                    "fast",
                    "-w",
                    "-t",
                    str(int(STOP_TIMEOUT)),
                    "stop",
                    check=False,
                )
                if proc.returncode != 0:
                    self._kill_postmaster()
        finally:
            self.running = False
            atexit.unregister(self.stop)
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def _kill_postmaster(self) -> None:
        """When pg_ctl cannot stop it: SIGKILL the postmaster named in postmaster.pid,
        then its children (which exit on their own once the postmaster is gone)."""
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().split()[0])
            os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            return
        deadline = time.monotonic() + STOP_TIMEOUT
        while time.monotonic() < deadline:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                return
            if state == "Z":  # dead, waiting for a reaper that may never come (no init in a container)
                return
            time.sleep(0.05)
