"""FrameDecoder against the STOMP specifications: the spec examples as vectors, then each rule.

Every stream here is decoded twice, fed whole and 1 byte at a time (helpers.decode), and
both feedings must agree.  Section names refer to the spec texts
(stomp-specification-1.0/1.1/1.2.md; "draft" is the lenient early draft).
"""

from __future__ import annotations

import pytest
from helpers import (
    ALL_COMMANDS,
    BODY_COMMANDS,
    ESCAPING_VERSIONS,
    HB,
    NON_BODY_COMMANDS,
    VERSIONS,
    decode,
    decode_error,
    decode_one,
    drain,
    run,
)

from stomp_proto import (
    ErrorKind,
    Frame,
    FrameDecoder,
    HeartBeat,
    Limits,
    ProtocolError,
    RemoteProtocolError,
)

K = ErrorKind


def F(command: str, headers: list[tuple[str, str]] | None = None, body: bytes = b"") -> Frame:
    return Frame(command, tuple(headers or ()), body)


# ---------------------------------------------------------------------------------------------
# Spec examples, byte for byte (indentation removed, "^@" = NUL, lines joined with LF).
# ---------------------------------------------------------------------------------------------

ERROR_BODY_12 = (
    b"The message:\n-----\nMESSAGE\ndestined:/queue/a\nreceipt:message-12345\n\n"
    b"Hello queue a!\n-----\nDid not contain a destination header, which is REQUIRED\n"
    b"for message propagation.\n"
)
# 1.1's example has one more blank line inside the body, hence content-length:171.
ERROR_BODY_11 = (
    b"The message:\n-----\nMESSAGE\ndestined:/queue/a\nreceipt:message-12345\n\n\n"
    b"Hello queue a!\n-----\nDid not contain a destination header, which is REQUIRED\n"
    b"for message propagation.\n"
)

SPEC_12 = [
    pytest.param(
        b"CONNECT\naccept-version:1.2\nhost:stomp.github.org\n\n\x00",
        F("CONNECT", [("accept-version", "1.2"), ("host", "stomp.github.org")]),
        id="Connecting-CONNECT",
    ),
    pytest.param(
        b"CONNECTED\nversion:1.2\n\n\x00", F("CONNECTED", [("version", "1.2")]),
        id="Connecting-CONNECTED",
    ),
    pytest.param(
        b"SEND\ndestination:/queue/a\nreceipt:message-12345\n\nhello queue a\x00",
        F("SEND", [("destination", "/queue/a"), ("receipt", "message-12345")], b"hello queue a"),
        id="Header-receipt-SEND",
    ),
    pytest.param(
        b"SEND\ndestination:/queue/a\ncontent-type:text/plain\n\nhello queue a\n\x00",
        F("SEND", [("destination", "/queue/a"), ("content-type", "text/plain")],
          b"hello queue a\n"),
        id="SEND",
    ),
    pytest.param(
        b"SUBSCRIBE\nid:0\ndestination:/queue/foo\nack:client\n\n\x00",
        F("SUBSCRIBE", [("id", "0"), ("destination", "/queue/foo"), ("ack", "client")]),
        id="SUBSCRIBE",
    ),
    pytest.param(b"UNSUBSCRIBE\nid:0\n\n\x00", F("UNSUBSCRIBE", [("id", "0")]), id="UNSUBSCRIBE"),
    pytest.param(
        b"ACK\nid:12345\ntransaction:tx1\n\n\x00",
        F("ACK", [("id", "12345"), ("transaction", "tx1")]), id="ACK",
    ),
    pytest.param(
        b"BEGIN\ntransaction:tx1\n\n\x00", F("BEGIN", [("transaction", "tx1")]), id="BEGIN"
    ),
    pytest.param(
        b"COMMIT\ntransaction:tx1\n\n\x00", F("COMMIT", [("transaction", "tx1")]), id="COMMIT"
    ),
    pytest.param(
        b"ABORT\ntransaction:tx1\n\n\x00", F("ABORT", [("transaction", "tx1")]), id="ABORT"
    ),
    pytest.param(
        b"MESSAGE\nsubscription:0\nmessage-id:007\ndestination:/queue/a\n"
        b"content-type:text/plain\n\nhello queue a\x00",
        F("MESSAGE", [("subscription", "0"), ("message-id", "007"), ("destination", "/queue/a"),
                      ("content-type", "text/plain")], b"hello queue a"),
        id="MESSAGE",
    ),
    pytest.param(
        b"RECEIPT\nreceipt-id:message-12345\n\n\x00",
        F("RECEIPT", [("receipt-id", "message-12345")]), id="RECEIPT",
    ),
    pytest.param(
        b"ERROR\nreceipt-id:message-12345\ncontent-type:text/plain\ncontent-length:170\n"
        b"message:malformed frame received\n\n" + ERROR_BODY_12 + b"\x00",
        F("ERROR", [("receipt-id", "message-12345"), ("content-type", "text/plain"),
                    ("content-length", "170"), ("message", "malformed frame received")],
          ERROR_BODY_12),
        id="ERROR",
    ),
    pytest.param(
        b"MESSAGE\nfoo:World\nfoo:Hello\n\n\x00",
        F("MESSAGE", [("foo", "World"), ("foo", "Hello")]), id="Repeated-Header-Entries",
    ),
    pytest.param(
        b"CONNECT\naccept-version:1.0,1.1,2.0\nhost:stomp.github.org\n\n\x00",
        F("CONNECT", [("accept-version", "1.0,1.1,2.0"), ("host", "stomp.github.org")]),
        id="Protocol-Negotiation-CONNECT",
    ),
    pytest.param(
        b"CONNECTED\nversion:1.1\n\n\x00", F("CONNECTED", [("version", "1.1")]),
        id="Protocol-Negotiation-CONNECTED",
    ),
    pytest.param(
        b"ERROR\nversion:1.2,2.1\ncontent-type:text/plain\n\n"
        b"Supported protocol versions are 1.2 2.1\x00",
        F("ERROR", [("version", "1.2,2.1"), ("content-type", "text/plain")],
          b"Supported protocol versions are 1.2 2.1"),
        id="Protocol-Negotiation-version-mismatch-ERROR",
    ),
]  # fmt: skip
# Not used: 1.2 §DISCONNECT's "DISCONNECT\nreceipt:77\n^@" and "RECEIPT\nreceipt-id:77\n^@"
# leave out the blank line that the §Augmented BNF requires, so they are not valid frames.

