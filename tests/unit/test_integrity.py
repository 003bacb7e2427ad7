"""The integrity rules without Docker: the supervisor's file tree and protection rules,
the report channel's signatures, the canaries, the tampering evidence and the audit.
(tests/test_attacks.py proves them end to end, in containers, under runc and gVisor.)"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader.audit import audit_patch
from grader.box import canaries, channel, protect
from grader.box import tree as boxtree
from grader.box.order import CheckSpec, ProtectSpec
from grader.box.runners.common import PYTHON_PROTECT
from grader.checks.integrity import read_test_report
from grader.grading.report import TestReport

RUNNER_FILES = PYTHON_PROTECT["names"]
RUNNER_SUFFIXES = PYTHON_PROTECT["suffixes"]
RUNNER_PREFIXES = PYTHON_PROTECT["prefixes"]
METADATA_DIR_SUFFIXES = PYTHON_PROTECT["dir_suffixes"]
TEST_MODULES = PYTHON_PROTECT["test_modules"]
TEST_DIR_NAMES = PYTHON_PROTECT["test_dir_names"]


def read_pytest_report(sup):
    """The host's reading of a supervisor's report (a dict, as it travels)."""
    return read_test_report(
        TestReport.parse(sup.get("report")),
        exit_code=sup.get("exit_code"),
        canaries=sup.get("canaries"),
        tampered_files=sup.get("tampered_files") or [],
    )


UID, GID = os.getuid(), os.getgid()


def spec(**over):
    base = {
        "files": ["tests/test_mean.py"],
        "names": RUNNER_FILES,
        "suffixes": RUNNER_SUFFIXES,
        "prefixes": RUNNER_PREFIXES,
        "dir_suffixes": METADATA_DIR_SUFFIXES,
        "tests": True,
        "test_modules": TEST_MODULES,
        "test_dir_names": TEST_DIR_NAMES,
        "globs": [],
    }
    return ProtectSpec(**{**base, **over})


def make_tree(root: Path, files: dict[str, str]) -> boxtree.Tree:
    for rel, content in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(content)
    return boxtree.Tree(str(root), UID, GID)


# --- what is protected --------------------------------------------------------------------


def test_protection_covers_tests_runner_files_and_metadata_but_not_library_test_helpers(tmp_path):
    base = make_tree(
        tmp_path,
        {
            "calc/__init__.py": "",
            "tests/test_basic.py": "",
            "tests/helpers.py": "",
            "pkg/core/tests/test_x.py": "",
            "django/test/testcases.py": "",
            "numpy/testing/utils.py": "",
            "numpy/testing/tests/test_utils.py": "",
        },
    ).walk()
    p = protect.Protection(spec(), base)
    protected = {
        "tests/test_mean.py": "hidden or listed test",
        "tests/helpers.py": "in a test directory",
        "tests/__init__.py": "in a test directory",
        "pkg/core/tests/data/fixture.json": "in a test directory",
        "calc/test_new.py": "test module",
        "conftest.py": "loaded by the runner or the interpreter",
        "calc/sitecustomize.py": "loaded by the runner or the interpreter",
        "calc/evil.pth": "loaded by the runner or the interpreter",
        "evil-1.0.dist-info/entry_points.txt": "packaging metadata",
        "calc.egg-info/entry_points.txt": "packaging metadata",
        "numpy/testing/tests/test_utils.py": "test module",
    }
    for rel, why in protected.items():
        assert p.why(rel) == why, rel
    for rel in (
        "calc/__init__.py",
        "django/test/testcases.py",
        "numpy/testing/utils.py",
        "setup.cfg",
        "pyproject.toml",
        "calc/testing.py",
    ):
        assert p.why(rel) is None, rel


def test_protection_opt_out_keeps_the_runner_files_and_the_listed_tests(tmp_path):
    base = make_tree(tmp_path, {"tests/test_basic.py": ""}).walk()
    p = protect.Protection(spec(tests=False, globs=["data/*.txt"]), base)
    assert p.why("tests/test_basic.py") is None
    assert p.why("tests/test_mean.py") == "hidden or listed test"
    assert p.why("tests/conftest.py") is not None
    assert p.why("data/sub/input.txt") == "protected by the task"


# --- the tree, never following a link --------------------------------------------------------


def test_changes_come_from_the_tree_ignored_files_included(tmp_path):
    tree = make_tree(tmp_path, {"a.py": "1", ".gitignore": "", "tests/test_a.py": "t"})
    before = tree.walk()
    (tmp_path / "a.py").write_text("2")
    os.utime(tmp_path / "a.py", ns=(1, 1))
    (tmp_path / "ignored.egg-info").mkdir()
    (tmp_path / "ignored.egg-info" / "entry_points.txt").write_text("[pytest11]\nx = evil\n")
    (tmp_path / "tests").rename(tmp_path / "moved")
    after = tree.walk()
    changed = protect.changes(before, after)
    assert {"a.py", "ignored.egg-info/entry_points.txt", "tests/test_a.py", "moved/test_a.py"} <= set(changed)
    stray = protect.unnamed_changes(changed, before, after, touched={"a.py"})
    assert set(stray) == {"ignored.egg-info/entry_points.txt", "tests/test_a.py", "moved/test_a.py"}


def test_writing_through_a_symlinked_parent_replaces_the_link_and_spares_the_target(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep")
    repo = tmp_path / "repo"
    repo.mkdir()
    os.symlink(outside, repo / "tests")
    tree = boxtree.Tree(str(repo), UID, GID)
    assert tree.read("tests/precious.txt") is None  # never read through the link
    tree.write("tests/precious.txt", b"restored", mode=0o644, owner=(UID, GID))
    assert (outside / "precious.txt").read_text() == "keep"
    assert not (repo / "tests").is_symlink() and (repo / "tests" / "precious.txt").read_bytes() == b"restored"
    os.symlink(outside, repo / "link")
    tree.remove("link/precious.txt")
    tree.remove("link")
    assert (outside / "precious.txt").read_text() == "keep" and not os.path.lexists(repo / "link")


def test_a_file_where_a_directory_was_and_a_fifo_are_handled(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "tests").write_text("not a directory")
    os.mkfifo(repo / "pipe")
    tree = boxtree.Tree(str(repo), UID, GID)
    assert tree.read("tests/test_mean.py") is None and tree.lstat("tests/test_mean.py") is None
    assert tree.read("pipe") is None  # opening a FIFO must not hang
    tree.write("tests/test_mean.py", b"x", mode=0o444, owner=(UID, GID))
    assert (repo / "tests" / "test_mean.py").read_bytes() == b"x"
    assert tree.walk()["pipe"][0] == "o"


def test_a_tree_too_deep_is_the_submissions_problem_not_a_crash(tmp_path):
    deep = tmp_path / "repo" / "/".join(["d"] * (boxtree.MAX_DEPTH + 2))
    deep.mkdir(parents=True)
    with pytest.raises(boxtree.TreeError):
        boxtree.Tree(str(tmp_path / "repo"), UID, GID).walk()


def test_restore_protected_puts_back_removes_and_drops_bytecode(tmp_path):
    tree = make_tree(tmp_path, {"calc/__init__.py": "x", "tests/test_basic.py": "base test", "conftest.py": "ok"})
    before = tree.walk()
    protection = protect.Protection(spec(), before)
    stage_dir = tmp_path.parent / f"{tmp_path.name}-stage"
    orig, protect.STAGE_DIR = protect.STAGE_DIR, str(stage_dir)
    try:
        touched = ["tests/test_basic.py", "conftest.py", "calc/__init__.py", "calc/fast.pyc"]
        staged = protect.stage(tree, before, protection, touched)
    finally:
        protect.STAGE_DIR = orig
    (tmp_path / "tests" / "test_basic.py").write_text("def test_one(): pass\n")
    (tmp_path / "conftest.py").unlink()
    (tmp_path / "calc" / "__pycache__").mkdir()
    (tmp_path / "calc" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"evil")
    (tmp_path / "calc" / "fast.pyc").write_bytes(b"evil")
    (tmp_path / "calc" / "__init__.py").write_text("fixed")
    after = tree.walk()
    bytecode, restored = protect.restore_protected(
        (UID, GID), tree, before, after, protect.changes(before, after), protection, staged
    )
    assert sorted(bytecode) == ["calc/__pycache__/__init__.cpython-311.pyc", "calc/fast.pyc"]
    assert sorted(restored) == ["conftest.py", "tests/test_basic.py"]
    assert (tmp_path / "tests" / "test_basic.py").read_text() == "base test"
    assert (tmp_path / "conftest.py").read_text() == "ok"
    assert (tmp_path / "calc" / "__init__.py").read_text() == "fixed"


def test_only_the_protected_files_the_patch_names_are_staged_and_an_unstaged_one_is_never_kept(tmp_path):
    files = {"calc/__init__.py": "x", "tests/test_basic.py": "base test", "conftest.py": "ok"}
    files.update({f"node_modules/dep{i}/index.js": f"module.exports = {i};" for i in range(50)})
    tree = make_tree(tmp_path, files)
    before = tree.walk()
    protection = protect.Protection(spec(globs=["node_modules/**"]), before)
    assert protection.why("node_modules/dep7/index.js")
    stage_dir = tmp_path.parent / f"{tmp_path.name}-stage"
    orig, protect.STAGE_DIR = protect.STAGE_DIR, str(stage_dir)
    try:
        staged = protect.stage(tree, before, protection, ["conftest.py", "calc/__init__.py", "new.py"])
    finally:
        protect.STAGE_DIR = orig
    assert set(staged) == {"conftest.py"}  # named and protected; not the 50 files of node_modules
    # a protected file changed without a staged copy (which the apply chain cannot do:
    # unnamed_changes refuses it first) goes, it is never kept with the patch's bytes
    (tmp_path / "node_modules" / "dep7" / "index.js").write_text("module.exports = 'evil';")
    (tmp_path / "conftest.py").write_text("evil")
    after = tree.walk()
    _, restored = protect.restore_protected(
        (UID, GID), tree, before, after, protect.changes(before, after), protection, staged
    )
    assert sorted(restored) == ["conftest.py", "node_modules/dep7/index.js"]
    assert (tmp_path / "conftest.py").read_text() == "ok"
    assert not (tmp_path / "node_modules" / "dep7" / "index.js").exists()


# --- the report channel -------------------------------------------------------------------


def signed(records: list[dict], key: bytes, session: str = "s1") -> bytes:
    out, chain = b"", b""
    for rec in records:
        line = json.dumps({**rec, "s": session}, sort_keys=True).encode()
        mac = hmac.new(key, chain + line, hashlib.sha256).hexdigest().encode()
        chain = mac
        out += line + b"\t" + mac + b"\n"
    return out


RECORDS = [{"t": "test", "id": "t.py::a", "when": w, "outcome": "passed"} for w in ("setup", "call", "teardown")] + [
    {"t": "test", "id": "t.py::b", "when": "setup", "outcome": "passed"},
    {"t": "test", "id": "t.py::b", "when": "call", "outcome": "failed"},
    {"t": "test", "id": "t.py::c", "when": "setup", "outcome": "failed"},
    {"t": "test", "id": "t.py::d", "when": "setup", "outcome": "skipped"},
    {"t": "end", "exit": 1, "collected": 4},
]


def test_signed_records_fold_into_outcomes():
    key = os.urandom(32)
    rep = channel.read_report(signed(RECORDS, key), key)
    assert rep["forged"] is None and rep["end"] == {"t": "end", "exit": 1, "collected": 4, "s": "s1"}
    assert rep["outcomes"] == {"t.py::a": "passed", "t.py::b": "failed", "t.py::c": "error", "t.py::d": "skipped"}


def test_each_pytest_session_of_a_command_has_its_own_chain_and_the_worst_outcome_stands():
    key = os.urandom(32)
    second = [
        {"t": "test", "id": "t.py::a", "when": "call", "outcome": "failed"},
        {"t": "integrity", "what": "_pytest.runner.call_and_report was replaced while the tests ran"},
        {"t": "end", "exit": 1, "collected": 1},
    ]
    rep = channel.read_report(signed(RECORDS, key, "one") + signed(second, key, "two"), key)
    assert rep["forged"] is None and rep["sessions"] == 2 and rep["ends"] == 2
    assert rep["outcomes"]["t.py::a"] == "failed"
    assert rep["integrity"] == ["_pytest.runner.call_and_report was replaced while the tests ran"]


@pytest.mark.parametrize("forge", ["appended", "other key", "edited", "unsigned", "repeated", "after the end"])
def test_lines_without_the_runs_signature_are_caught(forge):
    """Also what the plugin itself would sign if code called it: a phase told twice, or
    a record after pytest's last word."""
    key = os.urandom(32)
    data = signed(RECORDS, key)
    if forge == "repeated":
        data = signed(
            RECORDS[:-1] + [{"t": "test", "id": "t.py::b", "when": "call", "outcome": "passed"}, RECORDS[-1]], key
        )
    elif forge == "after the end":
        data = signed(RECORDS + [{"t": "test", "id": "t.py::e", "when": "call", "outcome": "passed"}], key)
    elif forge == "appended":
        data += signed([{"t": "test", "id": "t.py::b", "when": "call", "outcome": "passed"}], key)
    elif forge == "other key":
        data = signed(RECORDS, os.urandom(32))
    elif forge == "edited":
        data = data.replace(b'"outcome": "failed"', b'"outcome": "passed"', 1)
    else:
        data = b'{"t": "end", "exit": 0, "collected": 4, "s": "s1"}\n'
    assert channel.read_report(data, key)["forged"]


