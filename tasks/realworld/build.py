"""Build the real-world suite from pinned releases on PyPI.

Every task is the real change between two releases of an open-source Python project,
cut from their source distributions: the older sdist is the base (one commit, fixed
author and date, so its sha is the same everywhere), the change to the library files
named in the manifest is the gold patch, and the newer release's versions of the named
test files are the hidden tests. FAIL_TO_PASS and PASS_TO_PASS come from running those
tests in the grading container, as SWE-bench builds its instances: at the base without
and with the gold patch; a test that fails at the base and passes with the gold patch is
FAIL_TO_PASS, one that passes in both is PASS_TO_PASS, one that fails with the gold
patch is dropped. They are recorded in lists.json beside the manifest.

    .venv/bin/python tasks/realworld/build.py                  # download, write build/realworld, build the images
    .venv/bin/python tasks/realworld/build.py --no-images      # only the task directories
    .venv/bin/python tasks/realworld/build.py --compute [ID..] # run the tests again and rewrite lists.json
    .venv/bin/python tasks/realworld/build.py pin NAME VERSION # print a manifest entry for a release
    .venv/bin/grader tasks validate --tasks-dir build/realworld --repeat 3

Nothing third-party is committed: the sdists are downloaded at build time, checked
against their pinned sha256 and kept under the grader cache directory
(GRADER_CACHE_DIR, default ~/.cache/grader) in realworld/sdists. The suite is written
outside tasks/ (which the grader loads by default, strictly), to a temporary directory
first and renamed into place when complete: it is there whole or not at all.
"""

from __future__ import annotations

import argparse
import datetime as dt
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
MANIFEST = HERE / "manifest.toml"
LISTS = HERE / "lists.json"
DEFAULT_OUT = ROOT / "build" / "realworld"
FILES_HOST = "https://files.pythonhosted.org/packages/"
ENVIRONMENT = "python-3.11"
LIMITS = {"timeout": 120, "memory": "1g"}
# A hidden test file that cannot be imported at the base (it imports a name the change
# adds) must not stop the other files from running: their tests are PASS_TO_PASS.
PYTEST_ARGS = ["--continue-on-collection-errors"]
# The suite's defaults (docs/tasks.md, "Suites"), beside the task directories. Real
# projects' hidden tests are the benchmark: a submitter sees the listed tests' outcomes,
# never the test output that could quote them.
SUITE_YAML = """\
# Defaults for every task of the real-world suite (docs/tasks.md, "Suites").
defaults:
  feedback: tests
# Cut from consecutive releases of five projects: a later task's base holds an earlier
# task's fix and the release's tests (grader tasks validate lists the pairs). Those
# releases are public on PyPI anyway, so this suite is served whole, knowingly; a host
# that wants the answers out of reach serves the tasks of one project in release order,
# in separate phases (docs/security.md, "Answers across tasks").
serve_together: all
"""
# Added to the instance image of a src-layout project: the effect of an editable install
# (the package imports from the working tree) with no build backend and no network. The
# path goes first, ahead of site-packages, where the environment's own copy of a project
# (packaging, a dependency of pytest) would otherwise win.
SRC_ON_PATH = ("echo 'import sys; sys.path.insert(0, \"/work/repo/src\")' "
               "> \"$(python -c 'import site; print(site.getsitepackages()[0])')/realworld-src.pth\"")


# --- the manifest ---------------------------------------------------------------------

@dataclass(frozen=True)
class Sdist:
    project: str
    version: str
    url: str
    sha256: str
    uploaded: dt.datetime

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[1]


@dataclass(frozen=True)
class Spec:
    id: str
    project: str
    base: str
    new: str
    source: list[str]
    tests: list[str]
    instruction: str
    pytest_args: list[str] = field(default_factory=list)


