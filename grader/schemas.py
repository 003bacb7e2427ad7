"""Request and response shapes, shared by the API and the portal. The request models
validate what comes in (422 with the field named when it is wrong), and `read_item` reads
one item of a batch (ours or a SWE-bench prediction) into intake's terms, whichever door
it came by; the response models document what goes out, and the OpenAPI document is built
from both."""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from grader import intake
from grader.intake import Refusal
from grader.metrics import MAX_COST_USD, MAX_SECONDS, MAX_TOKENS, REASONING_LEVELS, USAGE_FIELDS
from grader.tasks.model import PROMPT_VARIANTS
from grader.verdict import Result

Name = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]


def _run_name(raw: str) -> str:
    from grader.names import NameRefused, run_name

    try:
        return run_name(raw)
    except NameRefused as exc:
        raise ValueError(str(exc)) from None


# A run's name: one segment of a URL path, NFC, never shaped like a run's id (grader/names.py)
RunName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=200),
    AfterValidator(_run_name),
]
RUN_NAME_RULE = (
    "letters, digits and marks of any script and - _ . ~ + @ : = , (stored NFC-normalised; "
    "not 16 hex digits, which is a run id's shape)"
)
METADATA_MAX = 16 * 1024  # bytes of JSON


def _small(v: dict[str, Any] | None) -> dict[str, Any] | None:
    import json

    if v is not None and len(json.dumps(v)) > METADATA_MAX:
        raise ValueError("metadata is larger than 16 KiB")
    return v


# What one attempt says of itself, the same wherever it is given: a submission, a SWE-bench
# prediction line, or a batch's defaults for its items.
Trial = Annotated[
    int | None,
    Field(
        None,
        ge=0,
        le=1_000_000,
        description="which attempt of the run this is (0, 1, 2, ...): a run's trials of one task",
    ),
]
# a Literal over the names tasks/model.py keeps in a tuple: pydantic reads it, mypy takes only literals
PromptVariant = Annotated[
    Literal[PROMPT_VARIANTS] | None,  # type: ignore[valid-type]
    Field(None, description="the prompt variant the system was given"),
]
Metadata = Annotated[
    dict[str, Any] | None,
    AfterValidator(_small),
    Field(None, description="free JSON kept with the submission (at most 16 KiB)"),
]
CallbackUrl = Annotated[
    Annotated[str, StringConstraints(max_length=2000)] | None,
    Field(None, description="POSTed the finished submission, signed (X-Grader-Signature)"),
]
# What the attempt cost, as its submitter measured it (GitBench's per-attempt record): each
# optional, finite, never negative, and within grader.metrics' bounds (MAX_*)
CostUsd = Annotated[
    float | None,
    Field(None, ge=0, le=MAX_COST_USD, allow_inf_nan=False, description="what the attempt's model calls cost, in USD"),
]
Tokens = Annotated[int | None, Field(None, ge=0, le=MAX_TOKENS)]
InputTokens = Annotated[Tokens, Field(description="tokens the model read over the attempt (prompt and context)")]
OutputTokens = Annotated[Tokens, Field(description="tokens the model wrote over the attempt (reasoning included)")]
ApiSeconds = Annotated[
    float | None,
    Field(
        None,
        ge=0,
        le=MAX_SECONDS,
        allow_inf_nan=False,
        description="seconds the attempt spent waiting on the model's API (its model time, not its wall clock)",
    ),
]
WallSeconds = Annotated[
    float | None,
    Field(
        None,
        ge=0,
        le=MAX_SECONDS,
        allow_inf_nan=False,
        description="seconds the attempt took from start to end, as its submitter's clock saw them",
    ),
]
ReasoningLevel = Annotated[
    Literal[REASONING_LEVELS] | None,  # type: ignore[valid-type]
    Field(None, description="the model's reasoning effort: " + ", ".join(REASONING_LEVELS)),
]