def run_plugin(tmp_path, test_source: str, settings: dict | None = None, extra: str = "") -> tuple[int, dict]:
    """The real plugin in a real pytest process, its secret in a file it gets only as a
    descriptor, its report on an inherited pipe: what the supervisor reads of it."""
    (tmp_path / "test_x.py").write_text(test_source)
    if extra:
        (tmp_path / "helper.py").write_text(extra)
    plugin_dir = tmp_path / "plugin"
    plugin_dir.mkdir(exist_ok=True)
    (plugin_dir / "grader_report_t.py").write_bytes(
        Path(channel.__file__).parent.joinpath("reporters", "pytest_plugin.py").read_bytes()
    )
    key = os.urandom(32)
    secret = tmp_path / "secret"
    secret.write_bytes(key + json.dumps({"repo": str(tmp_path), "tests": ["test_x.py"], **(settings or {})}).encode())
    kfd = os.open(secret, os.O_RDONLY)
    rr, rw = os.pipe()
    env = {
        **os.environ,
        "PYTHONPATH": f"{plugin_dir}:{tmp_path}",
        "GRADER_REPORT_FD": str(rw),
        "GRADER_KEY_FD": str(kfd),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "grader_report_t", "-p", "no:cacheprovider", "test_x.py"],
        cwd=tmp_path,
        env=env,
        pass_fds=(rw, kfd),
        stdout=subprocess.DEVNULL,
    )
    os.close(rw)
    os.close(kfd)
    data = b""
    while chunk := os.read(rr, 65536):
        data += chunk
    return proc.wait(), channel.read_report(data, key)


