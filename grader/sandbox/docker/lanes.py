"""Network lanes: the network namespace a grading container runs in, made once and given
to one run at a time, instead of a new one for every container.

With `--network=none` Docker makes each container its own namespace holding only a
loopback interface, and that costs the machine 115 to 145 ms of CPU a container (measured
by benchmarks/container_cost.py: dockerd's network sandbox, not the kernel, which makes and
destroys all of a container's namespaces in 10 ms). A lane is a namespace of the same kind, held by an
idle container of its own (the "holder": `sleep`, no capabilities, nobody, read-only, a
few MiB), that grading containers join (`network_mode=container:<holder>`).

What keeps it as private as a namespace of a run's own:
- one run at a time: a run takes its lane from the delivery of its files until its
  container is gone (every process of it dead, so every socket of it closed); a run that
  finds its container's lane taken by another run starts another container in a free
  lane, made if there is none. Containers started ahead of demand join a lane while they
  idle: until their files come they run only the sandbox's own boot code.
- nothing a run's processes leave behind outlives them in the namespace: a closed TCP
  connection's TIME_WAIT (which would make the next run's bind of that port fail) is never
  kept (`net.ipv4.tcp_max_tw_buckets=0`), nor are TCP's per-destination metrics
  (`net.ipv4.tcp_no_metrics_save=1`); every other socket, the abstract Unix ones included,
  dies with its process. Nothing in the namespace can be changed without CAP_NET_ADMIN,
  which no grading container has.
- what is still shared from one run to the next: the namespace's counters (the loopback
  interface's packets, /proc/net/snmp), which a run can read and move but which change
  nothing another run does; runc's containers already share the host's /proc/stat and
  /proc/meminfo the same way (docs/security.md).
- a lane whose run's container could not be removed, or whose holder died, is never given
  out again.

Under gVisor (`--network=none` given to runsc) a run never uses the namespace at all: its
sandbox has a network stack of its own, with only a loopback.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import docker.errors
import requests.exceptions

from grader.errors import SandboxError

if TYPE_CHECKING:
    from docker.models.containers import Container

    from grader.sandbox.docker.engine import DockerEngine

LANE_LABEL = "grader.lane"
BASE_IMAGES = "grader/base:*"  # the offline base images (grader/images.py's BASE_REPO), never pruned
# kept in a lane's namespace from the start (namespaced sysctls, set by the engine as it makes it)
SYSCTLS = {"net.ipv4.tcp_max_tw_buckets": "0", "net.ipv4.tcp_no_metrics_save": "1"}
HOLDER_COMMAND = ["sleep", "2147483647"]


class Lane:
    """One network namespace, held by an idle container."""

    def __init__(self, holder: Container) -> None:
        self.holder = holder
        self.id = str(holder.id)
        self.busy = False  # a run is in it
        self.retired = False  # never given out again

    @property
    def network_mode(self) -> str:
        return f"container:{self.id}"


class Lanes:
    """The lanes of one sandbox."""

    def __init__(self, engine: DockerEngine, labels: Callable[[], dict[str, str]]) -> None:
        self.engine = engine
        self.labels = labels  # a holder's, as its owner is at the time
        self._lanes: list[Lane] = []
        self._lock = threading.Lock()
        self._image: str | None = None

    def ids(self) -> set[str]:
        with self._lock:
            return {lane.id for lane in self._lanes}

    def for_idle(self, image: str) -> Lane:
        """A lane for a container that will idle until a run takes it: a free one if any,
        else any that is given out (the run there is over before this container's begins,
        or that run takes another)."""
        with self._lock:
            live = [lane for lane in self._lanes if not lane.retired]
            free = [lane for lane in live if not lane.busy]
            if free or live:
                return (free or live)[0]
        return self._add(image, busy=False)

    def take_free(self, image: str) -> Lane:
        """A lane no run is in, now given to the caller's run: made if there is none."""
        with self._lock:
            for lane in self._lanes:
                if not lane.retired and not lane.busy:
                    lane.busy = True
                    return lane
        return self._add(image, busy=True)

    def take(self, lane: Lane) -> bool:
        """Give `lane` to the caller's run, if no run is in it."""
        with self._lock:
            if lane.busy or lane.retired:
                return False
            lane.busy = True
            return True

    def give_back(self, lane: Lane, *, clean: bool) -> None:
        """The run in `lane` is over: its container is gone (`clean`), or may not be."""
        with self._lock:
            lane.busy = False
            if not clean:
                lane.retired = True

    def retire(self, lane: Lane) -> None:
        with self._lock:
            lane.retired = True

    def sweep(self) -> list[Lane]:
        """Take the retired lanes out; the caller removes their holders."""
        with self._lock:
            gone = [lane for lane in self._lanes if lane.retired and not lane.busy]
            self._lanes = [lane for lane in self._lanes if lane not in gone]
        return gone

    def close(self) -> list[Lane]:
        with self._lock:
            for lane in self._lanes:
                lane.retired = True
        return self.sweep()

    def holder_alive(self, lane: Lane) -> bool:
        try:
            state = self.engine.client.api.inspect_container(lane.id)["State"]
        except (docker.errors.DockerException, requests.exceptions.RequestException):
            return False
        return bool(state.get("Running")) and not state.get("Paused")

    def _holder_image(self, fallback: str) -> str:
        """A base image if the engine has one (never pruned, so a holder keeps no task's
        image in use), else the run's own."""
        if self._image is None:
            try:
                found = self.engine.client.images.list(filters={"reference": BASE_IMAGES})
            except (docker.errors.DockerException, requests.exceptions.RequestException):
                found = []
            self._image = str(found[0].id) if found else ""
        return self._image or fallback

    def _add(self, image: str, *, busy: bool) -> Lane:
        kwargs: dict[str, Any] = dict(
            image=self._holder_image(image),
            command=HOLDER_COMMAND,
            user="65534:65534",
            network_mode="none",
            sysctls=SYSCTLS,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges:true"],
            read_only=True,
            mem_limit=32 * 1024**2,
            # room for runc's own init (a Go process whose threads the pids cgroup counts
            # while it starts the container): at 4, under load, it died before `sleep` ran
            pids_limit=32,
            ipc_mode="private",
            log_config={"type": "none", "config": {}},
            labels={**self.labels(), LANE_LABEL: "1"},
            auto_remove=True,  # a holder stopped by anyone (dockerd's restart too) removes itself
        )
        holder = None
        for attempt in (1, 2):  # a start that fails is removed and tried once more
            try:
                holder = self.engine.client.containers.create(**kwargs)
                holder.start()
                break
            except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
                if holder is not None:
                    try:
                        holder.remove(force=True)
                    except (docker.errors.DockerException, requests.exceptions.RequestException):
                        pass  # the reaper takes a stopped container of ours
                    holder = None
                if attempt == 2:
                    raise SandboxError(f"cannot start a network lane: {exc}") from exc
        assert holder is not None
        lane = Lane(holder)
        lane.busy = busy
        with self._lock:
            self._lanes.append(lane)
        return lane