@dataclass
class Manifest:
    projects: dict[str, dict]
    sdists: dict[tuple[str, str], Sdist]
    tasks: list[Spec]

    def sdist(self, project: str, version: str) -> Sdist:
        try:
            return self.sdists[(project, version)]
        except KeyError:
            raise SystemExit(f"manifest: no pinned sdist for {project} {version}") from None


def load_manifest(path: Path = MANIFEST) -> Manifest:
    data = tomllib.loads(path.read_text())
    projects = data["projects"]
    sdists = {}
    for name, project in projects.items():
        for version, pin in project.get("sdists", {}).items():
            sdists[(name, version)] = Sdist(name, version, pin["url"], pin["sha256"],
                                            dt.datetime.fromisoformat(pin["uploaded"]))
    tasks, seen = [], set()
    for raw in data["tasks"]:
        spec = Spec(**raw)
        if spec.id in seen:
            raise SystemExit(f"manifest: task {spec.id} is listed twice")
        if spec.project not in projects:
            raise SystemExit(f"manifest: task {spec.id}: unknown project {spec.project}")
        if set(spec.source) & set(spec.tests):
            raise SystemExit(f"manifest: task {spec.id}: a file is both source and test")
        seen.add(spec.id)
        tasks.append(spec)
    m = Manifest(projects, sdists, tasks)
    for spec in tasks:
        m.sdist(spec.project, spec.base), m.sdist(spec.project, spec.new)
    return m


def load_lists() -> dict[str, dict]:
    return json.loads(LISTS.read_text()) if LISTS.exists() else {}


# --- downloads --------------------------------------------------------------------------

def cache_dir() -> Path:
    sys.path.insert(0, str(ROOT))
    from grader.config import get_settings  # the grader's one reader of GRADER_* settings
    return Path(get_settings().cache_dir) / "realworld"


def fetch(sdist: Sdist, cache: Path, log=print) -> Path:
    """The sdist archive, downloaded once and checked against its pinned sha256."""
    dest = cache / "sdists" / sdist.filename
    if dest.exists() and hashlib.sha256(dest.read_bytes()).hexdigest() == sdist.sha256:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    log(f"downloading {sdist.filename}")
    for attempt in range(3):
        try:
            with urllib.request.urlopen(sdist.url, timeout=60) as response:
                data = response.read()
            break
        except OSError as exc:
            if attempt == 2:
                raise SystemExit(f"cannot download {sdist.url}: {exc}") from exc
            time.sleep(2 ** attempt)
    digest = hashlib.sha256(data).hexdigest()
    if digest != sdist.sha256:
        raise SystemExit(f"{sdist.url}: sha256 {digest}, pinned {sdist.sha256}")
    tmp = dest.with_suffix(dest.suffix + f".tmp{os.getpid()}")
    tmp.write_bytes(data)
    tmp.rename(dest)
    return dest


def sdist_files(archive: Path) -> dict[str, tuple[bytes, bool] | str]:
    """path -> (contents, executable), or -> the target of a symlink; the archive's top
    directory stripped."""
    out: dict[str, tuple[bytes, bool] | str] = {}
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                if not info.is_dir():
                    out[info.filename] = (z.read(info), bool((info.external_attr >> 16) & 0o111))
    else:
        with tarfile.open(archive) as t:
            for m in t.getmembers():
                if m.isfile():
                    out[m.name] = (t.extractfile(m).read(), bool(m.mode & 0o111))
                elif m.issym():
                    out[m.name] = m.linkname
    stripped = {}
    for name, value in out.items():
        name = name.removeprefix("./")
        top, _, rest = name.partition("/")
        if not rest or ".." in Path(rest).parts or rest.startswith("/"):
            raise SystemExit(f"{archive.name}: unexpected member {name!r}")
        stripped[rest] = value
    return stripped


# --- repositories -----------------------------------------------------------------------

