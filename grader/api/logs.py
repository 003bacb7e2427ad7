"""/v1/runs/<run>/logs: every submission of a run in one archive (.tar.gz or .zip), as
SWE-bench's harness leaves its logs: a folder per task and attempt holding the patch that
was submitted, the test output and the result.

Only the run's own team (or the host) may download it, as with its predictions: a
public run shows its figures, never its patches. What the archive says of each result is
what GET /v1/submissions/<id> says to the same key (the task's feedback policy, secrets
masked): a test output the policy withholds is not in it, and index.json says so.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gzip
import hashlib
import io
import json
import logging
import os
import re
import tarfile
import threading
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import quote

from flask import Blueprint, Flask, Response, current_app, g, request, send_file
from redis.exceptions import RedisError
from sqlalchemy import case, func, select

from grader import runs as R
from grader.api import auth
from grader.api.errors import ApiError
from grader.api.runs import not_private, own_run
from grader.serializers import shown_to, task_feedback
from grader.store.models import Run, Status, Submission
from grader.version import GRADER_VERSION

if TYPE_CHECKING:
    from grader.handles import Handles

log = logging.getLogger(__name__)
bp = Blueprint("logs", __name__)
FORMATS = {"tar.gz": "application/gzip", "zip": "application/zip"}
PAGE = 100  # submissions read from the database at a time
LEVEL = 1  # the compression level of an archive
BUILDS_PER_PROCESS = 2  # archives one API process builds at once, across teams
BUILD_LOCK_SECONDS = 600  # a team's build lock runs out this long after a process died holding it


def safe_name(text: str) -> str:
    """`text` as one path component of an archive: no separators, no '..', nothing a shell
    or an unpacker reads specially (task ids and run names are free text)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "_"
    return name[:120]


@dataclass
class Page:
    """Where an archive ended: the id after which the next page begins, or None at the end."""

    next_after: str | None = None


def entries(
    svc: Handles, run: Run, *, host: bool, after: str = "", cap: int | None = None, page: Page | None = None
) -> Iterator[tuple[str, bytes]]:
    """(path, content) of every file of the archive, index.json last; the run's
    submissions are read a page at a time, so a large run is never in memory whole.
    `after`: only the submissions after this id (a later page). `cap`: the archive ends
    before the submission whose files would take its contents past `cap` bytes (never
    before its first), and index.json (and `page`) then names the page that follows."""
    root = safe_name(run.name)
    index: list[dict[str, Any]] = []
    used: set[str] = set()
    size, cut = 0, None
    while cut is None:
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
        for sub in rows:
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
            weight = sum(len(data) for data in files.values())
            if cap is not None and index and size + weight > cap:
                cut = index[-1]["id"]
                break
            size += weight
            folder = _folder(sub, used)
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
                    **R.usage_row(sub),  # what the attempt said it cost
                    "files": sorted(files),
                    "test_output": "included"
                    if output
                    else "none"
                    if view.get("feedback") == "full"
                    else f"withheld by the task's feedback policy ({view.get('feedback')})",
                }
            )
        after = rows[-1].id
    if page is not None:
        page.next_after = cut
    manifest = {
        "run": run.name,
        "id": run.id,
        "generated_at": dt.datetime.now(dt.UTC).isoformat(),
        "submissions": index,
        "complete": cut is None,
        "next_after": cut,
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
    """Write `files` as a .tar.gz or a .zip to the binary file `out`, compressed at level 1:
    the API's CPU is what every team shares, and patches and logs shrink well at any level
    (tarfile's own default, 9, took most of a 22 s build of a 154 MB archive)."""
    stamp = dt.datetime.now(dt.UTC)
    if fmt == "zip":
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=LEVEL) as z:
            for path, data in files:
                entry = zipfile.ZipInfo(path, date_time=stamp.timetuple()[:6])
                entry.compress_type = zipfile.ZIP_DEFLATED
                entry.external_attr = 0o644 << 16
                z.writestr(entry, data, compresslevel=LEVEL)
        return
    # gzip's header names no file (tarfile's would name the file being written)
    with (
        gzip.GzipFile(filename="", mode="wb", fileobj=out, compresslevel=LEVEL) as gz,
        tarfile.open(fileobj=gz, mode="w") as t,
    ):
        for path, data in files:
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(data), 0o644, int(stamp.timestamp())
            t.addfile(info, io.BytesIO(data))


