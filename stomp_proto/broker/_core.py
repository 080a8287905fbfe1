"""The embedded broker's logic without I/O: sessions, queues, topics, acks, transactions.

:class:`BrokerCore` owns every destination; each client connection is a
:class:`Session` holding a :class:`~stomp_proto.ServerConnection`, which
checks the protocol (handshake, versions, subscription ids, which deliveries
an ACK settles, transaction ids, receipts).  The core adds the policy a
connection leaves to its user: who may log in, where a SEND goes, when a
message is settled or delivered again.

The transport layer drives it in steps.  Bytes read from a client go to
``session.receive_data``; ``core.process(session)`` then consumes that
session's events and returns an :class:`Outbox`: the bytes to write to *every*
affected session (a SEND from one client is a MESSAGE to another) and the
sessions whose transport must be closed once their bytes are written.  No
clock is read here: heart-beats are the transport's job, through
``session.get_timer`` and ``session.handle_timer``.

Destinations:

* ``/topic/...``: every SEND is copied to each subscription that exists at that
  moment; nothing is retained.  Each topic subscription gets a private queue,
  so acknowledgements, prefetch and back-pressure work as for queues; a
  subscription that already holds ``max_queue_length`` messages misses new ones.
* anything else is a queue: each message goes to one subscription, round robin,
  and is held until settled (delivered on an ``auto`` subscription, or ACKed).
  A NACK, an UNSUBSCRIBE or the end of the consumer's session puts it back at
  the front with ``redelivered:true``.  A queue holds at most
  ``max_queue_length`` messages, counting delivered and unacknowledged ones; a
  SEND beyond that is refused with an ERROR ``queue full`` (which, as every
  ERROR, ends the sender's session).

Flow control: a client-acknowledged subscription has at most ``max_in_flight``
unacknowledged messages (per SUBSCRIBE: ``prefetch-count`` as in RabbitMQ or
``activemq.prefetchSize`` as in ActiveMQ, 0 meaning no limit); the rest wait in
the queue.  A session can also be paused (:meth:`BrokerCore.pause`), and is
paused by the core once one outbox holds ``output_limit`` bytes for it: a paused
session gets no deliveries - they stay queued or go to other consumers - until
:meth:`BrokerCore.resume`.

Deadlines (hostile or broken peers): a client must complete its CONNECT within
``connect_timeout`` seconds of the connection, and every frame within
``frame_timeout`` seconds of its first byte (a peer trickling a header one
byte at a time keeps heart-beats alive, but not this); a session paused for
``slow_consumer_timeout`` seconds without being resumed - its client reads
nothing - is ended.  Each ends the session with an ERROR; ``None`` disables
it.  Like heart-beats these need no clock in the core: ``Session.get_timer``
says when the transport must next call ``Session.handle_timer(now)``.
"""

from __future__ import annotations

import dataclasses
import itertools
import urllib.parse
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeAlias, TypedDict

from .. import (
    Abort,
    Ack,
    Begin,
    Commit,
    Connect,
    Connected,
    ConnectionClosed,
    ConnectionState,
    Disconnect,
    Error,
    ErrorKind,
    Event,
    HeartBeatTimeout,
    Limits,
    LocalProtocolError,
    Message,
    Nack,
    Receipt,
    RemoteProtocolError,
    Send,
    ServerConnection,
    Subscribe,
    Unsubscribe,
    Version,
    __version__,
)
from .._encoder import unescaped_header_fault
from .._frame import VERSIONS
from ._access import Permissions
from ._budget import MemoryBudget, message_size
from ._logins import Logins
from ._metrics import Counters
from ._throttle import LoginThrottle

__all__ = ["BrokerCore", "BrokerOptions", "Outbox", "Session"]

TOPIC_PREFIX = "/topic/"
#: SUBSCRIBE headers that set the subscription's in-flight limit (RabbitMQ, ActiveMQ).
PREFETCH_HEADERS = frozenset({"prefetch-count", "activemq.prefetchSize"})
#: The one answer to a refused login: it must not tell whether the user exists.
LOGIN_FAILED = "Bad CONNECT: login failed"
#: Bytes of output one outbox may hold for a session before deliveries to it pause.
DEFAULT_OUTPUT_LIMIT = 1024 * 1024
DEFAULT_SERVER_NAME = f"stomp_proto-broker/{__version__}"
#: Seconds a client has to complete its CONNECT, by default.
DEFAULT_CONNECT_TIMEOUT = 30.0
#: The broker's heart-beats by default, ``(can send every ms, wants to receive every ms)``:
#: it sends as often as a client asks, down to every 100 ms, and takes them as often as
#: the client offers, down to every 1 s (the spec settles on the larger of the two).
DEFAULT_HEARTBEAT = (100, 1000)
#: Seconds a frame may take from its first byte to its last, by default.
DEFAULT_FRAME_TIMEOUT = 60.0
#: Seconds a session may stay paused (its client not reading) before it is ended, by default.
DEFAULT_SLOW_CONSUMER_TIMEOUT = 60.0
#: Bytes of messages the broker holds at most, by default (see ``_budget``).
DEFAULT_MAX_MEMORY = 512 * 1024 * 1024
#: Bytes of messages one queue (or topic subscription) holds at most, by default.
DEFAULT_MAX_QUEUE_BYTES = 128 * 1024 * 1024
#: Bytes of messages one transaction buffers at most, by default.
DEFAULT_MAX_TRANSACTION_BYTES = 128 * 1024 * 1024
#: Destinations (queues and subscribed topics) the broker keeps at most, by default.
DEFAULT_MAX_DESTINATIONS = 10_000
#: Transactions one session may have open at once, by default.
DEFAULT_MAX_TRANSACTIONS = 100
#: Client connections the broker serves at once, by default (ActiveMQ's default too).
DEFAULT_MAX_CONNECTIONS = 1000
#: Sessions one login may have open at once, by default.
DEFAULT_MAX_CONNECTIONS_PER_LOGIN = 100
#: Seconds a session whose client sends no heart-beats may go without traffic, by default.
DEFAULT_IDLE_TIMEOUT = 600.0
#: Failed logins per second one client address may go on making, by default (after 10).
DEFAULT_FAILED_LOGIN_RATE = 2.0
#: The frames the ``relay`` hook of :class:`BrokerCore` is asked about.
Relayed = Send | Subscribe | Unsubscribe | Ack | Nack | Commit | Abort
#: The ERROR message of a SEND or SUBSCRIBE the login's ``permissions`` do not allow.
ACCESS_REFUSED = "access refused"
#: The ERROR message of a connection refused by ``max_connections`` or its per-login cap.
TOO_MANY_CONNECTIONS = "too many connections"
#: The ERROR message every client gets when the broker shuts down.
SHUTDOWN_REASON = "broker shutting down"


class BrokerOptions(TypedDict, total=False):
    """The :class:`BrokerCore` options, also keywords of ``Broker`` and ``run_broker``."""

    #: Login to passcode; ``None`` (the default) lets anyone in.
    users: Mapping[str, str] | None
    #: Login to the destinations it may write to and read (:class:`Permissions`);
    #: ``None`` (the default): every login may do everything.
    permissions: Mapping[str, Permissions] | None
    #: Failed logins per second a client address may go on making after 10; 2.0;
    #: ``None``: no limit.
    failed_login_rate: float | None
    #: The protocol versions the broker speaks; default all three.
    versions: tuple[Version, ...]
    #: ``(can send every ms, wants to receive every ms)``: the shortest intervals the
    #: broker sends heart-beats at if a client asks, and wants them at if a client
    #: offers (0: never); (100, 1000).
    heartbeat: tuple[int, int]
    #: The :class:`~stomp_proto.Limits` on incoming frames; default ``Limits()``.
    limits: Limits | None
    #: The default in-flight limit of a client-acknowledged subscription; 1000.
    max_in_flight: int
    #: The most messages a queue holds; 100,000.
    max_queue_length: int
    #: Bytes of messages the broker holds at most (the memory budget); 512 MiB.
    max_memory: int
    #: Bytes of messages one queue or topic subscription holds at most; 128 MiB.
    max_queue_bytes: int
    #: Bytes of messages one transaction buffers at most; 128 MiB.
    max_transaction_bytes: int
    #: Destinations (queues, subscribed topics) the broker keeps at most; 10,000.
    max_destinations: int
    #: Transactions one session may have open at once; 100.
    max_transactions: int
    #: The CONNECTED ``server`` header.
    server_name: str
    #: Bytes one outbox may hold for a session before deliveries to it pause.
    output_limit: int
    #: Seconds a client has to complete its CONNECT; ``None``: no limit.
    connect_timeout: float | None
    #: Seconds a frame may take from its first byte to its last; ``None``: no limit.
    frame_timeout: float | None
    #: Seconds a session may stay paused before it is ended; ``None``: no limit.
    slow_consumer_timeout: float | None
    #: Client connections served at once; 1000.
    max_connections: int
    #: Sessions one login may have open at once; 100.
    max_connections_per_login: int
    #: Seconds a session without heart-beats from its client and without a
    #: subscription may go without a frame either way; 600 s; ``None``: no limit.
    idle_timeout: float | None
    #: Refuse every client frame the specs forbid (default ``False``: lenient).
    strict: bool


