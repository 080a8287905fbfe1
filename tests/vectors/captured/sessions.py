"""Scripted STOMP sessions, replayed against real brokers to capture what they send.

``capture.py`` (in this directory) runs every session against RabbitMQ and
ActiveMQ and stores, per session and version, the raw bytes the broker sent
(``<broker>/<session>-<version>.server.bin``), the bytes we sent
(``.client.bin``) and in ``index.json`` where each exchange starts.
``tests/test_captured_vectors.py`` runs the same scripts again, offline: it
re-creates our frames from this file (checking that they are byte for byte
what was sent) and feeds the captured broker bytes to the decoder and to a
``ClientConnection`` in many different chunkings.

A session is a list of :class:`Step`.  A step sends some client frames - made
by a function of what the broker has sent so far, so that an ACK can name the
message being acknowledged - and then reads until the broker has sent
``expect`` more frames (not counting heart-beat EOLs), plus a short quiet
period so that the EOL that brokers write after each NUL is captured too.
``expect=CLOSE`` reads until the broker closes the connection; ``idle``
keeps reading for that many seconds (for heart-beats).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from stomp_proto import (
    Abort,
    Ack,
    Begin,
    Commit,
    Connect,
    Disconnect,
    Event,
    Message,
    Nack,
    Send,
    Subscribe,
    Unsubscribe,
    Version,
)

__all__ = ["CLOSE", "SESSIONS", "Context", "Names", "Outgoing", "Session", "Step"]

#: ``Step.expect`` value: read until the broker closes the connection.
CLOSE = -1

#: What a step sends: typed events (through the ClientConnection) or raw bytes
#: (frames our client would refuse to send, to provoke broker ERRORs).
Outgoing = Event | bytes


@dataclass(frozen=True)
class Names:
    """The destinations a capture used (unique per capture; recorded in index.json)."""

    queue: str
    topic: str


@dataclass(frozen=True)
class Context:
    """What a step's ``send`` function gets."""

    version: Version
    names: Names
    vhost: str
    #: Every event the ClientConnection returned so far (heart-beats excluded).
    events: Sequence[Event]

    def messages(self) -> list[Message]:
        return [e for e in self.events if isinstance(e, Message)]


@dataclass(frozen=True)
class Step:
    send: Callable[[Context], list[Outgoing]]
    expect: int = 0
    idle: float = 0.0


@dataclass(frozen=True)
class Session:
    steps: list[Step]
    versions: tuple[Version, ...] = ("1.0", "1.1", "1.2")
    notes: str = ""
    brokers: tuple[str, ...] = ("rabbitmq", "activemq")
    #: Whether the replay may drive a ClientConnection through every step (False
    #: when the broker's ERROR ends the session for our client but not for the broker).
    replayable: bool = True
    extra: dict[str, str] = field(default_factory=dict)


def connect(
    heartbeat: tuple[int, int] = (0, 0), passcode: str = "guest"
) -> Callable[[Context], list[Outgoing]]:
    def make(ctx: Context) -> list[Outgoing]:
        return [
            Connect(
                host=ctx.vhost,
                accept_versions=(ctx.version,),
                login="guest",
                passcode=passcode,
                heartbeat=heartbeat,
            )
        ]

    return make


def disconnect(ctx: Context) -> list[Outgoing]:
    return [Disconnect(receipt="r-bye")]


def _ack_mode(version: Version) -> str:
    return "client" if version == "1.0" else "client-individual"


#: Header values worth a round trip: escapes (1.1+), non-ASCII, spaces.
SPECIAL_HEADERS_11 = (
    ("x-colon", "a:b"),
    ("x-backslash", "c\\d"),
    ("x-newline", "line1\nline2"),
    ("x-unicode", "zo\u00eb \u2603"),
    ("x-spaces", " padded "),
)
SPECIAL_HEADERS_10 = (("x-unicode", "zo\u00eb \u2603"), ("x-plain", "value"))


def special_headers(version: Version) -> tuple[tuple[str, str], ...]:
    return SPECIAL_HEADERS_10 if version == "1.0" else SPECIAL_HEADERS_11


BODIES = (
    b"plain text",
    b"\x00binary\x00with NULs\xff\n",
    "caf\u00e9 \u2615".encode(),
)


def _basic_sends(ctx: Context) -> list[Outgoing]:
    q = ctx.names.queue
    return [
        Send(q, BODIES[0], content_type="text/plain", receipt="r-send-1"),
        Send(q, BODIES[1], receipt="r-send-2", headers=special_headers(ctx.version)),
        Send(q, BODIES[2], content_type="text/plain;charset=utf-8", receipt="r-send-3"),
    ]


def _ack_all(ctx: Context) -> list[Outgoing]:
    out: list[Outgoing] = []
    for n, message in enumerate(ctx.messages(), 1):
        out.append(Ack.of(message, receipt=f"r-ack-{n}"))
    return out


