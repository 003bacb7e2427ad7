"""The grader's version string, at the bottom of the package: results carry it in their
provenance, the cache and the gold-patch answers key on it, and the API quotes it, none
of them by way of the pipeline."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    GRADER_VERSION = version("grader")
except PackageNotFoundError:  # running from a source tree
    GRADER_VERSION = "0+source"

__all__ = ["GRADER_VERSION"]
