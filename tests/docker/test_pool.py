"""What the pool provider (grader/sandbox/docker/pool.py) must keep that a container per
grade keeps by construction: each run of a keeper starts from the pristine image, nothing
of one run reaches the next, and nothing inside a run reaches the keeper. Each protection is
attacked twice here and an honest run shows it is not hurt; the shared promises are the
conformance suite's (its pool variant), the verdicts the attack files' (their pool param).

Every run here goes to the same keeper (one shape), so what one run leaves is what the next
one would meet.
"""

from __future__ import annotations

import os

import pytest

from grader.sandbox import ContainerSpec, Limits, get_sandbox

PY = ["python3", "-I", "-c"]


@pytest.fixture(scope="module")
def pool(grader, mini_set):
    image, _ = grader.images.instance_image(mini_set.get("mini"))
    sandbox = get_sandbox("pool")
    yield sandbox, image
    sandbox.close()


def run(pool, script: str, *, timeout: float = 30.0, memory: str = "256m"):
    sandbox, image = pool
    spec = ContainerSpec(
        image=image,
        command=PY + [script],
        workdir="/work/repo",
        limits=Limits(memory=memory, cpus=1.0, pids=64),
        timeout=timeout,
        labels={"grader.task": "pool-attacks"},
    )
    return sandbox.run(spec)


AS_USER = "import os; os.setgroups([]); os.setgid(1000); os.setuid(1000)\n"

LEAVE = """
import os, subprocess, time
for d in ["/tmp", "/var/tmp", "/dev/shm", "/run", "/work/repo", "/opt/grader"]:
    try:
        open(os.path.join(d, "left-by-run-1"), "w").write("x")
        print("wrote", d)
    except OSError as e:
        print("refused", d, e.errno)
for d in ["/etc", "/usr/lib", "/root", "/home", "/var/lib/grader-pool"]:
    try:
        open(os.path.join(d, "left-by-run-1"), "w").write("x")
        print("WROTE", d)
    except OSError as e:
        print("refused", d, e.errno)
# a daemon: double fork, its own session, ignoring SIGTERM and SIGHUP
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        import signal
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        import socket
        s = socket.socket(socket.AF_UNIX)
        s.bind("\\0grader-left-by-run-1")
        s.listen(1)
        while True:
            time.sleep(0.05)
    os._exit(0)
os.wait()
# a System V shared memory segment, which outlives its process
import ctypes
print("shm", ctypes.CDLL(None).shmget(0, 4096, 0o1000 | 0o600) >= 0)
subprocess.run(["python3", "-c", "import sys"], check=True)
print("done")
"""

FIND = """
import os
found = []
for d in ["/tmp", "/var/tmp", "/dev/shm", "/run", "/work/repo", "/opt/grader", "/etc", "/usr/lib", "/root", "/home"]:
    if os.path.exists(os.path.join(d, "left-by-run-1")):
        found.append(d)
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
print("found", found)
print("pids", pids)
print("sysv", open("/proc/sysvipc/shm").read().count("\\n") - 1)
import socket
try:
    socket.socket(socket.AF_UNIX).connect("\\0grader-left-by-run-1"); print("abstract reached")
except OSError:
    print("abstract refused")
"""


@pytest.mark.parametrize("who", ["root", "user"])
def test_nothing_a_run_leaves_meets_the_next(pool, who):
    """Attack: files in every writable place, a daemon in its own session ignoring SIGTERM,
    and writes to where the keeper keeps things, as the command's root and as the user."""
    first = run(pool, (AS_USER if who == "user" else "") + LEAVE)
    assert first.exit_code == 0, first.stderr
    said = first.stdout.decode()
    assert "WROTE" not in said, said  # the image and the keeper's volume are read-only to a run
    assert "wrote /tmp" in said and "wrote /work/repo" in said and "shm True" in said  # honest writes work
    second = run(pool, FIND)
    assert second.exit_code == 0, second.stderr
    lines = second.stdout.decode().splitlines()
    assert lines[0] == "found []", lines  # not one file of run 1
    assert lines[1] == "pids [1]", lines  # not one process of run 1: the command alone, as PID 1
    assert lines[2] == "sysv 0" and lines[3] == "abstract refused", lines


ESCAPE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def tried(what, ret):
    print(what, "ok" if ret == 0 else "refused", ctypes.get_errno() if ret else "")
