"""The async client, written once for asyncio and trio.

What differs between asyncio and trio - opening a stream, waiting, queues,
tasks, timeouts - is behind the small :class:`Backend` interface, implemented
in ``stomp_proto.asyncio`` and ``stomp_proto.trio``.  Protocol decisions stay
in the ClientConnection, and what all adapters share (sync ones too) in
``ClientCore``.

This module is the client's API: :class:`AsyncClient`, its subscriptions,
transactions and ``unsolicited``.  Behind it, each in a module of its own:
the sessions - each connection attempt, the reconnects, the end
(``_async_connector``); the one task a session that reads
(``_async_reader``); the writing side callers write through, which owns the
write lock and the waits for answers (``_async_writer``).
"""

from __future__ import annotations

import inspect
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager, suppress
from contextvars import ContextVar

from .._errors import ErrorKind, LocalProtocolError, ProtocolError
from .._events import (
    Abort,
    AckMode,
    Begin,
    FrameEvent,
    Message,
    Send,
    Subscribe,
)
from ._async_connector import Connector
from ._backend import Backend, Flag, Task
from ._brokers import Brokers, FirstConnect
from ._core import ClientCore, PlainSettle
from ._errors import (
    ClientError,
    message_timed_out,
    timed_out,
)
from ._lifecycle import SessionEvent
from ._options import ConnectOptions, TracingHook
from ._transaction import TransactionBase
from ._unsolicited import UnsolicitedBase
from ._view import ClientView

log = logging.getLogger("stomp_proto.client")

__all__ = [
    "AsyncClient",
    "AsyncSubscription",
    "AsyncTransaction",
    "AsyncUnsolicited",
    "Backend",
]

#: The subscription whose ``on_message`` task this is, in that task (an
#: ``unsubscribe()`` from the callback must not wait for its own task to end).
_dispatching: ContextVar[AsyncSubscription] = ContextVar("stomp_proto_dispatching")

# -- the client ------------------------------------------------------------------