SPEC_11 = [
    pytest.param(
        b"CONNECT\naccept-version:1.1\nhost:stomp.github.org\n\n\x00",
        F("CONNECT", [("accept-version", "1.1"), ("host", "stomp.github.org")]),
        id="Connecting-CONNECT",
    ),
    pytest.param(
        b"CONNECTED\nversion:1.1\n\n\x00", F("CONNECTED", [("version", "1.1")]),
        id="Connecting-CONNECTED",
    ),
    pytest.param(
        b"SEND\ndestination:/queue/a\ncontent-type:text/plain\n\nhello queue a\n\x00",
        F("SEND", [("destination", "/queue/a"), ("content-type", "text/plain")],
          b"hello queue a\n"),
        id="SEND",
    ),
    pytest.param(
        b"SUBSCRIBE\nid:0\ndestination:/queue/foo\nack:client\n\n\x00",
        F("SUBSCRIBE", [("id", "0"), ("destination", "/queue/foo"), ("ack", "client")]),
        id="SUBSCRIBE",
    ),
    pytest.param(b"UNSUBSCRIBE\nid:0\n\n\x00", F("UNSUBSCRIBE", [("id", "0")]), id="UNSUBSCRIBE"),
    pytest.param(
        b"ACK\nsubscription:0\nmessage-id:007\ntransaction:tx1\n\n\x00",
        F("ACK", [("subscription", "0"), ("message-id", "007"), ("transaction", "tx1")]),
        id="ACK",
    ),
    pytest.param(
        b"BEGIN\ntransaction:tx1\n\n\x00", F("BEGIN", [("transaction", "tx1")]), id="BEGIN"
    ),
    pytest.param(
        b"COMMIT\ntransaction:tx1\n\n\x00", F("COMMIT", [("transaction", "tx1")]), id="COMMIT"
    ),
    pytest.param(
        b"ABORT\ntransaction:tx1\n\n\x00", F("ABORT", [("transaction", "tx1")]), id="ABORT"
    ),
    pytest.param(
        b"SEND\ndestination:/queue/a\nreceipt:message-12345\n\nhello queue a\x00",
        F("SEND", [("destination", "/queue/a"), ("receipt", "message-12345")], b"hello queue a"),
        id="Header-receipt-SEND",
    ),
    pytest.param(
        b"MESSAGE\nsubscription:0\nmessage-id:007\ndestination:/queue/a\n"
        b"content-type:text/plain\n\nhello queue a\x00",
        F("MESSAGE", [("subscription", "0"), ("message-id", "007"), ("destination", "/queue/a"),
                      ("content-type", "text/plain")], b"hello queue a"),
        id="MESSAGE",
    ),
    pytest.param(
        b"RECEIPT\nreceipt-id:message-12345\n\n\x00",
        F("RECEIPT", [("receipt-id", "message-12345")]), id="RECEIPT",
    ),
    pytest.param(
        # 1.1 §Value Encoding: "MUST never trim or pad headers with spaces", so the padded
        # "message: malformed frame received" keeps its leading space.
        b"ERROR\nreceipt-id:message-12345\ncontent-type:text/plain\ncontent-length:171\n"
        b"message: malformed frame received\n\n" + ERROR_BODY_11 + b"\x00",
        F("ERROR", [("receipt-id", "message-12345"), ("content-type", "text/plain"),
                    ("content-length", "171"), ("message", " malformed frame received")],
          ERROR_BODY_11),
        id="ERROR",
    ),
    pytest.param(
        b"MESSAGE\nfoo:World\nfoo:Hello\n\n\x00",
        F("MESSAGE", [("foo", "World"), ("foo", "Hello")]), id="Repeated-Header-Entries",
    ),
    pytest.param(
        b"ERROR\nversion:1.2,2.1\ncontent-type:text/plain\n\n"
        b"Supported protocol versions are 1.2 2.1\x00",
        F("ERROR", [("version", "1.2,2.1"), ("content-type", "text/plain")],
          b"Supported protocol versions are 1.2 2.1"),
        id="Protocol-Negotiation-version-mismatch-ERROR",
    ),
]  # fmt: skip

# The 1.0 examples without padding, valid as they stand.
SPEC_10_PLAIN = [
    pytest.param(
        b"SEND\ndestination:/queue/a\n\nhello queue a\n\x00",
        F("SEND", [("destination", "/queue/a")], b"hello queue a\n"), id="SEND",
    ),
    pytest.param(b"DISCONNECT\n\n\x00", F("DISCONNECT"), id="DISCONNECT"),
    pytest.param(
        b"SEND\ndestination:/queue/a\nreceipt:message-12345\n\nHello a!\x00",
        F("SEND", [("destination", "/queue/a"), ("receipt", "message-12345")], b"Hello a!"),
        id="Receipt-SEND",
    ),
    pytest.param(
        b"RECEIPT\nreceipt-id:message-12345\n\n\x00",
        F("RECEIPT", [("receipt-id", "message-12345")]), id="RECEIPT",
    ),
]  # fmt: skip

ERROR_BODY_10 = (
    b"The message:\n-----\nMESSAGE\ndestined:/queue/a\n\nHello queue a!\n-----\n"
    b"Did not contain a destination header, which is required \nfor message propagation.\n"
)

# The padded 1.0 examples ("destination: /queue/foo"), as lenient mode reads them (draft:
# "Leading space in the value must be stripped"; trailing spaces of lines stripped).
SPEC_10_PADDED = [
    pytest.param(
        # The "blank" line after the headers is ten spaces in the 1.0 text.
        b"CONNECT\nlogin: <username>\npasscode:<passcode>\n          \n\x00",
        F("CONNECT", [("login", "<username>"), ("passcode", "<passcode>")]),
        id="CONNECT",
    ),
    pytest.param(
        b"CONNECTED\nsession: <session-id>\n\n\x00",
        F("CONNECTED", [("session", "<session-id>")]), id="CONNECTED",
    ),
    pytest.param(
        b"SUBSCRIBE\ndestination: /queue/foo\nack: client\n\n\x00",
        F("SUBSCRIBE", [("destination", "/queue/foo"), ("ack", "client")]), id="SUBSCRIBE",
    ),
    pytest.param(
        b"UNSUBSCRIBE\ndestination: /queue/a\n\n\x00",
        F("UNSUBSCRIBE", [("destination", "/queue/a")]), id="UNSUBSCRIBE",
    ),
    pytest.param(
        b"BEGIN\ntransaction: <transaction-identifier>\n\n\x00",
        F("BEGIN", [("transaction", "<transaction-identifier>")]), id="BEGIN",
    ),
    pytest.param(
        b"ACK\nmessage-id: <message-identifier>\ntransaction: <transaction-identifier>\n\n\x00",
        F("ACK", [("message-id", "<message-identifier>"),
                  ("transaction", "<transaction-identifier>")]),
        id="ACK",
    ),
    pytest.param(
        b"MESSAGE\ndestination:/queue/a\nmessage-id: <message-identifier>\n\nhello queue a\x00",
        F("MESSAGE", [("destination", "/queue/a"), ("message-id", "<message-identifier>")],
          b"hello queue a"),
        id="MESSAGE",
    ),
    pytest.param(
        b"ERROR\nmessage: malformed packet received\n\n" + ERROR_BODY_10 + b"\x00",
        F("ERROR", [("message", "malformed packet received")], ERROR_BODY_10), id="ERROR",
    ),
]  # fmt: skip