# the submission's code: threads that read frames (each line a finding of its own, said
# from that thread) while the main thread runs the tests, the interpreter switching
# threads every microsecond so that the plugin's records are made at the same moments
_THREADS_THAT_READ_FRAMES = (
    "import sys, threading, time\n"
    "sys.setswitchinterval(1e-6)\n"
    "def reader(k):\n"
    "    for _ in range(200):\n"
    + "".join(f"        sys._current_frames()  # {n}\n" for n in range(30))
    + "        time.sleep(0.0002)\n"
    "for k in range(4):\n"
    "    threading.Thread(target=reader, args=(k,), daemon=True).start()\n"
)


def test_records_made_by_several_threads_at_once_stay_one_signed_chain(tmp_path):
    """Honest: the submission's threads read frames while the tests run (a sampling
    profiler's habit). Their findings are said from their threads, at the moments the main
    thread says its tests' records: every record arrives whole, in one chain, and no test
    is lost."""
    source = "import helper\nimport time\n\n" + "".join(
        f"def test_{n}():\n    time.sleep(0.0005)\n\n" for n in range(150)
    )
    code, rep = run_plugin(tmp_path, source, settings={"changed": ["helper.py"]}, extra=_THREADS_THAT_READ_FRAMES)
    assert rep["forged"] is None, rep["forged"]
    assert code == 0 and rep["end"]["exit"] == 0 and rep["integrity"] == [], rep["integrity"]
    assert len(rep["outcomes"]) == 150 and set(rep["outcomes"].values()) == {"passed"}
    assert any("a frame read at helper.py" in f for f in rep["findings"]), rep["findings"]


