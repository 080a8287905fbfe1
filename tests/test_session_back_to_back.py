"""Whole sessions: a ClientConnection and a ServerConnection wired back to back, no sockets.

Every byte string one side produces is fed to the other (whole, or one byte at a time) and must
decode there; the events read on one side must be the events sent on the other.
"""

from __future__ import annotations

import pytest
from connection_helpers import VERSIONS, Link, connected_pair, decode_all, refused

from stomp_proto import (
    Abort,
    Ack,
    Begin,
    ClientConnection,
    Commit,
    Connect,
    ConnectionClosed,
    ConnectionState,
    Disconnect,
    Error,
    ErrorKind,
    Frame,
    HeartBeat,
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
EXTRA = (("persistent", "true"), ("x-trace", "abc"), ("priority", "9"))


def assert_in_sync(link: Link) -> None:
    """Both sides agree on the session: state, version, subscriptions, transactions, acks."""
    client, server = link.client, link.server
    assert client.version == server.version
    assert client.state == server.state
    assert set(client.subscriptions) == set(server.subscriptions)
    assert client.transactions == server.transactions
    for key in client.subscriptions:
        assert client.pending_acks(key) == server.pending_acks(key), key


def deliver(link: Link, sub: Subscribe, n: int) -> Message:
    version = link.server.version
    ack = f"{sub.key}-ack-{n}" if sub.ack != "auto" or version == "1.2" else None
    sent = Message(
        sub.destination,
        f"{sub.key}-msg-{n}",
        subscription=sub.id,
        body=f"body {n}".encode(),
        ack=ack,
        content_type="text/plain",
        headers=EXTRA,
    )
    got = link.s2c_one(sent)
    assert got == sent
    return got  # type: ignore[return-value]


def ident(link: Link, message: Message) -> str:
    return message.ack if link.client.version == "1.2" else message.message_id  # type: ignore[return-value]


@pytest.mark.parametrize("bytewise", [False, True], ids=["whole", "bytewise"])
@pytest.mark.parametrize("version", VERSIONS)
def test_full_session(version: Version, bytewise: bool) -> None:
    link = connected_pair(version, bytewise=bytewise)
    client, server = link.client, link.server
    assert client.state is server.state is S.CONNECTED
    assert_in_sync(link)

    # -- subscribe in every ack mode the version knows (1.0 has no client-individual)
    modes = ["auto", "client"] + ([] if version == "1.0" else ["client-individual"])
    subs = {}
    for i, mode in enumerate(modes):
        sub = Subscribe(f"/queue/{mode}", id=f"sub-{i}", ack=mode, receipt=f"r-sub-{i}",
                        headers=(("prefetch-count", "10"),))  # type: ignore[arg-type]  # fmt: skip
        assert link.c2s_one(sub) == sub
        subs[mode] = sub
        assert link.s2c_one(Receipt(f"r-sub-{i}")) == Receipt(f"r-sub-{i}")
    assert client.pending_receipts == {}
    assert_in_sync(link)

    # -- send
    send = Send("/queue/auto", b"hello\x00world", content_type="application/octet-stream",
                receipt="r-send", headers=EXTRA)  # fmt: skip
    assert link.c2s_one(send) == send
    assert link.s2c_one(Receipt("r-send")) == Receipt("r-send")

    # -- auto: no acknowledgement needed, and one is refused
    message = deliver(link, subs["auto"], 1)
    assert client.pending_acks(subs["auto"].key) == ()
    refused(client, lambda: client.ack(message), ErrorKind.BAD_STATE)

    # -- client: cumulative; ACK of the 3rd settles 1 to 3 (1.2 §SUBSCRIBE ack Header)
    sub = subs["client"]
    messages = [deliver(link, sub, n) for n in range(1, 5)]
    assert client.pending_acks(sub.key) == tuple(ident(link, m) for m in messages)
    assert_in_sync(link)
    [ack] = link.to_server(client.ack(messages[2]))
    assert isinstance(ack, Ack) and type(ack) is Ack
    assert ack.covered == tuple(ident(link, m) for m in messages[:3])
    assert client.pending_acks(sub.key) == (ident(link, messages[3]),)
    assert_in_sync(link)
    for settled in messages[:3]:
        refused(client, lambda m=settled: client.ack(m), ErrorKind.BAD_STATE)

    # -- NACK: refused in 1.0 (1.1 §NACK is new), otherwise settles like ACK
    if version == "1.0":
        refused(client, lambda: client.nack(messages[3]), ErrorKind.BAD_COMMAND)
        [ack] = link.to_server(client.ack(messages[3]))
    else:
        [ack] = link.to_server(client.nack(messages[3]))
        assert type(ack) is Nack
    assert ack.covered == (ident(link, messages[3]),)
    assert_in_sync(link)

    # -- client-individual: one at a time
    if "client-individual" in subs:
        sub = subs["client-individual"]
        messages = [deliver(link, sub, n) for n in range(1, 4)]
        [ack] = link.to_server(client.ack(messages[1]))
        assert ack.covered == (ident(link, messages[1]),)  # type: ignore[attr-defined]
        assert client.pending_acks(sub.key) == (ident(link, messages[0]), ident(link, messages[2]))
        assert_in_sync(link)
        [nack] = link.to_server(client.nack(messages[2]))
        assert type(nack) is Nack and nack.covered == (ident(link, messages[2]),)
        [ack] = link.to_server(client.ack(messages[0]))
        assert client.pending_acks(sub.key) == ()
        assert_in_sync(link)

    # -- transactions: begin / send / ack / commit, begin / abort
    sub = subs["client"]
    pending = [deliver(link, sub, n) for n in range(10, 12)]
    assert link.c2s_one(Begin("tx-1")) == Begin("tx-1")
    assert client.transactions == server.transactions == frozenset({"tx-1"})
    tx_send = Send("/queue/auto", b"in tx", transaction="tx-1")
    assert link.c2s_one(tx_send) == tx_send
    [ack] = link.to_server(client.ack(pending[0], transaction="tx-1"))
    assert ack.transaction == "tx-1"  # type: ignore[attr-defined]
    assert link.c2s_one(Commit("tx-1", receipt="r-commit")) == Commit("tx-1", receipt="r-commit")
    assert link.s2c_one(Receipt("r-commit")) == Receipt("r-commit")
    assert link.c2s_one(Begin("tx-2")) == Begin("tx-2")
    [ack] = link.to_server(client.ack(pending[1], transaction="tx-2"))
    assert link.c2s_one(Abort("tx-2")) == Abort("tx-2")
    assert client.transactions == server.transactions == frozenset()
    assert_in_sync(link)

    # -- unsubscribe
    unsub = Unsubscribe(id=subs["auto"].id, receipt="r-unsub")
    assert link.c2s_one(unsub) == unsub
    assert link.s2c_one(Receipt("r-unsub")) == Receipt("r-unsub")
    assert_in_sync(link)

    # -- graceful disconnect (1.2 §DISCONNECT)
    assert link.c2s_one(Disconnect(receipt="bye")) == Disconnect(receipt="bye")
    assert client.state is server.state is S.DISCONNECTING
    assert link.s2c_one(Receipt("bye")) == Receipt("bye")
    assert client.state is server.state is S.CLOSED
    client.receive_data(None)
    server.receive_data(None)
    assert list(client) == [ConnectionClosed()]
    assert list(server) == [ConnectionClosed()]

    # every byte string decodes on its own under the version in force when it was sent
    for sender, data in link.wire[2:]:
        assert decode_all(data, version), (sender, data)


def test_session_10_without_subscription_ids() -> None:
    # 1.0 §SUBSCRIBE: id optional; §UNSUBSCRIBE by destination; MESSAGE without subscription.
    link = connected_pair("1.0")
    client = link.client
    sub = Subscribe("/queue/a", ack="client")
    assert link.c2s_one(sub) == sub
    messages = [link.s2c_one(Message("/queue/a", f"m{n}", body=b"x")) for n in range(3)]
    assert all(isinstance(m, Message) and not m.unknown_subscription for m in messages)
    assert client.pending_acks("/queue/a") == ("m0", "m1", "m2")
    assert_in_sync(link)
    [ack] = link.to_server(client.ack(messages[1]))  # type: ignore[arg-type]
    assert ack.covered == ("m0", "m1")  # type: ignore[attr-defined]
    assert_in_sync(link)
    assert link.c2s_one(Unsubscribe(destination="/queue/a")) == Unsubscribe(destination="/queue/a")
    assert_in_sync(link)
    link.c2s(Disconnect())
    assert client.state is link.server.state is S.CLOSED


def test_negotiation_down_to_server_version() -> None:
    link = connected_pair(client_versions=VERSIONS, server_versions=("1.1",))
    assert link.client.version == link.server.version == "1.1"
    # the session then follows 1.1 rules: ACK names message-id and subscription
    link.c2s(Subscribe("/q", id="s", ack="client-individual"))
    message = link.s2c_one(Message("/q", "m1", subscription="s"))
    data = link.client.ack(message)  # type: ignore[arg-type]
    assert data == b"ACK\nmessage-id:m1\nsubscription:s\n\n\x00"
    link.to_server(data)


@pytest.mark.parametrize(
    ("client_versions", "server_versions"),
    [(("1.2",), ("1.0", "1.1")), (("1.0",), ("1.1", "1.2")), (("1.1", "1.2"), ("1.0",))],
)
def test_no_common_version(
    client_versions: tuple[Version, ...], server_versions: tuple[Version, ...]
) -> None:
    # 1.2 §Protocol Negotiation: ERROR with a version header, then close.
    client = ClientConnection()
    server = ServerConnection(versions=server_versions)
    server.receive_data(client.send(Connect(host="h", accept_versions=client_versions)))
    with pytest.raises(RemoteProtocolError) as info:
        server.next_event()
    assert info.value.kind is ErrorKind.BAD_VERSION
    hint = info.value.event_hint
    assert isinstance(hint, Error)
    client.receive_data(server.send(hint))
    events = list(client)
    assert events == [hint]
    error = events[0]
    assert isinstance(error, Error)
    assert error.headers == (("version", ",".join(server_versions)),)
    assert client.state is server.state is S.CLOSED


@pytest.mark.parametrize("version", VERSIONS)
def test_server_error_closes_client(version: Version) -> None:
    link = connected_pair(version)
    link.c2s(Subscribe("/q", id="s", receipt="r1"))
    error = Error(message="not_found", body=b"NOT_FOUND - no queue\n", receipt_id="r1",
                  content_type="text/plain", headers=(("version", "1.0,1.1,1.2"),))  # fmt: skip
    assert link.s2c_one(error) == error
    assert link.client.state is link.server.state is S.CLOSED
    refused(link.client, lambda: link.client.send(Send("/q")), ErrorKind.CLOSED)  # used after close


@pytest.mark.parametrize("version", VERSIONS)
def test_bad_client_frame_hint_reaches_client(version: Version) -> None:
    # 1.2 §ERROR: the ERROR names the offending frame through receipt-id.
    link = connected_pair(version)
    with pytest.raises(RemoteProtocolError) as info:
        link.to_server(b"COMMIT\ntransaction:nope\nreceipt:r-bad\n\n\x00")
    hint = info.value.event_hint
    assert isinstance(hint, Error)
    got = link.to_client(link.server.send(hint))
    assert got == [hint]
    assert link.client.state is S.CLOSED


@pytest.mark.parametrize("version", VERSIONS)
def test_unknown_subscription_message_like_rabbitmq_temp_queue(version: Version) -> None:
    # RabbitMQ delivers /temp-queue/ replies on a subscription the client never made.
    # A server-side connection refuses to send that, so feed the bytes directly.
    link = connected_pair(version)
    header = b"" if version == "1.0" else b"subscription:/temp-queue/r\n"
    got = link.to_client(b"MESSAGE\ndestination:/temp-queue/r\nmessage-id:T_1\n" + header +
                         b"content-length:2\n\nhi\x00\n")  # fmt: skip
    [message] = got
    assert isinstance(message, Message) and message.unknown_subscription
    assert link.client.state is S.CONNECTED


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_heartbeats_and_frames_interleaved(version: Version) -> None:
    # Heart-beating came with 1.1 (1.1 §Heart-beating).
    link = connected_pair(version, client_heartbeat=(500, 1000), server_heartbeat=(2000, 100))
    assert link.client.heartbeat == (500, 2000)  # send max(cx, sy), expect max(sx, cy)
    assert link.server.heartbeat == (2000, 500)
    link.c2s(Subscribe("/q", id="s"))
    data = link.server.send(HeartBeat()) + link.server.send(Message("/q", "1", subscription="s"))
    link.client.receive_data(data + b"\n\n")
    events = list(link.client)
    assert [type(e) for e in events] == [HeartBeat, Message, HeartBeat, HeartBeat]


def test_many_frames_in_one_chunk() -> None:
    link = connected_pair("1.2")
    link.c2s(Subscribe("/q", id="s", ack="client-individual"))
    data = b"".join(
        link.server.send(Message("/q", f"m{n}", subscription="s", ack=f"a{n}", body=bytes([n])))
        for n in range(50)
    )
    messages = link.to_client(data)
    assert [m.body for m in messages] == [bytes([n]) for n in range(50)]  # type: ignore[attr-defined]
    acks = b"".join(link.client.ack(m) for m in messages[::2])  # type: ignore[arg-type]
    got = link.to_server(acks)
    assert [a.id for a in got] == [f"a{n}" for n in range(0, 50, 2)]  # type: ignore[attr-defined]
    assert_in_sync(link)


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_special_characters_in_headers_survive(version: Version) -> None:
    # 1.1/1.2 §Value Encoding: ':' '\' LF (and CR in 1.2) are escaped on the wire.
    link = connected_pair(version, bytewise=True)
    value = "a:b\\c\nd" + ("\re" if version == "1.2" else "")
    send = Send("/queue/a:b", b"x", headers=(("x-odd:name", value),))
    assert link.c2s_one(send) == send
    link.c2s(Subscribe("/queue/a:b", id="s:1", ack="client"))
    message = Message("/queue/a:b", "ID:host-1:2", subscription="s:1", ack="ack:1", body=b"y",
                      headers=(("x-odd", value),))  # fmt: skip
    assert link.s2c_one(message) == message
    [ack] = link.to_server(link.client.ack(message))
    assert ack.covered == (("ack:1",) if version == "1.2" else ("ID:host-1:2",))  # type: ignore[attr-defined]


def test_connect_and_connected_wire_shape() -> None:
    link = connected_pair("1.2")
    client_connect, server_connected = link.wire[0][1], link.wire[1][1]
    [connect] = decode_all(client_connect, "1.2")
    [connected] = decode_all(server_connected, "1.2")
    assert isinstance(connect, Frame) and isinstance(connected, Frame)
    assert connect.get("accept-version") == "1.2" and connect.get("host") == "localhost"
    assert connected.get("version") == "1.2" and connected.get("session") == "sess-1"
    assert link.server.negotiated_version == "1.2"


def test_empty_body_arrives_without_content_length() -> None:
    # The codec writes content-length only for a non-empty body (1.2 §SEND: "if a body is
    # present"), so an empty-bodied event arrives with content_length=False.
    link = connected_pair("1.2")
    got = link.c2s_one(Send("/q"))
    assert isinstance(got, Send) and got.body == b"" and got.content_length is False
