"""The portal: server-rendered pages from the same Flask app, no front-end build. Teams
sign in with their API key; the leaderboard, run, comparison and task pages are public;
a submission's page and logs only for its team.

Sessions live on the server: the signed cookie carries only a random session id, and
Redis maps its hash to the key's hash for the session's lifetime. Signing out deletes
that entry, so a copy of the cookie taken before stops working at once (a cookie alone
cannot be revoked). Redis restarted empty signs everyone out, nothing worse.

Every request that changes state (POST, sign-in included) must come from this site: a
browser names the page a form was sent from in `Origin` (every current browser sends it
on a cross-origin POST; `null` from sandboxed or privacy-stripped contexts), else in
`Referer`; a foreign or `null` origin is refused with 403. A request with neither comes
from no browser's form (curl, tests) and cannot carry a victim's cookie by itself.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import math
import secrets
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

from flask import Blueprint, Flask, abort, current_app, flash, g, redirect, render_template, request, session, url_for
from flask.typing import ResponseReturnValue
from sqlalchemy import select

from grader import intake, metrics, publish
from grader import runs as R
from grader import suites as served_suites
from grader.errors import TaskNotFound
from grader.handles import Handles
from grader.intake import Accepted, Refusal
from grader.portal import forms, host, signup
from grader.serializers import listed, shown_to
from grader.store import phases as store_phases
from grader.store import runs as store_runs
from grader.store import submissions as subs
from grader.store.keys import hash_key
from grader.store.models import MAX_ROW_ID, ApiKey, Phase, Run, Submission, Team

log = logging.getLogger(__name__)
bp = Blueprint("portal", __name__, template_folder="templates")
SESSION_KEY = "grader:portal:session:"  # + sha256 of the session id -> the key's hash
UNSAFE = ("POST", "PUT", "PATCH", "DELETE")
FORM_BYTES = 64 * 1024  # the largest body a portal page reads
PAGE_ROWS = 50  # runs on a page of the leaderboard
SORTS = {
    "resolved": "resolved",
    "solve_rate": "solve rate",
    "success_rate": "success rate",
    "tasks": "tasks",
    "name": "run",
}


def _svc() -> Handles:
    svc: Handles = current_app.extensions["grader"]
    return svc


def _session_key(sid: str) -> str:
    return SESSION_KEY + hashlib.sha256(sid.encode()).hexdigest()


def _session_key_hash() -> str | None:
    """The API key hash of this browser's live session, or None (signed out, expired, or
    the session store unreachable: then nobody is signed in, the public pages still serve)."""
    sid = session.get("sid")
    if not isinstance(sid, str) or not sid:
        return None
    try:
        digest = _svc().redis.get(_session_key(sid))
    except Exception as exc:  # RedisError: fail closed
        log.warning("portal sessions unavailable: %s", exc)
        return None
    return cast(bytes, digest).decode() if digest else None  # bytes: the client does not decode responses


def _same_site_origin() -> bool:
    """Whether a state-changing request was sent from a page of this site (module docstring)."""
    origin = request.headers.get("Origin")
    if origin is None:
        referer = request.headers.get("Referer")
        if referer is None:
            return True
        origin = referer
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and parts.netloc.lower() == request.host.lower()


@bp.before_app_request
def _who() -> None:
    """Refuse a cross-site form; then the signed-in team, if its session is live and its
    key is too (a revoked key ends the session)."""
    g.team = None
    if request.path.startswith("/v1/"):
        return
    # the portal's forms are a few hundred bytes: nobody's body is read past this, and one
    # whose length is not announced (a browser always announces a form's) is not read at all
    request.max_content_length = FORM_BYTES
    if request.path == "/submit" and request.method == "POST":
        # an upload of predictions: as large as the API takes a batch, in a file part
        # (spooled to disk past Werkzeug's 500 KB), or one patch pasted into the form
        request.max_content_length = _svc().settings.max_request_bytes
        request.max_form_memory_size = _svc().settings.max_patch_bytes + FORM_BYTES
    if request.method in UNSAFE and request.content_length is None and request.headers.get("Transfer-Encoding"):
        abort(411, description="Send the form with its Content-Length.")
    if request.method in UNSAFE and not _same_site_origin():
        abort(403, description="This form was sent from another site; open the page here and send it again.")
    if not session.get("sid"):
        return
    digest = _session_key_hash()
    if digest is None:
        session.clear()
        return
    with _svc().db.read() as s:
        key = s.scalar(select(ApiKey).where(ApiKey.key_hash == digest, ApiKey.revoked_at.is_(None)))
        if key is None:
            session.clear()
            return
        g.team = {"id": key.team.id, "name": key.team.name, "admin": key.team.admin}


def _ids() -> tuple[int | None, bool]:
    return (g.team["id"], g.team["admin"]) if g.team else (None, False)


def _filters() -> R.Filters:
    try:
        return R.check_filters(_svc(), R.parse_filters(request.args))
    except R.FilterError as exc:
        abort(422, str(exc))


@bp.get("/")
def home() -> ResponseReturnValue:
    return redirect(url_for("portal.leaderboard_page"))


@bp.get("/leaderboard")
def leaderboard_page() -> ResponseReturnValue:
    svc = _svc()
    recent: R.Recent = current_app.extensions["grader.portal.recent"]
    anonymous = g.team is None and not session.get("sid")
    state = (request.full_path, R.board_version(svc))
    if anonymous and (seen := recent.get(state)) is not None:
        return str(seen)  # what another anonymous reader got for this state
    f = _filters()
    include = request.args.get("include_incomplete") == "1"
    sort = request.args.get("sort", "resolved")
    if sort not in SORTS:
        sort = "resolved"
    desc = request.args.get("dir", "desc") != "asc"
    try:
        page = max(1, int(request.args.get("page", "1")))
    except ValueError:
        page = 1
    # past every row there can be: an empty page, never an OFFSET the database refuses
    page = min(page, MAX_ROW_ID // PAGE_ROWS + 1)
    phase = _phase_or_404(request.args.get("phase"))
    board = R.leaderboard(
        svc,
        f,
        phase_id=phase.id if phase else None,
        include_incomplete=include,
        offset=(page - 1) * PAGE_ROWS,
        limit=PAGE_ROWS,
        sort=None if sort == "resolved" and desc else sort,  # the rank's own order
        desc=desc,
    )
    pages = max(1, -(-board.total // PAGE_ROWS))
    suites = R.suites(svc)
    languages = sorted({t.metadata.language for t in svc.tasks})
    variants = ["minimal", "concise", "contextual", "guided"]
    items = [R.for_viewer(svc, x, host=_ids()[1], phase=phase) for x in board.items] if phase else board.items
    withheld = None
    if phase and phase.private and not store_phases.results_shown(phase, host=_ids()[1]):
        items, withheld = (
            [],
            (
                f"Phase {phase.name} is scored on a private split: its results are shown once it has ended, "
                "if the host reveals them."
            ),
        )
    tables: list[tuple[str, list[dict[str, Any]]]] = []
    for row in items:  # in the board's order: one table after another
        if not tables or tables[-1][0] != row["table"]:
            tables.append((row["table"], []))
        tables[-1][1].append(row)
    page_html = render_template(
        "leaderboard.html",
        languages=languages,
        tables=tables,
        total=board.total,
        page=page,
        pages=pages,
        f=f,
        include=include,
        sort=sort,
        desc=desc,
        sorts=SORTS,
        suites=suites,
        variants=variants,
        phase=store_phases.view(phase) if phase else None,
        phases=_phase_views(svc),
        withheld=withheld,
    )
    if anonymous:
        recent.put(state, page_html)
    return page_html


@bp.get("/runs/<ref>")
def run_page(ref: str) -> ResponseReturnValue:
    svc = _svc()
    team_id, admin = _ids()
    with svc.db.read() as s:
        run = store_runs.find(s, ref, team_id=team_id)
    if run is None or not store_runs.may_see(run, team_id=team_id, admin=admin):
        abort(404, _no_run(ref))
    f = _filters()
    return _run_page(svc, run, f, team_id=team_id, admin=admin)


def _run_page(
    svc: Handles,
    run: Run,
    f: R.Filters,
    *,
    team_id: int | None,
    admin: bool,
    change: forms.RunChange | None = None,
    status: int = 200,
) -> ResponseReturnValue:
    phase = R.phase_of(svc, run)
    view = R.for_viewer(svc, R.run_view(svc, run, f), host=admin, phase=phase)
    own = store_runs.owns(run, team_id=team_id, admin=admin)
    per_task = store_phases.per_task_shown(phase, host=admin)
    grid = _grid(svc, run) if own and per_task else None
    progress = None
    if own:
        with svc.db.read() as s:
            counts = store_runs.status_counts(s, run)
        total = sum(counts.values())
        progress = {k: counts.get(k, 0) for k in ("queued", "running", "done", "cancelled")} | {"total": total}
    said = change.said if change else _said_of(view)
    return (
        render_template(
            "run.html",
            run=view,
            f=f,
            own=own,
            grid=grid,
            progress=progress,
            mine=own and run.team_id == team_id,
            said=said,
            errors=change.errors if change else {},
            refresh=REFRESH_SECONDS if progress and (progress["queued"] or progress["running"]) else None,
        ),
        status,
    )


REFRESH_SECONDS = 5  # a page following a run or a submission being graded loads itself again this often


def _said_of(view: dict[str, Any]) -> dict[str, str]:
    """The publish form filled with what the run says of itself now."""
    return {
        "method": view.get("method") or "",
        "description": view.get("description") or "",
        "project_url": view.get("project_url") or "",
        "paper_url": view.get("paper_url") or "",
        "public": "1" if view.get("public") else "0",
    }


@bp.post("/runs/<ref>/publish")
def publish_run(ref: str) -> ResponseReturnValue:
    """The run page's form: what the team says of its run, and public or private. Checked
    as PATCH /v1/runs/<run> checks it, and changed by the same code (grader/publish.py)."""
    svc = _svc()
    if g.team is None:
        return redirect(url_for("portal.login", next=url_for("portal.run_page", ref=ref)))
    team_id, admin = _ids()
    with svc.db.read() as s:
        run = store_runs.find(s, ref, team_id=team_id)
    if run is None or run.team_id != team_id:
        abort(404, _no_run(ref))  # only the run's own team publishes it here
    change = forms.read_run_change(request.form)
    if not change.errors:
        try:
            meta = publish.change(svc, run, change.fields, admin=admin)
        except Refusal as exc:
            change.errors["public" if exc.reason in ("publish_quota", "run_busy") else "method"] = exc.message
            return _run_page(
                svc, run, R.Filters(), team_id=team_id, admin=admin, change=change, status=_STATUS.get(exc.reason, 409)
            )
        flash(
            f"Run {meta['name']} is public: it is on the leaderboard once every submission is graded."
            if meta["public"]
            else f"Run {meta['name']} waits for the host's review; it stays private (and takes no more "
            "submissions) until the host verifies it."
            if meta["review_requested_at"]
            else f"Run {meta['name']} is private to your team."
        )
        return redirect(url_for("portal.run_page", ref=run.id))
    return _run_page(svc, run, R.Filters(), team_id=team_id, admin=admin, change=change, status=422)


_STATUS = {"quota_exceeded": 429, "queue_full": 503, "publish_quota": 429, "run_busy": 409, "attempt_exists": 409}


@dataclass(frozen=True)
class _Submitter:
    """The signed-in team, as intake counts it (intake.Submitter)."""

    team_id: int
    admin: bool
    daily_quota: int | None
    queued_quota: int | None


def _submitter(svc: Handles) -> _Submitter:
    with svc.db.read() as s:
        team = s.get(Team, g.team["id"])
        assert team is not None  # the signed-in team, read on this request
        return _Submitter(team.id, team.admin, team.daily_quota, team.queued_quota)


@bp.route("/submit", methods=["GET", "POST"])
def submit_page() -> ResponseReturnValue:
    """Upload predictions, or one patch for one task, through intake as the API's batch
    and single submission go: the same checks, quotas and Idempotency-Keys (the form's
    own id, new on every page: a form sent twice is taken once). Every line's error is
    shown against its line, and nothing is taken unless every line is, or the team ticked
    to take the valid ones."""
    svc = _svc()
    if g.team is None:
        return redirect(url_for("portal.login", next=request.path))
    if request.method == "GET":
        said = {
            "kind": request.args.get("kind", "predictions"),
            "run_id": request.args.get("run_id", ""),
            "phase": request.args.get("phase", ""),
        }
        return _submit_form(svc, said)
    part = request.files.get("predictions")
    upload = (part.filename or "", part.read()) if part is not None and part.filename else None
    form = forms.read_submit(svc, request.form, upload)
    partial = bool(form.said["partial"])
    if form.errors or not form.items or (form.refused and not partial):
        if not form.errors and not form.items:
            form.errors["predictions"] = "The file holds no predictions."
        return _submit_form(svc, form.said, form, status=422)
    form_id = (request.form.get("form_id") or "").strip()[:64] or None
    keys = [f"portal:{form_id}#{i}" if form_id else None for i in range(len(form.items))]
    asked = json.dumps([form.raw, form.run_id, form.said], sort_keys=True, default=str)
    answers = intake.accept(
        svc,
        _submitter(svc),
        form.items,
        keys,
        batch_hash=hashlib.sha256(asked.encode()).hexdigest() if form_id else None,
        exclusive=True,
        whole=not partial,
    )
    for line, answer in zip(form.lines, answers, strict=True):
        if isinstance(answer, Refusal) and not line.error:
            line.error = answer.message
    accepted = [a for a in answers if isinstance(a, Accepted)]
    if not accepted:
        reasons = {a.reason for a in answers if isinstance(a, Refusal)} - {"withheld"}
        status = max((_STATUS.get(r, 422) for r in reasons), default=422)
        if form.said["kind"] == "patch" and form.lines and form.lines[0].error:
            form.errors["patch"] = form.lines[0].error
            form.lines.clear()
        return _submit_form(svc, form.said, form, status=status)
    cached = sum(1 for a in accepted if a.row.cached)
    told = f"{len(accepted)} submission(s) accepted" + (
        f", {cached} answered at once from earlier grades" if cached else ""
    )
    if form.refused:
        return _submit_form(svc, form.said, form, status=200, taken=told, run_id=form.run_id)
    flash(told + (f" into run {form.run_id}." if form.run_id else "."))
    if form.run_id:
        return redirect(url_for("portal.run_page", ref=form.run_id))
    return redirect(url_for("portal.submission_page", sid=accepted[0].row.id))


def _submit_form(
    svc: Handles,
    said: dict[str, str],
    form: forms.Upload | None = None,
    *,
    status: int = 200,
    taken: str | None = None,
    run_id: str | None = None,
) -> ResponseReturnValue:
    return (
        render_template(
            "submit.html",
            said=said,
            errors=form.errors if form else {},
            lines=form.lines if form else [],
            refused=form.refused if form else 0,
            tasks=sorted(t.id for t in svc.tasks),
            phases=[p for p in _phase_views(svc) if p["open"]],
            form_id=secrets.token_urlsafe(16),
            reasoning_levels=metrics.REASONING_LEVELS,
            limits=_limits(svc),
            taken=taken,
            run_id=run_id,
        ),
        status,
    )


def _limits(svc: Handles) -> dict[str, Any]:
    """What the signed-in team may still send today, and the bounds of one upload."""
    st = svc.settings
    team = _submitter(svc)
    with svc.db.read() as s:
        today, active = subs.count_today(s, team.team_id), subs.count_active(s, team.team_id)
    daily = team.daily_quota if team.daily_quota is not None else st.daily_quota
    at_once = team.queued_quota if team.queued_quota is not None else st.queued_quota
    return {
        "daily": daily,
        "today": today,
        "left": max(0, daily - today),
        "at_once": at_once,
        "active": active,
        "max_items": st.max_batch_items,
        "bytes": st.max_request_bytes,
        "patch_bytes": st.max_patch_bytes,
    }


def _phase_or_404(slug: str | None) -> Phase | None:
    if not slug:
        return None
    with _svc().db.read() as s:
        found = store_phases.named(s, slug)
    if isinstance(found, str):
        abort(404, f"There is no phase {slug!r}; the phases are: {found}.")
    return found


def _phase_views(svc: Handles) -> list[dict[str, Any]]:
    with svc.db.read() as s:
        return [store_phases.view(p) for p in store_phases.all_(s)]


@bp.get("/phases")
def phases_page() -> ResponseReturnValue:
    return render_template("phases.html", phases=_phase_views(_svc()), suites=R.suites(_svc()))


@bp.get("/phases/<slug>")
def phase_page(slug: str) -> ResponseReturnValue:
    """How to take part in a phase: its window, limits, split and scoring, and how to get
    the tasks and submit (portal, CLI, API); then its board."""
    svc = _svc()
    phase = _phase_or_404(slug)
    assert phase is not None
    return _participate(svc, phase.suite, store_phases.view(phase))


@bp.get("/suites/<suite>")
def suite_page(suite: str) -> ResponseReturnValue:
    """How to take part in a suite outside any phase."""
    svc = _svc()
    if suite not in R.suites(svc):
        abort(404, f"There is no suite {suite!r}; the suites are: {', '.join(R.suites(svc))}.")
    return _participate(svc, suite, None)


def _participate(svc: Handles, suite: str, phase: dict[str, Any] | None) -> ResponseReturnValue:
    tasks = sorted((t for t in svc.tasks if t.metadata.suite == suite), key=lambda t: t.id)
    st = svc.settings
    return render_template(
        "participate.html",
        suite=suite,
        phase=phase,
        tasks=[t.public_view() for t in tasks],
        feedback=sorted({t.feedback for t in tasks}),
        languages=sorted({t.metadata.language for t in tasks}),
        limits={
            "daily": st.daily_quota,
            "queued": st.queued_quota,
            "patch_bytes": st.max_patch_bytes,
            "items": st.max_batch_items,
        },
        url=request.host_url.rstrip("/"),
    )


def _no_run(ref: str) -> str:
    return (
        f"There is no run {ref!r} here: no such run, or it is private to its team "
        "(a team sees its own runs once signed in)."
    )


def _grid(svc: Handles, run: Run) -> dict[str, list[dict[str, Any]]]:
    """task -> trial -> (verdict, submission id): the team's own links to each submission."""
    with svc.db.read() as s:
        rows = store_runs.submissions_of(s, run)
    grid: dict[str, list[dict[str, Any]]] = {}
    for sub in rows:
        grid.setdefault(sub.task_id, []).append(
            {"id": sub.id, "verdict": sub.verdict or sub.status, "trial": sub.trial}
        )
    return dict(sorted(grid.items()))


