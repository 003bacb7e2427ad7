"""The feedback policy through the whole service (the policy function itself is tested in
tests/unit/test_feedback.py): a real grade in Docker through the Flask app, a real Redis
and a worker, read back through every route a result leaves by (GET, listing, ?wait=,
the webhook, the portal page).

The attack this proves: a patch whose code reads the hidden test file and prints it
base64- and hex-encoded and prefixed, then raises so the test fails with a traceback.
Line masking cannot recognise any of that; the policy must leave it out."""

from __future__ import annotations

import base64
import itertools
import json
import threading

import pytest

from grader.serializers.redact import MASK

LEAK_STDOUT = """\
import base64
import pathlib


def _hidden():
    return (pathlib.Path(__file__).resolve().parent.parent / "tests" / "test_mean.py").read_bytes()


def mean(xs):
    data = _hidden()
    print("B64:" + base64.b64encode(data).decode())
    print("HEX:" + data.hex())
    for line in data.decode().splitlines():
        print("LEAK| " + line)
    raise RuntimeError("see the captured stdout")
"""


# the same file, carried by the traceback instead: an exception message and stderr
LEAK_TRACEBACK = """\
import base64
import pathlib
import sys


def mean(xs):
    data = (pathlib.Path(__file__).resolve().parent.parent / "tests" / "test_mean.py").read_bytes()
    sys.stderr.write("B32:" + base64.b32encode(data).decode() + "\\n")
    raise RuntimeError("HEX2:" + data[::-1].hex())
"""


def _hidden_test() -> bytes:
    from helpers.mini import HIDDEN_TEST

    return HIDDEN_TEST.encode()


def traces(body: str) -> list[str]:
    """What of the hidden test file a response body carries, in any of the attacks' forms."""
    data = _hidden_test()
    found = [m for m in ("B64:", "HEX:", "LEAK|", "B32:", "HEX2:") if m in body]
    for name, encoded in (
        ("base64", base64.b64encode(data).decode()),
        ("hex", data.hex()),
        ("base32", base64.b32encode(data).decode()),
        ("reversed hex", data[::-1].hex()),
    ):
        if encoded[:32] in body or encoded[-32:] in body:
            found.append(name)
    for line in data.decode().splitlines():
        if len(line.strip()) >= 8 and line.strip() in body:
            found.append(line.strip())
    return found