def test_a_forked_child_says_nothing_in_its_parents_session(tmp_path):
    """Honest: a test forks a worker (multiprocessing's habit on Linux) whose code, the
    submission's, reads a frame. The child inherits the plugin and its channel; a record
    from it would be a second link after the parent's last one. It says nothing; the
    parent's chain is whole, and the parent's own reads are still findings."""
    helper = "import sys\n\ndef read():\n    return sys._getframe().f_lineno\n"
    source = (
        "import os\n\nimport helper\n\n"
        "def test_forks():\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        helper.read()\n"
        "        os._exit(0)\n"
        "    assert os.waitpid(pid, 0)[1] == 0\n\n"
        "def test_after():\n    assert helper.read() > 0\n"
    )
    code, rep = run_plugin(tmp_path, source, settings={"changed": ["helper.py"]}, extra=helper)
    assert rep["forged"] is None, rep["forged"]
    assert code == 0 and rep["outcomes"] == {"test_x.py::test_forks": "passed", "test_x.py::test_after": "passed"}
    assert any("a frame read at helper.py" in f for f in rep["findings"]), rep["findings"]


def test_the_plugin_signs_what_the_supervisor_checks(tmp_path):
    code, rep = run_plugin(tmp_path, "def test_ok():\n    pass\n\ndef test_bad():\n    assert 0\n")
    assert code == 1
    assert rep["forged"] is None and rep["end"]["exit"] == 1 and rep["integrity"] == []
    assert rep["outcomes"] == {"test_x.py::test_ok": "passed", "test_x.py::test_bad": "failed"}


def test_a_long_run_reaches_the_supervisor_whole_and_in_order(tmp_path):
    """Passes are held and sent together: every record of a run longer than the hold,
    passes, skips and failures mixed, still arrives, signed in one chain."""
    source = (
        "import pytest\n\n"
        "@pytest.mark.parametrize('n', range(60))\n"
        "def test_many(n):\n    assert n % 17 != 5\n\n"
        "@pytest.mark.parametrize('n', range(7))\n"
        "def test_some_skip(n):\n    if n % 3 == 0:\n        pytest.skip('no')\n"
    )
    code, rep = run_plugin(tmp_path, source)
    assert code == 1 and rep["forged"] is None and rep["end"]["exit"] == 1
    outcomes = rep["outcomes"]
    assert len(outcomes) == 67
    assert {t for t, o in outcomes.items() if o == "failed"} == {f"test_x.py::test_many[{n}]" for n in (5, 22, 39, 56)}
    assert sum(o == "skipped" for o in outcomes.values()) == 3


# Code in the test process can reach the plugin's closures (no audited event guards a
# closure cell): what emit holds back must never be a record that counts against the run.
_REACH_THE_HELD_RECORDS = """
import sys

def held_lists():
    for name, mod in list(sys.modules.items()):
        hook = getattr(mod, "pytest_runtest_logreport", None)
        if not name.startswith("grader_report_") or hook is None:
            continue
        for var, cell in zip(hook.__code__.co_freevars, hook.__closure__):
            if var == "emit":
                emit = cell.cell_contents
                for inner, c in zip(emit.__code__.co_freevars, emit.__closure__):
                    if isinstance(c.cell_contents, list) and inner != "chain":
                        yield c.cell_contents
"""


@pytest.mark.parametrize(
    "after",
    [
        # the held records emptied, then the run goes on to its end
        "    for held in helper.held_lists():\n        held.clear()\n",
        # the held records emptied and the process gone before its end
        "    for held in helper.held_lists():\n        held.clear()\n    import os\n    os._exit(0)\n",
        # the process gone with records held
        "    import os\n    os._exit(0)\n",
    ],
    ids=["emptied", "emptied-then-exit", "exit"],
)
def test_a_failure_is_never_held_where_the_test_process_can_drop_it(tmp_path, after):
    source = (
        "import helper\n\n"
        "def test_a_pass():\n    pass\n\n"
        "def test_fails():\n    assert 0\n\n"
        "def test_b_pass():\n    pass\n\n"
        f"def test_then():\n{after}"
    )
    _, rep = run_plugin(tmp_path, source, extra=_REACH_THE_HELD_RECORDS)
    assert rep["outcomes"]["test_x.py::test_fails"] == "failed"  # it left the process as it was made
    if "_exit" in after:
        assert rep["forged"] is None and rep["end"] is None  # a session with no end: the run cannot pass
    else:
        assert rep["forged"]  # records dropped from the chain's middle: the next one's signature shows it