def git(repo: Path, *args: str, env: dict | None = None, text: bool = True, input: bytes | None = None):
    base_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(repo), "TZ": "UTC", "LC_ALL": "C",
                "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    proc = subprocess.run(["git", "-c", "core.autocrlf=false", "-c", "init.defaultBranch=main",
                           "-c", "pack.threads=1", *args],
                          cwd=repo, env={**base_env, **(env or {})}, capture_output=True, input=input)
    if proc.returncode:
        raise SystemExit(f"git {' '.join(args)} failed in {repo}:\n{proc.stderr.decode(errors='replace')}")
    return proc.stdout.decode() if text else proc.stdout


def commit_tree(repo: Path, sdist: Sdist, files: dict, parent: str | None) -> str:
    """Replace the working tree with `files` and commit it as the release, deterministically."""
    for child in repo.iterdir():
        if child.name != ".git":
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    for rel, value in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(value, str):
            os.symlink(value, path)
        else:
            path.write_bytes(value[0])
            path.chmod(0o755 if value[1] else 0o644)
    git(repo, "add", "-A", "-f", ".")
    stamp = sdist.uploaded.strftime("%Y-%m-%dT%H:%M:%SZ")
    who = {"GIT_AUTHOR_NAME": "PyPI sdist", "GIT_AUTHOR_EMAIL": "sdist@pypi.invalid", "GIT_AUTHOR_DATE": stamp,
           "GIT_COMMITTER_NAME": "grader", "GIT_COMMITTER_EMAIL": "grader@localhost", "GIT_COMMITTER_DATE": stamp}
    message = (f"{sdist.project} {sdist.version}\n\nThe source distribution {sdist.filename} from PyPI, unchanged\n"
               f"(sha256 {sdist.sha256}).\n")
    git(repo, "commit", "-q", "--allow-empty", "--no-verify", "-m", message, env=who)
    if parent is None:
        git(repo, "tag", f"v{sdist.version}")
    return git(repo, "rev-parse", "HEAD").strip()


@dataclass
class History:
    """A scratch repository: the base release, then the newer one on top of it."""
    path: Path
    base: str
    new: str

    def diff(self, paths: list[str]) -> bytes:
        return git(self.path, "diff", "--no-color", "--no-ext-diff", "--no-renames", "--binary", self.base, self.new,
                   "--", *paths, text=False)

    def src_layout(self) -> bool:
        """Whether the base release keeps its package under src/."""
        listed = git(self.path, "ls-tree", "-r", "--name-only", self.base, "--", "src").split()
        return any(re.fullmatch(r"src/[^/]+/__init__\.py", p) for p in listed)

    def show(self, rev: str, rel: str) -> bytes | None:
        listed = git(self.path, "ls-tree", "--name-only", rev, "--", rel).strip()
        return git(self.path, "show", f"{rev}:{rel}", text=False) if listed else None


def make_history(m: Manifest, spec: Spec, work: Path, cache: Path, log=print) -> History:
    base, new = m.sdist(spec.project, spec.base), m.sdist(spec.project, spec.new)
    path = work / f"{spec.project}-{spec.base}-{spec.new}"
    if path.exists():
        return History(path, git(path, "rev-parse", f"v{spec.base}").strip(), git(path, "rev-parse", "HEAD").strip())
    path.mkdir(parents=True)
    git(path, "init", "-q", ".")
    base_sha = commit_tree(path, base, sdist_files(fetch(base, cache, log)), None)
    new_sha = commit_tree(path, new, sdist_files(fetch(new, cache, log)), base_sha)
    return History(path, base_sha, new_sha)


def write_bundle(history: History, spec: Spec, dest: Path) -> None:
    """A bundle holding only the base release (its tag), shared by the tasks that start there."""
    if dest.exists():
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    git(history.path, "bundle", "create", "-q", str(dest), f"v{spec.base}")


# --- tasks ------------------------------------------------------------------------------

def patch_size(patch: bytes) -> tuple[int, int]:
    """(files, changed lines) of a unified diff."""
    files = lines = 0
    for line in patch.decode("utf-8", "replace").splitlines():
        if line.startswith("diff --git "):
            files += 1
        elif (line.startswith("+") and not line.startswith("+++")) or (line.startswith("-") and not line.startswith("---")):
            lines += 1
    return files, lines


