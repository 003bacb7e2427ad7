"""How records leave the server: the one function per record that the API, the portal,
the webhooks and the client all see. The feedback policy (feedback.py) and the masking
of secrets (redact.py) are applied here, below every door a result leaves by.

Masking needs the task's secret lines, and reading them can check out the task's
repository (tasks/prepare.py, for expected files from a commit). So it is done once,
when the verdict is written (`masked`, called by the worker and the reconciler; an
answer from the cache copies its hit's): the result as a host sees it and as each
policy short of `full` shows it, every secret masked, are stored with the verdict
(`Submission.shown`). A read (`shown_to`: GET, `?wait=`, webhooks, the portal) only
picks what the task's policy, as it is now, shows: a host may still tighten a policy for
past grades. Rows written before (migration 0006) are masked as they are read, as
every row was."""

from __future__ import annotations

import datetime as dt
import logging
import time
from pathlib import Path
from typing import Any, Protocol, cast

from grader.errors import TaskError
from grader.metrics import USAGE_FIELDS
from grader.serializers.feedback import feedback_view
from grader.serializers.redact import Secrets, own_lines, redact, secret_lines
from grader.store.models import Submission
from grader.tasks.model import Task
from grader.verdict import Verdict

log = logging.getLogger(__name__)


class _CacheSettings(Protocol):
    @property
    def cache_dir(self) -> Path: ...


class TaskSource(Protocol):
    """What the serializers read of the handles (grader/handles.py, beside this package: it
    cannot be imported here)."""

    @property
    def settings(self) -> _CacheSettings: ...

    def task(self, task_id: str, /) -> Task: ...

    def task_hash(self, task_id: str, /) -> str: ...


def _iso(t: dt.datetime | None) -> str | None:
    if t is None:
        return None
    if t.tzinfo is None:  # SQLite hands back naive datetimes; they were stored as UTC
        t = t.replace(tzinfo=dt.UTC)
    return t.isoformat().replace("+00:00", "Z")


