"""Frames captured from real brokers (their CONNECTED and ERROR frames) decode as expected."""

from __future__ import annotations

import pytest
from helpers import HB, VERSIONS, decode, run, sized
from vectors import brokers as v

from stomp_proto import Frame, Version

CT = ("content-type", "text/plain")
RABBIT_VERSIONS = ("version", "1.0,1.1,1.2")


def rabbit_error(message: str, body: bytes) -> Frame:
    """RabbitMQ's ERROR layout: message, content-type, version, content-length."""
    headers = (("message", message), CT, RABBIT_VERSIONS, ("content-length", str(len(body))))
    return Frame("ERROR", headers, body)


RABBIT = [
    pytest.param(v.RABBIT_BAD_COMMAND,
                 rabbit_error("Bad command", b'Could not interpret command "FOO"\n'),
                 id="bad-command"),
    pytest.param(v.RABBIT_ILLEGAL_COMMAND,
                 rabbit_error("Illegal command", b"You must log in using CONNECT first"),
                 id="illegal-command"),
    pytest.param(v.RABBIT_ACCESS_REFUSED,
                 rabbit_error("Bad CONNECT", b"Access refused for user 'guest'\n"),
                 id="access-refused"),
    pytest.param(v.RABBIT_VHOST_DENIED,
                 rabbit_error("Bad CONNECT", b"Virtual host '127.0.0.1' access denied"),
                 id="vhost-denied"),
    pytest.param(v.RABBIT_MISSING_DESTINATION,
                 rabbit_error("Missing destination",
                              b"\"SEND\" must include a 'destination' header\n"),
                 id="missing-destination"),
    pytest.param(v.RABBIT_INVALID_ACK,
                 rabbit_error("Invalid header", b'"ACK" must include a valid "id" header\n'),
                 id="invalid-ack"),
    pytest.param(v.RABBIT_NO_SUBSCRIPTION,
                 rabbit_error("No subscription found",
                              b"UNSUBSCRIBE must refer to an existing subscription.\n"
                              b"Subscription to \"id='nope'\" not found.\n"),
                 id="no-subscription"),
    pytest.param(v.RABBIT_BAD_TRANSACTION,
                 rabbit_error("Bad transaction", b'Invalid transaction identifier: "tx-nope"\n'),
                 id="bad-transaction"),
    pytest.param(v.RABBIT_UNKNOWN_DESTINATION,
                 rabbit_error("Unknown destination",
                              b"'/foo/bar' is not a valid destination.\n"
                              b"Valid destination types are: /temp-queue, /exchange, /topic, "
                              b"/queue, /amq/queue, /reply-queue/.\n"),
                 id="unknown-destination"),
    pytest.param(v.RABBIT_NOT_FOUND,
                 rabbit_error("not_found", b"NOT_FOUND - no exchange 'nope' in vhost '/'"),
                 id="not-found"),
    pytest.param(v.RABBIT_VERSION_MISMATCH,
                 rabbit_error("Version mismatch", b"Supported versions are 1.0,1.1,1.2\n"),
                 id="version-mismatch"),
]  # fmt: skip


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("raw", "expected"), RABBIT)
def test_rabbitmq_error(raw: bytes, expected: Frame, version: Version) -> None:
    """RabbitMQ ERRORs carry content-length; the "\\n" after the NUL is a heart-beat."""
    assert decode(raw, version) == [expected, HB]


@pytest.mark.parametrize("version", VERSIONS)
def test_rabbitmq_error_then_receipt_in_one_read(version: Version) -> None:
    assert decode(v.RABBIT_DUPLICATE_SUBSCRIPTION_THEN_RECEIPT, version) == [
        rabbit_error("Duplicated subscription identifier",
                     b"A subscription identified by 'T_s1' already exists."),
        HB,
        Frame("RECEIPT", (("receipt-id", "r2"),)),
        HB,
    ]  # fmt: skip


def amq_body(raw: bytes) -> bytes:
    """Body of an ActiveMQ ERROR (no content-length): from the blank line to the NUL."""
    return raw[raw.index(b"\n\n") + 2 : raw.index(b"\x00")]


