"""ClientConnection: the client half of a session, driven with hand-written server bytes.

Every rule of the connection API is checked here on the client side; the server side is in
``test_server_connection.py`` and whole sessions in ``test_session_back_to_back.py``.
"""

from __future__ import annotations

import pytest
from connection_helpers import (
    HB,
    VERSIONS,
    connected_pair,
    drain,
    frames_only,
    refused,
    remote_error,
    snapshot,
)

from stomp_proto import (
    Abort,
    Ack,
    Begin,
    ClientConnection,
    Commit,
    Connect,
    Connected,
    ConnectionClosed,
    ConnectionState,
    Disconnect,
    Error,
    ErrorKind,
    HeartBeat,
    HeartBeatTimeout,
    Limits,
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


def connected_client(
    version: Version = "1.2", *, strict: bool = True, offered: tuple[Version, ...] | None = None
) -> ClientConnection:
    """A client that sent CONNECT and read a CONNECTED choosing ``version``."""
    client = ClientConnection(strict=strict)
    client.send(Connect(host="h", accept_versions=offered or VERSIONS))
    header = b"" if version == "1.0" else b"version:" + version.encode() + b"\n"
    client.receive_data(b"CONNECTED\n" + header + b"\n\x00")
    [event] = drain(client)
    assert isinstance(event, Connected) and event.version == version
    assert client.state is S.CONNECTED and client.version == version
    return client


def message_bytes(
    version: Version,
    sub: str | None,
    mid: str,
    ack: str | None = None,
    destination: str = "/queue/a",
    body: bytes = b"",
) -> bytes:
    lines = [b"MESSAGE", b"destination:" + destination.encode(), b"message-id:" + mid.encode()]
    if sub is not None:
        lines.append(b"subscription:" + sub.encode())
    if ack is not None:
        lines.append(b"ack:" + ack.encode())
    return b"\n".join(lines) + b"\n\n" + body + b"\x00"


def deliver(
    client: ClientConnection, sub: str | None, mid: str, ack: str | None = None, **kw: object
) -> Message:
    assert client.version is not None
    client.receive_data(message_bytes(client.version, sub, mid, ack, **kw))  # type: ignore[arg-type]
    [event] = drain(client)
    assert isinstance(event, Message)
    return event


# -- before the session ------------------------------------------------------------------------


def test_initial_state() -> None:
    client = ClientConnection()
    assert client.state is S.IDLE
    assert client.version is None
    assert client.heartbeat is None  # not negotiated yet
    assert client.get_timer() is None
    assert client.subscriptions == {} and client.transactions == frozenset()
    assert client.pending_receipts == {}
    assert client.pending_acks("anything") == ()
    assert client.next_event() is None
    assert client.handle_timer(123.0) == b""


def test_constructor_rejects_tolerance_below_one() -> None:
    with pytest.raises(ValueError):
        ClientConnection(heartbeat_tolerance=0.5)


@pytest.mark.parametrize(
    "event",
    [
        Send("/q"),
        Subscribe("/q", id="1"),
        Unsubscribe(id="1"),
        Ack(id="a", message_id="m", subscription="s"),
        Nack(id="a", message_id="m", subscription="s"),
        Begin("t"),
        Commit("t"),
        Abort("t"),
        Disconnect(),
        HB,
    ],
)
def test_nothing_but_connect_before_handshake(event: object) -> None:
    client = ClientConnection()
    refused(client, lambda: client.send(event), ErrorKind.BAD_STATE)  # type: ignore[arg-type]
    client.send(Connect(host="h"))
    # Still refused while the CONNECTED is awaited.
    refused(client, lambda: client.send(event), ErrorKind.BAD_STATE)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "event", [Connected(), Message("/q", "m", subscription="s"), Receipt("r"), Error()]
)
def test_client_cannot_send_server_frames(event: object) -> None:
    client = connected_client()
    refused(client, lambda: client.send(event))  # type: ignore[arg-type]


@pytest.mark.parametrize("event", [ConnectionClosed(), HeartBeatTimeout(1.0)])
def test_outcome_events_cannot_be_sent(event: object) -> None:
    client = connected_client()
    refused(client, lambda: client.send(event))  # type: ignore[arg-type]


def test_connect_moves_to_connecting_and_state_advances_only_on_consumption() -> None:
    client = ClientConnection()
    data = client.send(Connect(host="h"))
    assert data.startswith(b"CONNECT\n")
    assert client.state is S.CONNECTING
    refused(client, lambda: client.send(Connect(host="h")), ErrorKind.BAD_STATE)
    client.receive_data(b"CONNECTED\nversion:1.2\n\n\x00")
    # Bytes alone change nothing: the state advances as events are consumed.
    assert client.state is S.CONNECTING and client.version is None
    assert isinstance(client.next_event(), Connected)
    assert client.state is S.CONNECTED and client.version == "1.2"
    refused(client, lambda: client.send(Connect(host="h")), ErrorKind.BAD_STATE)


