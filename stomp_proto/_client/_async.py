"""The async client, written once for asyncio and trio.

Everything an async STOMP client does is here; what differs between asyncio
and trio - opening a stream, waiting, queues, tasks, timeouts - is behind the
small :class:`Backend` interface, implemented in ``stomp_proto.asyncio`` and
``stomp_proto.trio``.  Protocol decisions stay in the ClientConnection, and
what all adapters share (sync ones too) in ``ClientCore``.

One task reads: it feeds the connection, routes each event (a message to its
subscription's bounded queue, a receipt or CONNECTED to its waiter, an ERROR
or a lost connection to everyone) and drives the heart-beat timer.  Callers
write; a lock keeps "make the frame, write it" atomic so that frames reach the
wire in the order the connection made them.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress

from .._connection import ClientConnection
from .._errors import ProtocolError
from .._events import (
    Abort,
    AckMode,
    Begin,
    Event,
    FrameEvent,
    Message,
    Subscribe,
)
from .._frame import Version
from .._state import ConnectionState
from .._websocket import accepted_versions
from ._backend import Backend, Stream, Task, Waiter
from ._core import (
    CONNECT_WAITER,
    Backoff,
    ClientCore,
    ClientError,
    ConnectionLost,
    ConnectOptions,
    End,
    Resolve,
)
from ._websocket_stream import WebSocketStream

__all__ = ["AsyncClient", "AsyncSubscription", "Backend"]

#: Names the waits of writes that failed (see AsyncClient._why_send_failed).
_write_failures = itertools.count()

# -- the client ------------------------------------------------------------------


class AsyncSubscription:
    """Messages of one subscription: ``async for message in subscription``.

    Its buffer is bounded (``max_pending_messages``): when it is full the
    client stops reading from the socket until the consumer catches up.
    """

    def __init__(self, client: AsyncClient, event: Subscribe) -> None:
        self._client = client
        self._event = event
        self._queue = client._backend.queue(client._core.options.max_pending_messages)
        self._error: ClientError | None = None
        self._active = False
        #: The receipt id of its SUBSCRIBE while that is awaited.
        self._receipt: str | None = None

    @property
    def id(self) -> str:
        """The subscription id sent to the broker."""
        return self._event.key

    @property
    def destination(self) -> str:
        return self._event.destination

    async def __aenter__(self) -> AsyncSubscription:
        await self._client._subscribe(self)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client._unsubscribe(self)

    def __aiter__(self) -> AsyncSubscription:
        return self

    async def __anext__(self) -> Message:
        message = await self.get()
        if message is None:
            raise StopAsyncIteration
        return message

    async def get(self, timeout: float | None = None) -> Message | None:
        """The next message; ``None`` once the subscription has ended cleanly.

        Raises the error that ended the session, or TimeoutError.
        """
        if self._queue.empty():
            if self._error is not None:
                raise self._error
            async with self._client._backend.timeout(timeout):
                item = await self._queue.get()
        else:
            # Not waiting: no timeout to arm, which costs more than the get.
            item = self._queue.get_nowait()
        if item is None and self._error is not None:
            raise self._error
        return item

    def _end(self, error: ClientError | None) -> None:
        self._error = error
        self._active = False
        self._queue.put_nowait(None)  # wakes a waiting reader; a full queue has none


class AsyncClient:
    """A connected STOMP client, for asyncio or trio; made by their ``connect()``."""

    def __init__(self, options: ConnectOptions, backend: Backend) -> None:
        self._core: ClientCore[AsyncSubscription] = ClientCore(options)
        self._options = options
        self._backend: Backend = backend
        self._stream: Stream | None = None
        self._write_lock = backend.lock()
        self._reader: Task | None = None
        self._reconnector: Task | None = None
        self._waiters: dict[str, Waiter[Event]] = {}
        self._ready = backend.flag()
        self._closing = False
        self._reconnecting = False
        #: Messages for subscriptions this client did not make (e.g. RabbitMQ
        #: /temp-queue/ replies); the oldest are dropped when it is full.
        self.unsolicited = backend.queue(options.max_pending_messages)

    # -- inspection --------------------------------------------------------------

    @property
    def version(self) -> Version | None:
        """The negotiated STOMP version of the current connection."""
        return self._core.conn.version

    @property
    def connection(self) -> ClientConnection:
        """The current sans-IO connection (for inspection)."""
        return self._core.conn

    # -- lifecycle ---------------------------------------------------------------

    async def _open(self) -> None:
        conn = self._core.conn
        options = self._options
        async with self._backend.timeout(options.timeout):
            stream = await self._backend.open_stream(options)
            self._stream = stream
            versions = options.versions
            if options.websocket is not None:
                websocket = await WebSocketStream.open(
                    stream, self._backend, options.host, options.port, options.websocket, versions
                )
                self._stream = stream = websocket
                versions = accepted_versions(websocket.subprotocol, versions)
            connected = self._expect(CONNECT_WAITER)
            await stream.send(conn.send(options.connect_event(versions)))
            self._reader = self._backend.spawn(lambda: self._read_loop(stream, conn))
            await connected.wait()
            async with self._write_lock:
                for subscribe in self._core.restore_subscriptions():
                    await stream.send(conn.send(subscribe))
        self._ready.set()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        if kind is None:
            await self.disconnect()
        else:
            await self.close()

    async def disconnect(self) -> None:
        """Leave gracefully: DISCONNECT, wait for its RECEIPT, then close."""
        if self._closing:
            return
        try:
            if self._ready.is_set() and self._core.error is None:
                with suppress(ClientError, TimeoutError, ProtocolError, OSError):
                    await self._send(*self._core.disconnect_event())
        finally:
            await self.close()

    async def close(self) -> None:
        """Drop the connection at once (no DISCONNECT)."""
        self._closing = True
        self._ready.clear()
        for task in (self._reconnector, self._reader):
            if task is not None:
                task.cancel()
                await task.join()
        if self._stream is not None:
            with suppress(Exception):
                await self._stream.aclose()
        self._finish(None)

    # -- reading -----------------------------------------------------------------

    async def _read_loop(self, stream: Stream, conn: ClientConnection) -> None:
        error: ClientError
        try:
            while True:
                event = conn.next_event()
                if event is None:
                    try:
                        async with self._backend.timeout(self._until_timer(conn)):
                            data = await stream.receive()
                    except TimeoutError:
                        await self._write_timer(stream, conn, reading=True)
                        continue
                    conn.receive_data(data or None)
                    continue
                route = self._core.route(event)
                if type(route) is Message:
                    await self._deliver(route, stream, conn)
                elif isinstance(route, Resolve):
                    waiter = self._waiters.pop(route.key, None)
                    if waiter is not None and not waiter.done():
                        waiter.set_result(route.value)
                elif isinstance(route, End):
                    raise route.error
        except ClientError as exc:
            error = exc
        except (ProtocolError, OSError) as exc:
            error = ConnectionLost(f"connection failed: {exc}")
            error.__cause__ = exc
        except Exception as exc:  # a bug must not leave waiters hanging
            error = ConnectionLost(f"client failed: {exc!r}")
            error.__cause__ = exc
        # Lost first, so that no writer sees a ready client on a dead stream.
        self._lost(error)
        with suppress(Exception):
            await stream.aclose()

    def _until_timer(self, conn: ClientConnection) -> float | None:
        deadline = conn.get_timer()
        return None if deadline is None else max(0.0, deadline - self._backend.now())

    async def _write_timer(self, stream: Stream, conn: ClientConnection, *, reading: bool) -> None:
        async with self._write_lock:
            data = conn.handle_timer(self._backend.now(), reading=reading)
            if data:
                await stream.send(data)

    async def _deliver(self, message: Message, stream: Stream, conn: ClientConnection) -> None:
        subscription, receipt = self._core.target(message)
        if subscription is None:
            if not self.unsolicited.put_nowait(message):
                self.unsolicited.get_nowait()
                self.unsolicited.put_nowait(message)
            return
        if receipt is not None:
            waiter = self._waiters.pop(receipt, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(message)
        if subscription._queue.put_nowait(message):
            return  # the common case: room in the queue, no timeout to arm
        # A full queue pauses reading (back-pressure) but not heart-beats.
        while True:
            try:
                async with self._backend.timeout(self._until_timer(conn)):
                    await subscription._queue.put(message)
                return
            except TimeoutError:
                await self._write_timer(stream, conn, reading=False)

    def _lost(self, error: ClientError) -> None:
        """The transport is gone: reconnect if asked to, else end the client."""
        self._ready.clear()
        for waiter in self._waiters.values():
            if not waiter.done():
                waiter.set_exception(error)
        self._waiters.clear()
        if self._closing:
            return
        if self._reconnecting:
            return  # the reconnect loop sees this failure through _open()
        backoff = self._options.reconnect
        # With reconnect on, any end of a working session is worth another try
        # - a lost transport, a silent broker, or an ERROR (a broker shutting
        # down sends one); the waits it interrupted have failed with it above.
        if backoff is not None:
            self._reconnecting = True
            self._reconnector = self._backend.spawn(lambda: self._reconnect(backoff, error))
        else:
            self._finish(error)

    async def _reconnect(self, backoff: Backoff, error: ClientError) -> None:
        try:
            for delay in backoff.delays():
                await self._backend.sleep(delay)
                self._core.new_connection()
                try:
                    await self._open()
                    return
                except (OSError, TimeoutError, ClientError, ProtocolError) as exc:
                    error = ConnectionLost(f"reconnect failed: {exc}")
            self._finish(error)
        finally:
            self._reconnecting = False

    def _finish(self, error: ClientError | None) -> None:
        self._core.finish(error)

    # -- writing -----------------------------------------------------------------

    async def _why_send_failed(self, exc: OSError) -> ClientError:
        """The error a failed write raises: the broker's ERROR when it sent one.

        A broker that refuses a frame sends an ERROR and closes; a write can
        fail (the reader closed the stream on that ERROR, or the WebSocket's
        close frame closed the channel) before the reader has ended the
        session.  So wait, bounded by the timeout, for the reader to end it,
        and raise what ended it.
        """
        if self._ready.is_set():
            key = f"write failed {next(_write_failures)}"
            waiter = self._expect(key)
            try:
                async with self._backend.timeout(self._options.timeout):
                    await waiter.wait()
            except ClientError as ended:
                return ended
            except TimeoutError:
                pass
            finally:
                self._waiters.pop(key, None)
        return self._core.error or ConnectionLost(f"connection failed: {exc}")

    def _expect(self, key: str) -> Waiter[Event]:
        waiter = self._backend.waiter()
        self._waiters[key] = waiter
        return waiter

    async def _send(
        self, event: FrameEvent, receipt: str | None = None, settles: Message | None = None
    ) -> None:
        """Write ``event``; with ``receipt``, wait until the broker confirms it.

        ``settles``: the message an ACK or NACK is for (it must have come on
        the current connection).
        """
        if self._core.error is not None:
            raise self._core.error
        if not self._ready.is_set():
            if self._closing:
                raise ConnectionLost("the client is closed")
            async with self._backend.timeout(self._options.timeout):
                await self._ready.wait()
        stream = self._stream
        assert stream is not None
        waiter = self._expect(receipt) if receipt is not None else None
        try:
            async with self._write_lock:
                conn = self._core.conn
                if conn.state is ConnectionState.CLOSED:
                    raise self._core.error or ConnectionLost("the connection is closed")
                if settles is not None:
                    conn.check_delivered(settles)
                await stream.send(conn.send(event))
        except OSError as exc:
            self._waiters.pop(receipt or "", None)
            raise await self._why_send_failed(exc) from exc
        except BaseException:
            if receipt is not None:
                self._waiters.pop(receipt, None)
            raise
        if waiter is not None:
            async with self._backend.timeout(self._options.timeout):
                await waiter.wait()

    async def send(
        self,
        destination: str,
        body: bytes | str = b"",
        *,
        content_type: str | None = None,
        headers: Mapping[str, str] | None = None,
        transaction: str | None = None,
        receipt: bool = False,
        content_length: bool = True,
    ) -> None:
        """Send a message; with ``receipt=True``, return once the broker has it.

        A ``str`` body is sent as UTF-8 text.  ``content_length=False`` omits
        that header (ActiveMQ then delivers a text message).
        """
        event, receipt_id = self._core.send_event(
            destination,
            body,
            content_type=content_type,
            headers=headers,
            transaction=transaction,
            receipt=receipt,
            content_length=content_length,
        )
        await self._send(event, receipt_id)

    def subscribe(
        self,
        destination: str,
        *,
        ack: AckMode = "auto",
        headers: Mapping[str, str] | None = None,
        id: str | None = None,
    ) -> AsyncSubscription:
        """A subscription, opened by ``async with`` and closed when the block ends.

        ``headers`` carries broker extensions (``prefetch-count``, ``selector``, ...).
        """
        return AsyncSubscription(self, self._core.subscribe_event(destination, ack, headers, id))

    async def _subscribe(self, subscription: AsyncSubscription) -> None:
        event, receipt = self._core.subscribing(subscription)
        try:
            await self._send(event, receipt)
        except BaseException:
            self._core.subscribe_done(subscription, ok=False)
            raise
        self._core.subscribe_done(subscription, ok=True)

    async def _unsubscribe(self, subscription: AsyncSubscription) -> None:
        unsubscribe = self._core.unsubscribing(subscription)
        if unsubscribe is not None and self._ready.is_set() and self._core.error is None:
            with suppress(ClientError, ProtocolError, OSError):
                await self._send(unsubscribe)
        subscription._end(None)

    async def ack(
        self, message: Message, *, transaction: str | None = None, receipt: bool = False
    ) -> None:
        """Acknowledge ``message``; the headers follow the negotiated version."""
        await self._settle(message, transaction, receipt, nack=False)

    async def nack(
        self, message: Message, *, transaction: str | None = None, receipt: bool = False
    ) -> None:
        """Reject ``message`` (STOMP 1.1 and later)."""
        await self._settle(message, transaction, receipt, nack=True)

    async def _settle(
        self, message: Message, transaction: str | None, receipt: bool, *, nack: bool
    ) -> None:
        event, receipt_id = self._core.settle_event(message, transaction, receipt, nack=nack)
        await self._send(event, receipt_id, message)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[str]:
        """``async with client.transaction() as tx``: COMMIT on success, ABORT on error.

        Pass ``transaction=tx`` to ``send``, ``ack`` and ``nack`` inside the
        block.  The COMMIT waits for the broker's receipt.
        """
        tx = self._core.next_id("tx")
        await self._send(Begin(tx))
        try:
            yield tx
        except BaseException:
            with suppress(ClientError, ProtocolError, OSError):
                await self._send(Abort(tx))
            raise
        await self._send(*self._core.commit_event(tx))


async def open_client(options: ConnectOptions, backend: Backend) -> AsyncClient:
    """Connect and log in; failures become ClientError subclasses."""
    client = AsyncClient(options, backend)
    try:
        await client._open()
    except ClientError:
        await client.close()
        raise
    except (OSError, TimeoutError, ProtocolError) as exc:
        await client.close()
        raise ConnectionLost(f"cannot connect to {options.host}:{options.port}: {exc}") from exc
    return client
