"""The relay of :class:`~stomp_proto.asgi.StompApp`: the destinations a
:class:`Relay` names are served by another broker (RabbitMQ, ActiveMQ), each
browser session on an upstream connection of its own (a :class:`_Link`),
through the asyncio client.

The app hands a session's relayed frames to its link, which answers each one
(RECEIPT or ERROR) through the core, pumps the broker's messages to the
session's transport as its output has room, maps the client's ACK ids to the
broker's messages, and ends the session with an ERROR when the broker is lost.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Unpack

from .._client._async import AsyncClient, AsyncSubscription, AsyncTransaction, open_client
from .._client._asyncio import AsyncioBackend
from .._client._errors import BrokerError, ClientError
from .._client._lifecycle import ClientState, SessionEvent
from .._client._options import ClientOptions, ConnectOptions
from .._errors import ProtocolError
from .._events import Ack, Commit, Message, Nack, Send, Subscribe, Unsubscribe
from ..broker._core import BrokerCore, Relayed
from ._peer import _Peer

log = logging.getLogger("stomp_proto.asgi")

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
    """A session's side of the relay: its broker connection, subscriptions, transactions.

    :class:`~stomp_proto.asgi.StompApp` makes one at the session's first
    relayed frame and hands it each relayed frame (:meth:`forward`); it
    delivers the broker's messages to ``peer``, the session's transport, and
    ends the session with an ERROR when its broker connection is lost.
    """

    __slots__ = ("client", "core", "peer", "relay", "subscriptions", "transactions", "watcher")

    def __init__(self, relay: Relay, core: BrokerCore, peer: _Peer) -> None:
        self.relay = relay
        self.core = core
        self.peer = peer
        self.client: AsyncClient | None = None
        #: By the client's subscription key.
        self.subscriptions: dict[str, _Upstream] = {}
        #: The broker's transaction behind each of the client's that holds relayed frames.
        self.transactions: dict[str, AsyncTransaction] = {}
        self.watcher: asyncio.Task[None] | None = None

    def claims(self, event: Relayed) -> bool:
        """Whether ``event``, other than a SEND or SUBSCRIBE, names something relayed."""
        if isinstance(event, Unsubscribe):
            return (event.key or "") in self.subscriptions
        if isinstance(event, (Ack, Nack)):
            return (event.subscription or "") in self.subscriptions
        if isinstance(event, (Send, Subscribe)):
            return self.relay.relays(event.destination)
        return event.transaction in self.transactions

    async def forward(self, event: Relayed) -> None:
        """Forward a relayed frame to the broker; then its receipt or an ERROR, and read on."""
        session = self.peer.session
        refusal: tuple[str, str] | None = None
        try:
            await self._forward(event)
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
            self.peer.flush(self.core.answer_diverted(session, refusal))
        self.peer.poke()

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

    async def _client(self) -> AsyncClient:
        """The session's connection to the broker; opened at its first relayed frame."""
        if self.client is not None:
            return self.client
        client = self.client = await self.relay._open(self.peer.session.user)
        events = client.session_events()  # (made now: no event is missed)
        self.watcher = asyncio.get_running_loop().create_task(self._watch(events))
        return client

    async def _forward(self, event: Relayed) -> None:
        client = await self._client()
        receipt = event.receipt is not None
        if isinstance(event, Send):
            transaction = await self._transaction(client, event.transaction)
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
            upstream = self.subscriptions[event.key] = _Upstream(subscription, event.ack != "auto")
            upstream.pump = asyncio.get_running_loop().create_task(self._pump(event.key, upstream))
        elif isinstance(event, Unsubscribe):
            upstream = self.subscriptions.pop(event.key or "")
            if upstream.pump is not None:
                upstream.pump.cancel()
                await asyncio.gather(upstream.pump, return_exceptions=True)
            await upstream.subscription.unsubscribe(headers=event.headers or None, receipt=receipt)
        elif isinstance(event, (Ack, Nack)):
            await self._settle(client, event)
        else:
            tx = self.transactions.pop(event.transaction)
            await (tx.commit() if isinstance(event, Commit) else tx.abort())

    async def _transaction(self, client: AsyncClient, name: str | None) -> str | None:
        """The broker's transaction behind the client's ``name``; begun at its first use."""
        if name is None:
            return None
        tx = self.transactions.get(name)
        if tx is None:
            tx = self.transactions[name] = await client.begin()
        return tx.id

    async def _settle(self, client: AsyncClient, event: Ack | Nack) -> None:
        upstream = self.subscriptions[event.subscription or ""]
        found = [(i, m) for i in event.covered if (m := upstream.unacked.pop(i, None)) is not None]
        if not found:
            return  # nothing of the broker's: nothing to settle there
        named = event.id if event.id is not None else event.message_id
        # The broker's message behind the one named; a cumulative ACK covers the rest there too.
        message = next((m for i, m in found if i == named), found[-1][1])
        transaction = await self._transaction(client, event.transaction)
        settle = client.nack if isinstance(event, Nack) else client.ack
        await settle(
            message,
            transaction=transaction,
            receipt=event.receipt is not None,
            headers=event.headers or None,
        )

    async def _pump(self, key: str, upstream: _Upstream) -> None:
        """Deliver a relayed subscription's messages to the session, as its output has room."""
        peer = self.peer
        session = peer.session
        try:
            async for message in upstream.subscription:
                await peer.output_room()
                if session.closed:
                    return
                data, ident = self.core.deliver_relayed(
                    session,
                    dataclasses.replace(message, subscription=key),
                    acked=upstream.acked,
                )
                if ident is not None:
                    upstream.unacked[ident] = message
                peer.queue(data)
        except ClientError:
            return  # the session's loss is reported by _watch
        except Exception:
            log.exception("STOMP app: relaying a message to session %s failed", session.id)
            peer.flush(self.core.end_with_error(session, BROKER_LOST, "relaying a message failed"))
            peer.poke()

    async def _watch(self, events: AsyncIterator[SessionEvent]) -> None:
        """End the session with an ERROR once its connection to the broker is lost."""
        error: ClientError | None = None
        async for event in events:
            if event.kind in ("lost", "gave_up"):
                error = event.error
                break
        session = self.peer.session
        if session.closed:
            return
        detail = f"the connection to the broker ended: {error}" if error else ""
        log.info("STOMP app: session %s lost its broker: %s", session.id, error)
        self.peer.flush(self.core.end_with_error(session, BROKER_LOST, detail))
        self.peer.poke()


async def _leave(client: AsyncClient) -> None:
    """DISCONNECT from the broker behind, within RELAY_CLOSE_TIMEOUT; else just close."""
    try:
        async with asyncio.timeout(RELAY_CLOSE_TIMEOUT):
            await client.disconnect()
    except (ClientError, ProtocolError, OSError, TimeoutError):
        await client.close()
