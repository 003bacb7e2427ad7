"""`grader submit`, `grader runs publish` and `grader runs logs` through click's CliRunner
against the live app over real HTTP (SQLite and PostgreSQL, a real Redis). Grades are
finished through the store's own moves with known verdicts (tests/test_runs_api.py), by
a thread standing in for a worker where a command waits for them."""

from __future__ import annotations

import io
import json
import tarfile
import threading
import zipfile

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from grader.app import create_app
from grader.cli import main
from grader.serializers.redact import MASK
from grader.store import submissions as subs
from grader.store.models import Run, Submission
from grader.verdict import Provenance, Result, Verdict
from helpers.service import Api, new_key

pytestmark = pytest.mark.service
TASKS = ["calc-mean-empty", "calc-median-even"]
HIDDEN_LINE = "with pytest.raises(ValueError):"  # a line of calc-mean-empty's hidden test


@pytest.fixture
def key(svc):
    return new_key(svc, "cli-team")


def cli(served, key, *args, code=0, input=None):
    result = CliRunner().invoke(main, [*args, "--url", served, "--api-key", key], input=input, catch_exceptions=False)
    assert result.exit_code == code, (result.exit_code, result.output)
    return result


def rows(svc, run: str | None = None) -> list[Submission]:
    with svc.db.read() as s:
        q = s.query(Submission)
        if run is not None:
            q = q.filter(Submission.run_id == run)
        return q.order_by(Submission.id).all()


def verdict_for(row: Submission) -> Verdict:
    """PASS for a patch that says PASS, FAIL otherwise."""
    return Verdict.PASS if b"PASS" in row.patch else Verdict.FAIL


def finish_queued(svc) -> int:
    n = 0
    for row in [r for r in rows(svc) if r.status == "queued"]:
        c = subs.claim(svc.db, row.id, row.job_id, "test-host", 60)
        if c is None:
            continue
        subs.finish(
            svc.db,
            c,
            Result(
                task_id=row.task_id,
                verdict=verdict_for(row),
                explanation="set by the test",
                durations={"total": 0.5},
                output=f"quoting the hidden test:\n        {HIDDEN_LINE}\nand the patch:\n{row.patch.decode()}",
                provenance=Provenance(patch_sha256=row.patch_sha256, task_hash=row.task_hash, grader_version="t"),
            ),
        )
        n += 1
    return n


class Worker:
    """Finishes every queued submission until stopped: what a grading worker would do."""

    def __init__(self, svc):
        self.svc, self.stop = svc, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop.is_set():
            finish_queued(self.svc)
            self.stop.wait(0.05)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def predictions(tmp_path, name: str, lines: list[dict]):
    path = tmp_path / name
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def three_trials() -> list[dict]:
    out = []
    for trial in range(3):
        for task in TASKS:
            patch = "PASS" if task == "calc-median-even" or trial < 2 else "nope"
            out.append(
                {
                    "instance_id": task,
                    "model_name_or_path": "agent-1",
                    "model_patch": f"{patch} {trial}",
                    "trial": trial,
                }
            )
    return out