@pytest.mark.parametrize("versions", [(), ("2.0",), ("1.2", "1.3")])
def test_connect_with_invalid_versions_refused(versions: tuple[str, ...]) -> None:
    client = ClientConnection()
    connect = Connect(host="h", accept_versions=versions)  # type: ignore[arg-type]
    refused(client, lambda: client.send(connect), ErrorKind.BAD_VERSION)


def test_connect_11_without_host_refused() -> None:
    # 1.1/1.2 §CONNECT: host is REQUIRED when offering 1.1 or later.
    client = ClientConnection()
    refused(client, lambda: client.send(Connect()), ErrorKind.MISSING_HEADER)
    assert client.send(Connect(accept_versions=("1.0",))).startswith(b"CONNECT\n")


@pytest.mark.parametrize("versions", [("1.2",), ("1.1", "1.2"), ("1.1",), ("1.0",)])
def test_stomp_frame_decodes_on_the_server(versions: tuple[Version, ...]) -> None:
    # Whatever a client sends must decode on a server: a STOMP frame, unlike CONNECT, is
    # escaped (1.2 §Value Encoding exempts only CONNECT and CONNECTED).  A client may also
    # refuse a STOMP frame it cannot write consistently.
    client, server = ClientConnection(), ServerConnection()
    connect = Connect(host="h", accept_versions=versions, login="us:er", passcode="p\\w",
                      frame_command="STOMP")  # fmt: skip
    try:
        data = client.send(connect)
    except LocalProtocolError:
        return
    server.receive_data(data)
    assert drain(server) == [connect]


def test_stomp_frame_command() -> None:
    client = ClientConnection()
    # 1.2 §CONNECT or STOMP Frame: only 1.1+ servers know STOMP, so 1.0 alone is refused.
    refused(client, lambda: client.send(Connect(accept_versions=("1.0",), frame_command="STOMP")),
            ErrorKind.BAD_VERSION)  # fmt: skip
    assert client.send(Connect(host="h", frame_command="STOMP")).startswith(b"STOMP\n")
    assert client.state is S.CONNECTING


@pytest.mark.parametrize(
    ("offered", "connected", "expected"),
    [
        (VERSIONS, b"version:1.2\n", "1.2"),
        (VERSIONS, b"version:1.1\n", "1.1"),
        (VERSIONS, b"", "1.0"),  # CONNECTED without version = 1.0
        (("1.0",), b"", "1.0"),
        (("1.0", "1.1"), b"version:1.1\n", "1.1"),
    ],
)
def test_connected_version(offered: tuple[Version, ...], connected: bytes, expected: str) -> None:
    client = ClientConnection()
    client.send(Connect(host="h", accept_versions=offered))
    client.receive_data(b"CONNECTED\n" + connected + b"\n\x00")
    [event] = drain(client)
    assert isinstance(event, Connected) and event.version == expected
    assert client.version == expected


@pytest.mark.parametrize(
    ("offered", "connected"),
    [
        (("1.1", "1.2"), b""),  # no version header means 1.0, which was not offered
        (("1.0",), b"version:1.2\n"),
        (("1.0", "1.1"), b"version:1.2\n"),
        (VERSIONS, b"version:2.0\n"),
    ],
)
def test_connected_with_version_not_offered(offered: tuple[Version, ...], connected: bytes) -> None:
    client = ClientConnection()
    client.send(Connect(host="h", accept_versions=offered))
    exc = remote_error(client, b"CONNECTED\n" + connected + b"\n\x00", ErrorKind.BAD_VERSION)
    assert exc.event_hint is None  # hints are a server thing
    assert client.state is S.CLOSED
    assert client.version is None


def test_error_instead_of_connected_closes() -> None:
    client = ClientConnection()
    client.send(Connect(host="h", login="guest", passcode="bad"))
    client.receive_data(b"ERROR\nmessage:Bad CONNECT\n\nAccess refused\x00\n")
    [event] = frames_only(drain(client))
    assert isinstance(event, Error) and event.message == "Bad CONNECT"
    assert event.body == b"Access refused"
    assert client.state is S.CLOSED
    refused(client, lambda: client.send(Send("/q")), ErrorKind.CLOSED)  # used after close


