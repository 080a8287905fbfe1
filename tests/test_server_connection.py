"""ServerConnection: the server half of a session, driven with hand-written client bytes.

Bad client input raises RemoteProtocolError with ``event_hint``: the ERROR the server should send
before closing (1.2 §ERROR: "it MUST then close the connection just after sending the ERROR").
"""

from __future__ import annotations

import pytest
from connection_helpers import (
    HB,
    VERSIONS,
    decode_all,
    drain,
    refused,
    remote_error,
    snapshot,
)

from stomp_proto import (
    Abort,
    Ack,
    Begin,
    Commit,
    Connect,
    Connected,
    ConnectionClosed,
    ConnectionState,
    Disconnect,
    Error,
    ErrorKind,
    Frame,
    HeartBeat,
    LocalProtocolError,
    Message,
    Nack,
    Receipt,
    RemoteProtocolError,
    Send,
    ServerConnection,
    Subscribe,
    Unsubscribe,
    Version,
)

S = ConnectionState


def connect_bytes(
    versions: str | None = "1.0,1.1,1.2", host: str | None = "h", command: bytes = b"CONNECT"
) -> bytes:
    lines = [command]
    if versions is not None:
        lines.append(b"accept-version:" + versions.encode())
    if host is not None:
        lines.append(b"host:" + host.encode())
    return b"\n".join(lines) + b"\n\n\x00"


def server_after_connect(
    versions: str | None = "1.0,1.1,1.2", *, server_versions: tuple[Version, ...] = VERSIONS
) -> ServerConnection:
    server = ServerConnection(versions=server_versions)
    server.receive_data(connect_bytes(versions))
    [event] = drain(server)
    assert isinstance(event, Connect)
    assert server.state is S.CONNECTING
    return server


def connected_server(version: Version = "1.2") -> ServerConnection:
    offer = None if version == "1.0" else version
    server = server_after_connect(offer)
    server.send(Connected())
    assert server.state is S.CONNECTED and server.version == version
    return server


def feed(server: ServerConnection, data: bytes) -> list[object]:
    server.receive_data(data)
    return [e for e in drain(server) if not isinstance(e, HeartBeat)]


def hint_of(exc: RemoteProtocolError) -> Error:
    assert isinstance(exc.event_hint, Error), repr(exc)
    return exc.event_hint


def sub_frame(sub: str, ack: str = "auto", receipt: str | None = None) -> bytes:
    data = b"SUBSCRIBE\ndestination:/queue/" + sub.encode() + b"\nid:" + sub.encode() + b"\n"
    if ack != "auto":
        data += b"ack:" + ack.encode() + b"\n"
    if receipt is not None:
        data += b"receipt:" + receipt.encode() + b"\n"
    return data + b"\n\x00"


# -- construction and handshake -----------------------------------------------------------------


def test_initial_state() -> None:
    server = ServerConnection()
    assert server.state is S.IDLE
    assert server.version is None and server.negotiated_version is None
    assert server.get_timer() is None
    assert server.next_event() is None


@pytest.mark.parametrize("versions", [(), ("2.0",), ("1.2", "x")])
def test_constructor_rejects_bad_versions(versions: tuple[str, ...]) -> None:
    with pytest.raises(ValueError):
        ServerConnection(versions=versions)  # type: ignore[arg-type]


def test_constructor_rejects_tolerance_below_one() -> None:
    with pytest.raises(ValueError):
        ServerConnection(heartbeat_tolerance=0.99)


