"""Grading runs in Docker: one hardened container per run, with runc ("docker") or
gVisor's runsc ("gvisor") as its runtime.

- no network: only a loopback, in a network lane (lanes.py) that one run at a time is in,
  or (`network_lanes=False`) a namespace of the container's own; all capabilities dropped
  but the supervisor's five, no-new-privileges;
- memory (with no extra swap), CPU and pids limits, a size-capped tmpfs /tmp, a file
  size rlimit, a writable-layer cap where the storage driver supports it;
- containers started ahead of demand, idling until the run's files arrive on their
  standard input, so a run costs one write and one wait (a cold run adds one create and
  start), under runc and gVisor alike;
- a hard kill from here when the wall-clock limit passes, whatever the inside does;
- the container removed in every case, and labelled so that a crashed grader's
  leftovers are reaped on the next start.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import os
import socket
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, cast

import docker.errors
import requests.exceptions
from docker.types import Ulimit

from grader.errors import ImageError, SandboxError
from grader.sandbox.base import ContainerOutput, ContainerSpec, Sandbox, refuse_clashes, sandbox_provider
from grader.sandbox.docker.delivery import MAGIC, Stdin, bundle
from grader.sandbox.docker.engine import DockerEngine
from grader.sandbox.docker.lanes import Lane, Lanes
from grader.sandbox.docker.memory import MemoryWatch

_T = TypeVar("_T")

if TYPE_CHECKING:
    from docker.models.containers import Container

LABEL = "grader.sandbox"
OWNER_LABEL = "grader.owner"
# The supervisor's capabilities (everything else is dropped, and no-new-privileges keeps
# them from ever reaching the submission's processes, which run as uid 1000 with none):
#   CHOWN         hidden tests and canaries root-owned; protected files and the directories
#                 it recreates given back to the user who owned them
#   DAC_OVERRIDE  write, restore and remove inside the repository, whose directories the
#                 unprivileged user owns (and may have made unreadable, mode 000)
#   SETUID/SETGID become that user for the apply chain and the check
#   KILL          kill every process the user left behind, before reading the tree
# Not FOWNER: it only chmods files it created. Not SYS_PTRACE, NET_*, SYS_ADMIN or MKNOD.
SUPERVISOR_CAPS = ["CHOWN", "DAC_OVERRIDE", "SETUID", "SETGID", "KILL"]
WANTED_KEPT = 256  # shapes whose last early files a sandbox remembers (container_shape's per task)
STARTING_WAIT = 30.0  # at most this long a run waits for a container of its shape being started
# Under gVisor the host's pids cgroup counts the sandbox kernel's threads, not the run's
# processes: an idle sandbox holds about 40, and each process inside it about 10 more
# (measured with runsc 20221219, ptrace platform). When the cgroup is full the sandbox
# kernel panics (exit 2, no output) rather than failing the run's fork, so the task's
# process limit is enforced inside (RLIMIT_NPROC, see `private_kernel`) and the cgroup
# gets room for that many processes and then some: it stays a backstop, never the limit.
RUNSC_BASE_PIDS = 64
RUNSC_PIDS_PER_PROCESS = 12
RUNSC_SUPERVISOR_PROCESSES = 8
# The memory cgroup likewise holds the sandbox kernel, not just the run: the mini task's
# gold run peaked at 26 MiB under runc and 46 MiB under runsc, and a run that forks 64
# children of its pytest process at 40-45 MiB under runc but 169-230 MiB under runsc
# (about 3 MiB per process; fork copies more there). Charged to the run, that made one
# submission PASS under runc and be killed for memory under runsc. The cgroup gets room
# for the kernel's share at the task's process limit, so a verdict does not depend on
# the runtime; a run that really hogs memory is still killed.
RUNSC_BASE_MEMORY = 32 * 1024**2
RUNSC_MEMORY_PER_PROCESS = 4 * 1024**2
# A container idles in this loop until its run's files arrive, then becomes the run's
# command. Starting it is the slow part of a run, so it can happen ahead of demand.
#
# The files come on its standard input, written by the host through the engine's attach
# stream (delivery.py says why not a copy into the container, nor a mount), as two
# bundles: the shape's early files at the start, the run's files when a run takes the
# container. A bundle is a header line, one line per file ("SIZE PATH"), an empty line,
# then the files' bytes. The loop blocks in a read until they come, so an idle container
# costs no CPU and wakes as the first byte arrives (no signal, no poll). It writes each
# file under files_root (argv[1]) as root, directories 0700 and files 0600.
#
# Between the bundles it imports the modules argv[2] names (comma-separated), when the
# command (argv[3:]) is `python3 -I ZIP`: this loop runs under `python3 -I` too, so once
# the run's files are written it runs ZIP in this interpreter as that command would (a
# fresh `__main__`, sys.argv [ZIP], the zip first on sys.path), its modules already
# loaded. An import that fails there leaves it to the command, started afresh. Either
# way it then puts /dev/null on its standard input, closing the stream, so the run
# inherits nothing of the delivery. A stream that ends early is the loop's exit, status 1
# with the reason on stderr, before anything of the run has started.
BOOT = (
    "import os, sys\n"
    "src = sys.stdin.buffer\n"
    "def take():\n"
    f"    if src.readline() != {MAGIC!r}:\n"
    "        sys.exit('grader: the run files did not come as a bundle')\n"
    "    listed = []\n"
    "    while True:\n"
    "        line = src.readline()\n"
    "        if not line.endswith(b'\\n'):\n"
    "            sys.exit('grader: the run files ended in their header')\n"
    "        if line == b'\\n':\n"
    "            break\n"
    "        size, rel = line[:-1].decode().split(' ', 1)\n"
    "        listed.append((int(size), rel.split('/')))\n"
    "    for size, parts in listed:\n"
    "        data = src.read(size)\n"
    "        if len(data) != size:\n"
    "            sys.exit('grader: the run files ended early')\n"
    "        d = sys.argv[1]\n"
    "        for part in parts[:-1]:\n"
    "            d = os.path.join(d, part)\n"
    "            try:\n"
    "                os.mkdir(d, 0o700)\n"
    "            except FileExistsError:\n"
    "                pass\n"
    "        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW\n"
    "        with open(os.open(os.path.join(d, parts[-1]), flags, 0o600), 'wb') as f:\n"
    "            f.write(data)\n"
    "take()\n"
    "command = sys.argv[3:]\n"
    "preload = [m for m in sys.argv[2].split(',') if m]\n"
    "here = bool(preload) and len(command) == 3 and command[:2] == ['python3', '-I']\n"
    "if here:\n"
    "    try:\n"
    "        import runpy\n"
    "        sys.path.insert(0, command[2])\n"
    "        for name in preload:\n"
    "            __import__(name)\n"
    "    except Exception:\n"
    "        here = False\n"
    "take()\n"
    "null = os.open('/dev/null', os.O_RDONLY)\n"
    "os.dup2(null, 0)\n"
    "os.close(null)\n"
    "if not here:\n"
    "    os.execvp(command[0], command)\n"
    "del take, src, null\n"
    "sys.argv = command[2:]\n"
    "runpy.run_path(command[2], run_name='__main__')\n"
)


def _parse_size(text: str) -> int:
    units = {"k": 1024, "m": 1024**2, "g": 1024**3}
    text = text.strip().lower()
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


@functools.lru_cache(maxsize=16)
def _digest(data: bytes) -> bytes:
    """An early file's digest, for its shape: the same archive object comes with every run
    (bytes keep their hash, so a hit costs no pass over them)."""
    return hashlib.sha256(data).digest()


def _cid(container: Container) -> str:
    """A container's id: the SDK's type allows None, which a created container never has."""
    return cast(str, container.id)


class Warm(NamedTuple):
    """A started container and its standard input, open until a run sends its files, and
    the network lane it joined (lanes.py), if the sandbox has lanes."""

    container: Container
    stdin: Stdin
    lane: Lane | None = None


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class DockerSandbox(Sandbox):
    name = "docker"
    _instances: weakref.WeakSet[DockerSandbox] = weakref.WeakSet()

    def __init__(
        self,
        runtime: str = "runc",
        engine: DockerEngine | None = None,
        *,
        tmpfs_size: str = "256m",
        storage_size: str | None = "2G",
        file_size_limit: int = 256 * 1024 * 1024,
        max_warm: int = 4,
        network_lanes: bool = True,
    ):
        self.engine = engine or DockerEngine()
        # runs take turns in network namespaces made once (lanes.py), or each has its own
        self._lanes = Lanes(self.engine, lambda: {LABEL: "1", OWNER_LABEL: _owner()}) if network_lanes else None
        self.max_warm = max_warm  # shapes kept started ahead of demand, one container each; 0 turns it off
        self._warm: dict[tuple[Any, ...], Warm] = {}
        self._wanted: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # a shape but its early files -> the last asked for
        self._starting: dict[tuple[Any, ...], threading.Event] = {}  # shapes whose container is being started
        self._unremoved: list[Container] = []  # containers the engine could not remove when asked
        self._cleaner: threading.Thread | None = None
        self._in_flight: set[str] = set()
        self._fault = False  # the engine failed a call: look for containers we lost track of
        self._lock = threading.Lock()
        self._refills: list[threading.Thread] = []
        self.private_kernel = runtime == "runsc"
        atexit.register(self.close)
        DockerSandbox._instances.add(self)
        self.runtime = runtime  # what a result's provenance says
        self.oci_runtime = runtime  # the engine's runtime its containers run under
        self.tmpfs_size = tmpfs_size
        self.storage_size = storage_size
        self.file_size_limit = file_size_limit
        self._checked = False
        self._storage_cap = False

    def _host_limits(self, memory: int, pids: int) -> tuple[int, int]:
        """The cgroup's memory (bytes) and pids for a run with the task's `memory` and
        `pids`: the task's own, or under gVisor room for its kernel at that many processes."""
        if not self.private_kernel:
            return memory, pids
        processes = pids + RUNSC_SUPERVISOR_PROCESSES
        return (
            memory + RUNSC_BASE_MEMORY + RUNSC_MEMORY_PER_PROCESS * processes,
            RUNSC_BASE_PIDS + RUNSC_PIDS_PER_PROCESS * processes,
        )

    def _check_engine(self) -> None:
        if self._checked:
            return
        if self.oci_runtime != "runc" and self.oci_runtime not in self.engine.runtimes():
            raise SandboxError(f"the Docker engine has no {self.oci_runtime!r} runtime (see scripts/setup.sh)")
        self._storage_cap = bool(self.storage_size) and self.engine.supports_storage_cap()
        self._checked = True

    def _tmp_bytes(self, spec: ContainerSpec) -> int:
        """The size of a run's /tmp. tmpfs pages are charged to the memory cgroup: /tmp is kept
        to half the limit, so filling it fails with ENOSPC instead of killing the test runner."""
        return min(_parse_size(self.tmpfs_size), _parse_size(spec.limits.memory) // 2)

    def _create_kwargs(self, spec: ContainerSpec, lane: Lane | None = None) -> dict[str, Any]:
        memory = _parse_size(spec.limits.memory)
        host_memory, host_pids = self._host_limits(memory, spec.limits.pids)
        kwargs = dict(
            image=spec.image,
            command=spec.command,
            user="0:0",
            working_dir=spec.workdir,
            environment=spec.env,
            network_mode=lane.network_mode if lane is not None else "none",
            cap_drop=["ALL"],
            cap_add=SUPERVISOR_CAPS,
            security_opt=["no-new-privileges:true"],
            mem_limit=host_memory,
            memswap_limit=host_memory,
            nano_cpus=int(spec.limits.cpus * 1e9),
            pids_limit=host_pids,
            tmpfs={"/tmp": f"rw,nosuid,nodev,size={self._tmp_bytes(spec)},mode=1777"},
            ulimits=[
                Ulimit(name="fsize", soft=self.file_size_limit, hard=self.file_size_limit),
                Ulimit(name="core", soft=0, hard=0),
                Ulimit(name="nofile", soft=1024, hard=1024),
            ],
            labels={LABEL: "1", OWNER_LABEL: _owner(), **spec.labels},
            log_config={"type": "json-file", "config": {"max-size": "16m", "max-file": "1"}},
            ipc_mode="private",
            # the run's files come on its standard input (delivery.py), which the engine
            # closes when the host's one write ends (StdinOnce: the SDK sets it for a
            # container created attached, which only says what a client may attach to)
            stdin_open=True,
            detach=False,
        )
        if self.oci_runtime != "runc":
            kwargs["runtime"] = self.oci_runtime
        if self._storage_cap:
            kwargs["storage_opt"] = {"size": self.storage_size}
        return kwargs

    # --- containers started ahead of demand ------------------------------------------
    @staticmethod
    def _shape(spec: ContainerSpec) -> tuple[Any, ...]:
        """What a container is fixed to at creation: runs of one shape can share a pool. The
        digests of its early files come last."""
        return (
            spec.image,
            tuple(spec.command),
            tuple(sorted(spec.env.items())),
            spec.workdir,
            spec.limits,
            spec.files_root,
            tuple(sorted(spec.labels.items())),
            spec.preload,
            tuple(sorted((path, _digest(data)) for path, data in spec.early_files.items())),
        )

    def _start_new(self, spec: ContainerSpec, *, for_run: bool = False) -> Warm:
        """Create and start a container that idles until its run's files arrive, and give
        it its shape's early files (the stream stays open for the run's), in a lane
        (`_in_lane`)."""
        return self._in_lane(spec.image, lambda lane: self._start_in(spec, lane), for_run=for_run)

    def _in_lane(self, image: str, start: Callable[[Lane | None], _T], *, for_run: bool = False) -> _T:
        """`start(lane)` of a container. With lanes, it joins one: for a run about to be
        given it (`for_run`), a lane no run is in, taken for that run; else any (lanes.py).
        When the lane's holder is gone (someone removed it, dockerd restarted), the lane is
        retired and the start tried once more in another."""
        for attempt in (1, 2):
            lane = None
            if self._lanes is not None:
                lane = self._lanes.take_free(image) if for_run else self._lanes.for_idle(image)
            try:
                return start(lane)
            except Exception as exc:
                if lane is None or self._lanes is None:
                    raise
                if for_run:
                    self._lanes.give_back(lane, clean=True)  # the container was removed, or never ran
                if not isinstance(exc, SandboxError) or attempt == 2 or self._lanes.holder_alive(lane):
                    raise
                self._lanes.retire(lane)
                self._sweep_lanes()
        raise AssertionError("unreachable")

    def _sweep_lanes(self) -> None:
        """Remove the holders of retired lanes no run is in."""
        if self._lanes is not None:
            for lane in self._lanes.sweep():
                self._remove(lane.holder)

    def _start_in(self, spec: ContainerSpec, lane: Lane | None) -> Warm:
        client = self.engine.client
        kwargs = self._create_kwargs(spec, lane)
        kwargs["command"] = ["python3", "-I", "-c", BOOT, spec.files_root, ",".join(spec.preload), *spec.command]
        try:
            container = self.engine.create_container(kwargs)
        except docker.errors.ImageNotFound as exc:
            raise ImageError(f"image {spec.image} is missing: {exc.explanation}") from exc
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            self._fault = True  # the engine may have made it all the same
            raise SandboxError(f"cannot create the container: {exc}") from exc
        try:
            container.start()
            stdin = Stdin(client.api, _cid(container))
        except (docker.errors.DockerException, OSError) as exc:  # requests' errors are OSErrors
            self._fault = True
            self._remove(container)
            raise SandboxError(f"cannot start the container: {exc}") from exc
        try:
            stdin.send(bundle(spec.early_files))
        except OSError as exc:
            stdin.close()
            self._fault = True
            self._remove(container)
            raise SandboxError(f"cannot give the container its files: {exc}") from exc
        return Warm(container, stdin, lane)

    def _take_warm(self, spec: ContainerSpec) -> Warm | None:
        """The idle container of this shape; if one is being started, it once started (a
        start under way is nearer its end than a new one would be)."""
        key = self._shape(spec)
        with self._lock:
            warm, started = self._warm.pop(key, None), self._starting.get(key)
        if warm is not None or started is None:
            return warm
        started.wait(min(spec.timeout, STARTING_WAIT))
        with self._lock:
            return self._warm.pop(key, None)

    def _refill(self, spec: ContainerSpec) -> None:
        """Start the next container of this shape in the background, unless one is idle or
        being started already, keeping at most `max_warm` shapes (the least recently used
        one is dropped). Shapes that differ only in their early files (the supervisor's
        archive before and after its bytecode was learnt) keep one container between them:
        the last asked for."""
        if not self.max_warm:
            return
        key = self._shape(spec)
        with self._lock:
            self._wanted.pop(key[:-1], None)
            self._wanted[key[:-1]] = key
            while len(self._wanted) > WANTED_KEPT:
                self._wanted.pop(next(iter(self._wanted)))
            if key in self._warm or key in self._starting:
                return  # one is there, or on its way: a second would only be put away
            started = self._starting[key] = threading.Event()

        def work() -> None:
            try:
                warm = self._start_new(spec)
            except Exception:  # noqa: BLE001 - a failed refill only means the next run starts cold
                self._fault = True
                with self._lock:
                    self._starting.pop(key, None)
                started.set()
                return
            with self._lock:
                self._starting.pop(key, None)
                if self._wanted.get(key[:-1]) != key:
                    evicted = [warm]  # its early files were replaced while it started
                else:
                    evicted = [self._warm.pop(k) for k in [k for k in self._warm if k[:-1] == key[:-1]]]
                    self._warm[key] = warm
                while len(self._warm) > self.max_warm:
                    evicted.append(self._warm.pop(next(iter(self._warm))))
            started.set()
            for w in evicted:
                self._put_away(w)

        thread = threading.Thread(target=work, name="grader-prewarm", daemon=True)
        thread.start()
        self._refills.append(thread)
        self._refills = [t for t in self._refills if t.is_alive()]

    def is_warm(self, spec: ContainerSpec) -> bool:
        """Whether a container of `spec`'s shape is idle here, or being started."""
        key = self._shape(spec)
        with self._lock:
            return key in self._warm or key in self._starting

    def settle(self, timeout: float = 60.0) -> None:
        """Wait for the containers being started ahead of demand to be ready (a benchmark
        that must not time its baseline while one starts; a test that wants the next
        run warm)."""
        for t in list(self._refills):
            t.join(timeout)

    def prewarm(self, spec: ContainerSpec) -> None:
        """Start a container for runs of `spec`'s shape before any is asked for."""
        self._check_engine()
        self._refill(spec)

    def close(self) -> None:
        """Remove the idle containers (runs in flight finish on their own)."""
        for t in list(self._refills):
            t.join(30)
        with self._lock:
            idle, self._warm = list(self._warm.values()), {}
        for w in idle:
            self._put_away(w)
        if self._lanes is not None:
            for lane in self._lanes.close():
                self._remove(lane.holder)
        self._remove_leftovers()

    def _put_away(self, warm: Warm) -> None:
        """Remove a container that no run took."""
        warm.stdin.close()
        self._remove(warm.container)

    def _remove(self, container: Container) -> bool:
        """Remove a container (whether it is gone); if the engine cannot answer now (dockerd
        restarting), keep it to remove at the next run: the reaper spares a live owner's
        containers."""
        try:
            container.remove(force=True, v=True)  # its anonymous volumes too (a pool keeper has one)
        except docker.errors.NotFound:
            pass
        except (docker.errors.DockerException, requests.exceptions.RequestException):
            with self._lock:
                self._fault = True
                self._unremoved.append(container)
                if self._cleaner is None or not self._cleaner.is_alive():
                    self._cleaner = threading.Thread(target=self._clean_until_done, name="grader-cleanup", daemon=True)
                    self._cleaner.start()
            return False
        return True

    def _clean_until_done(self) -> None:
        """Retry what the engine could not remove, with backoff, until it is all gone."""
        pause = 1.0
        while True:
            time.sleep(pause)
            with self._lock:
                pending, self._unremoved = self._unremoved, []
            still = []
            for c in pending:
                try:
                    c.remove(force=True, v=True)
                except docker.errors.NotFound:
                    pass
                except (docker.errors.DockerException, requests.exceptions.RequestException):
                    still.append(c)
            with self._lock:
                self._unremoved = still + self._unremoved
                if not self._unremoved:
                    self._cleaner = None
                    return
            pause = min(pause * 2, 30.0)

    def _remove_leftovers(self) -> None:
        with self._lock:
            pending, self._unremoved = self._unremoved, []
        for c in pending:
            self._remove(c)

    # --- one run ----------------------------------------------------------------------
    def _reap_strays(self) -> None:
        """After an engine fault, remove this process's containers that no sandbox of it
        knows: one the engine made while the client lost the answer (dockerd restarting)."""
        known: set[str] = set()
        for sandbox in list(DockerSandbox._instances):
            with sandbox._lock:
                known |= {_cid(w.container) for w in sandbox._warm.values()} | set(sandbox._in_flight)
                known |= {_cid(c) for c in sandbox._unremoved}
            known |= sandbox._idle_ids()
            if sandbox._lanes is not None:
                known |= sandbox._lanes.ids()
        try:
            mine = self.engine.client.containers.list(
                all=True, ignore_removed=True, filters={"label": [LABEL, f"{OWNER_LABEL}={_owner()}"]}
            )
        except (docker.errors.DockerException, requests.exceptions.RequestException):
            self._fault = True
            return
        for c in mine:
            if c.id not in known and c.status != "running":
                self._remove(c)

    def _before_run(self) -> None:
        """What every run starts with: the engine checked, what it could not remove earlier
        removed, and after an engine fault this process's containers nobody knows reaped."""
        self._check_engine()
        self._remove_leftovers()
        if self._fault:
            self._fault = False
            self._reap_strays()

    def run(self, spec: ContainerSpec) -> ContainerOutput:
        self._before_run()
        self._sweep_lanes()
        client = self.engine.client
        durations: dict[str, float] = {}
        refuse_clashes(spec)
        files = bundle(spec.files)
        t = time.monotonic()
        warm = self._take_warm(spec)
        if warm is not None and warm.lane is not None and self._lanes is not None and not self._lanes.take(warm.lane):
            if warm.lane.retired:
                self._put_away(warm)
            else:
                self._keep_idle(spec, warm)  # another run is in its lane: this one starts in a free lane
            warm = None
        durations["warm"] = 1.0 if warm is not None else 0.0
        container, lane = None, None
        if warm is not None:
            durations["start"] = time.monotonic() - t
            t = time.monotonic()
            try:  # a warm container can have died meanwhile (dockerd restarted): then start cold
                warm.stdin.finish(files)
                container, lane = warm.container, warm.lane
            except OSError:  # requests' errors are OSErrors
                warm.stdin.close()
                self._give_back(warm.lane, clean=self._remove(warm.container))
                durations["warm"] = 0.0
            durations["deliver"] = time.monotonic() - t
        if container is None:
            t = time.monotonic()
            warm = self._start_new(spec, for_run=True)
            container, lane = warm.container, warm.lane
            durations["start"] = time.monotonic() - t
            t = time.monotonic()
            try:
                warm.stdin.finish(files)
            except OSError as exc:
                self._fault = True
                self._give_back(warm.lane, clean=self._remove(container))
                raise SandboxError(f"cannot give the container its files: {exc}") from exc
            durations["deliver"] = time.monotonic() - t
        timed_out = False
        with self._lock:
            self._in_flight.add(_cid(container))
        memory = MemoryWatch(_cid(container))
        try:
            try:
                t = time.monotonic()
                try:
                    status = container.wait(timeout=spec.timeout)
                    exit_code = status.get("StatusCode")
                except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
                    timed_out = True
                    exit_code = None
                    try:
                        container.kill()
                    except docker.errors.APIError:
                        pass  # it exited on its own between the timeout and the kill
                    container.wait(timeout=30)
                durations["wait"] = time.monotonic() - t
                limit_hit = memory.stop()
                t = time.monotonic()
                stdout, stderr = self.engine.output(_cid(container), stderr_lines=200)
                facts = client.api.inspect_container(_cid(container))
                state = facts["State"]
                durations["collect"] = time.monotonic() - t
            except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
                self._fault = True
                raise SandboxError(f"the container failed to run: {exc}") from exc
        finally:
            memory.stop()
            t = time.monotonic()
            gone = self._remove(container)
            durations["remove"] = time.monotonic() - t
            self._give_back(lane, clean=gone)  # every process of the run is dead: its sockets too
            with self._lock:
                self._in_flight.discard(_cid(container))
            self._refill(spec)
        return ContainerOutput(
            exit_code=exit_code,
            stdout=stdout,
            stderr=stderr,
            timed_out=timed_out,
            # the engine's flag, or the kernel's word: killed (137, not by us) after its usage hit the limit
            oom_killed=bool(state.get("OOMKilled")) or (limit_hit and exit_code == 137 and not timed_out),
            image_id=facts.get("Image", ""),
            runtime=self.runtime,
            durations=durations,
        )

    def _give_back(self, lane: Lane | None, *, clean: bool) -> None:
        """The run in `lane` is over; a lane whose run's container may still be there is
        never given out again."""
        if lane is not None and self._lanes is not None:
            self._lanes.give_back(lane, clean=clean)

    def _keep_idle(self, spec: ContainerSpec, warm: Warm) -> None:
        """Put an idle container back for a later run of its shape, unless one is there."""
        with self._lock:
            key = self._shape(spec)
            if key not in self._warm:
                self._warm[key] = warm
                return
        self._put_away(warm)

    def reap_orphans(self) -> int:
        """Remove grading containers whose owning process on this host is gone."""
        host = socket.gethostname()
        removed = 0
        containers = self.engine._call(
            self.engine.client.containers.list, all=True, ignore_removed=True, filters={"label": LABEL}
        )
        for c in containers:
            owner = (c.labels or {}).get(OWNER_LABEL, "")
            owner_host, _, pid = owner.rpartition(":")
            if owner_host != host or not pid.isdigit():
                continue
            if int(pid) == os.getpid() or _alive(int(pid)):
                continue  # a live grader's container (ours included) is not an orphan
            try:
                c.remove(force=True, v=True)  # a keeper's volume with it
                removed += 1
            except docker.errors.DockerException:
                pass
        return removed

    def live_containers(self) -> list[str]:
        """Every grading container of any grader on this engine, idle ones included."""
        containers = self.engine._call(
            self.engine.client.containers.list, all=True, ignore_removed=True, filters={"label": LABEL}
        )
        return [_cid(c) for c in containers]

    def _idle_ids(self) -> set[str]:
        """Containers of this sandbox's own kind, idle between runs (the pool's keepers)."""
        return set()

    def busy_containers(self) -> list[str]:
        """This process's grading containers that are not idle in one of its sandboxes,
        once every refill has settled: after a run, this is what was left behind. (Other
        graders on the engine, other processes, keep their own.)"""
        idle: set[str] = set()
        for sandbox in list(DockerSandbox._instances):
            sandbox.settle()
            with sandbox._lock:
                idle |= {_cid(w.container) for w in sandbox._warm.values()}
            if sandbox._lanes is not None:
                idle |= sandbox._lanes.ids()  # the holders of its network lanes
            idle |= sandbox._idle_ids()  # a provider's own idle containers (the pool's keepers)
        mine = self.engine._call(
            self.engine.client.containers.list,
            all=True,
            ignore_removed=True,
            filters={"label": [LABEL, f"{OWNER_LABEL}={_owner()}"]},
        )
        return [_cid(c) for c in mine if _cid(c) not in idle]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class GVisorSandbox(DockerSandbox):
    """Docker with gVisor's runsc: the run's processes get gVisor's kernel, in user space,
    instead of the host's (docs/security.md, "What a submission can still do")."""

    name = "gvisor"

    def __init__(self, engine: DockerEngine | None = None, **kwargs: Any) -> None:
        super().__init__("runsc", engine, **kwargs)


@sandbox_provider("docker")
def _docker(**kwargs: Any) -> DockerSandbox:
    """runc, Docker's own runtime (`runtime=` names another one the engine has registered)."""
    return DockerSandbox(**kwargs)


@sandbox_provider("gvisor")
def _gvisor(**kwargs: Any) -> GVisorSandbox:
    return GVisorSandbox(**kwargs)
