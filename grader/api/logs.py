"""/v1/runs/<run>/logs: every submission of a run in one archive (.tar.gz or .zip), as
SWE-bench's harness leaves its logs: a folder per task and attempt holding the patch that
was submitted, the test output and the result.

Only the run's own team (or the host) may download it, as with its predictions: a
public run shows its figures, never its patches. What the archive says of each result is
what GET /v1/submissions/<id> says to the same key (the task's feedback policy, secrets
masked): a test output the policy withholds is not in it, and index.json says so.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import re
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

from flask import Blueprint, Response, current_app, g, request, send_file
from sqlalchemy import select

from grader.api import auth
from grader.api.errors import ApiError
from grader.api.runs import own_run
from grader.serializers import shown_to
from grader.store.models import Run, Submission

if TYPE_CHECKING:
    from grader.handles import Handles

bp = Blueprint("logs", __name__)
FORMATS = {"tar.gz": "application/gzip", "zip": "application/zip"}
SPOOL_BYTES = 8 * 1024 * 1024  # an archive larger than this is built on disk, not in memory
PAGE = 100  # submissions read from the database at a time


def safe_name(text: str) -> str:
    """`text` as one path component of an archive: no separators, no '..', nothing a shell
    or an unpacker reads specially (task ids and run names are free text)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "_"
    return name[:120]


def entries(svc: Handles, run: Run, *, host: bool) -> Iterator[tuple[str, bytes]]:
    """(path, content) of every file of the archive, index.json last; the run's
    submissions are read a page at a time, so a large run is never in memory whole."""
    root = safe_name(run.name)
    index: list[dict[str, Any]] = []
    used: set[str] = set()
    after = ""
    while True:
        with svc.db.read() as s:
            rows = list(
                s.scalars(
                    select(Submission)
                    .where(Submission.team_id == run.team_id, Submission.run_id == run.name, Submission.id > after)
                    .order_by(Submission.id)
                    .limit(PAGE)
                )
            )
        if not rows:
            break
        after = rows[-1].id
        for sub in rows:
            folder = _folder(sub, used)
            view = shown_to(svc, sub, host=host)
            result = view.get("result") or {}
            files = {"patch.diff": sub.patch, "result.json": (json.dumps(view, indent=1) + "\n").encode()}
            output = result.get("output")
            if output:
                files["test_output.txt"] = output.encode("utf-8", errors="replace")
            attempts = (result.get("apply") or {}).get("attempts") or []
            if attempts:
                files["apply.log"] = "".join(
                    f"$ {a.get('command')}  (exit {a.get('exit_code')})\n{a.get('output', '')}\n" for a in attempts
                ).encode("utf-8", errors="replace")
            for name, data in files.items():
                yield f"{root}/{folder}/{name}", data
            index.append(
                {
                    "id": sub.id,
                    "task_id": sub.task_id,
                    "trial": sub.trial,
                    "status": sub.status,
                    "verdict": sub.verdict,
                    "feedback": view.get("feedback"),
                    "folder": folder,
                    "files": sorted(files),
                    "test_output": "included"
                    if output
                    else "none"
                    if view.get("feedback") == "full"
                    else f"withheld by the task's feedback policy ({view.get('feedback')})",
                }
            )
    manifest = {
        "run": run.name,
        "id": run.id,
        "generated_at": dt.datetime.now(dt.UTC).isoformat(),
        "submissions": index,
    }
    yield f"{root}/index.json", (json.dumps(manifest, indent=1) + "\n").encode()


def _folder(sub: Submission, used: set[str]) -> str:
    """<task>/trial-<n>, or <task>/<submission id> when the trial is not given or taken."""
    task = safe_name(sub.task_id)
    folder = f"{task}/trial-{sub.trial}" if sub.trial is not None else f"{task}/{sub.id}"
    if folder in used:
        folder = f"{task}/{'trial-' + str(sub.trial) + '-' if sub.trial is not None else ''}{sub.id}"
    used.add(folder)
    return folder


def write_archive(files: Iterator[tuple[str, bytes]], fmt: str, out: IO[bytes]) -> None:
    """Write `files` as a .tar.gz or a .zip to the binary file `out`."""
    stamp = dt.datetime.now(dt.UTC)
    if fmt == "zip":
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for path, data in files:
                entry = zipfile.ZipInfo(path, date_time=stamp.timetuple()[:6])
                entry.compress_type = zipfile.ZIP_DEFLATED
                entry.external_attr = 0o644 << 16
                z.writestr(entry, data)
        return
    with tarfile.open(fileobj=out, mode="w:gz") as t:
        for path, data in files:
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(data), 0o644, int(stamp.timestamp())
            t.addfile(info, io.BytesIO(data))


@bp.get("/v1/runs/<run>/logs")
@auth.required
def download(run: str) -> Response:
    fmt = request.args.get("format", "tar.gz")
    if fmt not in FORMATS:
        raise ApiError(422, "invalid_fields", f"format must be one of {list(FORMATS)}, not {fmt!r}")
    svc: Handles = current_app.extensions["grader"]
    found = own_run(run)
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)
    try:
        write_archive(entries(svc, found, host=g.caller.admin), fmt, spool)
        spool.seek(0)
    except BaseException:
        spool.close()
        raise
    return send_file(
        spool, mimetype=FORMATS[fmt], as_attachment=True, download_name=f"{safe_name(found.name)}-logs.{fmt}", max_age=0
    )