def _encode_delivery(connection: ServerConnection, delivery: Message) -> bytes:
    """The bytes of ``delivery``; without the headers its version cannot carry."""
    try:
        return connection.send(delivery)
    except LocalProtocolError:
        # Headers a 1.1 or 1.2 sender escaped (a line break, a ':' in a name)
        # cannot be written in a 1.0 frame: that subscriber gets the message
        # without them.  (Its SUBSCRIBE was checked: destination and id fit.)
        content_type = delivery.content_type
        delivery = dataclasses.replace(
            delivery,
            headers=tuple(pair for pair in delivery.headers if _fits_unescaped(pair)),
            content_type=content_type
            if content_type is None or _fits_unescaped(("content-type", content_type))
            else None,
        )
        return connection.send(delivery)


def _fits_unescaped(header: tuple[str, str]) -> bool:
    """Whether a header can be written in a STOMP 1.0 frame (no escapes there)."""
    return unescaped_header_fault(*header, raw_cr=True) is None


class Outbox:
    """What one step of the broker asks of the transport layer.

    ``data`` maps each session to the bytes to write to it, in order;
    ``to_close`` holds the sessions whose transport is to be closed once their
    bytes are written (after an ERROR, after the DISCONNECT receipt, when the
    client went away or fell silent).
    """

    __slots__ = ("data", "to_close")

    def __init__(self) -> None:
        #: The bytes to write to each session, in order.
        self.data: dict[Session, bytearray] = {}
        #: The sessions whose transport is to be closed once their bytes are written.
        self.to_close: set[Session] = set()

    def __bool__(self) -> bool:
        return bool(self.data or self.to_close)

    def __repr__(self) -> str:
        sizes = {session.id: len(data) for session, data in self.data.items()}
        closing = sorted(session.id for session in self.to_close)
        return f"Outbox(data={sizes}, to_close={closing})"

    def write(self, session: Session, data: bytes) -> None:
        """Add ``data`` to what is to be written to ``session``."""
        if data:
            self.data.setdefault(session, bytearray()).extend(data)

    def bytes_for(self, session: Session) -> bytes:
        """Everything to write to ``session`` (``b""`` if nothing)."""
        return bytes(self.data.get(session, b""))


@dataclass(slots=True, eq=False)
class _StoredMessage:
    """A message in the broker's care: the SEND it came from, its broker-wide id, its bytes."""

    id: str
    send: Send
    #: What it is charged to the memory budget (:func:`message_size`).
    size: int
    redelivered: bool = False


class _Queue:
    """Messages waiting for one of a list of subscriptions, handed out round robin.

    A named queue is shared by every subscription to its destination; a topic
    subscription has a ``private`` one of its own.
    """

    __slots__ = (
        "_budget",
        "_next",
        "closed",
        "consumers",
        "destination",
        "held",
        "held_bytes",
        "private",
        "ready",
    )

    def __init__(self, destination: str, budget: MemoryBudget, *, private: bool) -> None:
        self.destination = destination
        self.private = private
        self.ready: deque[_StoredMessage] = deque()
        self.consumers: list[_Subscription] = []
        #: Messages in the queue's care: waiting, or delivered and not yet settled.
        self.held = 0
        #: Their bytes, as charged to ``budget``.
        self.held_bytes = 0
        #: A private queue whose subscription has ended: what comes back is dropped.
        self.closed = False
        self._budget = budget
        self._next = 0

    def put(self, message: _StoredMessage) -> None:
        self.ready.append(message)
        self.held += 1
        self.held_bytes += message.size
        self._budget.take(message.size)

    def settle(self, messages: list[_StoredMessage]) -> None:
        """The queue is done with ``messages`` (acknowledged, or dropped)."""
        size = sum(message.size for message in messages)
        self.held -= len(messages)
        self.held_bytes -= size
        self._budget.give(size)

    def close(self, unacked: list[_StoredMessage]) -> None:
        """A private queue's subscription ended: drop what it holds (and ``unacked``).

        Messages settled in an open transaction are still held; they are
        dropped when it ends.
        """
        self.closed = True
        self.settle([*self.ready, *unacked])
        self.ready.clear()

    def requeue(self, messages: list[_StoredMessage]) -> None:
        """Put delivered messages back at the front, in their order, to be delivered again."""
        if self.closed:
            self.settle(messages)
            return
        for message in messages:
            message.redelivered = True
        self.ready.extendleft(reversed(messages))

    def next_consumer(self) -> _Subscription | None:
        """The next subscription in round-robin order that can take a message now."""
        count = len(self.consumers)
        for step in range(count):
            index = (self._next + step) % count
            candidate = self.consumers[index]
            if candidate.can_take():
                self._next = index + 1
                return candidate
        return None


class _Subscription:
    """One SUBSCRIBE of one session, bound to the queue it consumes from."""

    __slots__ = ("ack", "destination", "id", "key", "prefetch", "queue", "session", "unacked")

    def __init__(self, session: Session, event: Subscribe, queue: _Queue, prefetch: int) -> None:
        self.session = session
        self.key = event.key
        self.id = event.id
        self.ack = event.ack
        #: The destination as subscribed: what its MESSAGEs name (a user destination
        #: is routed under another name).
        self.destination = event.destination
        self.queue = queue
        #: Most unacknowledged messages at a time; 0 for no limit.
        self.prefetch = prefetch
        #: Delivered and awaiting (N)ACK, by the name the version's ACK uses; oldest first.
        self.unacked: dict[str, _StoredMessage] = {}

    def can_take(self) -> bool:
        if not self.session.accepts_deliveries:
            return False
        return self.ack == "auto" or self.prefetch == 0 or len(self.unacked) < self.prefetch


@dataclass(slots=True)
class _Transaction:
    """What a transaction will do on COMMIT."""

    sends: list[Send] = field(default_factory=list)
    #: What ``sends`` are charged to the memory budget until the transaction ends.
    held_bytes: int = 0
    #: (N)ACKed messages: their queue, the message, and whether it is to be delivered again.
    settlements: list[tuple[_Queue, _StoredMessage, bool]] = field(default_factory=list)


@dataclass(slots=True)
class _Books:
    """The broker's records of one session: its subscriptions and open transactions.

    Kept by :class:`BrokerCore` (one per session, for the session's life), not
    by :class:`Session`, which is the transport-facing half.
    """

    subscriptions: dict[str, _Subscription] = field(default_factory=dict)
    transactions: dict[str, _Transaction] = field(default_factory=dict)
    ack_ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))