@pytest.mark.parametrize(
    ("offer", "server_versions", "expected"),
    [
        ("1.0,1.1,1.2", VERSIONS, "1.2"),
        ("1.0,1.1,1.2", ("1.1",), "1.1"),
        ("1.0,1.1,1.2", ("1.0", "1.1"), "1.1"),
        ("1.1", VERSIONS, "1.1"),
        ("1.0,1.1,2.0", VERSIONS, "1.1"),  # 1.2 §Protocol Negotiation example
        ("1.2,1.0", VERSIONS, "1.2"),
        (None, VERSIONS, "1.0"),  # missing accept-version means 1.0
        ("1.0", VERSIONS, "1.0"),
    ],
)
def test_negotiation_picks_highest_common_version(
    offer: str | None, server_versions: tuple[Version, ...], expected: Version
) -> None:
    # 1.2 §Protocol Negotiation: "the highest protocol version that both ... have in common".
    server = server_after_connect(offer, server_versions=server_versions)
    assert server.negotiated_version == expected
    assert server.version is None  # not agreed until CONNECTED is sent
    data = server.send(Connected())
    assert server.version == expected
    [frame] = decode_all(data, "1.0")
    assert isinstance(frame, Frame)
    # 1.0 CONNECTED carries no version header (1.0 clients expect none).
    assert frame.get("version") == (None if expected == "1.0" else expected)
    assert server.state is S.CONNECTED


@pytest.mark.parametrize(
    ("offer", "server_versions"),
    [("2.0", VERSIONS), ("1.2", ("1.0", "1.1")), (None, ("1.1", "1.2")), ("1.1,1.2", ("1.0",))],
)
def test_no_common_version(offer: str | None, server_versions: tuple[Version, ...]) -> None:
    # 1.2 §Protocol Negotiation: the server MUST respond with an ERROR with a version header
    # listing what it supports, and close.
    server = ServerConnection(versions=server_versions)
    exc = remote_error(server, connect_bytes(offer), ErrorKind.BAD_VERSION)
    assert server.state is S.CLOSED
    hint = hint_of(exc)
    assert hint.headers == (("version", ",".join(server_versions)),)
    assert hint.content_type == "text/plain"
    assert hint.message
    data = server.send(hint)
    [frame] = decode_all(data, "1.0")
    assert isinstance(frame, Frame)
    assert frame.command == "ERROR" and frame.get("version") == ",".join(server_versions)


def test_version_hint_carries_receipt_id() -> None:
    server = ServerConnection(versions=("1.2",))
    exc = remote_error(server, b"CONNECT\naccept-version:1.0\nreceipt:rc\n\n\x00")
    assert hint_of(exc).receipt_id == "rc"


def test_stomp_command_accepted_like_connect() -> None:
    # 1.2 §CONNECT or STOMP Frame: servers MUST handle STOMP in the same manner as CONNECT.
    server = ServerConnection()
    [event] = feed(server, connect_bytes("1.2", command=b"STOMP"))
    assert isinstance(event, Connect) and event.frame_command == "STOMP"
    assert server.state is S.CONNECTING and server.negotiated_version == "1.2"
    server.send(Connected())
    assert server.state is S.CONNECTED


@pytest.mark.parametrize("offer", ["1.1", "1.2", "1.0,1.1,1.2"])
def test_connect_11_without_host_refused_in_strict(offer: str) -> None:
    # 1.1 §CONNECT / 1.2 §CONNECT: clients MUST set host.
    server = ServerConnection()
    exc = remote_error(server, connect_bytes(offer, host=None), ErrorKind.MISSING_HEADER)
    assert hint_of(exc).message
    lenient = ServerConnection(strict=False)
    [event] = feed(lenient, connect_bytes(offer, host=None))
    assert isinstance(event, Connect) and event.host is None


def test_accept_version_values_are_not_trimmed() -> None:
    # 1.2 §Value Encoding: never trim; " 1.1" is no version we know (RabbitMQ and
    # ActiveMQ agree: "1.0, 1.1, 1.2" gets 1.0), in both modes.
    for strict in (True, False):
        server = ServerConnection(strict=strict)
        [event] = feed(server, connect_bytes("1.0, 1.1, 1.2"))
        assert isinstance(event, Connect) and event.accept_versions == ("1.0",)
        assert server.negotiated_version == "1.0"


