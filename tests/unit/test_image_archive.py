"""Image archives without an engine (grader/image_archive.py): the file named by its
sha256, the manifest read back and checked, an import refused before anything is loaded
when the hash is not the one expected, and a load that tags what the manifest does not
say; and the worker's check of an instance image (grader/images.py: instance_problems),
through the grading pipeline: an image it cannot verify is ERROR, never a verdict."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from grader import image_archive as ia
from grader.config import get_settings
from grader.errors import ImageError
from grader.images import Images, instance_problems
from grader.pipeline import Grader
from grader.sandbox.fake import FakeRun, FakeSandbox
from grader.tasks.loader import TaskSet
from grader.tasks.prepare import prepare
from grader.verdict import Verdict

ENV_ID = "sha256:" + "e" * 64
TASK_ID = "sha256:" + "7" * 64
BASE_ID = "sha256:" + "b" * 64
ENTRIES = [
    ia.Entry("grader/base:bookworm", BASE_ID, "base", env="python-3.11"),
    ia.Entry("grader/env-python-3.11:0123456789abcdef", ENV_ID, "env", env="python-3.11"),
    ia.Entry("grader/task-mini:fedcba9876543210", TASK_ID, "task", env="python-3.11", task="mini"),
]
SAVED = b"pretend this is docker save's tar stream\n" * 1000


def _save(write) -> None:
    for i in range(0, len(SAVED), 4096):
        write(SAVED[i : i + 4096])


def _archive(tmp_path: Path, entries=ENTRIES) -> Path:
    return ia.write_archive(tmp_path, entries, _save)


class Engine:
    """An engine that records what it loads and answers image ids from `ids`."""

    def __init__(self, ids: dict[str, str], lines: list[str] | None = None):
        self.ids, self.lines, self.loaded = ids, lines, None

    def load(self, chunks) -> list[str]:
        self.loaded = b"".join(chunks)
        return self.lines if self.lines is not None else [f"Loaded image: {r}" for r in self.ids]

    def image_id(self, ref: str) -> str | None:
        return self.ids.get(ref) if self.loaded is not None else None


class Host:
    def __init__(self, engine: Engine):
        self.engine = engine


def _right_ids() -> dict[str, str]:
    return {e.ref: e.id for e in ENTRIES}


# --- the file -----------------------------------------------------------------------------
def test_the_archive_is_named_by_its_sha256_and_is_a_plain_tar(tmp_path):
    path = _archive(tmp_path)
    assert path.name == f"grader-images-{hashlib.sha256(path.read_bytes()).hexdigest()}.tar"
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no partial file left
    with tarfile.open(path) as tar:
        assert tar.getnames() == ["images.tar", "manifest.json"]
        assert tar.extractfile("images.tar").read() == SAVED
        body = json.loads(tar.extractfile("manifest.json").read())
    assert body["images_tar"] == {"sha256": hashlib.sha256(SAVED).hexdigest(), "size": len(SAVED)}
    assert [i["kind"] for i in body["images"]] == ["base", "env", "task"]
    assert ia.read_manifest(path).images == ENTRIES


def test_the_same_images_make_the_same_archive(tmp_path):
    assert _archive(tmp_path / "a").name == _archive(tmp_path / "b").name


def test_a_failed_save_leaves_nothing(tmp_path):
    def broken(write):
        write(b"half")
        raise ImageError("the engine went away")

    with pytest.raises(ImageError):
        ia.write_archive(tmp_path, ENTRIES, broken)
    assert list(tmp_path.iterdir()) == []


# --- import ------------------------------------------------------------------------------
def test_import_loads_and_checks_every_image(tmp_path):
    path = _archive(tmp_path)
    engine = Engine(_right_ids())
    manifest = ia.import_archive(Host(engine), path)
    assert engine.loaded == SAVED and manifest.images == ENTRIES


def test_a_changed_byte_is_refused_before_anything_is_loaded(tmp_path):
    path = _archive(tmp_path)
    data = bytearray(path.read_bytes())
    data[700] ^= 1  # inside images.tar
    path.write_bytes(bytes(data))
    engine = Engine(_right_ids())
    with pytest.raises(ImageError, match="refused, nothing loaded"):
        ia.import_archive(Host(engine), path)
    assert engine.loaded is None


def test_a_truncated_copy_is_refused(tmp_path):
    path = _archive(tmp_path)
    path.write_bytes(path.read_bytes()[:-2048])
    engine = Engine(_right_ids())
    with pytest.raises(ImageError, match="refused"):
        ia.import_archive(Host(engine), path)
    assert engine.loaded is None


def test_the_hash_given_wins_over_the_name(tmp_path):
    path = _archive(tmp_path)
    engine = Engine(_right_ids())
    with pytest.raises(ImageError, match="refused"):
        ia.import_archive(Host(engine), path, sha256="0" * 64)
    assert engine.loaded is None
    renamed = path.rename(tmp_path / "images.tar")
    with pytest.raises(ImageError, match="--sha256"):
        ia.import_archive(Host(engine), renamed)
    with pytest.raises(ImageError, match="64 hexadecimal"):
        ia.import_archive(Host(engine), renamed, sha256="abc")
    digest = hashlib.sha256(renamed.read_bytes()).hexdigest()
    ia.import_archive(Host(engine), renamed, sha256=digest.upper())
    assert engine.loaded == SAVED


def test_images_tar_must_be_what_the_manifest_hashed(tmp_path):
    """A file renamed to its own new hash passes the first check; the manifest's hash of
    images.tar still stands between it and the engine's tags."""
    path = _archive(tmp_path)
    with tarfile.open(path) as tar:
        manifest = tar.extractfile("manifest.json").read()
    forged = tmp_path / "forged.tar"
    with tarfile.open(forged, "w") as tar:
        for name, data in (("images.tar", SAVED.replace(b"pretend", b"PRETEND", 1)), ("manifest.json", manifest)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    named = forged.rename(tmp_path / f"grader-images-{hashlib.sha256(forged.read_bytes()).hexdigest()}.tar")
    with pytest.raises(ImageError, match="not what its manifest hashed"):
        ia.import_archive(Host(Engine(_right_ids())), named)


def test_a_reference_that_names_another_image_after_the_load_is_refused(tmp_path):
    path = _archive(tmp_path)
    ids = {**_right_ids(), ENTRIES[2].ref: "sha256:" + "9" * 64}
    with pytest.raises(ImageError, match="grader/task-mini:fedcba9876543210 is sha256:999"):
        ia.import_archive(Host(Engine(ids)), path)


def test_an_image_the_manifest_does_not_list_is_refused(tmp_path):
    path = _archive(tmp_path)
    lines = [f"Loaded image: {e.ref}" for e in ENTRIES] + ["Loaded image: grader/task-other:0000000000000000"]
    with pytest.raises(ImageError, match="task-other.*does not list"):
        ia.import_archive(Host(Engine(_right_ids(), lines)), path)


def test_not_an_archive(tmp_path):
    path = tmp_path / "junk.tar"
    path.write_bytes(b"x" * 4096)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(ImageError, match="not a readable archive"):
        ia.import_archive(Host(Engine({})), path, sha256=digest)


# --- the manifest ---------------------------------------------------------------------------
def _manifest(**over) -> bytes:
    body = json.loads(ia.Manifest(images=ENTRIES, images_sha256="a" * 64, images_size=3).to_bytes())
    body.update(over)
    return json.dumps(body).encode()


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"{", "not JSON"),
        (_manifest(format=2), "not format 1"),
        (_manifest(images_tar={"sha256": "a" * 63, "size": 3}), "images_tar"),
        (_manifest(images_tar={"sha256": "a" * 64, "size": True}), "images_tar"),
        (_manifest(images=[]), "no images"),
        (_manifest(images=[{"ref": "library/python:3", "id": TASK_ID, "kind": "task"}]), "outside grader/"),
        (_manifest(images=[{"ref": "grader/x:1", "id": "sha256:zz", "kind": "task"}]), "no valid image id"),
        (_manifest(images=[{"ref": "grader/x:1", "id": TASK_ID, "kind": "tool"}]), "unknown kind"),
        (_manifest(images=[{"ref": "grader/x:1", "id": TASK_ID, "kind": "task", "cmd": "x"}]), "unreadable"),
        (_manifest(images=[{"ref": "grader/x:1", "id": TASK_ID, "kind": "task"}] * 2), "twice"),
    ],
)
def test_a_bad_manifest_is_named(body, why):
    with pytest.raises(ImageError, match=why):
        ia.Manifest.parse(body)


