"""The ASGI application: :class:`StompApp`, the messages its handlers get
(:class:`AppMessage`) and the exception that refuses one (:class:`Refused`)."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, TypeVar, Unpack

from .._errors import ErrorKind, LocalProtocolError, RemoteProtocolError
from .._events import Send, Subscribe
from .._frame import VERSIONS
from .._websocket import OriginPolicy, accepted_versions, choose_subprotocol
from ..broker._core import (
    DEFAULT_OUTPUT_LIMIT,
    SHUTDOWN_REASON,
    TOPIC_PREFIX,
    BrokerCore,
    BrokerOptions,
    Outbox,
    Relayed,
    Session,
)
from ._peer import _Peer, _Receive, _SendCallable
from ._relay import Relay, _Link

log = logging.getLogger("stomp_proto.asgi")

_Scope = MutableMapping[str, Any]
#: A handler of SENDs to an app destination: takes an :class:`AppMessage`.
_Handler = Callable[["AppMessage"], Awaitable[None] | None]
_H = TypeVar("_H", bound=_Handler)

#: The prefix of user destinations: ``/user/queue/x`` subscribed, ``/user/NAME/queue/x`` sent to.
USER_PREFIX = "/user/"
#: The WebSocket close code of a refused upgrade (ASGI servers answer it with HTTP 403).
_POLICY_VIOLATION = 1008
#: What an app handler's exception tells the client (the exception itself is logged).
HANDLER_FAILED = "handler failed"


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
    prefixes (which must not overlap those) to another broker.
    ``forward_topics``, a handler as for :meth:`handler`, takes every
    client SEND to a ``/topic/`` destination instead of the broker: it
    delivers it, typically to several processes, each of which hands it to
    its own subscribers with :meth:`publish`.  ``options`` are the
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
        forward_topics: _Handler | None = None,
        **options: Unpack[BrokerOptions],
    ) -> None:
        if isinstance(allowed_origins, str):
            raise TypeError("allowed_origins is a list of origins, not one string")
        if not app_prefix.startswith("/"):
            raise ValueError(f"app_prefix starts with '/': {app_prefix!r}")
        #: The prefix of app destinations (always ending with ``/``).
        self.app_prefix = app_prefix if app_prefix.endswith("/") else app_prefix + "/"
        owned: tuple[str, ...] = (self.app_prefix, USER_PREFIX)
        if forward_topics is not None:
            if self.app_prefix.startswith(TOPIC_PREFIX) or TOPIC_PREFIX.startswith(self.app_prefix):
                raise ValueError(f"app_prefix {self.app_prefix!r} overlaps the forwarded topics")
            owned += (TOPIC_PREFIX,)
        for own in owned:
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
        #: What takes the clients' SENDs to topics, if not the core.
        self._forward_topics = forward_topics
        self._peers: dict[Session, _Peer] = {}
        #: The relay side of each session that has relayed a frame.
        self._links: dict[Session, _Link] = {}
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
        peer = _Peer(session, send, self.core, self._output_limit, self._flush)
        self._peers[session] = peer
        self.core.counters.connections_opened["websocket"] += 1
        task = asyncio.current_task()
        reader = asyncio.get_running_loop().create_task(peer.read(receive))
        peer.writer = asyncio.get_running_loop().create_task(peer.write())
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

    async def _serve(self, peer: _Peer) -> None:
        session = peer.session
        loop = asyncio.get_running_loop()
        handling: asyncio.Task[None] | None = None
        ended = False
        try:
            while not session.closed:
                data = await peer.next_input()
                if data is None:
                    ended = True
                elif data:
                    self.core.counters.bytes_received += len(data)
                session.receive_data(data)
                beat = session.handle_timer(loop.time())
                if beat:
                    peer.queue(beat)
                self._flush(self.core.process(session))
                if ended:
                    break  # the client is gone: nothing more can reach it
                if handling is not None and handling.done():
                    handling = None
                if handling is None and not session.closed:
                    if session.diverted is not None:
                        handling = loop.create_task(self._handle(peer, session.diverted))
                    elif session.relayed is not None:
                        handling = loop.create_task(self._link(peer).forward(session.relayed))
        except Exception:
            log.exception("STOMP app: connection %s failed", session.id)
        finally:
            if handling is not None:
                handling.cancel()
                await asyncio.gather(handling, return_exceptions=True)
            self._flush(self.core.close_session(session))
            await peer.finish(ended, lambda: self._forget(session))
            link = self._links.pop(session, None)
            if link is not None:
                # After the client's end: leaving the broker may take a while.
                await link.close()

    async def _handle(self, peer: _Peer, send: Send) -> None:
        """Run the handler of a diverted SEND, then let the session read on."""
        session = peer.session
        refusal: tuple[str, str] | None = None
        handler = (
            self._handlers.get(send.destination)
            if send.destination.startswith(self.app_prefix)
            else self._forward_topics
        )
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
        peer.poke()  # the session's task reads on

    def _diverts(self, session: Session, send: Send) -> bool:
        return send.destination.startswith(self.app_prefix) or (
            self._forward_topics is not None and send.destination.startswith(TOPIC_PREFIX)
        )

    def _forget(self, session: Session) -> None:
        self._peers.pop(session, None)

    # -- relay -----------------------------------------------------------------

    def _relays(self, session: Session, event: Relayed) -> bool:
        """The core's ``relay`` hook: whether ``event`` is the relay's."""
        relay = self.relay
        assert relay is not None
        link = self._links.get(session)
        if link is not None:
            return link.claims(event)
        return isinstance(event, (Send, Subscribe)) and relay.relays(event.destination)

    def _link(self, peer: _Peer) -> _Link:
        """The session's relay side; made at its first relayed frame."""
        link = self._links.get(peer.session)
        if link is None:
            assert self.relay is not None
            link = self._links[peer.session] = _Link(self.relay, self.core, peer)
        return link

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
            peer.queue(bytes(data))
            if not session.closed and peer.queued > self._output_limit:
                self.core.pause(session)
        for session in outbox.to_close:
            peer = self._peers.get(session)
            if peer is not None:
                peer.poke()  # its task sees the session closed


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