# What RabbitMQ and ActiveMQ both accept and the specs forbid (docs/interop.rst,
# "Client mistakes"): the lenient server mode accepts each, the strict one refuses it.
LENIENT_ONLY = [
    pytest.param("1.1", b"SEND\r\ndestination:/queue/a\r\n\r\nhi\x00", id="crlf-11"),
    pytest.param("1.0", b"SEND\r\ndestination:/queue/a\r\n\r\nhi\x00", id="crlf-10"),
    pytest.param("1.0", b"SEND\ndestination:/queue/a\n\nhi\x00\r\n", id="crlf-after-nul-10"),
    pytest.param("1.2", b"BEGIN\ntransaction:t\n\nbody\x00", id="body-on-begin"),
    pytest.param("1.2", b"SUBSCRIBE\nid:1\ndestination:/queue/a\n\nbody\x00", id="body-on-sub"),
    pytest.param("1.2", b"SEND\ndestination:/queue/a\ncontent-length: 2 \n\nhi\x00",
                 id="content-length-blanks"),
]  # fmt: skip


@pytest.mark.parametrize(("version", "data"), LENIENT_ONLY)
def test_lenient_server_mode_accepts_what_real_brokers_accept(
    version: Version, data: bytes
) -> None:
    offer = None if version == "1.0" else version
    lenient = ServerConnection(strict=False)
    feed(lenient, connect_bytes(offer))
    lenient.send(Connected())
    events = feed(lenient, data)
    assert len(events) == 1 and not isinstance(events[0], Error), events
    if isinstance(events[0], Send):
        assert events[0].destination == "/queue/a" and events[0].body == b"hi"
    strict = ServerConnection()
    feed(strict, connect_bytes(offer))
    strict.send(Connected())
    with pytest.raises(RemoteProtocolError):
        feed(strict, data)


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_lenient_server_mode_keeps_header_values_as_sent(version: Version) -> None:
    # 1.2 §Value Encoding: values are never trimmed; a broker passes a SEND's
    # headers on to its subscribers, so blanks that are data must survive
    # (RabbitMQ keeps them; only the lenient *client* decoder trims).
    offer = None if version == "1.0" else version
    server = ServerConnection(strict=False)
    feed(server, connect_bytes(offer))
    server.send(Connected())
    [event] = feed(server, b"SEND\ndestination:/queue/a\nx-spaced: a b \n\nhi\x00")
    assert isinstance(event, Send)
    assert ("x-spaced", " a b ") in event.headers


@pytest.mark.parametrize(
    "data", [b"send\ndestination:/q\n\nhi\x00", b"SEND \ndestination:/q\n\n\x00"]
)
def test_lenient_server_mode_reads_commands_exactly(data: bytes) -> None:
    # RabbitMQ and ActiveMQ both refuse a lower-case command (docs/interop.rst,
    # "Client mistakes"); the lenient server does too.
    server = ServerConnection(strict=False)
    feed(server, connect_bytes("1.2"))
    server.send(Connected())
    with pytest.raises(RemoteProtocolError) as caught:
        feed(server, data)
    assert caught.value.kind is ErrorKind.BAD_COMMAND


def test_lenient_server_mode_accepts_a_body_on_connect() -> None:
    data = connect_bytes("1.2")[:-1] + b"hello\x00"
    [event] = feed(ServerConnection(strict=False), data)
    assert isinstance(event, Connect)
    remote_error(ServerConnection(), data, ErrorKind.UNEXPECTED_BODY)


@pytest.mark.parametrize(
    ("offer", "server_versions"), [(None, VERSIONS), ("1.0", VERSIONS), ("1.0,1.1", ("1.0",))]
)
def test_connect_without_host_fine_when_10_is_agreed(
    offer: str | None, server_versions: tuple[Version, ...]
) -> None:
    server = ServerConnection(versions=server_versions)
    [event] = feed(server, connect_bytes(offer, host=None))
    assert isinstance(event, Connect)
    assert server.negotiated_version == "1.0"


