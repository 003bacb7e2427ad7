"""/v1/runs, /v1/leaderboard, /v1/compare: campaigns and their figures. Public runs are
readable without a key; a team sees its own runs whatever their visibility."""

from __future__ import annotations

from collections.abc import Callable

from flask import Blueprint, Response, current_app, g, jsonify, request
from pydantic import ValidationError

from grader import publish
from grader import runs as R
from grader.api import auth
from grader.api.errors import ApiError, json_body, refused, validation_error
from grader.handles import Handles
from grader.intake import Refusal, refund_room
from grader.schemas import RunPatch
from grader.store import phases as store_phases
from grader.store import runs as store_runs
from grader.store import submissions as subs
from grader.store.models import Phase, Run, Team

bp = Blueprint("runs", __name__)


def _svc() -> Handles:
    svc: Handles = current_app.extensions["grader"]
    return svc


def filters() -> R.Filters:
    try:
        return R.check_filters(_svc(), R.parse_filters(request.args))
    except R.FilterError as exc:
        raise ApiError(422, "invalid_fields", str(exc)) from None


def _caller_ids() -> tuple[int | None, bool]:
    c = auth.optional()
    g.caller = c
    return (c.team_id, c.admin) if c else (None, False)


def _find_run(ref: str, team_id: int | None, admin: bool, allowed: Callable[..., bool]) -> Run:
    """The run `ref` names for the caller, when `allowed` (store_runs.may_see or .owns)
    gives it to them; otherwise 404, the same as a run that does not exist."""
    with _svc().db.read() as s:
        run = store_runs.find(s, ref, team_id=team_id)
    if run is None or not allowed(run, team_id=team_id, admin=admin):
        raise ApiError(404, "not_found", f"no run {ref!r}")
    return run


def load_run(ref: str) -> Run:
    """A run the caller may see: their team's, or one on the leaderboard (no key needed)."""
    return _find_run(ref, *_caller_ids(), store_runs.may_see)


@bp.get("/v1/runs")
def index() -> Response:
    svc = _svc()
    team_id, admin = _caller_ids()
    with svc.db.read() as s:
        runs = store_runs.visible(s, team_id=team_id, admin=admin)
        teams = {t.id: t for t in s.query(Team).all()}
        items = [R.run_meta(r, teams[r.team_id]) for r in runs]
    return jsonify({"items": items})


@bp.get("/v1/runs/<run>")
def show(run: str) -> Response:
    found = load_run(run)
    host = bool(getattr(g, "caller", None) and g.caller.admin)
    return jsonify(R.for_viewer(_svc(), R.run_view(_svc(), found, filters(), host=host), host=host))


def not_private(run: Run) -> None:
    """403 for a private phase's run, to anyone but the host: its per-task results."""
    why = R.private_refusal(_svc(), run, host=bool(getattr(g, "caller", None) and g.caller.admin))
    if why:
        raise ApiError(403, "private_phase", why)


def own_run(ref: str) -> Run:
    """A run of the caller's own team (any run, for the host): what only its team may
    change or read the patches of, whether or not it is public."""
    return _find_run(ref, g.caller.team_id, g.caller.admin, store_runs.owns)


@bp.patch("/v1/runs/<run>")
@auth.required
def update(run: str) -> Response:
    svc = _svc()
    found = own_run(run)
    try:
        patch = RunPatch.model_validate(json_body())
    except ValidationError as exc:
        raise validation_error(exc) from None
    try:
        return jsonify(publish.change(svc, found, patch.model_dump(exclude_unset=True), admin=g.caller.admin))
    except Refusal as exc:
        raise refused(exc) from None


@bp.post("/v1/admin/runs/<run>/regrade")
@auth.admin_required
def regrade(run: str) -> Response:
    """The host re-grades a run's ERRORs (faults of the grader): each ERROR attempt sent
    again as it was, replacing its ERROR in the run (grader/publish.py)."""
    found = _find_run(run, g.caller.team_id, True, store_runs.owns)
    sent, refused_ = publish.regrade_errors(_svc(), found)
    return jsonify({"run": found.id, "sent": sent, "refused": refused_})


