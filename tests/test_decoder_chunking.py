"""FrameDecoder is independent of how the stream is chunked; end-of-stream and error states."""

from __future__ import annotations

import contextlib

import pytest
from helpers import HB, Event, bytewise, cut, run, sized, whole
from hypothesis import given
from hypothesis import strategies as st

from stomp_proto import (
    ErrorKind,
    Frame,
    FrameDecoder,
    HeartBeat,
    LocalProtocolError,
    RemoteProtocolError,
)

K = ErrorKind


def F(command: str, headers: list[tuple[str, str]] | None = None, body: bytes = b"") -> Frame:
    return Frame(command, tuple(headers or ()), body)


# One stream per version, mixing heart-beats, escapes, UTF-8, NULs under content-length, and
# (1.2) CRLF, with the events each must give.
STREAMS: dict[str, tuple[bytes, list[Event]]] = {
    "1.2": (
        b"\n\r\n"
        b"CONNECTED\r\nversion:1.2\r\nsession:ID:x:1\r\n\r\n\x00\n"
        b"MESSAGE\ndestination:/queue/\xe6\x97\xa5\xe6\x9c\xac\nfoo:a\\cb\\nc\\\\d\\re\n"
        b"content-length:7\n\nh\xc3\xa9\x00\r\n!\x00\r\n"
        b"ERROR\r\nmessage:boom\n\nno cl body\x00"
        b"\n",
        [
            HB, HB,
            F("CONNECTED", [("version", "1.2"), ("session", "ID:x:1")]),
            HB,
            F("MESSAGE", [("destination", "/queue/日本"), ("foo", "a:b\nc\\d\re"),
                          ("content-length", "7")], b"h\xc3\xa9\x00\r\n!"),
            HB,
            F("ERROR", [("message", "boom")], b"no cl body"),
            HB,
        ],
    ),
    "1.1": (
        b"\n\n"
        b"CONNECTED\nversion:1.1\nsession:ID:x:1\n\n\x00\n"
        b"MESSAGE\ndestination:/queue/\xe6\x97\xa5\xe6\x9c\xac\nfoo:a\\cb\\nc\\\\d\nx-cr:a\rb\r\n"
        b"content-length:7\n\nh\xc3\xa9\x00\r\n!\x00\n"
        b"ERROR\nmessage:boom\n\nno cl body\x00"
        b"\n",
        [
            HB, HB,
            F("CONNECTED", [("version", "1.1"), ("session", "ID:x:1")]),
            HB,
            F("MESSAGE", [("destination", "/queue/日本"), ("foo", "a:b\nc\\d"),
                          ("x-cr", "a\rb\r"), ("content-length", "7")], b"h\xc3\xa9\x00\r\n!"),
            HB,
            F("ERROR", [("message", "boom")], b"no cl body"),
            HB,
        ],
    ),
    "1.0": (
        b"\n"
        b"CONNECTED\nsession:ID:x:1\n\n\x00\n"
        b"MESSAGE\ndestination:/queue/a\nfoo:a\\cb\\\\\ncontent-length:7\n\nh\xc3\xa9\x00\r\n!\x00\n"
        b"ERROR\nmessage:boom\n\nno cl body\x00"
        b"\n\n",
        [
            HB,
            F("CONNECTED", [("session", "ID:x:1")]),
            HB,
            F("MESSAGE", [("destination", "/queue/a"), ("foo", "a\\cb\\\\"),
                          ("content-length", "7")], b"h\xc3\xa9\x00\r\n!"),
            HB,
            F("ERROR", [("message", "boom")], b"no cl body"),
            HB, HB,
        ],
    ),
}  # fmt: skip

VERSIONS = sorted(STREAMS)


@pytest.mark.parametrize("version", VERSIONS)
def test_stream_fed_whole(version: str) -> None:
    data, expected = STREAMS[version]
    out = run(whole(data), version)
    assert out.error is None, out.error
    assert out.events == expected


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 1460])
def test_stream_fed_in_fixed_size_chunks(version: str, size: int) -> None:
    data, expected = STREAMS[version]
    out = run(sized(data, size), version)
    assert out.error is None, out.error
    assert out.events == expected


@pytest.mark.parametrize("version", VERSIONS)
@given(cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=60))
def test_stream_fed_in_random_chunks(version: str, cuts: list[int]) -> None:
    data, expected = STREAMS[version]
    out = run(cut(data, cuts), version)
    assert out.error is None, out.error
    assert out.events == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_stream_repeated_in_one_chunk(version: str) -> None:
    data, expected = STREAMS[version]
    out = run([data * 50], version)
    assert out.error is None, out.error
    assert out.events == expected * 50


