"""The API client's own logic (retries, idempotency keys, paging, batch splitting, waiting,
predictions files) and the `submit` / `status` commands, against a real HTTP server in
a thread that answers from a script: the service itself is tested elsewhere."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from grader.cli import main
from grader.client import ApiError, Client, PredictionsError, parse_predictions, read_predictions
from helpers.fake_api import Seen, error, submission

KEY = "k-test"


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def client(api, sleeps) -> Client:
    return Client(api.url, KEY, timeout=5, sleep=sleeps.append)


# --- retries and errors -------------------------------------------------------------------------
def test_503_with_retry_after_is_retried_with_the_same_idempotency_key(api, client, sleeps):
    api.on(
        "POST",
        "/v1/submissions",
        (503, error("overloaded", "queue full"), {"Retry-After": "2"}),
        (429, error("rate_limited", "slow down"), {"Retry-After": "1"}),
        (202, submission("s1"), {"Location": "/v1/submissions/s1"}),
    )
    sub = client.submit("t1", b"diff", run_id="r1", metadata={"a": 1})
    assert sub["id"] == "s1"
    assert sleeps == [2.0, 1.0]
    posts = api.requests("POST", "/v1/submissions")
    assert len(posts) == 3
    keys = {p.headers["idempotency-key"] for p in posts}
    assert len(keys) == 1 and len(keys.pop()) == 36  # one generated uuid4, sent every time
    assert all(p.headers["authorization"] == f"Bearer {KEY}" for p in posts)
    assert posts[0].body == {"task_id": "t1", "patch": "diff", "run_id": "r1", "metadata": {"a": 1}}


def test_the_callers_idempotency_key_and_wait_are_sent(api, client):
    api.on("POST", "/v1/submissions", (200, submission("s1", "done", "PASS")))
    client.submit("t1", "diff", wait=30, idempotency_key="mine")
    (post,) = api.seen
    assert post.headers["idempotency-key"] == "mine" and post.query == {"wait": "30"}


def test_422_is_not_retried(api, client, sleeps):
    api.on("POST", "/v1/submissions", (422, error("invalid", "task_id is required")))
    with pytest.raises(ApiError) as info:
        client.submit("", "diff")
    assert (info.value.status, info.value.code, info.value.message) == (422, "invalid", "task_id is required")
    assert len(api.seen) == 1 and sleeps == []
    assert "task_id is required" in str(info.value) and "422" in str(info.value)


def test_retries_are_bounded_and_the_last_error_is_raised(api, sleeps):
    api.on("GET", "/v1/submissions/s1", (502, b"<html>Bad Gateway</html>", {"Content-Type": "text/html"}))
    client = Client(api.url, KEY, max_retries=2, sleep=sleeps.append)
    with pytest.raises(ApiError) as info:
        client.get("s1")
    assert info.value.status == 502 and info.value.code == "http_502" and "Bad Gateway" in info.value.message
    assert len(api.seen) == 3 and len(sleeps) == 2
    assert 0.25 <= sleeps[0] <= 0.5 and 0.5 <= sleeps[1] <= 1.0  # exponential backoff with jitter


def test_a_retry_after_beyond_the_cap_is_raised_at_once(api, client, sleeps):
    api.on("POST", "/v1/submissions", (429, error("quota", "daily quota used"), {"Retry-After": "3600"}))
    with pytest.raises(ApiError) as info:
        client.submit("t1", "diff")
    assert info.value.retry_after == 3600 and len(api.seen) == 1 and sleeps == []


def test_no_answer_is_retried_then_raised_as_unreachable(sleeps):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = Client(f"http://127.0.0.1:{port}", KEY, max_retries=2, sleep=sleeps.append)
    with pytest.raises(ApiError) as info:
        client.account()
    assert info.value.status is None and info.value.code == "unreachable" and len(sleeps) == 2


def test_the_key_is_never_in_the_repr():
    from pydantic import SecretStr

    client = Client("http://x/", SecretStr("s3cret"))
    assert "s3cret" not in repr(client) and client.url == "http://x"


# --- batches ------------------------------------------------------------------------------------------
def batch_answer(req: Seen):
    """Accept every item but those named 'bad*'; ids are the items' instance ids."""
    out = []
    for i, item in enumerate(req.body["submissions"]):
        if item["instance_id"].startswith("bad"):
            out.append({"index": i, "error": {"code": "invalid", "message": "no such task"}})
        else:
            out.append({"index": i, "id": "id-" + item["instance_id"], "status": "queued"})
    ok = sum("id" in o for o in out)
    return 202, {"items": out[::-1], "accepted": ok, "rejected": len(out) - ok}  # any order: the client sorts