@pytest.mark.parametrize(
    "data",
    [
        b"MESSAGE\ndestination:/q\nmessage-id:1\nsubscription:s\n\n\x00",
        b"RECEIPT\nreceipt-id:r\n\n\x00",
    ],
)
def test_session_frames_before_connected_are_remote_errors(data: bytes) -> None:
    client = ClientConnection(strict=False)
    client.send(Connect(host="h"))
    remote_error(client, data, ErrorKind.BAD_STATE)
    assert client.state is S.CLOSED


def test_second_connected_is_a_remote_error() -> None:
    client = connected_client()
    remote_error(client, b"CONNECTED\nversion:1.2\n\n\x00", ErrorKind.BAD_STATE)


@pytest.mark.parametrize("command", [b"SEND", b"SUBSCRIBE", b"CONNECT", b"ACK"])
def test_client_frames_from_server_are_bad_commands(command: bytes) -> None:
    client = connected_client()
    data = command + b"\ndestination:/q\nid:1\nmessage-id:1\naccept-version:1.2\nhost:h\n\n\x00"
    remote_error(client, data, ErrorKind.BAD_COMMAND)


def test_unknown_command_from_server() -> None:
    client = connected_client()
    remote_error(client, b"FOO\n\n\x00", ErrorKind.BAD_COMMAND)
    assert client.state is S.CLOSED


# -- subscriptions -------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_subscribe_and_unsubscribe(version: Version) -> None:
    client = connected_client(version)
    sub = Subscribe("/queue/a", id="s1", ack="client")
    data = client.send(sub)
    assert data.startswith(b"SUBSCRIBE\n") and b"ack:client\n" in data
    assert client.subscriptions == {"s1": sub}
    # subscriptions is a copy
    client.subscriptions.clear()
    assert "s1" in client.subscriptions
    refused(client, lambda: client.send(Subscribe("/queue/b", id="s1")), ErrorKind.BAD_STATE)
    refused(client, lambda: client.send(Unsubscribe(id="nope")), ErrorKind.BAD_STATE)
    assert client.send(Unsubscribe(id="s1")).startswith(b"UNSUBSCRIBE\n")
    assert client.subscriptions == {}
    refused(client, lambda: client.send(Unsubscribe(id="s1")), ErrorKind.BAD_STATE)
    # The id is free again.
    client.send(Subscribe("/queue/b", id="s1"))


def test_unsubscribe_with_headers_may_name_a_durable_subscription_not_open() -> None:
    """1.2 §UNSUBSCRIBE: the id names an existing subscription - a durable one exists
    at the broker after the connection's has ended; ActiveMQ removes it by an
    UNSUBSCRIBE with activemq.subscriptionName once its consumer has gone."""
    client = connected_client("1.2")
    client.send(Subscribe("/topic/t", id="d1", headers={"activemq.subscriptionName": "d1"}))
    client.send(Unsubscribe(id="d1"))
    removal = Unsubscribe(id="d1", headers={"activemq.subscriptionName": "d1"}, receipt="r1")
    data = client.send(removal)
    assert data.startswith(b"UNSUBSCRIBE\n") and b"activemq.subscriptionName:d1\n" in data
    assert client.subscriptions == {}
    # Without headers of its own it is refused, as before.
    refused(client, lambda: client.send(Unsubscribe(id="d1")), ErrorKind.BAD_STATE)


def test_a_server_still_refuses_an_unsubscribe_of_no_subscription() -> None:
    link = connected_pair("1.2")
    data = link.client.send(Unsubscribe(id="gone", headers={"activemq.subscriptionName": "x"}))
    with pytest.raises(RemoteProtocolError, match="no subscription"):
        link.to_server(data)


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_subscribe_without_id_refused_from_11(version: Version) -> None:
    client = connected_client(version)
    refused(client, lambda: client.send(Subscribe("/queue/a")), ErrorKind.MISSING_HEADER)


def test_subscribe_10_without_id_keyed_by_destination() -> None:
    # 1.0 §SUBSCRIBE: id optional; 1.0 §UNSUBSCRIBE: by destination or id.
    client = connected_client("1.0")
    client.send(Subscribe("/queue/a"))
    assert set(client.subscriptions) == {"/queue/a"}
    refused(client, lambda: client.send(Subscribe("/queue/a")), ErrorKind.BAD_STATE)
    client.send(Unsubscribe(destination="/queue/a"))
    assert client.subscriptions == {}


def test_client_individual_refused_in_10() -> None:
    client = connected_client("1.0")
    sub = Subscribe("/q", id="s", ack="client-individual")
    refused(client, lambda: client.send(sub), ErrorKind.BAD_HEADER)


def test_unsubscribe_forgets_pending_acks() -> None:
    client = connected_client("1.2")
    client.send(Subscribe("/queue/a", id="s1", ack="client"))
    message = deliver(client, "s1", "m1", "a1")
    assert client.pending_acks("s1") == ("a1",)
    client.send(Unsubscribe(id="s1"))
    assert client.pending_acks("s1") == ()
    refused(client, lambda: client.ack(message), ErrorKind.BAD_STATE, extra_keys=["s1"])


