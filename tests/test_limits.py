"""Limits (1.2 §Size Limits): each one enforced as soon as it is exceeded, the same way
whether the stream arrives whole or 1 byte at a time, and the decoder never buffers much more
than the limits allow.

Where the API leaves the exact byte open (whether the blank line's EOL counts in the head,
when the extra header line is noticed), the accepted error offset is a small range, noted.
"""

from __future__ import annotations

import pytest
from helpers import HB, Outcome, bytewise, cut, drain, run, same_outcome, sized, whole
from hypothesis import example, given
from hypothesis import strategies as st

from stomp_proto import (
    Connect,
    Connected,
    ErrorKind,
    Frame,
    FrameDecoder,
    Limits,
    Send,
    ServerConnection,
    Version,
)

K = ErrorKind
SLACK = 16  # "small constant" allowed above a limit for decoder.buffered


def F(command: str, headers: list[tuple[str, str]] | None = None, body: bytes = b"") -> Frame:
    return Frame(command, tuple(headers or ()), body)


def both(
    data: bytes,
    limits: Limits,
    version: Version = "1.2",
    *,
    strict: bool = True,
    eof: bool = False,
    max_buffered: int | None = None,
) -> tuple[Outcome, Outcome]:
    """Decode fed whole and 1 byte at a time; both must give the same events and error kind."""
    one = run(whole(data), version, strict=strict, limits=limits, eof=eof)
    byte = run(
        bytewise(data), version, strict=strict, limits=limits, eof=eof, max_buffered=max_buffered
    )
    assert same_outcome(one, byte), f"whole: {one.summary()}\n1-byte: {byte.summary()}"
    return one, byte


def assert_ok(data: bytes, limits: Limits, expected: list[object], **kw: object) -> None:
    one, _ = both(data, limits, eof=True, **kw)  # type: ignore[arg-type]
    assert one.error is None, one.error
    assert one.events == expected


def assert_too_large(
    data: bytes, limits: Limits, first: int, last: int | None = None, **kw: object
) -> Outcome:
    """TOO_LARGE both ways; with 1-byte feeding the guilty byte's index is in [first, last]."""
    one, byte = both(data, limits, **kw)  # type: ignore[arg-type]
    assert one.kind is K.TOO_LARGE, one.summary()
    last = first if last is None else last
    assert first <= byte.error_offset <= last, (byte.error_offset, first, last)
    return byte


# -------------------------------------------------------------------------- max_line_length

LINE = Limits(max_line_length=16)


def test_header_line_at_max_line_length_is_accepted() -> None:
    line = b"k:" + b"v" * 14  # 16 bytes
    assert_ok(b"SEND\n" + line + b"\n\n\x00", LINE, [F("SEND", [("k", "v" * 14)])])


def test_header_line_at_max_line_length_with_crlf_is_accepted() -> None:
    """The limit excludes the EOL, CRLF included (1.2)."""
    line = b"k:" + b"v" * 14
    assert_ok(b"SEND\r\n" + line + b"\r\n\r\n\x00", LINE, [F("SEND", [("k", "v" * 14)])])


def test_header_line_over_max_line_length_is_too_large() -> None:
    data = b"SEND\n" + b"k:" + b"v" * 15 + b"\n\n\x00"  # 17-byte line
    assert_too_large(data, LINE, first=5 + 16)


def test_over_long_line_in_an_unfinished_head_is_too_large() -> None:
    """The over-long line is complete but the head is not (no blank line yet): the limit is
    already exceeded, so it must fail now, fed whole as 1 byte at a time."""
    data = b"SEND\n" + b"k:" + b"v" * 20 + b"\na:1\n"
    assert_too_large(data, LINE, first=5 + 16)


def test_over_long_command_line_in_an_unfinished_head_is_too_large() -> None:
    data = b"A" * 20 + b"\nk:v\n"
    assert_too_large(data, LINE, first=16, strict=False)


def test_command_line_over_max_line_length_is_too_large() -> None:
    """Lenient mode, so the unknown command itself is no error."""
    assert_ok(b"A" * 16 + b"\n\n\x00", LINE, [F("A" * 16)], strict=False)
    assert_too_large(b"A" * 17 + b"\n\n\x00", LINE, first=16, strict=False)


def test_never_ending_header_line_fails_with_bounded_buffer() -> None:
    data = b"SEND\n" + b"k:" + b"v" * 5000
    byte = assert_too_large(data, LINE, first=5 + 16, max_buffered=16 + 5 + SLACK)
    assert byte.events == []


