"""The declarative state tables (``stomp_proto._state``) and the rules they encode.

The tables say, per role and direction, which frames each state allows and
where they lead; the connections only look them up.  These tests read the
tables themselves, then check that a connection refuses what its row leaves
out, with the error the row implies (1.2 §Connecting, §DISCONNECT, §ERROR).
"""

from __future__ import annotations

import pytest

from stomp_proto import (
    Abort,
    Ack,
    Begin,
    ClientConnection,
    Commit,
    Connect,
    Connected,
    ConnectionState,
    Disconnect,
    Error,
    ErrorKind,
    LocalProtocolError,
    Message,
    Nack,
    Receipt,
    RemoteProtocolError,
    Send,
    ServerConnection,
    Subscribe,
    Unsubscribe,
)
from stomp_proto._state import CLIENT_RECEIVES, CLIENT_SENDS, SERVER_RECEIVES, SERVER_SENDS

S = ConnectionState
CLIENT_FRAMES = {Connect, Send, Subscribe, Unsubscribe, Ack, Nack, Begin, Commit, Abort, Disconnect}
SERVER_FRAMES = {Connected, Message, Receipt, Error}


def test_what_a_client_sends_is_what_a_server_receives() -> None:
    assert CLIENT_SENDS == SERVER_RECEIVES


def test_each_table_holds_only_its_side_s_frames() -> None:
    for table, frames in [
        (CLIENT_SENDS, CLIENT_FRAMES),
        (SERVER_RECEIVES, CLIENT_FRAMES),
        (SERVER_SENDS, SERVER_FRAMES),
        (CLIENT_RECEIVES, SERVER_FRAMES),
    ]:
        for row in table.values():
            assert set(row) <= frames


def test_nothing_is_allowed_once_closed() -> None:
    for table in (CLIENT_SENDS, CLIENT_RECEIVES, SERVER_SENDS, SERVER_RECEIVES):
        assert S.CLOSED not in table


def test_an_error_always_closes() -> None:
    for table in (SERVER_SENDS, CLIENT_RECEIVES):
        for row in table.values():
            assert row.get(Error, S.CLOSED) is S.CLOSED
    # Until the session is closed, a server may always refuse with an ERROR.
    assert all(Error in SERVER_SENDS[state] for state in S if state is not S.CLOSED)


def test_session_frames_only_in_a_session() -> None:
    # 1.2 §Connecting: nothing but CONNECT (or STOMP) before CONNECTED.
    assert set(CLIENT_SENDS[S.IDLE]) == {Connect}
    assert S.CONNECTING not in CLIENT_SENDS  # the client waits for the answer
    session = CLIENT_FRAMES - {Connect}
    assert set(CLIENT_SENDS[S.CONNECTED]) == session
    assert all(CLIENT_SENDS[S.CONNECTED][cls] is S.CONNECTED for cls in session - {Disconnect})
    assert CLIENT_SENDS[S.CONNECTED][Disconnect] is S.DISCONNECTING
    # 1.2 §DISCONNECT: after it, nothing more is sent; what is in flight still arrives.
    assert S.DISCONNECTING not in CLIENT_SENDS
    assert set(CLIENT_RECEIVES[S.DISCONNECTING]) == {Message, Receipt, Error}


def _connected_client() -> ClientConnection:
    client = ClientConnection()
    client.send(Connect(host="/", accept_versions=("1.2",)))
    client.receive_data(b"CONNECTED\nversion:1.2\n\n\x00")
    assert isinstance(client.next_event(), Connected)
    return client


@pytest.mark.parametrize(
    "event",
    [Send("/queue/a", b""), Subscribe("/queue/a", id="1"), Begin("t"), Disconnect()],
    ids=lambda e: type(e).__name__,
)
def test_a_client_refuses_session_frames_before_connecting(event: object) -> None:
    client = ClientConnection()
    with pytest.raises(LocalProtocolError) as info:
        client.send(event)  # type: ignore[arg-type]
    assert info.value.kind is ErrorKind.BAD_STATE
    assert client.state is S.IDLE  # a refusal changes nothing


def test_a_client_sends_nothing_after_disconnect() -> None:
    client = _connected_client()
    client.send(Disconnect(receipt="bye"))
    assert client.state is S.DISCONNECTING
    with pytest.raises(LocalProtocolError) as info:
        client.send(Send("/queue/a", b"late"))
    assert info.value.kind is ErrorKind.BAD_STATE


def test_a_client_refuses_a_message_before_connected() -> None:
    client = ClientConnection()
    client.send(Connect(host="/", accept_versions=("1.2",)))
    client.receive_data(b"MESSAGE\ndestination:/q\nmessage-id:1\nsubscription:1\n\n\x00")
    with pytest.raises(RemoteProtocolError) as info:
        client.next_event()
    assert info.value.kind is ErrorKind.BAD_STATE
    assert client.state is S.CLOSED


def test_a_server_refuses_frames_before_connect() -> None:
    server = ServerConnection()
    server.receive_data(b"SEND\ndestination:/queue/a\n\n\x00")
    with pytest.raises(RemoteProtocolError) as info:
        server.next_event()
    assert info.value.kind is ErrorKind.BAD_STATE
    assert isinstance(info.value.event_hint, Error)  # what to send before closing


def test_a_server_may_refuse_before_the_handshake() -> None:
    server = ServerConnection()
    assert server.send(Error(message="go away")).startswith(b"ERROR\n")
    assert server.state is S.CLOSED
