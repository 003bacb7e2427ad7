"""Intake: what a submission goes through before it is queued, below any door it came by.

Each item is checked (its task, its prompt variant, its callback, its size, its run), its
Idempotency-Key looked up, the team's quotas and the queue's bound counted, and then it
is stored CHUNK at a time and put on the queue, or answered at once from the result cache
(grader/store/cache.py: its one rule, shared with the worker).
What is refused is said by a `Refusal`: what was refused (`reason`, a machine-readable
word) and why (`message`), never an HTTP status; the API maps a reason to its status in
one place (grader/api/errors.py, REFUSAL_STATUS).

A submission is written to the database before it is put on the queue, so that once it
is accepted nothing can lose it: if Redis is away, the reconciler enqueues it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import logging
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from grader import budget, webhooks
from grader.errors import StoreError, TaskNotFound
from grader.handles import Handles
from grader.store import cache
from grader.store import phases as store_phases
from grader.store import runs as store_runs
from grader.store import submissions as subs
from grader.store.models import Phase, Run, Status, Submission, utcnow
from grader.tasks.model import PROMPT_VARIANTS
from grader.version import GRADER_VERSION

log = logging.getLogger(__name__)

MAX_IDEMPOTENCY_KEY = 180  # characters; a longer or blank key is refused

CHUNK = 500  # items stored per write transaction: how long one batch holds the database at a time
# Within this many submissions of GRADER_QUEUE_MAX, intake counts the queue under a lock
# across teams (subs.lock_queue): exact there, and no cost to intake while the queue is far
# from its bound. Far from it, only chunks already counting at once (each at most CHUNK
# items) could overshoot, and more than QUEUE_NEAR / CHUNK = 16 of them would be needed.
QUEUE_NEAR = 16 * CHUNK

# SQLite has no queue of writers: one that finds the database locked sleeps and polls again,
# at most 100 ms apart (SQLite's busy handler). A batch that began its next chunk at once
# would win nearly every poll and starve other teams' writes for seconds; a pause between
# chunks at least as long as that longest poll lets every writer that is waiting in.
# PostgreSQL queues its lock waiters, and locks only the team's row: no pause there.
SQLITE_CHUNK_PAUSE = 0.1

# Seconds a batch holds the runs it is stored into between two of its transactions (each
# renews it): delete and publish are refused meanwhile. A batch whose process died lets go
# when it runs out.
RUN_LEASE = 30.0


class Refusal(Exception):
    """Raised (or returned for one item of a batch) when intake does not take something:
    `reason` says what was refused, in one word the API maps to an HTTP status
    (unknown_task, invalid_fields, invalid_callback_url, patch_too_large, run_locked,
    run_deleted, attempt_exists, withheld, idempotency_conflict, quota_exceeded, queue_full;
    and for a run's changes, grader/publish.py's run_busy, publish_quota, forbidden,
    not_found); `message` says why, to the submitter; `retry_after`, in seconds, when
    trying again later can succeed; `details`, the fields at fault, when the door that read
    the request knows them."""

    def __init__(
        self, reason: str, message: str, *, retry_after: int | None = None, details: list[dict[str, Any]] | None = None
    ):
        super().__init__(message)
        self.reason, self.message, self.retry_after, self.details = reason, message, retry_after, details

    def __repr__(self) -> str:
        return f"Refusal({self.reason!r}, {self.message!r})"


class Submitter(Protocol):
    """The team a submission comes from, as intake needs it (the API's auth.Caller is one)."""

    @property
    def team_id(self) -> int: ...

    @property
    def admin(self) -> bool: ...

    @property
    def daily_quota(self) -> int | None: ...

    @property
    def queued_quota(self) -> int | None: ...


@dataclass(frozen=True)
class Item:
    """One submission as the submitter gave it (the API's SubmissionIn, read)."""

    task_id: str
    patch: str
    run_id: str | None = None
    system: str | None = None
    trial: int | None = None
    prompt_variant: str | None = None
    metadata: dict[str, Any] | None = None
    callback_url: str | None = None
    # replace the run's attempt at this (task, trial) instead of being refused for it
    # (accept's `exclusive`); None, not False, when not asked, so that it is no part of
    # the hash of a request that did not say it
    overwrite: bool | None = None
    phase: str | None = None  # the challenge phase it is submitted to (its slug)
    # what the attempt cost, as its submitter says (grader/schemas.py bounds each)
    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    api_seconds: float | None = None
    wall_seconds: float | None = None
    reasoning_level: str | None = None
    imported: bool | None = None  # came as a SWE-bench prediction (None, not False: see overwrite)

    def request_hash(self) -> str:
        """What an Idempotency-Key is checked against: the item's given fields (as the
        API's SubmissionIn dumps them without its unset ones), hashed."""
        # `imported` is how the item came (a prediction line), not what it says: a retry of
        # a batch taken before the column was kept hashes as it did then
        given = {k: v for k, v in dataclasses.asdict(self).items() if v is not None and k != "imported"}
        return hashlib.sha256(json.dumps(given, sort_keys=True).encode()).hexdigest()


@dataclass
class Accepted:
    """A stored submission (or the first one under its key, `replayed`); `enqueue` is
    False when it needs no worker (replayed, or answered from the cache)."""

    row: Submission
    replayed: bool = False
    enqueue: bool = True


def idempotency_key(raw: str | None) -> str | None:
    """An Idempotency-Key header's value, stripped; a blank or too long one is refused."""
    if raw is None:
        return None
    key = raw.strip()
    if not key or len(key) > MAX_IDEMPOTENCY_KEY:
        raise Refusal("invalid_fields", f"Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} characters")
    return key


# --- quotas --------------------------------------------------------------------------------------
@dataclass
class Quota:
    """How many more submissions may be accepted now, and what to answer once none may."""

    room: int
    reason: Refusal


@budget.timed("intake: quota counts")
def quota(svc: Handles, team: Submitter, s: Session) -> Quota:
    """Counted in the intake's write transaction, under the team's lock (subs.lock_team), so
    that no concurrent request of the team can count the same room; near the queue's bound,
    under the queue's lock too, so that no two teams can count its last room."""
    st = svc.settings
    today, active, queued = subs.intake_counts(s, team.team_id)
    if st.queue_max - queued <= QUEUE_NEAR:
        subs.lock_queue(s)
        queued = subs.count_queued(s)  # again, now that no other team's intake can be counting
    daily = team.daily_quota if team.daily_quota is not None else st.daily_quota
    at_once = team.queued_quota if team.queued_quota is not None else st.queued_quota
    limits = [
        (
            daily - today,
            Refusal(
                "quota_exceeded",
                f"your team's quota of {daily} submissions a day is used up",
                retry_after=seconds_to_midnight(),
            ),
        ),
        (
            at_once - active,
            Refusal(
                "quota_exceeded",
                f"your team already has {active} submissions queued or running; the limit is {at_once}",
                retry_after=30,
            ),
        ),
        (
            st.queue_max - queued,
            Refusal("queue_full", f"the queue is at its bound of {st.queue_max}; retry later", retry_after=30),
        ),
    ]
    room, reason = min(limits, key=lambda r: r[0])  # the binding limit, and what to say when it is reached
    return Quota(max(room, 0), reason)


def refund_room(svc: Handles, s: Session, team_id: int) -> int:
    """How many more of its submissions the team may have given back to its daily quota
    today by deleting unpublished runs (GRADER_QUOTA_REFUND_DELETED a UTC day; 0: the
    service refunds none). Only submissions that never started grading are ever given back
    (subs.withdraw), so a team cannot buy more grades than its quota by deleting runs it
    has seen graded; the bound a day keeps submit-and-delete from storing without end."""
    cap = svc.settings.quota_refund_deleted
    return max(0, cap - subs.count_refunded_today(s, team_id)) if cap else 0


def _phase_room(s: Session, team: Submitter, phase_id: int) -> Quota:
    """How many more submissions the team may send to a phase now (its limits a day and in
    all), counted under the team's lock in the chunk's transaction."""
    phase = store_phases.by_ids(s, {phase_id})[phase_id]
    today, total = store_phases.used(s, phase_id, team.team_id, subs.start_of_day())
    limits = [(1 << 30, Refusal("phase_limit", ""))]
    if phase.daily_limit is not None:
        limits.append(
            (
                phase.daily_limit - today,
                Refusal(
                    "phase_limit",
                    f"your team's {phase.daily_limit} submissions a day to phase {phase.slug!r} are used up",
                    retry_after=seconds_to_midnight(),
                ),
            )
        )
    if phase.total_limit is not None:
        limits.append(
            (
                phase.total_limit - total,
                Refusal(
                    "phase_limit",
                    f"your team has sent phase {phase.slug!r} its {phase.total_limit} submissions in all",
                ),
            )
        )
    room, reason = min(limits, key=lambda r: r[0])
    return Quota(max(room, 0), reason)


def seconds_to_midnight() -> int:
    now = utcnow()
    return int((subs.start_of_day(now) + dt.timedelta(days=1) - now).total_seconds()) + 1


# --- one item ----------------------------------------------------------------------------------
def check(svc: Handles, item: Item) -> Refusal | None:
    """Why `item` cannot be taken as it is (its task, prompt variant, callback, size), or None."""
    try:
        svc.task(item.task_id)
    except TaskNotFound:
        return Refusal("unknown_task", f"no task {item.task_id!r}; GET /v1/tasks lists them")
    if item.prompt_variant is not None and item.prompt_variant not in PROMPT_VARIANTS:
        return Refusal("invalid_fields", f"prompt_variant must be one of {list(PROMPT_VARIANTS)}")
    if item.callback_url is not None:
        try:
            webhooks.check_url(item.callback_url, allow_private=svc.settings.callback_allow_private)
        except webhooks.CallbackRefused as exc:
            return Refusal("invalid_callback_url", str(exc))
    limit = svc.settings.max_patch_bytes
    size = len(item.patch.encode("utf-8"))
    if size > limit:
        return Refusal(
            "patch_too_large", f"the patch is {size} bytes; the limit is {limit} bytes (GRADER_MAX_PATCH_BYTES)"
        )
    return None


def check_phase(svc: Handles, item: Item, phase: Phase | None, *, host: bool) -> Refusal | None:
    """Why `item` cannot go to the phase it names now: no such phase, a task the phase's
    suite does not hold, or outside its window (a host's own submissions are not bound by
    the window, as its runs are not by the lock)."""
    if item.phase is None:
        return None
    if phase is None:
        return Refusal("unknown_phase", f"no phase {item.phase!r}; GET /v1/phases lists them")
    try:
        suite = svc.task(item.task_id).metadata.suite
    except TaskNotFound:
        return Refusal("unknown_task", f"no task {item.task_id!r}; GET /v1/tasks lists them")
    if suite != phase.suite:
        return Refusal(
            "invalid_fields",
            f"task {item.task_id!r} is of suite {suite!r}; phase {phase.slug!r} takes the tasks of "
            f"suite {phase.suite!r}",
        )
    why = None if host else store_phases.closed(phase)
    return Refusal("phase_closed", why) if why else None


def other_phase(name: str, has: str | None, asked: str | None) -> Refusal:
    """A run belongs to the phase it was made for (or to none), for good."""
    where = f"phase {has!r}" if has else "no phase"
    return Refusal(
        "run_phase",
        f"run {name!r} was made for {where}; this item "
        + (f"names phase {asked!r}" if asked else "names no phase")
        + ": submit it to the run's phase, or under a new run id",
    )


def locked(run: Run) -> Refusal:
    """A published run takes no more trials (grader/store/runs.py says why)."""
    return Refusal(
        "run_locked",
        f"run {run.name!r} was published on {run.published_at:%Y-%m-%d} and takes no "
        "more submissions; submit with a new run_id",
    )


def deleted(name: str) -> Refusal:
    """A run deleted while a batch was being stored into it takes no more of the batch."""
    return Refusal(
        "run_deleted",
        f"run {name!r} was deleted while this batch was being stored; this item was not taken "
        "(send it again to begin a new run of that name)",
    )


def attempt_exists(item: Item) -> Refusal:
    """A run holds one attempt per (task, trial): a second one would silently become a
    second trial (a FAIL, then a fixed PASS: a 1-of-2 tie, so the task shows unresolved)."""
    trial = "with no trial number" if item.trial is None else f"as trial {item.trial}"
    return Refusal(
        "attempt_exists",
        f"run {item.run_id!r} already holds an attempt at {item.task_id!r} {trial}; "
        "name a new trial (trial), submit under another run_id, or replace that attempt "
        "(overwrite: true, on a single submission)",
    )


def conflict() -> Refusal:
    return Refusal("idempotency_conflict", "this Idempotency-Key was used before with a different request")


def _prior(prior: Submission, request_hash: str | None, item_hash: str | None = None) -> Accepted | Refusal:
    """What a request answers when its key is taken: the first submission if it is the same
    request. `item_hash`: a batch item's own hash, which is what batches stored before
    whole-batch hashes (grader 0.1 before issue 11) kept, so that their retries still replay."""
    same = prior.request_hash in (request_hash, item_hash)
    return Accepted(prior, replayed=True, enqueue=False) if same else conflict()


def _new_row(svc: Handles, team: Submitter, item: Item, key: str | None, request_hash: str) -> Submission:
    patch = item.patch.encode("utf-8")
    return Submission(
        id=subs.new_id(),
        team_id=team.team_id,
        task_id=item.task_id,
        patch=patch,
        patch_sha256=hashlib.sha256(patch).hexdigest(),
        task_hash=svc.task_hash(item.task_id),
        run_id=item.run_id,
        system=item.system,
        trial=item.trial,
        prompt_variant=item.prompt_variant,
        meta=item.metadata,
        callback_url=item.callback_url,
        cost_usd=item.cost_usd,
        input_tokens=item.input_tokens,
        output_tokens=item.output_tokens,
        api_seconds=item.api_seconds,
        wall_seconds=item.wall_seconds,
        reasoning_level=item.reasoning_level,
        imported=item.imported,
        idempotency_key=key,
        request_hash=request_hash,
        status=Status.QUEUED.value,
        queued_at=utcnow(),
        attempts=0,
        errors=0,
        cached=False,
    )


# --- the cache -----------------------------------------------------------------------------------
@budget.timed("intake: cache lookup")
def _cache_hits(svc: Handles, rows: list[Submission]) -> dict[tuple[str | None, str], Submission]:
    """Earlier grades of these patches, looked up by hash before the write transaction
    begins, under the cache's one rule (grader/store/cache.py): the exact image, which here
    is the image a worker last graded the task in."""
    if not svc.settings.cache:
        return {}
    hits: dict[tuple[str | None, str], Submission] = {}
    with svc.db.rows() as conn:  # a task no worker has graded yet (under this version) has no hit
        images = {h: cache.current_image(conn, h, GRADER_VERSION) for h in {r.task_hash for r in rows if r.task_hash}}
    if not any(images.values()):
        return hits
    with svc.db.read() as s:
        for row in rows:
            pair = (row.task_hash, row.patch_sha256)
            image = images.get(row.task_hash) if row.task_hash else None
            if image is None or row.task_hash is None or pair in hits:
                continue
            hit = cache.lookup(s, row.task_hash, row.patch_sha256, GRADER_VERSION, image)
            if hit is not None:
                hits[pair] = hit
    return hits


def _answer_from_cache(row: Submission, hit: Submission) -> None:
    """`row` finished as `hit` was, with what `hit` stored for reads: its masked views (the
    same patch on the same task definition masks the same) and its metric inputs."""
    now = utcnow()
    row.status, row.verdict, row.result, row.cached = Status.DONE.value, hit.verdict, hit.result, True
    row.started_at = row.finished_at = now
    row.image_id, row.grader_version, row.duration = hit.image_id, hit.grader_version, hit.duration
    row.shown, row.tampered, row.audit_flagged = hit.shown, hit.tampered, hit.audit_flagged
    row.loc_precision, row.loc_recall, row.loc_f1 = hit.loc_precision, hit.loc_recall, hit.loc_f1


# --- accepting -----------------------------------------------------------------------------------
def accept(
    svc: Handles,
    team: Submitter,
    items: Sequence[Item | Refusal],
    keys: Sequence[str | None],
    *,
    batch_hash: str | None = None,
    exclusive: bool = False,
    whole: bool = False,
) -> list[Accepted | Refusal]:
    """Check, de-duplicate by idempotency key, apply quotas, store and enqueue, keeping
    order: each item's answer, where an item given as a Refusal (refused by the door that
    read it) stays refused.

    Items are stored CHUNK at a time, each chunk one write transaction that locks the team,
    re-checks the keys and counts the quota before inserting: a large batch lets other teams'
    requests in between its chunks, and concurrent requests of one team cannot both take the
    last of a quota or both take one key. `batch_hash`: the items are one batch under one key,
    each stored with the whole batch's hash, so that a key reused for a batch that differs in
    any item (or in their number) refuses every item, before anything is stored.
    `exclusive`: an item that would add a second attempt at a (task, trial) its run already
    holds (cancelled ones aside) is refused (`attempt_exists`), unless it asks to `overwrite`,
    which takes the earlier attempt out of the run (it stays the team's, as a deleted run's
    submissions do); counted in the chunk's transaction, under the team's lock. `whole`:
    every item is taken or none is (one refused, the others are answered `withheld`), all
    in one transaction: for a door that must not leave a request half-accepted unless its
    submitter chose so (the portal's upload)."""
    out: list[Accepted | Refusal | None] = [None] * len(items)
    wanted = [k for k in keys if k]
    with budget.stage("intake: keys, runs and phases read"), svc.db.read() as s:
        seen = subs.by_idempotency_key(s, team.team_id, wanted)
        runs = {i.run_id for i in items if isinstance(i, Item) and i.run_id}
        locked_runs = {} if team.admin else store_runs.locked_names(s, team.team_id, runs)
        phases = store_phases.by_slug(s, {i.phase for i in items if isinstance(i, Item) and i.phase})
        run_phases = store_runs.phases_of(s, team.team_id, runs)  # the runs there are: name -> phase id
    slugs = {p.id: p.slug for p in phases.values()}
    todo: list[tuple[int, Submission]] = []
    pairs: dict[int, Item] = {}  # exclusive: the items whose (run, task, trial) is checked
    with budget.stage("intake: checks and the new rows"):
        for n, (item, key) in enumerate(zip(items, keys, strict=True)):
            if isinstance(item, Refusal):
                out[n] = item
                continue
            request_hash = batch_hash or item.request_hash()
            if key and key in seen:
                out[n] = _prior(seen[key], request_hash, item.request_hash() if batch_hash else None)
                continue
            if item.run_id in locked_runs:
                out[n] = locked(locked_runs[item.run_id])
                continue
            phase = phases.get(item.phase) if item.phase else None
            refused = check(svc, item) or check_phase(svc, item, phase, host=team.admin)
            if refused is None and item.run_id:
                asked = phase.id if phase else None
                has = run_phases.setdefault(item.run_id, asked)  # a new run: its first item's phase
                if has != asked:
                    named = None if has is None else slugs.get(has) or _slug(svc, has)
                    refused = other_phase(item.run_id, named, item.phase)
            if refused is not None:
                out[n] = refused
                continue
            row = _new_row(svc, team, item, key, request_hash)
            row.phase_id = phase.id if phase else None
            todo.append((n, row))
            if exclusive and item.run_id:
                pairs[n] = item
    if batch_hash and any(isinstance(o, Refusal) and o.reason == "idempotency_conflict" for o in out):
        return [o if isinstance(o, Refusal) and o.reason == "idempotency_conflict" else conflict() for o in out]
    if whole and any(isinstance(o, Refusal) for o in out):
        return _withhold(out)
    fresh: list[Accepted] = []
    if todo:
        hits = _cache_hits(svc, [row for _, row in todo])
        names = {row.run_id for _, row in todo if row.run_id}
        # one chunk is one transaction, which takes the team's lock as delete and publish
        # do; a batch of several holds its runs between them too (store_runs.Lease)
        lease = store_runs.Lease(secrets.token_hex(16), RUN_LEASE) if len(todo) > CHUNK and names else None
        run_ids = store_runs.ensure_runs(
            svc.db, team.team_id, names, lease=lease, phases={n: run_phases.get(n) for n in names}
        )
        began = {name: run_ids.get(name) for name in names}
        size = len(todo) if whole else CHUNK  # whole: one transaction, taken or refused as one
        try:
            for at in range(0, len(todo), size):
                if at and svc.db.is_sqlite:
                    time.sleep(SQLITE_CHUNK_PAUSE)
                fresh += _store(svc, team, todo[at : at + size], hits, out, began, lease, pairs, whole=whole)
        finally:
            if lease:
                try:
                    lease.release(svc.db, set(run_ids.values()))
                except StoreError as exc:  # it runs out by itself
                    log.warning("giving back the runs' intake lease failed (%s); it runs out in %g s", exc, RUN_LEASE)
    for acc in fresh:
        if acc.row.webhook_status == "pending":
            _after_cached(svc, acc.row.id)
    queued = [(a.row.id, a.row.job_id, a.row.task_id) for a in fresh if a.enqueue]
    if queued:
        try:
            with budget.stage("intake: enqueue (Redis)"):
                svc.enqueue_many(queued)
        except StoreError as exc:  # stored already: the reconciler will enqueue them
            log.warning("enqueueing %d submission(s) failed (%s); the reconciler will", len(queued), exc)
    return cast("list[Accepted | Refusal]", out)  # every item is answered by now


def _slug(svc: Handles, phase_id: int) -> str | None:
    with svc.db.read() as s:
        found = store_phases.by_ids(s, {phase_id}).get(phase_id)
        return found.slug if found else None


def _store(
    svc: Handles,
    team: Submitter,
    chunk: list[tuple[int, Submission]],
    hits: dict[tuple[str | None, str], Submission],
    out: list[Accepted | Refusal | None],
    began: dict[str, str | None],
    lease: store_runs.Lease | None,
    pairs: dict[int, Item],
    *,
    whole: bool = False,
) -> list[Accepted]:
    """One write transaction for `chunk`; the rows it stored. Under the team's lock a key
    taken since the read above is seen here; should an insert still collide on one (the
    unique index is the last word), the chunk is tried again and its keys answered then.
    Under that lock too, the chunk's runs are read again: one deleted or published since
    the batch began (`began`: their ids then) takes none of its items; and the attempts
    the runs hold are read for the items of `pairs` (accept's `exclusive`)."""
    cached = [hits.get((row.task_hash, row.patch_sha256)) for _, row in chunk]
    names = {row.run_id for _, row in chunk if row.run_id}

    def work(s: Session) -> dict[int, Accepted | Refusal]:
        """The chunk's answers, decided and stored in `s` (it may be run again: it changes
        nothing but the session, and makes its rows anew from their templates)."""
        answers: dict[int, Accepted | Refusal] = {}
        with budget.stage("intake: the team's lock"):
            subs.lock_team(s, team.team_id)
        changed = store_runs.changed_under(s, team.team_id, {n: began.get(n) for n in names}, admin=team.admin)
        if lease:
            lease.renew(s, {run_id for n in names - set(changed) if (run_id := began.get(n))})
        seen = subs.by_idempotency_key(s, team.team_id, [r.idempotency_key for _, r in chunk if r.idempotency_key])
        room = quota(svc, team, s)
        held = subs.attempts_held(s, team.team_id, {p.run_id for p in pairs.values() if p.run_id})
        taken: set[subs.Pair] = set()
        phase_rooms: dict[int, Quota] = {}
        add = []
        with budget.stage("intake: each row against the keys, runs and room"):
            for (n, template), hit in zip(chunk, cached, strict=True):
                if template.idempotency_key in seen:
                    answers[n] = _prior(seen[template.idempotency_key], template.request_hash)
                    continue
                if template.run_id in changed:
                    run = changed[template.run_id]
                    answers[n] = locked(run) if run is not None else deleted(template.run_id)
                    continue
                given = pairs.get(n)
                pair = (template.run_id, template.task_id, template.trial)
                if given is not None and (pair in taken or (pair in held and not given.overwrite)):
                    answers[n] = attempt_exists(given)  # one attempt per pair, this request's own too
                    continue
                if room.room <= 0:
                    answers[n] = room.reason
                    continue
                if template.phase_id is not None and not team.admin:
                    limit = phase_rooms.get(template.phase_id) or _phase_room(s, team, template.phase_id)
                    phase_rooms[template.phase_id] = limit
                    if limit.room <= 0:
                        answers[n] = limit.reason
                        continue
                    limit.room -= 1
                room.room -= 1
                if given is not None:
                    subs.detach(s, team.team_id, held.pop(pair, []))
                    taken.add(pair)
                row = _copy(template)
                if hit is not None:
                    _answer_from_cache(row, hit)
                    row.webhook_status = "pending" if row.callback_url else None  # notify.after_finish's move
                else:
                    row.job_id = subs.new_job_id(row.id)
                answers[n] = Accepted(row, enqueue=hit is None)
                add.append(row)
        if whole and any(isinstance(a, Refusal) for a in answers.values()):
            raise _Withheld(answers)  # rolls this transaction back: nothing of the request is stored
        with budget.stage("intake: insert"):
            subs.insert_many(s, add)
            store_runs.mark_stale(s, team.team_id, {row.run_id for row in add if row.run_id})
        return answers

    for attempt in range(3):
        try:
            answers = svc.db.write_shared(work, key=team.team_id)  # PostgreSQL: the team's lock, taken once
        except _Withheld as exc:
            for n, answer in exc.answers.items():
                out[n] = answer
            _withhold(out)
            return []
        except StoreError as exc:
            if not isinstance(exc.__cause__, IntegrityError) or attempt == 2:
                raise
            log.info("intake collided on an Idempotency-Key; reading the keys again")
            continue
        for n, answer in answers.items():
            out[n] = answer
        return [a for a in answers.values() if isinstance(a, Accepted) and not a.replayed]
    raise AssertionError("unreachable")


class _Withheld(Exception):
    """Raised inside a `whole` request's transaction when an item of it is refused there:
    the transaction rolls back, and nothing of the request is stored. `answers`: what each
    item was answered there."""

    def __init__(self, answers: dict[int, Accepted | Refusal]):
        super().__init__("withheld")
        self.answers = answers


def withheld(refused: int) -> Refusal:
    return Refusal(
        "withheld",
        f"not taken: {refused} other item(s) of this request were refused, and a request that asks "
        "for every item or none takes none of them",
    )


def _withhold(out: list[Accepted | Refusal | None]) -> list[Accepted | Refusal]:
    """A `whole` request with a refused item: every item that would have been taken is
    answered `withheld` instead (replays of earlier requests stay answered as they are)."""
    refused = sum(1 for o in out if isinstance(o, Refusal))
    for n, o in enumerate(out):
        if o is None or (isinstance(o, Accepted) and not o.replayed):
            out[n] = withheld(refused)
    return cast("list[Accepted | Refusal]", out)


def _copy(row: Submission) -> Submission:
    """A new row with the template's columns, for one attempt at storing it: an attempt that
    rolls back must leave the template as it was."""
    return Submission(**{c.key: getattr(row, c.key) for c in Submission.__mapper__.column_attrs})


def _after_cached(svc: Handles, submission_id: str) -> None:
    """Queue the callback of a submission answered from the cache (marked pending as it was stored)."""
    try:
        svc.enqueue_webhook(submission_id)
    except StoreError as exc:
        log.warning("queueing the callback of cached %s failed (%s); the reconciler will", submission_id, exc)
