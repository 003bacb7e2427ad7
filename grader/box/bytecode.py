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
import types

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
    return _write(os.path.join(pycache, head.lstrip(os.sep), f"{stem}.{sys.implementation.cache_tag}.pyc"), data)


def place_for_pytest(rel: str, source: str, pycache: str) -> bool:
    """The same for a plugin pytest loads with `-p`: pytest imports it through its assertion
    rewriter, which never reads the interpreter's pyc. It reads its own
    (`NAME.TAG-pytest-VERSION.pyc` in the same cache) or else parses, rewrites and compiles
    the source (17 ms of CPU for the report plugin, in every grade). So this writes that
    file: this archive's code of `rel`, taken only if it was compiled from these very bytes
    (its checked hash), renamed to `source`'s path (the rewriter does not rename the code it
    reads, as the interpreter's loader does), under the header that pytest checks: the
    source's hash (pytest 9's checked-hash pycs) or its mtime and size (before). The plugin
    has no assert statement for the rewriter to change. A pytest that reads neither passes
    the file over and rewrites the source, as before. False, and nothing written, when
    there is no such code, no pytest beside this interpreter, or no cache to write to."""
    import marshal

    found = _pytest_beside()
    try:
        data = resource(rel + "c")
        with open(source, "rb") as f:
            text = f.read()
        st = os.stat(source)
    except OSError:
        return False
    hashed = importlib.util.source_hash(text)
    if found is None or data[:16] != importlib.util.MAGIC_NUMBER + CHECKED_HASH + hashed:
        return False
    version, by_hash = found
    if by_hash:
        head = CHECKED_HASH + hashed
    else:
        head = bytes(4) + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
        head += (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    code = _renamed(marshal.loads(data[16:]), os.path.abspath(source))
    folder, name = os.path.split(os.path.abspath(source))
    target = os.path.join(
        pycache, folder.lstrip(os.sep), f"{name[:-3]}.{sys.implementation.cache_tag}-pytest-{version}.pyc"
    )
    return _write(target, importlib.util.MAGIC_NUMBER + head + marshal.dumps(code))


def _pytest_beside() -> tuple[str, bool] | None:
    """The pytest this interpreter imports from its own site-packages, without importing
    it: its version (its dist-info's name) and whether its rewriter checks its pycs by the
    source's hash (its code hashes sources) rather than by mtime and size."""
    for folder in sys.path:
        rewriter = os.path.join(folder, "_pytest", "assertion", "rewrite.py")
        if not os.path.isfile(rewriter):
            continue
        for entry in os.listdir(folder):
            if entry.startswith("pytest-") and entry.endswith(".dist-info"):
                with open(rewriter, "rb") as f:
                    by_hash = b"source_hash(" in f.read()
                return entry[len("pytest-") : -len(".dist-info")], by_hash
        return None
    return None


def _renamed(code: types.CodeType, filename: str) -> types.CodeType:
    consts = tuple(_renamed(c, filename) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _write(target: str, data: bytes) -> bool:
    """`data` as a read-only file at `target` in the root-owned cache; False if it cannot be."""
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
