"""The same sandbox under gVisor (runsc): the verdicts hold, and the hardening too."""

from __future__ import annotations

import textwrap

import pytest

from grader.pipeline import Grader
from grader.verdict import Verdict
from helpers.mini import FIXED

pytestmark = [pytest.mark.docker, pytest.mark.gvisor]


@pytest.fixture(scope="module")
def gvisor(settings) -> Grader:
    g = Grader(settings, runtime="runsc")
    if "runsc" not in g.sandbox.engine.runtimes():
        pytest.fail("runsc is not registered with dockerd: run scripts/setup.sh")
    return g


def test_gold_passes_and_empty_fails_under_gvisor(gvisor, mini_set):
    task = mini_set.get("mini")
    gold = gvisor.grade(task, task.gold_patch_text())
    assert gold.verdict is Verdict.PASS, gold.to_json()
    assert gold.provenance.runtime == "runsc"
    assert gvisor.grade(task, b"").verdict is Verdict.FAIL


def test_conftest_attack_under_gvisor(gvisor, mini, mini_set):
    conftest = (
        "import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
        "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n"
    )
    result = gvisor.grade(mini_set.get("mini"), mini.diff({"conftest.py": conftest}))
    assert result.verdict is Verdict.FAIL and result.apply.neutralized == ["conftest.py"]


def test_network_and_timeout_under_gvisor(gvisor, mini, mini_set):
    code = textwrap.dedent("""\
        import socket
        try:
            socket.create_connection(("1.1.1.1", 53), timeout=2).close()
            ONLINE = True
        except OSError:
            ONLINE = False

        def mean(xs):
            if not xs and ONLINE:
                raise ValueError("empty")
            return sum(xs) / len(xs)
        """)
    assert gvisor.grade(mini_set.get("mini"), mini.diff({"calc/__init__.py": code})).verdict is Verdict.FAIL
    slow = mini.diff({"calc/__init__.py": "import time\ntime.sleep(600)\n" + FIXED})
    assert gvisor.grade(mini_set.get("mini"), slow).verdict is Verdict.TIMED_OUT
    assert gvisor.sandbox.busy_containers() == []


def test_the_process_limit_holds_inside_gvisor(gvisor, mini, mini_set):
    """Under gVisor the host's pids cgroup counts the sandbox kernel's threads: a run that
    filled it crashed the sandbox (an ERROR, charged to nobody, retried forever). The
    task's limit (64 here) must bind the run's own forks instead, and the run be graded.
    The memory cgroup holds the sandbox kernel too: 64 forks of pytest peak near 45 MiB
    under runc but up to 230 MiB under runsc, which with the task's 256m alone was killed
    for memory under load (a FAIL that runc would have passed)."""
    code = textwrap.dedent("""\
        import os
        FORKED = 0
        while FORKED < 400:
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                os.execv("/bin/sleep", ["sleep", "600"])
            FORKED += 1

        def mean(xs):
            if not xs:
                if 8 < FORKED <= 64:  # the task allows 64 processes
                    raise ValueError("empty")
                raise RuntimeError(f"forked {FORKED} processes")
            return sum(xs) / len(xs)
        """)
    result = gvisor.grade(mini_set.get("mini"), mini.diff({"calc/__init__.py": code}))
    assert result.verdict is Verdict.PASS, result.to_json()
    assert gvisor.sandbox.busy_containers() == []


def test_the_memory_limit_still_binds_under_gvisor(gvisor, mini, mini_set):
    """The room made for gVisor's own kernel is not a way round the task's limit: a run
    that really fills memory (pages written, not just reserved) is killed for it."""
    hog = (
        textwrap.dedent("""\
        hog = []
        for _ in range(64):  # 4 GiB, written
            hog.append(b"x" * (64 * 1024 * 1024))
        """)
        + FIXED
    )
    result = gvisor.grade(mini_set.get("mini"), mini.diff({"calc/__init__.py": hog}))
    assert result.verdict is Verdict.FAIL, result.to_json()
    assert "memory limit" in result.explanation, result.explanation
    assert gvisor.sandbox.busy_containers() == []


@pytest.mark.parametrize("attempt", range(3))
def test_a_fork_bomb_is_graded_under_gvisor(gvisor, mini, mini_set, attempt):
    bomb = (
        textwrap.dedent("""\
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
        """)
        + FIXED
    )
    result = gvisor.grade(mini_set.get("mini"), mini.diff({"calc/__init__.py": bomb}))
    assert result.verdict in (Verdict.FAIL, Verdict.TIMED_OUT), result.to_json()
    assert gvisor.sandbox.busy_containers() == []
