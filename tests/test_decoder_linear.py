"""Large inputs decode correctly, in linear time.

There are no wall-clock assertions: each test only checks the result, under a 60 s
pytest-timeout.  A linear decoder needs a few seconds at most for these sizes; one that
rescans or copies its whole buffer per call (quadratic) needs minutes, and times out.
"""

from __future__ import annotations

import pytest
from helpers import HB, drain

from stomp_proto import Frame, FrameDecoder, HeartBeat, Limits

pytestmark = pytest.mark.timeout(60)

MIB = 1024 * 1024


def test_20000_small_frames_in_one_chunk() -> None:
    frames = [
        Frame("MESSAGE", (("destination", "/queue/a"), ("message-id", str(i))), b"x" * (i % 50))
        for i in range(20_000)
    ]
    data = b"".join(
        b"MESSAGE\ndestination:/queue/a\nmessage-id:%d\n\n%s\x00\n" % (i, b"x" * (i % 50))
        for i in range(20_000)
    )
    decoder = FrameDecoder("1.2")
    decoder.receive_data(data)
    events: list[Frame | HeartBeat] = []
    drain(decoder, events)
    assert events[0::2] == frames
    assert events[1::2] == [HB] * 20_000
    assert decoder.buffered == 0


def test_20000_content_length_frames_in_one_chunk() -> None:
    data = b"SEND\ncontent-length:4\n\nab\x00c\x00" * 20_000
    decoder = FrameDecoder("1.2")
    decoder.receive_data(data)
    events = list(decoder)
    assert len(events) == 20_000
    assert set(events) == {Frame("SEND", (("content-length", "4"),), b"ab\x00c")}


def test_200000_heartbeats_in_one_chunk() -> None:
    decoder = FrameDecoder("1.2")
    decoder.receive_data(b"\r\n\n" * 100_000)
    assert list(decoder) == [HB] * 200_000


def _feed_bytewise(decoder: FrameDecoder, data: bytes) -> list[Frame | HeartBeat]:
    events: list[Frame | HeartBeat] = []
    view = memoryview(data)
    for i in range(len(data)):
        decoder.receive_data(view[i : i + 1])
        drain(decoder, events)
    return events


def test_1_mib_content_length_body_fed_one_byte_at_a_time() -> None:
    body = bytes(range(256)) * (MIB // 256)  # contains NULs
    data = b"MESSAGE\ncontent-length:%d\n\n" % len(body) + body + b"\x00"
    events = _feed_bytewise(FrameDecoder("1.2"), data)
    assert events == [Frame("MESSAGE", (("content-length", str(MIB)),), body)]


def test_1_mib_nul_terminated_body_fed_one_byte_at_a_time() -> None:
    body = bytes(range(1, 256)) * (MIB // 255)
    data = b"MESSAGE\n\n" + body + b"\x00"
    events = _feed_bytewise(FrameDecoder("1.2"), data)
    assert events == [Frame("MESSAGE", (), body)]


def test_long_head_fed_one_byte_at_a_time() -> None:
    """1000 headers (the default max_headers) with escapes, about 40 KB of head."""
    headers = tuple((f"h{i}", f"v:{i}\n") for i in range(1000))
    data = b"SEND\n" + b"".join(b"h%d:v\\c%d\\n\n" % (i, i) for i in range(1000)) + b"\n\x00"
    events = _feed_bytewise(FrameDecoder("1.2"), data)
    assert events == [Frame("SEND", headers)]


def test_60_kib_header_line_fed_one_byte_at_a_time() -> None:
    value = "v" * (60 * 1024)
    data = b"SEND\nk:" + value.encode() + b"\n\n\x00"
    assert _feed_bytewise(FrameDecoder("1.2"), data) == [Frame("SEND", (("k", value),))]


def test_4_mib_body_in_one_chunk_without_content_length() -> None:
    body = b"z" * (4 * MIB)
    decoder = FrameDecoder("1.2", limits=Limits())
    decoder.receive_data(b"SEND\n\n" + body + b"\x00")
    assert list(decoder) == [Frame("SEND", (), body)]
