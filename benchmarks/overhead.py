"""Grading overhead: what a grade costs beyond running the same tests directly.

Builds a task with a 20-test pytest suite, then for each round runs (a) the suite
directly on the host, (b) `docker run --rm` of an empty command in the instance image
(the container floor), (c) a full grade through the pipeline. Prints the median and p95
of (grade - host) per runtime, in seconds and as a ratio, with the container floor
measured in the same run for comparison. Targets (issue #2): median overhead <= 0.30 s
with runc and <= 0.8 s with gVisor.

The host baseline must run the tests as the grade runs them, or the difference measures
something else: the project's own virtualenv loads development plugins (hypothesis,
schemathesis...) that make pytest start in ~1.7 s instead of ~0.2 s, which once gave a
negative "overhead" and "target met". So the baseline runs in a virtualenv built from
the task environment's own pinned requirements (environments/NAME/requirements.txt,
cached under build/overhead/), with the same Python minor version, the same check
environment as in the container (plugin auto-loading off, bytecode only from a
precompiled cache), and its installed distributions and pytest plugins are compared with
the instance image's before anything is timed. A baseline that differs from the image,
or whose fastest run is not faster than the grade's, is a broken measurement: exit
status 2 and a message, never a figure.

Then, per language, the same comparison for the language examples (tasks/languages: one
tiny project per language, each graded by its own runner): (a) the project's own test
command run bare in the task's instance image (`docker exec` in a container of it started
once, as the unprivileged user, no network; each run resets the repository, copies the
hidden tests in and applies the gold patch; nothing of the grader loaded), (b) a full grade
of the gold patch through the pipeline in the same image and runtime, from the host's call
to its result. Both apply the patch and run the tests; the difference is what the grader
adds (a container for the grade, the supervisor, protection, the signed reporters,
canaries, the report). A language whose bare run is not faster than its grade is reported
as broken, never as a negative overhead. Java's bare run builds as a developer does after
an edit: the changed sources against the classes the image prebuilt, as the grade does
(`junit-run` alone would compile every source, and was slower than a grade).

    .venv/bin/python benchmarks/overhead.py [--rounds 30] [--runtimes runc,runsc] [--json FILE]
    .venv/bin/python benchmarks/overhead.py --languages [--language-rounds 5] [--only go-median-even,...]
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "overhead"
sys.path.insert(0, str(ROOT))

from grader.box.paths import REPO_DIR, UID  # noqa: E402
from grader.box.runners import junit  # noqa: E402
from grader.box.runners.common import python_env as check_env  # noqa: E402
from grader.config import get_settings  # noqa: E402
from grader.grading.spec import CONTAINER_ENV  # noqa: E402
from grader.pipeline import Grader  # noqa: E402
from grader.tasks.loader import TaskSet  # noqa: E402
from grader.tasks.model import TestsCheck  # noqa: E402
from grader.verdict import Verdict  # noqa: E402

GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@b",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@b",
    "GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z",
}
TESTS = "from fast import add\n\n" + "".join(
    f"def test_{i}():\n    assert add({i}, 1) == {i + 1}\n\n" for i in range(20)
)
# What an interpreter would bring to a pytest run: its version, every installed
# distribution but the installer, and the pytest plugins that auto-loading would find.
PROBE = """\
import importlib.metadata as m, json, sys, sysconfig
names = {(d.metadata["Name"] or "").lower().replace("_", "-"): d.version for d in m.distributions()}
names.pop("pip", None)
print(json.dumps({"python": "%d.%d.%d" % sys.version_info[:3], "stdlib": sysconfig.get_paths()["stdlib"],
                  "packages": sorted(f"{k}=={v}" for k, v in names.items()),
                  "pytest11": sorted(f"{e.name}={e.value}" for e in m.entry_points(group="pytest11"))}))