# --- submit --------------------------------------------------------------------------------------
def test_one_patch_with_trial_variant_metadata_and_callback(svc, served, key, tmp_path):
    meta = tmp_path / "meta.json"
    meta.write_text('{"seed": 7, "temperature": 0.2}')
    out = cli(
        served,
        key,
        "submit",
        "--task",
        "calc-mean-empty",
        "--patch",
        "-",
        "--run-id",
        "single",
        "--trial",
        "2",
        "--prompt-variant",
        "concise",
        "--metadata",
        "@" + str(meta),
        "--callback-url",
        "http://127.0.0.1:9/hook",
        "--json",
        input="a patch\n",
    ).stdout
    sub = json.loads(out)
    assert (sub["trial"], sub["prompt_variant"], sub["metadata"], sub["callback_url"]) == (
        2,
        "concise",
        {"seed": 7, "temperature": 0.2},
        "http://127.0.0.1:9/hook",
    )
    row = rows(svc, "single")[0]
    assert (row.trial, row.prompt_variant, row.meta) == (2, "concise", {"seed": 7, "temperature": 0.2})
    cli(
        served,
        key,
        "submit",
        "--task",
        "calc-mean-empty",
        "--patch",
        "-",
        "--metadata",
        '{"a": 1}',
        "--trial",
        "3",
        input="x",
    )
    assert rows(svc)[-1].meta == {"a": 1} and rows(svc)[-1].trial == 3
    # refused before anything is sent
    for bad in (
        ["--metadata", "[1, 2]"],
        ["--metadata", "{not json"],
        ["--trial", "-1"],
        ["--prompt-variant", "chatty"],
        ["--instance-ids", "x"],
        ["--overwrite"],
        ["--output-dir", "d"],
    ):
        r = cli(served, key, "submit", "--task", "calc-mean-empty", "--patch", "-", *bad, code=2, input="x")
        assert "Usage" in r.output or "Error" in r.output, r.output
    assert len(rows(svc)) == 2


def test_a_predictions_file_names_its_run_and_keeps_its_trials(svc, served, key, tmp_path):
    path = predictions(tmp_path, "agent-1-swe-lite.jsonl", three_trials())
    r = cli(served, key, "submit", "--predictions", str(path))
    assert "run agent-1-swe-lite: 6 accepted, 0 rejected" in r.stdout
    got = [(x.task_id, x.trial, x.system) for x in rows(svc, "agent-1-swe-lite")]
    assert sorted(got) == sorted((t, n, "agent-1") for n in range(3) for t in TASKS)
    # stdin has no name to take a run from
    r = cli(served, key, "submit", "--predictions", "-", code=2, input=path.read_text())
    assert "--run-id" in r.output


def test_trial_and_the_other_options_are_defaults_for_the_lines(svc, served, key, tmp_path):
    lines = [
        {"instance_id": "calc-mean-empty", "model_patch": "a"},
        {"instance_id": "calc-median-even", "model_patch": "b", "trial": 9, "cost": 1.5},
    ]
    path = predictions(tmp_path, "defaults.json", lines)
    r = cli(
        served,
        key,
        "submit",
        "--predictions",
        str(path),
        "--trial",
        "4",
        "--prompt-variant",
        "guided",
        "--metadata",
        '{"k": "v"}',
        "--system",
        "sys",
    )
    assert "not kept (grader has no such field): cost on 1 item(s)" in " ".join(r.stderr.split())
    got = [(x.task_id, x.trial, x.prompt_variant, x.meta, x.system) for x in rows(svc, "defaults")]
    assert got == [
        ("calc-mean-empty", 4, "guided", {"k": "v"}, "sys"),
        ("calc-median-even", 9, "guided", {"k": "v"}, "sys"),
    ]


def test_instance_ids_submit_a_subset(svc, served, key, tmp_path):
    path = predictions(tmp_path, "subset.jsonl", three_trials())
    cli(served, key, "submit", "--predictions", str(path), "--instance-ids", "calc-median-even")
    assert {(x.task_id, x.trial) for x in rows(svc, "subset")} == {("calc-median-even", n) for n in range(3)}
    r = cli(
        served,
        key,
        "submit",
        "--predictions",
        str(path),
        "--run-id",
        "subset-2",
        "--instance-ids",
        "calc-mean-empty,no-such-task",
        "--instance-ids",
        "other",
        code=2,
    )
    assert "no-such-task" in r.output and "other" in r.output and "calc-mean-empty," not in r.output
    assert rows(svc, "subset-2") == []


