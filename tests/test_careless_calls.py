"""Careless calls: each public function and constructor, given a wrong type or a wrong value.

A wrong type is a ``TypeError``; a value of the right type that cannot be used
is a ``LocalProtocolError`` or a ``ValueError``.  Either way the message names
the argument, and a refused event leaves no trace: ``send()`` returned no bytes
(it raised) and the connection is as it was.

``ISSUE_ROWS`` holds, one for one, the careless calls a new user tried (each
used to write a bad frame or fail with a raw error from deep inside);
``EVERY_CALL`` goes through the public API, a wrong type and a wrong value for
each; the hypothesis test sends every client and server event with one field
of a random wrong type.  The clients' rows run against the embedded broker
on every adapter.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import trio
from adapter_harness import HOST, WAIT, Harness, free_port, on_every_adapter
from connection_helpers import Link, connected_pair, snapshot
from helpers import names_the_argument
from hypothesis import given, settings
from hypothesis import strategies as st

import stomp_proto.asyncio
import stomp_proto.threads
import stomp_proto.trio
from stomp_proto import (
    Abort,
    Ack,
    Backoff,
    Begin,
    ClientConnection,
    Commit,
    Connect,
    Connected,
    Disconnect,
    Error,
    Frame,
    FrameDecoder,
    FrameEncoder,
    FrameEvent,
    Limits,
    LocalProtocolError,
    Message,
    Nack,
    Receipt,
    Send,
    ServerConnection,
    Subscribe,
    Unsubscribe,
    drain_and_close,
)
from stomp_proto._checks import event_checks

# -- the rows ---------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One careless call: what is run, what it must raise, what the message must name."""

    label: str
    run: Callable[[], object]
    raises: type[Exception]
    names: str


def client() -> ClientConnection:
    """A client connection in session (STOMP 1.2, no heart-beats) with ``sub-1`` open."""
    link = connected_pair("1.2")
    link.c2s(Subscribe("/queue/a", id="sub-1"))
    return link.client


def beating_client() -> ClientConnection:
    beats = (1000, 1000)
    return connected_pair("1.2", client_heartbeat=beats, server_heartbeat=beats).client


def server() -> ServerConnection:
    link = connected_pair("1.2")
    link.c2s(Subscribe("/queue/a", id="sub-1", ack="client-individual"))
    return link.server


def undelivered() -> Message:
    """A message that never came on the connection it is settled on."""
    return Message("/queue/a", "m-9", "sub-1", b"x", ack="a-9")


def closed_decoder() -> FrameDecoder:
    decoder = FrameDecoder()
    decoder.receive_data(None)
    return decoder


def drain_with_a_negative_timeout() -> None:
    with socket.socket() as sock:
        drain_and_close(sock, timeout=-1)


def closed_client() -> ClientConnection:
    conn = client()
    conn.receive_data(None)
    return conn


