"""The decoder's fast paths give the same results as the general ones, at their edges.

Large bodies with a content-length that are still arriving are written straight into
the final body object instead of the buffer (``_LARGE_BODY`` bytes and up); whole
well-formed heads are split in one pass and unescaped in one pass over the head.
These tests sit on the thresholds and cut the stream inside the fast paths.
"""

from __future__ import annotations

import array
import itertools

import pytest
from helpers import HB

from stomp_proto import (
    ErrorKind,
    Frame,
    FrameDecoder,
    HeartBeat,
    Limits,
    RemoteProtocolError,
)
from stomp_proto._decoder import _LARGE_BODY

K = ErrorKind
L = _LARGE_BODY


def message(length: int, fill: int = 7, extra: bytes = b"") -> tuple[bytes, Frame]:
    body = bytes((fill + i) % 256 for i in range(length))
    head = b"MESSAGE\ndestination:/queue/a\\cb\n" + extra + b"content-length:%d\n\n" % length
    frame = Frame("MESSAGE", (("destination", "/queue/a:b"), ("content-length", str(length))), body)
    return head + body + b"\x00", frame


def feed(decoder: FrameDecoder, chunks: list[bytes]) -> list[Frame | HeartBeat]:
    out: list[Frame | HeartBeat] = []
    for chunk in chunks:
        decoder.receive_data(chunk)
        out.extend(decoder)
    return out


def cut_at(data: bytes, *offsets: int) -> list[bytes]:
    bounds = [0, *sorted(o for o in offsets if 0 < o < len(data)), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]


