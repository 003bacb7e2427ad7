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
  floor any per-grade sandbox pays;
- a run's own namespaces made inside one long-lived container instead of a container per
  run (`unshare` of user, mount, PID, IPC, UTS and network namespaces, a private /tmp and the
  repository as a fresh overlay on the image's, then torn down): the floor of the design
  issue 21 names and this repository has not built (a long-lived container per environment
  whose runs are each sandboxed by namespaces). Docker's default seccomp profile refuses
  `unshare` and its masked /proc paths refuse a new /proc, so that container is started
  with both turned off: a measuring container that runs only this loop, never a grade's
  shape. Measured as the difference between two loops of LOOP runs in that container, each
  one `docker exec`, so the exec's own cost is the same on both sides and cancels; the
  processes a run starts here (unshare, sh, mount) are counted in it. Under runc only: gVisor
  (20221219) refuses it ("unshare: cannot change root filesystem propagation").

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
KERNEL = "the kernel alone (unshare)"
NESTED = "a run's namespaces in a long-lived container"
LOOP = 20  # runs in each of the nested row's two loops
# one run of the nested row: its namespaces, a private /tmp, the repository as an overlay
NESTED_RUN = (
    "unshare --user --map-root-user --mount --pid --ipc --net --uts --fork --mount-proc sh -c "
    "'mount -t tmpfs tmp /tmp && mkdir /tmp/u /tmp/w && "
    'mount -t overlay run -o lowerdir="$0",upperdir=/tmp/u,workdir=/tmp/w "$0" && touch "$0"/.x\' "$0"'
)


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
    keeper = None
    try:
        nested = None
        if args.runtime == "runc":  # gVisor 20221219 refuses it: "cannot change root filesystem propagation"
            keeper = nested_keeper(client, image, own.get("labels", {}))
            nested = functools.partial(
                nested_cost, keeper, client.api.inspect_image(image)["Config"]["WorkingDir"] or "/"
            )
        return measure(args, shapes, life, nested)
    finally:
        if keeper is not None:
            keeper.remove(force=True)
        sandbox.close()  # the lane's holder too


def nested_keeper(client: Any, image: str, labels: dict[str, str]) -> Any:
    """The nested row's container, started: the run's image, seccomp's and /proc's masks off
    (the docstring says why), labelled as the sandbox's so that a reaper takes it if this dies."""
    host_config = client.api.create_host_config(network_mode="none", security_opt=["seccomp=unconfined"])
    host_config.update(MaskedPaths=[], ReadonlyPaths=[])  # the CLI's --security-opt systempaths=unconfined
    keeper = client.containers.get(
        client.api.create_container(image, command=["sleep", "600"], labels=labels, host_config=host_config)["Id"]
    )
    try:
        keeper.start()
    except BaseException:
        keeper.remove(force=True)
        raise
    return keeper


def nested_cost(keeper: Any, repo: str) -> float:
    """The machine's CPU a nested run costs: a loop of LOOP of them less a loop of as many
    empty runs, each loop one `docker exec` (so the exec's own cost and the idle cancel)."""

    def loop(run: str) -> None:
        code, out = keeper.exec_run(["sh", "-c", f"for i in $(seq {LOOP}); do {run} || exit 1; done", repo])
        if code != 0:
            raise SystemExit(f"the nested row's loop failed ({code}): {out.decode(errors='replace')[-500:]}")

    return (measured(lambda: loop(NESTED_RUN)) - measured(lambda: loop("sh -c true"))) / LOOP


def measure(
    args: argparse.Namespace,
    shapes: dict[str, dict[str, Any]],
    life: Callable[[dict[str, Any]], None],
    nested: Callable[[], float] | None,
) -> int:
    idle = statistics.median(measured(lambda: None) for _ in range(5))
    if idle > BUSY * SETTLE:
        print(
            f"broken measurement: the machine spent {idle * 1000:.0f} ms of CPU in {SETTLE} s with nothing measured; "
            "its other work would be counted as the containers'. Nothing printed",
            file=sys.stderr,
        )
        return 2
    rows: dict[str, list[float]] = {name: [] for name in [*shapes, KERNEL, *([NESTED] if nested else [])]}
    for _ in range(args.rounds):
        for name, kwargs in shapes.items():
            rows[name].append(measured(functools.partial(life, kwargs)) - idle)
        rows[KERNEL].append(measured(lambda: subprocess.run(UNSHARE, check=True), own_counts=True) - idle)
        if nested is not None:
            rows[NESTED].append(nested())  # a difference of two loops: the idle cancels
    figures = {name: statistics.median(v) for name, v in rows.items()}
    broken = [name for name, v in figures.items() if v <= 0]
    if broken:
        print(f"broken measurement: {broken} at or below the machine's idle CPU; nothing printed", file=sys.stderr)
        return 2
    print(f"{args.runtime}, {args.rounds} rounds, machine idle {idle * 1000:.1f} ms per {SETTLE} s taken off")
    grade, own, host = figures[GRADE], figures[OWN], figures["on the host's network (comparison only)"]
    for name, v in figures.items():
        what = "a run, its container already running" if name == NESTED else "a container's life"
        print(f"  {name:46} {v * 1000:7.1f} ms of the machine's CPU {what} ({v / grade:.0%})")
    print(f"  the network namespace Docker makes for --network=none: {(own - host) * 1000:.1f} ms a container")
    print(f"  a network lane instead of it: {(own - grade) * 1000:.1f} ms less a container ({grade / own:.0%} of it)")
    if NESTED in figures:
        print(
            f"  a run's namespaces in a long-lived container instead of a container per run: "
            f"{(grade - figures[NESTED]) * 1000:.1f} ms less a run"
        )
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
