"""Suites cut from real release history: the shared builder behind every suite directory
that holds a `manifest.toml` (tasks/realworld, tasks/npm-real, tasks/go-real, ...).

Every task is the real change between two releases of an open-source project, cut from
the archives its registry publishes (PyPI sdists, npm tarballs, Go module zips, crates,
Maven Central source jars, Debian orig tarballs): the older release is the base (one
commit, fixed author and date, so its sha is the same everywhere), the change to the
library files named in the manifest is the gold patch, and the newer release's versions
of the named test files are the hidden tests. FAIL_TO_PASS and PASS_TO_PASS come from
running those tests in the grading container, as SWE-bench builds its instances: at the
base without and with the gold patch; a test that fails at the base and passes with the
gold patch in every run is FAIL_TO_PASS, one that passes in both is PASS_TO_PASS, the rest
are dropped. They are recorded in lists.json beside the manifest.

    .venv/bin/python tasks/releases.py SUITE                  # download, write build/SUITE, build the images
    .venv/bin/python tasks/releases.py SUITE --no-images      # only the task directories
    .venv/bin/python tasks/releases.py SUITE --compute [ID..] # run the tests again and rewrite lists.json
    .venv/bin/python tasks/releases.py SUITE pin PACKAGE VERSION...  # manifest entries for releases
    .venv/bin/grader tasks validate --tasks-dir build/SUITE --repeat 3

Nothing third-party is committed: the archives are downloaded at build time, checked
against their pinned sha256 and kept under the grader cache directory (GRADER_CACHE_DIR,
default ~/.cache/grader) in releases/. A suite is written outside tasks/ (which the grader
loads by default, strictly), to a temporary directory first and renamed into place when
complete: it is there whole or not at all.

The manifest (TOML):

    [suite]                       # optional: the suite's defaults
    environment = "node-20"       # the environment of its tasks (default python-3.11)
    runner = "tap"                # their runner (default pytest)
    limits = {timeout = 120, memory = "1g"}
    [projects.NAME]
    registry = "npm"              # pypi (default) | npm | go | crates | maven | debian
    package = "qs"                # its name there (pypi = "..." is read too)
    install = "..."               # run in the repository when the instance image is built
    environment, runner, args, limits    # per project, over the suite's
    config = { "jest.config.js" = "..." } # files of the project's repository that its archive
                                  # leaves out (its test configuration), in every release's tree
    [projects.NAME.releases]      # (a PyPI project may call them sdists)
    "1.2.0" = { url = "...", sha256 = "...", uploaded = "2024-01-01T00:00:00" }
    "1.3.0" = { archives = [{ url = "...", sha256 = "...", into = "src/main/java", exclude = ["META-INF/*"] }, ...],
                uploaded = "..." }
                                  # an entry with `file = "pom.xml"` is one file, not an archive:
                                  # placed at that path as it is (a Maven release's POM)
    [[tasks]]
    id, project, base, new, source (library files), tests (test files), instruction,
    and optionally paths (what the runner runs; default: the tests), args, pytest_args,
    install (the task's own install step, over the project's; "" for none) and command
    (check.command: a build step before the tests, for runners that take one) and flaky
    (test ids that hold or fail by the machine's speed: left out of the lists)
"""

from __future__ import annotations

import argparse
import datetime as dt
import fcntl
import fnmatch
import hashlib
import io
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
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ENVIRONMENT = "python-3.11"
DEFAULT_LIMITS = {"timeout": 120, "memory": "1g"}
# Who a release commit says made it, and what it says it is, by registry.
REGISTRIES = {
    "pypi": ("PyPI sdist", "sdist@pypi.invalid", "The source distribution {files} from PyPI"),
    "npm": ("npm tarball", "tarball@npmjs.invalid", "The package tarball {files} from the npm registry"),
    "go": ("Go module zip", "zip@proxy.golang.invalid", "The module zip {files} from the Go module proxy"),
    "crates": ("crates.io crate", "crate@crates.invalid", "The crate {files} from crates.io"),
    "maven": ("Maven Central jar", "jars@maven.invalid", "The jars {files} from Maven Central"),
    "debian": ("Debian source", "source@debian.invalid", "The source archives {files} from Debian's archive"),
}
# Real projects' hidden tests are the benchmark: a submitter sees the listed tests'
# outcomes, never the test output that could quote them.
SUITE_YAML = """\
# Defaults for every task of the suite (docs/tasks.md, "Suites").
defaults:
  feedback: tests
# Cut from consecutive releases: a later task's base holds an earlier task's fix and the
# release's tests (grader tasks validate lists the pairs). Those releases are public in
# their registry anyway, so this suite is served whole, knowingly; a host that wants the
# answers out of reach serves the tasks of one project in release order, in separate
# phases (docs/security.md, "Answers across tasks").
serve_together: all
"""

