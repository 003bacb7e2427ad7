"""Run the C reporter against the demo project in the `c` environment image.

    python3 grader/box/reporters/c/demo/demo.py [IMAGE] [--runtime runsc]

IMAGE defaults to the newest grader/env-c tag. The container gets what a grading container
gets: no network, every capability dropped but the supervisor's five (CHOWN, DAC_OVERRIDE,
SETUID, SETGID, KILL), no-new-privileges, a pids limit. The reporter and the demo are mounted
read-only and root-owned; inner.py plays the supervisor. Exit status 0 when every outcome is
the one the test deserves. It runs twice: the ctest project (demo/project) and the automake one
(demo/am-project, launcher --automake)."""

from __future__ import annotations

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPORTER = os.path.dirname(HERE)


def image() -> str:
    if len(sys.argv) > 1:
        return sys.argv[1]
    tags = subprocess.check_output(
        ["docker", "image", "ls", "grader/env-c", "--format", "{{.Repository}}:{{.Tag}}"], text=True
    ).split()
    if not tags:
        sys.exit("no grader/env-c image: build it with `grader env build c`")
    return tags[0]


def main() -> int:
    runtime = None
    if "--runtime" in sys.argv:
        i = sys.argv.index("--runtime")
        runtime = sys.argv[i + 1]
        del sys.argv[i : i + 2]
    argv = ["docker", "run", "--rm", "--network", "none", "--cap-drop", "ALL"]
    if runtime:
        argv += ["--runtime", runtime]
    for cap in ("CHOWN", "DAC_OVERRIDE", "SETUID", "SETGID", "KILL"):
        argv += ["--cap-add", cap]
    argv += [
        "--security-opt", "no-new-privileges:true",
        # under gVisor the pids cgroup counts the sandbox kernel's threads (about 12 per process,
        # see grader/sandbox/docker/containers.py): the same 256 processes need room for ~3200
        "--pids-limit", "3200" if runtime == "runsc" else "256",
        "--tmpfs", "/tmp:rw,nosuid,nodev,size=256m,mode=1777",
        "-v", f"{HERE}/ctest_launcher.py:/opt/reporter/ctest_launcher.py:ro",
        "-v", f"{REPORTER}/am_record_driver.py:/opt/reporter/am_record_driver.py:ro",
        "-v", f"{HERE}:/opt/demo:ro",
        image(),
        "python3", "/opt/demo/inner.py",
    ]  # fmt: skip
    status = 0
    modes: list[list[str]] = [[], ["automake"]]
    if runtime == "runsc":
        # gVisor (this machine's runsc) answers `ls -di .` with EINVAL, so every autoconf
        # configure script stops at "working directory cannot be determined": configure would
        # have to run when the instance image is built (under runc), not at grading time.
        print("(under runsc the automake demo is skipped: autoconf's configure cannot run there)")
        modes = [[]]
    for mode in modes:
        print(f"######## {'ctest' if not mode else 'automake (make check)'} ########", flush=True)
        status |= subprocess.run(argv + mode).returncode
    return status


if __name__ == "__main__":
    sys.exit(main())