# --- built once per state of a run, kept on disk ------------------------------------------------------
class Busy(Exception):
    """Raised when an archive cannot be built now: the team's one build is under way, or
    this process builds as many as it may; the message says which."""


class Archives:
    """The archives of runs' logs, built once per state of a run and kept in
    `cache_dir/archives/` (shared by the API processes of a host), each at most
    `max_bytes` of contents (a larger run comes in pages), at most one being built per
    team across the service (a Redis lock) and at most BUILDS_PER_PROCESS per process;
    past `keep_bytes` on disk the least recently served go first.

    A state is what an archive shows: the run's submissions (how many, the newest, how
    many are finished, cancelled, delivered, their attempts), its tasks' feedback
    policies, the viewer (team or host), the format and the page. Any change to them is
    another archive; an archive of a state gone is removed when its successor is built."""

    def __init__(self, svc: Handles, *, max_bytes: int, keep_bytes: int):
        self.svc, self.max_bytes, self.keep_bytes = svc, max_bytes, keep_bytes
        self.dir = svc.settings.cache_dir / "archives"
        self._local = threading.BoundedSemaphore(BUILDS_PER_PROCESS)

    def state(self, run: Run, *, host: bool, fmt: str, after: str) -> str:
        with self.svc.db.read() as s:
            mine = (Submission.team_id == run.team_id) & (Submission.run_id == run.name)
            row = s.execute(
                select(
                    func.count(),
                    func.max(Submission.id),
                    func.sum(case((Submission.status == Status.DONE.value, 1), else_=0)),
                    func.sum(case((Submission.status == Status.CANCELLED.value, 1), else_=0)),
                    func.max(Submission.finished_at),
                    func.sum(case((Submission.webhook_status == "delivered", 1), else_=0)),
                    func.sum(case((Submission.webhook_status == "failed", 1), else_=0)),
                    func.sum(Submission.attempts),
                ).where(mine)
            ).one()
            tasks = sorted(s.scalars(select(Submission.task_id).where(mine).distinct()))
        policies = [(t, task_feedback(self.svc, t)) for t in tasks]
        what = [run.id, run.name, host, fmt, after, self.max_bytes, GRADER_VERSION, [str(v) for v in row], policies]
        return hashlib.sha256(json.dumps(what, default=str).encode()).hexdigest()[:32]

    def _name(self, run: Run, *, host: bool, after: str) -> str:
        return f"{run.id}-{'host' if host else 'team'}-{after or 'first'}-"

    def get(self, run: Run, *, host: bool, fmt: str, after: str, team_id: int) -> tuple[Path, str | None]:
        """The archive of the run as it is now (its path), and where the next page begins;
        built if no archive of this state is kept. Raises Busy."""
        key = self._name(run, host=host, after=after) + self.state(run, host=host, fmt=fmt, after=after)
        path, meta = self.dir / f"{key}.{fmt}", self.dir / f"{key}.{fmt}.next"
        found = self._kept(path, meta)
        if found is not None:
            return path, found
        with self._turn(team_id):
            found = self._kept(path, meta)  # built by another request while this one waited for its turn
            if found is not None:
                return path, found
            self.dir.mkdir(parents=True, exist_ok=True)
            page = Page()
            tmp = self.dir / f".{key}.{uuid.uuid4().hex[:8]}.{fmt}"
            try:
                with open(tmp, "wb") as out:
                    write_archive(
                        entries(self.svc, run, host=host, after=after, cap=self.max_bytes, page=page), fmt, out
                    )
                meta.write_text(page.next_after or "")
                os.replace(tmp, path)
            finally:
                tmp.unlink(missing_ok=True)
            log.info("built the logs archive of run %s (%s, %d bytes)", run.id, fmt, path.stat().st_size)
            self._prune(keep=path, stale=self._name(run, host=host, after=after))
            return path, page.next_after

    @staticmethod
    def _kept(path: Path, meta: Path) -> str | None:
        """The next page of a kept archive ('' for none) if it is kept, else None."""
        try:
            following = meta.read_text()
            os.utime(path)  # served now: the last to go
        except OSError:
            return None
        return following or ""

    @contextlib.contextmanager
    def _turn(self, team_id: int) -> Iterator[None]:
        if not self._local.acquire(blocking=False):
            raise Busy(f"this API process is building {BUILDS_PER_PROCESS} archives already")
        try:
            lock = f"{self.svc.settings.queue_name}:archive-build:{team_id}"
            token = uuid.uuid4().hex
            try:
                taken = self.svc.redis.set(lock, token, nx=True, ex=BUILD_LOCK_SECONDS)
            except RedisError:
                taken = True  # without Redis, the bound per process still holds
                lock = ""
            if not taken:
                raise Busy("an archive of your team's is being built; this one can be built once it is in")
            try:
                yield
            finally:
                if lock:
                    with contextlib.suppress(RedisError):
                        self.svc.redis.eval(_RELEASE, 1, lock, token)
        finally:
            self._local.release()

    def _prune(self, *, keep: Path, stale: str) -> None:
        """Remove the archives of this page's earlier states, then the least recently served
        ones while the directory holds more than keep_bytes."""
        files = []
        for f in self.dir.glob("*"):
            if f == keep or f.name.startswith(".") or f.suffix == ".next":
                continue
            if f.name.startswith(stale):
                _remove(f)
                continue
            with contextlib.suppress(OSError):
                files.append((f.stat().st_mtime, f.stat().st_size, f))
        total = keep.stat().st_size + sum(size for _, size, _ in files)
        for _, size, f in sorted(files):
            if total <= self.keep_bytes:
                break
            _remove(f)
            total -= size