# -- messages ----------------------------------------------------------------------------------


def test_message_for_unknown_subscription_is_delivered_marked() -> None:
    # RabbitMQ delivers replies to /temp-queue/ on a subscription the client never made
    # (its subscription header names the temporary queue).  Not fatal: the event is
    # delivered and marked.
    client = connected_client("1.2")
    client.receive_data(message_bytes("1.2", "/temp-queue/reply", "T_1", destination="/temp"))
    [event] = drain(client)
    assert isinstance(event, Message)
    assert event.unknown_subscription is True
    assert client.state is S.CONNECTED
    assert client.pending_acks("/temp-queue/reply") == ()
    # and it cannot be acknowledged through the connection
    refused(client, lambda: client.ack(event), ErrorKind.BAD_STATE)
    # a known subscription's message is not marked
    client.send(Subscribe("/queue/a", id="s1"))
    assert deliver(client, "s1", "m2").unknown_subscription is False


def test_message_10_without_subscription_header_matches_destination() -> None:
    client = connected_client("1.0")
    client.send(Subscribe("/queue/a", ack="client"))
    message = deliver(client, None, "m1")
    assert message.unknown_subscription is False
    assert client.pending_acks("/queue/a") == ("m1",)
    other = deliver(client, None, "m2", destination="/queue/other")
    assert other.unknown_subscription is True


def test_message_12_client_ack_without_ack_header_is_remote_error() -> None:
    # 1.2 §MESSAGE: a MESSAGE of a client or client-individual subscription MUST have ack.
    client = connected_client("1.2")
    client.send(Subscribe("/queue/a", id="s1", ack="client-individual"))
    remote_error(client, message_bytes("1.2", "s1", "m1"), ErrorKind.MISSING_HEADER)
    assert client.state is S.CLOSED


def test_message_11_without_subscription_header_is_remote_error() -> None:
    client = connected_client("1.1")
    client.send(Subscribe("/queue/a", id="s1"))
    remote_error(client, message_bytes("1.1", None, "m1"), ErrorKind.MISSING_HEADER)


# -- acknowledgements ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("1.0", b"ACK\nmessage-id:m1\nsubscription:s1\n\n\x00"),
        ("1.1", b"ACK\nmessage-id:m1\nsubscription:s1\n\n\x00"),
        ("1.2", b"ACK\nid:a1\n\n\x00"),
    ],
)
def test_ack_bytes_per_version(version: Version, expected: bytes) -> None:
    # 1.0 §ACK: message-id; 1.1 §ACK: message-id and subscription; 1.2 §ACK: id = MESSAGE ack.
    client = connected_client(version)
    client.send(Subscribe("/queue/a", id="s1", ack="client"))
    message = deliver(client, "s1", "m1", "a1")
    assert client.ack(message) == expected


def test_ack_10_subscription_without_id_sends_only_message_id() -> None:
    # 1.0 §ACK: "ACK has one required header, message-id".  The subscription had no id, so
    # there is no subscription id to name; the destination is not one.
    client = connected_client("1.0")
    client.send(Subscribe("/queue/a", ack="client"))
    message = deliver(client, None, "m1")
    assert client.ack(message) == b"ACK\nmessage-id:m1\n\n\x00"


def test_nack_refused_in_10() -> None:
    # NACK is new in 1.1 (1.1 §NACK).
    client = connected_client("1.0")
    client.send(Subscribe("/queue/a", id="s1", ack="client"))
    message = deliver(client, "s1", "m1")
    refused(client, lambda: client.nack(message), ErrorKind.BAD_COMMAND)
    refused(client, lambda: client.send(Nack.of(message)), ErrorKind.BAD_COMMAND)
    assert client.pending_acks("s1") == ("m1",)


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_nack_bytes(version: Version) -> None:
    client = connected_client(version)
    client.send(Subscribe("/queue/a", id="s1", ack="client-individual"))
    message = deliver(client, "s1", "m1", "a1")
    data = client.nack(message, transaction=None)
    assert data.startswith(b"NACK\n")
    assert client.pending_acks("s1") == ()


@pytest.mark.parametrize("version", VERSIONS)
def test_ack_on_auto_subscription_refused(version: Version) -> None:
    client = connected_client(version)
    client.send(Subscribe("/queue/a", id="s1"))
    message = deliver(client, "s1", "m1", "a1")
    assert client.pending_acks("s1") == ()
    refused(client, lambda: client.ack(message), ErrorKind.BAD_STATE)


