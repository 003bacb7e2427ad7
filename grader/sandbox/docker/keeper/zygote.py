"""`python -m pytest` forked from a process that imported pytest once, before any run,
instead of a new interpreter started and importing it again (about 170 ms a run here).
Installed by the keeper's server over subprocess.Popen, so the supervisor's runner starts
pytest through it; every other command is started as before. Standard library only,
Python 3.9+.

A forked pytest must be the one a new interpreter would have run, or the verdict would be
of other code. So the fork is taken only when:

- no module this process has loaded comes from a tree the run can write (the repository,
  the files' root, the scratch directories): pytest installed from the repository itself,
  which the patch may change, is started anew;
- no directory a new interpreter would search first (the working directory, PYTHONPATH's,
  the user's site-packages) holds a module or package named like a loaded one: a
  repository with its own `packaging` or `pluggy` is imported by a new interpreter;
- every variable a new interpreter reads at its start (PYTHON*: PYTHONHASHSEED, ...) is as
  this one started with, the keeper's (PYTHONPATH, PYTHONDONTWRITEBYTECODE and
  PYTHONPYCACHEPREFIX are applied to the fork).

Otherwise the child execs the command, as subprocess would. The child takes the same
credentials, descriptors, session, umask, directory and environment as subprocess gives an
exec'd one. What differs is written in docs/security.md (the pool provider): the forked
process starts as a copy of the supervisor's memory.
"""

from __future__ import annotations

import importlib.machinery
import os
import pwd
import subprocess
import sys
import time
from typing import Any

_Popen = subprocess.Popen
WRITABLE: list[str] = []
KEEP: set[str] = set()  # the modules the interpreter's start and `import pytest` loaded: a fork keeps these only
DROP: list[str] = []  # the supervisor's archive and the keeper's: sys.path entries a new interpreter lacks
APPLIED = {"PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX"}
SUFFIXES = tuple(importlib.machinery.all_suffixes())
# what the supervisor's runner passes subprocess.Popen (proc.run_as_user); anything else is left to it
KNOWN = {
    "cwd",
    "stdin",
    "stdout",
    "stderr",
    "user",
    "group",
    "extra_groups",
    "umask",
    "start_new_session",
    "pass_fds",
    "env",
}


class Forked:
    """What the supervisor's runner uses of a Popen: pid, poll, wait, returncode."""

    def __init__(self, pid: int, args: list[str]) -> None:
        self.pid, self.args = pid, args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped by another wait (kill_everything_else): as Popen, 0
                self.returncode = 0
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        delay = 0.0005
        while True:
            code = self.poll()
            if code is not None:
                return code
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            time.sleep(delay)
            delay = min(delay * 2, 0.02)


def _under(path: str, trees: list[str]) -> bool:
    return any(path == t or path.startswith(t.rstrip("/") + "/") for t in trees)


def _names_in(directory: str) -> set[str]:
    """The top-level modules and regular packages a path entry provides."""
    out: set[str] = set()
    try:
        entries = os.listdir(directory)
    except OSError:
        return out
    for entry in entries:
        full = os.path.join(directory, entry)
        if os.path.isdir(full):
            if os.path.exists(os.path.join(full, "__init__.py")) or os.path.exists(os.path.join(full, "__init__.pyc")):
                out.add(entry)
            continue
        for suffix in SUFFIXES:
            if entry.endswith(suffix):
                out.add(entry[: -len(suffix)])
                break
    return out


def _own(name: str, module: object) -> bool:
    """What a forked pytest leaves out of its modules, to be imported anew if it asks: the
    supervisor's and the keeper's (loaded from their archives, DROP), and whatever the
    interpreter's start and `import pytest` did not load (the supervisor's own imports of
    the standard library: `secrets`, `hmac`, ..., which a repository's `pythonpath` may
    name otherwise)."""
    path = getattr(module, "__file__", None)
    if name == "__main__" or (isinstance(path, str) and _under(path, DROP)):
        return True
    return bool(KEEP) and name not in KEEP