tried("remount /", libc.mount(b"", b"/", None, 32 | 1 << 5, None))  # MS_REMOUNT, rw
tried("remount / rw bind", libc.mount(b"", b"/", None, 4096 | 32, None))
tried("umount /proc/kcore", libc.umount2(b"/proc/kcore", 2))  # MNT_DETACH: unmask
tried("tmpfs on /etc", libc.mount(b"x", b"/etc", b"tmpfs", 0, None))
tried("unshare user", libc.unshare(0x10000000))
tried("unshare mount", libc.unshare(0x00020000))
tried("clone newuser", -1 if os.system("python3 -c 'import os; os.unshare(0x10000000)' 2>/dev/null") else 0)
fd = os.open("/proc/self/ns/mnt", os.O_RDONLY)
tried("setns", libc.setns(fd, 0))
"""


@pytest.mark.parametrize("who", ["root", "user"])
def test_a_run_cannot_undo_its_mounts_or_make_namespaces(pool, who):
    """Attack: remount the read-only root writable, unmask /proc, cover /etc, make a user
    namespace to win capabilities back, as the command's root (its five capabilities) and
    as the user. The keeper's profile lets these calls through; each run's own filter and
    its locked mounts refuse them."""
    out = run(pool, (AS_USER if who == "user" else "") + ESCAPE)
    assert out.exit_code == 0, out.stderr
    lines = out.stdout.decode().splitlines()
    assert len(lines) == 8 and all(" refused " in f"{line} " for line in lines), lines


SEES = """
import os
print(sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
print(sorted(os.listdir("/proc/self/fd")))
print(open("/proc/kcore", "rb").read(1) == b"" if os.path.exists("/proc/kcore") else "none")
try:
    open("/proc/sys/kernel/hostname", "w").write("x"); print("wrote /proc/sys")
except OSError as e:
    print("refused", e.errno)
print(os.listdir("/var/lib/grader-pool"))
"""


def test_a_run_sees_none_of_the_keeper(pool):
    """Attack: look for the keeper's server (its standard input is the host's stream, its
    output the frames), its descriptors, and its volume; and /proc's masks."""
    out = run(pool, SEES)
    assert out.exit_code == 0, out.stderr
    pids, fds, kcore, sysctl, volume = out.stdout.decode().splitlines()
    assert pids == "[1]"  # no process of the keeper's in sight
    assert fds == "['0', '1', '2', '3']"  # standard streams, and the listing's own
    assert kcore in ("True", "none")  # masked: /dev/null
    assert sysctl.startswith("refused")
    assert volume == "[]"  # the keeper's volume is an empty read-only tmpfs here


def test_a_run_that_times_out_or_fills_memory_is_its_own_end_not_the_keepers(pool):
    """The run's processes die with it; the keeper grades the next one. The OOM killer
    takes the run's process, never the keeper's server (its score is 1000)."""
    slow = run(pool, "import time\ntime.sleep(60)\n", timeout=3.0)
    assert slow.timed_out and slow.exit_code is None
    hog = run(pool, "x = []\nwhile True:\n    x.append(bytearray(16 << 20))\n", memory="128m")
    assert hog.exit_code == 137 and hog.oom_killed and not hog.timed_out, hog
    after = run(pool, "print('fine')", memory="128m")
    assert after.exit_code == 0 and after.stdout == b"fine\n"


def test_an_honest_run_keeps_loopback_subprocesses_and_its_writes(pool):
    script = (
        "import os, socket, subprocess\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\n"
        "c = socket.create_connection(s.getsockname()); a, _ = s.accept(); c.send(b'hi')\n"
        "print(a.recv(2).decode())\n"
        "open('/work/repo/new.txt', 'w').write('x')\n"
        "print(subprocess.run(['cat', '/work/repo/new.txt'], capture_output=True, text=True).stdout)\n"
    )
    out = run(pool, script)
    assert out.exit_code == 0, out.stderr
    assert out.stdout.decode().split() == ["hi", "x"]


# --- pytest forked from a loaded one (keeper/zygote.py) -------------------------------------------