AMQ = [
    pytest.param(v.AMQ_UNKNOWN_ACTION_GARBAGE,
                 (CT, ("message", "Unknown STOMP action: hello world")),
                 b"org.apache.activemq.transport.stomp.ProtocolException: Unknown STOMP action: "
                 b"hello world\n\tat ",
                 id="unknown-action-garbage"),
    pytest.param(v.AMQ_BAD_PASSWORD,
                 (CT, ("message", "User name [guest] or password is invalid.")),
                 b"User name [guest] or password is invalid.",
                 id="bad-password"),
    pytest.param(v.AMQ_NO_DESTINATION,
                 (CT, ("receipt-id", "r-send"),
                  ("message", "SEND received without a Destination specified!")),
                 b"org.apache.activemq.transport.stomp.ProtocolException: SEND received",
                 id="no-destination"),
    pytest.param(v.AMQ_SUBSCRIBE_WITHOUT_ID,
                 (CT, ("receipt-id", "r-sub"),
                  ("message", "SUBSCRIBE received without a subscription id!")),
                 b"org.apache.activemq.transport.stomp.ProtocolException: SUBSCRIBE received",
                 id="subscribe-without-id"),
    pytest.param(v.AMQ_UNEXPECTED_ACK,
                 (CT, ("receipt-id", "r-ack"),
                  ("message", "Unexpected ACK received for message-id [null]")),
                 b"org.apache.activemq.transport.stomp.ProtocolException: Unexpected ACK",
                 id="unexpected-ack"),
    pytest.param(v.AMQ_NO_TRAILING_NUL,
                 (CT, ("message",
                       "content-length bytes were read and there was no trailing null byte")),
                 b"org.apache.activemq.transport.stomp.ProtocolException: content-length bytes",
                 id="no-trailing-nul"),
    pytest.param(v.AMQ_MAX_HEADER_LENGTH,
                 (CT, ("message", "The maximum header length was exceeded")),
                 b"org.apache.activemq.transport.stomp.ProtocolException: The maximum header",
                 id="max-header-length"),
    pytest.param(v.AMQ_ALREADY_CONNECTED,
                 (CT, ("message", "Already connected.")),
                 b"org.apache.activemq.transport.stomp.ProtocolException: Already connected.\n",
                 id="already-connected"),
]  # fmt: skip


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("raw", "headers", "body_start"), AMQ)
def test_activemq_error(
    raw: bytes, headers: tuple[tuple[str, str], ...], body_start: bytes, version: Version
) -> None:
    """ActiveMQ ERRORs have no content-length: the body (a stack trace with tabs and, in these
    notes, UTF-8) runs to the first NUL.  Raw ':' in values is kept in every version."""
    events = decode(raw, version)
    assert events == [Frame("ERROR", headers, amq_body(raw)), HB]
    assert events[0].body.startswith(body_start)  # type: ignore[union-attr]


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_activemq_escaped_colon_in_message_is_unescaped(version: Version) -> None:
    """1.2 §Value Encoding: ActiveMQ's ERROR for an unknown command escapes the colon of
    its message header (`message:Unknown STOMP action\\c FOO`), which decodes to
    "Unknown STOMP action: FOO"."""
    [frame, hb] = decode(v.AMQ_UNKNOWN_ACTION_FOO, version)
    assert hb == HB
    assert frame == Frame(
        "ERROR",
        (CT, ("receipt-id", "r1"), ("message", "Unknown STOMP action: FOO")),
        amq_body(v.AMQ_UNKNOWN_ACTION_FOO),
    )
    assert frame.body.endswith(b"(Thread.java:840)\n")  # type: ignore[union-attr]


def test_activemq_escaped_colon_is_literal_in_10() -> None:
    """1.0 has no escapes: the backslash stays."""
    [frame, _] = decode(v.AMQ_UNKNOWN_ACTION_FOO, "1.0")
    assert frame.get("message") == "Unknown STOMP action\\c FOO"  # type: ignore[union-attr]


