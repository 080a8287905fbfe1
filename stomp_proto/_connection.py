"""ClientConnection and ServerConnection: a STOMP session as a sans-IO state machine.

Both halves share one engine (``_Connection``): bytes in through
``receive_data``, events out one at a time through ``next_event``, events in
through ``send`` which returns the bytes to write, and time in only through
``handle_timer(now)``.  What differs between the roles is data - which events
each may send and receive in which state (the tables in ``_state``) - and the
bookkeeping in the two subclasses: subscriptions, pending acknowledgements,
transactions, receipts and version negotiation.

Rules for every method: a refused ``send`` raises ``LocalProtocolError`` and
changes nothing; the state advances only as events are consumed from
``next_event``; bad peer input raises ``RemoteProtocolError`` and closes the
session.

How a session ends is one model (docs/connection.rst, "How a session ends"):
each ending - an ERROR either way, the RECEIPT of a DISCONNECT, a DISCONNECT
without receipt, a heart-beat timeout, the end of the stream, a protocol
error - leaves the state CLOSED and is kept in ``ended_by``; ``receive_data``
accepts and drops whatever comes after it.  It is reported once, by
``next_event`` or by the ``send`` that made it, and the end of the stream
then gives one ConnectionClosed - except a protocol error, which is sticky:
``next_event`` raises it again on every call.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from ._build import native
from ._checks import check_bool, check_data, check_event, check_limits, check_number, wrong_type
from ._decoder import FrameDecoder
from ._encoder import FrameEncoder
from ._errors import ErrorKind, LocalProtocolError, RemoteProtocolError, as_remote
from ._events import (
    EVENT_FOR_COMMAND,
    Abort,
    Ack,
    Begin,
    Commit,
    Connect,
    Connected,
    ConnectionClosed,
    Disconnect,
    Error,
    Event,
    FrameEvent,
    HeartBeat,
    HeartBeatTimeout,
    Message,
    Nack,
    Receipt,
    Send,
    Subscribe,
    Unsubscribe,
    evolve,
)
from ._frame import VERSIONS, Frame, Version
from ._heartbeat import HeartBeatTimer, negotiate
from ._limits import Limits
from ._state import (
    CLIENT_RECEIVES,
    CLIENT_SENDS,
    CLOSED,
    CONNECTED,
    DISCONNECTING,
    IDLE,
    SERVER_RECEIVES,
    SERVER_SENDS,
    ConnectionState,
    Transitions,
    after_disconnect,
    after_receipt,
)

__all__ = ["ClientConnection", "ServerConnection"]

#: A SEND without a receipt as its fields: destination, body, content_type,
#: transaction, headers, content_length (see ClientConnection._fast_send_parts).
SendParts = tuple[str, bytes, str | None, str | None, tuple[tuple[str, str], ...], bool]


#: A server's default allowance on its client's heart-beat interval before the
#: client counts as gone, and a client's with a broker whose beats come late
#: (:data:`LATE_BEATERS`).  2.5: ActiveMQ sends its beats up to twice the interval
#: apart (measured: its write check skips a beat after any frame), and RabbitMQ
#: itself allows three intervals of silence.
DEFAULT_TOLERANCE = 2.5
#: A client's default allowance on its broker's interval: 1.25, so that a broker
#: gone silent is noticed within 1.5 intervals (see :mod:`._heartbeat`), while
#: one that beats every interval, as 1.2 §Heart-beating asks, has a quarter
#: interval of margin (the spec's SHOULD).  RabbitMQ beats twice per interval.
CLIENT_TOLERANCE = 1.25
#: The start of the CONNECTED ``server`` header of brokers whose beats come up to
#: twice the interval apart: a client whose tolerance was not given allows them
#: :data:`DEFAULT_TOLERANCE`.
LATE_BEATERS = ("ActiveMQ/",)


class _PendingAcks:
    """Messages delivered on client-acknowledged subscriptions and not yet (N)ACKed.

    Keyed by what the version's ACK names: the ``ack`` header in 1.2, the
    ``message-id`` before.  Kept per subscription and in delivery order, as
    client mode acknowledges cumulatively (1.2 §SUBSCRIBE ack Header).  A
    client also keeps the :class:`Message` each came in, so that it can tell
    a message of this connection from an equal-looking one of an earlier
    connection (the one ledger of unacknowledged deliveries every client uses).
    """

    __slots__ = ("_by_subscription", "_owner")

    def __init__(self) -> None:
        self._by_subscription: dict[str, dict[str, Message | None]] = {}
        self._owner: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._owner)

    def delivered(self, subscription: str, ident: str, message: Message | None = None) -> None:
        self._by_subscription.setdefault(subscription, {})[ident] = message
        self._owner[ident] = subscription

    def message(self, subscription: str, ident: str) -> Message | None:
        """The MESSAGE recorded with a pending delivery, if one was."""
        pending = self._by_subscription.get(subscription)
        return None if pending is None else pending.get(ident)

    def find(self, ident: str, subscription: str | None) -> str | None:
        """The subscription awaiting an (N)ACK for ``ident``, if any."""
        if subscription is not None:
            return subscription if ident in self._by_subscription.get(subscription, ()) else None
        return self._owner.get(ident)

    def covered(self, subscription: str, ident: str, cumulative: bool) -> tuple[str, ...]:
        """What an (N)ACK of ``ident`` settles: it alone, or with every earlier one."""
        if not cumulative:
            return (ident,)
        settled = []
        for key in self._by_subscription[subscription]:
            settled.append(key)
            if key == ident:
                break
        return tuple(settled)

    def settle(self, subscription: str, idents: tuple[str, ...]) -> None:
        pending = self._by_subscription[subscription]
        for key in idents:
            del pending[key]
            if self._owner.get(key) == subscription:
                del self._owner[key]

    def forget(self, subscription: str) -> None:
        for key in self._by_subscription.pop(subscription, {}):
            if self._owner.get(key) == subscription:
                del self._owner[key]

    def for_subscription(self, subscription: str) -> tuple[str, ...]:
        return tuple(self._by_subscription.get(subscription, ()))


#: The native twin (stomp_proto/_connection_native.pyx), or None: the pure build.
_native = native("_connection_native")


class _Events:
    """``iter(connection)``: each step is ``connection.next_event()``; it stops at
    ``None`` and resumes once more bytes have arrived (see ``_Connection.__iter__``).

    Not a generator: a generator ends for good at its first stop or error.  The
    accelerated build's ``ClientEvents`` behaves the same.
    """

    __slots__ = ("_connection",)

    def __init__(self, connection: _Connection) -> None:
        self._connection = connection

    def __iter__(self) -> _Events:
        return self

    def __next__(self) -> Event:
        event = self._connection.next_event()
        if event is None:
            raise StopIteration
        return event


class _Connection:
    """The engine both roles share; see the module docstring."""

    _sends: Transitions
    _receives: Transitions
    _peer_role: str
    #: Whether an UNSUBSCRIBE with headers of its own may name a subscription that
    #: is not open (see _check_unsubscribe): a client's may.
    _removes_durable: bool = False
    #: The accelerated build's ``next_event`` for an open session (a method), or None.
    _fast_receive: Callable[[], Event | None] | None = None
    #: The accelerated build's ``send`` of a plain SEND (a method), or None.
    _fast_send: Callable[[Event], bytes | None] | None = None
    #: The accelerated build's iterator over the events available now, or None.
    _fast_events: Callable[[Any], Iterator[Event]] | None = None
    #: A client's ``send(Send(destination, body, content_type=..., transaction=...,
    #: headers=..., content_length=...))`` from those six fields in a tuple, without
    #: the event, for the client adapters (a method; it returns None when it leaves
    #: the SEND to send()): the accelerated build's, else None.  (Declared here, in
    #: this module, so that typing.get_type_hints resolves it on the public class.)
    _fast_send_parts: Callable[[SendParts], bytes | None] | None = None

    def __init__(
        self,
        *,
        strict: bool = True,
        limits: Limits | None = None,
        heartbeat_tolerance: float = DEFAULT_TOLERANCE,
    ) -> None:
        name = type(self).__name__
        check_bool(f"{name}(strict=...)", strict)
        check_limits(f"{name}(limits=...)", limits)
        check_number(f"{name}(heartbeat_tolerance=...)", heartbeat_tolerance, minimum=1.0)
        self._strict = strict
        self._decoder = FrameDecoder(strict=strict, limits=limits)
        self._decoder._use_handshake_rules()
        # Before a version is agreed only CONNECT, CONNECTED and ERROR are sent;
        # the first two are never escaped, and 1.0 rules keep ERROR readable to all.
        self._encoder = FrameEncoder("1.0")
        self._state = IDLE
        self._version: Version | None = None
        self._tolerance = heartbeat_tolerance
        self._timer: HeartBeatTimer | None = None
        self._heartbeat: tuple[int, int] | None = None
        self._queued: deque[Event] = deque()
        self._eof = False
        self._closed_reported = False
        self._error: RemoteProtocolError | None = None
        self._ended_by: Event | RemoteProtocolError | None = None
        self._subscriptions: dict[str, Subscribe] = {}
        self._pending = _PendingAcks()
        self._transactions: set[str] = set()
        self._disconnect_receipt: str | None = None
        self._dropped = 0
        #: Between the check of an ACK or NACK and its booking: what it settles.
        self._acking: tuple[str, tuple[str, ...]] | None = None

    # -- inspection ------------------------------------------------------------

    @property
    def state(self) -> ConnectionState:
        """The session's state (changes only as events are sent or consumed)."""
        return self._state

    @property
    def version(self) -> Version | None:
        """The negotiated protocol version; ``None`` before the handshake."""
        return self._version

    @property
    def heartbeat_tolerance(self) -> float:
        """How many of the peer's heart-beat intervals may pass in silence before
        the session ends (what was given, or the default, which for a client
        follows the server: see :class:`ClientConnection`)."""
        return self._tolerance

    @property
    def heartbeat(self) -> tuple[int, int] | None:
        """Negotiated ``(send every ms, expect every ms)``; ``None`` before negotiation.

        ``None`` until the CONNECTED frame is sent (server) or received
        (client); then what was agreed, ``(0, 0)`` when neither side beats.
        It keeps that value after the session closes (``state`` says so).
        """
        return self._heartbeat

    @property
    def subscriptions(self) -> dict[str, Subscribe]:
        """Open subscriptions by id (in 1.0 without an id, by destination); a copy."""
        return dict(self._subscriptions)

    @property
    def transactions(self) -> frozenset[str]:
        """Transactions begun and not yet committed or aborted."""
        return frozenset(self._transactions)

    @property
    def buffered(self) -> int:
        """How many received bytes are held, not yet returned as events.

        Once ``next_event`` has returned ``None`` that is at most one partial
        frame, which the :class:`Limits` bound.
        """
        return self._decoder.buffered

    @property
    def ended_by(self) -> Event | RemoteProtocolError | None:
        """What ended the session; ``None`` while it has not ended.

        The first of: the :class:`Error` received or sent, the :class:`Receipt`
        of the DISCONNECT (received or sent), the :class:`Disconnect` without a
        receipt (sent or received), the :class:`HeartBeatTimeout`, the
        :class:`ConnectionClosed` of a stream that ended first, or the
        :class:`RemoteProtocolError` the peer's input raised.  Set at the
        moment ``state`` becomes CLOSED, and kept.
        """
        return self._ended_by

    @property
    def ended_cleanly(self) -> bool:
        """Whether the session is over and ended as the protocol intends.

        True only after a DISCONNECT: its RECEIPT, or the DISCONNECT itself
        when it asked for none.  Every other ending (see :attr:`ended_by`) is a
        failure, as is a session still open (``False``).
        """
        return isinstance(self._ended_by, (Receipt, Disconnect))

    @property
    def dropped(self) -> int:
        """Frames and heart-beats received after the session closed, and dropped.

        Once the session is over (our DISCONNECT was receipted, the peer sent
        ERROR, a heart-beat timeout) anything still arriving is counted here
        rather than returned; RabbitMQ, for one, sends a RECEIPT after ERROR.
        After a protocol error nothing is parsed any more, so nothing is
        counted: the bytes are discarded unread.
        """
        return self._dropped

    def pending_acks(self, subscription: str) -> tuple[str, ...]:
        """Messages of ``subscription`` delivered and not yet (N)ACKed, oldest first.

        Each is named as its version's ACK names it: the ``ack`` header in 1.2,
        the ``message-id`` before.
        """
        return self._pending.for_subscription(subscription)

    # -- sending ---------------------------------------------------------------

    def send(self, event: Event) -> bytes:
        """The bytes that carry ``event`` to the peer; raises LocalProtocolError if not allowed."""
        # One path for every frame, kept cheap for the frames sent most (SEND,
        # ACK, MESSAGE): a table lookup by type, hooks that dispatch on the
        # type once, and no copy of the event.
        if self._fast_send is not None:
            sent: bytes | None = self._fast_send(event)  # the accelerated build's SEND
            if sent is not None:
                return sent
        next_state = self._sends.get(self._state, _NO_TRANSITIONS).get(type(event))
        if next_state is None:
            if isinstance(event, HeartBeat):
                if self._state not in (CONNECTED, DISCONNECTING):
                    raise self._refuse_state(event)
                self._note_sent()
                return b"\n"
            if not isinstance(event, FrameEvent):
                if not isinstance(event, Event):
                    raise wrong_type("send() event", "an event such as Send(...)", event)
                raise LocalProtocolError(
                    ErrorKind.BAD_STATE, f"{type(event).__name__} cannot be sent"
                )
            next_state = self._send_outside_table(event)
        assert isinstance(event, FrameEvent)
        # Check and encode everything before changing anything.
        check_event(event)
        event = self._check_send(event)
        frame = event.to_frame(self._version or "1.0")
        encoder = self._encoder
        if type(event) is Connect and event.frame_command == "STOMP":
            # STOMP is escaped (unlike CONNECT), by the rules of the best version offered.
            encoder = FrameEncoder(max(event.accept_versions))
        data = encoder.encode(frame, content_length=getattr(event, "content_length", True))
        self._state = self._after_send(event, next_state)
        self._note_sent()
        return data

    def _send_outside_table(self, event: FrameEvent) -> ConnectionState:
        raise self._refuse_state(event)

    def _refuse_state(self, event: Event) -> LocalProtocolError:
        name = getattr(event, "command", type(event).__name__)
        if self._state is CLOSED:
            return LocalProtocolError(
                ErrorKind.CLOSED, f"cannot send {name}: the connection is closed"
            )
        return LocalProtocolError(
            ErrorKind.BAD_STATE, f"cannot send {name} when the connection is {self._state.value}"
        )

    def _check_send(self, event: FrameEvent) -> FrameEvent:
        """Validate an outgoing event against the session; may complete it. No side effects."""
        return event

    def _after_send(self, event: FrameEvent, next_state: ConnectionState) -> ConnectionState:
        """Record what sending ``event`` changed; returns the new state."""
        return next_state

    def _note_sent(self) -> None:
        if self._timer is not None:
            self._timer.sent_since_check = True

    # -- receiving -------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray | memoryview | None) -> None:
        """Add ``data``, bytes received from the peer; ``None`` means the peer closed the stream.

        Accepted in every state, after every ending; only data after ``None``
        is refused (LocalProtocolError, ``ErrorKind.CLOSED``): the caller said
        the stream was over.  After a protocol error the bytes are discarded
        unread (the stream can no longer be parsed).
        """
        check_data(data)
        if self._eof:
            raise LocalProtocolError(ErrorKind.CLOSED, "data received after end of stream")
        if data is None:
            self._eof = True
            if self._error is not None:
                return
        elif not data or self._error is not None:
            return
        elif self._timer is not None:
            # Any data at all is a sign of life (1.2 §Heart-beating).
            self._timer.received_since_check = True
        self._decoder.receive_data(data)

    def __iter__(self) -> Iterator[Event]:
        """``for event in connection``: the events available now.

        The iterator is a live view of :meth:`next_event`: each step returns
        what ``next_event()`` returns, and the loop stops where it returns
        ``None``.  The same iterator yields again once more bytes have arrived
        (as a :class:`FrameDecoder` and a file do), and after a protocol error
        every step raises that error again, as ``next_event()`` does.
        """
        if self._fast_events is not None:
            return self._fast_events(self)
        return _Events(self)

    def next_event(self) -> Event | None:
        """The next event from the peer, or ``None`` if more data is needed.

        ``ConnectionClosed`` comes once, after the last frame, when the stream
        has ended - whatever ended the session before; ``HeartBeatTimeout``
        comes when ``handle_timer`` found the peer silent.  Raises
        RemoteProtocolError on bad input: the session is then closed, and the
        error is sticky - every later call raises the same one (the stream can
        no longer be parsed); :attr:`ended_by` keeps it too.
        """
        if self._queued:
            return self._queued.popleft()
        if self._error is not None:
            raise self._error
        if self._fast_receive is not None and self._state is CONNECTED:
            # The accelerated build reads the next frame and, for a MESSAGE, books
            # it natively; None: no whole frame at the front of the buffer.
            event: Event | None = self._fast_receive()
            if event is not None:
                return event
        while True:
            try:
                item = self._decoder.next_frame()
            except RemoteProtocolError as exc:
                raise self._fail(exc, None) from None
            if item is None:
                if self._eof and not self._closed_reported:
                    self._closed_reported = True
                    closed = ConnectionClosed()
                    self._close(closed)
                    return closed
                return None
            if self._state is not CLOSED:
                break
            # The session is over (our DISCONNECT, their ERROR): frames still
            # on the way - RabbitMQ sends a RECEIPT after an ERROR - are dropped,
            # in a loop: a peer may send any number of them.
            self._dropped += 1
        return self._event_of(item)

    def _event_of(self, item: Frame | HeartBeat) -> Event:
        """The event of a frame or heart-beat received while the session is not closed."""
        if isinstance(item, HeartBeat):
            return item
        try:
            return self._receive_frame(item)
        except LocalProtocolError as local:
            # The one place where a check's error becomes the peer's: every
            # check below raises LocalProtocolError, as it does when sending.
            raise self._fail(as_remote(local), item) from None
        except RemoteProtocolError as exc:
            raise self._fail(exc, item) from None

    def _receive_frame(self, frame: Frame) -> Event:
        cls = EVENT_FOR_COMMAND.get(frame.command)
        if cls is None or (cls in _SERVER_FRAMES) != (self._peer_role == "server"):
            raise LocalProtocolError(
                ErrorKind.BAD_COMMAND,
                f"a {self._peer_role} does not send {frame.command[:40]!r} frames",
            )
        next_state = self._receives.get(self._state, {}).get(cls)
        if next_state is None:
            raise LocalProtocolError(
                ErrorKind.BAD_STATE,
                f"{frame.command} frame received when the connection is {self._state.value}",
            )
        event = cls.from_frame(frame, self._version or "1.0")
        event = self._check_receive(event)
        self._state = self._after_receive(event, next_state)
        return event

    def _check_receive(self, event: FrameEvent) -> FrameEvent:
        return event

    def _after_receive(self, event: FrameEvent, next_state: ConnectionState) -> ConnectionState:
        return next_state

    def _fail(self, exc: RemoteProtocolError, frame: Frame | None) -> RemoteProtocolError:
        self._close(exc)
        self._error = exc
        return exc

    def _close(self, ending: Event | RemoteProtocolError) -> None:
        """End the session; ``ending`` is kept as :attr:`ended_by` unless one was."""
        self._state = CLOSED
        self._timer = None
        if self._ended_by is None:
            self._ended_by = ending

    # -- time ------------------------------------------------------------------

    def get_timer(self) -> float | None:
        """When ``handle_timer`` must next be called (same clock as its ``now``).

        ``None`` while no heart-beats are in force.  Right after the handshake
        it returns 0.0 - "now" - so that the first call can learn the time.
        It changes only when ``handle_timer`` runs, when the handshake
        completes and when the session ends: ask again after those.
        """
        if self._timer is None or self._state is CLOSED:
            return None
        return self._timer.next_deadline()

    def handle_timer(self, now: float, *, reading: bool = True) -> bytes:
        """Act on the time ``now``: return the bytes to send (an EOL heart-beat or nothing).

        ``now`` is a reading of any monotonic clock in seconds, such as
        :func:`time.monotonic`; the connection only compares it with earlier
        readings and with :meth:`get_timer`.

        When the peer has been silent past its deadline, a
        :class:`HeartBeatTimeout` event is queued for ``next_event`` and the
        session is closed.  Calling early or without heart-beats does nothing.
        Pass ``reading=False`` while deliberately not reading from the peer
        (back-pressure from a slow consumer): heart-beats are still due, but
        data the caller is not reading cannot count against the peer.
        """
        check_number("handle_timer() now", now)
        timer = self._timer
        if timer is None or self._state is CLOSED:
            return b""
        beat, silence = timer.check(now, reading)
        if silence is not None:
            timeout = HeartBeatTimeout(silence)
            self._queued.append(timeout)
            self._close(timeout)
            return b""
        return b"\n" if beat else b""

    def _start_heartbeats(self, ours: tuple[int, int], theirs: tuple[int, int]) -> None:
        send_ms, expect_ms = negotiate(ours, theirs)
        self._heartbeat = (send_ms, expect_ms)
        if send_ms or expect_ms:
            self._timer = HeartBeatTimer(send_ms, expect_ms, self._tolerance)

    def _agree(self, version: Version) -> None:
        self._version = version
        self._decoder.version = version
        self._encoder.version = version

    # -- the books of client frames, kept alike by both roles --------------------------
    # A client applies its frames as it sends them, a server as it receives them.
    # A violation raises LocalProtocolError either way; next_event turns it into
    # RemoteProtocolError when the frame came from the peer.

    def _check_client_frame(self, event: FrameEvent) -> FrameEvent:
        """Check a client frame against the session. No side effects.

        Raises LocalProtocolError, for a frame we send and one we received alike
        (``next_event`` turns it into RemoteProtocolError).
        """
        cls = type(event)
        transaction = getattr(event, "transaction", None)
        if transaction is not None:
            if cls is Begin:
                if transaction in self._transactions:
                    raise LocalProtocolError(
                        ErrorKind.BAD_STATE, f"transaction {transaction!r} has already begun"
                    )
            elif transaction not in self._transactions:
                raise LocalProtocolError(
                    ErrorKind.BAD_STATE, f"no transaction {transaction!r} is open"
                )
        check = _CLIENT_FRAME_CHECKS.get(cls)
        if check is not None:
            check(self, event)
        return event

    def _apply_client_frame(
        self, event: FrameEvent, next_state: ConnectionState
    ) -> ConnectionState:
        """Record what a client frame changed; returns the new state."""
        book = _CLIENT_FRAME_BOOKS.get(type(event))
        return next_state if book is None else book(self, event, next_state)

    # One method per client frame that the books know; SEND needs none.

    def _check_subscribe(self, event: Subscribe) -> None:
        if event.key in self._subscriptions:
            raise LocalProtocolError(
                ErrorKind.BAD_STATE, f"subscription id {event.key!r} is already in use"
            )

    def _check_unsubscribe(self, event: Unsubscribe) -> None:
        # 1.2 §UNSUBSCRIBE: the id names an existing subscription.  A durable one
        # exists at the broker after the connection's has ended, and brokers
        # remove it by an UNSUBSCRIBE naming it in a header of theirs (ActiveMQ's
        # activemq.subscriptionName, after its consumer has gone): a client's with
        # headers of its own is let through.  A server still refuses it: it has
        # no such subscription.
        if event.key not in self._subscriptions and not (event.headers and self._removes_durable):
            raise LocalProtocolError(ErrorKind.BAD_STATE, f"no subscription {event.key!r}")

    def _check_ack(self, event: Ack | Nack) -> None:
        # Kept for the booking that follows (and for a server, to tell the
        # application what the ACK settled); each ACK is checked right before.
        self._acking = self._ack_covers(event)

    def _book_subscribe(self, event: Subscribe, next_state: ConnectionState) -> ConnectionState:
        self._subscriptions[event.key] = event
        return next_state

    def _book_unsubscribe(self, event: Unsubscribe, next_state: ConnectionState) -> ConnectionState:
        key = event.key
        assert key is not None
        if self._subscriptions.pop(key, None) is not None:
            self._pending.forget(key)
        return next_state

    def _book_ack(self, event: Ack | Nack, next_state: ConnectionState) -> ConnectionState:
        assert self._acking is not None
        subscription, covered = self._acking
        self._acking = None
        self._pending.settle(subscription, covered)
        return next_state

    def _book_begin(self, event: Begin, next_state: ConnectionState) -> ConnectionState:
        self._transactions.add(event.transaction)
        return next_state

    def _book_commit(self, event: Commit | Abort, next_state: ConnectionState) -> ConnectionState:
        self._transactions.discard(event.transaction)
        return next_state

    def _book_disconnect(self, event: Disconnect, next_state: ConnectionState) -> ConnectionState:
        # 1.2 §BEGIN: open transactions end with the session.
        self._transactions.clear()
        self._disconnect_receipt = event.receipt
        return self._closing(after_disconnect(next_state, event.receipt), event)

    def _closing(self, next_state: ConnectionState, event: FrameEvent) -> ConnectionState:
        """``next_state``, after ending the session by ``event`` if it is CLOSED."""
        if next_state is CLOSED:
            self._close(event)
        return next_state

    # -- acknowledgements, shared by both roles ----------------------------------

    def _ack_target(self, event: Ack | Nack) -> tuple[str, str]:
        """(subscription, ident) of the pending message ``event`` acknowledges."""
        if isinstance(event, Nack) and self._version == "1.0":
            raise LocalProtocolError(ErrorKind.BAD_COMMAND, "NACK does not exist in STOMP 1.0")
        if self._version == "1.2":
            ident, subscription = event.id, None
        else:
            ident = event.message_id
            subscription = event.subscription if self._version == "1.1" else None
        subscription = self._pending.find(ident, subscription) if ident is not None else None
        if subscription is None or ident is None:
            raise LocalProtocolError(
                ErrorKind.BAD_STATE,
                f"{event.command} for a message that awaits no acknowledgement on this connection",
            )
        return subscription, ident

    def _ack_covers(self, event: Ack | Nack) -> tuple[str, tuple[str, ...]]:
        """(subscription key, deliveries settled) for ``event``; LocalProtocolError if none."""
        subscription, ident = self._ack_target(event)
        cumulative = self._subscriptions[subscription].ack == "client"
        return subscription, self._pending.covered(subscription, ident, cumulative)