ISSUE_ROWS = [
    Call(
        "conn.send(Send(None, b'x'))",
        lambda: client().send(Send(None, b"x")),  # type: ignore[arg-type]
        TypeError,
        "Send.destination",
    ),
    Call(
        "Connect(heartbeat=(1.5, 2))",
        lambda: ClientConnection().send(Connect(host="/", heartbeat=(1.5, 2))),  # type: ignore[arg-type]
        TypeError,
        "Connect.heartbeat",
    ),
    *[
        Call(
            f"Connect(heartbeat={beat!r})",
            lambda beat=beat: ClientConnection().send(Connect(host="/", heartbeat=beat)),
            TypeError,
            "Connect.heartbeat",
        )
        for beat in ("10,10", None, 1000)
    ],
    Call(
        "conn.receive_data('text')",
        lambda: client().receive_data("text"),  # type: ignore[arg-type]
        TypeError,
        "receive_data() data",
    ),
    Call("conn.ack('x')", lambda: client().ack("x"), TypeError, "message"),  # type: ignore[arg-type]
    Call(
        "conn.handle_timer('now') with heart-beats",
        lambda: beating_client().handle_timer("now"),  # type: ignore[arg-type]
        TypeError,
        "handle_timer() now",
    ),
    Call(
        "conn.handle_timer('now') without",
        lambda: client().handle_timer("now"),  # type: ignore[arg-type]
        TypeError,
        "handle_timer() now",
    ),
    Call(
        "ClientConnection(limits='x')",
        lambda: ClientConnection(limits="x"),  # type: ignore[arg-type]
        TypeError,
        "limits",
    ),
    # Refused when made: such a frame's get() would fail with a raw ValueError.
    Call(
        "Frame('SEND', {'a': 'b'}, b'')",
        lambda: Frame("SEND", {"a": "b"}, b""),  # type: ignore[arg-type]
        TypeError,
        "Frame headers must be a tuple of (name, value) pairs, not dict {'a': 'b'}; "
        "Frame.make(command, headers, body) takes a mapping",
    ),
    Call(
        "Frame('SEND', (), 'text')",
        lambda: Frame("SEND", (), "text"),  # type: ignore[arg-type]
        TypeError,
        "Frame body must be bytes, not str 'text'; Frame.make() encodes a str as UTF-8",
    ),
    Call(
        "encode(('SEND', {'a': 'b'}, b''))",
        lambda: FrameEncoder().encode(("SEND", {"a": "b"}, b"")),  # type: ignore[arg-type]
        TypeError,
        "Frame.make(command, headers, body) takes a mapping",
    ),
    Call(
        "Frame.make('SEND', {'a': 1})",
        lambda: Frame.make("SEND", {"a": 1}),  # type: ignore[dict-item]
        TypeError,
        "header 'a'",
    ),
    Call(
        "Send(..., headers=(('h', 5),))",
        lambda: client().send(Send("/q", headers=(("h", 5),))),  # type: ignore[arg-type]
        TypeError,
        "header 'h'",
    ),
    Call(
        "Send(..., headers=(('only one',),))",
        lambda: client().send(Send("/q", headers=(("only one",),))),  # type: ignore[arg-type]
        TypeError,
        "each header must be a (name, value) pair, not tuple ('only one',)",
    ),
    # One pair where a tuple of pairs belongs.
    Call(
        "Send(..., headers=('persistent', 'true'))",
        lambda: client().send(Send("/q", headers=("persistent", "true"))),  # type: ignore[arg-type]
        TypeError,
        "each header must be a (name, value) pair, not str 'persistent'",
    ),
    # One pair of two-letter strings where a tuple of pairs belongs: unpacked,
    # each string was a pair of its own, and the frame said a:b and c:d.
    Call(
        "Send(..., headers=('ab', 'cd'))",
        lambda: client().send(Send("/q", headers=("ab", "cd"))),  # type: ignore[arg-type]
        TypeError,
        "each header must be a (name, value) pair, not str 'ab'",
    ),
    Call(
        "Frame('SEND', ('ab', 'cd'))",
        lambda: Frame("SEND", ("ab", "cd")),  # type: ignore[arg-type]
        TypeError,
        "each header must be a (name, value) pair, not str 'ab'",
    ),
    Call(
        "encode(('SEND', ('ab', 'cd'), b''))",
        lambda: FrameEncoder("1.2").encode(("SEND", ("ab", "cd"), b"")),  # type: ignore[arg-type]
        TypeError,
        "each header must be a (name, value) pair, not str 'ab'",
    ),
    Call(
        "STOMP 1.0: encode(('SEND', (('a', 'b', 'c'),), b''))",
        lambda: FrameEncoder("1.0").encode(("SEND", (("a", "b", "c"),), b"")),  # type: ignore[arg-type]
        TypeError,
        "each header must be a (name, value) pair",
    ),
    # The asyncio rows (header pairs, a dict body) run on every adapter below.
    Call(
        "a mistyped client option",
        lambda: stomp_proto.threads.connect(HOST, 1, timout=3),  # type: ignore[call-arg]
        TypeError,
        "ClientOptions",
    ),
]