@pytest.mark.parametrize(
    "data",
    [
        b"SEND\ndestination:/q\nreceipt:r9\n\nhi\x00",
        b"SUBSCRIBE\ndestination:/q\nid:1\nreceipt:r9\n\n\x00",
        b"DISCONNECT\nreceipt:r9\n\n\x00",
        b"ACK\nid:1\nreceipt:r9\n\n\x00",
    ],
)
def test_frames_before_connect_are_refused_with_hint(data: bytes) -> None:
    # As RabbitMQ's ERROR puts it: "You must log in using CONNECT first".
    server = ServerConnection()
    exc = remote_error(server, data, ErrorKind.BAD_STATE)
    assert server.state is S.CLOSED
    hint = hint_of(exc)
    assert hint.receipt_id == "r9"  # 1.2 §ERROR: receipt-id of the frame it is about
    assert hint.message and hint.body
    # The hint may be sent although the connection is closed - once.
    data = server.send(hint)
    [frame] = decode_all(data, "1.0")
    assert isinstance(frame, Frame)
    assert frame.command == "ERROR" and frame.get("receipt-id") == "r9"
    refused(server, lambda: server.send(hint), ErrorKind.CLOSED)  # used after close


@pytest.mark.parametrize(
    "data",
    [
        b"MESSAGE\ndestination:/q\nmessage-id:1\nsubscription:s\n\n\x00",
        b"CONNECTED\nversion:1.2\n\n\x00",
        b"RECEIPT\nreceipt-id:r\n\n\x00",
        b"ERROR\n\n\x00",
    ],
)
@pytest.mark.parametrize("connected", [False, True])
def test_server_frames_from_client_are_bad_commands(data: bytes, connected: bool) -> None:
    server = connected_server() if connected else ServerConnection()
    exc = remote_error(server, data, ErrorKind.BAD_COMMAND)
    assert hint_of(exc).message
    assert server.state is S.CLOSED


def test_unknown_command_gets_hint() -> None:
    server = connected_server()
    exc = remote_error(server, b"FOO\nreceipt:r1\n\n\x00", ErrorKind.BAD_COMMAND)
    assert isinstance(exc.event_hint, Error)


def test_second_connect_is_refused() -> None:
    server = connected_server()
    exc = remote_error(server, connect_bytes(), ErrorKind.BAD_STATE)
    assert isinstance(exc.event_hint, Error)


def test_connect_while_awaiting_answer_is_refused() -> None:
    server = server_after_connect()
    remote_error(server, connect_bytes(), ErrorKind.BAD_STATE)


# -- what the server may send ---------------------------------------------------------------


@pytest.mark.parametrize(
    "event",
    [
        Connected(),
        Message("/q", "m", subscription="s"),
        Receipt("r"),
        HB,
    ],
)
def test_only_error_before_connect(event: object) -> None:
    server = ServerConnection()
    refused(server, lambda: server.send(event), ErrorKind.BAD_STATE)  # type: ignore[arg-type]
    # A server may refuse a connection with an ERROR at any point before CLOSED.
    assert server.send(Error(message="go away")).startswith(b"ERROR\n")
    assert server.state is S.CLOSED


def test_refuse_connection_with_error() -> None:
    # 1.2 §Connecting: "The server can reject any connection attempt ... ERROR".
    server = server_after_connect()
    data = server.send(Error(message="Bad CONNECT", body=b"Access refused"))
    assert server.state is S.CLOSED
    assert server.version is None
    [frame] = decode_all(data, "1.0")
    assert isinstance(frame, Frame) and frame.body == b"Access refused"
    refused(server, lambda: server.send(Error()), ErrorKind.CLOSED)  # used after close


@pytest.mark.parametrize(
    "event",
    [Send("/q"), Subscribe("/q", id="1"), Connect(host="h"), Ack(id="1"), Disconnect()],
)
def test_server_cannot_send_client_frames(event: object) -> None:
    server = connected_server()
    refused(server, lambda: server.send(event))  # type: ignore[arg-type]


def test_connected_with_version_filled_in() -> None:
    server = server_after_connect("1.1,1.2", server_versions=("1.0", "1.1"))
    data = server.send(Connected(session="s1", server="srv/1"))
    assert data.startswith(b"CONNECTED\nversion:1.1\n")
    assert server.version == "1.1"


