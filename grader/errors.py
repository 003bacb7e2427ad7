"""Faults of the grading machinery. A failure of the code under test is data (a verdict);
a failure of the measuring instrument is one of these exceptions, and the pipeline turns
it into the ERROR verdict, which is retried and never charged to the submitter.

    GraderError
    ├── TaskError             a task definition or its files are unusable
    │   └── TaskNotFound
    ├── ImageError            an image could not be found or built
    │   └── ImageUnverified   the image under a task's tag is not the one its hash names
    ├── SandboxError          the container runtime failed (Docker down, API error)
    ├── ConfigError           the settings cannot run the service (production without secrets)
    └── StoreError            the database or the queue cannot be reached

The REST API has its own error, `grader.api.errors.ApiError`, rendered as JSON: that is a
fault of the request, not of the machinery.
"""


class GraderError(Exception):
    """Raised when the grading machinery itself fails."""


class TaskError(GraderError):
    """Raised when a task definition or one of its files is invalid or missing."""


class TaskNotFound(TaskError):
    """Raised when no task has the requested id."""


class ImageError(GraderError):
    """Raised when an environment, base or instance image is missing and cannot be built."""


class ImageUnverified(ImageError):
    """Raised when the image under a task's instance tag cannot be verified by hash to be
    that task's instance image, so nothing may be graded on it."""

    def __init__(self, message: str, environment: str):
        super().__init__(message)
        self.environment = environment


class SandboxError(GraderError):
    """Raised when the sandbox cannot run a container (engine unreachable, API error, bad output)."""


class ConfigError(GraderError):
    """Raised when the effective settings cannot run the service (missing production secrets)."""


class StoreError(GraderError):
    """Raised when the database or Redis cannot be reached or refuses an operation."""
