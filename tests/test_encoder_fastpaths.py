"""FrameEncoder's one-pass route for escaped frames agrees with the per-header route.

Escaped frames join every name and value with NUL and U+0001 placeholders, escape the
whole text once and then turn the placeholders into ':' and LF.  These tests hold text
that collides with the placeholders, or that the one-pass checks must send elsewhere.
"""

from __future__ import annotations

import pytest
from helpers import ESCAPING_VERSIONS, names_the_argument

from stomp_proto import ErrorKind, Frame, FrameDecoder, FrameEncoder, LocalProtocolError, Version


def roundtrip(frame: Frame, version: Version = "1.2") -> tuple[bytes, Frame]:
    data = FrameEncoder(version).encode(frame)
    decoder = FrameDecoder(version)
    decoder.receive_data(data)
    back = decoder.next_frame()
    assert isinstance(back, Frame)
    assert decoder.next_frame() is None
    return data, back


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
@pytest.mark.parametrize(
    "headers",
    [
        (("a", "\x01"),),  # the header placeholder, as text
        (("a\x01b", "c"), ("d", "\x01\x01")),
        (("a", ""), ("b", "")),  # empty values next to each other
        (("a", ""), ("", "x")),  # ... and an empty name after one (refused below)
        (("a:b", "c:d\ne\\f"), ("g", "h")),
        (("content-length", "99"), ("a", "b")),  # replaced by the real one
        (("a", "b"), ("x-content-length", "1"), ("content-length", "3")),
        (("a", "content-length"),),
    ],
)
def test_escaped_headers_roundtrip(version: Version, headers: tuple[tuple[str, str], ...]) -> None:
    frame = Frame("SEND", headers, b"xyz")
    if any(name == "" for name, _ in headers):
        with pytest.raises(LocalProtocolError) as info:
            FrameEncoder(version).encode(frame)
        assert info.value.kind is ErrorKind.BAD_HEADER
        return
    data, back = roundtrip(frame, version)
    assert data.count(b"\x00") == 1
    want = [(n, v) for n, v in headers if n != "content-length"] + [("content-length", "3")]
    assert list(back.headers) == want
    assert back.body == b"xyz"


def test_exact_bytes_of_an_escaped_frame() -> None:
    frame = Frame("SEND", (("a:b", "c\nd\\e\rf"), ("g", "\x01")), b"")
    assert FrameEncoder("1.2").encode(frame) == b"SEND\na\\cb:c\\nd\\\\e\\rf\ng:\x01\n\n\x00"
    assert FrameEncoder("1.1").encode(frame) == b"SEND\na\\cb:c\\nd\\\\e\rf\ng:\x01\n\n\x00"


@pytest.mark.parametrize(
    "headers",
    [
        (("", "x"),),
        (("a", "b"), ("", "x")),
        (("a\x00", "b"),),
        (("a", "b\x00"),),
        (("a", "b"), ("c", "\x00")),
    ],
)
def test_refused_headers(headers: tuple[tuple[str, str], ...]) -> None:
    with pytest.raises(LocalProtocolError) as info:
        FrameEncoder("1.2").encode(Frame("SEND", headers))
    assert info.value.kind is ErrorKind.BAD_HEADER


@pytest.mark.parametrize("bad", [(("a", 1),), ((b"a", "b"),), (("a", None),)])
def test_non_str_headers_are_refused(bad: object) -> None:
    # A wrong type is a TypeError naming the header (as Send and Frame.make say too).
    with pytest.raises(TypeError) as info:
        FrameEncoder("1.2").encode(Frame("SEND", bad))  # type: ignore[arg-type]
    assert names_the_argument(info.value, "must be a str name with a str value")


def test_unencodable_header_is_refused() -> None:
    with pytest.raises(LocalProtocolError) as info:
        FrameEncoder("1.2").encode(Frame("SEND", (("a", "\ud800"),)))
    assert info.value.kind is ErrorKind.BAD_ENCODING


def test_no_headers_and_content_length_only() -> None:
    encode = FrameEncoder("1.2").encode
    assert encode(Frame("SEND", (), b"ab")) == b"SEND\ncontent-length:2\n\nab\x00"
    assert encode(Frame("SEND", (("content-length", "5"),), b"")) == b"SEND\n\n\x00"
    assert encode(Frame("SEND", (("a", "b"),), b"ab"), content_length=False) == (
        b"SEND\na:b\n\nab\x00"
    )
