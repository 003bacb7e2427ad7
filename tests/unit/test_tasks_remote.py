"""`grader tasks checkout` for a team that has no task folders, against a scripted server: a
bundle that does not match its sha256 is refused; the CLI's errors when the service does
not answer or the key is missing. Against a live server,
tests/service/test_tasks_remote_service.py; the whole way from an empty directory to a
PASS through a worker (Docker), tests/docker/test_tasks_remote_docker.py."""

from __future__ import annotations

import socket
import time

import pytest

from grader.client import ApiError, Client
from helpers.remote import cli


def test_a_bundle_that_does_not_match_its_sha256_is_refused_and_nothing_is_left(api, team_dir):
    """A download cut short or changed on the way is not checked out."""
    import hashlib

    sent = b"# v2 git bundle\n" + b"x" * 100
    api.on("GET", "/v1/tasks/t1", (200, {"id": "t1", "repo": {"commit": "a" * 40, "merge": None}}))
    api.on(
        "GET",
        "/v1/tasks/t1/repository",
        (
            200,
            sent,
            {
                "Content-Type": "application/x-git-bundle",
                "X-Content-SHA256": hashlib.sha256(sent + b"more").hexdigest(),
                "X-Grader-Commit": "a" * 40,
            },
        ),
    )
    with pytest.raises(ApiError, match="the bundle's sha256 is"):
        Client(api.url, "k").repository("t1", team_dir / "t1.bundle")
    assert list(team_dir.iterdir()) == []
    result = cli("tasks", "checkout", "t1", "work", "--url", api.url, "--api-key", "k")
    assert result.exit_code == 2 and "the bundle's sha256 is" in result.output
    assert list(team_dir.iterdir()) == []


# --- the CLI's errors: no service, no key ---------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "args",
    [
        ["tasks", "list"],
        ["tasks", "show", "calc-mean-empty"],
        ["tasks", "checkout", "calc-mean-empty", "work"],
        ["submit", "--task", "calc-mean-empty", "--patch", "-"],
        ["runs", "list"],
    ],
)
def test_a_server_that_does_not_answer_is_named_not_traced(args, team_dir):
    url = f"http://127.0.0.1:{free_port()}"
    result = cli(*args, "--url", url, "--api-key", "k", input=b"")
    assert result.exit_code == 2
    # in the team's words: the address it gave, not the host's command
    assert f"error: cannot reach the grader service at {url} (connection refused): check the address" in result.output
    assert "grader serve" not in result.output
    for trace in ("HTTPConnectionPool", "Max retries", "Traceback", "urllib3", "NewConnectionError"):
        assert trace not in result.output
    assert not (team_dir / "work").exists()


def test_connection_refused_is_retried_only_a_little():
    sleeps: list[float] = []
    client = Client(f"http://127.0.0.1:{free_port()}", "k", max_retries=5, sleep=sleeps.append)
    with pytest.raises(ApiError) as info:
        client.tasks()
    assert info.value.status is None and info.value.code == "unreachable"
    assert "(connection refused): check the address (--url or GRADER_API_URL)" in info.value.message
    assert len(sleeps) == 2 and sum(sleeps) <= 0.5 + 1.0  # two retries, backoff 0.5 s then 1 s at most


def test_a_connection_nobody_accepts_gives_up_after_the_connect_timeout():
    """A listener whose accept queue is full drops new handshakes, as a firewall that
    drops packets does: the connect timeout, not the 30 s read timeout, ends each try."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    waiting = []
    try:
        for _ in range(3):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            waiting.append(s)
        time.sleep(0.2)  # the handshakes that fit complete; the queue is then full
        sleeps: list[float] = []
        client = Client(f"http://127.0.0.1:{port}", "k", timeout=30, connect_timeout=0.2, sleep=sleeps.append)
        with pytest.raises(ApiError) as info:
            client.tasks()
        assert "(no answer to the connection): check the address" in info.value.message
        assert len(sleeps) == 2
    finally:
        for s in waiting:
            s.close()
        listener.close()


@pytest.mark.parametrize(
    "args", [["tasks", "list"], ["tasks", "show", "calc-mean-empty"], ["tasks", "checkout", "calc-mean-empty", "work"]]
)
def test_no_tasks_and_no_key_names_both_settings(args, team_dir):
    result = cli(*args)
    assert result.exit_code == 2
    for name in ("GRADER_TASKS_DIR", "--tasks-dir", "GRADER_API_KEY", "--api-key"):
        assert name in result.output, name
    # the team's fact first (its key); the host's (a tasks directory) after it
    assert result.output.startswith("error: no API key for the grader service at ")
    assert result.output.index("GRADER_API_KEY") < result.output.index("GRADER_TASKS_DIR")
    assert not (team_dir / "work").exists()


def test_a_command_of_the_service_without_a_key_names_the_setting_and_the_option(team_dir):
    for args in (["submit", "--task", "t", "--patch", "-"], ["status", "s1"], ["runs", "list"]):
        result = cli(*args, input=b"")
        assert result.exit_code == 2 and "no API key" in result.output
        assert "GRADER_API_KEY" in result.output and "--api-key" in result.output
