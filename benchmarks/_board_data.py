"""What benchmarks/board.py reads: a suite of many tasks on disk, and many public runs of
graded submissions written straight into the store's tables in bulk (COPY on PostgreSQL,
executemany on SQLite), as if graded over months by a hundred teams.

The tasks are copies of tasks/examples' calc-mean-empty under new ids (suite `board`),
their creation dates spread evenly over 2020-2024 (so that a time window keeps a share of
them) and their difficulty in turn: the leaderboard reads a task's metadata only.

A run's submissions are one attempt per task and trial, finished with a verdict, in a
distribution drawn from a seed: most runs one trial of every task, some two or three
trials of a share of the tasks (about as many submissions), each run with a skill of its
own and each task a difficulty; FAIL, PATCH FAILED and TIMED OUT among the failures; a few
runs with ERROR attempts (incomplete: on the board only when asked); usage (cost, tokens,
seconds) on most attempts, as an agent's harness reports it.
"""

from __future__ import annotations

import datetime as dt
import random
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _service import ROOT

SUITE = "board"
EXAMPLE = ROOT / "tasks" / "examples" / "calc-mean-empty"
FIRST_DAY, DAYS = dt.date(2020, 1, 1), 5 * 365


def task_id(i: int) -> str:
    return f"board-{i:05d}"