@bp.delete("/v1/runs/<run>")
@auth.required
def delete(run: str) -> Response:
    """Deletes a run that was never published: the run goes, its submissions stay the
    team's (and in its quota) with no run, and the run_id can be used again. Only the
    run's own team; after publication 409 (the host may hide it instead). Where the host
    refunds deleted runs (GRADER_QUOTA_REFUND_DELETED), its queued submissions are
    cancelled and those never graded are given back to today's quota, within the bound a
    day (intake.refund_room)."""
    svc = _svc()
    found = own_run(run)
    if found.team_id != g.caller.team_id:
        raise ApiError(403, "forbidden", "only the run's own team deletes it; the host hides a run (PATCH hidden)")
    with svc.db.write() as s:
        subs.lock_team(s, found.team_id)  # as a batch's chunk does: deleting waits for one being stored
        row = s.get(Run, found.id)
        if row is None:
            raise ApiError(404, "not_found", f"no run {run!r}")
        try:
            publish.not_storing(row, "deleted")
        except Refusal as exc:
            raise refused(exc) from None
        if store_runs.locked(row):
            raise ApiError(
                409,
                "run_locked",
                f"run {row.name!r} was published on {row.published_at:%Y-%m-%d}; a "
                "published run cannot be deleted (the host can hide it)",
            )
        team = s.get(Team, row.team_id)
        assert team is not None  # the run's team_id is a foreign key
        meta = R.run_meta(row, team)
        withdrawn = subs.Withdrawn([], 0)
        if svc.settings.quota_refund_deleted:
            withdrawn = subs.withdraw(s, row.team_id, row.name, refund=refund_room(svc, s, row.team_id))
        detached = store_runs.delete(s, row)
    for sid, job_id in withdrawn.cancelled:
        svc.cancel_job(job_id)
        svc.announce_done(sid)
    return jsonify(
        {
            "deleted": meta,
            "submissions_detached": detached,
            "submissions_cancelled": len(withdrawn.cancelled),
            "quota_refunded": withdrawn.refunded,
        }
    )


@bp.get("/v1/runs/<run>/report")
def report(run: str) -> Response:
    ref = run
    fmt = request.args.get("format", "swebench")
    if fmt != "swebench":
        raise ApiError(422, "invalid_fields", "format must be 'swebench'")
    svc = _svc()
    found = load_run(ref)
    not_private(found)
    with svc.db.read() as s:
        rows = store_runs.submissions_of(s, found)
        subs = [
            {
                "task_id": r.task_id,
                "verdict": r.verdict,
                "status": r.status,
                "patch_sha256": r.patch_sha256,
                "trial": r.trial,
            }
            | R.usage_row(r)
            for r in rows
        ]
    return jsonify(R.swebench_report(subs, R.suite_tasks(svc, rows)))


@bp.get("/v1/runs/<run>/predictions")
@auth.required
def predictions(run: str) -> Response:
    """The run's patches as SWE-bench predictions (a JSON list, which SWE-bench's harness
    reads as a .json predictions file). Its own team's only: a public run shows its
    figures, never its patches."""
    svc = _svc()
    found = own_run(run)
    not_private(found)
    with svc.db.read() as s:
        rows = [
            {
                "task_id": r.task_id,
                "system": r.system,
                "patch": r.patch.decode("utf-8"),
                "status": r.status,
                "verdict": r.verdict,
                "trial": r.trial,
            }
            | R.usage_row(r)
            for r in store_runs.submissions_of(s, found)
        ]
    return jsonify(R.swebench_predictions(rows, found.name))


@bp.get("/v1/leaderboard")
def leaderboard() -> Response:
    caller = _caller_ids()[0]
    recent: R.Recent = current_app.extensions["grader.recent"]
    state = (request.full_path, R.board_version(_svc()))
    if caller is None and (seen := recent.get(state)) is not None:
        return Response(seen, mimetype="application/json")  # what another anonymous reader got for this state
    include = request.args.get("include_incomplete", "").lower() in ("1", "true", "yes")
    f = filters()
    offset, limit = _int_arg("offset", 0, 0, 10**9), _int_arg("limit", BOARD_PAGE, 1, BOARD_PAGE_MAX)
    phase = _phase(request.args.get("phase"))
    board = R.leaderboard(
        _svc(), f, include_incomplete=include, offset=offset, limit=limit, phase_id=phase.id if phase else None
    )
    host = bool(getattr(g, "caller", None) and g.caller.admin)
    items = [R.for_viewer(_svc(), x, host=host, phase=phase) for x in board.items] if phase else board.items
    response = jsonify(
        {
            "filters": R.plain(f),
            "phase": phase.slug if phase else None,
            "items": items,
            "total": board.total,
            "ranked": board.ranked,
            "offset": offset,
            "limit": limit,
            "next_offset": board.next_offset,
        }
    )
    if caller is None:
        recent.put(state, response.get_data())
    return response


def _phase(slug: str | None) -> Phase | None:
    """The phase a board is asked for (?phase=), or None: the board outside phases."""
    if not slug:
        return None
    with _svc().db.read() as s:
        found = store_phases.named(s, slug)
    if isinstance(found, str):
        raise ApiError(422, "invalid_fields", f"there is no phase {slug!r}; the phases are: {found}")
    return found


BOARD_PAGE, BOARD_PAGE_MAX = 100, 500  # runs on a page of GET /v1/leaderboard: by default, at most


def _int_arg(name: str, default: int, low: int, high: int) -> int:
    raw = request.args.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(422, "invalid_fields", f"{name} must be an integer, not {raw!r}") from None
    if not low <= value <= high:
        raise ApiError(422, "invalid_fields", f"{name} must be between {low} and {high}")
    return value


@bp.get("/v1/compare")
def compare() -> Response:
    a, b = request.args.get("a"), request.args.get("b")
    if not a or not b:
        raise ApiError(422, "invalid_fields", "give two runs: ?a=RUN&b=RUN")
    ra, rb = load_run(a), load_run(b)
    not_private(ra)
    not_private(rb)
    return jsonify(R.compare(_svc(), ra, rb, filters()))
