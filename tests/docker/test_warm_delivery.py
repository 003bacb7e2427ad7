"""Containers started ahead of demand, under runc and gVisor: a run's files arrive on the
started container's standard input (grader/sandbox/docker/delivery.py), and nothing of
that delivery, nor of an earlier grade, reaches the code under test.

Each hostile patch decides its own verdict from what it finds: the module under test
carries the real fix only when the attack worked (or when its own probe could not run at
all), so the verdict that proves the attack failed is the one asked for, and a probe that
silently did nothing cannot pass for a defence. Every grade here but the first of a kind
takes a container started for it, and says so (`container_warm`).
"""

from __future__ import annotations

import json
import secrets
import textwrap

import pytest

from grader.grading import ship
from grader.pipeline import Grader
from grader.sandbox import ContainerSpec, Limits
from grader.sandbox.docker import containers
from grader.verdict import Verdict
from helpers.mini import FIXED

pytestmark = pytest.mark.docker
UNFIXED = "def mean(xs):\n    return sum(xs) / len(xs)\n"
RUNTIMES = [pytest.param("runc", id="runc"), pytest.param("runsc", id="gvisor", marks=pytest.mark.gvisor)]


@pytest.fixture(scope="module", params=RUNTIMES)
def grader(request, settings) -> Grader:
    g = Grader(settings, runtime=request.param)
    if request.param == "runsc" and "runsc" not in g.sandbox.engine.runtimes():
        pytest.fail("runsc is not registered with dockerd: run scripts/setup.sh")
    request.addfinalizer(g.sandbox.close)
    return g


def warm_grade(grader: Grader, mini_set, patch: bytes):
    """Grade `patch` on a container started for it before the grade asked."""
    task = mini_set.get("mini")
    grader.sandbox.busy_containers()  # the container started after the last grade is ready
    result = grader.grade(task, patch)
    assert result.durations.get("container_warm") == 1.0, result.durations
    assert grader.sandbox.busy_containers() == [], "a grading container was left behind"
    return result


def decided_by(found: str, *, fixed_when: str) -> str:
    """A module under test whose `mean` is fixed only when `fixed_when` holds of what the
    prelude `found` computed."""
    return (
        textwrap.dedent(found)
        + f"\nif {fixed_when}:\n"
        + textwrap.indent(FIXED, "    ")
        + ("else:\n" + textwrap.indent(UNFIXED, "    "))
    )


def test_an_honest_fix_passes_on_a_started_container_and_nothing_of_it_stays(grader, mini, mini_set):
    gold = mini_set.get("mini").gold_patch_text()
    grader.grade(mini_set.get("mini"), gold)  # the first of its shape may start cold
    for _ in range(2):
        result = warm_grade(grader, mini_set, gold)
        assert result.verdict is Verdict.PASS, result.to_json()
    # the fix is gone with its container: the next one grades the base
    assert warm_grade(grader, mini_set, b"").verdict is Verdict.FAIL
    assert warm_grade(grader, mini_set, mini.diff({"calc/__init__.py": FIXED})).verdict is Verdict.PASS


# What the code under test would read the run's delivery through: its own standard input,
# every process's standard input, the run's files where the container's loop wrote them,
# and the directory above them. Each must give nothing: an error, or no bytes.
PROBE_DELIVERY = """\
import glob, os
LEAKS = []
def _take(what, read):
    try:
        data = read()
    except OSError:
        return
    if data:
        LEAKS.append(what)
_take("stdin", lambda: os.read(0, 65536))
for _fd in glob.glob("/proc/[0-9]*/fd/0"):
    _take(_fd, lambda: open(_fd, "rb").read(65536))
for _name in ("order.json", "box.zip", "submission.patch"):
    _take(_name, lambda: open("/opt/grader/run/" + _name, "rb").read())
_take("/opt/grader", lambda: os.listdir("/opt/grader"))
SANE = "def mean" in open(__file__).read() and os.getuid() == 1000
"""


def test_the_code_under_test_reads_nothing_of_the_delivery(grader, mini, mini_set):
    code = decided_by(PROBE_DELIVERY, fixed_when="LEAKS or not SANE")
    grader.grade(mini_set.get("mini"), b"")  # a container of this shape started ahead
    result = warm_grade(grader, mini_set, mini.diff({"calc/__init__.py": code}))
    assert result.verdict is Verdict.FAIL, result.to_json()
    assert result.tests.fail_to_pass["failure"] == ["tests/test_mean.py::test_empty"]


