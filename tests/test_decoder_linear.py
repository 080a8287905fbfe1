"""Large inputs decode correctly, in linear time.

There are no wall-clock assertions: each test only checks the result, under a 60 s
pytest-timeout.  A linear decoder needs a few seconds at most for these sizes; one that
rescans or copies its whole buffer per call (quadratic) needs minutes, and times out.
The last tests count the work instead: the bytes every search of the buffer spans.
"""

from __future__ import annotations

import re
import sys

import pytest
from helpers import HB, drain

from stomp_proto import Frame, FrameDecoder, HeartBeat, Limits, _decoder

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


# -- the work of a head that trickles in, counted -------------------------------------------


class _CountingBuffer(bytearray):
    """A decoder's buffer that adds up the length of every range searched in it."""

    searched = 0

    def _count(self, start: int | None, end: int | None) -> None:
        low, high, _ = slice(start, end).indices(len(self))
        _CountingBuffer.searched += max(high - low, 0)

    def find(self, sub, start=None, end=None):  # type: ignore[no-untyped-def,override]
        self._count(start, end)
        return super().find(sub, start, end)

    def rfind(self, sub, start=None, end=None):  # type: ignore[no-untyped-def,override]
        self._count(start, end)
        return super().rfind(sub, start, end)


class _CountingPattern:
    """A compiled pattern of the decoder's module that counts the range of each use."""

    def __init__(self, pattern: re.Pattern[bytes]) -> None:
        self._pattern = pattern

    def _count(self, string: bytes, pos: int = 0, endpos: int = sys.maxsize) -> None:
        _CountingBuffer.searched += max(min(endpos, len(string)) - pos, 0)

    def search(self, string, pos=0, endpos=sys.maxsize):  # type: ignore[no-untyped-def]
        self._count(string, pos, endpos)
        return self._pattern.search(string, pos, endpos)

    def match(self, string, pos=0, endpos=sys.maxsize):  # type: ignore[no-untyped-def]
        self._count(string, pos, endpos)
        return self._pattern.match(string, pos, endpos)


def _bytes_searched(data: bytes, *, strict: bool) -> int:
    """How many bytes the pure decoder's searches span, fed ``data`` one byte at a time.

    Every range handed to a search of the buffer (``find``, ``rfind`` and the
    module's patterns) is added up: an upper bound on the bytes looked at,
    whatever the speed of the machine.  A scan that resumes where it stopped
    spans a few bytes per byte fed; one that starts again at the line's start
    spans the whole line each time.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_decoder, "_native", None)  # the pure decoder on either build
        for name, value in vars(_decoder).copy().items():
            if isinstance(value, re.Pattern):
                patch.setattr(_decoder, name, _CountingPattern(value))
        decoder = FrameDecoder("1.2", strict=strict)
        decoder._buf = _CountingBuffer()
        _CountingBuffer.searched = 0
        events = _feed_bytewise(decoder, data)
        assert [type(event) for event in events] == [Frame]
        return _CountingBuffer.searched


_BLANKS = b" " * 30_000
#: Heads that trickle in: (strict, stream), each one frame.
_TRICKLES = {
    "blank-led line": (False, b"SEND\n" + _BLANKS + b"k:v\n\n\x00"),
    "line of blanks": (False, b"SEND\nk:v\n" + b" \t\r" * 10_000 + b"\n\x00"),
    "blanks before the command": (False, _BLANKS + b"\nSEND\n\n\x00"),
    "long value": (False, b"SEND\nk:" + b"v" * 30_000 + b"\n\n\x00"),
    "strict blank-led line": (True, b"SEND\n" + _BLANKS + b"k:v\n\n\x00"),
    "strict long value": (True, b"SEND\nk:" + b"v" * 30_000 + b"\n\n\x00"),
}


@pytest.mark.parametrize(("strict", "data"), list(_TRICKLES.values()), ids=list(_TRICKLES))
def test_a_head_fed_byte_by_byte_is_searched_a_bounded_number_of_times(
    strict: bool, data: bytes
) -> None:
    """The lenient scan (the broker's) as well as the strict one: a head that
    trickles in costs time in proportion to its size, not to its size squared
    (about 4.5e8 bytes searched here)."""
    assert _bytes_searched(data, strict=strict) <= 8 * len(data)


def _native_bytes_searched(data: bytes, *, strict: bool) -> int:
    """How many bytes the native scanner's searches span, fed ``data`` one byte at a time.

    The native scanner reads the buffer through a pointer, so it counts for itself
    (``bytes_searched``): the same upper bound as above.  Its lenient mode is the
    lenient server's, which keeps text verbatim (the embedded broker's decoder).
    """
    native = _decoder._native
    assert native is not None
    decoder = FrameDecoder("1.2", strict=strict)
    if not strict:
        decoder._keep_text()
    before = native.bytes_searched()
    events = _feed_bytewise(decoder, data)
    assert [type(event) for event in events] == [Frame]
    return native.bytes_searched() - before  # type: ignore[no-any-return]


@pytest.mark.skipif(_decoder._native is None, reason="the native fast path is not loaded")
@pytest.mark.parametrize(("strict", "data"), list(_TRICKLES.values()), ids=list(_TRICKLES))
def test_the_native_scanner_searches_a_trickling_head_a_bounded_number_of_times(
    strict: bool, data: bytes
) -> None:
    """The native scanner resumes where the pure code would: at the decoder's
    ``_scan``, and along a line of blanks still growing there - not at the start of
    the line, which a blank-led line of 30 KB fed byte by byte would make about
    4.5e8 bytes searched."""
    assert _native_bytes_searched(data, strict=strict) <= 8 * len(data)
