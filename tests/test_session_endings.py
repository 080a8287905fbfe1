"""Every way a session ends follows one model (docs/connection.rst, "How a session ends").

For each ending, on the side that sees it: the state is CLOSED, ``ended_by``
names the ending and ``ended_cleanly`` says whether it was a DISCONNECT (1.2
§DISCONNECT: the RECEIPT "acknowledges that the server has received all
previous frames"; everything else - an ERROR (1.2 §ERROR: the server "MUST
then close the connection"), a timeout, a lost stream, a protocol error - is a
failure).  Then, alike for every ending: data is accepted (and dropped),
``receive_data(None)`` is accepted, ``next_event`` gives one
``ConnectionClosed`` and then ``None`` - or, after a protocol error, raises
that same error again (sticky) - data after the end of the stream is refused,
and every ``send`` is refused with ``ErrorKind.CLOSED``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from connection_helpers import drain

from stomp_proto import (
    ClientConnection,
    Connect,
    Connected,
    ConnectionClosed,
    ConnectionState,
    Disconnect,
    Error,
    ErrorKind,
    Event,
    HeartBeatTimeout,
    LocalProtocolError,
    Receipt,
    RemoteProtocolError,
    Send,
    ServerConnection,
)

Conn = ClientConnection | ServerConnection

CONNECT = b"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:1000,1000\n\n\x00"
CONNECTED = b"CONNECTED\nversion:1.2\nheart-beat:1000,1000\n\n\x00"
LATE_SEND = b"SEND\ndestination:/q\n\nlate\x00"
LATE_MESSAGE = b"MESSAGE\ndestination:/q\nmessage-id:1\nsubscription:s\n\nlate\x00"


def client() -> ClientConnection:
    conn = ClientConnection()
    conn.send(Connect(host="/", heartbeat=(1000, 1000)))
    conn.receive_data(CONNECTED)
    assert isinstance(conn.next_event(), Connected)
    return conn


def server() -> ServerConnection:
    conn = ServerConnection()
    conn.receive_data(CONNECT)
    assert isinstance(conn.next_event(), Connect)
    conn.send(Connected(heartbeat=(1000, 1000)))
    return conn


def feed(conn: Conn, data: bytes) -> list[Event]:
    conn.receive_data(data)
    return drain(conn)


def protocol_error(conn: Conn, data: bytes) -> RemoteProtocolError:
    conn.receive_data(data)
    with pytest.raises(RemoteProtocolError) as caught:
        drain(conn)
    return caught.value


def timed_out(conn: Conn) -> list[Event]:
    conn.handle_timer(0.0)  # starts the clock
    conn.handle_timer(100.0)  # far past 2.5 intervals of silence
    return drain(conn)


@dataclass
class Ending:
    """How to end a session, what ends it, and whether that is a clean end."""

    make: Callable[[], Conn]
    end: Callable[[Conn], object]
    ended_by: type
    clean: bool
    late: bytes  # what the peer might still send


ENDINGS = {
    "client: ERROR received": Ending(
        client, lambda c: feed(c, b"ERROR\nmessage:no\n\n\x00"), Error, False, LATE_MESSAGE
    ),
    "client: RECEIPT of DISCONNECT": Ending(
        client,
        lambda c: (c.send(Disconnect(receipt="bye")), feed(c, b"RECEIPT\nreceipt-id:bye\n\n\x00")),
        Receipt,
        True,
        LATE_MESSAGE,
    ),
    "client: DISCONNECT without receipt sent": Ending(
        client, lambda c: c.send(Disconnect()), Disconnect, True, LATE_MESSAGE
    ),
    "client: heart-beat timeout": Ending(client, timed_out, HeartBeatTimeout, False, LATE_MESSAGE),
    "client: end of stream": Ending(
        client, lambda c: feed(c, b""), ConnectionClosed, False, b""
    ),  # ended below, by receive_data(None)
    "client: protocol error": Ending(
        client, lambda c: protocol_error(c, b"BOGUS\n\n\x00"), RemoteProtocolError, False, b"x"
    ),
    "server: ERROR sent": Ending(
        server, lambda s: s.send(Error(message="no")), Error, False, LATE_SEND
    ),
    "server: RECEIPT of DISCONNECT sent": Ending(
        server,
        lambda s: (feed(s, b"DISCONNECT\nreceipt:bye\n\n\x00"), s.send(Receipt("bye"))),
        Receipt,
        True,
        LATE_SEND,
    ),
    "server: DISCONNECT without receipt received": Ending(
        server, lambda s: feed(s, b"DISCONNECT\n\n\x00"), Disconnect, True, LATE_SEND
    ),
    "server: heart-beat timeout": Ending(server, timed_out, HeartBeatTimeout, False, LATE_SEND),
    "server: end of stream": Ending(server, lambda s: feed(s, b""), ConnectionClosed, False, b""),
    "server: protocol error, its ERROR sent": Ending(
        server,
        lambda s: s.send(protocol_error(s, b"BOGUS\n\n\x00").event_hint),  # type: ignore[arg-type]
        RemoteProtocolError,
        False,
        b"x",
    ),
}


@pytest.mark.parametrize("name", list(ENDINGS))
def test_every_ending_follows_one_model(name: str) -> None:
    ending = ENDINGS[name]
    conn = ending.make()
    assert conn.ended_by is None and not conn.ended_cleanly
    ending.end(conn)
    end_of_stream_first = ending.ended_by is ConnectionClosed
    if not end_of_stream_first:
        assert conn.state is ConnectionState.CLOSED
        assert isinstance(conn.ended_by, ending.ended_by)
        assert conn.ended_cleanly is ending.clean
        # Whatever the peer still sends is accepted and dropped.
        conn.receive_data(ending.late)
    conn.receive_data(None)
    sticky = isinstance(conn.ended_by, RemoteProtocolError)
    if sticky:
        for _ in range(2):
            with pytest.raises(RemoteProtocolError) as again:
                conn.next_event()
            assert again.value is conn.ended_by
    else:
        assert [type(e) for e in drain(conn)] == [ConnectionClosed]
        assert conn.next_event() is None
    assert conn.state is ConnectionState.CLOSED
    assert isinstance(conn.ended_by, ending.ended_by)
    assert conn.ended_cleanly is ending.clean
    assert conn.get_timer() is None
    with pytest.raises(LocalProtocolError) as after_end:
        conn.receive_data(b"\n")
    assert after_end.value.kind is ErrorKind.CLOSED
    event = Send("/q") if isinstance(conn, ClientConnection) else Error(message="again")
    with pytest.raises(LocalProtocolError) as refused:
        conn.send(event)
    assert refused.value.kind is ErrorKind.CLOSED


def test_the_first_ending_is_kept() -> None:
    """An ERROR after a protocol error does not replace it; a lost stream after an ERROR neither."""
    conn = client()
    feed(conn, b"ERROR\nmessage:no\n\n\x00")
    conn.receive_data(None)
    drain(conn)
    assert isinstance(conn.ended_by, Error)


def test_a_stream_lost_while_disconnecting_is_not_clean() -> None:
    """No RECEIPT for the DISCONNECT: what came before may be lost (1.2 §DISCONNECT)."""
    conn = client()
    conn.send(Disconnect(receipt="bye"))
    conn.receive_data(None)
    assert [type(e) for e in drain(conn)] == [ConnectionClosed]
    assert isinstance(conn.ended_by, ConnectionClosed)
    assert not conn.ended_cleanly
