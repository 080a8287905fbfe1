"""The options of ``connect()``: what they are, how they are checked, what a URL sets.

:class:`ConnectOptions` is what every adapter's ``connect()`` builds (from its
arguments, or a connection URL, :mod:`._url`), and :class:`ClientOptions` the
keyword arguments it takes.
"""

from __future__ import annotations

import ssl as _ssl
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict

from .._checks import as_headers, check_bool, check_limits, check_number, is_int, wrong_type
from .._events import Connect, Message, Send
from .._frame import VERSIONS, Version
from .._limits import Limits
from .._public import present_as
from .._websocket import check_path, require_wsproto
from ._backoff import Backoff
from ._lifecycle import SessionEventHook, SessionHook, StateHook
from ._url import looks_like_url, merge_url

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "Address",
    "ClientOptions",
    "ConnectOptions",
    "TracingHook",
    "check_addresses",
]

#: One broker: (host, port).
Address = tuple[str, int]

#: Seconds one connect attempt may take by default: a broker that answers at all
#: answers a CONNECT in far less, and a hung one must not hold the client long.
DEFAULT_CONNECT_TIMEOUT = 5.0


def check_addresses(hosts: object) -> tuple[Address, ...]:
    """``hosts`` as given to ``connect(hosts=...)``, checked: a non-empty list of (host, port)."""
    if isinstance(hosts, (str, bytes)) or not isinstance(hosts, Sequence):
        raise TypeError(
            "hosts is a list of (host, port) pairs, e.g. [('b1', 61613), ('b2', 61613)]"
        )
    if not hosts:
        raise ValueError("hosts is empty: give at least one (host, port)")
    checked = []
    for number, address in enumerate(hosts, 1):
        if (
            not isinstance(address, Sequence)
            or isinstance(address, (str, bytes))
            or len(address) != 2
        ):
            raise TypeError(f"hosts entry {number} is not a (host, port) pair: {address!r}")
        host, port = address
        if not isinstance(host, str) or not host:
            raise ValueError(f"hosts entry {number}: the host is not a non-empty str")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise ValueError(f"hosts entry {number}: the port {port!r} is not from 1 to 65535")
        checked.append((host, port))
    return tuple(checked)


def _option(name: str) -> str:
    """How an error names the ``connect()`` option ``name``."""
    return f"connect() option {name}"


class TracingHook(SessionHook, Protocol):
    """What a client calls when given ``tracing=``; :class:`stomp_proto.tracing.Tracing`
    (OpenTelemetry) is one.

    The clients know nothing more of tracing: without the option the hook is
    one ``is None`` test per send, per message taken and per ACK or NACK.  It is
    also told as sessions come and go (:meth:`session_up`, :meth:`session_lost`).
    """

    def sending(
        self, send: Send, broker: tuple[str, int], version: Version | None
    ) -> AbstractContextManager[Send]:
        """Around the writing of ``send`` (and the wait for its receipt): yields the
        SEND to write instead (with the trace context in its headers).  What the
        send raises goes through the block.

        ``broker`` is the ``(host, port)`` in use, ``version`` the negotiated
        STOMP version (``None`` before CONNECTED).
        """
        ...

    def received(
        self, message: Message, broker: tuple[str, int], version: Version | None, began: int
    ) -> None:
        """The application took ``message`` from a subscription, having asked for it
        at ``began`` (:func:`time.time_ns`); ``broker`` and ``version`` as for
        :meth:`sending`."""
        ...

    def settling(
        self, message: Message, nack: bool, broker: tuple[str, int], version: Version | None
    ) -> AbstractContextManager[None]:
        """Around the ACK of ``message`` (``nack``: its NACK), and the wait for its
        receipt; ``broker`` and ``version`` as for :meth:`sending`."""
        ...