@pytest.mark.parametrize(
    "how, said",
    [
        ("import _pytest.runner as r\nr.call_and_report = lambda *a, **k: None\n", "call_and_report was replaced"),
        (
            "import _pytest.reports as r\no = r.TestReport.from_item_and_call\n"
            "setattr(r.TestReport, 'from_item_' + 'and_call', classmethod(lambda c, i, k: o(i, k)))\n",
            "_pytest.reports.TestReport.from_item_and_call was replaced",
        ),
        ("import gc\nobjs = gc.get_objects()\n", "gc.get_objects called from helper.py"),
        # the plugin reads code identity through gc.get_referents in its own name
        ("import gc, pytest\nheld = gc.get_referents(pytest.raises)\n", "gc.get_referents called from helper.py"),
        ("import sys\nsys.settrace(lambda *a: None)\nsys.settrace(None)\n", "sys.settrace called from helper.py"),
        (
            "import marshal\nexec(marshal.loads(marshal.dumps(compile('x = 1', '<m>', 'exec'))))\n",
            "code loaded from marshal data at helper.py",
        ),
        ("import _pytest\nexec(compile('y = 2', _pytest.__file__, 'exec'))\n", "code compiled under the name"),
    ],
)
def test_the_plugin_names_code_reaching_into_pytest(tmp_path, how, said):
    code, rep = run_plugin(tmp_path, "import helper\n\ndef test_ok():\n    pass\n", extra=how)
    assert any(said in what for what in rep["integrity"]), rep["integrity"]


def test_the_plugin_leaves_an_honest_run_and_the_tasks_own_tests_alone(tmp_path):
    honest = (
        "import gc, sys\n\ndef test_ok(monkeypatch):\n    import _pytest.reports as r\n"
        "    monkeypatch.setattr(r.TestReport, 'x_marker', 1, raising=False)\n"
        "    assert gc.get_referrers(sys) is not None\n"
    )
    code, rep = run_plugin(tmp_path, honest, extra="import logging, dataclasses, collections\n")
    assert code == 0 and rep["integrity"] == [] and rep["forged"] is None


# --- canaries ---------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(40))
def test_canary_bodies_hold_exactly_when_they_must(seed):
    rng = random.Random(seed)
    for must_pass in (True, False):
        body = canaries._canary_body(rng, must_pass)
        code = "import hashlib\nimport pytest\n\ndef t():\n" + body
        ns: dict = {}
        exec(code, ns)  # noqa: S102 - the generated test, run as pytest would
        if must_pass:
            ns["t"]()
        else:
            with pytest.raises((AssertionError, ZeroDivisionError, pytest.fail.Exception)):
                ns["t"]()


def test_canaries_are_written_root_style_and_named_like_the_tasks_tests(tmp_path):
    tree = make_tree(tmp_path, {"tests/test_mean.py": ""})
    check = CheckSpec(
        kind="pytest",
        args=["tests/test_mean.py"],
        canaries=True,
        canary_dir="tests",
        canary_words=["empty", "raises", "values"],
    )
    c = canaries.make_canaries(check, tree)
    assert c["path"].startswith("tests/test_") and (tmp_path / c["path"]).is_file()
    assert hashlib.sha256((tmp_path / c["path"]).read_bytes()).hexdigest() == c["digest"]
    assert {"passed", "failed"} == set(c["expect"].values()) and len(c["expect"]) >= 4
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", c["path"]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    for tid, want in c["expect"].items():
        assert f"{want.upper()} {tid}" in result.stdout, result.stdout
    again = canaries.make_canaries(check, tree)
    assert again["path"] != c["path"] or again["expect"] != c["expect"]  # different in every run


@pytest.mark.parametrize(
    "arg, blocks",
    [
        ("-x", True),
        ("-xvs", True),
        ("-k", True),
        ("--maxfail=1", True),
        ("--deselect", True),
        ("-q", False),
        ("-rA", False),
        ("--tb=short", False),
        ("tests/test_x.py", False),
        ("-p", False),
    ],
)
def test_options_that_could_drop_canaries_turn_them_off(arg, blocks):
    assert canaries.blocks_canaries(arg) is blocks


# --- the evidence ------------------------------------------------------------------------------

EXPECT = {"t/test_c.py::test_a": "passed", "t/test_c.py::test_b": "failed", "t/test_c.py::test_d": "failed"}


def supervised(got=None, end_exit=1, exit_code=1, forged=None, tampered_files=(), outcomes=None):
    got = dict(EXPECT) if got is None else got
    return {
        "exit_code": exit_code,
        "tampered_files": list(tampered_files),
        "report": {
            "outcomes": outcomes or {"t/test_x.py::test_1": "passed"},
            "forged": forged,
            "end": None if end_exit is None else {"t": "end", "exit": end_exit},
            "collect_errors": [],
        },
        "canaries": {"expect": EXPECT, "got": got},
    }


def test_an_honest_report_carries_no_evidence():
    rep = read_pytest_report(supervised())
    assert rep.evidence == [] and rep.pending == [] and rep.problem is None
    assert rep.channel == "signed"
    assert rep.canaries.must_pass == 1 and rep.canaries.must_fail == 2 and rep.canaries.wrong == 0