def test_a_run_is_not_reused_without_overwrite(svc, served, key, tmp_path):
    path = predictions(tmp_path, "reuse.jsonl", [{"instance_id": t, "model_patch": f"PASS {t}"} for t in TASKS])
    cli(served, key, "submit", "--predictions", str(path))
    assert len(rows(svc, "reuse")) == 2
    # the same file again: refused, nothing sent
    r = cli(served, key, "submit", "--predictions", str(path), code=2)
    message = " ".join(r.stderr.split())
    assert "run reuse already holds 2 of these task and trial pair(s)" in message and "--overwrite" in message
    assert len(rows(svc, "reuse")) == 2
    # a new trial of the same tasks is not a reuse
    cli(served, key, "submit", "--predictions", str(path), "--trial", "1")
    assert sorted((x.task_id, -1 if x.trial is None else x.trial) for x in rows(svc, "reuse")) == sorted(
        [(t, -1) for t in TASKS] + [(t, 1) for t in TASKS]
    )
    # --overwrite replaces the run: the earlier submissions leave it, the file's are all it holds
    before = {x.id for x in rows(svc)}
    cli(served, key, "submit", "--predictions", str(path), "--overwrite")
    now = rows(svc, "reuse")
    assert len(now) == 2 and not {x.id for x in now} & before
    assert len(rows(svc)) == len(before) + 2  # the earlier ones are kept, outside the run
    # a published run is not replaced: the service refuses to delete it, and nothing is sent
    cli(served, key, "runs", "publish", "reuse")
    r = cli(served, key, "submit", "--predictions", str(path), "--overwrite", code=2)
    assert "cannot be deleted" in " ".join(r.stderr.split()) and len(rows(svc, "reuse")) == 2


def test_output_dir_waits_and_writes_the_report(svc, served, key, tmp_path):
    path = predictions(tmp_path, "reported.jsonl", three_trials())
    out = tmp_path / "reports"
    with Worker(svc):
        r = cli(served, key, "submit", "--predictions", str(path), "--output-dir", str(out))
    report_file = out / "reported.json"
    assert f"SWE-bench report: {report_file}" in " ".join(r.stderr.split())
    report = json.loads(report_file.read_text())
    api = Api(create_app(service=svc, migrate=False).test_client(), key)
    assert report == api.get("/v1/runs/reported/report").json  # the same report the API gives
    assert report["submitted_ids"] == sorted(TASKS)
    assert "PASS" in r.stdout and all(x.status == "done" for x in rows(svc, "reported"))


# --- runs publish --------------------------------------------------------------------------------
def test_publish_from_the_cli(svc, served, key, tmp_path):
    cli(served, key, "submit", "--task", "calc-mean-empty", "--patch", "-", "--run-id", "to-publish", input="x")
    r = cli(
        served,
        key,
        "runs",
        "publish",
        "to-publish",
        "--method",
        "Agent 1",
        "--description",
        "one try",
        "--paper-url",
        "https://example.org/paper",
    )
    with svc.db.read() as s:
        run = s.query(Run).filter_by(name="to-publish").one()
        assert (run.public, run.method, run.description, run.paper_url, run.project_url) == (
            True,
            "Agent 1",
            "one try",
            "https://example.org/paper",
            None,
        )
    assert f"/runs/{run.id}" in r.stdout and "is public" in r.stdout
    meta = json.loads(cli(served, key, "runs", "publish", run.id, "--description", "two tries", "--json").stdout)
    assert meta["public"] and meta["description"] == "two tries" and meta["method"] == "Agent 1"
    r = cli(served, key, "runs", "publish", "to-publish", "--paper-url", "ftp://x", code=2)
    assert "paper_url" in r.stderr
    r = cli(served, key, "runs", "publish", "no-such-run", code=2)
    assert "no run 'no-such-run'" in r.stderr
    assert Api(create_app(service=svc, migrate=False).test_client(), None).get(f"/v1/runs/{run.id}").status_code == 200


# --- runs logs -----------------------------------------------------------------------------------
def members(data: bytes, fmt: str) -> dict[str, bytes]:
    if fmt == "zip":
        z = zipfile.ZipFile(io.BytesIO(data))
        return {n: z.read(n) for n in z.namelist()}
    t = tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")
    return {m.name: t.extractfile(m).read() for m in t.getmembers()}


