"""The supervisor's own bytecode (grader/box/bytecode.py, grader/grading/ship.py): compiled by
a supervisor, checked by the host, shipped beside the sources and imported from there; a
file that is not the bytecode of the source beside it is passed over for the source, and a
report that is not such bytecode is refused whole. The interpreter here stands in for an
image's (the docker tier runs it in the images: test_pipeline_docker.py)."""

from __future__ import annotations

import base64
import importlib.util
import io
import marshal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader.box import bytecode
from grader.grading import ship

MAGIC = bytecode.MAGIC


def _saved(tmp_path: Path, data: bytes, name: str = "box.zip") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def _compiled(tmp_path: Path) -> str:
    return bytecode.compile_archive(_saved(tmp_path, ship.archive(), "source.zip"))


def _imported(archive: str) -> list[str]:
    """Import the supervisor from `archive` in a fresh isolated interpreter: whether its
    modules came from bytecode, and the module file it ran."""
    code = (
        f"import sys; sys.path.insert(0, {archive!r})\n"
        "import grader_box.supervisor as s, grader_box.bytecode as b\n"
        "print(b.loaded(), s.__file__, s.main.__code__.co_filename)\n"
    )
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.split()


def _with_file(name: str, data: bytes) -> bytes:
    """The source archive with `name` holding `data` beside its sources."""
    with zipfile.ZipFile(io.BytesIO(ship.archive())) as z:
        entries = [(n, z.read(n)) for n in z.namelist()]
    return bytecode.zipped(sorted([*entries, (name, data)]))


def test_a_run_imports_the_supervisor_from_the_bytecode_it_was_given(tmp_path):
    files = ship.accept_bytecode(MAGIC, _compiled(tmp_path))
    assert files is not None and "grader_box/supervisor.pyc" in files and "__main__.pyc" in files
    archive = _saved(tmp_path, ship.with_bytecode(files))
    loaded, file, code_file = _imported(archive)
    assert loaded == "True" and file.endswith("grader_box/supervisor.pyc")
    # its tracebacks name the source, as zipimport would
    assert code_file.endswith("source.zip/grader_box/supervisor.py")
    # and the sources alone: compiled here, as before
    assert _imported(_saved(tmp_path, ship.archive()))[0] == "False"


def test_the_archive_with_bytecode_is_the_same_bytes_for_the_same_bytecode(tmp_path):
    files = ship.accept_bytecode(MAGIC, _compiled(tmp_path))
    assert files is not None
    assert ship.with_bytecode(files) == ship.with_bytecode(dict(reversed(files.items())))


def test_bytecode_of_another_source_is_passed_over_for_the_source(tmp_path):
    """A pyc whose header is right but whose code was compiled from other source (a bytecode
    module that says it was loaded, and more): zipimport hashes the source beside it, and
    the mismatch sends it to the source."""
    forged = b"def loaded():\n    return 'forged'\n"
    header = importlib.util.MAGIC_NUMBER + bytecode.CHECKED_HASH + importlib.util.source_hash(forged)
    data = header + marshal.dumps(compile(forged, "x", "exec"))
    archive = _saved(tmp_path, _with_file("grader_box/bytecode.pyc", data))
    assert _imported(archive)[0] == "False"


def test_bytecode_of_another_interpreter_is_passed_over_for_the_source(tmp_path):
    source = zipfile.ZipFile(io.BytesIO(ship.archive())).read("grader_box/bytecode.py")
    good = bytecode.pyc(source, "grader_box/bytecode.py")
    other = bytes([good[0] ^ 1]) + good[1:]  # another magic number
    assert _imported(_saved(tmp_path, _with_file("grader_box/bytecode.pyc", other)))[0] == "False"
    assert _imported(_saved(tmp_path, _with_file("grader_box/bytecode.pyc", good)))[0] == "True"


def _rezipped(compiled: str, change) -> str:
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(compiled))) as z:
        files = {n: z.read(n) for n in z.namelist()}
    change(files)
    return base64.b64encode(bytecode.zipped(sorted(files.items()))).decode()


def _unchecked(files: dict[str, bytes]) -> None:
    data = files["grader_box/supervisor.pyc"]
    files["grader_box/supervisor.pyc"] = data[:4] + (1).to_bytes(4, "little") + data[8:]


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda f: f.update({"grader_box/extra.pyc": f["grader_box/order.pyc"]}), id="beside-no-source"),
        pytest.param(lambda f: f.update({"sitecustomize.pyc": f["grader_box/order.pyc"]}), id="outside-the-package"),
        pytest.param(lambda f: f.update({"grader_box/order.py": b"x = 1\n"}), id="a-source-file"),
        pytest.param(_unchecked, id="not-checked-against-its-source"),
        pytest.param(lambda f: f.update({"grader_box/order.pyc": b"\0" * 20}), id="of-another-magic"),
        pytest.param(lambda f: f.clear(), id="empty"),
    ],
)
def test_a_report_that_is_not_this_archives_checked_bytecode_is_refused_whole(tmp_path, change):
    compiled = _compiled(tmp_path)
    assert ship.accept_bytecode(MAGIC, compiled) is not None
    assert ship.accept_bytecode(MAGIC, _rezipped(compiled, change)) is None