@bp.get("/compare")
def compare_page() -> ResponseReturnValue:
    svc = _svc()
    a, b = request.args.get("a"), request.args.get("b")
    team_id, admin = _ids()
    with svc.db.read() as s:
        choices = []
        for shown in store_runs.visible(s, team_id=team_id, admin=admin):
            owner = s.get(Team, shown.team_id)
            assert owner is not None  # a run's team_id is a foreign key
            choices.append((shown.id, f"{shown.name} ({owner.name})"))
    result = None
    if a and b:
        with svc.db.read() as s:
            ra, rb = store_runs.find(s, a, team_id=team_id), store_runs.find(s, b, team_id=team_id)
        for ref, r in ((a, ra), (b, rb)):
            if r is None or not store_runs.may_see(r, team_id=team_id, admin=admin):
                abort(404, _no_run(ref))
        assert ra is not None and rb is not None  # both checked just above
        for r in (ra, rb):
            if why := R.private_refusal(svc, r, host=admin):
                abort(403, why[:1].upper() + why[1:] + ".")
        result = R.compare(svc, ra, rb, _filters())
    return render_template("compare.html", result=result, choices=choices, a=a, b=b)


@bp.get("/tasks")
def tasks_page() -> ResponseReturnValue:
    return render_template("tasks.html", tasks=[t.public_view() for t in sorted(_svc().tasks, key=lambda t: t.id)])


