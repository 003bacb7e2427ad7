"""A client-only install's `grader` (grader/cli/__init__.py): the server's import names it
knows are exactly those of pyproject.toml's `server` extra, and no module a team's commands
import needs one of them. The real install, driven against a live server:
tests/service/test_client_install.py."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from grader.cli import SERVER_MODULES

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# a client-only install, imitated: the server's distributions cannot be imported
BLOCK = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Block())
"""


def _dist(requirement: str) -> str:
    return re.split(r"[\[=<>;]", requirement)[0].strip().lower().replace("_", "-")


def _import_names(dist: str) -> set[str]:
    found = importlib.metadata.packages_distributions()
    return {m for m, ds in found.items() if any(_dist(d) == dist for d in ds)}


def test_the_server_modules_are_the_server_extras_import_names():
    server = {_dist(r) for r in PROJECT["optional-dependencies"]["server"]}
    names = set().union(*(_import_names(d) for d in server))
    assert names == SERVER_MODULES
    client = {_dist(r) for r in PROJECT["dependencies"]}
    assert not client & server and PROJECT["optional-dependencies"]["client"] == []


def _run(code: str, blocked: set[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", BLOCK.format(blocked=sorted(blocked)) + code], capture_output=True, text=True, cwd=ROOT
    )


def test_without_the_server_part_grader_has_a_teams_commands_and_says_where_the_rest_is():
    done = _run(
        "from grader.cli import main, CLIENT_ONLY\n"
        "print(CLIENT_ONLY, sorted(main.commands), sorted(main.commands['tasks'].commands))\n"
        "import grader.client, grader.cli.remote, grader.cli.tasks\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in " + repr(sorted(SERVER_MODULES)) + "))",
        set(SERVER_MODULES),
    )
    assert done.returncode == 0, done.stderr
    first, loaded = done.stdout.splitlines()
    assert first == (
        "True ['account', 'leaderboard', 'phases', 'quota', 'runs', 'status', 'submit', 'tasks'] "
        "['checkout', 'list', 'show']"
    )
    assert loaded == "[]"


def test_a_missing_module_that_is_not_the_servers_is_a_fault_not_a_client_install():
    done = _run("import grader.cli", {"rich"})
    assert done.returncode != 0 and "No module named 'rich" in done.stderr


def test_with_the_server_part_every_command_is_there():
    from grader.cli import CLIENT_ONLY, main

    assert not CLIENT_ONLY
    assert {"serve", "worker", "grade", "env", "demo"} <= set(main.commands)
    assert {"validate", "build", "import", "list", "show", "checkout"} <= set(main.commands["tasks"].commands)
