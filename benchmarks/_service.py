"""What the service benchmarks share: a private service on this machine (Redis, `grader
serve` under gunicorn, optionally `grader worker`) in a temporary directory, its teams'
keys, the cheap patches, and percentiles.

    with Running(env={...}, workers=1) as svc:
        key = svc.key("victim")
        requests.get(f"{svc.url}/v1/account", headers={"Authorization": f"Bearer {key}"})

SQLite in the temporary directory unless `database_url` names another (an empty
PostgreSQL database, say). Every process it starts is stopped, and the directory removed,
when the block ends.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent / "grader"
TASK = "calc-mean-empty"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cheap_patch(i: int | str, pad: int = 0) -> str:
    """The i-th unique patch refused by the grading core's vetting (a path outside the
    repository): it takes the whole path through the service and is PATCH FAILED without
    a container. `pad` bytes lengthen its added line."""
    return f"--- a/../outside-{i}.txt\n+++ b/../outside-{i}.txt\n@@ -0,0 +1 @@\n+{i}{'x' * pad}\n"


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by the nearest rank below: p99 of 100 values is the 99th."""
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * q))]


def figures(ms: list[float]) -> str:
    if not ms:
        return "no requests"
    q = sorted(ms)
    return f"n={len(q)} p50={statistics.median(q):.0f} ms p99={percentile(q, 0.99):.0f} ms max={q[-1]:.0f} ms"


def wait_ready(url: str, tries: int = 120) -> None:
    for _ in range(tries):
        try:
            if requests.get(f"{url}/readyz", timeout=2).ok:
                return
        except requests.RequestException:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"the service at {url} did not become ready")