"""


class MeasurementBroken(Exception):
    """Raised when the baseline does not run what the grade runs, or runs it slower: any
    figure taken then would measure the instrument, not the grader."""


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        env=GIT_ENV,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


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
        "limits: {timeout: 60, memory: 512m}\ngold_patch: gold.patch\n"
    )
    # the host copy the baseline runs: same code, same tests, same pytest configuration
    (src / "fast.py").write_text("def add(a, b):\n    return a + b\n")
    (src / "tests").mkdir()
    (src / "tests" / "test_fast.py").write_text(TESTS)
    return tasks, src


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


# --- the baseline: the environment's own pytest, on the host ----------------------------


def probe_host(python: Path, env: dict[str, str], cwd: Path) -> dict:
    run = subprocess.run([str(python), "-c", PROBE], env=env, cwd=cwd, capture_output=True, text=True)
    if run.returncode != 0:
        raise MeasurementBroken(f"{python} cannot describe itself: {run.stderr.strip()}")
    return json.loads(run.stdout)


def probe_image(grader: Grader, image: str) -> dict:
    client = grader.sandbox.engine.client
    out = client.containers.run(
        image, ["python", "-c", PROBE], remove=True, network_mode="none", environment=CONTAINER_ENV
    )
    return json.loads(out)


def host_pythons(minor: str) -> list[Path]:
    """Every python<minor> on this host outside a virtualenv, the PATH's first."""
    dirs = [*os.environ.get("PATH", "").split(os.pathsep), "/usr/local/bin", "/usr/bin"]
    found: dict[Path, None] = {}
    for d in dirs:
        exe = Path(d or ".") / f"python{minor}"
        if exe.is_file() and os.access(exe, os.X_OK) and not (Path(d).parent / "pyvenv.cfg").exists():
            found.setdefault(exe.resolve(), None)
    return list(found)


def baseline_venv(requirements: Path, image: dict) -> Path:
    """A virtualenv made from the environment's pinned requirements with the host's Python
    of the image's minor version (its patch version too when the host has it), with its
    stdlib and packages compiled into a bytecode cache as the image's are. Built once per
    requirements and interpreter, under build/overhead/."""
    minor = image["python"].rsplit(".", 1)[0]
    candidates = host_pythons(minor)
    if not candidates:
        raise MeasurementBroken(
            f"the image runs Python {image['python']} and this host has no python{minor} "
            "to build the baseline's virtualenv with"
        )
    versions = {
        exe: subprocess.run(
            [str(exe), "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"], capture_output=True, text=True
        ).stdout.strip()
        for exe in candidates
    }
    python = next((exe for exe, v in versions.items() if v == image["python"]), candidates[0])
    key = hashlib.sha256(requirements.read_bytes() + f"\0{python}\0{versions[python]}".encode()).hexdigest()[:12]
    venv = BUILD / f"venv-{requirements.parent.name}-{key}"
    BUILD.mkdir(parents=True, exist_ok=True)
    with open(BUILD / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two benchmarks at once build it once
        if (venv / "ready").is_file():
            return venv
        shutil.rmtree(venv, ignore_errors=True)
        print(
            f"building the baseline's virtualenv {venv.relative_to(ROOT)} from {requirements.relative_to(ROOT)} "
            f"with {python} ({versions[python]})",
            flush=True,
        )
        subprocess.run([str(python), "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "-r", str(requirements)], check=True
        )
        # the image compiles its stdlib and venv into /opt/pycache and the check reads
        # bytecode only from there (PYTHONPYCACHEPREFIX): the same here, or every baseline
        # run would compile pytest from source
        stdlib = probe_host(venv / "bin" / "python", {"PATH": os.environ["PATH"]}, venv)["stdlib"]
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "compileall", "-q", "-j0", stdlib, str(venv / "lib")],
            env={**os.environ, "PYTHONPYCACHEPREFIX": str(venv / "pycache")},
            capture_output=True,
        )
        (venv / "ready").write_text(versions[python] + "\n")
    return venv


def baseline_env(python: Path, pycache: Path) -> dict[str, str]:
    """The environment the grade's check runs with (CONTAINER_ENV, then the supervisor's
    check_env: plugin auto-loading off, no PYTEST_ADDOPTS, bytecode from the cache)."""
    job = SimpleNamespace(pycache=str(pycache))  # the one field of the job check_env reads
    return {**CONTAINER_ENV, "PATH": f"{python.parent}{os.pathsep}/usr/bin:/bin", **check_env(job)}


def same_as_image(host: dict, image: dict) -> None:
    """Raise MeasurementBroken unless the baseline's interpreter brings what the image's does."""
    if host["python"].rsplit(".", 1)[0] != image["python"].rsplit(".", 1)[0]:
        raise MeasurementBroken(f"the baseline runs Python {host['python']}, the image {image['python']}")
    for field, what in (("packages", "installed distributions"), ("pytest11", "pytest plugins")):
        only_host = sorted(set(host[field]) - set(image[field]))
        only_image = sorted(set(image[field]) - set(host[field]))
        if only_host or only_image:
            raise MeasurementBroken(
                f"the baseline's {what} are not the image's: only in the baseline "
                f"{only_host or 'none'}; only in the image {only_image or 'none'}"
            )