# The lenient early draft's examples ("draft" §Frames, §Receipts).
DRAFT = [
    pytest.param(
        b"MESSAGE\ndestination: /queue/a\nmessage-id: 1234\ncontent-length: 13\n\n"
        b"hello, world!\x00",
        F("MESSAGE", [("destination", "/queue/a"), ("message-id", "1234"),
                      ("content-length", "13")], b"hello, world!"),
        id="with-content-length",
    ),
    pytest.param(
        b"MESSAGE\ndestination: /queue/a\nmessage-id: 1234\n\nhello, world!\x00",
        F("MESSAGE", [("destination", "/queue/a"), ("message-id", "1234")], b"hello, world!"),
        id="without-content-length",
    ),
    pytest.param(
        b"CONNECT\nusername: fred\npasscode: xyzzy\n\n\x00",
        F("CONNECT", [("username", "fred"), ("passcode", "xyzzy")]), id="CONNECT",
    ),
    pytest.param(
        b"RECEIPT\nreceipt-id: foo9876\n\n\x00", F("RECEIPT", [("receipt-id", "foo9876")]),
        id="RECEIPT",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "expected"), SPEC_12)
def test_spec_12_example(raw: bytes, expected: Frame) -> None:
    """1.2 spec examples decode exactly."""
    assert decode(raw, "1.2") == [expected]


@pytest.mark.parametrize(("raw", "expected"), SPEC_12)
def test_spec_12_example_lenient_is_unchanged(raw: bytes, expected: Frame) -> None:
    """Lenient mode only relaxes; well-formed unpadded frames decode the same."""
    assert decode(raw, "1.2", strict=False) == [expected]


@pytest.mark.parametrize(("raw", "expected"), SPEC_11)
def test_spec_11_example(raw: bytes, expected: Frame) -> None:
    """1.1 spec examples decode exactly."""
    assert decode(raw, "1.1") == [expected]


@pytest.mark.parametrize(("raw", "expected"), SPEC_10_PLAIN)
@pytest.mark.parametrize("strict", [True, False])
def test_spec_10_plain_example(raw: bytes, expected: Frame, strict: bool) -> None:
    """1.0 spec examples without padding decode exactly, strict or lenient."""
    assert decode(raw, "1.0", strict=strict) == [expected]


@pytest.mark.parametrize(("raw", "expected"), SPEC_10_PADDED)
def test_spec_10_padded_example_lenient(raw: bytes, expected: Frame) -> None:
    """1.0 spec examples with "name: value" padding, read leniently (draft §Frames)."""
    assert decode(raw, "1.0", strict=False) == [expected]


@pytest.mark.parametrize(("raw", "expected"), DRAFT)
def test_draft_example_lenient(raw: bytes, expected: Frame) -> None:
    """Draft §Frames examples: leading value space stripped, then content-length: 13 is valid."""
    assert decode(raw, "1.0", strict=False) == [expected]


def test_spec_10_padded_value_keeps_space_in_strict() -> None:
    """1.0 §Augmented BNF: header-value = 1*<any CHAR except LF>, so the space is part of it.

    The API strips leading value spaces only in lenient mode; strict mode keeps them.
    """
    frame = decode_one(b"SUBSCRIBE\ndestination: /queue/foo\nack: client\n\n\x00", "1.0")
    assert frame.headers == (("destination", " /queue/foo"), ("ack", " client"))


def test_spec_10_connect_whitespace_blank_line_is_bad_header_in_strict() -> None:
    """1.0 §CONNECT's example ends its headers with a line of spaces: strict mode does not take
    it for the blank line, and with a real blank line after it, it is a header line without a
    colon -> BAD_HEADER."""
    decode_error(
        b"CONNECT\nlogin: <username>\npasscode:<passcode>\n          \n\n\x00", K.BAD_HEADER, "1.0"
    )


def test_spec_10_connect_example_as_is_fails_in_strict() -> None:
    """The exact 1.0 bytes then end of stream: the head never ends (strict mode has no blank
    line there), so BAD_HEADER and TRUNCATED both describe it; the API does not say which
    is reported first."""
    decode_error(
        b"CONNECT\nlogin: <username>\npasscode:<passcode>\n          \n\x00",
        [K.BAD_HEADER, K.TRUNCATED],
        "1.0",
    )


def test_draft_padded_content_length_is_bad_in_strict() -> None:
    """content-length must be [0-9]+; " 13" is not, unless lenient mode strips the space."""
    decode_error(b"MESSAGE\ncontent-length: 13\n\nhello, world!\x00", K.BAD_CONTENT_LENGTH, "1.0")


# ---------------------------------------------------------------------------------------------
# Conformance probes (peers.md §3), each a case where some Python peer was wrong.
# ---------------------------------------------------------------------------------------------


def test_probe_simple() -> None:
    assert decode(b"SEND\ndestination:/q\n\nhello\x00") == [
        F("SEND", [("destination", "/q")], b"hello")
    ]


def test_probe_cl_nul() -> None:
    """1.2 §Header content-length: that many octets are read "regardless of NULL octets"."""
    frame = decode_one(b"SEND\ncontent-length:5\n\nhe\x00lo\x00")
    assert frame.body == b"he\x00lo"


def test_probe_escape_12() -> None:
    """1.2 §Value Encoding: \\c \\n \\\\ \\r all decoded (stompman lost the \\r)."""
    frame = decode_one(b"MESSAGE\nfoo:a\\cb\\nc\\\\d\\re\n\n\x00")
    assert frame.get("foo") == "a:b\nc\\d\re"


def test_probe_crlf_12() -> None:
    """1.2 §STOMP Frames: EOL is an optional CR then LF (aiostomp dropped such frames)."""
    assert decode(b"SEND\r\ndestination:/q\r\n\r\nhello\x00") == [
        F("SEND", [("destination", "/q")], b"hello")
    ]


def test_probe_dup_first_wins() -> None:
    """1.2 §Repeated Header Entries (aiostomp and coilmq kept the second)."""
    frame = decode_one(b"MESSAGE\nfoo:first\nfoo:second\n\n\x00")
    assert frame.get("foo") == "first"
    assert frame.headers == (("foo", "first"), ("foo", "second"))


def test_probe_badesc_tab() -> None:
    """1.2 §Value Encoding: "\\t ... MUST be treated as a fatal protocol error"."""
    decode_error(b"MESSAGE\nfoo:a\\tb\n\n\x00", K.BAD_ESCAPE, "1.2")