@pytest.mark.parametrize("version", ["1.0", "2.0"])
def test_connected_with_version_not_offered_refused(version: str) -> None:
    server = server_after_connect("1.1,1.2")
    refused(server, lambda: server.send(Connected(version=version)), ErrorKind.BAD_VERSION)  # type: ignore[arg-type]
    server.send(Connected())


def test_connected_with_version_server_does_not_support_refused() -> None:
    server = server_after_connect("1.0,1.1,1.2", server_versions=("1.0", "1.1"))
    refused(server, lambda: server.send(Connected(version="1.2")), ErrorKind.BAD_VERSION)


def test_connected_with_lower_version_than_negotiated_refused() -> None:
    # 1.2 §Protocol Negotiation: the session uses the *highest* common version; the API says
    # a Connected with another version than the negotiated one is refused.
    server = server_after_connect("1.0,1.1,1.2")
    assert server.negotiated_version == "1.2"
    refused(server, lambda: server.send(Connected(version="1.1")), ErrorKind.BAD_VERSION)


def test_message_only_for_open_subscription() -> None:
    server = connected_server("1.2")
    refused(
        server, lambda: server.send(Message("/q", "m1", subscription="s1")), ErrorKind.BAD_STATE
    )
    feed(server, sub_frame("s1"))
    data = server.send(Message("/queue/s1", "m1", subscription="s1", body=b"hi"))
    assert data.startswith(b"MESSAGE\n")
    feed(server, b"UNSUBSCRIBE\nid:s1\n\n\x00")
    refused(
        server, lambda: server.send(Message("/q", "m2", subscription="s1")), ErrorKind.BAD_STATE
    )


def test_message_12_client_ack_needs_ack_header() -> None:
    # 1.2 §MESSAGE: MUST contain an ack header for client/client-individual subscriptions.
    server = connected_server("1.2")
    feed(server, sub_frame("s1", "client"))
    message = Message("/queue/s1", "m1", subscription="s1")
    refused(server, lambda: server.send(message), ErrorKind.MISSING_HEADER)
    server.send(Message("/queue/s1", "m1", subscription="s1", ack="a1"))
    assert server.pending_acks("s1") == ("a1",)


@pytest.mark.parametrize("version", ["1.0", "1.1"])
def test_message_before_12_client_ack_tracked_by_message_id(version: Version) -> None:
    server = connected_server(version)
    feed(server, sub_frame("s1", "client"))
    server.send(Message("/queue/s1", "m1", subscription="s1"))
    assert server.pending_acks("s1") == ("m1",)


def test_message_11_needs_subscription_header() -> None:
    server = connected_server("1.1")
    feed(server, sub_frame("s1"))
    refused(server, lambda: server.send(Message("/queue/s1", "m1")))


def test_message_10_for_subscription_without_id() -> None:
    server = connected_server("1.0")
    [sub] = feed(server, b"SUBSCRIBE\ndestination:/queue/a\nack:client\n\n\x00")
    assert isinstance(sub, Subscribe) and sub.id is None
    assert set(server.subscriptions) == {"/queue/a"}
    data = server.send(Message("/queue/a", "m1"))
    assert b"subscription" not in data
    assert server.pending_acks("/queue/a") == ("m1",)
    [ack] = feed(server, b"ACK\nmessage-id:m1\n\n\x00")
    assert isinstance(ack, Ack) and ack.covered == ("m1",)


def test_receipt_only_when_asked() -> None:
    server = connected_server("1.2")
    refused(server, lambda: server.send(Receipt("r1")), ErrorKind.BAD_STATE)
    feed(server, b"SEND\ndestination:/q\nreceipt:r1\n\nx\x00")
    assert server.send(Receipt("r1")) == b"RECEIPT\nreceipt-id:r1\n\n\x00"
    refused(server, lambda: server.send(Receipt("r1")), ErrorKind.BAD_STATE)


def test_duplicate_receipt_in_flight_is_remote_error() -> None:
    server = connected_server("1.2")
    feed(server, b"SEND\ndestination:/q\nreceipt:r1\n\nx\x00")
    exc = remote_error(server, b"BEGIN\ntransaction:t\nreceipt:r1\n\n\x00", ErrorKind.BAD_STATE)
    assert hint_of(exc).receipt_id == "r1"


