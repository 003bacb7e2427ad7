"""The portal: server-rendered pages from the same Flask app, no front-end build. Teams
sign in with their API key (kept only as its hash in a signed session cookie); the
leaderboard, run, comparison and task pages are public; a submission's page and logs
only for its team."""

from __future__ import annotations

import datetime as dt
from urllib.parse import urlsplit

from flask import Blueprint, abort, current_app, flash, g, redirect, render_template, request, session, url_for
from sqlalchemy import select

from grader import runs as R
from grader.api.errors import ApiError
from grader.api.views import shown_to, submission_view
from grader.errors import TaskNotFound
from grader.service import Service
from grader.store import runs as store_runs
from grader.store.keys import hash_key
from grader.store.models import ApiKey, Submission, Team

bp = Blueprint("portal", __name__, template_folder="templates")
SORTS = {"solve_rate": "solve rate", "success_rate": "success rate", "pass_at_1": "pass@1",
         "pass_any": "pass_any@n", "tasks": "tasks", "name": "run"}


def _svc() -> Service:
    return current_app.extensions["grader"]


@bp.before_app_request
def _who():
    """The signed-in team, if its key is still live (a revoked key ends the session)."""
    g.team = None
    digest = session.get("key")
    if not digest or request.path.startswith("/v1/"):
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
    from grader.api.runs import filters
    try:
        return filters()
    except ApiError as exc:
        abort(422, exc.message)


def _figure_value(view: dict, key: str) -> float:
    m = view["metrics"]
    if key == "tasks":
        return float(len(m.get("per_task") or {}))
    if key == "name":
        return 0.0
    if key == "pass_at_1":
        fig = (m.get("pass_at_k") or {}).get("1") or {}
    elif key == "pass_any":
        fig = m.get("pass_any_at_n") or {}
    else:
        fig = m.get(key) or {}
    v = fig.get("value") if isinstance(fig, dict) else None
    return v if v is not None else -1.0


@bp.get("/")
def home():
    return redirect(url_for("portal.leaderboard_page"))


@bp.get("/leaderboard")
def leaderboard_page():
    svc = _svc()
    f = _filters()
    include = request.args.get("include_incomplete") == "1"
    rows = R.leaderboard(svc, f, include_incomplete=include)
    sort = request.args.get("sort", "solve_rate")
    if sort not in SORTS:
        sort = "solve_rate"
    desc = request.args.get("dir", "desc") != "asc"
    if sort == "name":
        rows.sort(key=lambda r: (r["name"].lower(), r["team"]), reverse=desc)
    else:
        rows.sort(key=lambda r: _figure_value(r, sort), reverse=desc)
    suites = sorted({t.metadata.suite for t in svc.tasks})
    variants = ["minimal", "concise", "contextual", "guided"]
    return render_template("leaderboard.html", rows=rows, f=f, include=include, sort=sort, desc=desc,
                           sorts=SORTS, suites=suites, variants=variants)


@bp.get("/runs/<ref>")
def run_page(ref: str):
    svc = _svc()
    team_id, admin = _ids()
    with svc.db.read() as s:
        run = store_runs.find(s, ref, team_id=team_id)
    if run is None or not store_runs.may_see(run, team_id=team_id, admin=admin):
        abort(404)
    f = _filters()
    view = R.run_view(svc, run, f)
    own = store_runs.owns(run, team_id=team_id, admin=admin)
    grid = _grid(svc, run) if own else None
    return render_template("run.html", run=view, f=f, own=own, grid=grid)


def _grid(svc: Service, run) -> dict:
    """task -> trial -> (verdict, submission id): the team's own links to each submission."""
    with svc.db.read() as s:
        rows = store_runs.submissions_of(s, run)
    grid: dict[str, list] = {}
    for sub in rows:
        grid.setdefault(sub.task_id, []).append({"id": sub.id, "verdict": sub.verdict or sub.status,
                                                  "trial": sub.trial})
    return dict(sorted(grid.items()))


@bp.get("/compare")
def compare_page():
    svc = _svc()
    a, b = request.args.get("a"), request.args.get("b")
    team_id, admin = _ids()
    with svc.db.read() as s:
        choices = [(r.id, f"{r.name} ({s.get(Team, r.team_id).name})")
                   for r in store_runs.visible(s, team_id=team_id, admin=admin)]
    result = None
    if a and b:
        with svc.db.read() as s:
            ra, rb = store_runs.find(s, a, team_id=team_id), store_runs.find(s, b, team_id=team_id)
        for r in (ra, rb):
            if r is None or not store_runs.may_see(r, team_id=team_id, admin=admin):
                abort(404)
        result = R.compare(svc, ra, rb, _filters())
    return render_template("compare.html", result=result, choices=choices, a=a, b=b)


@bp.get("/tasks")
def tasks_page():
    return render_template("tasks.html", tasks=[t.public_view() for t in sorted(_svc().tasks, key=lambda t: t.id)])