Log = Callable[[str], None]


# --- the manifest ---------------------------------------------------------------------


@dataclass(frozen=True)
class Archive:
    url: str
    sha256: str
    into: str = ""  # a directory of the repository the archive's files go under
    exclude: tuple[str, ...] = ()  # globs (after stripping) left out
    file: str = ""  # not an archive: this one file, placed at this path of the repository as it is

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[1]


@dataclass(frozen=True)
class Release:
    project: str
    version: str
    archives: tuple[Archive, ...]
    uploaded: dt.datetime

    # the one archive's fields, for a release of one (every PyPI sdist)
    @property
    def url(self) -> str:
        return self.archives[0].url

    @property
    def sha256(self) -> str:
        return self.archives[0].sha256

    @property
    def filename(self) -> str:
        return self.archives[0].filename


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
    args: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    install: str | None = None  # over the project's install ("" for none)
    command: str | None = None  # check.command
    # test ids that hold or fail by the machine's speed (a real timer's window of a few
    # milliseconds): left out of the lists, as a flaky test is, even where every run passed
    flaky: list[str] = field(default_factory=list)


@dataclass
class Manifest:
    suite: dict[str, Any]
    projects: dict[str, dict[str, Any]]
    releases: dict[tuple[str, str], Release]
    tasks: list[Spec]

    def release(self, project: str, version: str) -> Release:
        try:
            return self.releases[(project, version)]
        except KeyError:
            raise SystemExit(f"manifest: no pinned release of {project} {version}") from None

    sdist = release  # the real-world suite's word for a PyPI release

    @property
    def sdists(self) -> dict[tuple[str, str], Release]:
        return self.releases

    def setting(self, project: str, key: str, default: Any = None) -> Any:
        return self.projects[project].get(key, self.suite.get(key, default))

    def registry(self, project: str) -> str:
        return str(self.projects[project].get("registry", "pypi"))


def _release(project: str, version: str, pin: dict[str, Any]) -> Release:
    if "archives" in pin:
        archives = tuple(
            Archive(a["url"], a["sha256"], a.get("into", ""), tuple(a.get("exclude", [])), a.get("file", ""))
            for a in pin["archives"]
        )
    else:
        archives = (Archive(pin["url"], pin["sha256"], pin.get("into", ""), tuple(pin.get("exclude", []))),)
    return Release(project, version, archives, dt.datetime.fromisoformat(pin["uploaded"]))


def load_manifest(path: Path) -> Manifest:
    data = tomllib.loads(path.read_text())
    projects = data["projects"]
    releases = {}
    for name, project in projects.items():
        registry = project.get("registry", "pypi")
        if registry not in REGISTRIES:
            raise SystemExit(f"manifest: project {name}: unknown registry {registry!r}")
        for version, pin in {**project.get("sdists", {}), **project.get("releases", {})}.items():
            releases[(name, version)] = _release(name, version, pin)
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
    m = Manifest(data.get("suite", {}), projects, releases, tasks)
    for spec in tasks:
        m.release(spec.project, spec.base), m.release(spec.project, spec.new)
    return m


# --- downloads --------------------------------------------------------------------------


def grader_cache() -> Path:
    sys.path.insert(0, str(ROOT))
    from grader.config import get_settings  # the grader's one reader of GRADER_* settings

    return Path(get_settings().cache_dir)


def gone(url: str) -> str:
    """Why a pinned archive answers 404: the registry no longer serves that version."""
    if "/debian/pool/" in url:
        return (
            f"{url}: 404 Not Found: the pinned version has left Debian's archive (its pool keeps a "
            "version only while some Debian suite lists it). Pin a version a suite lists now "
            "(its Sources index gives the url and the sha256) and recompute the task's lists."
        )
    return f"{url}: 404 Not Found: the registry no longer serves the pinned release"