def host_run(python: Path, src: Path, env: dict[str, str]) -> float:
    """The suite run directly, with the options the supervisor gives pytest (less its
    report plugin, which is part of what a grade costs)."""
    t = time.perf_counter()
    proc = subprocess.run(
        [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-o", "console_output_style=classic", "tests"],
        cwd=src,
        env=env,
        capture_output=True,
    )
    elapsed = time.perf_counter() - t
    if proc.returncode != 0:
        raise MeasurementBroken(f"the baseline's tests did not pass:\n{proc.stdout.decode()[-2000:]}")
    return elapsed


def judge(runtime: str, host: list[float], grade: list[float], what: str = "the host baseline") -> None:
    """A grade runs the same tests as the baseline plus a container: a baseline that is
    not faster runs something else, and its difference is no overhead. Compared by each
    side's fastest run, the one the machine's other load disturbed least: a busy machine
    can make a few baseline runs slow (here 0.7 s against 0.13 s quiet), never its best."""
    if min(host) >= min(grade):
        raise MeasurementBroken(
            f"{runtime}: {what}'s fastest run ({min(host):.3f} s; median "
            f"{statistics.median(host):.3f} s) is not faster than the grade's ({min(grade):.3f} s; "
            f"median {statistics.median(grade):.3f} s), which runs the same tests in a container"
        )


def docker_floor(grader: Grader, image: str, runtime: str) -> float:
    client = grader.sandbox.engine.client
    kwargs = {"runtime": runtime} if runtime != "runc" else {}
    t = time.perf_counter()
    client.containers.run(image, ["python", "-c", "pass"], remove=True, network_mode="none", **kwargs)
    return time.perf_counter() - t


def measure(args: argparse.Namespace, report: dict, tmp: Path) -> None:
    tasks_dir, src = make_task(tmp)
    settings = get_settings(tasks_dir=tasks_dir, environments_dir=ROOT / "environments", cache_dir=tmp / "cache")
    task = TaskSet(tasks_dir).get("fast")
    gold = task.gold_patch_text()
    baseline: tuple[Path, dict[str, str]] | None = None
    for runtime in args.runtimes.split(","):
        grader = Grader(settings, runtime=runtime)
        image, _ = grader.images.instance_image(task)
        if baseline is None:
            in_image = probe_image(grader, image)
            if args.baseline_python:
                python, pycache = args.baseline_python.absolute(), tmp / "pycache"
            else:
                env_dir = grader.images.environment(task.environment).path
                venv = baseline_venv(env_dir / "requirements.txt", in_image)
                python, pycache = venv / "bin" / "python", venv / "pycache"
            env = baseline_env(python, pycache)
            on_host = probe_host(python, env, src)  # where the baseline runs: cwd is on sys.path
            same_as_image(on_host, in_image)
            baseline = (python, env)
            report["baseline"] = {
                "python": str(python),
                "host_python": on_host["python"],
                "image_python": in_image["python"],
                "packages": on_host["packages"],
                "pytest_plugins": on_host["pytest11"],
            }
        python, env = baseline
        # A grade's container is started ahead of demand, in the background after the
        # grade before it: that start must not share the machine with the baseline's run
        # (it would slow the baseline and shrink the overhead), so each round waits for it.
        settle = getattr(grader.sandbox, "settle", lambda: None)
        for _ in range(3):  # warm caches: page cache, image layers, Python bytecode
            host_run(python, src, env)
            assert grader.grade(task, gold).verdict is Verdict.PASS
        host, grade, floor, overhead, warm = [], [], [], [], 0
        for _ in range(args.rounds):
            settle()
            h = host_run(python, src, env)
            t = time.perf_counter()
            result = grader.grade(task, gold)
            g = time.perf_counter() - t
            assert result.verdict is Verdict.PASS, result.to_json()
            warm += result.durations.get("container_warm") == 1.0
            settle()
            floor.append(docker_floor(grader, image, runtime))
            host.append(h)
            grade.append(g)
            overhead.append(g - h)
        judge(runtime, host, grade)
        row = {
            "host_median_s": statistics.median(host),
            "grade_median_s": statistics.median(grade),
            "host_min_s": min(host),
            "grade_min_s": min(grade),
            "container_floor_median_s": statistics.median(floor),
            "overhead_median_s": statistics.median(overhead),
            "overhead_p95_s": pct(overhead, 0.95),
            "ratio_median": statistics.median(grade) / statistics.median(host),
            "warm_grades": warm,
            "target_s": 0.30 if runtime == "runc" else 0.8,
        }
        row["meets_target"] = row["overhead_median_s"] <= row["target_s"]
        report["runtimes"][runtime] = row
        print(
            f"{runtime:6} host {row['host_median_s']:.3f}s  grade {row['grade_median_s']:.3f}s  "
            f"overhead median {row['overhead_median_s']:.3f}s p95 {row['overhead_p95_s']:.3f}s  "
            f"ratio {row['ratio_median']:.2f}x  warm {warm}/{args.rounds}  "
            f"(empty container run: {row['container_floor_median_s']:.3f}s; "
            f"target {row['target_s']}s: {'met' if row['meets_target'] else 'NOT met'})",
            flush=True,
        )


# --- per language: the project's own test command, bare, in the same image ------------------

LANGUAGES = ROOT / "tasks" / "languages"
# runner -> the command that runs the same tests without the grader: the project's own way,
# doing the work the grade does (go vet is off in the grade too; node runs the test file
# itself, as the grade's one process per file does, rather than `node --test`'s extra child)
# Java as a developer builds after an edit: one javac of the main sources that differ from
# the base and the hidden test class, against the classes the image prebuilt (junit-run
# --prebuild), then the JUnit console launcher on them: what the grade does (one javac of
# what the patch changed and the tests); `junit-run` alone compiles every source. Both JVMs
# with the grade's options and the image's class-data-sharing archives (cds-train), as the
# grade's are: the baseline gets every saving the grade gets.
_JVM = [*junit.JVM_FAST, *junit.CDS_QUIET]
JAVA_BARE = (
    "B=$(mktemp -d) && "
    f"javac {' '.join('-J' + o for o in _JVM)} -J-XX:SharedArchiveFile={junit.CDS}/javac.jsa -proc:none -nowarn "
    "-d $B -cp "
    + ":".join(["/opt/java-build/main", *(f"{junit.JAVA_SHARE}/{j}" for j in junit.API_JARS)])
    + " $(git diff --name-only HEAD -- src/main/java) src/test/java/stats/MedianTest.java && "
    f"java {' '.join(_JVM)} -XX:SharedArchiveFile={junit.CDS}/launcher.jsa -cp "
    + ":".join(f"{junit.JAVA_SHARE}/{j}" for j in junit.RUNNER_JARS)
    + " org.junit.platform.console.ConsoleLauncher execute --disable-banner "
    "--details=summary --class-path $B:/opt/java-build/main --select-class stats.MedianTest"
)
BARE: dict[str, str] = {
    "go": "go test -vet=off -count=1 ./...",
    "node-test": "node test/median.test.js",
    "vitest": "node_modules/.bin/vitest run --reporter=dot src/median.test.ts",
    "cargo": "cargo test --offline -q",
    "junit": JAVA_BARE,
    "ctest": "cmake --build build && ctest --test-dir build",
    "unittest": "python -m unittest tests.test_median",
    "pytest": "python -m pytest -q -p no:cacheprovider tests",
}
# what the image built into the repository before grading: kept when the tree is reset
BUILT = ("target/", "build/", "node_modules/")


class Bare:
    """One container of the task's instance image, started once (as the unprivileged user,
    no network, the task directory read-only at /bare/task); each run resets the repository
    to the base commit, copies the hidden tests in, applies the gold patch and runs the
    project's own test command through `docker exec`. No container start is in a bare run's
    time, so its figure is the tests' own; the grade's includes everything it does."""

    def __init__(self, grader: Grader, image: str, task_dir: Path, hidden: dict[str, str], runtime: str) -> None:
        kwargs = {"runtime": runtime} if runtime != "runc" else {}
        self.container = grader.sandbox.engine.client.containers.run(
            image,
            ["sleep", "infinity"],
            detach=True,
            network_mode="none",
            user=f"{UID}:{UID}",
            working_dir=REPO_DIR,
            volumes={str(task_dir): {"bind": "/bare/task", "mode": "ro"}},
            **kwargs,
        )
        keep = " ".join(f"-e {d}" for d in BUILT)
        copies = " && ".join(f"mkdir -p $(dirname {dst}) && cp /bare/task/{src} {dst}" for dst, src in hidden.items())
        self.prepare = f"git reset -q --hard && git clean -fdqx {keep} && {copies} && git apply /bare/task/gold.patch"
        self.name = task_dir.name

    def run(self, command: str) -> float:
        t = time.perf_counter()
        status, out = self.container.exec_run(["sh", "-c", f"set -e; {self.prepare}; {command}"])
        elapsed = time.perf_counter() - t
        if status != 0:
            tail = out.decode(errors="replace")[-2000:]
            raise MeasurementBroken(f"{self.name}: the bare run of {command!r} did not pass:\n{tail}")
        return elapsed

    def close(self) -> None:
        self.container.remove(force=True)


def measure_languages(args: argparse.Namespace, report: dict, tmp: Path) -> None:
    settings = get_settings(tasks_dir=LANGUAGES, environments_dir=ROOT / "environments", cache_dir=tmp / "cache")
    tasks = TaskSet(LANGUAGES)
    ids = args.only.split(",") if args.only else tasks.ids()
    broken: list[str] = []
    for runtime in args.runtimes.split(","):
        grader = Grader(settings, runtime=runtime)
        for task_id in ids:
            task = tasks.get(task_id)
            gold = task.gold_patch_text() or b""
            image, _ = grader.images.instance_image(task)
            check = task.check
            assert isinstance(check, TestsCheck), task_id
            hidden = dict(check.hidden_tests)
            command = BARE[check.runner]
            bare_box = Bare(grader, image, task.root, hidden, runtime)
            try:
                for _ in range(2):  # warm caches: page cache, image layers, build caches
                    bare_box.run(command)
                    assert grader.grade(task, gold).verdict is Verdict.PASS
                bare, grade = [], []
                for _ in range(args.language_rounds):
                    bare.append(bare_box.run(command))
                    t = time.perf_counter()
                    result = grader.grade(task, gold)
                    grade.append(time.perf_counter() - t)
                    assert result.verdict is Verdict.PASS, result.to_json()
                judge(f"{runtime} {task_id}", bare, grade, what=f"the bare {command!r}")
            except MeasurementBroken as e:
                broken.append(str(e))
                print(f"{runtime:6} {task.metadata.language:11} {task_id:20} broken: {e}", flush=True)
                continue
            finally:
                bare_box.close()
            row = {
                "language": task.metadata.language,
                "runner": check.runner,
                "bare_command": command,
                "bare_median_s": statistics.median(bare),
                "grade_median_s": statistics.median(grade),
                "overhead_median_s": statistics.median(grade) - statistics.median(bare),
                "ratio_median": statistics.median(grade) / statistics.median(bare),
                "bare_speed_share": statistics.median(bare) / statistics.median(grade),
            }
            report["languages"].setdefault(runtime, {})[task_id] = row
            print(
                f"{runtime:6} {row['language']:11} {row['runner']:10} bare {row['bare_median_s']:.2f}s  "
                f"grade {row['grade_median_s']:.2f}s  overhead {row['overhead_median_s']:+.2f}s  "
                f"ratio {row['ratio_median']:.2f}x  (graded at {100 * row['bare_speed_share']:.0f}% of bare speed)",
                flush=True,
            )
    if broken:
        report["languages_broken"] = broken


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--runtimes", default="runc,runsc")
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "out" / "overhead.json")
    ap.add_argument(
        "--baseline-python",
        type=Path,
        help="run the baseline with this interpreter instead of the environment's virtualenv "
        "(it must bring the image's packages and plugins all the same)",
    )
    ap.add_argument("--languages", action="store_true", help="per language, on tasks/languages, instead")
    ap.add_argument("--language-rounds", type=int, default=5)
    ap.add_argument("--only", help="with --languages: these task ids (comma-separated)")
    args = ap.parse_args(argv)
    # the machine's other work disturbs every figure: said with them
    report: dict = {"rounds": args.rounds, "runtimes": {}, "languages": {}, "load_before": os.getloadavg()}
    print("load average before: " + " ".join(f"{x:.2f}" for x in report["load_before"]), flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            if args.languages:
                measure_languages(args, report, Path(tmp))
            else:
                measure(args, report, Path(tmp))
    except MeasurementBroken as e:
        # no figures: an earlier run's file must not stand in for this one
        args.json.write_text(json.dumps({"broken": str(e)}, indent=2))
        print(f"overhead.py: the measurement is broken, no figures: {e}", file=sys.stderr)
        return 2
    report["load_after"] = os.getloadavg()
    print("load average after: " + " ".join(f"{x:.2f}" for x in report["load_after"]), flush=True)
    args.json.write_text(json.dumps(report, indent=2))
    print(f"written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
