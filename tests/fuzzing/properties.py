"""The fuzzing properties, shared by the atheris harnesses and the hypothesis tests.

Every target takes one ``bytes`` input - what a coverage-guided fuzzer mutates -
and reads it as a :class:`Case`: two leading bytes of configuration, then the
stream to feed.  So the same inputs drive atheris (``tests/fuzzing/run.py``),
the hypothesis tests (``tests/test_fuzz_properties.py``), the seed corpus
(``tests/fuzzing/corpus/<target>/``) and the regression inputs
(``tests/fuzzing/regressions/<target>/``), and a crash found by one replays
unchanged in the others.

The properties, for every target:

* the only exception that escapes is the library's protocol error family - and
  only :class:`RemoteProtocolError` where the peer's bytes are at fault; any
  other exception, or a failed assertion, is a crash;
* memory stays within the configured limits: after each chunk is drained, the
  decoder holds no more than one partial frame's worth of bytes;
* (decoder) every frame accepted re-encodes - or the encoder refuses it with
  :class:`LocalProtocolError`, for the few things a lenient decoder accepts and
  no conforming sender may write - and a strict decoder of the same version
  reads the encoding back as the same frame;
* (connections) a failed connection stays failed, and a server's error hint is
  an ERROR frame it can still send.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from stomp_proto import (
    ClientConnection,
    Connect,
    Connected,
    ConnectionState,
    Error,
    Event,
    FrameDecoder,
    FrameEncoder,
    HeartBeat,
    Limits,
    LocalProtocolError,
    Message,
    Receipt,
    RemoteProtocolError,
    ServerConnection,
    Subscribe,
    Version,
)
from stomp_proto._frame import Frame

from .sessions import ACK_MODES as SESSION_ACK_MODES
from .sessions import SUB_IDS, client_script, server_script
from .streams import random_cuts, recipe_stream

VERSIONS: tuple[Version, ...] = ("1.0", "1.1", "1.2")

#: Small limits, so that fuzzed inputs reach every limit check.
SMALL_LIMITS = Limits(
    max_line_length=48, max_headers=6, max_head_size=160, max_body_size=96, max_frame_size=200
)
#: Limits roomy enough for every captured broker session, small enough to be reached.
ROOMY_LIMITS = Limits(
    max_line_length=1024,
    max_headers=64,
    max_head_size=4096,
    max_body_size=8192,
    max_frame_size=12288,
)
DEFAULT_LIMITS = Limits()
#: What a decoder may hold beyond one partial frame: a CR waiting for its LF, and so on.
SLACK = 16


def memory_bound(limits: Limits) -> int:
    """Most bytes a drained decoder may buffer under ``limits``."""
    return min(limits.max_frame_size, limits.max_head_size + limits.max_body_size) + SLACK


@dataclass(frozen=True)
class Case:
    """One fuzz input, read as configuration and a stream.

    Byte 0: bits 0-1 the version (3 is read as 1.2), bit 2 lenient, bit 3 the
    roomy limits instead of the small ones, bits 4-5 the ack mode the client
    target subscribes with, bit 6 the default limits (64 MiB bodies: the only
    ones that reach the decoder's large-body path, from 64 KiB).  Byte 1: 0
    feeds the stream whole; otherwise it seeds the random chunking (chunks of 1
    to ``byte % 32 + 1`` bytes).
    """

    version: Version
    strict: bool
    limits: Limits
    ack_mode: int
    chunk_seed: int
    stream: bytes

    @classmethod
    def from_bytes(cls, data: bytes) -> Case:
        config = data[0] if data else 0
        return cls(
            version=VERSIONS[min(config & 3, 2)],
            strict=not config & 4,
            limits=DEFAULT_LIMITS if config & 64 else ROOMY_LIMITS if config & 8 else SMALL_LIMITS,
            ack_mode=(config >> 4) & 3,
            chunk_seed=data[1] if len(data) > 1 else 0,
            stream=data[2:],
        )

    @staticmethod
    def encode(
        stream: bytes,
        *,
        version: Version = "1.2",
        strict: bool = True,
        roomy: bool = True,
        ack_mode: int = 0,
        chunk_seed: int = 0,
        default_limits: bool = False,
    ) -> bytes:
        """The fuzz input that :meth:`from_bytes` reads back as these settings."""
        config = VERSIONS.index(version) | (0 if strict else 4) | (8 if roomy else 0)
        config |= 64 if default_limits else 0
        return bytes([config | (ack_mode & 3) << 4, chunk_seed & 255]) + stream

    def chunks(self) -> Iterator[bytes]:
        """The stream in the chunks the seed picks; always non-empty chunks."""
        stream = self.stream
        if not self.chunk_seed:
            if stream:
                yield stream
            return
        rng = random.Random(self.chunk_seed)
        largest = self.chunk_seed % 32 + 1
        pos = 0
        while pos < len(stream):
            size = rng.randint(1, largest)
            yield stream[pos : pos + size]
            pos += size


# -------------------------------------------------------------------------------- decoder


def check_decoder(data: bytes) -> None:
    """FrameDecoder fed arbitrary bytes under the case's version, mode and limits."""
    case = Case.from_bytes(data)
    decoder = FrameDecoder(case.version, strict=case.strict, limits=case.limits)
    bound = memory_bound(case.limits)
    try:
        for chunk in [*case.chunks(), None]:
            decoder.receive_data(chunk)
            while (item := decoder.next_frame()) is not None:
                if isinstance(item, Frame):
                    check_round_trip(item, case.version)
                else:
                    assert isinstance(item, HeartBeat), item
            assert decoder.buffered <= bound, (decoder.buffered, bound)
    except RemoteProtocolError as exc:
        _check_failed_decoder(decoder, exc)
        return
    assert decoder.next_frame() is None


def _check_failed_decoder(decoder: FrameDecoder, exc: RemoteProtocolError) -> None:
    # The failure sticks: next_frame raises it again, receive_data is refused.
    try:
        decoder.next_frame()
    except RemoteProtocolError as again:
        assert again.kind is exc.kind, (again, exc)
    else:
        raise AssertionError("a failed decoder returned a frame")
    try:
        decoder.receive_data(b"x")
    except LocalProtocolError:
        pass
    else:
        raise AssertionError("a failed decoder took more data")


def check_round_trip(frame: Frame, version: Version) -> None:
    """``frame`` (as decoded) re-encodes, and a strict decoder reads back the same frame.

    The encoder writes ``content-length`` itself, last, for non-empty bodies, so
    that header is compared apart from the others.
    """
    try:
        wire = FrameEncoder(version).encode(frame)
    except LocalProtocolError:
        assert not _strictly_sendable(frame, version), frame
        return
    decoder = FrameDecoder(version, strict=True)
    decoder.receive_data(wire)
    decoder.receive_data(None)
    again = decoder.next_frame()
    assert isinstance(again, Frame), (frame, wire)
    assert decoder.next_frame() is None, wire
    assert again.command == frame.command and again.body == frame.body, (frame, again)
    assert _without_length(again) == _without_length(frame), (frame, again)
    expected = [str(len(frame.body))] if frame.body else []
    assert again.get_all("content-length") == expected, (frame, again)


def _without_length(frame: Frame) -> tuple[tuple[str, str], ...]:
    return tuple(pair for pair in frame.headers if pair[0] != "content-length")


def _strictly_sendable(frame: Frame, version: Version) -> bool:
    """Whether a conforming sender could write ``frame`` - then the encoder must.

    What a decoder accepts but no sender may write: a lenient decoder's unknown
    commands (1.0 has no NACK and no STOMP) and bodies on frames that take none;
    and, for headers sent unescaped (1.0, CONNECT, CONNECTED), a CR - data to a 1.0 decoder, but one
    that a 1.2 reader would take for part of a line ending.
    """
    from stomp_proto._frame import BODY_COMMANDS, COMMANDS_BY_VERSION, UNESCAPED_COMMANDS

    bodies = BODY_COMMANDS | {"SUBSCRIBE"} if version == "1.0" else BODY_COMMANDS
    if frame.command not in COMMANDS_BY_VERSION[version] or (
        frame.body and frame.command not in bodies
    ):
        return False
    if version == "1.0" or frame.command in UNESCAPED_COMMANDS:
        return not any("\r" in name or "\r" in value for name, value in frame.headers)
    return True


# -------------------------------------------------------------------------------- connections


def check_server(data: bytes) -> None:
    """ServerConnection fed arbitrary client bytes, answered as a small broker would."""
    case = Case.from_bytes(data)
    versions = VERSIONS if case.ack_mode != 3 else (case.version,)
    conn = ServerConnection(versions=versions, strict=case.strict, limits=case.limits)
    bound = memory_bound(case.limits)
    deliveries = 0
    try:
        for chunk in [*case.chunks(), None]:
            conn.receive_data(chunk)
            while (event := conn.next_event()) is not None:
                for reply in _server_replies(conn, event, f"m{deliveries}"):
                    deliveries += 1
                    if isinstance(reply, Message):
                        _send_message(conn, reply)
                    else:
                        conn.send(reply)
            assert conn.buffered <= bound, (conn.buffered, bound)
    except RemoteProtocolError as exc:
        assert conn.state is ConnectionState.CLOSED, conn.state
        hint = exc.event_hint
        assert isinstance(hint, Error), exc
        assert conn.send(hint).startswith(b"ERROR"), hint
        _check_failed_connection(conn, exc)
        return
    assert conn.next_event() is None


def _send_message(conn: ServerConnection, message: Message) -> None:
    """Send a MESSAGE echoing the client's subscription; a refusal must change nothing.

    It can be refused: a 1.0 SUBSCRIBE may carry a CR in its id, which no 1.0
    MESSAGE header can carry back (the broker refuses such a SUBSCRIBE).
    """
    state, pending = conn.state, conn.pending_acks(message.subscription or message.destination)
    try:
        conn.send(message)
    except LocalProtocolError:
        assert conn.version == "1.0", message
        assert conn.state is state, (conn.state, state)
        assert conn.pending_acks(message.subscription or message.destination) == pending


def _server_replies(
    conn: ServerConnection, event: object, message_id: str, *, heartbeat: bool = True
) -> Iterator[Event]:
    """What a broker sends back: CONNECTED (with heart-beats mirrored, or none), a
    MESSAGE called ``message_id`` per subscription, receipts."""
    if isinstance(event, Connect):
        beats = event.heartbeat[::-1] if heartbeat else (0, 0)
        yield Connected(heartbeat=beats, session="fuzz")
        return
    if isinstance(event, Subscribe):
        ident = message_id
        yield Message(
            destination=event.destination,
            message_id=ident,
            subscription=event.id,
            ack=ident if conn.version == "1.2" and event.ack != "auto" else None,
            body=b"fuzz",
        )
    receipt = getattr(event, "receipt", None)
    if receipt is not None and conn.state is not ConnectionState.CLOSED:
        yield Receipt(receipt)


#: The client target's subscriptions: (id, destination); the first uses the case's ack mode.
CLIENT_SUBSCRIPTIONS = (("s-1", "/queue/a"), ("0", "/queue/b"), ("1", "/topic/c"))
CLIENT_RECEIPTS = ("r-sub", "r-send-1", "r-send-2", "r-send-3", "r-ack-1", "r-unsub", "r-disc")
ACK_MODES = ("client-individual", "client", "auto", "client")


def check_client(data: bytes) -> None:
    """ClientConnection, after a valid handshake, fed arbitrary server bytes.

    The client has subscribed (ack mode from the case) and awaits a few
    receipts; it acknowledges every message that asks for it, which must
    always be allowed.
    """
    case = Case.from_bytes(data)
    version = case.version
    conn = ClientConnection(strict=case.strict, limits=case.limits)
    conn.send(Connect(host="/", accept_versions=(version,), heartbeat=(1000, 1000)))
    conn.receive_data(
        FrameEncoder("1.0").encode(
            Frame("CONNECTED", (("version", version), ("heart-beat", "1000,1000")))
        )
    )
    assert isinstance(conn.next_event(), Connected)
    ack = ACK_MODES[case.ack_mode]
    if version == "1.0" and ack == "client-individual":
        ack = "client"
    for n, (ident, destination) in enumerate(CLIENT_SUBSCRIPTIONS):
        mode = ack if n == 0 else ACK_MODES[n]
        conn.send(Subscribe(destination, id=ident, ack=mode))  # type: ignore[arg-type]
    for receipt in CLIENT_RECEIPTS:
        conn.send(Subscribe("/queue/r", id=receipt, receipt=receipt))
    bound = memory_bound(case.limits)
    try:
        for chunk in [*case.chunks(), None]:
            conn.receive_data(chunk)
            while (event := conn.next_event()) is not None:
                if _wants_ack(conn, event):
                    assert isinstance(event, Message)
                    conn.ack(event)
            assert conn.buffered <= bound, (conn.buffered, bound)
    except RemoteProtocolError as exc:
        assert conn.state is ConnectionState.CLOSED, conn.state
        _check_failed_connection(conn, exc)
        return
    assert conn.next_event() is None


def _wants_ack(conn: ClientConnection, event: object) -> bool:
    if not isinstance(event, Message) or event.unknown_subscription:
        return False
    if conn.state is not ConnectionState.CONNECTED:
        return False
    key = event.subscription if event.subscription is not None else event.destination
    subscription = conn.subscriptions.get(key)
    return subscription is not None and subscription.ack != "auto"


def _check_failed_connection(
    conn: ClientConnection | ServerConnection, exc: RemoteProtocolError
) -> None:
    try:
        conn.next_event()
    except RemoteProtocolError as again:
        assert again is exc, (again, exc)
    else:
        raise AssertionError("a failed connection returned an event")


#: Every fuzz target by name.
TARGETS: dict[str, Callable[[bytes], None]] = {
    "decoder": check_decoder,
    "server": check_server,
    "client": check_client,
}


# -------------------------------------------------------------------------------- deep targets
# Structure-aware: the input is a recipe (fuzzing.streams, fuzzing.sessions) for a
# long stream of frames or a whole session.  Each is fed whole and again in random
# chunks, under a bounded stack; both feedings must give the same outcome.

#: Python frames the library may use below the harness (it uses a handful).
STACK_ALLOWANCE = 60


def _stack_depth() -> int:
    frame = sys._getframe()
    depth = 0
    while frame is not None:
        depth += 1
        frame = frame.f_back  # type: ignore[assignment]
    return depth


class _BoundedStack:
    """Lower the recursion limit to the current depth plus STACK_ALLOWANCE.

    A recursion deeper than that raises RecursionError, which no property
    accepts: the library's stack depth must not grow with the input.
    """

    def __enter__(self) -> None:
        self._saved = sys.getrecursionlimit()
        sys.setrecursionlimit(_stack_depth() + STACK_ALLOWANCE)

    def __exit__(self, *exc: object) -> None:
        sys.setrecursionlimit(self._saved)


@dataclass
class Outcome:
    """What one feeding produced: everything compared between feedings."""

    events: list[object]
    kind: object = None
    dropped: int = 0
    state: object = None
    sent: list[bytes] | None = None


def _deep_config(data: bytes) -> tuple[Case, bytes, random.Random]:
    case = Case.from_bytes(data)
    return case, data[2:], random.Random(data)


def _feedings(stream: bytes, rng: random.Random) -> list[list[bytes]]:
    chunked = list(random_cuts(rng, stream))
    return [[stream] if stream else [], chunked]


def check_stream(data: bytes) -> None:
    """A FrameDecoder fed a long structured stream, whole and in random chunks."""
    case, recipe, rng = _deep_config(data)
    stream = recipe_stream(recipe, case.version, data)
    outcomes = [
        _decode(chunks, case.version, case.strict, case.limits) for chunks in _feedings(stream, rng)
    ]
    assert outcomes[0] == outcomes[1], (outcomes[0].kind, outcomes[1].kind)


def _decode(chunks: list[bytes], version: Version, strict: bool, limits: Limits) -> Outcome:
    decoder = FrameDecoder(version, strict=strict, limits=limits)
    bound = memory_bound(limits)
    out = Outcome([])
    with _BoundedStack():
        try:
            for chunk in [*chunks, None]:
                decoder.receive_data(chunk)
                while (item := decoder.next_frame()) is not None:
                    out.events.append(item)
                assert decoder.buffered <= bound, (decoder.buffered, bound)
        except RemoteProtocolError as exc:
            out.kind = exc.kind
            _check_failed_decoder(decoder, exc)
    return out


def check_server_session(data: bytes) -> None:
    """A ServerConnection fed a whole client session (then more), whole and chunked."""
    _check_session(data, client_script, _serve)


def _check_session(
    data: bytes,
    script: Callable[[bytes, Version, bytes], bytes],
    run: Callable[[list[bytes], Case], Outcome],
) -> None:
    """Feed the session ``script`` makes of ``data`` whole and chunked; the outcomes agree."""
    case, recipe, rng = _deep_config(data)
    stream = script(recipe, case.version, data)
    outcomes = [run(chunks, case) for chunks in _feedings(stream, rng)]
    assert outcomes[0] == outcomes[1], (outcomes[0].kind, outcomes[1].kind)


def _serve(chunks: list[bytes], case: Case) -> Outcome:
    conn = ServerConnection(strict=case.strict, limits=case.limits)
    bound = memory_bound(case.limits)
    out = Outcome([], sent=[])
    assert out.sent is not None
    with _BoundedStack():
        try:
            for chunk in [*chunks, None]:
                conn.receive_data(chunk)
                while (event := conn.next_event()) is not None:
                    out.events.append(event)
                    message_id = f"m-{event.key}" if isinstance(event, Subscribe) else ""
                    for reply in _server_replies(conn, event, message_id, heartbeat=False):
                        try:
                            out.sent.append(conn.send(reply))
                        except LocalProtocolError as exc:
                            out.sent.append(repr(exc).encode())
                assert conn.buffered <= bound, (conn.buffered, bound)
        except RemoteProtocolError as exc:
            out.kind = exc.kind
            assert conn.state is ConnectionState.CLOSED, conn.state
            hint = exc.event_hint
            assert isinstance(hint, Error), exc
            assert conn.send(hint).startswith(b"ERROR"), hint
            _check_failed_connection(conn, exc)
    out.dropped, out.state = conn.dropped, conn.state
    return out


def check_client_session(data: bytes) -> None:
    """A subscribed ClientConnection fed a whole server session (then more), whole and chunked."""
    _check_session(data, server_script, _consume)


def _consume(chunks: list[bytes], case: Case) -> Outcome:
    version = case.version
    conn = ClientConnection(strict=case.strict, limits=case.limits)
    conn.send(Connect(host="/", accept_versions=(version,)))
    bound = memory_bound(case.limits)
    out = Outcome([])
    with _BoundedStack():
        try:
            for chunk in [*chunks, None]:
                conn.receive_data(chunk)
                while (event := conn.next_event()) is not None:
                    out.events.append(event)
                    if isinstance(event, Connected):
                        _subscribe(conn, case)
                    elif _wants_ack(conn, event):
                        assert isinstance(event, Message)
                        conn.ack(event)
                assert conn.buffered <= bound, (conn.buffered, bound)
        except RemoteProtocolError as exc:
            out.kind = exc.kind
            assert conn.state is ConnectionState.CLOSED, conn.state
            _check_failed_connection(conn, exc)
    out.dropped, out.state = conn.dropped, conn.state
    return out


def _subscribe(conn: ClientConnection, case: Case) -> None:
    modes = 2 if case.version == "1.0" else 3
    for n, ident in enumerate(SUB_IDS):
        mode = SESSION_ACK_MODES[(n + case.ack_mode) % modes]
        conn.send(Subscribe(f"/q/{ident}", id=ident, ack=mode))  # type: ignore[arg-type]
    for n in range(4):
        conn.send(Subscribe("/q/r", id=f"r{n}", receipt=f"r{n}"))


TARGETS.update(
    {
        "stream": check_stream,
        "server_session": check_server_session,
        "client_session": check_client_session,
    }
)

# The two builds compared, in one process (fuzzing.differential imports nothing from here).
from .differential import check_builds_agree  # noqa: E402

TARGETS["differential"] = check_builds_agree


def check_builds_agree_unbounded(data: bytes) -> None:
    """The differential property under limits of any size, up to and past 2**64."""
    check_builds_agree(data, unbounded=True)


TARGETS["unbounded"] = check_builds_agree_unbounded
