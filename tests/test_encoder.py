"""FrameEncoder: per-version escaping, content-length handling, and refused frames.

Exact output is only asserted where the API fixes it (HeartBeat -> b"\\n"); frames are read
back with helpers.parse_encoded, which relies only on the frame grammar (LF line ends).
"""

from __future__ import annotations

import pytest
from helpers import ALL_COMMANDS, BODY_COMMANDS, NON_BODY_COMMANDS, VERSIONS, parse_encoded

from stomp_proto import (
    Frame,
    FrameDecoder,
    FrameEncoder,
    HeartBeat,
    LocalProtocolError,
    ProtocolError,
    Version,
)


def encode(frame: Frame, version: str = "1.2", **kw: bool) -> bytes:
    return FrameEncoder(version).encode(frame, **kw)  # type: ignore[arg-type]


def header_lines(frame: Frame, version: str = "1.2", **kw: bool) -> list[bytes]:
    return parse_encoded(encode(frame, version, **kw))[1]


def F(command: str, headers: list[tuple[str, str]] | None = None, body: bytes = b"") -> Frame:
    return Frame(command, tuple(headers or ()), body)


def test_default_version_is_12() -> None:
    assert FrameEncoder().version == "1.2"


@pytest.mark.parametrize("version", VERSIONS)
def test_heartbeat_is_a_single_lf(version: str) -> None:
    assert FrameEncoder(version).encode(HeartBeat()) == b"\n"


def test_encode_returns_bytes() -> None:
    assert type(encode(F("SEND", [("destination", "/q")], b"x"))) is bytes


@pytest.mark.parametrize("version", VERSIONS)
def test_frame_layout(version: str) -> None:
    """§STOMP Frames: command EOL, header EOLs, blank line, body, NUL (then optional EOLs)."""
    out = encode(F("SEND", [("destination", "/queue/a"), ("x", "1")], b"hi"), version)
    command, lines, body, _ = parse_encoded(out)
    assert command == b"SEND"
    assert [ln for ln in lines if not ln.startswith(b"content-length:")] == [
        b"destination:/queue/a",
        b"x:1",
    ]
    assert body == b"hi"


def test_frame_without_headers_or_body() -> None:
    out = encode(F("DISCONNECT"))
    assert out.startswith(b"DISCONNECT\n\n\x00")
    assert parse_encoded(out)[:3] == (b"DISCONNECT", [], b"")


def test_header_order_and_repeats_are_kept() -> None:
    """1.2 §Repeated Header Entries: repeats carry history; order matters."""
    lines = header_lines(F("MESSAGE", [("foo", "World"), ("bar", "1"), ("foo", "Hello")]))
    assert lines == [b"foo:World", b"bar:1", b"foo:Hello"]


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_utf8_headers(version: str) -> None:
    lines = header_lines(F("SEND", [("clé", "日本")]), version)
    assert lines == ["clé:日本".encode()]


# ------------------------------------------------------------------------------------ escaping


def test_12_escapes_value() -> None:
    """1.2 §Value Encoding: CR, LF, ':' and '\\' are escaped."""
    lines = header_lines(F("SEND", [("k", "a:b\nc\\d\re")]), "1.2")
    assert lines == [b"k:a\\cb\\nc\\\\d\\re"]


def test_12_escapes_name() -> None:
    lines = header_lines(F("SEND", [("a:b\nc\\d\re", "v")]), "1.2")
    assert lines == [b"a\\cb\\nc\\\\d\\re:v"]


def test_11_escapes_value_without_cr_escape() -> None:
    """1.1 §Value Encoding defines \\n \\c \\\\ only; \\r is undefined there (stomp.py #51:
    "\\r should not be escaped with STOMP 1.1")."""
    lines = header_lines(F("SEND", [("k", "a:b\nc\\d")]), "1.1")
    assert lines == [b"k:a\\cb\\nc\\\\d"]


def test_11_carriage_return_is_sent_raw() -> None:
    """1.1 §Augmented BNF: a header octet may be anything but LF and ':'; a CR is plain data in
    1.1, so it is sent as is rather than as the undefined escape \\r."""
    lines = header_lines(F("SEND", [("k", "a\rb")]), "1.1")
    assert lines == [b"k:a\rb"]


def test_backslash_is_escaped() -> None:
    """JSteunou/webstomp-client #77: backslashes were not escaped."""
    assert header_lines(F("SEND", [("k", "\\")]), "1.2") == [b"k:\\\\"]


def test_10_does_not_escape() -> None:
    """1.0 has no escapes: backslash and ':' in a value are sent as they are."""
    lines = header_lines(F("SEND", [("k", "a\\b:c\\n")]), "1.0")
    assert lines == [b"k:a\\b:c\\n"]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("command", ["CONNECT", "CONNECTED"])
