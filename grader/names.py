"""What a run may be called.

A run's name is the `run_id` its team submits with, and one segment of a URL path
(/v1/runs/<name>, /runs/<name>): a team reaches its run by name as well as by its public
id. So a name is

- NFC-normalised (Unicode's composed form): `café` typed with a combining accent and
  `café` typed with the composed letter are one run, not two that look alike;
- letters, digits and marks of any script, and `- _ . ~ + @ : = ,`: nothing a URL path
  cannot carry as it is (`/` would end the segment, `?` and `#` end the path, `%` and a
  space are read as encodings, `\\` is a `/` to some clients), and not `.` or `..`;
- not shaped like a run's public id (16 hex digits), so that a name never shadows
  another team's run (and a team's own name wins over an id for that team besides:
  grader/store/runs.py: find).
"""

from __future__ import annotations

import re
import unicodedata

MAX_LENGTH = 200
PUNCTUATION = "-_.~+@:=,"
ID_SHAPE = re.compile(r"^[0-9a-f]{16}$")


class NameRefused(ValueError):
    """Raised when a run name cannot be used; the message says which rule it breaks."""


def normal(raw: str) -> str:
    """`raw` in Unicode's composed form, as names are stored and looked up."""
    return unicodedata.normalize("NFC", raw)


def run_name(raw: str) -> str:
    """The name `raw` stands for (NFC), or NameRefused saying why it cannot be one."""
    name = normal(raw)
    if not 1 <= len(name) <= MAX_LENGTH:
        raise NameRefused(f"a run name is 1 to {MAX_LENGTH} characters")
    if name in (".", ".."):
        raise NameRefused(f"a run name cannot be {name!r} (a URL path reads it as a step up or in place)")
    bad = sorted({c for c in name if not (unicodedata.category(c)[0] in "LNM" or c in PUNCTUATION)})
    if bad:
        shown = ", ".join(repr(c) for c in bad[:5])
        raise NameRefused(
            f"a run name holds letters, digits and {' '.join(PUNCTUATION)} only (it is one segment of a URL "
            f"path); not {shown}"
        )
    if ID_SHAPE.match(name):
        raise NameRefused("a run name cannot look like a run's id (16 hex digits); add a letter past f, or a dash")
    return name
