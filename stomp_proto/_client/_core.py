"""What every client adapter does that is not I/O.

The asyncio, trio and thread adapters differ only in how they read, write,
wait and hand results over.  Everything else lives here, once: the options and
the CONNECT they produce, ids for subscriptions, receipts and transactions,
the registry of open subscriptions (to restore them after a reconnect), which
waiter or subscription each incoming event belongs to, what error a failure
becomes, and the reconnect schedule.

The adapters call :meth:`ClientCore.route` for every event their
ClientConnection returns and carry out the resulting :class:`Route`: hand a
message to a subscription's queue, complete or fail a waiter, or end the
session.
"""

from __future__ import annotations

import itertools
import random
import ssl as _ssl
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TypeAlias, TypedDict

from .._connection import DEFAULT_TOLERANCE, ClientConnection
from .._events import (
    AckMode,
    Connect,
    Connected,
    ConnectionClosed,
    Error,
    HeartBeatTimeout,
    Message,
    Receipt,
    Send,
    Subscribe,
)
from .._frame import VERSIONS, Event, HeartBeat, Version
from .._limits import Limits

__all__ = [
    "Backoff",
    "BrokerError",
    "ClientCore",
    "ClientError",
    "ClientOptions",
    "ConnectOptions",
    "ConnectionLost",
    "HeartBeatLost",
]


class ClientError(Exception):
    """Base class of the errors the client adapters raise (besides protocol errors)."""


class BrokerError(ClientError):
    """The broker sent an ERROR frame; it closes the connection after it.

    ``error`` is the :class:`~stomp_proto.Error` event: ``message`` is the
    broker's short text, ``body`` its details.
    """

    def __init__(self, error: Error) -> None:
        self.error = error
        detail = error.body.decode("utf-8", "replace").strip()
        text = error.message or "ERROR frame without a message"
        super().__init__(f"{text}: {detail}" if detail and detail != text else text)

    @property
    def message(self) -> str | None:
        """The ERROR frame's ``message`` header."""
        return self.error.message


class ConnectionLost(ClientError):
    """The connection ended: the peer closed it, the network failed, or it was never made."""


class HeartBeatLost(ConnectionLost):
    """Nothing arrived from the broker within the negotiated heart-beat deadline."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """Reconnect schedule: waits grow from ``initial`` by ``factor`` up to ``maximum``.

    Each wait is spread by up to ``jitter`` (a fraction) so that many clients
    do not return at once.  ``attempts=None`` retries forever.
    """

    initial: float = 0.1
    maximum: float = 30.0
    factor: float = 2.0
    jitter: float = 0.1
    attempts: int | None = None

    def delays(self) -> Iterator[float]:
        delay = self.initial
        for _ in itertools.count() if self.attempts is None else range(self.attempts):
            yield delay * (1 + random.uniform(-self.jitter, self.jitter))
            delay = min(delay * self.factor, self.maximum)


@dataclass(frozen=True, slots=True)
class ConnectOptions:
    """How to reach and log in to a broker; shared by every adapter's ``connect``."""

    host: str = "127.0.0.1"
    port: int = 61613
    login: str | None = None
    passcode: str | None = None
    #: The CONNECT ``host`` header: RabbitMQ's virtual host ("/" is its default).
    vhost: str = "/"
    #: (can send every ms, want to receive every ms); 0 disables a direction.
    heartbeat: tuple[int, int] = (10_000, 10_000)
    versions: tuple[Version, ...] = VERSIONS
    ssl: _ssl.SSLContext | None = None
    #: Seconds allowed for connecting and for each wait on the broker (receipts, ...).
    timeout: float | None = 30.0
    #: Reconnect after the session ends (a lost connection, a heart-beat timeout
    #: or an ERROR), restoring subscriptions; None: never.  The first connect
    #: is not retried.
    reconnect: Backoff | None = None
    #: Messages buffered per subscription before reading from the socket pauses.
    max_pending_messages: int = 1000
    #: Silence allowed from the broker, in negotiated heart-beat intervals.
    heartbeat_tolerance: float = DEFAULT_TOLERANCE
    headers: Mapping[str, str] = field(default_factory=dict)
    limits: Limits | None = None
    #: Speak STOMP over a WebSocket at this path ("/ws"): ``ws://host:port/path``,
    #: or ``wss://`` with ``ssl``.  None: plain STOMP over TCP.
    websocket: str | None = None

    def __post_init__(self) -> None:
        if self.websocket is not None:
            from .._websocket import check_path, require_wsproto

            check_path(self.websocket)
            require_wsproto()  # fail at connect(), with how to install it

    @classmethod
    def build(cls, host: str, port: int, options: ClientOptions) -> ConnectOptions:
        """Options from the keyword arguments of an adapter's ``connect()``."""
        values = dict(options)
        if "headers" in values:
            values["headers"] = dict(options["headers"])
        return cls(host=host, port=port, **values)  # type: ignore[arg-type]

    def connect_event(self, versions: tuple[Version, ...] | None = None) -> Connect:
        """The CONNECT; ``versions`` narrows the accepted ones (a WebSocket subprotocol's cap)."""
        return Connect(
            host=self.vhost,
            accept_versions=self.versions if versions is None else versions,
            login=self.login,
            passcode=self.passcode,
            heartbeat=self.heartbeat,
            headers=tuple(self.headers.items()),
        )