def test_a_big_batch_is_split_keeping_order_and_indexes(api, client):
    api.on("POST", "/v1/submissions/batch", batch_answer)
    client.batch_size = 2
    items = [{"instance_id": name, "model_name_or_path": "m", "model_patch": ""} for name in "a b bad-c d e".split()]
    answer = client.submit_batch(items, run_id="r1", system="s", idempotency_key="batch-1")
    assert [it["index"] for it in answer["items"]] == [0, 1, 2, 3, 4]
    assert [it.get("id") for it in answer["items"]] == ["id-a", "id-b", None, "id-d", "id-e"]
    assert answer["items"][2]["error"]["code"] == "invalid"
    assert (answer["accepted"], answer["rejected"]) == (4, 1)
    posts = api.requests("POST", "/v1/submissions/batch")
    assert [len(p.body["submissions"]) for p in posts] == [2, 2, 1]
    assert all(p.body["run_id"] == "r1" and p.body["system"] == "s" for p in posts)
    assert [p.headers["idempotency-key"] for p in posts] == ["batch-1.0", "batch-1.1", "batch-1.2"]


def test_a_chunk_refused_whole_marks_its_items_rejected(api, client):
    def answer(req):
        if any(it["instance_id"] == "huge" for it in req.body["submissions"]):
            return 413, error("too_large", "request body too large")
        return batch_answer(req)

    api.on("POST", "/v1/submissions/batch", answer)
    client.batch_size = 2
    items = [{"instance_id": n, "model_patch": ""} for n in ("a", "b", "huge", "c", "d")]
    answer = client.submit_batch(items)
    got = [it.get("id") or it["error"]["code"] for it in answer["items"]]
    assert got == ["id-a", "id-b", "too_large", "too_large", "id-d"]
    assert (answer["accepted"], answer["rejected"]) == (3, 2)
    keys = [p.headers["idempotency-key"] for p in api.seen]
    assert len({k.rsplit(".", 1)[0] for k in keys}) == 1  # one generated key, one suffix per chunk


def test_a_chunk_refused_whole_keeps_the_servers_reason_per_item(api, client):
    def answer(req):
        status, body = batch_answer(req)
        if body["accepted"]:
            return status, body
        body["error"] = {"code": "invalid_items", "message": "none of the items was accepted"}
        return 422, body

    api.on("POST", "/v1/submissions/batch", answer)
    client.batch_size = 2
    answer = client.submit_batch([{"instance_id": n} for n in ("a", "bad-1", "bad-2")])
    got = [it.get("id") or it["error"]["message"] for it in answer["items"]]
    assert got == ["id-a", "no such task", "no such task"]
    assert (answer["accepted"], answer["rejected"]) == (1, 2)


def test_long_idempotency_keys_stay_within_the_servers_limit(api, client):
    api.on("POST", "/v1/submissions/batch", batch_answer)
    client.batch_size = 1
    client.submit_batch([{"instance_id": "a"}, {"instance_id": "b"}], idempotency_key="k" * 180)
    assert all(len(r.headers["idempotency-key"]) <= 180 for r in api.seen)
    assert len({r.headers["idempotency-key"] for r in api.seen}) == 2


def test_a_chunk_whose_fate_is_unknown_raises_with_the_partial_answer(api, sleeps):
    def answer(req):
        if req.body["submissions"][0]["instance_id"] == "c":
            return 500, error("internal", "boom")
        return batch_answer(req)

    api.on("POST", "/v1/submissions/batch", answer)
    client = Client(api.url, KEY, batch_size=2, sleep=sleeps.append)
    with pytest.raises(ApiError) as info:
        client.submit_batch([{"instance_id": n} for n in "abcd"])
    assert info.value.status == 500 and info.value.partial["accepted"] == 2