def test_error_in_session_closes() -> None:
    server = connected_server("1.2")
    server.send(Error(message="bye"))
    assert server.state is S.CLOSED
    refused(server, lambda: server.send(HB), ErrorKind.CLOSED)  # used after close


def test_heartbeat_send_allowed_when_connected() -> None:
    server = connected_server("1.2")
    assert server.send(HB) == b"\n"


# -- what the server checks in the client's frames --------------------------------------------


@pytest.mark.parametrize(
    ("setup", "bad", "kind"),
    [
        ([sub_frame("s1")], sub_frame("s1", receipt="rx"), ErrorKind.BAD_STATE),
        ([], b"UNSUBSCRIBE\nid:nope\nreceipt:rx\n\n\x00", ErrorKind.BAD_STATE),
        ([], b"SEND\ndestination:/q\ntransaction:nope\nreceipt:rx\n\n\x00", ErrorKind.BAD_STATE),
        ([], b"COMMIT\ntransaction:nope\nreceipt:rx\n\n\x00", ErrorKind.BAD_STATE),
        ([], b"ABORT\ntransaction:nope\nreceipt:rx\n\n\x00", ErrorKind.BAD_STATE),
        ([b"BEGIN\ntransaction:t\n\n\x00"], b"BEGIN\ntransaction:t\nreceipt:rx\n\n\x00",
         ErrorKind.BAD_STATE),
        ([], b"ACK\nid:nothing\nreceipt:rx\n\n\x00", ErrorKind.BAD_STATE),
        ([sub_frame("s1")], b"ACK\nid:a1\nreceipt:rx\n\n\x00", ErrorKind.BAD_STATE),
        ([], b"SEND\nreceipt:rx\n\nno destination\x00", ErrorKind.MISSING_HEADER),
        ([], b"SUBSCRIBE\ndestination:/q\nreceipt:rx\n\n\x00", ErrorKind.MISSING_HEADER),
        ([], b"ACK\nmessage-id:m\nreceipt:rx\n\n\x00", ErrorKind.MISSING_HEADER),
    ],
)  # fmt: skip
def test_bad_client_frames_in_12(setup: list[bytes], bad: bytes, kind: ErrorKind) -> None:
    server = connected_server("1.2")
    for data in setup:
        feed(server, data)
    exc = remote_error(server, bad, kind)
    assert server.state is S.CLOSED
    hint = hint_of(exc)
    assert hint.receipt_id == "rx"
    assert hint.content_type == "text/plain"
    # The hint, once sent, decodes under the session's version.
    [frame] = decode_all(server.send(hint), "1.2")
    assert isinstance(frame, Frame) and frame.get("receipt-id") == "rx"


def test_nack_in_10_is_remote_error() -> None:
    server = connected_server("1.0")
    feed(server, b"SUBSCRIBE\ndestination:/queue/a\nid:s1\nack:client\n\n\x00")
    server.send(Message("/queue/a", "m1", subscription="s1"))
    exc = remote_error(server, b"NACK\nmessage-id:m1\n\n\x00", ErrorKind.BAD_COMMAND)
    assert isinstance(exc.event_hint, Error)


def test_ack_on_auto_subscription_is_remote_error() -> None:
    server = connected_server("1.2")
    feed(server, sub_frame("s1"))
    server.send(Message("/queue/s1", "m1", subscription="s1", ack="a1"))
    assert server.pending_acks("s1") == ()
    remote_error(server, b"ACK\nid:a1\n\n\x00", ErrorKind.BAD_STATE)