class ClientOptions(TypedDict, total=False):
    """The keyword arguments every adapter's ``connect(host, port, **options)`` takes.

    They are the fields of :class:`ConnectOptions`: ``login``, ``passcode``,
    ``vhost`` (the CONNECT ``host`` header, RabbitMQ's virtual host, default
    "/"), ``heartbeat`` (can send every ms, want every ms; default 10 s both
    ways), ``versions``, ``ssl`` (an :class:`ssl.SSLContext`), ``timeout``
    (seconds for connecting and for each wait on the broker), ``reconnect`` (a
    :class:`Backoff`), ``max_pending_messages`` (per subscription, before
    reading pauses), ``heartbeat_tolerance`` (silence allowed from the broker,
    in heart-beat intervals; 2.5), ``headers`` (extra CONNECT headers),
    ``limits`` and ``websocket`` (a path such as ``"/ws"``: STOMP over
    WebSocket, see :doc:`websocket`).
    """

    login: str | None
    passcode: str | None
    vhost: str
    heartbeat: tuple[int, int]
    versions: tuple[Version, ...]
    ssl: _ssl.SSLContext | None
    timeout: float | None
    reconnect: Backoff | None
    max_pending_messages: int
    heartbeat_tolerance: float
    headers: Mapping[str, str]
    limits: Limits | None
    websocket: str | None


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


#: What to do with one event: a :class:`Message` goes to the buffer of the
#: subscription it names (:attr:`Message.key`), a :class:`Resolve` completes a
#: waiter, an :class:`End` ends the session, ``None``: nothing.
Route: TypeAlias = Message | Resolve | End | None

CONNECT_WAITER = "connect"


class ClientCore:
    """One client's protocol-side state, across reconnects.

    ``conn`` is the ClientConnection of the current transport; :meth:`new_connection`
    replaces it when the adapter connects again.  Subscriptions survive that:
    :meth:`restore_subscriptions` gives the SUBSCRIBE events to send again.
    Messages delivered on an earlier connection cannot be acknowledged on a
    later one (their acknowledgement belonged to the connection that is gone).
    """

    def __init__(self, options: ConnectOptions) -> None:
        self.options = options
        self.generation = 0
        self.conn = self._make_connection()
        self._ids = itertools.count(1)
        self._subscriptions: dict[str, Subscribe] = {}

    def _make_connection(self) -> ClientConnection:
        return ClientConnection(
            limits=self.options.limits, heartbeat_tolerance=self.options.heartbeat_tolerance
        )

    def new_connection(self) -> ClientConnection:
        """Start over on a new transport: a fresh ClientConnection, same subscriptions."""
        self.generation += 1
        self.conn = self._make_connection()
        return self.conn

    # -- ids and events --------------------------------------------------------

    def next_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    def subscribe_event(
        self,
        destination: str,
        ack: AckMode,
        headers: Mapping[str, str] | None,
        subscription_id: str | None,
    ) -> Subscribe:
        return Subscribe(
            destination,
            id=subscription_id or self.next_id("sub"),
            ack=ack,
            headers=tuple((headers or {}).items()),
        )

    def send_event(
        self,
        destination: str,
        body: bytes | str,
        *,
        content_type: str | None,
        headers: Mapping[str, str] | None,
        transaction: str | None,
        receipt: str | None,
        content_length: bool,
    ) -> Send:
        """The SEND for one ``send()`` call; a ``str`` body is sent as UTF-8 text."""
        if isinstance(body, str):
            body = body.encode("utf-8")
            if content_type is None:
                content_type = "text/plain;charset=utf-8"
        return Send(
            destination,
            bytes(body),
            content_type=content_type,
            transaction=transaction,
            receipt=receipt,
            headers=tuple((headers or {}).items()),
            content_length=content_length,
        )

    def subscribed(self, event: Subscribe) -> None:
        """Remember an open subscription (call after its SUBSCRIBE was written)."""
        self._subscriptions[event.key] = event

    def unsubscribed(self, key: str) -> None:
        self._subscriptions.pop(key, None)

    def restore_subscriptions(self) -> list[Subscribe]:
        """The SUBSCRIBE events that re-establish every open subscription."""
        return list(self._subscriptions.values())

    # -- routing ---------------------------------------------------------------

    def route(self, event: Event) -> Route:
        """What the adapter must do with ``event`` from ``conn.next_event()``."""
        if type(event) is Message:
            return event
        if isinstance(event, Receipt):
            return Resolve(event.receipt_id, event)
        if isinstance(event, Connected):
            return Resolve(CONNECT_WAITER, event)
        if isinstance(event, Error):
            return End(BrokerError(event))
        if isinstance(event, HeartBeatTimeout):
            return End(HeartBeatLost(f"no data from the broker for {event.silence:.1f} s"))
        if isinstance(event, ConnectionClosed):
            return End(ConnectionLost("the broker closed the connection"))
        if isinstance(event, HeartBeat):
            return None
        raise AssertionError(f"unexpected event {event!r}")  # pragma: no cover