def test_probe_colonval() -> None:
    """A raw ':' in a value is kept (API: split at the FIRST colon), though the 1.2 BNF
    excludes ':' from header-value; brokers send raw colons (ActiveMQ session ids)."""
    frame = decode_one(b"MESSAGE\nfoo:a:b\n\n\x00")
    assert frame.get("foo") == "a:b"


def test_probe_hb_then_frame() -> None:
    """1.2 §Heart-beating: each EOL outside a frame is a heart-beat."""
    assert decode(b"\n\nMESSAGE\ndestination:/q\n\nx\x00\n") == [
        HB,
        HB,
        F("MESSAGE", [("destination", "/q")], b"x"),
        HB,
    ]


# ---------------------------------------------------------------------------------------------
# Escapes (1.1/1.2 §Value Encoding; 1.0 has none)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
def test_escapes_in_value_are_decoded(version: str) -> None:
    """1.1/1.2 §Value Encoding: \\n -> LF, \\c -> ':', \\\\ -> '\\'."""
    frame = decode_one(b"MESSAGE\nfoo:a\\cb\\nc\\\\d\n\n\x00", version)
    assert frame.get("foo") == "a:b\nc\\d"


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
def test_escapes_in_name_are_decoded(version: str) -> None:
    """1.1/1.2 §Value Encoding applies to header keys too ("header keys and values")."""
    frame = decode_one(b"MESSAGE\na\\cb\\nc\\\\d:v\n\n\x00", version)
    assert frame.headers == (("a:b\nc\\d", "v"),)


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
def test_escaped_backslash_then_letter_is_not_an_escape(version: str) -> None:
    """ "\\\\n" is an escaped backslash followed by a plain 'n' (not a newline)."""
    frame = decode_one(b"MESSAGE\nfoo:\\\\n\\\\c\\\\\\\\\n\n\x00", version)
    assert frame.get("foo") == "\\n\\c\\\\"


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
def test_escaped_colon_does_not_split_the_line(version: str) -> None:
    frame = decode_one(b"MESSAGE\nk\\cey:v\\calue\n\n\x00", version)
    assert frame.headers == (("k:ey", "v:alue"),)


def test_backslash_r_is_carriage_return_in_12() -> None:
    """1.2 §Value Encoding: \\r (octet 92 and 114) translates to carriage return."""
    assert decode_one(b"MESSAGE\nfoo:a\\rb\n\n\x00", "1.2").get("foo") == "a\rb"


def test_backslash_r_is_bad_escape_in_11() -> None:
    """1.1 §Value Encoding: "Undefined escape sequences such as \\r ... MUST be treated as a
    fatal protocol error"."""
    decode_error(b"MESSAGE\nfoo:a\\rb\n\n\x00", K.BAD_ESCAPE, "1.1")


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
@pytest.mark.parametrize(
    "escape", [b"\\t", b"\\0", b"\\x41", b"\\C", b"\\N", b"\\ ", b"\\:", b"\\/"]
)
def test_undefined_escape_in_value_is_fatal(version: str, escape: bytes) -> None:
    """1.1/1.2 §Value Encoding: undefined escape sequences are fatal."""
    decode_error(b"MESSAGE\nfoo:a" + escape + b"b\n\n\x00", K.BAD_ESCAPE, version)


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
def test_undefined_escape_in_name_is_fatal(version: str) -> None:
    decode_error(b"MESSAGE\nf\\too:v\n\n\x00", K.BAD_ESCAPE, version)


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
def test_trailing_lone_backslash_in_value_is_fatal(version: str) -> None:
    """A backslash ending the value starts no defined escape (1.1/1.2 §Value Encoding)."""
    decode_error(b"MESSAGE\nfoo:abc\\\n\n\x00", K.BAD_ESCAPE, version)


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
def test_trailing_lone_backslash_in_name_is_fatal(version: str) -> None:
    """ "foo\\:v": the name ends in a lone backslash (the colon is the separator)."""
    decode_error(b"MESSAGE\nfoo\\:v\n\n\x00", K.BAD_ESCAPE, version)


@pytest.mark.parametrize("strict", [True, False])
def test_10_has_no_escapes(strict: bool) -> None:
    """1.0 defines no escaping: every backslash is literal, undefined sequences included."""
    frame = decode_one(b"MESSAGE\nfoo:a\\cb\\nc\\\\d\\t\\re\\\n\n\x00", "1.0", strict=strict)
    assert frame.get("foo") == "a\\cb\\nc\\\\d\\t\\re\\"


def test_10_backslash_in_name_is_literal() -> None:
    frame = decode_one(b"MESSAGE\na\\cb:v\n\n\x00", "1.0")
    assert frame.headers == (("a\\cb", "v"),)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("command", [b"CONNECT", b"CONNECTED"])
def test_connect_and_connected_are_never_unescaped(version: str, command: bytes) -> None:
    """1.2 §Value Encoding: CONNECT and CONNECTED frames do not escape (1.0 compatibility),
    so backslashes are literal there, even undefined sequences and a trailing one."""
    frame = decode_one(command + b"\nlogin:a\\cb\\nc\npasscode:p\\tq\\\n\n\x00", version)
    assert frame.headers == (("login", "a\\cb\\nc"), ("passcode", "p\\tq\\"))


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
def test_stomp_frame_headers_are_unescaped(version: str) -> None:
    """1.2 §Value Encoding: "All frames except the CONNECT and CONNECTED frames will also
    escape ..." - STOMP is not exempt, and the API exempts only CONNECT and CONNECTED."""
    frame = decode_one(b"STOMP\naccept-version:1.2\nhost:h\nlogin:a\\cb\n\n\x00", version)
    assert frame.get("login") == "a:b"


def test_lenient_keeps_undefined_escape_literally() -> None:
    """Lenient mode: unknown escapes are kept as written."""
    frame = decode_one(b"MESSAGE\nfoo:a\\tb\n\n\x00", "1.2", strict=False)
    assert frame.get("foo") == "a\\tb"


def test_lenient_still_decodes_defined_escapes() -> None:
    frame = decode_one(b"MESSAGE\nfoo:a\\cb\\nc\\\\d\n\n\x00", "1.2", strict=False)
    assert frame.get("foo") == "a:b\nc\\d"


# ---------------------------------------------------------------------------------------------
# End of line: CRLF only in 1.2 (1.2 §STOMP Frames, §Augmented BNF EOL = [CR] LF)
# ---------------------------------------------------------------------------------------------


def test_12_mixed_crlf_and_lf_lines() -> None:
    assert decode(b"SEND\r\na:1\nb:2\r\n\nbody\x00", "1.2") == [
        F("SEND", [("a", "1"), ("b", "2")], b"body")
    ]


def test_12_crlf_blank_line_after_lf_headers() -> None:
    assert decode(b"SEND\na:1\n\r\nbody\x00", "1.2") == [F("SEND", [("a", "1")], b"body")]