@pytest.mark.parametrize("version", VERSIONS)
def test_received_ack_has_covered(version: Version) -> None:
    server = connected_server(version)
    feed(server, sub_frame("c", "client"))
    if version != "1.0":
        feed(server, sub_frame("i", "client-individual"))
    for n in range(1, 4):
        server.send(Message("/queue/c", f"cm{n}", subscription="c", ack=f"ca{n}"))
        if version != "1.0":
            server.send(Message("/queue/i", f"im{n}", subscription="i", ack=f"ia{n}"))

    def ack_bytes(sub: str, n: int, command: bytes = b"ACK") -> bytes:
        if version == "1.2":
            return command + b"\nid:" + f"{sub}a{n}".encode() + b"\n\n\x00"
        data = command + b"\nmessage-id:" + f"{sub}m{n}".encode() + b"\n"
        if version == "1.1":
            data += b"subscription:" + sub.encode() + b"\n"
        return data + b"\n\x00"

    name = "a" if version == "1.2" else "m"
    [ack] = feed(server, ack_bytes("c", 2))
    assert isinstance(ack, Ack)
    assert ack.covered == (f"c{name}1", f"c{name}2")  # client mode is cumulative
    assert server.pending_acks("c") == (f"c{name}3",)
    if version == "1.0":
        return
    [nack] = feed(server, ack_bytes("i", 2, b"NACK"))
    assert isinstance(nack, Nack) and nack.covered == (f"i{name}2",)
    assert server.pending_acks("i") == (f"i{name}1", f"i{name}3")
    remote_error(server, ack_bytes("i", 2), ErrorKind.BAD_STATE)  # already settled


def test_server_tracks_subscriptions_and_transactions() -> None:
    server = connected_server("1.2")
    feed(server, sub_frame("s1", "client") + sub_frame("s2"))
    assert set(server.subscriptions) == {"s1", "s2"}
    feed(server, b"BEGIN\ntransaction:t1\n\n\x00BEGIN\ntransaction:t2\n\n\x00")
    assert server.transactions == frozenset({"t1", "t2"})
    [send] = feed(server, b"SEND\ndestination:/q\ntransaction:t1\n\nx\x00")
    assert isinstance(send, Send) and send.transaction == "t1"
    feed(server, b"COMMIT\ntransaction:t1\n\n\x00ABORT\ntransaction:t2\n\n\x00")
    assert server.transactions == frozenset()
    server.send(Message("/queue/s1", "m1", subscription="s1", ack="a1"))
    feed(server, b"UNSUBSCRIBE\nid:s1\n\n\x00")
    assert set(server.subscriptions) == {"s2"}
    assert server.pending_acks("s1") == ()


# -- disconnect and end of stream ---------------------------------------------------------------


def test_disconnect_with_receipt() -> None:
    server = connected_server("1.2")
    feed(server, sub_frame("s1") + b"BEGIN\ntransaction:t\n\n\x00")
    feed(server, b"SEND\ndestination:/q\nreceipt:r-send\n\nx\x00")
    [event] = feed(server, b"DISCONNECT\nreceipt:77\n\n\x00")
    assert event == Disconnect(receipt="77")
    assert server.state is S.DISCONNECTING
    assert server.transactions == frozenset()  # 1.2 §BEGIN: implicitly aborted
    # No more MESSAGEs once the client said goodbye; receipts still owed may be sent.
    refused(server, lambda: server.send(Message("/queue/s1", "m", subscription="s1")))
    server.send(Receipt("r-send"))
    assert server.state is S.DISCONNECTING
    assert server.send(HB) == b"\n"
    server.send(Receipt("77"))
    assert server.state is S.CLOSED
    # Anything after DISCONNECT is a protocol error (1.2 §DISCONNECT).


def test_frames_after_disconnect_are_remote_errors() -> None:
    server = connected_server("1.2")
    feed(server, b"DISCONNECT\nreceipt:77\n\n\x00")
    remote_error(server, b"SEND\ndestination:/q\n\nx\x00", ErrorKind.BAD_STATE)


def test_disconnect_without_receipt_closes() -> None:
    server = connected_server("1.1")
    feed(server, b"DISCONNECT\n\n\x00")
    assert server.state is S.CLOSED
    refused(server, lambda: server.send(Receipt("x")))


def test_end_of_stream() -> None:
    server = connected_server("1.2")
    server.receive_data(b"SEND\ndestination:/q\n\nx\x00\n")
    server.receive_data(None)
    events = drain(server)
    assert [type(e) for e in events] == [Send, HeartBeat, ConnectionClosed]
    assert server.state is S.CLOSED
    assert server.next_event() is None
    with pytest.raises(LocalProtocolError):
        server.receive_data(b"x")