# --- the worker's check of an instance image ------------------------------------------------
ENV_FACTS = {
    "id": ENV_ID,
    "labels": {"grader.kind": "env", "grader.env": "python-3.11", "grader.hash": "0123456789abcdef"},
    "layers": ["sha256:l1", "sha256:l2"],
}


def _instance(**labels) -> dict:
    base = {
        "grader.kind": "task",
        "grader.env": "python-3.11",
        "grader.hash": "0123456789abcdef",
        "grader.task": "mini",
        "grader.task_hash": "t" * 64,
        "grader.env_image": ENV_ID,
    }
    return {"id": TASK_ID, "labels": {**base, **labels}, "layers": ["sha256:l1", "sha256:l2", "sha256:l3"]}


def _problems(facts, env_facts=ENV_FACTS):
    return instance_problems(
        facts, env_facts, env="python-3.11", env_hash="0123456789abcdef", task_id="mini", task_hash="t" * 64
    )


def test_an_instance_image_that_says_what_its_tag_says_verifies():
    assert _problems(_instance()) == []


@pytest.mark.parametrize(
    ("facts", "env_facts", "why"),
    [
        (_instance(**{"grader.task_hash": "u" * 64}), ENV_FACTS, "built for task definition uuu"),
        (_instance(**{"grader.task": "other"}), ENV_FACTS, "not labelled as task mini"),
        (_instance(**{"grader.kind": "env"}), ENV_FACTS, "not labelled as task mini"),
        (_instance(**{"grader.env_image": "sha256:" + "f" * 64}), ENV_FACTS, "built on sha256:fff"),
        ({**_instance(), "layers": ["sha256:l1", "sha256:lX", "sha256:l3"]}, ENV_FACTS, "layers do not start"),
        (_instance(), {**ENV_FACTS, "layers": []}, "layers do not start"),
        (_instance(), {**ENV_FACTS, "labels": {**ENV_FACTS["labels"], "grader.hash": "1" * 16}}, "built from 1111"),
        (_instance(), {**ENV_FACTS, "labels": {**ENV_FACTS["labels"], "grader.env": "c"}}, "environment python-3.11"),
    ],
)
def test_an_instance_image_that_does_not_is_named(facts, env_facts, why):
    problems = _problems(facts, env_facts)
    assert len(problems) >= 1 and any(why in p for p in problems), problems