def test_a_must_fail_canary_that_passed_is_tampering():
    rep = read_pytest_report(supervised(got={**EXPECT, "t/test_c.py::test_b": "passed"}))
    assert rep.evidence == ["a hidden canary test that must fail was reported as passed"]


def test_missing_canaries_count_only_against_a_run_that_would_pass():
    rep = read_pytest_report(supervised(got={}))
    assert rep.evidence == [] and len(rep.pending) == 3
    crashed = read_pytest_report(supervised(got={}, end_exit=2, exit_code=2))
    assert crashed.pending == [] and crashed.evidence == []


def test_forged_lines_and_a_different_exit_status_are_evidence():
    assert read_pytest_report(supervised(forged="line 3 ...")).channel == "forged"
    assert read_pytest_report(supervised(forged="line 3 ...")).evidence == ["line 3 ..."]
    exited = read_pytest_report(supervised(end_exit=1, exit_code=0))
    assert "exit status 1 but its process exited with 0" in exited.evidence[0]
    early = read_pytest_report(supervised(end_exit=None, exit_code=0))
    assert early.problem.startswith("The test run ended before pytest finished")
    assert "x.py was changed" in read_pytest_report(supervised(tampered_files=["x.py"])).evidence[0]


# --- the audit ----------------------------------------------------------------------------------


def diff(path: str, added: str) -> bytes:
    lines = added.splitlines()
    body = "".join(f"+{line}\n" for line in lines)
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1,{len(lines)} @@\n{body}"
    ).encode()


@pytest.mark.parametrize(
    "path, code, rule",
    [
        ("calc/x.py", "import gc\nfor o in gc.get_objects(): pass", "object-walk"),
        ("calc/x.py", "from _pytest.reports import TestReport", "runner-internals"),
        ("calc/x.py", "def pytest_runtest_makereport(item, call): pass", "runner-internals"),
        ("calc/x.py", "f = sys._getframe(2).f_globals", "frame-tricks"),
        ("calc/x.py", "sys.meta_path.insert(0, Finder())", "import-hooks"),
        ("calc/x.py", "m = __import__('g' + 'c')", "import-hooks"),
        ("calc/x.py", "os._exit(0)", "process-exit"),
        ("calc/x.py", "open('/proc/self/fd/3', 'w')", "descriptors"),
        ("calc/x.py", "os.write(3, b'x')", "descriptors"),
        ("calc/x.py", "import ctypes", "native-code"),
        ("calc/x.py", "exec(zlib.decompress(base64.b64decode(blob)))", "obfuscation"),
        ("calc/x.py", "f = getattr(gc, 'get_' + 'objects')", "obfuscation"),
        ("calc/x.py", "m = importlib.import_module(name)", "import-hooks"),
        ("calc/x.py", "code = marshal.loads(blob)", "bytecode"),
        ("evil-1.0.dist-info/entry_points.txt", "[pytest11]\nevil = calc.evil", "packaging-metadata"),
        ("calc/__pycache__/x.cpython-311.pyc", "junk", "bytecode"),
        ("tests/conftest.py", "import pytest", "runner-files"),
    ],
)
def test_the_audit_names_what_a_patch_reaches_for(path, code, rule):
    assert rule in {f.rule for f in audit_patch(diff(path, code))}


def test_the_audit_leaves_an_ordinary_fix_alone():
    fix = textwrap.dedent("""\
        import importlib
        import os
        import sys


        def mean(xs):
            if not xs:
                raise ValueError("mean of an empty sequence")
            return sum(xs) / len(xs)


        def load(name):
            return importlib.import_module("calc.stats") if name in sys.modules else None
        """)
    findings = audit_patch(diff("calc/__init__.py", fix))
    assert findings == [], findings
    assert audit_patch(b"") == []


def test_a_new_module_that_shadows_the_interpreters_or_the_environments_is_protected(tmp_path):
    base = make_tree(tmp_path, {"calc/__init__.py": "", "src/packaging/version.py": "", "setup.py": ""}).walk()
    p = protect.Protection(
        spec(), base, roots=("", "src/"), shadowed=frozenset({"json", "hmac", "pytest", "packaging"})
    )
    for rel in ("json.py", "hmac.py", "pytest/__init__.py", "pytest/__main__.py", "src/json.py", "hmac.cpython-311.so"):
        assert p.why(rel) == "shadows a module of the interpreter or the environment", rel
    # the repository's own modules stay its own, even with an environment module's name
    for rel in ("src/packaging/version.py", "src/packaging/new.py", "calc/json.py", "calc/__init__.py", "setup.py"):
        assert p.why(rel) is None, rel


def test_import_roots_name_the_stdlib_and_what_the_environment_installed():
    roots, names = protect.import_roots("/nonexistent-repo")
    assert roots == ("",)
    assert {"json", "hmac", "hashlib", "os", "pytest", "_pytest"} <= names


