"""The edges of building events by hand.

A ``str`` body is sent as UTF-8 on every event with a body, as the clients do;
headers come as any Mapping or iterable of pairs; reprs hide the passcode and
cut long bodies; an empty destination is refused both ways; a server cannot
hand out an acknowledgement id that is still pending; messages read well.
"""

from __future__ import annotations

from types import MappingProxyType

import pytest
from connection_helpers import connected_pair, drain
from test_server_connection import connected_server, feed, sub_frame

from stomp_proto import (
    Ack,
    ClientConnection,
    Connect,
    Error,
    ErrorKind,
    LocalProtocolError,
    Message,
    RemoteProtocolError,
    Send,
    Subscribe,
    Version,
)

TEXT = "text/plain;charset=utf-8"


@pytest.mark.parametrize(
    "build",
    [
        lambda body: Send("/q", body),
        lambda body: Message("/q", "m1", "s1", body),
        lambda body: Error(message="no", body=body),
    ],
    ids=["Send", "Message", "Error"],
)
def test_a_str_body_is_utf8_text(build: object) -> None:
    event = build("zürich")  # type: ignore[operator]
    assert event.body == "zürich".encode()
    assert event.content_type == TEXT


def test_a_given_content_type_is_kept_and_bytes_like_bodies_become_bytes() -> None:
    assert Send("/q", "a", content_type="text/x").content_type == "text/x"
    assert Send("/q", bytearray(b"ab")).body == b"ab"
    assert Send("/q", memoryview(b"ab")).body == b"ab"
    assert Send("/q", b"ab").content_type is None  # bytes are bytes: no type is guessed
    assert Subscribe("/q", id="s", body="ignored").body == b"ignored"  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"Send body must be bytes .* or str, not int 5"):
        Send("/q", 5)  # type: ignore[arg-type]


def test_a_str_body_goes_out_as_utf8_and_arrives_as_bytes() -> None:
    link = connected_pair("1.2")
    [send] = link.c2s(Send("/q", "zürich"))
    assert isinstance(send, Send)
    assert send.body == "zürich".encode() and send.content_type == TEXT


def test_headers_from_any_mapping_or_pairs() -> None:
    expected = (("persistent", "true"), ("x-a", "1"))
    assert Send("/q", headers={"persistent": "true", "x-a": "1"}).headers == expected  # type: ignore[arg-type]
    mapping = MappingProxyType({"persistent": "true", "x-a": "1"})
    assert Send("/q", headers=mapping).headers == expected  # type: ignore[arg-type]
    assert Send("/q", headers=[("persistent", "true"), ("x-a", "1")]).headers == expected  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="header 'n' must be a str name with a str value"):
        Send("/q", headers={"n": 1})  # type: ignore[dict-item]
    link = connected_pair("1.2")
    [send] = link.c2s(Send("/q", b"x", headers={"x-a": "1"}))  # type: ignore[arg-type]
    assert isinstance(send, Send) and send.headers == (("x-a", "1"),)


def test_repr_hides_the_passcode_and_cuts_long_bodies() -> None:
    text = repr(Connect(host="/", login="alice", passcode="s3cret"))
    assert "s3cret" not in text and "passcode='***'" in text and "login='alice'" in text
    assert "passcode=None" in repr(Connect(host="/"))
    big = repr(Message("/q", "m1", "s1", b"x" * 100_000))
    assert len(big) < 300 and "<100000 bytes>" in big
    assert "body=b'short'" in repr(Send("/q", b"short"))


def test_connect_with_its_defaults_says_what_is_missing() -> None:
    client = ClientConnection()
    with pytest.raises(LocalProtocolError) as refused:
        client.send(Connect())
    assert refused.value.kind is ErrorKind.MISSING_HEADER
    assert "host=" in str(refused.value) and "'/'" in str(refused.value)
    client.send(Connect(host="/"))  # and nothing changed before


@pytest.mark.parametrize("build", [lambda: Send(""), lambda: Subscribe("", id="s")])
def test_an_empty_destination_is_refused_when_built(build: object) -> None:
    with pytest.raises(LocalProtocolError) as refused:
        build()  # type: ignore[operator]
    assert "empty 'destination'" in str(refused.value)


def test_an_empty_destination_is_refused_when_received() -> None:
    server = connected_server("1.2")
    server.receive_data(b"SEND\ndestination:\n\nx\x00")
    with pytest.raises(RemoteProtocolError) as refused:
        drain(server)
    assert refused.value.kind is ErrorKind.MISSING_HEADER
    client = ClientConnection()
    client.send(Connect(host="/"))
    client.receive_data(
        b"CONNECTED\nversion:1.2\n\n\x00MESSAGE\ndestination:\nmessage-id:1\nsubscription:s\n\n\x00"
    )
    with pytest.raises(RemoteProtocolError):
        drain(client)


@pytest.mark.parametrize("version", ["1.0", "1.2"])
def test_a_server_does_not_hand_out_a_pending_ack_id(version: Version) -> None:
    server = connected_server(version)
    feed(server, sub_frame("a", "client") + sub_frame("b", "client"))
    server.send(Message("/queue/a", "m1", "a", b"1", ack="t1"))
    # The client could not tell the second from the first (1.2 §ACK names only the id).
    for again in (
        Message("/queue/a", "m1", "a", b"2", ack="t1"),
        Message("/queue/b", "m1", "b", b"2", ack="t1"),
    ):
        with pytest.raises(LocalProtocolError) as refused:
            server.send(again)
        assert refused.value.kind is ErrorKind.BAD_STATE
        assert "already pending" in str(refused.value)
    server.receive_data(
        b"ACK\nid:t1\n\n\x00" if version == "1.2" else b"ACK\nmessage-id:m1\n\n\x00"
    )
    drain(server)
    server.send(Message("/queue/a", "m1", "a", b"3", ack="t1"))  # settled: free again


def test_stomp_11_tells_the_same_message_id_apart_by_subscription() -> None:
    server = connected_server("1.1")
    feed(server, sub_frame("a", "client") + sub_frame("b", "client"))
    server.send(Message("/queue/t", "m1", "a", b"1"))
    server.send(Message("/queue/t", "m1", "b", b"1"))  # 1.1 §ACK names the subscription
    with pytest.raises(LocalProtocolError):
        server.send(Message("/queue/t", "m1", "a", b"2"))


def test_error_messages_take_the_right_article() -> None:
    server = connected_server("1.2")
    feed(server, sub_frame("a", "client"))
    server.receive_data(b"ACK\n\n\x00")
    with pytest.raises(RemoteProtocolError) as refused:
        drain(server)
    assert "without an 'id' header" in str(refused.value)
    with pytest.raises(LocalProtocolError) as missing:
        Ack(id="x").to_frame("1.1")
    assert "needs a 'message-id' header" in str(missing.value)
    with pytest.raises(LocalProtocolError) as missing_id:
        Ack(message_id="x").to_frame("1.2")
    assert "needs an 'id' header" in str(missing_id.value)