class Session:
    """One client connection as the broker sees it; made by :meth:`BrokerCore.open_session`.

    ``id`` is sent as the CONNECTED ``session`` header; ``connection`` is the
    :class:`~stomp_proto.ServerConnection` that checks the client's frames and
    encodes everything sent to it.
    """

    def __init__(self, core: BrokerCore, session_id: str, connection: ServerConnection) -> None:
        #: The session id, sent as the CONNECTED ``session`` header.
        self.id = session_id
        #: The :class:`~stomp_proto.ServerConnection` of this client.
        self.connection = connection
        self._core = core
        self._paused = False
        self._closed = False
        #: It has sent a SEND: the memory alarm stops reading from it.
        self._publisher = False
        # Deadline bookkeeping, in the caller's clock (learned through handle_timer).
        self._opened_at: float | None = None
        self._frame_started: float | None = None
        self._paused_since: float | None = None
        self._idle_since: float | None = None
        #: Events were consumed since the last handle_timer: a frame completed.
        self._progress = False
        #: Bytes came from the client, or a message went to it, since the last handle_timer.
        self._active = False
        #: The login it is counted under (``max_connections_per_login``), once CONNECTED.
        self._login: str | None = None
        #: The login its CONNECT gave (whether or not ``users`` checked it), for ``permissions``.
        self._claimed_login: str | None = None
        #: Where the client connects from (a host), for the failed-login throttle.
        self._address: str | None = None
        #: The time of the last handle_timer, in the caller's clock.
        self._now: float | None = None
        #: A CONNECT waiting for the failed-login throttle to let its address try again.
        self._waiting_connect: Connect | None = None
        #: Why a deadline ended the session, until process() sends the ERROR.
        self._expired: tuple[str, str] | None = None
        #: The user the transport vouched for (``open_session(user=...)``).
        self._vouched: str | None = None
        #: The authenticated user, once CONNECTED: vouched for, or a login ``users`` checked.
        self._user: str | None = None
        #: A SEND the ``divert`` hook took, until :meth:`BrokerCore.answer_diverted`.
        self._diverted: Relayed | None = None
        #: The diverted frame was taken by the ``relay`` hook, not ``divert``.
        self._relaying = False
        #: The keys of its subscriptions the relay serves (answered SUBSCRIBEs, not UNSUBSCRIBEd).
        self._relayed_subscriptions: set[str] = set()

    def __repr__(self) -> str:
        return (
            f"<Session {self.id} {self.connection.state.value}{' closed' if self._closed else ''}>"
        )

    @property
    def closed(self) -> bool:
        """True once the broker has ended the session (its transport is to be closed)."""
        return self._closed

    @property
    def user(self) -> str | None:
        """The authenticated user once CONNECTED, else ``None``.

        The user given to :meth:`BrokerCore.open_session`, or else the CONNECT
        login when ``users`` checked it; without ``users`` a login is a claim,
        not a user.
        """
        return self._user

    @property
    def diverted(self) -> Send | None:
        """The SEND the core's ``divert`` hook took, until :meth:`BrokerCore.answer_diverted`.

        Meanwhile the session's later frames wait, unread, so that receipts
        keep their order.
        """
        diverted = self._diverted
        return diverted if isinstance(diverted, Send) and not self._relaying else None

    @property
    def relayed(self) -> Send | Subscribe | Unsubscribe | Ack | Nack | Commit | Abort | None:
        """The frame the core's ``relay`` hook took, until :meth:`BrokerCore.answer_diverted`."""
        return self._diverted if self._relaying else None

    @property
    def paused(self) -> bool:
        """True while deliveries to the session are held back (see :meth:`BrokerCore.pause`)."""
        return self._paused

    @property
    def reading_blocked(self) -> bool:
        """True while the transport must not read from the client: the memory alarm is up
        and the client publishes (see :attr:`BrokerCore.memory_alarm`).

        Deliveries to it go on; its heart-beat and frame deadlines do not run meanwhile.
        """
        return self._publisher and self._core._budget.alarm and not self._closed

    @property
    def accepts_deliveries(self) -> bool:
        """True while messages may be delivered: connected, neither paused nor closed."""
        return (
            not self._closed
            and not self._paused
            and self.connection.state is ConnectionState.CONNECTED
        )

    def receive_data(self, data: bytes | None) -> None:
        """``data``, the bytes read from the client; ``None`` when it closed the stream."""
        # After the broker ended the session, whatever is still in flight is moot.
        if not self._closed:
            if data:
                self._active = True
            self.connection.receive_data(data)

    def process(self) -> Outbox:
        """Same as ``core.process(session)``."""
        return self._core.process(self)

    def get_timer(self) -> float | None:
        """When ``handle_timer`` is next due: heart-beats and the broker's deadlines.

        ``0.0`` means "now": a deadline is in force whose start the session has
        not learned yet (``handle_timer`` tells it the time).
        """
        if self._closed:
            return None
        if self._expired is not None:
            return 0.0
        due = [] if (beat := self.connection.get_timer()) is None else [beat]
        core = self._core
        blocked = self.reading_blocked
        if core._connect_timeout is not None and self._handshaking:
            due.append(self._deadline(self._opened_at, core._connect_timeout))
        if core._frame_timeout is not None and self.connection.buffered and not blocked:
            due.append(self._deadline(self._frame_started, core._frame_timeout))
        if core._slow_consumer_timeout is not None and self._paused:
            due.append(self._deadline(self._paused_since, core._slow_consumer_timeout))
        if core._idle_timeout is not None and self._idle_watched:
            due.append(self._deadline(self._idle_since, core._idle_timeout))
        if self._waiting_connect is not None:
            due.append(core._logins.ready_at(self._address, self._now))
        return min(due) if due else None

    @staticmethod
    def _deadline(start: float | None, timeout: float) -> float:
        return 0.0 if start is None else start + timeout

    @property
    def _idle_watched(self) -> bool:
        """Whether the idle timeout applies: connected, no heart-beats expected
        from the client (they would end a silent one sooner), read from, and
        subscribed to nothing (a subscriber may wait quietly for rare messages;
        ``max_connections`` bounds how many do)."""
        beats = self.connection.heartbeat
        return (
            beats is not None
            and beats[1] == 0
            and self.connection.state is ConnectionState.CONNECTED
            and not self.reading_blocked
            and not self._core._subscribed(self)
            and not self._relayed_subscriptions
        )

    @property
    def _handshaking(self) -> bool:
        state = self.connection.state
        return state is ConnectionState.IDLE or state is ConnectionState.CONNECTING

    def handle_timer(self, now: float) -> bytes:
        """Bytes to write (a heart-beat, or nothing); then ``process`` to see a timeout.

        Also checks the broker's deadlines at ``now``; one that has passed ends
        the session (with an ERROR) at the next ``process``.
        """
        if self._closed:
            return b""
        core = self._core
        self._now = now
        if self._opened_at is None:
            self._opened_at = now
        reading = not self.reading_blocked
        # A frame's clock starts at the first check that finds it incomplete, and
        # restarts whenever frames were completed since the previous check (or
        # the broker was not reading it).
        if not self.connection.buffered or not reading:
            self._frame_started = None
        elif self._frame_started is None or self._progress:
            self._frame_started = now
        self._progress = False
        if not self._paused:
            self._paused_since = None
        elif self._paused_since is None:
            self._paused_since = now
        if self._active or self._idle_since is None or not self._idle_watched:
            self._idle_since = now
        self._active = False
        if self._expired is None:
            self._expired = self._expiry(now, core)
        return self.connection.handle_timer(now, reading=reading)

    def _expiry(self, now: float, core: BrokerCore) -> tuple[str, str] | None:
        """(message, detail) of the first deadline passed at ``now``; None if none."""
        checks = [
            (self._handshaking, self._opened_at, core._connect_timeout, "CONNECT timeout",
             "no CONNECT completed within {} s"),
            (bool(self.connection.buffered), self._frame_started, core._frame_timeout,
             "frame timeout", "frame not completed within {} s of its start"),
            (self._paused, self._paused_since, core._slow_consumer_timeout,
             "slow consumer", "output not read for {} s"),
            (self._idle_watched, self._idle_since, core._idle_timeout,
             "idle timeout", "no frame either way for {} s, no heart-beats, no subscription"),
        ]  # fmt: skip
        for applies, start, timeout, message, detail in checks:
            if applies and start is not None and timeout is not None and now >= start + timeout:
                return message, detail.format(timeout)
        return None

    # -- what BrokerCore changes (applications call BrokerCore's methods) -------

    @property
    def expiry(self) -> tuple[str, str] | None:
        """(message, detail) of the deadline that ended the session, until its ERROR is sent."""
        return self._expired

    def restart_idle_clock(self) -> None:
        """Its last subscription ended: the idle timeout counts from the next handle_timer."""
        self._idle_since = None

    def frame_completed(self) -> None:
        """A frame came out of the connection: its frame-timeout clock starts again."""
        self._progress = True

    def hold(self) -> None:
        """Deliveries stop (see :meth:`BrokerCore.pause`); the slow-consumer clock runs."""
        self._paused = True

    def release(self) -> None:
        """Deliveries may go on (see :meth:`BrokerCore.resume`)."""
        self._paused = False
        self._paused_since = None

    def end(self) -> None:
        """The broker has ended the session; its transport is to be closed."""
        self._closed = True