@pytest.mark.parametrize(
    "magic, compiled",
    [
        ("00000000", None),
        (None, "x"),
        ("zz", "eA=="),
        ("0d0d0a", "eA=="),  # not four bytes
        (MAGIC, "not base64!"),
        (MAGIC, base64.b64encode(b"not a zip").decode()),
        (MAGIC, "A" * (ship.BYTECODE_BYTES + 4)),
    ],
)
def test_a_malformed_report_of_bytecode_is_refused(magic, compiled):
    assert ship.accept_bytecode(magic, compiled) is None


def test_bytecode_reported_under_another_magic_than_its_files_is_refused(tmp_path):
    other = "%08x" % (int(MAGIC, 16) ^ 0x0100)
    assert ship.accept_bytecode(other, _compiled(tmp_path)) is None


def test_archives_ship_the_bytecode_to_the_images_known_to_run_its_interpreter(tmp_path):
    archives = ship.Archives()
    assert archives.held() == [] and archives.for_image("img-a") == ship.archive()
    # a run on img-a compiled it; img-b's run only said which interpreter it is
    archives.learn("img-a", {"bytecode": {"magic": MAGIC, "loaded": False}, "compiled": _compiled(tmp_path)})
    assert archives.held() == [MAGIC] and archives.knows("img-a") and not archives.knows("img-b")
    assert archives.for_image("img-b") == ship.archive()
    archives.learn("img-b", {"bytecode": {"magic": MAGIC, "loaded": False}})
    assert archives.for_image("img-a") == archives.for_image("img-b") != ship.archive()
    assert _imported(_saved(tmp_path, archives.for_image("img-b")))[0] == "True"
    # an image of another interpreter gets the sources
    archives.learn("img-c", {"bytecode": {"magic": "0a0d0d0a", "loaded": False}})
    assert archives.knows("img-c") and archives.for_image("img-c") == ship.archive()


def test_an_image_of_a_known_environment_gets_the_bytecode_before_its_first_run(tmp_path):
    """A task's first grade gets the archive its later grades get (its container's or
    keeper's shape): the interpreter is its environment image's. A task whose image runs
    another keeps its own, and does not change the environment's."""
    archives = ship.Archives()
    archives.learn("img-a", {"bytecode": {"magic": MAGIC, "loaded": False}, "compiled": _compiled(tmp_path)}, "env-1")
    with_bytecode = archives.for_image("img-a")
    assert with_bytecode != ship.archive()
    assert archives.for_image("img-b", "env-1") == with_bytecode and not archives.knows("img-b")
    assert archives.for_image("img-b") == archives.for_image("img-b", "env-2") == ship.archive()
    # img-c, of env-1, reports another interpreter: its own answer wins, for it alone
    archives.learn("img-c", {"bytecode": {"magic": "0a0d0d0a", "loaded": False}}, "env-1")
    assert archives.for_image("img-c", "env-1") == ship.archive()
    assert archives.for_image("img-d", "env-1") == with_bytecode


def test_archives_remember_a_bounded_number_of_images(tmp_path, monkeypatch):
    """The oldest images are forgotten past IMAGES_KEPT; an image reported again keeps its
    place; an environment keeps the interpreter its first reported image ran."""
    monkeypatch.setattr(ship, "IMAGES_KEPT", 3)
    archives = ship.Archives()
    archives.learn("img-0", {"bytecode": {"magic": MAGIC}, "compiled": _compiled(tmp_path)}, "env-0")
    for i in range(1, 5):
        archives.learn(f"img-{i}", {"bytecode": {"magic": MAGIC}}, f"env-{i}")
    assert [archives.knows(f"img-{i}") for i in range(5)] == [False, False, True, True, True]
    archives.learn("img-4", {"bytecode": {"magic": "0a0d0d0a"}}, "env-4")
    assert [archives.knows(f"img-{i}") for i in range(5)] == [False, False, True, True, True]
    assert archives.for_image("img-new", "env-4") != ship.archive()  # still the first report's
    assert archives.for_image("img-4") == ship.archive()  # its own later report wins for it


