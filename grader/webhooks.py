"""Callbacks: when a submission is done, its result is POSTed to the submitter's
`callback_url`, signed so the receiver can tell it came from us and was not altered.

    X-Grader-Signature: t=<unix time>,v1=<hex HMAC-SHA256(team secret, "<t>.<body>")>

The timestamp is inside the signed text so an old delivery cannot be replayed as new.
Timeouts, connection errors, 429 and 5xx answers are retried with backoff (Judge0's
callbacks give up on a 5xx); other 4xx answers are final: the receiver said no.
Callback URLs that resolve to loopback, private, link-local or reserved addresses are
refused unless the operator allows them, so a submitter cannot make the service call its
own Redis or a cloud metadata endpoint.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3 import HTTPConnectionPool, HTTPSConnectionPool

SIGNATURE_HEADER = "X-Grader-Signature"
TOLERANCE = 300  # seconds a receiver should accept between t= and its clock


def sign(body: bytes, secret: str, timestamp: int | None = None) -> str:
    t = int(time.time()) if timestamp is None else timestamp
    mac = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


def verify(body: bytes, header: str, secret: str, *, tolerance: int = TOLERANCE, now: float | None = None) -> bool:
    """What a receiver runs: the signature matches and its timestamp is recent."""
    try:
        parts = dict(p.split("=", 1) for p in header.split(","))
        t = int(parts["t"])
    except (ValueError, KeyError):
        return False
    if abs((time.time() if now is None else now) - t) > tolerance:
        return False
    expected = sign(body, secret, t).split("v1=", 1)[1]
    return hmac.compare_digest(expected, parts.get("v1", ""))


class CallbackRefused(ValueError):
    """Raised when a callback URL is not one the service will call."""


class CallbackUnresolved(CallbackRefused):
    """Raised when a callback URL's host does not resolve: refused at intake, retried at
    delivery (a name server's outage is not the receiver saying no)."""


_LABEL = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$")


def plausible_host(host: str) -> bool:
    """An IP address, or a name whose every label DNS could hold (IDNA for the others):
    what a link or a callback can point at, before anything is resolved."""
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
        return True
    except ValueError:
        pass
    try:
        ascii_name = host.encode("idna").decode("ascii")
    except UnicodeError:  # an empty or too long label
        return False
    labels = ascii_name.removesuffix(".").split(".")
    return len(ascii_name) <= 253 and all(_LABEL.match(label) for label in labels)


def check_url(url: str, *, allow_private: bool, resolve: bool = True, name: str = "callback_url") -> list[str]:
    """Refuse what is not http(s) with a host and a valid port, and (unless allowed) hosts
    that resolve to non-public addresses. Checked when the submission is made and again
    when delivering; returns the addresses checked (none when `resolve` is off), so that
    the delivery connects to one of them and not to what the name resolves to later.
    `name`: the field the messages name (a run's links are checked the same way, unresolved)."""
    try:
        parts = urlsplit(url)
        port = parts.port  # a ValueError for ':99999' or ':abc'
    except ValueError as exc:  # '[::1' or '[zz]' too
        raise CallbackRefused(f"{name} is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CallbackRefused(f"{name} must be an absolute http:// or https:// URL with a host")
    if parts.username or parts.password:
        raise CallbackRefused(f"{name} must not carry credentials")
    if not plausible_host(parts.hostname):
        raise CallbackRefused(f"{name} host {parts.hostname!r} is neither a host name nor an IP address")
    if not resolve:
        return []
    try:
        infos = socket.getaddrinfo(
            parts.hostname, port or (443 if parts.scheme == "https" else 80), type=socket.SOCK_STREAM
        )
    except (socket.gaierror, UnicodeError) as exc:
        raise CallbackUnresolved(f"{name} host {parts.hostname!r} does not resolve: {exc}") from None
    addresses = []
    for info in infos:
        addr = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if not allow_private and (not addr.is_global or addr.is_multicast):
            raise CallbackRefused(f"{name} host {parts.hostname!r} resolves to a non-public address ({addr})")
        addresses.append(str(addr))
    return addresses


def _pinned_connection(cls: type[Any], address: str) -> type[Any]:
    """`cls` (urllib3's connection) connecting to `address` whatever its host name resolves
    to now; the name still goes in the Host header, in SNI and in the certificate check."""

    class Pinned(cls):  # type: ignore[misc]  # a base chosen at run time (urllib3 types it as a protocol)
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._dns_host = address  # what urllib3 connects to; `host` stays the name

    return Pinned


class PinnedAdapter(HTTPAdapter):
    """A transport that connects to the address `check_url` checked, so a name cannot
    answer the check with a public address and the connection with a private one."""

    def __init__(self, address: str):
        self.address = address
        super().__init__(max_retries=0)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {
            "http": type(
                "PinnedHTTPPool",
                (HTTPConnectionPool,),
                {"ConnectionCls": _pinned_connection(HTTPConnectionPool.ConnectionCls, self.address)},
            ),
            "https": type(
                "PinnedHTTPSPool",
                (HTTPSConnectionPool,),
                {"ConnectionCls": _pinned_connection(HTTPSConnectionPool.ConnectionCls, self.address)},
            ),
        }


@dataclass
class Delivery:
    ok: bool
    retryable: bool
    status_code: int | None = None
    error: str | None = None


def deliver(url: str, body: bytes, secret: str, *, timeout: float, allow_private: bool, delivery_id: str) -> Delivery:
    try:
        addresses = check_url(url, allow_private=allow_private)
    except CallbackRefused as exc:
        return Delivery(ok=False, retryable=isinstance(exc, CallbackUnresolved), error=str(exc))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "grader-webhook/1",
        SIGNATURE_HEADER: sign(body, secret),
        "X-Grader-Delivery": delivery_id,
    }
    session = requests.Session()
    session.trust_env = False  # no proxy: the connection goes to the checked address itself
    for scheme in ("http://", "https://"):
        session.mount(scheme, PinnedAdapter(addresses[0]))
    try:
        with session:
            answer = session.post(url, data=body, headers=headers, timeout=timeout, allow_redirects=False)
    except requests.Timeout as exc:
        return Delivery(ok=False, retryable=True, error=f"timed out: {exc}")
    except requests.RequestException as exc:
        return Delivery(ok=False, retryable=True, error=f"{type(exc).__name__}: {exc}")
    code = answer.status_code
    if 200 <= code < 300:
        return Delivery(ok=True, retryable=False, status_code=code)
    return Delivery(
        ok=False, retryable=code == 429 or code >= 500, status_code=code, error=f"answered {code}: {answer.text[:200]}"
    )