def _clean(value: Any, where: str = "") -> None:
    """Text that a database could not store faithfully is refused here, with its field named."""
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError(f"{where or 'a string'} contains a NUL character")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{where or 'a string'} is not valid Unicode (a lone surrogate)") from None
    elif isinstance(value, dict):
        for k, v in value.items():
            _clean(k, where)
            _clean(v, f"{where}.{k}" if where else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _clean(v, f"{where}[{i}]")


class _In(BaseModel):
    # strict: JSON's types as they are (false is not 0, "3" is not 3); unknown fields refused
    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _text_only(cls, data: Any) -> Any:
        _clean(data)
        return data

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data: Any) -> Any:
        """An unknown field is refused with the fields the body takes (a misspelt
        `methd` must say what it should have been, not only that it is not allowed)."""
        if cls.model_config.get("extra") != "forbid" or not isinstance(data, dict):
            return data
        unknown = [k for k in data if k not in cls.model_fields]
        if unknown:
            raise PydanticCustomError("unknown_field", "{message}", {"message": unknown_fields(cls, unknown)})
        return data


def unknown_fields(model: type[BaseModel], unknown: list[str]) -> str:
    """'unknown field(s) ...; the fields are ...', with a close match named where there is one."""
    import difflib

    names = list(model.model_fields)
    said = []
    for k in unknown:
        close = difflib.get_close_matches(str(k), names, n=1)
        said.append(repr(k) + (f" (did you mean {close[0]!r}?)" if close else ""))
    allowed = ", ".join(
        n + (" (admin only)" if (f.description or "") == "admin only" else "") for n, f in model.model_fields.items()
    )
    return f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(said)}; the fields are: {allowed}"


class SubmissionIn(_In):
    task_id: Name = Field(description="the task to grade against (GET /v1/tasks)")
    patch: str = Field(
        description="a unified diff (git diff or diff -u), or a series of commits (git format-patch "
        "--stdout output, applied with git am), applied at the task's base commit; "
        "the empty string grades the base as it is"
    )
    run_id: RunName | None = Field(
        None, description=f"groups the submissions of one campaign (system, configuration): {RUN_NAME_RULE}"
    )
    system: Name | None = Field(None, description="the submitting system or model")
    trial: Trial
    prompt_variant: PromptVariant
    metadata: Metadata
    callback_url: CallbackUrl
    cost_usd: CostUsd
    input_tokens: InputTokens
    output_tokens: OutputTokens
    api_seconds: ApiSeconds
    wall_seconds: WallSeconds
    reasoning_level: ReasoningLevel
    phase: Name | None = Field(
        None,
        description="the challenge phase it is submitted to (GET /v1/phases): outside its window 403 "
        "phase_closed, past its limits 429 phase_limit; a run belongs to the phase it was made for",
    )
    overwrite: bool | None = Field(
        None,
        description="a run holds one attempt per task and trial: a single submission that would add a "
        "second is refused (409 attempt_exists) unless it names a new trial, or says overwrite: true, "
        "which takes the earlier attempt out of the run (it stays in your history and quota); "
        "not taken by a batch's items",
    )


class PredictionIn(_In):
    """SWE-bench's prediction format, with the fields of an attempt that a line may also
    carry (trial, prompt_variant, metadata, callback_url, what it cost). Other fields are not kept; the
    batch's answer names them for each item (`ignored`)."""

    model_config = ConfigDict(extra="allow")
    instance_id: Name = Field(description="the task id")
    model_name_or_path: Name | None = Field(None, description="the system; without it, the batch's system")
    model_patch: str | None = Field(None, description="null or empty: graded as the empty patch")
    trial: Trial
    prompt_variant: PromptVariant
    metadata: Metadata
    callback_url: CallbackUrl
    cost_usd: CostUsd
    input_tokens: InputTokens
    output_tokens: OutputTokens
    api_seconds: ApiSeconds
    wall_seconds: WallSeconds
    reasoning_level: ReasoningLevel
    phase: Name | None = Field(None, description="the challenge phase; without it, the batch's")