# ------------------------------------------------------------------------- awkward split points


def test_crlf_split_in_command_line() -> None:
    out = run([b"SEND\r", b"\nk:v\r", b"\n\r", b"\nbody\x00"], "1.2")
    assert out.events == [F("SEND", [("k", "v")], b"body")]


def test_crlf_blank_line_split_does_not_leak_lf_into_body() -> None:
    """The LF of a CRLF blank line belongs to the EOL, not to the body (stomp-php #93)."""
    out = run([b"SEND\r\nk:v\r\n\r", b"\nbody\x00"], "1.2")
    assert out.events == [F("SEND", [("k", "v")], b"body")]


def test_crlf_heartbeat_split() -> None:
    decoder = FrameDecoder("1.2")
    decoder.receive_data(b"\r")
    assert decoder.next_frame() is None
    decoder.receive_data(b"\n")
    assert decoder.next_frame() == HeartBeat()
    assert decoder.next_frame() is None


def test_lf_blank_line_split() -> None:
    out = run([b"SEND\nk:v\n", b"\n", b"\x00"], "1.2")
    assert out.events == [F("SEND", [("k", "v")])]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("split", [1, 2, 3])
def test_multibyte_utf8_split(version: str, split: int) -> None:
    char = "\U0001f600".encode()  # 4 bytes
    head, tail = char[:split], char[split:]
    out = run([b"SEND\nk:x" + head, tail + b"y\n\n\x00"], version)
    assert out.events == [F("SEND", [("k", "x\U0001f600y")])]


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_escape_split(version: str) -> None:
    out = run([b"SEND\nk:a\\", b"cb\\", b"\\\\", b"n\n\n\x00"], version)
    assert out.events == [F("SEND", [("k", "a:b\\\n")])]


def test_bad_escape_split_fails_the_same() -> None:
    out = run([b"SEND\nk:a\\", b"rb\n\n\x00"], "1.1")
    assert out.kind is K.BAD_ESCAPE


@pytest.mark.parametrize("version", VERSIONS)
def test_content_length_body_split_around_nuls(version: str) -> None:
    out = run([b"SEND\ncontent-length:3\n\na\x00", b"b", b"\x00SEND\n\n\x00"], version)
    assert out.events == [F("SEND", [("content-length", "3")], b"a\x00b"), F("SEND")]


@pytest.mark.parametrize("version", VERSIONS)
def test_split_just_before_terminating_nul(version: str) -> None:
    out = run([b"MESSAGE\ncontent-length:3\n\nabc", b"\x00MESSAGE\n\n\x00"], version)
    assert out.events == [F("MESSAGE", [("content-length", "3")], b"abc"), F("MESSAGE")]


@pytest.mark.parametrize("version", VERSIONS)
def test_split_inside_content_length_value(version: str) -> None:
    out = run([b"SEND\ncontent-length:1", b"0\n\n0123456789\x00"], version)
    assert out.events == [F("SEND", [("content-length", "10")], b"0123456789")]


@pytest.mark.parametrize("version", VERSIONS)
def test_frame_is_only_returned_once_complete(version: str) -> None:
    decoder = FrameDecoder(version)
    for piece in (b"SEND", b"\nk:v", b"\n", b"\n", b"body"):
        decoder.receive_data(piece)
        assert decoder.next_frame() is None, piece
    decoder.receive_data(b"\x00")
    assert decoder.next_frame() == F("SEND", [("k", "v")], b"body")
    assert decoder.next_frame() is None


# ------------------------------------------------------------------------------- end of stream


@pytest.mark.parametrize("version", VERSIONS)
def test_clean_eof_after_frames_gives_none(version: str) -> None:
    decoder = FrameDecoder(version)
    decoder.receive_data(b"SEND\n\nA\x00\n")
    decoder.receive_data(None)
    assert decoder.next_frame() == F("SEND", [], b"A")
    assert decoder.next_frame() == HeartBeat()
    assert decoder.next_frame() is None
    assert decoder.next_frame() is None


def test_eof_on_empty_stream_gives_none() -> None:
    decoder = FrameDecoder()
    decoder.receive_data(None)
    assert decoder.next_frame() is None


PARTIALS = [
    b"S", b"SEND", b"SEND\n", b"SEND\nk", b"SEND\nk:v", b"SEND\nk:v\n", b"SEND\nk:v\n\n",
    b"SEND\n\nbody", b"SEND\ncontent-length:3\n\n", b"SEND\ncontent-length:3\n\nab",
    b"SEND\ncontent-length:3\n\nabc", b"SEND\r\n", b"SEND\n\r\n",
]  # fmt: skip


