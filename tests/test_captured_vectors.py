"""Bytes captured from RabbitMQ and ActiveMQ, decoded offline in every chunking.

``tests/vectors/captured/`` holds what the real brokers sent for the scripted
sessions of ``sessions.py`` (recorded by ``capture.py`` there; ``index.json``
says which broker, version and session each file is).  Here, without any
broker:

* the decoder reads each capture to the same frames however the bytes are cut
  (whole, 1 byte at a time, fixed sizes, random cuts), and to the commands
  recorded at capture time;
* a ClientConnection replays each session: the frames it makes are byte for
  byte what was sent to the broker, and it turns the broker's bytes, in every
  chunking, into the same events - which carry what the session sent (bodies,
  escaped and non-ASCII headers) and what each broker does differently;
* the captures seed a fuzz test: cut and damaged, they still only ever give
  frames or RemoteProtocolError, the same however they are fed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from helpers import Outcome, bytewise, cut, run, same_outcome, sized, whole
from hypothesis import given
from hypothesis import strategies as st
from vectors.captured.sessions import (
    BODIES,
    SESSIONS,
    UNACKED_BODY_LENGTH,
    Context,
    Names,
    special_headers,
)

from stomp_proto import (
    ClientConnection,
    Connected,
    ConnectionClosed,
    ConnectionState,
    Error,
    Event,
    Frame,
    HeartBeat,
    Message,
    Receipt,
    Version,
)

HERE = Path(__file__).parent / "vectors" / "captured"
INDEX: dict[str, Any] = json.loads((HERE / "index.json").read_text(encoding="utf-8"))
CAPTURES: dict[str, dict[str, Any]] = INDEX["captures"]
KEYS = sorted(CAPTURES)
REPLAYABLE = [k for k in KEYS if SESSIONS[CAPTURES[k]["session"]].replayable]


@cache
def server_bytes(key: str) -> bytes:
    return (HERE / f"{key}.server.bin").read_bytes()


@cache
def client_bytes(key: str) -> bytes:
    return (HERE / f"{key}.client.bin").read_bytes()


def random_cuts(data: bytes, seed: str, count: int = 40) -> list[bytes]:
    rng = random.Random(seed)
    return cut(data, (rng.randrange(len(data) + 1) for _ in range(count)))


Chunker = Callable[[bytes, str], list[bytes]]
CHUNKERS: dict[str, Chunker] = {
    "whole": lambda data, _: whole(data),
    "bytewise": lambda data, _: bytewise(data),
    "by-2": lambda data, _: sized(data, 2),
    "by-3": lambda data, _: sized(data, 3),
    "by-7": lambda data, _: sized(data, 7),
    "by-64": lambda data, _: sized(data, 64),
    "random": random_cuts,
}


def test_index_matches_files() -> None:
    on_disk = {
        str(p.relative_to(HERE)).removesuffix(".server.bin") for p in HERE.rglob("*.server.bin")
    }
    assert on_disk == set(CAPTURES)
    for key, entry in CAPTURES.items():
        steps = entry["steps"]
        assert sum(c for c, _ in steps) == len(client_bytes(key)), key
        assert sum(s for _, s in steps) == len(server_bytes(key)), key
    assert {e["broker"] for e in CAPTURES.values()} == {"rabbitmq", "activemq"}


# -- the decoder -------------------------------------------------------------------------


@pytest.mark.parametrize("key", KEYS)
def test_decoder_reads_capture_in_every_chunking(key: str) -> None:
    entry = CAPTURES[key]
    data, version = server_bytes(key), entry["version"]
    reference = run(whole(data), version)
    assert reference.error is None, reference.summary()
    frames = [e for e in reference.events if isinstance(e, Frame)]
    assert [f.command for f in frames] == entry["frames"]
    # Both brokers end every frame with NUL + EOL: one heart-beat per frame, at least.
    beats = sum(isinstance(e, HeartBeat) for e in reference.events)
    assert beats >= len(frames)
    for name, chunker in CHUNKERS.items():
        outcome = run(chunker(data, key), version)
        assert same_outcome(reference, outcome), f"{name}: {outcome.summary()}"


# -- a ClientConnection replaying the session --------------------------------------------


def replay(key: str, chunker: Chunker) -> tuple[ClientConnection, list[Event]]:
    """Run the session's script again, fed the captured broker bytes through ``chunker``."""
    entry = CAPTURES[key]
    session = SESSIONS[entry["session"]]
    version: Version = entry["version"]
    names = Names(**entry["names"])
    conn = ClientConnection()
    events: list[Event] = []
    sent, received = client_bytes(key), server_bytes(key)
    c_at = s_at = 0
    for step, (c_len, s_len) in zip(session.steps, entry["steps"], strict=True):
        frames = [e for e in events if not isinstance(e, HeartBeat)]
        ctx = Context(version, names, entry["vhost"], tuple(frames))
        out = b"".join(
            item if isinstance(item, bytes) else conn.send(item) for item in step.send(ctx)
        )
        assert out == sent[c_at : c_at + c_len], f"step {ctx.events!r}"
        for chunk in chunker(received[s_at : s_at + s_len], f"{key}-{s_at}"):
            conn.receive_data(chunk)
            events.extend(conn)
        c_at, s_at = c_at + c_len, s_at + s_len
    if entry["closed"]:
        conn.receive_data(None)
        events.extend(conn)
    return conn, events


