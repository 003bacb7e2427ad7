"""Grading overhead: what a grade costs beyond running the same tests directly.

Builds a task with a 20-test pytest suite, then for each round runs (a) the suite
directly on the host with the same pytest, (b) `docker run --rm` of the suite in the
instance image (the container floor), (c) a full grade through the pipeline. Prints
the median and p95 of (grade - host) per runtime, in seconds and as a ratio, with the
container floor measured in the same run for comparison. Targets (issue #2): median
overhead <= 0.30 s with runc and <= 0.8 s with gVisor.

    .venv/bin/python benchmarks/overhead.py [--rounds 30] [--runtimes runc,runsc] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.config import get_settings  # noqa: E402
from grader.pipeline import CONTAINER_ENV, Grader  # noqa: E402
from grader.tasks.loader import TaskSet  # noqa: E402
from grader.verdict import Verdict  # noqa: E402

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@b", "GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z"}
TESTS = "from fast import add\n\n" + "".join(f"def test_{i}():\n    assert add({i}, 1) == {i + 1}\n\n" for i in range(20))


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", "-c", "init.defaultBranch=main", *args], cwd=cwd, env=GIT_ENV, check=True,
                          capture_output=True, text=True).stdout


def make_task(root: Path) -> tuple[Path, Path]:
    src = root / "src"
    src.mkdir()
    git("init", "-q", ".", cwd=src)
    (src / "fast.py").write_text("def add(a, b):\n    return a - b\n")
    (src / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    git("add", "-A", cwd=src)
    git("commit", "-qm", "base", cwd=src)
    base = git("rev-parse", "HEAD", cwd=src).strip()
    (src / "fast.py").write_text("def add(a, b):\n    return a + b\n")
    gold = subprocess.run(["git", "diff"], cwd=src, capture_output=True, check=True).stdout
    git("checkout", "-q", "fast.py", cwd=src)
    tasks = root / "tasks"
    (tasks / "fast").mkdir(parents=True)
    git("bundle", "create", "-q", str(tasks / "fast.bundle"), "--all", cwd=src)
    (tasks / "fast" / "test_fast.py").write_text(TESTS)
    (tasks / "fast" / "gold.patch").write_bytes(gold)
    (tasks / "fast" / "task.yaml").write_text(
        f"id: fast\ninstruction: fix add\nrepo: {{bundle: ../fast.bundle, commit: {base}}}\nenvironment: python-3.11\n"
        "check:\n  type: tests\n  hidden_tests: {tests/test_fast.py: test_fast.py}\n"
        "limits: {timeout: 60, memory: 512m}\ngold_patch: gold.patch\n")
    # the host copy the baseline runs: same code, same tests, same pytest options
    (src / "fast.py").write_text("def add(a, b):\n    return a + b\n")
    (src / "tests").mkdir()
    (src / "tests" / "test_fast.py").write_text(TESTS)
    return tasks, src


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def host_run(src: Path) -> float:
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=src,
                          env={**os.environ, **CONTAINER_ENV, "PATH": os.environ["PATH"]}, capture_output=True)
    elapsed = time.perf_counter() - t
    assert proc.returncode == 0, proc.stdout.decode()
    return elapsed


def docker_floor(grader: Grader, image: str, runtime: str) -> float:
    client = grader.sandbox.engine.client
    kwargs = {"runtime": runtime} if runtime != "runc" else {}
    t = time.perf_counter()
    client.containers.run(image, ["python", "-c", "pass"], remove=True, network_mode="none", **kwargs)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--runtimes", default="runc,runsc")
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "out" / "overhead.json")
    args = ap.parse_args()
    report = {"rounds": args.rounds, "runtimes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        tasks_dir, src = make_task(Path(tmp))
        settings = get_settings(tasks_dir=tasks_dir, environments_dir=ROOT / "environments", cache_dir=Path(tmp) / "cache")
        task = TaskSet(tasks_dir).get("fast")
        gold = task.gold_patch_text()
        for runtime in args.runtimes.split(","):
            grader = Grader(settings, runtime=runtime)
            image, _ = grader.images.instance_image(task)
            for _ in range(3):  # warm caches: page cache, image layers, Python bytecode
                host_run(src)
                assert grader.grade(task, gold).verdict is Verdict.PASS
            host, grade, floor, overhead = [], [], [], []
            for _ in range(args.rounds):
                h = host_run(src)
                t = time.perf_counter()
                result = grader.grade(task, gold)
                g = time.perf_counter() - t
                assert result.verdict is Verdict.PASS, result.to_json()
                floor.append(docker_floor(grader, image, runtime))
                host.append(h)
                grade.append(g)
                overhead.append(g - h)
            row = {
                "host_median_s": statistics.median(host),
                "grade_median_s": statistics.median(grade),
                "container_floor_median_s": statistics.median(floor),
                "overhead_median_s": statistics.median(overhead),
                "overhead_p95_s": pct(overhead, 0.95),
                "ratio_median": statistics.median(grade) / statistics.median(host),
                "target_s": 0.30 if runtime == "runc" else 0.8,
            }
            row["meets_target"] = row["overhead_median_s"] <= row["target_s"]
            report["runtimes"][runtime] = row
            print(f"{runtime:6} host {row['host_median_s']:.3f}s  grade {row['grade_median_s']:.3f}s  "
                  f"overhead median {row['overhead_median_s']:.3f}s p95 {row['overhead_p95_s']:.3f}s  "
                  f"ratio {row['ratio_median']:.2f}x  (empty container run: {row['container_floor_median_s']:.3f}s; "
                  f"target {row['target_s']}s: {'met' if row['meets_target'] else 'NOT met'})")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2))
    print(f"written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
