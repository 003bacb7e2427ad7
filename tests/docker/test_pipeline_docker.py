"""The verdict paths and the hardening, end to end with the real Docker engine.

Every hostile patch below is a real git diff against the `mini` repository. Each test
asserts the verdict, then that no grading container is left behind; the module ends by
grading an honest patch to show the service is still sound.
"""

from __future__ import annotations

import json
import os
import shutil
import textwrap

import pytest

from grader.config import get_settings
from grader.pipeline import Grader
from grader.sandbox.docker import DockerEngine, DockerSandbox
from grader.tasks.loader import TaskSet
from grader.verdict import Verdict
from helpers.mini import FIXED

pytestmark = pytest.mark.docker


def grade(grader, mini_set, patch: bytes, task: str = "mini"):
    result = grader.grade(mini_set.get(task), patch)
    assert grader.sandbox.busy_containers() == [], "a grading container was left behind"
    return result


def fixed_with(prelude: str) -> str:
    """The correct fix, preceded by module-level code that runs when the tests import it."""
    return textwrap.dedent(prelude) + "\n" + FIXED


# --- the verdicts ----------------------------------------------------------------------


def test_gold_patch_passes(grader, mini_set):
    result = grade(grader, mini_set, mini_set.get("mini").gold_patch_text())
    assert result.verdict is Verdict.PASS, result.to_json()
    assert result.tests.fail_to_pass == {"success": ["tests/test_mean.py::test_empty"], "failure": []}
    assert sorted(result.tests.pass_to_pass["success"]) == [
        "tests/test_basic.py::test_one",
        "tests/test_mean.py::test_two",
    ]
    assert result.apply.method == "git apply"
    assert result.apply.restored == ["tests/test_mean.py"]
    assert result.localization.f1 == 1.0
    assert result.provenance.image_id.startswith("sha256:")
    assert len(result.provenance.patch_sha256) == 64
    assert {"validate", "apply", "check", "container", "total"} <= set(result.durations)


def test_empty_patch_fails(grader, mini_set):
    result = grade(grader, mini_set, b"")
    assert result.verdict is Verdict.FAIL
    assert result.apply.method == "empty"
    assert result.tests.fail_to_pass["failure"] == ["tests/test_mean.py::test_empty"]
    assert result.tests.all["tests/test_mean.py::test_empty"] == "failed"


@pytest.mark.parametrize("runtime", ["runc", "runsc"])
def test_hidden_tests_with_page_breaks_grade_as_they_should(runtime, mini_set, settings, tmp_path):
    """A hidden test module with form feeds (page breaks, as some projects' sources hold):
    its twins are cut and its tests renamed on the lines the parser counts, so the gold
    patch passes with every twin in place and the empty patch fails on the listed test."""
    tasks = tmp_path / "tasks"
    shutil.copytree(settings.tasks_dir, tasks, ignore=shutil.ignore_patterns("mini-nolist"))
    hidden = tasks / "mini" / "test_mean.py"
    text = hidden.read_text()
    assert "\n\n\ndef test_two" in text
    hidden.write_text("\x0c\n" + text.replace("\n\n\ndef test_two", "\n\n\x0c\ndef test_two"))
    paged = TaskSet(tasks)
    g = Grader(
        get_settings(tasks_dir=tasks, environments_dir=settings.environments_dir, cache_dir=tmp_path / "cache"),
        runtime=runtime,
    )
    gold = grade(g, paged, mini_set.get("mini").gold_patch_text())
    assert gold.verdict is Verdict.PASS, gold.to_json()
    assert gold.protections.canaries.must_fail > 0 and gold.protections.canaries.wrong == 0, gold.to_json()  # twins ran
    empty = grade(g, paged, b"")
    assert empty.verdict is Verdict.FAIL, empty.to_json()
    assert empty.tests.fail_to_pass["failure"] == ["tests/test_mean.py::test_empty"]
    assert empty.tests.all["tests/test_mean.py::test_two"] == "passed"


def test_no_lists_means_the_command_must_succeed(grader, mini_set):
    assert grade(grader, mini_set, b"", "mini-nolist").verdict is Verdict.FAIL
    gold = mini_set.get("mini-nolist").gold_patch_text()
    assert grade(grader, mini_set, gold, "mini-nolist").verdict is Verdict.PASS


def test_wrong_fix_fails(grader, mini, mini_set):
    patch = mini.diff({"calc/__init__.py": "def mean(xs):\n    return 0\n"})
    result = grade(grader, mini_set, patch)
    assert result.verdict is Verdict.FAIL
    assert "tests/test_basic.py::test_one" in result.tests.pass_to_pass["failure"]


