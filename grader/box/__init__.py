"""The in-container half of a grading run (the supervisor and its runners): standard
library only, Python 3.9+, shipped into the container as one archive (grader/grading/
ship.py makes it) and run from there by path. On the host it is the package grader.box,
imported by the tests and by grader/grading/ for its records and paths; in the container
it is the package grader_box inside the archive. Its modules import each other relatively
so that both names work.
"""

from __future__ import annotations


def own_archive() -> str | None:
    """The archive this package was imported from (zipimport's loader knows its zip), or
    None on the host, where it is imported from disk."""
    return getattr(getattr(__spec__, "loader", None), "archive", None)


def resource_names(directory: str) -> list[str]:
    """The files under a directory of this package (relative to it), in the archive in the
    container or on disk on the host."""
    import os
    import zipfile

    archive = own_archive()
    base = os.path.dirname(__file__)
    if archive:
        prefix = os.path.relpath(os.path.join(base, directory), archive).replace(os.sep, "/") + "/"
        with zipfile.ZipFile(archive) as z:
            return sorted(n[len(prefix) :] for n in z.namelist() if n.startswith(prefix) and not n.endswith("/"))
    root = os.path.join(base, directory)
    out = []
    for here, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            if not name.endswith(".pyc"):
                out.append(os.path.relpath(os.path.join(here, name), root).replace(os.sep, "/"))
    return sorted(out)


def resource(rel: str) -> bytes:
    """A file shipped in this package (a reporter a test process loads), read from the
    archive in the container or from the package on the host."""
    import pkgutil  # here: a run that loads no reporter need not import it

    data = pkgutil.get_data(__name__, rel)
    if data is None:
        raise FileNotFoundError(rel)
    return data