def _remove(archive: Path) -> None:
    with contextlib.suppress(OSError):
        archive.unlink()
    with contextlib.suppress(OSError):
        archive.with_name(archive.name + ".next").unlink()


_RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"


@bp.get("/v1/runs/<run>/logs")
@auth.required
def download(run: str) -> Response:
    fmt = request.args.get("format", "tar.gz")
    if fmt not in FORMATS:
        raise ApiError(422, "invalid_fields", f"format must be one of {list(FORMATS)}, not {fmt!r}")
    after = request.args.get("after", "")
    if after and not re.fullmatch(r"[0-9a-f]{1,32}", after):
        raise ApiError(422, "invalid_fields", "after must be a submission id (from the previous page's Link)")
    found = own_run(run)
    not_private(found)
    archives: Archives = current_app.extensions["grader.archives"]
    try:
        path, following = archives.get(found, host=g.caller.admin, fmt=fmt, after=after, team_id=g.caller.team_id)
    except Busy as exc:
        raise ApiError(429, "archive_busy", f"{exc}; try again shortly", retry_after=5) from None
    page = f"-after-{after}" if after else ""
    response = send_file(
        path,
        mimetype=FORMATS[fmt],
        as_attachment=True,
        download_name=f"{safe_name(found.name)}-logs{page}.{fmt}",
        max_age=0,
        etag=False,
        conditional=False,
    )
    if following:
        # the run is larger than one archive: the rest comes page by page
        response.headers["Link"] = f'</v1/runs/{quote(run)}/logs?format={fmt}&after={following}>; rel="next"'
        response.headers["Grader-Next-After"] = following
    return response


def init_app(app: Flask) -> None:
    settings = app.extensions["grader"].settings
    app.extensions["grader.archives"] = Archives(
        app.extensions["grader"], max_bytes=settings.max_archive_bytes, keep_bytes=settings.archive_cache_bytes
    )
    app.register_blueprint(bp)
