"""The service image (Dockerfile, scripts/build-service-image.sh), built through the
script as a user would, and looked inside with no network. Its compose deployment
(docker-compose.yml), which the tests only read, is tests/unit/test_service_image.py."""

from __future__ import annotations

import json
import subprocess
import tomllib

import pytest

from grader.tasks.loader import TaskSet
from helpers import ROOT

TAG = "grader/service:test"


# --- the image ----------------------------------------------------------------------------
def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if check:
        assert proc.returncode == 0, (
            f"{' '.join(args)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


def _build() -> str:
    proc = _run("bash", str(ROOT / "scripts" / "build-service-image.sh"), TAG)
    return proc.stdout + proc.stderr


def _in_image(*args: str, entrypoint: str | None = None) -> str:
    extra = ["--entrypoint", entrypoint] if entrypoint else []
    return _run("docker", "run", "--rm", "--network", "none", *extra, TAG, *args).stdout


@pytest.fixture(scope="module")
def service_image() -> str:
    ca_before = (ROOT / "grader-ca.crt").exists()
    output = _build()
    if not ca_before:
        assert not (ROOT / "grader-ca.crt").exists(), "the build left its CA file in the repository"
    return output


@pytest.mark.docker
def test_the_cli_answers(service_image):
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert version in _in_image("--version")
    assert "Usage" in _in_image("--help")


@pytest.mark.docker
def test_the_container_user_is_not_root(service_image):
    assert _in_image("-u", entrypoint="id").strip() == "10001"
    assert _in_image("-un", entrypoint="id").strip() == "grader"


@pytest.mark.docker
def test_the_installed_package_has_every_module_and_data_file(service_image):
    package = ROOT / "grader"
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["grader"]
    expected = {p for p in package.rglob("*.py") if "__pycache__" not in p.parts}
    for pattern in globs:
        expected |= {p for p in package.glob(pattern) if p.is_file()}
    listing = json.loads(
        _in_image(
            "-c",
            (
                "import grader, json, pathlib, sys; root = pathlib.Path(grader.__file__).parent; "
                "print(json.dumps({'prefix': sys.prefix, 'root': str(root), "
                "'files': [str(p.relative_to(root)) for p in root.rglob('*') if p.is_file()]}))"
            ),
            entrypoint="python",
        )
    )
    assert listing["prefix"] == "/opt/grader"
    assert listing["root"].startswith("/opt/grader/lib/"), "grader is not installed into the venv"
    missing = sorted({str(p.relative_to(package)) for p in expected} - set(listing["files"]))
    assert not missing, f"not in the image: {missing}"


@pytest.mark.docker
def test_the_example_tasks_are_in_the_image(service_image):
    """The image serves what the repository's tasks/ holds: the examples and one task per
    language (the real suites are built from their manifests, not shipped)."""
    listed = {t["id"] for t in json.loads(_in_image("tasks", "list", "--json"))}
    assert listed == {t.id for t in TaskSet(ROOT / "tasks")}
    assert {t.id for t in TaskSet(ROOT / "tasks" / "examples")} < listed
    assert {t.id for t in TaskSet(ROOT / "tasks" / "languages")} < listed


@pytest.mark.docker
def test_an_unchanged_rebuild_runs_no_step(service_image):
    output = _build()
    assert "Using cache" in output
    assert "Running in" not in output, output[-3000:]
