"""A task's starting repository for a team that has no task folders: the bundle the
service serves (exactly the base commit's history, and the merge commit's), a checkout
from it that is the local checkout, and the public view that says how to get it. The
route that serves it is tests/service/test_task_repository_service.py; the CLI's side,
tests/*/test_tasks_remote*.py."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from grader.tasks.bundle import repository_bundle
from grader.tasks.loader import TaskSet
from grader.tasks.prepare import checkout_base, checkout_bundle
from helpers.repos import EXAMPLES, blob_id, git, objects, reachable, state, unbundle


# --- the bundle: the base commit's history and nothing else -------------------------------------
@pytest.fixture
def later_history(tmp_path, mini, mini_tasks_dir):
    """The mini task over a source repository that also holds what came later: the fix
    (with the hidden tests committed, as upstream would), another branch and a tag."""
    from helpers.mini import FIXED, HIDDEN_TEST
    from helpers.mini import git as cgit

    src = tmp_path / "src"
    cgit("clone", "-q", str(mini.src), str(src), cwd=tmp_path)
    (src / "calc" / "__init__.py").write_text(FIXED)
    (src / "tests" / "test_mean.py").write_text(HIDDEN_TEST)
    cgit("add", "-A", cwd=src)
    cgit("commit", "-qm", "the fix", cwd=src)
    cgit("tag", "v-fixed", cwd=src)
    cgit("checkout", "-qb", "side", mini.base, cwd=src)
    (src / "README.md").write_text("another branch\n")
    cgit("commit", "-qam", "side", cwd=src)
    (tmp_path / "t").mkdir()
    cgit("bundle", "create", "-q", str(tmp_path / "t" / "r.bundle"), "--all", cwd=src)
    for name in ("gold.patch", "test_mean.py"):
        shutil.copy(mini_tasks_dir / "mini" / name, tmp_path / "t" / name)
    base = TaskSet(mini_tasks_dir).get("mini")
    task = base.model_copy(update={"repo": base.repo.model_copy(update={"bundle": "r.bundle"}), "root": tmp_path / "t"})
    return task, src


def test_the_bundle_holds_exactly_the_base_commits_history(later_history, mini, tmp_path):
    from helpers.mini import FIXED, HIDDEN_TEST

    task, src = later_history
    bundle = repository_bundle(task, tmp_path / "cache")
    heads = git("bundle", "list-heads", str(bundle.path), cwd=tmp_path).split("\n")
    assert sorted(filter(None, heads)) == [f"{mini.base} HEAD", f"{mini.base} refs/heads/base"]
    got = objects(unbundle(bundle.path, tmp_path / "unbundled.git"))
    assert got == reachable(src, mini.base)
    everything = objects(src)
    later = {git("rev-parse", ref, cwd=src).strip() for ref in ("main", "side", "v-fixed")}
    private = {blob_id(HIDDEN_TEST.encode()), blob_id(FIXED.encode())}  # the hidden tests, the gold's new content
    assert later | private <= everything  # all in the source: the bundle left them out
    assert not (later | private) & got
    assert bundle.sha256 == hashlib.sha256(bundle.path.read_bytes()).hexdigest() and bundle.merge is None
    # built once per definition hash: asked again, the same file, not rebuilt
    mtime = bundle.path.stat().st_mtime_ns
    assert repository_bundle(task, tmp_path / "cache") == bundle and bundle.path.stat().st_mtime_ns == mtime
    # the same commits give the same bytes, in another cache (another host)
    assert repository_bundle(task, tmp_path / "other-cache").sha256 == bundle.sha256


def test_a_merge_tasks_bundle_holds_both_commits_history_and_not_the_resolution(tmp_path):
    task = EXAMPLES.get("notes-merge-release")
    bundle = repository_bundle(task, tmp_path / "cache")
    assert (bundle.commit, bundle.merge) == (task.repo.commit, task.repo.merge)
    heads = sorted(filter(None, git("bundle", "list-heads", str(bundle.path), cwd=tmp_path).split("\n")))
    assert heads == sorted(
        [f"{task.repo.commit} HEAD", f"{task.repo.commit} refs/heads/base", f"{task.repo.merge} refs/heads/merge"]
    )
    source = unbundle(task.file(task.repo.bundle), tmp_path / "source.git")
    got = objects(unbundle(bundle.path, tmp_path / "unbundled.git"))
    assert got == reachable(source, task.repo.commit, task.repo.merge)
    resolution = task.check.expected_commit
    expected_blobs = {git("rev-parse", f"{resolution}:{rel}", cwd=source).strip() for rel in task.check.paths}
    assert resolution in objects(source) and expected_blobs <= objects(source)
    assert resolution not in got and not expected_blobs & got


@pytest.mark.parametrize("task_id", ["calc-mean-empty", "notes-merge-release", "notes-merge-greeting"])
def test_a_checkout_from_the_bundle_is_the_local_checkout(task_id, tmp_path):
    """Base commit detached, no refs, no reflog, and a conflict task's merge in progress
    with the same markers, index and MERGE_HEAD: the same `git diff` either way."""
    task = EXAMPLES.get(task_id)
    checkout_base(task, tmp_path / "local", tmp_path / "cache")
    bundle = repository_bundle(task, tmp_path / "cache")
    checkout_bundle(bundle.path, tmp_path / "remote", bundle.commit, bundle.merge, task_id=task_id)
    local, remote = state(tmp_path / "local"), state(tmp_path / "remote")
    assert remote == local
    assert remote["detached"] and remote["refs"] == "" and remote["reflog"] == ""
    assert remote["head"].strip() == task.repo.commit
    if task.repo.merge:
        assert remote["merge"]["MERGE_HEAD"].decode().strip() == task.repo.merge
        assert " 3\t" in remote["index"]  # unmerged entries: a real conflict
        assert any(b"<<<<<<< HEAD" in data for data in remote["files"].values())


def test_the_public_view_says_how_to_get_the_code():
    plain, merge = EXAMPLES.get("calc-mean-empty"), EXAMPLES.get("notes-merge-release")
    repo = plain.public_view()["repo"]
    assert repo["download"] == "/v1/tasks/calc-mean-empty/repository"
    assert repo["checkout"] == "grader tasks checkout calc-mean-empty DIR"
    assert repo["merge"] is None and "patch" not in repo
    assert repo["by_hand"][-1] == f"git checkout --detach {plain.repo.commit}"
    repo = merge.public_view()["repo"]
    assert repo["conflicted_merge"] and repo["merge"] == merge.repo.merge
    assert repo["by_hand"][-1].endswith(f"merge --no-commit --no-ff {merge.repo.merge}")
    assert "git add -u" in repo["patch"]
    text = json.dumps(merge.public_view())
    assert merge.check.expected_commit not in text and "gold" not in text
