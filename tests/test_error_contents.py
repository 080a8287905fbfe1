"""What the errors say: the limit crossed, use after close, heart-beats.

The limits are those of 1.2 §Size Limits ("Clients and servers MAY impose limits
on ... the number of frame headers ..., the maximum length of header lines, and the
maximum size of a frame body"); each breach names its ``Limits`` field.
"""

from __future__ import annotations

import pytest
from helpers import bytewise, run, whole

from stomp_proto import (
    ClientConnection,
    Connect,
    Connected,
    ErrorKind,
    HeartBeat,
    Limits,
    LocalProtocolError,
    RemoteProtocolError,
    Send,
    ServerConnection,
)

LIMITS = Limits(
    max_line_length=32, max_headers=3, max_head_size=100, max_body_size=50, max_frame_size=120
)

BREACHES = [
    (b"SEND\nx:" + b"a" * 40 + b"\n\n\x00", "max_line_length"),
    (b"SEND\na:1\nb:2\nc:3\nd:4\n\n\x00", "max_headers"),
    (b"SEND\n" + b"h:12345678901234567890\n" * 3 + b"\n\x00", "max_head_size"),
    (b"SEND\ncontent-length:51\n\n" + b"x" * 51 + b"\x00", "max_body_size"),
    (b"SEND\n\n" + b"x" * 60 + b"\x00", "max_body_size"),
]


@pytest.mark.parametrize(("data", "limit"), BREACHES, ids=[b[1] for b in BREACHES])
def test_a_size_breach_names_its_limit(data: bytes, limit: str) -> None:
    limits = LIMITS
    if limit == "max_head_size":
        limits = Limits(max_line_length=32, max_headers=9, max_head_size=60)
    for chunks in (whole(data), bytewise(data)):
        out = run(chunks, "1.2", limits=limits)
        assert out.error is not None and out.kind is ErrorKind.TOO_LARGE, out.summary()
        assert out.error.limit == limit
        assert f"Limits.{limit}" in str(out.error)


def test_the_frame_limit_is_named_when_it_is_the_tighter_one() -> None:
    limits = Limits(max_body_size=1000, max_frame_size=40)
    data = b"SEND\ncontent-length:100\n\n" + b"x" * 100 + b"\x00"
    out = run(whole(data), "1.2", limits=limits)
    assert out.error is not None and out.error.limit == "max_frame_size"
    assert "Limits.max_frame_size" in str(out.error)


def test_other_errors_have_no_limit() -> None:
    out = run(whole(b"BOGUS\n\n\x00"), "1.2")
    assert out.error is not None and out.error.limit is None
    assert LocalProtocolError(ErrorKind.BAD_STATE, "x").limit is None


def test_server_connection_error_names_the_limit() -> None:
    server = ServerConnection(limits=LIMITS)
    server.receive_data(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
    server.next_event()
    server.send(Connected())
    server.receive_data(b"SEND\ndestination:/q\ncontent-length:999\n\n")
    with pytest.raises(RemoteProtocolError) as error:
        server.next_event()
    assert error.value.limit == "max_body_size"
    assert error.value.event_hint is not None
    assert "Limits.max_body_size" in error.value.event_hint.message


# -- use after close: ErrorKind.CLOSED ---------------------------------------------------------


def _connected_client() -> ClientConnection:
    client = ClientConnection()
    client.send(Connect(host="/", heartbeat=(0, 0)))
    client.receive_data(b"CONNECTED\nversion:1.2\n\n\x00")
    client.next_event()
    return client


def test_send_after_error_raises_closed() -> None:
    client = _connected_client()
    client.receive_data(b"ERROR\nmessage:bye\n\n\x00")
    client.next_event()
    for event in (Send("/q"), HeartBeat()):
        with pytest.raises(LocalProtocolError) as error:
            client.send(event)
        assert error.value.kind is ErrorKind.CLOSED


def test_data_after_end_of_stream_raises_closed() -> None:
    client = _connected_client()
    client.receive_data(None)
    with pytest.raises(LocalProtocolError) as error:
        client.receive_data(b"\n")
    assert error.value.kind is ErrorKind.CLOSED


def test_data_after_a_protocol_error_is_discarded() -> None:
    """As after every other ending (docs/connection.rst, "How a session ends"); the
    error stays the answer of next_event."""
    client = _connected_client()
    client.receive_data(b"BOGUS\n\n\x00")
    with pytest.raises(RemoteProtocolError) as first:
        client.next_event()
    client.receive_data(b"MESSAGE\ndestination:/q\nmessage-id:1\nsubscription:s\n\nx\x00")
    client.receive_data(None)
    with pytest.raises(RemoteProtocolError) as again:
        client.next_event()
    assert again.value is first.value
    with pytest.raises(LocalProtocolError) as error:
        client.receive_data(b"\n")
    assert error.value.kind is ErrorKind.CLOSED


def test_wrong_state_before_close_is_still_bad_state() -> None:
    client = ClientConnection()
    with pytest.raises(LocalProtocolError) as error:
        client.send(Send("/q"))
    assert error.value.kind is ErrorKind.BAD_STATE


# -- heartbeat: None before negotiation ------------------------------------------------------


@pytest.mark.parametrize(
    ("offered", "answered", "agreed"),
    [((0, 0), b"0,0", (0, 0)), ((1000, 2000), b"3000,500", (1000, 3000))],
)
def test_heartbeat_is_none_until_negotiated_then_kept(
    offered: tuple[int, int], answered: bytes, agreed: tuple[int, int]
) -> None:
    client = ClientConnection()
    assert client.heartbeat is None
    client.send(Connect(host="/", heartbeat=offered))
    assert client.heartbeat is None
    client.receive_data(b"CONNECTED\nversion:1.2\nheart-beat:" + answered + b"\n\n\x00")
    client.next_event()
    assert client.heartbeat == agreed
    client.receive_data(b"ERROR\nmessage:bye\n\n\x00")
    client.next_event()
    assert client.heartbeat == agreed  # still what was agreed; state says it is over


def test_server_heartbeat_is_none_until_connected_is_sent() -> None:
    server = ServerConnection()
    server.receive_data(b"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:1000,1000\n\n\x00")
    server.next_event()
    assert server.heartbeat is None
    server.send(Connected(heartbeat=(0, 0)))
    assert server.heartbeat == (0, 0)