@pytest.fixture(scope="module")
def world(tmp_path_factory, redis_server, settings, mini):
    """The service over a tasks directory holding the mini task under each policy and the
    examples' merge task (expected files from a commit, under the examples' `full`). The
    submitter grades the attacks and honest patches once; the tests read them back."""
    import shutil

    from grader import jobs
    from grader.app import create_app
    from grader.pipeline import Grader
    from helpers.mini import FIXED
    from helpers.service import Api, Receiver, make_service, new_key, work

    tasks = tmp_path_factory.mktemp("feedback-tasks")
    shutil.copy(settings.tasks_dir / "mini.bundle", tasks / "mini.bundle")
    for policy in ("tests", "verdict", "full"):
        d = tasks / f"leak-{policy}"
        shutil.copytree(settings.tasks_dir / "mini", d)
        text = (d / "task.yaml").read_text().replace("id: mini", f"id: leak-{policy}")
        (d / "task.yaml").write_text(text + f"feedback: {policy}\n")
    exact = _exact_suite(tasks / "exact", mini)
    redis_server.flush()
    db = tmp_path_factory.mktemp("feedback-db") / "grader.db"
    svc = make_service(
        f"sqlite:///{db}", redis_server.url, tasks_dir=tasks, cache_dir=settings.cache_dir, retry_backoff=0, cache=False
    )
    jobs.use(svc, Grader(svc.settings))
    app = create_app(service=svc, migrate=False)
    client = app.test_client()
    team, host = Api(client, new_key(svc, "submitter")), Api(client, new_key(svc, "host", admin=True))
    assert svc.task("exact-full").feedback == "full"  # from its suite.yaml
    gold = mini.diff({"calc/__init__.py": FIXED}).decode()
    leak = mini.diff({"calc/__init__.py": LEAK_STDOUT}).decode()
    leak_tb = mini.diff({"calc/__init__.py": LEAK_TRACEBACK}).decode()
    rx = Receiver([])
    trials = itertools.count(1)  # one run: each attempt its own trial (a second at one trial is 409)

    def post(task_id, patch, query=""):
        r = team.post(
            f"/v1/submissions{query}",
            json={
                "task_id": task_id,
                "patch": patch,
                "callback_url": rx.url,
                "run_id": "leak-run",
                "trial": next(trials),
            },
        )
        assert r.status_code in (200, 202), r.json
        return r

    ids = {
        ("tests", "leak-traceback"): post("leak-tests", leak_tb).json["id"],
        ("tests", "gold"): post("leak-tests", gold).json["id"],
        ("verdict", "leak"): post("leak-verdict", leak).json["id"],
        ("verdict", "empty"): post("leak-verdict", "").json["id"],
        ("verdict", "gold"): post("leak-verdict", gold).json["id"],
        ("full", "leak"): post("leak-full", leak).json["id"],
        ("exact", "empty"): post("exact-full", "").json["id"],
        ("exact", "near-miss"): post("exact-full", mini.diff({"calc/__init__.py": NEAR_MISS}).decode()).json["id"],
        ("exact", "honest"): post("exact-full", mini.diff({"calc/__init__.py": EXPECTED}).decode()).json["id"],
    }
    work(svc)
    # the stdout attack through ?wait=: the POST holds (in a thread) while a worker grades it
    waited: dict = {}
    holder = threading.Thread(target=lambda: waited.update(r=post("leak-tests", leak, "?wait=120")))
    holder.start()
    while holder.is_alive():
        work(svc)
        holder.join(0.2)
    assert waited["r"].status_code == 200 and waited["r"].json["status"] == "done", waited["r"].json
    ids[("tests", "leak")] = waited["r"].json["id"]
    work(svc)  # its webhook
    portal = app.test_client()
    assert portal.post("/login", data={"key": team.key}).status_code == 302
    hooks = {json.loads(body)["submission"]["id"]: body.decode() for _, body in rx.got}
    yield {
        "svc": svc,
        "team": team,
        "host": host,
        "ids": ids,
        "waited": waited["r"].get_data(as_text=True),
        "hooks": hooks,
        "portal": portal,
        "rx": rx,
        "exact": exact,
    }
    rx.close()
    svc.close()


EXPECTED = (
    'def mean(xs):\n    """The arithmetic mean; an empty sequence has none."""\n    if not xs:\n'
    "        raise ValueError('the mean of nothing')\n    return sum(xs) / len(xs)\n"
)


NEAR_MISS = EXPECTED.replace("the mean of nothing", "empty")


EXACT_TASK = """\
id: exact-full
instruction: Make calc.mean raise ValueError on an empty list.
repo: {{bundle: ../exact.bundle, commit: {base}}}
environment: python-3.11
check:
  type: exact_match
  expected_commit: {fix}
  paths: [calc/__init__.py]
limits: {{timeout: 20, memory: 256m, pids: 64}}
"""


def _exact_suite(root, mini) -> dict:
    """An exact-match task whose expected file exists only in a later commit of its
    repository (no gold patch, whose lines would be masked anyway), under a suite.yaml
    that gives it `full`."""
    from helpers.mini import git

    root.mkdir()
    repo = root / "src"
    git("clone", "-q", str(mini.src), str(repo), cwd=root)
    (repo / "calc" / "__init__.py").write_text(EXPECTED)
    git("commit", "-qam", "fix", cwd=repo)
    fix = git("rev-parse", "HEAD", cwd=repo).strip()
    git("bundle", "create", "-q", str(root / "exact.bundle"), "--all", cwd=repo)
    (root / "suite.yaml").write_text("defaults:\n  feedback: full\n")
    (root / "exact-full").mkdir()
    (root / "exact-full" / "task.yaml").write_text(EXACT_TASK.format(base=mini.base, fix=fix))
    return {"fix": fix}