def difficulty(patch: bytes) -> str:
    """The rule: easy is one file and at most 10 changed lines; hard is three or more files
    or more than 60 changed lines; the rest is medium."""
    files, lines = patch_size(patch)
    if files == 1 and lines <= 10:
        return "easy"
    if files >= 3 or lines > 60:
        return "hard"
    return "medium"


def reflow(text: str) -> str:
    """The manifest's hard-wrapped instruction as a person would type it: one line per
    paragraph and per list item ('- ...'), blank lines kept."""
    lines: list[str] = []
    for raw in text.strip().splitlines():
        line = raw.strip()
        if line and lines and lines[-1] and not line.startswith("- "):
            lines[-1] += " " + line
        else:
            lines.append(line)
    return "\n".join(lines)


def task_document(m: Manifest, spec: Spec, history: History, gold: bytes, lists: dict | None) -> dict:
    project = m.projects[spec.project]
    new = m.sdist(spec.project, spec.new)
    check: dict = {"type": "tests", "hidden_tests": {rel: f"hidden/{rel}" for rel in spec.tests}}
    check["pytest_args"] = [*PYTEST_ARGS, *spec.pytest_args]
    if lists is not None:
        check["fail_to_pass"] = lists["fail_to_pass"]
        check["pass_to_pass"] = lists["pass_to_pass"]
    doc: dict = {
        "id": spec.id,
        "instruction": reflow(spec.instruction),
        "metadata": {
            "suite": "realworld",
            "language": "python",
            "difficulty": difficulty(gold),
            "created_at": new.uploaded.date(),
            "source": f"{project.get('pypi', spec.project)} {spec.base} -> {spec.new} (PyPI sdists)",
        },
        "repo": {"bundle": f"../repos/{spec.project}-{spec.base}.bundle", "commit": history.base},
        "environment": ENVIRONMENT,
    }
    steps = [SRC_ON_PATH] if history.src_layout() else []
    steps += [project["install"]] if project.get("install") else []
    if steps:
        doc["install"] = " && ".join(steps)
    doc["check"] = check
    doc["limits"] = dict(LIMITS)
    doc["gold_patch"] = "gold.patch"
    return doc


def write_task(out: Path, m: Manifest, spec: Spec, history: History, lists: dict | None) -> dict:
    if lists is not None and lists.get("base_commit") != history.base:
        raise SystemExit(f"task {spec.id}: the base commit is {history.base}, lists.json recorded "
                         f"{lists.get('base_commit')}: the sdist or the way it is committed changed")
    gold = history.diff(spec.source)
    changed = set(git(history.path, "diff", "--name-only", "--no-renames", history.base, history.new, "--",
                      *spec.source).split())
    if missing := sorted(set(spec.source) - changed):
        raise SystemExit(f"task {spec.id}: {', '.join(missing)} did not change between {spec.base} and {spec.new}")
    d = out / spec.id
    d.mkdir(parents=True)
    (d / "gold.patch").write_bytes(gold)
    for rel in spec.tests:
        data = history.show(history.new, rel)
        if data is None:
            raise SystemExit(f"task {spec.id}: {rel} is not in {spec.project} {spec.new}")
        (d / "hidden" / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / "hidden" / rel).write_bytes(data)
    doc = task_document(m, spec, history, gold, lists)
    from grader.tasks.loader import dump_task_yaml  # the grader's one writer of task.yaml (ROOT is on the path)
    (d / "task.yaml").write_text(dump_task_yaml(doc))
    return doc


def stamp(ids: list[str] | None, provisional: bool) -> str:
    h = hashlib.sha256()
    for path in (MANIFEST, LISTS, Path(__file__)):
        h.update(path.read_bytes() if path.exists() else b"")
    h.update(json.dumps([ids, provisional]).encode())
    return h.hexdigest()