def test_truncated_frame_at_eof() -> None:
    server = connected_server("1.2")
    server.receive_data(b"SEND\ndestination:/q\nreceipt:r1\n\npartial")
    assert server.next_event() is None
    server.receive_data(None)
    exc = remote_error(server, None, ErrorKind.TRUNCATED)
    assert isinstance(exc.event_hint, Error)
    assert server.state is S.CLOSED


def test_remote_errors_are_sticky() -> None:
    server = ServerConnection()
    server.receive_data(b"SEND\ndestination:/q\n\nx\x00" + connect_bytes())
    with pytest.raises(RemoteProtocolError) as first:
        server.next_event()
    with pytest.raises(RemoteProtocolError) as again:
        server.next_event()
    assert again.value is first.value
    assert server.state is S.CLOSED


# -- a refused send changes nothing ----------------------------------------------------------


def test_refusals_leave_everything_unchanged() -> None:
    server = connected_server("1.2")
    feed(server, sub_frame("s1", "client") + sub_frame("s2") + b"BEGIN\ntransaction:t\n\n\x00")
    feed(server, b"SEND\ndestination:/q\nreceipt:r1\n\nx\x00")
    server.send(Message("/queue/s1", "m1", subscription="s1", ack="a1"))
    before = snapshot(server)
    attempts = [
        Connected(),
        Message("/q", "m", subscription="nope"),
        Message("/q", "m", subscription="s1"),  # no ack header
        Receipt("r-unknown"),
        Send("/q"),
        Subscribe("/q", id="x"),
        Unsubscribe(id="s1"),
        Begin("x"),
        Commit("t"),
        Abort("t"),
        Ack(id="a1"),
        Disconnect(),
        Connect(host="h"),
        ConnectionClosed(),
    ]
    for event in attempts:
        refused(server, lambda e=event: server.send(e))
    assert snapshot(server) == before


@pytest.mark.parametrize("strict", [True, False])
def test_an_http_request_is_refused_at_its_head(strict: bool) -> None:
    # A WebSocket client pointed at the plain STOMP port sends an HTTP request,
    # which never has a NUL: waiting for the end of that "frame" would hold the
    # client until its timeout.  Both modes refuse the unknown command as soon
    # as the head is complete, with the ERROR to send (RabbitMQ and ActiveMQ
    # refuse unknown commands too: docs/interop.rst, "Client mistakes").
    server = ServerConnection(strict=strict)
    server.receive_data(b"GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n\r\n")
    with pytest.raises(RemoteProtocolError) as info:
        server.next_event()
    assert info.value.kind is ErrorKind.BAD_COMMAND
    assert isinstance(info.value.event_hint, Error)


# -- iteration ----------------------------------------------------------------------------------


def test_iterator_is_live_and_its_error_sticky() -> None:
    # As on the client: iter(server) yields what next_event() gives, resumes
    # after more bytes, and raises the session's error again on every call.
    server = connected_server("1.2")
    events = iter(server)
    assert iter(events) is events
    server.receive_data(b"\n")
    assert list(events) == [HeartBeat()]
    server.receive_data(b"SEND\ndestination:/q\n\nhi\x00")
    assert next(events).body == b"hi"  # type: ignore[attr-defined]
    server.receive_data(b"BOGUS\n\n\x00")
    with pytest.raises(RemoteProtocolError) as first:
        next(events)
    with pytest.raises(RemoteProtocolError) as again:
        next(events)
    assert again.value is first.value


def test_content_length_of_thousands_of_leading_zeros() -> None:
    # 1.2 §Header content-length: an octet count in decimal digits; the grammar
    # bounds neither its digits nor its zeros.
    server = connected_server("1.2")
    zeros = b"0" * 5000
    [send] = feed(server, b"SEND\ndestination:/q\ncontent-length:" + zeros + b"2\n\nhi\x00")
    assert isinstance(send, Send) and send.body == b"hi"
