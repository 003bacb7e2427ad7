"""Network lanes (grader/sandbox/docker/lanes.py): a worker's runs take turns in network
namespaces made once, instead of Docker making one per container. What must hold, with
the real engine: nothing a run leaves in the namespace reaches the next run in it, two
runs at once never share one, the files Docker shares from a lane's holder are not the
run's to change, and a lane whose holder is gone is replaced, not used.

The sandbox is used directly (the attack suites grade through lanes too: they are on by
default). Each command runs as the container's first process, as root with the
supervisor's capabilities, which is more than a submission ever gets.
"""

from __future__ import annotations

import threading

import pytest

from grader.sandbox import ContainerSpec, Limits, get_sandbox
from grader.sandbox.docker import lanes as lanes_module

pytestmark = pytest.mark.docker

PY = ["python3", "-I", "-c"]
# Every run first prints its network namespace and the packets its loopback has carried so
# far, then sends one. A namespace's inode number is reused once it is freed, so only runs
# alive at once can be told apart by it; the loopback's count tells a namespace that earlier
# runs used (a lane's) from a new one.
NETNS = (
    "import os, socket\n"
    "print('netns', os.readlink('/proc/self/ns/net'))\n"
    "dev = [l.split() for l in open('/proc/net/dev').read().splitlines() if l.strip().startswith('lo:')]\n"
    "print('lo', int(dev[0][2]) if dev else -1)\n"
    "socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', 9))\n"
)

# A server closes its side first: on loopback that leaves its port in TIME_WAIT for 60 s.
TIME_WAIT = """
import socket
s = socket.socket(); s.bind(("127.0.0.1", 8765)); s.listen()
c = socket.create_connection(("127.0.0.1", 8765)); a, _ = s.accept()
a.close(); c.recv(1); c.close(); s.close()
"""
# An honest test's server, as plain socket code writes it: no SO_REUSEADDR.
BIND = """
import socket
s = socket.socket(); s.bind(("127.0.0.1", 8765)); s.listen(); print("bound")
"""
# A run that leaves a daemon behind: a TCP listener, a UDP socket and an abstract Unix
# socket, in a grandchild in a session of its own.
DAEMON = """
import os, socket, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        t = socket.socket(); t.bind(("127.0.0.1", 7001)); t.listen()
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 7002))
        x = socket.socket(socket.AF_UNIX); x.bind("\\0grader-lane-left"); x.listen()
        time.sleep(3600)
    os._exit(0)
time.sleep(0.5)
print("left")
"""
LOOK = """
import socket
try:
    socket.create_connection(("127.0.0.1", 7001), timeout=2); print("tcp reached")
except OSError:
    print("tcp refused")
x = socket.socket(socket.AF_UNIX)
try:
    x.connect("\\0grader-lane-left"); print("unix reached")
except OSError:
    print("unix refused")
for name in ("tcp", "tcp6", "udp", "udp6"):
    try:
        rows = open("/proc/net/" + name).read().splitlines()[1:]
    except OSError:
        rows = []
    print(name, len(rows))
print("abstract", "grader-lane-left" in open("/proc/net/unix").read())
"""


def spec(image: str, code: str, *, timeout: float = 30.0) -> ContainerSpec:
    return ContainerSpec(
        image=image,
        command=[*PY, NETNS + code],
        workdir="/",
        limits=Limits(memory="256m", cpus=1.0, pids=64),
        timeout=timeout,
        labels={"grader.task": "lanes"},
    )


def netns(out) -> str:
    return next(line for line in out.stdout.decode().splitlines() if line.startswith("netns"))


def lo_packets(out) -> int:
    """The packets the run's loopback had carried when it started: 0 in a new namespace."""
    return int(next(line for line in out.stdout.decode().splitlines() if line.startswith("lo "))[3:])


@pytest.fixture(scope="module")
def image(grader, mini_set) -> str:
    return grader.images.instance_image(mini_set.get("mini"))[0]


@pytest.fixture
def sandbox():
    made = []

    def make(name: str = "docker", **kwargs):
        s = get_sandbox(name, **kwargs)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def test_a_closed_connections_time_wait_never_reaches_the_next_run_in_its_lane(sandbox, image):
    box = sandbox(max_warm=1)
    first = box.run(spec(image, TIME_WAIT))
    assert first.exit_code == 0, first.stderr
    second = box.run(spec(image, BIND))
    assert lo_packets(first) == 0 and lo_packets(second) > 0, "the second run was not in the first one's lane"
    assert second.exit_code == 0 and b"bound" in second.stdout, second.stderr
    assert box.busy_containers() == []


def test_without_the_lanes_settings_the_same_two_runs_fail(sandbox, image, monkeypatch):
    """The test above can fail: a lane made without its settings keeps the TIME_WAIT."""
    monkeypatch.setattr(lanes_module, "SYSCTLS", {})
    box = sandbox(max_warm=0)
    first = box.run(spec(image, TIME_WAIT))
    assert first.exit_code == 0, first.stderr
    second = box.run(spec(image, BIND))
    assert lo_packets(second) > 0
    assert second.exit_code != 0 and b"Address already in use" in second.stderr