# --- listing and waiting -----------------------------------------------------------------------------
def test_list_follows_next_cursor(api, client):
    pages = {None: (["a", "b"], "c1"), "c1": (["c", "d"], "c2"), "c2": (["e"], None)}

    def listing(req):
        ids, nxt = pages[req.query.get("cursor")]
        return 200, {"items": [submission(i) for i in ids], "next_cursor": nxt}

    api.on("GET", "/v1/submissions", listing)
    assert [s["id"] for s in client.list(run_id="r1", status="done")] == list("abcde")
    assert [r.query for r in api.seen] == [
        {"run_id": "r1", "status": "done"},
        {"run_id": "r1", "status": "done", "cursor": "c1"},
        {"run_id": "r1", "status": "done", "cursor": "c2"},
    ]
    api.seen.clear()
    assert [s["id"] for s in client.list(limit=3)] == list("abc")
    assert len(api.seen) == 2 and api.seen[0].query == {"limit": "3"}  # stops paging once it has enough


def test_wait_polls_until_done_with_gentle_backoff(api, client, sleeps):
    api.on(
        "GET",
        "/v1/submissions/s1",
        (200, submission("s1")),
        (200, submission("s1")),
        (200, submission("s1", "running")),
        (200, submission("s1", "done", "FAIL")),
    )
    api.on("GET", "/v1/submissions/s2", (200, submission("s2", "cancelled")))
    done = []
    subs = client.wait(["s1", "s2"], poll=1.0, on_done=done.append)
    assert list(subs) == ["s1", "s2"]
    assert subs["s1"]["verdict"] == "FAIL" and subs["s1"]["result"]["explanation"] == "because FAIL"
    assert [s["id"] for s in done] == ["s2", "s1"]
    assert sleeps == [1.0, 1.0, 1.5]  # back to `poll` after s2 finished, then growing
    assert len(api.requests("GET", "/v1/submissions/s2")) == 1  # a finished one is not asked again


def test_wait_gives_up_at_the_timeout_with_the_latest_state(api, sleeps):
    now = [0.0]

    def sleep(s):
        sleeps.append(s)
        now[0] += s

    api.on("GET", "/v1/submissions/s1", (200, submission("s1", "running")))
    client = Client(api.url, KEY, sleep=sleep, clock=lambda: now[0])
    subs = client.wait(["s1"], timeout=3, poll=1.0)
    assert subs["s1"]["status"] == "running"
    assert sleeps == [1.0, 1.5, 0.5]  # the last sleep ends at the deadline


def test_wait_for_a_run_lists_it_instead_of_fetching_each(api, client):
    api.on(
        "GET",
        "/v1/submissions",
        (
            200,
            {
                "items": [
                    submission("a", "done", "PASS"),
                    submission("b", "done", "FAIL"),
                    submission("other", "queued"),
                ],
                "next_cursor": None,
            },
        ),
    )
    api.on("GET", "/v1/submissions/c", (200, submission("c", "done", "PASS")))
    subs = client.wait(["a", "b", "c"], run_id="r1")
    assert {k: v["verdict"] for k, v in subs.items()} == {"a": "PASS", "b": "FAIL", "c": "PASS"}
    assert [r.path for r in api.seen] == ["/v1/submissions", "/v1/submissions/c"]


def test_cancel_tasks_and_account(api, client):
    api.on("DELETE", "/v1/submissions/s1", (409, error("conflict", "already running")))
    api.on("GET", "/v1/tasks", (200, {"items": [{"id": "t1"}]}))
    api.on("GET", "/v1/tasks/t1", (200, {"id": "t1"}))
    api.on("GET", "/v1/account", (200, {"team": "x", "admin": False, "quotas": {}, "usage": {}}))
    with pytest.raises(ApiError) as info:
        client.cancel("s1")
    assert info.value.status == 409
    assert client.tasks() == [{"id": "t1"}] and client.task("t1") == {"id": "t1"}
    assert client.account()["team"] == "x"