class AsyncSubscription:
    """Messages of one subscription: ``async for message in subscription``.

    Its buffer is bounded (``max_pending_messages``): when it is full the
    client stops reading from the socket until the consumer catches up.
    """

    def __init__(
        self,
        client: AsyncClient,
        event: Subscribe,
        on_message: Callable[[Message], object] | None = None,
        inline: bool = False,
    ) -> None:
        backend = client._backend
        self._client = client
        self._event = event
        self._on_message = on_message
        #: ``on_message`` when it is called inline, by the reader, as each message is read.
        self._inline = on_message if inline else None
        #: The task that calls ``on_message`` (while the subscription is open).
        self._dispatcher: Task | None = None
        self._limit = client._core.options.max_pending_messages
        self._messages: deque[Message] = deque()
        #: Set when a message arrives or the subscription ends (consumers wait on it).
        self._arrived = backend.flag()
        #: Set when the full buffer gets room or the subscription ends (the reader waits on it).
        self._room = backend.flag()
        # The end is a flag, never an item in the buffer: a full buffer has no
        # room for one, and a reader waiting for room must see it too.
        self._ended = False
        self._error: ClientError | None = None
        self._tracing = client._core.options.tracing

    @property
    def id(self) -> str:
        """The subscription id sent to the broker."""
        return self._event.key

    @property
    def destination(self) -> str:
        """The destination subscribed to."""
        return self._event.destination

    async def __aenter__(self) -> AsyncSubscription:
        await self._client._subscribe(self)
        if self._on_message is not None and self._inline is None:
            self._dispatcher = self._client._backend.spawn(self._dispatch)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.unsubscribe()

    async def unsubscribe(
        self,
        *,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
        receipt: bool = False,
    ) -> None:
        """UNSUBSCRIBE now, before the ``async with`` block ends (which then does
        nothing more): the messages buffered still come, then the end.  It may be called
        from the subscription's own ``on_message``.

        :param headers: more headers, sent as given: ActiveMQ's
            ``activemq.subscriptionName`` removes a durable subscription (see
            :ref:`durable-subscriptions`).
        :param receipt: return only once the broker has confirmed it.
        """
        await self._client._unsubscribe(self, headers, receipt)
        if self._dispatcher is not None and _dispatching.get(None) is not self:
            await self._dispatcher.join()  # it ends after the messages buffered

    async def _dispatch(self) -> None:
        """The task of ``on_message``: each message to it, in order (awaited when
        it returns an awaitable); what it raises is logged, and the next comes."""
        on_message = self._on_message
        assert on_message is not None
        _dispatching.set(self)  # (this task's own context: see unsubscribe())
        while True:
            try:
                message = await self.get()
            except ClientError:
                return  # the session ended: the client's state hooks and log say how
            if message is None:
                return
            try:
                result = on_message(message)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                self._log_failed(message)

    def __aiter__(self) -> AsyncSubscription:
        """``async for message in subscription``: the messages, until it ends.

        As :meth:`get` without a timeout: a clean end stops the loop, an error
        that ended the session is raised.
        """
        return self

    async def __anext__(self) -> Message:
        messages = self._messages
        if messages and self._tracing is None and len(messages) < self._limit:
            return messages.popleft()  # get()'s common case, without a second coroutine
        message = await self.get()
        if message is None:
            raise StopAsyncIteration
        return message

    async def get(self, timeout: float | None = None) -> Message | None:
        """The next message; ``None`` once the subscription has ended cleanly.

        Messages buffered before the end come first.  Raises the error that
        ended the session, or TimeoutError when ``timeout`` seconds pass first
        (``None``: wait as long as it takes).
        """
        began = 0 if self._tracing is None else time.time_ns()
        if not self._messages and not self._ended:
            if timeout is None:
                await self._wait_for_message()
            else:
                # Only a consumer that must wait arms a timeout (it costs more than a get).
                try:
                    async with self._client._backend.timeout(timeout):
                        await self._wait_for_message()
                except TimeoutError:
                    raise message_timed_out(self.destination, timeout) from None
        if not self._messages:
            if self._error is not None:
                self._client._core.reported(self._error)
                raise self._error
            return None
        if len(self._messages) == self._limit:
            self._room.set()  # the reader may be waiting for room
        message = self._messages.popleft()
        if self._tracing is not None:
            client = self._client
            self._tracing.received(message, client.broker, client.version, began)
        return message

    async def _wait_for_message(self) -> None:
        while not self._messages and not self._ended:
            self._arrived.clear()
            await self._arrived.wait()

    def _put_nowait(self, message: Message) -> bool:
        """Buffer ``message`` (the reader); False when the buffer is full.

        An inline ``on_message`` takes it there and then instead.
        """
        if self._inline is not None:
            self._call_inline(self._inline, message)
            return True
        messages = self._messages
        if not messages:
            # A consumer waits only on an empty buffer: the first message wakes it.
            self._arrived.set()
        elif len(messages) >= self._limit:
            return False
        messages.append(message)
        return True

    def _call_inline(self, on_message: Callable[[Message], object], message: Message) -> None:
        try:
            result = on_message(message)
        except Exception:
            self._log_failed(message)
            return
        if inspect.isawaitable(result):
            close = getattr(result, "close", None)
            if close is not None:
                close()  # never awaited: no warning that it was not
            log.error(
                "the inline on_message of subscription %s (%s) returned an awaitable "
                "on message %s; it is not awaited (an inline on_message is a plain function)",
                self.id,
                self.destination,
                message.message_id,
            )

    def _log_failed(self, message: Message) -> None:
        log.exception(
            "on_message of subscription %s (%s) raised on message %s; the next "
            "message is delivered all the same",
            self.id,
            self.destination,
            message.message_id,
        )

    async def _wait_for_room(self) -> None:
        """Until the full buffer has room or the subscription ends (the reader)."""
        while len(self._messages) >= self._limit and not self._ended:
            self._room.clear()
            await self._room.wait()

    def _end(self, error: ClientError | None) -> None:
        if self._ended:
            return
        self._ended = True
        self._error = error
        self._arrived.set()  # wakes waiting consumers
        self._room.set()  # and a reader waiting for room: its message is dropped


