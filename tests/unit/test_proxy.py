"""The proxy in front of `grader serve` (grader/cli/proxy.py): what docker-compose.yml
ships is what `grader proxy config --site` makes, and the deployment puts it in front of
the API. nginx itself, started from this configuration, is tests/service/test_slow_clients.py."""

from __future__ import annotations

import pytest
import yaml

from grader.cli.proxy import COMPOSE, HEADER_TIMEOUT, PER_ADDRESS, site, whole
from grader.config import Settings
from helpers import ROOT


@pytest.fixture
def defaults(monkeypatch) -> Settings:
    for name in ("GRADER_MAX_WAIT", "GRADER_MAX_REQUEST_BYTES"):
        monkeypatch.delenv(name, raising=False)
    return Settings()


def test_the_shipped_site_is_what_the_command_makes(defaults):
    shipped = (ROOT / "deploy" / "nginx" / "grader.conf").read_text()
    assert shipped == site(defaults, **COMPOSE), (
        "regenerate it: grader proxy config --site --listen 80 --upstream api:8000"
    )


def test_compose_puts_nginx_in_front_and_publishes_only_it():
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    proxy, api = services["proxy"], services["api"]
    assert "ports" not in api, "gunicorn must not face clients: only the proxy publishes a port"
    assert api["environment"]["GRADER_PROXIED"] == "true"  # a refusal from the headers reads the body first
    assert proxy["image"].startswith("nginx:")
    assert "./deploy/nginx/grader.conf:/etc/nginx/conf.d/default.conf:ro" in proxy["volumes"]
    assert any(str(p).endswith(f":{COMPOSE['listen']}") for p in proxy["ports"])
    assert COMPOSE["upstream"] == f"api:{api['command'][api['command'].index('--bind') + 1].rsplit(':', 1)[1]}"


def test_the_site_bounds_slow_clients_and_follows_the_settings(defaults):
    text = site(defaults.model_copy(update={"max_request_bytes": 12345, "max_wait": 30}), listen="8080", upstream="a:1")
    for line in (
        f"client_header_timeout {HEADER_TIMEOUT}s;",
        "client_body_timeout",
        "proxy_request_buffering on;",
        "proxy_buffering on;",
        "client_max_body_size 12345;",
        f"limit_conn grader_per_address {PER_ADDRESS};",
        "proxy_read_timeout 90s;",  # longer than the longest ?wait=
        "server a:1;",
        "listen 8080;",
        "proxy_set_header X-Forwarded-For $remote_addr;",  # set, never appended to what a client says
    ):
        assert line in text, line


def test_a_whole_configuration_keeps_every_file_under_its_prefix(defaults, tmp_path):
    text = whole(defaults, listen="127.0.0.1:1", upstream="127.0.0.1:2", prefix=tmp_path)
    paths = [w.rstrip(";") for w in text.split() if w.startswith("/") and w != "/"]  # "location /" is no file
    assert paths and all(p.startswith(str(tmp_path)) for p in paths)
    assert site(defaults, listen="127.0.0.1:1", upstream="127.0.0.1:2").splitlines()[3] in text