def both(
    entry: str,
    wrong_type: Callable[[], object],
    type_names: str,
    wrong_value: Callable[[], object],
    value_error: type[Exception],
    value_names: str,
) -> list[Call]:
    """The two rows of one entry point: a wrong type, and a wrong value of the right type."""
    return [
        Call(f"{entry}: a wrong type", wrong_type, TypeError, type_names),
        Call(f"{entry}: a wrong value", wrong_value, value_error, value_names),
    ]


LPE = LocalProtocolError
threads_connect = stomp_proto.threads.connect
# fmt: off
EVERY_CALL = [
    # the codec
    *both("FrameDecoder(version)",
          lambda: FrameDecoder(1.2), "FrameDecoder version",  # type: ignore[arg-type]
          lambda: FrameDecoder("2.0"), LPE, "'2.0'"),
    *both("FrameDecoder(limits)",
          lambda: FrameDecoder(limits=5), "FrameDecoder(limits=...)",  # type: ignore[arg-type]
          lambda: FrameDecoder(limits=Limits(max_frame_size=0)), ValueError, "max_frame_size"),
    *both("FrameDecoder(strict)",
          lambda: FrameDecoder(strict="no"), "FrameDecoder(strict=...)",  # type: ignore[arg-type]
          lambda: FrameDecoder("1.3"), LPE, "'1.3'"),
    *both("FrameDecoder.receive_data",
          lambda: FrameDecoder().receive_data("x"), "receive_data() data",  # type: ignore[arg-type]
          lambda: closed_decoder().receive_data(b"x"), LPE, "end of stream"),
    *both("FrameEncoder(version)",
          lambda: FrameEncoder(1), "FrameEncoder version",  # type: ignore[arg-type]
          lambda: FrameEncoder("1.3"), LPE, "'1.3'"),
    *both("FrameEncoder.encode",
          lambda: FrameEncoder().encode("SEND"), "encode() frame",  # type: ignore[arg-type]
          lambda: FrameEncoder().encode(Frame("SNED")), LPE, "'SNED'"),
    *both("Frame.make",
          lambda: Frame.make("SEND", body=5), "Frame.make() body",  # type: ignore[arg-type]
          lambda: FrameEncoder().encode(Frame.make("SEND", {"": "x"})), LPE, "empty header name"),
    *both("Limits",
          lambda: Limits(max_body_size="1"), "Limits.max_body_size",  # type: ignore[arg-type]
          lambda: Limits(max_body_size=-1), ValueError, "Limits.max_body_size"),
    # the connections
    *both("ClientConnection(heartbeat_tolerance)",
          lambda: ClientConnection(heartbeat_tolerance="2"),  # type: ignore[arg-type]
          "heartbeat_tolerance",
          lambda: ClientConnection(heartbeat_tolerance=0.5), ValueError, "heartbeat_tolerance"),
    *both("ClientConnection(strict)",
          lambda: ClientConnection(strict=None), "strict",  # type: ignore[arg-type]
          lambda: ClientConnection(heartbeat_tolerance=math.nan), ValueError, "NaN"),
    *both("ServerConnection(limits)",
          lambda: ServerConnection(limits={"max_body_size": 10}),  # type: ignore[arg-type]
          "ServerConnection(limits=...)",
          lambda: ServerConnection(heartbeat_tolerance=0), ValueError, "heartbeat_tolerance"),
    *both("conn.send",
          lambda: client().send("SEND /q"), "send() event",  # type: ignore[arg-type]
          lambda: client().send(Send("", b"x")), LPE, "empty 'destination'"),
    *both("conn.receive_data",
          lambda: client().receive_data(5), "receive_data() data",  # type: ignore[arg-type]
          lambda: closed_client().receive_data(b"\n"), LPE, "end of stream"),
    *both("conn.ack",
          lambda: client().ack(None), "message",  # type: ignore[arg-type]
          lambda: client().ack(undelivered()), LPE, "ACK"),
    *both("conn.nack",
          lambda: client().nack(b"m-1"), "message",  # type: ignore[arg-type]
          lambda: client().nack(undelivered()), LPE, "NACK"),
    *both("conn.handle_timer",
          lambda: beating_client().handle_timer(None), "handle_timer() now",  # type: ignore[arg-type]
          lambda: beating_client().handle_timer(math.nan), ValueError, "handle_timer() now"),
    # the events, sent
    *both("Connect(accept_versions)",
          lambda: ClientConnection().send(Connect(host="/", accept_versions="1.2")),  # type: ignore[arg-type]
          "Connect.accept_versions",
          lambda: ClientConnection().send(Connect(host="/", accept_versions=("2.0",))),  # type: ignore[arg-type]
          LPE, "accept_versions"),
    *both("Connect(heartbeat)",
          lambda: ClientConnection().send(Connect(host="/", heartbeat=[1, 2])),  # type: ignore[arg-type]
          "Connect.heartbeat",
          lambda: ClientConnection().send(Connect(host="/", heartbeat=(-1, 0))), LPE, "heart-beat"),
    *both("Send(body)",
          lambda: Send("/q", {"k": 1}), "Send body",  # type: ignore[arg-type]
          lambda: Send("", b"x"), LPE, "empty 'destination'"),
    *both("Send(headers)",
          lambda: Send("/q", headers=5), "headers",  # type: ignore[arg-type]
          lambda: Send("/q", headers=[("a", "b", "c")]), TypeError, "(name, value) pair"),  # type: ignore[list-item]
    *both("Subscribe(ack)",
          lambda: client().send(Subscribe("/q", id="s", ack=1)), "Subscribe.ack",  # type: ignore[arg-type]
          lambda: client().send(Subscribe("/q", id="s", ack="sometimes")),  # type: ignore[arg-type]
          LPE, "'sometimes'"),
    *both("Unsubscribe(id)",
          lambda: client().send(Unsubscribe(id=1)), "Unsubscribe.id",  # type: ignore[arg-type]
          lambda: client().send(Unsubscribe(id="nope")), LPE, "'nope'"),
    *both("Ack.of",
          lambda: Ack.of({"ack": "a-1"}), "Ack.of() message",  # type: ignore[arg-type]
          lambda: client().send(Ack.of(undelivered())), LPE, "ACK"),
    *both("Begin(transaction)",
          lambda: client().send(Begin(7)), "Begin.transaction",  # type: ignore[arg-type]
          lambda: client().send(Commit("never-begun")), LPE, "'never-begun'"),
    *both("Disconnect(receipt)",
          lambda: client().send(Disconnect(receipt=1)), "Disconnect.receipt",  # type: ignore[arg-type]
          lambda: ServerConnection().send(Disconnect()), LPE, "DISCONNECT"),
    *both("Message(subscription)",
          lambda: server().send(Message("/q", "m-1", 1)), "Message.subscription",  # type: ignore[arg-type]
          lambda: server().send(Message("/q", "m-1", "nobody")), LPE, "'nobody'"),
    # the clients' options (refused before any connection is tried)
    *both("connect(port)",
          lambda: threads_connect(HOST, "61613"), "connect() port",  # type: ignore[arg-type]
          lambda: threads_connect(HOST, 70000), ValueError, "connect() port"),
    *both("connect(heartbeat)",
          lambda: threads_connect(HOST, 1, heartbeat="10,10"), "heartbeat",  # type: ignore[arg-type]
          lambda: threads_connect(HOST, 1, heartbeat=(-1, 0)), ValueError, "heartbeat"),
    *both("connect(timeout)",
          lambda: threads_connect(HOST, 1, timeout="3"), "timeout",  # type: ignore[arg-type]
          lambda: threads_connect(HOST, 1, timeout=0), ValueError, "timeout"),
    *both("connect(versions)",
          lambda: threads_connect(HOST, 1, versions="1.2"), "versions",  # type: ignore[arg-type]
          lambda: threads_connect(HOST, 1, versions=("1.3",)), ValueError, "versions"),  # type: ignore[arg-type]
    *both("connect(limits)",
          lambda: threads_connect(HOST, 1, limits="x"), "limits",  # type: ignore[arg-type]
          lambda: threads_connect(HOST, 1, max_pending_messages=0), ValueError,
          "max_pending_messages"),
    *both("connect(reconnect)",
          lambda: threads_connect(HOST, 1, reconnect=True), "reconnect",  # type: ignore[arg-type]
          lambda: threads_connect(HOST, 1, heartbeat_tolerance=0.5), ValueError,
          "heartbeat_tolerance"),
    *both("Backoff",
          lambda: Backoff(initial="1"), "Backoff.initial",  # type: ignore[arg-type]
          lambda: Backoff(factor=0.5), ValueError, "Backoff.factor"),
    *both("Backoff(attempts)",
          lambda: Backoff(attempts=2.5), "Backoff.attempts",  # type: ignore[arg-type]
          lambda: Backoff(attempts=-1), ValueError, "Backoff.attempts"),
    # the lingering closes (refused before the socket or stream is touched)
    *both("drain_and_close",
          lambda: drain_and_close("sock"), "sock",  # type: ignore[arg-type]
          lambda: drain_with_a_negative_timeout(), ValueError, "timeout"),
    *both("asyncio.drain_and_close",
          lambda: asyncio.run(stomp_proto.asyncio.drain_and_close(
              None, None, max_bytes="1")), "max_bytes",  # type: ignore[arg-type]
          lambda: asyncio.run(stomp_proto.asyncio.drain_and_close(
              None, None, timeout=math.nan)), ValueError, "timeout"),  # type: ignore[arg-type]
    *both("trio.drain_and_close",
          lambda: trio.run(lambda: stomp_proto.trio.drain_and_close(
              None, timeout="2")), "timeout",  # type: ignore[arg-type]
          lambda: trio.run(lambda: stomp_proto.trio.drain_and_close(
              None, max_bytes=-1)), ValueError, "max_bytes"),  # type: ignore[arg-type]
]
# fmt: on


