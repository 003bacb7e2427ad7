"""The records of a supervisor's job (grader/jobspec.py): what the pipeline writes is what
the supervisor reads, a record refuses what it does not know, and in the container the
supervisor loads the records from the file shipped beside it, never by module name."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import grader
from grader.jobspec import CheckSpec, JobSpec, ProtectSpec
from grader.pipeline import APPLY_CHAIN, CONTAINER_ENV

PACKAGE = Path(grader.__file__).parent


def job(**over) -> JobSpec:
    fields = dict(
        repo="/work/repo",
        patch="/opt/grader/run/submission.patch",
        touched=["calc/__init__.py"],
        hidden_dir="/opt/grader/task/hidden",
        uid=1000,
        gid=1000,
        deadline=19.0,
        output_limit=65536,
        report_limit=8 << 20,
        apply_chain=[(m, list(a)) for m, a in APPLY_CHAIN],
        protect=ProtectSpec(
            files=["tests/test_mean.py"],
            names=["conftest.py"],
            suffixes=[".pth"],
            prefixes=["__editable__"],
            dir_suffixes=[".dist-info"],
            tests=True,
            test_modules=["test_*.py"],
            test_dir_names=["tests"],
            globs=[],
        ),
        pycache="/opt/pycache",
        report_plugin="cGx1Z2lu",
        check=CheckSpec(
            kind="pytest",
            args=["tests/test_mean.py"],
            canaries=True,
            canary_dir="tests",
            canary_words=["empty"],
            canary_sources=["tests/test_mean.py"],
        ),
        env=dict(CONTAINER_ENV),
        nproc_limit=64,
    )
    fields.update(over)
    return JobSpec(**fields)


def test_a_job_survives_json():
    original = job()
    again = JobSpec.from_json(original.to_json())
    assert again == original
    assert isinstance(again.check, CheckSpec) and isinstance(again.protect, ProtectSpec)
    assert again.apply_chain[0] == ("git apply", ["git", "apply", "--verbose"])
    with_config = job(pytest_config=(".toml", "eA=="))
    assert JobSpec.from_json(with_config.to_json()).pytest_config == (".toml", "eA==")


def test_the_wire_shape_is_plain_json():
    data = json.loads(job().to_json())
    assert data["check"]["kind"] == "pytest" and data["check"]["args"] == ["tests/test_mean.py"]
    assert data["protect"]["files"] == ["tests/test_mean.py"] and data["nproc_limit"] == 64


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.update(surprise=1),
        lambda d: d.pop("deadline"),
        lambda d: d["check"].update(surprise=1),
        lambda d: d["protect"].pop("globs"),
    ],
    ids=["unknown-key", "missing-key", "unknown-check-key", "missing-protect-key"],
)
def test_a_record_refuses_what_it_does_not_know_or_lacks(mutate):
    data = json.loads(job().to_json())
    mutate(data)
    with pytest.raises(TypeError):
        JobSpec.from_dict(data)


def test_an_unknown_check_kind_is_refused():
    with pytest.raises(ValueError, match="unknown check kind"):
        CheckSpec(kind="doctest")


def test_the_supervisor_loads_its_records_from_the_file_beside_it(tmp_path):
    """Run as the container runs it (a script, isolated mode), in an interpreter where a
    `grader` package is importable (this one): the jobspec.py beside it is what it loads."""
    shutil.copy(PACKAGE / "supervisor.py", tmp_path / "supervisor.py")
    (tmp_path / "jobspec.py").write_text("import sys\nprint('the shipped jobspec')\nsys.exit(7)\n")
    run = subprocess.run(
        [sys.executable, "-I", str(tmp_path / "supervisor.py")], capture_output=True, text=True, timeout=60
    )
    assert (run.returncode, run.stdout) == (7, "the shipped jobspec\n"), run.stderr


def test_the_supervisor_as_shipped_reads_a_job_with_the_shipped_records(tmp_path):
    """supervisor.py and jobspec.py side by side, as in the run directory: with no job to
    read it reports its own fault, as JSON, having loaded the records."""
    for name in ("supervisor.py", "jobspec.py"):
        shutil.copy(PACKAGE / name, tmp_path / name)
    run = subprocess.run(
        [sys.executable, "-I", str(tmp_path / "supervisor.py")], capture_output=True, text=True, timeout=60
    )
    report = json.loads(run.stdout)
    assert "FileNotFoundError" in report["error"] and "/opt/grader/run/job.json" in report["error"]