# --- predictions files -----------------------------------------------------------------------------------
PREDS = [
    {"instance_id": "a", "model_name_or_path": "m", "model_patch": "diff a"},
    {"instance_id": "b", "model_name_or_path": "m", "model_patch": "diff b"},
]


def test_read_predictions_in_every_shape(tmp_path):
    (tmp_path / "list.json").write_text(json.dumps(PREDS))
    (tmp_path / "p.jsonl").write_text("\n".join(json.dumps(p) for p in PREDS) + "\n\n")
    (tmp_path / "dict.json").write_text(
        json.dumps({p["instance_id"]: {k: v for k, v in p.items() if k != "instance_id"} for p in PREDS})
    )
    (tmp_path / "one.jsonl").write_text(json.dumps(PREDS[0]))
    for name in ("list.json", "p.jsonl", "dict.json"):
        assert read_predictions(tmp_path / name) == PREDS, name
    assert read_predictions(tmp_path / "one.jsonl") == PREDS[:1]
    assert parse_predictions(json.dumps([{"task_id": "t1", "patch": ""}])) == [{"task_id": "t1", "patch": ""}]


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"instance_id": "a"}\n{"instance_id": "b",\n{"instance_id": "c"}\n', "p.jsonl:2: not valid JSON"),
        ('{"instance_id": "a"}\n\n[1, 2]\n', "p.jsonl:3: expected a JSON object, got list"),
        ('{"instance_id": "a"}\n{"model_patch": ""}\n', "p.jsonl:2: has neither instance_id"),
        ('[{"instance_id": "a"},\n "x"]', "p.jsonl: item 1: expected a JSON object, got str"),
        ('[{"instance_id": "a"},\n {oops}]', "p.jsonl:2: not valid JSON"),
        ("  \n", "no predictions"),
    ],
)
def test_bad_predictions_name_the_line(tmp_path, text, message):
    path = tmp_path / "p.jsonl"
    path.write_text(text)
    with pytest.raises(PredictionsError, match=message.replace("[", r"\[")):
        read_predictions(path)


# --- the commands ------------------------------------------------------------------------------------------
def cli(api, *args, input=None):
    return CliRunner().invoke(main, [*args, "--url", api.url, "--api-key", KEY], input=input, catch_exceptions=False)


@pytest.mark.parametrize(
    "verdict, code", [("PASS", 0), ("FAIL", 1), ("TIMED OUT", 1), ("PATCH FAILED", 1), ("ERROR", 3)]
)
def test_submit_wait_exits_as_grade_does(api, tmp_path, verdict, code):
    api.on("POST", "/v1/submissions", (202, submission("s1")))
    api.on(
        "GET",
        "/v1/submissions/s1",
        (
            200,
            submission(
                "s1",
                "done",
                verdict,
                finished_at="2026-01-01T00:00:03+00:00",
                started_at="2026-01-01T00:00:01+00:00",
                host="w1",
            ),
        ),
    )
    result = cli(api, "submit", "--task", "t1", "--patch", "-", "--wait", input=b"diff")
    assert result.exit_code == code, result.output
    assert f"because {verdict}" in result.output and "host w1" in result.output and "ran 2.0 s" in result.output
    (post,) = api.requests("POST", "/v1/submissions")
    assert post.query == {"wait": "60"} and post.body == {"task_id": "t1", "patch": "diff"}


def test_submit_without_wait_prints_the_id_and_exits_0(api):
    api.on("POST", "/v1/submissions", (202, submission("s9")))
    result = cli(api, "submit", "--task", "t1", "--patch", "-", "--run-id", "r1", "--json", input=b"diff")
    assert result.exit_code == 0 and json.loads(result.output)["id"] == "s9"
    assert api.seen[0].query == {} and api.seen[0].body["run_id"] == "r1"


def test_submit_refused_exits_2_and_unanswered_exits_5(api):
    api.on("POST", "/v1/submissions", (422, error("invalid", "unknown task 'nope'")))
    result = cli(api, "submit", "--task", "nope", "--patch", "-", input=b"")
    assert result.exit_code == 2 and "unknown task 'nope'" in result.output
    api.on("POST", "/v1/submissions", (202, submission("s1")))
    api.on("GET", "/v1/submissions/s1", (200, submission("s1", "running")))
    result = cli(api, "submit", "--task", "t1", "--patch", "-", "--wait", "--timeout", "0", input=b"")
    assert result.exit_code == 5 and "no verdict within 0 s" in result.output


