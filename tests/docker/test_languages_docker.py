"""The language examples (tasks/languages), graded for real: one small project per runner of
another language, the same bug in each. Each is valid (the empty patch FAILs on exactly its
FAIL_TO_PASS test, the gold patch PASSes), each outcome comes per test in its ecosystem's own
id, and the public view says what decides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader.config import get_settings
from grader.pipeline import Grader
from grader.tasks import model
from grader.tasks.loader import TaskSet
from grader.validate import validate_task
from grader.verdict import Verdict

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
LANGUAGES = TaskSet(ROOT / "tasks" / "languages")


@pytest.fixture(scope="module")
def language_grader(tmp_path_factory) -> Grader:
    return Grader(
        get_settings(
            tasks_dir=ROOT / "tasks" / "languages",
            environments_dir=ROOT / "environments",
            cache_dir=tmp_path_factory.mktemp("cache"),
        )
    )


def test_every_language_has_an_example():
    assert {t.metadata.language for t in LANGUAGES} == {"c", "go", "java", "javascript", "python", "rust", "typescript"}
    runners = {t.check.runner for t in LANGUAGES if isinstance(t.check, model.TestsCheck)}
    assert runners == {"ctest", "go", "junit", "node-test", "vitest", "unittest", "pytest", "cargo"}


@pytest.mark.parametrize("task_id", LANGUAGES.ids())
def test_a_language_example_is_valid_test_by_test(language_grader, task_id):
    task = LANGUAGES.get(task_id)
    check = task.check
    assert isinstance(check, model.TestsCheck)
    report = validate_task(language_grader, task)
    assert report.ok, report.problems
    assert report.empty == [Verdict.FAIL] and report.gold == [Verdict.PASS]
    empty = language_grader.grade(task, b"")
    assert empty.verdict is Verdict.FAIL
    # the one FAIL_TO_PASS test failed and the PASS_TO_PASS one passed, by their own ids
    assert empty.tests is not None
    assert [empty.tests.all.get(t) for t in check.fail_to_pass] != ["passed"]
    assert [empty.tests.all.get(t) for t in check.pass_to_pass] == ["passed"], empty.tests.all
    assert empty.tampered == []


def test_every_later_run_imports_the_supervisor_from_bytecode(language_grader):
    """Each image's first run (above) compiled the supervisor on its interpreter, or said which
    one it is; every run since imports it from that bytecode (box/bytecode.py): 3.9 and
    3.13 here, the same verdict. Each imports it before its own files come (the sandbox's
    `preload`), warm or cold."""
    reports = []
    run = language_grader.sandbox.run

    def spy(spec):
        out = run(spec)
        reports.append(json.loads(out.stdout))
        return out

    language_grader.sandbox.run = spy  # type: ignore[method-assign]
    try:
        for task_id in LANGUAGES.ids():
            assert language_grader.grade(LANGUAGES.get(task_id), b"").verdict is Verdict.FAIL, task_id
    finally:
        del language_grader.sandbox.run
    assert [r["bytecode"]["loaded"] for r in reports] == [True] * len(reports), reports
    # and each was imported by its container before the run's order came (the sandbox's preload)
    assert [r["preloaded"] for r in reports] == [True] * len(reports), reports
    assert not [r for r in reports if "compiled" in r or "compile" in r["durations"]]
    assert len({r["bytecode"]["magic"] for r in reports}) >= 2


# In the image's own interpreter: bytecode.place_for_pytest's file for a plugin (here a pyc
# that claims the plugin's source but says "bytecode"), then the image's pytest loading it
# with -p, its own trace on: whether it took the file or rewrote the source, and what ran.
PLACED_FOR_PYTEST = """\
import os, subprocess, sys
sys.path.insert(0, "/opt/grader/run/box.zip")
from grader_box import bytecode
says = "import sys\\nsys.stderr.write('PLUGIN %s ' + (lambda: 0).__code__.co_filename + '\\\\n')\\n"
source = (says % "source").encode()
os.makedirs("/tmp/plugins")
with open("/tmp/plugins/grader_report_x.py", "wb") as f:
    f.write(source)
compiled = bytecode.pyc((says % "bytecode").encode(), "elsewhere.py")
bytecode.resource = lambda rel: compiled[:8] + __import__("importlib.util").util.source_hash(source) + compiled[16:]
print(bytecode.place_for_pytest("reporters/pytest_plugin.py", "/tmp/plugins/grader_report_x.py", "/tmp/cache"))
os.makedirs("/tmp/t")
with open("/tmp/t/test_one.py", "w") as f:
    f.write("def test_one():\\n    pass\\n")
env = dict(os.environ, PYTHONPYCACHEPREFIX="/tmp/cache", PYTHONDONTWRITEBYTECODE="1", PYTHONPATH="/tmp/plugins",
           PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTEST_DEBUG="1")
argv = ["python", "-m", "pytest", "-p", "grader_report_x", "-p", "no:cacheprovider", "-q", "/tmp/t"]
out = subprocess.run(argv, env=env, capture_output=True, text=True, cwd="/tmp")
print("cached" if "found cached rewritten pyc for /tmp/plugins/grader_report_x.py" in out.stderr else "rewritten")
print([line for line in out.stderr.splitlines() if line.startswith("PLUGIN")], out.returncode)
"""


def test_the_images_pytest_loads_the_report_plugin_from_the_pyc_placed_for_it(language_grader):
    """The environment's pytest (8.3.3: pycs checked by mtime and size) takes the file
    bytecode.place_for_pytest writes instead of rewriting the plugin's source, and the code
    it runs names the plugin's own file."""
    from grader.grading import ship
    from grader.sandbox import ContainerSpec, Limits

    image, _ = language_grader.images.instance_image(LANGUAGES.get("py313-median-even"))
    spec = ContainerSpec(
        image=image,
        command=["python3", "-I", "-c", PLACED_FOR_PYTEST],
        early_files={"run/box.zip": ship.archive()},
        workdir="/work/repo",
        limits=Limits(memory="512m", pids=64),
        timeout=60.0,
    )
    out = language_grader.sandbox.run(spec)
    assert out.exit_code == 0, out.stderr
    assert out.stdout.decode().splitlines() == [
        "True",
        "cached",
        "['PLUGIN bytecode /tmp/plugins/grader_report_x.py'] 0",
    ], out.stdout
