"""The in-container half as one archive: grader/box/ zipped as the package grader_box,
with a top-level __main__ that runs its supervisor (`python3 -I box.zip`). Made once per
process from the installed package, byte for byte the same for the same sources (fixed
timestamps, sorted entries), so its digest names what ran. Once a run on an interpreter has
compiled it (box/bytecode.py), the archive for that interpreter's images holds the bytecode
beside the sources (`Archives`)."""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import logging
import threading
import zipfile
from importlib import resources
from typing import Any

from grader.box import paths
from grader.box.bytecode import CHECKED_HASH, zipped

log = logging.getLogger(__name__)

PACKAGE = paths.PACKAGE
_MAIN = b"import sys\n\nfrom grader_box.supervisor import main\n\nsys.exit(main())\n"
# the largest bytecode a run may report, in base64 and unpacked (this package's: 0.5 and 0.7 MB)
BYTECODE_BYTES = 8 << 20
IMAGES_KEPT = 4096  # images whose interpreter an Archives remembers


def _files() -> list[tuple[str, bytes]]:
    root = resources.files("grader.box")
    out: list[tuple[str, bytes]] = []

    def walk(node: resources.abc.Traversable, prefix: str) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.is_dir():
                if child.name not in ("__pycache__", "demo"):  # a reporter's demo is for people, not the container
                    walk(child, f"{prefix}{child.name}/")
            elif not child.name.endswith((".pyc", ".pyo")):
                out.append((f"{prefix}{child.name}", child.read_bytes()))

    walk(root, "")
    return out


@functools.cache
def _sources() -> tuple[tuple[str, bytes], ...]:
    return (("__main__.py", _MAIN), *((f"{PACKAGE}/{rel}", data) for rel, data in _files()))


@functools.cache
def archive() -> bytes:
    return zipped(list(_sources()))


def digest() -> str:
    return hashlib.sha256(archive()).hexdigest()


def accept_bytecode(magic: object, compiled: object) -> dict[str, bytes] | None:
    """What a supervisor reported compiling (box/bytecode.py: `magic`, and `compiled`, a zip
    of NAME.pyc in base64), if every file is a checked-hash pyc of that magic number beside a
    module of this archive; else None. zipimport checks each against its source at import."""
    if not isinstance(magic, str) or not isinstance(compiled, str) or len(compiled) > BYTECODE_BYTES:
        return None
    try:
        head = bytes.fromhex(magic)
        raw = base64.b64decode(compiled, validate=True)
        with zipfile.ZipFile(io.BytesIO(raw)) as z:
            if sum(i.file_size for i in z.infolist()) > BYTECODE_BYTES:
                return None
            files = {name: z.read(name) for name in z.namelist()}
    except (ValueError, zipfile.BadZipFile, EOFError, OSError):
        return None
    modules = {name for name, _ in _sources() if name.endswith(".py")}
    if len(head) != 4 or not head.endswith(b"\r\n") or not files:
        return None
    for name, data in files.items():
        if name[:-1] not in modules or not name.endswith(".pyc") or data[:8] != head + CHECKED_HASH:
            return None
    return files


def with_bytecode(files: dict[str, bytes]) -> bytes:
    """The archive with `files` (accept_bytecode's) beside their sources."""
    return zipped(sorted([*_sources(), *files.items()]))


class Archives:
    """The archive each run gets: the sources, and from the first run on an interpreter that
    reported its bytecode, that bytecode too for every image known to run that interpreter
    (an image's interpreter is learnt from its first run's report). What it holds is a fact
    of the sources, the interpreter and the image (an id names its content), so the graders
    of a process share one (`shared`).

    Before an instance image's first run, its interpreter is taken to be the one the first
    reported run of its environment image (the image it was verified to be built FROM)
    ran: a task's first grade then gets the bytecode too, and keeps the container (or the
    pool's keeper) started for it, whose shape the archive is part of. A guess that is
    wrong costs only speed: the import system passes over a pyc of another interpreter
    for its source, and the run's own report then names the image's interpreter."""

    def __init__(self) -> None:
        self._bytecode: dict[str, bytes] = {}  # magic -> the archive with its bytecode
        self._magic: dict[str, str] = {}  # image id -> its interpreter's magic, as reported
        self._env_magic: dict[str, str] = {}  # environment image id -> the first of its images' reported
        self._lock = threading.Lock()

    def held(self) -> list[str]:
        """The magic numbers whose bytecode is held (a run's Order.bytecode_held)."""
        return sorted(self._bytecode)

    def for_image(self, image_id: str, env_image_id: str | None = None) -> bytes:
        """The archive for a run on `image_id`, an instance image of `env_image_id` (None:
        not known)."""
        magic = self._magic.get(image_id) or (self._env_magic.get(env_image_id) if env_image_id else None)
        return self._bytecode.get(magic, archive()) if magic else archive()

    def knows(self, image_id: str) -> bool:
        return image_id in self._magic

    def learn(self, image_id: str, report: dict[str, Any], env_image_id: str | None = None) -> None:
        """Take what a run on `image_id` (an instance image of `env_image_id`) reported (its
        `bytecode` and `compiled` fields)."""
        said = report.get("bytecode")
        magic = said.get("magic") if isinstance(said, dict) else None
        if not isinstance(magic, str) or len(magic) != 8:
            return
        if "compiled" in report and magic not in self._bytecode:
            files = accept_bytecode(magic, report["compiled"])
            if files is None:
                log.warning("a run's bytecode for interpreter %s was refused", magic)
                return
            built = with_bytecode(files)
            with self._lock:
                self._bytecode.setdefault(magic, built)
        with self._lock:
            _put_bounded(self._magic, image_id, magic)
            if env_image_id:  # a task whose install changed the interpreter keeps its own
                _put_bounded(self._env_magic, env_image_id, magic, replace=False)


def _put_bounded(table: dict[str, str], key: str, value: str, *, replace: bool = True) -> None:
    """`value` under `key` (the value there kept unless `replace`), the oldest entries dropped
    so that `table` holds at most IMAGES_KEPT."""
    if key in table:
        if replace:
            table[key] = value
        return
    while len(table) >= IMAGES_KEPT:
        table.pop(next(iter(table)))
    table[key] = value


@functools.cache
def shared() -> Archives:
    """This process's Archives (every Grader's)."""
    return Archives()