_SERVER_FRAMES = frozenset({Connected, Message, Receipt, Error})
#: The client frames with a ``receipt`` field (CONNECT has none: 1.2 §CONNECT).
_ASKS_FOR_RECEIPT = (Send, Subscribe, Unsubscribe, Ack, Nack, Begin, Commit, Abort, Disconnect)

_Check = Callable[[_Connection, Any], None]
_Book = Callable[[_Connection, Any, ConnectionState], ConnectionState]
#: The session checks and books of client frames, by exact type (the
#: transition tables are keyed the same way).
_CLIENT_FRAME_CHECKS: dict[type[FrameEvent], _Check] = {
    Subscribe: _Connection._check_subscribe,
    Unsubscribe: _Connection._check_unsubscribe,
    Ack: _Connection._check_ack,
    Nack: _Connection._check_ack,
}
_CLIENT_FRAME_BOOKS: dict[type[FrameEvent], _Book] = {
    Subscribe: _Connection._book_subscribe,
    Unsubscribe: _Connection._book_unsubscribe,
    Ack: _Connection._book_ack,
    Nack: _Connection._book_ack,
    Begin: _Connection._book_begin,
    Commit: _Connection._book_commit,
    Abort: _Connection._book_commit,
    Disconnect: _Connection._book_disconnect,
}
_NO_TRANSITIONS: dict[type[Event], ConnectionState] = {}


