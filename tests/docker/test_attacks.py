"""Hostile submissions through the whole service, under runc, gVisor and the pool (the
attacks made and judged inside pytest's own process under runc and the pool alone:
`INSIDE_THE_PROCESS` below).

Each attack is its own test: it is submitted through the REST API, graded by an RQ
worker in a real container, and must get the verdict it deserves: a patch that does not
fix the bug but tries to make the grade pass gets FAIL; one that tries to turn its
failure into an uncharged ERROR gets FAIL or PATCH FAILED; none gets ERROR. After each
one no grading container is left busy. The secrets tests check that what a submitter
sees of a task whose feedback is `tests` or `verdict` carries no trace of the hidden
tests, in any encoding the attack used; the honest ones, that the protections do not
hurt a real fix. After all of them Redis and the API still answer and the gold patch
still passes. (tests/test_pipeline_docker.py proves the same hardening one level down,
on the grading core, with finer assertions on each.)

The classes (issue 10): 1 code inside the test process deciding outcomes, 2 the diff's
headers against what git writes, 3 visible tests edited, 4 the file tree the submission
leaves, 5 command tasks decided by exit status, 6 secrets, 7 machinery failures caused
on purpose. The hostile code itself is in tests/attack_patches.py.
"""

from __future__ import annotations

import functools
import os
import secrets
import shutil
import subprocess
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from grader import jobs
from grader.app import create_app
from grader.metrics import similarity
from grader.pipeline import Grader
from helpers import attack_patches as ap
from helpers.attack_patches import FIXED, SITE, UNFIXED, code
from helpers.service import Api, make_service, new_key, work

pytestmark = [pytest.mark.docker, pytest.mark.service]
HOST_SECRET = Path(f"/tmp/grader-host-secret-{secrets.token_hex(4)}")
HOST_SECRET_TEXT = secrets.token_hex(16)
PF, TO, F, P = "PATCH FAILED", "TIMED OUT", "FAIL", "PASS"
# What the hidden test of the attack tasks carries besides its tests, and what the
# expected files of the exact-match tasks carry: a submitter must never read them back.
SENTINEL = "hsent" + secrets.token_hex(8)
SHORT_SECRET = "#" + secrets.token_hex(2)  # 5 characters: shorter than any line the masking covers
EXPECTED_EXACT = FIXED + f"{SHORT_SECRET}\nMARKER = 'exact-{SENTINEL}'\n"
EXPECTED_COMMIT = FIXED + f"MARKER = 'commit-{SENTINEL}'\n"
EXPECTED_OUTPUT = "mean([1, 2, 3]) = 2.0\nmean([10]) = 10.0\nmean([]) raises ValueError: empty\n"
REGRESSED = (
    "def mean(xs):\n    if not xs:\n        raise ValueError('empty')\n    if len(xs) == 1:\n        return 0.0\n"
    "    return sum(xs) / len(xs)\n"
)  # the fix, and a regression test_one catches
LISTS = (
    "  fail_to_pass: [tests/test_mean.py::test_empty]\n"
    "  pass_to_pass: [tests/test_mean.py::test_two, tests/test_basic.py::test_one]\n"
)
HIDDEN = "  hidden_tests: {tests/test_mean.py: test_mean.py}\n"
PYTEST_CMD = "python -m pytest -q -p no:cacheprovider"
TASK_YAML = """\
id: {id}
instruction: Make calc.mean raise ValueError on an empty list.
metadata: {{suite: mini, difficulty: easy, created_at: 2024-01-01}}
repo: {{bundle: ../{bundle}, commit: {commit}}}
environment: python-3.11
feedback: {feedback}
check:
{check}limits: {{timeout: 8, memory: 256m, pids: 64}}
{gold}"""
TASKS = {  # id -> (feedback, check block)
    "mini-attack": ("tests", "  type: tests\n" + HIDDEN + LISTS),
    "mini-verdict": ("verdict", "  type: tests\n" + HIDDEN + LISTS),
    # decided by exit status alone
    "mini-cmd": (
        "tests",
        f"  type: tests\n  runner: command\n  command: {PYTEST_CMD} tests/test_mean.py tests/test_basic.py\n" + HIDDEN,
    ),
    # decided by the JUnit file the command writes, with listed tests
    "mini-cmdj": (
        "tests",
        f"  type: tests\n  runner: command\n  command: {PYTEST_CMD} -o junit_family=xunit1 "
        "--junitxml=report.xml tests/test_mean.py tests/test_basic.py\n  junit: report.xml\n" + HIDDEN + LISTS,
    ),
    "mini-exact": ("tests", "  type: exact_match\n  files: {calc/__init__.py: expected.py}\n"),
    "mini-exact-commit": ("full", "  type: exact_match\n  expected_commit: {future}\n  paths: [calc/__init__.py]\n"),
    "mini-output": ("tests", "  type: output\n  command: python -m calc\n  expected: expected.txt\n  threshold: 0.9\n"),
}

# Without a gold patch, whose added lines would be masked as secrets anyway: what is
# masked of an expected file read from a commit is then the masking's own doing.
NO_GOLD = {"mini-exact-commit"}


# --- the service -------------------------------------------------------------------------


def _git(*args, cwd) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_AUTHOR_DATE": "2020-01-02T00:00:00Z",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "GIT_COMMITTER_DATE": "2020-01-02T00:00:00Z",
    }
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def _write_tasks(tasks: Path, mini, hidden_test: str) -> None:
    """The attack tasks: the mini task with an 8 s limit under every feedback policy and
    check kind, and a bundle with a later commit for the exact-match task that reads it."""
    future = tasks.parent / f"{tasks.name}-future"
    _git("clone", "-q", str(mini.src), str(future), cwd=tasks)
    (future / "calc" / "__init__.py").write_text(EXPECTED_COMMIT)
    _git("commit", "-qam", "the merge", cwd=future)
    future_sha = _git("rev-parse", "HEAD", cwd=future).strip()
    _git("bundle", "create", "-q", str(tasks / "mini-future.bundle"), "--all", cwd=future)
    golds = {
        "mini-attack": mini.diff({"calc/__init__.py": FIXED}),
        "mini-exact": mini.diff({"calc/__init__.py": EXPECTED_EXACT}),
        "mini-output": mini.diff(
            {"calc/__init__.py": FIXED, "calc/__main__.py": f"print({EXPECTED_OUTPUT!r}, end='')\n"}
        ),
    }
    for task_id, (feedback, check) in TASKS.items():
        d = tasks / task_id
        d.mkdir()
        bundle = "mini-future.bundle" if task_id == "mini-exact-commit" else "mini.bundle"
        gold = "" if task_id in NO_GOLD else "gold_patch: gold.patch\n"
        (d / "task.yaml").write_text(
            TASK_YAML.format(
                id=task_id,
                bundle=bundle,
                commit=mini.base,
                feedback=feedback,
                check=check.replace("{future}", future_sha),
                gold=gold,
            )
        )
        (d / "test_mean.py").write_text(hidden_test)
        if task_id not in NO_GOLD:
            (d / "gold.patch").write_bytes(golds.get(task_id, golds["mini-attack"]))
        (d / "expected.py").write_text(EXPECTED_EXACT)
        (d / "expected.txt").write_text(EXPECTED_OUTPUT)