def download(url: str, log: Log = print) -> bytes:
    log(f"downloading {url.rsplit('/', 1)[1]}")
    for attempt in range(3):
        try:
            with urllib.request.urlopen(url, timeout=120) as response:
                data: bytes = response.read()
                return data
        except urllib.error.HTTPError as exc:
            if exc.code == 404:  # final: no retry makes it come back
                raise SystemExit(gone(url)) from exc
            if attempt == 2:
                raise SystemExit(f"cannot download {url}: {exc}") from exc
            time.sleep(2**attempt)
        except OSError as exc:
            if attempt == 2:
                raise SystemExit(f"cannot download {url}: {exc}") from exc
            time.sleep(2**attempt)
    raise AssertionError("unreachable")


def fetch(archive: Archive, cache: Path, log: Log = print) -> Path:
    """The archive, downloaded once and checked against its pinned sha256."""
    dest = cache / archive.filename
    if dest.exists() and hashlib.sha256(dest.read_bytes()).hexdigest() == archive.sha256:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    data = download(archive.url, log)
    digest = hashlib.sha256(data).hexdigest()
    if digest != archive.sha256:
        raise SystemExit(f"{archive.url}: sha256 {digest}, pinned {archive.sha256}")
    tmp = dest.with_suffix(dest.suffix + f".tmp{os.getpid()}")
    tmp.write_bytes(data)
    tmp.rename(dest)
    return dest


Files = dict[str, "tuple[bytes, bool] | str"]


def _members(path: Path) -> Files:
    """path -> (contents, executable), or -> the target of a symlink, as archived."""
    out: Files = {}
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                if not info.is_dir():
                    out[info.filename] = (z.read(info), bool((info.external_attr >> 16) & 0o111))
        return out
    with tarfile.open(path) as t:
        for m in t.getmembers():
            if m.isfile():
                f = t.extractfile(m)
                assert f is not None
                out[m.name] = (f.read(), bool(m.mode & 0o111))
            elif m.issym():
                out[m.name] = m.linkname
    return out


def _top(names: list[str]) -> str:
    """The directory every member is under, if they share one."""
    if not names:
        return ""
    first = names[0].split("/")
    for i, part in enumerate(first[:-1]):
        if "@" in part:  # a Go module zip: everything is under module@version/
            candidate = "/".join(first[: i + 1]) + "/"
            if all(n.startswith(candidate) for n in names):
                return candidate
            break
    tops = {n.split("/", 1)[0] for n in names}
    if len(tops) == 1 and all("/" in n for n in names):
        return tops.pop() + "/"
    return ""


def archive_files(path: Path, archive: Archive | None = None) -> Files:
    """The archive's files, its top directory stripped when every member shares one (an
    sdist's name-version/, npm's package/, a crate's name-version/, a Go module zip's
    module@version/), under `into`, less `exclude`."""
    raw = {name.removeprefix("./"): v for name, v in _members(path).items()}
    prefix = _top(list(raw))
    into = archive.into.strip("/") + "/" if archive and archive.into else ""
    out: Files = {}
    for name, value in raw.items():
        rest = name[len(prefix) :]
        if not rest or ".." in Path(rest).parts or rest.startswith("/"):
            raise SystemExit(f"{path.name}: unexpected member {name!r}")
        if archive and any(fnmatch.fnmatchcase(rest, g) for g in archive.exclude):
            continue
        out[into + rest] = value
    return out


sdist_files = archive_files  # the real-world suite's name for it


# --- repositories -----------------------------------------------------------------------


def git(repo: Path, *args: str, env: dict[str, str] | None = None, text: bool = True, input: bytes | None = None) -> Any:
    base_env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(repo),
        "TZ": "UTC",
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    proc = subprocess.run(
        ["git", "-c", "core.autocrlf=false", "-c", "init.defaultBranch=main", "-c", "pack.threads=1", *args],
        cwd=repo,
        env={**base_env, **(env or {})},
        capture_output=True,
        input=input,
    )
    if proc.returncode:
        raise SystemExit(f"git {' '.join(args)} failed in {repo}:\n{proc.stderr.decode(errors='replace')}")
    return proc.stdout.decode() if text else proc.stdout


