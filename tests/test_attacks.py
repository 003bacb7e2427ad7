"""Hostile submissions through the whole service, under runc and under gVisor.

Each attack is its own test: it is submitted through the REST API, graded by an RQ
worker in a real container, and must get the verdict named here. After each one no
grading container is left busy; after all of them, Redis and the API still answer and an
honest submission still passes. (tests/test_pipeline_docker.py proves the same hardening
one level down, on the grading core, with finer assertions on each.)"""

from __future__ import annotations

import secrets
import shutil
import textwrap
from pathlib import Path

import pytest

from grader import jobs
from grader.api import create_app
from grader.pipeline import Grader
from service_helpers import Api, make_service, new_key
from test_jobs_docker import work

pytestmark = [pytest.mark.docker, pytest.mark.service]
FIXED = "def mean(xs):\n    if not xs:\n        raise ValueError('empty')\n    return sum(xs) / len(xs)\n"
HOST_SECRET = Path(f"/tmp/grader-host-secret-{secrets.token_hex(4)}")
HOST_SECRET_TEXT = secrets.token_hex(16)
PF, TO, F, P = "PATCH FAILED", "TIMED OUT", "FAIL", "PASS"


def fixed_with(prelude: str) -> str:
    return textwrap.dedent(prelude) + "\n" + FIXED


def works_only_if(condition_code: str) -> str:
    """A fix that raises the ValueError only if `condition_code` (setting OK) succeeds:
    PASS would mean the attack worked, so the verdict must be FAIL."""
    return textwrap.dedent(condition_code) + textwrap.dedent("""
        def mean(xs):
            if not xs and OK:
                raise ValueError("empty")
            return sum(xs) / len(xs)
        """)


def _reach(host_port_code: str) -> str:
    return works_only_if(f"""\
        import socket
        OK = False
        for target in {host_port_code}:
            try:
                socket.create_connection(target, timeout=2).close()
                OK = True
            except OSError:
                pass
        """)


CONFTEST = textwrap.dedent("""\
    import pytest

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        outcome = yield
        rep = outcome.get_result()
        rep.outcome = "passed"
        rep.longrepr = None
    """)
FAKE_JUNIT = ('<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="3"><testcase '
              'classname="tests.test_mean" name="test_empty" file="tests/test_mean.py"/></testsuite></testsuites>')


def attacks(ports: dict[str, int]) -> dict[str, tuple[object, set[str]]]:
    """name -> (files for Mini.diff, or a callable(mini) -> patch text; the verdicts allowed)."""
    unfixed = FIXED.replace("raise ValueError('empty')", "return 0")
    return {
        "fork-bomb": ({"calc/__init__.py": fixed_with("""\
            import os
            while True:
                try:
                    os.fork()
                except OSError:
                    pass
            """)}, {TO, F}),
        "memory-hog": ({"calc/__init__.py": fixed_with("""\
            hog = []
            while True:
                hog.append(bytearray(64 * 1024 * 1024))
            """)}, {F, TO}),
        "disk-filler": ({"calc/__init__.py": fixed_with("""\
            import os
            for d in ("/tmp", "."):
                try:
                    with open(os.path.join(d, "fill"), "wb") as f:
                        while True:
                            f.write(b"x" * (1 << 20))
                except OSError:
                    pass
            raise SystemExit("disk full")
            """)}, {F, TO}),
        "output-flood": ({"calc/__init__.py": fixed_with("""\
            import sys
            for _ in range(200000):
                sys.stdout.write("spam " * 40 + "\\n")
            raise SystemExit(1)
            """)}, {F, TO}),  # gVisor's ptrace platform may not finish printing 40 MB in time
        "infinite-loop-at-import": ({"calc/__init__.py": fixed_with("while True:\n    pass\n")}, {TO}),
        "sleep-past-the-limit": ({"calc/__init__.py": fixed_with("import time\ntime.sleep(3600)\n")}, {TO}),
        "dns-lookup": ({"calc/__init__.py": works_only_if("""\
            import socket
            try:
                socket.getaddrinfo("deb.debian.org", 80)
                OK = True
            except OSError:
                OK = False
            """)}, {F}),
        "tcp-to-the-services-redis-and-api": (
            {"calc/__init__.py": _reach(repr([("127.0.0.1", ports["redis"]), ("127.0.0.1", ports["api"]),
                                              ("172.17.0.1", ports["redis"]), ("172.17.0.1", ports["api"]),
                                              ("1.1.1.1", 53)]))}, {F}),
        "read-host-file-by-absolute-path": ({"calc/__init__.py": works_only_if(f"""\
            try:
                OK = {HOST_SECRET_TEXT!r} in open({str(HOST_SECRET)!r}).read()
            except OSError:
                OK = False
            """)}, {F}),
        "read-host-file-through-a-symlink": (
            lambda mini: mini.diff({"calc/__init__.py": works_only_if(f"""\
                try:
                    OK = {HOST_SECRET_TEXT!r} in open("calc/leak.txt").read()
                except OSError:
                    OK = False
                """)}, symlinks={"calc/leak.txt": str(HOST_SECRET)}), {F}),
        "path-traversal": (lambda mini: (
            "diff --git a/../../../../etc/cron.d/x b/../../../../etc/cron.d/x\nnew file mode 100644\n"
            "--- /dev/null\n+++ b/../../../../etc/cron.d/x\n@@ -0,0 +1 @@\n+* * * * * root sh -c 'id'\n").encode(),
            {PF}),
        "edit-and-delete-hidden-tests": ({"tests/test_mean.py": "def test_empty():\n    pass\n"}, {F}),
        "delete-hidden-tests": ({"calc/__init__.py": unfixed, "tests/test_mean.py": ""}, {F}),
        "conftest-injection": ({"conftest.py": CONFTEST, "tests/conftest.py": CONFTEST}, {F}),
        "sitecustomize-injection": ({"sitecustomize.py": "import os\nos._exit(0)\n",
                                     "calc/evil.pth": "import os; os._exit(0)\n"}, {F}),
        "pytest-ini-and-setup-cfg-injection": ({"pytest.ini": "[pytest]\naddopts = -p no:python\n",
                                                "setup.cfg": "[tool:pytest]\npython_files = nothing_*.py\n"}, {F}),
        "forged-junit": ({"calc/__init__.py": fixed_with(f"""\
            for path in ("report.xml", "junit.xml", "/tmp/junit.xml"):
                with open(path, "w") as f:
                    f.write({FAKE_JUNIT!r})
            """).replace("raise ValueError('empty')", "return 0")}, {F}),
        "forged-passed-lines-and-exit-0": ({"calc/__init__.py": fixed_with("""\
            import os, sys
            print("tests/test_mean.py::test_empty PASSED")
            print("============================== 3 passed in 0.01s ===============================")
            sys.stdout.flush()
            os._exit(0)
            """)}, {F}),
        "binary-patch": ({"calc/__init__.py": unfixed, "calc/blob.bin": bytes(range(256)) * 64}, {F}),
        "50-MiB-patch": (lambda mini: ("--- a/calc/__init__.py\n+++ b/calc/__init__.py\n@@ -1,2 +1,2 @@\n"
                                       + "+" + "x" * (50 * 1024 * 1024) + "\n").encode(), {PF}),
        "crlf-and-mixed-encodings": (lambda mini: mini.diff({"calc/__init__.py": FIXED + "# caf\xe9\n"})
                                     .replace(b"\n", b"\r\n") + "# \u00e9t\u00e9 \udce9\n".encode("utf-8", "surrogateescape"),
                                     {P, F, PF}),
    }


