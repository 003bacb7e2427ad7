"""Bodies whose length the headers do not give (Transfer-Encoding: chunked), issue 20.

A team's bodies draw on its bucket of bytes a second (GRADER_INGEST_BYTES_PER_SECOND):
announced by Content-Length they were charged from the headers, but chunked ones were not
charged at all (0 of 20 8-MiB bodies refused, against 10 of 20 with Content-Length), and a
chunked body over the size limit was cut at the limit by Werkzeug and answered 400 "not
valid JSON" instead of 413. Now every body is paid for as it is read, and over the limit
is 413 whatever its framing. Through gunicorn alone and through the deployment as shipped
(nginx reads the whole body first and hands it on with a Content-Length)."""

from __future__ import annotations

import json
import socket
from collections import Counter
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
import requests

from helpers.proxy import PROXIED, nginx_in_front
from helpers.service import api_process, make_service, new_key, outside_patch

pytestmark = pytest.mark.service
MIB = 2**20
ENV = {"GRADER_INGEST_BYTES_PER_SECOND": str(MIB), "GRADER_MAX_REQUEST_BYTES": str(4 * MIB)}


@pytest.fixture
def database_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path}/grader.db"


@pytest.fixture(params=["gunicorn", "nginx"])
def served(request, database_url, redis_url, tmp_path) -> Iterator[tuple[str, dict[str, str]]]:
    svc = make_service(database_url, redis_url)
    keys = {team: new_key(svc, team) for team in ("greedy", "honest")}
    svc.close()
    if request.param == "gunicorn":
        with api_process(database_url, redis_url, tmp_path, **ENV) as api:
            yield api, keys
    else:
        with api_process(database_url, redis_url, tmp_path, **ENV, **PROXIED) as api, nginx_in_front(api, **ENV) as url:
            yield url, keys


def _chunks(data: bytes, size: int = 64 * 1024) -> Iterator[bytes]:
    for at in range(0, len(data), size):
        yield data[at : at + size]


def _body(tag: str, pad: int) -> bytes:
    return json.dumps({"task_id": "calc-mean-empty", "patch": outside_patch(tag, pad=pad)}).encode()


def _post(url: str, key: str, body: bytes, *, chunked: bool) -> requests.Response:
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    return requests.post(f"{url}/v1/submissions", data=_chunks(body) if chunked else body, headers=headers, timeout=120)


@pytest.mark.parametrize("chunked", [False, True])
def test_every_body_is_paid_for_from_the_teams_bucket(served, chunked):
    """20 bodies of 2 MiB back to back on a bucket of 1 MiB/s after a burst of 4 MiB: most
    must be refused 429, chunked or not; another team's small body is served meanwhile."""
    url, keys = served
    codes: Counter[int] = Counter()
    for n in range(20):
        r = _post(url, keys["greedy"], _body(f"g{n}", 2 * MIB), chunked=chunked)
        codes[r.status_code] += 1
        if r.status_code == 429:
            assert r.json()["error"]["code"] == "too_many_bytes" and int(r.headers["Retry-After"]) >= 1
    assert codes[429] >= 10, codes
    assert set(codes) <= {413, 429}, codes  # read and over the patch limit (1 MiB), or refused
    honest = _post(url, keys["honest"], _body("h", 0), chunked=chunked)
    assert honest.status_code == 202, honest.text


def test_a_chunked_body_over_the_limit_is_413(served):
    url, keys = served
    r = _post(url, keys["honest"], _body("big", 5 * MIB), chunked=True)
    assert r.status_code == 413, r.text[:300]
    assert r.json()["error"]["code"] == "body_too_large"
    assert str(4 * MIB) in r.json()["error"]["message"]


def test_a_chunked_body_that_never_ends_is_cut_off_at_the_limit(served):
    """An endless stream of chunks is answered 413 once the limit is passed, not read forever."""
    url, keys = served

    def endless() -> Iterator[bytes]:
        yield b'{"task_id": "calc-mean-empty", "patch": "'
        while True:
            yield b"x" * 65536

    try:
        r = requests.post(
            f"{url}/v1/submissions",
            data=endless(),
            headers={"Authorization": f"Bearer {keys['honest']}", "Content-Type": "application/json"},
            timeout=120,
        )
    except requests.ConnectionError:
        return  # the server stopped reading at the limit and closed: the client could not finish sending
    assert r.status_code == 413


def test_a_small_chunked_body_is_served_as_any_other(served):
    url, keys = served
    r = _post(url, keys["honest"], _body("small", 10), chunked=True)
    assert r.status_code == 202, r.text
    again = requests.get(
        f"{url}/v1/submissions/{r.json()['id']}", headers={"Authorization": f"Bearer {keys['honest']}"}
    )
    assert again.json()["task_id"] == "calc-mean-empty"


def test_both_framings_at_once_is_refused(served):
    """Content-Length and Transfer-Encoding together (request smuggling's shape): a 4xx."""
    url, keys = served
    parts = urlsplit(url)
    body = _body("both", 0)
    chunked = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as conn:
        conn.sendall(
            (
                f"POST /v1/submissions HTTP/1.1\r\nHost: {parts.netloc}\r\nAuthorization: Bearer {keys['honest']}\r\n"
                f"Content-Type: application/json\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n"
                "Connection: close\r\n\r\n"
            ).encode()
            + chunked
        )
        answer = b""
        while piece := conn.recv(65536):
            answer += piece
    status = int(answer.split(b" ", 2)[1])
    assert 400 <= status < 500, answer[:300]


@pytest.fixture(params=["gunicorn", "nginx"])
def front(request, database_url, redis_url, tmp_path) -> Iterator[tuple[str, str]]:
    if request.param == "gunicorn":
        with api_process(database_url, redis_url, tmp_path, **ENV) as api:
            yield request.param, api
    else:
        with api_process(database_url, redis_url, tmp_path, **ENV, **PROXIED) as api, nginx_in_front(api, **ENV) as url:
            yield request.param, url


def test_a_portal_form_is_read_only_when_small_and_announced(front):
    """The portal's forms are a few hundred bytes: a 100 KiB one is 413 (its body is not
    paid for by any team), and one whose length is not announced is not read (411 from
    gunicorn; nginx reads it and passes it on with a Content-Length, so the wrong key is
    401 there)."""
    kind, url = front
    big = requests.post(f"{url}/login", data={"key": "k" * 100_000}, timeout=60, allow_redirects=False)
    assert big.status_code == 413
    small = requests.post(
        f"{url}/login",
        data=iter([b"key=grk_", b"wrong"]),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        timeout=60,
        allow_redirects=False,
    )
    assert small.status_code == (411 if kind == "gunicorn" else 401), small.text[:300]
