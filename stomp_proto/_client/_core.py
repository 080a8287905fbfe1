"""What every client adapter does that is not I/O.

The asyncio, trio and thread adapters differ only in how they read, write,
wait and hand results over.  Everything else lives here, once: the options and
the CONNECT they produce, ids for subscriptions, receipts and transactions,
the registry of open subscriptions (:mod:`._registry`: to restore them after
a reconnect), which waiter or subscription each incoming event belongs to,
what error a failure becomes, and the reconnect schedule.

The adapters call :meth:`ClientCore.route` for every event their
ClientConnection returns and carry out the resulting :class:`Route`: hand a
message to a subscription's queue, complete or fail a waiter, or end the
session.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, TypeVar

from .._checks import as_headers, check_bool
from .._connection import ClientConnection, SendParts
from .._errors import LocalProtocolError
from .._events import (
    Abort,
    Ack,
    AckMode,
    Commit,
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
)
from .._protocol_errors import ErrorKind
from ._backoff import Backoff
from ._brokers import Brokers
from ._errors import BrokerError, ClientError, ConnectionLost, HeartBeatLost, timed_out
from ._lifecycle import Lifecycle
from ._options import ConnectOptions
from ._registry import LEFT_REMEMBERED, Handle, Registry
from ._replies import Replies
from ._trace import frame_in, frame_out
from ._trace import log as frame_log

log = logging.getLogger("stomp_proto.client")

__all__ = ["ClientCore", "End", "Reconnects", "Resolve"]


# -- routes: what an adapter does with one event ---------------------------------


@dataclass(frozen=True, slots=True)
class Resolve:
    """Complete the waiter ``key`` (``"connect"`` or a receipt id) with ``value``."""

    key: str
    value: Event


@dataclass(frozen=True, slots=True)
class End:
    """The session is over: fail every waiter and subscription with ``error``."""

    error: ClientError


class Reconnects:
    """Whether to come back after a session ends, and how long to wait first.

    The rule, the same in every adapter: any ending is worth another try (a
    lost transport, a silent broker, an ERROR - a broker shutting down sends
    one), with waits from :meth:`Backoff.delays`.  The waits start over after
    a session that stayed up :attr:`Backoff.held_after` seconds; failed
    attempts and shorter sessions make them grow.  Endings by ERROR (and
    logins refused by one) count: after :attr:`Backoff.error_attempts` in a
    row the client gives up, since the broker keeps saying no.  An ERROR that
    refused a restored subscription does not count: that subscription has
    ended with it, and the next session comes back without it.
    """

    __slots__ = ("_backoff", "_delays", "_errors", "_since")

    def __init__(self, backoff: Backoff) -> None:
        self._backoff = backoff
        self._delays: Iterator[float] | None = None
        self._errors = 0
        self._since: float | None = None

    def started(self, now: float) -> None:
        """A session is up (CONNECTED came, its subscriptions were sent again)."""
        self._since = now

    def again(self, error: ClientError, now: float, *, refused: bool = False) -> bool:
        """A session or an attempt ended with ``error``: whether to try again.

        ``refused``: the ERROR refused a restored subscription.
        """
        since, self._since = self._since, None
        if since is not None and now - since >= self._backoff.held_after:
            self._delays = None  # the broker is there: come back at once
        if since is not None and now - since >= self._backoff.reset_after:
            self._errors = 0
        if isinstance(error, BrokerError) and not refused:
            self._errors += 1
            return self._errors <= self._backoff.error_attempts
        return True

    def next_delay(self) -> float | None:
        """Seconds to wait before the next attempt; None once the attempts are used up."""
        if self._delays is None:
            self._delays = self._backoff.delays()
        return next(self._delays, None)


class PlainSettle:
    """The ACK (``nack``: NACK) of ``message`` with no transaction and no receipt.

    What a consumer acknowledging each message sends: :meth:`ClientCore.frame`
    has ``ClientConnection.ack()`` make its frame, rather than an :class:`Ack`
    event the connection would check and encode.
    """

    __slots__ = ("message", "nack")

    def __init__(self, message: Message, nack: bool) -> None:
        self.message = message
        self.nack = nack


#: What to do with one event: a :class:`Message` goes to the buffer of the
#: subscription it names (:attr:`Message.key`), a :class:`Resolve` completes a
#: waiter, an :class:`End` ends the session, ``None``: nothing.
Route: TypeAlias = Message | Resolve | End | None

CONNECT_WAITER = "connect"


S = TypeVar("S", bound=Handle)


#: Send's fields, in their order: :func:`_new_send` sets each (and checks, as it is
#: made, that these are all there are).
_SEND_FIELDS = (
    "destination",
    "body",
    "content_type",
    "transaction",
    "receipt",
    "headers",
    "content_length",
)


def _send_slots() -> tuple[Any, ...]:
    names = tuple(field.name for field in dataclasses.fields(Send))
    if names != _SEND_FIELDS:  # pragma: no cover - a field added to Send must be set here
        raise AssertionError(f"Send's fields are {names}, not {_SEND_FIELDS}")
    return tuple(getattr(Send, name) for name in names)


_DESTINATION, _BODY, _CONTENT_TYPE, _TRANSACTION, _RECEIPT, _HEADERS, _CONTENT_LENGTH = (
    _send_slots()
)


def _new_send(
    destination: str,
    body: bytes,
    content_type: str | None,
    transaction: str | None,
    receipt: str | None,
    headers: tuple[tuple[str, str], ...],
    content_length: bool,
) -> Send:
    """``Send(...)`` of a body of bytes, headers in a tuple and a destination that is
    not empty, without the dataclass's ``__init__`` (half the cost): its
    ``__post_init__`` has nothing to convert or refuse in those, and the
    connection checks every field as it makes the frame.  Every SEND of
    ``send()`` is made here."""
    event = _new_object(Send)
    _DESTINATION.__set__(event, destination)
    _BODY.__set__(event, body)
    _CONTENT_TYPE.__set__(event, content_type)
    _TRANSACTION.__set__(event, transaction)
    _RECEIPT.__set__(event, receipt)
    _HEADERS.__set__(event, headers)
    _CONTENT_LENGTH.__set__(event, content_length)
    return event


_new_object = object.__new__

#: Whether the frame trace is on (``stomp_proto.client.frames`` at DEBUG).
_tracing_frames = frame_log.isEnabledFor
_DEBUG = logging.DEBUG


def _header_pairs(
    headers: Mapping[str, str] | Iterable[tuple[str, str]],
) -> tuple[tuple[str, str], ...]:
    """:func:`as_headers`, without its ABC checks for what a sender passes most: a dict of str."""
    if type(headers) is dict:
        pairs = tuple(headers.items())
        for name, value in pairs:
            if type(name) is not str or type(value) is not str:
                return as_headers(headers)  # it converts or refuses them, as it says
        return pairs
    return as_headers(headers)


class ClientCore(Generic[S]):
    """One client's protocol-side state, across reconnects.

    ``conn`` is the ClientConnection of the current transport; :meth:`new_connection`
    replaces it when the adapter connects again.  Subscriptions survive that:
    :meth:`restore_subscriptions` gives the SUBSCRIBE events to send again.
    Messages delivered on an earlier connection cannot be acknowledged on a
    later one (their acknowledgement belonged to the connection that is gone).
    """

    def __init__(self, options: ConnectOptions, brokers: Brokers | None = None) -> None:
        self.options = options
        #: The brokers and the one in use; each new connection moves to the next.
        self.brokers = Brokers(options) if brokers is None else brokers
        self.generation = 0
        self.conn = self._make_connection()
        self._ids = itertools.count(1)
        #: The subscriptions and their state (the one owner of it).
        self.registry: Registry[S] = Registry()
        #: Open subscriptions by key, each the adapter's handle for it (the
        #: registry's: read it, change it through the registry).
        self.subscriptions: dict[str, S] = self.registry.open
        #: The error that ended the client for good (None while it lives, or
        #: when it was closed on purpose).
        self.error: ClientError | None = None
        #: Whether the ERROR that ended the last session refused a restored subscription.
        self.refused = False
        self.reconnects = Reconnects(options.reconnect or Backoff())
        #: The client's state, counts and log lines (see :class:`Lifecycle`).
        self.life = Lifecycle(
            lambda: self.brokers.current,
            options.on_state_change,
            options.tracing,
            options.on_session,
        )
        #: Its counts (the frames are counted here, as they are made).
        self.stats = self.life.stats
        #: Whether the application sent DISCONNECT: the end of the session is then no loss.
        self.leaving = False
        #: Whether a SEND without a receipt went out on this connection with no
        #: RECEIPT after it: an ERROR now may be its refusal (brokers answer in order).
        self._unvouched = False
        #: The ERROR that may have refused such a SEND, for the application's next call.
        self.refusal: BrokerError | None = None
        #: Unknown subscription ids already logged (one warning each).
        self._strangers: set[str] = set()
        #: The ``server`` header of the current session's CONNECTED (None before it).
        self.server: str | None = None
        #: Whether each frame is logged (:mod:`._trace`); asked again in :meth:`route`.
        self.trace_frames = _tracing_frames(_DEBUG)
        #: Request/reply: where replies go, which request each answers.
        self.replies = Replies(self._ids)

    def _make_connection(self) -> ClientConnection:
        return ClientConnection(
            limits=self.options.limits, heartbeat_tolerance=self.options.heartbeat_tolerance
        )

    def new_connection(self) -> ClientConnection:
        """Start over on a new transport: a fresh ClientConnection, same subscriptions.

        The transport goes to the next broker of the list (failover).
        """
        self.brokers.advance()
        self.generation += 1
        self.conn = self._make_connection()
        self.registry.new_connection()
        self.refused = False
        self._unvouched = False
        self.server = None
        self.trace_frames = _tracing_frames(_DEBUG)
        return self.conn

    # -- ids and events --------------------------------------------------------

    def written(self, event: FrameEvent) -> None:
        """``event`` was made into bytes for the current connection: counted, and
        a SEND without a receipt noted (see :meth:`take_refusal`)."""
        if type(event) is Send:
            self.stats.sent += 1
            if event.receipt is None:
                self._unvouched = True
        elif type(event) is Ack:
            self.stats.acked += 1
        elif type(event) is Nack:
            self.stats.nacked += 1

    def take_refusal(self) -> None:
        """Raise, once, the ERROR that may have refused a SEND of an earlier call.

        Every call of the application that sends calls this first, so a
        refusal reaches it even when the client reconnected after the ERROR.
        """
        refusal, self.refusal = self.refusal, None
        if refusal is not None:
            raise refusal

    def reported(self, error: ClientError) -> None:
        """``error`` was raised to the application: a refusal it is needs no second telling."""
        if error is self.refusal:
            self.refusal = None

    def next_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    def _receipt(self, wanted: bool) -> str | None:
        return self.next_id("receipt") if wanted else None

    def subscribe_event(
        self,
        destination: str,
        ack: AckMode,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None,
        subscription_id: str | None,
    ) -> Subscribe:
        return Subscribe(
            destination,
            id=subscription_id or self.next_id("sub"),
            ack=ack,
            headers=as_headers(headers or ()),
        )

    def send_event(
        self,
        destination: str,
        body: bytes | bytearray | memoryview | str,
        *,
        content_type: str | None,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None,
        transaction: str | None,
        receipt: bool,
        content_length: bool,
        parts: bool = False,
    ) -> tuple[Send | SendParts, str | None]:
        """The SEND for one ``send()`` call, and its receipt id if one is wanted.

        A ``str`` body is sent as UTF-8 text.  ``parts``: the caller needs no
        event (it writes it with :meth:`frame`, without tracing), so a SEND
        without a receipt may come as its fields alone, which the accelerated
        build makes into bytes without an event (ClientConnection._fast_send_parts).
        """
        if receipt is not False:
            check_bool("send() receipt", receipt)
        if type(body) is not bytes:
            if isinstance(body, str):
                body = body.encode("utf-8")
                if content_type is None:
                    content_type = "text/plain;charset=utf-8"
            elif isinstance(body, (bytearray, memoryview)):
                body = bytes(body)
            # Anything else is not sendable: Send refuses it, saying so.
        receipt_id = self.next_id("receipt") if receipt else None
        pairs = _header_pairs(headers) if headers else ()
        if type(body) is bytes and destination != "":
            if parts and receipt_id is None and ClientConnection._fast_send_parts is not None:
                return (destination, body, content_type, transaction, pairs, content_length), None
            made = _new_send(
                destination, body, content_type, transaction, receipt_id, pairs, content_length
            )
            return made, receipt_id
        event = Send(  # it says what is wrong with the body, or the destination
            destination,
            body,
            content_type=content_type,
            transaction=transaction,
            receipt=receipt_id,
            headers=pairs,
            content_length=content_length,
        )
        return event, receipt_id

    def settle_event(
        self,
        message: Message,
        transaction: str | None,
        receipt: bool,
        *,
        nack: bool,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
    ) -> tuple[Ack | Nack | PlainSettle, str | None]:
        """The ACK (or NACK) of ``message``, and its receipt id if one is wanted.

        The connection writes the headers of the negotiated version; the
        adapter passes ``message`` along so that it checks the delivery came on
        the current connection (:meth:`ClientConnection.check_delivered`).
        ``headers``: more headers, as given (RabbitMQ's ``requeue:false``).
        """
        if receipt is False and transaction is None and not headers and type(message) is Message:
            return PlainSettle(message, nack), None  # the common case: see frame()
        check_bool(f"{'nack' if nack else 'ack'}() receipt", receipt)
        receipt_id = self._receipt(receipt)
        kind = Nack if nack else Ack
        event = kind.of(message, transaction=transaction, receipt=receipt_id)
        if headers:
            event = dataclasses.replace(event, headers=_header_pairs(headers))
        return event, receipt_id

    def frame(
        self,
        conn: ClientConnection,
        event: FrameEvent | PlainSettle | SendParts,
        settles: Message | None,
    ) -> bytes:
        """The bytes of ``event`` from ``conn``, the current connection (the adapters
        call this under their write lock, and write the bytes next).

        ``settles``: the message an ACK or NACK is for; it must have come on
        ``conn``.  A :class:`PlainSettle` is made by ``conn.ack()`` (``nack()``),
        which checks that itself and, in the accelerated build, makes the
        frame natively without an event.  A SEND's fields (``send_event(...,
        parts=True)``) are made into bytes natively where that can be done, and
        otherwise made the Send they stand for and sent as such.
        """
        if self.trace_frames:
            self._trace_out(event)
        if isinstance(event, tuple):  # (events are not tuples)
            send = conn._fast_send_parts
            data = None if send is None else send(event)
            if data is None:
                destination, body, content_type, transaction, headers, content_length = event
                data = conn.send(
                    _new_send(
                        destination, body, content_type, transaction, None, headers, content_length
                    )
                )
            self.stats.sent += 1  # as written() counts a SEND without a receipt
            self._unvouched = True
            return data
        if isinstance(event, PlainSettle):
            message = event.message
            if event.nack:
                data = conn.nack(message)
                self.stats.nacked += 1
            else:
                data = conn.ack(message)
                self.stats.acked += 1
            return data
        if settles is not None:
            conn.check_delivered(settles)
        data = conn.send(event)
        self.written(event)  # before the write: its answer may come during it
        return data

    def encode(self, conn: ClientConnection, event: FrameEvent) -> bytes:
        """``conn.send(event)``, traced: for the frames an adapter writes itself (the
        CONNECT, the SUBSCRIBEs that restore a session)."""
        if self.trace_frames:
            self._trace_out(event)
        return conn.send(event)

    def _trace_out(self, event: FrameEvent | PlainSettle | SendParts) -> None:
        """Log the frame ``event`` stands for (see :mod:`._trace`)."""
        if isinstance(event, tuple):
            destination, body, content_type, transaction, headers, content_length = event
            event = _new_send(
                destination, body, content_type, transaction, None, headers, content_length
            )
        elif isinstance(event, PlainSettle):
            event = (Nack if event.nack else Ack).of(event.message)
        frame_out(event, self.conn.version, self.brokers.current)

    def receipt_timed_out(
        self, event: FrameEvent, seconds: float | None, *, paused: bool
    ) -> tuple[TimeoutError, ConnectionLost | None]:
        """A wait for the RECEIPT of ``event`` outlasted ``seconds``: the TimeoutError the
        caller raises, and the error that ends the session, or None when it stays.

        A broker that leaves a receipt unanswered that long is frozen or hung:
        with ``failover_on_timeout`` the client leaves it (all calls would wait
        as long) rather than wait for heart-beats to give up on it.  Not when the
        application is leaving anyway (a DISCONNECT's receipt), nor when reading
        is ``paused`` by a full subscription buffer: the receipt may be there,
        unread behind messages the application has not taken.
        """
        host, port = self.brokers.current
        leave = self.options.leaves_on_timeout and not paused and not isinstance(event, Disconnect)
        destination = getattr(event, "destination", None)
        frame = event.command if destination is None else f"{event.command} to {destination}"
        error = timed_out(
            f"the RECEIPT of {frame} from {host}:{port}",
            seconds,
            "the client leaves that broker" if leave else "",
        )
        if not leave:
            return error, None
        waited = "" if seconds is None else f" within {seconds:.3g} s"
        return error, ConnectionLost(f"no RECEIPT{waited}: the broker does not answer")

    def disconnect_event(self) -> tuple[Disconnect, str]:
        receipt = self.next_id("disconnect")
        self.leaving = True  # the broker may close the connection as it confirms it
        return Disconnect(receipt=receipt), receipt

    def commit_event(self, transaction: str) -> tuple[Commit, str]:
        """The COMMIT that ends a ``transaction()`` block; it always asks for a receipt."""
        receipt = self.next_id("receipt")
        return Commit(transaction, receipt=receipt), receipt

    def abort_event(self, transaction: str) -> tuple[Abort, str]:
        """The ABORT of a transaction object's ``abort()``; it asks for a receipt, so
        that the call returns once the broker has dropped what the transaction held."""
        receipt = self.next_id("receipt")
        return Abort(transaction, receipt=receipt), receipt

    # -- the registry of subscriptions -------------------------------------------

    def subscribing(self, handle: S) -> tuple[Subscribe, str]:
        """Register ``handle`` before its SUBSCRIBE goes out; that SUBSCRIBE and its receipt.

        Registered first: a broker may deliver messages before it sends the
        RECEIPT (RabbitMQ does).
        """
        receipt = self.next_id("receipt")
        self.registry.subscribing(handle, receipt)
        return dataclasses.replace(handle._event, receipt=receipt), receipt

    def subscribe_done(self, handle: S, *, ok: bool) -> None:
        """The SUBSCRIBE was confirmed (``ok``) or failed: it is then forgotten."""
        self.registry.subscribe_done(handle, ok=ok)

    def unsubscribing(
        self,
        handle: S,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
        receipt: bool = False,
    ) -> Unsubscribe | None:
        """Forget ``handle``; the UNSUBSCRIBE to send if the broker knows it, with
        ``headers`` (ActiveMQ's ``activemq.subscriptionName`` ends a durable
        subscription) and, with ``receipt``, a receipt id."""
        if not self.registry.leaving(handle):
            return None
        return Unsubscribe(
            id=handle._event.id,
            receipt=self._receipt(receipt),
            headers=_header_pairs(headers) if headers else (),
        )

    def removal_event(
        self,
        subscription_id: str,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None,
        receipt: bool,
    ) -> tuple[Unsubscribe, str | None]:
        """The UNSUBSCRIBE of ``client.unsubscribe(id)`` for an id with no open
        subscription: the removal of a durable subscription by ``headers`` (its
        receipt id, if one is wanted)."""
        check_bool("unsubscribe() receipt", receipt)
        if not headers:
            raise LocalProtocolError(
                ErrorKind.BAD_STATE,
                f"no subscription {subscription_id!r} is open; to remove a durable one, "
                "give the headers that name it (ActiveMQ: activemq.subscriptionName)",
            )
        receipt_id = self._receipt(receipt)
        event = Unsubscribe(id=subscription_id, receipt=receipt_id, headers=_header_pairs(headers))
        return event, receipt_id

    # -- request/reply -----------------------------------------------------------

    def reply_destination(self) -> tuple[str, Subscribe | None]:
        """Where replies to this client's requests go, and the SUBSCRIBE the client
        must make first, if any (once: the subscription is then restored like any).

        RabbitMQ makes a temporary queue for a ``/temp-queue/`` name in ``reply-to``
        and delivers its messages without a SUBSCRIBE; other brokers need one
        (ActiveMQ's temporary queues, the embedded broker's plain queues).  The
        subscription's messages are replies from now on, also those that come
        before its RECEIPT (to requests made meanwhile).
        """
        return self.replies.destination(
            self.server, lambda reply_to: self.subscribe_event(reply_to, "auto", None, None)
        )

    def target(self, message: Message) -> tuple[S | None, str | None]:
        """The handle ``message`` goes to (None: not ours), and a SUBSCRIBE receipt it settles.

        A handle the application has left is returned too (it has ended): the
        adapter drops the message, unacknowledged, for the broker to deliver
        again - it is not a stranger's.

        A MESSAGE proves the broker took the SUBSCRIBE.  Its RECEIPT may sit
        behind more messages than the buffer holds, and a full buffer stops
        reading: waiting for it could never end.
        """
        # Every message read passes here once, in every adapter (the asyncio and
        # trio readers hand a MESSAGE over without routing it).
        self.stats.received += 1
        if self.trace_frames:
            frame_in(message, self.conn.version, self.brokers.current)
        key = message.key
        handle = self.subscriptions.get(key)
        channels = self.replies.channels
        if handle is None:
            left = self.registry.left(key)
            if left is None and key not in channels and not self.replies.late(message):
                self._stranger(message)
            return left, None
        # The reply subscription's messages go to their requests, not to a buffer.
        replies = channels and key in channels
        receipt = self.registry.confirmed_by_message(handle)
        return (None if replies else handle), receipt

    def _stranger(self, message: Message) -> None:
        """Log a MESSAGE for a subscription this client does not know, once per id."""
        key = message.key
        if key in self._strangers:
            return
        if len(self._strangers) >= LEFT_REMEMBERED:
            self._strangers.clear()
        self._strangers.add(key)
        log.warning(
            "MESSAGE for subscription %r, which this client did not make (destination %r, "
            "message-id %r): it goes to client.unsolicited, unacknowledged; further "
            "messages for that subscription are not logged",
            message.subscription,
            message.destination,
            message.message_id,
        )

    def restore_subscriptions(self) -> list[Subscribe]:
        """The SUBSCRIBE events that re-establish every open subscription.

        Each asks for a receipt, which the core awaits itself: an ERROR that
        comes while one is pending refuses that subscription (see :meth:`route`).
        """
        return self.registry.restore(self.next_id)

    def _refuse(self, error: Error) -> BrokerError:
        """The BrokerError of ``error``; it also ends the restored subscription it
        refused (see :meth:`Registry.refused`)."""
        failure = BrokerError(error)
        self.refused = False
        if self._unvouched and not self.registry.restoring():
            self.refusal = failure
        handle = self.registry.refused(error.receipt_id)
        if handle is not None:
            handle._end(failure)
            self.refused = True
        return failure

    def session_started(self, now: float) -> None:
        """A session is up: its subscriptions restored, calls may go through."""
        self.reconnects.started(now)
        self.life.connected(now)

    def session_lost(self, error: ClientError, now: float) -> ClientError | None:
        """The session in use ended with ``error``: None to reconnect, else the error the
        client ends with."""
        if self.leaving:  # the application is leaving: the end it asked for, no loss
            return error
        again = self.again(error, now)
        self.life.lost(error, again=again)
        if again:
            return None
        return error if self.options.reconnect is None else self.life.gave_up(error)

    def again(self, error: ClientError, now: float) -> bool:
        """The session (or an attempt at one) ended with ``error``: whether to reconnect.

        Never without a :class:`Backoff`; otherwise as :class:`Reconnects` says.
        """
        if self.options.reconnect is None:
            return False
        return self.reconnects.again(error, now, refused=self.refused)

    def finish(self, error: ClientError | None) -> None:
        """End every subscription: cleanly (``None``) or with ``error``, which is kept."""
        if self.error is None and error is not None:
            self.error = error
        for handle in self.registry.finish():
            handle._end(error)

    # -- routing ---------------------------------------------------------------

    def route(self, event: Event) -> Route:
        """What the adapter must do with ``event`` from ``conn.next_event()``."""
        if type(event) is Message:
            return event
        # Asked here, not per frame (a MESSAGE skips this): turned on or off, the
        # trace follows at the next other event read - a heart-beat, a receipt.
        self.trace_frames = trace = _tracing_frames(_DEBUG)
        if trace and isinstance(event, FrameEvent):
            frame_in(event, self.conn.version, self.brokers.current)
        if isinstance(event, Receipt):
            self._unvouched = False  # the broker took everything sent before it
            if self.registry.restored(event.receipt_id):
                return None
            return Resolve(event.receipt_id, event)
        if isinstance(event, Connected):
            self.server = event.server
            return Resolve(CONNECT_WAITER, event)
        if isinstance(event, Error):
            return End(self._refuse(event))
        if isinstance(event, HeartBeatTimeout):
            return End(HeartBeatLost(f"no data from the broker for {event.silence:.1f} s"))
        if isinstance(event, ConnectionClosed):
            return End(ConnectionLost("the broker closed the connection"))
        if isinstance(event, HeartBeat):
            return None
        raise AssertionError(f"unexpected event {event!r}")  # pragma: no cover
