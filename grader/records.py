"""Files of JSON records as benchmarks and agents publish them: a JSON list, one JSON
object, or JSONL (one object a line). SWE-bench predictions (client.py) and benchmark
rows (importers/) are read here, so both name the line of a broken record the same
way."""

from __future__ import annotations

import json
from typing import Any

Located = list[tuple[str, Any]]  # (where, value): "FILE: item 3" in a list, "FILE:7" in JSONL


def parse_records(
    text: str, *, source: str, what: str, error: type[Exception] = ValueError
) -> Located | dict[str, Any]:
    """Each record of `text` with where it stands; a text that is one JSON object is
    returned whole, for the caller to read as one record or as records keyed by id.
    Raises `error`, naming the line, for text that is neither JSON nor JSONL."""
    stripped = text.strip()
    if not stripped:
        raise error(f"{source}: no {what} (the file is empty)")
    try:
        whole = json.loads(stripped)
    except json.JSONDecodeError as exc:
        if stripped[0] == "[":  # a list that does not parse is a broken JSON file, not JSONL
            line = exc.lineno + text[: len(text) - len(text.lstrip())].count("\n")
            raise error(f"{source}:{line}: not valid JSON: {exc.msg} (column {exc.colno})") from exc
        whole = None
    if isinstance(whole, list):
        return [(f"{source}: item {i}", v) for i, v in enumerate(whole)]
    if isinstance(whole, dict):
        return whole
    if whole is not None:
        raise error(f"{source}: expected a list or an object of {what}, got {type(whole).__name__}")
    out: Located = []
    for lineno, record in enumerate(text.splitlines(), 1):
        if not record.strip():
            continue
        try:
            out.append((f"{source}:{lineno}", json.loads(record)))
        except json.JSONDecodeError as exc:
            raise error(f"{source}:{lineno}: not valid JSON: {exc.msg} (column {exc.colno})") from exc
    return out