class ClientConnection(_Connection):
    """The client half of a STOMP session.

    Start with ``send(Connect(...))``; the session is open once
    ``next_event()`` has returned :class:`Connected`.  The client checks its own
    frames against the negotiated version and the session (subscriptions,
    transactions, receipts, pending acknowledgements) and builds the ACK and
    NACK each version wants with :meth:`ack` and :meth:`nack`.

    :param strict: read the server's frames as the specs write them (the
        default).  ``False`` reads them as ``FrameDecoder(strict=False)`` does
        (lower-case commands, blanks around header values ...) and lets a
        RECEIPT nobody asked for pass.
    :param limits: the bounds on every frame received; ``None`` is
        :class:`Limits` ``()``, the generous defaults.
    :param heartbeat_tolerance: how many of the server's heart-beat intervals
        may pass in silence before the session ends with a
        :class:`HeartBeatTimeout` (at least 1.0).  By default 1.25 - a silent
        server is noticed within 1.5 of its intervals - and 2.5 with a server
        whose CONNECTED says it is ActiveMQ, which beats up to two intervals
        apart.
    """

    _sends = CLIENT_SENDS
    _receives = CLIENT_RECEIVES
    _removes_durable = True
    _peer_role = "server"
    if _native is not None:
        _fast_receive = _native.client_next_event
        _fast_send = _native.client_send
        _fast_send_parts = _native.client_send_parts
        _fast_events = _native.ClientEvents
        #: The accelerated build's ACK and NACK of a plain delivery (see ack()).
        _fast_settle = _native.client_settle

    def __init__(
        self,
        *,
        strict: bool = True,
        limits: Limits | None = None,
        heartbeat_tolerance: float | None = None,
    ) -> None:
        super().__init__(
            strict=strict,
            limits=limits,
            heartbeat_tolerance=CLIENT_TOLERANCE
            if heartbeat_tolerance is None
            else heartbeat_tolerance,
        )
        #: Whether the tolerance is the default (it then follows the server: LATE_BEATERS).
        self._tolerance_default = heartbeat_tolerance is None
        self._connect: Connect | None = None
        self._receipts: dict[str, FrameEvent] = {}

    @property
    def pending_receipts(self) -> dict[str, FrameEvent]:
        """Receipt ids asked for and not yet received, with the event that asked; a copy."""
        return dict(self._receipts)

    def ack(
        self, message: Message, *, transaction: str | None = None, receipt: str | None = None
    ) -> bytes:
        """Acknowledge ``message`` with the headers the negotiated version requires.

        Raises LocalProtocolError when ``message`` did not come on this
        connection, even if one with the same ids did (but other headers): after
        a reconnect the broker redelivers it, and only that delivery can be
        acknowledged.

        :param message: the message, as :meth:`next_event` returned it.
        :param transaction: the id of an open transaction (see :class:`Begin`):
            the acknowledgement then takes effect when it commits.
        :param receipt: a receipt id: the server answers with a
            :class:`Receipt` of that id once it has processed the frame.
        :returns: the bytes of the ACK frame, to write.
        """
        if _native is not None and transaction is None and receipt is None:
            data: bytes | None = self._fast_settle(message, True)
            if data is not None:
                return data
        self.check_delivered(message)
        return self.send(Ack.of(message, transaction=transaction, receipt=receipt))

    def nack(
        self, message: Message, *, transaction: str | None = None, receipt: str | None = None
    ) -> bytes:
        """Reject ``message`` (1.1 and later) with the headers the version requires.

        The same checks and parameters as :meth:`ack`: ``transaction`` is an
        open transaction's id, ``receipt`` a receipt id to be answered.

        :returns: the bytes of the NACK frame, to write.
        """
        if _native is not None and transaction is None and receipt is None:
            data: bytes | None = self._fast_settle(message, False)
            if data is not None:
                return data
        self.check_delivered(message)
        return self.send(Nack.of(message, transaction=transaction, receipt=receipt))

    def check_delivered(self, message: Message) -> None:
        """Raise LocalProtocolError if a different delivery with ``message``'s ids is pending.

        :meth:`ack` and :meth:`nack` check this; a client that builds its
        :class:`Ack` itself calls it first.  A message that awaits no
        acknowledgement at all is refused by :meth:`send`.
        """
        if not isinstance(message, Message):
            raise wrong_type(
                "message", "the Message to acknowledge", message, "pass the Message you received"
            )
        ident = message.ack if self._version == "1.2" else message.message_id
        if ident is None:
            return  # the send refuses it, with the version's reason
        delivered = self._pending.message(message.key, ident)
        # The same object, or an equal copy (rebuilt, unpickled): the same delivery.
        if delivered is not None and delivered is not message and delivered != message:
            raise LocalProtocolError(
                ErrorKind.BAD_STATE,
                "this message was not delivered on this connection (one with the same "
                "ids was); after a reconnect the broker redelivers it",
            )

    def _check_send(self, event: FrameEvent) -> FrameEvent:
        receipt = getattr(event, "receipt", None)
        if receipt is not None and receipt in self._receipts:
            raise LocalProtocolError(ErrorKind.BAD_STATE, f"receipt {receipt!r} is already pending")
        if type(event) is Connect:
            if not event.accept_versions or any(v not in VERSIONS for v in event.accept_versions):
                raise LocalProtocolError(
                    ErrorKind.BAD_VERSION, f"accept_versions {event.accept_versions!r} is not valid"
                )
            return event
        return self._check_client_frame(event)

    def _after_send(self, event: FrameEvent, next_state: ConnectionState) -> ConnectionState:
        receipt = getattr(event, "receipt", None)
        if receipt is not None:
            self._receipts[receipt] = event
        if type(event) is Connect:
            self._connect = event
            return next_state
        return self._apply_client_frame(event, next_state)

    def _check_receive(self, event: FrameEvent) -> FrameEvent:
        if isinstance(event, Connected):
            assert self._connect is not None
            if event.version not in self._connect.accept_versions:
                raise LocalProtocolError(
                    ErrorKind.BAD_VERSION,
                    f"server chose STOMP {event.version}, which was not offered",
                )
        elif isinstance(event, Message):
            key = event.key
            subscription = self._subscriptions.get(key)
            if subscription is None:
                # e.g. RabbitMQ's replies to /temp-queue/ destinations.
                return evolve(event, unknown_subscription=True)
            if subscription.ack != "auto":
                ident = event.ack if self._version == "1.2" else event.message_id
                if ident is None:
                    raise LocalProtocolError(
                        ErrorKind.MISSING_HEADER,
                        "MESSAGE for a client-acknowledged subscription has no 'ack' header",
                    )
        elif isinstance(event, Receipt) and event.receipt_id not in self._receipts and self._strict:
            raise LocalProtocolError(
                ErrorKind.BAD_STATE,
                f"RECEIPT for {event.receipt_id!r}, which was not asked for",
            )
        return event

    def _after_receive(self, event: FrameEvent, next_state: ConnectionState) -> ConnectionState:
        if isinstance(event, Connected):
            assert self._connect is not None and event.version is not None
            self._agree(event.version)
            if self._tolerance_default and (event.server or "").startswith(LATE_BEATERS):
                self._tolerance = DEFAULT_TOLERANCE
            self._start_heartbeats(self._connect.heartbeat, event.heartbeat)
        elif isinstance(event, Message) and not event.unknown_subscription:
            key = event.key
            if self._subscriptions[key].ack != "auto":
                ident = event.ack if self._version == "1.2" else event.message_id
                assert ident is not None
                self._pending.delivered(key, ident, event)
        elif isinstance(event, Receipt):
            self._receipts.pop(event.receipt_id, None)
            return self._closing(
                after_receipt(next_state, event.receipt_id, self._disconnect_receipt), event
            )
        elif isinstance(event, Error):
            self._close(event)
        return next_state


