"""Settings: documented defaults, then `GRADER_*` environment variables, then explicit
arguments. This is the only module that reads the environment for the grader's own
settings (the Docker SDK still honours DOCKER_HOST on its own)."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from grader.errors import ConfigError

SYSTEM_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")

# --- defaults that are not settings ---------------------------------------------------------
# Each is written here once and read where it is used; no GRADER_* variable changes them.

# A task's limits when its task file gives none (docs/tasks.md), and so a grading run's.
DEFAULT_TIMEOUT = 60.0  # wall-clock seconds for the container's whole life
DEFAULT_MEMORY = "1g"
DEFAULT_CPUS = 1.0
DEFAULT_PIDS = 256
# Where `grader serve` listens unless told otherwise, and so where a client looks.
API_BIND = "127.0.0.1:8000"


def _data_home() -> Path:
    return Path.home() / ".local" / "share" / "grader"


def _default_database_url() -> str:
    return f"sqlite:///{_data_home() / 'grader.db'}"


def _default_ca_bundle() -> Path | None:
    return SYSTEM_CA_BUNDLE if SYSTEM_CA_BUNDLE.is_file() else None


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="GRADER_", extra="ignore")

    tasks_dir: Path = Field(Path("tasks"), description="where task YAML files are found (searched recursively)")
    environments_dir: Path = Field(
        Path("environments"), description="one sub-directory per environment, each with a Dockerfile"
    )
    cache_dir: Path = Field(Path.home() / ".cache" / "grader", description="prepared task checkouts and build contexts")
    runtime: str = Field("runc", description="the OCI runtime for grading containers: runc, or runsc for gVisor")
    max_patch_bytes: int = Field(1024 * 1024, description="larger patches are PATCH FAILED without being looked at")
    output_limit_bytes: int = Field(64 * 1024, description="test output kept in a result (head and tail)")
    report_limit_bytes: int = Field(8 * 1024 * 1024, description="largest JUnit report read back from a run")
    ca_bundle: Path | None = Field(
        default_factory=_default_ca_bundle,
        description="PEM bundle given to image builds (pip behind a TLS-intercepting proxy); empty to give none",
    )
    debian_mirror: str | None = Field(
        None, description="mirror for `images bootstrap`; default: read from apt's sources"
    )
    tmpfs_size: str = Field("256m", description="size of the writable /tmp inside grading containers")
    storage_size: str = Field("2G", description="writable-layer cap, applied where the storage driver supports it")
    file_size_limit: int = Field(256 * 1024 * 1024, description="RLIMIT_FSIZE for processes in grading containers")
    prewarm: int = Field(4, description="run shapes (task and limits) kept started ahead of demand; 0 turns it off")
    prewarm_next: bool = Field(
        True,
        description="a worker starts a container for the task of the next job in its queue while it grades "
        "(a suite of many tasks otherwise starts each grade's container cold)",
    )
    affinity: bool = Field(
        True,
        description="a worker takes, from the first jobs of its next queue, one whose task's container (or keeper) "
        "it holds idle before the head, each head passed over at most a few times (grader/jobs.py: take_warm)",
    )
    network_lanes: bool = Field(
        True,
        description="a worker's grading containers join network namespaces it made once, one run in each at a "
        "time, instead of Docker making one per container; under the pool provider its keepers share one "
        "(grader/sandbox/docker/lanes.py; docs/security.md)",
    )
    pool_fork: bool = Field(
        True,
        description="under the pool provider (GRADER_RUNTIME=pool), a check's `python -m pytest` is forked from a "
        "pytest loaded once per keeper; the test process then starts as a copy of the supervisor's memory "
        "(docs/security.md, the pool provider)",
    )
    pool_keepers: int = Field(
        32,
        ge=1,
        description="under the pool provider, the idle keepers (long-lived containers, one a task shape) a worker "
        "process keeps for its next grades, the least recently used removed beyond it",
    )
    build_missing_images: bool = Field(True, description="build a task's instance image on demand when it is missing")
    audit: Literal["flag", "fail"] = Field(
        "flag",
        description="what the static audit's findings (a patch reaching into the test runner or the "
        "interpreter) do: flag records them on the result, fail also makes the verdict FAIL",
    )

    # --- the service -------------------------------------------------------------------
    mode: Literal["development", "production"] = Field(
        "development", description="production refuses to start without its secrets set and hides error details"
    )
    secret_key: SecretStr | None = Field(
        None, description="signs portal sessions; required in production (no default is shipped)"
    )
    database_url: str = Field(
        default_factory=_default_database_url,
        description="SQLAlchemy URL; SQLite (WAL mode) by default, postgresql+psycopg://... for several hosts",
    )
    redis_url: str = Field("redis://127.0.0.1:6379/0", description="the Redis server that holds the queue")
    queue_name: str = Field("grader", description="the RQ queue of grading jobs (webhooks use NAME-webhooks)")
    queue_max: int = Field(50_000, description="submissions queued at once across all teams; above it POST answers 503")
    max_wait: float = Field(60.0, description="the longest ?wait= a request may hold for its verdict, in seconds")
    ingest_bytes_per_second: float = Field(
        8 * 1024 * 1024,
        ge=0,
        description="bytes of request bodies a team may send a second, across the service, "
        "after a burst of max_request_bytes (0: no bound); past it 429 before "
        "the body is read, Retry-After saying when it would fit",
    )
    max_inflight_per_team: int = Field(
        12,
        ge=1,
        description="requests of one team in progress at once on one API process; past it "
        "429 at once, so that the process's other threads stay free for other teams; "
        "`grader serve` keeps it at least 4 below its threads",
    )
    max_inflight_anonymous: int = Field(
        2,
        ge=1,
        description="requests naming no team (no key, no portal session: readers of the public "
        "leaderboard and pages) in progress at once on one API process, all of them together; past "
        "it 429 at once",
    )
    public_cache_seconds: float = Field(
        60.0,
        ge=0,
        description="an anonymous read of the leaderboard (API and portal) is answered with what another "
        "anonymous read of the same board got this recently, if anything (any change to the board is a new "
        "one; 0: never)",
    )
    max_waiting_per_team: int = Field(
        8,
        ge=0,
        description="requests of one team held for their verdict at once, across the service; past it "
        "?wait= is answered at once (202, header Grader-Wait) and the client polls",
    )
    max_waiting_per_process: int = Field(
        8,
        ge=0,
        description="requests held for their verdict at once by one API process; `grader serve` keeps it "
        "at least 4 below its threads, so requests that do not wait always find one",
    )
    proxied: bool = Field(
        False,
        description="the API is reached through a buffering proxy that reads every body whole first "
        "(grader proxy config): an answer given before a body was read (a refusal from the headers) "
        "reads the rest first, so that the proxy's connection ends cleanly instead of being reset",
    )
    max_request_bytes: int = Field(
        64 * 1024 * 1024, description="largest request body (a batch of patches); larger is 413"
    )
    database_pool: int = Field(
        16,
        ge=1,
        description="database connections a process keeps open for its threads (and up to 10 more at "
        "a busy moment, closed again after it); `grader serve` keeps it at least its threads, since a "
        "pool smaller than the threads that query at once opens and closes connections all the time",
    )
    budget_dir: Path | None = Field(
        None,
        description="a measurement, off by default: each API process writes the CPU and wall time of its "
        "requests' stages here (grader/budget.py; benchmarks/throughput.py reads them)",
    )
    max_publish_per_day: int = Field(
        10,
        ge=0,
        description="runs a team may publish (make public for the first time) a UTC day; past it 429 "
        "(hosts are not bound): every published run is one more on every reader's leaderboard",
    )
    max_archive_bytes: int = Field(
        64 * 1024 * 1024,
        ge=1024,
        description="contents of one archive of a run's logs (GET /v1/runs/<id>/logs); a larger run "
        "comes in pages (Link: rel=next)",
    )
    archive_cache_bytes: int = Field(
        2 * 1024**3,
        ge=0,
        description="archives of runs' logs kept on disk (in cache_dir/archives) for the next download "
        "of the same state; past it the least recently served go",
    )
    signup: Literal["off", "open"] = Field(
        "off",
        description="open: anyone may make a team and its first key on the portal's /signup page "
        "(bounded per address and per day below); off: only the host makes teams",
    )
    signup_per_address: int = Field(3, ge=0, description="teams one client address may sign up a UTC day")
    signup_per_day: int = Field(100, ge=0, description="teams the whole service takes by sign-up a UTC day")
    signup_daily_quota: int = Field(
        1_000, ge=0, description="a signed-up team's submissions a UTC day, until the host sets its own"
    )
    signup_queued_quota: int = Field(200, ge=0, description="a signed-up team's submissions queued at once")
    max_batch_items: int = Field(10_000, description="most submissions in one batch request")
    daily_quota: int = Field(20_000, description="default submissions per team per UTC day (a team may have its own)")
    queued_quota: int = Field(10_000, description="default submissions a team may have queued at once")
    quota_refund_deleted: int = Field(
        0,
        ge=0,
        description="submissions a team may get back in its daily quota a UTC day by deleting runs it never "
        "published (0: none, the default): deleting such a run cancels its queued submissions, and those of "
        "them sent today that never started grading count no more, up to this many a day; a submission that "
        "was graded, or began to be, always counts",
    )
    max_retries: int = Field(3, description="times an ERROR is retried before the gold patch judges whose fault it is")
    retry_backoff: float = Field(10.0, description="seconds before the first ERROR retry; doubled each time")
    max_attempts: int = Field(
        5,
        description="grades started per submission (ERROR retries and re-queues after a lost worker alike); "
        "past it the submission is judged by the gold patch without another grade",
    )
    retry_budget: int = Field(
        100, description="ERROR retries across the service per retry_window; past it an ERROR is judged at once"
    )
    retry_window: float = Field(60.0, gt=0, description="seconds of the retry budget's window")
    gold_ttl: float = Field(
        300.0,
        description="seconds a gold patch's grade (per host, task, image, grader version) answers whose fault "
        "an ERROR is, and a gold that ERRORed keeps that task's ERRORs from retrying; 0: no reuse",
    )
    job_timeout_margin: float = Field(
        900.0, description="added to a task's timeout for the RQ job (image builds, start-up)"
    )
    lease_seconds: float = Field(
        60.0, description="a running submission whose worker has not renewed it this long is re-queued"
    )
    reconcile_interval: float = Field(30.0, description="seconds between reconciler passes in `grader worker`")
    worker_environments: str = Field(
        "auto",
        description="the environments whose grades this host's workers take (each environment has a queue of its "
        "own): auto, those whose environment image this host's engine has, looked at every 10 s (a host without "
        "it takes none of its grades until it has it: `grader env import`); all; or names, comma-separated",
    )
    host_name: str | None = Field(
        None,
        description="this host's name in claims (a submission's `host`), worker names, /readyz and the gold "
        "cache; default: the machine's hostname (set it when several hosts share one machine or hostname)",
    )
    cache: bool = Field(
        True, description="answer a submission from an identical finished grade (same task, patch, image, version)"
    )
    webhook_timeout: float = Field(10.0, description="seconds a callback POST may take")
    webhook_retries: int = Field(
        6, description="callback attempts after the first, on timeouts, connection errors, 429 and 5xx"
    )
    webhook_backoff: float = Field(5.0, description="seconds before the first callback retry; doubled each time")
    callback_allow_private: bool = Field(
        False, description="allow callback URLs that resolve to loopback, private or link-local addresses"
    )
    api_url: str = Field(f"http://{API_BIND}", description="where `grader submit` and `grader status` find the service")
    api_key: SecretStr | None = Field(None, description="the key `grader submit` and `grader status` send")

    @property
    def database_configured(self) -> bool:
        """Whether the settings name a database other than the default one (GRADER_DATABASE_URL
        set): a command run on the host writes into the service's store unasked only then."""
        return self.database_url != _default_database_url()

    def masked(self) -> dict[str, object]:
        """Every setting as JSON values, with secrets and URL passwords masked (for `grader config`, logs)."""
        out = self.model_dump(mode="json")
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, SecretStr):
                out[name] = "********"
            elif isinstance(value, str) and name.endswith("_url"):
                out[name] = mask_url(value)
        return out

    def require_production_secrets(self) -> None:
        """Raised ConfigError unless production has what it must not default (Judge0's CVE-2024-29021)."""
        if self.mode != "production":
            return
        problems = []
        key = self.secret_key.get_secret_value() if self.secret_key else ""
        if len(key) < 32:
            problems.append("GRADER_SECRET_KEY must be set to at least 32 random characters")
        if self.callback_allow_private:
            problems.append("GRADER_CALLBACK_ALLOW_PRIVATE must be off (callbacks could reach internal services)")
        if problems:
            raise ConfigError("refusing to start in production mode: " + "; ".join(problems))


def mask_url(url: str) -> str:
    """`scheme://user:secret@host/...` -> `scheme://user:****@host/...`."""
    return re.sub(r"^([a-z0-9+.-]+://[^:/@]*:)[^@]*@", r"\1****@", url, flags=re.I)


@lru_cache(maxsize=1)
def _from_env() -> Settings:
    return Settings()


def get_settings(**overrides: Any) -> Settings:
    """The effective settings: defaults <- GRADER_* environment <- `overrides` (None values ignored)."""
    given = {k: v for k, v in overrides.items() if v is not None}
    if not given:
        return _from_env()
    # validated like the environment's values (a str becomes a SecretStr, "5" an int)
    return Settings(**{**_from_env().model_dump(), **given})
