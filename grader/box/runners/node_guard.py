"""What node loads by itself, out of the test processes' reach for a run: every node_modules/
directory and the runner configuration (package.json, jest.config.*, ...) a later unit, a
later child of vitest or the runner itself may load.

The guard relies on ownership, not on time stamps of files the test processes could touch:

- every node_modules/ tree is root's and read-only for the run (the instance image makes it
  so after the task's install: grader/images.py; an image made otherwise is put right here,
  at a cost). Its one entry of the user's is `.cache/` (tools' caches: find-cache-dir,
  babel-loader), which node never resolves a package from (no package name starts with a
  dot): made in the repository's top node_modules/ only (a fixture's node_modules/ deeper
  in the tree is left as its tests expect it), given to the user where it was already.
  Nothing else in such a tree can be rewritten, added, removed or renamed by the user;
- the configuration files (and the files the runner's configuration names as modules) are
  made root's and read-only;
- what sits in a directory of the user's (each node_modules/ directory itself, each
  configuration file) can still be renamed away and back, so each is held open (pinned)
  and checked by its identity: the path must still name the held file or directory, root's,
  and its change time must not have moved on (a rename sets it; no call sets it back).
  Held open, gVisor keeps the times it has instead of looking the file up again from the
  host, whose stamps differ from its own in either direction (later most likely because
  the sandbox writes an access time back to the host), so those stamps flag no honest run;
- a node_modules/ or a configuration file that appears anywhere in the repository, or one
  that goes away, is a change.

`Guard.breaches` is called after every unit (no process of the user's is alive then:
native.run_as_user kills them all), so a change made by one unit and undone by a later one
is still seen. Each look is a walk of the repository outside node_modules/ (names only)
and a few calls per held file: node_modules/ itself is never walked (under gVisor a walk
of jest's 4,400 installed files took 1.4 s).
"""

from __future__ import annotations

import os
import posixpath
import stat

CACHE = ".cache"  # the one entry of a node_modules/ that is the user's
DIR_NAME = "node_modules"
_WRITE_OR_SETID = stat.S_IWGRP | stat.S_IWOTH | stat.S_ISUID | stat.S_ISGID


def scan(
    repo: str, names: set[str], prefixes: tuple[str, ...], suffixes: tuple[str, ...]
) -> tuple[list[str], list[str]]:
    """The repository's node_modules/ directories (never walked into) and its configuration
    files (by name, prefix or suffix) outside them, as paths relative to `repo`. .git/ at
    the top is not walked."""
    roots: list[str] = []
    configs: list[str] = []
    for root, subdirs, files in os.walk(repo, followlinks=False):
        rel_root = os.path.relpath(root, repo)
        parts = [] if rel_root == "." else rel_root.split(os.sep)
        if not parts:
            subdirs[:] = [s for s in subdirs if s != ".git"]
        roots += [posixpath.join(*parts, s) for s in subdirs if s == DIR_NAME]
        subdirs[:] = [s for s in subdirs if s != DIR_NAME]
        for name in files:
            if name == DIR_NAME or name in names or name.startswith(prefixes) or name.endswith(suffixes):
                configs.append(posixpath.join(*parts, name))
    return sorted(roots), sorted(configs)


def own_tree(path: str) -> None:
    """Make the node_modules/ tree at `path` root's, with no write or set-id bit for group
    or others (its `.cache/` aside): what grader/images.py does after a task's install, for
    an image made before it did."""
    for dirpath, subdirs, files in os.walk(path, followlinks=False):
        if dirpath == path:
            subdirs[:] = [s for s in subdirs if s != CACHE]
            files = [f for f in files if f != CACHE]
        for name in [*subdirs, *files, None]:
            p = dirpath if name is None else os.path.join(dirpath, name)
            st = os.lstat(p)
            if st.st_uid != 0 or st.st_gid != 0:
                os.lchown(p, 0, 0)  # first: root may chmod only what it owns (no CAP_FOWNER)
            if not stat.S_ISLNK(st.st_mode) and stat.S_IMODE(st.st_mode) & _WRITE_OR_SETID:
                os.chmod(p, stat.S_IMODE(st.st_mode) & ~_WRITE_OR_SETID)