class Running:
    """Redis, the API (`grader serve`, `processes` gunicorn processes) and `workers`
    grading workers (none: what is accepted stays queued), with `env` over this process's
    environment. `appendonly`: Redis keeps an AOF (as a deployment would)."""

    def __init__(
        self,
        env: dict[str, str] | None = None,
        *,
        database_url: str | None = None,
        workers: int = 0,
        processes: int = 2,
        threads: int | None = None,
        appendonly: bool = True,
        prefix: str = "grader-bench.",
    ):
        self.state = Path(tempfile.mkdtemp(prefix=prefix))
        self.redis_port, self.api_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.api_port}"
        self.database_url = database_url or f"sqlite:///{self.state}/grader.db"
        self.env = {
            **os.environ,
            "GRADER_REDIS_URL": f"redis://127.0.0.1:{self.redis_port}/0",
            "GRADER_DATABASE_URL": self.database_url,
            **(env or {}),
        }
        self.workers, self.processes, self.threads, self.appendonly = workers, processes, threads, appendonly
        self.procs: list[subprocess.Popen] = []
        self.api: subprocess.Popen | None = None
        self.redis: subprocess.Popen | None = None

    def __enter__(self) -> Running:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> Running:
        self.redis = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.redis_port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.state),
                "--save",
                "",
                "--appendonly",
                "yes" if self.appendonly else "no",
            ],
            stdout=subprocess.DEVNULL,
        )
        self.procs.append(self.redis)
        subprocess.run([str(BIN), "db", "upgrade"], env=self.env, check=True, capture_output=True)
        log = open(self.state / "service.log", "wb")
        serve = [str(BIN), "serve", "--bind", f"127.0.0.1:{self.api_port}", "--workers", str(self.processes)]
        if self.threads is not None:
            serve += ["--threads", str(self.threads)]
        self.api = subprocess.Popen(serve, env=self.env, stdout=log, stderr=log)
        self.procs.append(self.api)
        self.grading: subprocess.Popen | None = None
        if self.workers:
            self.grading = subprocess.Popen(
                [str(BIN), "worker", "--count", str(self.workers)], env=self.env, stdout=log, stderr=log
            )
            self.procs.append(self.grading)
        wait_ready(self.url)
        return self

    def key(self, team: str, *extra: str) -> str:
        """A new key of `team` (made if new); `extra`: options of `grader keys create`."""
        return subprocess.run(
            [str(BIN), "keys", "create", team, *extra], env=self.env, check=True, capture_output=True, text=True
        ).stdout.strip()

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join((self.state / "service.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 60) -> None:
        for p in reversed(self.procs):
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
        self.procs = []
        shutil.rmtree(self.state, ignore_errors=True)


@contextlib.contextmanager
def private_postgres() -> Iterator[object]:
    """A PostgreSQL server of its own on a free port (tests/helpers/servers.py's, fsync off), its
    database empty; `.url` is its SQLAlchemy URL, `.postmaster()` its pid. Stopped at the end."""
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.servers import PostgresServer

    pg = PostgresServer(tempfile.mkdtemp(prefix="grader-bench-pg."))
    pg.start()
    pg.postmaster = lambda: int((pg.data_dir / "postmaster.pid").read_text().split()[0])
    try:
        yield pg
    finally:
        pg.stop()


def descendants(pid: int) -> list[int]:
    """pid and every process under it, as /proc shows them now."""
    children: dict[int, list[int]] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(proc.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def container_cgroup(kind: str, cid: str, v1: str, v2: str) -> int | None:
    """A container's cgroup figure: `v1` in cgroup v1's `kind` hierarchy, `v2` under cgroup v2
    (cpu.stat's usage in ns); None when the container has none (gone, or another layout)."""
    for path in (f"/sys/fs/cgroup/{kind}/docker/{cid}/{v1}", f"/sys/fs/cgroup/docker/{cid}/{v2}",
                 f"/sys/fs/cgroup/system.slice/docker-{cid}.scope/{v2}"):  # fmt: skip
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        if v2 == "cpu.stat" and not path.endswith(v1):
            return int(text.split("usage_usec")[1].split()[0]) * 1000
        return int(text.split()[0])
    return None


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU the processes have used so far (those gone since are not counted)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, IndexError, ValueError):
            continue
    return total / tick


def machine_cpu() -> float:
    """Busy CPU seconds of the whole machine since boot, every core summed: user, nice,
    system, irq and softirq (not idle, not waiting for I/O, and not steal: the time a
    virtual machine's host gave to its other guests, which no process here spent)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields[:3]) + fields[5] + fields[6]) / os.sysconf("SC_CLK_TCK")


# --- the deployment as shipped: nginx in front ------------------------------------------------------
VICTIM_ADDRESS, HOSTILE_ADDRESS = "127.0.0.2", "127.0.0.3"  # two client addresses of this machine (127/8)


class Proxy:
    """nginx configured by `grader proxy config` in front of `api_url`, in a directory of
    its own under /tmp (open to nginx's unprivileged workers when root starts it); `.url`,
    `.pid` (the master). Stopped, and the directory removed, when the block ends."""

    def __init__(self, api_url: str, env: dict[str, str]):
        self.api_url, self.env = api_url, env
        self.dir = Path(tempfile.mkdtemp(prefix="grader-bench-nginx."))
        self.dir.chmod(0o755)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> Proxy:
        conf = subprocess.run(
            [
                str(BIN),
                "proxy",
                "config",
                "--listen",
                f"127.0.0.1:{self.port}",
                "--upstream",
                self.api_url.split("://", 1)[1],
                "--prefix",
                str(self.dir),
            ],
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        (self.dir / "nginx.conf").write_text(conf)
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.proc = subprocess.Popen(
            [nginx, "-p", str(self.dir), "-c", str(self.dir / "nginx.conf"), "-g", "daemon off;"],
            stdout=subprocess.DEVNULL,
            stderr=open(self.dir / "stderr.log", "wb"),
        )
        self.pid = self.proc.pid
        wait_ready(self.url)
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


class _FromAddress(requests.adapters.HTTPAdapter):
    def __init__(self, address: str, **kw):
        self.address = address
        super().__init__(**kw)

    def init_poolmanager(self, *args, **kwargs):
        kwargs["source_address"] = (self.address, 0)
        super().init_poolmanager(*args, **kwargs)


def source_session(address: str, key: str | None = None) -> requests.Session:
    """A requests session whose connections come from `address` (a loopback address)."""
    http = requests.Session()
    http.mount("http://", _FromAddress(address, pool_maxsize=64))
    if key:
        http.headers["Authorization"] = f"Bearer {key}"
    return http
