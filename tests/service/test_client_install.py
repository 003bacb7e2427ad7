"""A team's client-only install (`pip install grader[client]`), for real: this repository
installed into a fresh virtualenv with the client's dependencies alone (from the package
index, as a team would), then its `grader` driven against a live server over HTTP. None
of the server's distributions is there (the Docker SDK, Flask, SQLAlchemy, RQ...), its
`--help` shows a team's commands only, and those commands work: the tasks listed, shown
and checked out, a patch submitted and followed, the team's account and the leaderboard.

Unit tests hold the list of the server's import names to pyproject.toml's `server` extra
(tests/unit/test_cli_client_only.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from helpers.service import ROOT, new_key

pytestmark = pytest.mark.service
TEAM_COMMANDS = {"account", "leaderboard", "phases", "quota", "runs", "status", "submit", "tasks"}
SERVER_COMMANDS = {"db", "demo", "env", "grade", "images", "keys", "proxy", "reconcile", "serve", "worker", "config"}


@pytest.fixture
def database_url(tmp_path) -> str:
    """SQLite alone: the store is not what is tested."""
    return f"sqlite:///{tmp_path}/grader.db"


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory) -> Path:
    """A virtualenv holding `grader[client]` installed from this repository's source."""
    where = tmp_path_factory.mktemp("client") / "venv"
    venv.create(where, with_pip=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k == "PIP_CERT"}
    done = subprocess.run(
        [str(where / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", f"{ROOT}[client]"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return where


def _grader(client_venv: Path, cwd: Path, url: str, key: str, *args: str) -> subprocess.CompletedProcess:
    env = {
        "PATH": f"{client_venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(cwd),
        "GRADER_API_URL": url,
        "GRADER_API_KEY": key,
        "GRADER_CACHE_DIR": str(cwd / ".cache"),
    }
    return subprocess.run(
        [str(client_venv / "bin" / "grader"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def _commands(help_text: str) -> set[str]:
    listed = help_text.split("Commands:", 1)[1]
    return {line.split()[0] for line in listed.splitlines() if line.startswith("  ") and line.split()}


def test_the_client_install_has_no_server_part_and_a_teams_commands(client_venv, svc, served, tmp_path):
    python = str(client_venv / "bin" / "python")
    for module in ("docker", "flask", "sqlalchemy", "rq", "redis", "gunicorn", "alembic", "psycopg"):
        probe = subprocess.run([python, "-c", f"import {module}"], capture_output=True, text=True)
        assert probe.returncode != 0 and "ModuleNotFoundError" in probe.stderr, module
    installed = subprocess.run(
        [python, "-c", "import grader.cli as c, grader.client; print(c.CLIENT_ONLY)"], capture_output=True, text=True
    )
    assert installed.stdout.strip() == "True", installed.stderr
    assert sys.prefix != str(client_venv)

    key = new_key(svc, "client-only")
    home = tmp_path / "team"
    home.mkdir()
    top = _grader(client_venv, home, served, key, "--help")
    assert top.returncode == 0, top.stderr
    assert _commands(top.stdout) == TEAM_COMMANDS and not _commands(top.stdout) & SERVER_COMMANDS
    assert "grader[server]" in top.stdout  # says where the rest comes from
    tasks_help = _grader(client_venv, home, served, key, "tasks", "--help")
    assert _commands(tasks_help.stdout) == {"list", "show", "checkout"}
    serve = _grader(client_venv, home, served, key, "serve")
    assert serve.returncode == 2 and "No such command 'serve'" in serve.stderr

    listed = _grader(client_venv, home, served, key, "tasks", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [t["id"] for t in json.loads(listed.stdout)] == sorted(svc.tasks.ids())
    shown = _grader(client_venv, home, served, key, "tasks", "show", "calc-mean-empty")
    assert json.loads(shown.stdout) == svc.task("calc-mean-empty").public_view()
    out = _grader(client_venv, home, served, key, "tasks", "checkout", "calc-mean-empty", "work")
    assert out.returncode == 0, out.stderr
    assert (home / "work" / "calc" / "stats.py").is_file()

    (home / "fix.patch").write_bytes(svc.task("calc-mean-empty").gold_patch_text() or b"")
    sent = _grader(
        client_venv, home, served, key, "submit", "--task", "calc-mean-empty", "--patch", "fix.patch", "--run-id", "c1"
    )
    assert sent.returncode == 0, sent.stderr
    status = _grader(client_venv, home, served, key, "runs", "show", "c1", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["submissions"] == 1
    account = _grader(client_venv, home, served, key, "account")
    assert account.returncode == 0 and "client-only" in account.stdout, account.stdout + account.stderr
    board = _grader(client_venv, home, served, key, "leaderboard")
    assert board.returncode == 0, board.stderr
    refused = _grader(client_venv, home, served, "grk_wrong", "account")
    assert refused.returncode == 2 and "GRADER_API_KEY" in refused.stderr