def test_submit_needs_a_key_and_one_kind_of_input(api, monkeypatch):
    from grader.config import _from_env

    monkeypatch.delenv("GRADER_API_KEY", raising=False)
    _from_env.cache_clear()
    try:
        result = CliRunner().invoke(main, ["submit", "--task", "t1", "--patch", "-", "--url", api.url], input=b"")
        assert result.exit_code == 2 and "no API key" in result.output
    finally:
        _from_env.cache_clear()
    assert cli(api, "submit", "--predictions", "-").exit_code == 2  # no --run-id
    assert cli(api, "submit", "--task", "t1").exit_code == 2  # no --patch
    assert api.seen == []


def test_submit_predictions_waits_and_summarizes(api, tmp_path):
    path = tmp_path / "preds.jsonl"
    path.write_text(
        "\n".join(json.dumps({"instance_id": n, "model_name_or_path": "m", "model_patch": ""}) for n in ("a", "b", "c"))
    )
    api.on("POST", "/v1/submissions/batch", batch_answer)
    verdicts = {"id-a": "PASS", "id-b": "FAIL", "id-c": "PASS"}
    api.on(
        "GET",
        "/v1/submissions",
        (200, {"items": [submission(i, "done", v) for i, v in verdicts.items()], "next_cursor": None}),
    )
    resolved = {"numerator": 2, "denominator": 5, "value": 0.4}
    view = {
        "name": "r1",
        "suites": ["s"],
        "complete": True,
        "metrics": {"task_set": {"resolved": resolved, "attempted": 3, "solve_rate": resolved}},
    }
    api.on("GET", "/v1/runs/r1", (200, view))
    result = cli(api, "submit", "--predictions", str(path), "--run-id", "r1", "--wait")
    assert result.exit_code == 0, result.output
    # the first line is the run's score over its suite, not a count of attempts
    first = next(line for line in result.output.splitlines() if line.strip() and "grading" not in line)
    assert first.startswith("run r1: resolved 2 of 5 tasks of suite s (40.0%, 3 attempted)"), result.output
    rows = {
        line.split("│")[1].strip(): line.split("│")[2].strip()
        for line in result.output.splitlines()
        if line.count("│") == 3
    }
    assert rows["PASS"] == "2" and rows["FAIL"] == "1" and rows["rejected"] == "0"
    result = cli(api, "submit", "--predictions", str(path), "--run-id", "r1", "--wait", "--json")
    assert json.loads(result.stdout)["counts"]["PASS"] == 2  # progress lines go to stderr


def test_submit_predictions_with_a_rejected_item_exits_4(api, tmp_path):
    path = tmp_path / "preds.json"
    path.write_text(json.dumps([{"instance_id": "a", "model_patch": ""}, {"instance_id": "bad-b", "model_patch": ""}]))
    api.on("POST", "/v1/submissions/batch", batch_answer)
    api.on("GET", "/v1/submissions", (200, {"items": [], "next_cursor": None}))  # the run holds nothing yet
    result = cli(api, "submit", "--predictions", str(path), "--run-id", "r1")
    assert result.exit_code == 4
    assert "rejected #1 bad-b: no such task (invalid)" in result.output and "1 accepted, 1 rejected" in result.output
    path.write_text('{"instance_id": "a"}\nnot json\n')
    result = cli(api, "submit", "--predictions", str(path), "--run-id", "r1")
    assert result.exit_code == 2 and "preds.json:2: not valid JSON" in result.output


