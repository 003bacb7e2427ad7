"""What every importer shares: reading the input rows, finding a repository (a clone in
--repo-dir, or the upstream URL fetched once into the cache), packing the history the
tasks need into a bundle, picking an environment, composing the install step, and the
`Draft`: a task before it is written.

Converters (swebench.py, resq.py, gitgoodbench.py) are pure over their rows except for
what they must ask git (does the base commit exist, does it have a setup.py, what did the
merge commit resolve); suite.py writes, checks, validates and keeps or rejects.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shlex
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, overload

from grader.errors import TaskError
from grader.records import parse_records
from grader.tasks.model import SHA_RE, TASK_ID_RE
from grader.tasks.prepare import git

GITHUB_URL = "https://github.com/{repo}.git"
# `git fetch` of a bare sha from a local repository: the same upload-pack the grader uses.
UPLOAD_PACK = "git -c uploadpack.allowAnySHA1InWant=true upload-pack"
REQUIREMENTS_FILE = "/tmp/grader-requirements.txt"
BUNDLE_REF = "refs/grader/"


class DatasetError(TaskError):
    """Raised when an input row cannot become a task: a missing or malformed field, no
    environment for it, a commit its repository lacks. The message names the instance."""


# --- rows ---------------------------------------------------------------------------------
def read_rows(path: Path) -> list[dict[str, Any]]:
    """Rows from a JSON list, a single JSON object, or JSONL (one object a line)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: cannot read: {exc}") from exc
    return parse_rows(text, source=str(path))


def parse_rows(text: str, *, source: str = "<input>") -> list[dict[str, Any]]:
    records = parse_records(text, source=source, what="rows", error=DatasetError)
    if isinstance(records, dict):
        records = [(f"{source}:1", records)]
    for where, row in records:
        if not isinstance(row, dict):
            raise DatasetError(f"{where}: expected a JSON object, got {type(row).__name__}")
    return [row for _, row in records]


@overload
def text_field(row: dict[str, Any], name: str, where: str, *, required: Literal[True] = True) -> str: ...
@overload
def text_field(row: dict[str, Any], name: str, where: str, *, required: bool) -> str | None: ...
def text_field(row: dict[str, Any], name: str, where: str, *, required: bool = True) -> str | None:
    value = row.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise DatasetError(f"{where}: the field {name!r} is missing or empty")
        return None
    if not isinstance(value, str):
        raise DatasetError(f"{where}: the field {name!r} must be a string, not {type(value).__name__}")
    return value


def sha_field(row: dict[str, Any], name: str, where: str) -> str:
    return commit_sha(text_field(row, name, where), name, where)


def commit_sha(value: Any, name: str, where: str) -> str:
    """A full commit sha, lower case; anything else is the row's error."""
    sha = value.strip().lower() if isinstance(value, str) else ""
    if not SHA_RE.match(sha):
        raise DatasetError(f"{where}: {name} {value!r} is not a full 40-character commit sha")
    return sha


def string_list(value: Any, name: str, where: str) -> list[str]:
    """A list of strings, or one JSON-encoded in a string (as SWE-bench publishes its
    FAIL_TO_PASS and PASS_TO_PASS)."""
    if value is None:
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{where}: {name} is a string but not a JSON list: {exc.msg}") from exc
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DatasetError(f"{where}: {name} must be a list of strings")
    return list(value)


def date_field(value: Any, name: str, where: str) -> dt.date | None:
    """A date from an ISO date or timestamp ('2023-05-17T12:34:56Z', '2023-05-17 12:34')."""
    if value in (None, ""):
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):  # milliseconds since the epoch (datasets)
        return dt.datetime.fromtimestamp(value / 1000 if value > 1e11 else value, tz=dt.UTC).date()
    try:
        return dt.date.fromisoformat(str(value).strip()[:10])
    except ValueError:
        raise DatasetError(f"{where}: {name} {value!r} is not an ISO date") from None


def task_id(raw: str, where: str) -> str:
    """The task id for an instance id: characters a task id may not hold become '-'."""
    tid = re.sub(r"[^A-Za-z0-9._-]", "-", raw.strip())
    if not TASK_ID_RE.match(tid):
        raise DatasetError(f"{where}: {raw!r} cannot be made a task id (letters, digits, '.', '_', '-'; 128 at most)")
    return tid


