"""Bad input a hostile client sends answers 4xx naming what is wrong, never 500 (issue 11):
JSON nested too deep to parse, NaN and Infinity, callback URLs whose port or host cannot
be parsed; and a webhook connects to the address that was checked, not to what its name
resolves to a moment later."""

from __future__ import annotations

import http.server
import ipaddress
import socket
import threading

import pytest

from grader import webhooks
from helpers.service import ROOT

pytestmark = pytest.mark.service
GOLD = (ROOT / "tasks/examples/calc-mean-empty/gold.patch").read_text()
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture
def service_options():
    """A ?wait= holds at most 2 s here."""
    return {"max_wait": 2}


def _sub(**kw) -> dict:
    return {"task_id": "calc-mean-empty", "patch": GOLD, **kw}


@pytest.mark.parametrize(
    "path,body,content_type",
    [
        ("/v1/submissions", DEEP, "application/json"),
        ("/v1/submissions/batch", DEEP, "application/json"),
        (
            "/v1/submissions/batch",
            '{"instance_id": "calc-mean-empty", "model_patch": ""}\n' + DEEP,
            "application/x-ndjson",
        ),
        ("/v1/submissions", '{"task_id": "calc-mean-empty", "metadata": ' + DEEP + "}", "application/json"),
    ],
)
def test_json_nested_too_deep_is_400(api, path, body, content_type):
    r = api.post(path, data=body, content_type=content_type)
    assert r.status_code == 400, r.json
    assert r.json["error"]["code"] == "bad_request" and "nested too deeply" in r.json["error"]["message"]


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize(
    "path,wrap",
    [
        ("/v1/submissions", lambda item: item),
        ("/v1/submissions/batch", lambda item: "[" + item + "]"),
    ],
)
def test_nan_and_infinity_are_refused(api, constant, path, wrap):
    item = '{"task_id": "calc-mean-empty", "patch": "", "metadata": {"score": ' + constant + "}}"
    r = api.post(path, data=wrap(item))
    assert r.status_code == 422, r.json
    assert constant in r.json["error"]["message"] and "NaN or Infinity" in r.json["error"]["message"]
    r = api.post(
        "/v1/submissions/batch", data=item.replace('"task_id"', '"instance_id"'), content_type="application/x-ndjson"
    )
    assert r.status_code == 422 and constant in r.json["error"]["message"]


@pytest.mark.parametrize(
    "url", ["http://example.org:99999/hook", "http://example.org:abc/hook", "http://[::1/hook", "http://[zz]/hook"]
)
def test_unparsable_callback_url_is_422_naming_the_field(api, url):
    r = api.post("/v1/submissions", json=_sub(callback_url=url))
    assert r.status_code == 422, r.json
    assert "callback_url" in r.json["error"]["message"]
    r = api.post("/v1/submissions/batch", json={"submissions": [_sub()], "callback_url": url})
    assert r.status_code in (200, 207, 422), r.json
    assert "callback_url" in str(r.json)


# --- webhooks connect to the address that was checked --------------------------------------------
class _Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        self.server.got.append(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def _serve(host: str, port: int) -> http.server.HTTPServer:
    server = http.server.HTTPServer((host, port), _Receiver)
    server.got = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_delivery_connects_to_the_checked_address_not_a_later_answer(monkeypatch):
    """The name answers 127.0.0.1 when checked, then 127.0.0.2 (another receiver on the
    same port). Here 127.0.0.1 counts as public and 127.0.0.2 as private, as a name that
    answers the check with a public address and the connection with an internal one: the
    delivery must reach the checked address, and the name is resolved once."""
    checked = _serve("127.0.0.1", 0)
    port = checked.server_address[1]
    elsewhere = _serve("127.0.0.2", port)
    real, asked = socket.getaddrinfo, []

    def resolver(host, *args, **kwargs):
        if host != "hook.invalid":
            return real(host, *args, **kwargs)
        asked.append(host)
        addr = "127.0.0.1" if len(asked) == 1 else "127.0.0.2"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (addr, port))]

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    monkeypatch.setattr(ipaddress.IPv4Address, "is_global", property(lambda a: str(a) == "127.0.0.1"))
    try:
        outcome = webhooks.deliver(
            f"http://hook.invalid:{port}/cb", b'{"v": 1}', "s3cret", timeout=10, allow_private=False, delivery_id="d1"
        )
    finally:
        checked.shutdown()
        elsewhere.shutdown()
    assert outcome.ok, outcome
    assert checked.got == [b'{"v": 1}'] and elsewhere.got == []
    assert asked == ["hook.invalid"]


def test_check_url_returns_the_addresses_it_checked(monkeypatch):
    monkeypatch.setattr(
        socket,
        "getaddrinfo",
        lambda host, *a, **kw: [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", 80))],
    )
    assert webhooks.check_url("http://hook.invalid/cb", allow_private=False) == ["93.184.216.34"]
    monkeypatch.setattr(
        socket, "getaddrinfo", lambda host, *a, **kw: [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.5", 80))]
    )
    with pytest.raises(webhooks.CallbackRefused, match="non-public"):
        webhooks.check_url("http://hook.invalid/cb", allow_private=False)


def test_a_name_that_does_not_resolve_is_retried_at_delivery(monkeypatch):
    def fail(host, *args, **kwargs):
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", fail)
    outcome = webhooks.deliver(
        "http://hook.invalid/cb", b"{}", "s3cret", timeout=5, allow_private=True, delivery_id="d2"
    )
    assert not outcome.ok and outcome.retryable and "does not resolve" in outcome.error
    with pytest.raises(webhooks.CallbackRefused, match="does not resolve"):
        webhooks.check_url("http://hook.invalid/cb", allow_private=True)