def write_tree(repo: Path, files: Files) -> None:
    """Replace the working tree of `repo` with `files` (.git/ stays)."""
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


def commit_tree(repo: Path, release: Release, registry: str, files: Files, parent: str | None) -> str:
    """Replace the working tree with `files` and commit it as the release, deterministically."""
    write_tree(repo, files)
    git(repo, "add", "-A", "-f", ".")
    stamp = release.uploaded.strftime("%Y-%m-%dT%H:%M:%SZ")
    author, email, what = REGISTRIES[registry]
    who = {
        "GIT_AUTHOR_NAME": author,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_AUTHOR_DATE": stamp,
        "GIT_COMMITTER_NAME": "grader",
        "GIT_COMMITTER_EMAIL": "grader@localhost",
        "GIT_COMMITTER_DATE": stamp,
    }
    names = ", ".join(a.filename for a in release.archives)
    digests = ", ".join(a.sha256 for a in release.archives)
    message = f"{release.project} {release.version}\n\n{what.format(files=names)}, unchanged\n(sha256 {digests}).\n"
    git(repo, "commit", "-q", "--allow-empty", "--no-verify", "-m", message, env=who)
    if parent is None:
        git(repo, "tag", f"v{release.version}")
    return str(git(repo, "rev-parse", "HEAD").strip())


@dataclass
class History:
    """A scratch repository: the base release, then the newer one on top of it."""

    path: Path
    base: str
    new: str

    def diff(self, paths: list[str]) -> bytes:
        out: bytes = git(
            self.path,
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--no-renames",
            "--binary",
            self.base,
            self.new,
            "--",
            *paths,
            text=False,
        )
        return out

    def src_layout(self) -> bool:
        """Whether the base release keeps its Python package under src/."""
        listed = git(self.path, "ls-tree", "-r", "--name-only", self.base, "--", "src").split()
        return any(re.fullmatch(r"src/[^/]+/__init__\.py", p) for p in listed)

    def files(self, rev: str, paths: list[str]) -> list[str]:
        """`paths` with each directory of `rev` among them replaced by every file under it."""
        out: list[str] = []
        for rel in paths:
            kind = git(self.path, "ls-tree", rev, "--", rel.rstrip("/")).split(None, 2)[1:2]
            if kind == ["tree"]:
                out += git(self.path, "ls-tree", "-r", "--name-only", rev, "--", rel.rstrip("/") + "/").split("\n")[:-1]
            else:
                out.append(rel)
        return out

    def show(self, rev: str, rel: str) -> bytes | None:
        listed = git(self.path, "ls-tree", "--name-only", rev, "--", rel).strip()
        if not listed:
            return None
        out: bytes = git(self.path, "show", f"{rev}:{rel}", text=False)
        return out


def release_files(release: Release, cache: Path, log: Log) -> Files:
    files: Files = {}
    for archive in release.archives:
        if archive.file:
            if not rel_path_ok(archive.file):
                raise SystemExit(f"{archive.url}: file = {archive.file!r} is not a path inside the repository")
            files[archive.file] = (fetch(archive, cache, log).read_bytes(), False)
            continue
        files.update(archive_files(fetch(archive, cache, log), archive))
    return files


def rel_path_ok(rel: str) -> bool:
    parts = rel.split("/")
    return bool(rel) and not rel.startswith("/") and not {"", ".", ".."} & set(parts)


def make_history(m: Manifest, spec: Spec, work: Path, cache: Path, log: Log = print) -> History:
    base, new = m.release(spec.project, spec.base), m.release(spec.project, spec.new)
    path = work / f"{spec.project}-{spec.base}-{spec.new}"
    if path.exists():
        return History(path, git(path, "rev-parse", f"v{spec.base}").strip(), git(path, "rev-parse", "HEAD").strip())
    path.mkdir(parents=True)
    git(path, "init", "-q", ".")
    registry = m.registry(spec.project)
    config = project_config(m, spec.project)
    base_sha = commit_tree(path, base, registry, {**release_files(base, cache, log), **config}, None)
    new_sha = commit_tree(path, new, registry, {**release_files(new, cache, log), **config}, base_sha)
    return History(path, base_sha, new_sha)


