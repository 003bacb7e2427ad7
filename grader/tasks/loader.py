"""Find, load and write task files: every `*.yaml` / `*.yml` under the tasks directory
that has a top-level `id` and `check` is a task."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from grader.errors import TaskError, TaskNotFound
from grader.tasks.model import Task


def load_task_file(path: Path) -> Task:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise TaskError(f"{path}: cannot read: {exc}") from exc
    if not isinstance(data, dict):
        raise TaskError(f"{path}: a task file is a YAML mapping")
    try:
        return Task(**data, root=path.parent.resolve())
    except ValidationError as exc:
        raise TaskError(f"{path}: invalid task:\n{exc}") from exc


def task_heads(tasks_dir: Path) -> list[tuple[Path, dict]]:
    """The task files under `tasks_dir`, sorted, each with its YAML mapping (unchecked)."""
    files = []
    for pattern in ("*.yaml", "*.yml"):
        files += tasks_dir.rglob(pattern)
    out = []
    for path in sorted(files):
        try:
            head = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            head = None
        if isinstance(head, dict) and "id" in head and "check" in head:
            out.append((path, head))
    return out


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the instructions) as literal blocks, as a person writes them."""


_Dumper.add_representer(str, lambda dumper, s: dumper.represent_scalar(
    "tag:yaml.org,2002:str", s, style="|" if "\n" in s else None))


def dump_task_yaml(definition: dict) -> str:
    """A task definition as task.yaml text: keys in the given order, readable blocks."""
    return yaml.dump(definition, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=1 << 20)


class TaskSet:
    """All tasks under a directory, by id. Loading is strict: a broken task file or a
    duplicated id is an error, not a silently smaller suite."""

    def __init__(self, tasks_dir: Path):
        self.dir = Path(tasks_dir)
        if not self.dir.is_dir():
            raise TaskError(f"tasks directory {self.dir} does not exist")
        self._tasks: dict[str, Task] = {}
        for path, _ in task_heads(self.dir):
            task = load_task_file(path)
            if task.id in self._tasks:
                raise TaskError(f"task id {task.id!r} is defined twice ({path})")
            self._tasks[task.id] = task

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self):
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