BASIC = Session(
    notes="SUBSCRIBE (client acks), 3 SENDs with receipts (binary, escaped and non-ASCII "
    "headers), ACK each, UNSUBSCRIBE, DISCONNECT",
    steps=[
        Step(connect(), expect=1),
        Step(
            lambda c: [
                Subscribe(c.names.queue, id="s-1", ack=_ack_mode(c.version), receipt="r-sub")
            ],
            expect=1,
        ),
        Step(_basic_sends, expect=6),
        Step(_ack_all, expect=3),
        Step(lambda c: [Unsubscribe(id="s-1", receipt="r-unsub")], expect=1),
        Step(disconnect, expect=1),
    ],
)

UNACKED_BODY_LENGTH = 3000


def _subscribe_individual(ctx: Context) -> list[Outgoing]:
    return [Subscribe(ctx.names.queue, id="s-1", ack="client-individual", receipt="r-sub")]


def _send_persistent(ctx: Context) -> list[Outgoing]:
    body = b"x" * UNACKED_BODY_LENGTH
    return [Send(ctx.names.queue, body, receipt="r-send", headers=(("persistent", "true"),))]


def _nack_first(ctx: Context) -> list[Outgoing]:
    return [Nack.of(ctx.messages()[0], receipt="r-nack")]


def _ack_redelivered_and_leave(ctx: Context) -> list[Outgoing]:
    return [*(Ack.of(m) for m in ctx.messages()[1:]), Disconnect(receipt="r-bye")]


NACK = Session(
    versions=("1.1", "1.2"),
    notes="NACK of a persistent message: RabbitMQ redelivers it (redelivered:true), "
    "ActiveMQ does not (it goes to ActiveMQ.DLQ)",
    steps=[
        Step(connect(), expect=1),
        Step(_subscribe_individual, expect=1),
        Step(_send_persistent, expect=2),
        Step(_nack_first, expect=1, idle=0.5),
        Step(_ack_redelivered_and_leave, expect=1),
    ],
)

TRANSACTION = Session(
    notes="BEGIN/SEND/ABORT delivers nothing, BEGIN/SEND/COMMIT delivers; topic fan-out to "
    "two subscriptions of one connection",
    steps=[
        Step(connect(), expect=1),
        Step(
            lambda c: [
                Subscribe(c.names.queue, id="s-q", receipt="r-sub-q"),
                Subscribe(c.names.topic, id="s-t1", receipt="r-sub-t1"),
                Subscribe(c.names.topic, id="s-t2", receipt="r-sub-t2"),
            ],
            expect=3,
        ),
        Step(
            lambda c: [
                Begin("tx-1"),
                Send(c.names.queue, b"aborted", transaction="tx-1"),
                Abort("tx-1"),
                Begin("tx-2"),
                Send(c.names.queue, b"committed", transaction="tx-2"),
                Commit("tx-2", receipt="r-commit"),
            ],
            expect=2,
        ),
        Step(lambda c: [Send(c.names.topic, b"to all", receipt="r-topic")], expect=3),
        Step(disconnect, expect=1),
    ],
)

ERRORS = Session(
    replayable=False,
    notes="ERROR frames on an open session (each broker keeps it open): unknown "
    "transaction, SEND without destination, ACK of an unknown message, then DISCONNECT",
    steps=[
        Step(connect(), expect=1),
        Step(lambda c: [b"SEND\ndestination:/queue/x\ntransaction:tx-nope\nreceipt:r-1\n\n\x00"],
             expect=1),
        Step(lambda c: [b"SEND\nreceipt:r-2\n\nno destination\x00"], expect=1),
        Step(lambda c: [b"ACK\nid:nope\nmessage-id:nope\nsubscription:nope\nreceipt:r-3\n\n\x00"],
             expect=1),
        Step(lambda c: [b"DISCONNECT\nreceipt:r-bye\n\n\x00"], expect=1),
    ],
)  # fmt: skip

LOGIN_ERROR = Session(
    replayable=False,
    notes="CONNECT with a wrong passcode: ERROR (ActiveMQ then closes; RabbitMQ keeps the "
    "socket open until its login timeout, so the capture stops after a quiet period)",
    steps=[Step(connect(passcode="wrong"), expect=1, idle=1.0)],
)

HEARTBEAT = Session(
    notes="heart-beat 0,1000: the broker sends EOLs (RabbitMQ every 0.5 s, ActiveMQ every "
    "1 s after the first 2 s); 2.6 s of idleness captured",
    steps=[
        Step(connect(heartbeat=(0, 1000)), expect=1, idle=2.6),
        Step(disconnect, expect=1),
    ],
)

SESSIONS: dict[str, Session] = {
    "basic": BASIC,
    "nack": NACK,
    "transaction": TRANSACTION,
    "errors": ERRORS,
    "login-error": LOGIN_ERROR,
    "heartbeat": HEARTBEAT,
}
