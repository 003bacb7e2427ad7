"""The shell command of an instance image's install layer (grader/images.py's install_step),
run for real in a temporary directory: what the install put in node_modules/ ends up root's
and read-only, the repository the user's, whatever the install's last word."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from grader.images import install_step

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the install layer runs as root, and so must this")
USER = 4321


def run(repo: Path, install: str) -> None:
    subprocess.run(["sh", "-c", install_step(install, str(repo), USER)], cwd=repo, check=True)


def owner(p: Path) -> int:
    return p.lstat().st_uid


def test_installed_packages_become_roots_and_read_only_and_the_rest_the_users(tmp_path):
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src/a.js").write_text("a")
    # a fixture's node_modules/ checked in with the tests, with a cache of its own
    (repo / "test/fixtures/p/node_modules/dep").mkdir(parents=True)
    (repo / "test/fixtures/p/node_modules/.cache").mkdir()
    install = (
        "mkdir -p node_modules/jest/node_modules/x node_modules/.bin && echo j > node_modules/jest/index.js && "
        "chmod 0666 node_modules/jest/index.js && chown 1:1 node_modules/jest/node_modules/x && "
        "ln -s ../jest/index.js node_modules/.bin/jest; s=$?; exit $s"  # npm-real's shape: ends with exit
    )
    run(repo, install)
    nm = repo / "node_modules"
    for p in (nm, nm / "jest", nm / "jest/index.js", nm / "jest/node_modules/x", nm / ".bin/jest"):
        assert owner(p) == 0, p
    assert stat.S_IMODE((nm / "jest/index.js").stat().st_mode) == 0o644
    assert owner(nm / ".cache") == USER and owner(repo / "test/fixtures/p/node_modules/.cache") == USER
    assert owner(repo / "test/fixtures/p/node_modules/dep") == 0
    assert owner(repo / "src/a.js") == USER and owner(repo) == USER
    assert not (repo / "test/fixtures/p/node_modules/dep/.cache").exists()


def test_a_failing_install_fails_the_layer(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    with pytest.raises(subprocess.CalledProcessError):
        run(repo, "mkdir node_modules; exit 3")


def test_a_repository_without_packages_gets_no_node_modules(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    run(repo, "true")
    assert not (repo / "node_modules").exists() and owner(repo) == USER