@bp.get("/tasks/<task_id>")
def task_page(task_id: str):
    try:
        task = _svc().task(task_id)
    except TaskNotFound:
        abort(404)
    return render_template("task.html", task=task.public_view())


@bp.get("/submissions/<sid>")
def submission_page(sid: str):
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
    return render_template("submission.html", sub=view, groups=_test_groups(view.get("result")),
                           patch=shown, patch_cut=len(patch) - len(shown))


PATCH_SHOWN = 200_000  # characters of the submitted diff on its page; `grader runs logs` has it whole


def _test_groups(result: dict | None) -> list[dict]:
    """The tests of a result as the submission page shows them: FAIL_TO_PASS, then
    PASS_TO_PASS, then any other test the view names; in each, failures first."""
    tests = (result or {}).get("tests") or {}
    outcomes = tests.get("all") or {}
    groups, listed = [], set()
    for kind, label in (("fail_to_pass", "FAIL_TO_PASS"), ("pass_to_pass", "PASS_TO_PASS")):
        lists = tests.get(kind) or {}
        failed, passed = list(lists.get("failure") or []), list(lists.get("success") or [])
        listed |= set(failed) | set(passed)
        rows = [(t, outcomes.get(t, "not run"), True) for t in failed] + \
               [(t, outcomes.get(t, "passed"), False) for t in passed]
        if rows:
            groups.append({"kind": kind, "label": label, "rows": rows, "failed": len(failed), "total": len(rows)})
    other = [(t, o, o not in ("passed", "skipped")) for t, o in outcomes.items() if t not in listed]
    if other:
        other.sort(key=lambda r: not r[2])  # stable: failures first, each in the runner's order
        groups.append({"kind": "other", "label": "other tests", "rows": other,
                       "failed": sum(1 for r in other if r[2]), "total": len(other)})
    return groups


def _local_path(target: str) -> bool:
    """A page of this site to go back to after signing in, never another host's: browsers
    read '//host' and '/\\host' alike as another host, so neither is local."""
    parts = urlsplit(target)
    return (target.startswith("/") and not parts.scheme and not parts.netloc and "\\" not in target
            and not target.startswith("//") and all(c.isprintable() for c in target))


@bp.route("/login", methods=["GET", "POST"])
def login():
    if request.method == "POST":
        key = (request.form.get("key") or "").strip()
        with _svc().db.read() as s:
            row = s.scalar(select(ApiKey).where(ApiKey.key_hash == hash_key(key), ApiKey.revoked_at.is_(None))) \
                if key else None
            team = row.team.name if row else None
        if row is None:
            flash("That key is not valid (unknown or revoked).")
            return render_template("login.html"), 401
        session.clear()
        session["key"] = hash_key(key)
        session.permanent = True
        nxt = request.args.get("next") or ""
        flash(f"Signed in as {team}.")
        return redirect(nxt if _local_path(nxt) else url_for("portal.my_runs"))
    return render_template("login.html")


@bp.post("/logout")
def logout():
    session.clear()
    return redirect(url_for("portal.leaderboard_page"))


@bp.get("/me")
def my_runs():
    svc = _svc()
    if g.team is None:
        return redirect(url_for("portal.login", next=request.path))
    with svc.db.read() as s:
        runs = [r for r in store_runs.visible(s, team_id=g.team["id"], admin=False) if r.team_id == g.team["id"]]
        team = s.get(Team, g.team["id"])
        metas = [R.run_meta(r, team) for r in runs]
        recent = list(s.scalars(select(Submission).where(Submission.team_id == g.team["id"])
                                .order_by(Submission.id.desc()).limit(50)))
        recent = [submission_view(x, full=False) for x in recent]
    return render_template("me.html", runs=metas, recent=recent)


def init_app(app) -> None:
    app.register_blueprint(bp)
    app.jinja_env.filters["pct"] = _pct
    app.jinja_env.filters["ci"] = _ci
    app.jinja_env.filters["vclass"] = _vclass
    app.jinja_env.filters["num"] = _num
    app.jinja_env.filters["breakdown_rows"] = _breakdown_rows
    app.jinja_env.globals["now"] = lambda: dt.datetime.now(dt.timezone.utc)


def _pct(value) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _ci(fig) -> str:
    ci = (fig or {}).get("ci") if isinstance(fig, dict) else None
    if not ci or ci[0] is None:
        return ""
    return f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def _vclass(verdict) -> str:
    """A CSS-safe class for a verdict or status: PASS, FAIL, PATCH, TIMED, ERROR, queued..."""
    return (verdict or "none").split(" ")[0]


def _breakdown_rows(groups: dict, key: str) -> list[tuple[str, dict]]:
    return [(str(name), (g or {}).get(key) or {}) for name, g in sorted(groups.items(), key=lambda kv: str(kv[0]))]


def _num(value) -> str:
    """A numerator: whole numbers as such, sums of estimates to two places."""
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.2f}"
    return str(int(value)) if isinstance(value, (int, float)) else str(value)