def _ids(calls: list[Call]) -> list[str]:
    return [call.label for call in calls]


@pytest.mark.parametrize("call", ISSUE_ROWS, ids=_ids(ISSUE_ROWS))
def test_each_careless_call_of_the_table_is_a_typed_error(call: Call) -> None:
    with pytest.raises(call.raises) as info:
        call.run()
    assert names_the_argument(info.value, call.names), info.value


@pytest.mark.parametrize("call", EVERY_CALL, ids=_ids(EVERY_CALL))
def test_every_public_call_refuses_a_wrong_type_and_a_wrong_value(call: Call) -> None:
    with pytest.raises(call.raises) as info:
        call.run()
    assert names_the_argument(info.value, call.names), info.value
    if call.raises is TypeError:
        assert " must be " in str(info.value)  # says what would fit


def test_every_entry_point_has_both_rows() -> None:
    labels = [call.label.rpartition(": ")[0] for call in EVERY_CALL]
    assert all(labels.count(label) == 2 for label in labels)
    assert len(set(labels)) >= 30


# -- no trace of a refused event ------------------------------------------------------

#: One valid event per sendable class, from the side that sends it; a field of
#: each is then given a wrong type.
CLIENT_EVENTS: list[FrameEvent] = [
    Send("/queue/a", b"x", content_type="text/plain", transaction=None, receipt="r-1"),
    Subscribe("/queue/b", id="sub-2", receipt="r-2"),
    Unsubscribe(id="sub-1", receipt="r-3"),
    Ack(id="a-1", receipt="r-4"),
    Nack(id="a-1", receipt="r-5"),
    Begin("tx-1", receipt="r-6"),
    Commit("tx-1"),
    Abort("tx-1"),
    Disconnect(receipt="r-7"),
]
SERVER_EVENTS: list[FrameEvent] = [
    Message("/queue/a", "m-1", "sub-1", b"x", ack="a-1", content_type="text/plain"),
    Receipt("r-1"),
    Error(message="no", receipt_id="r-1", content_type="text/plain"),
]