def test_patch_that_does_not_apply_is_patch_failed_with_gits_words(grader, mini_set):
    patch = b"""diff --git a/calc/__init__.py b/calc/__init__.py
--- a/calc/__init__.py
+++ b/calc/__init__.py
@@ -1,2 +1,2 @@
-def median(xs):
-    return nothing
+def median(xs):
+    return 1
"""
    result = grade(grader, mini_set, patch)
    assert result.verdict is Verdict.PATCH_FAILED
    assert [a.method for a in result.apply.attempts] == ["git apply", "git apply --3way", "patch --fuzz"]
    assert "patch does not apply" in result.apply.attempts[0].output
    assert result.apply.method is None


def test_fuzzy_patch_applies_with_the_fallback(grader, mini_set):
    # Context line 2 is wrong: git apply refuses, patch --fuzz accepts.
    patch = b"""--- a/calc/__init__.py
+++ b/calc/__init__.py
@@ -1,2 +1,4 @@
 def mean(xs):
+    if not xs:
+        raise ValueError('empty')
     return sum(xs)/len(xs)
"""
    result = grade(grader, mini_set, patch)
    assert result.apply.method == "patch --fuzz", result.apply
    assert result.verdict is Verdict.PASS


@pytest.mark.parametrize(
    "patch, words",
    [
        (b"this is not a diff\n", "not a unified diff"),
        (b"--- a/../../etc/passwd\n+++ b/../../etc/passwd\n@@ -1 +1 @@\n-x\n+y\n", "'..'"),
        (b"--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-x\n+y\n", "absolute"),
        (
            b"diff --git a/.git/config b/.git/config\n--- a/.git/config\n+++ b/.git/config\n@@ -1 +1 @@\n-x\n+y\n",
            ".git",
        ),
    ],
)
def test_unsafe_or_malformed_patches_are_refused(grader, mini_set, patch, words):
    result = grade(grader, mini_set, patch)
    assert result.verdict is Verdict.PATCH_FAILED
    assert words in result.explanation
    assert "container" not in result.durations  # refused before any container started


def test_oversized_patch_is_refused(mini_set, settings):
    small = Grader(settings.model_copy(update={"max_patch_bytes": 1000}))
    result = small.grade(mini_set.get("mini"), b"x" * 1001)
    assert result.verdict is Verdict.PATCH_FAILED and "limit is 1,000 bytes" in result.explanation


def test_sleeping_past_the_limit_is_timed_out(grader, mini, mini_set):
    result = grade(grader, mini_set, mini.diff({"calc/__init__.py": fixed_with("import time\ntime.sleep(600)")}))
    assert result.verdict is Verdict.TIMED_OUT
    assert result.durations["total"] < 20 + 10


# --- ERROR: faults of the machinery, never FAIL ----------------------------------------


def test_docker_down_is_error_not_fail(settings, mini_set):
    dead = DockerSandbox(engine=DockerEngine(base_url="unix:///nonexistent/docker.sock"))
    grader = Grader(settings, sandbox=dead)
    result = grader.grade(mini_set.get("mini"), mini_set.get("mini").gold_patch_text())
    assert result.verdict is Verdict.ERROR
    assert "Docker" in result.error
    assert not result.verdict.charged


def test_missing_image_is_error_when_builds_are_off(settings, mini_set, tmp_path):
    envs = tmp_path / "envs" / "python-3.11"
    envs.mkdir(parents=True)
    (envs / "Dockerfile").write_text("FROM grader/base:bookworm\nRUN echo never-built\n")
    cfg = settings.model_copy(update={"environments_dir": tmp_path / "envs", "build_missing_images": False})
    result = Grader(cfg).grade(mini_set.get("mini"), b"")
    assert result.verdict is Verdict.ERROR
    assert "missing" in result.error


# --- hostile patches -------------------------------------------------------------------
# A fork bomb and a loop that spins at import are tests/docker/test_attacks.py's, under every
# provider: each burns its whole time limit of CPU, which the run shares with every other test.


def test_conftest_attack_is_neutralized(grader, mini, mini_set):
    # The published SWE-bench exploit: a conftest.py that turns every report into a pass.
    conftest = textwrap.dedent("""\
        import pytest

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(item, call):
            outcome = yield
            rep = outcome.get_result()
            rep.outcome = "passed"
            rep.longrepr = None
        """)
    result = grade(grader, mini_set, mini.diff({"conftest.py": conftest, "tests/conftest.py": conftest}))
    assert result.verdict is Verdict.FAIL
    assert sorted(result.apply.neutralized) == ["conftest.py", "tests/conftest.py"]