def problems(exc: ValidationError, where: str = "body") -> tuple[str, list[dict[str, str]]]:
    """A validation error as one message naming each field at fault, and the fields."""
    details = [{"field": ".".join(str(p) for p in e["loc"]) or where, "problem": e["msg"]} for e in exc.errors()]
    summary = "; ".join(f"{d['field']}: {d['problem']}" for d in details[:5])
    return f"invalid {where}: {summary}", details


ATTEMPT_DEFAULTS = (
    "system",
    "trial",
    "prompt_variant",
    "metadata",
    "callback_url",
    "phase",
    "reasoning_level",
)  # a batch's, for its items


@dataclass
class ReadItem:
    """One batch item as read: the submission, or why it is refused; and the fields of a
    SWE-bench prediction that are not kept (said in the answer, never dropped silently)."""

    sub: intake.Item | Refusal
    ignored: list[str] = field(default_factory=list)


def read_item(raw: Any, run_id: str | None, defaults: dict[str, Any]) -> ReadItem:
    """A batch's item (SubmissionIn, or a SWE-bench prediction) in intake's terms, with the
    batch's run and its defaults for what the item does not say; or why it is refused."""

    def item(sub: SubmissionIn) -> intake.Item:
        return intake.Item(**sub.model_dump())

    if not isinstance(raw, dict):
        return ReadItem(Refusal("invalid_fields", "each item must be a JSON object"))
    try:
        if "instance_id" in raw:  # SWE-bench's prediction format
            p = PredictionIn.model_validate(raw)
            own = {
                k: getattr(p, k)
                for k in (*ATTEMPT_DEFAULTS, *USAGE_FIELDS)
                if k != "system" and getattr(p, k) is not None
            }
            sub = SubmissionIn.model_validate(
                {
                    **defaults,
                    **own,
                    "task_id": p.instance_id,
                    "patch": p.model_patch or "",
                    "run_id": run_id,
                    "system": p.model_name_or_path or defaults.get("system"),
                }
            )
            return ReadItem(dataclasses.replace(item(sub), imported=True), sorted(p.model_extra or {}))
        if "overwrite" in raw:
            return ReadItem(
                Refusal(
                    "invalid_fields",
                    "overwrite is for a single submission; to replace a run, DELETE /v1/runs/<run> and send the batch",
                    details=[{"field": "overwrite", "problem": "not taken by a batch's items"}],
                )
            )
        merged = {"run_id": run_id, **defaults, **raw}
        return ReadItem(
            item(SubmissionIn.model_validate({k: v for k, v in merged.items() if v is not None or k in raw}))
        )
    except ValidationError as exc:
        message, details = problems(exc, "item")
        return ReadItem(Refusal("invalid_fields", message, details=details))


class BatchIn(_In):
    run_id: RunName | None = Field(None, description=f"the run of every item (?run_id= overrides it): {RUN_NAME_RULE}")
    system: Name | None = Field(None, description="the system of items that name none")
    trial: Trial = Field(None, ge=0, le=1_000_000, description="the trial of items that give none")
    prompt_variant: PromptVariant = Field(None, description="the prompt variant of items that give none")
    metadata: Metadata = Field(None, description="the metadata of items that give none (at most 16 KiB)")
    callback_url: CallbackUrl = Field(None, description="the callback of items that give none")
    phase: Name | None = Field(None, description="the challenge phase of items that name none (GET /v1/phases)")
    reasoning_level: ReasoningLevel = Field(None, description="the reasoning level of items that give none")
    submissions: list[dict[str, Any]] = Field(description="SubmissionIn or SWE-bench prediction objects")


class ErrorBody(BaseModel):
    code: str
    message: str
    details: list[dict[str, Any]] | None = None


class ErrorOut(BaseModel):
    error: ErrorBody