@dataclass(frozen=True, slots=True)
class ConnectOptions:
    """How to reach and log in to a broker; shared by every adapter's ``connect``."""

    #: The first broker's address (``hosts[0]``).
    host: str = "127.0.0.1"
    port: int = 61613
    login: str | None = None
    #: Left out of the repr: options get logged.
    passcode: str | None = field(default=None, repr=False)
    #: The CONNECT ``host`` header: RabbitMQ's virtual host ("/" is its default).
    vhost: str = "/"
    #: (can send every ms, want to receive every ms); 0 disables a direction.
    heartbeat: tuple[int, int] = (10_000, 10_000)
    versions: tuple[Version, ...] = VERSIONS
    ssl: _ssl.SSLContext | None = None
    #: Seconds allowed for connecting and for each wait on the broker (receipts, ...).
    timeout: float | None = 30.0
    #: Seconds one connect attempt to one address may take (TCP, TLS, WebSocket,
    #: CONNECTED), within ``timeout``; past it the client tries the next address.
    #: The first connect and every reconnect alike.  None: ``timeout`` alone.
    connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT
    #: A receipt not come within ``timeout`` ends the session, and the client
    #: fails over.  None (the default): on with several hosts and ``reconnect``.
    failover_on_timeout: bool | None = None
    #: Reconnect after the session ends (a lost connection, a heart-beat timeout
    #: or an ERROR), restoring subscriptions; None: never.  The first connect
    #: is retried only with ``retry_first_connect``.
    reconnect: Backoff | None = None
    #: Messages buffered per subscription before reading from the socket pauses.
    max_pending_messages: int = 1000
    #: Silence allowed from the broker, in negotiated heart-beat intervals; None:
    #: ClientConnection's default (1.25, 2.5 with ActiveMQ).
    heartbeat_tolerance: float | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    limits: Limits | None = None
    #: Speak STOMP over a WebSocket at this path ("/ws"): ``ws://host:port/path``,
    #: or ``wss://`` with ``ssl``.  None: plain STOMP over TCP.
    websocket: str | None = None
    #: The brokers, in the order tried (failover); empty: just ``(host, port)``.
    hosts: tuple[Address, ...] = ()
    #: Try ``hosts`` in an order shuffled once, not as given.
    randomize: bool = False
    #: OpenTelemetry spans and trace context in headers (:mod:`stomp_proto.tracing`).
    tracing: TracingHook | None = None
    #: Retry the first connect on the ``reconnect`` schedule, as a reconnect would be.
    retry_first_connect: bool = False
    #: Called with each new :class:`ClientState` (and the error behind it).
    on_state_change: StateHook | None = None
    #: Called with each :class:`SessionEvent` (connected, lost, reconnected, gave up).
    on_session: SessionEventHook | None = None

    def __post_init__(self) -> None:
        if not self.hosts:
            object.__setattr__(self, "hosts", ((self.host, self.port),))
        self._check()
        if self.websocket is not None:
            check_path(self.websocket)
            require_wsproto()  # fail at connect(), with how to install it

    def _check(self) -> None:
        """TypeError or ValueError for an option no connection could use, naming it."""
        option = _option
        if not isinstance(self.host, str):
            raise wrong_type("connect() host", "a str such as '127.0.0.1'", self.host)
        if not is_int(self.port):
            raise wrong_type("connect() port", "an int such as 61613", self.port)
        if not 0 <= self.port < 65536:
            raise ValueError(f"connect() port must be between 0 and 65535, not {self.port!r}")
        for name in ("login", "passcode", "websocket"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                if name == "passcode":  # its type only: the value is a secret
                    raise TypeError(
                        f"{option(name)} must be a str or None, not {type(value).__name__} "
                        "(the value is not shown)"
                    )
                raise wrong_type(option(name), "a str or None", value)
        if not isinstance(self.vhost, str):
            raise wrong_type(option("vhost"), "a str such as '/'", self.vhost)
        heartbeat = self.heartbeat
        if not (
            type(heartbeat) is tuple and len(heartbeat) == 2 and all(is_int(x) for x in heartbeat)
        ):
            raise wrong_type(
                option("heartbeat"),
                "a pair of ints",
                heartbeat,
                "(can send every ms, want every ms), such as (10000, 10000); (0, 0) for none",
            )
        if min(heartbeat) < 0:
            raise ValueError(f"{option('heartbeat')} must not be negative, not {heartbeat!r}")
        versions = self.versions
        if type(versions) is not tuple or not all(isinstance(v, str) for v in versions):
            raise wrong_type(option("versions"), "a tuple such as ('1.1', '1.2')", versions)
        if not versions or not set(versions) <= set(VERSIONS):
            raise ValueError(f"{option('versions')} must be some of {VERSIONS!r}, not {versions!r}")
        if self.ssl is not None and not isinstance(self.ssl, _ssl.SSLContext):
            raise wrong_type(
                option("ssl"), "an ssl.SSLContext or None", self.ssl, "ssl.create_default_context()"
            )
        for name in ("timeout", "connect_timeout"):
            seconds = getattr(self, name)
            if seconds is not None:
                check_number(option(name), seconds)
                if seconds <= 0:
                    raise ValueError(f"{option(name)} must be positive, not {seconds!r}")
        if self.reconnect is not None and not isinstance(self.reconnect, Backoff):
            raise wrong_type(option("reconnect"), "a Backoff or None", self.reconnect, "Backoff()")
        if not is_int(self.max_pending_messages):
            raise wrong_type(option("max_pending_messages"), "an int", self.max_pending_messages)
        if self.max_pending_messages < 1:
            raise ValueError(
                f"{option('max_pending_messages')} must be at least 1, "
                f"not {self.max_pending_messages!r}"
            )
        if self.heartbeat_tolerance is not None:
            check_number(option("heartbeat_tolerance"), self.heartbeat_tolerance, minimum=1.0)
        check_limits(option("limits"), self.limits)
        check_bool(option("randomize"), self.randomize)
        check_bool(option("retry_first_connect"), self.retry_first_connect)
        if self.retry_first_connect and self.reconnect is None:
            raise ValueError(
                f"{option('retry_first_connect')} retries on the reconnect schedule: "
                "give reconnect=Backoff(...) too"
            )
        if self.failover_on_timeout is not None:
            check_bool(option("failover_on_timeout"), self.failover_on_timeout)
            if self.failover_on_timeout and self.reconnect is None:
                raise ValueError(
                    f"{option('failover_on_timeout')} fails over on the reconnect schedule: "
                    "give reconnect=Backoff(...) too"
                )
        if self.on_session is not None and not callable(self.on_session):
            raise wrong_type(
                option("on_session"),
                "a callable or None",
                self.on_session,
                "a function taking a SessionEvent",
            )
        if self.on_state_change is not None and not callable(self.on_state_change):
            raise wrong_type(
                option("on_state_change"),
                "a callable or None",
                self.on_state_change,
                "a function taking (ClientState, ClientError | None)",
            )

    @property
    def attempt_timeout(self) -> float | None:
        """Seconds one connect attempt to one address may take: ``connect_timeout``,
        and never more than ``timeout``."""
        bounds = [t for t in (self.connect_timeout, self.timeout) if t is not None]
        return min(bounds, default=None)

    @property
    def leaves_on_timeout(self) -> bool:
        """Whether a receipt that did not come in time ends the session (see
        ``failover_on_timeout``)."""
        if self.failover_on_timeout is None:
            return len(self.hosts) > 1 and self.reconnect is not None
        return self.failover_on_timeout

    @classmethod
    def build(cls, host: str | None, port: int | None, options: ClientOptions) -> ConnectOptions:
        """Options from the arguments of an adapter's ``connect()``.

        ``host`` may be a connection URL (see :class:`~stomp_proto.BrokerURL`);
        each thing is said once: a URL with a ``port`` or a keyword it already
        sets, or ``hosts`` with ``host``/``port``, is a ValueError.  An unknown
        keyword is a TypeError that lists the :class:`ClientOptions`.
        """
        values: dict[str, Any] = dict(options)
        unknown = sorted(values.keys() - ClientOptions.__annotations__.keys())
        if unknown:
            raise TypeError(
                f"connect() got an unknown option {unknown[0]!r}; the options "
                f"(stomp_proto.ClientOptions) are: {', '.join(ClientOptions.__annotations__)}"
            )
        if host is not None and looks_like_url(host):
            if port is not None:
                raise ValueError("a port was given with a URL: write it in the URL")
            values = merge_url(host, values)
            host = None
        if "headers" in values:
            values["headers"] = dict(as_headers(values["headers"]))
        if "hosts" in values:
            if host is not None or port is not None:
                raise ValueError("give either host and port or hosts=[...], not both")
            hosts = values["hosts"] = check_addresses(values["hosts"])
            host, port = hosts[0]
        return cls(
            host="127.0.0.1" if host is None else host,
            port=61613 if port is None else port,
            **values,
        )

    def connect_event(self, versions: tuple[Version, ...] | None = None) -> Connect:
        """The CONNECT; ``versions`` narrows the accepted ones (a WebSocket subprotocol's cap)."""
        return Connect(
            host=self.vhost,
            accept_versions=self.versions if versions is None else versions,
            login=self.login,
            passcode=self.passcode,
            heartbeat=self.heartbeat,
            headers=as_headers(self.headers),
        )


class ClientOptions(TypedDict, total=False):
    """The keyword arguments every adapter's ``connect(host, port, **options)`` takes.

    All are optional.  Each, with its default (the entries below say more)::

        login                 None      the CONNECT login
        passcode              None      the password; never logged
        vhost                 "/"       the CONNECT host header (RabbitMQ's vhost)
        heartbeat             (10_000, 10_000)  (can send every ms, want every ms)
        versions              all three STOMP versions offered, the best wins
        ssl                   None      an ssl.SSLContext: TLS
        timeout               30        seconds for connecting and each wait
        connect_timeout       5         seconds for one attempt at one address
        failover_on_timeout   None      on with several hosts and reconnect
        reconnect             None      a Backoff: reconnect after a loss
        max_pending_messages  1000      messages buffered per subscription
        heartbeat_tolerance   None      1.25 intervals (2.5 with ActiveMQ)
        headers               {}        extra CONNECT headers (client-id, ...)
        limits                None      Limits() on what the broker sends
        websocket             None      a path such as "/ws": STOMP over WebSocket
        hosts                 ()        [(host, port), ...] tried in order
        randomize             False     try hosts in a shuffled order
        tracing               None      a stomp_proto.tracing.Tracing
        retry_first_connect   False     retry the first connect on reconnect's schedule
        on_state_change       None      hook(state, error) at each ClientState
        on_session            None      hook(event) at each SessionEvent
    """

    #: The user name (CONNECT ``login`` header); default none.
    login: str | None
    #: The password (``passcode`` header); default none.  Never logged.
    passcode: str | None
    #: The CONNECT ``host`` header: the virtual host (RabbitMQ's vhost); default ``"/"``.
    vhost: str
    #: ``(can send every ms, want every ms)``; default ``(10_000, 10_000)``, 0 turns off.
    heartbeat: tuple[int, int]
    #: The protocol versions offered; default all three, the best one wins.
    versions: tuple[Version, ...]
    #: An :class:`ssl.SSLContext`: connect with TLS; default plain TCP.
    ssl: _ssl.SSLContext | None
    #: Seconds for connecting and for each wait on the broker (receipts); default 30.
    timeout: float | None
    #: Seconds for one connect attempt to one address (TCP, TLS, WebSocket and
    #: CONNECTED), within ``timeout``: past it the client tries the next address, on
    #: the first connect and on every reconnect; default 5, ``None``: ``timeout`` alone.
    connect_timeout: float | None
    #: When a receipt does not come within ``timeout``, end the session and fail over
    #: to the next address (the wait raises TimeoutError all the same); default: on
    #: with several ``hosts`` and a ``reconnect`` schedule, else off.  ``True`` needs
    #: ``reconnect``.  See :doc:`failover`.
    failover_on_timeout: bool | None
    #: Reconnect after the session ends (a lost connection, a heart-beat timeout or
    #: an ERROR) on this schedule, restoring subscriptions; default ``None``: never.
    #: The first connect is retried only with ``retry_first_connect``.
    reconnect: Backoff | None
    #: Messages buffered per subscription before reading pauses; default 1000.
    max_pending_messages: int
    #: Silence allowed from the broker, in its heart-beat intervals, before the
    #: session counts as lost (:class:`HeartBeatLost`); default 1.25 - a silent
    #: broker is noticed within 1.5 intervals - and 2.5 with ActiveMQ, whose beats
    #: come up to two intervals apart.  At least 1.
    heartbeat_tolerance: float | None
    #: Extra CONNECT headers; default none.
    headers: Mapping[str, str]
    #: The :class:`Limits` on what the broker sends; default ``Limits()``.
    limits: Limits | None
    #: A path such as ``"/ws"``: STOMP over WebSocket (see :doc:`websocket`); default TCP.
    websocket: str | None
    #: Several brokers, ``[(host, port), ...]``, tried in order (failover, see
    #: :doc:`failover`); instead of ``host`` and ``port``.
    hosts: Sequence[tuple[str, int]]
    #: Try ``hosts`` in an order shuffled once; default ``False``: as given.
    randomize: bool
    #: A :class:`stomp_proto.tracing.Tracing`: spans for each send and each message
    #: taken, trace context in the headers (see :doc:`tracing`); default none.
    tracing: TracingHook | None
    #: Retry the first connect on the ``reconnect`` schedule (which must be given) when
    #: every address failed, each round with the whole ``timeout``; default ``False``:
    #: the first connect fails at once.  For services that start beside their broker.
    retry_first_connect: bool
    #: Called as ``on_state_change(state, error)`` with each new :class:`ClientState`
    #: (connected, reconnecting, closed, failed) in the client's own task or thread
    #: (see :doc:`failover`); default none.
    on_state_change: StateHook | None
    #: Called as ``on_session(event)`` with each :class:`SessionEvent`: the first
    #: session up (``"connected"``), a session lost (``"lost"``), a later one up with
    #: its subscriptions restored (``"reconnected"``), no more attempts
    #: (``"gave_up"``); in the client's own task or thread, so it must not block.
    #: What it raises is logged.  Default none; ``client.session_events()`` gives
    #: the same events to iterate.
    on_session: SessionEventHook | None


# Tracebacks and reprs say stomp_proto.TracingHook, the name users import, though the top
# level loads this module only on first use.
present_as("stomp_proto", TracingHook)