def test_12_body_keeps_crlf() -> None:
    """The body is raw octets: EOL rules stop at the blank line."""
    frame = decode_one(b"SEND\r\n\r\nline1\r\nline2\r\n\x00", "1.2")
    assert frame.body == b"line1\r\nline2\r\n"


def test_12_lf_headers_body_with_crlf_crlf() -> None:
    """stomp-php #93: a CRLF CRLF inside the body must not be taken for the end of the head."""
    frame = decode_one(b"SEND\nfoo:bar\n\nbody\r\n\r\nmore\x00", "1.2")
    assert frame == F("SEND", [("foo", "bar")], b"body\r\n\r\nmore")


def test_12_crlf_headers_body_with_lf_lf() -> None:
    frame = decode_one(b"SEND\r\nfoo:bar\r\n\r\nbody\n\nmore\x00", "1.2")
    assert frame == F("SEND", [("foo", "bar")], b"body\n\nmore")


@pytest.mark.parametrize("line", [b"foo:a\rb", b"f\roo:v", b"foo:bar\r\r", b"\rfoo:bar"])
def test_12_raw_cr_inside_header_line_is_bad_header(line: bytes) -> None:
    """1.2 §Augmented BNF: header names and values exclude CR; API: BAD_HEADER (strict)."""
    decode_error(b"SEND\n" + line + b"\n\n\x00", K.BAD_HEADER, "1.2")


@pytest.mark.parametrize("version", ["1.0", "1.1"])
def test_cr_before_lf_stays_in_value_before_12(version: str) -> None:
    """1.0/1.1 §Augmented BNF: lines end with LF only, so a CR is part of the value."""
    frame = decode_one(b"SEND\nfoo:bar\r\n\n\x00", version)
    assert frame.get("foo") == "bar\r"


@pytest.mark.parametrize("version", ["1.0", "1.1"])
def test_crlf_command_is_bad_command_before_12(version: str) -> None:
    """1.0/1.1: "SEND\\r" is not a command."""
    decode_error(b"SEND\r\n\n\x00", K.BAD_COMMAND, version)


@pytest.mark.parametrize("version", ["1.0", "1.1"])
def test_crlf_blank_line_is_a_header_line_before_12(version: str) -> None:
    """1.0/1.1: "\\r" then LF is a header line without a colon, not the end of the head
    (a real blank line follows it here)."""
    decode_error(b"SEND\nfoo:bar\n\r\n\n\x00", K.BAD_HEADER, version)


@pytest.mark.parametrize("version", ["1.0", "1.1"])
def test_crlf_heartbeat_is_bad_command_before_12(version: str) -> None:
    """1.1 §Heart-beating/§Augmented BNF: only LF is an EOL, so "\\r\\n" is a command line
    "\\r" (here followed by a blank line, so the head is complete)."""
    decode_error(b"\r\n\n\x00", K.BAD_COMMAND, version)


@pytest.mark.parametrize("version", VERSIONS)
def test_lenient_accepts_crlf_in_every_version(version: str) -> None:
    assert decode(b"\r\nSEND\r\nfoo:bar\r\n\r\nx\x00\r\n", version, strict=False) == [
        HB,
        F("SEND", [("foo", "bar")], b"x"),
        HB,
    ]


# ---------------------------------------------------------------------------------------------
# Header lines: first colon splits, no trimming, malformed lines
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("strict", [True, False])
def test_raw_colon_in_value_splits_at_first_colon(version: str, strict: bool) -> None:
    frame = decode_one(b"MESSAGE\nmessage-id:ID:vm-1:2\ntime:12:30\n\n\x00", version, strict=strict)
    assert frame.headers == (("message-id", "ID:vm-1:2"), ("time", "12:30"))


@pytest.mark.parametrize("version", VERSIONS)
def test_value_of_only_colons(version: str) -> None:
    assert decode_one(b"SEND\nfoo:::\n\n\x00", version).get("foo") == "::"


@pytest.mark.parametrize("version", VERSIONS)
def test_raw_colon_in_connected_value(version: str) -> None:
    """ActiveMQ's CONNECTED session id contains raw colons (CONNECTED is never escaped)."""
    frame = decode_one(b"CONNECTED\nsession:ID:vm-37173-1795314571027-3:2\n\n\x00", version)
    assert frame.get("session") == "ID:vm-37173-1795314571027-3:2"


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
def test_spaces_are_never_trimmed(version: str) -> None:
    """1.1/1.2 §Value Encoding: "clients and servers MUST never trim or pad headers with spaces"."""
    frame = decode_one(b"SEND\nx-space : v \n  lead:  two\n\n\x00", version)
    assert frame.headers == (("x-space ", " v "), ("  lead", "  two"))


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
def test_trailing_tab_is_kept_in_strict(version: str) -> None:
    frame = decode_one(b"SEND\nfoo:bar\t\n\n\x00", version)
    assert frame.get("foo") == "bar\t"


@pytest.mark.parametrize("version", VERSIONS)
def test_empty_value_is_allowed(version: str) -> None:
    frame = decode_one(b"SEND\nfoo:\n\n\x00", version)
    assert frame.headers == (("foo", ""),)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("command", [b"SEND", b"CONNECT"])
def test_header_without_colon_is_bad_header(version: str, command: bytes) -> None:
    """A header line without a colon: RabbitMQ closes the connection on it (its log says
    {header_no_value,"nocolonhere"})."""
    decode_error(command + b"\nnocolonhere\n\n\x00", K.BAD_HEADER, version)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("command", [b"SEND", b"CONNECT"])
def test_empty_header_name_is_bad_header(version: str, command: bytes) -> None:
    """1.x §Augmented BNF: header-name = 1*<...> (at least one octet)."""
    decode_error(command + b"\n:value\n\n\x00", K.BAD_HEADER, version)


# ---------------------------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
@pytest.mark.parametrize("command", ALL_COMMANDS)
def test_every_command_is_accepted(version: str, command: str) -> None:
    """1.1/1.2 §Augmented BNF: client-command | server-command."""
    frame = decode_one(command.encode() + b"\nk:v\n\n\x00", version)
    assert frame == F(command, [("k", "v")])


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "line", [b"FOO", b"send", b"Send", b"SEND ", b" SEND", b"SENDX", b"MESSAGES", b"SE ND"]
)
def test_unknown_command_is_bad_command_in_strict(version: str, line: bytes) -> None:
    """Commands are case sensitive (1.2 §STOMP Frames) and must be one of the BNF's."""
    decode_error(line + b"\n\n\x00", K.BAD_COMMAND, version)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("line", "command"),
    [(b"send", "SEND"), (b"Subscribe", "SUBSCRIBE"), (b"SEND  ", "SEND"), (b"send\t", "SEND"),
     (b"foo", "FOO"), (b"X-Custom", "X-CUSTOM")],
)  # fmt: skip
def test_lenient_commands_are_case_insensitive_and_upper_cased(
    version: str, line: bytes, command: str
) -> None:
    """Draft §Frames: "Command lines must be treated as case insensitive"; trailing space
    stripped; the API passes unknown commands through in lenient mode."""
    assert decode(line + b"\nk:v\n\n\x00", version, strict=False) == [F(command, [("k", "v")])]


