"""This package's own bytecode: compiled once by a supervisor, shipped in the archive from
then on, so that a run no longer compiles the supervisor from source (40 to 70 ms of CPU a
grade, in every language: the supervisor is Python in every image).

The host cannot compile it: bytecode belongs to one interpreter version (its magic number),
and the images hold 3.9 to 3.13. So the host asks (`Order.bytecode_held`: the magic numbers
it holds bytecode for), and a supervisor whose interpreter is not among them compiles every
module of its archive at its start, before the patch is applied, and reports the result on
its stdout (`compiled`), which no process of the submission reaches (as `base_config`). The
host checks each file's header and ships them in the archive of every later run on an image
of that interpreter (grading/ship.py).

Each file is a PEP 552 pyc checked against its source at every import (zipimport hashes
the source beside it in the archive), so bytecode can never stand in for another source,
and a file of another interpreter's magic number is passed over for the source.

Standard library only, Python 3.9+.
"""

from __future__ import annotations

import importlib.util
import os
import sys

from . import resource

# zipfile, base64 and marshal are imported where used: a run that compiles nothing (every
# run but an interpreter's first) need not pay for their import (zipfile's alone is 5 to 10 ms)

MAGIC = importlib.util.MAGIC_NUMBER.hex()  # this interpreter's bytecode version
CHECKED_HASH = (0b11).to_bytes(4, "little")  # PEP 552 flags: hash-based, checked against the source
# every archive entry's date: fixed, so that the same files make the same archive
EPOCH = (2000, 1, 1, 0, 0, 0)


def pyc(source: bytes, filename: str) -> bytes:
    """`source` compiled by this interpreter, as a checked-hash pyc whose code names `filename`
    (the path zipimport would give it, for tracebacks)."""
    import marshal

    code = compile(source, filename, "exec", dont_inherit=True)
    return importlib.util.MAGIC_NUMBER + CHECKED_HASH + importlib.util.source_hash(source) + marshal.dumps(code)


def loaded() -> bool:
    """Whether this module came from bytecode in the archive rather than its source."""
    return (__file__ or "").endswith(".pyc")


def place(rel: str, source: str, pycache: str) -> bool:
    """Put this archive's bytecode of its file `rel` where an interpreter like this one, run
    with PYTHONPYCACHEPREFIX=`pycache`, looks for the bytecode of `source` (a copy of `rel`
    the check's process loads: a report plugin), so that the process need not compile it.
    The cache is root-owned; the loader checks the file against `source` before it uses
    it. False, and nothing written, when the archive holds none for this interpreter (or
    the cache cannot be written)."""
    try:
        data = resource(rel + "c")
    except OSError:
        return False
    if data[:4] != importlib.util.MAGIC_NUMBER:
        return False
    head, name = os.path.split(os.path.abspath(source))
    stem = name.rpartition(".")[0]
    target = os.path.join(pycache, head.lstrip(os.sep), f"{stem}.{sys.implementation.cache_tag}.pyc")
    try:
        os.makedirs(os.path.dirname(target), 0o755, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o444)
        with open(fd, "wb") as f:
            f.write(data)
    except OSError:  # a cache that cannot be written: the process compiles the source, as before
        return False
    return True


def zipped(entries: list[tuple[str, bytes]]) -> bytes:
    """A zip of (name, data) in the given order, each entry dated EPOCH and 0644, so that the
    same entries always make the same bytes (the host's archive is made the same way)."""
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return buf.getvalue()


def compile_archive(archive: str) -> str:
    """Every Python module of `archive` compiled by this interpreter, as a zip of `NAME.pyc`
    beside each `NAME.py`, in base64 (for the report). A module this interpreter cannot
    compile is left out (its source is compiled, and fails, only if it is ever imported)."""
    import base64
    import zipfile

    entries = []
    with zipfile.ZipFile(archive) as src:
        for name in src.namelist():
            if not name.endswith(".py"):
                continue
            try:
                entries.append((name + "c", pyc(src.read(name), f"{archive}/{name}")))
            except (SyntaxError, ValueError):
                continue
    return base64.b64encode(zipped(entries)).decode("ascii")