def build_suite(out: Path, *, ids: list[str] | None = None, provisional: bool = False, force: bool = False,
                log=print) -> tuple[Manifest, bool]:
    """Write the suite to `out`, whole or not at all. Returns the manifest and whether it
    was (re)written. `provisional` leaves the test lists out (for --compute)."""
    m = load_manifest()
    specs = [s for s in m.tasks if ids is None or s.id in ids]
    if ids is not None and (unknown := set(ids) - {s.id for s in specs}):
        raise SystemExit(f"no such task(s) in the manifest: {', '.join(sorted(unknown))}")
    key = stamp(ids, provisional)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build of a directory at a time (a test and a person, say)
        if not force and (out / ".stamp").exists() and (out / ".stamp").read_text() == key:
            return m, False
        _write_suite(out, m, specs, key, provisional, log)
    return m, True


def _write_suite(out: Path, m: Manifest, specs: list[Spec], key: str, provisional: bool, log) -> None:
    lists = load_lists()
    if not provisional and (missing := [s.id for s in specs if s.id not in lists]):
        raise SystemExit(f"no test lists for {', '.join(missing)}: run build.py --compute {' '.join(missing)}")
    if not provisional and (unsolved := [s.id for s in specs if not lists[s.id]["fail_to_pass"]]):
        raise SystemExit(f"no FAIL_TO_PASS test in {', '.join(unsolved)}: the hidden tests pass at the base")
    cache = cache_dir()
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    tmp.chmod(0o755)
    try:
        with tempfile.TemporaryDirectory(prefix="realworld-git-") as work:
            for spec in specs:
                history = make_history(m, spec, Path(work), cache, log)
                write_bundle(history, spec, tmp / "repos" / f"{spec.project}-{spec.base}.bundle")
                write_task(tmp, m, spec, history, None if provisional else lists[spec.id])
        (tmp / "suite.yaml").write_text(SUITE_YAML)
        (tmp / ".stamp").write_text(key)
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            out.rename(old)
            tmp.rename(out)
            shutil.rmtree(old)
        else:
            tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def grader_settings(tasks_dir: Path, **overrides):
    sys.path.insert(0, str(ROOT))
    from grader.config import get_settings
    return get_settings(tasks_dir=tasks_dir, environments_dir=ROOT / "environments", **overrides)


def build_images(out: Path, log=print) -> None:
    from grader.images import Images
    from grader.tasks.loader import TaskSet
    settings = grader_settings(out)
    images = Images(settings)
    for task in TaskSet(out):
        t = time.monotonic()
        images.instance_image(task)
        log(f"instance image for {task.id} ready ({time.monotonic() - t:.1f} s)")


# --- FAIL_TO_PASS and PASS_TO_PASS ---------------------------------------------------------

