"""The Python client of the grader REST API.

    client = Client("https://grader.example", api_key)
    sub = client.submit("calc-mean-empty", patch_text, run_id="r1", wait=30)
    done = client.wait([sub["id"]])            # id -> final submission, with its result

Retrying is always safe: every POST carries an Idempotency-Key (a uuid4 unless the
caller gives one), so a POST repeated after a lost answer returns the first submission
instead of grading twice. Connection failures, timeouts, 502, 503, 504 and 429 are
retried a bounded number of times (Retry-After honoured, up to `max_retry_wait`); any
other error answer raises `ApiError` at once.

`read_predictions` / `parse_predictions` read SWE-bench prediction files (a JSON list,
JSONL, or a JSON object keyed by instance_id) for `submit_batch`.
"""

from __future__ import annotations

import email.utils
import hashlib
import random
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import requests
import urllib3

from grader.records import parse_records

FINAL_STATUSES = frozenset({"done", "cancelled"})
RETRY_STATUSES = frozenset({429, 502, 503, 504})
# The transport failures after which the request may or may not have reached the server:
# safe to repeat because GETs are reads and POSTs carry an Idempotency-Key.
RETRY_EXCEPTIONS = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError)
DEFAULT_BATCH_SIZE = 500
MAX_IDEMPOTENCY_KEY = 180  # the server's limit on the header (maxLength in its OpenAPI document)
SERVER_DEFAULT_PAGE = 100  # the server's page size when a listing gives no ?limit=

Submission = dict[str, Any]  # the API's JSON as it came: id, task_id, status, verdict, ..., result
TaskViews = list[dict[str, Any]]  # spelled here: inside Client, `list` is the method
Records = list[dict[str, Any]]  # the same: a JSON list of objects


class ApiError(Exception):
    """Raised when the grader API answers with an error, or cannot be reached at all.

    `status` is the HTTP status, or None when no answer came (connection refused, timed
    out) after every retry; `code` is the machine-readable code from the error body
    (`unreachable` and `http_<status>` when the server gave none); `retry_after` is the
    server's Retry-After in seconds, if it sent one; `body` the whole error answer (a
    batch refused whole still lists every item's reason there). `partial` is set by
    `Client.submit_batch` when a later chunk of a split batch failed: the combined
    answer of the chunks sent before it (retry with the same idempotency key).
    """

    def __init__(self, status: int | None, code: str, message: str, retry_after: float | None = None):
        super().__init__(status, code, message, retry_after)
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after
        self.body: dict[str, Any] | None = None
        self.partial: dict[str, Any] | None = None

    def __str__(self) -> str:
        where = f"HTTP {self.status}" if self.status is not None else "no answer"
        return f"{self.message} ({where}, {self.code})"


class PredictionsError(ValueError):
    """Raised when a predictions file is not a JSON list, JSONL or instance_id-keyed object of predictions."""


LogPages = list[tuple[Path, int]]  # a run's logs as the archives written, each with its size


