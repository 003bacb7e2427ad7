"""How records leave the server: the one function per record that the API, the webhooks
and the client all see."""

from __future__ import annotations

import datetime as dt

from grader.store.models import Submission
from grader.verdict import Verdict


def _iso(t: dt.datetime | None) -> str | None:
    if t is None:
        return None
    if t.tzinfo is None:  # SQLite hands back naive datetimes; they were stored as UTC
        t = t.replace(tzinfo=dt.timezone.utc)
    return t.isoformat().replace("+00:00", "Z")


def submission_view(sub: Submission, *, full: bool, secrets: frozenset[str] = frozenset()) -> dict:
    from grader.api.redact import redact
    view = {
        "id": sub.id,
        "task_id": sub.task_id,
        "status": sub.status,
        "verdict": sub.verdict,
        "charged": Verdict(sub.verdict).charged if sub.verdict else None,
        "cached": bool(sub.cached),
        "run_id": sub.run_id,
        "system": sub.system,
        "trial": sub.trial,
        "prompt_variant": sub.prompt_variant,
        "metadata": sub.meta,
        "callback_url": sub.callback_url,
        "webhook_status": sub.webhook_status,
        "attempts": sub.attempts,
        "errors": sub.errors,
        "patch_sha256": sub.patch_sha256,
        "queued_at": _iso(sub.queued_at),
        "started_at": _iso(sub.started_at),
        "finished_at": _iso(sub.finished_at),
        "host": sub.host,
        "links": {"self": f"/v1/submissions/{sub.id}"},
    }
    if full:
        view["result"] = redact(sub.result, secrets) if sub.result is not None else None
    return view


_SECRETS: dict[str, frozenset[str]] = {}


def task_secrets(svc, task_id: str) -> frozenset[str]:
    """The secret lines of a task, computed once per task definition."""
    from grader.api.redact import secret_lines
    from grader.errors import TaskError
    try:
        key = svc.task_hash(task_id)
        if key not in _SECRETS:
            _SECRETS[key] = secret_lines(svc.task(task_id))
        return _SECRETS[key]
    except TaskError:
        return frozenset()