# A grade that leaves a process behind: detached from the test run, in a session of its
# own, deaf to SIGTERM and SIGHUP, it marks /tmp and the repository and watches for the
# next grade's files for 30 s. The grade passes only once the lingerer has marked /tmp,
# so the next grade's probe looks for something that was really there.
LINGER = """\
import os, signal, time
MARK = "{mark}"
def _linger():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    end = time.time() + 30
    while time.time() < end:
        for path in ("/tmp/" + MARK, os.path.join(os.getcwd(), MARK)):
            try:
                with open(path, "w") as f:
                    f.write(MARK)
            except OSError:
                pass
        for path in ("/opt/grader/run/order.json", "/opt/grader/run/submission.patch", "/proc/1/fd/0"):
            try:
                open(path, "rb").read()
                open("/tmp/" + MARK + "-saw", "w").write(path)
            except OSError:
                pass
        time.sleep(0.05)
if not os.path.exists("/tmp/" + MARK):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            _linger()
        os._exit(0)
    for _ in range(100):
        if os.path.exists("/tmp/" + MARK):
            break
        time.sleep(0.02)
LINGERED = os.path.exists("/tmp/" + MARK)
"""
# The next grade, an honest fix, looks for any of it: the marks, and any process of the
# submission's user but its own and its ancestors. Its own control child, forked just
# before it looks, must be found: a look that cannot see a process proves nothing.
SEEK = """\
import os, signal, time
MARK = "{mark}"
SEEN = [p for p in ("/tmp/" + MARK, "/tmp/" + MARK + "-saw", os.path.join(os.getcwd(), MARK)) if os.path.exists(p)]
def _status(pid):
    try:
        lines = open("/proc/%s/status" % pid).read().splitlines()
    except OSError:
        return {{}}
    return dict(line.split(":", 1) for line in lines if ":" in line)
_control = os.fork()
if _control == 0:
    time.sleep(30)
    os._exit(0)
_mine, _pid = set(), str(os.getpid())
while _pid not in ("", "0") and _pid not in _mine:
    _mine.add(_pid)
    _pid = _status(_pid).get("PPid", "").strip()
_users = {{p for p in os.listdir("/proc") if p.isdigit() and _status(p).get("Uid", "").split()[:1] == ["1000"]}}
os.kill(_control, signal.SIGKILL)
os.waitpid(_control, 0)
MINE = str(_control) in _users and str(os.getpid()) in _users
SEEN += sorted(_users - _mine - {{str(_control)}})
"""


def test_a_process_left_running_sees_nothing_of_the_next_grade(grader, mini, mini_set):
    mark = "grader-lingerer-" + secrets.token_hex(4)
    grader.grade(mini_set.get("mini"), b"")  # a container of this shape started ahead
    lingerer = mini.diff({"calc/__init__.py": decided_by(LINGER.format(mark=mark), fixed_when="LINGERED")})
    first = warm_grade(grader, mini_set, lingerer)
    assert first.verdict is Verdict.PASS, first.to_json()  # the lingerer ran
    honest = mini.diff({"calc/__init__.py": decided_by(SEEK.format(mark=mark), fixed_when="MINE and not SEEN")})
    second = warm_grade(grader, mini_set, honest)
    assert second.verdict is Verdict.PASS, second.to_json()


def test_a_delivery_cut_short_runs_nothing(grader, mini_set, monkeypatch):
    """A bundle that ends early (the host's write cut off) is the container's own error,
    exit 1 with the reason, before the run's command starts: never a verdict."""
    image, _ = grader.images.instance_image(mini_set.get("mini"))
    whole = containers.bundle
    # the run's own bundle cut short (the shape's early files, none here, come whole)
    monkeypatch.setattr(containers, "bundle", lambda files: whole(files)[:-5] if files else whole(files))
    spec = ContainerSpec(
        image=image,
        command=["sh", "-c", "echo ran"],
        files={"run/a": b"x" * 100_000},
        limits=Limits(memory="256m", pids=64),
        timeout=30.0,
        labels={"grader.task": "delivery"},
    )
    grader.sandbox.prewarm(spec)
    grader.sandbox.busy_containers()
    out = grader.sandbox.run(spec)
    assert out.durations["warm"] == 1.0
    assert (out.exit_code, out.stdout, out.timed_out) == (1, b"", False), out
    assert b"the run files ended early" in out.stderr
    assert grader.sandbox.busy_containers() == []


def _counting_starts(sandbox, monkeypatch) -> list[bytes]:
    """Every container the sandbox starts, by the early files it was given."""
    started: list[bytes] = []
    start = sandbox._start_new

    def counted(spec):
        started.append(spec.early_files.get("run/app", b""))
        return start(spec)

    monkeypatch.setattr(sandbox, "_start_new", counted)
    return started


