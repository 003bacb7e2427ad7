"""What one grading container's life costs the machine, outside what the container runs.

A grade runs in a fresh container, and speed.py counts the CPU of the parties it can name:
the container's own processes (its supervisor's count), the workers, the API, Redis and the
engine's daemons (dockerd, containerd). What creating, starting, stopping and removing a
container costs elsewhere (runc, the shims, the kernel, the engine's short-lived helper
processes) shows there only as the machine's unnamed rest. This measures it directly: the
machine's CPU (/proc/stat, less this process's own) over each container's whole life, with
nothing run inside but `sleep`, in the shape the sandbox gives a grade (its own creation
arguments, in a network lane: grader/sandbox/docker/lanes.py), and in the same run, each
round in turns:

- the same container with a network namespace of its own (`--network=none`, what each
  container had before lanes, and has with GRADER_NETWORK_LANES=false);
- the same container on the host's network (for comparison only: a grade never runs so),
  which shows what the network namespace Docker makes costs;
- the kernel alone creating and destroying the namespaces a container has (`unshare`), the
  floor any per-grade sandbox pays.

The machine's idle CPU over the same time is measured first and taken off each figure. A
machine busy with other work (more than a tenth of a core), or a figure that comes out at or
below zero, is reported as broken (exit 2), never printed: the figures are the machine's.

    .venv/bin/python benchmarks/container_cost.py [--rounds 15] [--runtime runc|runsc] [--json FILE]
"""

from __future__ import annotations

import argparse
import functools
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _service import machine_cpu  # noqa: E402 - the machine's busy CPU, as speed.py counts it
from grader.sandbox import ContainerSpec, Limits, get_sandbox  # noqa: E402
from grader.sandbox.docker.containers import DockerSandbox  # noqa: E402

SETTLE = 0.5  # seconds after each life, so asynchronous clean-up (the kernel's, the engine's) lands in it
BUSY = 0.1  # the share of one core the machine may spend on other work meanwhile, or nothing is measured
GRADE = "as a grade's (in a network lane)"
OWN = "a namespace of its own (--network=none)"
UNSHARE = ["unshare", "--net", "--mount", "--pid", "--fork", "--ipc", "--uts", "true"]


def own_cpu() -> float:
    r, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime


def measured(action: Callable[[], object], *, own_counts: bool = False) -> float:
    """The machine's CPU over `action` and SETTLE seconds after it, less this process's own
    (unless `own_counts`: the kernel's work for a child of ours is the thing measured)."""
    b, m = machine_cpu(), own_cpu()
    action()
    time.sleep(SETTLE)
    return machine_cpu() - b - (0.0 if own_counts else own_cpu() - m)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--runtime", default="runc", choices=["runc", "runsc"])
    ap.add_argument("--image", help="an image with sleep [the example task's: built if missing]")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    sandbox = get_sandbox("gvisor" if args.runtime == "runsc" else "docker", max_warm=0)
    assert isinstance(sandbox, DockerSandbox)
    image = args.image or example_image()
    spec = ContainerSpec(image=image, command=["sleep", "30"], limits=Limits(memory="256m", pids=64), timeout=60)
    sandbox._check_engine()
    assert sandbox._lanes is not None
    lane = sandbox._lanes.for_idle(image)
    grading = sandbox._create_kwargs(spec, lane)
    own = sandbox._create_kwargs(spec)
    client = sandbox.engine.client

    def life(kwargs: dict[str, Any]) -> None:
        c = client.containers.create(**kwargs)
        c.start()
        c.remove(force=True)

    shapes = {
        GRADE: grading,
        OWN: own,
        "on the host's network (comparison only)": {**own, "network_mode": "host"},
    }
    try:
        return measure(args, shapes, life)
    finally:
        sandbox.close()  # the lane's holder too


def measure(args: argparse.Namespace, shapes: dict[str, dict[str, Any]], life: Callable[[dict[str, Any]], None]) -> int:
    idle = statistics.median(measured(lambda: None) for _ in range(5))
    if idle > BUSY * SETTLE:
        print(
            f"broken measurement: the machine spent {idle * 1000:.0f} ms of CPU in {SETTLE} s with nothing measured; "
            "its other work would be counted as the containers'. Nothing printed",
            file=sys.stderr,
        )
        return 2
    rows: dict[str, list[float]] = {name: [] for name in [*shapes, "the kernel alone (unshare)"]}
    for _ in range(args.rounds):
        for name, kwargs in shapes.items():
            rows[name].append(measured(functools.partial(life, kwargs)) - idle)
        rows["the kernel alone (unshare)"].append(
            measured(lambda: subprocess.run(UNSHARE, check=True), own_counts=True) - idle
        )
    figures = {name: statistics.median(v) for name, v in rows.items()}
    broken = [name for name, v in figures.items() if v <= 0]
    if broken:
        print(f"broken measurement: {broken} at or below the machine's idle CPU; nothing printed", file=sys.stderr)
        return 2
    print(f"{args.runtime}, {args.rounds} rounds, machine idle {idle * 1000:.1f} ms per {SETTLE} s taken off")
    grade, own, host = figures[GRADE], figures[OWN], figures["on the host's network (comparison only)"]
    for name, v in figures.items():
        print(f"  {name:46} {v * 1000:7.1f} ms of the machine's CPU a container's life ({v / grade:.0%})")
    print(f"  the network namespace Docker makes for --network=none: {(own - host) * 1000:.1f} ms a container")
    print(f"  a network lane instead of it: {(own - grade) * 1000:.1f} ms less a container ({grade / own:.0%} of it)")
    if args.json:
        args.json.write_text(json.dumps({"runtime": args.runtime, "rounds": args.rounds, "idle": idle, **figures}))
    return 0


def example_image() -> str:
    from grader.config import get_settings
    from grader.images import Images
    from grader.tasks import TaskSet

    settings = get_settings(tasks_dir=ROOT / "tasks" / "examples", environments_dir=ROOT / "environments")
    tasks = TaskSet(ROOT / "tasks" / "examples")
    image, _ = Images(settings).instance_image(tasks.get(tasks.ids()[0]))
    return image


if __name__ == "__main__":
    sys.exit(main())
