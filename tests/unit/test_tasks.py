import json
import subprocess

import pytest
import yaml

from grader.errors import TaskError, TaskNotFound
from grader.tasks.loader import TaskSet, load_task_file
from grader.tasks.model import Task
from grader.tasks.prepare import checkout_base, prepare

SHA = "a" * 40


def make(**over):
    data = {
        "id": "t-1",
        "instruction": "do it",
        "repo": {"url": "https://example.invalid/r.git", "commit": SHA},
        "environment": "python-3.11",
        "check": {
            "type": "tests",
            "hidden_tests": {"tests/test_x.py": "hidden.py"},
            "fail_to_pass": ["tests/test_x.py::test_a"],
        },
    }
    data.update(over)
    return data


def test_valid_task_and_defaults():
    t = Task(**make())
    assert t.limits.timeout == 60 and t.check.runner == "pytest" and t.metadata.suite == "default"


@pytest.mark.parametrize(
    "bad, words",
    [
        ({"id": "has space"}, "task ids"),
        ({"repo": {"url": "u", "commit": "abc"}}, "40-character"),
        ({"repo": {"url": "u", "path": "p", "commit": SHA}}, "exactly one"),
        ({"check": {"type": "tests", "runner": "command"}}, "needs a command"),
        ({"check": {"type": "exact_match"}}, "give files"),
        ({"check": {"type": "output", "command": "x", "expected": "e", "threshold": 1.5}}, "less than or equal"),
        ({"check": {"type": "nonsense"}}, "type"),
        ({"prompts": {"verbose": "x"}}, "unknown prompt variants"),
        ({"surprise": 1}, "Extra inputs"),
        ({"limits": {"memory": "lots"}}, "pattern"),
    ],
)
def test_invalid_tasks_say_why(bad, words):
    with pytest.raises(Exception) as exc:
        Task(**make(**bad))
    assert words in str(exc.value)


def test_public_view_leaks_nothing_private():
    t = Task(**make(gold_patch="gold.patch"))
    text = json.dumps(t.public_view())
    for secret in ("hidden.py", "tests/test_x.py", "gold.patch", "fail_to_pass", "test_a"):
        assert secret not in text


@pytest.mark.parametrize(
    "check, decided_by",
    [
        ({"type": "tests", "hidden_tests": {"t.py": "h.py"}}, "test report"),
        ({"type": "tests", "runner": "command", "command": "make test"}, "exit status"),
        ({"type": "tests", "runner": "command", "command": "make test", "junit": "r.xml"}, "exit status"),
        (
            {"type": "tests", "runner": "command", "command": "make test", "junit": "r.xml", "fail_to_pass": ["t::a"]},
            "test report",
        ),
        ({"type": "exact_match", "files": {"a": "b"}}, "file contents"),
        ({"type": "output", "command": "x", "expected": "e"}, "output"),
    ],
)
def test_public_view_says_what_decides(check, decided_by):
    # a command task decided by its exit status alone can be faked with os._exit(0): it says so
    assert Task(**make(check=check)).public_view()["decided_by"] == decided_by


def test_loader_finds_tasks_and_rejects_duplicates(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "task.yaml").write_text(yaml.safe_dump(make(id="one")))
    (tmp_path / "a" / "notes.yaml").write_text("just: data\n")  # not a task: ignored
    ts = TaskSet(tmp_path)
    assert ts.ids() == ["one"]
    with pytest.raises(TaskNotFound):
        ts.get("two")
    (tmp_path / "b.yml").write_text(yaml.safe_dump(make(id="one")))
    with pytest.raises(TaskError, match="defined twice"):
        TaskSet(tmp_path)


def test_broken_task_file_is_an_error(tmp_path):
    p = tmp_path / "task.yaml"
    p.write_text(yaml.safe_dump(make(check={"type": "tests", "runner": "command"})))
    with pytest.raises(TaskError, match="invalid task"):
        load_task_file(p)


def test_definition_hash_covers_referenced_files(tmp_path):
    (tmp_path / "hidden.py").write_text("def test_a(): pass\n")
    (tmp_path / "task.yaml").write_text(yaml.safe_dump(make()))
    h1 = load_task_file(tmp_path / "task.yaml").definition_hash()
    assert h1 == load_task_file(tmp_path / "task.yaml").definition_hash()
    (tmp_path / "hidden.py").write_text("def test_a(): assert 0\n")
    assert load_task_file(tmp_path / "task.yaml").definition_hash() != h1


def test_missing_referenced_file_is_a_task_error(tmp_path):
    (tmp_path / "task.yaml").write_text(yaml.safe_dump(make()))
    with pytest.raises(TaskError, match="does not exist"):
        load_task_file(tmp_path / "task.yaml").definition_hash()