def make_read_only(path: str) -> None:
    """A regular file made root's and read-only; anything else left as it is."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return  # a link, gone, or not a file to open
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode):
            if st.st_uid != 0:
                os.fchown(fd, 0, 0)
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & 0o555)
    finally:
        os.close(fd)


class Guard:
    """The node_modules/ directories and configuration files of one run, sealed and held
    open (`arm`), then compared (`breaches`) after each unit. `close` lets them go."""

    def __init__(
        self,
        repo: str,
        owner: tuple[int, int],
        names: set[str],
        prefixes: tuple[str, ...],
        suffixes: tuple[str, ...],
    ):
        self.repo = repo
        self.owner = owner  # the user's (uid, gid): a node_modules/.cache is theirs
        self._pattern = (names, prefixes, suffixes)
        self.roots: list[str] = []
        self.listings: dict[str, frozenset[str]] = {}
        self.held: dict[str, tuple[int, tuple[int, int, int]]] = {}  # rel: (fd, (dev, ino, ctime))

    def arm(self) -> None:
        """Seal and hold what is not held yet: all of it before the check's command, what
        the command made (a compiled tree's own package.json) when called again after it."""
        roots, configs = scan(self.repo, *self._pattern)
        for rel in [r for r in roots + configs if r not in self.held]:
            path = os.path.join(self.repo, rel)
            st = os.lstat(path)
            if rel in roots and stat.S_ISDIR(st.st_mode):
                self._seal_packages(rel, path, st.st_uid)
            elif stat.S_ISREG(st.st_mode):
                make_read_only(path)
            elif st.st_uid != 0:
                # a link (tsconfig.json -> ../tsconfig.base.json): the user's replacement of it
                # would be theirs
                os.lchown(path, 0, 0)
            self._hold(rel)
        self.roots += [r for r in roots if r not in self.roots]

    def _seal_packages(self, rel: str, path: str, uid: int) -> None:
        if uid != 0:
            own_tree(path)
        cache = os.path.join(path, CACHE)
        if rel == DIR_NAME and not os.path.lexists(cache):
            os.mkdir(cache, 0o755)  # the project's own (find-cache-dir's); no other is made
        if os.path.isdir(cache) and not os.path.islink(cache):
            # Also when it was there: an overlay filesystem copies a directory up when anything
            # below it is first changed, and the copy's change time is new. The tests' first
            # write into .cache/ would move node_modules/'s on; done here, before it is held,
            # it moves nothing later.
            os.lchown(cache, *self.owner)
        self.listings[rel] = self._listing(rel)

    def add(self, rels: list[str]) -> None:
        """Hold more files (already made root's by the caller): the modules a runner's
        configuration names."""
        for rel in rels:
            if rel not in self.held and os.path.lexists(os.path.join(self.repo, rel)):
                self._hold(rel)

    def _hold(self, rel: str) -> None:
        fd = os.open(os.path.join(self.repo, rel), os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        st = os.fstat(fd)
        self.held[rel] = (fd, (st.st_dev, st.st_ino, st.st_ctime_ns))

    def _listing(self, rel: str) -> frozenset[str]:
        return frozenset(os.listdir(os.path.join(self.repo, rel))) - {CACHE}

    def breaches(self) -> list[str]:
        """What changed since `arm`, each as `path (how)`: a node_modules/ or configuration
        file that appeared or went away, a held one that the path no longer names, that is
        no longer root's, or whose change time moved on, an entry added to or gone from a
        node_modules/."""
        roots, configs = scan(self.repo, *self._pattern)
        out = {rel: "appeared" for rel in (set(roots) - set(self.roots)) | (set(configs) - set(self.held))}
        for rel, (fd, (dev, ino, ctime)) in self.held.items():
            try:
                st: os.stat_result | None = os.lstat(os.path.join(self.repo, rel))
            except OSError:
                st = None
            if st is None:
                out[rel] = "gone"
            elif (st.st_dev, st.st_ino) != (dev, ino):
                out[rel] = "replaced"
            elif st.st_uid != 0:
                out[rel] = "no longer root's"
            elif rel in self.listings and self._listing(rel) != self.listings[rel]:
                names = sorted(self._listing(rel) ^ self.listings[rel])
                out[rel] = "entries added or removed: " + ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
            elif os.fstat(fd).st_ctime_ns > ctime:
                out[rel] = "changed, or moved away and back"
        return [f"{rel} ({how})" for rel, how in sorted(out.items())]

    def close(self) -> None:
        for fd, _ in self.held.values():
            os.close(fd)
        self.held = {}