@pytest.mark.parametrize("name", ["docker", pytest.param("gvisor", marks=pytest.mark.gvisor)])
def test_a_daemon_left_by_a_run_is_gone_with_its_sockets_before_the_next(sandbox, image, name):
    box = sandbox(name, max_warm=1)
    left = box.run(spec(image, DAEMON))
    assert b"left" in left.stdout, left.stderr
    look = box.run(spec(image, LOOK))
    text = look.stdout.decode()
    assert look.exit_code == 0, look.stderr
    assert "tcp refused" in text and "unix refused" in text, text
    for name_ in ("tcp", "tcp6", "udp", "udp6"):
        assert f"{name_} 0" in text, text
    assert "abstract False" in text, text
    if name == "docker":
        assert lo_packets(look) > 0, "the second run was not in the first one's lane"


def test_a_run_killed_at_its_time_limit_leaves_its_lane_clean(sandbox, image):
    box = sandbox(max_warm=1)
    hang = "import socket, time\nt = socket.socket(); t.bind(('127.0.0.1', 7001)); t.listen()\ntime.sleep(600)\n"
    stuck = box.run(spec(image, hang, timeout=3))
    assert stuck.timed_out
    look = box.run(spec(image, LOOK))
    text = look.stdout.decode()
    assert lo_packets(look) > 0, "the next run was not in the killed run's lane"
    assert "tcp refused" in text and "tcp 0" in text, text
    assert box.busy_containers() == []


@pytest.mark.parametrize("name", ["docker", pytest.param("gvisor", marks=pytest.mark.gvisor)])
def test_two_runs_at_once_never_share_a_lane(sandbox, image, name):
    box = sandbox(name, max_warm=2)
    listen = "import socket, time\ns = socket.socket(); s.bind(('127.0.0.1', 7001)); s.listen()\ntime.sleep(6)\n"
    reach = (
        "import socket, time\ntime.sleep(2)\n"
        "try:\n    socket.create_connection(('127.0.0.1', 7001), timeout=2); print('reached')\n"
        "except OSError:\n    print('refused')\n"
    )
    box.prewarm(spec(image, listen))
    box.prewarm(spec(image, reach))
    box.settle()
    outs: dict[str, object] = {}
    threads = [
        threading.Thread(target=lambda k=k, c=c: outs.__setitem__(k, box.run(spec(image, c))))
        for k, c in (("listen", listen), ("reach", reach))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert outs["listen"].exit_code == 0, outs["listen"].stderr
    assert b"refused" in outs["reach"].stdout, outs["reach"].stdout
    if name == "docker":
        assert netns(outs["listen"]) != netns(outs["reach"])
    assert box.busy_containers() == []


def test_the_files_docker_shares_from_a_lanes_holder_are_not_the_users(sandbox, image):
    """/etc/hosts, /etc/hostname and /etc/resolv.conf are the holder's, bind-mounted into
    every container of its lane: the submission's user can change none of them."""
    box = sandbox(max_warm=0)
    code = (
        "os.setgroups([]); os.setgid(1000); os.setuid(1000)\n"
        "for p in ('/etc/hosts', '/etc/hostname', '/etc/resolv.conf'):\n"
        "    try:\n        open(p, 'a').write('x'); print('wrote', p)\n"
        "    except OSError as e:\n        print('refused', p, e.errno)\n"
    )
    out = box.run(spec(image, "import os\n" + code))
    text = out.stdout.decode()
    assert out.exit_code == 0, out.stderr
    assert "wrote" not in text and text.count("refused") == 3, text


def test_a_lane_whose_holder_is_gone_is_replaced(sandbox, image):
    box = sandbox(max_warm=1)
    first = box.run(spec(image, "print('run')"))
    box.settle()  # the next run's container idles in the lane
    (held,) = box._lanes.ids()
    box.engine.client.containers.get(held).remove(force=True)  # as an operator's clean-up would
    second = box.run(spec(image, "print('run')"))
    box.settle()
    third = box.run(spec(image, "print('run')"))
    assert [first.exit_code, second.exit_code, third.exit_code] == [0, 0, 0], (second.stderr, third.stderr)
    assert [first.durations["warm"], second.durations["warm"], third.durations["warm"]] == [0.0, 1.0, 1.0]
    # the second run took the container that idled in the old lane (the namespace lives on
    # while a process is in it); the next was started in a new lane, the old one retired
    assert lo_packets(first) == 0 and lo_packets(second) > 0 and lo_packets(third) == 0
    assert held not in box._lanes.ids() and len(box._lanes.ids()) == 1
    assert box.busy_containers() == []


def test_without_lanes_every_run_has_a_namespace_of_its_own(sandbox, image):
    box = sandbox(max_warm=1, network_lanes=False)
    a = box.run(spec(image, "print('a')"))
    b = box.run(spec(image, "print('b')"))
    assert lo_packets(a) == 0 and lo_packets(b) == 0
    assert box._lanes is None