@pytest.fixture(scope="module")
def env(sandbox, tmp_path_factory, redis_server, settings, mini):
    """The service on one provider (`sandbox`: tests/docker/conftest.py), with the attack
    tasks beside the mini ones."""
    runtime = sandbox
    tasks = tmp_path_factory.mktemp(f"attack-tasks-{runtime}")
    shutil.copytree(settings.tasks_dir, tasks, dirs_exist_ok=True)
    hidden_test = (settings.tasks_dir / "mini" / "test_mean.py").read_text() + f"\n\n# hidden marker: {SENTINEL}\n"
    _write_tasks(tasks, mini, hidden_test)
    HOST_SECRET.write_text(HOST_SECRET_TEXT)
    redis_server.flush()
    db = tmp_path_factory.mktemp(f"attack-db-{runtime}") / "grader.db"
    svc = make_service(
        f"sqlite:///{db}",
        redis_server.url,
        tasks_dir=tasks,
        cache_dir=settings.cache_dir,
        runtime=runtime,
        retry_backoff=0,
        max_retries=0,
        cache=False,
    )
    grader = Grader(svc.settings)
    jobs.use(svc, grader)
    app = create_app(service=svc, migrate=False)
    yield {
        "svc": svc,
        "api": Api(app.test_client(), new_key(svc, "attacker")),
        "host": Api(app.test_client(), new_key(svc, "host", admin=True)),
        "grader": grader,
        "ports": {"redis": redis_server.port, "api": 8000},
        "runtime": runtime,
        "hidden": hidden_test.encode(),
    }
    svc.close()
    HOST_SECRET.unlink(missing_ok=True)


@dataclass
class Graded:
    view: dict  # what the submitter sees (GET /v1/submissions/<id> with its own key)
    host: dict  # what a host sees (an admin key): everything

    @property
    def verdict(self) -> str:
        return self.view["verdict"]

    def why(self) -> str:
        r = self.host.get("result") or {}
        out = (r.get("output") or "")[-1500:]
        return (
            f"{self.host.get('verdict')}: {r.get('explanation')} | error: {(r.get('error') or '')[-800:]} "
            f"| tampered: {r.get('tampered')} | output tail: {out}"
        )


def test_a_50_mib_patch_is_refused_at_intake_and_never_reaches_a_worker(env):
    """Over GRADER_MAX_PATCH_BYTES: 413 naming the limit, nothing stored, nothing graded."""
    patch = "--- a/calc/__init__.py\n+++ b/calc/__init__.py\n@@ -1,2 +1,2 @@\n+" + "x" * (50 * 1024 * 1024) + "\n"
    r = env["api"].post("/v1/submissions", json={"task_id": "mini-attack", "patch": patch})
    assert r.status_code == 413 and r.json["error"]["code"] == "patch_too_large", r.json
    assert "GRADER_MAX_PATCH_BYTES" in r.json["error"]["message"]
    assert env["grader"].sandbox.busy_containers() == []


def grade(env, patch: bytes, task: str = "mini-attack") -> Graded:
    text = patch.decode("utf-8", errors="surrogateescape").encode("utf-8", errors="replace").decode("utf-8")
    r = env["api"].post("/v1/submissions", json={"task_id": task, "patch": text})
    assert r.status_code == 202, r.json
    work(env["svc"])
    sid = r.json["id"]
    return Graded(env["api"].get(f"/v1/submissions/{sid}").json, env["host"].get(f"/v1/submissions/{sid}").json)


# --- building patches ---------------------------------------------------------------------


