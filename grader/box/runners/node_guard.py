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
is still seen. Each look stats every directory of the repository outside node_modules/ and
lists again only those whose stamp moved since the last look (`Scanner`), and makes a few
calls per held file: node_modules/ itself is never walked (under gVisor a walk of jest's
4,400 installed files took 1.4 s). A look at this repository's 1,449 directories took 21 ms
against 69 ms for a walk of their names, on the host.
"""

from __future__ import annotations

import os
import stat
import time

CACHE = ".cache"  # the one entry of a node_modules/ that is the user's
DIR_NAME = "node_modules"
_WRITE_OR_SETID = stat.S_IWGRP | stat.S_IWOTH | stat.S_ISUID | stat.S_ISGID


Listing = tuple[list[str], list[str], list[str]]  # names: node_modules/, configuration files, subdirectories


def _listing_of(
    path: str, top: bool, pattern: tuple[set[str], tuple[str, ...], tuple[str, ...]]
) -> tuple[Listing, bool] | None:
    """One directory's part of a scan (as os.walk sees it, links not followed): the
    node_modules/ directories in it, its configuration files, the subdirectories to walk;
    and whether a link in it decides what it holds by what it points to (a node_modules or
    configuration name: its target can change while the directory does not)."""
    names, prefixes, suffixes = pattern
    roots: list[str] = []
    configs: list[str] = []
    into: list[str] = []
    by_target = False
    try:
        with os.scandir(path) as it:
            for entry in it:
                name = entry.name
                try:
                    is_dir = entry.is_dir()
                except OSError:
                    is_dir = False
                named = name == DIR_NAME or name in names or name.startswith(prefixes) or name.endswith(suffixes)
                link = entry.is_symlink()
                by_target = by_target or (named and link)
                if is_dir:
                    if name == DIR_NAME:
                        roots.append(name)
                    elif not (top and name == ".git") and not link:
                        into.append(name)
                elif named:
                    configs.append(name)
    except OSError:
        return None
    return (roots, configs, into), by_target


class Scanner:
    """`scan`, kept between looks: each directory's stamp (device, inode, change and
    modification times) and listing. A later look stats every directory it knows and lists
    again only those whose stamp moved, and those new to it. Any entry added to, removed
    from or renamed in a directory moves its change time on, which no call sets back, so a
    directory whose stamp stayed has the listing it had. One changed within `margin_ns` of a
    look is listed again at the next look whatever its stamp says: a second change in the
    same tick of the kernel's clock need not move the time again. Stamps the sandbox reports
    otherwise than before (gVisor's own against the host's) only cost a listing. A directory
    holding a link named like a node_modules/ or a configuration file is listed at every
    look: what the link is counted as follows its target, which may change outside the
    repository (a link into /tmp) while the directory stays as it was."""

    margin_ns = 1_000_000_000

    def __init__(self, repo: str, pattern: tuple[set[str], tuple[str, ...], tuple[str, ...]]) -> None:
        self.repo = repo
        self.pattern = pattern
        self.known: dict[str, tuple[tuple[int, int, int, int] | None, Listing]] = {}
        self.listed = 0  # directories listed, over every look (the tests count them)

    def look(self) -> tuple[list[str], list[str]]:
        now = time.time_ns()
        known: dict[str, tuple[tuple[int, int, int, int] | None, Listing]] = {}
        roots: list[str] = []
        configs: list[str] = []
        stack = [""]
        while stack:
            rel = stack.pop()
            path = os.path.join(self.repo, rel) if rel else self.repo
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode):
                continue
            stamp: tuple[int, int, int, int] | None = (st.st_dev, st.st_ino, st.st_ctime_ns, st.st_mtime_ns)
            old = self.known.get(rel)
            if old is not None and old[0] == stamp:
                listing = old[1]
            else:
                got = _listing_of(path, not rel, self.pattern)
                self.listed += 1
                if got is None:
                    continue
                listing, by_target = got
                if by_target:
                    stamp = None  # a link whose target decides: listed at every look
            if abs(now - st.st_ctime_ns) < self.margin_ns or abs(now - st.st_mtime_ns) < self.margin_ns:
                stamp = None  # changed just now: listed again next time
            known[rel] = (stamp, listing)
            here, files, into = listing
            prefix = rel + "/" if rel else ""
            roots += [prefix + n for n in here]
            configs += [prefix + n for n in files]
            stack += [prefix + n for n in into]
        self.known = known
        return sorted(roots), sorted(configs)


def scan(
    repo: str, names: set[str], prefixes: tuple[str, ...], suffixes: tuple[str, ...]
) -> tuple[list[str], list[str]]:
    """The repository's node_modules/ directories (never walked into) and its configuration
    files (by name, prefix or suffix) outside them, as paths relative to `repo`. .git/ at
    the top is not walked."""
    return Scanner(repo, (names, prefixes, suffixes)).look()


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
        self.scanner = Scanner(repo, self._pattern)
        self.roots: list[str] = []
        self.listings: dict[str, frozenset[str]] = {}
        self.held: dict[str, tuple[int, tuple[int, int, int]]] = {}  # rel: (fd, (dev, ino, ctime))

    def arm(self) -> None:
        """Seal and hold what is not held yet: all of it before the check's command, what
        the command made (a compiled tree's own package.json) when called again after it."""
        roots, configs = self.scanner.look()
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
        roots, configs = self.scanner.look()
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
