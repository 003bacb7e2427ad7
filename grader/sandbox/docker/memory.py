"""Whether a container reached its memory limit, read from its memory cgroup while it runs.

Docker says a container was killed for memory (`State.OOMKilled`) when containerd saw the
cgroup's OOM event. Under gVisor the event is often lost: the kernel kills the sandbox's
own processes, the container ends at once, its cgroup is removed, and the watcher that
would have reported the event finds the cgroup gone. The run then looks like a container
that was SIGKILLed for no reason (exit 137, no report), an ERROR, when it was the
submission's own memory hog. So the sandbox also asks the kernel, while the container
runs: the cgroup's count of times its usage hit the limit (cgroup v1 `memory.failcnt`,
v2 `memory.events` `max`) and of OOM kills (v1 `memory.oom_control`, v2
`memory.events`). A container that was killed (137) after its usage hit the limit was
killed for memory.

The cgroup is found under the host's /sys/fs/cgroup by the container's id, for both
drivers (cgroupfs, systemd) and both versions; where none is visible (the grader runs in
a container of its own without the host's cgroups) the watch learns nothing and the
engine's flag alone decides, as before.
"""

from __future__ import annotations

import threading
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
# where Docker puts a container's memory cgroup: v1 (cgroupfs, systemd), then v2 (cgroupfs, systemd)
PLACES = (
    "memory/docker/{id}",
    "memory/system.slice/docker-{id}.scope",
    "docker/{id}",
    "system.slice/docker-{id}.scope",
)
EVERY = 0.1  # seconds between looks: a hog that fills its limit keeps it hit for longer than this


def find(container_id: str, root: Path = ROOT) -> Path | None:
    for place in PLACES:
        d = root / place.format(id=container_id)
        if (d / "memory.failcnt").exists() or (d / "memory.events").exists():
            return d
    return None


def limit_reached(cgroup: Path) -> bool:
    """Whether the cgroup's usage has hit its limit (or it killed for memory) so far.
    False when the files cannot be read (the cgroup is gone)."""
    try:
        if (cgroup / "memory.failcnt").exists():  # v1
            if int((cgroup / "memory.failcnt").read_text().strip() or 0) > 0:
                return True
            fields = _fields(cgroup / "memory.oom_control")
            return fields.get("oom_kill", 0) > 0
        fields = _fields(cgroup / "memory.events")  # v2
        return fields.get("max", 0) > 0 or fields.get("oom_kill", 0) > 0 or fields.get("oom", 0) > 0
    except (OSError, ValueError):
        return False


def _fields(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in path.read_text().splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = int(value)
    return out


class MemoryWatch:
    """Looks at a running container's memory cgroup until `stop()`, which answers whether
    its usage ever hit the limit. Costs one small file read every EVERY seconds."""

    def __init__(self, container_id: str, *, root: Path = ROOT, every: float = EVERY):
        self.every = every
        self.hit = False
        self._stop = threading.Event()
        self._cgroup = find(container_id, root)
        self._thread: threading.Thread | None = None
        if self._cgroup is not None:
            self._thread = threading.Thread(target=self._watch, name="grader-memory-watch", daemon=True)
            self._thread.start()

    @property
    def watching(self) -> bool:
        return self._cgroup is not None

    def _watch(self) -> None:
        assert self._cgroup is not None
        while not self._stop.is_set():
            if limit_reached(self._cgroup):
                self.hit = True
                return
            self._stop.wait(self.every)

    def stop(self) -> bool:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        return self.hit