#: A refusal the core sends as an ERROR: ``(message, detail, reason)`` (see BrokerCore._refuse).
Refusal: TypeAlias = tuple[str, str, str]


class _Destinations:
    """Every queue and topic of one broker, and what moves messages through them.

    It owns the destinations - the named queues, each topic's subscriptions -
    and the limits that bound them, and does the routing: where a SEND goes,
    whether there is room for it, delivery round robin, settling, what a
    subscription that ends gives back.  A class of its own so that
    :class:`BrokerCore`, which handles each client's frames, asks one object
    about the destinations instead of reaching into them.  A refusal is
    returned as a :data:`Refusal`: the core sends the ERROR and ends the session.
    ``books`` are the core's, by session: deliveries take their ack ids there.
    """

    def __init__(
        self,
        *,
        budget: MemoryBudget,
        max_queue_length: int,
        max_queue_bytes: int,
        max_destinations: int,
        output_limit: int,
        user_prefix: str | None,
        counters: Counters,
        books: Mapping[Session, _Books],
    ) -> None:
        self._budget = budget
        self.max_queue_length = max_queue_length
        self._max_queue_bytes = max_queue_bytes
        self._max_destinations = max_destinations
        self._output_limit = output_limit
        self._user_prefix = user_prefix
        self._counters = counters
        self._books = books
        self._queues: dict[str, _Queue] = {}
        self._topics: dict[str, list[_Subscription]] = {}
        self._message_ids = itertools.count(1)

    # -- inspection ------------------------------------------------------------

    def queued(self, destination: str) -> int:
        queue = self._queues.get(destination)
        return len(queue.ready) if queue is not None else 0

    def each_destination(self) -> Iterator[tuple[str, tuple[int, int, int]]]:
        for destination in list(self._queues):
            queue = self._queues.get(destination)
            if queue is not None:
                unacked = sum(len(s.unacked) for s in queue.consumers)
                yield destination, (len(queue.ready), unacked, len(queue.consumers))
        for destination in list(self._topics):
            subscriptions = self._topics.get(destination)
            if subscriptions:
                queued = sum(len(s.queue.ready) for s in subscriptions)
                unacked = sum(len(s.unacked) for s in subscriptions)
                yield destination, (queued, unacked, len(subscriptions))

    def is_topic(self, destination: str) -> bool:
        """Whether ``destination`` copies each message to every subscription (a user one too)."""
        prefix = self._user_prefix
        return destination.startswith(TOPIC_PREFIX) or (
            prefix is not None and destination.startswith(prefix)
        )

    # -- what may come in ------------------------------------------------------

    def _queue_takes(self, queue: _Queue, size: int) -> bool:
        return (
            queue.held < self.max_queue_length and queue.held_bytes + size <= self._max_queue_bytes
        )

    def _queue(self, destination: str) -> _Queue:
        """The named queue ``destination``, made if it does not exist."""
        queue = self._queues.get(destination)
        if queue is None:
            queue = self._queues[destination] = _Queue(destination, self._budget, private=False)
        return queue

    def _count(self) -> int:
        return len(self._queues) + len(self._topics)

    def room(self, sends: list[Send]) -> Refusal | None:
        """Why the queues ``sends`` go to cannot all take them; None when they can.

        Checked before any of them is published: a COMMIT is all or nothing.
        """
        adding: dict[str, tuple[int, int]] = {}
        total = 0
        for send in sends:
            size = message_size(send)
            if size > self._max_queue_bytes or size > self._budget.limit:
                option, limit = min(
                    ("max_queue_bytes", self._max_queue_bytes),
                    ("max_memory", self._budget.limit),
                    key=lambda pair: pair[1],
                )
                detail = f"a message takes {size} bytes here, more than {option}={limit}"
                return ("message too large", detail, "message_too_large")
            if not self.is_topic(send.destination):
                count, nbytes = adding.get(send.destination, (0, 0))
                adding[send.destination] = (count + 1, nbytes + size)
                total += size
        new = sum(destination not in self._queues for destination in adding)
        if new and self._count() + new > self._max_destinations:
            return self.too_many()
        for destination, (count, nbytes) in adding.items():
            queue = self._queues.get(destination)
            held, held_bytes = (queue.held, queue.held_bytes) if queue is not None else (0, 0)
            if held + count > self.max_queue_length:
                detail = f"queue {destination!r} holds {self.max_queue_length} messages already"
            elif held_bytes + nbytes > self._max_queue_bytes:
                detail = (
                    f"queue {destination!r} holds at most {self._max_queue_bytes} bytes"
                    " of messages (max_queue_bytes)"
                )
            else:
                continue
            return ("queue full", detail, "queue_full")
        if not self._budget.fits(total):
            return self.over_budget()
        return None

    def over_budget(self) -> Refusal:
        # Only when publishers outran the alarm (it goes up well below the limit).
        detail = (
            f"the broker holds at most {self._budget.limit} bytes of messages (max_memory)"
            f" and holds {self._budget.used}"
        )
        return ("out of memory", detail, "out_of_memory")

    def too_many(self) -> Refusal:
        limit = self._max_destinations
        detail = f"the broker keeps at most {limit} destinations (max_destinations)"
        return ("too many destinations", detail, "too_many_destinations")

    # -- routing ---------------------------------------------------------------

    def publish(self, sends: list[Send], outbox: Outbox) -> None:
        self._counters.messages_received += len(sends)
        for send in sends:
            destination = send.destination
            if self.is_topic(destination):
                size = message_size(send)
                for subscription in list(self._topics.get(destination, ())):
                    queue = subscription.queue
                    # A subscription without room misses the message.
                    if self._queue_takes(queue, size) and self._budget.fits(size):
                        queue.put(self._stored(send, size))
                        self.dispatch(queue, outbox)
            else:
                queue = self._queue(destination)
                queue.put(self._stored(send, message_size(send)))
                self.dispatch(queue, outbox)

    def publish_app(self, send: Send, only: Session | None, outbox: Outbox) -> None:
        """:meth:`BrokerCore.publish`: OverflowError where a queue has no room."""
        destination = send.destination
        size = message_size(send)
        if not self.is_topic(destination):
            if only is not None:
                raise LocalProtocolError(
                    ErrorKind.BAD_STATE, f"{destination!r} is a queue: 'only' is for topics"
                )
            queue = self._queues.get(destination)
            if queue is None and self._count() >= self._max_destinations:
                raise OverflowError(
                    f"the broker keeps at most {self._max_destinations} destinations"
                )
            if (queue is not None and not self._queue_takes(queue, size)) or (
                queue is None and size > self._max_queue_bytes
            ):
                raise OverflowError(f"queue {destination!r} is full")
            if not self._budget.fits(size):
                raise OverflowError(f"the broker holds at most {self._budget.limit} bytes")
            self.publish([send], outbox)
            return
        self._counters.messages_received += 1
        for subscription in list(self._topics.get(destination, ())):
            if only is not None and subscription.session is not only:
                continue
            queue = subscription.queue
            if self._queue_takes(queue, size) and self._budget.fits(size):
                queue.put(self._stored(send, size))
                self.dispatch(queue, outbox)

    def subscribe(
        self, session: Session, event: Subscribe, destination: str, prefetch: int
    ) -> _Subscription | None:
        """A subscription of ``session`` to ``destination``; None: too many destinations."""
        known = destination in self._queues or destination in self._topics
        if not known and self._count() >= self._max_destinations:
            return None
        if self.is_topic(destination):
            queue = _Queue(destination, self._budget, private=True)
        else:
            queue = self._queue(destination)
        subscription = _Subscription(session, event, queue, prefetch)
        queue.consumers.append(subscription)
        if queue.private:
            self._topics.setdefault(destination, []).append(subscription)
        return subscription

    def _stored(self, send: Send, size: int) -> _StoredMessage:
        return _StoredMessage(f"m-{next(self._message_ids)}", send, size)

    def dispatch(self, queue: _Queue, outbox: Outbox) -> None:
        """Deliver waiting messages while some subscription can take one."""
        while queue.ready:
            subscription = queue.next_consumer()
            if subscription is None:
                return
            self._deliver(subscription, queue.ready.popleft(), outbox)

    def _deliver(
        self, subscription: _Subscription, message: _StoredMessage, outbox: Outbox
    ) -> None:
        session = subscription.session
        connection = session.connection
        ack_id = None
        if subscription.ack != "auto" and connection.version == "1.2":
            ack_id = f"{session.id}-{next(self._books[session].ack_ids)}"
        send = message.send
        headers = send.headers
        if message.redelivered:
            # First, so that it wins over a user header of the same name.
            headers = (("redelivered", "true"), *headers)
        delivery = Message(
            destination=subscription.destination,
            message_id=message.id,
            subscription=subscription.id,
            body=send.body,
            ack=ack_id,
            content_type=send.content_type,
            headers=headers,
            content_length=send.content_length,
        )
        outbox.write(session, _encode_delivery(connection, delivery))
        session._active = True
        self._counters.messages_delivered += 1
        if subscription.ack == "auto":
            subscription.queue.settle([message])
        else:
            # Named as the version's ACK names it: the ack header in 1.2, message-id before.
            subscription.unacked[ack_id or message.id] = message
        if len(outbox.data[session]) >= self._output_limit:
            session.hold()

    def settle(
        self, queue: _Queue, messages: list[_StoredMessage], again: bool, outbox: Outbox
    ) -> None:
        """Finish with ``messages``: drop them, or (``again``) deliver them again."""
        if again and not queue.closed:
            queue.requeue(messages)
            self.dispatch(queue, outbox)
        else:
            queue.settle(messages)
            self._forget_if_unused(queue)

    # -- ending ----------------------------------------------------------------

    def drop(self, subscription: _Subscription, outbox: Outbox) -> None:
        """``subscription`` has ended: what it had not settled goes back (a topic's is dropped)."""
        queue = subscription.queue
        queue.consumers.remove(subscription)
        unacked = list(subscription.unacked.values())
        subscription.unacked.clear()
        if queue.private:
            queue.close(unacked)
            subscribers = self._topics[queue.destination]
            subscribers.remove(subscription)
            if not subscribers:
                del self._topics[queue.destination]
            return
        queue.requeue(unacked)
        self.dispatch(queue, outbox)
        self._forget_if_unused(queue)

    def _forget_if_unused(self, queue: _Queue) -> None:
        # Queues come and go with their names; keep none that holds nothing for no one.
        unused = not queue.private and not queue.consumers and queue.held == 0
        if unused and self._queues.get(queue.destination) is queue:
            del self._queues[queue.destination]