def _spec(image: str, early: bytes) -> ContainerSpec:
    return ContainerSpec(
        image=image,
        command=["sh", "-c", "cat /opt/grader/run/app"],
        early_files={"run/app": early},
        limits=Limits(memory="256m", pids=64),
        timeout=30.0,
        labels={"grader.task": "pool"},
    )


def test_a_run_takes_the_container_being_started_for_it_and_none_is_started_twice(grader, mini_set, monkeypatch):
    """A run that comes while its shape's container is still starting waits for it rather
    than start another (which the refill would then replace, unused); a start asked for
    while one is under way starts none."""
    image, _ = grader.images.instance_image(mini_set.get("mini"))
    started = _counting_starts(grader.sandbox, monkeypatch)
    spec = _spec(image, b"one")
    grader.sandbox.prewarm(spec)
    grader.sandbox.prewarm(spec)  # under way: nothing more
    assert grader.sandbox.is_warm(spec)
    out = grader.sandbox.run(spec)  # at once: the start above is not finished
    assert (out.exit_code, out.stdout, out.durations["warm"]) == (0, b"one", 1.0), out
    grader.sandbox.busy_containers()  # the refill after the run has landed
    assert started == [b"one", b"one"]  # the one asked for ahead, the refill: no cold start
    assert grader.sandbox.busy_containers() == []


def test_new_early_files_replace_a_shapes_idle_container(grader, mini_set, monkeypatch):
    """The supervisor's archive changes once its bytecode is learnt: a shape keeps one idle
    container, the one with the files last asked for, even when the older start lands last."""
    image, _ = grader.images.instance_image(mini_set.get("mini"))
    old, new = _spec(image, b"old"), _spec(image, b"new")
    grader.sandbox.prewarm(old)
    grader.sandbox.prewarm(new)
    grader.sandbox.busy_containers()
    assert grader.sandbox.is_warm(new) and not grader.sandbox.is_warm(old)
    started = _counting_starts(grader.sandbox, monkeypatch)
    out = grader.sandbox.run(new)
    assert (out.stdout, out.durations["warm"]) == (b"new", 1.0)
    grader.sandbox.busy_containers()
    assert started == [b"new"]  # only the refill


def test_a_tasks_first_grade_gets_the_bytecode_its_environment_ran(grader, mini_set, monkeypatch):
    """A task's first grade gets the supervisor's bytecode when an image of its environment
    ran before (ship.Archives): the container (or keeper) started for it has the shape of its
    later grades, so none is started again once its interpreter is learnt; and the run
    imports the supervisor from that bytecode."""
    archives = ship.Archives()
    monkeypatch.setattr(grader, "_archives", archives)
    first, second = mini_set.get("mini"), mini_set.get("mini-nolist")
    assert grader.grade(first, first.gold_patch_text()).verdict is Verdict.PASS
    image, _ = grader.images.instance_image(second)
    assert not archives.knows(image) and archives.held()  # a new image, its environment's bytecode held
    runs, prewarmed = [], []
    run, prewarm = grader.sandbox.run, grader.sandbox.prewarm

    def spy(spec):
        out = run(spec)
        runs.append((spec, out))
        return out

    monkeypatch.setattr(grader.sandbox, "run", spy)
    monkeypatch.setattr(grader.sandbox, "prewarm", lambda spec: prewarmed.append(spec) or prewarm(spec))
    assert grader.grade(second, second.gold_patch_text()).verdict is Verdict.PASS
    ((spec, out),) = runs
    report = json.loads(out.stdout)
    assert report["bytecode"]["loaded"] is True and "compiled" not in report, report["bytecode"]
    assert archives.knows(image) and archives.for_image(image) in spec.early_files.values()
    assert prewarmed == []  # no container of another archive started for its next grade


def test_a_grader_says_which_tasks_it_holds_a_container_of(settings, mini_set):
    """Grader.is_warm, which a worker asks of the jobs it may take next (jobs.take_warm):
    nothing before a grade (no sandbox, no image looked up); after a grade, the container its
    refill started; nothing once the sandbox put its containers away."""
    grader = Grader(settings)
    task = mini_set.get("mini")
    assert not grader.is_warm(task) and grader._sandbox is None  # asking made no sandbox
    assert grader.grade(task, task.gold_patch_text()).verdict is Verdict.PASS
    assert grader.is_warm(task)  # the refill's start, under way or landed
    grader.sandbox.settle()
    assert grader.is_warm(task)
    grader.sandbox.close()
    assert not grader.is_warm(task)