def test_never_ending_header_line_in_one_big_chunk_fails_at_once() -> None:
    out = run([b"SEND\n" + b"k:" + b"v" * 100_000], limits=LINE, eof=False)
    assert out.kind is K.TOO_LARGE


def test_default_max_line_length_rejects_70_kb_header() -> None:
    """ActiveMQ rejects a 70 000-byte header with an ERROR ("The maximum header length was
    exceeded") and closes; the default max_line_length (65536) rejects it too."""
    data = b"SEND\nx-big:" + b"v" * 70_000 + b"\n\n\x00"
    assert_too_large(data, Limits(), first=5 + 65536)


def test_default_max_line_length_accepts_64_kib_line() -> None:
    value = "v" * (65536 - 2)
    data = b"SEND\nk:" + value.encode() + b"\n\n\x00"
    out = run(sized(data, 997), "1.2")
    assert out.error is None and out.events == [F("SEND", [("k", value)])]


# ------------------------------------------------------------------------------ max_headers

HEADERS = Limits(max_headers=3)


def test_max_headers_is_accepted() -> None:
    assert_ok(
        b"SEND\na:1\nb:2\nc:3\n\n\x00", HEADERS, [F("SEND", [("a", "1"), ("b", "2"), ("c", "3")])]
    )


def test_one_header_over_max_headers_is_too_large() -> None:
    """Noticed at the latest when the extra line ends (index 5+12+3), at the earliest at its
    first byte (index 5+12)."""
    data = b"SEND\na:1\nb:2\nc:3\nd:4\n\n\x00"
    assert_too_large(data, HEADERS, first=17, last=20)


def test_repeated_headers_count_towards_max_headers() -> None:
    data = b"SEND\nk:1\nk:1\nk:1\nk:1\n\n\x00"
    assert_too_large(data, HEADERS, first=17, last=20)


def test_never_ending_header_list_fails_with_bounded_buffer() -> None:
    data = b"SEND\n" + b"k:1\n" * 1000
    assert_too_large(data, HEADERS, first=17, last=20, max_buffered=5 + 4 * 4 + SLACK)


# ---------------------------------------------------------------------------- max_head_size

HEAD = Limits(max_head_size=40)


def test_head_at_max_head_size_is_accepted() -> None:
    """Head = "SEND\\n" + "a:" + 31 x + "\\n" + "\\n" = 40 bytes counting every EOL."""
    data = b"SEND\na:" + b"x" * 31 + b"\n\n\x00"
    assert_ok(data, HEAD, [F("SEND", [("a", "x" * 31)])])


def test_head_over_max_head_size_is_too_large() -> None:
    """42 bytes counting every EOL (41 without the blank line): over 40 either way.

    The earliest sound point is index 39: 40 bytes are in and the head is not complete, so
    with at least its final EOL still to come it cannot fit; the latest is index 41."""
    data = b"SEND\na:" + b"x" * 33 + b"\n\n\x00"
    assert_too_large(data, HEAD, first=39, last=41)


def test_head_growing_by_one_long_line_fails_at_limit() -> None:
    data = b"SEND\na:" + b"x" * 5000
    assert_too_large(data, HEAD, first=39, last=41, max_buffered=40 + SLACK)


def test_head_growing_by_many_short_lines_fails_at_limit() -> None:
    data = b"SEND\n" + b"h:1\n" * 50
    assert_too_large(data, HEAD, first=39, last=44, max_buffered=40 + SLACK)


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize(
    "data",
    [b"SEND\n" + b"x" * 200, b"SEND\nk:" + b"x" * 200, b"x" * 200],
    ids=["header", "value", "command"],
)
def test_long_line_in_a_long_head_names_max_line_length_however_split(
    data: bytes, strict: bool
) -> None:
    """The line passes max_line_length (50) before the head passes max_head_size (100):
    that is the limit crossed first, whether the bytes come whole or one at a time."""
    limits = Limits(max_line_length=50, max_head_size=100)
    for chunks in (whole(data), bytewise(data), sized(data, 60)):
        out = run(chunks, limits=limits, strict=strict, eof=False)
        assert (out.kind, out.limit) == (K.TOO_LARGE, "max_line_length"), out.summary()