@pytest.mark.parametrize("length", [L - 1, L, L + 1])
def test_large_body_threshold_cut_everywhere_that_matters(length: int) -> None:
    wire, frame = message(length)
    small, small_frame = message(3, fill=1)
    stream = b"\n" + wire + b"\n" + small
    body_start = 1 + wire.index(b"\n\n") + 2
    nul = body_start + length
    cuts = [
        (),
        (body_start,),  # head alone, then body
        (body_start + 1,),
        (body_start + length // 2,),
        (nul - 1,),  # last body byte with the NUL
        (nul,),  # body complete, NUL next
        (nul + 1,),  # NUL with the body, then the rest
        (nul + 2, nul + 5),  # the next frame cut in its head
        (body_start - 1, body_start + 1, nul, nul + 1),
    ]
    for offsets in cuts:
        decoder = FrameDecoder()
        got = feed(decoder, cut_at(stream, *offsets))
        assert got == [HB, frame, HB, small_frame], offsets
        assert decoder.buffered == 0
        assert all(type(f.body) is bytes for f in got if isinstance(f, Frame))


@pytest.mark.parametrize("size", [1, 1000, 4096, L - 1, L, L + 1, 3 * L + 5])
def test_large_bodies_any_read_size(size: int) -> None:
    parts = [message(n, fill=n) for n in (2 * L + 3, 0, L, 10, L + 1)]
    stream = b"\r\n".join(w for w, _ in parts)
    want: list[Frame | HeartBeat] = []
    for _, frame in parts:
        want += [frame, HB]
    want.pop()
    if size == 1:
        stream = stream[: len(parts[0][0]) + 40]  # one large frame byte by byte is enough
        want = [parts[0][1], HB]
    decoder = FrameDecoder()
    assert feed(decoder, [stream[i : i + size] for i in range(0, len(stream), size)]) == want


def test_buffered_counts_a_large_body_as_it_arrives() -> None:
    wire, frame = message(3 * L)
    decoder = FrameDecoder()
    fed = 0
    for chunk in cut_at(wire, 100, 100 + L, 100 + 2 * L, len(wire) - 1):
        decoder.receive_data(chunk)
        fed += len(chunk)
        if fed < len(wire):
            assert decoder.next_frame() is None
            assert decoder.buffered == fed
    assert decoder.next_frame() == frame
    assert decoder.buffered == 0


@pytest.mark.parametrize("tail", [b"X", b"X\n"])
def test_large_body_without_nul_is_refused(tail: bytes) -> None:
    wire, _ = message(L + 10)
    bad = wire[:-1] + tail
    for offsets in [(200,), (200, len(bad) - len(tail)), (200, len(bad) - 1)]:
        decoder = FrameDecoder()
        with pytest.raises(RemoteProtocolError) as info:
            feed(decoder, cut_at(bad, *offsets))
        assert info.value.kind is K.MISSING_NUL


@pytest.mark.parametrize("missing", [1, 2, L])
def test_stream_ending_inside_a_large_body_is_truncated(missing: int) -> None:
    wire, _ = message(2 * L)
    decoder = FrameDecoder()
    assert feed(decoder, cut_at(wire[:-missing], 300)) == []
    decoder.receive_data(None)
    with pytest.raises(RemoteProtocolError) as info:
        decoder.next_frame()
    assert info.value.kind is K.TRUNCATED


def test_large_content_length_over_the_limit_is_refused_before_the_body() -> None:
    wire, _ = message(L + 1)
    decoder = FrameDecoder(limits=Limits(max_body_size=L))
    decoder.receive_data(wire[:60])
    with pytest.raises(RemoteProtocolError) as info:
        decoder.next_frame()
    assert info.value.kind is K.TOO_LARGE


def test_version_change_inside_a_large_body_reparses_the_head() -> None:
    """The head was parsed under 1.2 and the body is half in: under 1.0 the header keeps
    its backslash, and the body bytes already received are not lost."""
    wire, frame = message(2 * L)
    decoder = FrameDecoder("1.2")
    first, second = cut_at(wire, 100 + L)
    decoder.receive_data(first)
    assert decoder.next_frame() is None
    decoder.version = "1.0"
    assert decoder.buffered == len(first)
    decoder.receive_data(second)
    got = decoder.next_frame()
    assert isinstance(got, Frame)
    assert got.headers == (("destination", "/queue/a\\cb"), frame.headers[1])
    assert got.body == frame.body


@pytest.mark.parametrize(
    "kind",
    [bytearray, memoryview, lambda b: memoryview(array.array("H", b))],
    ids=["bytearray", "memoryview", "memoryview-of-H"],
)
def test_large_body_from_bytes_like_reads(kind: object) -> None:
    wire, frame = message(2 * L)
    small, small_frame = message(4)
    stream = wire + small
    want: list[Frame | HeartBeat] = [frame, small_frame]
    if len(stream) % 2:
        stream += b"\n"
        want.append(HB)
    # Even cuts, so that array('H') can hold each piece; one ends inside the next frame.
    cross = len(wire) + 8 - (len(wire) + 8) % 2
    chunks = cut_at(stream, 100, 100 + L, cross)
    decoder = FrameDecoder()
    assert feed(decoder, [kind(c) for c in chunks]) == want  # type: ignore[operator]


def test_large_body_does_not_alias_the_callers_buffer() -> None:
    wire, frame = message(2 * L)
    decoder = FrameDecoder()
    decoder.receive_data(wire[:100])
    assert decoder.next_frame() is None
    piece = bytearray(wire[100:])
    decoder.receive_data(piece)
    piece[:] = bytes(len(piece))
    assert decoder.next_frame() == frame


def decode_one(data: bytes, version: str = "1.2") -> Frame:
    decoder = FrameDecoder(version)  # type: ignore[arg-type]
    decoder.receive_data(data)
    frame = decoder.next_frame()
    assert isinstance(frame, Frame)
    return frame


@pytest.mark.parametrize(
    ("head", "headers"),
    [
        # One colon per line: the one-pass split.
        (b"a:1\nb:2", [("a", "1"), ("b", "2")]),
        (b"a:\nb:", [("a", ""), ("b", "")]),
        # Raw colons in values (as many lines as colons, or more): split at the first.
        (b"a:1:2\nb:", [("a", "1:2"), ("b", "")]),
        (b"a::\nb:x", [("a", ":"), ("b", "x")]),
        (b"a:1:2:3", [("a", "1:2:3")]),
        # Escapes, including an escaped backslash before an escape letter.
        (b"a\\cb:c\\\\n\\n\nd:\\\\\\\\", [("a:b", "c\\n\n"), ("d", "\\\\")]),
        (b"x:\\r\\c", [("x", "\r:")]),
        # U+0001 is the placeholder of the one-pass unescape: it must survive.
        (b"a:\x01\\\\\x01\nb:\\\\", [("a", "\x01\\\x01"), ("b", "\\")]),
        (b"a:\x01\nb:\\n", [("a", "\x01"), ("b", "\n")]),
    ],
)
def test_head_split_and_unescape(head: bytes, headers: list[tuple[str, str]]) -> None:
    assert decode_one(b"SEND\n" + head + b"\n\n\x00") == Frame("SEND", tuple(headers))
    # The lenient server mode keeps values verbatim as strict mode does, so it
    # takes the same one-pass split (the embedded broker runs in this mode).
    lenient = lenient_server_decoder()
    lenient.receive_data(b"SEND\n" + head + b"\n\n\x00")
    assert lenient.next_frame() == Frame("SEND", tuple(headers))


def lenient_server_decoder() -> FrameDecoder:
    decoder = FrameDecoder(strict=False)
    decoder._keep_text()  # as ServerConnection(strict=False) sets it up
    return decoder


@pytest.mark.parametrize(
    ("head", "body"),
    [
        (b"content-length:3", b"a\x00b"),
        (b"content-length: 3 ", b"a\x00b"),  # lenient: blanks around the value
        (b"x:content-length:9\ncontent-length:1", b"\x00"),
        (b"content-length:2\ncontent-length:9", b"ab"),
    ],
)
def test_lenient_server_reads_content_length_like_the_general_path(
    head: bytes, body: bytes
) -> None:
    lenient = lenient_server_decoder()
    lenient.receive_data(b"SEND\n" + head + b"\n\n" + body + b"\x00")
    frame = lenient.next_frame()
    assert isinstance(frame, Frame) and frame.body == body


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        # As many colons as lines, but one line has none: not a header line.
        (b"a\nb:1:2", K.BAD_HEADER),
        (b"a:1:2\nb", K.BAD_HEADER),
        (b":x\nb:1", K.BAD_HEADER),
        (b"a:1\n:x", K.BAD_HEADER),
        (b"a:\\t", K.BAD_ESCAPE),
        (b"a:\\\\\\", K.BAD_ESCAPE),
        (b"a:\x01\\q", K.BAD_ESCAPE),
    ],
)
def test_bad_heads_are_refused(head: bytes, kind: ErrorKind) -> None:
    decoder = FrameDecoder()
    decoder.receive_data(b"SEND\n" + head + b"\n\n\x00")
    with pytest.raises(RemoteProtocolError) as info:
        decoder.next_frame()
    assert info.value.kind is kind


