"""A run's files for a container started ahead of demand: written to its standard input.

The engine's copy into a running container (`put_archive`, `docker cp`) is not seen
under gVisor, which serves a container's root filesystem from its own cache (runsc's
`--file-access=exclusive` for the root mount): a file copied in after the start never
appears inside. A private directory bind-mounted read-only into each container works
under gVisor (its mounts are revalidated against the host, `--file-access-mounts=shared`),
but needs a directory on the engine's host at the same path as the worker's (a worker
in a container would need the host's directory mounted into it), leaves a mount inside
the container for the whole run, and still needs a signal to wake the container: here
(2 cores, load average 10 to 14) a waiting container saw `docker kill --signal` 26 to 71 ms
after it was sent under runsc (median 40 ms; runc 30 ms), and a byte written to its
standard input 2 to 66 ms after (median 7 ms under both).

So every grading container is created with its standard input open, and the host
writes the files there through the engine's attach stream (the Docker API only: a worker
in a container reaches it through the socket like any other call), as two bundles on one
stream: at the container's start, the files of its shape (`ContainerSpec.early_files`,
the supervisor's archive), and when a run takes it, the run's own (its order and patch).
The host holds the stream open in between (`Stdin`). The container's BOOT loop
(containers.py) reads exactly each bundle and writes each file as root; between the two
it imports the modules the spec names for preloading; after the second it puts /dev/null
on its standard input and becomes the run's command. Only a client of the engine can
attach: the submission's processes never hold the stream.
"""

from __future__ import annotations

import socket
from typing import Any

from grader.errors import SandboxError

MAGIC = b"grader-bundle 1\n"


def bundle(files: dict[str, bytes]) -> bytes:
    """`files` (paths relative to files_root) as the bytes the BOOT loop reads: MAGIC,
    one line per file ("SIZE PATH"), an empty line, then the files' bytes in that order."""
    lines = [MAGIC]
    for path, data in files.items():
        parts = path.strip("/").split("/")
        if "\n" in path or any(p in ("", ".", "..") for p in parts):
            raise SandboxError(f"a run's file has a path the bundle cannot carry: {path!r}")
        lines.append(f"{len(data)} {'/'.join(parts)}\n".encode())
    return b"".join(lines) + b"\n" + b"".join(files.values())


class Stdin:
    """A running container's standard input, held open from its start to its run: the
    engine's attach stream, standard input only (no terminal, so the engine copies the
    bytes as they are and no detach sequence is looked for). The engine closes the
    container's standard input when this stream ends (StdinOnce)."""

    def __init__(self, api: Any, container_id: str):
        self._stream = api.attach_socket(container_id, params={"stdin": 1, "stream": 1})
        self._raw: socket.socket = getattr(self._stream, "_sock", self._stream)  # the socket under the SDK's SocketIO

    def send(self, data: bytes) -> None:
        self._raw.sendall(data)

    def finish(self, data: bytes) -> None:
        """Send the last bytes and end the stream (the container then reads end of file)."""
        try:
            self._raw.sendall(data)
            try:
                self._raw.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # the engine closed it first: what was sent is sent
        finally:
            self.close()

    def close(self) -> None:
        for part in (self._stream, self._raw):
            try:
                part.close()
            except OSError:
                pass