@pytest.mark.parametrize(
    "how, said",
    [
        # a flip registered as a plugin, from anywhere it can find the plugin manager
        (
            "import gc, pytest\n"
            "class Flip:\n"
            "    @pytest.hookimpl(hookwrapper=True)\n"
            "    def pytest_runtest_makereport(self, item, call):\n"
            "        yield\n"
            "def install():\n"
            "    for o in gc.get_objects():\n"
            "        if type(o).__name__ == 'PytestPluginManager':\n"
            "            o.register(Flip())\n"
            "            return\n",
            "a pytest_runtest_makereport hook from helper.py was registered",
        ),
        # a test function swapped for another on its item
        (
            "def install():\n"
            "    import sys\n"
            "    f = sys._getframe(1)\n"
            "    while f and 'item' not in f.f_locals:\n"
            "        f = f.f_back\n"
            "    if f:\n"
            "        f.f_locals['item'].obj = lambda: None\n",
            "runs code from helper.py",
        ),
    ],
)
def test_the_plugin_names_hooks_and_tests_that_come_from_elsewhere(tmp_path, how, said):
    source = (
        "import helper\n\nimport pytest\n\n@pytest.fixture(autouse=True)\ndef _x(request):\n"
        "    helper.install()\n\ndef test_ok():\n    pass\n"
    )
    code, rep = run_plugin(tmp_path, source, extra=how)
    assert any(said in what for what in rep["integrity"]), rep["integrity"]


# After every test the plugin compares the hooks with what its last full check saw (the
# objects, by identity), and checks them in full only when something differs: each of
# these changes must still be named, whenever in the run it is made.
FIND_MANAGER = (
    "import gc, pytest\n"
    "def manager():\n"
    "    return next(o for o in gc.get_objects() if type(o).__name__ == 'PytestPluginManager')\n"
    "class Flip:\n"
    "    @pytest.hookimpl(hookwrapper=True)\n"
    "    def pytest_runtest_makereport(self, item, call):\n"
    "        yield\n"
    "def flip(item, call):\n"
    "    return None\n"
)


@pytest.mark.parametrize(
    "how",
    [
        # registered in the fifth test only, and gone before the sixth's call
        FIND_MANAGER + "def install(n):\n"
        "    pm = manager()\n"
        "    if n == 5:\n"
        "        pm.register(Flip(), 'flip')\n"
        "    elif pm.has_plugin('flip'):\n"
        "        pm.unregister(name='flip')\n",
        # put straight into pluggy's own list of a hook, no register() (a copy of pytest's
        # own implementation, its function swapped), in the twelfth test
        FIND_MANAGER + "import copy\n"
        "def install(n):\n"
        "    if n == 12:\n"
        "        caller = manager().hook.pytest_runtest_makereport\n"
        "        impl = copy.copy(caller._hookimpls[0])\n"
        "        impl.function = flip\n"
        "        caller._hookimpls.insert(0, impl)\n",
        # the function of an implementation already there swapped in place: the same
        # list, the same implementation objects, in the last test
        FIND_MANAGER + "def install(n):\n"
        "    if n == 19:\n"
        "        caller = manager().hook.pytest_runtest_makereport\n"
        "        impl = next(i for i in caller._hookimpls if not i.hookwrapper)\n"
        "        impl.function = flip\n",
    ],
    ids=["registered-for-one-test", "inserted-into-pluggys-list", "function-swapped-in-place"],
)
def test_a_hook_changed_in_any_test_of_a_long_run_is_named(tmp_path, how):
    source = (
        "import helper\n\nimport pytest\n\n@pytest.fixture(autouse=True)\ndef _x(request):\n"
        "    helper.install(int(request.node.name.split('_')[1]))\n\n"
        + "".join(f"def test_{n}():\n    pass\n\n" for n in range(20))
    )
    code, rep = run_plugin(tmp_path, source, extra=how)
    assert any("hook from helper.py was registered" in what for what in rep["integrity"]), rep["integrity"]


_REACH_THE_BUSY_SET = """
import sys, types, _thread

def plugin_busy():
    todo = [f for n, m in list(sys.modules.items()) if n.startswith("grader_report_") for f in vars(m).values()]
    seen = set()
    while todo:
        f = todo.pop()
        if id(f) in seen or not callable(f):
            continue
        seen.add(id(f))
        code = getattr(f, "__code__", None)
        for var, cell in zip(getattr(code, "co_freevars", ()), getattr(f, "__closure__", None) or ()):
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            if var == "busy" and isinstance(v, set):
                return v
            todo.extend(vars(v).values() if isinstance(v, types.SimpleNamespace) else [v])
    raise LookupError("no busy set")
"""