def test_archives_keep_nothing_of_a_refused_report(tmp_path):
    archives = ship.Archives()
    archives.learn("img-a", {"bytecode": {"magic": MAGIC}, "compiled": "not base64!"})
    assert archives.held() == [] and not archives.knows("img-a")
    archives.learn("img-a", {"bytecode": "x"})
    archives.learn("img-a", {})
    assert not archives.knows("img-a")


def _pyc_of(code_source: bytes, hashed: bytes) -> bytes:
    """A pyc of `code_source`'s code whose header claims it compiled `hashed`."""
    header = importlib.util.MAGIC_NUMBER + bytecode.CHECKED_HASH + importlib.util.source_hash(hashed)
    return header + marshal.dumps(compile(code_source, "plugin.py", "exec"))


def _load_placed(tmp_path: Path, monkeypatch, pyc: bytes | None) -> tuple[bool, str]:
    """bytecode.place's pyc for a plugin whose source says "source", then a test process's
    import of it (PYTHONPYCACHEPREFIX as the check sets it): what it ran."""
    source = b"print('source')\n"
    plugins, cache = tmp_path / "plugins", tmp_path / "pycache"
    plugins.mkdir(parents=True)
    (plugins / "grader_report_x.py").write_bytes(source)

    def resource(rel: str) -> bytes:
        assert rel == "reporters/pytest_plugin.pyc"
        if pyc is None:
            raise FileNotFoundError(rel)
        return pyc

    monkeypatch.setattr(bytecode, "resource", resource)
    placed = bytecode.place("reporters/pytest_plugin.py", str(plugins / "grader_report_x.py"), str(cache))
    env = {"PYTHONPYCACHEPREFIX": str(cache), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(plugins)}
    out = subprocess.run([sys.executable, "-c", "import grader_report_x"], env=env, capture_output=True, text=True)
    return placed, out.stdout.strip()


def test_a_placed_plugin_is_loaded_from_its_bytecode(tmp_path, monkeypatch):
    """The placed file is where the test process looks: a pyc claiming the plugin's source
    (here running other code, to show that it is the one loaded) is what runs."""
    source = b"print('source')\n"
    assert _load_placed(tmp_path, monkeypatch, _pyc_of(b"print('bytecode')\n", source)) == (True, "bytecode")


def test_a_placed_pyc_of_another_source_is_passed_over(tmp_path, monkeypatch):
    placed = _load_placed(tmp_path, monkeypatch, _pyc_of(b"print('bytecode')\n", b"print('other')\n"))
    assert placed == (True, "source")


def test_nothing_is_placed_without_bytecode_of_this_interpreter(tmp_path, monkeypatch):
    assert _load_placed(tmp_path, monkeypatch, None) == (False, "source")
    other = _pyc_of(b"print('bytecode')\n", b"print('source')\n")
    other = bytes([other[0] ^ 1]) + other[1:]
    assert _load_placed(tmp_path / "b", monkeypatch, other) == (False, "source")


def test_a_cache_that_cannot_be_written_only_costs_the_compile(tmp_path, monkeypatch):
    pyc = _pyc_of(b"print('bytecode')\n", b"print('source')\n")
    monkeypatch.setattr(bytecode, "resource", lambda rel: pyc)
    (tmp_path / "file").write_text("")
    assert not bytecode.place("reporters/pytest_plugin.py", str(tmp_path / "p.py"), str(tmp_path / "file"))


# --- the report plugin's bytecode where pytest reads it ---------------------------------------------

# What the plugin's code says when it runs: which text it was compiled from, and the file its
# functions' code names (pytest's rewriter does not rename code it reads from its own pyc).
SAYS = "import sys\nsys.stderr.write('PLUGIN {} ' + (lambda: 0).__code__.co_filename + '\\n')\n"


def _pytest_with_placed(tmp_path: Path, monkeypatch, pyc: bytes | None, *, touch: bool = False) -> tuple[bool, str]:
    """bytecode.place_for_pytest's file for a plugin whose source says "source", then a
    pytest run that loads it with -p (PYTHONPYCACHEPREFIX as the check sets it; pytest's own
    trace on): what the plugin said, and whether pytest took its cached pyc."""
    source = SAYS.format("source").encode()
    plugins, cache, tests = tmp_path / "plugins", tmp_path / "pycache", tmp_path / "tests"
    for d in (plugins, tests):
        d.mkdir(parents=True)
    plugin = plugins / "grader_report_x.py"
    plugin.write_bytes(source)
    (tests / "test_one.py").write_text("def test_one():\n    pass\n")
    monkeypatch.setattr(bytecode, "resource", lambda rel: pyc if pyc is not None else b"")
    placed = bytecode.place_for_pytest("reporters/pytest_plugin.py", str(plugin), str(cache))
    if touch:  # the plugin's file written again after its bytecode was placed (another size)
        plugin.write_bytes(source + b"\n")
    env = {
        "PYTHONPYCACHEPREFIX": str(cache),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": str(plugins),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTEST_DEBUG": "1",
    }
    argv = [sys.executable, "-m", "pytest", "-p", "grader_report_x", "-p", "no:cacheprovider", "-q", str(tests)]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=tmp_path)
    said = [line for line in out.stderr.splitlines() if line.startswith("PLUGIN ")]
    cached = f"found cached rewritten pyc for {plugin}" in out.stderr
    assert out.returncode == 0 and len(said) == 1, out.stderr[-2000:]
    return placed, said[0] + (" cached" if cached else "")


