"""The hostile clients of issue 20, for benchmarks/fairness.py: each starts in the
background, runs until stopped, and says what it got back (`statuses`, and its own
figures in `report()`). Every one of them comes from HOSTILE_ADDRESS, so that behind nginx
its per-address bounds count the hostile team and not the victim.

- SlowClients (tests/helpers/hostile_clients.py, shared with the service tier's test):
  connections that send their headers, or their body, a byte every 5 s;
- ChunkedStream: 8 MiB bodies sent with Transfer-Encoding: chunked, back to back;
- Downloaders: 8 clients downloading a large run's logs archive again and again;
- Readers: 32 anonymous readers of the leaderboard (API and portal pages), four reads a second each;
- many_public_runs (tests/helpers/hostile_clients.py too): 10,000 public runs written
  straight into the database, as if published over months by a hundred teams (the
  per-team bound on publishing stops one team from doing it through the API:
  fairness.py shows that too).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter

import requests

from _service import HOSTILE_ADDRESS, ROOT, TASK, cheap_patch, source_session

sys.path.insert(0, str(ROOT / "tests"))
from helpers.hostile_clients import SlowClients, many_public_runs  # noqa: E402

__all__ = ["ChunkedStream", "Downloaders", "Readers", "SlowClients", "many_public_runs"]


class ChunkedStream:
    """`streams` senders of `size`-byte bodies with Transfer-Encoding: chunked, one after
    another each (what the byte bucket never charged before)."""

    def __init__(self, url: str, key: str, *, streams: int = 2, size: int = 8 * 2**20):
        self.url, self.key, self.size = url, key, size
        self.statuses: Counter[int] = Counter()
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._send, args=(s,), daemon=True) for s in range(streams)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def _send(self, s: int) -> None:
        http = source_session(HOSTILE_ADDRESS, self.key)
        n = 0
        while not self.stop.is_set():
            n += 1
            body = json.dumps({"task_id": TASK, "patch": cheap_patch(f"chunked-{s}-{n}", pad=self.size)}).encode()
            pieces = (body[i : i + 65536] for i in range(0, len(body), 65536))
            try:
                code = http.post(
                    f"{self.url}/v1/submissions", data=pieces, headers={"Content-Type": "application/json"}, timeout=180
                ).status_code
            except requests.RequestException:
                code = 0
            with self.lock:
                self.statuses[code] += 1

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=180)

    def report(self) -> dict:
        return {"statuses": dict(self.statuses)}


class Downloaders:
    """`count` clients downloading the run's logs archive again and again, each as soon as
    the last ended (a 429 is not waited out), following its pages."""

    def __init__(self, url: str, key: str, run: str, *, count: int = 8):
        self.url, self.key, self.run = url, key, run
        self.statuses: Counter[int] = Counter()
        self.sizes: dict[str, int] = {}
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._download, daemon=True) for _ in range(count)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def _download(self) -> None:
        http = source_session(HOSTILE_ADDRESS, self.key)
        after = ""
        while not self.stop.is_set():
            try:
                r = http.get(
                    f"{self.url}/v1/runs/{self.run}/logs", params={"after": after} if after else {}, timeout=600
                )
                code, size = r.status_code, len(r.content)
                following = r.headers.get("Grader-Next-After", "") if code == 200 else after
            except requests.RequestException:
                code, size, following = 0, 0, ""
            with self.lock:
                self.statuses[code] += 1
                if code == 200:
                    self.sizes[after or "first"] = size
            after = following
            if code != 200:
                time.sleep(0.05)

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=600)

    def report(self) -> dict:
        return {"statuses": dict(self.statuses), "page_bytes": self.sizes}


class Readers:
    """32 anonymous readers of the leaderboard, four reads a second each: every other one
    GET /v1/leaderboard, the others the portal's first five pages in turn."""

    def __init__(self, url: str, *, count: int = 32, every: float = 0.25):
        self.url, self.every = url, every
        self.statuses: Counter[int] = Counter()
        self.ms: list[float] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._read, args=(i,), daemon=True) for i in range(count)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def _read(self, i: int) -> None:
        http, page = source_session(HOSTILE_ADDRESS), 0
        while not self.stop.is_set():
            page += 1
            path = "/v1/leaderboard" if i % 2 else f"/leaderboard?page={page % 5 + 1}"
            t = time.monotonic()
            try:
                code = http.get(f"{self.url}{path}", timeout=120).status_code
            except requests.RequestException:
                code = 0
            with self.lock:
                self.statuses[code] += 1
                if code == 200:
                    self.ms.append((time.monotonic() - t) * 1000)
            self.stop.wait(self.every)

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=120)

    def report(self) -> dict:
        return {"statuses": dict(self.statuses)}
