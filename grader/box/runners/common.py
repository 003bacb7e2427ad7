"""What the runners share: the record of one run of the check, files read back, and the
environment every Python check process runs with."""

from __future__ import annotations

import base64
import os
from typing import Any

from ..order import Order
from ..tree import Tree, rel_ok

# What a Python runner or the interpreter loads by itself from the repository: restored to
# the base whatever the task says (a patch that was only a conftest.py was once scored as
# resolving SWE-bench tasks). pyproject.toml, setup.cfg and tox.ini stay the submission's
# to edit under the pytest runner, which reads the base commit's configuration from a copy
# made before the patch; a command's pytest reads them from the repository as it is, so
# the command runner protects them too.
PYTHON_PROTECT: dict[str, list[str]] = {
    "names": ["conftest.py", "sitecustomize.py", "usercustomize.py", "pytest.ini", ".pytest.ini"],
    "suffixes": [".pth", ".egg-link"],
    "prefixes": ["__editable__"],
    "dir_suffixes": [".dist-info", ".egg-info"],
    # the repository's test files, protected unless the task turns `protect.tests` off:
    # what pytest collects by default, and every file of a directory named like a test
    # directory that holds such a module (protect.Protection)
    "test_modules": ["test_*.py", "*_test.py", "tests.py"],
    "test_dir_names": ["tests", "test", "testing"],
}
PYTHON_CONFIG_FILES = ["pyproject.toml", "setup.cfg", "tox.ini"]
NOT_TEST_FILES = ("conftest.py", "__init__.py")


def test_file(test_id: str) -> str:
    """The file a pytest-style test id names (`tests/test_x.py::test_y` -> tests/test_x.py)."""
    return test_id.split("::", 1)[0]


def hidden_python_tests(hidden: dict[str, str | None]) -> list[str]:
    """The hidden test modules (not conftest.py or __init__.py) the task places."""
    return sorted(
        p
        for p, d in hidden.items()
        if d is not None and p.endswith(".py") and p.rsplit("/", 1)[-1] not in NOT_TEST_FILES
    )


def words(test_ids: list[str]) -> list[str]:
    """Words of the task's own test names, for canaries that look like them."""
    out: set[str] = set()
    for tid in test_ids:
        name = tid.rsplit("::", 1)[-1].split("[", 1)[0]
        out |= {w.lower() for w in name.split("_") if w and w.lower() != "test"}
    return sorted(out)


def canary_fields(check: dict[str, Any], hidden: list[str], named: set[str], listed: list[str]) -> dict[str, Any]:
    """Where the canaries go (beside the hidden tests), what they are named like and whose
    imports they borrow."""
    homes = [p.rsplit("/", 1)[0] if "/" in p else "" for p in hidden + sorted(named)]
    return {
        "canaries": bool(check.get("canaries", True)),
        "canary_dir": homes[0] if homes else "",
        "canary_words": words(listed),
        "canary_sources": hidden[:3],
    }


def python_env(order: Order) -> dict[str, Any]:
    """What every check command runs with: no plugin auto-loading, and bytecode read only
    from a root-owned cache (never from the repository's __pycache__, never written)."""
    os.makedirs(order.pycache, 0o755, exist_ok=True)
    return {
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTEST_ADDOPTS": "",
        "PYTHONPYCACHEPREFIX": order.pycache,
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def finish_run(result: dict[str, Any], run: dict[str, Any]) -> None:
    result["exit_code"] = run["exit_code"]
    result["timed_out"] = result.get("timed_out", False) or run["timed_out"]
    result["check_seconds"] = run["seconds"]


def read_files(tree: Tree, paths: list[str], limit: int) -> dict[str, Any]:
    out = {}
    for rel in paths:
        data = tree.read(rel, limit) if rel_ok(rel) else None
        out[rel] = base64.b64encode(data).decode() if data is not None else None
    return out
