"""The benchmark importers (grader/importers/): SWE-bench, RES-Q and GitGoodBench
rows become tasks. The repositories the rows name are small local ones with real history
(tests/helpers/importer_repos.py). These need git only; validating and grading the
imported tasks in containers is tests/docker/test_importers_docker.py."""

from __future__ import annotations

import json
import subprocess

import pytest
from click.testing import CliRunner

from grader.cli import main
from grader.config import get_settings
from grader.importers import DatasetError, import_file, import_rows
from grader.importers.common import parse_rows, read_rows
from grader.patch import inspect_patch
from grader.tasks.loader import TaskSet
from grader.tasks.prepare import checkout_base
from helpers import ROOT
from helpers.importer_repos import (
    NOTES_MERGED,
    RESQ_SCRIPT,
    Calc,
    Chain,
    Notes,
    gitgoodbench_chain_row,
    gitgoodbench_row,
    make_calc,
    make_chain,
    make_notes,
    resq_row,
    swebench_row,
)


@pytest.fixture(scope="module")
def repo_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("clones")


@pytest.fixture(scope="module")
def calc(repo_dir) -> Calc:
    return make_calc(repo_dir)


@pytest.fixture(scope="module")
def notes(repo_dir) -> Notes:
    return make_notes(repo_dir)


@pytest.fixture
def local(tmp_path):
    """Settings of an empty tasks directory and cache, with the repository's environments."""
    return get_settings(
        tasks_dir=tmp_path / "tasks", environments_dir=ROOT / "environments", cache_dir=tmp_path / "cache"
    )


def imported(source, rows, local, repo_dir, **kwargs):
    """Import without validation (no Docker); return the report and the suite's tasks."""
    kwargs.setdefault("out", local.tasks_dir / "suite")
    report = import_rows(source, rows, settings=local, repo_dir=repo_dir, validate=False, **kwargs)
    return report, TaskSet(report.out)


# --- reading rows ----------------------------------------------------------------------------
def test_rows_from_a_json_list_jsonl_or_one_object(tmp_path):
    rows = [{"instance_id": "a"}, {"instance_id": "b"}]
    listed, lines, one = tmp_path / "l.json", tmp_path / "r.jsonl", tmp_path / "o.json"
    listed.write_text(json.dumps(rows, indent=2))
    lines.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    one.write_text(json.dumps(rows[0]))
    assert read_rows(listed) == rows
    assert read_rows(lines) == rows
    assert read_rows(one) == rows[:1]


def test_malformed_rows_name_the_line():
    with pytest.raises(DatasetError, match=r"^x.jsonl:3: not valid JSON"):
        parse_rows('{"a": 1}\n{"b": 2}\n{"c": \n', source="x.jsonl")
    with pytest.raises(DatasetError, match=r"^x.json:4: not valid JSON: Expecting ':' delimiter \(column 7\)"):
        parse_rows('\n[\n {"a": 1},\n {"b" 2}\n]', source="x.json")
    with pytest.raises(DatasetError, match=r"^x.json: item 1: expected a JSON object, got list"):
        parse_rows('[{"a": 1}, [1]]', source="x.json")
    with pytest.raises(DatasetError, match=r"^x.json: no rows \(the file is empty\)"):
        parse_rows("  \n", source="x.json")
    with pytest.raises(DatasetError, match="^x.json: expected a list or an object of rows, got int"):
        parse_rows("42", source="x.json")


def test_unreadable_file_and_unknown_source(tmp_path, local):
    with pytest.raises(DatasetError, match="cannot read"):
        import_file("swebench", tmp_path / "missing.jsonl", settings=local)
    with pytest.raises(DatasetError, match="unknown source 'swe-bench'; use one of swebench, resq, gitgoodbench"):
        import_rows("swe-bench", [{}], settings=local)