def test_connect_and_connected_are_not_escaped(version: str, command: str) -> None:
    """1.2 §Value Encoding: CONNECT and CONNECTED headers are not escaped."""
    lines = header_lines(F(command, [("passcode", "a:b\\c")]), version)
    assert lines == [b"passcode:a:b\\c"]


def test_version_is_settable() -> None:
    encoder = FrameEncoder("1.2")
    frame = F("SEND", [("k", "a:b")])
    assert parse_encoded(encoder.encode(frame))[1] == [b"k:a\\cb"]
    encoder.version = "1.0"
    assert encoder.version == "1.0"
    assert parse_encoded(encoder.encode(frame))[1] == [b"k:a:b"]


# ------------------------------------------------------------------------------ content-length


def content_lengths(out: bytes) -> list[bytes]:
    return [ln[len(b"content-length:") :] for ln in parse_encoded(out)[1]
            if ln.startswith(b"content-length:")]  # fmt: skip


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("command", sorted(BODY_COMMANDS))
def test_content_length_added_for_body(version: str, command: str) -> None:
    """1.2 §Header content-length: frames with a body SHOULD include it."""
    out = encode(F(command, [("k", "v")], b"hello"), version)
    assert content_lengths(out) == [b"5"]
    assert parse_encoded(out)[2] == b"hello"


def test_content_length_counts_octets() -> None:
    out = encode(F("SEND", [], "é€".encode()))
    assert content_lengths(out) == [b"5"]


def test_content_length_with_nuls_in_body() -> None:
    """1.2 §Header content-length: a body with NULs MUST have content-length."""
    out = encode(F("SEND", [], b"\x00a\x00"))
    assert content_lengths(out) == [b"3"]
    assert parse_encoded(out)[2] == b"\x00a\x00"


def test_no_content_length_for_empty_body() -> None:
    assert content_lengths(encode(F("SEND", [("destination", "/q")]))) == []


def test_content_length_false_omits_it() -> None:
    """stomp.py #216 / stompman #118: ActiveMQ picks TextMessage when it is absent."""
    out = encode(F("SEND", [("destination", "/q")], b"hello"), content_length=False)
    assert content_lengths(out) == []
    assert parse_encoded(out)[2] == b"hello"


def test_callers_content_length_is_replaced() -> None:
    out = encode(F("SEND", [("content-length", "99"), ("k", "v")], b"hello"))
    assert content_lengths(out) == [b"5"]
    assert b"k:v" in parse_encoded(out)[1]


def test_callers_repeated_content_lengths_are_all_replaced() -> None:
    out = encode(F("SEND", [("content-length", "1"), ("content-length", "2")], b"hello"))
    assert content_lengths(out) == [b"5"]


def test_callers_content_length_dropped_with_content_length_false() -> None:
    out = encode(F("SEND", [("content-length", "5")], b"hello"), content_length=False)
    assert content_lengths(out) == []


def test_callers_content_length_dropped_for_empty_body() -> None:
    out = encode(F("SUBSCRIBE", [("id", "0"), ("content-length", "7")]))
    assert content_lengths(out) == []


def test_content_length_on_error_frame_in_10() -> None:
    out = encode(F("ERROR", [("message", "m")], b"details"), "1.0")
    assert content_lengths(out) == [b"7"]


# ---------------------------------------------------------------------------- refused frames


def refused(frame: Frame, version: str = "1.2", **kw: bool) -> LocalProtocolError:
    with pytest.raises(LocalProtocolError) as info:
        encode(frame, version, **kw)
    assert isinstance(info.value, ProtocolError)
    return info.value


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("command", NON_BODY_COMMANDS)
def test_body_on_non_body_frame_is_refused(version: str, command: str) -> None:
    """1.2 §Body: only SEND, MESSAGE and ERROR may have a body (1.0 adds SUBSCRIBE).

    1.0 knows no NACK and no STOMP: the encoder refuses those frames whatever their body.
    """
    if version == "1.0" and command == "SUBSCRIBE":
        # 1.0 §SUBSCRIBE: "The body of the SUBSCRIBE command is ignored."
        assert encode(F(command, [], b"x"), version).endswith(b"\n\nx\x00")
        return
    refused(F(command, [], b"x"), version)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("command", ["SEND", "CONNECT"])
@pytest.mark.parametrize(
    "header", [("k\x00", "v"), ("k", "a\x00b"), ("k", "\x00")], ids=["name", "value", "only-nul"]
)
def test_nul_in_header_is_refused(version: str, command: str, header: tuple[str, str]) -> None:
    """A NUL ends the frame; no escape exists for it in any version."""
    refused(F(command, [header]), version)


def test_lf_in_10_value_is_refused() -> None:
    """1.0 §Augmented BNF: no escapes, so an LF cannot be in a 1.0 header."""
    refused(F("SEND", [("k", "a\nb")]), "1.0")