def project_config(m: Manifest, project: str) -> Files:
    """The project's `config` files: its repository's test configuration that the published
    archive leaves out (a jest.config.js, a vitest.config.ts), written into every release's
    tree as the repository has them, so they are in the base and in no diff."""
    out: Files = {}
    for rel, text in (m.projects[project].get("config") or {}).items():
        if not rel_path_ok(rel) or not isinstance(text, str):
            raise SystemExit(f"manifest: project {project}: config {rel!r} is not a path and a text")
        out[rel] = (text.encode(), False)
    return out


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
        elif (line.startswith("+") and not line.startswith("+++")) or (
            line.startswith("-") and not line.startswith("---")
        ):
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


# The Python environments' runners keep going past a test module that fails to import (a
# hidden test file importing a name the change adds), so the other files still count.
PYTEST_ARGS = ["--continue-on-collection-errors"]
# Added to the instance image of a Python src-layout project: the effect of an editable
# install (the package imports from the working tree) with no build backend and no network.
# The path goes first, ahead of site-packages, where the environment's own copy of a project
# (packaging, a dependency of pytest) would otherwise win.
SRC_ON_PATH = (
    "echo 'import sys; sys.path.insert(0, \"/work/repo/src\")' "
    "> \"$(python -c 'import site; print(site.getsitepackages()[0])')/realworld-src.pth\""
)


