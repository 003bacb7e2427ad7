"""The server of a keeper: a long-lived grading container that runs the runs of one shape
one after another, each in namespaces of its own (ns.py). Standard library and ctypes only,
Python 3.9+.

The host writes bundles on the keeper's standard input (delivery.py's format): the shape's
files once, at the start (the boot code in pool.py places them), then one bundle per run.
Each run's files are streamed to a staging directory on the keeper's volume (never held in
this process's memory, which every run's processes start as a copy of), placed root-owned
under the files' root inside the run's mount namespace, and the staging copy removed. The
run's result goes back on standard output as one frame:

    b"grader-result 2 EXIT TIMED_OUT OOM_KILLED OUT_LEN ERR_LEN\\n" + out + err

EXIT is -1 when the run timed out. Nothing else is written to standard output: this
process's own messages go to standard error.
"""

from __future__ import annotations

import os
import runpy
import select
import shutil
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from . import ns

MAGIC = b"grader-bundle 1\n"
FRAME = b"grader-result 2"
OUTPUT_LIMIT = 16 << 20  # each stream, as a container's log (json-file, max-size 16m)
HEADER_LIMIT = 1 << 20
STAGE = f"{ns.UPPERS}/.incoming"
CHUNK = 1 << 16


@dataclass
class Shape:
    files_root: str
    workdir: str
    timeout: float
    tmp_bytes: int
    command: list[str]
    preloaded: bool  # the command is ["python3", "-I", ARCHIVE], run in the run's init from here


