"""grader: a task id and a unified diff in; PASS, FAIL, PATCH FAILED, TIMED OUT (or
ERROR, for faults of the grading machinery) out, with the evidence.

The public names are imported on first use (PEP 562): Python runs this module before
any module of the package, and `import grader.client` on a team's machine must not load
the grading machinery (the Docker SDK, by way of the pipeline)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grader.version import GRADER_VERSION

if TYPE_CHECKING:
    from grader.config import Settings, get_settings
    from grader.errors import GraderError, ImageError, SandboxError, TaskError, TaskNotFound
    from grader.pipeline import Grader
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


def __getattr__(name: str) -> Any:
    if name in ("Settings", "get_settings"):
        from grader import config

        value = getattr(config, name)
    elif name in ("GraderError", "ImageError", "SandboxError", "TaskError", "TaskNotFound"):
        from grader import errors

        value = getattr(errors, name)
    elif name == "Grader":
        from grader import pipeline

        value = getattr(pipeline, name)
    elif name == "TaskSet":
        from grader.tasks import loader

        value = getattr(loader, name)
    elif name == "Task":
        from grader.tasks import model

        value = getattr(model, name)
    elif name in ("Result", "Verdict"):
        from grader import verdict

        value = getattr(verdict, name)
    else:
        raise AttributeError(f"module 'grader' has no attribute {name!r}")
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