class VerdictOnly(BaseModel):
    """A result under the `verdict` feedback policy: the verdict and its explanation."""

    task_id: str | None = None
    verdict: Literal["PASS", "FAIL", "PATCH FAILED", "TIMED OUT", "ERROR"]
    explanation: str


class SubmissionOut(BaseModel):
    id: str
    task_id: str
    status: Literal["queued", "running", "done", "cancelled"]
    verdict: Literal["PASS", "FAIL", "PATCH FAILED", "TIMED OUT", "ERROR"] | None
    charged: bool | None = Field(description="whether the verdict counts against the submitter (ERROR never does)")
    cached: bool
    run_id: str | None
    system: str | None
    trial: int | None
    prompt_variant: str | None
    metadata: dict[str, Any] | None
    callback_url: str | None
    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    api_seconds: float | None = None
    wall_seconds: float | None = None
    reasoning_level: str | None = None
    imported: bool = Field(
        False, description="came as a SWE-bench prediction line (instance_id, model_patch); graded here like any other"
    )
    webhook_status: str | None
    attempts: int
    errors: int = Field(description="attempts that ended in a machinery fault and were retried")
    patch_sha256: str
    queued_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    host: str | None = Field(description="the worker that graded it")
    links: dict[str, str]
    feedback: Literal["full", "tests", "verdict", "private"] | None = Field(
        None,
        description="what of the result this view shows: the task's feedback policy, or full for a host "
        "(absent from listings, which show no result); private for a submission to a private phase",
    )
    result: Result | VerdictOnly | None = Field(
        None,
        description="the result when done, as the task's feedback policy shows it: full, the whole record; "
        "tests, without output, diffs, similarity ratio, unlisted tests or evidence; verdict, the "
        "verdict and its explanation; none at all (nor a verdict) for a private phase's",
    )
    withheld: str | None = Field(None, description="why its verdict and result are not shown (a private phase)")


class SubmissionPage(BaseModel):
    items: list[SubmissionOut]
    next_cursor: str | None


class BatchItemOut(BaseModel):
    index: int
    id: str | None = None
    status: str | None = None
    verdict: str | None = None
    error: ErrorBody | None = None
    ignored: list[str] | None = Field(None, description="fields of a SWE-bench prediction that are not kept")


class BatchOut(BaseModel):
    items: list[BatchItemOut]
    accepted: int
    rejected: int
    run_id: str | None


class TaskOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str
    instruction: str


class TaskPage(BaseModel):
    items: list[TaskOut]


class AccountOut(BaseModel):
    team: str
    admin: bool
    quotas: dict[str, int]
    usage: dict[str, int]
    webhook_secret: str = Field(description="verifies the X-Grader-Signature of your callbacks")


