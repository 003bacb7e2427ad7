"""The in-container half of a grading run (the supervisor and its runners): standard
library only, Python 3.9+, shipped into the container as one archive (grader/grading/
ship.py makes it) and run from there by path. On the host it is the package grader.box,
imported by the tests and by grader/grading/ for its records and paths; in the container
it is the package grader_box inside the archive. Its modules import each other relatively
so that both names work.
"""

from __future__ import annotations

import pkgutil


def resource(rel: str) -> bytes:
    """A file shipped in this package (a reporter a test process loads), read from the
    archive in the container or from the package on the host."""
    data = pkgutil.get_data(__name__, rel)
    if data is None:
        raise FileNotFoundError(rel)
    return data