CONNECTED = [
    pytest.param(v.RABBIT_CONNECTED_10,
                 (("server", "RabbitMQ/3.10.8"), ("session", "session-AuWrQMOFG_mfoVEh7epXAA"),
                  ("heart-beat", "0,0"), ("version", "1.0")),
                 id="rabbitmq-1.0"),
    pytest.param(v.AMQ_CONNECTED_10,
                 (("server", "ActiveMQ/5.17.2"), ("heart-beat", "0,0"),
                  ("session", "ID:vm-37173-1795314571027-3:2"), ("version", "1.0")),
                 id="activemq-1.0"),
    pytest.param(v.RABBIT_CONNECTED_12,
                 (("server", "RabbitMQ/3.10.8"), ("session", "session-bnjjXUtOVg6331MeTv4kXg"),
                  ("heart-beat", "1000,1000"), ("version", "1.2")),
                 id="rabbitmq-1.2"),
    pytest.param(v.AMQ_CONNECTED_12,
                 (("server", "ActiveMQ/5.17.2"), ("heart-beat", "1000,1000"),
                  ("session", "ID:vm-37173-1795314571027-3:5"), ("version", "1.2")),
                 id="activemq-1.2"),
]  # fmt: skip


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize(("raw", "headers"), CONNECTED)
def test_connected(
    raw: bytes, headers: tuple[tuple[str, str], ...], version: Version, strict: bool
) -> None:
    """CONNECTED is decoded before any version is agreed; ActiveMQ's session id has raw ':'
    (never escaped in CONNECTED, 1.2 §Value Encoding)."""
    assert decode(raw, version, strict=strict) == [Frame("CONNECTED", headers), HB]


def test_connected_then_heartbeats() -> None:
    """Heart-beat EOLs may follow CONNECTED at once: both brokers write an EOL after every
    frame's NUL, and RabbitMQ's first heart-beats come right after CONNECTED."""
    assert decode(v.RABBIT_CONNECTED_12 + b"\n\n\n", "1.2") == [
        Frame("CONNECTED", (("server", "RabbitMQ/3.10.8"),
                            ("session", "session-bnjjXUtOVg6331MeTv4kXg"),
                            ("heart-beat", "1000,1000"), ("version", "1.2"))),
        HB, HB, HB, HB,
    ]  # fmt: skip


def test_whole_broker_session_in_network_sized_chunks() -> None:
    """Every captured 1.2 frame back to back, read 1460 bytes at a time as from a socket."""
    stream = b"".join(p.values[0] for p in RABBIT + AMQ) + v.AMQ_UNKNOWN_ACTION_FOO
    whole = run([stream], "1.2")
    chunked = run(sized(stream, 1460), "1.2")
    assert whole.error is None and chunked.error is None
    assert chunked.events == whole.events
    assert len(whole.events) == 2 * (len(RABBIT) + len(AMQ) + 1)


@pytest.mark.parametrize(
    ("version", "expected"), [("1.0", "12\\c30\\c45"), ("1.1", "12:30:45"), ("1.2", "12:30:45")]
)
def test_rabbitmq_escaped_value(version: Version, expected: str) -> None:
    """RabbitMQ escapes header values even in 1.0: `x-time:12:30:45` arrives as
    `x-time:12\\c30\\c45`.  A 1.0 decoder must keep that literally (1.0 has no escapes).
    The header line is RabbitMQ's, the frame around it is minimal."""
    frame = decode(b"MESSAGE\ndestination:/queue/a\nx-time:12\\c30\\c45\n\n\x00\n", version)[0]
    assert frame.get("x-time") == expected  # type: ignore[union-attr]


def test_broker_12_escape_roundtrip_value() -> None:
    """A 1.2 value `a:b\\nc\\d\\re` comes back from both brokers as `a\\cb\\nc\\\\d\\re`."""
    frame = decode(b"MESSAGE\nx-esc:a\\cb\\nc\\\\d\\re\n\n\x00", "1.2")[0]
    assert frame.get("x-esc") == "a:b\nc\\d\re"  # type: ignore[union-attr]


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_broker_spaces_preserved(version: Version) -> None:
    """Both brokers keep the spaces of `x-space : v ` (no trimming), as 1.2 requires."""
    frame = decode(b"MESSAGE\nx-space : v \n\n\x00", version)[0]
    assert frame.headers == (("x-space ", " v "),)  # type: ignore[union-attr]
