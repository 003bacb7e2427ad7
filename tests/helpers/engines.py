"""A second Docker engine on this machine, as a second grading host has: its own data
root, exec root, pidfile and socket (so its own images and containers), a bridge of its own and no
iptables rules (it must not fight the machine's engine over them), the machine's
daemon.json (gVisor's runsc registered as scripts/setup.sh does) and a cgroup parent of
its own, so that everything it ran can be found and killed. The machine's engine is
never touched.

`stop()` shuts it down as an operator would; `kill()` is a host lost whole: dockerd, its
containerd, the shims and every process of its containers SIGKILLed at once. Either
way `cleanup()` unmounts what it left and removes its directory."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

DAEMON_JSON = Path("/etc/docker/daemon.json")
CONTROLLERS = Path("/sys/fs/cgroup")


class SecondEngine:
    def __init__(self, name: str = "ge"):
        # short: the sockets containerd makes under it must fit a unix socket path
        self.root = Path(tempfile.mkdtemp(prefix=f"{name}-", dir="/tmp"))
        self.cgroup = f"grader-{self.root.name}"
        self.socket = self.root / "docker.sock"
        self.bridge = f"gb{self.root.name[-10:]}"  # an interface name: 15 characters at most
        self.url = f"unix://{self.socket}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> SecondEngine:
        subprocess.run(["ip", "link", "add", self.bridge, "type", "bridge"], check=True)
        taken = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True).stdout
        octet = next(n for n in range(100, 200) if f" 10.213.{n}." not in taken)  # another engine's is taken
        subprocess.run(["ip", "addr", "add", f"10.213.{octet}.1/24", "dev", self.bridge], check=True)
        subprocess.run(["ip", "link", "set", self.bridge, "up"], check=True)
        config = self.root / "daemon.json"
        config.write_text(DAEMON_JSON.read_text() if DAEMON_JSON.is_file() else "{}\n")
        self.log = open(self.root / "dockerd.log", "wb")
        self.proc = subprocess.Popen(
            [
                "dockerd",
                "--data-root", str(self.root / "data"),
                "--exec-root", str(self.root / "exec"),
                "--pidfile", str(self.root / "docker.pid"),
                "--host", self.url,
                "--config-file", str(config),
                # a bridge of its own: dockerd started with --bridge=none deletes the
                # machine's docker0 (libnetwork removes "the default bridge" it is told
                # not to use), and every image build of the machine's engine then fails
                "--bridge", self.bridge,
                "--iptables=false",
                "--ip-masq=false",
                "--ip-forward=false",
                "--cgroup-parent", f"/{self.cgroup}",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while not self.answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the second dockerd did not start:\n{self.log_tail()}")
            time.sleep(0.3)
        return self

    def answers(self) -> bool:
        return subprocess.run(["docker", "--host", self.url, "version"], capture_output=True).returncode == 0

    def docker(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["docker", "--host", self.url, *args], capture_output=True, text=True)

    def log_tail(self) -> str:
        path = self.root / "dockerd.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    # --- its processes ---------------------------------------------------------------------
    def processes(self) -> list[int]:
        """dockerd, its containerd and shims (their command lines name this root), and every
        process of its containers (in its cgroup parent)."""
        found: set[int] = set()
        mark = str(self.root).encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if mark in (entry / "cmdline").read_bytes():
                    found.add(int(entry.name))
            except OSError:
                continue
        pids = CONTROLLERS / "pids" / self.cgroup
        if pids.is_dir():
            for procs in pids.rglob("cgroup.procs"):
                try:
                    found |= {int(p) for p in procs.read_text().split()}
                except OSError:
                    continue
        return sorted(found)

    def kill(self) -> list[int]:
        """The host lost whole: SIGKILL to all of it at once. Returns the pids killed."""
        killed: list[int] = []
        for _ in range(5):  # a shim may start a process while the others die
            pids = self.processes()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                except ProcessLookupError:
                    pass
            time.sleep(0.5)
        if self.proc is not None:
            self.proc.wait(timeout=30)
        return killed

    def stop(self, timeout: float = 60) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.processes():  # containers of a dockerd stopped while they ran, or a kill()
            self.kill()

    def cleanup(self) -> None:
        """Everything it left: mounts under its root, its cgroups, its bridge, its directory."""
        self.stop()
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
        mounts = []
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4].replace("\\040", " ")
            if point == str(self.root) or point.startswith(f"{self.root}/"):
                mounts.append(point)
        for point in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True)
        for controller in CONTROLLERS.iterdir():
            top = controller / self.cgroup
            if top.is_dir():
                for d in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
                    try:
                        d.rmdir()
                    except OSError:
                        pass
                try:
                    top.rmdir()
                except OSError:
                    pass
        if getattr(self, "log", None) is not None:
            self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)