@pytest.mark.parametrize("version", VERSIONS)
def test_client_mode_ack_is_cumulative(version: Version) -> None:
    # 1.2 §SUBSCRIBE ack Header: client-mode ACKs are cumulative.
    client = connected_client(version)
    client.send(Subscribe("/queue/a", id="s1", ack="client"))
    messages = [deliver(client, "s1", f"m{i}", f"a{i}") for i in range(1, 5)]
    ident = "a" if version == "1.2" else "m"
    assert client.pending_acks("s1") == tuple(f"{ident}{i}" for i in range(1, 5))
    client.ack(messages[2])
    assert client.pending_acks("s1") == (f"{ident}4",)
    for settled in messages[:3]:
        refused(client, lambda m=settled: client.ack(m), ErrorKind.BAD_STATE)
    client.ack(messages[3])
    assert client.pending_acks("s1") == ()


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_client_individual_settles_one(version: Version) -> None:
    client = connected_client(version)
    client.send(Subscribe("/queue/a", id="s1", ack="client-individual"))
    messages = [deliver(client, "s1", f"m{i}", f"a{i}") for i in range(1, 4)]
    ident = "a" if version == "1.2" else "m"
    client.ack(messages[1])
    assert client.pending_acks("s1") == (f"{ident}1", f"{ident}3")
    refused(client, lambda: client.ack(messages[1]), ErrorKind.BAD_STATE)
    client.nack(messages[2])
    assert client.pending_acks("s1") == (f"{ident}1",)
    client.ack(messages[0])
    assert client.pending_acks("s1") == ()


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_client_mode_nack_is_cumulative(version: Version) -> None:
    # 1.2 §NACK: in client mode a NACK applies to all messages sent before and not yet acked.
    client = connected_client(version)
    client.send(Subscribe("/queue/a", id="s1", ack="client"))
    messages = [deliver(client, "s1", f"m{i}", f"a{i}") for i in range(1, 4)]
    client.nack(messages[1])
    assert len(client.pending_acks("s1")) == 1


def test_ack_of_unknown_message_refused() -> None:
    client = connected_client("1.2")
    client.send(Subscribe("/queue/a", id="s1", ack="client"))
    deliver(client, "s1", "m1", "a1")
    stranger = Message("/queue/a", "m9", subscription="s1", ack="a9")
    refused(client, lambda: client.ack(stranger), ErrorKind.BAD_STATE)
    refused(client, lambda: client.send(Ack(id="a9")), ErrorKind.BAD_STATE)
    refused(client, lambda: client.send(Ack()), (ErrorKind.BAD_STATE, ErrorKind.MISSING_HEADER))
    assert client.pending_acks("s1") == ("a1",)


def test_ack_11_names_the_subscription() -> None:
    # 1.1: the same message-id on two subscriptions is told apart by the subscription.
    client = connected_client("1.1")
    client.send(Subscribe("/topic/t", id="s1", ack="client-individual"))
    client.send(Subscribe("/topic/t", id="s2", ack="client-individual"))
    first = deliver(client, "s1", "m1")
    second = deliver(client, "s2", "m1")
    client.ack(second)
    assert client.pending_acks("s1") == ("m1",)
    assert client.pending_acks("s2") == ()
    client.ack(first)
    assert client.pending_acks("s1") == ()


# -- transactions ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_transactions(version: Version) -> None:
    client = connected_client(version)
    client.send(Subscribe("/queue/a", id="s1", ack="client"))
    message = deliver(client, "s1", "m1", "a1")
    assert client.send(Begin("tx1")) == b"BEGIN\ntransaction:tx1\n\n\x00"
    assert client.transactions == frozenset({"tx1"})
    refused(client, lambda: client.send(Begin("tx1")), ErrorKind.BAD_STATE)
    assert b"transaction:tx1\n" in client.send(Send("/q", b"x", transaction="tx1"))
    assert b"transaction:tx1\n" in client.ack(message, transaction="tx1")
    client.send(Begin("tx2"))
    assert client.send(Commit("tx1")) == b"COMMIT\ntransaction:tx1\n\n\x00"
    client.send(Abort("tx2"))
    assert client.transactions == frozenset()
    # A finished transaction is unknown again; its id can be reused.
    client.send(Begin("tx1"))


@pytest.mark.parametrize(
    "make",
    [
        lambda m: Send("/q", transaction="nope"),
        lambda m: Ack.of(m, transaction="nope"),
        lambda m: Nack.of(m, transaction="nope"),
        lambda m: Commit("nope"),
        lambda m: Abort("nope"),
    ],
)
def test_unknown_transaction_refused(make) -> None:  # type: ignore[no-untyped-def]
    client = connected_client("1.2")
    client.send(Subscribe("/queue/a", id="s1", ack="client"))
    message = deliver(client, "s1", "m1", "a1")
    client.send(Begin("tx"))
    refused(client, lambda: client.send(make(message)), ErrorKind.BAD_STATE)


