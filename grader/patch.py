"""Parse and vet a submitted unified diff before anything runs it.

A rejected patch is data, not an error: `inspect_patch` returns the problems, and the
pipeline answers PATCH FAILED with them. The checks are deliberately conservative:
every path a diff can name (the ---/+++ lines, git's `diff --git`, rename and copy
headers) must be relative, free of `..`, and outside `.git/`.

A submission may also be a series of commits: `git format-patch` output (an mbox),
known by its form, git's fixed first line `From <sha> Mon Sep 17 00:00:00 2001`. It is
vetted as one diff (every file any of its commits touches, under the same rules), and
each message must carry a `From:` and a `Subject:` header; the container applies it
with `git am` (grading/spec.py), keeping the commits. Authors and messages are data.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

DEV_NULL = "/dev/null"
# Deeper or longer paths than any repository needs: they only make trees the grader must
# walk and restore (and the supervisor refuses to walk past 128 levels).
MAX_PATH_PARTS = 64
MAX_PATH_BYTES = 1024
_GIT_HEADER = re.compile(r"^diff --git (\S+) (\S+)\s*$")
_PATH_HEADERS = ("rename from ", "rename to ", "copy from ", "copy to ")
# git format-patch's first line of every message: the commit and a date that never changes
_MBOX_FROM = re.compile(r"^From [0-9a-f]{40} Mon Sep 17 00:00:00 2001$", re.MULTILINE)
MAX_SERIES_COMMITS = 500


@dataclass(frozen=True)
class FileChange:
    path: str  # the path after the change (before it, for a deletion)
    source: str | None  # the path before the change; None for an added file
    status: str  # added, removed, modified, renamed
    binary: bool


@dataclass
class PatchInfo:
    sha256: str
    size: int
    files: list[FileChange] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    commits: int = 0  # a series (mbox): how many messages it holds; 0 for a plain diff

    @property
    def series(self) -> bool:
        return self.commits > 0

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def empty(self) -> bool:
        return self.ok and not self.files

    def touched(self) -> set[str]:
        """Every path the patch writes, removes or renames away from."""
        out = {f.path for f in self.files}
        out |= {f.source for f in self.files if f.source}
        return out


def _strip_prefix(name: str) -> str:
    name = name.split("\t", 1)[0].strip()
    if name.startswith(("a/", "b/")):
        return name[2:]
    return name


def path_problem(name: str) -> str | None:
    """Why `name` (as written in a diff, prefix stripped) is unsafe, or None."""
    if name == DEV_NULL:
        return None
    if not name:
        return "an empty file name"
    if "\0" in name or "\\" in name:
        return f"{name!r}: file names with NUL or backslash are refused"
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return f"{name!r}: absolute paths are refused; paths must be relative to the repository root"
    parts = PurePosixPath(name).parts
    if len(parts) > MAX_PATH_PARTS or len(name.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES:
        return (
            f"{name[:80]!r}...: paths deeper than {MAX_PATH_PARTS} directories or longer than "
            f"{MAX_PATH_BYTES} bytes are refused"
        )
    if ".." in parts:
        return f"{name!r}: '..' in a path is refused"
    if ".git" in parts:
        return f"{name!r}: nothing under .git/ may be changed"
    return None


def _header_paths(text: str) -> list[str]:
    """Paths from git's extended headers, which unidiff does not all surface."""
    names: list[str] = []
    for line in text.splitlines():
        m = _GIT_HEADER.match(line)
        if m:
            names += [_strip_prefix(m.group(1)), _strip_prefix(m.group(2))]
            continue
        for head in _PATH_HEADERS:
            if line.startswith(head):
                names.append(line[len(head) :].strip())
        if line.startswith(("--- ", "+++ ")):
            names.append(_strip_prefix(line[4:]))
    return names


def decode(raw: bytes) -> str:
    """Patches are bytes on the wire; parse them as UTF-8, keeping undecodable bytes."""
    return raw.decode("utf-8", errors="surrogateescape")