@pytest.mark.parametrize("partial", PARTIALS)
def test_eof_inside_a_frame_is_truncated(partial: bytes) -> None:
    for chunks in (whole(partial), bytewise(partial)):
        out = run(chunks, "1.2")
        assert out.kind is K.TRUNCATED, (partial, out.summary())
        assert out.events == []


def test_frames_before_truncation_are_returned_first() -> None:
    out = run([b"SEND\n\nA\x00\nSEND\n\nB"], "1.2")
    assert out.events == [F("SEND", [], b"A"), HB]
    assert out.kind is K.TRUNCATED


def test_receive_data_after_eof_is_local_error() -> None:
    decoder = FrameDecoder()
    decoder.receive_data(b"SEND\n\n\x00")
    decoder.receive_data(None)
    with pytest.raises(LocalProtocolError):
        decoder.receive_data(b"SEND\n\n\x00")


def test_receive_data_after_eof_keeps_accepted_frames() -> None:
    decoder = FrameDecoder()
    decoder.receive_data(b"SEND\n\n\x00")
    decoder.receive_data(None)
    with pytest.raises(LocalProtocolError):
        decoder.receive_data(b"x")
    assert decoder.next_frame() == F("SEND")
    assert decoder.next_frame() is None


# -------------------------------------------------------------------------------- error states


def _failed_decoder() -> tuple[FrameDecoder, RemoteProtocolError]:
    decoder = FrameDecoder()
    decoder.receive_data(b"FOO\n\n\x00")
    with pytest.raises(RemoteProtocolError) as info:
        decoder.next_frame()
    return decoder, info.value


def test_next_frame_reraises_after_error() -> None:
    decoder, first = _failed_decoder()
    for _ in range(2):
        with pytest.raises(RemoteProtocolError) as again:
            decoder.next_frame()
        assert again.value.kind is first.kind
        assert again.value.message == first.message


def test_receive_data_after_error_is_local_error() -> None:
    decoder, _ = _failed_decoder()
    with pytest.raises(LocalProtocolError):
        decoder.receive_data(b"SEND\n\n\x00")


def test_eof_after_error_still_reraises() -> None:
    """Whether receive_data(None) on a failed decoder raises is left open by the API; the
    failure itself must stick."""
    decoder, first = _failed_decoder()
    with contextlib.suppress(LocalProtocolError, RemoteProtocolError):
        decoder.receive_data(None)
    with pytest.raises(RemoteProtocolError) as again:
        decoder.next_frame()
    assert again.value.kind is first.kind


BAD_TAIL_STREAM = b"SEND\n\nA\x00\nSEND\ncontent-length:1\n\nB\x00\n\nFOO\n\n\x00SEND\n\nC\x00"


@pytest.mark.parametrize(
    "chunks",
    [whole(BAD_TAIL_STREAM), bytewise(BAD_TAIL_STREAM), sized(BAD_TAIL_STREAM, 5)],
    ids=["whole", "bytewise", "5-bytes"],
)
def test_frames_accepted_before_an_error_are_all_returned(chunks: list[bytes]) -> None:
    """Nothing accepted is lost: every event before the bad frame comes out, then the error."""
    out = run(chunks, "1.2", eof=False)
    assert out.events == [
        F("SEND", [], b"A"),
        HB,
        F("SEND", [("content-length", "1")], b"B"),
        HB,
        HB,
    ]
    assert out.kind is K.BAD_COMMAND


def test_error_is_raised_only_after_earlier_frames_are_taken() -> None:
    decoder = FrameDecoder()
    decoder.receive_data(b"SEND\n\nA\x00SEND\n\nB\x00FOO\n\n\x00")
    assert decoder.next_frame() == F("SEND", [], b"A")
    assert decoder.next_frame() == F("SEND", [], b"B")
    with pytest.raises(RemoteProtocolError):
        decoder.next_frame()


@pytest.mark.parametrize("version", VERSIONS)
@given(cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=30))
def test_error_point_is_chunking_independent(version: str, cuts: list[int]) -> None:
    data = b"SEND\n\nA\x00\nSEND\ncontent-length:2\n\nBC\x00\nSEND\ncontent-length:1\n\nDE\x00"
    out = run(cut(data, cuts), version)
    assert out.events == [F("SEND", [], b"A"), HB, F("SEND", [("content-length", "2")], b"BC"), HB]
    assert out.kind is K.MISSING_NUL