def test_disconnect_ends_open_transactions() -> None:
    # 1.2 §BEGIN: open transactions are implicitly aborted on DISCONNECT.
    client = connected_client("1.2")
    client.send(Begin("tx"))
    client.send(Disconnect(receipt="bye"))
    assert client.transactions == frozenset()


# -- receipts ----------------------------------------------------------------------------------


def test_receipts_tracked_and_matched() -> None:
    client = connected_client("1.2")
    send = Send("/q", b"x", receipt="r1")
    sub = Subscribe("/q", id="s1", receipt="r2")
    client.send(send)
    client.send(sub)
    assert client.pending_receipts == {"r1": send, "r2": sub}
    refused(client, lambda: client.send(Begin("t", receipt="r1")), ErrorKind.BAD_STATE)
    client.receive_data(b"RECEIPT\nreceipt-id:r2\n\n\x00")
    assert client.pending_receipts == {"r1": send, "r2": sub}  # not yet consumed
    assert drain(client) == [Receipt("r2")]
    assert client.pending_receipts == {"r1": send}
    # the id may be reused once answered
    client.send(Begin("t", receipt="r2"))


def test_refused_send_does_not_reserve_its_receipt() -> None:
    client = connected_client("1.2")
    refused(client, lambda: client.send(Send("/q", transaction="nope", receipt="r1")))
    assert client.pending_receipts == {}
    client.send(Send("/q", receipt="r1"))
    assert set(client.pending_receipts) == {"r1"}


def test_unrequested_receipt_is_error_in_strict_mode() -> None:
    client = connected_client("1.2")
    remote_error(client, b"RECEIPT\nreceipt-id:zz\n\n\x00", ErrorKind.BAD_STATE)
    assert client.state is S.CLOSED


def test_unrequested_receipt_accepted_when_not_strict() -> None:
    client = connected_client("1.2", strict=False)
    client.receive_data(b"RECEIPT\nreceipt-id:zz\n\n\x00")
    assert drain(client) == [Receipt("zz")]
    assert client.state is S.CONNECTED


# -- DISCONNECT, ERROR, end of stream ----------------------------------------------------------


def test_graceful_disconnect() -> None:
    # 1.2 §DISCONNECT: send DISCONNECT with receipt, wait for the RECEIPT, then close.
    client = connected_client("1.2")
    client.send(Subscribe("/q", id="s1"))
    client.send(Send("/q", receipt="r-send"))
    assert client.send(Disconnect(receipt="77")) == b"DISCONNECT\nreceipt:77\n\n\x00"
    assert client.state is S.DISCONNECTING
    # 1.2 §DISCONNECT: "Clients MUST NOT send any more frames after the DISCONNECT".
    for event in (Send("/q"), Disconnect(), Subscribe("/r", id="2"), Begin("t")):
        refused(client, lambda e=event: client.send(e), ErrorKind.BAD_STATE)
    # Frames still in flight are delivered; other receipts do not end the session.
    client.receive_data(message_bytes("1.2", "s1", "m1") + b"RECEIPT\nreceipt-id:r-send\n\n\x00")
    events = drain(client)
    assert [type(e) for e in events] == [Message, Receipt]
    assert client.state is S.DISCONNECTING
    assert client.send(HB) == b"\n"  # heart-beats may still be needed while waiting
    client.receive_data(b"RECEIPT\nreceipt-id:77\n\n\x00")
    assert drain(client) == [Receipt("77")]
    assert client.state is S.CLOSED
    assert client.pending_receipts == {}
    client.receive_data(None)
    assert drain(client) == [ConnectionClosed()]


def test_disconnect_without_receipt_closes_at_once() -> None:
    client = connected_client("1.1")
    assert client.send(Disconnect()) == b"DISCONNECT\n\n\x00"
    assert client.state is S.CLOSED
    refused(client, lambda: client.send(HB), ErrorKind.CLOSED)  # used after close


def test_error_closes_the_session() -> None:
    client = connected_client("1.2")
    client.send(Send("/q", receipt="r1"))
    client.receive_data(
        b"ERROR\nreceipt-id:r1\nmessage:boom\ncontent-type:text/plain\n\ndetail\x00"
    )
    [event] = drain(client)
    assert event == Error(
        message="boom", body=b"detail", receipt_id="r1", content_type="text/plain"
    )
    assert client.state is S.CLOSED
    assert client.get_timer() is None
    refused(client, lambda: client.send(Send("/q")), ErrorKind.CLOSED)  # used after close