def repo_name_from_url(url: str, where: str) -> str:
    """'owner/name' from https://host/owner/name(.git), git@host:owner/name.git or a path."""
    m = re.search(r"([^/:]+)/([^/]+?)(?:\.git)?/?$", url.strip())
    if not m:
        raise DatasetError(f"{where}: cannot tell owner/name from the repository URL {url!r}")
    return f"{m.group(1)}/{m.group(2)}"


# --- environments and the install step ------------------------------------------------------
def environment_for(python: str, environments_dir: Path, where: str) -> str:
    """The environment directory for a Python version: '3.11', 'python3.11', '3.11.4' and
    'python 3.11' all mean environments/python-3.11."""
    m = re.fullmatch(r"(?:python)?\s*-?\s*(\d+)\.(\d+)(?:\.\d+)?", str(python).strip().lower())
    if not m:
        raise DatasetError(f"{where}: {python!r} is not a Python version (like 3.11)")
    name = f"python-{m.group(1)}.{m.group(2)}"
    if (environments_dir / name / "Dockerfile").is_file():
        return name
    available = sorted(p.name for p in environments_dir.glob("python-*") if (p / "Dockerfile").is_file())
    raise DatasetError(
        f"{where}: Python {m.group(1)}.{m.group(2)} has no environment "
        f"(there is no {environments_dir / name}; available: {', '.join(available) or 'none'})"
    )


# A row's language, as benchmarks spell it, to the prefix of its environments' names.
LANGUAGES = {
    "python": "python",
    "py": "python",
    "javascript": "node",
    "js": "node",
    "typescript": "node",
    "ts": "node",
    "node": "node",
    "nodejs": "node",
    "go": "go",
    "golang": "go",
    "rust": "rust",
    "java": "java",
    "kotlin": "java",
    "c": "c",
    "c++": "c",
    "cpp": "c",
}


def environment_for_language(language: str, version: str | None, environments_dir: Path, where: str) -> str:
    """The environment for a row's language (and version, when it gives one): 'JavaScript'
    means environments/node-*, 'go' with '1.24' environments/go-1.24, 'python' with
    '3.9' environments/python-3.9. Without a version the newest environment of the
    language is taken."""
    key = language.strip().lower()
    if key not in LANGUAGES:
        raise DatasetError(
            f"{where}: language {language!r} has no environment here (known: {', '.join(sorted(LANGUAGES))})"
        )
    prefix = LANGUAGES[key]
    if prefix == "python":
        return environment_for(version or "3.11", environments_dir, where)
    have = []
    if environments_dir.is_dir():
        pattern = re.compile(re.escape(prefix) + r"(-[0-9.]+)?")
        have = sorted(
            (p.name for p in environments_dir.iterdir() if (p / "Dockerfile").is_file() and pattern.fullmatch(p.name)),
            key=lambda n: [int(x) for x in re.findall(r"[0-9]+", n)],
        )
    if version:
        # the environment's version and the row's agree as far as both go: node-20 serves
        # 'v20.11.1', go-1.24 serves '1.24.4' but not '1.19'
        given = [int(x) for x in re.findall(r"[0-9]+", version)]
        if given:
            for name in reversed(have):
                own = [int(x) for x in re.findall(r"[0-9]+", name)]
                if own and (own[: len(given)] == given[: len(own)]):
                    return name
        raise DatasetError(f"{where}: {language} {version} has no environment (available: {', '.join(have) or 'none'})")
    if not have:
        raise DatasetError(f"{where}: {language} has no environment in {environments_dir}")
    return have[-1]


def requirement_lines(text: str) -> list[str]:
    """The lines of a requirements file that say something (no blanks, no comments)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out


def install_step(requirements: list[str], install: str | None, where: str) -> str | None:
    """One shell command for the instance image build: the requirements written to a file
    and pip-installed (so option lines such as `-e .` keep their meaning), then `install`.
    It becomes one Dockerfile RUN line, so it must be one line."""
    parts = []
    if requirements:
        for r in requirements:
            if "\n" in r or "\r" in r:
                raise DatasetError(f"{where}: a requirement spans lines: {r!r}")
        quoted = " ".join(shlex.quote(r) for r in requirements)
        parts.append(
            f"printf '%s\\n' {quoted} > {REQUIREMENTS_FILE} && pip install -r {REQUIREMENTS_FILE}"
            f" && rm {REQUIREMENTS_FILE}"
        )
    if install and install.strip():
        if "\n" in install.strip() or "\r" in install:
            raise DatasetError(
                f"{where}: the install command must be one line (it becomes a Dockerfile RUN "
                f"instruction); join the steps with &&"
            )
        parts.append(install.strip())
    return " && ".join(parts) or None


# --- repositories ------------------------------------------------------------------------------
def repo_key(name: str) -> str:
    """'owner/name' as a file name: SWE-bench's own convention, owner__name."""
    return name.replace("/", "__")