class Source:
    """The keeper's standard input, read into one buffer of this process's (cleared after
    each bundle), never into new objects: what a run's files said does not stay behind in
    memory the run's processes are copies of."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = bytearray(CHUNK)
        self.start = self.end = 0

    def _fill(self) -> bool:
        self.start = 0
        self.end = os.readv(self.fd, [self.buf])
        return self.end > 0

    def line(self) -> bytes:
        """One line, newline included ("" at the end of the stream); at most HEADER_LIMIT."""
        out = bytearray()
        while True:
            if self.start == self.end and not self._fill():
                return bytes(out)
            nl = self.buf.find(b"\n", self.start, self.end)
            stop = self.end if nl < 0 else nl + 1
            out += self.buf[self.start : stop]
            self.start = stop
            if nl >= 0:
                return bytes(out)
            if len(out) > HEADER_LIMIT:
                raise SystemExit("grader pool: a bundle's header line is too long")

    def copy_to(self, fd: int, size: int) -> None:
        while size:
            if self.start == self.end and not self._fill():
                raise SystemExit("grader pool: the run's files ended early")
            n = min(size, self.end - self.start)
            view = memoryview(self.buf)[self.start : self.start + n]
            while view:
                view = view[os.write(fd, view) :]
            self.start += n
            size -= n

    def clear(self) -> None:
        self.buf[:] = bytes(len(self.buf))


def receive(src: Source) -> list[str] | None:
    """One bundle from `src`, its files written to STAGE as 0, 1, ...; their paths, in order.
    None at the end of the stream."""
    first = src.line()
    if not first:
        return None
    if first != MAGIC:
        raise SystemExit("grader pool: a run's files did not come as a bundle")
    listed: list[tuple[int, str]] = []
    while True:
        line = src.line()
        if not line.endswith(b"\n"):
            raise SystemExit("grader pool: the run's files ended in their header")
        if line == b"\n":
            break
        length, rel = line[:-1].decode().split(" ", 1)
        parts = rel.split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise SystemExit(f"grader pool: a run's file has a path the pool refuses: {rel!r}")
        listed.append((int(length), rel))
    shutil.rmtree(STAGE, ignore_errors=True)
    os.makedirs(STAGE, mode=0o700)
    for i, (size, _) in enumerate(listed):
        fd = os.open(f"{STAGE}/{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            src.copy_to(fd, size)
        finally:
            os.close(fd)
    src.clear()
    return [rel for _, rel in listed]


def place(stage: int, root: str, rels: list[str]) -> None:
    """The run's files, root-owned (directories 0700, files 0600), under `root` (an overlay
    by now), copied by the kernel from the staging directory (`stage`, a descriptor of it)."""
    for i, rel in enumerate(rels):
        parts = rel.split("/")
        d = root
        for part in parts[:-1]:
            d = os.path.join(d, part)
            try:
                os.mkdir(d, 0o700)
            except FileExistsError:
                pass
        src = os.open(str(i), os.O_RDONLY, dir_fd=stage)
        dst = os.open(os.path.join(root, *parts), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            size = os.fstat(src).st_size
            while size > 0:
                sent = os.sendfile(dst, src, None, size)
                if sent == 0:
                    break
                size -= sent
        finally:
            os.close(src)
            os.close(dst)


def oom_kills() -> int:
    """The kernel's count of OOM kills in this keeper's memory cgroup (v1 or v2)."""
    for path in ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"):
        try:
            with open(path) as f:
                for line in f:
                    name, _, value = line.partition(" ")
                    if name == "oom_kill":
                        return int(value)
        except OSError:
            continue
    return 0


def drain(fds: list[int], deadline: float, kill: Callable[[], None]) -> tuple[dict[int, bytes], bool]:
    """Read `fds` to their ends, `kill()` called once `deadline` passes. What each gave (the
    first OUTPUT_LIMIT bytes), and whether the deadline passed."""
    got = {fd: bytearray() for fd in fds}
    open_ = set(fds)
    timed_out = False
    while open_:
        left = deadline - time.monotonic()
        if left <= 0 and not timed_out:
            timed_out = True
            kill()
        ready, _, _ = select.select(list(open_), [], [], 1.0 if timed_out else max(left, 0.01))
        for fd in ready:
            data = os.read(fd, CHUNK)
            if not data:
                open_.discard(fd)
            elif len(got[fd]) < OUTPUT_LIMIT:
                got[fd] += data[: OUTPUT_LIMIT - len(got[fd])]
    return {fd: bytes(b) for fd, b in got.items()}, timed_out


def run_one(shape: Shape, rels: list[str]) -> bytes:
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    up_r, up_w = os.pipe()
    down_r, down_w = os.pipe()
    stage = os.open(STAGE, os.O_RDONLY | os.O_DIRECTORY)
    before = oom_kills()
    sys.stdout.flush()
    sys.stderr.flush()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            ns.only_fds({up_w, down_r, stage})
            ns.first(up_w, down_r, lambda become: in_init(shape, stage, rels, become), {stage})
        finally:
            os._exit(125)
    for fd in (out_w, err_w, up_w, down_r, stage):
        os.close(fd)
    init = 0
    if os.read(up_r, 1) == b"1":
        proc = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY)
        try:
            ns.write_maps(proc, pid)
        finally:
            os.close(proc)
        os.write(down_w, b"1")
        said = b""
        while not said.endswith(b"\n"):
            chunk = os.read(up_r, 32)
            if not chunk:
                break
            said += chunk
        init = int(said) if said.strip().isdigit() else 0
    os.close(down_w)
    os.close(up_r)

    def kill() -> None:
        for victim in (init, pid):  # init first: PID 1's death ends the run's PID namespace
            if victim:
                try:
                    os.kill(victim, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    got, timed_out = drain([out_r, err_r], started + shape.timeout, kill)
    os.close(out_r)
    os.close(err_r)
    _, status = os.waitpid(pid, 0)
    code = -1 if timed_out else ns.status_code(status)
    oom = int(oom_kills() > before)
    clear_uppers()
    out, err = got[out_r], got[err_r]
    return b"%s %d %d %d %d %d\n" % (FRAME, code, int(timed_out), oom, len(out), len(err)) + out + err


def in_init(shape: Shape, stage: int, rels: list[str], become: Callable[[], None]) -> None:
    """The run's init, at the run's level: its mounts and files, then the command."""
    ns.set_up_mounts(shape.workdir, shape.files_root, shape.tmp_bytes)
    place(stage, shape.files_root, rels)
    os.close(stage)
    ns.loopback_up()
    os.chdir(shape.workdir)
    become()
    if not shape.preloaded:
        os.execvp(shape.command[0], shape.command)
    code = 1
    try:
        sys.argv = [shape.command[2]]
        runpy.run_path(shape.command[2], run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - as an interpreter would: the traceback on standard error
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001 - the exit status is what is left to say
            pass
    os._exit(code & 0xFF)


def clear_uppers() -> None:
    """The run's upper layers on the keeper's volume and its staged files, gone with it."""
    if os.path.isdir(ns.UPPERS):
        for name in os.listdir(ns.UPPERS):
            shutil.rmtree(os.path.join(ns.UPPERS, name), ignore_errors=True)


def serve(shape: Shape, preload: list[str], zygote_writable: list[str] | None) -> int:
    """Runs until standard input ends. `preload`: modules imported now, before any run;
    `zygote_writable`: when given (and pytest is among what the command runs), each run's
    `python -m pytest` is forked from this process's loaded pytest (zygote.py), unless a
    fresh interpreter would import something else; the list names the trees a run can write."""
    if shape.preloaded and zygote_writable is not None and any(n.endswith(".runners.pytest") for n in preload):
        from . import zygote

        own = __file__.rsplit("/grader_keeper/", 1)[0]  # the keeper's archive
        try:
            zygote.install(zygote_writable, drop=[shape.command[2], own])  # pytest first, alone
        except Exception as exc:  # noqa: BLE001 - each check's pytest then starts anew
            print(f"grader pool: pytest cannot be loaded here ({exc}): each check starts it", file=sys.stderr)
    if shape.preloaded:
        sys.path.insert(0, shape.command[2])
        try:
            for name in preload:
                __import__(name)
        except Exception as exc:  # noqa: BLE001 - as a container's BOOT: the command then starts afresh
            print(f"grader pool: preloading {name} failed ({exc}): each run starts its command", file=sys.stderr)
            shape.preloaded = False
    results = os.dup(1)  # the frames' channel; this process's own prints go to standard error
    os.dup2(2, 1)
    src = Source(0)
    while True:
        rels = receive(src)
        if rels is None:
            return 0
        frame = run_one(shape, rels)
        view = memoryview(frame)
        while view:
            view = view[os.write(results, view) :]