def test_error_while_disconnecting_closes() -> None:
    client = connected_client("1.2")
    client.send(Disconnect(receipt="77"))
    client.receive_data(b"ERROR\nmessage:boom\n\n\x00")
    assert isinstance(drain(client)[0], Error)
    assert client.state is S.CLOSED


def test_error_then_receipt_like_rabbitmq() -> None:
    # RabbitMQ answers a duplicate subscription id with ERROR, then the
    # RECEIPT the frame asked for, then closes.  The ERROR must come out first and close the
    # session; the RECEIPT after it may be delivered or reported, nothing else.
    client = connected_client("1.2")
    client.send(Subscribe("/q", id="s1"))
    client.send(Subscribe("/q2", id="s2", receipt="r2"))
    client.receive_data(
        b"ERROR\nmessage:Duplicated subscription identifier\ncontent-type:text/plain\n"
        b"content-length:5\n\nsub!!\x00\nRECEIPT\nreceipt-id:r2\n\n\x00\n"
    )
    first = client.next_event()
    assert isinstance(first, Error) and first.body == b"sub!!"
    assert client.state is S.CLOSED
    try:
        rest = frames_only(drain(client))
    except RemoteProtocolError:
        rest = []
    assert rest in ([], [Receipt("r2")])
    assert client.state is S.CLOSED


def test_end_of_stream() -> None:
    client = connected_client("1.2")
    client.send(Subscribe("/q", id="s1"))
    client.receive_data(message_bytes("1.2", "s1", "m1") + b"\n")
    client.receive_data(None)
    assert client.state is S.CONNECTED  # nothing consumed yet
    events = drain(client)
    assert [type(e) for e in events] == [Message, HeartBeat, ConnectionClosed]
    assert client.state is S.CLOSED
    assert client.next_event() is None  # ConnectionClosed comes once
    with pytest.raises(LocalProtocolError):
        client.receive_data(b"more")
    with pytest.raises(LocalProtocolError):
        client.receive_data(None)


def test_end_of_stream_before_connected() -> None:
    client = ClientConnection()
    client.send(Connect(host="h"))
    client.receive_data(None)
    assert drain(client) == [ConnectionClosed()]
    assert client.state is S.CLOSED


@pytest.mark.parametrize(
    "partial", [b"MESS", b"MESSAGE\ndestination:/q\n", b"RECEIPT\nreceipt-id:r\n\n"]
)
def test_truncated_frame_at_eof(partial: bytes) -> None:
    client = connected_client("1.2", strict=False)
    client.receive_data(partial)
    assert client.next_event() is None
    client.receive_data(None)
    remote_error(client, None, ErrorKind.TRUNCATED)
    assert client.state is S.CLOSED


def test_remote_errors_are_sticky() -> None:
    client = connected_client("1.2")
    client.receive_data(b"RECEIPT\nreceipt-id:zz\n\n\x00RECEIPT\nreceipt-id:r\n\n\x00")
    with pytest.raises(RemoteProtocolError) as first:
        client.next_event()
    for _ in range(3):
        with pytest.raises(RemoteProtocolError) as again:
            client.next_event()
        assert again.value is first.value
    assert client.state is S.CLOSED
    refused(client, lambda: client.send(Send("/q")), ErrorKind.CLOSED)  # used after close
    assert client.get_timer() is None


def test_empty_data_is_harmless() -> None:
    client = connected_client("1.2")
    client.receive_data(b"")
    assert client.next_event() is None
    assert client.state is S.CONNECTED


def test_limits_apply() -> None:
    client = ClientConnection(limits=Limits(max_body_size=10))
    client.send(Connect(host="h"))
    client.receive_data(b"CONNECTED\nversion:1.2\n\n\x00")
    drain(client)
    client.send(Subscribe("/q", id="s"))
    client.receive_data(message_bytes("1.2", "s", "m", body=b"x" * 11))
    remote_error(client, None, ErrorKind.TOO_LARGE)


def test_iter_drains_available_events() -> None:
    client = connected_client("1.2")
    client.send(Subscribe("/q", id="s"))
    client.receive_data(message_bytes("1.2", "s", "1") + b"\n" + message_bytes("1.2", "s", "2"))
    events = list(client)
    assert [type(e) for e in events] == [Message, HeartBeat, Message]
    assert list(client) == []