def is_series(text: str) -> bool:
    """Whether `text` is `git format-patch` output (an mbox of commits), by its first line."""
    first = text.split("\n", 1)[0].rstrip("\r")
    return _MBOX_FROM.fullmatch(first) is not None


def series_messages(text: str) -> list[str]:
    """The messages of a series, each from its `From <sha>` line on."""
    starts = [m.start() for m in _MBOX_FROM.finditer(text)]
    return [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)], strict=True)]


def _series_problems(text: str) -> tuple[int, list[str]]:
    messages = series_messages(text)
    problems: list[str] = []
    if len(messages) > MAX_SERIES_COMMITS:
        problems.append(f"the series holds {len(messages)} commits; the limit is {MAX_SERIES_COMMITS}")
    for n, message in enumerate(messages, 1):
        head = message.replace("\r\n", "\n").split("\n\n", 1)[0].split("\n")
        if not any(line.startswith("From: ") for line in head):
            problems.append(f"commit {n} of the series has no From: header")
        if not any(line.startswith("Subject:") for line in head):
            problems.append(f"commit {n} of the series has no Subject: header")
        # git am decodes a base64 or quoted-printable body (and the parts of a MIME
        # message) before it applies it: what this vetting read would not be what git writes
        for line in head:
            name, _, value = line.partition(":")
            if name.lower() == "content-transfer-encoding" and value.strip().lower() not in ("7bit", "8bit"):
                problems.append(f"commit {n} of the series is {value.strip()}-encoded; send it as plain text")
            if name.lower() == "content-type" and not value.strip().lower().startswith("text/plain"):
                problems.append(f"commit {n} of the series is {value.strip()[:40]!r}; send it as text/plain")
    return len(messages), problems


def inspect_patch(raw: bytes, max_bytes: int) -> PatchInfo:
    info = PatchInfo(sha256=hashlib.sha256(raw).hexdigest(), size=len(raw))
    if len(raw) > max_bytes:
        info.problems.append(f"the patch is {len(raw):,} bytes; the limit is {max_bytes:,} bytes")
        return info
    text = decode(raw)
    if not text.strip():
        return info  # the empty patch is legal: it changes nothing
    if "\0" in text and "GIT binary patch" not in text:
        info.problems.append("the patch contains NUL bytes; send binary changes as a git binary patch")
        return info
    if is_series(text):
        info.commits, problems = _series_problems(text)
        if problems:
            info.problems += problems
            return info
    try:
        patch = PatchSet(text.replace("\r\n", "\n"))
    except UnidiffParseError as exc:
        info.problems.append(f"malformed unified diff: {exc}")
        return info
    except Exception as exc:  # unidiff raises plain errors on some garbage; still the submitter's input
        info.problems.append(f"malformed unified diff: {exc}")
        return info
    if len(patch) == 0 and not info.series:  # a series of empty commits changes no file
        info.problems.append("no file changes found: the text is not a unified diff")
        return info

    for name in _header_paths(text):
        problem = path_problem(name)
        if problem and problem not in info.problems:
            info.problems.append(problem)
    for f in patch:
        src, tgt = _strip_prefix(f.source_file or DEV_NULL), _strip_prefix(f.target_file or DEV_NULL)
        for name in (src, tgt):
            problem = path_problem(name)
            if problem and problem not in info.problems:
                info.problems.append(problem)
        if f.is_added_file:
            change = FileChange(tgt, None, "added", f.is_binary_file)
        elif f.is_removed_file:
            change = FileChange(src, src, "removed", f.is_binary_file)
        elif f.is_rename or src != tgt:
            change = FileChange(tgt, src, "renamed", f.is_binary_file)
        else:
            change = FileChange(tgt, tgt, "modified", f.is_binary_file)
        info.files.append(change)
    return info


def touched_files(raw: bytes) -> set[str]:
    """The paths a (trusted, already vetted) patch touches; empty for an unparseable one."""
    info = inspect_patch(raw, max_bytes=len(raw) + 1)
    return info.touched() if info.ok else set()
