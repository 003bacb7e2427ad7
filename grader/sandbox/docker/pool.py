"""The "pool" provider: a long-lived container per shape (a keeper) grades runs one after
another, each sandboxed inside it by the kernel's namespaces (keeper/), instead of a
container per run. Under runc only. The host chooses it (GRADER_RUNTIME=pool); what it
weakens, against a container per grade, is in docs/security.md.

What a keeper has beyond a grading container's, each taken away again inside every run: a
seccomp profile that is Docker's default plus unshare, mount, umount2, setns and pivot_root
(keeper/seccomp.json); /proc unmasked (a new /proc would not mount otherwise); CAP_SETFCAP
(the kernel asks it of a user namespace map that maps uid 0). And an anonymous volume for
the runs' writes to the repository (removed with the keeper). A worker's keepers share one
network lane (lanes.py: Docker makes a namespace once, not once a keeper; no run is ever in
it, since each makes its own before any of its code runs).

The keeper's standard input and output are attached once: the host writes the shape's
files, then one bundle per run; the keeper answers each run with one frame
(keeper/server.py). A keeper that fails, or whose frame does not come in time, is removed
and the run is a fault of the sandbox (retried, never charged).
"""

from __future__ import annotations

import functools
import io
import socket
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import docker.errors
import docker.types
import requests.exceptions

from grader.errors import ImageError, SandboxError
from grader.sandbox.base import ContainerOutput, ContainerSpec, refuse_clashes, sandbox_provider
from grader.sandbox.docker.containers import DockerSandbox, _cid
from grader.sandbox.docker.delivery import bundle
from grader.sandbox.docker.lanes import Lane

KEEPER_DIR = Path(__file__).with_name("keeper")
SECCOMP = KEEPER_DIR / "seccomp.json"
FRAME = b"grader-result 2"
KEEPER_RUNS = 200  # runs a keeper grades before it is replaced
KEEPER_START_WAIT = 60.0  # seconds a run waits for its shape's keeper being started ahead of it
FRAME_GRACE = 30.0  # seconds past a run's timeout before its keeper counts as failed
STDERR_LINES = 200  # as a container's: the last lines of its standard error
OWN = ".pool/keeper.zip"  # the keeper's own code, under files_root (root's, 0700)
VOLUME = "/var/lib/grader-pool"  # keeper/ns.py's UPPERS
SCRATCH = ["/run", "/tmp", "/var/tmp", "/dev/shm"]  # keeper/ns.py's
# The keeper's first code: the shape's files (the first bundle) placed as a container's
# BOOT places them, then keeper/server.py's serve().
BOOT = r"""
import sys
if sys.path and sys.path[0] == "":
    del sys.path[0]  # -c put the working directory (the repository) first: nothing is imported from it
import os
src = open(0, "rb", buffering=0, closefd=False)  # unbuffered: the runs' bundles are read from fd 0 after this one
def exact(n):
    got = bytearray()
    while len(got) < n:
        chunk = src.read(n - len(got))
        if not chunk:
            sys.exit("grader pool: the shape's files ended early")
        got += chunk
    return bytes(got)
if src.readline() != b"grader-bundle 1\n":
    sys.exit("grader pool: the shape's files did not come as a bundle")
listed = []
while True:
    line = src.readline()
    if line == b"\n":
        break
    size, rel = line[:-1].decode().split(" ", 1)
    listed.append((int(size), rel))
root, workdir, timeout, tmp_bytes, preload, zygote = sys.argv[1:7]
command = sys.argv[7:]
for size, rel in listed:
    data = exact(size)
    path = os.path.join(root, *rel.split("/"))
    os.makedirs(os.path.dirname(path), 0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
sys.path.insert(0, os.path.join(root, ".pool/keeper.zip"))
from grader_keeper import server
preloaded = bool(preload) and len(command) == 3 and command[:2] == ["python3", "-I"]
shape = server.Shape(root, workdir, float(timeout), int(tmp_bytes), command, preloaded)
writable = [workdir, root, "/run", "/tmp", "/var/tmp", "/dev/shm"]
sys.exit(server.serve(shape, [m for m in preload.split(",") if m], writable if zygote == "1" else None))
"""


