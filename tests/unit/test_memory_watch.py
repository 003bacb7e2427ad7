"""The memory watch of grader/sandbox/docker/memory.py over cgroup files written by the
test: v1 and v2, both Docker cgroup drivers, a limit hit while watched, a cgroup that is
gone. (The real cgroup is tests/docker/test_gvisor.py's memory hog.)"""

from __future__ import annotations

import time

import pytest

from grader.sandbox.docker.memory import PLACES, MemoryWatch, find, limit_reached

CID = "ab" * 32


def v1(root, place="memory/docker/{id}", failcnt=0, oom_kill=0):
    d = root / place.format(id=CID)
    d.mkdir(parents=True, exist_ok=True)
    (d / "memory.failcnt").write_text(f"{failcnt}\n")
    (d / "memory.oom_control").write_text(f"oom_kill_disable 0\nunder_oom 0\noom_kill {oom_kill}\n")
    return d


def v2(root, place="docker/{id}", high=0, mx=0, oom=0, oom_kill=0):
    d = root / place.format(id=CID)
    d.mkdir(parents=True, exist_ok=True)
    (d / "memory.events").write_text(f"low 0\nhigh {high}\nmax {mx}\noom {oom}\noom_kill {oom_kill}\n")
    return d


@pytest.mark.parametrize("place", PLACES)
def test_every_place_docker_puts_a_cgroup_is_found(tmp_path, place):
    d = v1(tmp_path, place) if place.startswith("memory/") else v2(tmp_path, place)
    assert find(CID, tmp_path) == d
    assert find("cd" * 32, tmp_path) is None


def test_v1_the_limit_hit_or_an_oom_kill(tmp_path):
    assert not limit_reached(v1(tmp_path))
    assert limit_reached(v1(tmp_path, failcnt=3))
    assert limit_reached(v1(tmp_path, failcnt=0, oom_kill=1))


def test_v2_max_or_oom_counts_but_high_does_not(tmp_path):
    assert not limit_reached(v2(tmp_path, high=12))
    assert limit_reached(v2(tmp_path, mx=1))
    assert limit_reached(v2(tmp_path, oom_kill=1))


def test_a_cgroup_gone_reads_as_nothing_learned(tmp_path):
    d = v1(tmp_path)
    for f in d.iterdir():
        f.unlink()
    assert not limit_reached(d)


def test_the_watch_sees_a_hit_while_it_runs_and_stops(tmp_path):
    d = v1(tmp_path)
    watch = MemoryWatch(CID, root=tmp_path, every=0.01)
    assert watch.watching
    (d / "memory.failcnt").write_text("7\n")
    deadline = time.monotonic() + 10
    while not watch.hit and time.monotonic() < deadline:
        time.sleep(0.01)
    assert watch.stop() is True


def test_no_cgroup_in_sight_means_no_watch_and_no_hit(tmp_path):
    watch = MemoryWatch(CID, root=tmp_path)
    assert not watch.watching
    assert watch.stop() is False


def test_an_honest_run_that_never_hit_is_not_a_hit(tmp_path):
    v2(tmp_path, high=3)
    watch = MemoryWatch(CID, root=tmp_path, every=0.01)
    time.sleep(0.05)
    assert watch.stop() is False