def test_pytest_loads_the_placed_plugin_from_its_own_pyc_naming_the_plugins_file(tmp_path, monkeypatch):
    """A pyc claiming the plugin's source (here running other code, to show it is the one
    loaded): pytest takes it instead of rewriting the source, and its code names the file."""
    source = SAYS.format("source").encode()
    said = _pytest_with_placed(tmp_path, monkeypatch, _pyc_of(SAYS.format("bytecode").encode(), source))
    assert said == (True, f"PLUGIN bytecode {tmp_path / 'plugins' / 'grader_report_x.py'} cached")


def test_no_pytest_pyc_is_made_from_bytecode_of_another_source(tmp_path, monkeypatch):
    other = _pyc_of(SAYS.format("bytecode").encode(), b"print('other')\n")
    placed, said = _pytest_with_placed(tmp_path, monkeypatch, other)
    assert not placed and said.startswith("PLUGIN source ") and not said.endswith("cached")
    unchecked = _pyc_of(SAYS.format("bytecode").encode(), SAYS.format("source").encode())
    unchecked = unchecked[:4] + bytes(4) + unchecked[8:]  # right hash, but not a checked-hash pyc
    placed, said = _pytest_with_placed(tmp_path / "b", monkeypatch, unchecked)
    assert not placed and said.startswith("PLUGIN source ")


def test_a_plugin_file_changed_after_its_pyc_was_placed_is_rewritten_from_its_source(tmp_path, monkeypatch):
    """pytest checks its pyc against the source's size and mtime: a plugin file that is not
    the one whose bytecode was placed runs as written."""
    source = SAYS.format("source").encode()
    pyc = _pyc_of(SAYS.format("bytecode").encode(), source)
    placed, said = _pytest_with_placed(tmp_path, monkeypatch, pyc, touch=True)
    assert placed and said.startswith("PLUGIN source ") and not said.endswith("cached")


def test_without_pytest_beside_the_interpreter_nothing_is_placed(tmp_path, monkeypatch):
    (tmp_path / "p.py").write_bytes(b"x = 1\n")
    monkeypatch.setattr(bytecode, "resource", lambda rel: _pyc_of(b"x = 1\n", b"x = 1\n"))
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert not bytecode.place_for_pytest("reporters/pytest_plugin.py", str(tmp_path / "p.py"), str(tmp_path / "c"))
    assert not (tmp_path / "c").exists()


def test_for_a_pytest_that_checks_mtime_and_size_the_header_holds_them(tmp_path, monkeypatch):
    """pytest before 9 reads its pycs by the source's mtime and size (flags 0): the file is
    written so, under that version's name (the docker tier runs pytest 8.3.3 on it)."""
    site = tmp_path / "site"
    (site / "_pytest" / "assertion").mkdir(parents=True)
    (site / "_pytest" / "assertion" / "rewrite.py").write_text("def _read_pyc(source, pyc): ...  # mtime and size\n")
    (site / "pytest-8.3.3.dist-info").mkdir()
    source = b"x = 1\n"
    (tmp_path / "p.py").write_bytes(source)
    monkeypatch.setattr(bytecode, "resource", lambda rel: _pyc_of(b"x = 2\n", source))
    monkeypatch.setattr(sys, "path", [str(site)])
    assert bytecode.place_for_pytest("reporters/pytest_plugin.py", str(tmp_path / "p.py"), str(tmp_path / "c"))
    (placed,) = (tmp_path / "c").rglob("*.pyc")
    assert placed.name == f"p.{sys.implementation.cache_tag}-pytest-8.3.3.pyc"
    st = (tmp_path / "p.py").stat()
    data = placed.read_bytes()
    assert data[:16] == importlib.util.MAGIC_NUMBER + bytes(4) + int(st.st_mtime).to_bytes(4, "little") + (6).to_bytes(
        4, "little"
    )
    code = marshal.loads(data[16:])
    assert code.co_filename == str(tmp_path / "p.py")
    namespace: dict[str, object] = {}
    exec(code, namespace)
    assert namespace["x"] == 2  # the archive's code, as given