class Client:
    """One grader service, one API key. `session`, `sleep` and `clock` are injectable
    (connection pooling, proxies, tests); everything else has a documented default."""

    def __init__(
        self,
        url: str,
        api_key: Any = None,
        *,
        timeout: float = 30,
        session: requests.Session | None = None,
        max_retries: int = 5,
        batch_size: int = DEFAULT_BATCH_SIZE,
        backoff: float = 0.5,
        max_retry_wait: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        connect_timeout: float = 3.0,
        connect_retries: int = 2,
    ):
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.url = url.rstrip("/")
        # A pydantic SecretStr (the settings' api_key) or a plain string.
        self._key = api_key.get_secret_value() if hasattr(api_key, "get_secret_value") else api_key
        self.timeout = timeout
        # A service that is not there (refused, no such host, no answer to the handshake)
        # is told within seconds: its own short timeout and few retries (at most max_retries).
        self.connect_timeout = connect_timeout
        self.connect_retries = connect_retries
        self.session = session or requests.Session()
        self.max_retries = max_retries
        self.batch_size = batch_size
        self.backoff = backoff
        self.max_retry_wait = max_retry_wait
        self._sleep = sleep
        self._clock = clock

    def __repr__(self) -> str:  # never the key
        return f"Client({self.url!r})"

    # --- submissions ---------------------------------------------------------------------
    def submit(
        self,
        task_id: str,
        patch: str | bytes,
        *,
        run_id: str | None = None,
        system: str | None = None,
        trial: int | None = None,
        prompt_variant: str | None = None,
        metadata: dict[str, Any] | None = None,
        callback_url: str | None = None,
        wait: float | None = None,
        idempotency_key: str | None = None,
        overwrite: bool = False,
        phase: str | None = None,
        cost_usd: float | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        api_seconds: float | None = None,
        wall_seconds: float | None = None,
        reasoning_level: str | None = None,
    ) -> Submission:
        """Submit one patch; with `wait`, the server holds the answer up to that many
        seconds for the verdict. Returns the submission (check its `status`). A run holds
        one attempt per task and trial: a second is refused (409 attempt_exists) unless
        `trial` is new or `overwrite` replaces the earlier one. What the attempt cost
        (`cost_usd`, `input_tokens`, `output_tokens`, `api_seconds`, `wall_seconds`,
        `reasoning_level`) is kept with it and summed into its run's figures."""
        if isinstance(patch, bytes):
            patch = patch.decode("utf-8", errors="surrogateescape")
        body = _without_none(
            {
                "task_id": task_id,
                "patch": patch,
                "run_id": run_id,
                "system": system,
                "trial": trial,
                "prompt_variant": prompt_variant,
                "metadata": metadata,
                "callback_url": callback_url,
                "overwrite": True if overwrite else None,
                "phase": phase,
                "cost_usd": cost_usd,
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "api_seconds": api_seconds,
                "wall_seconds": wall_seconds,
                "reasoning_level": reasoning_level,
            }
        )
        params = {"wait": _seconds(wait)} if wait else None
        return self._object(
            "POST",
            "/v1/submissions",
            params=params,
            json_body=body,
            idempotency_key=idempotency_key,
            extra_timeout=wait or 0,
        )

    def submit_batch(
        self,
        items: Iterable[dict[str, Any]],
        *,
        run_id: str | None = None,
        system: str | None = None,
        trial: int | None = None,
        prompt_variant: str | None = None,
        metadata: dict[str, Any] | None = None,
        callback_url: str | None = None,
        idempotency_key: str | None = None,
        phase: str | None = None,
        reasoning_level: str | None = None,
    ) -> dict[str, Any]:
        """Submit many: items in our format or SWE-bench predictions. Sent in chunks of
        `batch_size`; the answer combines them with indexes into `items`, in input order.
        `system`, `trial`, `prompt_variant`, `metadata`, `callback_url`, `phase` and
        `reasoning_level` are given to the items that do not say their own; what an
        attempt cost is each item's own (`cost_usd`, `input_tokens`, ... on the item).

        Each chunk's Idempotency-Key is derived from `idempotency_key`, so repeating the
        whole call with the same key and batch size repeats nothing. A chunk the server
        refuses as a whole (every item invalid, over quota, too large, malformed) has its
        items rejected, each with the server's reason when it gave one, and the rest go
        on; an auth failure, or a chunk that may or may not have been taken (no answer,
        5xx without the server's per-item answer), raises ApiError with `partial` set.
        """
        items = list(items)
        key = idempotency_key or str(uuid.uuid4())
        chunks = range(0, len(items), self.batch_size)
        combined: dict[str, Any] = {"items": [], "accepted": 0, "rejected": 0, "run_id": run_id}
        for n, start in enumerate(chunks):
            chunk = items[start : start + self.batch_size]
            body = _without_none(
                {
                    "run_id": run_id,
                    "system": system,
                    "trial": trial,
                    "prompt_variant": prompt_variant,
                    "metadata": metadata,
                    "callback_url": callback_url,
                    "phase": phase,
                    "reasoning_level": reasoning_level,
                    "submissions": chunk,
                }
            )
            chunk_key = key if len(chunks) == 1 else _chunk_key(key, n)
            try:
                answer = self._request("POST", "/v1/submissions/batch", json_body=body, idempotency_key=chunk_key)
            except ApiError as exc:
                answer = exc.body if exc.body and isinstance(exc.body.get("items"), list) else None
                if answer is None:
                    if exc.status is None or exc.status >= 500 or exc.status in (401, 403):
                        exc.partial = combined if start else None
                        raise
                    error = {"code": exc.code, "message": exc.message}
                    answer = {
                        "items": [{"index": i, "error": error} for i in range(len(chunk))],
                        "accepted": 0,
                        "rejected": len(chunk),
                    }
            for item in sorted(answer["items"], key=lambda it: it["index"]):
                combined["items"].append({**item, "index": item["index"] + start})
            combined["accepted"] += answer.get("accepted", 0)
            combined["rejected"] += answer.get("rejected", 0)
            combined["run_id"] = combined["run_id"] or answer.get("run_id")
        return combined

    def get(self, id: str) -> Submission:
        """One submission, with its result once done."""
        return self._object("GET", f"/v1/submissions/{id}")

    def list(
        self,
        run_id: str | None = None,
        status: str | None = None,
        limit: int | None = None,
        *,
        page_size: int | None = None,
    ) -> Iterator[Submission]:
        """Every matching submission (without `result`), following `next_cursor` across
        pages. `limit` caps how many are yielded; `page_size` is the server's `?limit=`."""
        if limit is not None and limit <= 0:
            return
        per_page = page_size or (min(limit, SERVER_DEFAULT_PAGE) if limit else None)
        cursor, yielded = None, 0
        while True:
            params = _without_none({"run_id": run_id, "status": status, "limit": per_page, "cursor": cursor})
            page = self._request("GET", "/v1/submissions", params=params)
            for sub in page.get("items", []):
                yield sub
                yielded += 1
                if limit is not None and yielded >= limit:
                    return
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def cancel(self, id: str) -> Submission:
        """Cancel a queued submission; ApiError 409 if it is already running or done."""
        return self._object("DELETE", f"/v1/submissions/{id}")

    def wait(
        self,
        ids: Iterable[str],
        *,
        timeout: float | None = None,
        poll: float = 1.0,
        on_done: Callable[[Submission], None] | None = None,
        run_id: str | None = None,
        max_poll: float = 10.0,
    ) -> dict[str, Submission]:
        """Poll until every submission is done or cancelled, or `timeout` seconds pass.

        Returns id -> the latest submission seen, in the order of `ids`; after a timeout
        the unfinished ones still say queued or running. `on_done` is called once per
        submission as it finishes. The interval starts at `poll` and grows by half each
        round nothing finished, up to `max_poll`. With `run_id` (the run all the ids
        belong to) each round lists the run instead of fetching every id, and the
        submissions returned have no `result`: the way to wait for a large batch.
        """
        order = list(dict.fromkeys(ids))
        latest: dict[str, Submission] = {}
        pending = set(order)
        deadline = None if timeout is None else self._clock() + timeout
        interval = poll
        while pending:
            seen = self._poll(pending, run_id)
            finished = 0
            for sid, sub in seen.items():
                latest[sid] = sub
                if sub.get("status") in FINAL_STATUSES:
                    pending.discard(sid)
                    finished += 1
                    if on_done:
                        on_done(sub)
            if not pending:
                break
            now = self._clock()
            if deadline is not None and now >= deadline:
                break
            self._sleep(interval if deadline is None else min(interval, deadline - now))
            interval = poll if finished else min(interval * 1.5, max(poll, max_poll))
        return {sid: latest[sid] for sid in order if sid in latest}

    def _poll(self, pending: set[str], run_id: str | None) -> dict[str, Submission]:
        seen: dict[str, Submission] = {}
        if run_id and len(pending) > 1:
            for sub in self.list(run_id=run_id):
                if sub.get("id") in pending:
                    seen[sub["id"]] = sub
        for sid in pending - seen.keys():  # without a run, or ids the run listing did not hold
            seen[sid] = self.get(sid)
        return seen

    # --- tasks and account -----------------------------------------------------------------
    def tasks(self, suite: str | None = None) -> TaskViews:
        """The public views of every task (of `suite` only; an unknown suite is a 422 naming the suites)."""
        return self._items("GET", "/v1/tasks", params={"suite": suite} if suite else None)

    def task(self, id: str) -> dict[str, Any]:
        return self._object("GET", f"/v1/tasks/{id}")

    def repository(self, id: str, dest: str | Path) -> dict[str, Any]:
        """Download task `id`'s starting repository, a git bundle, to `dest`, and check it
        against the sha256 the service sent (moved into place only then). Returns its
        sha256 and size, the base `commit` and, for a conflict task, the `merge` commit
        (prepare.checkout_bundle makes the starting state from them)."""
        dest = Path(dest)
        path = f"/v1/tasks/{id}/repository"
        resp = self._send("GET", path, stream=True, accept="application/x-git-bundle, application/json")
        want = resp.headers.get("X-Content-SHA256", "").lower()
        tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex[:8]}.part")
        digest, size = hashlib.sha256(), 0
        try:
            with resp, open(tmp, "wb") as f:
                for chunk in resp.iter_content(64 * 1024):
                    f.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
            if digest.hexdigest() != want:
                raise ApiError(
                    resp.status_code,
                    "bad_response",
                    f"GET {path}: the bundle's sha256 is "
                    f"{digest.hexdigest()}, the service said {want or 'nothing'} (X-Content-SHA256)",
                )
            tmp.replace(dest)
        except RETRY_EXCEPTIONS as exc:
            raise ApiError(None, "unreachable", f"GET {self.url}{path} broke off: {exc}") from exc
        finally:
            tmp.unlink(missing_ok=True)
        return {
            "sha256": want,
            "size": size,
            "commit": resp.headers.get("X-Grader-Commit"),
            "merge": resp.headers.get("X-Grader-Merge"),
        }

    def phases(self) -> Records:
        """A challenge's phases: each one's window (open or why not), limits and split."""
        return self._items("GET", "/v1/phases")

    def put_phase(self, slug: str, **fields: Any) -> dict[str, Any]:
        """Create phase `slug` or change the fields given (an admin key)."""
        return self._object("PUT", f"/v1/admin/phases/{slug}", json_body=fields)

    def account(self) -> dict[str, Any]:
        """The team, whether the key is an admin's, its quotas and usage."""
        return self._object("GET", "/v1/account")

    # --- runs and the leaderboard ------------------------------------------------------------------
    def runs(self) -> Records:
        """Your team's runs and every public one."""
        return self._items("GET", "/v1/runs")

    def run(self, ref: str, **filters: Any) -> dict[str, Any]:
        """A run's metrics and per-task table; `filters`: suite, variant, since, until."""
        return self._object("GET", f"/v1/runs/{ref}", params=_clean(filters))

    def update_run(self, ref: str, **fields: Any) -> dict[str, Any]:
        return self._object("PATCH", f"/v1/runs/{ref}", json_body=fields)

    def leaderboard(self, *, include_incomplete: bool = False, **filters: Any) -> Records:
        """Every run on the leaderboard, in its order, page after page."""
        params = _clean(filters)
        if include_incomplete:
            params["include_incomplete"] = "1"
        rows: Records = []
        offset: int | None = 0
        while offset is not None:
            page = self._object("GET", "/v1/leaderboard", params={**params, "offset": offset})
            rows += page.get("items", [])
            following = page.get("next_offset")
            offset = following if isinstance(following, int) and following > offset else None
        return rows

    def compare(self, a: str, b: str, **filters: Any) -> dict[str, Any]:
        return self._object("GET", "/v1/compare", params={"a": a, "b": b, **_clean(filters)})

    def report(self, ref: str, fmt: str = "swebench") -> dict[str, Any]:
        return self._object("GET", f"/v1/runs/{ref}/report", params={"format": fmt})

    def predictions(self, ref: str) -> Records:
        """Your run's patches as SWE-bench predictions (instance_id, model_name_or_path,
        model_patch), one per task: what `submit_batch` takes back."""
        predictions: Records = self._request("GET", f"/v1/runs/{ref}/predictions")
        return predictions

    def delete_run(self, ref: str) -> dict[str, Any]:
        """Delete a run that was never published (its submissions stay, without a run)."""
        return self._object("DELETE", f"/v1/runs/{ref}")

    def publish(self, ref: str, **fields: Any) -> dict[str, Any]:
        """Make the run public, with what `fields` says of it (method, description,
        project_url, paper_url): PATCH /v1/runs/<ref> with public true."""
        return self.update_run(ref, **_without_none(fields), public=True)

    def run_logs(self, ref: str, dest: str | Path, fmt: str = "tar.gz") -> int:
        """Download the run's logs (the patch, test output and result of every submission)
        to `dest` (and, for a run larger than one archive, its later pages beside it:
        `run_logs_pages`); the bytes written."""
        return sum(size for _, size in self.run_logs_pages(ref, dest, fmt))

    def run_logs_pages(self, ref: str, dest: str | Path, fmt: str = "tar.gz") -> LogPages:
        """The run's logs, one archive per page the service gives (Link: rel=next): the
        first at `dest`, the n-th beside it as NAME.n.EXT; each file and its size. Each is
        written beside its place first and moved there whole, so an interrupted download
        leaves no partial archive."""
        dest = Path(dest)
        pages: LogPages = []
        after = ""
        while True:
            target = dest if not pages else _page_path(dest, fmt, len(pages) + 1)
            size, after = self._logs_page(ref, target, fmt, after)
            pages.append((target, size))
            if not after:
                return pages

    def _logs_page(self, ref: str, dest: Path, fmt: str, after: str) -> tuple[int, str]:
        params = {"format": fmt, **({"after": after} if after else {})}
        resp = self._send(
            "GET",
            f"/v1/runs/{ref}/logs",
            params=params,
            stream=True,
            accept="application/gzip, application/zip, application/json",
        )
        tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex[:8]}.part")
        size = 0
        try:
            with resp, open(tmp, "wb") as f:
                for chunk in resp.iter_content(64 * 1024):
                    f.write(chunk)
                    size += len(chunk)
            tmp.replace(dest)
        except RETRY_EXCEPTIONS as exc:
            raise ApiError(None, "unreachable", f"GET {self.url}/v1/runs/{ref}/logs broke off: {exc}") from exc
        finally:
            tmp.unlink(missing_ok=True)
        return size, resp.headers.get("Grader-Next-After", "")

    # --- transport -----------------------------------------------------------------------------
    def _request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json_body: Any = None,
        idempotency_key: str | None = None,
        extra_timeout: float = 0,
    ) -> Any:
        resp = self._send(
            method,
            path,
            params=params,
            json_body=json_body,
            idempotency_key=idempotency_key,
            extra_timeout=extra_timeout,
        )
        try:
            return resp.json()
        except ValueError as exc:
            raise ApiError(
                resp.status_code, "bad_response", f"{method} {path} answered {resp.status_code} without JSON"
            ) from exc

    def _object(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json_body: Any = None,
        idempotency_key: str | None = None,
        extra_timeout: float = 0,
    ) -> dict[str, Any]:
        """_request for an endpoint that answers a JSON object."""
        answer: dict[str, Any] = self._request(
            method,
            path,
            params=params,
            json_body=json_body,
            idempotency_key=idempotency_key,
            extra_timeout=extra_timeout,
        )
        return answer

    def _items(self, method: str, path: str, *, params: dict[str, Any] | None = None) -> Records:
        """The `items` of an endpoint that answers a JSON object listing them."""
        items: Records = self._object(method, path, params=params).get("items", [])
        return items

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json_body: Any = None,
        idempotency_key: str | None = None,
        extra_timeout: float = 0,
        stream: bool = False,
        accept: str = "application/json",
    ) -> requests.Response:
        """The first 2xx answer, after the retries; an error answer raises ApiError."""
        headers = {"Accept": accept}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        if method == "POST":
            # Generated once, outside the retry loop: every attempt must carry the same key.
            headers["Idempotency-Key"] = idempotency_key or str(uuid.uuid4())
        attempt = 0
        while True:
            try:
                resp = self.session.request(
                    method,
                    self.url + path,
                    params=params,
                    json=json_body,
                    headers=headers,
                    timeout=(self.connect_timeout, self.timeout + extra_timeout),
                    stream=stream,
                )
            except RETRY_EXCEPTIONS as exc:
                refused = _connect_failure(exc)
                if refused and attempt >= min(self.connect_retries, self.max_retries):
                    raise ApiError(
                        None,
                        "unreachable",
                        f"cannot reach the grader service at {self.url} ({refused}): check the address "
                        "(--url or GRADER_API_URL), or try again later if the service is down",
                    ) from exc
                if attempt >= self.max_retries:
                    raise ApiError(None, "unreachable", f"{method} {self.url}{path} failed: {exc}") from exc
                self._sleep(self._backoff(attempt))
                attempt += 1
                continue
            if 200 <= resp.status_code < 300:
                return resp
            error = _error_from(resp)
            if resp.status_code not in RETRY_STATUSES or attempt >= self.max_retries:
                raise error
            if error.retry_after is not None and error.retry_after > self.max_retry_wait:
                raise error  # e.g. a daily quota: waiting the capped time would only burn attempts
            self._sleep(error.retry_after if error.retry_after is not None else self._backoff(attempt))
            attempt += 1

    def _backoff(self, attempt: int) -> float:
        """Exponential with jitter, so that many clients refused together do not return together."""
        growth: float = 2**attempt
        return min(self.max_retry_wait, self.backoff * growth) * random.uniform(0.5, 1.0)