class Ctx:
    """What an attack may use to build its patch: the mini repository, the instance image."""

    def __init__(self, env, mini, workdir: Path):
        self.env, self.mini, self.workdir = env, mini, workdir

    def diff(self, files: dict, symlinks: dict | None = None) -> bytes:
        return self.mini.diff(files, symlinks=symlinks)

    def tree_diff(self, change: Callable[[Path], None]) -> bytes:
        """The diff of whatever `change` does to a checkout of the base (symlinks
        replacing directories, files replacing directories...)."""
        src = self.mini.src
        try:
            change(src)
            _git("add", "-A", cwd=src)
            return subprocess.run(
                ["git", "diff", "--cached", "--binary"], cwd=src, check=True, capture_output=True
            ).stdout
        finally:
            _git("reset", "-q", "--hard", "HEAD", cwd=src)
            _git("clean", "-qfdx", cwd=src)

    def base(self, rel: str) -> bytes:
        return subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=self.mini.src, check=True, capture_output=True).stdout

    def image_stat(self, rel: str, task: str = "mini-attack") -> tuple[int, int]:
        """mtime and size of a repository file in the task's instance image: what an
        attacker learns with one earlier submission that prints os.stat()."""
        image_id, _ = self.env["grader"].images.instance_image(self.env["svc"].task(task))
        out = subprocess.run(
            [
                "docker",
                "run",
                "--rm",
                "--network",
                "none",
                "--entrypoint",
                "stat",
                image_id,
                "-c",
                "%Y %s",
                f"/work/repo/{rel}",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        mtime, size = out.split()
        return int(mtime), int(size)

    @functools.cached_property
    def native_flipper(self) -> bytes:
        return ap.native_extension("_speedups", ap.STEALTH_FLIP, self.workdir)


@pytest.fixture(scope="module")
def ctx(env, mini, tmp_path_factory) -> Ctx:
    return Ctx(env, mini, tmp_path_factory.mktemp(f"attack-build-{env['runtime']}"))


def _traditional(path_header: str, content: str) -> str:
    """A new file in a plain (non-git) unified diff, with the `+++` header as given."""
    lines = content.splitlines()
    return f"--- /dev/null\n+++ {path_header}\n@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{ln}\n" for ln in lines)


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


def unfixed_with(*payloads: str) -> str:
    """The unfixed module, preceded by hostile code: PASS would mean the attack worked."""
    return code(*payloads, UNFIXED)


FAKE_JUNIT = (
    '<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="3"><testcase '
    'classname="tests.test_mean" name="test_empty" file="tests/test_mean.py"/></testsuite></testsuites>'
)
TEST_BASIC_WITH = (
    "import pytest\nfrom calc import mean\n\n\n{decorator}def test_one():\n    assert mean([2]) == {want}\n"
)


def _no_link_followed(g: Graded) -> str | None:
    out = (g.host.get("result") or {}).get("output") or ""
    return "the supervisor followed a link out of the repository" if "LINK-CHECK FOLLOWED" in out else None


def _not_rescued_by_blame(g: Graded) -> str | None:
    """The right verdict reached only because a first attempt ERRORed and the gold patch
    was graded to blame the submission: the machinery still crashed on what it left."""
    r = g.host.get("result") or {}
    if r.get("blame") or "grading harness" in (r.get("explanation") or ""):
        return f"the grade crashed in the machinery first and was charged by blame: {r.get('blame')}"
    return None


def _rewrite_cache_attack(c: Ctx) -> bytes:
    """pytest's assertion-rewrite cache entry for the visible test file, matching the
    file's mtime and size in the image: pytest loads it instead of the source."""
    mtime, size = c.image_stat("tests/test_basic.py")
    forged = code(ap.GC_FLIP, "def test_one():\n    pass\n")
    pyc = ap.pytest_rewrite_pyc(forged, "/work/repo/tests/test_basic.py", mtime, size)
    return c.diff(
        {"tests/__pycache__/test_basic.cpython-311-pytest-8.3.3.pyc": pyc, "calc/__init__.py": UNFIXED + "\n"}
    )


def _deep_rej_tree(c: Ctx) -> bytes:
    """patch(1) creates a directory 1,100 deep where a .rej would go, then fails a hunk:
    undoing the attempt means removing that tree."""
    deep = "calc/__init__.py.rej/" + "d/" * 1100 + "x"
    failing = (
        "--- a/calc/__init__.py\n+++ b/calc/__init__.py\n@@ -1,2 +1,2 @@\n-def nomatch(xs):\n-    return 0\n"
        "+def mean(xs):\n+    return 1\n"
    )
    return (_traditional(f"b/{deep}", "x = 1\n") + failing).encode()


def _symlinked(target: str) -> Callable[[Path], None]:
    def change(src: Path) -> None:
        shutil.rmtree(src / "tests")
        os.symlink(target, src / "tests")
        (src / "calc" / "__init__.py").write_text(unfixed_with(ap.LINK_EVIDENCE))

    return change


def _file_for_tests_dir(src: Path) -> None:
    shutil.rmtree(src / "tests")
    (src / "tests").write_text("not a directory\n")
    (src / "calc" / "__init__.py").write_text(unfixed_with(ap.LINK_EVIDENCE))


def _protected_links(src: Path) -> None:
    (src / "tests" / "test_basic.py").unlink()
    os.symlink(f"{SITE}/py.py", src / "tests" / "test_basic.py")
    os.symlink(f"{SITE}/distutils-precedence.pth", src / "conftest.py")
    os.symlink("/etc/passwd", src / "tests" / "test_mean.py")
    os.symlink(f"{SITE}/pytest", src / "tests" / "__pycache__")
    (src / "calc" / "__init__.py").write_text(unfixed_with(ap.LINK_EVIDENCE))


def _odd_names(src: Path) -> None:
    for name in ("calc/a\nb.py", "calc/\u00e9t\u00e9.py", "tests/-rf.py", "calc/ x .py", "calc/tab\there.py"):
        (src / name).write_text("x = 1\n")
    (src / "calc" / "__init__.py").write_text(UNFIXED + "\n")


def _big_zero_file(c: Ctx) -> bytes:
    """150 MiB of zeros from a patch under the 1 MiB limit: the apply writes 150 times what
    was sent (the most a patch can carry: a file past the 256 MiB file-size limit would
    need a larger patch than is accepted)."""
    path = c.mini.src / "calc" / "zeros.bin"

    def change(src: Path) -> None:
        with open(src / "calc" / "zeros.bin", "wb") as f:
            f.truncate(150 * 1024 * 1024)

    patch = c.tree_diff(change)
    assert not path.exists()
    return patch


@dataclass
class Attack:
    cls: str  # the class of issue 10 it belongs to
    build: Callable[[Ctx], bytes] | dict
    allowed: set[str]
    task: str = "mini-attack"
    check: Callable[[Graded], str | None] | None = None  # a complaint, or None


def attacks(ports: dict[str, int]) -> dict[str, Attack]:
    unfixed = FIXED.replace("raise ValueError('empty')", "return 0")
    cmdj_forge = code(
        ap.FORGE,
        """
        import glob, re
        ids = []
        for path in sorted(glob.glob("tests/*.py")):
            for name in re.findall(r"^def (test_\\w+)", open(path).read(), re.M):
                ids.append('<testcase classname="%s" name="%s" file="%s"/>' % (path[:-3].replace("/", "."), name, path))
        with open("report.xml", "w") as f:
            f.write('<?xml version="1.0"?><testsuites><testsuite name="pytest">%s</testsuite></testsuites>' % "".join(ids))
        _os._exit(0)
        """,
    )
    return {
        # --- the attacks this file held before issue 10 (resources, network, paths, runner files)
        "fork-bomb": Attack(
            "7",
            {
                "calc/__init__.py": fixed_with("""\
            import os
            while True:
                try:
                    os.fork()
                except OSError:
                    pass
            """)
            },
            {TO, F},
        ),
        "memory-hog": Attack(
            "7",
            {
                "calc/__init__.py": fixed_with("""\
            hog = []
            while True:
                hog.append(bytearray(64 * 1024 * 1024))
            """)
            },
            {F, TO},
        ),
        "disk-filler": Attack(
            "7",
            {
                "calc/__init__.py": fixed_with("""\
            import os
            for d in ("/tmp", "."):
                try:
                    with open(os.path.join(d, "fill"), "wb") as f:
                        while True:
                            f.write(b"x" * (1 << 20))
                except OSError:
                    pass
            raise SystemExit("disk full")
            """)
            },
            {F, TO},
        ),
        "output-flood": Attack(
            "7",
            {
                "calc/__init__.py": fixed_with("""\
            import sys
            for _ in range(200000):
                sys.stdout.write("spam " * 40 + "\\n")
            raise SystemExit(1)
            """)
            },
            {F, TO},
        ),  # gVisor's ptrace platform may not finish printing 40 MB in time
        "infinite-loop-at-import": Attack("7", {"calc/__init__.py": fixed_with("while True:\n    pass\n")}, {TO}),
        "sleep-past-the-limit": Attack("7", {"calc/__init__.py": fixed_with("import time\ntime.sleep(3600)\n")}, {TO}),
        "dns-lookup": Attack(
            "sandbox",
            {
                "calc/__init__.py": works_only_if("""\
            import socket
            try:
                socket.getaddrinfo("deb.debian.org", 80)
                OK = True
            except OSError:
                OK = False
            """)
            },
            {F},
        ),
        "tcp-to-the-services-redis-and-api": Attack(
            "sandbox",
            {
                "calc/__init__.py": _reach(
                    repr(
                        [
                            ("127.0.0.1", ports["redis"]),
                            ("127.0.0.1", ports["api"]),
                            ("172.17.0.1", ports["redis"]),
                            ("172.17.0.1", ports["api"]),
                            ("1.1.1.1", 53),
                        ]
                    )
                )
            },
            {F},
        ),
        "read-host-file-by-absolute-path": Attack(
            "sandbox",
            {
                "calc/__init__.py": works_only_if(f"""\
            try:
                OK = {HOST_SECRET_TEXT!r} in open({str(HOST_SECRET)!r}).read()
            except OSError:
                OK = False
            """)
            },
            {F},
        ),
        "read-host-file-through-a-symlink": Attack(
            "sandbox",
            lambda c: c.diff(
                {
                    "calc/__init__.py": works_only_if(f"""\
            try:
                OK = {HOST_SECRET_TEXT!r} in open("calc/leak.txt").read()
            except OSError:
                OK = False
            """)
                },
                symlinks={"calc/leak.txt": str(HOST_SECRET)},
            ),
            {F},
        ),
        "path-traversal": Attack(
            "4",
            lambda c: (
                b"diff --git a/../../../../etc/cron.d/x b/../../../../etc/cron.d/x\nnew file mode 100644\n"
                b"--- /dev/null\n+++ b/../../../../etc/cron.d/x\n@@ -0,0 +1 @@\n+* * * * * root sh -c 'id'\n"
            ),
            {PF},
        ),
        "edit-and-delete-hidden-tests": Attack("3", {"tests/test_mean.py": "def test_empty():\n    pass\n"}, {F}),
        "delete-hidden-tests": Attack("3", {"calc/__init__.py": unfixed, "tests/test_mean.py": ""}, {F}),
        "conftest-injection": Attack("1", {"conftest.py": ap.FLIP_HOOKS, "tests/conftest.py": ap.FLIP_HOOKS}, {F}),
        "sitecustomize-injection": Attack(
            "1", {"sitecustomize.py": "import os\nos._exit(0)\n", "calc/evil.pth": "import os; os._exit(0)\n"}, {F}
        ),
        "pytest-ini-and-setup-cfg-injection": Attack(
            "1",
            {
                "pytest.ini": "[pytest]\naddopts = -p no:python\n",
                "setup.cfg": "[tool:pytest]\npython_files = nothing_*.py\n",
            },
            {F},
        ),
        "forged-junit": Attack(
            "1",
            {
                "calc/__init__.py": fixed_with(f"""\
            for path in ("report.xml", "junit.xml", "/tmp/junit.xml"):
                with open(path, "w") as f:
                    f.write({FAKE_JUNIT!r})
            """).replace("raise ValueError('empty')", "return 0")
            },
            {F},
        ),
        "forged-passed-lines-and-exit-0": Attack(
            "1",
            {
                "calc/__init__.py": fixed_with("""\
            import os, sys
            print("tests/test_mean.py::test_empty PASSED")
            print("============================== 3 passed in 0.01s ===============================")
            sys.stdout.flush()
            os._exit(0)
            """)
            },
            {F},
        ),
        "binary-patch": Attack("7", {"calc/__init__.py": unfixed, "calc/blob.bin": bytes(range(256)) * 64}, {F}),
        "crlf-and-mixed-encodings": Attack(
            "7",
            lambda c: (
                c.diff({"calc/__init__.py": FIXED + "# caf\xe9\n"}).replace(b"\n", b"\r\n")
                + "# \u00e9t\u00e9 \udce9\n".encode("utf-8", "surrogateescape")
            ),
            {P, F, PF},
        ),
        # --- 1. code inside the test process deciding outcomes
        "dist-info-entry-point-plugin": Attack(
            "1",
            {
                "evil_plugin-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: evil-plugin\nVersion: 1.0\n",
                "evil_plugin-1.0.dist-info/entry_points.txt": "[pytest11]\nevil = evil_plugin\n",
                "evil_plugin.py": ap.FLIP_HOOKS,
            },
            {F},
        ),
        "egg-info-entry-point-plugin": Attack(
            "1",
            {
                "calc.egg-info/PKG-INFO": "Metadata-Version: 2.1\nName: calc\nVersion: 0.1\n",
                "calc.egg-info/entry_points.txt": "[pytest11]\ncalc_speedups = calc.speedups\n",
                "calc/speedups.py": ap.FLIP_HOOKS,
            },
            {F},
        ),
        "tests-package-init-flips-reports": Attack("1", {"tests/__init__.py": ap.GC_FLIP}, {F}),
        "pytest-plugins-in-a-visible-test-file": Attack(
            "1",
            {
                "tests/test_basic.py": 'pytest_plugins = ["calc.plugin"]\n'
                + ap.code(TEST_BASIC_WITH.format(decorator="", want=2)),
                "calc/plugin.py": ap.FLIP_HOOKS,
            },
            {F},
        ),
        "unchecked-hash-pyc-carries-the-fix": Attack(
            "1",
            lambda c: c.diff(
                {"calc/__pycache__/__init__.cpython-311.pyc": ap.pyc_unchecked(FIXED, "/work/repo/calc/__init__.py")}
            ),
            {F},
        ),
        "checked-hash-pyc-with-the-base-source-hash": Attack(
            "1",
            lambda c: c.diff(
                {
                    "calc/__pycache__/__init__.cpython-311.pyc": ap.pyc_checked_against(
                        unfixed_with(ap.GC_FLIP), c.base("calc/__init__.py"), "/work/repo/calc/__init__.py"
                    )
                }
            ),
            {F},
        ),
        "sourceless-pyc-module": Attack(
            "1",
            lambda c: c.diff(
                {
                    "calc/helpers.pyc": ap.pyc_unchecked(ap.GC_FLIP, "/work/repo/calc/helpers.py"),
                    "calc/__init__.py": "from calc import helpers  # noqa: F401\n\n\n" + UNFIXED,
                }
            ),
            {F},
        ),
        "pytest-assertion-rewrite-cache": Attack("1", _rewrite_cache_attack, {F}),
        "marshalled-code-in-a-data-file": Attack(
            "1",
            lambda c: c.diff(
                {
                    "calc/_tables.dat": ap.marshalled(ap.STEALTH_FLIP),
                    "calc/__init__.py": code(
                        """
                import importlib
                import os

                _m = importlib.import_module("mar" "shal")
                with open(os.path.join(os.path.dirname(__file__), "_tables.dat"), "rb") as _f:
                    exec(_m.loads(_f.read()))
                """,
                        UNFIXED,
                    ),
                }
            ),
            {F},
        ),
        "gc-walk-registers-a-flipping-plugin": Attack("1", {"calc/__init__.py": unfixed_with(ap.GC_FLIP)}, {F}),
        "frame-walk-registers-a-flipping-plugin": Attack("1", {"calc/__init__.py": unfixed_with(ap.FRAME_FLIP)}, {F}),
        "monkeypatch-testreport-via-sys-modules": Attack(
            "1", {"calc/__init__.py": unfixed_with(ap.TESTREPORT_PATCH)}, {F}
        ),
        "pluggy-hook-executor-wrapped": Attack("1", {"calc/__init__.py": unfixed_with(ap.PLUGGY_PATCH)}, {F}),
        "settrace-rewrites-report-arguments": Attack("1", {"calc/__init__.py": unfixed_with(ap.SETTRACE_FLIP)}, {F}),
        "logreport-rewritten-before-anyone-logs-it": Attack(
            "1", {"calc/__init__.py": unfixed_with(ap.LOGREPORT_REWRITE)}, {F}
        ),
        "obfuscated-exec-of-a-flipper": Attack("1", {"calc/__init__.py": unfixed_with(ap.obfuscated(ap.GC_FLIP))}, {F}),
        "quiet-flip-of-own-failures-only": Attack("1", {"calc/__init__.py": unfixed_with(ap.STEALTH_FLIP)}, {F}),
        "flip-only-tests-that-import-the-package": Attack(
            "1", {"calc/__init__.py": unfixed_with(ap.FLIP_TESTS_THAT_IMPORT_THE_PACKAGE)}, {F}
        ),
        "blanket-flip-sparing-the-canaries-named-in-the-environment": Attack(
            "1", {"calc/__init__.py": unfixed_with(ap.SPARE_NAMED_CANARIES)}, {F}
        ),
        "report-plugin-emitter-wrapped-for-own-tests": Attack(
            "1", {"calc/__init__.py": unfixed_with(ap.WRAP_THE_REPORT_EMITTER)}, {F}
        ),
        "native-extension-flips-own-failures": Attack(
            "1",
            lambda c: c.diff(
                {
                    "calc/_speedups.cpython-311-x86_64-linux-gnu.so": c.native_flipper,
                    "calc/__init__.py": "from calc import _speedups  # noqa: F401  (a C accelerator)\n\n\n" + UNFIXED,
                }
            ),
            {F},
        ),
        "shadow-pytest-module-at-the-root": Attack(
            "1", {"pytest.py": ap.SHADOW_PYTEST, "calc/__init__.py": UNFIXED + "\n"}, {F}
        ),
        "shadow-stdlib-module-runs-before-plugins": Attack(
            "1", {"argparse.py": ap.SHADOW_STDLIB, "calc/__init__.py": UNFIXED + "\n"}, {F}
        ),
        "forge-report-and-exit-0-at-import": Attack(
            "1", {"calc/__init__.py": unfixed_with(ap.FORGE_AND_EXIT_AT_IMPORT)}, {F}
        ),
        "forge-report-and-exit-0-from-atexit": Attack("1", {"calc/__init__.py": unfixed_with(ap.FORGE_AT_EXIT)}, {F}),
        "forge-report-and-exit-0-from-a-signal-handler": Attack("1", {"calc/__init__.py": ap.FORGE_FROM_SIGNAL}, {F}),
        "forge-report-and-exit-0-from-sessionfinish": Attack(
            "1", {"calc/__init__.py": unfixed_with(ap.FORGE_FROM_SESSIONFINISH)}, {F}
        ),
        "hidden-test-swapped-during-collection-and-put-back-at-exit": Attack(
            "1", {"calc/__init__.py": unfixed_with(ap.SWAP_HIDDEN_TEST_DURING_COLLECTION)}, {F}
        ),
        "kill-the-supervisor-and-the-parent": Attack(
            "1", {"calc/__init__.py": unfixed_with(ap.KILL_THE_SUPERVISOR)}, {F}
        ),
        # --- 2. the diff's headers against what git writes
        "x-prefix-header-writes-gitignored-conftests": Attack(
            "2",
            lambda c: (
                _traditional("b/.gitignore", "conftest.py\n")
                + _traditional("x/conftest.py", ap.FLIP_HOOKS)
                + _traditional("y/tests/conftest.py", ap.FLIP_HOOKS)
            ).encode(),
            {F, PF},
        ),
        "quoted-header-writes-gitignored-conftest": Attack(
            "2",
            lambda c: (
                _traditional("b/.gitignore", "/conftest.py\n") + _traditional('"b/conftest.py"', ap.FLIP_HOOKS)
            ).encode(),
            {F, PF},
        ),
        "copy-header-targets-conftest": Attack(
            "2",
            lambda c: (
                "diff --git a/README.md b/conftest.py\nsimilarity index 0%\ncopy from README.md\ncopy to conftest.py\n"
                f"--- a/README.md\n+++ b/conftest.py\n@@ -1 +1,{len(ap.FLIP_HOOKS.splitlines())} @@\n-mini\n"
                + "".join(f"+{ln}\n" for ln in ap.FLIP_HOOKS.splitlines())
                + _traditional("b/.gitignore", "conftest.py\n")
            ).encode(),
            {F, PF},
        ),
        "dot-slash-header-writes-tests-conftest": Attack(
            "2",
            lambda c: (
                _traditional("./tests/conftest.py", ap.FLIP_HOOKS) + _traditional("b/.gitignore", "conftest.py\n")
            ).encode(),
            {F, PF},
        ),
        # --- 3. visible tests edited
        "visible-pass-to-pass-test-edited-to-match-a-regression": Attack(
            "3",
            {"calc/__init__.py": REGRESSED, "tests/test_basic.py": TEST_BASIC_WITH.format(decorator="", want=0)},
            {F},
        ),
        "visible-pass-to-pass-test-skipped": Attack(
            "3",
            {
                "calc/__init__.py": REGRESSED,
                "tests/test_basic.py": TEST_BASIC_WITH.format(decorator="@pytest.mark.skip\n", want=2),
            },
            {F},
        ),
        "visible-pass-to-pass-test-xfail-run-false": Attack(
            "3",
            {
                "calc/__init__.py": REGRESSED,
                "tests/test_basic.py": TEST_BASIC_WITH.format(decorator="@pytest.mark.xfail(run=False)\n", want=2),
            },
            {F},
        ),
        "tests-conftest-deselects-the-pass-to-pass-test": Attack(
            "3",
            {
                "calc/__init__.py": REGRESSED,
                "tests/conftest.py": code("""
                def pytest_collection_modifyitems(config, items):
                    keep = [i for i in items if i.name != "test_one"]
                    config.hook.pytest_deselected(items=[i for i in items if i.name == "test_one"])
                    items[:] = keep
                """),
            },
            {F},
        ),
        "fix-injected-from-the-visible-test-module": Attack(
            "3",
            {
                "calc/__init__.py": UNFIXED + "\n",
                "tests/test_basic.py": code("""
                import calc


                def _fixed(xs):
                    if not xs:
                        raise ValueError("empty")
                    return sum(xs) / len(xs)


                calc.mean = _fixed
                from calc import mean  # noqa: E402


                def test_one():
                    assert mean([2]) == 2
                """),
            },
            {F},
        ),
        "fixed-copy-of-the-package-in-the-tests-dir": Attack(
            "3", {"tests/calc.py": FIXED, "calc/__init__.py": UNFIXED + "\n"}, {F}
        ),
        # --- 4. the file tree the submission leaves
        "tests-dir-symlinked-to-site-packages": Attack(
            "4", lambda c: c.tree_diff(_symlinked(SITE)), {F, PF}, check=_no_link_followed
        ),
        "tests-dir-symlinked-into-the-hidden-dir": Attack(
            "4",
            lambda c: c.tree_diff(_symlinked("/opt/grader/task/hidden/files/tests")),
            {F, PF},
            check=_no_link_followed,
        ),
        "protected-files-as-symlinks-to-root-files": Attack(
            "4", lambda c: c.tree_diff(_protected_links), {F, PF}, check=_no_link_followed
        ),
        "a-file-where-the-tests-dir-was": Attack(
            "4", lambda c: c.tree_diff(_file_for_tests_dir), {F, PF}, check=_no_link_followed
        ),
        "new-file-under-a-file": Attack("4", lambda c: _traditional("b/README.md/x.py", "x = 1\n").encode(), {PF}),
        "deep-tree-where-a-rej-goes-then-a-failing-hunk": Attack("4", _deep_rej_tree, {PF}),
        "very-deep-tree-in-the-tests-dir": Attack(
            "4", {"tests/" + "d/" * 200 + "test_deep.py": "x = 1\n", "calc/__init__.py": UNFIXED + "\n"}, {F, PF}
        ),
        "odd-names-in-the-patch": Attack("4", lambda c: c.tree_diff(_odd_names), {F, PF}),
        "fifo-replaces-the-hidden-test-after-the-run": Attack(
            "4", {"calc/__init__.py": unfixed_with(ap.FIFO_OVER_HIDDEN_TEST)}, {F}
        ),
        "tree-swapped-for-links-and-odd-names-after-the-run": Attack(
            "4", {"calc/__init__.py": unfixed_with(ap.SWAP_TREE_AFTER_RUN)}, {F}
        ),
        # --- 5. command tasks
        "command-task-os-exit-0": Attack(
            "5", {"calc/__init__.py": unfixed_with("import os\nos._exit(0)\n")}, {F}, task="mini-cmd"
        ),
        "command-task-pyproject-deselects-the-failing-test": Attack(
            "5",
            {
                "calc/__init__.py": UNFIXED + "\n",
                "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["."]\n'
                'addopts = ["--deselect", "tests/test_mean.py::test_empty"]\n',
            },
            {F},
            task="mini-cmd",
        ),
        "command-task-forged-junit-file": Attack(
            "5", {"calc/__init__.py": unfixed_with(cmdj_forge)}, {F}, task="mini-cmdj"
        ),
        "command-task-junit-rewritten-at-exit": Attack(
            "5",
            {
                "calc/__init__.py": unfixed_with(
                    ap.at_exit("""
            import glob, os, re
            ids = []
            for path in sorted(glob.glob("tests/*.py")):
                for name in re.findall(r"^def (test_\\w+)", open(path).read(), re.M):
                    ids.append('<testcase classname="%s" name="%s" file="%s"/>' % (path[:-3].replace("/", "."), name, path))
            with open("report.xml", "w") as f:
                f.write('<?xml version="1.0"?><testsuites><testsuite>%s</testsuite></testsuites>' % "".join(ids))
            os._exit(0)
            """)
                )
            },
            {F},
            task="mini-cmdj",
        ),
        "command-task-junit-with-an-unknown-root": Attack(
            "7",
            {
                "calc/__init__.py": unfixed_with(
                    ap.at_exit("""
            with open("report.xml", "w") as f:
                f.write('<?xml version="1.0"?><foo/>')
            """)
                )
            },
            {F},
            task="mini-cmdj",
            check=_not_rescued_by_blame,
        ),
        "command-task-junit-nested-past-the-recursion-limit": Attack(
            "7",
            {
                "calc/__init__.py": unfixed_with(
                    ap.at_exit(f"""
            with open("report.xml", "w") as f:
                f.write({ap.DEEP_XML!r})
            """)
                )
            },
            {F},
            task="mini-cmdj",
            check=_not_rescued_by_blame,
        ),
        "command-task-junit-is-a-fifo": Attack(
            "7",
            {
                "calc/__init__.py": unfixed_with(
                    ap.at_exit("""
            import os
            os.unlink("report.xml")
            os.mkfifo("report.xml")
            """)
                )
            },
            {F},
            task="mini-cmdj",
        ),
        # --- 7. machinery failures caused on purpose
        "malformed-report-in-every-channel": Attack(
            "7", {"calc/__init__.py": unfixed_with(ap.MALFORMED_REPORT_AT_IMPORT)}, {F}, check=_not_rescued_by_blame
        ),
        "oom-killer-picks-the-supervisor": Attack(
            "7", {"calc/__init__.py": unfixed_with(ap.OOM_THE_SUPERVISOR)}, {F, TO}
        ),
        "close-and-clobber-inherited-descriptors": Attack(
            "7", {"calc/__init__.py": unfixed_with(ap.CLOSE_INHERITED_FDS)}, {F}
        ),
        "descriptor-exhaustion": Attack("7", {"calc/__init__.py": unfixed_with(ap.EXHAUST_FDS)}, {F}),
        "write-to-the-container-stdout": Attack(
            "7", {"calc/__init__.py": unfixed_with(ap.WRITE_TO_CONTAINER_STDOUT)}, {F}
        ),
        "150-MiB-written-by-a-1-MiB-patch": Attack("7", _big_zero_file, {PF, F, TO}),
    }


NAMES = list(attacks({"redis": 1, "api": 1}))

# The attacks made and judged inside pytest's own process, or taken back before it starts:
# graded under runc and the pool, not gVisor (`same_on_every_kernel`, tests/README.md "The
# attack files and the sandbox providers"). What they do is to the interpreter's own objects
# (pluggy's lists, reports, frames, code, modules, builtins), to files the supervisor restores
# or neutralizes before the tests start (conftests, configuration, bytecode, plugins' metadata,
# the hidden and visible tests), or only printed; none goes through a process, a signal, a
# descriptor, the report channel, a file changed while the tests run or the clock. gVisor runs
# the same process image as runc, over another kernel; the pool's pytest may be a fork of the
# supervisor, so they are graded there too. Every other attack, and every honest grade, is
# graded under all three.
INSIDE_THE_PROCESS = frozenset(
    {
        "edit-and-delete-hidden-tests",
        "delete-hidden-tests",
        "conftest-injection",
        "sitecustomize-injection",
        "pytest-ini-and-setup-cfg-injection",
        "forged-junit",
        "forged-passed-lines-and-exit-0",
        "dist-info-entry-point-plugin",
        "egg-info-entry-point-plugin",
        "tests-package-init-flips-reports",
        "pytest-plugins-in-a-visible-test-file",
        "unchecked-hash-pyc-carries-the-fix",
        "checked-hash-pyc-with-the-base-source-hash",
        "sourceless-pyc-module",
        "pytest-assertion-rewrite-cache",
        "marshalled-code-in-a-data-file",
        "gc-walk-registers-a-flipping-plugin",
        "frame-walk-registers-a-flipping-plugin",
        "monkeypatch-testreport-via-sys-modules",
        "pluggy-hook-executor-wrapped",
        "settrace-rewrites-report-arguments",
        "logreport-rewritten-before-anyone-logs-it",
        "obfuscated-exec-of-a-flipper",
        "quiet-flip-of-own-failures-only",
        "flip-only-tests-that-import-the-package",
        "blanket-flip-sparing-the-canaries-named-in-the-environment",
        "report-plugin-emitter-wrapped-for-own-tests",
        "shadow-pytest-module-at-the-root",
        "shadow-stdlib-module-runs-before-plugins",
        "x-prefix-header-writes-gitignored-conftests",
        "quoted-header-writes-gitignored-conftest",
        "copy-header-targets-conftest",
        "dot-slash-header-writes-tests-conftest",
        "visible-pass-to-pass-test-edited-to-match-a-regression",
        "visible-pass-to-pass-test-skipped",
        "visible-pass-to-pass-test-xfail-run-false",
        "tests-conftest-deselects-the-pass-to-pass-test",
        "fix-injected-from-the-visible-test-module",
        "fixed-copy-of-the-package-in-the-tests-dir",
        "command-task-os-exit-0",
        "command-task-pyproject-deselects-the-failing-test",
        "command-task-forged-junit-file",
    }
)
assert INSIDE_THE_PROCESS <= set(NAMES), INSIDE_THE_PROCESS - set(NAMES)


@pytest.mark.parametrize("name", [n for n in NAMES if n not in INSIDE_THE_PROCESS])
def test_attack(env, ctx, name):
    graded_as_it_deserves(env, ctx, name)


@pytest.mark.same_on_every_kernel
@pytest.mark.parametrize("name", [n for n in NAMES if n in INSIDE_THE_PROCESS])
def test_attack_inside_the_test_process(env, ctx, name):
    graded_as_it_deserves(env, ctx, name)


def graded_as_it_deserves(env, ctx, name: str) -> None:
    attack = attacks(env["ports"])[name]
    patch = attack.build(ctx) if callable(attack.build) else ctx.diff(attack.build)
    got = grade(env, patch, attack.task)
    assert got.view["status"] == "done"
    assert got.verdict != "ERROR", f"{name} under {env['runtime']}: {got.why()}"
    assert got.verdict in attack.allowed, f"{name} under {env['runtime']}: {got.why()}"
    if attack.check is not None:
        complaint = attack.check(got)
        assert complaint is None, f"{name} under {env['runtime']}: {complaint}: {got.why()}"
    assert env["grader"].sandbox.busy_containers() == [], "a grading container was left behind"
    assert HOST_SECRET.read_text() == HOST_SECRET_TEXT


# --- 6. secrets ---------------------------------------------------------------------------------


@dataclass
class Leak:
    build: Callable[[Ctx], bytes] | dict
    task: str = "mini-attack"
    secrets: Callable[[dict], list[str]] = field(default=lambda env: [SENTINEL])
    check: Callable[[dict, Graded], str | None] | None = None


def _no_exit_status(env, g: Graded) -> str | None:
    status = ap.exit_status_of(env["hidden"])
    r = g.view.get("result") or {}
    explanation = (r.get("explanation") or "") + " " + str(g.view.get("explanation") or "")

    def exit_codes(v):
        if isinstance(v, dict):
            for k, x in v.items():
                if k == "exit_code":
                    yield x
                yield from exit_codes(x)
        elif isinstance(v, list):
            for x in v:
                yield from exit_codes(x)

    if (
        str(status) in explanation.split()
        or f"{status}:" in explanation
        or f"{status})" in explanation
        or status in list(exit_codes(g.view))
    ):
        return f"the exit status {status}, a byte's worth of the hidden file, is shown"
    return None


def _no_ratio(env, g: Graded) -> str | None:
    ratio = similarity(PROBE, EXPECTED_OUTPUT)
    shown = [f"{ratio:.3f}", f"{ratio:.4f}", f"{ratio:.6f}", repr(round(ratio, 6)), repr(round(ratio, 3))]
    text = "\n".join(ap._strings(g.view))

    def ratios(v):
        if isinstance(v, dict):
            for k, x in v.items():
                if k == "ratio" and x is not None:
                    yield x
                yield from ratios(x)
        elif isinstance(v, list):
            for x in v:
                yield from ratios(x)

    found = [s for s in shown if s in text] + [repr(x) for x in ratios(g.view)]
    return f"the similarity ratio ({ratio:.6f}) is shown: {found}" if found else None


PROBE = "mean([1, 2, 3]) = 2.0\n" + "x" * 40 + "\n"
LEAKS: dict[str, Leak] = {
    **{f"hidden-test-printed-{enc}": Leak({"calc/__init__.py": unfixed_with(src)}) for enc, src in ap.LEAKS.items()},
    "hidden-test-printed-base64-under-verdict-feedback": Leak(
        {"calc/__init__.py": unfixed_with(ap.LEAKS["base64"])}, task="mini-verdict"
    ),
    "hidden-test-in-the-exception-message": Leak({"calc/__init__.py": ap.LEAK_IN_EXCEPTION}),
    "hidden-test-in-the-names-of-extra-reports": Leak({"calc/__init__.py": unfixed_with(ap.LEAK_IN_TEST_IDS)}),
    "hidden-test-byte-in-the-exit-status": Leak(
        {"calc/__init__.py": unfixed_with(ap.LEAK_IN_EXIT_STATUS)}, task="mini-verdict", check=_no_exit_status
    ),
    "exact-match-diff-shows-the-expected-file": Leak(
        {"calc/__init__.py": UNFIXED + "\n"}, task="mini-exact", secrets=lambda env: [f"exact-{SENTINEL}", SHORT_SECRET]
    ),
    "exact-match-from-a-commit-masked-even-under-full-feedback": Leak(
        {"calc/__init__.py": UNFIXED + "\n"},
        task="mini-exact-commit",
        secrets=lambda env: [f"MARKER = 'commit-{SENTINEL}'"],
    ),
    "similarity-probe-of-the-expected-output": Leak(
        {"calc/__main__.py": f"print({PROBE!r}, end='')\n"}, task="mini-output", secrets=lambda env: [], check=_no_ratio
    ),
}


# a leak through the exit status goes through a process's end; every other only prints
THROUGH_A_PROCESS = frozenset({"hidden-test-byte-in-the-exit-status"})
assert THROUGH_A_PROCESS <= set(LEAKS)


@pytest.mark.parametrize("name", [n for n in LEAKS if n in THROUGH_A_PROCESS])
def test_secret_stays_hidden(env, ctx, name):
    kept_hidden(env, ctx, name)


@pytest.mark.same_on_every_kernel
@pytest.mark.parametrize("name", [n for n in LEAKS if n not in THROUGH_A_PROCESS])
def test_printed_secret_stays_hidden(env, ctx, name):
    kept_hidden(env, ctx, name)


def kept_hidden(env, ctx, name: str) -> None:
    leak = LEAKS[name]
    patch = leak.build(ctx) if callable(leak.build) else ctx.diff(leak.build)
    got = grade(env, patch, leak.task)
    assert got.view["status"] == "done"
    assert got.verdict == "FAIL", f"{name} under {env['runtime']}: {got.why()}"
    for secret in leak.secrets(env):
        found = ap.traces(got.view, secret)
        assert not found, f"{name} under {env['runtime']}: the submitter's view gives {secret!r} away ({found})"
    if leak.check is not None:
        complaint = leak.check(env, got)
        assert complaint is None, f"{name} under {env['runtime']}: {complaint}"
    assert env["grader"].sandbox.busy_containers() == []


# --- honest submissions: the protections must not hurt them -----------------------------------------


def _restored(rel: str):
    def check(g: Graded) -> str | None:
        prot = (g.host.get("result") or {}).get("protections")
        if prot is None:
            return None  # a core without the field: the verdict is what counts
        if rel not in prot.get("protected_restored", []):
            return f"{rel} was edited but the result does not say it was restored: {prot}"
        return None

    return check


HONEST: dict[str, Attack] = {
    "gold-fix-plus-a-benign-visible-test-edit": Attack(
        "3",
        {
            "calc/__init__.py": FIXED,
            "tests/test_basic.py": code(
                TEST_BASIC_WITH.format(decorator="", want=2),
                """

            def test_empty_is_refused():
                with pytest.raises(ValueError):
                    mean([])
            """,
            ),
        },
        {P},
        check=_restored("tests/test_basic.py"),
    ),
    "gold-fix-plus-a-stale-visible-test-edit": Attack(
        "3",
        {"calc/__init__.py": FIXED, "tests/test_basic.py": TEST_BASIC_WITH.format(decorator="", want=3)},
        {P},
        check=_restored("tests/test_basic.py"),
    ),
    "fix-in-a-new-module-of-a-new-package": Attack(
        "-",
        {
            "calc/__init__.py": "from calc.core.ops import mean\n\n__all__ = ['mean']\n",
            "calc/core/__init__.py": '"""The arithmetic."""\n',
            "calc/core/ops.py": FIXED,
        },
        {P},
    ),
    "fix-that-uses-importlib-and-sys-modules": Attack(
        "-",
        {
            "calc/__init__.py": code("""
            import importlib
            import sys

            _impl = importlib.import_module("calc._impl")
            mean = _impl.mean
            assert sys.modules[__name__] is sys.modules["calc"]
            _loaded = [name for name in sys.modules if name.startswith("calc.")]
            """),
            "calc/_impl.py": FIXED,
        },
        {P},
    ),
    "fix-with-a-gitignore-change": Attack(
        "-", {"calc/__init__.py": FIXED, ".gitignore": "__pycache__/\n*.egg-info/\n.pytest_cache/\nbuild/\n"}, {P}
    ),
    "fix-with-a-new-test-file-of-its-own": Attack(
        "-",
        {
            "calc/__init__.py": FIXED,
            "tests/test_mean_more.py": code("""
            import pytest
            from calc import mean


            def test_empty_message():
                with pytest.raises(ValueError, match="empty"):
                    mean([])
            """),
        },
        {P},
    ),
    "fix-with-a-cli-that-exits-with-os-exit": Attack(
        "-",
        {
            "calc/__init__.py": FIXED,
            "calc/__main__.py": code("""
            import atexit
            import os
            import sys

            from calc import mean

            if __name__ == "__main__":
                atexit.register(sys.stdout.flush)
                print(mean([float(a) for a in sys.argv[1:]]))
                sys.stdout.flush()
                os._exit(0)
            """),
        },
        {P},
    ),
    "fix-with-a-pyproject-edit-and-a-binary-asset": Attack(
        "-",
        {
            "calc/__init__.py": FIXED,
            "calc/table.bin": bytes(range(256)) * 4,
            "pyproject.toml": '[project]\nname = "calc"\nversion = "0.2"\n\n[tool.pytest.ini_options]\npythonpath = ["."]\n'
            'addopts = "-p no:calc"\n',
        },
        {P},
    ),
}


@pytest.mark.parametrize("name", list(HONEST))
def test_honest_submission_passes(env, ctx, name):
    sub = HONEST[name]
    patch = sub.build(ctx) if callable(sub.build) else ctx.diff(sub.build)
    got = grade(env, patch, sub.task)
    assert got.verdict == "PASS", f"{name} under {env['runtime']}: {got.why()}"
    if sub.check is not None:
        complaint = sub.check(got)
        assert complaint is None, f"{name} under {env['runtime']}: {complaint}"
    assert not (got.host.get("result") or {}).get("tampered"), f"{name}: an honest run was called tampering"


@pytest.mark.parametrize("task", [t for t in TASKS if t not in NO_GOLD])
def test_the_gold_patch_of_every_attack_task_passes(env, task):
    """The attack tasks are sound: each one's gold patch passes, so an attack's FAIL is
    the attack's, not a broken task's."""
    gold = (env["svc"].settings.tasks_dir / task / "gold.patch").read_bytes()
    got = grade(env, gold, task)
    assert got.verdict == "PASS", f"{task} under {env['runtime']}: {got.why()}"


def test_after_every_attack_the_service_is_sound(env, mini):
    env["svc"].ping_redis()
    env["svc"].db.ping()
    assert env["api"].get("/healthz").status_code == 200
    got = grade(env, mini.diff({"calc/__init__.py": FIXED}))
    assert got.verdict == "PASS", got.why()
    assert env["grader"].sandbox.busy_containers() == []