def test_prepare_strips_future_history(mini, mini_tasks_dir, tmp_path):
    # A later commit (the "fix") in the source must not reach the prepared base.
    from helpers.mini import git

    src = tmp_path / "src"
    git("clone", "-q", str(mini.src), str(src), cwd=tmp_path)
    (src / "calc" / "__init__.py").write_text("# the future fix\n")
    git("commit", "-qam", "future", cwd=src)
    future = git("rev-parse", "HEAD", cwd=src).strip()
    (tmp_path / "t").mkdir()
    git("bundle", "create", "-q", str(tmp_path / "t" / "r.bundle"), "--all", cwd=src)
    for name in ("gold.patch", "test_mean.py"):
        (tmp_path / "t" / name).write_bytes((mini_tasks_dir / "mini" / name).read_bytes())
    base = TaskSet(mini_tasks_dir).get("mini")
    task = base.model_copy(update={"repo": base.repo.model_copy(update={"bundle": "r.bundle"}), "root": tmp_path / "t"})
    prepared = prepare(task, tmp_path / "cache")
    log = subprocess.run(["git", "log", "--all", "--format=%H"], cwd=prepared.repo, capture_output=True, text=True)
    assert log.stdout.split() == [mini.base]
    missing = subprocess.run(["git", "cat-file", "-e", future], cwd=prepared.repo, capture_output=True)
    assert missing.returncode != 0
    assert list(prepared.hidden_manifest()) == ["tests/test_mean.py"]
    assert not (prepared.repo / "tests" / "test_mean.py").exists()
    assert prepare(task, tmp_path / "cache").root == prepared.root  # cached


def test_checkout_for_submitters(mini_tasks_dir, tmp_path):
    task = TaskSet(mini_tasks_dir).get("mini")
    checkout_base(task, tmp_path / "work", tmp_path / "cache")
    assert (tmp_path / "work" / "calc" / "__init__.py").read_text().startswith("def mean")


# --- suite.yaml: defaults for the task files beneath it ------------------------------------------


def _suite(tmp_path, layout: dict[str, dict]) -> TaskSet:
    """Write `layout` (relative path -> YAML mapping) under tmp_path and load it."""
    for rel, data in layout.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(data))
    return TaskSet(tmp_path)


def test_suite_default_applies_to_every_task_beneath_it(tmp_path):
    ts = _suite(
        tmp_path,
        {
            "s/suite.yaml": {"defaults": {"feedback": "full"}},
            "s/a/task.yaml": make(id="a"),
            "s/deep/b/task.yaml": make(id="b"),
            "other/c/task.yaml": make(id="c"),
        },
    )
    assert {t.id: t.feedback for t in ts} == {"a": "full", "b": "full", "c": "tests"}  # c: the model's default
    # and the default is part of the definition: the hash of a task changes with its suite's policy
    (tmp_path / "s" / "a" / "hidden.py").write_text("def test_a(): pass\n")
    before = ts.get("a").definition_hash()
    (tmp_path / "s" / "suite.yaml").write_text(yaml.safe_dump({"defaults": {"feedback": "verdict"}}))
    assert TaskSet(tmp_path).get("a").definition_hash() != before


def test_a_key_the_task_sets_wins_over_the_suite(tmp_path):
    ts = _suite(
        tmp_path,
        {
            "suite.yaml": {
                "defaults": {"feedback": "verdict", "limits": {"memory": "2g"}, "protect": {"paths": ["data/*"]}}
            },
            "a/task.yaml": make(id="a", feedback="full", limits={"timeout": 5}),
            "b/task.yaml": make(id="b", protect={"tests": False}),
        },
    )
    a, b = ts.get("a"), ts.get("b")
    assert a.feedback == "full" and b.feedback == "verdict"
    # mappings merge key by key: the task's timeout and the suite's memory
    assert (a.limits.timeout, a.limits.memory) == (5, "2g")
    assert (b.protect.tests, b.protect.paths) == (False, ["data/*"])


def test_the_nearest_suite_wins(tmp_path):
    ts = _suite(
        tmp_path,
        {
            "suite.yaml": {"defaults": {"feedback": "verdict", "limits": {"memory": "2g"}}},
            "inner/suite.yaml": {"defaults": {"feedback": "full"}},
            "inner/a/task.yaml": make(id="a"),
            "b/task.yaml": make(id="b"),
        },
    )
    a, b = ts.get("a"), ts.get("b")
    assert (a.feedback, a.limits.memory) == ("full", "2g")  # the outer suite's other keys still apply
    assert (b.feedback, b.limits.memory) == ("verdict", "2g")