def test_cr_escape_is_undefined_in_11() -> None:
    decoder = FrameDecoder("1.1")
    decoder.receive_data(b"SEND\na:\\r\n\n\x00")
    with pytest.raises(RemoteProtocolError) as info:
        decoder.next_frame()
    assert info.value.kind is K.BAD_ESCAPE
    assert decode_one(b"SEND\na:\\n\\c\n\n\x00", "1.1").headers == (("a", "\n:"),)


def test_connect_headers_are_not_unescaped() -> None:
    frame = decode_one(b"CONNECT\nlogin:a\\cb\npasscode:\\q\n\n\x00")
    assert frame.headers == (("login", "a\\cb"), ("passcode", "\\q"))


@pytest.mark.parametrize(
    ("head", "body", "length"),
    [
        (b"content-length:3", b"a\x00b", 3),
        (b"content-length:003", b"a\x00b", 3),
        (b"x:1\ncontent-length:0", b"", 0),
        (b"content-length:2\ncontent-length:9", b"ab", 2),  # the first one wins
        (b"x-content-length:9\ncontent-length:1", b"\x00", 1),
    ],
)
def test_content_length_read_inline(head: bytes, body: bytes, length: int) -> None:
    frame = decode_one(b"SEND\n" + head + b"\n\n" + body + b"\x00")
    assert frame.body == body and len(body) == length


@pytest.mark.parametrize(
    ("command", "head", "limits", "kind"),
    [
        ("SEND", b"content-length: 3", None, K.BAD_CONTENT_LENGTH),
        ("SEND", b"content-length:", None, K.BAD_CONTENT_LENGTH),
        ("SEND", "content-length:\u0663".encode(), None, K.BAD_CONTENT_LENGTH),
        ("SEND", b"content-length:" + b"9" * 30, None, K.TOO_LARGE),
        ("SEND", b"content-length:" + b"9" * 15, None, K.TOO_LARGE),
        ("SEND", b"content-length:11", Limits(max_body_size=10), K.TOO_LARGE),
        ("SEND", b"content-length:11", Limits(max_frame_size=30), K.TOO_LARGE),
        ("ACK", b"content-length:1", None, K.UNEXPECTED_BODY),
    ],
)
def test_content_length_problems(
    command: str, head: bytes, limits: Limits | None, kind: ErrorKind
) -> None:
    decoder = FrameDecoder(limits=limits)
    decoder.receive_data(command.encode() + b"\n" + head + b"\n\n" + b"x" * 11 + b"\x00")
    with pytest.raises(RemoteProtocolError) as info:
        decoder.next_frame()
    assert info.value.kind is kind


