"""Images: offline base images, environment images and per-task instance images.

Three layers, each tagged by what it is made of, so a rebuild with nothing changed is a
lookup and a changed input is a new tag:

- base `grader/base:<suite>`: a Debian root filesystem made by debootstrap and
  `docker import`, for sites with no registry. With a registry, an environment's
  Dockerfile may use any ordinary `FROM` instead.
- environment `grader/env-<name>:<hash>`: `environments/<name>/Dockerfile`; the hash
  covers every file of the directory, the CA bundle given to the build and the id of a
  `grader/base` image it starts from.
- instance `grader/task-<id>:<hash>`: the environment plus the task's repository at its
  base state with its dependencies installed, and the hidden tests in a root-only
  directory. Grading only starts a container from it.
"""

from __future__ import annotations

import hashlib
import io
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.box.paths import GRADER_DIR, HIDDEN_DIR, REPO_DIR, UID
from grader.config import Settings
from grader.errors import ImageError, ImageUnverified
from grader.sandbox.docker.engine import DockerEngine
from grader.tasks.model import Task
from grader.tasks.prepare import PreparedTask, prepare

BASE_REPO = "grader/base"
KIND_LABEL = "grader.kind"
LAYOUT_VERSION = "3"  # bump when the instance image layout changes
CA_FILE = "grader-ca.crt"
_FROM = re.compile(r"^\s*FROM\s+(?:--platform=\S+\s+)?(\S+)", re.I | re.M)
_ARG = re.compile(r"^\s*ARG\s+(\w+)=(\S+)", re.I | re.M)

Log = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def debian_mirror(settings: Settings) -> str:
    if settings.debian_mirror:
        return settings.debian_mirror
    for path in [Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list")]:
        if path.exists():
            for line in path.read_text().splitlines():
                if line.startswith("URIs:"):
                    return line.split()[1]
                if line.startswith("deb ") and "security" not in line:
                    return line.split()[1]
    raise ImageError("no Debian mirror found in apt's sources; set GRADER_DEBIAN_MIRROR")


def install_step(install: str, repo: str = REPO_DIR, uid: int = UID) -> str:
    """The shell command of an instance image's install layer: the task's install, then the
    repository made the user's, then what the install put in node_modules/ made root's and
    read-only (grader/box/runners/node_guard.py: no test process can change what node
    loads), each existing node_modules/.cache given to the user and the top one made. The
    install runs in a subshell: one that ends with `exit $s` (npm-real's, which put
    package.json back) would otherwise skip the rest."""
    return (
        f"({install}) && chown -R {uid}:{uid} {repo} && "
        f"find {repo} -name node_modules -type d -prune -exec sh -c "
        '\'for d; do chown -hR 0:0 "$d" && chmod -R go-w,ug-s "$d" && '
        f'if [ -d "$d/.cache" ]; then chown -hR {uid}:{uid} "$d/.cache"; fi; done\' sh {{}} + && '
        f"if [ -d {repo}/node_modules ]; then mkdir -p {repo}/node_modules/.cache && "
        f"chown {uid}:{uid} {repo}/node_modules/.cache; fi"
    )


@dataclass(frozen=True)
class Environment:
    name: str
    path: Path

    @property
    def repository(self) -> str:
        return f"grader/env-{self.name.lower()}"

    def dockerfile(self) -> str:
        return (self.path / "Dockerfile").read_text()

    def base_images(self) -> list[str]:
        """The FROM images, with ARG defaults substituted."""
        text = self.dockerfile()
        args = dict(_ARG.findall(text))
        out = []
        for ref in _FROM.findall(text):
            out.append(re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), ref))
        return out

    def files(self) -> list[Path]:
        return sorted(p for p in self.path.rglob("*") if p.is_file())


def instance_problems(
    facts: dict[str, Any], env_facts: dict[str, Any], *, env: str, env_hash: str, task_id: str, task_hash: str
) -> list[str]:
    """Why the image found under a task's instance tag cannot be trusted to be that task's
    instance image, if it cannot (an empty list when it can). The tag is the hash of the
    task's definition and its environment image's id; the image must say the same in its
    labels, and the environment image under the environment's tag must say it is that
    environment, built from the hashed directory, and be the bottom of the instance image:
    its layers, by content hash, first. Labels and layers are part of what an image's id
    hashes, and the engine checks layers against those hashes when it loads or builds one,
    so a wrong tag (`docker tag`, a stale or foreign archive) is found here, whatever way
    the image arrived."""
    labels, env_labels = facts.get("labels") or {}, env_facts.get("labels") or {}
    problems = []
    if env_labels.get(KIND_LABEL) != "env" or env_labels.get("grader.env") != env:
        problems.append(f"the environment image is not labelled as environment {env}")
    if env_labels.get("grader.hash") != env_hash:
        problems.append(f"the environment image was built from {env_labels.get('grader.hash')}, not {env_hash}")
    if labels.get(KIND_LABEL) != "task" or labels.get("grader.task") != task_id:
        problems.append(f"the image is not labelled as task {task_id}'s instance image")
    if labels.get("grader.task_hash") != task_hash:
        problems.append(f"it was built for task definition {labels.get('grader.task_hash')}, not {task_hash}")
    if labels.get("grader.env_image") != env_facts.get("id"):
        problems.append(f"it was built on {labels.get('grader.env_image')}, not on {env_facts.get('id')}")
    env_layers, layers = list(env_facts.get("layers") or []), list(facts.get("layers") or [])
    if not env_layers or layers[: len(env_layers)] != env_layers:
        problems.append("its layers do not start with the environment image's")
    return problems


