"""The sandbox interface: run one command in a fresh, isolated container and hand back
what it printed. Providers register by name (`sandbox_provider`); the pipeline never
knows which it has. This module names no provider: grader/sandbox/__init__.py knows the
built-in ones (docker, gvisor, fake) and imports each on first use.

A sandbox raises SandboxError (or ImageError) for faults of its own; whatever the
command does, including crashing or running out of time, is returned as data.
tests/test_sandbox_conformance.py holds every provider to that.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field



@dataclass(frozen=True)
class Limits:
    memory: str = "1g"
    cpus: float = 1.0
    pids: int = 256


@dataclass(frozen=True)
class RunSpec:
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


@dataclass
class RunOutput:
    exit_code: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool
    oom_killed: bool
    image_id: str
    runtime: str
    durations: dict[str, float] = field(default_factory=dict)


class Sandbox(ABC):
    name: str = "abstract"
    # True when the sandbox runs its own kernel (gVisor): per-user counts such as
    # RLIMIT_NPROC are then the sandbox's alone, and the process limit is enforced inside
    # it (the host's pids cgroup only bounds the sandbox kernel's own threads, and a run
    # that exhausts it crashes that kernel instead of failing a fork).
    private_kernel: bool = False

    @abstractmethod
    def run(self, spec: RunSpec) -> RunOutput:
        """Run `spec.command` in a new container from `spec.image` and always remove it."""

    def reap_orphans(self) -> int:
        """Remove containers left behind by graders that died; returns how many."""
        return 0

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


_PROVIDERS: dict[str, Callable[..., Sandbox]] = {}


def sandbox_provider(name: str):
    def register(factory: Callable[..., Sandbox]):
        _PROVIDERS[name] = factory
        return factory

    return register


def registered() -> dict[str, Callable[..., Sandbox]]:
    """The providers registered so far, by name (grader.sandbox.get_sandbox loads the
    built-in ones first)."""
    return dict(_PROVIDERS)