class AsyncUnsolicited(UnsolicitedBase):
    """``client.unsolicited`` of the asyncio and trio clients: the messages for
    subscriptions the client did not make, oldest first, at most
    ``max_pending_messages`` (past that the oldest is dropped, and counted in
    :attr:`dropped`)."""

    __slots__ = ("_arrived", "_backend")

    def __init__(self, backend: Backend, limit: int) -> None:
        super().__init__(limit)
        self._backend = backend
        self._arrived = backend.flag()

    def _wake(self) -> None:
        self._arrived.set()

    async def get(self, timeout: float | None = None) -> Message | None:
        """The oldest message, waiting for one; ``None`` once the client has ended
        and none is left.  TimeoutError after ``timeout`` seconds (``None``: wait
        as long as it takes)."""
        if not self._messages and not self._ended:
            try:
                async with self._backend.timeout(timeout):
                    while not self._messages and not self._ended:
                        self._arrived.clear()
                        await self._arrived.wait()
            except TimeoutError:
                raise timed_out("the wait for an unsolicited message", timeout) from None
        return self.get_nowait()


class AsyncTransaction(TransactionBase):
    """A transaction from ``await client.begin()``: what is sent, acknowledged or
    rejected through it takes effect at :meth:`commit`, and not at all after
    :meth:`abort`.  Ended once; a frame after that is a LocalProtocolError.
    A transaction still open when its session is lost is gone (STOMP 1.2 §BEGIN).
    """

    __slots__ = ("_client",)

    def __init__(self, client: AsyncClient, transaction: str) -> None:
        super().__init__(transaction)
        self._client = client

    async def send(
        self,
        destination: str,
        body: bytes | bytearray | memoryview | str = b"",
        *,
        content_type: str | None = None,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
        receipt: bool = False,
        content_length: bool = True,
    ) -> None:
        """:meth:`AsyncClient.send` within the transaction; ``destination``, ``body``,
        ``content_type``, ``headers``, ``receipt`` and ``content_length`` as there."""
        await self._client.send(
            destination,
            body,
            content_type=content_type,
            headers=headers,
            transaction=self._use(),
            receipt=receipt,
            content_length=content_length,
        )

    async def ack(
        self,
        message: Message,
        *,
        receipt: bool = False,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
    ) -> None:
        """:meth:`AsyncClient.ack` of ``message`` within the transaction; ``receipt`` and
        ``headers`` as there."""
        await self._client.ack(message, transaction=self._use(), receipt=receipt, headers=headers)

    async def nack(
        self,
        message: Message,
        *,
        receipt: bool = False,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
    ) -> None:
        """:meth:`AsyncClient.nack` of ``message`` within the transaction; ``receipt`` and
        ``headers`` as there."""
        await self._client.nack(message, transaction=self._use(), receipt=receipt, headers=headers)

    async def commit(self) -> None:
        """COMMIT: what the transaction holds takes effect; returns with the broker's
        receipt."""
        client = self._client
        client._core.take_refusal()
        await client._writer.send(*client._core.commit_event(self._use("committed")))

    async def abort(self) -> None:
        """ABORT: what the transaction holds is dropped; returns with the broker's
        receipt."""
        client = self._client
        client._core.take_refusal()
        await client._writer.send(*client._core.abort_event(self._use("aborted")))


