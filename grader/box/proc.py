"""Processes of the run: the unprivileged user's commands, their output drained in
threads (head and tail kept), every process left behind killed (the supervisor is PID 1)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from typing import Any

from .order import Order

START = time.monotonic()  # the run's start (begin): what remaining() counts the deadline from


def begin() -> None:
    """The run starts now: the supervisor may have been imported long before, by a
    container that waited for its order with its modules loaded."""
    global START
    START = time.monotonic()


class Capture:
    """Drain a pipe in a thread, keeping the head and the tail up to a limit."""

    def __init__(self, fd: int, limit: int):
        self.limit = max(limit, 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self._fd = fd
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        half = self.limit // 2
        while True:
            try:
                chunk = os.read(self._fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            self.total += len(chunk)
            room = half - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail += chunk
                if len(self.tail) > half:
                    del self.tail[: len(self.tail) - half]
        os.close(self._fd)

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def data(self) -> bytes:
        if self.total <= len(self.head) + len(self.tail):
            return bytes(self.head + self.tail)
        dropped = self.total - len(self.head) - len(self.tail)
        return bytes(self.head) + f"\n[... {dropped:,} bytes omitted ...]\n".encode() + bytes(self.tail)

    def complete(self) -> bool:
        return self.total <= len(self.head) + len(self.tail)


def remaining(order: Order) -> float:
    return max(0.0, order.deadline - (time.monotonic() - START))


def kill_everything_else() -> None:
    """SIGKILL every process in the container but this one, then reap them (we are PID 1)."""
    for _ in range(10):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        time.sleep(0.01)
        alive = False
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                alive = True
                break
        if not alive:
            return


def run_as_user(
    order: Order,
    argv: list[str],
    *,
    timeout: float,
    stdout_limit: int,
    separate_stderr: bool = False,
    pass_fds: tuple[int, ...] = (),
    stdin_path: str | None = None,
    env: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run `argv` as the unprivileged user; capture output; kill everything on the way out."""
    stdin_file = open(stdin_path, "rb") if stdin_path else None
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe() if separate_stderr else (None, None)
    started = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=order.repo,
        stdin=stdin_file if stdin_file is not None else subprocess.DEVNULL,
        stdout=out_w,
        stderr=err_w if separate_stderr else out_w,
        user=order.uid,
        group=order.gid,
        extra_groups=[],
        umask=0o022,
        start_new_session=True,
        pass_fds=pass_fds,
        env={**os.environ, **order.env, **(env or {})},
    )
    os.close(out_w)
    if stdin_file is not None:
        stdin_file.close()
    if err_w is not None:
        os.close(err_w)
    out = Capture(out_r, stdout_limit)
    err = Capture(err_r, order.output_limit) if err_r is not None else None
    timed_out = False
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        code = None
    kill_everything_else()
    if code is None:
        code = proc.poll()
    out.join(2)
    if err:
        err.join(2)
    return {
        "exit_code": code,
        "timed_out": timed_out,
        "seconds": round(time.monotonic() - started, 4),
        "out": out,
        "err": err,
    }


def text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