# A zip application run as the supervisor is (["python3", "-I", ZIP], a module preloaded whose
# name ends in .runners.pytest, which imports `secrets` as the real runner's channel does): it
# starts `python -m pytest` as the real runner does (proc.run_as_user) four times and prints
# what each test process saw: how its interpreter was started (a forked one's is the
# keeper's, `python3 -s -c ...`; a new one's `python -m pytest`), and where `secrets` is from.
ZIP = "/opt/grader/run/app.zip"
RUNNER = "import secrets\n"
TEST = (
    "import fnmatch, secrets, sys\n\n"
    "def test_where():\n"
    "    print('SAW', sys.orig_argv[1], sys.flags.hash_randomization, secrets.__file__, fnmatch.__file__)\n"
)
# a repository's own `fnmatch` (pytest imports the standard library's as it loads): the real
# one's names, as a new interpreter's pytest imports it in its place
FNMATCH = (
    "import importlib.util, os, sysconfig\n"
    "path = os.path.join(sysconfig.get_paths()['stdlib'], 'fnmatch.py')\n"
    "spec = importlib.util.spec_from_file_location('_std', path)\n"
    "std = importlib.util.module_from_spec(spec)\n"
    "spec.loader.exec_module(std)\n"
    "globals().update({k: v for k, v in vars(std).items() if not k.startswith('__')})\n"
)
MAIN = """
import os, subprocess, sys
os.makedirs("/tmp/t", exist_ok=True)
open("/tmp/t/test_where.py", "w").write(TEST)
def start(env):
    r, w = os.pipe()
    p = subprocess.Popen(
        ["python", "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "/tmp/t/test_where.py"],
        cwd="/work/repo", stdin=subprocess.DEVNULL, stdout=w, stderr=w, user=1000, group=1000,
        extra_groups=[], umask=0o022, start_new_session=True, pass_fds=(), env={**os.environ, **env},
    )
    os.close(w)
    out = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        out += chunk
    p.wait()
    said = [line for line in out.decode().splitlines() if line.startswith("SAW")]
    print(said[0] if said else out.decode()[-500:], p.returncode)
start({})
start({"PYTHONHASHSEED": "1"})
start({"PYTHONWARNINGS": "error"})
open("/work/repo/secrets.py", "w").write("TOKEN = 'the repository'\\n")
start({})
open("/work/repo/fnmatch.py", "w").write(FNMATCH)
start({})
""".replace("TEST", repr(TEST)).replace("FNMATCH", repr(FNMATCH))


def app() -> bytes:
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("__main__.py", MAIN)
        z.writestr("fake/__init__.py", "")
        z.writestr("fake/runners/__init__.py", "")
        z.writestr("fake/runners/pytest.py", RUNNER)
    return buf.getvalue()


def test_pytest_is_forked_only_when_a_new_interpreter_would_import_the_same(pool):
    """Honest: a repository whose own top-level module is named like one pytest loaded (a
    base commit may have one: the submission cannot add one, the supervisor restores such a
    file) has it imported, by a new interpreter; so does a run whose environment asks for
    another start than the keeper's (another hash seed, warnings as errors). Otherwise
    pytest is forked, its hash seed the shape's (PYTHONHASHSEED=0, as the grader's), and a
    module the supervisor alone had loaded (`secrets`) imported anew: the repository's."""
    sandbox, image = pool
    spec = ContainerSpec(
        image=image,
        command=["python3", "-I", ZIP],
        workdir="/work/repo",
        early_files={"run/app.zip": app()},
        env={"PYTHONHASHSEED": "0"},
        preload=("fake.runners.pytest",),
        limits=Limits(memory="512m", cpus=1.0, pids=64),
        timeout=60.0,
    )
    for _ in range(2):  # and the repository's module went with the first run
        out = sandbox.run(spec)
        assert out.exit_code == 0, out.stderr
        forked, hashseed, warnings, own_secrets, own_fnmatch = out.stdout.decode().splitlines()
        std = "/usr/lib/python3.11"
        assert forked == f"SAW -s 0 {std}/secrets.py {std}/fnmatch.py 0", forked
        assert hashseed == f"SAW -m 1 {std}/secrets.py {std}/fnmatch.py 0", hashseed
        assert warnings.startswith("SAW -m 0 "), warnings
        assert own_secrets == f"SAW -s 0 /work/repo/secrets.py {std}/fnmatch.py 0", own_secrets
        assert own_fnmatch == "SAW -m 0 /work/repo/secrets.py /work/repo/fnmatch.py 0", own_fnmatch