@pytest.mark.parametrize("version", VERSIONS)
def test_lenient_whitespace_only_line_before_a_frame_is_not_a_command(version: str) -> None:
    """Draft §Frames: trailing spaces are stripped and "a frame may start with a number of
    empty lines", so a line of spaces is an empty line.  (Whether it yields a HeartBeat is
    left open; only the frame is checked.)"""
    events = decode(b"SEND\n\n\x00  \nSEND\nk:v\n\n\x00", version, strict=False)
    assert [e for e in events if isinstance(e, Frame)] == [F("SEND"), F("SEND", [("k", "v")])]


@pytest.mark.parametrize("version", VERSIONS)
def test_lenient_strips_trailing_whitespace_and_leading_value_space(version: str) -> None:
    """Draft §Frames: trailing spaces/CR stripped from lines; leading value space stripped."""
    frame = decode_one(
        b"SEND\ndestination:   /queue/a  \nfoo:bar \t\n\n\x00", version, strict=False
    )
    assert frame.headers == (("destination", "/queue/a"), ("foo", "bar"))


# ---------------------------------------------------------------------------------------------
# Encoding: commands and headers are UTF-8, the body is raw octets
# ---------------------------------------------------------------------------------------------

BAD_UTF8 = [
    pytest.param(b"\xff", id="ff"),
    pytest.param(b"\xc3(", id="bad-continuation"),
    pytest.param(b"\xe2\x82", id="truncated-sequence"),
    pytest.param(b"\xed\xa0\x80", id="encoded-surrogate"),
    pytest.param(b"\xc0\xaf", id="overlong"),
    pytest.param(b"\xf4\x90\x80\x80", id="above-max-code-point"),
]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("bad", BAD_UTF8)
def test_non_utf8_header_value_is_bad_encoding(version: str, strict: bool, bad: bytes) -> None:
    """1.2 §Value Encoding: "The commands and headers are encoded in UTF-8"."""
    decode_error(b"SEND\nfoo:a" + bad + b"b\n\n\x00", K.BAD_ENCODING, version, strict=strict)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("bad", BAD_UTF8)
def test_non_utf8_header_name_is_bad_encoding(version: str, bad: bytes) -> None:
    decode_error(b"SEND\nf" + bad + b":v\n\n\x00", K.BAD_ENCODING, version)


@pytest.mark.parametrize("version", VERSIONS)
def test_non_utf8_connect_header_is_bad_encoding(version: str) -> None:
    """CONNECT is not unescaped, but its headers are still UTF-8."""
    decode_error(b"CONNECT\nlogin:\xff\n\n\x00", K.BAD_ENCODING, version)


@pytest.mark.parametrize("version", VERSIONS)
def test_non_utf8_command_is_bad_encoding_in_lenient(version: str) -> None:
    decode_error(b"SE\xffND\n\n\x00", K.BAD_ENCODING, version, strict=False)


@pytest.mark.parametrize("version", VERSIONS)
def test_non_utf8_command_fails_in_strict(version: str) -> None:
    """Both BAD_ENCODING and BAD_COMMAND describe this; either is accepted."""
    decode_error(b"SE\xffND\n\n\x00", [K.BAD_ENCODING, K.BAD_COMMAND], version)


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
def test_utf8_header_text_is_decoded(version: str) -> None:
    raw = "MESSAGE\ndestination:/queue/日本\nclé:valeur €\n\n\x00".encode()
    frame = decode_one(raw, version)
    assert frame.headers == (("destination", "/queue/日本"), ("clé", "valeur €"))


@pytest.mark.parametrize("version", VERSIONS)
def test_body_is_raw_bytes_never_decoded(version: str) -> None:
    frame = decode_one(b"SEND\ncontent-type:text/plain\n\n\xff\xfe\xc3(\x00", version)
    assert frame.body == b"\xff\xfe\xc3("
    assert type(frame.body) is bytes


def test_decoded_frame_types() -> None:
    """API: Frame(command: str, headers: tuple[tuple[str, str], ...], body: bytes)."""
    frame = decode_one(b"SEND\na:1\nb:2\n\nxyz\x00")
    assert isinstance(frame, Frame)
    assert type(frame.command) is str
    assert type(frame.headers) is tuple
    assert all(type(h) is tuple and len(h) == 2 for h in frame.headers)
    assert all(type(k) is str and type(v) is str for k, v in frame.headers)
    assert type(frame.body) is bytes


# ---------------------------------------------------------------------------------------------
# content-length (1.2 §Header content-length)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_content_length_body_may_hold_nuls(version: str) -> None:
    """ "this number of octets MUST be read, regardless of whether or not there are NULL
    octets in the body" (stomp-php #53 ignored it)."""
    events = decode(b"SEND\ncontent-length:5\n\nhe\x00lo\x00SEND\n\nx\x00", version)
    assert events == [F("SEND", [("content-length", "5")], b"he\x00lo"), F("SEND", [], b"x")]


@pytest.mark.parametrize("version", VERSIONS)
def test_content_length_body_of_only_nuls(version: str) -> None:
    frame = decode_one(b"MESSAGE\ncontent-length:3\n\n\x00\x00\x00\x00", version)
    assert frame.body == b"\x00\x00\x00"


@pytest.mark.parametrize("version", VERSIONS)
def test_content_length_zero(version: str) -> None:
    frame = decode_one(b"SEND\ncontent-length:0\n\n\x00", version)
    assert frame == F("SEND", [("content-length", "0")], b"")


@pytest.mark.parametrize("version", VERSIONS)
def test_content_length_zero_then_data_is_missing_nul(version: str) -> None:
    decode_error(b"SEND\ncontent-length:0\n\nX\x00", K.MISSING_NUL, version)


@pytest.mark.parametrize("version", VERSIONS)
def test_content_length_shorter_than_body_is_missing_nul(version: str) -> None:
    """ "The frame still needs to be terminated with a NULL octet"; no resync to a later NUL
    (RabbitMQ and ActiveMQ both close the connection on this)."""
    decode_error(b"SEND\ncontent-length:2\n\nhello\x00", K.MISSING_NUL, version)


@pytest.mark.parametrize("version", VERSIONS)
def test_content_length_excludes_the_nul(version: str) -> None:
    """stomp/stomp-spec #83: counting the NUL in content-length is wrong; with 6 for
    "hello", the NUL is taken as body and the following EOL is not a NUL."""
    decode_error(b"SEND\ncontent-length:6\n\nhello\x00\n", K.MISSING_NUL, version)