@bp.get("/tasks/<task_id>")
def task_page(task_id: str) -> ResponseReturnValue:
    try:
        task = _svc().task(task_id)
    except TaskNotFound:
        abort(404, f"There is no task {task_id!r}.")
    return render_template("task.html", task=task.public_view())


@bp.get("/submissions/<sid>")
def submission_page(sid: str) -> ResponseReturnValue:
    svc = _svc()
    if g.team is None:
        return redirect(url_for("portal.login", next=request.path))
    with svc.db.read() as s:
        sub = s.get(Submission, sid) if len(sid) <= 32 else None
    if sub is None or (sub.team_id != g.team["id"] and not g.team["admin"]):
        abort(404)  # another team's submission does not exist, for this team
    view = shown_to(svc, sub, host=g.team["admin"])  # what the API gives the same key
    patch = sub.patch.decode("utf-8", errors="replace")  # the team's own: shown as it was sent
    shown = patch[:PATCH_SHOWN]
    return render_template(
        "submission.html",
        sub=view,
        groups=_test_groups(view.get("result")),
        patch=shown,
        patch_cut=len(patch) - len(shown),
        refresh=REFRESH_SECONDS if view.get("status") in ("queued", "running") else None,
    )


PATCH_SHOWN = 200_000  # characters of the submitted diff on its page; `grader runs logs` has it whole