def test_lf_in_10_name_is_refused() -> None:
    refused(F("SEND", [("a\nb", "v")]), "1.0")


@pytest.mark.parametrize("version", ["1.0", "1.1"])
@pytest.mark.parametrize("value", ["a\rb", "a\r", "\r"])
def test_cr_in_value_before_12_is_sent_raw(version: Version, value: str) -> None:
    """1.0 §Augmented BNF: header-value = 1*<any CHAR except LF>; 1.1 escapes no CR.

    A broker's 1.0 message-id may carry one, and the ACK must echo it as sent
    (found by the client fuzz target).
    """
    frame = F("ACK", [("message-id", value)])
    out = encode(frame, version)
    assert b"message-id:" + value.encode() + b"\n" in out
    decoder = FrameDecoder(version)
    decoder.receive_data(out)
    assert decoder.next_frame() == frame


@pytest.mark.parametrize("char", ["\n", "\r"])
def test_line_break_in_12_unescaped_header_is_refused(char: str) -> None:
    """1.2 §Augmented BNF: a CR may begin the CRLF that ends a line; CONNECT is never escaped."""
    refused(F("CONNECT", [("login", f"a{char}b")]), "1.2")


def test_colon_in_10_name_is_refused() -> None:
    """1.0 §Augmented BNF: header-name = 1*<any CHAR except LF or ":">."""
    refused(F("SEND", [("a:b", "v")]), "1.0")


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("command", ["CONNECT", "CONNECTED"])
@pytest.mark.parametrize("char", ["\n", "\r"])
def test_eol_in_connect_value_is_refused(version: str, command: str, char: str) -> None:
    """1.2 §Value Encoding: CONNECT/CONNECTED are not escaped, so LF/CR cannot be sent.

    A CR would begin a CRLF for a 1.2 peer, which may read the frame before any
    version is agreed.
    """
    refused(F(command, [("login", f"a{char}b")]), version)


@pytest.mark.parametrize("version", VERSIONS)
def test_colon_in_connect_name_is_refused(version: str) -> None:
    refused(F("CONNECT", [("a:b", "v")]), version)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("command", ["SEND", "CONNECT"])
def test_empty_header_name_is_refused(version: str, command: str) -> None:
    """§Augmented BNF: header-name = 1*<...>."""
    refused(F(command, [("", "v")]), version)


@pytest.mark.parametrize("version", VERSIONS)
def test_nul_in_body_without_content_length_is_refused(version: str) -> None:
    """1.2 §Header content-length: "If the frame body contains NULL octets, the frame MUST
    include a content-length header"."""
    refused(F("SEND", [], b"a\x00b"), version, content_length=False)


@pytest.mark.parametrize("command", ["FOO", "send", "Send", "", "SEND ", "SEND\n"])
def test_unknown_command_is_refused(command: str) -> None:
    refused(F(command))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("header", [("k", "a\ud800b"), ("k\udfff", "v")], ids=["value", "name"])
def test_lone_surrogate_in_header_is_refused(version: str, header: tuple[str, str]) -> None:
    """A lone surrogate cannot be encoded in UTF-8 (1.2 §Value Encoding: headers are UTF-8)."""
    refused(F("SEND", [header]), version)


def test_refusal_does_not_break_the_encoder() -> None:
    encoder = FrameEncoder("1.2")
    with pytest.raises(LocalProtocolError):
        encoder.encode(F("SUBSCRIBE", [], b"x"))
    out = encoder.encode(F("SEND", [("k", "v")]))
    assert parse_encoded(out)[:2] == (b"SEND", [b"k:v"])


@pytest.mark.parametrize("version", ["1.1", "1.2"])
@pytest.mark.parametrize(
    "command", [c for c in ALL_COMMANDS if c not in ("CONNECT", "CONNECTED", "STOMP")]
)
def test_every_escaped_command_accepts_any_text(version: str, command: str) -> None:
    """Outside CONNECT/CONNECTED, 1.1/1.2 escaping represents ':' '\\' LF in names and values."""
    out = encode(F(command, [("a:b\nc", "d:e\nf\\")]), version)
    assert parse_encoded(out)[:2] == (command.encode(), [b"a\\cb\\nc:d\\ce\\nf\\\\"])


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_stomp_frame_is_escaped(version: str) -> None:
    """1.2 §Value Encoding: "All frames except the CONNECT and CONNECTED frames will also
    escape ..." - the STOMP frame is escaped (the API also exempts only CONNECT/CONNECTED)."""
    out = encode(F("STOMP", [("accept-version", "1.2"), ("login", "a:b")]), version)
    assert parse_encoded(out)[1] == [b"accept-version:1.2", b"login:a\\cb"]