class Repositories:
    """Where the importer reads git history from. For 'owner/name': the clone
    DIR/owner__name (or DIR/name) in `repo_dir` when there is one, otherwise the
    repository's URL cloned once into the cache. A user's clone is only read, never
    fetched into or changed."""

    def __init__(self, repo_dir: Path | None, cache_dir: Path, url_template: str = GITHUB_URL):
        self.repo_dir = Path(repo_dir) if repo_dir else None
        self.cache_dir = Path(cache_dir)
        self.url_template = url_template
        self._urls: dict[str, str] = {}
        self._local: dict[str, Path] = {}

    def url(self, name: str) -> str:
        return self._urls.get(name) or self.url_template.format(repo=name, key=repo_key(name))

    def set_url(self, name: str, url: str) -> None:
        """A row that names its URL (RES-Q's repo_url) overrides the template."""
        self._urls[name] = url

    def clone_dir(self, name: str) -> Path | None:
        if self.repo_dir is None:
            return None
        for candidate in (self.repo_dir / repo_key(name), self.repo_dir / name.split("/")[-1]):
            if candidate.is_dir() and git("rev-parse", "--git-dir", cwd=candidate, check=False).returncode == 0:
                return candidate.resolve()
        return None

    def local(self, name: str, where: str) -> Path:
        """A local git directory holding the repository's history."""
        if name in self._local:
            return self._local[name]
        path = self.clone_dir(name)
        if path is None:
            path = self.cache_dir / "import-clones" / f"{repo_key(name)}.git"
            url = self.url(name)
            if not path.exists():
                tmp = path.with_suffix(".tmp")
                shutil.rmtree(tmp, ignore_errors=True)
                tmp.parent.mkdir(parents=True, exist_ok=True)
                where_from = f"no clone in {self.repo_dir}, and " if self.repo_dir else ""
                cloned = git("clone", "--quiet", "--mirror", url, str(tmp), check=False)
                if cloned.returncode:
                    raise DatasetError(
                        f"{where}: repository {name}: {where_from}cloning {url} failed: "
                        f"{cloned.stderr.decode(errors='replace').strip()}"
                    )
                tmp.rename(path)
        self._local[name] = path
        return path

    def has_commit(self, name: str, sha: str, where: str) -> bool:
        return git("cat-file", "-e", f"{sha}^{{commit}}", cwd=self.local(name, where), check=False).returncode == 0

    def require_commit(self, name: str, sha: str, where: str) -> None:
        if self.has_commit(name, sha, where):
            return
        path = self.local(name, where)
        if path == self.clone_dir(name):
            raise DatasetError(
                f"{where}: commit {sha} is not in the clone {path}; update it (git fetch) or "
                f"move it away to clone {self.url(name)}"
            )
        fetched = git("fetch", "--quiet", self.url(name), "+refs/*:refs/*", cwd=path, check=False)
        if fetched.returncode or not self.has_commit(name, sha, where):
            raise DatasetError(f"{where}: commit {sha} is not in {self.url(name)}")

    def has_file(self, name: str, sha: str, rel: str, where: str) -> bool:
        return git("cat-file", "-e", f"{sha}:{rel}", cwd=self.local(name, where), check=False).returncode == 0

    def show(self, name: str, sha: str, rel: str, where: str) -> bytes | None:
        proc = git("show", f"{sha}:{rel}", cwd=self.local(name, where), check=False)
        return proc.stdout if proc.returncode == 0 else None

    def parents(self, name: str, sha: str, where: str) -> list[str]:
        out = git("rev-list", "--parents", "-n", "1", sha, cwd=self.local(name, where)).stdout.decode().split()
        return out[1:]

    def commit_date(self, name: str, sha: str, where: str) -> dt.date:
        out = git("show", "-s", "--format=%cI", sha, cwd=self.local(name, where)).stdout.decode().strip()
        return dt.date.fromisoformat(out[:10])

    def write_bundle(self, name: str, commits: list[str], dest: Path, previous: Path | None = None) -> bool:
        """A bundle holding the history of `commits` (each under refs/grader/<sha>) and of
        every commit the `previous` bundle held, so tasks already written against it keep
        working. When `previous` already holds every commit it is copied unchanged (same
        bytes: the tasks that use it keep their definition hash). Returns whether the
        bundle is new."""
        dest.parent.mkdir(parents=True, exist_ok=True)
        held = bundle_commits(previous) if previous and previous.is_file() else set()
        if previous and previous.is_file() and set(commits) <= held:
            shutil.copyfile(previous, dest)
            return False
        with tempfile.TemporaryDirectory(prefix="grader-bundle-") as tmp:
            bare = Path(tmp) / "repo.git"
            git("init", "--quiet", "--bare", str(bare))
            if held:
                git("fetch", "--quiet", "--no-tags", str(previous), f"+{BUNDLE_REF}*:{BUNDLE_REF}*", cwd=bare)
            wanted = sorted(set(commits) - held)
            if wanted:
                git(
                    "fetch",
                    "--quiet",
                    "--no-tags",
                    f"--upload-pack={UPLOAD_PACK}",
                    str(self.local(name, name)),
                    *[f"{c}:{BUNDLE_REF}{c}" for c in wanted],
                    cwd=bare,
                )
            git("-c", "pack.threads=1", "bundle", "create", "--quiet", str(dest), "--all", cwd=bare)
        return True