def test_idle_keepers_are_bounded_the_least_recently_used_removed(grader, mini_set):
    """A worker grading many tasks keeps GRADER_POOL_KEEPERS idle keepers, not one a task."""
    image, _ = grader.images.instance_image(mini_set.get("mini"))
    sandbox = get_sandbox("pool", keepers=1)
    try:
        ids = []
        for shape in ("a", "b"):
            spec = ContainerSpec(image=image, command=["true"], workdir="/work/repo", labels={"grader.task": shape})
            assert sandbox.run(spec).exit_code == 0
            ids.append(sandbox._idle_ids())
        assert len(ids[0]) == len(ids[1]) == 1 and ids[0] != ids[1]
        assert sandbox.engine.client.containers.list(all=True, filters={"id": list(ids[0])[0]}) == []
        assert sandbox.busy_containers() == []
    finally:
        sandbox.close()


# A run's network namespace (nsfs inodes are unique on the machine), then a listener left
# behind in a daemon, and whether a port the other keeper's run left listening answers here.
NETNS = """
import os, socket, sys, time
print(os.stat("/proc/self/ns/net").st_ino)
try:
    socket.create_connection(("127.0.0.1", 47001), timeout=0.5).close()
    print("reached")
except OSError:
    print("refused")
if os.fork() == 0:
    os.setsid()
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 47001))
    s.listen(8)
    time.sleep(30)
    os._exit(0)
time.sleep(0.3)
"""


def test_keepers_share_a_network_lane_that_no_run_is_in(grader, mini_set):
    """The keepers of a sandbox sit in one network lane (a namespace Docker made once, not
    once a keeper); every run makes its own. Attacks: a run of each of two keepers (two
    shapes) reads which namespace it is in and leaves a daemon listening on a port, for the
    next run of either keeper to reach. Honest: each run still has its loopback (it listens)."""
    image, _ = grader.images.instance_image(mini_set.get("mini"))
    sandbox = get_sandbox("pool")
    try:
        seen = []
        for shape in ("a", "b", "a", "b"):
            spec = ContainerSpec(
                image=image, command=PY + [NETNS], workdir="/work/repo", labels={"grader.task": shape}, timeout=20.0
            )
            out = sandbox.run(spec)
            assert out.exit_code == 0, out.stderr
            inode, reached = out.stdout.decode().split()
            assert reached == "refused"  # nothing the run before left listens here
            seen.append(int(inode))
        api = sandbox.engine.client.api
        keepers = sorted(sandbox._idle_ids())
        assert len(keepers) == 2
        modes = {api.inspect_container(k)["HostConfig"]["NetworkMode"] for k in keepers}
        assert len(modes) == 1 and next(iter(modes)).startswith("container:")  # one lane for both
        holder_pid = api.inspect_container(next(iter(modes)).split(":", 1)[1])["State"]["Pid"]
        lane = os.stat(f"/proc/{holder_pid}/ns/net").st_ino
        # a namespace of each run's own, never the lane (a freed namespace's inode number may
        # be given to the next one, so the runs' numbers need not differ from each other)
        assert lane not in seen
        # the lane's holder gone (removed by someone, dockerd restarted): a new keeper gets a new lane
        api.remove_container(next(iter(modes)).split(":", 1)[1], force=True)
        spec = ContainerSpec(image=image, command=["true"], workdir="/work/repo", labels={"grader.task": "c"})
        assert sandbox.run(spec).exit_code == 0
        new = {api.inspect_container(k)["HostConfig"]["NetworkMode"] for k in sandbox._idle_ids()} - modes
        assert len(new) == 1 and next(iter(new)).startswith("container:")
    finally:
        sandbox.close()


def test_a_grader_says_which_tasks_it_holds_a_keeper_of(settings, mini_set):
    """Grader.is_warm under the pool (jobs.take_warm asks it): no keeper before a grade; the
    grade's keeper idle after it; none of another shape; none once the keepers are removed."""
    from grader.pipeline import Grader
    from grader.verdict import Verdict

    grader = Grader(settings, runtime="pool")
    task = mini_set.get("mini")
    try:
        assert not grader.is_warm(task)
        assert grader.grade(task, task.gold_patch_text()).verdict is Verdict.PASS
        grader.sandbox.settle()
        assert grader.is_warm(task)
        assert not grader.is_warm(task.model_copy(update={"id": "another"}))
    finally:
        grader.sandbox.close()
    assert not grader.is_warm(task)
