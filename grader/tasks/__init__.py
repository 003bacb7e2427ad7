"""Tasks: the model, the loader and host-side preparation. Validating a task grades it, so
it sits above the pipeline (grader/validate.py), as do the importers (grader/importers/)."""

from grader.tasks.loader import TaskSet, load_task_file
from grader.tasks.model import Task

__all__ = ["Task", "TaskSet", "load_task_file"]