def _routes(world, sid: str) -> dict[str, str]:
    """Every body in which a result reaches its submitter. The portal's page also shows
    the diff the submitter sent, exactly as sent (checked here): that block is its own
    and is left out of what the tests search for traces of the hidden test."""
    team = world["team"]
    answers = {
        "GET": team.get(f"/v1/submissions/{sid}"),
        "listing": team.get("/v1/submissions?run_id=leak-run"),
        "portal": world["portal"].get(f"/submissions/{sid}"),
    }
    assert {route: r.status_code for route, r in answers.items()} == {route: 200 for route in answers}
    bodies = {route: r.get_data(as_text=True) for route, r in answers.items()}
    bodies["portal"] = _without_own_patch(world, sid, bodies["portal"])
    return {**bodies, "webhook": world["hooks"][sid]}


def _own_patch(world, sid: str) -> str:
    from grader.store.models import Submission

    with world["svc"].db.read() as s:
        return s.get(Submission, sid).patch.decode()


def _without_own_patch(world, sid: str, page: str) -> str:
    import html
    import re

    sent = _own_patch(world, sid)
    block = re.search(r'<pre id="patch" class="diff">(.*?)</pre>', page, re.S)
    if not sent:
        assert block is None and 'id="patch"' in page
        return page
    assert html.unescape(re.sub(r"<[^>]+>", "", block.group(1))).rstrip("\n") == sent.rstrip("\n")
    return page.replace(block.group(0), "")


def test_the_attack_reads_the_hidden_test_back_where_nothing_withholds_it(world):
    # without the policy the attack works: this is what the tests below prove is withheld
    host = world["host"]
    for attack in ("leak", "leak-traceback"):
        body = host.get(f"/v1/submissions/{world['ids'][('tests', attack)]}").get_data(as_text=True)
        sub = json.loads(body)
        assert sub["verdict"] == "FAIL" and sub["feedback"] == "full"
        assert (
            {"B64:", "base64", "hex"} <= set(traces(body))
            if attack == "leak"
            else {"B32:", "HEX2:", "base32", "reversed hex"} <= set(traces(body))
        ), traces(body)
    # and under `full` the test output is the submitter's, hidden test and all (the docs say so)
    body = _routes(world, world["ids"][("full", "leak")])["GET"]
    assert json.loads(body)["feedback"] == "full" and "base64" in traces(body)


@pytest.mark.parametrize("attack", ["leak", "leak-traceback"])
def test_under_tests_the_submitter_gets_no_trace_of_the_hidden_test(world, attack):
    sid = world["ids"][("tests", attack)]
    bodies = _routes(world, sid)
    if attack == "leak":
        bodies["?wait="] = world["waited"]
    assert {route: traces(body) for route, body in bodies.items()} == {route: [] for route in bodies}
    sub = json.loads(bodies["GET"])
    assert sub["feedback"] == "tests" and sub["verdict"] == "FAIL" and "output" not in sub["result"]
    # what they do get: the listed tests' outcomes and where the run failed
    assert sub["result"]["tests"]["fail_to_pass"]["failure"] == ["tests/test_mean.py::test_empty"]
    assert "tests/test_mean.py::test_empty" in bodies["portal"] and 'id="output"' not in bodies["portal"]
    assert json.loads(bodies["webhook"])["submission"]["result"] == sub["result"]


def test_under_tests_an_honest_submission_gets_what_it_needs(world):
    sub = json.loads(_routes(world, world["ids"][("tests", "gold")])["GET"])
    r = sub["result"]
    assert (sub["verdict"], r["explanation"]) == ("PASS", "All 3 required test(s) passed.")
    assert r["tests"]["fail_to_pass"]["success"] == ["tests/test_mean.py::test_empty"]
    assert sorted(r["tests"]["all"]) == sorted(
        ["tests/test_mean.py::test_empty", "tests/test_mean.py::test_two", "tests/test_basic.py::test_one"]
    )
    # issue 18: no durations under `tests` (a sleep encodes a byte in them)
    assert "durations" not in r and r["provenance"]["image_id"].startswith("sha256:")
    assert r["apply"]["method"] == "git apply"


@pytest.mark.parametrize("attack", ["leak", "empty"])
def test_under_verdict_the_submitter_sees_no_test(world, attack):
    bodies = _routes(world, world["ids"][("verdict", attack)])
    assert {route: traces(body) for route, body in bodies.items()} == {route: [] for route in bodies}
    sub = json.loads(bodies["GET"])
    assert sub["feedback"] == "verdict" and sub["verdict"] == "FAIL"
    assert set(sub["result"]) == {"task_id", "verdict", "explanation"}
    for route, body in bodies.items():
        assert "test_empty" not in body and "test_two" not in body and "test_one" not in body, route
    assert sub["result"]["explanation"] in (
        "1 of 3 required test(s) did not pass.",
        "3 of 3 required test(s) did not pass.",
    )
    # the host sees the tests
    full = world["host"].get(f"/v1/submissions/{sub['id']}").json
    assert full["feedback"] == "full" and "tests/test_mean.py::test_empty" in full["result"]["explanation"]