def bundle_commits(bundle: Path) -> set[str]:
    """The commits a bundle written by `write_bundle` names under refs/grader/."""
    proc = git("bundle", "list-heads", str(bundle), check=False)
    out = set()
    for line in proc.stdout.decode().splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].startswith(BUNDLE_REF):
            out.add(parts[0])
    return out


# --- drafts --------------------------------------------------------------------------------------
@dataclass
class Context:
    """What a converter needs besides its rows."""

    suite: str
    repos: Repositories
    environments_dir: Path
    cache_dir: Path
    timeout: float | None = None
    derive_lists: bool = False  # rows without FAIL_TO_PASS become drafts whose lists are derived by grading


@dataclass
class Draft:
    """A task before it is written: its definition (task.yaml without the repository
    source, which the suite writer adds: a bundle or the URL), the files beside it, and
    the commits its repository source must hold."""

    id: str
    source_id: str
    repo_name: str
    commit: str
    definition: dict[str, Any]
    files: dict[str, bytes] = field(default_factory=dict)
    merge: str | None = None
    extra_commits: list[str] = field(default_factory=list)  # e.g. the merge commit an exact match reads
    notes: list[str] = field(default_factory=list)
    derive_lists: bool = False  # its FAIL_TO_PASS / PASS_TO_PASS are to be derived by running its tests

    @property
    def commits(self) -> list[str]:
        return [c for c in (self.commit, self.merge, *self.extra_commits) if c]


def convert_rows(
    rows: list[dict[str, Any]], convert_row: Callable[[dict[str, Any]], Draft], id_key: str
) -> tuple[list[Draft], list[tuple[str, str]]]:
    """Drafts for the rows that convert, and (instance, why) for those that do not. A
    git failure on one row (a merge that cannot be made) is that row's failure too."""
    drafts, failed = [], []
    for i, row in enumerate(rows):
        try:
            drafts.append(convert_row(row))
        except TaskError as exc:
            failed.append((str(row.get(id_key) or f"row {i + 1}"), str(exc)))
    return drafts, failed


def limits(ctx: Context) -> dict[str, Any]:
    return {"timeout": ctx.timeout} if ctx.timeout else {}


def ordered_definition(d: dict[str, Any]) -> dict[str, Any]:
    """task.yaml's keys in the order docs/tasks.md shows them; empty values left out."""
    order = [
        "id",
        "instruction",
        "prompts",
        "metadata",
        "repo",
        "environment",
        "install",
        "limits",
        "gold_patch",
        "check",
    ]
    out = {k: d[k] for k in order if d.get(k) not in (None, {}, [])}
    out.update({k: v for k, v in d.items() if k not in out and v not in (None, {}, [])})
    return out