class BrokerCore:
    """The broker without I/O; see the module docstring for what it does.

    ``users`` maps login to passcode; ``None`` lets anyone in.  ``versions``
    are the protocol versions offered.  ``server_name`` is the CONNECTED
    frame's ``server`` header.  ``heartbeat`` is
    ``(can send every ms, wants to receive every ms)``: the broker sends
    heart-beats as often as a client asks, but not more often than the first
    (0: never), and asks for them every second ms (0: never).
    ``limits`` bounds incoming frames.  ``max_in_flight`` is the default
    in-flight limit of a client-acknowledged subscription, ``max_queue_length``
    the most messages a queue holds, ``output_limit`` the bytes one outbox may
    hold for one session before deliveries to it pause.  ``connect_timeout``,
    ``frame_timeout`` and ``slow_consumer_timeout`` are the deadlines in
    seconds (see the module docstring; ``None`` disables one).  ``strict``
    refuses every client frame the specs forbid; by default the broker is
    lenient as RabbitMQ and ActiveMQ are: its sessions are
    ``ServerConnection(strict=False)`` (see :ref:`broker-strict-and-lenient`).
    ``max_memory`` is the budget in bytes for every message the broker holds:
    from 80 % of it publishers are held back (the memory alarm), at it a SEND
    is refused.  ``max_queue_bytes`` bounds the bytes one queue (or one topic
    subscription) holds, ``max_transaction_bytes`` those one open transaction
    holds; ``max_destinations`` is the most queues and topics the broker keeps,
    ``max_transactions`` the most transactions one session may have open.
    ``max_connections`` is the most client connections served at once (one
    more gets ERROR ``too many connections`` before anything else),
    ``max_connections_per_login`` the most sessions one login may have open
    (a CONNECT beyond it gets the same ERROR); ``idle_timeout`` ends, with
    ERROR ``idle timeout``, a session whose client sends no heart-beats once no
    frame has gone either way for that many seconds; a session holding a
    subscription is exempt (waiting for rare messages is what it is for), and
    its clock restarts when the last subscription ends.  ``permissions`` maps
    each login to the destinations it may write to and read
    (:class:`Permissions`; a SEND or SUBSCRIBE beyond them gets ERROR ``access
    refused``).  ``failed_login_rate`` bounds the failed logins per second of
    one client address (the ``address`` of :meth:`open_session`): after 10,
    its CONNECTs wait their turn.  See :doc:`security` for the defaults.

    Two hooks serve transports that add routing of their own (such as
    :class:`stomp_proto.asgi.StompApp`); neither is a :class:`BrokerOptions`
    option.  ``divert(session, send)`` is asked about every SEND the login may
    write: when it returns true the core neither stores nor acknowledges it -
    the transport deals with it, then calls :meth:`answer_diverted`.
    ``user_prefix`` (such as ``"/user/"``) turns on user destinations: a
    SUBSCRIBE to ``/user/queue/x`` by user ``alice`` (:attr:`Session.user`)
    receives what is sent to ``/user/alice/queue/x``, as a topic does (see
    :meth:`user_destination`).  ``relay(session, event)`` is asked about every
    SEND, SUBSCRIBE, UNSUBSCRIBE, ACK, NACK, COMMIT and ABORT: when true the
    core leaves it to the transport (:attr:`Session.relayed`), which forwards
    it to another broker and then calls :meth:`answer_diverted`; the
    transport delivers that broker's messages with :meth:`deliver_relayed`.
    """

    def __init__(
        self,
        *,
        users: Mapping[str, str] | None = None,
        permissions: Mapping[str, Permissions] | None = None,
        failed_login_rate: float | None = DEFAULT_FAILED_LOGIN_RATE,
        versions: tuple[Version, ...] = VERSIONS,
        heartbeat: tuple[int, int] = DEFAULT_HEARTBEAT,
        limits: Limits | None = None,
        max_in_flight: int = 1000,
        max_queue_length: int = 100_000,
        max_memory: int = DEFAULT_MAX_MEMORY,
        max_queue_bytes: int = DEFAULT_MAX_QUEUE_BYTES,
        max_transaction_bytes: int = DEFAULT_MAX_TRANSACTION_BYTES,
        max_destinations: int = DEFAULT_MAX_DESTINATIONS,
        max_transactions: int = DEFAULT_MAX_TRANSACTIONS,
        server_name: str = DEFAULT_SERVER_NAME,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
        connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
        frame_timeout: float | None = DEFAULT_FRAME_TIMEOUT,
        slow_consumer_timeout: float | None = DEFAULT_SLOW_CONSUMER_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        max_connections_per_login: int = DEFAULT_MAX_CONNECTIONS_PER_LOGIN,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        strict: bool = False,
        divert: Callable[[Session, Send], bool] | None = None,
        user_prefix: str | None = None,
        relay: Callable[
            [Session, Send | Subscribe | Unsubscribe | Ack | Nack | Commit | Abort], bool
        ]
        | None = None,
    ) -> None:
        if user_prefix is not None and (
            not user_prefix.startswith("/") or not user_prefix.endswith("/") or user_prefix == "/"
        ):
            raise ValueError(f"user_prefix starts and ends with '/', as '/user/': {user_prefix!r}")
        self._divert = divert
        self._relay = relay
        self._user_prefix = user_prefix
        if not versions or any(v not in VERSIONS for v in versions):
            raise ValueError(f"versions must be a non-empty subset of {VERSIONS}")
        if len(heartbeat) != 2 or any(ms < 0 for ms in heartbeat):
            raise ValueError("heartbeat must be two non-negative intervals in ms")
        for name, value in (
            ("max_in_flight", max_in_flight),
            ("max_queue_length", max_queue_length),
            ("max_memory", max_memory),
            ("max_queue_bytes", max_queue_bytes),
            ("max_transaction_bytes", max_transaction_bytes),
            ("max_destinations", max_destinations),
            ("max_transactions", max_transactions),
            ("output_limit", output_limit),
            ("max_connections", max_connections),
            ("max_connections_per_login", max_connections_per_login),
        ):
            if value < 1:
                raise ValueError(f"{name} must be at least 1")
        for name, timeout in (
            ("connect_timeout", connect_timeout),
            ("frame_timeout", frame_timeout),
            ("slow_consumer_timeout", slow_consumer_timeout),
            ("idle_timeout", idle_timeout),
        ):
            if timeout is not None and not timeout > 0:
                raise ValueError(f"{name} must be positive, or None")
        self._connect_timeout = connect_timeout
        self._frame_timeout = frame_timeout
        self._slow_consumer_timeout = slow_consumer_timeout
        self._idle_timeout = idle_timeout
        self._max_connections = max_connections
        #: Who may log in, what each login may do, the sessions each has open.
        self._logins = Logins(users, permissions, failed_login_rate, max_connections_per_login)
        self._strict = strict
        self._versions = versions
        self._heartbeat = heartbeat
        self._limits = limits
        self._max_in_flight = max_in_flight
        self._max_transaction_bytes = max_transaction_bytes
        self._max_transactions = max_transactions
        self._budget = MemoryBudget(max_memory)
        self._server_name = server_name
        self._sessions: dict[str, Session] = {}
        self._books: dict[Session, _Books] = {}
        self._session_ids = itertools.count(1)
        #: What the broker has done so far (:class:`~stomp_proto.broker._metrics.Counters`):
        #: the core counts sessions, messages and refusals; a transport adds the rest.
        self.counters = Counters()
        #: The queues and topics, and what moves messages through them.
        self._destinations = _Destinations(
            budget=self._budget,
            max_queue_length=max_queue_length,
            max_queue_bytes=max_queue_bytes,
            max_destinations=max_destinations,
            output_limit=output_limit,
            user_prefix=user_prefix,
            counters=self.counters,
            books=self._books,
        )

    # -- inspection ------------------------------------------------------------

    @property
    def strict(self) -> bool:
        """Whether client frames are checked to the letter of the specs (not the default)."""
        return self._strict

    @property
    def users(self) -> Mapping[str, str] | None:
        """The logins admitted and their passcodes; ``None`` when anyone is let in."""
        return self._logins.users

    @property
    def login_throttle(self) -> LoginThrottle | None:
        """The failed-login throttle (``failed_login_rate``), for a transport's other doors."""
        return self._logins.throttle

    def authenticate(self, login: str | None, passcode: str | None) -> bool:
        """Whether ``users`` admits ``login`` with ``passcode`` (anyone, without ``users``).

        The check a CONNECT gets, in constant time whether or not the login
        exists; for a transport's other doors (``Broker``'s ``/metrics``).
        """
        return self._logins.authenticate(login, passcode)

    @property
    def memory_used(self) -> int:
        """Bytes of messages the broker holds now, as charged to its ``max_memory`` budget."""
        return self._budget.used

    @property
    def memory_limit(self) -> int:
        """The memory budget: bytes of messages the broker holds at most (``max_memory``)."""
        return self._budget.limit

    @property
    def memory_alarm(self) -> bool:
        """True while publishers are held back: from 80 % of ``max_memory`` down to 60 %.

        Meanwhile :attr:`Session.reading_blocked` is true for every session that
        has published; consumers go on.
        """
        return self._budget.alarm

    @property
    def sessions(self) -> tuple[Session, ...]:
        """The sessions not yet ended, oldest first."""
        return tuple(self._sessions.values())

    def queued(self, destination: str) -> int:
        """Messages waiting in the queue ``destination`` for a consumer (not yet delivered)."""
        return self._destinations.queued(destination)

    def destinations(self) -> dict[str, tuple[int, int, int]]:
        """Each destination in use: ``(queued, unacked, subscribers)``.

        For a topic, the sums over its subscriptions' private queues.
        """
        return dict(sorted(self.each_destination()))

    def each_destination(self) -> Iterator[tuple[str, tuple[int, int, int]]]:
        """Each destination in use and its ``(queued, unacked, subscribers)``, one at a time.

        The names are those in use at the call; one gone by the time the
        iteration reaches it is skipped.  So a transport can look at 100,000
        destinations a slice at a time, letting clients be served in between.
        """
        return self._destinations.each_destination()

    # -- driving ---------------------------------------------------------------

    def open_session(
        self,
        versions: tuple[Version, ...] | None = None,
        address: str | None = None,
        *,
        user: str | None = None,
    ) -> Session:
        """A session for a new client connection.

        ``versions`` narrows the broker's versions for this session (a
        WebSocket subprotocol caps them); it must keep at least one of them.
        ``address`` is where the client connects from (its host, without the
        port): failed logins are throttled per address.  ``user`` is a user
        the transport has authenticated already (a web app's session): its
        CONNECT is then not checked against ``users``, and its login header is
        ignored; ``user`` is the session's login for ``permissions`` and
        ``max_connections_per_login``.
        """
        allowed = self._versions
        if versions is not None:
            allowed = tuple(v for v in self._versions if v in versions)
            if not allowed:
                raise ValueError(f"none of {versions} is among the broker's {self._versions}")
        session_id = f"s{next(self._session_ids)}"
        connection = ServerConnection(versions=allowed, strict=self._strict, limits=self._limits)
        session = Session(self, session_id, connection)
        session._address = address
        session._vouched = user
        if len(self._sessions) >= self._max_connections:
            # Told at its first process(), before anything it sends is read.
            limit = self._max_connections
            session._expired = (
                TOO_MANY_CONNECTIONS,
                f"the broker serves at most {limit} connections (max_connections)",
            )
        self._sessions[session_id] = session
        self._books[session] = _Books()
        return session

    def process(self, session: Session) -> Outbox:
        """Act on every event ``session``'s received data holds; what to write, and to close."""
        outbox = Outbox()
        connection = session.connection
        expiry = session.expiry
        if expiry is not None and not session.closed:
            message, detail = expiry
            if connection.state is ConnectionState.CLOSED:
                self._end_session(session, outbox)
            else:
                self._refuse(session, None, message, detail, outbox, _reason(message))
        if session._waiting_connect is not None and not session.closed:
            waiting, session._waiting_connect = session._waiting_connect, None
            self._on_connect(session, waiting, outbox)
        # Nothing after a waiting CONNECT, or a diverted SEND, is looked at before it is answered.
        while not session.closed and session._waiting_connect is None and session._diverted is None:
            try:
                event = connection.next_event()
            except RemoteProtocolError as exc:
                # The connection is closed already; the hint is the ERROR the specs ask for.
                if exc.event_hint is not None:
                    outbox.write(session, connection.send(exc.event_hint))
                self.counters.refused[exc.kind.name.lower()] += 1
                self._end_session(session, outbox)
                break
            if event is None:
                break
            session.frame_completed()
            self._handle(session, event, outbox)
        return outbox

    def close_session(self, session: Session) -> Outbox:
        """The transport of ``session``'s client is gone: hand its messages to others, forget it.

        Unacknowledged queue messages go back to their queues marked
        ``redelivered``, open transactions are dropped.  Does nothing for a
        session already ended.
        """
        outbox = Outbox()
        self._end_session(session, outbox)
        outbox.data.pop(session, None)
        return outbox

    def pause(self, session: Session) -> None:
        """Hold back deliveries to ``session`` (its transport is not keeping up).

        Its queue messages stay queued or go to other consumers; receipts and
        errors are still produced.
        """
        session.hold()

    def resume(self, session: Session) -> Outbox:
        """Deliver to ``session`` again; returns what that delivers at once."""
        outbox = Outbox()
        session.release()
        books = self._books.get(session)
        for subscription in list(books.subscriptions.values()) if books else ():
            self._destinations.dispatch(subscription.queue, outbox)
        return outbox

    def shut_down(self, reason: str = SHUTDOWN_REASON) -> Outbox:
        """End every session with an ERROR saying ``reason``."""
        outbox = Outbox()
        sessions = list(self._sessions.values())
        # Every ERROR first: that closes each connection, so that ending one
        # session does not redeliver its messages to another about to end.
        for session in sessions:
            if session.connection.state is not ConnectionState.CLOSED:
                outbox.write(session, session.connection.send(Error(message=reason)))
        for session in sessions:
            self._end_session(session, outbox)
        return outbox

    def user_destination(self, user: str, destination: str) -> str:
        """Where a message to ``user``'s ``destination`` (``/queue/x``) is sent.

        ``user_prefix``, the user (``/`` and ``%`` in it percent-encoded) and
        ``destination``: ``/user/alice/queue/x``.  A user's SUBSCRIBE to
        ``/user/queue/x`` receives what is sent there.  LocalProtocolError
        without ``user_prefix``, ValueError for a destination not starting
        with ``/``.
        """
        if self._user_prefix is None:
            raise LocalProtocolError(
                ErrorKind.BAD_STATE, "user destinations are off: the core has no user_prefix"
            )
        if not destination.startswith("/"):
            raise ValueError(f"a user's destination starts with '/': {destination!r}")
        return f"{self._user_prefix}{urllib.parse.quote(user, safe='')}{destination}"

    def publish(
        self,
        destination: str,
        body: bytes = b"",
        *,
        headers: tuple[tuple[str, str], ...] = (),
        content_type: str | None = None,
        only: Session | None = None,
    ) -> Outbox:
        """Send a message from the application itself, as a client's SEND would go.

        ``body`` to ``destination``, with ``content_type`` and the other
        ``headers`` (``(name, value)`` pairs).  ``only`` restricts a topic (or
        a user destination) to that session's subscriptions.  OverflowError
        when a queue or the memory budget has no room for it (a topic
        subscription without room misses it, as for a SEND);
        LocalProtocolError for ``only`` with a queue.
        """
        send = Send(destination, body, content_type=content_type, headers=headers)
        outbox = Outbox()
        self._destinations.publish_app(send, only, outbox)
        return outbox

    def answer_diverted(self, session: Session, refusal: tuple[str, str] | None = None) -> Outbox:
        """Finish the SEND ``divert`` took from ``session`` (its ``diverted``), then read on.

        Without ``refusal`` its RECEIPT is sent, if it asked for one; with
        ``refusal``, ``(message, detail)``, the session is ended with that
        ERROR (naming the receipt).  Then the frames that waited behind it are
        processed; the same finishes a frame the ``relay`` hook took.
        LocalProtocolError when no frame is diverted.
        """
        send = session._diverted
        if send is None:
            raise LocalProtocolError(
                ErrorKind.BAD_STATE, f"session {session.id} has no diverted SEND"
            )
        session._diverted = None
        relaying, session._relaying = session._relaying, False
        outbox = Outbox()
        if session.closed:
            return outbox
        if refusal is not None:
            message, detail = refusal
            reason = "refused_by_relay" if relaying else "refused_by_app"
            self._refuse(session, send.receipt, message, detail, outbox, reason)
            return outbox
        if isinstance(send, Send):
            self.counters.messages_received += 1
        elif isinstance(send, Subscribe):
            session._relayed_subscriptions.add(send.key)
        elif isinstance(send, Unsubscribe):
            session._relayed_subscriptions.discard(send.key or "")
            if not session._relayed_subscriptions and not self._subscribed(session):
                session.restart_idle_clock()
        elif isinstance(send, Commit):
            # The broker behind has committed its part; now the core's own part, if any.
            self._on_commit(session, send, outbox)
        elif isinstance(send, Abort):
            self._end_transaction(self._books[session].transactions.pop(send.transaction), outbox)
        if send.receipt is not None and not session.closed:
            outbox.write(session, session.connection.send(Receipt(send.receipt)))
        more = self.process(session)
        for other, data in more.data.items():
            outbox.write(other, bytes(data))
        outbox.to_close |= more.to_close
        return outbox

    def deliver_relayed(
        self, session: Session, message: Message, *, acked: bool
    ) -> tuple[bytes, str | None]:
        """The bytes of ``message``, from the broker a relay forwards to, for ``session``.

        ``message`` names the session's own subscription; ``acked``: that
        subscription is not ``auto``.  In STOMP 1.2 the core gives it an
        ``ack`` header of its own.  Returns the bytes to write and the name
        the client's ACK or NACK of it will carry in ``covered`` (``None``
        when not ``acked``).  Headers a 1.0 frame cannot carry are dropped.
        """
        connection = session.connection
        ident: str | None = None
        if acked:
            if connection.version == "1.2":
                ident = f"{session.id}-{next(self._books[session].ack_ids)}"
            else:
                ident = message.message_id
        delivery = dataclasses.replace(message, ack=ident if connection.version == "1.2" else None)
        data = _encode_delivery(connection, delivery)
        session._active = True
        self.counters.messages_delivered += 1
        return data, ident

    def end_with_error(self, session: Session, message: str, detail: str = "") -> Outbox:
        """End ``session`` with ERROR ``message`` (``detail`` its body), as the transport decides.

        A relay uses it when the broker behind it is lost.  Does nothing for a
        session already ended.
        """
        outbox = Outbox()
        session._diverted = None
        session._relaying = False
        if not session.closed:
            self._refuse(session, None, message, detail, outbox, "ended_by_transport")
        return outbox

    # -- events ----------------------------------------------------------------

    def _handle(self, session: Session, event: Event, outbox: Outbox) -> None:
        if isinstance(event, Connect):
            self._on_connect(session, event, outbox)
            return
        if isinstance(event, (ConnectionClosed, HeartBeatTimeout)):
            self._end_session(session, outbox)
            return
        if (
            self._relay is not None
            and isinstance(event, (Send, Subscribe, Unsubscribe, Ack, Nack, Commit, Abort))
            and self._relay(session, event)
        ):
            # The transport forwards it, then calls answer_diverted (its receipt, or an ERROR).
            session._diverted = event
            session._relaying = True
            return
        if isinstance(event, Send):
            self._on_send(session, event, outbox)
        elif isinstance(event, Subscribe):
            self._on_subscribe(session, event, outbox)
        elif isinstance(event, Unsubscribe):
            # The connection checked that the subscription exists.
            subscriptions = self._books[session].subscriptions
            self._destinations.drop(subscriptions.pop(event.key or ""), outbox)
            if not subscriptions:
                session.restart_idle_clock()
        elif isinstance(event, (Ack, Nack)):
            self._on_ack(session, event, outbox)
        elif isinstance(event, Begin):
            self._on_begin(session, event, outbox)
        elif isinstance(event, Commit):
            self._on_commit(session, event, outbox)
        elif isinstance(event, Abort):
            self._end_transaction(self._books[session].transactions.pop(event.transaction), outbox)
        # Anything else (a heart-beat, DISCONNECT) needs no action before its receipt.
        receipt: str | None = getattr(event, "receipt", None)
        if receipt is not None and not session.closed and session._diverted is None:
            outbox.write(session, session.connection.send(Receipt(receipt)))
        if isinstance(event, Disconnect):
            self._end_session(session, outbox)

    def _on_connect(self, session: Session, event: Connect, outbox: Outbox) -> None:
        logins = self._logins
        if session._vouched is not None:
            login: str | None = session._vouched
        elif logins.checked:
            now = session._now
            if now is not None and logins.ready_at(session._address, now) > now:
                session._waiting_connect = event  # until the throttle lets its address try
                return
            if not logins.authenticate(event.login, event.passcode):
                logins.failed(session._address, now)
                self._refuse_login(session, outbox)
                return
            login = event.login
        else:
            login = event.login
        if login is not None and logins.full(login):
            limit = logins.max_per_login
            detail = f"login {login!r} has {limit} sessions open (max_connections_per_login)"
            reason = "too_many_connections_for_login"
            self._refuse(session, None, TOO_MANY_CONNECTIONS, detail, outbox, reason)
            return
        if login is not None:
            logins.opened(login)
            session._login = login
        session._claimed_login = login
        if session._vouched is not None or logins.checked:
            session._user = login
        # Offer beats only in the directions the client asked for, and say the
        # interval they will actually come at (as RabbitMQ does): what the client
        # wants, but not more often than the broker can.
        can_send, wants = event.heartbeat
        floor, ours_wanted = self._heartbeat
        ours = (max(floor, wants) if wants and floor else 0, ours_wanted if can_send else 0)
        connected = Connected(heartbeat=ours, session=session.id, server=self._server_name)
        outbox.write(session, session.connection.send(connected))
        self.counters.sessions_opened += 1

    def _refuse_login(self, session: Session, outbox: Outbox) -> None:
        self._refuse(
            session, None, LOGIN_FAILED, "the login or the passcode is wrong", outbox,
            "login_failed",
        )  # fmt: skip

    def _allowed(
        self,
        session: Session,
        access: Literal["write", "read"],
        event: Send | Subscribe,
        outbox: Outbox,
    ) -> bool:
        """Whether the login may ``access`` the destination; if not, refuse ``event``."""
        if self._logins.allows(session._claimed_login, access, event.destination):
            return True
        verb = "send to" if access == "write" else "subscribe to"
        detail = f"not allowed to {verb} {event.destination!r}"
        self._refuse(session, event.receipt, ACCESS_REFUSED, detail, outbox, "access_refused")
        return False

    def _on_send(self, session: Session, event: Send, outbox: Outbox) -> None:
        if not self._allowed(session, "write", event, outbox):
            return
        if self._divert is not None and self._divert(session, event):
            if event.transaction is not None:
                detail = f"a SEND to {event.destination!r} cannot be part of a transaction"
                self._refuse(session, event.receipt, "Bad SEND", detail, outbox, "bad_send")
                return
            session._diverted = event
            return
        if event.transaction is None:
            session._publisher = True
            refusal = self._destinations.room([event])
            if refusal is not None:
                self._refuse_with(session, event.receipt, refusal, outbox)
            else:
                self._destinations.publish([event], outbox)
            return
        session._publisher = True
        transaction = self._books[session].transactions[event.transaction]
        # A transaction is buffered in memory: bound it like a queue, and charge the budget.
        size = message_size(event)
        if len(transaction.sends) >= self._destinations.max_queue_length:
            detail = f"a transaction holds at most {self._destinations.max_queue_length} messages"
        elif transaction.held_bytes + size > self._max_transaction_bytes:
            detail = (
                f"a transaction holds at most {self._max_transaction_bytes} bytes"
                " of messages (max_transaction_bytes)"
            )
        elif not self._budget.fits(size):
            self._refuse_with(session, event.receipt, self._destinations.over_budget(), outbox)
            return
        else:
            transaction.sends.append(event)
            transaction.held_bytes += size
            self._budget.take(size)
            return
        self._refuse(
            session, event.receipt, "transaction too large", detail, outbox,
            "transaction_too_large",
        )  # fmt: skip

    def _on_begin(self, session: Session, event: Begin, outbox: Outbox) -> None:
        transactions = self._books[session].transactions
        if len(transactions) >= self._max_transactions:
            detail = (
                f"a session has at most {self._max_transactions} open transactions"
                " (max_transactions)"
            )
            self._refuse(
                session, event.receipt, "too many transactions", detail, outbox,
                "too_many_transactions",
            )  # fmt: skip
            return
        transactions[event.transaction] = _Transaction()

    def _on_subscribe(self, session: Session, event: Subscribe, outbox: Outbox) -> None:
        if not self._allowed(session, "read", event, outbox):
            return
        prefetch = self._prefetch(event)
        if prefetch is None:
            detail = "prefetch-count and activemq.prefetchSize must be non-negative integers"
            self._refuse(session, event.receipt, "Bad SUBSCRIBE", detail, outbox, "bad_subscribe")
            return
        destination = event.destination
        prefix = self._user_prefix
        if prefix is not None and destination.startswith(prefix):
            if session._user is None:
                detail = f"{destination!r} is a user destination: it needs an authenticated user"
                self._refuse(
                    session, event.receipt, "Bad SUBSCRIBE", detail, outbox, "bad_subscribe"
                )
                return
            destination = self.user_destination(session._user, destination[len(prefix) - 1 :])
        subscription = self._destinations.subscribe(session, event, destination, prefetch)
        if subscription is None:
            self._refuse_with(session, event.receipt, self._destinations.too_many(), outbox)
            return
        self._books[session].subscriptions[subscription.key] = subscription
        self._destinations.dispatch(subscription.queue, outbox)

    def _prefetch(self, event: Subscribe) -> int | None:
        """The subscription's in-flight limit; ``None`` if the header is not a count."""
        for name, value in event.headers:
            if name in PREFETCH_HEADERS:
                value = value.strip()
                if value.isascii() and value.isdigit() and len(value) <= 9:
                    return int(value)
                return None
        return self._max_in_flight

    def _on_ack(self, session: Session, event: Ack | Nack, outbox: Outbox) -> None:
        subscription = self._acked_subscription(session, event)
        if subscription is None:
            return
        unacked = subscription.unacked
        messages = [unacked.pop(ident) for ident in event.covered if ident in unacked]
        again = isinstance(event, Nack)
        queue = subscription.queue
        if event.transaction is not None:
            # The connection counts them as settled already; COMMIT or ABORT decides.
            settlements = self._books[session].transactions[event.transaction].settlements
            settlements.extend((queue, message, again) for message in messages)
        else:
            self._count_settled(len(messages), again)
            self._destinations.settle(queue, messages, again, outbox)
        self._destinations.dispatch(queue, outbox)  # in-flight room was freed

    def _acked_subscription(self, session: Session, event: Ack | Nack) -> _Subscription | None:
        """The subscription holding the deliveries ``event.covered`` names.

        Normally the one in ``event.subscription`` (which the connection fills
        in), but a ``subscription`` header sent where the version does not use
        it is kept as sent, so look the delivery up when it does not match.
        """
        if not event.covered:
            return None
        first = event.covered[0]
        subscriptions = self._books[session].subscriptions
        named = subscriptions.get(event.subscription or "")
        if named is not None and first in named.unacked:
            return named
        return next((s for s in subscriptions.values() if first in s.unacked), None)

    def _on_commit(self, session: Session, event: Commit, outbox: Outbox) -> None:
        transaction = self._books[session].transactions.pop(event.transaction)
        # Its messages move from the transaction's charge to their queues'.
        self._budget.give(transaction.held_bytes)
        transaction.held_bytes = 0
        refusal = self._destinations.room(transaction.sends)
        if refusal is not None:
            self._refuse_with(session, event.receipt, refusal, outbox)
            self._end_transaction(transaction, outbox)
            return
        for queue, message, again in transaction.settlements:
            self._count_settled(1, again)
            self._destinations.settle(queue, [message], again, outbox)
        self._destinations.publish(transaction.sends, outbox)

    def _count_settled(self, count: int, nacked: bool) -> None:
        if nacked:
            self.counters.messages_nacked += count
        else:
            self.counters.messages_acked += count

    def _end_transaction(self, transaction: _Transaction, outbox: Outbox) -> None:
        """Abort: forget its messages, put back what it settled."""
        self._budget.give(transaction.held_bytes)
        transaction.held_bytes = 0
        # The client cannot ACK these again (its connection counts them as
        # settled), so they go back to their queues like unacknowledged ones.
        for queue, message, _ in transaction.settlements:
            self._destinations.settle(queue, [message], True, outbox)

    # -- ending ----------------------------------------------------------------

    def _subscribed(self, session: Session) -> bool:
        """Whether ``session`` holds at least one subscription."""
        books = self._books.get(session)
        return books is not None and bool(books.subscriptions)

    def _refuse_with(
        self, session: Session, receipt: str | None, refusal: Refusal, outbox: Outbox
    ) -> None:
        message, detail, reason = refusal
        self._refuse(session, receipt, message, detail, outbox, reason)

    def _refuse(
        self,
        session: Session,
        receipt: str | None,
        message: str,
        detail: str,
        outbox: Outbox,
        reason: str,
    ) -> None:
        """Send an ERROR and end the session (an ERROR always ends a STOMP session).

        ``reason`` is what the refusal is counted as (``counters.refused``).
        """
        self.counters.refused[reason] += 1
        error = Error(
            message=message,
            body=detail.encode(),
            receipt_id=receipt,
            content_type="text/plain",
        )
        outbox.write(session, session.connection.send(error))
        self._end_session(session, outbox)

    def _end_session(self, session: Session, outbox: Outbox) -> None:
        if session.closed:
            return
        # Closed first, so that what is requeued below is not delivered back to it.
        session.end()
        outbox.to_close.add(session)
        if session._login is not None:
            self._logins.closed(session._login)
            session._login = None
        books = self._books.pop(session)
        for subscription in books.subscriptions.values():
            self._destinations.drop(subscription, outbox)
        for transaction in books.transactions.values():
            self._end_transaction(transaction, outbox)
        self._sessions.pop(session.id, None)


def _reason(message: str) -> str:
    """A deadline's ERROR message as a metrics label: ``"CONNECT timeout"``: ``connect_timeout``."""
    return message.lower().replace(" ", "_")