def test_a_suite_file_above_the_tasks_directory_is_not_read(tmp_path):
    _suite(tmp_path, {"suite.yaml": {"defaults": {"feedback": "full"}}, "tasks/a/task.yaml": make(id="a")})
    assert TaskSet(tmp_path / "tasks").get("a").feedback == "tests"
    assert TaskSet(tmp_path).get("a").feedback == "full"


@pytest.mark.parametrize(
    "suite, words",
    [
        ({"defaults": {"feedback": "full"}, "feedbacks": "full"}, "unknown key(s) ['feedbacks']"),
        ({"defaults": {"instruction": "x"}}, "defaults has unknown key(s) ['instruction']"),
        ({"defaults": {"gold_patch": "g.patch"}}, "defaults has unknown key(s) ['gold_patch']"),
        ({"defaults": {"feedback": "everything"}}, "invalid default for feedback"),
        ({"defaults": {"limits": {"timeout": -1}}}, "invalid default for limits"),
        ({"defaults": ["feedback"]}, "defaults is a mapping"),
        (["defaults"], "a suite file is a YAML mapping"),
    ],
)
def test_a_bad_suite_file_is_a_task_error_naming_it(tmp_path, suite, words):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "task.yaml").write_text(yaml.safe_dump(make(id="a")))
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite))
    with pytest.raises(TaskError) as exc:
        TaskSet(tmp_path)
    assert words in str(exc.value) and "suite.yaml" in str(exc.value)


def test_a_suite_file_is_never_a_task(tmp_path):
    # even one that looks like a task: it is read as a suite file, and refused as one
    _suite(tmp_path, {"a/task.yaml": make(id="a")})
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(make(id="s")))
    with pytest.raises(TaskError, match="unknown key"):
        TaskSet(tmp_path)


def test_the_example_suite_declares_full_feedback(examples):
    assert {t.feedback for t in examples} == {"full"}
    suite = yaml.safe_load((examples.dir / "suite.yaml").read_text())
    assert suite["defaults"] == {"feedback": "full"}
    # and the host's choice to serve the notes tasks together, knowingly (issue 18)
    assert ["notes-merge-release", "notes-merge-greeting"] in suite["serve_together"]


def test_validation_reports_tampering_evidence_on_an_honest_patch(mini_set):
    """A task whose own tests or conftest trip the canaries is not valid as it is."""
    from grader.validate import validate_task
    from grader.verdict import Provenance, Result, Verdict

    class Scripted:
        def grade(self, task, patch):
            gold = bool(patch)
            return Result(
                task_id=task.id,
                verdict=Verdict.PASS if gold else Verdict.FAIL,
                explanation="scripted",
                tampered=["a hidden canary test that must pass was not in the report"] if gold else [],
                provenance=Provenance(patch_sha256="x", grader_version="t"),
            )

    report = validate_task(Scripted(), mini_set.get("mini"), repeat=1)
    assert not report.ok
    assert report.problems == [
        "gold patch, run 1: tampering evidence on an honest patch: "
        "a hidden canary test that must pass was not in the report"
    ]


# --- the tasks directory: links and a missing one -------------------------------------------------


def test_a_suite_reached_through_a_symlink_is_loaded_with_every_suite_file_above_it(tmp_path):
    # a suite built outside the tasks directory (build/realworld) and linked into it
    _suite(
        tmp_path / "build",
        {
            "real/suite.yaml": {"defaults": {"limits": {"memory": "2g"}}},
            "real/a/task.yaml": make(id="a"),
            "real/b/task.yml": make(id="b"),
        },
    )
    _suite(tmp_path / "tasks", {"suite.yaml": {"defaults": {"feedback": "full"}}, "own/c/task.yaml": make(id="c")})
    (tmp_path / "tasks" / "linked").symlink_to(tmp_path / "build" / "real", target_is_directory=True)
    (tmp_path / "tasks" / "own" / "loop").symlink_to(tmp_path / "tasks", target_is_directory=True)  # no endless walk
    ts = TaskSet(tmp_path / "tasks")
    assert ts.ids() == ["a", "b", "c"]
    a = ts.get("a")
    assert (a.feedback, a.limits.memory) == ("full", "2g")  # the suite file above the link and the linked suite's own
    assert ts.get("c").limits.memory == "1g"
    assert a.root == tmp_path / "build" / "real" / "a"  # its files resolve where they really are


def test_a_missing_tasks_directory_names_the_setting_and_the_option(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TaskError) as exc:
        TaskSet(tmp_path / "nowhere")
    assert "GRADER_TASKS_DIR" in str(exc.value) and "--tasks-dir" in str(exc.value)
    with pytest.raises(TaskError, match=f"tasks directory tasks \\(in {tmp_path}\\) does not exist"):
        TaskSet("tasks")