def compute(ids: list[str] | None, runs: int, log=print) -> dict[str, dict]:
    """Run each task's hidden tests at the base without and with the gold patch, in the
    grading container, `runs` times; keep only what held in every run."""
    from grader.pipeline import Grader
    from grader.tasks.loader import TaskSet
    from grader.verdict import Verdict
    staging = ROOT / "build" / ".realworld-compute"
    shutil.rmtree(staging, ignore_errors=True)
    build_suite(staging, ids=ids, provisional=True, force=True, log=log)
    settings = grader_settings(staging, prewarm=0)
    grader = Grader(settings)
    computed: dict[str, dict] = {}
    problems: list[str] = []
    made_images: set[str] = set()
    try:
        for task in TaskSet(staging):
            _, prepared = grader.images.instance_image(task)
            env_id = grader.images.engine.image_id(grader.images.env_tag(grader.images.environment(task.environment)))
            made_images.add(grader.images.instance_tag(prepared, env_id))
            base_runs, gold_runs, problem = [], [], None
            for _ in range(runs):
                for patch, into in ((b"", base_runs), (task.gold_patch_text(), gold_runs)):
                    result = grader.grade(task, patch)
                    if result.verdict in (Verdict.ERROR, Verdict.TIMED_OUT, Verdict.PATCH_FAILED) or result.tests is None:
                        problem = f"{'gold' if patch else 'empty'} patch: {result.verdict}: {result.explanation}"
                        break
                    into.append(result.tests.all)
                if problem:
                    break
            if problem:
                problems.append(f"{task.id}: {problem}")
                log(f"{task.id}: unusable: {problem}")
                continue
            ids_seen = sorted(set().union(*gold_runs))
            gold_ok = [t for t in ids_seen if all(r.get(t) == "passed" for r in gold_runs)]
            f2p = [t for t in gold_ok if all(r.get(t) != "passed" for r in base_runs)]
            p2p = [t for t in gold_ok if all(r.get(t) == "passed" for r in base_runs)]
            dropped = [t for t in ids_seen if t not in f2p and t not in p2p]
            computed[task.id] = {"base_commit": task.repo.commit, "fail_to_pass": f2p, "pass_to_pass": p2p,
                                 "dropped": dropped}
            log(f"{task.id}: FAIL_TO_PASS {len(f2p)}, PASS_TO_PASS {len(p2p)}, dropped {len(dropped)}")
    finally:
        for tag in made_images:  # the provisional images, by tag: a final image may share their layers
            grader.images.engine.remove_image(tag)
        shutil.rmtree(staging, ignore_errors=True)
    if problems:
        raise SystemExit("cannot compute the test lists of:\n" + "\n".join(problems))
    return computed


# --- pinning ----------------------------------------------------------------------------

def pin(project: str, versions: list[str]) -> str:
    """Manifest entries for releases of `project`, from PyPI's JSON API."""
    with urllib.request.urlopen(f"https://pypi.org/pypi/{project}/json", timeout=60) as response:
        data = json.load(response)
    lines = []
    for version in versions:
        files = [f for f in data["releases"].get(version, []) if f["packagetype"] == "sdist"]
        if not files:
            raise SystemExit(f"{project} {version}: no sdist on PyPI")
        f = files[0]
        url = FILES_HOST + f["url"].rsplit("packages/", 1)[1]
        uploaded = f["upload_time_iso_8601"][:19]
        lines.append(f'"{version}" = {{ url = "{url}", sha256 = "{f["digests"]["sha256"]}", uploaded = "{uploaded}" }}')
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the suite goes (default: build/realworld)")
    parser.add_argument("--no-images", action="store_true", help="write the task directories only")
    parser.add_argument("--force", action="store_true", help="rewrite the suite even when it is up to date")
    parser.add_argument("--compute", action="store_true",
                        help="run the hidden tests in containers and rewrite the lists of the named tasks (all by default)")
    parser.add_argument("--runs", type=int, default=1, help="with --compute: runs that must agree")
    parser.add_argument("ids", nargs="*", help="task ids (with --compute), or `pin PROJECT VERSION...`")
    args = parser.parse_args(argv)
    if args.ids[:1] == ["pin"]:
        print(pin(args.ids[1], args.ids[2:]))
        return 0
    if shutil.which("git") is None:
        print("git is required", file=sys.stderr)
        return 1
    started = time.monotonic()
    if args.compute:
        lists = load_lists()
        lists.update(compute(args.ids or None, args.runs))
        known = {spec.id for spec in load_manifest().tasks}
        lists = {k: v for k, v in lists.items() if k in known}
        LISTS.write_text(json.dumps(dict(sorted(lists.items())), indent=1) + "\n")
    elif args.ids:
        parser.error("task ids are for --compute")
    m, written = build_suite(args.out, force=args.force)
    print(f"{len(m.tasks)} tasks {'written to' if written else 'up to date in'} {args.out} "
          f"({time.monotonic() - started:.1f} s)")
    if not args.no_images:
        t = time.monotonic()
        build_images(args.out)
        print(f"instance images ready ({time.monotonic() - t:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
