"""The relational record of the service: teams and their keys, every submission with its
result, and every webhook delivery. SQLAlchemy 2 declarative models; the schema is owned
by the Alembic migrations beside this module (a test checks that they agree)."""

from __future__ import annotations

import datetime as dt
from enum import Enum
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    false,
    true,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Status(str, Enum):
    """A submission's place in its life; serializes as itself."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    CANCELLED = "cancelled"

    def __str__(self) -> str:
        return self.value

    @property
    def final(self) -> bool:
        return self in (Status.DONE, Status.CANCELLED)


class Base(DeclarativeBase):
    type_annotation_map = {dt.datetime: DateTime(timezone=True)}


class Team(Base):
    __tablename__ = "teams"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    admin: Mapped[bool] = mapped_column(Boolean, default=False)
    daily_quota: Mapped[int | None] = mapped_column(Integer, nullable=True)
    queued_quota: Mapped[int | None] = mapped_column(Integer, nullable=True)
    webhook_secret: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    keys: Mapped[list[ApiKey]] = relationship(back_populates="team")


# An Integer primary key's range on every database (PostgreSQL's `integer` is 32 bits): an
# id past it names no row, and asking the database for it would be its error, not a miss.
MAX_ROW_ID = 2**31 - 1


def row_id(text: str) -> int | None:
    """The row id a path segment names, or None when it can name none (not ASCII digits, or
    past an Integer key's range)."""
    if not (text.isascii() and text.isdigit()) or len(text) > 10:
        return None
    number = int(text)
    return number if number <= MAX_ROW_ID else None


class ApiKey(Base):
    """Only the SHA-256 of a key is kept: keys are 256-bit random tokens, so a fast hash is
    as strong as a slow one, and lookups stay one indexed equality."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"), index=True)
    prefix: Mapped[str] = mapped_column(String(16))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    revoked_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)

    team: Mapped[Team] = relationship(back_populates="keys")


class Submission(Base):
    __tablename__ = "submissions"
    __table_args__ = (
        UniqueConstraint("team_id", "idempotency_key", name="uq_submissions_idempotency"),
        Index("ix_submissions_status", "status"),
        Index("ix_submissions_run", "run_id", "id"),
        Index("ix_submissions_team", "team_id", "id"),
        Index("ix_submissions_team_queued_at", "team_id", "queued_at"),
        Index("ix_submissions_team_status", "team_id", "status"),  # a team's queued and running, counted by index
        Index("ix_submissions_cache", "task_hash", "patch_sha256"),
        Index("ix_submissions_task_done", "task_hash", "status", "finished_at"),  # cache.current_image
        Index("ix_submissions_phase", "phase_id", "team_id", "queued_at"),  # a team's use of a phase's limits
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)  # time-ordered: paging follows it
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"))
    task_id: Mapped[str] = mapped_column(String(200))
    patch: Mapped[bytes] = mapped_column(LargeBinary)
    patch_sha256: Mapped[str] = mapped_column(String(64))
    task_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    run_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    system: Mapped[str | None] = mapped_column(String(200), nullable=True)
    trial: Mapped[int | None] = mapped_column(Integer, nullable=True)
    prompt_variant: Mapped[str | None] = mapped_column(String(100), nullable=True)
    meta: Mapped[dict[str, Any] | None] = mapped_column("metadata", JSON, nullable=True)
    callback_url: Mapped[str | None] = mapped_column(Text, nullable=True)
    idempotency_key: Mapped[str | None] = mapped_column(String(200), nullable=True)
    request_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)

    status: Mapped[str] = mapped_column(String(16), default=Status.QUEUED.value)
    verdict: Mapped[str | None] = mapped_column(String(16), nullable=True)
    cached: Mapped[bool] = mapped_column(Boolean, default=False)
    attempts: Mapped[int] = mapped_column(Integer, default=0)  # grading attempts started
    errors: Mapped[int] = mapped_column(Integer, default=0)  # of them, ended in ERROR
    job_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    claim_token: Mapped[str | None] = mapped_column(String(32), nullable=True)
    lease_expires_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    host: Mapped[str | None] = mapped_column(String(200), nullable=True)
    queued_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    started_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    finished_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    image_id: Mapped[str | None] = mapped_column(String(100), nullable=True)
    grader_version: Mapped[str | None] = mapped_column(String(40), nullable=True)
    duration: Mapped[float | None] = mapped_column(Float, nullable=True)  # seconds of grading (the result's total)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # Written with the verdict, so that no read needs more (migration 0006). `shown`: the
    # result as each viewer may see it, masked (grader/serializers: masked; None on rows written
    # before, which are masked as they are read). The attempt's metric inputs: the
    # localization figures, and for hosts whether the run was tampered with or flagged.
    shown: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    loc_precision: Mapped[float | None] = mapped_column(Float, nullable=True)
    loc_recall: Mapped[float | None] = mapped_column(Float, nullable=True)
    loc_f1: Mapped[float | None] = mapped_column(Float, nullable=True)
    tampered: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    audit_flagged: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)  # the latest ERROR, while it is retried
    # when its grade first ERRORed: a gold PASS older than this is no evidence against it
    first_error_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    webhook_status: Mapped[str | None] = mapped_column(String(16), nullable=True)  # pending, delivered, failed
    phase_id: Mapped[int | None] = mapped_column(  # migration 0010
        ForeignKey("phases.id", name="fk_submissions_phase_id"), nullable=True
    )
    # What the attempt cost, as its submitter reports it (migration 0011; None: not said):
    # grader/metrics.py: usage sums them per complete trial and over the campaign
    cost_usd: Mapped[float | None] = mapped_column(Float, nullable=True)
    input_tokens: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    output_tokens: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    api_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)  # waiting on the model's API
    wall_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)  # the attempt, start to end
    reasoning_level: Mapped[str | None] = mapped_column(String(16), nullable=True)
    # came as a SWE-bench prediction line (a batch's instance_id form): how it was sent, and
    # graded here like any other; a run of such lines is legacy only if made before runs
    # recorded their origin (Run.origin)
    imported: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    # given back to its team's daily quota (migration 0012): cancelled, never started, when
    # its unpublished run was deleted under GRADER_QUOTA_REFUND_DELETED; it counts no more
    quota_refunded_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)

    deliveries: Mapped[list[WebhookDelivery]] = relationship(back_populates="submission", order_by="WebhookDelivery.id")


class Phase(Base):
    """A challenge's phase (as EvalAI runs them): a suite offered between two times, with
    per-team limits, a leaderboard of its own, and optionally a private split whose
    per-task results its participants never see (migration 0010). Set up by the host
    (PUT /v1/admin/phases/<slug>, `grader phases apply FILE`); grader/phases.py reads it."""

    __tablename__ = "phases"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    slug: Mapped[str] = mapped_column(String(100), unique=True)  # its name in URLs and requests
    name: Mapped[str] = mapped_column(String(200))
    suite: Mapped[str] = mapped_column(String(200))
    description: Mapped[str | None] = mapped_column(Text, nullable=True)
    starts_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)  # None: open from the start
    ends_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)  # None: never closes
    daily_limit: Mapped[int | None] = mapped_column(Integer, nullable=True)  # a team's submissions a UTC day
    total_limit: Mapped[int | None] = mapped_column(Integer, nullable=True)  # a team's submissions in all
    # per-task results never shown to a team (its submissions, its run's per-task table,
    # reports, logs); the aggregate only, and only once the phase ended and `reveal` is set
    private: Mapped[bool] = mapped_column(Boolean, default=False)
    reveal: Mapped[bool] = mapped_column(Boolean, default=False)
    # a run asking to be public goes straight onto the phase's board (else it waits for
    # the host to verify it)
    auto_publish: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class Run(Base):
    """A campaign: every submission of one team with one run_id. Its metadata is what a
    leaderboard shows (as EvalAI does); its figures are computed from the submissions and
    stored with it (migration 0008), computed again when it is read after a change."""

    __tablename__ = "runs"
    __table_args__ = (
        UniqueConstraint("team_id", "name", name="uq_runs_team_name"),
        Index("ix_runs_board", "board_complete", "board_resolved", "board_solve"),
        Index("ix_runs_board_suites", "board_suites", "board_complete", "board_resolved", "board_solve"),
    )

    id: Mapped[str] = mapped_column(String(16), primary_key=True)  # the public id
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"))
    name: Mapped[str] = mapped_column(String(200))  # the run_id the team submits with
    method: Mapped[str | None] = mapped_column(String(200), nullable=True)
    description: Mapped[str | None] = mapped_column(Text, nullable=True)
    project_url: Mapped[str | None] = mapped_column(String(500), nullable=True)
    paper_url: Mapped[str | None] = mapped_column(String(500), nullable=True)
    public: Mapped[bool] = mapped_column(Boolean, default=False)  # the team's choice
    baseline: Mapped[bool] = mapped_column(Boolean, default=False)  # the host's marks
    hidden: Mapped[bool] = mapped_column(Boolean, default=False)
    verified: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    # when it was first shown on the leaderboard (public, or a baseline): from then on it
    # takes no more submissions and cannot be deleted, even if it is made private again
    published_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    # a batch being stored into the run, CHUNK items per transaction (grader/intake.py):
    # until when (renewed by every chunk) and by which request; delete and publish are
    # refused meanwhile, so that a run is never changed under a batch (migration 0007)
    intake_until: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    intake_token: Mapped[str | None] = mapped_column(String(32), nullable=True)
    # Its figures over the whole task set, no filter (grader/runs.py: refresh; the JSON in
    # RunFigures), as of figures_at under the task set figures_key names; stale once a submission of it
    # arrives, finishes or is cancelled, or it is published or hidden (store/runs.py). The
    # board_* columns are what the leaderboard orders by, so that a page of it reads a page.
    figures_stale: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    figures_key: Mapped[str | None] = mapped_column(String(64), nullable=True)
    figures_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    board_listed: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    board_complete: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    board_resolved: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")
    board_solve: Mapped[float] = mapped_column(Float, default=-1.0, server_default="-1")
    board_success: Mapped[float] = mapped_column(Float, default=-1.0, server_default="-1")
    board_attempted: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    board_tasks: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # the suites its figures are over, joined by " + " (migration 0009): the board's table
    # it ranks in, never beside a run over another task set
    board_suites: Mapped[str] = mapped_column(String(500), default="", server_default="")
    # the challenge phase it was submitted to (migration 0010): set when the run is made,
    # never changed; its board is the phase's, and a private phase's rules bind what its
    # team sees of it
    phase_id: Mapped[int | None] = mapped_column(
        ForeignKey("phases.id", name="fk_runs_phase_id"), nullable=True, index=True
    )
    # its team asked for it to be public in a phase whose host reviews runs first
    # (auto_publish off): it stays private, and locked, until the host verifies it
    review_requested_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    # where its results came from (migration 0014; grader/metrics.py: GRADED, IMPORTED):
    # "graded", made by intake and graded here as its team sent them (a predictions upload
    # too), or "imported", results graded elsewhere and brought in (legacy); None for a run
    # made before it was recorded, which keeps the legacy rule of its day
    origin: Mapped[str | None] = mapped_column(String(16), nullable=True)

    team: Mapped[Team] = relationship()


class RunFigures(Base):
    """A run's stored figures (Run.figures_*), apart from the run's narrow row: the
    leaderboard scans and sorts runs, and reads these for its page's runs only. `figures`
    is the run's whole view (its page's); `summary` what the leaderboard shows of it, the
    same without the per-task table (migration 0015), so that a page of the board reads a
    few KB a run however many tasks the runs have."""

    __tablename__ = "run_figures"

    run_id: Mapped[str] = mapped_column(String(16), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    figures: Mapped[dict[str, Any]] = mapped_column(JSON)
    summary: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class SuiteValidation(Base):
    """One validation of a whole suite (`grader tasks validate` with the service's database
    configured, or the host's POST /v1/admin/suites/validations; migration 0013): when, by
    whom, with what repeat count and grader version, how its tasks came out, and which
    tasks it was (each task's definition hash): a suite whose tasks changed since shows so
    (grader/store/validations.py: status)."""

    __tablename__ = "suite_validations"
    __table_args__ = (Index("ix_suite_validations_suite", "suite", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    suite: Mapped[str] = mapped_column(String(200))
    validated_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    recorded_by: Mapped[str] = mapped_column(String(200))  # the command and host, or the host's team
    repeat: Mapped[int] = mapped_column(Integer)  # runs of the empty and of the gold patch per task
    grader_version: Mapped[str] = mapped_column(String(40))
    tasks: Mapped[int] = mapped_column(Integer)  # valid + invalid + flaky
    valid: Mapped[int] = mapped_column(Integer)
    invalid: Mapped[int] = mapped_column(Integer)  # failed validation, the same way each run
    flaky: Mapped[int] = mapped_column(Integer)  # verdicts that changed between runs
    task_set_hash: Mapped[str] = mapped_column(String(64))  # store/validations.py: identity
    # task id -> {"hash": its definition hash, "outcome": valid | invalid | flaky}
    outcomes: Mapped[dict[str, Any]] = mapped_column(JSON)


class WebhookDelivery(Base):
    __tablename__ = "webhook_deliveries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submission_id: Mapped[str] = mapped_column(ForeignKey("submissions.id"), index=True)
    attempt: Mapped[int] = mapped_column(Integer)
    at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    ok: Mapped[bool] = mapped_column(Boolean, default=False)

    submission: Mapped[Submission] = relationship(back_populates="deliveries")
