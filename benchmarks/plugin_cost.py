"""What the pytest report plugin costs a test, inside a task's instance image: the task's
hidden tests run bare (the environment's pytest alone) against the same run with the
report plugin loaded as a grade loads it, its secret on a descriptor and its report on a
pipe that another process drains (as the supervisor's reader does), in turns, round after
round. With `--against REV`, the plugin of another commit runs in the same rounds too, so a
change to the plugin is measured beside the code before it under the same load.

It counts CPU, not wall time: the pytest process's own, and the reader's (each write of a
record wakes it). The figures: the median of each over the rounds, the plugin's excess over
the bare run, that excess a test, and the bare run's CPU as a share of the plugin's (the
ratio the service's figures are made of). Records arrive whole or the run fails: the reader
counts the lines it drained and checks that the plugin's run wrote its `end`.

The default task is the real-world suite's largest pytest task (5,002 tests), whose grades
are where the plugin's per-test cost shows most (benchmarks/speed.py's excess by task):

    .venv/bin/python tasks/releases.py realworld          # the suite and its images, once
    .venv/bin/python benchmarks/plugin_cost.py
    .venv/bin/python benchmarks/plugin_cost.py --against HEAD~2 --rounds 7
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = "grader/box/reporters/pytest_plugin.py"

# Runs in the container: one pytest process per call, its report drained by a forked reader.
INSIDE = r"""
import json, os, sys, tempfile, time
plugin, tests = sys.argv[1], json.loads(sys.argv[2])
r, w = os.pipe()
key = tempfile.TemporaryFile()
key.write(os.urandom(32) + json.dumps({"repo": os.getcwd(), "tests": tests, "changed": ["\0none"]}).encode())
key.flush()
reader = os.fork()
if reader == 0:
    os.close(w)
    lines, last = 0, b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        lines += chunk.count(b"\n")
        last = (last + chunk)[-4096:]
    end = b'"t": "end"' in last.rsplit(b"\n", 2)[-2] if lines else False
    os.write(3, json.dumps({"lines": lines, "end": end}).encode())
    os._exit(0)
os.close(r)
os.set_inheritable(w, True)
os.set_inheritable(key.fileno(), True)
pid = os.fork()
if pid == 0:
    os.environ.update(GRADER_REPORT_FD=str(w), GRADER_KEY_FD=str(key.fileno()), PYTHONPATH="/bench")
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests]
    if plugin != "bare":
        args[3:3] = ["-p", plugin]
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    os.execv(sys.executable, args)
os.close(w)
_, status, usage = os.wait4(pid, 0)
_, _, reading = os.wait4(reader, 0)
print(json.dumps({"cpu": usage.ru_utime + usage.ru_stime, "reader": reading.ru_utime + reading.ru_stime,
                  "exit": os.waitstatus_to_exitcode(status)}))
"""

SETUP = r"""
set -e
cd "$REPO"
git -c safe.directory='*' apply /bench/gold.patch
for pair in $HIDDEN; do cp "/bench/hidden/${pair#*=}" "${pair%%=*}"; done
"""


def image_of(task_id: str) -> str:
    """The task's newest instance image (tasks/releases.py builds it)."""
    out = subprocess.run(
        ["docker", "images", f"grader/task-{task_id.lower()}", "--format", "{{.Repository}}:{{.Tag}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not out:
        sys.exit(f"no instance image for {task_id}: build the suite first (tasks/releases.py)")
    return out[0]


def plugin_at(rev: str) -> bytes:
    return subprocess.run(["git", "show", f"{rev}:{PLUGIN}"], cwd=ROOT, capture_output=True, check=True).stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", default=str(ROOT / "build" / "realworld"))
    ap.add_argument("--task", default="packaging-requirement-errors")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--against", help="a commit whose plugin runs in the same rounds")
    args = ap.parse_args()
    task_dir = Path(args.suite) / args.task
    if not (task_dir / "task.yaml").is_file():
        sys.exit(f"no task at {task_dir}: build the suite first (tasks/releases.py)")
    task = yaml.safe_load((task_dir / "task.yaml").read_text())
    hidden = task["check"]["hidden_tests"]
    tag = image_of(args.task)
    with tempfile.TemporaryDirectory() as tmp:
        bench = Path(tmp)
        (bench / "gold.patch").write_bytes((task_dir / task["gold_patch"]).read_bytes())
        for src in hidden.values():
            (bench / "hidden" / src).parent.mkdir(parents=True, exist_ok=True)
            (bench / "hidden" / src).write_bytes((task_dir / src).read_bytes())
        kinds = {"bare": "bare", "this checkout": "grader_report_now"}
        (bench / "grader_report_now.py").write_bytes((ROOT / PLUGIN).read_bytes())
        if args.against:
            (bench / "grader_report_then.py").write_bytes(plugin_at(args.against))
            kinds[f"at {args.against}"] = "grader_report_then"
        (bench / "inside.py").write_text(INSIDE)
        rounds = " ".join(kinds.values())
        script = SETUP + (
            f"for round in $(seq {args.rounds}); do for kind in {rounds}; do "
            f"printf '%s ' $kind; python /bench/inside.py $kind '{json.dumps(list(hidden))}' 3>&1; done; done"
        )
        hidden_env = " ".join(f"{dest}={src}" for dest, src in hidden.items())
        done = subprocess.run(
            ["docker", "run", "--rm", "--network=none", "-v", f"{bench}:/bench:ro", "-e", f"HIDDEN={hidden_env}"]
            + ["-e", "REPO=/work/repo", "-e", "PYTHONDONTWRITEBYTECODE=1", "-e", "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1"]
            + [tag, "sh", "-c", script],
            capture_output=True,
            text=True,
        )
    if done.returncode != 0:
        sys.exit(f"the rounds failed: {done.stderr.strip()[-2000:]}")
    runs: dict[str, list[dict]] = {name: [] for name in kinds.values()}
    for line in done.stdout.splitlines():
        name, _, rest = line.partition(" ")  # the reader's figures, then the run's
        if name in runs:
            reader, run = rest.split("}{", 1)
            runs[name].append({**json.loads(reader + "}"), **json.loads("{" + run)})
    n_tests = len(task["check"].get("fail_to_pass") or []) + len(task["check"].get("pass_to_pass") or [])
    print(f"task {args.task} ({n_tests} tests), image {tag}, {args.rounds} rounds in turns; CPU medians:")
    bare = statistics.median(r["cpu"] for r in runs["bare"])
    for label, name in kinds.items():
        got = runs[name]
        if len(got) != args.rounds:
            sys.exit(f"{label}: {len(got)} of {args.rounds} rounds ran")
        cpu = statistics.median(r["cpu"] + r["reader"] for r in got)
        line = f"  {label:16s} {cpu:7.3f} s"
        if name != "bare":
            if not all(r["end"] and r["lines"] > n_tests for r in got):
                sys.exit(f"{label}: a report came without its end, or short: {got}")
            reader = statistics.median(r["reader"] for r in got)
            excess = cpu - bare
            line += (
                f" (its reader {reader:.3f} s, {got[0]['lines']} records): {excess:+.3f} s over bare, "
                f"{excess / max(n_tests, 1) * 1000:.3f} ms a test; bare is {bare / cpu:.1%} of it"
            )
        print(line)


if __name__ == "__main__":
    main()