@dataclass
class Suite:
    """One suite directory: its manifest, its lists, where it is built."""

    name: str
    home: Path  # the directory holding manifest.toml and lists.json
    out: Path  # where it is built (build/NAME)
    builder: Path  # the file whose change rebuilds the suite (with the manifest and the lists)

    @property
    def manifest_path(self) -> Path:
        return self.home / "manifest.toml"

    @property
    def lists_path(self) -> Path:
        return self.home / "lists.json"

    def manifest(self) -> Manifest:
        return load_manifest(self.manifest_path)

    def lists(self) -> dict[str, dict[str, Any]]:
        return json.loads(self.lists_path.read_text()) if self.lists_path.exists() else {}

    def cache(self) -> Path:
        return grader_cache() / "releases"

    # --- one task ---
    def task_document(self, m: Manifest, spec: Spec, history: History, gold: bytes, lists: dict | None) -> dict:
        project = m.projects[spec.project]
        registry = m.registry(spec.project)
        new = m.release(spec.project, spec.new)
        runner = m.setting(spec.project, "runner", "pytest")
        check: dict[str, Any] = {"type": "tests"}
        if runner != "pytest":
            check["runner"] = runner
        check["hidden_tests"] = {rel: f"hidden/{rel}" for rel in history.files(history.new, spec.tests)}
        if runner == "pytest":
            check["pytest_args"] = [*PYTEST_ARGS, *spec.pytest_args]
        else:
            args = [*m.setting(spec.project, "args", []), *spec.args]
            if args:
                check["args"] = args
        if spec.paths:
            check["paths"] = list(spec.paths)
        if spec.command:
            check["command"] = spec.command
        if lists is not None:
            check["fail_to_pass"] = [t for t in lists["fail_to_pass"] if t not in spec.flaky]
            check["pass_to_pass"] = [t for t in lists["pass_to_pass"] if t not in spec.flaky]
        package = project.get("package", project.get("pypi", spec.project))
        environment = m.setting(spec.project, "environment", DEFAULT_ENVIRONMENT)
        doc: dict[str, Any] = {
            "id": spec.id,
            "instruction": reflow(spec.instruction),
            "metadata": {
                "suite": self.name,
                "language": m.setting(spec.project, "language", "python"),
                "difficulty": difficulty(gold),
                "created_at": new.uploaded.date(),
                "source": f"{package} {spec.base} -> {spec.new} ({REGISTRIES[registry][0]}s)",
            },
            "repo": {"bundle": f"../repos/{spec.project}-{spec.base}.bundle", "commit": history.base},
            "environment": environment,
        }
        steps = [SRC_ON_PATH] if environment.startswith("python-") and history.src_layout() else []
        install = spec.install if spec.install is not None else project.get("install")
        steps += [install] if install else []
        if steps:
            doc["install"] = " && ".join(steps)
        doc["check"] = check
        doc["limits"] = dict(m.setting(spec.project, "limits", DEFAULT_LIMITS))
        doc["gold_patch"] = "gold.patch"
        return doc

    def write_task(self, out: Path, m: Manifest, spec: Spec, history: History, lists: dict | None) -> dict:
        if lists is not None and lists.get("base_commit") != history.base:
            raise SystemExit(
                f"task {spec.id}: the base commit is {history.base}, lists.json recorded "
                f"{lists.get('base_commit')}: the archive or the way it is committed changed"
            )
        gold = history.diff(spec.source)
        changed = set(
            git(
                history.path, "diff", "--name-only", "--no-renames", history.base, history.new, "--", *spec.source
            ).split()
        )
        if missing := sorted(set(spec.source) - changed):
            raise SystemExit(f"task {spec.id}: {', '.join(missing)} did not change between {spec.base} and {spec.new}")
        d = out / spec.id
        d.mkdir(parents=True)
        (d / "gold.patch").write_bytes(gold)
        for rel in history.files(history.new, spec.tests):
            data = history.show(history.new, rel)
            if data is None:
                raise SystemExit(f"task {spec.id}: {rel} is not in {spec.project} {spec.new}")
            (d / "hidden" / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / "hidden" / rel).write_bytes(data)
        doc = self.task_document(m, spec, history, gold, lists)
        from grader.tasks.loader import dump_task_yaml  # the grader's one writer of task.yaml (ROOT is on the path)

        (d / "task.yaml").write_text(dump_task_yaml(doc))
        return doc

    # --- the whole suite ---
    def stamp(self, ids: list[str] | None, provisional: bool) -> str:
        h = hashlib.sha256()
        for path in (self.manifest_path, self.lists_path, self.builder, Path(__file__)):
            h.update(path.read_bytes() if path.exists() else b"")
        h.update(json.dumps([ids, provisional]).encode())
        return h.hexdigest()

    def build(
        self,
        out: Path | None = None,
        *,
        ids: list[str] | None = None,
        provisional: bool = False,
        force: bool = False,
        log: Log = print,
    ) -> tuple[Manifest, bool]:
        """Write the suite to `out`, whole or not at all. Returns the manifest and whether it
        was (re)written. `provisional` leaves the test lists out (for --compute)."""
        out = out or self.out
        m = self.manifest()
        specs = [s for s in m.tasks if ids is None or s.id in ids]
        if ids is not None and (unknown := set(ids) - {s.id for s in specs}):
            raise SystemExit(f"no such task(s) in the manifest: {', '.join(sorted(unknown))}")
        key = self.stamp(ids, provisional)
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out.parent / f".{out.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one build of a directory at a time (a test and a person, say)
            if not force and (out / ".stamp").exists() and (out / ".stamp").read_text() == key:
                return m, False
            self._write(out, m, specs, key, provisional, log)
        return m, True

    def _write(self, out: Path, m: Manifest, specs: list[Spec], key: str, provisional: bool, log: Log) -> None:
        lists = self.lists()
        if not provisional and (missing := [s.id for s in specs if s.id not in lists]):
            raise SystemExit(f"no test lists for {', '.join(missing)}: run the builder with --compute {' '.join(missing)}")
        if not provisional and (unsolved := [s.id for s in specs if not lists[s.id]["fail_to_pass"]]):
            raise SystemExit(f"no FAIL_TO_PASS test in {', '.join(unsolved)}: the hidden tests pass at the base")
        cache = self.cache()
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
        tmp.chmod(0o755)
        try:
            with tempfile.TemporaryDirectory(prefix=f"{self.name}-git-") as work:
                for spec in specs:
                    history = make_history(m, spec, Path(work), cache, log)
                    write_bundle(history, spec, tmp / "repos" / f"{spec.project}-{spec.base}.bundle")
                    self.write_task(tmp, m, spec, history, None if provisional else lists[spec.id])
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

    def build_images(self, out: Path | None = None, log: Log = print) -> None:
        from grader.images import Images
        from grader.tasks.loader import TaskSet

        out = out or self.out
        images = Images(grader_settings(out))
        for task in TaskSet(out):
            t = time.monotonic()
            images.instance_image(task, log=log)
            log(f"instance image for {task.id} ready ({time.monotonic() - t:.1f} s)")

    # --- FAIL_TO_PASS and PASS_TO_PASS ---
    def compute(self, ids: list[str] | None, runs: int, log: Log = print) -> dict[str, dict[str, Any]]:
        """Run each task's hidden tests at the base without and with the gold patch, in the
        grading container, `runs` times; keep only what held in every run."""
        from grader.pipeline import Grader
        from grader.tasks.loader import TaskSet
        from grader.validate import lists_from_runs
        from grader.verdict import Verdict

        staging = ROOT / "build" / f".{self.name}-compute"
        shutil.rmtree(staging, ignore_errors=True)
        self.build(staging, ids=ids, provisional=True, force=True, log=log)
        grader = Grader(grader_settings(staging, prewarm=0))
        flaky_ids = {spec.id: spec.flaky for spec in self.manifest().tasks}
        computed: dict[str, dict[str, Any]] = {}
        problems: list[str] = []
        made_images: set[str] = set()
        try:
            for task in TaskSet(staging):
                _, prepared = grader.images.instance_image(task, log=log)
                env_id = grader.images.engine.image_id(
                    grader.images.env_tag(grader.images.environment(task.environment))
                )
                assert env_id is not None
                made_images.add(grader.images.instance_tag(prepared, env_id))
                base_runs: list[dict[str, str]] = []
                gold_runs: list[dict[str, str]] = []
                problem = None
                for _ in range(runs):
                    for patch, into in ((b"", base_runs), (task.gold_patch_text() or b"", gold_runs)):
                        result = grader.grade(task, patch)
                        bad = (Verdict.ERROR, Verdict.TIMED_OUT, Verdict.PATCH_FAILED)
                        if result.verdict in bad or result.tests is None or result.tampered:
                            what = "gold" if patch else "empty"
                            problem = f"{what} patch: {result.verdict}: {result.explanation} {result.error or ''}"
                            break
                        into.append(result.tests.all)
                    if problem:
                        break
                if problem:
                    problems.append(f"{task.id}: {problem}")
                    log(f"{task.id}: unusable: {problem}")
                    continue
                derived = lists_from_runs(base_runs, gold_runs)
                flaky = set(flaky_ids.get(task.id, []))
                f2p = [t for t in derived.fail_to_pass if t not in flaky]
                p2p = [t for t in derived.pass_to_pass if t not in flaky]
                kept = set(derived.fail_to_pass) | set(derived.pass_to_pass)
                dropped = sorted(set(derived.dropped) | (flaky & kept))
                computed[task.id] = {
                    "base_commit": task.repo.commit,
                    "fail_to_pass": f2p,
                    "pass_to_pass": p2p,
                    "dropped": dropped,
                }
                log(f"{task.id}: FAIL_TO_PASS {len(f2p)}, PASS_TO_PASS {len(p2p)}, dropped {len(dropped)}")
        finally:
            for tag in made_images:  # the provisional images, by tag: a final image may share their layers
                grader.images.engine.remove_image(tag)
            shutil.rmtree(staging, ignore_errors=True)
        if problems:
            raise SystemExit("cannot compute the test lists of:\n" + "\n".join(problems))
        return computed

    # --- the command line ---
    def main(self, argv: list[str] | None = None, *, pin: Callable[[str, list[str]], str] | None = None) -> int:
        parser = argparse.ArgumentParser(description=f"Build the {self.name} suite from its pinned releases.")
        parser.add_argument("--out", type=Path, default=self.out, help=f"where the suite goes (default: {self.out})")
        parser.add_argument("--no-images", action="store_true", help="write the task directories only")
        parser.add_argument("--force", action="store_true", help="rewrite the suite even when it is up to date")
        parser.add_argument(
            "--compute",
            action="store_true",
            help="run the hidden tests in containers and rewrite the lists of the named tasks (all by default)",
        )
        parser.add_argument("--runs", type=int, default=1, help="with --compute: runs that must agree")
        parser.add_argument("ids", nargs="*", help="task ids (with --compute), or `pin PACKAGE VERSION...`")
        args = parser.parse_args(argv)
        if args.ids[:1] == ["pin"]:
            m = self.manifest()
            registry = next(
                (m.registry(p) for p, d in m.projects.items() if d.get("package", d.get("pypi", p)) == args.ids[1]),
                m.suite.get("registry", "pypi"),
            )
            print((pin or pin_release)(registry, args.ids[1:]))
            return 0
        if shutil.which("git") is None:
            print("git is required", file=sys.stderr)
            return 1
        started = time.monotonic()
        if args.compute:
            lists = self.lists()
            lists.update(self.compute(args.ids or None, args.runs))
            known = {spec.id for spec in self.manifest().tasks}
            lists = {k: v for k, v in lists.items() if k in known}
            self.lists_path.write_text(json.dumps(dict(sorted(lists.items())), indent=1) + "\n")
        elif args.ids:
            parser.error("task ids are for --compute")
        m, written = self.build(args.out, force=args.force)
        print(
            f"{len(m.tasks)} tasks {'written to' if written else 'up to date in'} {args.out} "
            f"({time.monotonic() - started:.1f} s)"
        )
        if not args.no_images:
            t = time.monotonic()
            self.build_images(args.out)
            print(f"instance images ready ({time.monotonic() - t:.1f} s)")
        return 0


