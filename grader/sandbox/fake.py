"""The fake provider: scripted run outputs, no engine (as httpx ships MockTransport).

A handler is given each run's ContainerSpec and answers with what the container would have
done: a `FakeRun` (the supervisor's report, or raw stdout, an exit status, a run that
outlived its timeout or was killed for memory, a SandboxError or ImageError to raise),
or a finished ContainerOutput. So the pipeline's verdict is tested without Docker:

    sandbox = FakeSandbox(lambda spec: FakeRun(report={"applied": True, ...}))
    Grader(settings, sandbox=sandbox, images=...).grade(task, patch)

It keeps the interface's promises that do not need a container: a command's output and
exit status come back as data; a run longer than its timeout comes back timed out (no
exit status), never raised; an image it does not have raises ImageError; every spec it
was given is kept in `runs`, so a test can read the files, env and limits it asked for.
It isolates nothing: it never runs the command.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from grader.errors import ImageError
from grader.sandbox.base import ContainerOutput, ContainerSpec, Sandbox, refuse_clashes, sandbox_provider


@dataclass
class FakeRun:
    """What the container would have done."""

    stdout: bytes = b""
    stderr: bytes = b""
    exit_code: int | None = 0
    # the supervisor's JSON document, printed as stdout (a dict, or a record with to_json())
    report: Any = None
    seconds: float = 0.0  # how long the command would have run: past the spec's timeout it timed out
    timed_out: bool = False
    oom_killed: bool = False
    raises: BaseException | None = None  # a fault of the sandbox itself (SandboxError, ImageError)


Handler = Callable[[ContainerSpec], "FakeRun | ContainerOutput"]


def _echo(spec: ContainerSpec) -> FakeRun:
    return FakeRun()


@dataclass
class FakeSandbox(Sandbox):
    """`handler` answers each run (default: exit 0, no output). `images`, when given,
    maps the image references this sandbox has to their ids: any other one is missing.
    `private_kernel` and `runtime` stand in for a provider's (runsc: True, "runsc")."""

    handler: Handler = _echo
    images: dict[str, str] | None = None
    private_kernel: bool = False
    runtime: str = "fake"
    runs: list[ContainerSpec] = field(default_factory=list)
    closed: bool = False

    name = "fake"

    def run(self, spec: ContainerSpec) -> ContainerOutput:
        if self.images is not None and spec.image not in self.images:
            raise ImageError(f"image {spec.image} is missing")
        refuse_clashes(spec)
        self.runs.append(spec)
        answer = self.handler(spec)
        if isinstance(answer, ContainerOutput):
            return answer
        if answer.raises is not None:
            raise answer.raises
        stdout = answer.stdout
        if answer.report is not None:
            report = answer.report
            stdout = (report.to_json() if hasattr(report, "to_json") else json.dumps(report)).encode()
        timed_out = answer.timed_out or answer.seconds > spec.timeout
        image_id = (self.images or {}).get(spec.image) or "sha256:" + hashlib.sha256(spec.image.encode()).hexdigest()
        return ContainerOutput(
            exit_code=None if timed_out else answer.exit_code,
            stdout=stdout,
            stderr=answer.stderr,
            timed_out=timed_out,
            oom_killed=answer.oom_killed,
            image_id=image_id,
            runtime=self.runtime,
            durations={"start": 0.0, "wait": min(answer.seconds, spec.timeout), "remove": 0.0},
        )

    def close(self) -> None:
        self.closed = True


@sandbox_provider("fake")
def _fake(
    handler: Handler = _echo,
    *,
    images: dict[str, str] | None = None,
    private_kernel: bool = False,
    runtime: str = "fake",
    **_settings: Any,
) -> FakeSandbox:
    """The settings a Docker provider takes (tmpfs_size, max_warm, ...) mean nothing here."""
    return FakeSandbox(handler, images=images, private_kernel=private_kernel, runtime=runtime)