def test_content_length_on_a_bodiless_command() -> None:
    assert decode_one(b"ACK\nid:1\ncontent-length:0\n\n\x00").body == b""
    assert decode_one(b"ACK\nid:1\ncontent-length:2\n\nab\x00", "1.0").body == b"ab"


def test_small_frame_missing_nul_is_refused() -> None:
    decoder = FrameDecoder()
    decoder.receive_data(b"SEND\ncontent-length:2\n\nabc")
    with pytest.raises(RemoteProtocolError) as info:
        decoder.next_frame()
    assert info.value.kind is K.MISSING_NUL


@pytest.mark.parametrize("size", [9, 10, 11])
def test_body_without_content_length_at_the_body_limit(size: int) -> None:
    """A whole frame in the buffer: the NUL is looked for only within the limit."""
    decoder = FrameDecoder(limits=Limits(max_body_size=10))
    decoder.receive_data(b"SEND\na:b\n\n" + b"x" * size + b"\x00")
    if size > 10:
        with pytest.raises(RemoteProtocolError) as info:
            decoder.next_frame()
        assert info.value.kind is K.TOO_LARGE
    else:
        assert decoder.next_frame() == Frame("SEND", (("a", "b"),), b"x" * size)


def test_body_without_content_length_at_the_frame_limit() -> None:
    head = b"SEND\na:b\n\n"
    limits = Limits(max_frame_size=len(head) + 4)
    decoder = FrameDecoder(limits=limits)
    decoder.receive_data(head + b"abcd\x00")
    assert decoder.next_frame() == Frame("SEND", (("a", "b"),), b"abcd")
    decoder = FrameDecoder(limits=limits)
    decoder.receive_data(head + b"abcde\x00")
    with pytest.raises(RemoteProtocolError) as info:
        decoder.next_frame()
    assert info.value.kind is K.TOO_LARGE


@pytest.mark.parametrize(
    ("version", "strict", "ok"),
    [("1.2", True, False), ("1.1", True, False), ("1.0", True, True), ("1.2", False, True)],
)
def test_body_without_content_length_on_a_bodiless_command(
    version: str, strict: bool, ok: bool
) -> None:
    decoder = FrameDecoder(version, strict=strict)  # type: ignore[arg-type]
    decoder.receive_data(b"ACK\nid:1\n\nx\x00ACK\nid:2\n\n\x00")
    if ok:
        assert decoder.next_frame() == Frame("ACK", (("id", "1"),), b"x")
    else:
        with pytest.raises(RemoteProtocolError) as info:
            decoder.next_frame()
        assert info.value.kind is K.UNEXPECTED_BODY
        return
    assert decoder.next_frame() == Frame("ACK", (("id", "2"),))


@pytest.mark.parametrize(
    ("data", "headers", "body"),
    [
        (b"SEND\na:b\r\n\r\nx\r\n\n\x00", [("a", "b")], b"x\r\n\n"),
        (b"SEND\r\na:b\n\nx\r\n\r\n\x00", [("a", "b")], b"x\r\n\r\n"),
        (b"SEND\r\na:b\r\nc:d\r\n\r\n\x00", [("a", "b"), ("c", "d")], b""),
    ],
)
def test_12_head_ends_at_the_first_blank_line(
    data: bytes, headers: list[tuple[str, str]], body: bytes
) -> None:
    for cut in range(len(data) + 1):
        decoder = FrameDecoder("1.2")
        assert feed(decoder, cut_at(data, cut)) == [Frame("SEND", tuple(headers), body)]


def test_bad_command_line_before_a_too_large_head_is_reported_first() -> None:
    """Found by test_outcome_is_chunking_independent: with the whole stream in one read,
    the head-size limit used to be reported before the bad command line (1.1: the CR is
    part of the command), which a read ending after that line reports."""
    limits = Limits(max_line_length=48, max_headers=6, max_head_size=160)
    stream = b"ERROR\r\nmessage:x\r\n\r\nbody\x00\r\n" * 6 + b"SEND\na:b\n\n\x00"
    kinds = []
    for chunks in ([stream], [stream[:7], stream[7:]]):
        decoder = FrameDecoder("1.1", limits=limits)
        with pytest.raises(RemoteProtocolError) as info:
            feed(decoder, chunks)
        kinds.append(info.value.kind)
    assert kinds == [K.BAD_COMMAND, K.BAD_COMMAND]
