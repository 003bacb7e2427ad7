"""The Docker engine as the grader uses it: images, builds and imports of base images.

`DockerEngine` wraps the few engine calls the grader makes and translates the SDK's
errors into the grader's (ImageError for a missing or broken image, SandboxError for
the engine itself). Grading runs live in runs.py, which reaches the engine through this.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import docker
import docker.errors
import requests.exceptions
from docker.models.containers import Container

from grader.errors import ImageError, SandboxError

API_TIMEOUT = 900  # builds stream for minutes; per-call waits pass their own timeout
T = TypeVar("T")


# what `create_container` passes as the container's own configuration; the rest of the
# SDK's `containers.create` arguments the sandbox uses are the host configuration's
CREATE_ARGS = frozenset({"image", "command", "user", "working_dir", "environment", "labels", "stdin_open", "detach"})


def demux(data: bytes) -> tuple[bytes, bytes]:
    """The output and error streams of the engine's multiplexed stream of frames (see
    `DockerEngine.output`); a frame cut short keeps what arrived of it."""
    streams: dict[int, list[bytes]] = {1: [], 2: []}
    at = 0
    while at + 8 <= len(data):
        kind, size = data[at], int.from_bytes(data[at + 4 : at + 8], "big")
        streams.get(kind, streams[2]).append(data[at + 8 : at + 8 + size])
        at += 8 + size
    return b"".join(streams[1]), b"".join(streams[2])


class DockerEngine:
    """A thin, error-translating face of the engine for the image and sandbox code."""

    def __init__(self, client: docker.DockerClient | None = None, base_url: str | None = None):
        self._client = client
        self._base_url = base_url  # default: DOCKER_HOST, else the local socket

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            try:
                if self._base_url:
                    self._client = docker.DockerClient(base_url=self._base_url, timeout=API_TIMEOUT)
                else:
                    self._client = docker.from_env(timeout=API_TIMEOUT)
                self._client.ping()
            except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
                self._client = None
                raise SandboxError(f"the Docker engine does not answer: {exc}") from exc
        return self._client

    def available(self) -> bool:
        try:
            self.client.ping()
            return True
        except Exception:
            return False

    def info(self) -> dict[str, Any]:
        info: dict[str, Any] = self._call(self.client.info)
        return info

    def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except docker.errors.ImageNotFound as exc:
            raise ImageError(str(exc)) from exc
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise SandboxError(f"Docker engine error: {exc}") from exc

    # containers: the SDK's calls without the inspections a grade does not need ------------
    def create_container(self, kwargs: dict[str, Any]) -> Container:
        """`client.containers.create(**kwargs)` without the inspection the SDK makes of the
        new container to fill its model: a run reads the container's state once, at its
        end. The model holds the id alone."""
        api = self.client.api
        config = {k: v for k, v in kwargs.items() if k in CREATE_ARGS}
        host = api.create_host_config(**{k: v for k, v in kwargs.items() if k not in CREATE_ARGS})
        created = api.create_container(**config, host_config=host)
        return self.client.containers.prepare_model({"Id": created["Id"]})

    def output(self, container_id: str, *, stderr_lines: int) -> tuple[bytes, bytes]:
        """A stopped container's whole standard output and the last `stderr_lines` lines of
        its standard error, in one request. The SDK's `logs` makes one request a stream
        and inspects the container before each, to learn whether it has a terminal (a
        grading container never does): the engine's reply to a container without one is
        a multiplexed stream of frames, an 8-byte header (the stream: 1 output, 2 error;
        3 bytes of padding; the size, 4 bytes big-endian) before each chunk."""
        api = self.client.api
        url = f"{api.base_url}/v{api.api_version}/containers/{quote(container_id)}/logs"
        params: dict[str, str | int] = {"stdout": 1, "stderr": 1, "timestamps": 0, "follow": 0, "tail": "all"}
        res = api.get(url, params=params, timeout=api.timeout)
        try:
            res.raise_for_status()
        except requests.exceptions.HTTPError as exc:
            raise docker.errors.create_api_error_from_http_exception(exc) from exc
        out, err = demux(res.content)
        return out, b"".join(err.splitlines(keepends=True)[-stderr_lines:])

    # images ----------------------------------------------------------------------
    def image_id(self, ref: str) -> str | None:
        try:
            return self.client.images.get(ref).id
        except docker.errors.ImageNotFound:
            return None
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise SandboxError(f"Docker engine error: {exc}") from exc

    def image_facts(self, ref: str) -> dict[str, Any] | None:
        """What the engine says of one image, None when it has none by that reference: its
        id (the hash of its configuration, which names every layer's content hash), tags,
        labels and its layers' content hashes, in order."""
        try:
            im = self.client.images.get(ref)
        except docker.errors.ImageNotFound:
            return None
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise SandboxError(f"Docker engine error: {exc}") from exc
        return {
            "id": im.id,
            "tags": list(im.tags),
            "labels": dict(im.labels or {}),
            "layers": list((im.attrs.get("RootFS") or {}).get("Layers") or []),
        }

    def save(self, refs: list[str], write: Callable[[bytes], object], chunk_size: int = 1 << 20) -> None:
        """`docker save` of every image in `refs` into one tar stream (layers they share are
        written once), each chunk given to `write`. The SDK's own save takes one image, so this asks the
        engine's API (GET /images/get?names=...) through the client's session."""
        api = self.client.api
        try:
            res = api.get(f"{api.base_url}/images/get", params={"names": refs}, stream=True, timeout=API_TIMEOUT)
            if res.status_code != 200:
                raise ImageError(f"saving {', '.join(refs)} failed: {res.status_code} {res.text[:500]}")
            for chunk in res.iter_content(chunk_size):
                write(chunk)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise SandboxError(f"Docker engine error while saving images: {exc}") from exc

    def load(self, chunks: Iterator[bytes]) -> list[str]:
        """`docker load` of a `docker save` stream; returns the engine's lines (each
        "Loaded image: REF" or "Loaded image ID: ID"). The engine checks every layer's
        content against the hash its image's configuration names."""
        lines: list[str] = []
        try:
            # docker-py's load_image is not annotated
            for item in self.client.api.load_image(chunks):  # type: ignore[no-untyped-call]
                if "error" in item or "errorDetail" in item:
                    raise ImageError(f"loading images failed: {item.get('error') or item.get('errorDetail')}")
                text = str(item.get("stream") or "").strip()
                if text:
                    lines.append(text)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise ImageError(f"loading images failed: {exc}") from exc
        return lines

    def images(self, label: str) -> list[dict[str, Any]]:
        found = self._call(self.client.images.list, filters={"label": label})
        return [
            {
                "id": im.id,
                "tags": im.tags,
                "labels": im.labels or {},
                "size": im.attrs.get("Size", 0),
                "created": im.attrs.get("Created"),
            }
            for im in found
        ]

    def unique_sizes(self) -> dict[str, int]:
        """Image id -> the bytes that image alone holds (its size less the layers it shares
        with other images), from the engine's disk usage report."""
        usage = self._call(self.client.df)
        out: dict[str, int] = {}
        for im in usage.get("Images") or []:
            size, shared = im.get("Size") or 0, im.get("SharedSize") or 0
            out[im["Id"]] = max(0, size - max(0, shared))
        return out

    def remove_image(self, ref: str) -> None:
        try:
            self.client.images.remove(ref, force=True, noprune=False)
        except docker.errors.ImageNotFound:
            pass
        except docker.errors.APIError as exc:
            raise ImageError(f"cannot remove {ref}: {exc.explanation}") from exc

    def prune_dangling(self) -> int:
        res = self._call(self.client.images.prune, filters={"dangling": True})
        return int(res.get("SpaceReclaimed") or 0)

    def build(
        self,
        context: bytes,
        tag: str,
        *,
        labels: dict[str, str],
        buildargs: dict[str, str] | None = None,
        log: Callable[[str], None] | None = None,
    ) -> str:
        """Build from an in-memory tar context with the classic builder; returns the image id."""
        lines: list[str] = []
        try:
            stream = self.client.api.build(
                fileobj=io.BytesIO(context),
                custom_context=True,
                tag=tag,
                labels=labels,
                buildargs=buildargs or {},
                rm=True,
                forcerm=True,
                decode=True,
                pull=False,
            )
            for chunk in stream:
                if "stream" in chunk:
                    text = chunk["stream"].rstrip("\n")
                    if text:
                        lines.append(text)
                        if log:
                            log(text)
                if "error" in chunk:
                    tail = "\n".join(lines[-30:])
                    raise ImageError(f"building {tag} failed: {chunk['error'].strip()}\n{tail}")
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise ImageError(f"building {tag} failed: {exc}") from exc
        image_id = self.image_id(tag)
        if image_id is None:
            raise ImageError(f"building {tag} produced no image")
        return image_id

    def import_rootfs(self, tarball: Path, repository: str, tag: str, changes: Iterable[str] = ()) -> str:
        self._call(
            self.client.api.import_image_from_file, str(tarball), repository=repository, tag=tag, changes=list(changes)
        )
        image_id = self.image_id(f"{repository}:{tag}")
        if image_id is None:
            raise ImageError(f"importing {repository}:{tag} produced no image")
        return image_id

    def tag(self, image_id: str, repository: str, tag: str) -> None:
        self._call(self.client.api.tag, image_id, repository, tag)

    def runtimes(self) -> set[str]:
        return set((self.info().get("Runtimes") or {}).keys())

    def supports_storage_cap(self) -> bool:
        """overlay2 enforces --storage-opt size only on xfs with project quotas."""
        info = self.info()
        status = dict(info.get("DriverStatus") or [])
        return info.get("Driver") == "overlay2" and status.get("Backing Filesystem") == "xfs"
