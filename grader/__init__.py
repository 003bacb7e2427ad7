"""grader: a task id and a unified diff in; PASS, FAIL, PATCH FAILED, TIMED OUT (or
ERROR, for faults of the grading machinery) out, with the evidence."""

from grader.config import Settings, get_settings
from grader.errors import GraderError, ImageError, SandboxError, TaskError, TaskNotFound
from grader.pipeline import GRADER_VERSION, Grader
from grader.tasks.loader import TaskSet
from grader.tasks.model import Task
from grader.verdict import Result, Verdict

__version__ = GRADER_VERSION
__all__ = [
    "GRADER_VERSION",
    "Grader",
    "GraderError",
    "ImageError",
    "Result",
    "SandboxError",
    "Settings",
    "Task",
    "TaskError",
    "TaskNotFound",
    "TaskSet",
    "Verdict",
    "get_settings",
]
