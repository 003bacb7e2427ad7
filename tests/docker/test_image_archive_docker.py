"""`grader env export` on this machine's engine, `grader env import` into a second engine
with nothing in it (tests/helpers/engines.py): a damaged copy is refused with nothing
loaded; the real one loads every image under its own id, and the new host grades on it
at once (no build); an image tagged there as the task's instance image that is not it is
refused as ERROR (exit 3), not graded."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from grader.sandbox.docker import DockerEngine
from helpers import ROOT
from helpers.engines import SecondEngine
from helpers.mini import FIXED
from helpers.service import BIN

pytestmark = [pytest.mark.docker]


def _env(settings, docker_host: str | None = None) -> dict[str, str]:
    env = {
        **os.environ,
        "GRADER_TASKS_DIR": str(settings.tasks_dir),
        "GRADER_ENVIRONMENTS_DIR": str(ROOT / "environments"),
        "GRADER_CACHE_DIR": str(settings.cache_dir),
        "GRADER_BUILD_MISSING_IMAGES": "false",  # a new host must not build what it was sent
    }
    env.pop("DOCKER_HOST", None)
    if docker_host:
        env["DOCKER_HOST"] = docker_host
    return env


def _grader(settings, *args: str, docker_host: str | None = None, stdin: bytes | None = None):
    return subprocess.run(
        [str(BIN), *args], env=_env(settings, docker_host), input=stdin, capture_output=True, timeout=600
    )


@pytest.fixture(scope="module")
def archive(settings, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("archive")
    done = _grader(settings, "env", "export", "python-3.11", "-o", str(out), "--json")
    assert done.returncode == 0, done.stderr.decode()
    made = json.loads(done.stdout)
    yield made
    Path(made["path"]).unlink(missing_ok=True)


@pytest.fixture
def engine():
    e = SecondEngine()
    try:
        yield e.start()
    finally:
        e.cleanup()  # a start that failed half-way leaves things too


def _grader_images(engine: SecondEngine) -> list[str]:
    listed = engine.docker("images", "--format", "{{.Repository}}:{{.Tag}}")
    return sorted(line for line in listed.stdout.split() if line.startswith("grader/"))


def test_images_reach_a_new_host_and_are_verified(settings, archive, engine, mini, tmp_path):
    path = Path(archive["path"])
    kinds = sorted({i["kind"] for i in archive["images"]})
    assert kinds == ["base", "env", "task"], archive["images"]
    assert {i["task"] for i in archive["images"] if i["kind"] == "task"} == {"mini", "mini-nolist"}

    # a damaged copy under the right name: refused, nothing loaded
    damaged = tmp_path / path.name
    with open(path, "rb") as src, open(damaged, "wb") as dst:
        dst.write(src.read(1 << 20))
        dst.write(b"\xff")
        src.seek(1, 1)
        while chunk := src.read(1 << 22):
            dst.write(chunk)
    done = _grader(settings, "env", "import", str(damaged), docker_host=engine.url)
    assert done.returncode == 3 and "refused, nothing loaded" in " ".join(done.stderr.decode().split()), done
    assert _grader_images(engine) == []
    damaged.unlink()

    done = _grader(settings, "env", "import", str(path), "--sha256", archive["sha256"], docker_host=engine.url)
    assert done.returncode == 0, done.stderr.decode()
    here = DockerEngine()
    there = DockerEngine(base_url=engine.url)
    for image in archive["images"]:
        assert there.image_id(image["ref"]) == image["id"] == here.image_id(image["ref"]), image
    assert _grader_images(engine) == sorted(i["ref"] for i in archive["images"])

    # graded on the new host at once (building is off), on the very image exported
    gold = mini.diff({"calc/__init__.py": FIXED})
    done = _grader(settings, "grade", "--task", "mini", "--patch", "-", "--json", docker_host=engine.url, stdin=gold)
    result = json.loads(done.stdout)
    assert done.returncode == 0 and result["verdict"] == "PASS", done.stderr.decode()[-2000:]
    [mini_image] = [i for i in archive["images"] if i.get("task") == "mini"]
    assert result["provenance"]["image_id"] == mini_image["id"]

    # another image under the task's instance tag: refused, not graded on
    [base] = [i for i in archive["images"] if i["kind"] == "base"]
    assert engine.docker("tag", base["id"], mini_image["ref"]).returncode == 0
    done = _grader(settings, "grade", "--task", "mini", "--patch", "-", "--json", docker_host=engine.url, stdin=gold)
    result = json.loads(done.stdout)
    assert done.returncode == 3 and result["verdict"] == "ERROR", result
    assert "cannot be verified by hash" in result["error"] and "not labelled as task mini" in result["error"]
    assert engine.docker("ps", "-aq").stdout.split() == []  # nothing ran, nothing left