def test_under_verdict_an_honest_submission_is_told_it_passed(world):
    bodies = _routes(world, world["ids"][("verdict", "gold")])
    sub = json.loads(bodies["GET"])
    assert sub["result"] == {
        "task_id": "leak-verdict",
        "verdict": "PASS",
        "explanation": "All 3 required test(s) passed.",
    }
    assert json.loads(bodies["webhook"])["submission"]["result"] == sub["result"]
    assert "All 3 required test(s) passed." in bodies["portal"]


def _expected_lines() -> set[str]:
    """The expected file's lines that the base does not have: the answer."""
    from helpers.mini import BASE_FILES

    base = {ln.strip() for text in BASE_FILES.values() for ln in text.splitlines()}
    return {ln.strip() for ln in EXPECTED.splitlines() if len(ln.strip()) >= 8 and ln.strip() not in base}


@pytest.mark.parametrize("attack", ["empty", "near-miss"])
def test_expected_files_from_a_commit_are_masked_under_full(world, attack):
    from grader.serializers.redact import own_lines
    from grader.store.models import Submission

    sid = world["ids"][("exact", attack)]
    # what the submitter wrote itself is its own to read (the near miss wrote all but one expected line)
    own = own_lines(_own_patch(world, sid))
    secret = _expected_lines() - own
    assert len(secret) >= 3 if attack == "empty" else secret == {"raise ValueError('the mean of nothing')"}
    with world["svc"].db.read() as s:
        raw = json.dumps(s.get(Submission, sid).result)
    assert [ln for ln in secret if ln in raw], "the grade quotes no expected line: this test would prove nothing"
    bodies = _routes(world, sid)
    assert {route: [ln for ln in secret if ln in body] for route, body in bodies.items()} == {
        route: [] for route in bodies
    }
    sub = json.loads(bodies["GET"])
    assert sub["feedback"] == "full" and sub["verdict"] == "FAIL"
    assert MASK in sub["result"]["check"]["diffs"]["calc/__init__.py"]
    assert sub["result"]["explanation"] == "Not as expected: calc/__init__.py."
    if attack == "near-miss":  # the lines it wrote that match the expected file are not masked
        assert "if not xs:" in sub["result"]["check"]["diffs"]["calc/__init__.py"]


def test_expected_files_masking_leaves_an_honest_submission_alone(world):
    sub = json.loads(_routes(world, world["ids"][("exact", "honest")])["GET"])
    assert (sub["verdict"], sub["result"]["explanation"]) == ("PASS", "All 1 file(s) match the expected contents.")
    assert MASK not in json.dumps(sub)


@pytest.mark.parametrize("policy,patch", [("full", "leak"), ("tests", "gold")])
def test_participants_never_get_the_gold_files_through_any_route(world, policy, patch):
    """localization.gold_files, through the routes a result leaves by, under `full` too;
    the host reads them."""
    sid = world["ids"][(policy, patch)]
    bodies = _routes(world, sid)
    sub = json.loads(bodies["GET"])
    if policy == "tests":  # issue 18: under `tests` no localization at all (its figures count the gold files)
        assert "localization" not in sub["result"] and "gold_files" not in json.dumps(bodies)
        return
    assert sub["feedback"] == policy and sub["result"]["localization"]["gold_files"] == []
    assert sub["result"]["localization"]["recall"] is not None  # the figures stay
    assert json.loads(bodies["webhook"])["submission"]["result"]["localization"]["gold_files"] == []
    listed = next(x for x in json.loads(bodies["listing"])["items"] if x["id"] == sid)
    assert (listed.get("result") or {}).get("localization", {}).get("gold_files", []) == []
    assert world["host"].get(f"/v1/submissions/{sid}").json["result"]["localization"]["gold_files"] == [
        "calc/__init__.py"
    ]