@pytest.mark.parametrize("fmt,name", [("tar.gz", "logs.tar.gz"), ("zip", "logs.zip")])
def test_runs_logs_downloads_every_submission_in_one_archive(svc, served, key, tmp_path, fmt, name):
    path = predictions(tmp_path, "logged.jsonl", three_trials())
    cli(served, key, "submit", "--predictions", str(path))
    # a second attempt at trial 0, as a run made before one attempt a trial was the rule may
    # hold (the API refuses one now): written straight into the store; the archive keeps both, apart
    with svc.db.write() as s:
        first = s.scalars(
            select(Submission).where(
                Submission.run_id == "logged", Submission.task_id == "calc-mean-empty", Submission.trial == 0
            )
        ).first()
        copy = {c.name: getattr(first, c.name) for c in Submission.__table__.columns}
        s.add(Submission(**{**copy, "id": subs.new_id(), "patch": b"PASS again", "idempotency_key": None}))
    assert finish_queued(svc) == 7
    dest = tmp_path / name
    r = cli(served, key, "runs", "logs", "logged", "-o", str(dest))
    assert str(dest) in r.stderr
    files = members(dest.read_bytes(), fmt)
    index = json.loads(files.pop("logged/index.json"))
    assert index["run"] == "logged" and len(index["submissions"]) == 7
    by_id = {x.id: x for x in rows(svc, "logged")}
    for entry in index["submissions"]:
        row = by_id[entry["id"]]
        folder = f"logged/{entry['folder']}"
        assert files[f"{folder}/patch.diff"] == row.patch  # the patch as it was sent
        result = json.loads(files[f"{folder}/result.json"])
        assert (result["id"], result["verdict"], result["trial"]) == (row.id, row.verdict, row.trial)
        output = files[f"{folder}/test_output.txt"].decode()
        assert output == result["result"]["output"] and entry["test_output"] == "included"
        if row.task_id == "calc-mean-empty":  # the examples' policy is full: the output is there, secrets masked
            assert HIDDEN_LINE not in output and MASK in output
    folders = sorted(e["folder"] for e in index["submissions"])
    assert folders[:4] == [
        "calc-mean-empty/trial-0",
        f"calc-mean-empty/trial-0-{folders[1].rsplit('-', 1)[1]}",
        "calc-mean-empty/trial-1",
        "calc-mean-empty/trial-2",
    ]
    assert len(files) == 7 * 3


def test_runs_logs_are_the_teams_own(svc, served, key, tmp_path, app, monkeypatch):
    cli(served, key, "submit", "--task", "calc-mean-empty", "--patch", "-", "--run-id", "mine", input="x")
    finish_queued(svc)
    other = new_key(svc, "other-team")
    r = cli(served, other, "runs", "logs", "mine", "-o", str(tmp_path / "x.tar.gz"), code=2)
    assert "no run 'mine'" in r.stderr and not (tmp_path / "x.tar.gz").exists()
    # not another team's, even public; the host's yes; no key, 401; a bad format, 422
    cli(served, key, "runs", "publish", "mine")
    with svc.db.read() as s:
        run_id = s.query(Run).filter_by(name="mine").one().id
    assert Api(app.test_client(), other).get(f"/v1/runs/{run_id}/logs").status_code == 404
    assert Api(app.test_client(), None).get(f"/v1/runs/{run_id}/logs").status_code == 401
    host = Api(app.test_client(), new_key(svc, "host", admin=True))
    r = host.get(f"/v1/runs/{run_id}/logs?format=zip")
    assert r.status_code == 200 and r.mimetype == "application/zip"
    assert r.headers["Content-Disposition"] == "attachment; filename=mine-logs.zip"
    assert Api(app.test_client(), key).get(f"/v1/runs/{run_id}/logs?format=rar").status_code == 422
    # the default file name, in the current directory
    monkeypatch.chdir(tmp_path)
    cli(served, key, "runs", "logs", "mine")
    assert tarfile.is_tarfile(tmp_path / "mine-logs.tar.gz")