class TeamIn(_In):
    name: Annotated[str, StringConstraints(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")]
    admin: bool = False
    daily_quota: int | None = Field(None, ge=0, le=10**9)
    queued_quota: int | None = Field(None, ge=0, le=10**9)


class QuotasIn(_In):
    """A team's quotas as the host sets them: a number, or null for the service's default."""

    daily_quota: int | None = Field(None, ge=0, le=10**9, description="submissions a UTC day; null: the default")
    queued_quota: int | None = Field(None, ge=0, le=10**9, description="queued at once; null: the default")


class TaskValidationIn(_In):
    """One task's validation as `grader tasks validate --json` prints it."""

    task_id: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    suite: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    task_hash: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")] = Field(
        description="the task's definition hash (its definition and every file it references) as validated"
    )
    ok: bool
    flaky: bool
    problems: list[Annotated[str, StringConstraints(max_length=20_000)]] = Field(default_factory=list, max_length=1000)
    empty: list[Annotated[str, StringConstraints(max_length=20)]] = Field(default_factory=list, max_length=100)
    gold: list[Annotated[str, StringConstraints(max_length=20)]] = Field(default_factory=list, max_length=100)

    @property
    def outcome(self) -> str:
        return "valid" if self.ok else "flaky" if self.flaky else "invalid"


class SuiteValidationIn(_In):
    """A validation the host ran elsewhere, recorded: `grader tasks validate --json`'s output,
    of whole suites."""

    grader_version: Annotated[str, StringConstraints(min_length=1, max_length=40)]
    repeat: int = Field(ge=1, le=100, description="runs of the empty and of the gold patch per task")
    tasks: list[TaskValidationIn] = Field(min_length=1, max_length=100_000)


class KeyInfo(BaseModel):
    id: int
    prefix: str = Field(description="the key's first characters: enough to tell keys apart, never to use one")
    created_at: str
    revoked_at: str | None


class KeyPage(BaseModel):
    team: str
    items: list[KeyInfo]


class RegradeOut(BaseModel):
    run: str
    sent: int = Field(description="ERROR attempts sent to be graded again, each replacing its ERROR in the run")
    refused: int


class KeyOut(BaseModel):
    team: str
    key: str = Field(description="shown once; only its hash is kept")


class Health(BaseModel):
    status: str
    checks: dict[str, Any] = {}


class WorkersOut(BaseModel):
    workers: list[dict[str, Any]]
    queue: dict[str, int]


def _link(url: str) -> str:
    """A run's project or paper URL, checked as a callback URL is (grader/webhooks.py:
    http or https, a real host, a valid port, no credentials), without resolving it: the
    service never fetches it, the portal shows it as a link."""
    from grader.webhooks import CallbackRefused, check_url

    try:
        check_url(url, allow_private=True, resolve=False, name="the URL")
    except CallbackRefused as exc:
        raise ValueError(str(exc)) from None
    return url


Url = Annotated[str, StringConstraints(max_length=500, pattern=r"^https?://\S+$"), AfterValidator(_link)]


class PhaseIn(_In):
    """A challenge phase as the host sets it up (PUT /v1/admin/phases/<slug>): a new phase
    needs its name and suite; a phase there is changes in the fields given."""

    name: Name | None = Field(None, description="its title, as the portal shows it")
    suite: Name | None = Field(None, description="the suite whose tasks it takes (GET /v1/tasks?suite=)")
    description: Annotated[str, StringConstraints(max_length=10_000)] | None = Field(
        None, description="what the phase is for, shown on its page"
    )
    # JSON has no datetime: these two are read from ISO 8601 strings (strict elsewhere)
    starts_at: dt.datetime | None = Field(
        None, strict=False, description="when it opens (ISO 8601 with a zone); null: open now"
    )
    ends_at: dt.datetime | None = Field(None, strict=False, description="when it ends; null: never")
    daily_limit: int | None = Field(None, ge=0, le=10**9, description="a team's submissions to it a UTC day")
    total_limit: int | None = Field(None, ge=0, le=10**9, description="a team's submissions to it in all")
    private: bool = Field(  # type: ignore[assignment]
        None, description="scored on a private split: per-task results never shown to participants"
    )
    reveal: bool = Field(  # type: ignore[assignment]
        None, description="a private phase's aggregate figures shown once it has ended"
    )
    auto_publish: bool = Field(  # type: ignore[assignment]
        None, description="a run asking to be public goes on the board at once (else it waits for the host)"
    )


class PhaseOut(BaseModel):
    slug: str
    name: str
    suite: str
    description: str | None
    starts_at: str | None
    ends_at: str | None
    open: bool = Field(description="whether it takes submissions now")
    closed_because: str | None = Field(description="why not, when it does not")
    daily_limit: int | None
    total_limit: int | None
    private: bool
    reveal: bool
    auto_publish: bool
    links: dict[str, str]


class PhasePage(BaseModel):
    items: list[PhaseOut]


class RunPatch(_In):
    """What a team says of its run (and, for an admin key, the host's marks)."""

    method: Annotated[str, StringConstraints(max_length=200)] | None = None
    description: Annotated[str, StringConstraints(max_length=10_000)] | None = None
    project_url: Url | None = None
    paper_url: Url | None = None
    # true or false when given (null is refused: these are never unknown)
    public: bool = None  # type: ignore[assignment]
    baseline: bool = Field(None, description="admin only")  # type: ignore[assignment]
    hidden: bool = Field(None, description="admin only")  # type: ignore[assignment]
    verified: bool = Field(None, description="admin only")  # type: ignore[assignment]


class RunOut(BaseModel):
    id: str = Field(description="the run's public id (a team may also use its run_id)")
    name: str = Field(description="the run_id its submissions carry")
    team: str
    method: str | None
    description: str | None
    project_url: str | None
    paper_url: str | None
    public: bool
    baseline: bool
    hidden: bool
    verified: bool
    created_at: str | None
    published_at: str | None = Field(None, description="when it was first made public (or a baseline)")
    locked: bool = Field(False, description="published once: it takes no more submissions and cannot be deleted")
    phase_id: int | None = Field(None, description="the challenge phase it was made for (views also say its slug)")
    review_requested_at: str | None = Field(
        None,
        description="when its team asked for it to be public in a phase whose host reviews runs first: "
        "it stays private (and locked) until the host verifies it",
    )
    origin: Literal["graded", "imported"] | None = Field(
        None,
        description="where its results came from: graded here as its team sent them (a predictions upload "
        "too), or imported from elsewhere (legacy); null for a run made before this was recorded",
    )
    links: dict[str, str]


class RunPage(BaseModel):
    items: list[RunOut]


class RunView(RunOut):
    submissions: int
    pending: int = Field(description="queued or running: the run is incomplete until they finish")
    errors: int = Field(description="final ERROR attempts: excluded from denominators; the run is incomplete")
    complete: bool
    filters: dict[str, Any]
    suites: list[str] = Field([], description="the suites of the tasks it attempted (its task set's)")
    metrics: dict[str, Any] = Field(
        description="figures with numerator, denominator and 95% interval (resolved, "
        "solve rate, success rate, pass@k); per-task table; breakdowns by "
        "suite, difficulty, language, prompt variant; task_set: the figures "
        "over the suites' whole task set; usage: what the campaign cost (cost, tokens, API and "
        "wall-clock seconds), the mean per complete trial and the total; single_trial: no task "
        "has two valid trials, so stability and pass_any_at_n are null (one trial cannot measure "
        "them); legacy: results imported from elsewhere (the run's origin), not graded here"
    )
    integrity: dict[str, int] | None = Field(
        None, description="for an admin key: grades that showed tampering or audit findings"
    )
    rank: int | None = Field(None, description="on the leaderboard: its rank in its table (None: incomplete)")
    table: str | None = Field(
        None,
        description="on the leaderboard: the task set it is ranked over (its suites, joined by ' + '); "
        "runs of different tables are never ranked together",
    )


class Leaderboard(BaseModel):
    filters: dict[str, Any]
    items: list[RunView] = Field(
        description="a page of the board, in its order: one table per task set (`table`) after another, "
        "each ranked on its own; each run's figures without the per-task table (`metrics.per_task`: "
        "GET /v1/runs/<id> has it), so that a page costs its runs, never their tasks"
    )
    total: int = Field(description="runs on the board (complete ones, and incomplete ones when asked)")
    ranked: int = Field(description="of them, complete and so ranked")
    offset: int
    limit: int
    next_offset: int | None = Field(description="the offset of the next page; null on the last")


class CompareOut(BaseModel):
    a: RunOut
    b: RunOut
    comparison: dict[str, Any] = Field(
        description="common tasks, wins, losses, ties, the solve-rate difference "
        "with a bootstrap interval, McNemar's exact p-value"
    )


class SwebenchReport(BaseModel):
    model_config = ConfigDict(extra="allow")
    total_instances: int | None = None