class Images:
    """Builds and finds images. Every build is skipped when its tag already exists."""

    def __init__(self, settings: Settings, engine: DockerEngine | None = None):
        self.settings = settings
        self.engine = engine or DockerEngine()
        # instance image id -> the environment image's it was verified to be built FROM
        self.env_of: dict[str, str] = {}

    # --- environments ---------------------------------------------------------------
    def environments(self) -> list[Environment]:
        root = self.settings.environments_dir
        if not root.is_dir():
            raise ImageError(f"environments directory {root} does not exist")
        return [Environment(p.name, p) for p in sorted(root.iterdir()) if (p / "Dockerfile").is_file()]

    def environment(self, name: str) -> Environment:
        for env in self.environments():
            if env.name == name:
                return env
        raise ImageError(f"no environment {name!r} in {self.settings.environments_dir}")

    def _ca_bytes(self) -> bytes:
        ca = self.settings.ca_bundle
        if ca is None or str(ca) == "":
            return b""
        if not Path(ca).is_file():
            raise ImageError(f"the CA bundle {ca} (GRADER_CA_BUNDLE) does not exist")
        return Path(ca).read_bytes()

    def env_hash(self, env: Environment) -> str:
        h = hashlib.sha256()
        for path in env.files():
            h.update(str(path.relative_to(env.path)).encode() + b"\0")
            h.update(hashlib.sha256(path.read_bytes()).digest())
        h.update(b"ca\0" + hashlib.sha256(self._ca_bytes()).digest())
        for base in env.base_images():
            if base.startswith(BASE_REPO + ":"):
                h.update(b"base\0" + (self.engine.image_id(base) or "missing").encode())
        return h.hexdigest()[:16]

    def env_tag(self, env: Environment) -> str:
        return f"{env.repository}:{self.env_hash(env)}"

    def build_env(self, name: str, log: Log = _quiet) -> str:
        env = self.environment(name)
        for base in env.base_images():
            if base.startswith(BASE_REPO + ":") and self.engine.image_id(base) is None:
                self.bootstrap(base.split(":", 1)[1], log=log)
        tag = self.env_tag(env)
        existing = self.engine.image_id(tag)
        if existing:
            return existing
        log(f"building environment {name} as {tag}")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for path in env.files():
                tar.add(path, arcname=str(path.relative_to(env.path)))
            ca = self._ca_bytes()
            info = tarfile.TarInfo(CA_FILE)
            info.size = len(ca)
            tar.addfile(info, io.BytesIO(ca))
        return self.engine.build(
            buf.getvalue(),
            tag,
            log=log,
            labels={KIND_LABEL: "env", "grader.env": name, "grader.hash": tag.rsplit(":", 1)[1]},
        )

    # --- offline base images ----------------------------------------------------------
    def bootstrap(self, suite: str, *, force: bool = False, log: Log = _quiet) -> str:
        ref = f"{BASE_REPO}:{suite}"
        existing = self.engine.image_id(ref)
        if existing and not force:
            return existing
        if not shutil.which("debootstrap"):
            raise ImageError(f"{ref} is missing and debootstrap is not installed (apt-get install debootstrap)")
        mirror = debian_mirror(self.settings)
        log(f"bootstrapping {ref} from {mirror} with debootstrap (about a minute)")
        with tempfile.TemporaryDirectory(prefix="grader-bootstrap-") as tmp:
            rootfs = Path(tmp) / "rootfs"
            cmd = [
                "debootstrap",
                "--variant=minbase",
                "--include=python3,python3-venv,git,patch,ca-certificates",
                suite,
                str(rootfs),
                mirror,
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode:
                raise ImageError(f"debootstrap failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
            for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
                for p in (rootfs / cache).glob("*"):
                    if p.is_file():
                        p.unlink()
            tarball = Path(tmp) / "rootfs.tar"
            subprocess.run(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(tarball), "."], check=True)
            return self.engine.import_rootfs(
                tarball,
                BASE_REPO,
                suite,
                changes=[f"LABEL {KIND_LABEL}=base grader.suite={suite}", "ENV LANG=C.UTF-8", 'CMD ["/bin/bash"]'],
            )

    # --- instance images ------------------------------------------------------------
    def instance_tag(self, prepared: PreparedTask, env_image_id: str) -> str:
        h = hashlib.sha256(f"{prepared.task_hash}\0{env_image_id}\0{LAYOUT_VERSION}".encode()).hexdigest()[:16]
        return f"grader/task-{prepared.task.id.lower()}:{h}"

    def instance_image(
        self, task: Task, *, build: bool = True, log: Log = _quiet, task_hash: str | None = None
    ) -> tuple[str, PreparedTask]:
        """The instance image id for `task` (built if missing and `build`), and the prepared task."""
        prepared = prepare(task, self.settings.cache_dir, task_hash)
        env = self.environment(task.environment)
        env_tag = self.env_tag(env)
        env_facts = self.engine.image_facts(env_tag)
        if env_facts is None:
            if not build:
                raise ImageError(f"environment image for {env.name} is missing; run `grader env build {env.name}`")
            env_facts = self.engine.image_facts(self.build_env(env.name, log=log))
            if env_facts is None:
                raise ImageError(f"environment image {env_tag} was built but the engine does not find it")
        env_id = env_facts["id"]
        tag = self.instance_tag(prepared, env_id)
        facts = self.engine.image_facts(tag)
        if facts:
            problems = instance_problems(
                facts,
                env_facts,
                env=env.name,
                env_hash=env_tag.rsplit(":", 1)[1],
                task_id=task.id,
                task_hash=prepared.task_hash,
            )
            if problems:
                raise ImageUnverified(
                    f"instance image {tag} for task {task.id} cannot be verified by hash, so nothing is graded on "
                    f"it: {'; '.join(problems)}. Import a verified archive (`grader env import`) or remove the "
                    "image and build it again",
                    env.name,
                )
            self.env_of[str(facts["id"])] = env_id
            return str(facts["id"]), prepared
        if not build:
            raise ImageError(f"instance image {tag} for task {task.id} is missing; run `grader tasks build {task.id}`")
        log(f"building instance image {tag}")
        image_id = self._build_instance(prepared, env_id, tag, log)
        self.env_of[image_id] = env_id
        return image_id, prepared

    def _build_instance(self, prepared: PreparedTask, env_id: str, tag: str, log: Log) -> str:
        # Ownership is set as the files arrive (COPY --chown) or in the layer that made them
        # (the install's own RUN): a separate `RUN chown -R` would copy every file it touches
        # into a layer of its own, a whole prebuilt target/ or node_modules/ twice.
        lines = [
            f"FROM {env_id}",
            f"COPY --chown={UID}:{UID} repo {REPO_DIR}",
            f"COPY --chown=0:0 hidden {HIDDEN_DIR}",
            f"WORKDIR {REPO_DIR}",
        ]
        if prepared.task.install:
            lines.append(f"RUN {install_step(prepared.task.install)}")
        lines.append(f"RUN chown 0:0 {GRADER_DIR} && chmod -R go-rwx {GRADER_DIR}")
        dockerfile = ("\n".join(lines) + "\n").encode()
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo("Dockerfile")
            info.size = len(dockerfile)
            tar.addfile(info, io.BytesIO(dockerfile))
            tar.add(prepared.repo, arcname="repo")
            tar.add(prepared.hidden, arcname="hidden")
        return self.engine.build(
            buf.getvalue(),
            tag,
            log=log,
            labels={
                KIND_LABEL: "task",
                "grader.task": prepared.task.id,
                "grader.task_hash": prepared.task_hash,
                "grader.env_image": env_id,
            },
        )

    # --- listing and pruning ------------------------------------------------------------
    def listing(self) -> list[dict[str, Any]]:
        return self.engine.images(KIND_LABEL)

    def prune(self, tasks: list[Task], *, everything: bool = False, dry_run: bool = False) -> tuple[list[str], int]:
        """Remove grader images that no current environment or task uses (all of them with
        `everything`, base images aside). Returns the tags removed and the bytes freed."""
        keep: set[str] = set()
        if not everything:
            for env in self.environments():
                keep.add(self.env_tag(env))
            for task in tasks:
                try:
                    prepared = prepare(task, self.settings.cache_dir)
                    env_id = self.engine.image_id(self.env_tag(self.environment(task.environment)))
                    if env_id:
                        keep.add(self.instance_tag(prepared, env_id))
                except Exception:  # noqa: BLE001 - a broken task must not block pruning others
                    continue
        removed, freed = [], 0
        images = sorted(self.listing(), key=lambda im: 0 if im["labels"].get(KIND_LABEL) == "task" else 1)
        for im in images:
            if im["labels"].get(KIND_LABEL) == "base":
                continue
            if set(im["tags"]) & keep:
                continue
            name = im["tags"][0] if im["tags"] else im["id"]
            removed.append(name)
            freed += im["size"]
            if not dry_run:
                self.engine.remove_image(im["id"])
        if not dry_run:
            freed += self.engine.prune_dangling()
        return removed, freed