def _fields(event: FrameEvent) -> list[str]:
    """The fields a wrong value of any type reaches: the typed headers and flags."""
    return [
        name
        for name, kinds, _ in event_checks(type(event))
        if kinds in ((str,), (str, NONE), (bool,))
    ]


NONE = type(None)
WRONG = st.one_of(
    st.integers(),
    st.floats(allow_nan=False),
    st.binary(max_size=4),
    st.lists(st.text(max_size=2), max_size=2),
    st.dictionaries(st.text(max_size=2), st.text(max_size=2), max_size=2),
    st.just(object()),
)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_an_event_with_a_wrongly_typed_field_leaves_no_trace(data: st.DataObject) -> None:
    side = data.draw(st.sampled_from(["client", "server"]))
    base = data.draw(st.sampled_from(CLIENT_EVENTS if side == "client" else SERVER_EVENTS))
    name = data.draw(st.sampled_from(_fields(base)))
    value = data.draw(WRONG)
    if isinstance(getattr(base, name), bool):
        value = data.draw(WRONG.filter(lambda v: not isinstance(v, bool)))
    event = dataclasses.replace(base, **{name: value})
    link: Link = connected_pair("1.2")
    link.c2s(Subscribe("/queue/a", id="sub-1", ack="client-individual"))
    conn: ClientConnection | ServerConnection = link.client if side == "client" else link.server
    before = snapshot(conn)
    with pytest.raises(TypeError) as info:
        conn.send(event)
    assert f"{type(event).__name__}.{name} must be" in str(info.value)
    assert snapshot(conn) == before