def created(i: int, tasks: int) -> dt.date:
    return FIRST_DAY + dt.timedelta(days=i * DAYS // tasks)


def write_tasks(top: Path, tasks: int) -> Path:
    """`tasks` task folders under top/board (one repository bundle shared), and a suite
    file that serves them together (they are copies: each one's answer is in every other)."""
    suite = top / SUITE
    shutil.rmtree(suite, ignore_errors=True)
    (suite / "repos").mkdir(parents=True)
    shutil.copy(EXAMPLE.parent / "repos" / "calc.bundle", suite / "repos" / "calc.bundle")
    (suite / "suite.yaml").write_text("# copies of one example task: each answers the others\nserve_together: all\n")
    text = (EXAMPLE / "task.yaml").read_text()
    for i in range(tasks):
        d = suite / task_id(i)
        shutil.copytree(EXAMPLE / "hidden", d / "hidden")
        shutil.copy(EXAMPLE / "gold.patch", d / "gold.patch")
        (d / "task.yaml").write_text(
            text.replace("id: calc-mean-empty", f"id: {task_id(i)}")
            .replace("suite: examples", f"suite: {SUITE}")
            .replace("created_at: 2021-03-14", f"created_at: {created(i, tasks)}")
            .replace("difficulty: easy", f"difficulty: {('easy', 'medium', 'hard')[i % 3]}")
        )
    return top


FAILURES = ("FAIL",) * 17 + ("PATCH FAILED",) * 2 + ("TIMED OUT",)
VARIANTS = ("minimal", "concise", "contextual", "guided")
SUBMISSION_COLUMNS = (
    "id",
    "team_id",
    "task_id",
    "patch",
    "patch_sha256",
    "run_id",
    "system",
    "trial",
    "prompt_variant",
    "status",
    "verdict",
    "cached",
    "attempts",
    "errors",
    "queued_at",
    "started_at",
    "finished_at",
    "cost_usd",
    "input_tokens",
    "output_tokens",
    "api_seconds",
    "wall_seconds",
    "imported",
)


def run_rows(n: int, team_id: int, name: str, tasks: int, seed: int, at: dt.datetime) -> Iterator[tuple[Any, ...]]:
    """The n-th run's submissions (SUBMISSION_COLUMNS), about `tasks` of them."""
    rng = random.Random(seed * 1_000_003 + n)
    trials = rng.choices((1, 2, 3), weights=(70, 20, 10))[0]
    skill = rng.uniform(0.15, 0.75)
    variant = rng.choice(VARIANTS) if rng.random() < 0.5 else None
    errors = rng.randint(1, 5) if rng.random() < 0.03 else 0
    attempted = list(range(tasks)) if trials == 1 else sorted(rng.sample(range(tasks), tasks // trials))
    error_at = set(rng.sample(range(len(attempted) * trials), errors))
    k = 0
    for t in attempted:
        hard = (t * 7919 % 100) / 100  # the task's own difficulty, the same in every run
        for trial in range(1, trials + 1):
            if k in error_at:
                verdict = "ERROR"
            elif rng.random() < skill * (1.2 - hard):
                verdict = "PASS"
            else:
                verdict = rng.choice(FAILURES)
            k += 1
            said = rng.random() < 0.9
            sid = f"{int(at.timestamp() * 1000) + k:012x}{n % 65536:04x}{rng.getrandbits(32):08x}"
            yield (
                sid,
                team_id,
                task_id(t),
                b"x",
                "0" * 64,
                name,
                f"agent-{n % 37}",
                trial,
                variant,
                "done",
                verdict,
                False,
                1,
                1 if verdict == "ERROR" else 0,
                at,
                at,
                at,
                round(rng.uniform(0.01, 2.0), 4) if said else None,
                rng.randint(2_000, 200_000) if said else None,
                rng.randint(100, 20_000) if said else None,
                round(rng.uniform(1, 120), 2) if said else None,
                round(rng.uniform(5, 600), 2) if said else None,
                False,
            )


def ensure_teams(db: Any, count: int) -> list[int]:
    """`count` teams (board-team-000, ...), made if missing: their ids."""
    from sqlalchemy import select

    from grader.store.keys import create_team
    from grader.store.models import Team

    names = [f"board-team-{i:03d}" for i in range(count)]
    with db.write() as s:
        have = {t.name: t.id for t in s.scalars(select(Team).where(Team.name.in_(names)))}
        for name in names:
            if name not in have:
                have[name] = create_team(s, name).id
    return [have[n] for n in names]


def load_runs(db: Any, first: int, count: int, tasks: int, *, seed: int = 22, teams: int = 100) -> int:
    """Runs `first` .. first+count-1 (r00000, ...), public, over 100 teams, their figures
    never computed (as after a migration, or a change of the task set): the submissions
    written in bulk. How many submissions were written."""
    from sqlalchemy import insert

    from grader.store.models import Run, Submission

    team_ids = ensure_teams(db, teams)
    start = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    written = 0
    postgres = db.engine.dialect.name == "postgresql"
    for at in range(first, first + count, 50):  # 50 runs a transaction
        batch = range(at, min(first + count, at + 50))
        runs, rows = [], []
        for n in batch:
            when = start + dt.timedelta(hours=n)
            team = team_ids[n % teams]
            name = f"r{n:05d}"
            runs.append(
                {
                    "id": f"{n:016x}",
                    "team_id": team,
                    "name": name,
                    "method": f"agent {n % 37}",
                    "public": True,
                    "baseline": False,
                    "hidden": False,
                    "verified": n % 10 == 0,
                    "created_at": when,
                    "published_at": when,
                    "figures_stale": True,
                }
            )
            rows.extend(run_rows(n, team, name, tasks, seed, when))
        with db.write() as s:
            s.execute(insert(Run), runs)
            if postgres:
                _copy(s, rows)
            else:
                s.execute(insert(Submission), [dict(zip(SUBMISSION_COLUMNS, r, strict=True)) for r in rows])
        written += len(rows)
    return written


def _copy(s: Any, rows: list[tuple[Any, ...]]) -> None:
    """COPY the rows into submissions on the session's own connection (its transaction)."""
    raw = s.connection().connection.driver_connection
    with raw.cursor() as cur, cur.copy(f"COPY submissions ({', '.join(SUBMISSION_COLUMNS)}) FROM STDIN") as copy:
        for r in rows:
            copy.write_row(r)