def test_a_predictions_batch_first_asks_what_the_run_holds(api, tmp_path):
    """The run's submissions are listed (whole pages) before anything is sent; a task and
    trial it holds already stops the batch."""
    path = tmp_path / "preds.json"
    path.write_text(
        json.dumps([{"instance_id": "a", "model_patch": "", "trial": 1}, {"instance_id": "t1", "model_patch": ""}])
    )
    api.on("POST", "/v1/submissions/batch", batch_answer)
    held = [submission("s1", "done", "PASS", trial=1), submission("s2", "cancelled")]  # task t1; trials 1, none
    api.on("GET", "/v1/submissions", (200, {"items": held, "next_cursor": None}))
    assert cli(api, "submit", "--predictions", str(path), "--run-id", "r1").exit_code == 0  # (a, 1), (t1, None): new
    assert api.requests("GET", "/v1/submissions")[0].query == {"run_id": "r1", "limit": "1000"}
    held[1]["status"] = "done"
    result = cli(api, "submit", "--predictions", str(path), "--run-id", "r1")
    assert result.exit_code == 2 and "already holds 1 of these task and trial pair(s) (t1)" in result.output
    assert len(api.requests("POST", "/v1/submissions/batch")) == 1


def test_run_logs_download_whole_after_a_retry_and_publish_says_public(api, client, sleeps, tmp_path):
    archive = b"\x1f\x8b" + bytes(range(256)) * 1000
    api.on("GET", "/v1/runs/r1/logs", (503, error("unavailable", "busy"), {"Retry-After": "2"}), (200, archive))
    dest = tmp_path / "r1.tar.gz"
    assert client.run_logs("r1", dest) == len(archive) and dest.read_bytes() == archive
    assert sleeps == [2.0] and api.requests("GET", "/v1/runs/r1/logs")[-1].query == {"format": "tar.gz"}
    assert list(tmp_path.iterdir()) == [dest]  # nothing partial left beside it
    api.on("GET", "/v1/runs/nope/logs", (404, error("not_found", "no run 'nope'")))
    with pytest.raises(ApiError) as exc:
        client.run_logs("nope", tmp_path / "nope.zip", "zip")
    assert exc.value.status == 404 and list(tmp_path.iterdir()) == [dest]
    api.on("PATCH", "/v1/runs/r1", lambda req: (200, {"id": "r1", **req.body}))
    assert client.publish("r1", method="M", description=None) == {"id": "r1", "method": "M", "public": True}


def test_status_shows_the_outcome(api):
    sub = submission(
        "s1",
        "done",
        "FAIL",
        started_at="2026-01-01T00:00:01+00:00",
        finished_at="2026-01-01T00:00:04+00:00",
        host="w1",
        cached=True,
        run_id="r1",
        trial=2,
        prompt_variant="guided",
    )
    sub["result"]["tests"] = {
        "fail_to_pass": {"success": [], "failure": ["t::x"]},
        "pass_to_pass": {"success": ["t::y"], "failure": []},
        "all": {"t::x": "failed", "t::y": "passed"},
        "exit_code": 1,
    }
    api.on("GET", "/v1/submissions/s1", (200, sub))
    result = cli(api, "status", "s1")
    assert result.exit_code == 0, result.output
    for text in (
        "s1  done  t1",
        "(run id r1, trial 2, prompt variant guided)",
        "from cache",
        "host w1",
        "ran 3.0 s",
        "FAIL",
        "because FAIL",
        "t::x",
        "tests: 1 failed, 1 passed; FAIL_TO_PASS 0/1; PASS_TO_PASS 1/1",
    ):
        assert text in result.output, text
    assert json.loads(cli(api, "status", "s1", "--json").output)["verdict"] == "FAIL"
    api.on("GET", "/v1/submissions/nope", (404, error("not_found", "no submission 'nope'")))
    result = cli(api, "status", "nope")
    assert result.exit_code == 2 and "no submission 'nope'" in result.output


def test_help():
    for args in (["submit"], ["status"]):
        result = CliRunner().invoke(main, [*args, "--help"])
        assert result.exit_code == 0 and "--api-key" in result.output and "--url" in result.output


def test_importing_the_client_loads_no_grading_machinery():
    """A team's machine runs the client with neither Docker nor the service's stack:
    `import grader.client` must not load the Docker SDK, Flask, SQLAlchemy or RQ."""
    heavy = ("docker", "flask", "sqlalchemy", "rq", "redis")
    code = f"import sys, grader.client; print(sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
