"""`grader demo`: every task's gold patch, the empty patch and a broken patch, graded
through a grader service (or in this process with --local), and the verdicts checked."""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from rich.progress import TaskID
from rich.table import Table

from grader.cli.app import common, main
from grader.cli.render import VERDICT_STYLE, err, escape, out, progress
from grader.config import Settings, get_settings
from grader.pipeline import Grader
from grader.tasks.loader import TaskSet
from grader.verdict import Verdict

BROKEN_PATCH = "--- a/no/such/file.py\n+++ b/no/such/file.py\n@@ -1 +1 @@\n-old\n+new\n"


@main.command()
@click.option("--local", is_flag=True, help="Grade in this process instead of through the service.")
@click.option("--runtime", type=click.Choice(["runc", "runsc"]), default=None, help="With --local.")
@click.option("--json", "as_json", is_flag=True)
@click.option("--url", default=None, help="The grader service [default: GRADER_API_URL].")
@click.option("--api-key", default=None, help="[default: GRADER_API_KEY]")
@common
def demo(
    settings: Settings, local: bool, runtime: str | None, as_json: bool, url: str | None, api_key: str | None
) -> None:
    """Grade every task's gold patch, the empty patch and a broken patch through the REST
    API, then the gold patches again (answered from the cache), and print the verdicts."""
    ts = TaskSet(settings.tasks_dir)
    cases = [(t.id, "gold", (t.gold_patch_text() or b"").decode("utf-8")) for t in ts]
    cases += [(t.id, "empty", "") for t in ts]
    cases.append((ts.ids()[0], "broken", BROKEN_PATCH))
    expected = {"gold": Verdict.PASS, "empty": Verdict.FAIL, "broken": Verdict.PATCH_FAILED}
    if local:
        rows = _demo_local(settings, ts, cases, runtime)
    else:
        rows = _demo_service(settings, cases, url, api_key)
    if as_json:
        click.echo(json.dumps(rows, indent=1))
    else:
        table = Table("task", "patch", "verdict", "cached", "seconds", "graded by", "explanation", title="grader demo")
        table.columns[0].no_wrap = True
        for r in rows:
            v = Verdict(r["verdict"]) if r["verdict"] else None
            table.add_row(
                r["task"],
                r["patch"],
                f"[{VERDICT_STYLE[v]}]{v}[/]" if v else str(r["status"]),
                "yes" if r.get("cached") else "",
                f"{r['seconds']:.2f}",
                r.get("host") or ("the cache" if r.get("cached") else ""),
                escape(r["explanation"]),
            )
        out.print(table)
    wrong = [(r["task"], r["patch"], r["verdict"]) for r in rows if r["verdict"] != expected[r["patch"].split()[0]]]
    if wrong:
        err.print(f"[red]{len(wrong)} unexpected verdict(s):[/red] {wrong}")
        sys.exit(1)
    err.print(f"[green]all {len(rows)} verdicts as expected[/green] (gold PASS, empty FAIL, broken PATCH FAILED)")


Case = tuple[str, str, str]  # task id, which patch (gold, empty, broken), the patch


def _demo_local(settings: Settings, ts: TaskSet, cases: list[Case], runtime: str | None) -> list[dict[str, Any]]:
    grader = Grader(settings, runtime=runtime)
    rows: list[dict[str, Any]] = []
    with progress() as bar:
        job = bar.add_task("grading", total=len(cases))
        for task_id, label, patch in cases:
            bar.update(job, description=f"grading {task_id}")
            r = grader.grade(ts.get(task_id), patch.encode())
            rows.append(
                {
                    "task": task_id,
                    "patch": label,
                    "verdict": r.verdict.value,
                    "status": "done",
                    "seconds": r.durations.get("total", 0.0),
                    "explanation": r.explanation,
                }
            )
            bar.advance(job)
    return rows


def _demo_service(settings: Settings, cases: list[Case], url: str | None, api_key: str | None) -> list[dict[str, Any]]:
    import time
    import uuid

    from pydantic import SecretStr

    from grader.client import ApiError, Client

    st = get_settings(api_url=url, api_key=SecretStr(api_key) if api_key else None)
    if st.api_key is None:
        err.print("[red]error:[/red] no API key: set GRADER_API_KEY or pass --api-key (scripts/demo.sh does both)")
        sys.exit(2)
    client = Client(st.api_url, st.api_key)
    run = f"demo-{uuid.uuid4().hex[:8]}"
    rows: list[dict[str, Any]] = []
    try:
        for round_, todo in (("", cases), (" again", [c for c in cases if c[1] == "gold"])):
            t0 = time.monotonic()
            # a run per kind of patch: a run holds one attempt per task and trial, and a
            # run of gold patches is what a leaderboard would rank (the second round: a run of its own)
            answer = client.submit_batch(
                [
                    {
                        "task_id": t,
                        "patch": p,
                        "system": label,
                        "metadata": {"demo": label},
                        "run_id": f"{run}-{label}{round_.replace(' ', '-')}",
                    }
                    for t, label, p in todo
                ]
            )
            ids = [it.get("id") for it in answer["items"]]
            refused = [(todo[it["index"]][0], it["error"]["message"]) for it in answer["items"] if "error" in it]
            if refused:
                raise click.ClickException(f"the service refused {len(refused)} submission(s): {refused[:3]}")
            with progress() as bar:
                job = bar.add_task(f"grading {len(ids)} submissions through {st.api_url}", total=len(ids))

                def advance(_s: dict[str, Any], job: TaskID = job) -> None:
                    bar.advance(job)

                client.wait(ids, timeout=900, poll=0.5, on_done=advance)
            wall = time.monotonic() - t0
            for (task_id, label, _), sid in zip(todo, ids, strict=False):
                sub = client.get(sid)
                result = sub.get("result") or {}
                rows.append(
                    {
                        "task": task_id,
                        "patch": label + round_,
                        "id": sid,
                        "verdict": sub["verdict"],
                        "status": sub["status"],
                        "cached": sub["cached"],
                        "host": sub["host"],
                        "seconds": (result.get("durations") or {}).get("total", 0.0) if not sub["cached"] else 0.0,
                        "explanation": result.get("explanation", ""),
                    }
                )
            what = "the gold patches again (the cache answers)" if round_ else "every task: gold, empty, broken"
            err.print(f"{what}: {len(ids)} submissions, {wall:.1f} s from POST to the last verdict", highlight=False)
    except ApiError as exc:
        err.print(f"[red]error:[/red] {escape(exc)}", highlight=False)
        sys.exit(2)
    return rows
