"""Find, load and write task files: every `*.yaml` / `*.yml` under the tasks directory
that has a top-level `id` and `check` is a task.

A `suite.yaml` in a directory of the tree gives `defaults:` for every task file beneath
it: the suite says once what its tasks share (the feedback policy, say), and the task
files stay as the importers and builds write them. Defaults are merged into a task's
data before the model sees it, so the definition hash covers them like any other key.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import yaml
from pydantic import TypeAdapter, ValidationError

from grader.errors import TaskError, TaskNotFound
from grader.tasks.model import Task

# libyaml's parser where PyYAML was built with it (PyPI's wheels are): the same safe
# loading, several times faster than the pure-Python one, which made a process's first
# load of a suite of 2,000 tasks take 5 to 40 s.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _parse(text: str) -> Any:
    return yaml.load(text, Loader=_LOADER)  # noqa: S506  # a safe loader, C or Python


SUITE_FILE = "suite.yaml"
# The task keys a suite may default: what tasks of one suite share. Another key is an
# error, not ignored, as in a task file.
SUITE_DEFAULTS = ("feedback", "protect", "limits", "environment", "metadata")


def _merge(default: Any, given: Any) -> Any:
    """`given` over `default`: mappings key by key, all the way down; anything else whole
    (a task's own list replaces the suite's)."""
    if isinstance(default, dict) and isinstance(given, dict):
        out = dict(default)
        for key, value in given.items():
            out[key] = _merge(default[key], value) if key in default else value
        return out
    return given


def read_suite_file(path: Path) -> dict[str, Any]:
    """The `defaults:` of one suite.yaml, each checked against the task model's type."""
    try:
        data = _parse(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise TaskError(f"{path}: cannot read: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise TaskError(f"{path}: a suite file is a YAML mapping with one key, defaults")
    if unknown := sorted(set(data) - {"defaults", "serve_together"}):
        raise TaskError(f"{path}: unknown key(s) {unknown}; a suite file holds defaults and serve_together")
    together = data.get("serve_together")
    if (
        together is not None
        and together != "all"
        and not (
            isinstance(together, list)
            and all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in together)
        )
    ):
        raise TaskError(f"{path}: serve_together is `all` or a list of [task id, task id] pairs")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise TaskError(f"{path}: defaults is a mapping of task keys to values")
    if unknown := sorted(set(defaults) - set(SUITE_DEFAULTS)):
        raise TaskError(f"{path}: defaults has unknown key(s) {unknown}; a suite can default {list(SUITE_DEFAULTS)}")
    for key, value in defaults.items():
        try:
            # every field of the model is annotated: the annotation is never None
            TypeAdapter(cast("type[Any]", Task.model_fields[key].annotation)).validate_python(value)
        except ValidationError as exc:
            raise TaskError(f"{path}: invalid default for {key}:\n{exc}") from exc
    return defaults


def serve_together(top: Path) -> list[list[str]] | str:
    """What the suite files under `top` say the host chose to serve side by side though
    one task's public material answers the other (grader/tasks/leaks.py): `all`, or the
    pairs, from every suite.yaml of the tree."""
    pairs: list[list[str]] = []
    for path in sorted(Path(top).rglob(SUITE_FILE)):
        try:
            data = _parse(path.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError):
            continue
        together = data.get("serve_together") if isinstance(data, dict) else None
        if together == "all":
            return "all"
        if isinstance(together, list):
            pairs += [list(p) for p in together if isinstance(p, list) and len(p) == 2]
    return pairs


class SuiteDefaults:
    """The defaults that apply in each directory of a tree: every suite.yaml from `top`
    down to the directory, the nearer one winning key by key. Each file is read once.

    Directories are taken as the tree names them, links unresolved: a suite reached
    through a symlink (`tasks/realworld -> ../build/realworld`) still gets the defaults
    of the suite files above the link."""

    def __init__(self, top: Path):
        self.top = Path(os.path.abspath(top))
        self._dirs: dict[Path, dict[str, Any]] = {}

    def defaults(self, directory: Path) -> dict[str, Any]:
        directory = Path(os.path.abspath(directory))
        if directory not in self._dirs:
            above = directory.parent
            inherited = (
                self.defaults(above)
                if directory != self.top and above != directory and directory.is_relative_to(self.top)
                else {}
            )
            own = directory / SUITE_FILE
            self._dirs[directory] = _merge(inherited, read_suite_file(own)) if own.is_file() else inherited
        return self._dirs[directory]


def load_task_file(path: Path, *, top: Path | None = None, suites: SuiteDefaults | None = None) -> Task:
    """The task in `path`, with the defaults of every suite.yaml from `top` (default: the
    file's own directory) down to the file's directory."""
    try:
        data = _parse(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise TaskError(f"{path}: cannot read: {exc}") from exc
    if not isinstance(data, dict):
        raise TaskError(f"{path}: a task file is a YAML mapping")
    suites = suites or SuiteDefaults(top if top is not None else path.parent)
    data = _merge(suites.defaults(path.parent), data)
    try:
        return Task(**data, root=path.parent.resolve())
    except ValidationError as exc:
        raise TaskError(f"{path}: invalid task:\n{exc}") from exc


def _yaml_files(top: Path) -> list[Path]:
    """Every *.yaml / *.yml under `top`, following directory symlinks (a suite built
    elsewhere and linked into the tasks directory is part of it; Path.rglob would skip
    it), each real directory once, so a link back up the tree cannot loop."""
    seen: set[str] = set()
    files = []
    for root, dirs, names in os.walk(top, followlinks=True):
        real = os.path.realpath(root)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        dirs.sort()
        files += [Path(root) / n for n in names if n.endswith((".yaml", ".yml"))]
    return files


def task_heads(tasks_dir: Path) -> list[tuple[Path, dict[str, Any]]]:
    """The task files under `tasks_dir`, sorted, each with its YAML mapping (unchecked)."""
    files = _yaml_files(tasks_dir)
    out = []
    for path in sorted(files):
        if path.name == SUITE_FILE:
            continue
        try:
            head = _parse(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            head = None
        if isinstance(head, dict) and "id" in head and "check" in head:
            out.append((path, head))
    return out


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the instructions) as literal blocks, as a person writes them."""


_Dumper.add_representer(
    str, lambda dumper, s: dumper.represent_scalar("tag:yaml.org,2002:str", s, style="|" if "\n" in s else None)
)


def dump_task_yaml(definition: dict[str, Any]) -> str:
    """A task definition as task.yaml text: keys in the given order, readable blocks."""
    return yaml.dump(definition, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=1 << 20)


class TasksRefused(TaskError):
    """Raised when a reload finds invalid task files; `refused` maps each to its reason."""

    def __init__(self, message: str, refused: dict[str, str]):
        super().__init__(message)
        self.refused = refused


class TaskSet:
    """All tasks under a directory, by id. Loading is strict by default (`grader tasks
    validate`, the importers): a broken task file or a duplicated id is an error, not a
    silently smaller suite. The service loads leniently (`strict=False`): a broken file
    is refused with its reason in `refused` and the valid tasks keep serving, so one bad
    file cannot turn every request into a 500; `/readyz` and `grader tasks list` name it."""

    def __init__(self, tasks_dir: Path, *, strict: bool = True):
        self.dir = Path(tasks_dir)
        if not self.dir.is_dir():
            where = "" if self.dir.is_absolute() else f" (in {Path.cwd()})"
            raise TaskError(
                f"tasks directory {self.dir}{where} does not exist: point GRADER_TASKS_DIR or "
                f"--tasks-dir at the directory of task files"
            )
        self._tasks: dict[str, Task] = {}
        self.refused: dict[str, str] = {}  # a refused file, relative to the directory -> why
        suites = SuiteDefaults(self.dir)
        for path, _ in task_heads(self.dir):
            try:
                task = load_task_file(path, suites=suites)
                if task.id in self._tasks:
                    raise TaskError(f"task id {task.id!r} is defined twice ({path})")
            except TaskError as exc:
                if strict:
                    raise
                self.refused[self._relative(path)] = str(exc).replace(f"{path}: ", "", 1)
                continue
            self._tasks[task.id] = task

    def refuse(self, task_id: str, why: str) -> None:
        """Stop serving a loaded task, saying why (as for a broken file)."""
        task = self._tasks.pop(task_id, None)
        if task is not None:
            self.refused[f"{self._relative(task.root)} ({task_id})"] = why

    def _relative(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.dir))
        except ValueError:
            return path.name

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self) -> Iterator[Task]:
        return iter(self._tasks.values())

    def ids(self) -> list[str]:
        return sorted(self._tasks)

    def get(self, task_id: str) -> Task:
        try:
            return self._tasks[task_id]
        except KeyError:
            raise TaskNotFound(f"no task {task_id!r} in {self.dir}") from None

    def select(self, ids: list[str] | None) -> list[Task]:
        if not ids:
            return [self._tasks[i] for i in self.ids()]
        return [self.get(i) for i in ids]
