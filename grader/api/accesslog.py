"""gunicorn's access log with no query string in it: a client that sends its key as
`?api_key=` or `?access_token=` is refused, but the line gunicorn writes would keep the key
for whoever reads the logs. Every query value (and the Referer's) is written as
`<redacted>`, and the headers that carry credentials are never written; parameter names stay, so
a line still says which options a request used."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, quote

from gunicorn.glogging import Logger

if TYPE_CHECKING:
    from datetime import timedelta

    from gunicorn._types import _EnvironType
    from gunicorn.glogging import _AtomsDict
    from gunicorn.http import Request
    from gunicorn.http.wsgi import Response

REDACTED = "<redacted>"
_SECRET_HEADERS = ("authorization", "cookie", "proxy-authorization", "x-api-key")


def redact_query(query: str) -> str:
    """`a=1&api_key=grk_x` -> `a=<redacted>&api_key=<redacted>`; a name that is not a
    plain word (a key sent as a bare `?grk_...`) goes too."""
    if not query:
        return query
    out = []
    for name, _ in parse_qsl(query, keep_blank_values=True):
        plain = (
            name.isascii()
            and name.replace("_", "").replace("-", "").isalnum()
            and len(name) <= 32
            and not name.startswith("grk_")
        )
        out.append(f"{quote(name) if plain else REDACTED}={REDACTED}")
    return "&".join(out) or REDACTED


def redact_uri(uri: str) -> str:
    path, sep, query = uri.partition("?")
    return path + sep + redact_query(query) if sep else path


class RedactingLogger(Logger):
    """gunicorn's Logger whose access-log atoms carry no query value and no credential header."""

    def atoms(self, resp: Response, req: Request, environ: _EnvironType, request_time: timedelta) -> _AtomsDict:
        atoms = super().atoms(resp, req, environ, request_time)
        raw = environ.get("RAW_URI", "")
        atoms["r"] = f"{environ['REQUEST_METHOD']} {redact_uri(raw)} {environ['SERVER_PROTOCOL']}"
        atoms["q"] = redact_query(environ.get("QUERY_STRING") or "")
        if atoms.get("f", "-") != "-":
            atoms["f"] = redact_uri(atoms["f"])
        for key in list(atoms):
            low = key.lower()
            # the per-request keys ({header}i, {variable}e) are more than the stub's TypedDict names
            if low in ("{raw_uri}e", "{query_string}e", "{request_uri}e"):
                atoms[key] = redact_uri(str(atoms[key])) if low != "{query_string}e" else redact_query(str(atoms[key]))  # type: ignore[literal-required]
            elif low == "{referer}i" or low == "{http_referer}e":
                atoms[key] = redact_uri(str(atoms[key]))  # type: ignore[literal-required]
            elif (
                low.endswith("}i")
                and low[1:-2] in _SECRET_HEADERS
                or low.endswith("}e")
                and low[1:-2].removeprefix("http_").replace("_", "-") in _SECRET_HEADERS
            ):
                atoms[key] = REDACTED  # type: ignore[literal-required]
        return atoms
