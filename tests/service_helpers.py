"""Shared by the service tests: a Service over a test's database and Redis, and a small
authenticated wrapper around Flask's test client."""

from __future__ import annotations

from pathlib import Path

from grader.config import get_settings
from grader.service import Service
from grader.store.keys import create_key

ROOT = Path(__file__).resolve().parent.parent


def make_service(database_url: str, redis_url: str, tasks_dir: Path = ROOT / "tasks", **overrides) -> Service:
    overrides = {"callback_allow_private": True, **overrides}
    settings = get_settings(tasks_dir=tasks_dir, environments_dir=ROOT / "environments", database_url=database_url,
                            redis_url=redis_url, **overrides)
    svc = Service(settings)
    svc.db.migrate()
    return svc


def new_key(svc: Service, team: str, **kw) -> str:
    with svc.db.write() as s:
        return create_key(s, team, **kw)


class Api:
    def __init__(self, client, key: str | None):
        self.client, self.key = client, key

    def _h(self, headers):
        h = {"Authorization": f"Bearer {self.key}"} if self.key else {}
        return {**h, **(headers or {})}

    def get(self, path, headers=None):
        return self.client.get(path, headers=self._h(headers))

    def post(self, path, json=None, headers=None, data=None, content_type=None):
        if data is not None:
            return self.client.post(path, data=data, headers=self._h(headers),
                                    content_type=content_type or "application/json")
        return self.client.post(path, json=json, headers=self._h(headers))

    def delete(self, path, headers=None):
        return self.client.delete(path, headers=self._h(headers))