def submission_view(
    sub: Submission, *, full: bool, secrets: frozenset[str] = frozenset(), feedback: str = "verdict", host: bool = False
) -> dict[str, Any]:
    """The submission; with `full`, its result as `feedback` shows it (a host sees it
    whole), every secret line masked. Callers with a service use `shown_to`."""
    view: dict[str, Any] = {
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
        **{k: getattr(sub, k) for k in USAGE_FIELDS},
        "imported": bool(sub.imported),
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
        view["feedback"] = "full" if host else feedback
        shown = feedback_view(sub.result, feedback, host=host)
        # the submitter's own lines stay readable to it, even where they match a secret
        view["result"] = redact(shown, secrets, own_lines(sub.patch)) if shown is not None else None
        _withhold_timing(view, feedback, host=host)
    return view


def _withhold_timing(view: dict[str, Any], policy: str, *, host: bool) -> None:
    """When the grade started and finished is its duration, and a submission chooses its
    own duration (a sleep encodes a byte): under `tests` and `verdict` a submitter sees
    neither (the result's durations are withheld by feedback_view for the same reason).
    When it queued the submission is the submitter's own, and so is when it cancelled it."""
    if not host and policy != "full" and view["status"] != "cancelled":
        view["started_at"] = view["finished_at"] = None


def listed(svc: TaskSource, sub: Submission, *, host: bool) -> dict[str, Any]:
    """A submission in a listing (no result), timed as its task's policy allows."""
    view = submission_view(sub, full=False)
    _withhold_timing(view, task_feedback(svc, sub.task_id), host=host)
    return _private_split(svc, sub, view, host=host)


def private_phase(svc: TaskSource, phase_id: int | None) -> str | None:
    """The slug of the phase `phase_id` if it is scored on a private split, else None: read
    each time (one indexed row), so that a phase the host makes private binds at once."""
    if phase_id is None:
        return None
    from grader.store import phases as store_phases

    db = cast("Any", svc).db  # the handles: a phase is read only for a submission that names one
    with db.read() as s:
        phase = store_phases.by_ids(s, {phase_id}).get(phase_id)
    return phase.slug if phase is not None and phase.private else None


def _private_split(svc: TaskSource, sub: Submission, view: dict[str, Any], *, host: bool) -> dict[str, Any]:
    """A submission to a private phase, as its team sees it: that it was received and where
    it is in the queue, never its verdict or result (store/phases.py); the host sees all."""
    slug = None if host else private_phase(svc, getattr(sub, "phase_id", None))  # a record without one: none
    if slug is None:
        return view
    view.update(verdict=None, charged=None, started_at=None, finished_at=None)
    if "result" in view:
        view["result"] = None
        view["feedback"] = "private"
    view["withheld"] = (
        f"phase {slug!r} is scored on a private split: no per-task result of it is shown to its "
        "participants, only the phase's aggregate, if the host reveals it after the phase ends"
    )
    return view


def masked(svc: TaskSource, task_id: str, result: dict[str, Any] | None, patch: bytes | None) -> dict[str, Any] | None:
    """What each viewer may see of `result` (a Result as JSON) for the submission of
    `patch`, every secret line masked: `host` (all of it; `full` is this without the gold
    patch's file names), `tests` and `verdict`, and whether the task's secrets could all be
    read (`complete`: if not, `full` shows what `tests` does). Written with the verdict
    (Submission.shown); `stored_view` reads it."""
    if result is None:
        return None
    secrets = task_secrets(svc, task_id)
    own = own_lines(patch)
    out: dict[str, Any] = {"complete": secrets.complete}
    for name, policy, host in (("host", "full", True), ("tests", "tests", False), ("verdict", "verdict", False)):
        out[name] = redact(feedback_view(result, policy, host=host), secrets.lines, own)
    return out


def stored_view(shown: dict[str, Any], policy: str, *, host: bool) -> dict[str, Any] | None:
    """The result `policy` shows (a host sees all of it), from what `masked` stored: what
    submission_view gives for the same result, secrets and patch. `full` drops the gold
    patch's file names from the host's copy (masking and that commute)."""
    if host:
        return cast("dict[str, Any] | None", shown["host"])
    if policy == "full":
        return feedback_view(shown["host"], "full", host=False)
    return cast("dict[str, Any] | None", shown[policy])


def shown_to(svc: TaskSource, sub: Submission, *, host: bool) -> dict[str, Any]:
    """The submission with its result as its viewer may see it: a host all of it, its
    team what the task's feedback policy shows. The one way a result leaves the server
    (the API, `?wait=`, webhooks, the portal). Reads what `masked` stored with the
    verdict; a submission without a result yet needs no secrets; only a row graded
    before masking was stored (migration 0006) is masked here."""
    if sub.shown is not None or sub.result is None:
        policy = task_feedback(svc, sub.task_id)
        if policy == "full" and sub.shown is not None and not sub.shown["complete"]:
            policy = "tests"
        view = submission_view(sub, full=False)
        view["feedback"] = "full" if host else policy
        view["result"] = stored_view(sub.shown, policy, host=host) if sub.shown is not None else None
        _withhold_timing(view, policy, host=host)
        return _private_split(svc, sub, view, host=host)
    secrets = task_secrets(svc, sub.task_id)
    policy = task_feedback(svc, sub.task_id)
    if policy == "full" and not secrets.complete:
        # lines that cannot be masked must not be quoted: keep to what never quotes a file
        policy = "tests"
    view = submission_view(sub, full=True, secrets=secrets.lines, feedback=policy, host=host)
    return _private_split(svc, sub, view, host=host)


def task_feedback(svc: TaskSource, task_id: str) -> str:
    """The task's policy as it is now (a host may tighten it for past grades too); a task
    that is gone shows only the verdict."""
    try:
        return svc.task(task_id).feedback
    except TaskError:
        return "verdict"


_SECRETS: dict[str, tuple[Secrets, float]] = {}
RETRY_INCOMPLETE = 60.0  # seconds before a task's secrets that could not all be read are read again


def task_secrets(svc: TaskSource, task_id: str) -> Secrets:
    """The secret lines of a task, computed once per task definition (expected files from
    a commit are read from the task as prepared for grading, in the service's cache)."""
    try:
        key = svc.task_hash(task_id)
        task = svc.task(task_id)
    except TaskError as exc:
        return Secrets(frozenset(), (str(exc),))
    known = _SECRETS.get(key)
    if known is not None and (known[0].complete or time.monotonic() - known[1] < RETRY_INCOMPLETE):
        return known[0]
    found = secret_lines(task, svc.settings.cache_dir, key)
    if not found.complete:
        log.warning(
            "task %s: some secrets could not be read (%s); its results are shown to submitters as under "
            "feedback: tests until they can be",
            task_id,
            "; ".join(found.unread),
        )
    _SECRETS[key] = (found, time.monotonic())
    return found
