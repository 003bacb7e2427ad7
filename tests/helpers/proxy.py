"""The deployment as shipped: nginx started from what `grader proxy config` makes, in front
of a `grader serve` (tests/helpers/service.py: api_process), and clients that connect
from an address of their own.

    with api_process(db, redis, tmp, **PROXIED) as api, nginx_in_front(api) as url:
        requests.get(url + "/healthz")

The API behind nginx is told so (PROXIED: GRADER_PROXIED, as docker-compose.yml sets it).

Every loopback address is this machine's (127.0.0.0/8), so a client that binds its
socket to 127.0.0.2 before connecting is, to nginx, another address than one bound to
127.0.0.3: the per-address bounds can be tested on one machine (`source_session`,
`connect_from`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter

from helpers.servers import INSTALL_HINT, ServerError, _die_with_parent, free_port, log_tail
from helpers.service import BIN

PROXIED = {"GRADER_PROXIED": "true"}


def nginx_binary() -> str:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if found is None:
        raise ServerError(f"nginx is not installed; {INSTALL_HINT.replace('postgresql', 'postgresql and nginx')}")
    return found


@contextlib.contextmanager
def nginx_in_front(api_url: str, *args: str, **env: str) -> Iterator[str]:
    """nginx configured by `grader proxy config` (with `args`, and GRADER_* `env` as the
    API was given: the body limit and the longest wait) in front of `api_url`; its URL."""
    # its own directory under /tmp, open to nginx's unprivileged workers when root starts it
    # (pytest's directories are root's alone)
    prefix = Path(tempfile.mkdtemp(prefix="grader-nginx."))
    prefix.chmod(0o755)
    port = free_port()
    upstream = urlsplit(api_url).netloc
    conf = subprocess.run(
        [
            str(BIN),
            "proxy",
            "config",
            "--listen",
            f"127.0.0.1:{port}",
            "--upstream",
            upstream,
            "--prefix",
            str(prefix),
            *args,
        ],
        env={**os.environ, **env},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    (prefix / "nginx.conf").write_text(conf)
    proc = subprocess.Popen(
        [nginx_binary(), "-p", str(prefix), "-c", str(prefix / "nginx.conf"), "-g", "daemon off;"],
        stdout=subprocess.DEVNULL,
        stderr=open(prefix / "stderr.log", "wb"),
        preexec_fn=_die_with_parent,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if requests.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise ServerError(
                    f"nginx did not serve {url}:\n{log_tail(prefix / 'stderr.log')}\n{log_tail(prefix / 'error.log')}"
                )
            time.sleep(0.2)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)  # nginx's fast shutdown
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(prefix, ignore_errors=True)


class _FromAddress(HTTPAdapter):
    def __init__(self, address: str, **kw):
        self.address = address
        super().__init__(**kw)

    def init_poolmanager(self, *args, **kwargs):
        kwargs["source_address"] = (self.address, 0)
        super().init_poolmanager(*args, **kwargs)


def source_session(address: str, key: str | None = None) -> requests.Session:
    """A requests session whose connections come from `address` (a loopback address)."""
    http = requests.Session()
    http.mount("http://", _FromAddress(address))
    if key:
        http.headers["Authorization"] = f"Bearer {key}"
    return http


def connect_from(address: str, url: str, timeout: float = 10) -> socket.socket:
    """A TCP connection to `url`'s host and port from `address`."""
    parts = urlsplit(url)
    return socket.create_connection((parts.hostname, parts.port), timeout=timeout, source_address=(address, 0))
