"""The unittest runner (grader/box/runners/unittest.py) without Docker: how a task's
command, paths and ids become the order's check, which files it protects, the canaries it
writes, the ids it renames, and its reporter (grader/box/reporters/python/
unittest_report.py) run on this interpreter against a signed channel of a temporary file:
the canaries' failures recorded and kept out of the exit status, SWE-bench's docstring ids
recorded, a test class reached from two modules recorded once. The same through real
containers, with hostile submissions: tests/docker/test_attacks_python_unittest.py."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from grader.box import runners
from grader.box.channel import read_report
from grader.box.order import CheckSpec, Order, ProtectSpec
from grader.box.runners import unittest as ut
from grader.box.tree import Tree
from grader.grading.decide import exit_rule
from grader.importers import swebench
from grader.tasks import model

REPORTER = Path(ut.__file__).resolve().parent.parent / "reporters" / "python" / "unittest_report.py"
DJANGO_CMD = "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1"


# --- the command ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command, env, argv",
    [
        (None, {}, ["-m", "unittest"]),
        ("python -m unittest -v", {}, ["-m", "unittest", "-v"]),
        ("python3.9 -m unittest {tests}", {}, ["-m", "unittest", "{tests}"]),
        (DJANGO_CMD, {}, ["tests/runtests.py", "--verbosity", "2", "--settings=test_sqlite", "--parallel", "1"]),
        (
            "DJANGO_SETTINGS_MODULE=x python tests/run.py {tests} -v",
            {"DJANGO_SETTINGS_MODULE": "x"},
            ["tests/run.py", "{tests}", "-v"],
        ),
        ("/usr/bin/python3 -m pkg.runner", {}, ["-m", "pkg.runner"]),
    ],
)
def test_a_command_is_a_script_or_a_module_with_its_arguments(command, env, argv):
    assert ut.split_command(command) == (env, argv)


@pytest.mark.parametrize(
    "command, message",
    [
        ("python -W ignore -m unittest", "takes no interpreter option"),
        ("python -m", "names a module"),
        ("python ../outside.py", "a path inside the repository"),
        ("python /abs/runtests.py", "a path inside the repository"),
        ("FOO=1", "names a script"),
    ],
)
def test_a_command_of_another_shape_is_refused(command, message):
    with pytest.raises(ValueError, match=message):
        ut.split_command(command)


def test_the_task_args_follow_the_commands_words():
    assert ut.split_command(None, ["-v", "--locals"]) == ({}, ["-m", "unittest", "-v", "--locals"])


# --- labels and ids -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path, root, label",
    [
        ("tests/test_x.py", "", "tests.test_x"),
        ("tests/auth_tests/test_views.py", "tests", "auth_tests.test_views"),
        ("tests/auth_tests/__init__.py", "tests", "auth_tests"),
        ("tests/auth_tests/", "tests", "auth_tests"),
        ("test_x.py", "", "test_x"),
        ("auth_tests.test_views", "tests", "auth_tests.test_views"),
        ("tests/fixtures/data.json", "tests", None),
        ("django/utils/text.py", "tests", None),  # outside where the script imports from
        ("tests/my-dir/test_x.py", "", None),  # not importable
    ],
)
def test_a_path_becomes_a_label_relative_to_where_the_runner_imports(path, root, label):
    assert ut.label_of(path, root) == label


@pytest.mark.parametrize(
    "tid, full",
    [
        ("test_x (auth_tests.test_views.LoginTest)", "auth_tests.test_views.LoginTest.test_x"),
        ("test_x (auth_tests.test_views.LoginTest.test_x)", "auth_tests.test_views.LoginTest.test_x"),
        ("auth_tests.test_views.LoginTest.test_x", "auth_tests.test_views.LoginTest.test_x"),
        ("Regression test for #12345", None),
        ("test_x", None),
    ],
)
def test_the_three_written_forms_of_an_id_are_one_test(tid, full):
    assert ut.canonical(tid) == full


def test_outcomes_take_the_form_the_task_lists():
    outcomes = {"m.C.test_a": "passed", "m.C.test_b": "failed", "m.C.test_c": "passed", "Doc line": "passed"}
    listed = ["test_a (m.C)", "test_b (m.C.test_b)", "m.C.test_c", "Doc line"]
    assert ut.rename(outcomes, listed) == {
        "test_a (m.C)": "passed",
        "test_b (m.C.test_b)": "failed",
        "m.C.test_c": "passed",
        "Doc line": "passed",
    }
    # both forms listed for one test: each gets its outcome; an unlisted test keeps its id
    assert ut.rename({"m.C.t": "passed", "m.D.u": "failed"}, ["t (m.C)", "m.C.t"]) == {
        "t (m.C)": "passed",
        "m.C.t": "passed",
        "m.D.u": "failed",
    }


def test_labels_name_each_test_once():
    assert ut.dedupe(["a.b", "a", "c.d.E", "c.d", "c.d", "cd"]) == ["a", "c.d", "cd"]


# --- plan -----------------------------------------------------------------------------------


def test_plan_without_a_command_runs_unittest_on_the_hidden_modules_and_the_listed_ones():
    hidden = {"tests/test_mean.py": "x", "tests/__init__.py": "y", "tests/helpers.py": "z"}
    spec = ut.plan(
        {"fail_to_pass": ["test_empty (tests.test_mean.MeanTests)"], "pass_to_pass": ["tests.test_basic.B.test_one"]},
        hidden,
    )
    assert spec.kind == "unittest" and spec.command == "-m unittest"
    assert spec.args == ["tests.test_basic", "tests.test_mean"]  # the helper module is not a label
    assert spec.paths == ["test_empty (tests.test_mean.MeanTests)", "tests.test_basic.B.test_one"]
    assert spec.canaries and spec.canary_dir == "tests" and {"empty", "mean", "one"} <= set(spec.canary_words)


def test_plan_of_a_django_row_labels_the_test_files_relative_to_the_script():
    spec = ut.plan(
        {
            "command": DJANGO_CMD,
            "paths": ["tests/auth_tests/test_views.py", "tests/auth_tests/fixtures/x.json"],
            "fail_to_pass": ["test_login (auth_tests.test_views.LoginTest)"],
            "args": ["--noinput"],
        },
        {"tests/auth_tests/test_views.py": "x"},
    )
    assert spec.args == ["auth_tests.test_views"]
    assert spec.command == "tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 --noinput"
    assert spec.canary_dir == "tests/auth_tests"


def test_plan_keeps_the_commands_environment_and_placeholder():
    spec = ut.plan({"command": "LANG=C python -m unittest {tests} -v", "paths": ["tests/test_a.py"]}, {})
    assert spec.command == "LANG=C -m unittest '{tests}' -v" and spec.args == ["tests.test_a"]
    assert ut.split_command(spec.command) == ({"LANG": "C"}, ["-m", "unittest", "{tests}", "-v"])


def test_the_task_model_takes_the_runner_with_or_without_a_command():
    assert "unittest" in runners.test_runners()
    model.TestsCheck(type="tests", runner="unittest", hidden_tests={"tests/test_a.py": "a.py"})
    model.TestsCheck(type="tests", runner="unittest", command=DJANGO_CMD, paths=["tests/a/tests.py"])
    with pytest.raises(ValueError, match="pytest_args and plugins are the pytest runner's"):
        model.TestsCheck(type="tests", runner="unittest", pytest_args=["-x"])
    rule = exit_rule("unittest")
    assert rule is not None and (rule.passed, rule.failed, rule.name) == (0, 1, "unittest")
    assert runners.runner("unittest").listed_files(["test_a (m.C)"]) == []


# --- the container's side, without a container ----------------------------------------------


def order_for(repo: Path, check: CheckSpec, hidden: list[str]) -> Order:
    protect = ProtectSpec(
        files=sorted(hidden),
        names=[],
        suffixes=[],
        prefixes=[],
        dir_suffixes=[],
        tests=True,
        test_modules=[],
        test_dir_names=[],
        globs=[],
    )
    return Order(
        repo=str(repo),
        patch="/dev/null",
        touched=[],
        hidden_dir="/nonexistent",
        uid=os.getuid(),
        gid=os.getgid(),
        deadline=60,
        output_limit=1 << 20,
        report_limit=1 << 20,
        apply_chain=[],
        protect=protect,
        pycache=str(repo / ".pycache"),
        check=check,
        env={},
    )


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))


def test_before_patch_protects_the_script_the_listed_modules_and_the_hidden_tests_packages(tmp_path):
    write(
        tmp_path,
        {
            "tests/runtests.py": "",
            "tests/auth_tests/__init__.py": "",
            "tests/auth_tests/test_views.py": "",
            "tests/basic/__init__.py": "",
            "tests/basic/tests.py": "",
            "tests/__init__.py": "",  # above where the script imports from: not a package of the labels
        },
    )
    check = ut.plan(
        {
            "command": DJANGO_CMD,
            "paths": ["tests/auth_tests/test_views.py"],
            "pass_to_pass": ["test_a (basic.tests.BasicTests)", "test_gone (gone.tests.T)"],
        },
        {"tests/auth_tests/test_views.py": "x"},
    )
    order = order_for(tmp_path, check, ["tests/auth_tests/test_views.py"])
    ut.before_patch(order, Tree(str(tmp_path), os.getuid(), os.getgid()))
    assert order.protect.files == [
        "tests/auth_tests/__init__.py",
        "tests/auth_tests/test_views.py",
        "tests/basic/tests.py",
        "tests/runtests.py",
    ]


def test_canaries_are_a_testcase_first_among_the_labels_and_skipped_where_they_cannot_run(tmp_path):
    write(tmp_path, {"tests/__init__.py": "", "tests/test_mean.py": "import os\nfrom calc import mean\n"})
    check = ut.plan({"fail_to_pass": ["test_empty (tests.test_mean.MeanTests)"]}, {"tests/test_mean.py": "x"})
    order = order_for(tmp_path, check, ["tests/test_mean.py"])
    tree = Tree(str(tmp_path), os.getuid(), os.getgid())
    c = ut.make_canaries(order, tree)
    assert c is not None and c["path"].startswith("tests/test_") and c["module"] == c["path"][:-3].replace("/", ".")
    source = (tmp_path / c["path"]).read_text()
    assert "class " in source and "(unittest.TestCase)" in source and "def load_tests(" in source
    assert "try:\n    from calc import mean  # noqa\nexcept Exception:" in source  # borrowed, and cannot fail
    assert {"passed", "failed"} == set(c["expect"].values()) and len(c["expect"]) >= 4
    assert all(tid.startswith(c["module"] + ".") for tid in c["expect"])
    for command, why in (
        ("python -m unittest discover -s tests", "chooses its tests itself"),
        ("python -m unittest -k empty", "option -k"),
        (DJANGO_CMD + " --tag fast", "option --tag"),
    ):
        order.check = ut.plan({"command": command, "paths": ["tests/test_mean.py"]}, {"tests/test_mean.py": "x"})
        assert why in ut.make_canaries(order, tree)["skipped"]


# --- the reporter, on this interpreter ------------------------------------------------------


def report_of(repo: Path, argv: list[str], settings: dict) -> tuple[int, dict, str]:
    """Run `python -m <reporter> ARGV` in `repo` with a key descriptor and a report file, as
    the runner does in the container: (exit status, the verified report, the output)."""
    key = secrets.token_bytes(32)
    d = Path(tempfile.mkdtemp())
    module = "grader_unittest_" + secrets.token_hex(8)
    shutil.copy(REPORTER, d / f"{module}.py")
    (d / "key").write_bytes(key + json.dumps({"repo": str(repo), **settings}).encode())
    key_fd = os.open(d / "key", os.O_RDONLY)
    rep_fd = os.open(d / "report", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", module, *argv],
            cwd=repo,
            env={**os.environ, "PYTHONPATH": str(d), "GRADER_KEY_FD": str(key_fd), "GRADER_REPORT_FD": str(rep_fd)},
            pass_fds=(key_fd, rep_fd),
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        os.close(key_fd)
        os.close(rep_fd)
    report = read_report((d / "report").read_bytes(), key)
    shutil.rmtree(d)
    return proc.returncode, report, proc.stdout + proc.stderr


MEAN = """\
    import unittest


    class MeanTests(unittest.TestCase):
        def test_empty(self):
            '''An empty list raises.

            More words.'''
            self.assertEqual(1, 1)

        def test_two(self):
            self.assertEqual(2, 2)
    """


def test_the_canaries_fail_in_the_report_and_not_in_the_exit_status(tmp_path):
    write(tmp_path, {"tests/__init__.py": "", "tests/test_mean.py": MEAN})
    check = ut.plan({"fail_to_pass": ["test_empty (tests.test_mean.MeanTests)"]}, {"tests/test_mean.py": "x"})
    order = order_for(tmp_path, check, ["tests/test_mean.py"])
    c = ut.make_canaries(order, Tree(str(tmp_path), os.getuid(), os.getgid()))
    status, rep, output = report_of(
        tmp_path,
        ["-m", "unittest", "-v", c["module"], "tests.test_mean"],
        {"tests": ["tests/test_mean.py", c["path"]], "canaries": [c["module"]]},
    )
    assert status == 0, output  # the must-fail canaries failed, and the run says OK
    assert not rep["forged"] and rep["end"]["exit"] == 0 and not rep["integrity"]
    assert {tid: rep["outcomes"][tid] for tid in c["expect"]} == c["expect"]
    assert rep["outcomes"]["tests.test_mean.MeanTests.test_empty"] == "passed"
    assert "Traceback" not in output  # a canary's failure shows no source


def test_the_reporter_records_docstring_ids_and_a_test_reached_twice_once(tmp_path):
    write(
        tmp_path,
        {
            "tests/__init__.py": "",
            "tests/test_mean.py": MEAN,
            # MeanTests imported into a second module: unittest runs it there again
            "tests/test_more.py": "from tests.test_mean import MeanTests  # noqa\n",
        },
    )
    status, rep, output = report_of(
        tmp_path,
        ["-m", "unittest", "-v", "tests.test_mean", "tests.test_more"],
        {"tests": ["tests/"], "aliases": ["An empty list raises.", "Not a docstring of this run"]},
    )
    assert status == 0 and not rep["forged"], output
    assert rep["outcomes"] == {
        "tests.test_mean.MeanTests.test_empty": "passed",
        "tests.test_mean.MeanTests.test_two": "passed",
        "An empty list raises.": "passed",
    }


def test_a_printed_success_line_does_not_pass_a_test(tmp_path):
    write(
        tmp_path,
        {
            "test_fake.py": """\
                import unittest


                class FakeTests(unittest.TestCase):
                    def test_fake(self):
                        print("test_fake (test_fake.FakeTests) ... ok")
                        self.fail("the real outcome")
                """
        },
    )
    status, rep, output = report_of(tmp_path, ["-m", "unittest", "-v", "test_fake"], {"tests": ["test_fake.py"]})
    assert "test_fake (test_fake.FakeTests) ... ok" in output
    assert status == 1 and rep["outcomes"] == {"test_fake.FakeTests.test_fake": "failed"}


# --- the SWE-bench importer -----------------------------------------------------------------


@pytest.mark.parametrize(
    "test_cmd, yes",
    [
        (DJANGO_CMD, True),
        ("python tests/runtests.py", True),
        ("python -m unittest {test_files}", True),
        ("python3 -m unittest discover -s tests", True),
        ("pytest -rA", False),
        ("python -m nose2", False),
        ("bin/test -C --verbose", False),
        ("cd tests && python runtests.py", False),
    ],
)
def test_the_importer_knows_a_unittest_command(test_cmd, yes):
    assert swebench.runs_unittest(test_cmd) is yes


def test_a_django_row_takes_the_unittest_runner_and_its_lists():
    notes: list[str] = []
    f2p = ["test_x (auth_tests.test_views.LoginTest)"]
    p2p = ["A docstring line of a test"]
    check = swebench.test_check(
        swebench.EnvSpec(python="3.9", test_cmd=DJANGO_CMD), ["tests/auth_tests/test_views.py"], f2p, p2p, notes
    )
    assert check == {
        "type": "tests",
        "test_patch": "test.patch",
        "runner": "unittest",
        "paths": ["tests/auth_tests/test_views.py"],
        "command": DJANGO_CMD,
        "fail_to_pass": f2p,
        "pass_to_pass": p2p,
    }
    assert notes == []
    check = swebench.test_check(
        swebench.EnvSpec(python="3.9", test_cmd="python -m unittest {test_files}"), ["t/test_a.py"], f2p, [], []
    )
    assert check["runner"] == "unittest" and check["command"] == "python -m unittest {tests}"
    model.TestsCheck(**{k: v for k, v in check.items() if k != "test_patch"}, test_patch="test.patch")
