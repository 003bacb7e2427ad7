"""The records of a supervisor's order (grader/jobspec.py): what the pipeline writes is what
the supervisor reads, a record refuses what it does not know, and in the container the
supervisor loads the records from the file shipped beside it, never by module name."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile

import pytest

from grader.box.order import CheckSpec, Order, ProtectSpec
from grader.box.runners import runner
from grader.grading.ship import archive
from grader.grading.spec import APPLY_CHAIN, CONTAINER_ENV


def order(**over) -> Order:
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
    return Order(**fields)


def test_a_job_survives_json():
    original = order()
    again = Order.from_json(original.to_json())
    assert again == original
    assert isinstance(again.check, CheckSpec) and isinstance(again.protect, ProtectSpec)
    assert again.apply_chain[0] == ("git apply", ["git", "apply", "--verbose"])
    with_config = order(pytest_config=(".toml", "eA=="))
    assert Order.from_json(with_config.to_json()).pytest_config == (".toml", "eA==")


def test_the_wire_shape_is_plain_json():
    data = json.loads(order().to_json())
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
    data = json.loads(order().to_json())
    mutate(data)
    with pytest.raises(TypeError):
        Order.from_dict(data)


def test_an_unknown_check_kind_is_refused():
    with pytest.raises(ValueError, match="unknown check kind"):
        runner("doctest")


def test_the_supervisor_runs_from_its_archive_never_by_a_name_the_environment_answers_to(tmp_path):
    """Run as the container runs it (`python3 -I box.zip`), in an interpreter where a
    package named like the archive's (`grader_box`) is importable from the working
    directory and from PYTHONPATH: the archive's own modules are what run. With no order to
    read, the supervisor reports its own fault, as JSON."""
    decoy = tmp_path / "grader_box"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("import sys\nprint('the decoy')\nsys.exit(7)\n")
    (decoy / "supervisor.py").write_text("import sys\nprint('the decoy')\nsys.exit(7)\n")
    box = tmp_path / "box.zip"
    box.write_bytes(archive())
    run = subprocess.run(
        [sys.executable, "-I", str(box)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path)},
    )
    report = json.loads(run.stdout)
    assert "FileNotFoundError" in report["error"] and "/opt/grader/run/order.json" in report["error"], run.stderr


def test_the_archive_is_the_same_bytes_for_the_same_sources():
    assert archive() == _archive_again()
    names = zipfile.ZipFile(io.BytesIO(archive())).namelist()
    assert names[0] == "__main__.py" and "grader_box/supervisor.py" in names
    assert "grader_box/reporters/pytest_plugin.py" in names
    assert not [n for n in names if n.endswith(".pyc")]


def _archive_again() -> bytes:
    from grader.grading import ship

    ship.archive.cache_clear()
    return ship.archive()