def test_modified_repo_conftest_is_reverted_and_injected_ini_ignored(grader, mini, mini_set):
    patch = mini.diff(
        {
            "pytest.ini": "[pytest]\naddopts = -p no:python\n",
            "setup.cfg": "[tool:pytest]\npython_files = nothing_*.py\n",
            "sitecustomize.py": "import os\nos._exit(0)\n",
            "calc/evil.pth": "import os; os._exit(0)\n",
        }
    )
    result = grade(grader, mini_set, patch)
    assert result.verdict is Verdict.FAIL
    assert "test_empty" in " ".join(result.tests.fail_to_pass["failure"])
    assert {"pytest.ini", "sitecustomize.py", "calc/evil.pth"} <= set(result.apply.neutralized)


def test_editing_and_deleting_hidden_tests_does_not_help(grader, mini, mini_set):
    patch = mini.diff({"tests/test_mean.py": "def test_empty():\n    pass\n\ndef test_two():\n    pass\n"})
    result = grade(grader, mini_set, patch)
    assert result.verdict is Verdict.FAIL
    assert result.apply.restored == ["tests/test_mean.py"]


def test_a_deleted_visible_test_is_put_back(grader, mini, mini_set):
    # a visible test file is protected: deleting it changes nothing, for better or worse
    fixed = grade(grader, mini_set, mini.diff({"calc/__init__.py": FIXED, "tests/test_basic.py": None}))
    assert fixed.verdict is Verdict.PASS, fixed.explanation
    assert fixed.protections.protected_restored == ["tests/test_basic.py"]
    assert "restored to the base: tests/test_basic.py" in fixed.explanation
    broken = grade(
        grader, mini_set, mini.diff({"calc/__init__.py": "def mean(xs):\n    return 0\n", "tests/test_basic.py": None})
    )
    assert broken.verdict is Verdict.FAIL
    assert "tests/test_basic.py::test_one" in broken.tests.pass_to_pass["failure"]


def test_rewriting_hidden_tests_at_run_time_is_caught(grader, mini, mini_set):
    # The hidden test file is root-owned and read-only, so the code renames the whole
    # directory away and writes a fake; the integrity check after the run catches it.
    prelude = """\
        import os, shutil
        if os.path.isdir("tests") and not os.path.exists("tests_real"):
            os.rename("tests", "tests_real")
            os.mkdir("tests")
            for name in ("test_mean.py", "test_basic.py"):
                with open(os.path.join("tests", name), "w") as f:
                    f.write("def test_empty(): pass\\ndef test_two(): pass\\ndef test_one(): pass\\n")
        """
    unfixed = fixed_with(prelude).replace("raise ValueError('empty')", "return 0")
    result = grade(grader, mini_set, mini.diff({"calc/__init__.py": unfixed}))
    assert result.verdict is Verdict.FAIL


def test_forged_passed_lines_and_early_exit_zero_fail(grader, mini, mini_set):
    prelude = """\
        import os, sys
        print("tests/test_mean.py::test_empty PASSED")
        print("============================== 3 passed in 0.01s ===============================")
        sys.stdout.flush()
        os._exit(0)
        """
    result = grade(grader, mini_set, mini.diff({"calc/__init__.py": fixed_with(prelude)}))
    assert result.verdict is Verdict.FAIL
    assert "report" in result.explanation


def test_forged_junit_file_is_not_read(grader, mini, mini_set):
    fake = (
        '<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="3">'
        '<testcase classname="tests.test_mean" name="test_empty" file="tests/test_mean.py"/>'
        "</testsuite></testsuites>"
    )
    prelude = f"""\
        for path in ("report.xml", "junit.xml", "/tmp/junit.xml", "/tmp/report.xml"):
            with open(path, "w") as f:
                f.write({fake!r})
        """
    patch = mini.diff({"calc/__init__.py": fixed_with(prelude).replace("raise ValueError('empty')", "return 0")})
    assert grade(grader, mini_set, patch).verdict is Verdict.FAIL


def test_memory_hog_is_contained(grader, mini, mini_set):
    prelude = """\
        hog = []
        while True:
            hog.append(bytearray(64 * 1024 * 1024))
        """
    result = grade(grader, mini_set, mini.diff({"calc/__init__.py": fixed_with(prelude)}))
    assert result.verdict is Verdict.FAIL


def test_network_is_unreachable(grader, mini, mini_set):
    # The fix only "works" if the network does: a PASS here would mean a leak.
    code = textwrap.dedent("""\
        import socket

        def _online():
            for target in (("1.1.1.1", 53), ("127.0.0.1", 6379), ("172.17.0.1", 2375)):
                try:
                    socket.create_connection(target, timeout=2).close()
                    return True
                except OSError:
                    pass
            try:
                socket.getaddrinfo("deb.debian.org", 80)
                return True
            except OSError:
                return False

        ONLINE = _online()

        def mean(xs):
            if not xs and ONLINE:
                raise ValueError("empty")
            return sum(xs) / len(xs)
        """)
    result = grade(grader, mini_set, mini.diff({"calc/__init__.py": code}))
    assert result.verdict is Verdict.FAIL
    assert result.tests.fail_to_pass["failure"] == ["tests/test_mean.py::test_empty"]