def test_every_event_field_is_checked() -> None:
    # check_event knows the fields by their defaults: a new kind must be taught to it.
    for event in [*CLIENT_EVENTS, *SERVER_EVENTS, Connect(host="/"), Connected()]:
        names = {name for name, _, _ in event_checks(type(event))}
        assert names | {"body", "headers"} >= {f.name for f in dataclasses.fields(event)}


# -- the clients ------------------------------------------------------------------------


@on_every_adapter(versions=(None,))
async def test_clients_take_header_pairs_and_bytes_like_bodies_as_the_core_does(
    h: Harness,
) -> None:
    broker = await h.start_broker()
    async with (
        h.connect(broker.port) as client,
        client.subscribe("/queue/pairs", headers=[("x-sub", "1")]) as messages,
    ):
        await client.send("/queue/pairs", b"x", headers=[("x-a", "1"), ("x-b", "2")], receipt=True)
        message = await messages.get(WAIT)
        assert ("x-a", "1") in message.headers and ("x-b", "2") in message.headers
        for body in (bytearray(b"ab"), memoryview(b"cd")):
            await client.send("/queue/pairs", body, receipt=True)
            assert (await messages.get(WAIT)).body == bytes(body)


@on_every_adapter(versions=(None,))
async def test_clients_refuse_a_careless_send_and_write_nothing(h: Harness) -> None:
    broker = await h.start_broker()
    async with h.connect(broker.port) as client:
        refusals: list[tuple[type[Exception], str, dict[str, Any]]] = [
            (TypeError, "Send body", {"body": {"k": 1}}),
            (TypeError, "header 'n'", {"headers": {"n": 1}}),
            (TypeError, "Send.destination", {"destination": None}),
            (TypeError, "Send.content_type", {"content_type": 5}),
            (TypeError, "send() receipt", {"receipt": "yes"}),
            (LocalProtocolError, "transaction", {"transaction": "never-begun"}),
        ]
        for error, names, change in refusals:
            arguments: dict[str, Any] = {"destination": "/queue/careless", "body": b"x"}
            arguments.update(change)
            destination = arguments.pop("destination")
            with pytest.raises(error) as info:
                await client.send(destination, **arguments)
            assert names_the_argument(info.value, names), info.value
        with pytest.raises(TypeError, match=r"(?i)message"):
            await client.ack("x")
        await client.send("/queue/careless", b"fine", receipt=True)  # the session goes on
    assert await h.queued(broker, "/queue/careless") == 1


def test_asyncio_connect_refuses_an_unknown_option_naming_client_options() -> None:
    async def enter() -> None:
        async with stomp_proto.asyncio.connect(HOST, free_port(), timout=3):  # type: ignore[call-arg]
            pass

    with pytest.raises(TypeError) as info:
        asyncio.run(enter())
    assert "'timout'" in str(info.value) and "ClientOptions" in str(info.value)
    assert "timeout" in str(info.value)  # the list of options says what was meant