@pytest.mark.parametrize("key", REPLAYABLE)
def test_client_connection_replays_capture(key: str) -> None:
    entry = CAPTURES[key]
    conn, events = replay(key, CHUNKERS["whole"])
    for name, chunker in CHUNKERS.items():
        assert replay(key, chunker)[1] == events, name
    frames = [e for e in events if not isinstance(e, HeartBeat)]
    assert isinstance(frames[0], Connected)
    assert frames[0].version == entry["version"]
    assert frames[0].server == entry["server"]
    # Every session ends with DISCONNECT and its RECEIPT.
    assert frames[-1 if not entry["closed"] else -2] == Receipt("r-bye")
    assert conn.state is ConnectionState.CLOSED
    assert not any(isinstance(e, Error) for e in frames)
    check = SESSION_CHECKS[entry["session"]]
    check(entry, [e for e in frames if isinstance(e, Message)], events)


def check_basic(entry: dict[str, Any], messages: list[Message], events: list[Event]) -> None:
    assert [m.body for m in messages] == list(BODIES)
    assert {m.subscription for m in messages} == {"s-1"}
    assert {m.destination for m in messages} == {entry["names"]["queue"]}
    # Escaped (1.1+), non-ASCII and space-padded header values come back as sent.
    for name, value in special_headers(entry["version"]):
        assert (name, value) in messages[1].headers, (name, value, messages[1].headers)
    assert [m.content_type for m in messages] == [
        "text/plain",
        None,
        "text/plain;charset=utf-8",
    ]
    assert all(m.content_length for m in messages)  # we sent content-length
    # 1.2 messages of a client-acked subscription carry an ``ack`` id (ActiveMQ's has
    # colons, escaped on the wire as "\c").
    assert all((m.ack is not None) == (entry["version"] == "1.2") for m in messages)
    if entry["broker"] == "rabbitmq":
        assert [("receipt", f"r-send-{n}") in m.headers for n, m in enumerate(messages, 1)] == [
            True
        ] * 3
    else:
        assert all(":" in m.message_id for m in messages)


def check_nack(entry: dict[str, Any], messages: list[Message], events: list[Event]) -> None:
    assert all(m.body == b"x" * UNACKED_BODY_LENGTH for m in messages)
    if entry["broker"] == "rabbitmq":
        first, again = messages  # redelivered at once
        assert ("redelivered", "false") in first.headers
        assert ("redelivered", "true") in again.headers
    else:
        assert len(messages) == 1  # never redelivered (it went to ActiveMQ.DLQ)


def check_transaction(entry: dict[str, Any], messages: list[Message], events: list[Event]) -> None:
    by_subscription = {m.subscription: m.body for m in messages}
    assert sorted(m.body for m in messages) == [b"committed", b"to all", b"to all"]
    assert by_subscription == {"s-q": b"committed", "s-t1": b"to all", "s-t2": b"to all"}


def check_heartbeat(entry: dict[str, Any], messages: list[Message], events: list[Event]) -> None:
    connected = next(e for e in events if isinstance(e, Connected))
    assert connected.heartbeat == (1000, 0)
    first_frame_end = events.index(connected)
    beats = sum(isinstance(e, HeartBeat) for e in events[first_frame_end + 1 :])
    # The EOL after each NUL, plus the broker's beats in 2.6 s of idleness:
    # RabbitMQ every 0.5 s, ActiveMQ only once it has waited about 2 intervals.
    assert beats >= (5 if entry["broker"] == "rabbitmq" else 2)


SESSION_CHECKS = {
    "basic": check_basic,
    "nack": check_nack,
    "transaction": check_transaction,
    "heartbeat": check_heartbeat,
}


# -- ERROR frames, as the client sees them ------------------------------------------------

#: The ``message`` header of each ERROR of the "errors" session (unknown transaction,
#: SEND without destination, ACK of an unknown message).
ERROR_MESSAGES = {
    "rabbitmq": ["Bad transaction", "Missing destination", "Invalid header"],
    "activemq": [
        "Invalid transaction id: tx-nope",
        "SEND received without a Destination specified!",
        "Unexpected ACK received for message-id [nope]",
    ],
}
LOGIN_ERROR = {
    "rabbitmq": ("Bad CONNECT", b"Access refused for user 'guest'\n"),
    "activemq": (
        "User name [guest] or password is invalid.",
        b"User name [guest] or password is invalid.",
    ),
}


