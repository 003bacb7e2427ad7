"""The repository, reached only through directory descriptors: every path walked
component by component with O_NOFOLLOW, so a link or a file where a directory should be
ends the walk (or, when writing, is replaced by a real directory)."""

from __future__ import annotations

import errno
import os
import stat
from typing import Any, Literal, overload

MAX_DEPTH = 128
O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
O_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class TreeError(Exception):
    """Raised when the repository is in a state the supervisor cannot read or put right,
    which only the submission can have caused: the submission's verdict, not ours."""


def shown(rel: str) -> str:
    """A path as it can be put in JSON and shown: undecodable bytes replaced."""
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


# --- the repository, reached only through directory descriptors -------------------------


def rel_ok(rel: str) -> bool:
    parts = rel.split("/")
    return bool(rel) and not rel.startswith("/") and ".." not in parts and "" not in parts and "." not in parts


def _remove_at(dirfd: int, name: str, depth: int = 0) -> None:
    """Remove `name` in `dirfd` and everything under it, never following a link."""
    try:
        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=dirfd)
        return
    if depth > MAX_DEPTH:
        raise TreeError(f"{shown(name)}: a tree deeper than {MAX_DEPTH} directories")
    fd = os.open(name, O_DIR, dir_fd=dirfd)
    try:
        for child in os.listdir(fd):
            _remove_at(fd, child, depth + 1)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dirfd)


class Tree:
    """The repository. Every path is walked component by component from a directory
    descriptor opened with O_NOFOLLOW: a symbolic link or a file where a directory
    should be ends the walk (or, when writing, is replaced by a real directory)."""

    def __init__(self, root: str, uid: int, gid: int):
        self.root, self.uid, self.gid = root, uid, gid

    @overload
    def _parent(self, rel: str, *, create: Literal[True]) -> int: ...
    @overload
    def _parent(self, rel: str, *, create: bool) -> int | None: ...
    def _parent(self, rel: str, *, create: bool) -> int | None:
        if not rel_ok(rel):
            raise TreeError(f"{shown(rel)!r} is not a path inside the repository")
        fd = os.open(self.root, O_DIR)
        try:
            for part in rel.split("/")[:-1]:
                try:
                    nfd = os.open(part, O_DIR, dir_fd=fd)
                except OSError as exc:
                    if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                        raise
                    if not create:
                        os.close(fd)
                        return None
                    _remove_at(fd, part)
                    os.mkdir(part, 0o755, dir_fd=fd)
                    os.chown(part, self.uid, self.gid, dir_fd=fd, follow_symlinks=False)
                    nfd = os.open(part, O_DIR, dir_fd=fd)
                os.close(fd)
                fd = nfd
            return fd
        except BaseException:
            os.close(fd)
            raise

    def lstat(self, rel: str) -> os.stat_result | None:
        fd = self._parent(rel, create=False)
        if fd is None:
            return None
        try:
            return os.stat(rel.rsplit("/", 1)[-1], dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        finally:
            os.close(fd)

    def read(self, rel: str, limit: int | None = None) -> bytes | None:
        """A regular file's bytes (up to limit + 1), or None for anything else."""
        fd = self._parent(rel, create=False)
        if fd is None:
            return None
        try:
            try:
                ffd = os.open(rel.rsplit("/", 1)[-1], O_FILE, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR, errno.EISDIR, errno.ENXIO):
                    return None
                raise
        finally:
            os.close(fd)
        with os.fdopen(ffd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            return f.read() if limit is None else f.read(limit + 1)

    def remove(self, rel: str) -> None:
        fd = self._parent(rel, create=False)
        if fd is None:
            return
        try:
            _remove_at(fd, rel.rsplit("/", 1)[-1])
        finally:
            os.close(fd)

    def write(self, rel: str, data: bytes, *, mode: int, owner: tuple[int, int]) -> None:
        fd = self._parent(rel, create=True)
        name = rel.rsplit("/", 1)[-1]
        try:
            _remove_at(fd, name)
            ffd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=fd)
        finally:
            os.close(fd)
        with os.fdopen(ffd, "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), mode)  # before the chown: root may not chmod what it no longer owns
            os.fchown(f.fileno(), *owner)

    def symlink(self, rel: str, target: str, *, owner: tuple[int, int]) -> None:
        fd = self._parent(rel, create=True)
        name = rel.rsplit("/", 1)[-1]
        try:
            _remove_at(fd, name)
            os.symlink(target, name, dir_fd=fd)
            os.chown(name, *owner, dir_fd=fd, follow_symlinks=False)
        finally:
            os.close(fd)

    def mkdir(self, rel: str) -> None:
        fd = self._parent(rel, create=True)
        name = rel.rsplit("/", 1)[-1]
        try:
            st = None
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                pass
            if st is not None and stat.S_ISDIR(st.st_mode):
                return
            _remove_at(fd, name)
            os.mkdir(name, 0o755, dir_fd=fd)
            os.chown(name, self.uid, self.gid, dir_fd=fd, follow_symlinks=False)
        finally:
            os.close(fd)

    def walk(self) -> dict[str, tuple[Any, ...]]:
        """Every entry under the root but .git/, ignored files included, by what it is.
        A file is known by its mode, size and modification time: the apply chain cannot
        change a file without changing its time."""
        out: dict[str, tuple[Any, ...]] = {}
        fd = os.open(self.root, O_DIR)
        try:
            self._walk(fd, "", out, 0)
        finally:
            os.close(fd)
        return out

    def _walk(self, fd: int, prefix: str, out: dict[str, Any], depth: int) -> None:
        if depth > MAX_DEPTH:
            raise TreeError(f"{shown(prefix)}: a tree deeper than {MAX_DEPTH} directories")
        for name in sorted(os.listdir(fd)):
            if not prefix and name == ".git":
                continue
            rel = prefix + name
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                out[rel] = ("d",)
                sub = os.open(name, O_DIR, dir_fd=fd)
                try:
                    self._walk(sub, rel + "/", out, depth + 1)
                finally:
                    os.close(sub)
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("f", stat.S_IMODE(st.st_mode), st.st_size, st.st_mtime_ns)
            elif stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", os.readlink(name, dir_fd=fd))
            else:
                out[rel] = ("o", stat.S_IFMT(st.st_mode))