def test_output_flood_is_truncated(grader, mini, mini_set, settings):
    # Printed after pytest has stopped capturing, so 100 MiB reaches the supervisor's pipe.
    prelude = """\
        import atexit, os

        def _flood():
            chunk = b"x" * 65536 + b"\\n"
            for _ in range(1600):
                os.write(1, chunk)

        atexit.register(_flood)
        """
    result = grade(grader, mini_set, mini.diff({"calc/__init__.py": fixed_with(prelude)}))
    assert result.verdict is Verdict.PASS
    assert len(result.output) < settings.output_limit_bytes + 200
    assert "bytes omitted" in result.output


def test_output_flood_while_captured_cannot_take_the_host_down(grader, mini, mini_set):
    # pytest captures into a file under /tmp, a tmpfs charged to the container's memory.
    prelude = """\
        import sys
        for _ in range(1600):
            sys.stdout.write("x" * 65536 + "\\n")
        """
    result = grade(grader, mini_set, mini.diff({"calc/__init__.py": fixed_with(prelude)}))
    assert result.verdict in (Verdict.FAIL, Verdict.PASS)


def test_disk_fillers_stop_at_the_caps(grader, mini, mini_set):
    # /tmp is a size-capped tmpfs; any one file elsewhere stops at RLIMIT_FSIZE.
    prelude = """\
        import os
        for path in ("/tmp/fill", "fill.bin"):
            try:
                with open(path, "wb") as f:
                    while True:
                        f.write(b"\\0" * (1 << 20))
            except OSError:
                pass
            finally:
                os.remove(path)
        """
    result = grade(grader, mini_set, mini.diff({"calc/__init__.py": fixed_with(prelude)}))
    assert result.verdict is Verdict.PASS, result.output  # both writes stopped with an error; the fix is right


def test_submitted_code_runs_unprivileged(grader, mini, mini_set):
    code = textwrap.dedent("""\
        import os

        def _privileged():
            if os.getuid() == 0 or os.geteuid() == 0:
                return True
            with open("/proc/self/status") as f:
                caps = {l.split(":")[0]: l.split()[1] for l in f if l.startswith("Cap")}
            if int(caps["CapEff"], 16) or int(caps["CapPrm"], 16):
                return True
            try:
                os.listdir("/opt/grader")
                return True
            except OSError:
                return False

        PRIVILEGED = _privileged()

        def mean(xs):
            if not xs and not PRIVILEGED:
                raise ValueError("empty")
            return sum(xs) / len(xs)
        """)
    result = grade(grader, mini_set, mini.diff({"calc/__init__.py": code}))
    assert result.verdict is Verdict.PASS, result.output


def test_symlink_to_host_files_reads_nothing(grader, mini, mini_set):
    # A symlink the patch creates points into the container's own filesystem only;
    # the hidden test path replaced by a symlink is put back as a real file.
    result = grade(
        grader, mini_set, mini.diff({"calc/__init__.py": FIXED}, symlinks={"tests/test_mean.py": "../README.md"})
    )
    assert result.verdict is Verdict.PASS
    assert result.apply.restored == ["tests/test_mean.py"]


def test_orphans_are_reaped(grader, settings):
    """A container whose owner on this host is dead is removed; one whose owner lives is
    kept. (Every grader reaps when it starts: another xdist worker's may remove the orphan
    first, so what is checked is that it is gone, not who removed it.)"""
    sandbox = grader.sandbox  # made (and reaped once) before the orphan exists
    engine = DockerEngine()
    image = engine.image_id("grader/base:bookworm")
    host = __import__("socket").gethostname()
    orphan = engine.client.containers.create(
        image, ["sleep", "60"], labels={"grader.sandbox": "1", "grader.owner": f"{host}:999999"}
    )
    owned = engine.client.containers.create(
        image, ["sleep", "60"], labels={"grader.sandbox": "1", "grader.owner": f"{host}:{os.getpid()}"}
    )
    try:
        assert orphan.id in sandbox.live_containers()
        sandbox.reap_orphans()
        live = sandbox.live_containers()
        assert orphan.id not in live
        assert owned.id in live
    finally:
        owned.remove(force=True)


def test_an_honest_submission_after_all_the_attacks_passes(grader, mini_set):
    result = grade(grader, mini_set, mini_set.get("mini").gold_patch_text())
    assert result.verdict is Verdict.PASS
    json.loads(result.to_json())


def test_runtime_from_settings(settings):
    assert Grader(get_settings(runtime="runsc")).runtime == "runsc"
    assert Grader(settings).runtime == "runc"