def why_not(cwd: str, env: dict[str, str], uid: int) -> str | None:
    """Why a forked pytest would not be the one `python -m pytest` runs here, or None."""
    for name in {*env, *os.environ}:
        if not name.startswith("PYTHON") or name in APPLIED:
            continue
        if sys.flags.ignore_environment or env.get(name) != os.environ.get(name):
            return f"{name} is read at an interpreter's start, and this one started otherwise"
    loaded: dict[str, str] = {}
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or _own(name, module):
            continue
        if _under(os.path.realpath(path), WRITABLE) or _under(path, WRITABLE):
            return f"{name} was loaded from {path}, which a run can change"
        loaded.setdefault(name.partition(".")[0], path)
    home = env.get("HOME") or pwd.getpwuid(uid).pw_dir
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    user_site = os.path.join(home, ".local", "lib", version, "site-packages")
    first = [cwd, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
    if os.path.isdir(user_site):
        first.append(user_site)
    for directory in first:
        shadowing = _names_in(directory) & loaded.keys()
        if shadowing:
            return f"{directory} holds {sorted(shadowing)[0]}, which a new interpreter would import"
    return None


def popen(argv: Any, **kw: Any) -> Any:
    if not isinstance(argv, list) or argv[:3] != ["python", "-m", "pytest"]:
        return _Popen(argv, **kw)
    if set(kw) - KNOWN or kw.get("user") is None or kw.get("group") is None or kw.get("env") is None:
        return _Popen(argv, **kw)  # not how the runner starts pytest: as asked
    cwd, env, uid, gid = kw.get("cwd") or os.getcwd(), dict(kw["env"]), kw["user"], kw["group"]
    stdin, stdout, stderr = kw.get("stdin"), kw.get("stdout"), kw.get("stderr")
    if not isinstance(stdout, int):
        return _Popen(argv, **kw)
    pass_fds = tuple(kw.get("pass_fds") or ())
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return Forked(pid, argv)
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null if stdin is None or stdin == subprocess.DEVNULL else int(stdin.fileno()), 0)
        os.dup2(stdout, 1)
        os.dup2(stderr if isinstance(stderr, int) and stderr >= 0 else stdout, 2)
        keep = {0, 1, 2, *pass_fds}
        for fd in [int(fd) for fd in os.listdir("/proc/self/fd")]:
            if fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        for fd in pass_fds:
            os.set_inheritable(fd, True)
        if kw.get("start_new_session"):
            os.setsid()
        umask = kw.get("umask", -1)
        if umask >= 0:
            os.umask(umask)
        os.setgroups(list(kw.get("extra_groups") or []))
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
        os.chdir(cwd)
        reason = why_not(cwd, env, uid)
        if reason is not None:
            os.execvpe(argv[0], argv, env)
        os.environ.clear()
        os.environ.update(env)
        sys.dont_write_bytecode = bool(env.get("PYTHONDONTWRITEBYTECODE"))
        sys.pycache_prefix = env.get("PYTHONPYCACHEPREFIX") or None
        sys.path[:] = [p for p in sys.path if p not in DROP]
        sys.path[:0] = [cwd, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
        for name in [n for n, m in sys.modules.items() if _own(n, m)]:
            del sys.modules[name]  # the supervisor's and the keeper's, not a new interpreter's
        import pytest

        sys.argv = [os.path.join(os.path.dirname(pytest.__file__), "__main__.py"), *argv[3:]]
        try:
            code = pytest.console_main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code & 0xFF)
    except BaseException:  # noqa: BLE001 - as an interpreter would: the traceback, exit 1
        import traceback

        traceback.print_exc()
        os._exit(1)


def install(writable: list[str], drop: list[str]) -> None:
    """Import pytest now, before the supervisor and any run, note what that loaded (a
    fork keeps those modules only), and start `python -m pytest` through `popen`."""
    import pytest  # noqa: F401 - imported once, before any run

    KEEP.clear()
    KEEP.update(sys.modules)
    WRITABLE[:] = writable
    DROP[:] = drop
    subprocess.Popen = popen  # type: ignore[misc,assignment]