class AsyncClient(ClientView):
    """A connected STOMP client, for asyncio or trio; made by their ``connect()``."""

    def __init__(
        self, options: ConnectOptions, backend: Backend, brokers: Brokers | None = None
    ) -> None:
        self._core: ClientCore[AsyncSubscription] = ClientCore(options, brokers)
        self._backend: Backend = backend
        #: Messages for subscriptions this client did not make (an
        #: :class:`AsyncUnsolicited`): ``await client.unsolicited.get()``, or
        #: ``get_nowait()`` (``None`` when empty).  It holds up to
        #: ``max_pending_messages``; the oldest are dropped when it is full, and
        #: counted in its ``dropped``.  Replies to :meth:`request` go to it only
        #: when they come after their request stopped waiting.
        self.unsolicited = AsyncUnsolicited(backend, options.max_pending_messages)
        #: The sessions: each attempt, the reconnects, the end.
        self._connector = Connector(self._core, backend, self.unsolicited)
        #: The write lock, the waits for answers, readiness, the current session.
        self._writer = self._connector.writer

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        if kind is None:
            await self.disconnect()
        else:
            await self.close()

    async def disconnect(self) -> None:
        """Leave gracefully: DISCONNECT, wait for its RECEIPT, then close.

        Raises the :class:`BrokerError` that may have refused a message sent
        without a receipt, if no call since has raised it.
        """
        if self._writer.closing:
            return
        try:
            if self._writer.ready.is_set() and self._core.error is None:
                with suppress(ClientError, TimeoutError, ProtocolError, OSError):
                    await self._writer.send(*self._core.disconnect_event())
        finally:
            await self.close()
        self._core.take_refusal()

    async def close(self) -> None:
        """Drop the connection at once (no DISCONNECT).

        Every wait ends: a consumer gets what is buffered, then the end; a
        receipt wait, or a send waiting for a reconnect, raises ConnectionLost.
        """
        await self._connector.close()

    async def send(
        self,
        destination: str,
        body: bytes | bytearray | memoryview | str = b"",
        *,
        content_type: str | None = None,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
        transaction: str | None = None,
        receipt: bool = False,
        content_length: bool = True,
    ) -> None:
        """Send a message; with ``receipt=True``, return once the broker has it.

        A ``str`` body is sent as UTF-8 text; ``headers`` is a mapping or
        ``(name, value)`` pairs of str.  ``content_length=False`` omits
        that header (ActiveMQ then delivers a text message).

        :param destination: where to send it (``/queue/work``, ``/topic/news``;
            the names a broker accepts are its own).
        :param body: the message: bytes (or a bytes-like object) or text.
        :param content_type: the ``content-type`` header (a MIME type).
        :param headers: more headers, sent as given (broker extensions,
            application properties).
        :param transaction: the id of an open :meth:`transaction`: the message
            is delivered when it commits.
        """
        if (cancel_point := self._backend.cancel_point) is not None:
            await cancel_point()  # (see Backend: before the frame is made)
        self._core.take_refusal()
        tracing = self._core.options.tracing
        event, receipt_id = self._core.send_event(
            destination,
            body,
            content_type=content_type,
            headers=headers,
            transaction=transaction,
            receipt=receipt,
            content_length=content_length,
            parts=tracing is None,
        )
        if tracing is None:
            if receipt_id is not None:
                await self._writer.send(event, receipt_id)
            elif (wait := self._writer.write(event)) is not None:
                await wait
            return
        # A span around the call; the SEND carries its context.
        assert isinstance(event, Send)  # (not its parts: see send_event)
        with tracing.sending(event, self.broker, self.version) as traced:
            await self._writer.send(traced, receipt_id)

    def subscribe(
        self,
        destination: str,
        *,
        ack: AckMode = "auto",
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
        id: str | None = None,
        on_message: Callable[[Message], object] | None = None,
        inline: bool = False,
    ) -> AsyncSubscription:
        """A subscription, opened by ``async with`` and closed when the block ends.

        ``headers`` (a mapping or ``(name, value)`` pairs) carries broker
        extensions (``prefetch-count``, ``selector``, ...).

        :param destination: the queue or topic to receive from.
        :param ack: how messages are acknowledged: ``"auto"`` (by the broker, as
            it sends them), ``"client"`` (an :meth:`ack` covers every earlier
            message too) or ``"client-individual"`` (each on its own).
        :param id: the subscription's id; by default the client picks one.
        :param on_message: called with each message, in order, in a task of the
            client's own, instead of taking them with ``get()``; when it returns
            an awaitable, that is awaited before the next message.  An exception
            it raises is logged with the message (logger ``stomp_proto.client``)
            and the next message comes all the same.  The task ends with the
            subscription, after the messages already buffered, and leaving the
            ``async with`` block waits for it.
        :param inline: call ``on_message`` in the client's reader, as each message
            is read, instead of in a task of its own: no hand-off, and no buffer.
            It must be a plain function (an awaitable it returns is not awaited:
            it is closed, and logged as an error) and quick, since nothing is
            read meanwhile.  Messages may come before the ``async with`` block
            starts; none after ``unsubscribe()``.
        """
        if inline and on_message is None:
            raise LocalProtocolError(
                ErrorKind.BAD_STATE, "subscribe(inline=True) needs an on_message to call"
            )
        return AsyncSubscription(
            self, self._core.subscribe_event(destination, ack, headers, id), on_message, inline
        )

    async def _subscribe(self, subscription: AsyncSubscription) -> None:
        self._core.take_refusal()
        event, receipt = self._core.subscribing(subscription)
        try:
            await self._writer.send(event, receipt)
        except BaseException:
            self._core.subscribe_done(subscription, ok=False)
            raise
        self._core.subscribe_done(subscription, ok=True)

    async def unsubscribe(
        self,
        id: str,
        *,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
        receipt: bool = False,
    ) -> None:
        """UNSUBSCRIBE the subscription ``id``: one of this client's open
        subscriptions (as its :meth:`AsyncSubscription.unsubscribe`) or, with
        ``headers``, a durable one that outlives its subscription at the broker.

        :param id: the subscription's id (``subscribe(..., id=...)``).
        :param headers: more headers, sent as given: ActiveMQ removes a durable
            subscription, once its consumer is gone, by an UNSUBSCRIBE with
            ``activemq.subscriptionName`` (see :ref:`durable-subscriptions`).
        :param receipt: return only once the broker has confirmed it.
        """
        subscription = self._core.subscriptions.get(id)
        if subscription is not None:
            await subscription.unsubscribe(headers=headers, receipt=receipt)
            return
        self._core.take_refusal()
        await self._writer.send(*self._core.removal_event(id, headers, receipt))

    async def _unsubscribe(
        self,
        subscription: AsyncSubscription,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None,
        receipt: bool,
    ) -> None:
        unsubscribe = self._core.unsubscribing(subscription, headers, receipt)
        try:
            if unsubscribe is not None and self._writer.ready.is_set() and self._core.error is None:
                if unsubscribe.receipt is not None:  # asked for: what fails is raised
                    await self._writer.send(unsubscribe, unsubscribe.receipt)
                    return
                with suppress(ClientError, ProtocolError, OSError):
                    await self._writer.send(unsubscribe)
        finally:
            subscription._end(None)

    async def ack(
        self,
        message: Message,
        *,
        transaction: str | None = None,
        receipt: bool = False,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
    ) -> None:
        """Acknowledge ``message``; the headers follow the negotiated version.

        :param transaction: the id of an open :meth:`transaction`: the
            acknowledgement takes effect when it commits.
        :param receipt: return only once the broker has confirmed it.
        :param headers: more headers, sent as given (broker extensions).
        """
        if (cancel_point := self._backend.cancel_point) is not None:
            await cancel_point()  # (see Backend: before the frame is made)
        if (wait := self._settle(message, transaction, receipt, headers, nack=False)) is not None:
            await wait

    async def nack(
        self,
        message: Message,
        *,
        transaction: str | None = None,
        receipt: bool = False,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
    ) -> None:
        """Reject ``message`` (STOMP 1.1 and later): the broker delivers it again,
        or elsewhere.

        :param transaction: the id of an open :meth:`transaction`.
        :param receipt: return only once the broker has confirmed it.
        :param headers: more headers, sent as given (RabbitMQ's ``requeue:false``
            drops or dead-letters the message instead of delivering it again).
        """
        if (cancel_point := self._backend.cancel_point) is not None:
            await cancel_point()  # (see Backend: before the frame is made)
        if (wait := self._settle(message, transaction, receipt, headers, nack=True)) is not None:
            await wait

    def _settle(
        self,
        message: Message,
        transaction: str | None,
        receipt: bool,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None,
        *,
        nack: bool,
    ) -> Awaitable[None] | None:
        """Write the ACK (``nack``: NACK) of ``message``: None once written, else what
        ``ack()`` awaits to finish (see :meth:`_write`).

        Not a coroutine of its own: a consumer settling each message runs this
        once per message.  What it raises, it raises in the caller's coroutine,
        as one of its own would.
        """
        self._core.take_refusal()
        event, receipt_id = self._core.settle_event(
            message, transaction, receipt, nack=nack, headers=headers
        )
        tracing = self._core.options.tracing
        if tracing is None:
            if receipt_id is None:
                return self._writer.write(event, message)
            return self._writer.send(event, receipt_id, message)
        return self._traced_settle(tracing, event, receipt_id, message, nack)

    async def _traced_settle(
        self,
        tracing: TracingHook,
        event: FrameEvent | PlainSettle,
        receipt_id: str | None,
        message: Message,
        nack: bool,
    ) -> None:
        with tracing.settling(message, nack, self.broker, self.version):
            await self._writer.send(event, receipt_id, message)

    async def request(
        self,
        destination: str,
        body: bytes | bytearray | memoryview | str = b"",
        *,
        timeout: float | None = None,
        content_type: str | None = None,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
    ) -> Message:
        """Send a request and return its reply: request/reply over a temporary queue.

        The SEND carries ``reply-to`` (a ``/temp-queue/`` destination of this
        client's) and a ``correlation-id`` of its own; the replier sends its reply
        to the ``reply-to`` it got, with the same ``correlation-id`` (see
        :ref:`request-reply`).  On RabbitMQ the broker makes the temporary queue;
        elsewhere the client subscribes to it once, at the first request.
        Replies go to their requests, never to :attr:`unsolicited` (unless they
        come too late) and never with a warning.

        :param destination: where the request goes (the replier's queue).
        :param body: the request, as for :meth:`send`.
        :param timeout: seconds to wait for the reply; ``None``: the client's
            ``timeout``.  TimeoutError after that.
        :param content_type: the ``content-type`` header, as for :meth:`send`.
        :param headers: more headers, as for :meth:`send` (not ``reply-to`` nor
            ``correlation-id``: the request sets those).
        """
        if not self._writer.ready.is_set():
            await self._writer.wait_ready()  # the broker's name decides where replies go
        reply_to, subscribe = self._core.reply_destination()
        if subscribe is not None:
            try:
                await self._subscribe(AsyncSubscription(self, subscribe))
            except BaseException:
                self._core.replies.failed(subscribe)
                raise
        pairs, correlation, key = self._core.replies.started(headers, reply_to)
        waiter = self._writer.expect(key)
        seconds = self._core.options.timeout if timeout is None else timeout
        try:
            await self.send(destination, body, content_type=content_type, headers=pairs)
            try:
                async with self._backend.timeout(seconds):
                    reply = await waiter.wait()
            except TimeoutError:
                raise timed_out(f"the reply to a request to {destination}", seconds) from None
        finally:
            self._writer.forget(key)
            self._core.replies.ended(correlation)
        assert isinstance(reply, Message)
        return reply

    def session_events(self) -> AsyncIterator[SessionEvent]:
        """``async for event in client.session_events()``: each :class:`SessionEvent`
        from this call on - a session lost, the next one up (``"reconnected"``),
        the client giving up - until the client is over (closed, or failed for
        good).

        Each iterator keeps the events of its own from the moment it is made: none
        is missed while the loop body runs, or before the loop starts.  The
        ``on_session`` option is the callback form.
        """
        events: deque[SessionEvent | None] = deque()
        arrived = self._backend.flag()

        def heard(event: SessionEvent | None) -> None:
            events.append(event)
            arrived.set()

        self._core.life.listen(heard)
        return self._session_events(events, arrived, heard)

    async def _session_events(
        self,
        events: deque[SessionEvent | None],
        arrived: Flag,
        heard: Callable[[SessionEvent | None], None],
    ) -> AsyncIterator[SessionEvent]:
        try:
            while True:
                while events:
                    event = events.popleft()
                    if event is None:
                        return
                    yield event
                arrived.clear()
                await arrived.wait()
        finally:
            self._core.life.unlisten(heard)

    async def begin(self) -> AsyncTransaction:
        """BEGIN a transaction, ended by its ``commit()`` or ``abort()`` (the
        :meth:`transaction` block does the same around a block)."""
        self._core.take_refusal()
        tx = self._core.next_id("tx")
        await self._writer.send(Begin(tx))
        return AsyncTransaction(self, tx)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[str]:
        """``async with client.transaction() as tx``: COMMIT on success, ABORT on error.

        Pass ``transaction=tx`` to ``send``, ``ack`` and ``nack`` inside the
        block.  The COMMIT waits for the broker's receipt.
        """
        self._core.take_refusal()
        tx = self._core.next_id("tx")
        await self._writer.send(Begin(tx))
        try:
            yield tx
        except BaseException:
            with suppress(ClientError, ProtocolError, OSError):
                await self._writer.send(Abort(tx))
            raise
        await self._writer.send(*self._core.commit_event(tx))


async def open_client(options: ConnectOptions, backend: Backend) -> AsyncClient:
    """Connect and log in, to the first broker that lets us (see FirstConnect);
    failures become ClientError subclasses."""
    first = FirstConnect(options, backend.now)
    for wait, timeout in first.attempts():
        if wait:
            await backend.sleep(wait)
        client = AsyncClient(options, backend, first.brokers)
        try:
            await client._connector.open(timeout)
        except BaseException as exc:
            await client.close()
            first.failed(exc)
            continue
        return client
    raise first.error()
