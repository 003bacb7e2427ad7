"""After a verdict: wake the requests held for it, and deliver the submission's callback.

`after_finish` runs wherever a submission finishes (a grading job, the reconciler). The
callback is a job of its own on the webhook queue (RQ calls jobs.deliver_webhook, which
hands it to `deliver` here): its body is what the API shows the submitting team
(grader/serializers/), signed and sent by grader/webhooks.py; every attempt is recorded, and a
failed one is retried with backoff up to settings.webhook_retries times.
"""

from __future__ import annotations

import json
import logging

from sqlalchemy.orm import object_session

from grader import webhooks
from grader.errors import StoreError
from grader.handles import Handles
from grader.serializers import shown_to
from grader.store.models import Submission, Team, WebhookDelivery

log = logging.getLogger(__name__)


def after_finish(svc: Handles, submission_id: str) -> None:
    """Wake the requests held for its verdict, and start the callback of a finished
    submission, if it asked for one."""
    svc.announce_done(submission_id)
    with svc.db.write() as s:
        sub = s.get(Submission, submission_id)
        assert sub is not None  # it has just finished
        if not sub.callback_url or sub.webhook_status is not None:
            return
        sub.webhook_status = "pending"
    try:
        svc.enqueue_webhook(submission_id)
    except StoreError as exc:
        log.warning("queueing the callback of %s failed (%s); the reconciler will", submission_id, exc)


def webhook_body(svc: Handles, sub: Submission) -> bytes:
    """The same JSON the API gives its team for GET: the callback URL is the submitter's,
    so the body is what the task's feedback policy shows them (all of it when the
    submitting team is a host), secrets masked the same way."""
    session = object_session(sub)  # the caller's, when it has one open: no second connection
    if session is not None:
        team = session.get(Team, sub.team_id)
    else:
        with svc.db.read() as s:
            team = s.get(Team, sub.team_id)
    view = shown_to(svc, sub, host=bool(team is not None and team.admin))
    return json.dumps({"event": "submission.done", "submission": view}, sort_keys=True).encode()


def deliver(svc: Handles, submission_id: str, attempt: int = 0) -> str:
    """One attempt at a finished submission's callback; the next one is queued with
    backoff while it may still succeed. Returns what happened, for RQ's job result."""
    st = svc.settings
    with svc.db.read() as s:
        sub = s.get(Submission, submission_id)
        if sub is None or sub.webhook_status != "pending" or not sub.callback_url:
            return "nothing to deliver"
        body, url = webhook_body(svc, sub), sub.callback_url
        team = s.get(Team, sub.team_id)
        assert team is not None  # the submission's team_id is a foreign key
        secret = team.webhook_secret
    outcome = webhooks.deliver(
        url,
        body,
        secret,
        timeout=st.webhook_timeout,
        allow_private=st.callback_allow_private,
        delivery_id=f"{submission_id}.{attempt}",
    )
    final = outcome.ok or not outcome.retryable or attempt >= st.webhook_retries
    with svc.db.write() as s:
        s.add(
            WebhookDelivery(
                submission_id=submission_id,
                attempt=attempt,
                status_code=outcome.status_code,
                error=outcome.error,
                ok=outcome.ok,
            )
        )
        if final:
            done = s.get(Submission, submission_id)
            assert done is not None  # read above, and submissions are never deleted
            done.webhook_status = "delivered" if outcome.ok else "failed"
    if not final:
        svc.enqueue_webhook(submission_id, attempt=attempt + 1, delay=st.webhook_backoff * (2**attempt))
        return f"attempt {attempt} failed ({outcome.error}); retrying"
    return "delivered" if outcome.ok else f"failed: {outcome.error}"
