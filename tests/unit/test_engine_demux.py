"""The engine's multiplexed log stream taken apart (grader/sandbox/docker/engine.py: demux),
as a grading container's output and error come back in one request."""

from __future__ import annotations

from grader.sandbox.docker.engine import demux


def frame(kind: int, data: bytes) -> bytes:
    return bytes([kind, 0, 0, 0]) + len(data).to_bytes(4, "big") + data


def test_frames_go_to_their_stream_in_order():
    data = frame(1, b"out ") + frame(2, b"err\n") + frame(1, b"put\x00\n") + frame(2, b"more\n")
    assert demux(data) == (b"out put\x00\n", b"err\nmore\n")


def test_a_frame_whose_bytes_look_like_a_header_is_data():
    payload = frame(2, b"not a frame")  # the output's bytes may be anything, headers included
    assert demux(frame(1, payload)) == (payload, b"")


def test_nothing_and_a_frame_cut_short():
    assert demux(b"") == (b"", b"")
    cut = frame(1, b"whole") + frame(2, b"cut short")[:-4]
    assert demux(cut) == (b"whole", b"cut s")
    assert demux(frame(1, b"x") + b"\x01\x00\x00") == (b"x", b"")  # a header cut short is dropped


def test_an_unknown_stream_counts_as_error_output():
    assert demux(frame(3, b"?") + frame(1, b"ok")) == (b"ok", b"?")