def errors_of(key: str) -> list[Frame]:
    entry = CAPTURES[key]
    outcome: Outcome = run(whole(server_bytes(key)), entry["version"])
    return [e for e in outcome.events if isinstance(e, Frame) and e.command == "ERROR"]


@pytest.mark.parametrize("key", [k for k in KEYS if CAPTURES[k]["session"] == "errors"])
def test_error_frames_on_an_open_session(key: str) -> None:
    entry = CAPTURES[key]
    errors = errors_of(key)
    assert [e.get("message") for e in errors] == ERROR_MESSAGES[entry["broker"]]
    # ActiveMQ names the receipt of the frame it refuses; RabbitMQ never does.
    receipts = [e.get("receipt-id") for e in errors]
    if entry["broker"] == "activemq":
        assert receipts == ["r-1", "r-2", "r-3"]
        assert all(b"ProtocolException" in e.body for e in errors)  # a Java stack trace
    else:
        assert receipts == [None] * 3
        assert all(e.get("content-length") == str(len(e.body)) for e in errors)
    # Neither broker closed the session: the DISCONNECT got its RECEIPT.
    assert entry["frames"][-1] == "RECEIPT"
    # Our client stops at the first ERROR (it ends the session).
    conn, events = ClientConnection(), []
    conn.send(_connect_of(key))
    conn.receive_data(server_bytes(key))
    for event in conn:
        events.append(event)
        if isinstance(event, Error):
            break
    frames = [e for e in events if not isinstance(e, HeartBeat)]
    assert [type(e) for e in frames] == [Connected, Error]
    assert frames[1].message == ERROR_MESSAGES[entry["broker"]][0]
    assert conn.state is ConnectionState.CLOSED


@pytest.mark.parametrize("key", [k for k in KEYS if CAPTURES[k]["session"] == "login-error"])
@pytest.mark.parametrize("chunker", CHUNKERS)
def test_login_error(key: str, chunker: str) -> None:
    entry = CAPTURES[key]
    message, body = LOGIN_ERROR[entry["broker"]]
    conn = ClientConnection()
    assert conn.send(_connect_of(key)) == client_bytes(key)
    events: list[Event] = []
    for chunk in CHUNKERS[chunker](server_bytes(key), key):
        conn.receive_data(chunk)
        events.extend(conn)
    if entry["closed"]:
        conn.receive_data(None)
        events.extend(conn)
    frames = [e for e in events if not isinstance(e, HeartBeat)]
    assert isinstance(frames[0], Error)
    assert (frames[0].message, frames[0].body) == (message, body)
    # ActiveMQ closes at once; RabbitMQ leaves the socket open (until its login timeout).
    assert entry["closed"] is (entry["broker"] == "activemq")
    assert frames[1:] == ([ConnectionClosed()] if entry["closed"] else [])


def _connect_of(key: str) -> Any:
    entry = CAPTURES[key]
    session = SESSIONS[entry["session"]]
    ctx = Context(entry["version"], Names(**entry["names"]), entry["vhost"], ())
    (event,) = session.steps[0].send(ctx)
    return event


# -- the captures as fuzz seeds ------------------------------------------------------------


def mutate(data: bytes, kind: str, at: int, value: int) -> bytes:
    at = at % (len(data) + 1)
    if kind == "flip" and at < len(data):
        return data[:at] + bytes([value]) + data[at + 1 :]
    if kind == "delete":
        return data[:at] + data[at + 1 :]
    if kind == "insert":
        return data[:at] + bytes([value]) + data[at:]
    if kind == "truncate":
        return data[:at]
    return data


@given(
    key=st.sampled_from(KEYS),
    kind=st.sampled_from(["none", "flip", "delete", "insert", "truncate"]),
    at=st.integers(0, 10_000),
    value=st.sampled_from([0, 10, 13, ord(":"), ord("\\"), ord("c"), 0xFF, 0xC3]),
    cuts=st.lists(st.integers(0, 10_000), max_size=20),
    version=st.sampled_from(["1.0", "1.1", "1.2"]),
)
def test_fuzz_seeded_by_captures(
    key: str, kind: str, at: int, value: int, cuts: list[int], version: Version
) -> None:
    """Damaged captures give frames or RemoteProtocolError, identically in any chunking."""
    data = mutate(server_bytes(key), kind, at, value)
    reference = run(whole(data), version)
    assert same_outcome(reference, run(cut(data, cuts), version))
    if kind == "none" and version == CAPTURES[key]["version"]:
        assert reference.error is None