def _test_groups(result: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The tests of a result as the submission page shows them: FAIL_TO_PASS, then
    PASS_TO_PASS, then any other test the view names; in each, failures first."""
    tests = (result or {}).get("tests") or {}
    outcomes = tests.get("all") or {}
    groups: list[dict[str, Any]] = []
    listed: set[str] = set()
    for kind, label in (("fail_to_pass", "FAIL_TO_PASS"), ("pass_to_pass", "PASS_TO_PASS")):
        lists = tests.get(kind) or {}
        failed, passed = list(lists.get("failure") or []), list(lists.get("success") or [])
        listed |= set(failed) | set(passed)
        rows = [(t, outcomes.get(t, "not run"), True) for t in failed] + [
            (t, outcomes.get(t, "passed"), False) for t in passed
        ]
        if rows:
            groups.append({"kind": kind, "label": label, "rows": rows, "failed": len(failed), "total": len(rows)})
    other = [(t, o, o not in ("passed", "skipped")) for t, o in outcomes.items() if t not in listed]
    if other:
        other.sort(key=lambda r: not r[2])  # stable: failures first, each in the runner's order
        groups.append(
            {
                "kind": "other",
                "label": "other tests",
                "rows": other,
                "failed": sum(1 for r in other if r[2]),
                "total": len(other),
            }
        )
    return groups


def _local_path(target: str) -> bool:
    """A page of this site to go back to after signing in, never another host's: browsers
    read '//host' and '/\\host' alike as another host, so neither is local."""
    parts = urlsplit(target)
    return (
        target.startswith("/")
        and not parts.scheme
        and not parts.netloc
        and "\\" not in target
        and not target.startswith("//")
        and all(c.isprintable() for c in target)
    )


@bp.route("/login", methods=["GET", "POST"])
def login() -> ResponseReturnValue:
    if request.method == "POST":
        key = (request.form.get("key") or "").strip()
        with _svc().db.read() as s:
            row = (
                s.scalar(select(ApiKey).where(ApiKey.key_hash == hash_key(key), ApiKey.revoked_at.is_(None)))
                if key
                else None
            )
            team = row.team.name if row else None
        if row is None:
            flash("That key is not valid (unknown or revoked).")
            return render_template("login.html"), 401
        sid = secrets.token_urlsafe(32)
        lifetime = current_app.permanent_session_lifetime
        try:
            _svc().redis.set(_session_key(sid), hash_key(key), ex=int(lifetime.total_seconds()))
        except Exception as exc:  # RedisError
            log.warning("portal sessions unavailable: %s", exc)
            abort(503, description="Signing in is unavailable for a moment; try again shortly.")
        _end_session()
        session["sid"] = sid
        session.permanent = True
        nxt = request.args.get("next") or ""
        flash(f"Signed in as {team}.")
        return redirect(nxt if _local_path(nxt) else url_for("portal.my_runs"))
    return render_template("login.html")


def _end_session() -> None:
    """Delete this browser's session on the server, then its cookie."""
    sid = session.get("sid")
    if isinstance(sid, str) and sid:
        try:
            _svc().redis.delete(_session_key(sid))
        except Exception as exc:  # RedisError: it expires with its TTL
            log.warning("portal session not deleted: %s", exc)
    session.clear()


@bp.post("/logout")
def logout() -> ResponseReturnValue:
    _end_session()
    return redirect(url_for("portal.leaderboard_page"))


@bp.get("/me")
def my_runs() -> ResponseReturnValue:
    svc = _svc()
    if g.team is None:
        return redirect(url_for("portal.login", next=request.path))
    with svc.db.read() as s:
        runs = [r for r in store_runs.visible(s, team_id=g.team["id"], admin=False) if r.team_id == g.team["id"]]
        team = s.get(Team, g.team["id"])
        assert team is not None  # the signed-in team, read on this request
        metas = [R.run_meta(r, team) for r in runs]
        latest = list(
            s.scalars(
                select(Submission).where(Submission.team_id == g.team["id"]).order_by(Submission.id.desc()).limit(50)
            )
        )
        recent = [listed(svc, x, host=g.team["admin"]) for x in latest]
    return render_template("me.html", runs=metas, recent=recent)


# --- the host's pages ----------------------------------------------------------------------------
def _host_only() -> ResponseReturnValue | None:
    """Signed out: to the sign-in page; signed in without an admin key: 403."""
    if g.team is None:
        return redirect(url_for("portal.login", next=request.path))
    if not g.team["admin"]:
        abort(403, description="The host's pages need an admin key.")
    return None


@bp.get("/host")
def host_runs() -> ResponseReturnValue:
    """Every run with the host's filters and actions; the runs awaiting review first."""
    if (away := _host_only()) is not None:
        return away
    svc = _svc()
    rows, said = host.runs(svc, request.args)
    return render_template(
        "host.html",
        rows=rows,
        said=said,
        flags=host.FLAGS,
        teams=[t["name"] for t in host.teams(svc)],
        suites=R.suites(svc),
        phases=_phase_views(svc),
    )


@bp.get("/host/suites")
def host_suites() -> ResponseReturnValue:
    """The task suites in service: their tasks, languages, feedback policies and validation
    status (grader/suites.py), and the task files the service refused (with why), as
    /readyz names them."""
    if (away := _host_only()) is not None:
        return away
    svc = _svc()
    refused = dict(getattr(svc.tasks, "refused", {}) or {})
    return render_template("host_suites.html", suites=served_suites.in_service(svc), refused=refused)


@bp.post("/host/runs/<run_id>")
def host_act(run_id: str) -> ResponseReturnValue:
    """One of the host's actions on a run: hide, verify, mark a baseline (and undo each),
    approve or refuse a review, re-grade its ERRORs."""
    if (away := _host_only()) is not None:
        return away
    svc = _svc()
    action = request.form.get("action", "")
    with svc.db.read() as s:
        run = s.get(Run, run_id) if len(run_id) <= 32 else None
    if run is None:
        abort(404, f"There is no run {run_id!r}.")
    if action == "regrade":
        sent, refused = publish.regrade_errors(svc, run)
        flash(
            f"Run {run.name}: {sent} ERROR attempt(s) sent to be graded again"
            + (f", {refused} refused." if refused else ".")
        )
    elif action in host.ACTIONS:
        try:
            publish.change(svc, run, dict(host.ACTIONS[action]), admin=True)
        except Refusal as exc:
            flash(f"Run {run.name}: {exc.message}")
        else:
            flash(f"Run {run.name}: {action} done.")
    else:
        abort(422, f"There is no action {action!r}; the actions are: {', '.join([*host.ACTIONS, 'regrade'])}.")
    back = request.form.get("back") or ""
    return redirect(back if _local_path(back) and back.startswith("/host") else url_for("portal.host_runs"))


@bp.route("/host/teams", methods=["GET", "POST"])
def host_teams() -> ResponseReturnValue:
    """The teams and their keys; a new team (its first key shown once, on this answer only)."""
    if (away := _host_only()) is not None:
        return away
    svc = _svc()
    shown = None
    errors: dict[str, str] = {}
    said = {k: (request.form.get(k) or "") for k in ("name", "daily_quota", "queued_quota")}
    if request.method == "POST":
        from pydantic import ValidationError

        from grader.schemas import TeamIn, problems
        from grader.store.keys import create_key

        quotas = {k: host.quota(said[k]) for k in ("daily_quota", "queued_quota")}
        errors = {k: f"The quota is {v}." for k, v in quotas.items() if isinstance(v, str)}
        try:
            body = TeamIn.model_validate({"name": said["name"].strip()})
        except ValidationError as exc:
            errors["name"] = "A team's name is 1 to 100 letters, digits and . _ - (" + problems(exc)[0] + ")."
        if not errors:
            with svc.db.read() as s:
                if s.scalar(select(Team).where(Team.name == body.name)) is not None:
                    errors["name"] = f"There is a team {body.name!r} already; give it another key below."
        if not errors:
            with svc.db.write() as s:
                key = create_key(
                    s,
                    body.name,
                    daily_quota=cast("int | None", quotas["daily_quota"]),
                    queued_quota=cast("int | None", quotas["queued_quota"]),
                )
            shown = {"team": body.name, "key": key}
            said = {}
    return (
        render_template("host_teams.html", teams=host.teams(svc), shown=shown, errors=errors, said=said),
        422 if errors else 200,
    )


@bp.post("/host/teams/<name>/keys")
def host_new_key(name: str) -> ResponseReturnValue:
    """Another key for a team, shown once."""
    if (away := _host_only()) is not None:
        return away
    from grader.store.keys import create_key

    svc = _svc()
    with svc.db.read() as s:
        if s.scalar(select(Team).where(Team.name == name)) is None:
            abort(404, f"There is no team {name!r}.")
    with svc.db.write() as s:
        key = create_key(s, name)
    return render_template(
        "host_teams.html", teams=host.teams(svc), shown={"team": name, "key": key}, errors={}, said={}
    )


@bp.post("/host/keys/<int:key_id>/revoke")
def host_revoke(key_id: int) -> ResponseReturnValue:
    if (away := _host_only()) is not None:
        return away
    team = host.revoke(_svc(), key_id)
    if team is None:
        abort(404, "There is no such key, or it is revoked already.")
    flash(f"A key of {team} is revoked: requests and portal sessions with it are refused from now on.")
    return redirect(url_for("portal.host_teams"))


@bp.post("/host/teams/<name>/quotas")
def host_quotas(name: str) -> ResponseReturnValue:
    if (away := _host_only()) is not None:
        return away
    svc = _svc()
    quotas = {k: host.quota(request.form.get(k) or "") for k in ("daily_quota", "queued_quota")}
    bad = [f"{k.replace('_', ' ')}: {v}" for k, v in quotas.items() if isinstance(v, str)]
    if bad:
        abort(422, "; ".join(bad) + ".")
    with svc.db.write() as s:
        team = s.scalar(select(Team).where(Team.name == name))
        if team is None:
            abort(404, f"There is no team {name!r}.")
        team.daily_quota = cast("int | None", quotas["daily_quota"])
        team.queued_quota = cast("int | None", quotas["queued_quota"])
    flash(f"Quotas of {name} set (empty: the service's defaults).")
    return redirect(url_for("portal.host_teams"))


def _svc_of(app: Flask) -> Handles:
    svc: Handles = app.extensions["grader"]
    return svc


def init_app(app: Flask) -> None:
    app.extensions["grader.portal.recent"] = R.Recent(_svc_of(app).settings.public_cache_seconds)
    app.register_blueprint(bp)
    app.register_blueprint(signup.bp)
    app.jinja_env.globals["signup_open"] = lambda: _svc_of(app).settings.signup == "open"
    app.jinja_env.filters["pct"] = _pct
    app.jinja_env.filters["ci"] = _ci
    app.jinja_env.filters["vclass"] = _vclass
    app.jinja_env.filters["vmark"] = _vmark
    app.jinja_env.filters["num"] = _num
    app.jinja_env.filters["pvalue"] = _pvalue
    app.jinja_env.filters["breakdown_rows"] = _breakdown_rows
    app.jinja_env.filters["spent"] = _spent
    app.jinja_env.filters["reported_in"] = lambda key, usage: bool(((usage or {}).get(key) or {}).get("reported"))
    app.jinja_env.filters["usd"] = metrics.usd
    app.jinja_env.filters["cost_chart"] = _cost_chart
    app.jinja_env.globals["now"] = lambda: dt.datetime.now(dt.UTC)


DASH = "—"  # a figure over nothing: no value, no interval


def _pct(value: float | None) -> str:
    """A share as a percentage with one decimal."""
    return DASH if value is None else f"{100 * value:.1f}%"


def _ci(fig: Any) -> str:
    """A 95% interval in percent, or nothing: none is drawn over no evidence (n = 0)."""
    if not isinstance(fig, dict) or not fig.get("denominator"):
        return ""
    ci = fig.get("ci")
    if not ci or ci[0] is None:
        return ""
    return f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def _pvalue(p: float | None) -> str:
    """A p-value to 2 significant digits; below 0.001 as such."""
    if p is None:
        return DASH
    return "< 0.001" if p < 0.001 else f"{p:.2g}" if p < 1 else "1"


def _vclass(verdict: str | None) -> str:
    """A CSS-safe class for a verdict or status: PASS, FAIL, PATCH, TIMED, ERROR, queued..."""
    return (verdict or "none").split(" ")[0]


MARKS = {
    "PASS": "✓",
    "FAIL": "✗",
    "PATCH FAILED": "⊘",
    "TIMED OUT": "◷",
    "ERROR": "!",
    "queued": "…",
    "running": "↻",
    "cancelled": "–",
}


def _vmark(verdict: str | None) -> str:
    """A verdict's or status's own mark, so that no two differ by colour alone."""
    return MARKS.get(verdict or "", "?")


def _breakdown_rows(groups: dict[Any, Any], key: str) -> list[tuple[str, dict[str, Any]]]:
    return [(str(name), (g or {}).get(key) or {}) for name, g in sorted(groups.items(), key=lambda kv: str(kv[0]))]


CHART = {"w": 560, "h": 300, "left": 64, "right": 24, "top": 16, "bottom": 44}


def _round_up(x: float) -> float:
    """The axis' end: x rounded up to 1, 2, 2.5, 5 or 10 times a power of ten, so that its
    quarters are round sums ($0.25, $2.50); 1 for nothing to draw."""
    if x <= 0:
        return 1.0
    step = 10.0 ** math.floor(math.log10(x))
    return next(m * step for m in (1, 2, 2.5, 5, 10) if m * step >= x * (1 - 1e-12))


def _cost_chart(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Cost per complete trial (x, USD from 0) against solve rate over the task set (y,
    0-100%) for a board table's runs, laid out for the `cost_chart` macro: a point per
    run that says what it cost; the others named as not drawn."""
    points, missing = [], []
    for r in rows:
        m = r.get("metrics") or {}
        cost = ((m.get("usage") or {}).get("cost_usd") or {}).get("per_trial")
        solve = ((m.get("task_set") or {}).get("solve_rate") or {}).get("value")
        if cost is None or solve is None:
            missing.append(r["name"])
        else:
            points.append((r, float(cost), float(solve)))
    c = CHART
    pw, ph = c["w"] - c["left"] - c["right"], c["h"] - c["top"] - c["bottom"]
    top = _round_up(max((cost for _, cost, _ in points), default=0.0) * 1.05)
    return {
        **c,
        "pw": pw,
        "ph": ph,
        "points": [
            {
                "id": r["id"],
                "name": r["name"],
                "cost": metrics.usd(cost),
                "solve": _pct(solve),
                "x": round(c["left"] + cost / top * pw, 1),
                "y": round(c["top"] + (1 - solve) * ph, 1),
            }
            for r, cost, solve in points
        ],
        "xticks": [(round(c["left"] + i / 4 * pw, 1), metrics.usd(top * i / 4)) for i in range(5)],
        "yticks": [(round(c["top"] + (1 - i / 4) * ph, 1), f"{25 * i}%") for i in range(5)],
        "missing": missing,
    }


SHOWN = {"usd": metrics.usd, "tokens": metrics.tokens, "seconds": metrics.seconds}


def _spent(fig: dict[str, Any] | None, unit: str) -> tuple[str, str]:
    """A Spent figure as (per complete trial, campaign total), shown in its unit."""
    return metrics.spent(fig, SHOWN[unit])


def _num(value: Any) -> str:
    """A numerator: whole numbers as such, sums of per-task shares to 3 significant
    digits (2.67, 12.3; 123 above 100)."""
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return str(int(value)) if isinstance(value, (int, float)) else str(value)
