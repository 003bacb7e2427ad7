"""A scripted HTTP server in a thread, for the client's tests (tests/unit/test_client.py) and
the CLI's remote commands: it answers from a script per (method, path) and records every
request. The `api` fixture of tests/unit/conftest.py starts one per test."""

from __future__ import annotations

import json
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from grader.verdict import Provenance, Result, Verdict


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: object


class FakeApi:
    """Scripted answers per (method, path): a list is answered in order (its last entry
    repeats), a callable is asked each time. Every request is recorded."""

    def __init__(self):
        self.routes: dict[tuple[str, str], object] = {}
        self.seen: list[Seen] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                req = Seen(
                    self.command,
                    parts.path,
                    {k: v[0] for k, v in parse_qs(parts.query).items()},
                    {k.lower(): v for k, v in self.headers.items()},
                    json.loads(raw) if raw else None,
                )
                api.seen.append(req)
                status, body, headers = api.answer(req)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = do_PATCH = _answer

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def on(self, method: str, path: str, *answers) -> None:
        self.routes[(method, path)] = answers[0] if len(answers) == 1 and callable(answers[0]) else list(answers)

    def answer(self, req: Seen) -> tuple[int, object, dict]:
        script = self.routes.get((req.method, req.path))
        if script is None:
            return 404, error("not_found", f"no route {req.method} {req.path}"), {}
        if callable(script):
            got = script(req)
        else:
            got = script.pop(0) if len(script) > 1 else script[0]
        return (*got, {}) if len(got) == 2 else got

    def requests(self, method: str, path: str) -> list[Seen]:
        return [r for r in self.seen if r.method == method and r.path == path]


def error(code: str, message: str) -> dict:
    return {"error": {"code": code, "message": message}}


def submission(id: str, status: str = "queued", verdict: str | None = None, **extra) -> dict:
    result = None
    if verdict:
        result = Result(
            task_id="t1",
            verdict=Verdict(verdict),
            explanation=f"because {verdict}",
            provenance=Provenance(patch_sha256="0" * 64, grader_version="test"),
        ).model_dump(mode="json")
    return {
        "id": id,
        "task_id": "t1",
        "status": status,
        "verdict": verdict,
        "cached": False,
        "run_id": None,
        "system": None,
        "trial": None,
        "prompt_variant": None,
        "metadata": {},
        "callback_url": None,
        "attempts": 1,
        "queued_at": "2026-01-01T00:00:00+00:00",
        "started_at": None,
        "finished_at": None,
        "host": None,
        "result": result,
        **extra,
    }