@pytest.mark.parametrize("server", [False, True])
def test_lenient_blank_line_of_blanks_is_no_line_to_limit(server: bool) -> None:
    """Lenient mode ends a head at a line of blanks; max_line_length bounds command
    and header lines, not that one, whether it comes whole or byte by byte (the lenient
    server's decoder, which the accelerated build scans natively, reads it so too)."""
    limits = Limits(max_line_length=50)
    frame = b"SEND\ndestination:/q\n" + b" \t" * 50 + b"\r\nhi\x00"
    for chunks in (whole(frame), bytewise(frame), sized(frame, 60)):
        if server:
            conn = ServerConnection(strict=False, limits=limits)
            conn.receive_data(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
            assert isinstance(conn.next_event(), Connect)
            conn.send(Connected())
            for chunk in chunks:
                conn.receive_data(chunk)
            events = list(conn)
            assert [(type(e), e.body) for e in events] == [(Send, b"hi")]  # type: ignore[attr-defined]
        else:
            out = run(chunks, limits=limits, strict=False, eof=False)
            assert out.error is None and out.events == [F("SEND", [("destination", "/q")], b"hi")]


# Head material: every byte that decides a head limit (EOLs, CR, colons, blanks, NUL).
_PIECES = [b"a", b"b:", b":", b"\n", b"\r", b"\r\n", b" ", b"\t", b"\0", b"v" * 9, b"\\n"]
_heads = st.lists(st.sampled_from(_PIECES), max_size=40).map(b"".join)
_small_limits = st.builds(
    Limits,
    max_line_length=st.integers(1, 40),
    max_headers=st.integers(1, 6),
    max_head_size=st.integers(1, 120),
    max_body_size=st.integers(1, 40),
    max_frame_size=st.integers(1, 160),
)


@example(  # lenient mode's blank line of blanks, longer than max_line_length: it ends the head
    command=b" \n",
    head=b"\r ",
    body=b"\n\x00",
    limits=Limits(max_line_length=1, max_head_size=5, max_frame_size=5),
    version="1.0",
    strict=False,
    cuts=[],
)
@given(
    command=st.sampled_from([b"SEND\n", b"MESSAGE\r\n", b" \n", b"", b"send\n"]),
    head=_heads,
    body=st.sampled_from([b"\n\x00", b"\n\nbody\x00", b"\r\n\r\n\x00\n"]),
    limits=_small_limits,
    version=st.sampled_from(["1.0", "1.1", "1.2"]),
    strict=st.booleans(),
    cuts=st.lists(st.integers(0, 400), max_size=8),
)
def test_every_split_names_the_same_limit(
    command: bytes,
    head: bytes,
    body: bytes,
    limits: Limits,
    version: Version,
    strict: bool,
    cuts: list[int],
) -> None:
    """Limits' promise: the same outcome - frames, error kind and the limit named -
    whether the bytes arrive whole, one at a time or in any other pieces."""
    data = command + head + body
    outcomes = [
        run(chunks, version, strict=strict, limits=limits, eof=False)
        for chunks in (whole(data), bytewise(data), cut(data, cuts))
    ]
    for other in outcomes[1:]:
        assert same_outcome(outcomes[0], other), f"{outcomes[0].summary()}\n{other.summary()}"
        assert str(other.error) == str(outcomes[0].error)


# ---------------------------------------------------------------------------- max_body_size

BODY = Limits(max_body_size=10)


def test_content_length_at_max_body_size_is_accepted() -> None:
    data = b"SEND\ncontent-length:10\n\n0123\x0056789\x00"
    assert_ok(data, BODY, [F("SEND", [("content-length", "10")], b"0123\x0056789")])


def test_declared_content_length_over_max_body_size_fails_before_body() -> None:
    """Fails right after the head, without any body byte having arrived."""
    head = b"SEND\ncontent-length:11\n\n"
    assert_too_large(head, BODY, first=len(head) - 1)


def test_declared_content_length_over_limit_fails_at_head_end_with_crlf() -> None:
    head = b"SEND\r\ncontent-length:11\r\n\r\n"
    assert_too_large(head, BODY, first=len(head) - 1)


def test_nul_terminated_body_at_max_body_size_is_accepted() -> None:
    assert_ok(b"SEND\n\n0123456789\x00", BODY, [F("SEND", [], b"0123456789")])


def test_nul_less_body_fails_past_max_body_size() -> None:
    head = b"SEND\n\n"
    data = head + b"x" * 5000
    byte = assert_too_large(data, BODY, first=len(head) + 10, max_buffered=10 + 6 + SLACK)
    assert byte.events == []


def test_body_limit_is_per_frame() -> None:
    frame = b"SEND\n\n0123456789\x00\n"
    assert_ok(frame * 5, BODY, [F("SEND", [], b"0123456789"), HB] * 5)


# --------------------------------------------------------------------------- max_frame_size

FRAME = Limits(max_frame_size=40)


def test_declared_frame_at_max_frame_size_is_accepted() -> None:
    """Head "SEND\\ncontent-length:16\\n\\n" is 24 bytes; 24 + 16 = 40."""
    body = b"0123456789abcdef"
    data = b"SEND\ncontent-length:16\n\n" + body + b"\x00"
    assert_ok(data, FRAME, [F("SEND", [("content-length", "16")], body)])


def test_declared_frame_over_max_frame_size_fails_before_body() -> None:
    """24 + 18 = 42 (41 if the blank line were not counted): over 40 either way."""
    head = b"SEND\ncontent-length:18\n\n"
    assert_too_large(head, FRAME, first=len(head) - 1)


def test_nul_terminated_frame_at_max_frame_size_is_accepted() -> None:
    body = b"b" * 34  # head "SEND\n\n" is 6 bytes
    assert_ok(b"SEND\n\n" + body + b"\x00", FRAME, [F("SEND", [], body)])


def test_nul_less_frame_fails_past_max_frame_size() -> None:
    """Frame = 6-byte head + body; the 41st byte (index 40) exceeds 40 (index 41 if the blank
    line's EOL is not counted in the head)."""
    data = b"SEND\n\n" + b"b" * 5000
    assert_too_large(data, FRAME, first=40, last=41, max_buffered=40 + SLACK)


def test_head_growing_past_max_frame_size_fails() -> None:
    """max_frame_size bounds the head too (head + body): with a 40-byte frame limit, a header
    line that never ends cannot be buffered up to the (default 1 MiB) head limit."""
    data = b"SEND\na:" + b"x" * 5000
    assert_too_large(data, FRAME, first=39, last=41, max_buffered=40 + SLACK)


def test_frame_limit_counts_head_and_body() -> None:
    """Each part alone is within its own limit; together they exceed max_frame_size."""
    limits = Limits(max_frame_size=40, max_head_size=30, max_body_size=30)
    head = b"SEND\na:" + b"x" * 20 + b"\n\n"  # 29 bytes
    assert_ok(head + b"y" * 11 + b"\x00", limits, [F("SEND", [("a", "x" * 20)], b"y" * 11)])
    assert_too_large(head + b"y" * 20 + b"\x00", limits, first=40, last=41)


# ------------------------------------------------------------------------------- all limits

SMALL = Limits(
    max_line_length=16, max_headers=3, max_head_size=40, max_body_size=10, max_frame_size=45
)


def test_limits_reset_between_frames() -> None:
    frame = b"SEND\na:1\nb:2\nc:3\n\n0123456789\x00"
    expected = F("SEND", [("a", "1"), ("b", "2"), ("c", "3")], b"0123456789")
    assert_ok(frame * 10, SMALL, [expected] * 10)


def test_heartbeats_do_not_count_towards_limits() -> None:
    assert_ok(b"\n" * 500 + b"SEND\n\n\x00", SMALL, [HB] * 500 + [F("SEND")])


def test_crlf_heartbeats_do_not_count_towards_limits() -> None:
    assert_ok(b"\r\n" * 100 + b"SEND\n\n\x00", SMALL, [HB] * 100 + [F("SEND")])


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
@pytest.mark.parametrize("strict", [True, False])
def test_limits_apply_in_every_version_and_mode(version: Version, strict: bool) -> None:
    data = b"SEND\n" + b"k:" + b"v" * 100
    one, byte = both(data, LINE, version, strict=strict)
    assert one.kind is K.TOO_LARGE
    assert byte.error_offset == 5 + 16


# -- the Limits object itself ----------------------------------------------------------


def test_defaults_follow_what_brokers_accept() -> None:
    limits = Limits()
    assert limits.max_line_length == 64 * 1024
    assert limits.max_headers == 1000
    assert limits.max_head_size == 1024 * 1024
    assert limits.max_body_size == 64 * 1024 * 1024
    assert limits.max_frame_size == 65 * 1024 * 1024  # a largest body and its head


@pytest.mark.parametrize("name", list(Limits.__slots__))
@pytest.mark.parametrize("value", [0, -1])
def test_each_limit_must_be_a_positive_int(name: str, value: object) -> None:
    with pytest.raises(ValueError, match=name):
        Limits(**{name: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("name", list(Limits.__slots__))
@pytest.mark.parametrize("value", [1.5, "10", None, True])
def test_each_limit_must_be_an_int(name: str, value: object) -> None:
    with pytest.raises(TypeError, match=name):
        Limits(**{name: value})  # type: ignore[arg-type]


def test_limits_are_frozen_values() -> None:
    limits = Limits(max_headers=5)
    with pytest.raises(AttributeError):
        limits.max_headers = 6  # type: ignore[misc]
    assert limits == Limits(max_headers=5) and hash(limits) == hash(Limits(max_headers=5))


# Limits have no upper bound: a broker run with ``--max-body-size`` of 2**64 is valid.
# Under such limits the accelerated build once raised OverflowError, on every later
# call, where the pure code had read a head (a content-length of 19 digits, blank lines
# before a lenient command) and its body came in a later read: the native decoder took
# the pure code's body limit into a C integer.  Every split of each stream must give
# the frames the default limits give, under every such limit, in both builds.
UNBOUNDED = [
    Limits(max_body_size=2**64, max_frame_size=2**64),
    Limits(max_body_size=2**63, max_frame_size=2**63 - 1),
    Limits(max_body_size=10**20, max_frame_size=10**21, max_head_size=2**64),
    Limits(*(2**64,) * 5),
    Limits(max_body_size=2**60 - 1, max_frame_size=2**60),
]
UNBOUNDED_STREAMS = {
    "19-digit content-length": b"SEND\ncontent-length:0000000000000000005\n\nhello\x00\n",
    "20-digit content-length": b"SEND\ncontent-length:00000000000000000005\n\nhello\x00",
    "no content-length": b"SEND\ndestination:/q\n\nhello\x00SEND\n\n\x00",
    "short content-length": b"MESSAGE\ncontent-length:3\n\na\x00b\x00\n",
    "blanks before the command": b"  \nSEND\ncontent-length:5\n\nhello\x00",
    "blank line of blanks": b"SEND\n \t\nbody\x00\n",
}


LENIENT_ONLY = ("blanks before the command", "blank line of blanks")


@pytest.mark.parametrize("limits", UNBOUNDED, ids=range(len(UNBOUNDED)))
@pytest.mark.parametrize(
    ("name", "strict"),
    [(name, strict) for name in UNBOUNDED_STREAMS for strict in (True, False)
     if not (strict and name in LENIENT_ONLY)],
)  # fmt: skip
def test_limits_of_any_size_read_every_split_as_the_defaults_do(
    limits: Limits, name: str, strict: bool
) -> None:
    stream = UNBOUNDED_STREAMS[name]

    def frames(chunks: list[bytes], limits: Limits | None) -> list[object]:
        decoder = FrameDecoder("1.2", strict=strict, limits=limits)
        if not strict:
            decoder._keep_text()  # the lenient server's decoder (the embedded broker's)
        events: list[object] = []
        for chunk in [*chunks, None]:
            decoder.receive_data(chunk)
            drain(decoder, events)  # type: ignore[arg-type]
        return events

    expected = frames([stream], None)
    assert any(isinstance(event, Frame) for event in expected)
    splits = [[stream[:i], stream[i:]] for i in range(len(stream) + 1)]
    splits.append([stream[i : i + 1] for i in range(len(stream))])
    for chunks in splits:
        assert frames(chunks, limits) == expected, chunks


def test_a_server_with_unbounded_limits_reads_a_lenient_head_before_its_body() -> None:
    # The embedded broker's connection (lenient, verbatim) under --max-body-size 2**64.
    conn = ServerConnection(strict=False, limits=Limits(max_body_size=2**64, max_frame_size=2**64))
    conn.receive_data(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
    assert isinstance(conn.next_event(), Connect)
    conn.send(Connected(session="s"))
    conn.receive_data(b" \nSEND\ndestination:/q\ncontent-length:0000000000000000005\n\n")
    assert conn.next_event() is None
    conn.receive_data(b"hello\x00")
    event = conn.next_event()
    assert isinstance(event, Send) and event.body == b"hello"
    conn.receive_data(b"SEND\ndestination:/q\n\nagain\x00")
    event = conn.next_event()
    assert isinstance(event, Send) and event.body == b"again"
