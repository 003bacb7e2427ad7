"""When the pool's keeper may fork pytest instead of starting a new interpreter
(grader/sandbox/docker/keeper/zygote.py: why_not). Its end-to-end half, a keeper's runs
forking and exec'ing for real, is tests/docker/test_pool.py."""

from __future__ import annotations

import importlib.machinery
import os
import sys
import types

import pytest

from grader.sandbox.docker.keeper import zygote


@pytest.fixture
def repo(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    monkeypatch.setattr(zygote, "WRITABLE", [str(repo), str(tmp_path / "tmp")])
    monkeypatch.setattr(zygote, "DROP", [str(tmp_path / "box.zip")])
    for name in [n for n in os.environ if n.startswith("PYTHON")]:
        monkeypatch.delenv(name)  # the keeper's start here: this process's, as if with none
    return repo


def env(tmp_path, **more: str) -> dict[str, str]:
    return {"HOME": str(tmp_path / "home"), "PATH": "/usr/bin", **more}


def test_a_plain_repository_is_forked(repo, tmp_path):
    (repo / "calc").mkdir()
    (repo / "calc" / "__init__.py").write_text("")
    (repo / "tests").mkdir()
    assert zygote.why_not(str(repo), env(tmp_path, PYTHONDONTWRITEBYTECODE="1"), os.getuid()) is None


def test_the_keepers_own_start_is_forked(repo, tmp_path, monkeypatch):
    """The keeper started with the shape's PYTHONHASHSEED: a run with the same is forked; one
    without it (a new interpreter would draw a seed) is not."""
    monkeypatch.setenv("PYTHONHASHSEED", "0")
    assert zygote.why_not(str(repo), env(tmp_path, PYTHONHASHSEED="0"), os.getuid()) is None
    reason = zygote.why_not(str(repo), env(tmp_path), os.getuid())
    assert reason is not None and "PYTHONHASHSEED" in reason


@pytest.mark.parametrize("name", ["PYTHONHASHSEED", "PYTHONWARNINGS", "PYTHONSAFEPATH", "PYTHONUTF8"])
def test_what_an_interpreter_reads_at_its_start_is_not_forked(repo, tmp_path, name):
    reason = zygote.why_not(str(repo), env(tmp_path, **{name: "1"}), os.getuid())
    assert reason is not None and name in reason


@pytest.mark.parametrize(
    "where",
    [
        "pytest.py",  # a module named like a loaded package
        "pytest/__init__.py",  # a regular package
        "json/__init__.py",  # the standard library's, loaded too
        f"pytest{importlib.machinery.EXTENSION_SUFFIXES[0]}",  # a compiled one
    ],
)
def test_a_module_named_like_a_loaded_one_on_the_new_path_is_not_forked(repo, tmp_path, where):
    path = repo / where
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    reason = zygote.why_not(str(repo), env(tmp_path), os.getuid())
    assert reason is not None and str(repo) in reason


def test_pythonpath_and_the_user_site_are_searched_too(repo, tmp_path):
    extra = tmp_path / "extra"
    (extra / "pluggy").mkdir(parents=True)
    (extra / "pluggy" / "__init__.py").write_text("")
    import pluggy  # noqa: F401 - loaded here, as in a keeper (pytest imports it)

    assert zygote.why_not(str(repo), env(tmp_path, PYTHONPATH=str(extra)), os.getuid()) is not None
    site = tmp_path / "home" / ".local" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    (site / "pluggy").mkdir(parents=True)
    (site / "pluggy" / "__init__.py").write_text("")
    reason = zygote.why_not(str(repo), env(tmp_path), os.getuid())
    assert reason is not None and "site-packages" in reason


def test_a_directory_without_init_does_not_shadow(repo, tmp_path):
    """A namespace portion loses to a regular package anywhere on the path: not a shadow."""
    (repo / "pytest").mkdir()
    (repo / "pytest" / "conftest.py").write_text("")
    assert zygote.why_not(str(repo), env(tmp_path), os.getuid()) is None


def test_a_loaded_module_from_a_tree_a_run_writes_is_not_forked(repo, tmp_path, monkeypatch):
    """pytest installed from the repository itself (editable): the patch may change it."""
    module = types.ModuleType("mylib")
    module.__file__ = str(repo / "src" / "mylib" / "__init__.py")
    monkeypatch.setitem(sys.modules, "mylib", module)
    reason = zygote.why_not(str(repo), env(tmp_path), os.getuid())
    assert reason is not None and "mylib" in reason


def test_the_supervisors_own_modules_are_left_out(repo, tmp_path, monkeypatch):
    """Modules of the supervisor's archive (DROP) are not the test process's: neither a
    reason to exec, nor kept in a forked one."""
    module = types.ModuleType("grader_box.channel")
    module.__file__ = str(tmp_path / "box.zip" / "grader_box" / "channel.py")
    monkeypatch.setitem(sys.modules, "grader_box.channel", module)
    (repo / "grader_box").mkdir()
    (repo / "grader_box" / "__init__.py").write_text("")
    assert zygote.why_not(str(repo), env(tmp_path), os.getuid()) is None
    assert zygote._own("grader_box.channel", module) and not zygote._own("json", sys.modules["json"])
