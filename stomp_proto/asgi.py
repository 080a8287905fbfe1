"""STOMP over WebSocket for Python web apps: an ASGI application on the broker's core.

:class:`StompApp` is an ASGI 3 application (no dependency: ASGI is a calling
convention) serving the embedded broker's :class:`~stomp_proto.broker.BrokerCore`
to browsers (stompjs) and other WebSocket clients.  Mount it in Starlette or
FastAPI (``app.mount("/ws", stomp_app)``) or serve it alone (``uvicorn
module:stomp_app``).  Besides ``/topic`` and ``/queue`` as the broker has them
(acks, receipts, transactions), SENDs under ``app_prefix`` go to the app's
handlers (:meth:`StompApp.handler`) and ``/user/...`` destinations reach every
session of one user.  With a :class:`Relay`, destinations under its prefixes
are served by RabbitMQ or ActiveMQ instead, one upstream connection per
session.  See :doc:`/webapps`.

Each WebSocket gets a :class:`~stomp_proto.broker.Session` and one task that
waits for input with a timeout taken from the session's timer (heart-beats and
the broker's deadlines, on ``loop.time()``), feeds it to the core, and queues
what the core returns for every session it names; a writer task per session
sends it, and deliveries to a session pause while more than ``output_limit``
bytes wait for it (as in :class:`~stomp_proto.broker.Broker`).  Input is
bounded the same way: a session takes at most :data:`INPUT_LIMIT` bytes from
the server before it waits, and reads nothing while one of its SENDs is with a
handler or the memory alarm holds its publisher back, so the server stops
reading from that client.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, MutableMapping
from typing import Any, TypeVar, Unpack

from ._client._async import AsyncClient, AsyncSubscription, AsyncTransaction, open_client
from ._client._asyncio import AsyncioBackend
from ._client._errors import BrokerError, ClientError
from ._client._lifecycle import ClientState, SessionEvent
from ._client._options import ClientOptions, ConnectOptions
from ._errors import ErrorKind, LocalProtocolError, ProtocolError, RemoteProtocolError
from ._events import Ack, Commit, Message, Nack, Send, Subscribe, Unsubscribe
from ._frame import VERSIONS
from ._websocket import OriginPolicy, accepted_versions, choose_subprotocol
from .broker._core import (
    DEFAULT_OUTPUT_LIMIT,
    SHUTDOWN_REASON,
    BrokerCore,
    BrokerOptions,
    Outbox,
    Relayed,
    Session,
)

__all__ = ["AppMessage", "Refused", "Relay", "StompApp"]

log = logging.getLogger("stomp_proto.asgi")

_Scope = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
_SendCallable = Callable[[MutableMapping[str, Any]], Awaitable[None]]
#: A handler of SENDs to an app destination: takes an :class:`AppMessage`.
_Handler = Callable[["AppMessage"], Awaitable[None] | None]
_H = TypeVar("_H", bound=_Handler)

#: The prefix of user destinations: ``/user/queue/x`` subscribed, ``/user/NAME/queue/x`` sent to.
USER_PREFIX = "/user/"
#: The WebSocket close code of a refused upgrade (ASGI servers answer it with HTTP 403).
_POLICY_VIOLATION = 1008
_NORMAL_CLOSURE = 1000
#: Bytes read from a client and not yet taken by its session before the app stops reading.
INPUT_LIMIT = 256 * 1024
#: Seconds an ended session's output may take to be sent before its WebSocket is closed.
CLOSE_TIMEOUT = 5.0
#: What an app handler's exception tells the client (the exception itself is logged).
HANDLER_FAILED = "handler failed"
#: The ERROR a relayed session gets when its connection to the broker behind fails or ends.
BROKER_LOST = "broker connection lost"
#: The ERROR a relayed session gets when no connection to the broker behind can be opened.
BROKER_UNAVAILABLE = "broker unavailable"
#: The destinations a :class:`Relay` forwards by default (RabbitMQ's and ActiveMQ's kinds).
RELAY_PREFIXES = ("/queue/", "/topic/", "/exchange/", "/amq/queue/")
#: Messages a relayed subscription buffers from the broker before reading from it pauses.
RELAY_PENDING = 100
#: Seconds a relayed session's DISCONNECT from the broker behind may take at its end.
RELAY_CLOSE_TIMEOUT = 5.0


class Refused(Exception):
    """Raised by an app handler to refuse a SEND: the client gets ERROR ``message``.

    ``detail`` becomes the ERROR's body.  As every ERROR, it ends the session;
    the ERROR names the SEND's receipt, if it asked for one.
    """

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        #: The ERROR's ``message`` header.
        self.message = message
        #: The ERROR's body.
        self.detail = detail


class AppMessage:
    """A SEND to an app destination, as a handler sees it (see :meth:`StompApp.handler`).

    ``user`` is the session's authenticated user (``None``: anonymous),
    ``session_id`` its id; :meth:`reply` answers the sender only,
    ``app`` publishes to anyone (:meth:`StompApp.publish`).
    """

    def __init__(self, app: StompApp, session: Session, send: Send) -> None:
        #: The :class:`StompApp` the SEND came to.
        self.app = app
        self._session = session
        self._send = send
        #: Where it was sent (under ``app_prefix``).
        self.destination = send.destination
        #: The body, as bytes.
        self.body = send.body
        #: Its ``content-type``, if any.
        self.content_type = send.content_type
        #: Its other headers, ``(name, value)`` pairs in wire order.
        self.headers = send.headers
        #: The authenticated user of the sending session (``None``: anonymous).
        self.user = session.user
        #: The sending session's id (the CONNECTED ``session`` header).
        self.session_id = session.id

    @property
    def text(self) -> str:
        """The body decoded as UTF-8."""
        return self.body.decode("utf-8")

    def header(self, name: str) -> str | None:
        """The first header called ``name``; ``None`` if there is none."""
        return next((value for key, value in self.headers if key == name), None)

    async def reply(
        self,
        body: bytes | str,
        *,
        destination: str | None = None,
        headers: Iterable[tuple[str, str]] = (),
        content_type: str | None = None,
    ) -> None:
        """Send ``body`` to the sender's own subscriptions on ``destination``.

        ``content_type`` and ``headers`` (``(name, value)`` pairs) go with it.

        ``destination`` defaults to the SEND's ``reply-to`` header; a user
        destination (``/user/queue/x``), a topic or a queue.  Other sessions of
        the same user do not get it (a queue, though, is shared).  A
        destination the app's :class:`Relay` forwards is sent to its broker
        instead, as :meth:`StompApp.publish` does: there a topic's every
        subscriber gets it.  LocalProtocolError without a destination.
        """
        target = destination if destination is not None else self.header("reply-to")
        if target is None:
            raise LocalProtocolError(
                ErrorKind.BAD_STATE, "no reply destination: the SEND has no reply-to header"
            )
        relay = self.app.relay
        if relay is not None and relay.relays(target):
            await relay._publish(target, _encode(body), tuple(headers), content_type)
            return
        self.app._reply(self._session, target, _encode(body), tuple(headers), content_type)


class Relay:
    """Where :class:`StompApp` forwards the destinations it does not serve itself.

    ``host`` and ``port`` (or a connection URL, or ``hosts=[...]``) name the
    broker - RabbitMQ, ActiveMQ - as for :func:`stomp_proto.asyncio.connect`,
    and ``options`` are its :class:`~stomp_proto.ClientOptions`.  Frames for
    destinations under ``prefixes`` go there, each browser session on an
    upstream connection of its own, opened at its first relayed frame.
    ``credentials(user)`` (plain or async) gives ``(login, passcode)`` for
    the session's :attr:`~stomp_proto.broker.Session.user`; by default the
    ``login`` and ``passcode`` options serve every session, and the app's
    own messages (:meth:`StompApp.publish`) always.  ``max_pending_messages``
    defaults to 100; ``reconnect`` is refused: a lost
    broker ends the browser's session (see :doc:`/webapps`).
    """

    def __init__(
        self,
        host: str | None = None,
        port: int | None = None,
        *,
        prefixes: Iterable[str] = RELAY_PREFIXES,
        credentials: Callable[
            [str | None],
            tuple[str | None, str | None] | Awaitable[tuple[str | None, str | None]],
        ]
        | None = None,
        **options: Unpack[ClientOptions],
    ) -> None:
        if isinstance(prefixes, str):
            raise TypeError("prefixes is a list of prefixes, not one string")
        chosen = tuple(prefixes)
        if not chosen or any(not p.startswith("/") or not p.endswith("/") for p in chosen):
            raise ValueError(f"prefixes start and end with '/', as '/queue/': {chosen!r}")
        options.setdefault("max_pending_messages", RELAY_PENDING)
        built = ConnectOptions.build(host, port, options)
        if built.reconnect is not None:
            raise ValueError(
                "a Relay does not reconnect a session's broker connection: a lost broker "
                "ends the browser's session with an ERROR, and its next session connects "
                "anew (give hosts=[...] to fail over)"
            )
        #: The destination prefixes forwarded to the broker.
        self.prefixes = chosen
        self._options = built
        self._credentials = credentials
        #: The app's own connection (its ``publish``), with the ``login`` option's login.
        self._system: AsyncClient | None = None
        self._system_lock: asyncio.Lock | None = None

    def relays(self, destination: str) -> bool:
        """Whether frames for ``destination`` are forwarded to the broker."""
        return destination.startswith(self.prefixes)

    async def _publish(
        self,
        destination: str,
        body: bytes,
        headers: tuple[tuple[str, str], ...],
        content_type: str | None,
    ) -> None:
        """Send a message from the app itself, on the relay's own connection; it is
        opened at the first message, and again after it was lost."""
        if self._system_lock is None:
            self._system_lock = asyncio.Lock()
        async with self._system_lock:
            client = self._system
            if client is None or client.state in (ClientState.CLOSED, ClientState.FAILED):
                if client is not None:
                    await client.close()  # (over already: this frees what it held)
                client = self._system = await open_client(self._options, AsyncioBackend())
        await client.send(
            destination, body, content_type=content_type, headers=headers, receipt=True
        )

    async def _close(self) -> None:
        client, self._system = self._system, None
        if client is not None:
            await _leave(client)

    async def _open(self, user: str | None) -> AsyncClient:
        """A connection to the broker for a session of ``user``; _Unavailable if none."""
        options = self._options
        if self._credentials is not None:
            try:
                found = self._credentials(user)
                login, passcode = await found if inspect.isawaitable(found) else found
            except PermissionError as exc:
                raise _Unavailable(f"no credentials for the broker: {exc}") from exc
            except Exception as exc:
                # The app's hook failed: that session is refused, and the app goes on.
                log.exception("STOMP app: the relay's credentials() failed")
                raise _Unavailable("credentials() failed") from exc
            options = dataclasses.replace(options, login=login, passcode=passcode)
        try:
            return await open_client(options, AsyncioBackend())
        except ClientError as exc:  # a refused login too (a BrokerError)
            raise _Unavailable(f"no connection to the broker: {exc}") from exc


class _Unavailable(Exception):
    """No connection to the broker behind could be opened (the ERROR's detail)."""


class _Upstream:
    """One relayed subscription: the broker's, its pump, and the deliveries awaiting ACK."""

    __slots__ = ("acked", "pump", "subscription", "unacked")

    def __init__(self, subscription: AsyncSubscription, acked: bool) -> None:
        self.subscription = subscription
        self.acked = acked
        #: The broker's message behind each delivery the client has not settled, by the
        #: name its ACK gives (the ``ack`` header in 1.2, the ``message-id`` before).
        self.unacked: dict[str, Message] = {}
        self.pump: asyncio.Task[None] | None = None


class _Link:
    """A session's side of the relay: its broker connection, subscriptions, transactions."""

    __slots__ = ("client", "subscriptions", "transactions", "watcher")

    def __init__(self) -> None:
        self.client: AsyncClient | None = None
        #: By the client's subscription key.
        self.subscriptions: dict[str, _Upstream] = {}
        #: The broker's transaction behind each of the client's that holds relayed frames.
        self.transactions: dict[str, AsyncTransaction] = {}
        self.watcher: asyncio.Task[None] | None = None

    async def close(self) -> None:
        tasks = [u.pump for u in self.subscriptions.values() if u.pump is not None]
        if self.watcher is not None:
            tasks.append(self.watcher)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.client is not None:
            # Unsettled messages go back to their queues; open transactions are dropped.
            await _leave(self.client)


async def _leave(client: AsyncClient) -> None:
    """DISCONNECT from the broker behind, within RELAY_CLOSE_TIMEOUT; else just close."""
    try:
        async with asyncio.timeout(RELAY_CLOSE_TIMEOUT):
            await client.disconnect()
    except (ClientError, ProtocolError, OSError, TimeoutError):
        await client.close()


class _Peer:
    """The transport side of one session: its ASGI callables and output."""

    __slots__ = (
        "closing",
        "drained",
        "gone",
        "inbox",
        "inbox_bytes",
        "link",
        "output",
        "poked",
        "queued",
        "room",
        "send",
        "session",
        "stirred",
        "wake",
        "writer",
    )

    def __init__(self, session: Session, send: _SendCallable) -> None:
        self.session = session
        self.send = send
        #: What the client sent and the session has not read yet, and its size.
        self.inbox: deque[bytes] = deque()
        self.inbox_bytes = 0
        #: The client's side has ended (a disconnect, or a failed send).
        self.gone = False
        #: Something the session's task must look at: input, an ended session, a handler done.
        self.stirred = asyncio.Event()
        self.poked = False
        #: Set while the inbox has room: the reader waits for it (the server then stops reading).
        self.room = asyncio.Event()
        self.room.set()
        #: Bytes waiting for the writer task, and their total.
        self.output: deque[bytes] = deque()
        self.queued = 0
        self.wake = asyncio.Event()
        self.writer: asyncio.Task[None] | None = None
        #: The session has ended: the writer sends what is left, then returns.
        self.closing = False
        #: Set while the output has room: relayed subscriptions wait for it before a delivery.
        self.drained = asyncio.Event()
        self.drained.set()
        #: Its relay state, once a frame was relayed.
        self.link: _Link | None = None


class StompApp:
    """An ASGI application serving STOMP over WebSocket from an in-process broker.

    ``authenticate(scope)`` (plain or async) names the user of a WebSocket
    from its ASGI scope - the web app's own cookies or session: a user
    string, or ``None`` to let CONNECT's login decide (checked against
    ``users`` if given); raising PermissionError refuses the upgrade (403).
    ``allowed_origins`` admits web pages of other origins than the app's own
    (``"*"``: any), as for :class:`~stomp_proto.broker.Broker`.  SENDs under
    ``app_prefix`` go to :meth:`handler` functions; ``/user/`` destinations
    are on.  ``relay``, a :class:`Relay`, forwards the destinations under its
    prefixes (which must not overlap those) to another broker.  ``options`` are the
    :class:`~stomp_proto.broker.BrokerCore` options.  An ``http`` request gets
    426 (use a WebSocket), ``lifespan`` is followed: at shutdown every client
    gets ERROR ``broker shutting down``.
    """

    def __init__(
        self,
        *,
        authenticate: Callable[[_Scope], str | Awaitable[str | None] | None] | None = None,
        allowed_origins: Iterable[str] = (),
        app_prefix: str = "/app/",
        relay: Relay | None = None,
        **options: Unpack[BrokerOptions],
    ) -> None:
        if isinstance(allowed_origins, str):
            raise TypeError("allowed_origins is a list of origins, not one string")
        if not app_prefix.startswith("/"):
            raise ValueError(f"app_prefix starts with '/': {app_prefix!r}")
        #: The prefix of app destinations (always ending with ``/``).
        self.app_prefix = app_prefix if app_prefix.endswith("/") else app_prefix + "/"
        for own in (self.app_prefix, USER_PREFIX):
            for prefix in () if relay is None else relay.prefixes:
                if prefix.startswith(own) or own.startswith(prefix):
                    raise ValueError(f"the relay's prefix {prefix!r} overlaps the app's {own!r}")
        self._authenticate = authenticate
        self._allowed_origins = tuple(allowed_origins)
        self._origins = {
            secure: OriginPolicy(self._allowed_origins, secure=secure) for secure in (False, True)
        }
        self._versions = options.get("versions", VERSIONS)
        self._output_limit = options.get("output_limit", DEFAULT_OUTPUT_LIMIT)
        #: The :class:`~stomp_proto.broker.BrokerCore` that does the work.
        self.core = BrokerCore(
            **options,
            divert=self._diverts,
            user_prefix=USER_PREFIX,
            relay=None if relay is None else self._relays,
        )
        #: The :class:`Relay`, if any.
        self.relay = relay
        self._handlers: dict[str, _Handler] = {}
        self._peers: dict[Session, _Peer] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        #: The core's memory alarm as last seen.
        self._alarm = False

    # -- the application's API ---------------------------------------------------

    def handler(self, destination: str) -> Callable[[_H], _H]:
        """A decorator registering a handler of SENDs to ``destination`` (under ``app_prefix``).

        The handler (plain or async) takes an :class:`AppMessage`; it may
        reply, publish, or raise :class:`Refused`.  Any other exception is
        logged and the client gets ERROR ``handler failed``; the app goes on.
        The SEND's RECEIPT is sent once the handler has returned.
        """
        if not destination.startswith(self.app_prefix):
            raise ValueError(f"{destination!r} is not under app_prefix {self.app_prefix!r}")
        if destination in self._handlers:
            raise ValueError(f"{destination!r} has a handler already")

        def register(function: _H) -> _H:
            self._handlers[destination] = function
            return function

        return register

    async def publish(
        self,
        destination: str,
        body: bytes | str = b"",
        *,
        headers: Iterable[tuple[str, str]] = (),
        content_type: str | None = None,
    ) -> None:
        """Send a message to ``destination`` (a topic, queue or ``/user/NAME/...``) from the app.

        ``body`` (a ``str`` is sent as UTF-8), with ``content_type`` and the
        other ``headers``, ``(name, value)`` pairs.

        Usable from any code in the process that runs on the app's event
        loop (an HTTP route, a background task).  OverflowError when a queue
        or the memory budget has no room.  A destination the :class:`Relay`
        forwards goes to its broker, on a connection of the app's own (the
        relay's ``login``), and returns with the broker's receipt; errors are
        the asyncio client's (:class:`~stomp_proto.asyncio.ConnectionLost`,
        :class:`~stomp_proto.asyncio.BrokerError`).
        """
        if self.relay is not None and self.relay.relays(destination):
            await self.relay._publish(destination, _encode(body), tuple(headers), content_type)
            return
        self._flush(
            self.core.publish(
                destination, _encode(body), headers=tuple(headers), content_type=content_type
            )
        )

    async def send_to_user(
        self,
        user: str,
        destination: str,
        body: bytes | str = b"",
        *,
        headers: Iterable[tuple[str, str]] = (),
        content_type: str | None = None,
    ) -> None:
        """Send ``body`` to every session of ``user`` subscribed to ``/user`` + ``destination``.

        ``destination`` is as the user subscribes it without ``/user``: a
        message to ``"/queue/news"`` reaches their subscriptions to
        ``/user/queue/news``.  Nothing is kept for a user without one.
        ``content_type`` and ``headers`` as for :meth:`publish`.
        """
        await self.publish(
            self.core.user_destination(user, destination),
            body,
            headers=headers,
            content_type=content_type,
        )

    @property
    def allowed_origins(self) -> tuple[str, ...]:
        """The origins admitted besides the app's own (``"*"``: any)."""
        return self._allowed_origins

    async def close(self) -> None:
        """End every session with ERROR ``broker shutting down``.

        The ``lifespan`` shutdown of a served ``StompApp`` calls it; a mounted
        one gets no lifespan events (Starlette keeps them), so call it from
        the web app's own shutdown.
        """
        self._closing = True
        self._flush(self.core.shut_down(SHUTDOWN_REASON))
        tasks = list(self._tasks)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self.relay is not None:
            await self.relay._close()

    # -- ASGI ------------------------------------------------------------------

    async def __call__(self, scope: _Scope, receive: _Receive, send: _SendCallable) -> None:
        kind = scope["type"]
        if kind == "websocket":
            await self._websocket(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)
        elif kind == "http":
            await _answer_http(send)
        else:
            raise ValueError(f"unknown ASGI scope type {kind!r}")

    async def _lifespan(self, receive: _Receive, send: _SendCallable) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _websocket(self, scope: _Scope, receive: _Receive, send: _SendCallable) -> None:
        first = await receive()
        if first["type"] != "websocket.connect":
            return
        refusal, chosen, user = await self._admit(scope)
        client = scope.get("client")
        address = str(client[0]) if client else None
        if refusal is not None or self._closing:
            self.core.counters.upgrades_refused[403] += 1
            log.info("STOMP app: refused WebSocket from %s: %s", address, refusal or "closing")
            await send({"type": "websocket.close", "code": _POLICY_VIOLATION})
            return
        await send({"type": "websocket.accept", "subprotocol": chosen})
        session = self.core.open_session(
            accepted_versions(chosen, self._versions), address, user=user
        )
        peer = _Peer(session, send)
        self._peers[session] = peer
        self.core.counters.connections_opened["websocket"] += 1
        task = asyncio.current_task()
        reader = asyncio.get_running_loop().create_task(self._read(peer, receive))
        peer.writer = asyncio.get_running_loop().create_task(self._write(peer))
        if task is not None:
            self._tasks.add(task)
        try:
            await self._serve(peer)
        finally:
            if task is not None:
                self._tasks.discard(task)
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)

    async def _admit(self, scope: _Scope) -> tuple[str | None, str | None, str | None]:
        """(why the upgrade is refused or None, the subprotocol, the hook's user)."""
        headers = {
            bytes(name).decode("latin-1").lower(): bytes(value).decode("latin-1")
            for name, value in scope.get("headers", ())
        }
        secure = scope.get("scheme") == "wss"
        refusal = self._origins[secure].refusal(headers.get("origin"), headers.get("host", ""))
        if refusal is not None:
            return refusal, None, None
        try:
            chosen = choose_subprotocol(scope.get("subprotocols", ()), self._versions)
        except RemoteProtocolError as exc:
            return exc.message, None, None
        user = None
        if self._authenticate is not None:
            try:
                found = self._authenticate(scope)
                user = await found if inspect.isawaitable(found) else found
            except PermissionError as exc:
                return f"not authenticated: {exc}", None, None
            except Exception:
                # The app's hook failed: nobody is let in on a failure, and the app goes on.
                log.exception("STOMP app: authenticate() failed")
                return "authenticate() failed", None, None
        return None, chosen, user

    async def _read(self, peer: _Peer, receive: _Receive) -> None:
        """Move what the client sends to the session's inbox."""
        while True:
            message = await receive()
            kind = message["type"]
            if kind == "websocket.receive":
                data = message.get("bytes")
                if data is None:
                    data = (message.get("text") or "").encode("utf-8")
                if data:
                    peer.inbox.append(data)
                    peer.inbox_bytes += len(data)
                    peer.stirred.set()
                    if peer.inbox_bytes > INPUT_LIMIT:
                        peer.room.clear()
                        await peer.room.wait()
            elif kind == "websocket.disconnect":
                peer.gone = True
                peer.stirred.set()
                return

    async def _serve(self, peer: _Peer) -> None:
        session = peer.session
        loop = asyncio.get_running_loop()
        handling: asyncio.Task[None] | None = None
        ended = False
        try:
            while not session.closed:
                data = await self._next_input(peer)
                if data is None:
                    ended = True
                elif data:
                    self.core.counters.bytes_received += len(data)
                session.receive_data(data)
                beat = session.handle_timer(loop.time())
                if beat:
                    self._queue(peer, beat)
                self._flush(self.core.process(session))
                if ended:
                    break  # the client is gone: nothing more can reach it
                if handling is not None and handling.done():
                    handling = None
                if handling is None and not session.closed:
                    if session.diverted is not None:
                        handling = loop.create_task(self._handle(peer, session.diverted))
                    elif session.relayed is not None:
                        handling = loop.create_task(self._forward(peer, session.relayed))
        except Exception:
            log.exception("STOMP app: connection %s failed", session.id)
        finally:
            if handling is not None:
                handling.cancel()
                await asyncio.gather(handling, return_exceptions=True)
            self._flush(self.core.close_session(session))
            await self._finish(peer, ended)
            if peer.link is not None:
                # After the client's end: leaving the broker may take a while.
                await peer.link.close()

    async def _next_input(self, peer: _Peer) -> bytes | None:
        """Bytes from the client, ``None`` at its end, ``b""`` when the timer is due or
        something else changed.

        Nothing is read while a SEND is with its handler or the memory alarm
        holds the session's publisher back: the inbox fills, the reader waits,
        and the server stops reading from the client.
        """
        session = peer.session
        deadline = session.get_timer()
        try:
            async with asyncio.timeout_at(deadline):
                while True:
                    if peer.poked:
                        peer.poked = False
                        return b""
                    held = (
                        session.reading_blocked
                        or session.diverted is not None
                        or session.relayed is not None
                    )
                    if peer.inbox and not held:
                        data = peer.inbox.popleft()
                        peer.inbox_bytes -= len(data)
                        if peer.inbox_bytes <= INPUT_LIMIT:
                            peer.room.set()
                        return data
                    if peer.gone and (held or not peer.inbox):
                        return None
                    peer.stirred.clear()
                    await peer.stirred.wait()
        except TimeoutError:
            return b""

    def _poke(self, peer: _Peer) -> None:
        peer.poked = True
        peer.stirred.set()

    async def _handle(self, peer: _Peer, send: Send) -> None:
        """Run the handler of a diverted SEND, then let the session read on."""
        session = peer.session
        refusal: tuple[str, str] | None = None
        handler = self._handlers.get(send.destination)
        if handler is None:
            refusal = ("no handler", f"no handler for {send.destination!r}")
        else:
            try:
                result = handler(AppMessage(self, session, send))
                if inspect.isawaitable(result):
                    await result
            except Refused as exc:
                refusal = (exc.message, exc.detail)
            except Exception:
                log.exception("STOMP app: handler for %s failed", send.destination)
                refusal = (HANDLER_FAILED, f"the handler for {send.destination!r} failed")
        if session.diverted is send:
            self._flush(self.core.answer_diverted(session, refusal))
        self._poke(peer)  # the session's task reads on

    def _diverts(self, session: Session, send: Send) -> bool:
        return send.destination.startswith(self.app_prefix)

    # -- relay -----------------------------------------------------------------

    def _relays(self, session: Session, event: Relayed) -> bool:
        """The core's ``relay`` hook: whether ``event`` is the relay's."""
        relay = self.relay
        assert relay is not None
        if isinstance(event, (Send, Subscribe)):
            return relay.relays(event.destination)
        peer = self._peers.get(session)
        link = None if peer is None else peer.link
        if link is None:
            return False
        if isinstance(event, Unsubscribe):
            return (event.key or "") in link.subscriptions
        if isinstance(event, (Ack, Nack)):
            return (event.subscription or "") in link.subscriptions
        return event.transaction in link.transactions

    async def _forward(self, peer: _Peer, event: Relayed) -> None:
        """Forward a relayed frame to the broker; then its receipt or an ERROR, and read on."""
        session = peer.session
        refusal: tuple[str, str] | None = None
        try:
            await self._forward_event(peer, event)
        except _Unavailable as exc:
            refusal = (BROKER_UNAVAILABLE, str(exc))
        except BrokerError as exc:
            refusal = (exc.message or BROKER_LOST, str(exc))
        except (ClientError, ProtocolError, OSError, TimeoutError) as exc:
            refusal = (BROKER_LOST, f"the connection to the broker failed: {exc}")
        except Exception:
            log.exception("STOMP app: relaying %s failed", type(event).__name__)
            refusal = (BROKER_LOST, "relaying the frame failed")
        if session.relayed is event:
            self._flush(self.core.answer_diverted(session, refusal))
        self._poke(peer)

    async def _client(self, peer: _Peer) -> tuple[_Link, AsyncClient]:
        """The session's connection to the broker; opened at its first relayed frame."""
        link = peer.link
        if link is None:
            link = peer.link = _Link()
        if link.client is not None:
            return link, link.client
        relay = self.relay
        assert relay is not None
        client = link.client = await relay._open(peer.session.user)
        events = client.session_events()  # (made now: no event is missed)
        link.watcher = asyncio.get_running_loop().create_task(self._watch(peer, events))
        return link, client

    async def _forward_event(self, peer: _Peer, event: Relayed) -> None:
        link, client = await self._client(peer)
        receipt = event.receipt is not None
        if isinstance(event, Send):
            transaction = await self._transaction(link, client, event.transaction)
            await client.send(
                event.destination,
                event.body,
                content_type=event.content_type,
                headers=event.headers,
                transaction=transaction,
                receipt=receipt,
                content_length=event.content_length,
            )
        elif isinstance(event, Subscribe):
            subscription = client.subscribe(
                event.destination, ack=event.ack, headers=event.headers or None
            )
            await subscription.__aenter__()  # returns with the broker's receipt
            upstream = link.subscriptions[event.key] = _Upstream(subscription, event.ack != "auto")
            upstream.pump = asyncio.get_running_loop().create_task(
                self._pump(peer, event.key, upstream)
            )
        elif isinstance(event, Unsubscribe):
            upstream = link.subscriptions.pop(event.key or "")
            if upstream.pump is not None:
                upstream.pump.cancel()
                await asyncio.gather(upstream.pump, return_exceptions=True)
            await upstream.subscription.unsubscribe(headers=event.headers or None, receipt=receipt)
        elif isinstance(event, (Ack, Nack)):
            await self._settle(link, client, event)
        else:
            tx = link.transactions.pop(event.transaction)
            await (tx.commit() if isinstance(event, Commit) else tx.abort())

    async def _transaction(self, link: _Link, client: AsyncClient, name: str | None) -> str | None:
        """The broker's transaction behind the client's ``name``; begun at its first use."""
        if name is None:
            return None
        tx = link.transactions.get(name)
        if tx is None:
            tx = link.transactions[name] = await client.begin()
        return tx.id

    async def _settle(self, link: _Link, client: AsyncClient, event: Ack | Nack) -> None:
        upstream = link.subscriptions[event.subscription or ""]
        found = [(i, m) for i in event.covered if (m := upstream.unacked.pop(i, None)) is not None]
        if not found:
            return  # nothing of the broker's: nothing to settle there
        named = event.id if event.id is not None else event.message_id
        # The broker's message behind the one named; a cumulative ACK covers the rest there too.
        message = next((m for i, m in found if i == named), found[-1][1])
        transaction = await self._transaction(link, client, event.transaction)
        settle = client.nack if isinstance(event, Nack) else client.ack
        await settle(
            message,
            transaction=transaction,
            receipt=event.receipt is not None,
            headers=event.headers or None,
        )

    async def _pump(self, peer: _Peer, key: str, upstream: _Upstream) -> None:
        """Deliver a relayed subscription's messages to the session, as its output has room."""
        session = peer.session
        try:
            async for message in upstream.subscription:
                while peer.queued > self._output_limit and not session.closed:
                    peer.drained.clear()
                    await peer.drained.wait()
                if session.closed:
                    return
                data, ident = self.core.deliver_relayed(
                    session,
                    dataclasses.replace(message, subscription=key),
                    acked=upstream.acked,
                )
                if ident is not None:
                    upstream.unacked[ident] = message
                self._queue(peer, data)
        except ClientError:
            return  # the session's loss is reported by _watch
        except Exception:
            log.exception("STOMP app: relaying a message to session %s failed", session.id)
            self._flush(self.core.end_with_error(session, BROKER_LOST, "relaying a message failed"))
            self._poke(peer)

    async def _watch(self, peer: _Peer, events: AsyncIterator[SessionEvent]) -> None:
        """End the session with an ERROR once its connection to the broker is lost."""
        error: ClientError | None = None
        async for event in events:
            if event.kind in ("lost", "gave_up"):
                error = event.error
                break
        session = peer.session
        if session.closed:
            return
        detail = f"the connection to the broker ended: {error}" if error else ""
        log.info("STOMP app: session %s lost its broker: %s", session.id, error)
        self._flush(self.core.end_with_error(session, BROKER_LOST, detail))
        self._poke(peer)

    def _reply(
        self,
        session: Session,
        destination: str,
        body: bytes,
        headers: tuple[tuple[str, str], ...],
        content_type: str | None,
    ) -> None:
        only: Session | None = session
        if destination.startswith(USER_PREFIX):
            user = session.user
            if user is None:
                raise LocalProtocolError(
                    ErrorKind.BAD_STATE, "the sender has no user: it has no user destinations"
                )
            destination = self.core.user_destination(user, destination[len(USER_PREFIX) - 1 :])
        elif not destination.startswith("/topic/"):
            only = None  # a queue: whoever consumes it
        self._flush(
            self.core.publish(
                destination, body, headers=headers, content_type=content_type, only=only
            )
        )

    # -- output ----------------------------------------------------------------

    def _flush(self, outbox: Outbox) -> None:
        """Queue what the core asked for, pausing clients whose output piles up."""
        alarm = self.core.memory_alarm
        if alarm != self._alarm:
            self._alarm = alarm
            log.log(
                logging.WARNING if alarm else logging.INFO,
                "STOMP app: memory alarm %s: %d of %d bytes of messages held",
                "raised" if alarm else "cleared",
                self.core.memory_used,
                self.core.memory_limit,
            )
            if not alarm:
                for waiting in self._peers.values():
                    waiting.stirred.set()  # publishers are read from again
        for session, data in outbox.data.items():
            peer = self._peers.get(session)
            if peer is None:
                continue
            self._queue(peer, bytes(data))
            if not session.closed and peer.queued > self._output_limit:
                self.core.pause(session)
        for session in outbox.to_close:
            peer = self._peers.get(session)
            if peer is not None:
                self._poke(peer)  # its task sees the session closed

    def _queue(self, peer: _Peer, data: bytes) -> None:
        self.core.counters.bytes_sent += len(data)
        peer.output.append(data)
        peer.queued += len(data)
        peer.wake.set()

    async def _write(self, peer: _Peer) -> None:
        """Send the session's output, one WebSocket message per write; resume when drained."""
        session = peer.session
        try:
            while True:
                await peer.wake.wait()
                peer.wake.clear()
                if not peer.output and peer.closing:
                    return
                while peer.output:
                    data = peer.output.popleft()
                    peer.queued -= len(data)
                    await peer.send({"type": "websocket.send", "bytes": data})
                    if peer.queued <= self._output_limit // 4:
                        peer.drained.set()
                        if session.paused:
                            self._flush(self.core.resume(session))
                if peer.closing and not peer.output:
                    return
        except (OSError, RuntimeError):
            # The client is gone (servers raise either); the session's task cleans up.
            peer.output.clear()
            peer.gone = True
            peer.stirred.set()

    async def _finish(self, peer: _Peer, ended: bool) -> None:
        """Send what is left, close the WebSocket, forget the session."""
        writer = peer.writer
        if writer is not None:
            peer.closing = True
            peer.wake.set()
            try:
                await asyncio.wait_for(asyncio.shield(writer), CLOSE_TIMEOUT)
            except TimeoutError:
                ended = True  # the client does not read: do not wait on it again
            except (OSError, RuntimeError):
                pass
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)
        self._peers.pop(peer.session, None)
        if not ended:
            with contextlib.suppress(OSError, RuntimeError):
                await peer.send({"type": "websocket.close", "code": _NORMAL_CLOSURE})


async def _answer_http(send: _SendCallable) -> None:
    body = b"this endpoint speaks STOMP over WebSocket only\n"
    await send(
        {
            "type": "http.response.start",
            "status": 426,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"upgrade", b"websocket"),
                (b"connection", b"Upgrade"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _encode(body: bytes | str) -> bytes:
    return body.encode("utf-8") if isinstance(body, str) else bytes(body)