def grader_settings(tasks_dir: Path, **overrides: Any) -> Any:
    sys.path.insert(0, str(ROOT))
    from grader.config import get_settings

    return get_settings(tasks_dir=tasks_dir, environments_dir=ROOT / "environments", **overrides)


# --- pinning ----------------------------------------------------------------------------

PYPI_FILES = "https://files.pythonhosted.org/packages/"


def _json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=60) as response:
        return json.load(response)


def pin_release(registry: str, args: list[str]) -> str:
    """Manifest entries (`"VERSION" = {...}`) for releases of a package, from its registry:
    the archive's address, its sha256 (downloaded and hashed where the registry gives no
    sha256) and its publication time."""
    package, versions = args[0], args[1:]
    lines = []
    for version in versions:
        if registry == "pypi":
            data = _json(f"https://pypi.org/pypi/{package}/json")
            files = [f for f in data["releases"].get(version, []) if f["packagetype"] == "sdist"]
            if not files:
                raise SystemExit(f"{package} {version}: no sdist on PyPI")
            f = files[0]
            url = PYPI_FILES + f["url"].rsplit("packages/", 1)[1]
            sha, uploaded = f["digests"]["sha256"], f["upload_time_iso_8601"][:19]
        elif registry == "npm":
            data = _json(f"https://registry.npmjs.org/{package.replace('/', '%2F')}")  # a scope's / escaped
            url = data["versions"][version]["dist"]["tarball"]
            sha, uploaded = hashlib.sha256(download(url)).hexdigest(), data["time"][version][:19]
        elif registry == "crates":
            data = _json(f"https://crates.io/api/v1/crates/{package}/{version}")["version"]
            url = f"https://static.crates.io/crates/{package}/{package}-{version}.crate"
            sha, uploaded = data["checksum"], data["created_at"][:19]
        elif registry == "go":
            escaped = re.sub(r"[A-Z]", lambda c: "!" + c.group(0).lower(), package)
            info = _json(f"https://proxy.golang.org/{escaped}/@v/{version}.info")
            url = f"https://proxy.golang.org/{escaped}/@v/{version}.zip"
            sha, uploaded = hashlib.sha256(download(url)).hexdigest(), info["Time"][:19]
        else:
            raise SystemExit(f"pin: write {registry} releases by hand (url, sha256, uploaded)")
        lines.append(f'"{version}" = {{ url = "{url}", sha256 = "{sha}", uploaded = "{uploaded}" }}')
    return "\n".join(lines)


def suite(name: str) -> Suite:
    home = ROOT / "tasks" / name
    if not (home / "manifest.toml").is_file():
        raise SystemExit(f"no suite {name!r}: {home / 'manifest.toml'} does not exist")
    return Suite(name, home, ROOT / "build" / name, Path(__file__))


def suites() -> list[str]:
    """Every suite cut from releases: the directories of tasks/ with a manifest.toml."""
    return sorted(p.parent.name for p in (ROOT / "tasks").glob("*/manifest.toml"))


def _stdout(data: bytes) -> None:  # pragma: no cover - a convenience for `pin`
    sys.stdout.buffer.write(data)


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in suites():
        print(f"usage: releases.py SUITE [options]; suites: {', '.join(suites())}", file=sys.stderr)
        sys.exit(2)
    sys.exit(suite(sys.argv[1]).main(sys.argv[2:]))