@pytest.mark.parametrize(
    "how, said",
    [
        # a module's function replaced for one test and put back: no audit event for it
        (
            "import _pytest.runner as r\nkept = r.call_and_report\n"
            "def mine(*a, **k):\n    return kept(*a, **k)\n"
            "def install(n):\n    r.call_and_report = mine if n == 5 else kept\n",
            "_pytest.runner.call_and_report was replaced",
        ),
        # a property's getter swapped in place (property.__init__ again, no audit event)
        (
            "from _pytest.reports import BaseReport\nprop = BaseReport.__dict__['passed']\n"
            "kept = prop.fget\ndef mine(self):\n    return kept(self)\n"
            "def install(n):\n    prop.__init__(mine if n == 9 else kept)\n",
            "the code of _pytest.reports.BaseReport.passed was replaced",
        ),
        # a classmethod's function swapped in place, in the last test
        (
            "from _pytest.reports import TestReport\ncm = TestReport.__dict__['from_item_and_call']\n"
            "kept = cm.__func__\ndef mine(cls, item, call):\n    return kept(cls, item, call)\n"
            "def install(n):\n    if n == 19:\n        cm.__init__(mine)\n",
            "the code of _pytest.reports.TestReport.from_item_and_call was replaced",
        ),
        # its code swapped for one test, with the plugin's own audit hook muted for this
        # thread (the plugin's set of busy threads, reached through closures), and put
        # back: only the code's identity, read after the test, sees it
        (
            _REACH_THE_BUSY_SET + "import _pytest.runner as r\nfn = r.call_and_report\nkept = fn.__code__\n"
            "def install(n):\n    plugin_busy().add(_thread.get_ident())\n"
            "    fn.__code__ = kept.replace() if n == 7 else kept  # a copy: the run goes on as it was\n",
            "the code of _pytest.runner.call_and_report was replaced",
        ),
        # the same, on a hook pytest calls around every test (a method of a plugin object)
        (
            _REACH_THE_BUSY_SET + "from _pytest.capture import CaptureManager\n"
            "fn = CaptureManager.pytest_runtest_call\nkept = fn.__code__\n"
            "def install(n):\n    plugin_busy().add(_thread.get_ident())\n"
            "    fn.__code__ = kept.replace() if n == 11 else kept\n",
            "the code of a pytest_runtest_call hook was replaced",
        ),
    ],
    ids=[
        "module-function-for-one-test",
        "property-getter-in-place",
        "classmethod-function-in-place",
        "code-muted",
        "hook-code-muted",
    ],
)
def test_a_report_path_function_or_hook_changed_in_any_test_of_a_long_run_is_named(tmp_path, how, said):
    source = (
        "import helper\n\nimport pytest\n\n@pytest.fixture(autouse=True)\ndef _x(request):\n"
        "    helper.install(int(request.node.name.split('_')[1]))\n\n"
        + "".join(f"def test_{n}():\n    pass\n\n" for n in range(20))
    )
    code, rep = run_plugin(tmp_path, source, extra=how)
    assert any(said in what for what in rep["integrity"]), rep["integrity"]


def test_a_long_honest_run_says_nothing(tmp_path):
    """Honest: twenty tests, fixtures, a failure, a skip and pytest.raises: no record."""
    source = (
        "import pytest\n\n@pytest.fixture(autouse=True)\ndef _x(monkeypatch):\n"
        "    monkeypatch.setenv('X', '1')\n\n"
        + "".join(f"def test_{n}():\n    with pytest.raises(ZeroDivisionError):\n        1 / 0\n\n" for n in range(18))
        + "def test_fails():\n    assert 0\n\ndef test_skips():\n    pytest.skip('no')\n"
    )
    code, rep = run_plugin(tmp_path, source)
    assert code == 1 and rep["integrity"] == [] and rep["forged"] is None, rep["integrity"]
    assert sum(1 for o in rep["outcomes"].values() if o == "passed") == 18, rep["outcomes"]


def test_a_hook_the_tasks_own_test_code_registers_is_not_named(tmp_path):
    """Honest: the task's conftest registers a plugin of its own halfway through a run."""
    (tmp_path / "conftest.py").write_text(
        "import pytest\n"
        "class Mine:\n"
        "    @pytest.hookimpl(hookwrapper=True)\n"
        "    def pytest_runtest_makereport(self, item, call):\n"
        "        yield\n"
        "@pytest.fixture(autouse=True)\n"
        "def _mine(request):\n"
        "    pm = request.config.pluginmanager\n"
        "    if request.node.name == 'test_7' and not pm.has_plugin('mine'):\n"
        "        pm.register(Mine(), 'mine')\n"
    )
    source = "".join(f"def test_{n}():\n    pass\n\n" for n in range(12))
    code, rep = run_plugin(tmp_path, source, settings={"tests": ["test_x.py", "conftest.py"]})
    assert code == 0 and rep["integrity"] == [], rep["integrity"]
    assert sum(1 for o in rep["outcomes"].values() if o == "passed") == 12, rep["outcomes"]


def test_a_builtin_name_put_into_a_test_module_from_outside_is_named(tmp_path):
    """A `ValueError` of the submission's in the test module's globals, put there while the
    module is imported (the module imports the submission's code first)."""
    helper = "import sys\nclass ValueError(Exception):\n    pass\nsys.modules['test_x'].ValueError = ValueError\n"
    source = (
        "import helper\n\nimport pytest\n\n"
        "def test_ok():\n    with pytest.raises(ValueError):\n        raise ValueError\n"
    )
    code, rep = run_plugin(tmp_path, source, extra=helper)
    assert any("the name ValueError was put into the test module test_x.py from outside" in w for w in rep["integrity"])


def test_a_builtin_name_the_test_module_binds_in_a_function_with_global_is_its_own(tmp_path):
    """Honest: the module's own function binds a builtin's name with `global` (read from
    that function's instructions), as a compatibility shim does."""
    source = (
        "def _shim():\n    global TimeoutError\n    TimeoutError = OSError\n\n_shim()\n\n"
        "def _other():\n    return 1\n\n"
        "def test_ok():\n    assert TimeoutError is OSError and _other() == 1\n"
    )
    code, rep = run_plugin(tmp_path, source)
    assert code == 0 and rep["integrity"] == [], rep["integrity"]
