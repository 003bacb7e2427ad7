"""The sandbox interface: run one command in a fresh, isolated container and hand back
what it printed. Providers register by name (`sandbox_provider`); the pipeline never
knows which it has. This module names no provider: grader/sandbox/__init__.py knows the
built-in ones (docker, gvisor, fake) and imports each on first use.

A sandbox raises SandboxError (or ImageError) for faults of its own; whatever the
command does, including crashing or running out of time, is returned as data.
tests/docker/test_sandbox_conformance.py holds every provider to that.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from grader.errors import SandboxError


@dataclass(frozen=True)
class Limits:
    memory: str = "1g"
    cpus: float = 1.0
    pids: int = 256


@dataclass(frozen=True)
class ContainerSpec:
    image: str
    command: list[str]
    # Placed before start, root-owned (directories 0700, files 0600), under `files_root`,
    # a directory that exists in the image; keys are paths relative to it.
    files: dict[str, bytes] = field(default_factory=dict)
    files_root: str = "/opt/grader"
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/"
    limits: Limits = Limits()
    timeout: float = 60.0  # wall clock for the whole container life, from start to exit
    labels: dict[str, str] = field(default_factory=dict)
    # Files of the shape, the same for every run of it (the supervisor's archive), placed
    # like `files` (no path in both): a provider that starts containers ahead of demand
    # places them at the start, before a run's own `files` arrive.
    early_files: dict[str, bytes] = field(default_factory=dict)
    # Modules a provider may import ahead of the run when `command` is ["python3", "-I", ZIP]
    # with ZIP among the early files: the interpreter that waited for the run's files then
    # runs ZIP as that command would, these already loaded. Empty: the command is started
    # when the files are in place, as it is.
    preload: tuple[str, ...] = ()


def refuse_clashes(spec: ContainerSpec) -> None:
    """A path among both a run's files and its shape's early files is a fault of the caller,
    refused by every provider before anything starts."""
    both = sorted(spec.files.keys() & spec.early_files.keys())
    if both:
        raise SandboxError(f"a run's files and its shape's early files both hold {both}")


@dataclass
class ContainerOutput:
    exit_code: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool
    oom_killed: bool
    image_id: str
    runtime: str
    durations: dict[str, float] = field(default_factory=dict)


class Sandbox(ABC):
    """A provider of isolated runs. What every provider promises, and
    tests/docker/test_sandbox_conformance.py checks against each (the fake where it can):

    - what the command did is data: its stdout and stderr as bytes (UTF-8: Docker's log
      driver replaces what is not), its exit status; a command still running at
      `spec.timeout` is stopped and comes back `timed_out` with no exit status, never
      raised; one killed for memory comes back `oom_killed` when the engine tells (Docker
      on cgroup v2 sometimes does not: then only its exit status, 137, says it);
    - `spec.files` and `spec.early_files` are in place before the command starts,
      root-owned (directories 0700, files 0600), under `spec.files_root`; it runs in
      `spec.workdir` with `spec.env`; a `preload` changes when its modules are imported,
      never what the command does;
    - it runs as root with only the capabilities the supervisor needs (CHOWN,
      DAC_OVERRIDE, SETUID, SETGID, KILL) under no-new-privileges, so a process that
      becomes another user has none; there is no network;
    - `spec.limits` bind: memory (no extra swap), CPU, and processes (with a
      `private_kernel`, the process limit is enforced inside: see below);
    - a missing image raises ImageError, a fault of the provider itself SandboxError;
    - the container is removed whatever happened.
    """

    name: str = "abstract"
    runtime: str = "abstract"  # what ContainerOutput.runtime, and so a result's provenance, says
    # True when the sandbox runs its own kernel (gVisor): per-user counts such as
    # RLIMIT_NPROC are then the sandbox's alone, and the process limit is enforced inside
    # it (the host's pids cgroup only bounds the sandbox kernel's own threads, and a run
    # that exhausts it crashes that kernel instead of failing a fork).
    private_kernel: bool = False

    @abstractmethod
    def run(self, spec: ContainerSpec) -> ContainerOutput:
        """Run `spec.command` in a new container from `spec.image` and always remove it."""

    def reap_orphans(self) -> int:
        """Remove containers left behind by graders that died; returns how many."""
        return 0

    def prewarm(self, spec: ContainerSpec) -> None:  # noqa: B027 - optional hook
        """Start a container for runs of `spec`'s shape ahead of demand, where the provider can."""

    def is_warm(self, spec: ContainerSpec) -> bool:
        """Whether a container of `spec`'s shape is started and idle here (prewarm would add nothing)."""
        return False

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


_PROVIDERS: dict[str, Callable[..., Sandbox]] = {}
Factory = TypeVar("Factory", bound=Callable[..., Sandbox])


def sandbox_provider(name: str) -> Callable[[Factory], Factory]:
    """Register the decorated factory as the provider `name` (made with get_sandbox's kwargs)."""

    def register(factory: Factory) -> Factory:
        _PROVIDERS[name] = factory
        return factory

    return register


def registered() -> dict[str, Callable[..., Sandbox]]:
    """The providers registered so far, by name (grader.sandbox.get_sandbox loads the
    built-in ones first)."""
    return dict(_PROVIDERS)