# --- SWE-bench -------------------------------------------------------------------------------
def test_swebench_instance_with_its_own_environment(calc, local, repo_dir):
    report, ts = imported("swebench", [swebench_row(calc)], local, repo_dir, suite="swe")
    assert [o.status for o in report.outcomes] == ["kept, not validated"]
    task = ts.get("acme__calc-1")
    check = task.check
    # FAIL_TO_PASS / PASS_TO_PASS arrive as JSON-encoded strings, as published
    assert check.fail_to_pass == ["tests/test_mean.py::test_empty_raises"]
    assert check.pass_to_pass == ["tests/test_mean.py::test_values"]
    # SWE-bench's pytest directives: the test files test_patch touches, its JSON fixture left out
    assert check.runner == "pytest" and check.paths == ["tests/test_mean.py"] and check.pytest_args == []
    assert task.read(check.test_patch) == calc.test_patch.encode()
    assert task.gold_patch_text() == calc.gold.encode()
    assert task.environment == "python-3.11"
    assert task.install == (
        "printf '%s\\n' pytest==8.3.3 > /tmp/grader-requirements.txt && pip install -r "
        "/tmp/grader-requirements.txt && rm /tmp/grader-requirements.txt && "
        "pip install --no-build-isolation --no-deps -e ."
    )
    assert str(task.metadata.created_at) == "2023-02-03" and task.metadata.suite == "swe"
    assert task.instruction.startswith("mean([]) raises ZeroDivisionError.")
    # the suite carries only the base commit's history: the fix is not in the bundle
    assert task.repo.commit == calc.base and task.repo.bundle == "../repos/acme__calc.bundle"
    heads = subprocess.run(
        ["git", "bundle", "list-heads", str(report.out / "repos" / "acme__calc.bundle")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert calc.base in heads and calc.fix not in heads
    assert json.loads((report.out / "import-report.json").read_text())["tasks"][0]["task_id"] == "acme__calc-1"


def test_swebench_environment_from_the_env_map(calc, local, repo_dir, tmp_path):
    env_map = tmp_path / "env.yaml"
    env_map.write_text(
        "acme/calc:\n  python: '3.11'\n  requirements: [pytest==8.3.3]\n"
        "  versions:\n    '0.1': {install: pip install --no-deps -e ., test_cmd: pytest -x -rA}\n"
    )
    row = swebench_row(calc, python=None, requirements=None, install=None)
    report, ts = imported("swebench", [row], local, repo_dir, suite="swe", env_map=env_map)
    task = ts.get("acme__calc-1")
    assert task.install.endswith("rm /tmp/grader-requirements.txt && pip install --no-deps -e .")
    assert task.check.runner == "pytest" and task.check.pytest_args == ["-x", "-rA"]
    assert task.check.paths == ["tests/test_mean.py"]
    # the instance's own fields win over the map's, field by field
    row = swebench_row(calc, requirements=None, install="pip install --no-deps --no-build-isolation -e .")
    _, ts = imported("swebench", [row], local, repo_dir, suite="swe", env_map=env_map)
    assert ts.get("acme__calc-1").install.endswith("&& pip install --no-deps --no-build-isolation -e .")
    assert ts.get("acme__calc-1").check.pytest_args == ["-x", "-rA"]
    # no install anywhere: a setup.py or pyproject.toml at the base means `pip install -e .`
    _, ts = imported("swebench", [swebench_row(calc, requirements=None, install=None)], local, repo_dir, suite="swe")
    assert ts.get("acme__calc-1").install == "pip install -e ."


def test_swebench_without_an_environment_names_the_instance(calc, local, repo_dir):
    rows = [swebench_row(calc), swebench_row(calc, instance_id="acme__calc-2", python=None)]
    with pytest.raises(
        DatasetError,
        match=r"1 of 2 row\(s\) cannot be imported .*\n  instance acme__calc-2: no "
        r"environment: .* an entry for 'acme/calc' in --env-map",
    ):
        imported("swebench", rows, local, repo_dir, suite="swe")
    assert not (local.tasks_dir / "suite").exists(), "nothing is written when a row cannot be converted"
    report, ts = imported("swebench", rows, local, repo_dir, suite="swe", skip_broken=True)
    assert [t.id for t in ts] == ["acme__calc-1"]
    assert report.not_converted[0][0] == "acme__calc-2" and "no environment" in report.not_converted[0][1]


def test_swebench_python_version_without_an_environment(calc, local, repo_dir):
    with pytest.raises(
        DatasetError,
        match=r"instance acme__calc-1: Python 2.7 has no environment .*available: "
        r"python-3.11",
    ):
        imported("swebench", [swebench_row(calc, python="2.7")], local, repo_dir, suite="swe")


def test_swebench_test_cmd_that_is_not_pytest(calc, local, repo_dir, tmp_path):
    row = swebench_row(calc, test_cmd="python -m nose2 {test_files}")
    report, ts = imported("swebench", [row], local, repo_dir, suite="swe")
    check = ts.get("acme__calc-1").check
    assert check.runner == "command" and check.command == "python -m nose2 tests/test_mean.py"
    assert check.fail_to_pass == [] and "graded by its exit status" in report.outcomes[0].notes[0]
    row = swebench_row(calc, test_cmd="make check", junit="report.xml")
    _, ts = imported("swebench", [row], local, repo_dir, suite="swe")
    check = ts.get("acme__calc-1").check
    assert check.command == "make check" and check.junit == "report.xml"
    assert check.fail_to_pass == ["tests/test_mean.py::test_empty_raises"]


@pytest.mark.parametrize(
    "over, message",
    [
        ({"FAIL_TO_PASS": "[]"}, "FAIL_TO_PASS is missing or empty"),
        ({"FAIL_TO_PASS": "tests/x.py::t"}, "FAIL_TO_PASS is a string but not a JSON list"),
        ({"base_commit": "abc123"}, "base_commit 'abc123' is not a full 40-character commit sha"),
        ({"repo": "calc"}, "repo 'calc' is not owner/name"),
        ({"patch": None}, "the field 'patch' is missing or empty"),
        ({"base_commit": "0" * 40}, "commit 0000000000000000000000000000000000000000 is not in the clone"),
    ],
)
def test_swebench_bad_fields_name_the_instance(calc, local, repo_dir, over, message):
    with pytest.raises(DatasetError) as info:
        imported("swebench", [swebench_row(calc, **over)], local, repo_dir, suite="swe")
    assert "instance acme__calc-1: " in str(info.value) and message in str(info.value)


def test_only_selects_and_a_missing_id_is_an_error(calc, local, repo_dir):
    rows = [swebench_row(calc), swebench_row(calc, instance_id="acme__calc-2", python=None)]
    _, ts = imported("swebench", rows, local, repo_dir, suite="swe", only=["acme__calc-1"])
    assert [t.id for t in ts] == ["acme__calc-1"]
    with pytest.raises(DatasetError, match="no row with instance_id acme__calc-9"):
        imported("swebench", rows, local, repo_dir, suite="swe", only=["acme__calc-1", "acme__calc-9"])


def test_unknown_repository_without_a_clone(calc, local, repo_dir, tmp_path):
    row = swebench_row(calc, repo="acme/nothing")
    with pytest.raises(
        DatasetError,
        match=rf"instance acme__calc-1: repository acme/nothing: no clone in "
        rf"{repo_dir}, and cloning {tmp_path}/upstream/acme__nothing failed",
    ):
        imported("swebench", [row], local, repo_dir, suite="swe", url_template=f"{tmp_path}/upstream/{{key}}")


def test_a_repository_without_a_clone_is_cloned_from_its_url(calc, local, repo_dir, tmp_path):
    """No --repo-dir: the upstream URL is cloned once into the cache. With url sources the
    task names the URL instead of carrying a bundle."""
    report = import_rows(
        "swebench",
        [swebench_row(calc)],
        settings=local,
        validate=False,
        out=tmp_path / "by-url",
        url_template=f"{repo_dir}/{{key}}",
        repo_source="url",
    )
    task = TaskSet(report.out).get("acme__calc-1")
    assert task.repo.url == f"{repo_dir}/acme__calc" and task.repo.bundle is None
    assert (local.cache_dir / "import-clones" / "acme__calc.git").is_dir()
    assert not (report.out / "repos").exists()


def test_a_gold_patch_that_does_not_apply_is_rejected_without_docker(calc, local, repo_dir):
    broken = calc.gold.replace("return sum(xs) / len(xs)", "return sum(xs) // len(xs)")
    rows = [swebench_row(calc), swebench_row(calc, instance_id="acme__calc-2", patch=broken)]
    report, ts = imported("swebench", rows, local, repo_dir, suite="swe")
    assert [(o.task_id, o.status) for o in report.outcomes] == [
        ("acme__calc-1", "kept, not validated"),
        ("acme__calc-2", "rejected"),
    ]
    assert "the gold patch does not apply at the base commit" in report.outcomes[1].problems[0]
    assert [t.id for t in ts] == ["acme__calc-1"]
    report, ts = imported("swebench", rows, local, repo_dir, suite="swe", keep_invalid=True)
    assert [o.status for o in report.outcomes] == ["kept, not validated", "kept, invalid"]
    assert [t.id for t in ts] == ["acme__calc-1", "acme__calc-2"]


def test_an_id_defined_elsewhere_in_the_tasks_directory_is_refused(calc, local, repo_dir):
    imported("swebench", [swebench_row(calc)], local, repo_dir, suite="swe", out=local.tasks_dir / "first")
    with pytest.raises(DatasetError, match="task ids already defined outside .*: acme__calc-1"):
        imported("swebench", [swebench_row(calc)], local, repo_dir, suite="swe", out=local.tasks_dir / "second")


# --- RES-Q -----------------------------------------------------------------------------------
def test_resq_row(calc, local, repo_dir):
    report, ts = imported("resq", [resq_row(calc)], local, repo_dir)
    task = ts.get("0_0")
    assert report.outcomes[0].notes == []
    assert task.check.runner == "command" and task.check.command == "python resq_test_script.py"
    assert task.check.hidden_tests == {"resq_test_script.py": "hidden/resq_test_script.py"}
    assert task.read("hidden/resq_test_script.py") == RESQ_SCRIPT.encode()
    assert task.gold_patch_text() == calc.gold.encode()
    assert task.install.startswith("printf '%s\\n' pytest==8.3.3 >")  # the comment line left out
    assert task.environment == "python-3.11" and task.metadata.suite == "resq"
    assert str(task.metadata.created_at) == "2023-02-03"  # the solution commit's date
    assert task.instruction == "Make calc.mean raise ValueError when it is given no values."


def test_resq_shell_script_and_a_modified_files_mismatch(calc, local, repo_dir):
    row = resq_row(
        calc, test_script="#!/bin/bash\nset -e\npython -c 'import calc'\n", modified_files=[{"path": "calc/other.py"}]
    )
    report, ts = imported("resq", [row], local, repo_dir)
    assert ts.get("0_0").check.command == "bash resq_test_script.sh"
    assert "differ from the files the solution patch touches (calc/__init__.py)" in report.outcomes[0].notes[0]


def test_resq_rows_that_cannot_be_imported(calc, local, repo_dir):
    rows = [resq_row(calc, id="1_0", language="Haskell"), resq_row(calc, id="2_0", testbed_environment="node18")]
    with pytest.raises(DatasetError) as info:
        imported("resq", rows, local, repo_dir)
    assert "RES-Q task 1_0: language 'haskell'" in str(info.value)
    assert "RES-Q task 2_0: 'node18' is not a Python version" in str(info.value)


# --- GitGoodBench ----------------------------------------------------------------------------
def test_gitgoodbench_sample_is_a_conflicted_base_with_an_exact_match(notes, local, repo_dir, tmp_path):
    report, ts = imported("gitgoodbench", [gitgoodbench_row(notes)], local, repo_dir)
    task = ts.get("acme_notes_merge_0001")
    assert (task.repo.commit, task.repo.merge) == (notes.ours, notes.theirs)
    assert task.check.type == "exact_match"
    assert task.check.expected_commit == notes.merged and task.check.paths == ["authors.txt", "notes.txt"]
    assert task.metadata.difficulty == "hard" and str(task.metadata.created_at) == "2023-03-04"
    assert report.outcomes[0].notes == []

    # the starting state: the first parent with the second merged in, conflicts left in place
    work = tmp_path / "work"
    checkout_base(task, work, local.cache_dir)
    assert "<<<<<<<" in (work / "notes.txt").read_text() and "<<<<<<<" in (work / "authors.txt").read_text()
    assert (work / "extra.txt").read_text() == "from theirs\n"  # what merged cleanly is staged
    # the gold patch applies there and gives exactly the merge commit's files
    subprocess.run(["git", "apply", "-"], cwd=work, input=task.gold_patch_text(), check=True)
    for rel, content in NOTES_MERGED.items():
        assert (work / rel).read_text() == content


def test_gitgoodbench_bad_samples(notes, local, repo_dir):
    swapped = gitgoodbench_row(
        notes, id="swapped", scenario={"merge_commit_hash": notes.merged, "parents": [notes.theirs, notes.ours]}
    )
    clean = gitgoodbench_row(
        notes, id="clean", scenario={"merge_commit_hash": notes.ours, "parents": [notes.ours, notes.theirs]}
    )
    chain = gitgoodbench_row(notes, id="chain", sample_type="file_commit_chain")
    missing = gitgoodbench_row(
        notes,
        id="missing",
        scenario={
            "merge_commit_hash": notes.merged,
            "parents": [notes.ours, notes.theirs],
            "files_in_merge_conflict": ["notes.txt", "gone.txt"],
        },
    )
    short = gitgoodbench_row(
        notes, id="short", scenario={"merge_commit_hash": notes.merged[:12], "parents": [notes.ours, notes.theirs]}
    )
    with pytest.raises(DatasetError) as info:
        imported("gitgoodbench", [swapped, clean, chain, missing, short], local, repo_dir)
    text = str(info.value)
    assert (
        f"GitGoodBench sample missing: gone.txt is not in the merge commit {notes.merged[:12]} "
        f"(a delete/modify conflict)"
    ) in text
    assert (
        f"GitGoodBench sample short: scenario.merge_commit_hash {notes.merged[:12]!r} is not a full "
        f"40-character commit sha"
    ) in text
    assert f"GitGoodBench sample swapped: the parents of {notes.merged[:12]} are {notes.ours}, {notes.theirs}" in text
    assert f"GitGoodBench sample clean: the parents of {notes.ours[:12]} are" in text
    assert "GitGoodBench sample chain: scenario.oldest_commit" in text  # a chain, read as one, lacks its fields


@pytest.fixture(scope="module")
def chain(repo_dir) -> Chain:
    return make_chain(repo_dir)


def test_gitgoodbench_file_commit_chain_is_a_history_task(chain, local, repo_dir, tmp_path):
    report, ts = imported("gitgoodbench", [gitgoodbench_chain_row(chain)], local, repo_dir)
    task = ts.get("acme_chain_fcc_0001")
    assert task.check.type == "history" and task.check.reference == chain.commits[-1]
    assert task.repo.commit == chain.base and task.check.max_commits == 6 and task.check.cohesion == 0.5
    assert "ONE" in task.instruction and "SEVEN" in task.instruction  # the change is the submitter's to commit
    assert report.outcomes[0].notes == [
        "1 commit(s) of the chain do not change notes.txt: they are part of the reference"
    ] or (report.outcomes[0].notes == [])
    gold = task.gold_patch_text()
    info = inspect_patch(gold, 10**6)
    assert info.ok and info.commits == 3
    # the gold patch is the chain: git am on the base checkout ends at the newest commit's tree
    work = tmp_path / "work"
    checkout_base(task, work, local.cache_dir)
    env = {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    subprocess.run(["git", "am"], cwd=work, input=gold, check=True, env=env, capture_output=True)
    tree = subprocess.run(["git", "rev-parse", "HEAD^{tree}"], cwd=work, capture_output=True, text=True).stdout
    want = subprocess.run(
        ["git", "rev-parse", f"{chain.commits[-1]}^{{tree}}"], cwd=chain.path, capture_output=True, text=True
    ).stdout
    assert tree == want


def test_gitgoodbench_bad_chains(chain, local, repo_dir):
    off = gitgoodbench_chain_row(
        chain, id="off", scenario={"file": "notes.txt", "oldest_commit": chain.base, "newest_commit": chain.commits[-1]}
    )
    single = gitgoodbench_chain_row(
        chain,
        id="single",
        scenario={"file": "notes.txt", "oldest_commit": chain.commits[0], "newest_commit": chain.commits[0]},
    )
    nofile = gitgoodbench_chain_row(
        chain, id="nofile", scenario={"oldest_commit": chain.commits[0], "newest_commit": chain.commits[-1]}
    )
    with pytest.raises(DatasetError) as info:
        imported("gitgoodbench", [off, single, nofile], local, repo_dir)
    text = str(info.value)
    assert f"GitGoodBench sample off: the oldest commit {chain.base[:12]} has 0 parents" in text
    assert "GitGoodBench sample single: the chain is one commit" in text
    assert "GitGoodBench sample nofile: scenario.file must name the file" in text


def test_gitgoodbench_lists_other_files_than_git_conflicts_in(notes, local, repo_dir):
    sc = json.loads(gitgoodbench_row(notes)["scenario"])
    sc["files_in_merge_conflict"] = ["notes.txt"]
    report, ts = imported("gitgoodbench", [gitgoodbench_row(notes, scenario=sc, difficulty="trivial")], local, repo_dir)
    task = ts.get("acme_notes_merge_0001")
    assert task.check.paths == ["authors.txt", "notes.txt"]  # every conflicted file is compared
    assert task.metadata.difficulty is None
    assert any("git's merge here conflicts in authors.txt, notes.txt" in n for n in report.outcomes[0].notes)


# --- the CLI without Docker --------------------------------------------------------------------
@pytest.fixture
def run_cli(monkeypatch, tmp_path):
    """`grader ...` through click, with its cache in this test's directory."""
    from grader.config import _from_env

    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "cli-cache"))
    _from_env.cache_clear()  # the environment is read once per process
    yield lambda *args: CliRunner().invoke(main, list(args), catch_exceptions=False)
    _from_env.cache_clear()


def test_cli_dataset_error_is_one_clean_line(run_cli, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instance_id": "a"}\n{oops\n')
    result = run_cli("tasks", "import", "swebench", str(bad), "--suite", "s", "--tasks-dir", str(tmp_path))
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    # the terminal may wrap a long temporary path (pytest-xdist's) anywhere, even mid-word
    expected = f"error: {bad}:2: not valid JSON: Expecting property name enclosed in double quotes (column 2)"
    assert "".join(result.output.split()) == "".join(expected.split())


def test_cli_without_validation_lists_kept_and_not_converted(run_cli, calc, repo_dir, tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        json.dumps(swebench_row(calc))
        + "\n"
        + json.dumps(swebench_row(calc, instance_id="acme__calc-2", python=None))
        + "\n"
    )
    result = run_cli(
        "tasks",
        "import",
        "swebench",
        str(rows),
        "--suite",
        "swe",
        "--repo-dir",
        str(repo_dir),
        "--no-validate",
        "--skip-broken",
        "--json",
        "--tasks-dir",
        str(tmp_path / "tasks"),
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[: result.output.rindex("}") + 1])
    assert [(t["task_id"], t["status"]) for t in report["tasks"]] == [("acme__calc-1", "kept, not validated")]
    assert report["not_converted"][0]["source_id"] == "acme__calc-2"
    assert report["out"] == str(tmp_path / "tasks" / "swe")
    assert "1 of 2 task(s) kept" in result.output
    assert run_cli("tasks", "import", "swebench", str(rows), "--tasks-dir", str(tmp_path)).exit_code == 2  # no --suite


# --- lists derived by running the tests (--derive-lists) --------------------------------------------
def test_a_row_without_lists_is_refused_unless_they_are_derived(calc, local, repo_dir):
    row = swebench_row(calc, FAIL_TO_PASS=None, PASS_TO_PASS=None)
    with pytest.raises(DatasetError, match="FAIL_TO_PASS is missing or empty .--derive-lists N"):
        imported("swebench", [row], local, repo_dir, suite="swe")
    # asked for, but without validation nothing can run the tests: reported, not kept
    report, ts = imported("swebench", [row], local, repo_dir, suite="swe", derive_lists=2)
    [o] = report.outcomes
    assert o.status == "rejected" and o.problems == [
        "no FAIL_TO_PASS: its lists are derived by grading, which was not asked for"
    ]
    # a row that gives one list keeps to it: only a row with neither is derived
    given = swebench_row(calc, FAIL_TO_PASS="[]")
    with pytest.raises(DatasetError, match="FAIL_TO_PASS is missing or empty"):
        imported("swebench", [given], local, repo_dir, suite="swe", derive_lists=2)


def test_lists_cannot_be_derived_from_an_exit_status(calc, local, repo_dir):
    row = swebench_row(calc, FAIL_TO_PASS=None, PASS_TO_PASS=None, test_cmd="make check")
    with pytest.raises(DatasetError, match="gives no per-test outcomes to derive them from"):
        imported("swebench", [row], local, repo_dir, suite="swe", derive_lists=1)