def test_iterator_stays_live_after_it_stops() -> None:
    # iter(connection) is a view of next_event(): it stops when next_event() says
    # None, and yields again once more bytes have arrived, as a decoder's does.
    client = connected_client("1.2")
    client.send(Subscribe("/q", id="s"))
    events = iter(client)
    assert iter(events) is events
    client.receive_data(message_bytes("1.2", "s", "1"))
    assert [event.message_id for event in events] == ["1"]  # type: ignore[attr-defined]
    assert next(events, None) is None
    client.receive_data(message_bytes("1.2", "s", "2"))
    assert next(events).message_id == "2"  # type: ignore[attr-defined]
    assert list(events) == []


def test_iterator_raises_the_sticky_error_again() -> None:
    client = connected_client("1.2")
    events = iter(client)
    client.receive_data(b"BOGUS\n\n\x00")
    with pytest.raises(RemoteProtocolError) as first:
        next(events)
    with pytest.raises(RemoteProtocolError) as again:
        list(events)
    assert again.value is first.value
    assert client.ended_by is first.value


def test_iterator_asks_a_subclass_next_event() -> None:
    seen = []

    class Recording(ClientConnection):
        def next_event(self):  # type: ignore[no-untyped-def]
            event = super().next_event()
            seen.append(event)
            return event

    client = Recording()
    client.send(Connect(host="h"))
    client.receive_data(b"CONNECTED\nversion:1.2\n\n\x00\n")
    assert [type(event) for event in client] == [Connected, HeartBeat]
    assert [type(event) for event in seen] == [Connected, HeartBeat, type(None)]


# -- version-dependent wire rules follow the negotiation ----------------------------------------


@pytest.mark.parametrize(
    ("version", "expected"),
    [("1.0", b"x-time:12:30\n"), ("1.1", b"x-time:12\\c30\n"), ("1.2", b"x-time:12\\c30\n")],
)
def test_header_escaping_follows_negotiated_version(version: Version, expected: bytes) -> None:
    # 1.1/1.2 §Value Encoding: ':' is escaped as \c; 1.0 has no escapes.
    client = connected_client(version)
    assert expected in client.send(Send("/q", headers=(("x-time", "12:30"),)))


@pytest.mark.parametrize(("version", "value"), [("1.0", "a\\cb"), ("1.1", "a:b"), ("1.2", "a:b")])
def test_frames_after_connected_in_same_chunk_use_new_rules(version: Version, value: str) -> None:
    client = ClientConnection()
    client.send(Connect(host="h"))
    header = b"" if version == "1.0" else b"version:" + version.encode() + b"\n"
    client.receive_data(
        b"CONNECTED\n" + header + b"\n\x00"
        b"MESSAGE\ndestination:/q\nmessage-id:1\nsubscription:s\nx-v:a\\cb\n\n\x00"
    )
    events = drain(client)
    assert isinstance(events[1], Message)
    assert events[1].headers == (("x-v", value),)


def test_connect_headers_never_escaped() -> None:
    # 1.2 §Value Encoding: CONNECT and CONNECTED headers are not escaped.
    client = ClientConnection()
    data = client.send(Connect(host="h", login="user:name", passcode="p\\w"))
    assert b"login:user:name\n" in data and b"passcode:p\\w\n" in data


# -- a refused send changes nothing ----------------------------------------------------------


def test_refusals_leave_everything_unchanged() -> None:
    client = connected_client("1.2")
    client.send(Subscribe("/queue/a", id="s1", ack="client", receipt="r-sub"))
    client.send(Subscribe("/queue/b", id="s2"))
    client.send(Begin("tx", receipt="r-begin"))
    message = deliver(client, "s1", "m1", "a1")
    deliver(client, "s1", "m2", "a2")
    before = snapshot(client)
    assert before["pending_acks"]["s1"] == ("a1", "a2")
    attempts = [
        Connect(host="h"),
        Subscribe("/queue/c", id="s1"),
        Subscribe("/queue/c"),
        Subscribe("/queue/c", id="s3", receipt="r-sub"),
        Unsubscribe(id="zz"),
        Unsubscribe(id="s1", receipt="r-begin"),
        Send("/q", transaction="nope"),
        Send("/q", receipt="r-sub"),
        Send("/q", b"a\x00b", content_length=False),
        Ack(id="a9"),
        Ack.of(message, transaction="nope"),
        Ack.of(message, receipt="r-sub"),
        Nack.of(message, transaction="zz"),
        Begin("tx"),
        Commit("nope"),
        Abort("nope", receipt="r-x"),
        Commit("tx", receipt="r-sub"),
        Disconnect(receipt="r-begin"),
        Connected(),
        Message("/q", "m", subscription="s1"),
        Receipt("r"),
        Error(),
        ConnectionClosed(),
    ]
    for event in attempts:
        refused(client, lambda e=event: client.send(e))
    assert snapshot(client) == before
    # ... and the session still works.
    client.ack(message)
    assert client.pending_acks("s1") == ("a2",)