@pytest.fixture(scope="module", params=["runc", "runsc"])
def env(request, tmp_path_factory, redis_server, settings):
    """The service on one runtime, with a copy of the mini task whose limit is short."""
    runtime = request.param
    tasks = tmp_path_factory.mktemp(f"attack-tasks-{runtime}")
    shutil.copytree(settings.tasks_dir, tasks, dirs_exist_ok=True)
    src = tasks / "mini"
    dst = tasks / "mini-attack"
    shutil.copytree(src, dst)
    (dst / "task.yaml").write_text((src / "task.yaml").read_text().replace("id: mini", "id: mini-attack")
                                   .replace("timeout: 20", "timeout: 8"))
    HOST_SECRET.write_text(HOST_SECRET_TEXT)
    redis_server.flush()
    db = tmp_path_factory.mktemp(f"attack-db-{runtime}") / "grader.db"
    svc = make_service(f"sqlite:///{db}", redis_server.url, tasks_dir=tasks, cache_dir=settings.cache_dir,
                       runtime=runtime, retry_backoff=0, max_retries=0, cache=False)
    grader = Grader(svc.settings)
    jobs.use(svc, grader)
    app = create_app(service=svc, migrate=False)
    yield {"svc": svc, "api": Api(app.test_client(), new_key(svc, "attacker")), "grader": grader,
           "ports": {"redis": redis_server.port, "api": 8000}, "runtime": runtime}
    svc.close()
    HOST_SECRET.unlink(missing_ok=True)


def submit_and_grade(env, patch: bytes) -> dict:
    r = env["api"].post("/v1/submissions", json={"task_id": "mini-attack",
                                                  "patch": patch.decode("utf-8", errors="surrogateescape")
                                                  .encode("utf-8", errors="replace").decode("utf-8")})
    assert r.status_code == 202, r.json
    work(env["svc"])
    return env["api"].get(f"/v1/submissions/{r.json['id']}").json


NAMES = list(attacks({"redis": 1, "api": 1}))


@pytest.mark.parametrize("name", NAMES)
def test_attack(env, mini, name):
    spec, allowed = attacks(env["ports"])[name]
    patch = spec(mini) if callable(spec) else mini.diff(spec)
    got = submit_and_grade(env, patch)
    assert got["status"] == "done"
    assert got["verdict"] in allowed, \
        f"{name} under {env['runtime']}: {got['verdict']}: {got['result']['explanation']} {got['result'].get('error')}"
    assert got["verdict"] != "ERROR"
    assert env["grader"].sandbox.busy_containers() == [], "a grading container was left behind"
    assert HOST_SECRET.read_text() == HOST_SECRET_TEXT


def test_after_every_attack_the_service_is_sound(env, mini):
    env["svc"].ping_redis()
    env["svc"].db.ping()
    assert env["api"].get("/healthz").status_code == 200
    got = submit_and_grade(env, mini.diff({"calc/__init__.py": FIXED}))
    assert got["verdict"] == "PASS", got["result"]["explanation"]
    assert env["grader"].sandbox.busy_containers() == []