@pytest.mark.parametrize("version", VERSIONS)
def test_content_length_longer_than_stream_is_truncated(version: str) -> None:
    decode_error(b"SEND\ncontent-length:6\n\nhello\x00", K.TRUNCATED, version)


@pytest.mark.parametrize("version", VERSIONS)
def test_nul_after_content_length_body_does_not_leak(version: str) -> None:
    """pcan/node-stomp-protocol #13: the terminating NUL leaked into the next command."""
    events = decode(b"MESSAGE\ncontent-length:3\n\nabc\x00MESSAGE\n\n\x00", version)
    assert [e.command for e in events] == ["MESSAGE", "MESSAGE"]  # type: ignore[union-attr]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize(
    "value", ["+5", "-1", "0x5", "\u0665", "\uff15", "5.0", "1e3", "", "five", "5,0", "0b101"]
)
def test_invalid_content_length(version: str, strict: bool, value: str) -> None:
    """Only ASCII digits [0-9]+ (API); "\\u0665" is ARABIC-INDIC DIGIT FIVE, "\\uff15"
    FULLWIDTH DIGIT FIVE, both of which int() would accept."""
    raw = b"SEND\ncontent-length:" + value.encode() + b"\n\nhello\x00"
    decode_error(raw, K.BAD_CONTENT_LENGTH, version, strict=strict)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("value", [" 5", "5 ", "5\t", " 5 "])
def test_padded_content_length_is_invalid_in_strict(version: str, value: str) -> None:
    raw = b"SEND\ncontent-length:" + value.encode() + b"\n\nhello\x00"
    decode_error(raw, K.BAD_CONTENT_LENGTH, version)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("value", [" 5", "5 ", "  5  "])
def test_padded_content_length_is_valid_in_lenient(version: str, value: str) -> None:
    """Lenient mode strips the padding first (draft §Frames)."""
    raw = b"SEND\ncontent-length:" + value.encode() + b"\n\nhe\x00lo\x00"
    assert decode_one(raw, version, strict=False).body == b"he\x00lo"


@pytest.mark.parametrize("version", VERSIONS)
def test_content_length_with_leading_zeros(version: str) -> None:
    """[0-9]+ allows leading zeros."""
    assert decode_one(b"SEND\ncontent-length:005\n\nhe\x00lo\x00", version).body == b"he\x00lo"


@pytest.mark.parametrize("version", VERSIONS)
def test_content_length_with_many_leading_zeros(version: str) -> None:
    """[0-9]+ has no length bound: 25 digits of value 5 declare 5 octets, not a huge body."""
    raw = b"SEND\ncontent-length:" + b"0" * 24 + b"5\n\nhe\x00lo\x00"
    assert decode_one(raw, version).body == b"he\x00lo"


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("version", VERSIONS)
def test_content_length_with_thousands_of_leading_zeros(version: str, strict: bool) -> None:
    """Past the digits that Python's int() reads from a string (4300 by default),
    the value is still the number the digits write: 5, not an error."""
    raw = b"SEND\ncontent-length:" + b"0" * 5000 + b"5\n\nhe\x00lo\x00"
    assert decode_one(raw, version, strict=strict).body == b"he\x00lo"


@pytest.mark.parametrize("version", VERSIONS)
def test_content_length_of_thousands_of_digits_is_too_large(version: str) -> None:
    raw = b"SEND\ncontent-length:" + b"1" * 5000 + b"\n\nhello\x00"
    decode_error(raw, K.TOO_LARGE, version)


@pytest.mark.parametrize("version", VERSIONS)
def test_first_content_length_wins(version: str) -> None:
    """1.2 §Repeated Header Entries applies to content-length as to any header."""
    frame = decode_one(b"SEND\ncontent-length:5\ncontent-length:3\n\nhello\x00", version)
    assert frame.body == b"hello"
    assert frame.get_all("content-length") == ["5", "3"]


@pytest.mark.parametrize("version", VERSIONS)
def test_first_content_length_wins_even_when_shorter(version: str) -> None:
    decode_error(b"SEND\ncontent-length:3\ncontent-length:5\n\nhello\x00", K.MISSING_NUL, version)


def test_huge_content_length_is_too_large() -> None:
    """A declared length above max_body_size fails as soon as the head is read."""
    raw = b"SEND\ncontent-length:" + b"9" * 40 + b"\n\n"
    decode_error(raw, K.TOO_LARGE, "1.2", eof=False)


@pytest.mark.parametrize("version", VERSIONS)
def test_body_without_content_length_ends_at_first_nul(version: str) -> None:
    events = decode(b"SEND\n\nab\x00SEND\n\ncd\x00", version)
    assert events == [F("SEND", [], b"ab"), F("SEND", [], b"cd")]


def test_one_byte_newline_inside_frame_is_not_a_heartbeat() -> None:
    """stomp.py #94: an LF received alone inside a frame was taken for a heart-beat."""
    out = run([b"MESSAGE\ndestination:/q\n", b"\n", b"body", b"\x00"])
    assert out.error is None
    assert out.events == [F("MESSAGE", [("destination", "/q")], b"body")]


# ---------------------------------------------------------------------------------------------
# Bodies on frames that must not have one (1.1/1.2 §Body)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
@pytest.mark.parametrize("command", NON_BODY_COMMANDS)
def test_body_on_non_body_frame_is_unexpected_body(version: str, command: str) -> None:
    """1.2 §Body: "Only the SEND, MESSAGE, and ERROR frames MAY have a body"."""
    decode_error(command.encode() + b"\nk:v\n\nx\x00", K.UNEXPECTED_BODY, version)


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
def test_content_length_body_on_non_body_frame_is_unexpected_body(version: str) -> None:
    decode_error(b"SUBSCRIBE\nid:0\ncontent-length:1\n\nx\x00", K.UNEXPECTED_BODY, version)


@pytest.mark.parametrize("version", VERSIONS)
def test_content_length_zero_on_non_body_frame_is_fine(version: str) -> None:
    frame = decode_one(b"SUBSCRIBE\nid:0\ncontent-length:0\n\n\x00", version)
    assert frame == F("SUBSCRIBE", [("id", "0"), ("content-length", "0")])


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
@pytest.mark.parametrize("command", sorted(BODY_COMMANDS))
def test_body_on_body_frame_is_fine(version: str, command: str) -> None:
    assert decode_one(command.encode() + b"\n\nx\x00", version).body == b"x"


