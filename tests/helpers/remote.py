"""A remote team's machine, for the CLI's remote commands: the `grader` CLI run in this
process (`cli`), pointed at a service by its settings (`use_service`). The `team_dir`
fixture (tests/conftest.py) makes the machine's empty working directory."""

from __future__ import annotations

from click.testing import CliRunner

from grader.cli import main
from grader.config import _from_env


def use_service(monkeypatch, url: str, key: str) -> None:
    monkeypatch.setenv("GRADER_API_URL", url)
    monkeypatch.setenv("GRADER_API_KEY", key)
    _from_env.cache_clear()


def cli(*args, input=None):
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)
