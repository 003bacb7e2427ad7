"""Where a request's time goes, stage by stage: the CPU its thread spent (`time.thread_time`)
and the wall time, in named stages, each counted without the stages opened inside it, so
that a request's stages add up to the request. Wall time beyond CPU in a stage is waiting:
for a lock, a turn, a reply, the interpreter's lock or a core.

Off unless `enable(directory)` was called (the app does it when GRADER_BUDGET_DIR is set:
benchmarks/throughput.py). Then each process adds up its requests' stages by route, and
writes the totals, with the process's own CPU, to `budget-PID.json` there, at most every
DUMP_EVERY seconds (at the end of a request) and at exit; a reader takes the difference of
two readings. Off, a stage costs a call and a test of a flag.

    with budget.stage("intake: quota counts"):
        ...

    @budget.timed("auth: key lookup")
    def current(): ...
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

DUMP_EVERY = 0.2  # seconds between two writes of a process's totals
REST = "request: the rest (Flask, routing, hooks)"  # a request's own time outside any stage
FILE = "budget-{pid}.json"

_on = False
_dir: Path | None = None
_local = threading.local()
_lock = threading.Lock()
# route -> stage -> [times entered, CPU s, wall s]; route -> "" holds the requests themselves
_totals: dict[str, dict[str, list[float]]] = {}
_dumped = [0.0]


class _Frame:
    __slots__ = ("name", "cpu", "wall", "child_cpu", "child_wall")

    def __init__(self, name: str):
        self.name, self.child_cpu, self.child_wall = name, 0.0, 0.0
        self.cpu, self.wall = time.thread_time(), time.perf_counter()


class _Stage:
    """A stage of the request this thread is in (nothing outside a request)."""

    __slots__ = ("name", "frame")

    def __init__(self, name: str):
        self.name = name
        self.frame: _Frame | None = None

    def __enter__(self) -> None:
        frames: list[_Frame] | None = getattr(_local, "frames", None)
        if frames:
            self.frame = _Frame(self.name)
            frames.append(self.frame)

    def __exit__(self, *exc: object) -> None:
        if self.frame is not None:
            _close(self.frame)


class _Off:
    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_OFF = _Off()


def enabled() -> bool:
    return _on


def stage(name: str) -> _Stage | _Off:
    """A context for one stage of the current request (a no-op when off, or outside a request)."""
    return _Stage(name) if _on else _OFF


def timed(name: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """The function, each call of it a stage `name`."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def inner(*args: P.args, **kwargs: P.kwargs) -> R:
            if not _on:
                return fn(*args, **kwargs)
            with _Stage(name):
                return fn(*args, **kwargs)

        return inner

    return wrap


def _close(frame: _Frame) -> tuple[float, float]:
    """End `frame` and any left open inside it (a stage whose end was never seen: a statement
    that raised); its time, less its children's, is its stage's. Its whole CPU and wall time."""
    frames: list[_Frame] = _local.frames
    while frames and frames[-1] is not frame:
        _close(frames[-1])
    if not frames:
        return 0.0, 0.0
    frames.pop()
    cpu, wall = time.thread_time() - frame.cpu, time.perf_counter() - frame.wall
    if frames:
        frames[-1].child_cpu += cpu
        frames[-1].child_wall += wall
    seen: dict[str, list[float]] = _local.seen
    t = seen.setdefault(frame.name, [0, 0.0, 0.0])
    t[0] += 1
    t[1] += cpu - frame.child_cpu
    t[2] += wall - frame.child_wall
    return cpu, wall


def begin(name: str) -> None:
    """A stage begins where a context cannot hold it (between two events); `end` ends it."""
    frames: list[_Frame] | None = getattr(_local, "frames", None)
    if _on and frames:
        frames.append(_Frame(name))


def end(prefix: str) -> None:
    """The innermost stage ends if its name begins with `prefix` (else nothing: it never began)."""
    frames: list[_Frame] | None = getattr(_local, "frames", None)
    if _on and frames and frames[-1].name.startswith(prefix):
        _close(frames[-1])


STATEMENT = "database statement: "


def begin_statement(text: str) -> None:
    """A database statement begins (the store's cursor events): a stage named by its verb and
    the stage that runs it ("database statement: SELECT (auth: key lookup)")."""
    frames: list[_Frame] | None = getattr(_local, "frames", None)
    if _on and frames:
        head = text.lstrip().split(None, 2)
        verb = " ".join(head[:2]) if head[:1] == ["BEGIN"] else (head[0] if head else "?")
        frames.append(_Frame(f"{STATEMENT}{verb.upper()} ({frames[-1].name})"))


def end_statement() -> None:
    end(STATEMENT)


class Request:
    """The WSGI app, each request the root of a budget under its route (the method and the
    path's first two parts: /v1/submissions/<id> and /v1/submissions/batch are one, so that
    the totals stay as few as the routes)."""

    def __init__(self, app: Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]):
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        parts = str(environ.get("PATH_INFO", "?")).split("/", 3)  # /v1/submissions/<id>: one route for all ids
        route = f"{environ.get('REQUEST_METHOD', '?')} {'/'.join(parts[:3])}{'/…' if len(parts) > 3 else ''}"
        root = _Frame(REST)
        _local.frames, _local.seen = [root], {}
        try:
            # a JSON answer is made whole in the view; a streamed body's reading is the server's
            return self.app(environ, start_response)
        finally:
            cpu, wall = _close(root)
            seen = _local.seen
            _local.frames = None
            _add(route, seen, cpu, wall)


def _add(route: str, seen: dict[str, list[float]], cpu: float, wall: float) -> None:
    with _lock:
        stages = _totals.setdefault(route, {})
        for name, (n, c, w) in seen.items():
            t = stages.setdefault(name, [0, 0.0, 0.0])
            t[0] += n
            t[1] += c
            t[2] += w
        t = stages.setdefault("", [0, 0.0, 0.0])
        t[0] += 1
        t[1] += cpu
        t[2] += wall
        due = time.monotonic() - _dumped[0] >= DUMP_EVERY
    if due:
        dump()


def enable(directory: Path) -> None:
    """Measure from now on, this process's totals written under `directory`."""
    global _on, _dir
    directory.mkdir(parents=True, exist_ok=True)
    _dir, _on = directory, True
    atexit.register(dump)


def dump() -> None:
    """Write this process's totals (every route's stages, its CPU so far, the time)."""
    if _dir is None:
        return
    with _lock:
        _dumped[0] = time.monotonic()
        body = {
            "pid": os.getpid(),
            "at": time.time(),
            "process_cpu": time.process_time(),
            "routes": {route: {k: list(v) for k, v in stages.items()} for route, stages in _totals.items()},
        }
    path = _dir / FILE.format(pid=os.getpid())
    tmp = path.with_suffix(".tmp")
    try:
        tmp.write_text(json.dumps(body))
        os.replace(tmp, path)
    except OSError:  # the directory went first (a reader done with it)
        pass


def read(directory: Path) -> dict[int, dict[str, Any]]:
    """Every process's last written totals under `directory`, by pid."""
    out = {}
    for path in directory.glob(FILE.format(pid="*")):
        try:
            body = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        out[body["pid"]] = body
    return out
