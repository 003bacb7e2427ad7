"""The service image's compose deployment (docker-compose.yml) and build context, read
only. The image itself, built through scripts/build-service-image.sh and looked inside,
is tests/docker/test_service_image_docker.py."""

from __future__ import annotations

import re

import pytest
import yaml

from helpers import ROOT

SOCKET = "/var/run/docker.sock"
SECRET_NAME = re.compile(r"PASSWORD|SECRET|TOKEN|(^|_)KEY$", re.I)
REQUIRED = re.compile(r"^\$\{(\w+):\?[^}]+\}$")  # ${VAR:?message}: compose refuses to run without VAR
REFERENCE = re.compile(r"\$\{(\w+)([^}]*)\}")
URL_PASSWORD = re.compile(r"^[a-z0-9+.-]+://[^:/@]*:([^@]*)@", re.I)


# --- docker-compose.yml -------------------------------------------------------------------
@pytest.fixture(scope="module")
def compose_text() -> str:
    return (ROOT / "docker-compose.yml").read_text()


@pytest.fixture(scope="module")
def services(compose_text) -> dict:
    return yaml.safe_load(compose_text)["services"]


def _environment(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def _volume_sources(service: dict) -> list[str]:
    return [
        v.split(":", 1)[0] if isinstance(v, str) else str(v.get("source", "")) for v in service.get("volumes") or []
    ]


def test_compose_has_every_service(services):
    assert {"redis", "postgres", "api", "worker"} <= set(services)


def test_compose_secrets_come_from_required_variables(compose_text, services):
    required = {m.group(1) for m in re.finditer(r"\$\{(\w+):\?", compose_text)}
    for name, service in services.items():
        for key, value in _environment(service).items():
            if SECRET_NAME.search(key):
                assert REQUIRED.match(value), f"{name}: {key} must be ${{VAR:?message}}, not {value!r}"
            url = URL_PASSWORD.match(value)
            if url:
                ref = REFERENCE.fullmatch(url.group(1))
                assert ref and ref.group(1) in required, f"{name}: {key} holds a literal password"
    for ref in REFERENCE.finditer(compose_text):
        if SECRET_NAME.search(ref.group(1)):
            assert ref.group(2) == "" or ref.group(2).startswith(":?"), f"{ref.group(0)}: a secret with a default"


def test_compose_only_the_worker_gets_the_docker_socket(services):
    assert SOCKET in _volume_sources(services["worker"])
    for name, service in services.items():
        if name != "worker":
            assert not any("docker.sock" in src for src in _volume_sources(service)), name
            assert not service.get("privileged"), name


def test_compose_keeps_data_in_named_volumes(compose_text, services):
    named = set(yaml.safe_load(compose_text).get("volumes") or {})
    for name, path in (("postgres", "/var/lib/postgresql/data"), ("redis", "/data")):
        sources = [v.split(":")[0] for v in services[name]["volumes"] if v.split(":")[1] == path]
        assert sources and sources[0] in named, f"{name} keeps {path} outside a named volume"
    command = services["redis"]["command"]
    command = command if isinstance(command, list) else command.split()
    assert command[command.index("--appendonly") + 1] == "yes"


def test_compose_api_and_worker_run_one_image_in_production(services):
    api, worker = services["api"], services["worker"]
    assert api["image"] == worker["image"] and api["build"] == worker["build"]
    assert "python:3.11-slim-bookworm" in api["build"]["args"]["BASE"]
    for service in (api, worker):
        env = _environment(service)
        assert env["GRADER_MODE"] == "production"
        assert env["GRADER_DATABASE_URL"].startswith("postgresql+psycopg://")
        assert env["GRADER_REDIS_URL"].startswith("redis://redis:")
    assert "/readyz" in " ".join(api["healthcheck"]["test"])


def test_dockerignore_keeps_the_context_small():
    patterns = (ROOT / ".dockerignore").read_text().split()
    for pattern in (".git", ".venv", "**/__pycache__", "*.db"):
        assert pattern in patterns
