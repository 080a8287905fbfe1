"""Whatever a peer sends after the session has closed is dropped, counted, and never crashes.

Regression for a ``RecursionError``: ``next_event`` used to drop each late
frame by calling itself, so a few thousand frames after an ERROR (or after
our receipted DISCONNECT) blew the Python stack.  Each test here trails the
close with 100,000 frames or heart-beats, fed whole and in pieces.
"""

from __future__ import annotations

import sys

import pytest

from stomp_proto import (
    ClientConnection,
    Connect,
    ConnectionClosed,
    Disconnect,
    Error,
    HeartBeat,
    RemoteProtocolError,
    ServerConnection,
)
from stomp_proto._state import CLOSED

TRAILING = 100_000
MESSAGE = b"MESSAGE\ndestination:/queue/a\nmessage-id:1\nsubscription:0\n\nx\x00"
SEND = b"SEND\ndestination:/queue/a\n\nx\x00"


def _drain(conn: ClientConnection | ServerConnection) -> list[object]:
    events = []
    while (event := conn.next_event()) is not None:
        events.append(event)
    return events


def _connected_client() -> ClientConnection:
    client = ClientConnection()
    client.send(Connect(host="/"))
    client.receive_data(b"CONNECTED\nversion:1.2\n\n\x00")
    assert _drain(client)
    return client


@pytest.mark.parametrize("trailer", [MESSAGE, b"\n", b"\r\n"], ids=["messages", "lf", "crlf"])
@pytest.mark.parametrize("pieces", [1, 1000])
def test_client_drops_any_number_of_frames_after_error(trailer: bytes, pieces: int) -> None:
    client = _connected_client()
    data = b"ERROR\nmessage:go away\n\n\x00" + trailer * TRAILING
    step = -(-len(data) // pieces)
    events: list[object] = []
    for start in range(0, len(data), step):
        client.receive_data(data[start : start + step])
        events += _drain(client)
    client.receive_data(None)
    events += _drain(client)
    assert [type(e) for e in events] == [Error, ConnectionClosed]
    assert client.state is CLOSED
    assert client.dropped == TRAILING


def test_client_drops_frames_after_receipted_disconnect() -> None:
    client = _connected_client()
    client.send(Disconnect(receipt="bye"))
    client.receive_data(b"RECEIPT\nreceipt-id:bye\n\n\x00" + MESSAGE * TRAILING)
    events = _drain(client)
    assert len(events) == 1 and client.state is CLOSED
    assert client.dropped == TRAILING


def test_server_drops_any_number_of_frames_after_its_error() -> None:
    server = ServerConnection()
    server.receive_data(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
    assert _drain(server)
    server.send(Error(message="refused"))
    server.receive_data(SEND * TRAILING + b"\n" * TRAILING)
    assert _drain(server) == []
    assert server.dropped == 2 * TRAILING


def test_server_drops_frames_after_the_error_hint_was_sent() -> None:
    server = ServerConnection()
    server.receive_data(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
    assert _drain(server)
    server.receive_data(b"BOGUS\n\n\x00")
    with pytest.raises(RemoteProtocolError) as caught:
        server.next_event()
    assert caught.value.event_hint is not None
    server.send(caught.value.event_hint)
    # The error stays the answer: the session failed, later data is never parsed.
    with pytest.raises(RemoteProtocolError):
        server.next_event()


def test_dropping_does_not_grow_the_stack() -> None:
    depths: list[int] = []
    client = _connected_client()
    client.receive_data(b"ERROR\n\n\x00")
    client.next_event()
    client.receive_data(b"\n" * TRAILING)

    def tracer(frame, event, arg):  # type: ignore[no-untyped-def]
        if event == "call":
            depth = 0
            f = frame
            while f is not None:
                depth += 1
                f = f.f_back
            depths.append(depth)
        return None

    sys.setprofile(tracer)
    try:
        assert client.next_event() is None
    finally:
        sys.setprofile(None)
    base = min(depths)
    assert max(depths) - base < 20
    assert not isinstance(client.next_event(), HeartBeat)
    assert client.dropped == TRAILING
