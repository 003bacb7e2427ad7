"""Guards on the public surface: __all__, the verdict wire strings, settings precedence."""

import grader
from grader.config import Settings, _from_env, get_settings
from grader.verdict import Verdict


def test_all_names_exist_and_are_sorted():
    assert grader.__all__ == sorted(grader.__all__)
    for name in grader.__all__:
        assert hasattr(grader, name), name


def test_verdict_wire_strings():
    assert [v.value for v in Verdict] == ["PASS", "FAIL", "PATCH FAILED", "TIMED OUT", "ERROR"]
    assert str(Verdict.PATCH_FAILED) == "PATCH FAILED"
    assert Verdict("TIMED OUT") is Verdict.TIMED_OUT
    assert not Verdict.ERROR.charged and Verdict.FAIL.charged


def test_settings_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("GRADER_MAX_PATCH_BYTES", "123")
    monkeypatch.setenv("GRADER_TASKS_DIR", str(tmp_path))
    _from_env.cache_clear()  # the environment is read once per process; this test changes it
    try:
        s = Settings()
        assert s.max_patch_bytes == 123 and s.tasks_dir == tmp_path
        assert Settings(max_patch_bytes=7).max_patch_bytes == 7
        merged = get_settings(tasks_dir=tmp_path / "x")
        assert merged.tasks_dir == tmp_path / "x" and merged.max_patch_bytes == 123
    finally:
        _from_env.cache_clear()


def test_only_the_docker_module_imports_the_sdk():
    import pathlib
    import re

    root = pathlib.Path(grader.__file__).parent
    importers = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if re.search(r"^\s*(import docker|from docker)", p.read_text(), re.M)
    )
    assert importers == [
        "sandbox/docker/containers.py",
        "sandbox/docker/engine.py",
        "sandbox/docker/lanes.py",
        "sandbox/docker/pool.py",
    ]