class Labelled:
    """An engine that has the environment's and the task's images, the task's labelled
    with `task_labels` over the right ones."""

    def __init__(self, images: Images, task, cache: Path, **task_labels):
        self.images, self.task, self.cache, self.task_labels = images, task, cache, task_labels

    def image_id(self, ref: str) -> str | None:
        return BASE_ID if ref.startswith("grader/base:") else None

    def image_facts(self, ref: str) -> dict | None:
        env = self.images.environment(self.task.environment)
        env_tag = self.images.env_tag(env)
        env_facts = {
            "id": ENV_ID,
            "labels": {"grader.kind": "env", "grader.env": env.name, "grader.hash": env_tag.rsplit(":", 1)[1]},
            "layers": ["sha256:l1"],
        }
        if ref == env_tag:
            return env_facts
        prepared = prepare(self.task, self.cache)
        if ref == self.images.instance_tag(prepared, ENV_ID):
            labels = {
                "grader.kind": "task",
                "grader.task": self.task.id,
                "grader.task_hash": prepared.task_hash,
                "grader.env_image": ENV_ID,
                **self.task_labels,
            }
            return {"id": TASK_ID, "labels": labels, "layers": ["sha256:l1", "sha256:l2"]}
        return None


def _grade(settings, tmp_path, **task_labels):
    st = get_settings(
        tasks_dir=settings.tasks_dir,
        environments_dir=settings.environments_dir,
        cache_dir=tmp_path,
        build_missing_images=False,
    )
    task = TaskSet(st.tasks_dir).get("mini")
    images = Images(st)
    images.engine = Labelled(images, task, tmp_path, **task_labels)  # type: ignore[assignment]
    ran = []
    sandbox = FakeSandbox(lambda spec: ran.append(spec) or FakeRun(report={}))
    return Grader(st, sandbox=sandbox, images=images).grade(task, b""), ran


def test_the_worker_grades_on_an_image_it_verifies(settings, tmp_path):
    result, ran = _grade(settings, tmp_path)
    assert result.provenance.image_id == TASK_ID and len(ran) == 1


def test_the_worker_refuses_an_image_it_cannot_verify_as_error(settings, tmp_path):
    result, ran = _grade(settings, tmp_path, **{"grader.task_hash": "0" * 64})
    assert result.verdict is Verdict.ERROR and ran == []  # no container ran: no verdict of the patch
    assert "cannot be verified by hash" in result.error and "built for task definition 000" in result.error
