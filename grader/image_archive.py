"""Content-hashed archives of images: how a new host gets its base, environment and
instance images without a registry (`grader env export`, `grader env import`).

An archive is one uncompressed tar file named by the sha256 of its own bytes,
`grader-images-<sha256>.tar`, holding:

- `images.tar`: the engine's `docker save` of every image listed (a layer that several of
  them share is written once);
- `manifest.json`: the format, the grader version that wrote it, each image's reference,
  id, kind (base, env, task) and what it is for, and the size and sha256 of `images.tar`.

Import refuses the file before loading anything unless its sha256 is the one expected
(given, or else the one its name carries: the name guards against a truncated or damaged
copy, a hash given from the exporting host's output against a substituted one); it then
streams `images.tar` to the engine, checking its sha256 against the manifest as it goes
(the engine itself checks every layer against the content hash its image's configuration
names, and an image's id is the hash of that configuration), and finally checks that
every reference of the manifest names the id the manifest gives, and that the engine
loaded nothing the manifest does not list. So an image is tagged by an archive only as
the exporting host had it, byte for byte.

What a worker checks of an instance image before grading on it is images.py's
(`instance_problems`), whatever way the image arrived.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tarfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from grader.errors import ImageError, TaskError
from grader.images import BASE_REPO, Images
from grader.tasks.model import Task
from grader.version import GRADER_VERSION

FORMAT = 1
PREFIX = "grader-images-"
IMAGES_MEMBER = "images.tar"
MANIFEST_MEMBER = "manifest.json"
CHUNK = 1 << 20
_BLOCK = 512
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_IMAGE_ID = re.compile(r"^sha256:[0-9a-f]{64}$")
_REF = re.compile(r"^grader/[a-z0-9][a-z0-9._-]*:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_NAME = re.compile(rf"^{PREFIX}([0-9a-f]{{64}})\.tar$")
KINDS = ("base", "env", "task")


@dataclass(frozen=True)
class Entry:
    """One image of an archive: its reference (a tag), its id, its kind, and the
    environment or task it is for."""

    ref: str
    id: str
    kind: str
    env: str | None = None
    task: str | None = None


@dataclass
class Manifest:
    images: list[Entry]
    images_sha256: str
    images_size: int
    grader_version: str = GRADER_VERSION
    format: int = FORMAT

    def to_bytes(self) -> bytes:
        body = {
            "format": self.format,
            "grader_version": self.grader_version,
            "images_tar": {"sha256": self.images_sha256, "size": self.images_size},
            "images": [
                {k: v for k, v in vars(e).items() if v is not None}
                for e in sorted(self.images, key=lambda e: (KINDS.index(e.kind), e.ref))
            ],
        }
        return (json.dumps(body, indent=2, sort_keys=True) + "\n").encode()

    @classmethod
    def parse(cls, data: bytes) -> Manifest:
        """The manifest read back, every field checked; an ImageError names what is wrong."""
        try:
            body = json.loads(data)
        except ValueError as exc:
            raise ImageError(f"the archive's manifest is not JSON: {exc}") from None
        if not isinstance(body, dict) or body.get("format") != FORMAT:
            raise ImageError(f"the archive's manifest is not format {FORMAT} (written by another grader version?)")
        tar = body.get("images_tar")
        if not isinstance(tar, dict) or not _SHA256.match(str(tar.get("sha256"))) or type(tar.get("size")) is not int:
            raise ImageError("the archive's manifest has no valid images_tar sha256 and size")
        raw = body.get("images")
        if not isinstance(raw, list) or not raw:
            raise ImageError("the archive's manifest lists no images")
        images: list[Entry] = []
        for item in raw:
            if not isinstance(item, dict) or set(item) - {"ref", "id", "kind", "env", "task"}:
                raise ImageError(f"the archive's manifest has an unreadable image entry: {item!r:.200}")
            ref, image_id, kind = item.get("ref"), item.get("id"), item.get("kind")
            if not isinstance(ref, str) or not _REF.match(ref):
                raise ImageError(f"the archive's manifest names an image outside grader/: {ref!r:.200}")
            if not isinstance(image_id, str) or not _IMAGE_ID.match(image_id):
                raise ImageError(f"the archive's manifest gives {ref} no valid image id")
            if kind not in KINDS:
                raise ImageError(f"the archive's manifest gives {ref} an unknown kind {kind!r:.50}")
            images.append(Entry(ref, image_id, kind, item.get("env"), item.get("task")))
        refs = [e.ref for e in images]
        if len(set(refs)) != len(refs):
            raise ImageError("the archive's manifest lists an image twice")
        return cls(
            images=images,
            images_sha256=tar["sha256"],
            images_size=tar["size"],
            grader_version=str(body.get("grader_version")),
        )


@dataclass
class Selection:
    """What an export takes: the images, and the tasks left out with the reason."""

    images: list[Entry] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def expected_sha256(path: Path, given: str | None = None) -> str:
    """The sha256 the file must have: the one given, else the one its name carries."""
    if given is not None:
        given = given.strip().lower()
        if not _SHA256.match(given):
            raise ImageError(f"--sha256 must be 64 hexadecimal digits, not {given!r:.80}")
        return given
    m = _NAME.match(path.name)
    if m is None:
        raise ImageError(
            f"{path.name} is not named {PREFIX}<sha256>.tar, so there is no hash to check it against; "
            "give the exporting host's hash with --sha256"
        )
    return m.group(1)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _header(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, 0
    buf = info.tobuf(format=tarfile.GNU_FORMAT)  # GNU: sizes past ustar's 8 GiB
    assert len(buf) == _BLOCK, name  # a short name: one block, so it can be written in place
    return buf


class _Hashing:
    """A writer that hashes and counts what passes through it."""

    def __init__(self, out: IO[bytes]):
        self.out, self.size, self.sha = out, 0, hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        self.size += len(data)
        return self.out.write(data)


def write_archive(directory: Path, images: list[Entry], save: Callable[[Callable[[bytes], object]], None]) -> Path:
    """Write an archive of `images` into `directory`, `save` writing their `docker save`
    stream; returns its path, named by its sha256. The stream goes to disk once: its tar
    header is written in place once its size is known."""
    directory.mkdir(parents=True, exist_ok=True)
    partial = directory / f".{PREFIX}{uuid.uuid4().hex}.partial"
    try:
        with open(partial, "w+b") as f:
            f.write(b"\0" * _BLOCK)
            hashing = _Hashing(f)
            save(hashing.write)
            f.write(b"\0" * (-hashing.size % _BLOCK))
            manifest = Manifest(images=images, images_sha256=hashing.sha.hexdigest(), images_size=hashing.size)
            data = manifest.to_bytes()
            f.write(_header(MANIFEST_MEMBER, len(data)) + data + b"\0" * (-len(data) % _BLOCK))
            f.write(b"\0" * (2 * _BLOCK))  # the end of the archive
            f.seek(0)
            f.write(_header(IMAGES_MEMBER, hashing.size))
        final = directory / f"{PREFIX}{file_sha256(partial)}.tar"
        os.replace(partial, final)
        return final
    finally:
        partial.unlink(missing_ok=True)


def read_manifest(path: Path) -> Manifest:
    try:
        with tarfile.open(path, "r:") as tar:
            names = tar.getnames()
            if sorted(names) != sorted([IMAGES_MEMBER, MANIFEST_MEMBER]):
                raise ImageError(f"{path.name} holds {names[:5]}, not {IMAGES_MEMBER} and {MANIFEST_MEMBER}")
            f = tar.extractfile(MANIFEST_MEMBER)
            assert f is not None  # a regular file, written so
            return Manifest.parse(f.read(1 << 20))
    except (tarfile.TarError, OSError) as exc:
        raise ImageError(f"{path.name} is not a readable archive: {exc}") from None


def _stream(path: Path, manifest: Manifest) -> Iterator[bytes]:
    """images.tar's bytes, checked against the manifest's size and sha256 as they pass."""
    with tarfile.open(path, "r:") as tar:
        f = tar.extractfile(IMAGES_MEMBER)
        assert f is not None
        h, size = hashlib.sha256(), 0
        while chunk := f.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
            yield chunk
    if size != manifest.images_size or h.hexdigest() != manifest.images_sha256:
        raise ImageError(f"{IMAGES_MEMBER} in {path.name} is not what its manifest hashed")


def loaded_problems(manifest: Manifest, lines: list[str], now: dict[str, str | None]) -> list[str]:
    """What is wrong after a load: a reference the engine loaded that the manifest does not
    list, or one of the manifest's references that does not name its image id (`now`:
    reference -> the id the engine gives it now)."""
    listed = {e.ref for e in manifest.images}
    problems = []
    for line in lines:
        if line.startswith("Loaded image: ") and line[len("Loaded image: ") :] not in listed:
            problems.append(f"the engine loaded {line[len('Loaded image: ') :]}, which the manifest does not list")
    for e in manifest.images:
        if now.get(e.ref) != e.id:
            problems.append(f"{e.ref} is {now.get(e.ref) or 'missing'}, the manifest says {e.id}")
    return problems


# --- export and import ----------------------------------------------------------------------
def select(images: Images, env_names: list[str], tasks: list[Task]) -> Selection:
    """The images an export of these environments takes: each one's offline base images,
    the environment image, and the instance image of every task on it that this engine
    has and that verifies (a task without one is named in `skipped`, not built)."""
    sel = Selection()
    seen: set[str] = set()

    def add(entry: Entry) -> None:
        if entry.ref not in seen:
            seen.add(entry.ref)
            sel.images.append(entry)

    for name in env_names:
        env = images.environment(name)
        for base in env.base_images():
            if base.startswith(BASE_REPO + ":"):
                base_id = images.engine.image_id(base)
                if base_id is None:
                    raise ImageError(f"{base} (the base of {name}) is missing here; nothing to export")
                add(Entry(base, base_id, "base", env=name))
        tag = images.env_tag(env)
        env_id = images.engine.image_id(tag)
        if env_id is None:
            raise ImageError(f"environment image {tag} is missing here; run `grader env build {name}` first")
        add(Entry(tag, env_id, "env", env=name))
        for task in tasks:
            if task.environment != name:
                continue
            try:
                image_id, prepared = images.instance_image(task, build=False)
            except (ImageError, TaskError) as exc:
                sel.skipped[task.id] = str(exc).splitlines()[0]
                continue
            ref = images.instance_tag(prepared, env_id)
            add(Entry(ref, image_id, "task", env=name, task=task.id))
    return sel


def export(images: Images, selection: Selection, directory: Path) -> Path:
    refs = [e.ref for e in selection.images]
    return write_archive(directory, selection.images, lambda write: images.engine.save(refs, write))


def import_archive(images: Images, path: Path, sha256: str | None = None) -> Manifest:
    """Load a verified archive into this host's engine; returns its manifest. Raises
    ImageError, before anything is loaded, for a file whose hash is not the one expected."""
    want = expected_sha256(path, sha256)
    got = file_sha256(path)
    if got != want:
        raise ImageError(f"{path.name} has sha256 {got}, not {want}: refused, nothing loaded")
    manifest = read_manifest(path)
    lines = images.engine.load(_stream(path, manifest))
    now = {e.ref: images.engine.image_id(e.ref) for e in manifest.images}
    problems = loaded_problems(manifest, lines, now)
    if problems:
        raise ImageError(f"{path.name} did not load as its manifest says: " + "; ".join(problems))
    return manifest


def describe(entries: list[Entry]) -> list[dict[str, Any]]:
    return [{k: v for k, v in vars(e).items() if v is not None} for e in entries]


__all__ = [
    "Entry",
    "Manifest",
    "Selection",
    "describe",
    "expected_sha256",
    "export",
    "file_sha256",
    "import_archive",
    "loaded_problems",
    "read_manifest",
    "select",
    "write_archive",
]
