"""Tasks: the model, the loader, host-side preparation and validation."""

from grader.tasks.loader import TaskSet, load_task_file
from grader.tasks.model import Task

__all__ = ["Task", "TaskSet", "load_task_file"]