@functools.cache
def keeper_seccomp() -> str:
    """The keeper's seccomp profile, read once."""
    return SECCOMP.read_text()


@functools.cache
def keeper_archive() -> bytes:
    """keeper/'s modules as the package grader_keeper, in a zip (deterministic)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(KEEPER_DIR.glob("*.py")):
            info = zipfile.ZipInfo(f"grader_keeper/{path.name}", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, path.read_bytes())
    return buf.getvalue()


class Keeper:
    """One keeper: its container and its attached stream (standard input and output)."""

    def __init__(self, container: Any, sock: socket.socket, image_id: str) -> None:
        self.container, self.sock, self.image_id = container, sock, image_id
        self.runs = 0
        self.buffer = bytearray()  # the engine's frames not yet taken apart
        self.out = bytearray()  # the keeper's standard output, taken apart

    def read_result(self, deadline: float) -> tuple[int | None, bool, bool, bytes, bytes]:
        """The next run's frame: exit status (None when it timed out), timed out, OOM-killed,
        standard output, standard error."""
        while True:
            head_end = self.out.find(b"\n")
            if head_end >= 0:
                parts = bytes(self.out[:head_end]).split()
                if parts[:2] != FRAME.split() or len(parts) != 7:
                    raise SandboxError(f"the keeper wrote something that is not a frame: {bytes(self.out[:200])!r}")
                code, timed_out, oom, n_out, n_err = (int(x) for x in parts[2:7])
                total = head_end + 1 + n_out + n_err
                if len(self.out) >= total:
                    body = bytes(self.out[head_end + 1 : total])
                    del self.out[:total]
                    return (None if code < 0 else code), bool(timed_out), bool(oom), body[:n_out], body[n_out:]
            elif len(self.out) > 200:
                raise SandboxError(f"the keeper wrote something that is not a frame: {bytes(self.out[:200])!r}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise SandboxError("the keeper gave no result in time")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(1 << 16)
            except TimeoutError as exc:
                raise SandboxError("the keeper gave no result in time") from exc
            if not data:
                raise SandboxError("the keeper's stream ended")
            self.buffer += data
            while len(self.buffer) >= 8:  # the engine's multiplexed frames: 1 output, 2 error
                kind, size = self.buffer[0], int.from_bytes(self.buffer[4:8], "big")
                if len(self.buffer) < 8 + size:
                    break
                if kind == 1:
                    self.out += self.buffer[8 : 8 + size]
                del self.buffer[: 8 + size]


class PoolSandbox(DockerSandbox):
    name = "pool"

    def __init__(self, *, fork: bool = True, keepers: int = 32, **kwargs: Any) -> None:
        # idle keepers kept, the least recently used removed beyond it (GRADER_POOL_KEEPERS;
        # at least one: a keeper is what makes the next run fast)
        self.max_idle = max(1, keepers)
        kwargs["max_warm"] = 0  # the base's containers started ahead of demand: none, keepers stay warm
        super().__init__("runc", **kwargs)
        self._keepers: dict[tuple[Any, ...], list[Keeper]] = {}
        self._starting: dict[tuple[Any, ...], threading.Event] = {}  # shapes whose keeper is being started
        self._pool_lock = threading.Lock()
        self.runtime = "pool"  # what a result's provenance says; its containers run under runc
        self.fork = fork  # `python -m pytest` forked from a loaded pytest (keeper/zygote.py)

    def _keeper_kwargs(self, spec: ContainerSpec, lane: Lane | None) -> dict[str, Any]:
        kwargs = self._create_kwargs(spec, lane)  # in the lane, or (without lanes) a namespace of its own
        kwargs["mounts"] = [docker.types.Mount(target=VOLUME, source=None, type="volume")]
        kwargs["cap_add"] = [*kwargs["cap_add"], "SETFCAP"]
        kwargs["security_opt"] = [*kwargs["security_opt"], f"seccomp={keeper_seccomp()}"]
        kwargs["command"] = [
            # not isolated (-I): the keeper starts as the shape's environment says (its
            # PYTHONHASHSEED, ...), as a forked pytest's new interpreter would; -s: no user site
            "python3",
            "-s",
            "-c",
            BOOT,
            spec.files_root,
            spec.workdir,
            str(spec.timeout),
            str(self._tmp_bytes(spec)),
            ",".join(spec.preload),
            "1" if self.fork else "0",
            *spec.command,
        ]
        return kwargs

    def prewarm(self, spec: ContainerSpec) -> None:
        """A keeper for the shape, started in the background unless one is idle or on its way
        (a run of the shape meanwhile waits for it rather than start another)."""
        self._check_engine()
        key = self._shape(spec)
        with self._pool_lock:
            if self._keepers.get(key) or key in self._starting:
                return
            started = self._starting[key] = threading.Event()

        def work() -> None:
            try:
                self._idle(key, self._start_keeper(spec))
            except Exception:  # noqa: BLE001 - a failed start ahead of demand only means the run starts one
                self._fault = True
            finally:
                with self._pool_lock:
                    self._starting.pop(key, None)
                started.set()

        thread = threading.Thread(target=work, name="grader-pool-prewarm", daemon=True)
        self._refills.append(thread)
        self._refills = [t for t in self._refills if t.is_alive() or t is thread]
        thread.start()

    def _take(self, key: tuple[Any, ...]) -> Keeper | None:
        """An idle keeper of the shape, waiting for one being started for it."""
        with self._pool_lock:
            started = self._starting.get(key)
        if started is not None:
            started.wait(KEEPER_START_WAIT)
        with self._pool_lock:
            idle = self._keepers.get(key) or []
            return idle.pop() if idle else None

    def is_warm(self, spec: ContainerSpec) -> bool:
        """Whether a keeper of `spec`'s shape is idle here, or being started."""
        key = self._shape(spec)
        with self._pool_lock:
            return bool(self._keepers.get(key)) or key in self._starting

    def _start_keeper(self, spec: ContainerSpec) -> Keeper:
        """A keeper for the shape, in the sandbox's network lane (all its keepers share one:
        no run uses it, each makes a namespace of its own). When the lane's holder is gone,
        the lane is retired and the start tried once more in another."""
        return self._in_lane(spec.image, lambda lane: self._start_keeper_in(spec, lane))

    def _start_keeper_in(self, spec: ContainerSpec, lane: Lane | None) -> Keeper:
        self._check_engine()
        kwargs = self._keeper_kwargs(spec, lane)
        api = self.engine.client.api
        fields = {"image", "command", "user", "working_dir", "environment", "labels", "stdin_open", "detach"}
        config = {k: v for k, v in kwargs.items() if k in fields}
        host = api.create_host_config(**{k: v for k, v in kwargs.items() if k not in fields})
        host.update(MaskedPaths=[], ReadonlyPaths=[])  # each run masks its own /proc again (keeper/ns.py)
        try:
            created = api.create_container(**config, host_config=host)
        except docker.errors.ImageNotFound as exc:
            raise ImageError(f"image {spec.image} is missing: {exc.explanation}") from exc
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            self._fault = True
            raise SandboxError(f"cannot create a keeper: {exc}") from exc
        container = self.engine.client.containers.prepare_model({"Id": created["Id"]})
        try:
            stream = api.attach_socket(_cid(container), params={"stdin": 1, "stdout": 1, "stream": 1})
            sock: socket.socket = getattr(stream, "_sock", stream)
            container.start()
            sock.sendall(bundle({OWN: keeper_archive(), **spec.early_files}))
            image_id = api.inspect_container(_cid(container))["Image"]
        except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
            self._fault = True
            self._remove(container)
            raise SandboxError(f"cannot start a keeper: {exc}") from exc
        return Keeper(container, sock, image_id)

    def _last_words(self, keeper: Keeper) -> str:
        """The last lines of a failed keeper's standard error, for the fault's message."""
        try:
            _, err = self.engine.output(_cid(keeper.container), stderr_lines=5)
        except (docker.errors.DockerException, requests.exceptions.RequestException):
            return ""
        text = err.decode(errors="replace").strip()
        return f" (it said: {text[-800:]})" if text else ""

    def _drop(self, keeper: Keeper) -> None:
        try:
            keeper.sock.close()
        except OSError:
            pass
        self._remove(keeper.container)

    def run(self, spec: ContainerSpec) -> ContainerOutput:
        self._before_run()
        refuse_clashes(spec)
        if OWN in spec.files:
            raise SandboxError(f"a run's files hold {OWN}, the keeper's own")
        files = bundle(spec.files)
        key = self._shape(spec)
        durations: dict[str, float] = {}
        t = time.monotonic()
        keeper = self._take(key)
        durations["warm"] = 1.0 if keeper is not None else 0.0
        if keeper is None:
            keeper = self._start_keeper(spec)
            durations["start"] = time.monotonic() - t
        cid = _cid(keeper.container)
        with self._lock:
            self._in_flight.add(cid)
        t = time.monotonic()
        try:
            keeper.sock.sendall(files)
            code, timed_out, oom, out, err = keeper.read_result(time.monotonic() + spec.timeout + FRAME_GRACE)
        except (OSError, SandboxError) as exc:
            said = self._last_words(keeper)
            self._drop(keeper)
            raise SandboxError(f"the keeper failed: {exc}{said}") from exc
        finally:
            with self._lock:
                self._in_flight.discard(cid)
        durations["wait"] = time.monotonic() - t
        keeper.runs += 1
        if keeper.runs < KEEPER_RUNS:
            self._idle(key, keeper)
        else:
            self._drop(keeper)
        return ContainerOutput(
            exit_code=code,
            stdout=out,
            stderr=b"".join(err.splitlines(keepends=True)[-STDERR_LINES:]),
            timed_out=timed_out,
            oom_killed=oom,
            image_id=keeper.image_id,
            runtime=self.runtime,
            durations=durations,
        )

    def _idle(self, key: tuple[Any, ...], keeper: Keeper) -> None:
        """`keeper` idle for its shape; the least recently used idle keepers beyond
        `max_idle` removed (a worker that grades many tasks keeps a few warm, not all)."""
        with self._pool_lock:
            # a shape whose early files changed (the supervisor's archive with its bytecode
            # learnt) keeps the keepers of the last asked for only
            evicted = [
                k
                for other in [o for o in self._keepers if o[:-1] == key[:-1] and o != key]
                for k in self._keepers.pop(other)
            ]
            self._keepers.setdefault(key, []).append(keeper)
            self._keepers[key] = self._keepers.pop(key)  # the most recently used shape last
            surplus = sum(len(ks) for ks in self._keepers.values()) - self.max_idle
            for shape in list(self._keepers):
                while surplus > 0 and self._keepers[shape] and shape != key:
                    evicted.append(self._keepers[shape].pop(0))
                    surplus -= 1
                if not self._keepers[shape]:
                    del self._keepers[shape]
            while surplus > 0 and len(self._keepers.get(key, [])) > 1:
                evicted.append(self._keepers[key].pop(0))
                surplus -= 1
        for old in evicted:
            self._drop(old)

    def _idle_ids(self) -> set[str]:
        with self._pool_lock:
            return {_cid(k.container) for ks in self._keepers.values() for k in ks}

    def close(self) -> None:
        for thread in list(self._refills):
            thread.join(KEEPER_START_WAIT)
        with self._pool_lock:
            keepers = [k for ks in self._keepers.values() for k in ks]
            self._keepers.clear()
        for keeper in keepers:
            self._drop(keeper)
        super().close()


@sandbox_provider("pool")
def _pool(**kwargs: Any) -> PoolSandbox:
    return PoolSandbox(**kwargs)