def test_body_on_subscribe_is_allowed_in_10() -> None:
    """1.0 §SUBSCRIBE: "The body of the SUBSCRIBE command is ignored" - not an error."""
    frame = decode_one(b"SUBSCRIBE\ndestination:/queue/foo\n\nignored\x00", "1.0")
    assert frame.command == "SUBSCRIBE"
    assert frame.headers == (("destination", "/queue/foo"),)


@pytest.mark.parametrize("version", VERSIONS)
def test_lenient_allows_body_on_any_frame(version: str) -> None:
    frame = decode_one(b"SUBSCRIBE\nid:0\n\nbody\x00", version, strict=False)
    assert frame == F("SUBSCRIBE", [("id", "0")], b"body")


# ---------------------------------------------------------------------------------------------
# Heart-beats (1.1/1.2 §Heart-beating; frames may be followed by EOLs)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_single_eol_is_one_heartbeat(version: str) -> None:
    assert decode(b"\n", version) == [HB]


@pytest.mark.parametrize("version", VERSIONS)
def test_eols_before_first_frame_are_heartbeats(version: str) -> None:
    assert decode(b"\n\n\nSEND\n\n\x00", version) == [HB, HB, HB, F("SEND")]


@pytest.mark.parametrize("version", VERSIONS)
def test_eols_after_frame_are_heartbeats(version: str) -> None:
    assert decode(b"SEND\n\n\x00\n\n\nSEND\n\n\x00\n", version) == [
        F("SEND"),
        HB,
        HB,
        HB,
        F("SEND"),
        HB,
    ]


def test_crlf_heartbeats_in_12() -> None:
    """1.2 §Heart-beating: the heart-beat is an EOL, and a 1.2 EOL may be CRLF."""
    assert decode(b"\r\n\nSEND\n\n\x00\r\n\r\n", "1.2") == [HB, HB, F("SEND"), HB, HB]


@pytest.mark.parametrize("version", VERSIONS)
def test_empty_stream_has_no_events(version: str) -> None:
    assert decode(b"", version) == []


@pytest.mark.parametrize("version", VERSIONS)
def test_heartbeat_is_returned_without_waiting_for_more_data(version: str) -> None:
    decoder = FrameDecoder(version)
    decoder.receive_data(b"\n")
    assert decoder.next_frame() == HeartBeat()
    assert decoder.next_frame() is None


def test_next_frame_before_any_data_is_none() -> None:
    assert FrameDecoder().next_frame() is None


# ---------------------------------------------------------------------------------------------
# Decoder object behaviour
# ---------------------------------------------------------------------------------------------


def test_default_version_is_12_and_strict() -> None:
    decoder = FrameDecoder()
    assert decoder.version == "1.2"
    assert decoder.strict is True


def test_default_limits() -> None:
    assert FrameDecoder().limits == Limits()


def test_version_change_applies_to_frames_not_yet_returned() -> None:
    """API: .version is settable and applies to frames not yet returned - here the second
    frame is already buffered when the version changes."""
    decoder = FrameDecoder("1.2")
    decoder.receive_data(b"MESSAGE\nfoo:a\\cb\n\n\x00MESSAGE\nfoo:a\\cb\n\n\x00")
    first = decoder.next_frame()
    decoder.version = "1.0"
    second = decoder.next_frame()
    assert isinstance(first, Frame) and isinstance(second, Frame)
    assert first.get("foo") == "a:b"
    assert second.get("foo") == "a\\cb"


def test_version_change_applies_to_a_frame_whose_head_is_already_in() -> None:
    """The head arrived (and next_frame was called) under 1.2, the body has not: the frame is
    not returned yet, so per the API the 1.0 rules set now apply to it."""
    decoder = FrameDecoder("1.2")
    decoder.receive_data(b"MESSAGE\nfoo:a\\cb\n\nbod")
    assert decoder.next_frame() is None
    decoder.version = "1.0"
    decoder.receive_data(b"y\x00")
    assert decoder.next_frame() == F("MESSAGE", [("foo", "a\\cb")], b"body")


def test_version_change_to_12_enables_crlf() -> None:
    decoder = FrameDecoder("1.0")
    decoder.receive_data(b"CONNECTED\nversion:1.2\n\n\x00SEND\r\nfoo:bar\r\n\r\n\x00")
    assert decoder.next_frame() == F("CONNECTED", [("version", "1.2")])
    decoder.version = "1.2"
    assert decoder.next_frame() == F("SEND", [("foo", "bar")])


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_receive_data_accepts_bytes_like(kind: type) -> None:
    decoder = FrameDecoder()
    decoder.receive_data(kind(b"SEND\nfoo:bar\n\nbody\x00"))
    frame = decoder.next_frame()
    assert frame == F("SEND", [("foo", "bar")], b"body")
    assert type(frame.body) is bytes  # type: ignore[union-attr]


def test_receive_data_copies_a_mutable_buffer() -> None:
    """A sans-IO caller reuses its receive buffer (e.g. recv_into); the decoder must not keep
    a view of it.  (Implied by receive_data taking bytearray/memoryview.)"""
    buf = bytearray(b"SEND\nfoo:bar\n\nbody")
    decoder = FrameDecoder()
    decoder.receive_data(memoryview(buf))
    buf[:] = b"X" * len(buf)
    decoder.receive_data(b"\x00")
    assert decoder.next_frame() == F("SEND", [("foo", "bar")], b"body")


def test_empty_chunk_is_not_end_of_stream() -> None:
    """API: None (not b"") ends the stream."""
    decoder = FrameDecoder()
    decoder.receive_data(b"")
    decoder.receive_data(b"SEND\n\n\x00")
    assert decoder.next_frame() == F("SEND")


def test_iterating_the_decoder_drains_available_events() -> None:
    decoder = FrameDecoder()
    decoder.receive_data(b"\nSEND\n\nA\x00\nSEND\n\nB")
    assert list(decoder) == [HB, F("SEND", [], b"A"), HB]
    decoder.receive_data(b"\x00")
    assert list(iter(decoder)) == [F("SEND", [], b"B")]


def test_codec_errors_carry_kind_message_and_no_event_hint() -> None:
    """The codec never fills the server's hint (codec_api.md calls it error_frame; the code
    and connection_api.md call it event_hint)."""
    decoder = FrameDecoder()
    decoder.receive_data(b"FOO\n\n\x00")
    with pytest.raises(RemoteProtocolError) as info:
        decoder.next_frame()
    err = info.value
    assert isinstance(err, ProtocolError)
    assert err.kind is K.BAD_COMMAND
    assert err.event_hint is None
    assert isinstance(err.message, str) and err.message
    assert str(err) == err.message


def test_drain_helper_sanity() -> None:
    """The helpers themselves must not hide events (guards the rest of this file)."""
    decoder = FrameDecoder()
    decoder.receive_data(b"SEND\n\n\x00\n")
    events: list[object] = []
    drain(decoder, events)  # type: ignore[arg-type]
    assert events == [F("SEND"), HB]