class ServerConnection(_Connection):
    """The server half of a STOMP session.

    The application decides policy (authentication, destinations, routing):
    after ``next_event()`` returns :class:`Connect`, it answers with
    ``send(Connected(...))`` to accept - the version is filled in from the
    negotiation - or ``send(Error(...))`` to refuse.  Everything the specs
    decide is checked here; bad client input raises
    :class:`RemoteProtocolError` whose ``event_hint`` is the ERROR to send
    before closing.

    ``strict=False`` is the lenient server mode: it accepts the client
    mistakes RabbitMQ and ActiveMQ both accept - a CONNECT for 1.1 or 1.2
    without ``host``, CR LF in 1.0 and 1.1, bodies on frames that should have
    none, ... - while commands and header values are read exactly as sent;
    see :ref:`strict-and-lenient-servers`.

    :param versions: the protocol versions the server speaks; it agrees on the
        highest one the client also offers, or refuses the CONNECT
        (``BAD_VERSION``).
    :param strict: refuse every client frame the specs forbid (the default);
        ``False`` is the lenient mode above.
    :param limits: the bounds on every frame received; ``None`` is
        :class:`Limits` ``()``, the generous defaults.  A frame over a bound
        raises :class:`RemoteProtocolError` (``TOO_LARGE``).
    :param heartbeat_tolerance: how many of the client's heart-beat intervals
        may pass in silence before the session ends with a
        :class:`HeartBeatTimeout` (2.5; at least 1.0).
    """

    _sends = SERVER_SENDS
    _receives = SERVER_RECEIVES
    _peer_role = "client"

    def __init__(
        self,
        *,
        versions: tuple[Version, ...] = VERSIONS,
        strict: bool = True,
        limits: Limits | None = None,
        heartbeat_tolerance: float = DEFAULT_TOLERANCE,
    ) -> None:
        super().__init__(strict=strict, limits=limits, heartbeat_tolerance=heartbeat_tolerance)
        # Lenient servers read line endings and bodies leniently, never text.
        self._decoder._keep_text()
        if not versions or any(v not in VERSIONS for v in versions):
            raise ValueError(f"versions must be a non-empty subset of {VERSIONS}")
        self._versions = tuple(v for v in VERSIONS if v in versions)
        self._connect: Connect | None = None
        self._offered: Version | None = None
        self._receipts_owed: set[str] = set()
        self._hint: Error | None = None

    @property
    def negotiated_version(self) -> Version | None:
        """The version a CONNECTED will carry: the highest both sides speak."""
        return self._version or self._offered

    def send_receipt(self, event: Event) -> bytes:
        """The RECEIPT that ``event`` asked for, sent: the bytes to write.

        ``b""`` when ``event`` asked for none (no ``receipt`` header, or an event
        that cannot carry one).  The connection never answers a receipt by
        itself: the server sends it once it has done what the frame asked (for a
        SEND, once the message is stored or routed) - 1.2 §RECEIPT.  For a
        DISCONNECT, the RECEIPT ends the session.
        """
        receipt = event.receipt if isinstance(event, _ASKS_FOR_RECEIPT) else None
        return b"" if receipt is None else self.send(Receipt(receipt))

    def _send_outside_table(self, event: FrameEvent) -> ConnectionState:
        # The ERROR suggested by a RemoteProtocolError may still be sent.
        if self._hint is not None and isinstance(event, Error):
            self._hint = None
            return CLOSED
        raise self._refuse_state(event)

    def _check_message(self, event: Message) -> None:
        key = event.key
        subscription = self._subscriptions.get(key)
        if subscription is None:
            raise LocalProtocolError(ErrorKind.BAD_STATE, f"no subscription {key!r}")
        if subscription.ack == "auto":
            return
        if self._version == "1.2" and event.ack is None:
            raise LocalProtocolError(
                ErrorKind.MISSING_HEADER, "MESSAGE for a client-ack subscription needs an 'ack'"
            )
        # What the ACK will name must tell this delivery from every pending one:
        # the ack id (1.2), the message-id in its subscription (1.1) or alone (1.0).
        ident = event.ack if self._version == "1.2" else event.message_id
        scope = key if self._version == "1.1" else None
        if ident is not None and self._pending.find(ident, scope) is not None:
            name = "ack" if self._version == "1.2" else "message-id"
            raise LocalProtocolError(
                ErrorKind.BAD_STATE,
                f"{name} {ident!r} is already pending on this connection; the client "
                "could not tell the two deliveries apart",
            )

    def _book_message(self, event: Message) -> None:
        """Remember a sent MESSAGE that awaits an acknowledgement."""
        key = event.key
        if self._subscriptions[key].ack != "auto":
            ident = event.ack if self._version == "1.2" else event.message_id
            if ident is not None:
                self._pending.delivered(key, ident)

    def _check_send(self, event: FrameEvent) -> FrameEvent:
        if type(event) is Message:  # first: the frame a broker sends most
            self._check_message(event)
        elif isinstance(event, Connected):
            assert self._offered is not None
            if event.version is None:
                event = evolve(event, version=self._offered)
            assert self._connect is not None
            # 1.2 §Protocol Negotiation: the highest version both sides have.
            if event.version != self._offered:
                raise LocalProtocolError(
                    ErrorKind.BAD_VERSION,
                    f"STOMP {event.version} is not the negotiated version {self._offered}",
                )
        elif isinstance(event, Message):
            self._check_message(event)
        elif isinstance(event, Receipt) and event.receipt_id not in self._receipts_owed:
            raise LocalProtocolError(
                ErrorKind.BAD_STATE, f"no frame asked for receipt {event.receipt_id!r}"
            )
        return event

    def _after_send(self, event: FrameEvent, next_state: ConnectionState) -> ConnectionState:
        if type(event) is Message:  # first: the frame a broker sends most
            self._book_message(event)
        elif isinstance(event, Connected):
            assert self._connect is not None and event.version is not None
            self._agree(event.version)
            self._start_heartbeats(event.heartbeat, self._connect.heartbeat)
        elif isinstance(event, Receipt):
            self._receipts_owed.discard(event.receipt_id)
            return self._closing(
                after_receipt(next_state, event.receipt_id, self._disconnect_receipt), event
            )
        elif isinstance(event, Error):
            self._close(event)
            return CLOSED
        return next_state

    def _check_receive(self, event: FrameEvent) -> FrameEvent:
        receipt = getattr(event, "receipt", None)
        if receipt is not None and receipt in self._receipts_owed:
            raise LocalProtocolError(ErrorKind.BAD_STATE, f"receipt {receipt!r} is already pending")
        if isinstance(event, Connect):
            common = [v for v in self._versions if v in event.accept_versions]
            if not common:
                raise LocalProtocolError(
                    ErrorKind.BAD_VERSION,
                    "Supported protocol versions are " + " ".join(self._versions),
                )
            if common[-1] != "1.0" and event.host is None and self._strict:
                raise LocalProtocolError(
                    ErrorKind.MISSING_HEADER, "CONNECT for STOMP 1.1 or later needs a 'host' header"
                )
            return event
        event = self._check_client_frame(event)
        if isinstance(event, (Ack, Nack)):
            # Tell the application what the ACK settled, and on which
            # subscription (a 1.0 client may leave that out).
            assert self._acking is not None
            subscription, covered = self._acking
            named = self._subscriptions[subscription].id
            event = evolve(event, subscription=named, covered=covered)
        return event

    def _after_receive(self, event: FrameEvent, next_state: ConnectionState) -> ConnectionState:
        receipt = getattr(event, "receipt", None)
        if receipt is not None:
            self._receipts_owed.add(receipt)
        if isinstance(event, Connect):
            self._connect = event
            self._offered = next(v for v in reversed(self._versions) if v in event.accept_versions)
            return next_state
        return self._apply_client_frame(event, next_state)

    def _fail(self, exc: RemoteProtocolError, frame: Frame | None) -> RemoteProtocolError:
        super()._fail(exc, frame)
        receipt = frame.get("receipt") if frame is not None else None
        headers: tuple[tuple[str, str], ...] = ()
        if exc.kind is ErrorKind.BAD_VERSION:
            # 1.2 §Protocol Negotiation: the ERROR lists the versions we support.
            headers = (("version", ",".join(self._versions)),)
        # The message header is one line without NUL, whatever text the peer sent.
        summary = exc.message.splitlines()[0][:200].replace("\0", "\\x00") if exc.message else ""
        hint = Error(
            message=summary or exc.kind.value,
            body=exc.message.encode("utf-8"),
            receipt_id=receipt,
            content_type="text/plain",
            headers=headers,
        )
        self._hint = hint
        exc.event_hint = hint
        return exc


if _native is not None:
    _native.use_connection_types(ClientConnection, CONNECTED)