# --- predictions files ----------------------------------------------------------------------------
def read_predictions(path: str | Path) -> list[dict[str, Any]]:
    """SWE-bench predictions (or our own submission items) from a file: see `parse_predictions`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PredictionsError(f"{path}: cannot read: {exc}") from exc
    return parse_predictions(text, source=str(path))


def parse_predictions(text: str, *, source: str = "<predictions>") -> list[dict[str, Any]]:
    """A JSON list of predictions, JSONL (one per line), or a JSON object keyed by
    instance_id (as SWE-bench's harness also accepts). Each must be an object naming an
    `instance_id` (SWE-bench) or a `task_id` (our format); the server checks the rest.
    Errors name the line (JSONL) or the position (JSON list / object)."""
    records = parse_records(text, source=source, what="predictions", error=PredictionsError)
    if isinstance(records, dict):
        values = list(records.values())
        if values and all(isinstance(v, dict) for v in values):  # keyed by instance_id
            return [_prediction({"instance_id": k, **v}, f"{source}: {k!r}") for k, v in records.items()]
        return [_prediction(records, f"{source}:1")]  # one line of JSONL
    return [_prediction(value, where) for where, value in records]


def _prediction(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PredictionsError(f"{where}: expected a JSON object, got {type(value).__name__}")
    if "instance_id" not in value and "task_id" not in value:
        raise PredictionsError(f"{where}: has neither instance_id (SWE-bench) nor task_id")
    return value


# --- helpers ---------------------------------------------------------------------------------------
def _connect_failure(exc: Exception) -> str | None:
    """Why a request never reached the server (refused, no such host, the handshake timed
    out), in a few words; None when it may have reached it (a reset or a read timeout)."""
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return "no answer to the connection"
    if not isinstance(exc, requests.ConnectionError) or isinstance(exc, requests.exceptions.ReadTimeout):
        return None
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    if isinstance(reason, urllib3.exceptions.NameResolutionError):
        return "no such host"
    if isinstance(reason, urllib3.exceptions.NewConnectionError):
        cause = reason.__cause__ or reason.__context__
        return (getattr(cause, "strerror", None) or "the connection failed").lower()
    return None


def _without_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _chunk_key(key: str, n: int) -> str:
    suffix = f".{n}"
    if len(key) + len(suffix) > MAX_IDEMPOTENCY_KEY:
        key = hashlib.sha256(key.encode()).hexdigest()
    return key + suffix


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header: a number, or (as HTTP also allows) a date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_from(resp: requests.Response) -> ApiError:
    """The contract's `{"error": {"code", "message"}}`; a proxy's HTML page still gives a usable error."""
    retry_after = _retry_after(resp.headers.get("Retry-After"))
    try:
        body = resp.json()
        err = body["error"]
        error = ApiError(resp.status_code, str(err["code"]), str(err["message"]), retry_after)
        error.body = body
        return error
    except (ValueError, KeyError, TypeError):
        text = " ".join(resp.text.split())[:200] or resp.reason or "no body"
        return ApiError(resp.status_code, f"http_{resp.status_code}", text, retry_after)


def _clean(params: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in params.items() if v is not None}


def _page_path(dest: Path, fmt: str, n: int) -> Path:
    """The n-th page's file beside `dest`: logs.tar.gz -> logs.2.tar.gz."""
    ext = f".{fmt}"
    stem = dest.name[: -len(ext)] if dest.name.endswith(ext) else dest.name
    return dest.with_name(f"{stem}.{n}{ext}")
