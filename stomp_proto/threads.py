"""The blocking STOMP client, for plain scripts and threaded programs.

.. code-block:: python

    with stomp_proto.threads.connect("127.0.0.1", 61613) as client:
        with client.subscribe("/queue/work", ack="client-individual") as messages:
            client.send("/queue/work", b"hello", receipt=True)
            for message in messages:
                client.ack(message)
                break

How it works: the client owns one background thread running a private
asyncio event loop, and in it the same :class:`~stomp_proto.asyncio.AsyncClient`
the asyncio adapter uses (reading, heart-beats, reconnects).  Every blocking
method hands its work to that loop and waits for the result, so the client may
be used from any number of threads at once, and there is exactly one extra
thread - the reader - and one implementation of the client's behaviour.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Coroutine, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, contextmanager
from types import TracebackType
from typing import Any, TypeVar, Unpack

from ._async_client import AsyncClient, AsyncSubscription, open_client
from ._client_core import (
    Backoff,
    BrokerError,
    ClientError,
    ClientOptions,
    ConnectionLost,
    ConnectOptions,
    HeartBeatLost,
)
from ._connection import ClientConnection
from ._events import AckMode, Message
from ._frame import Version
from .asyncio import AsyncioBackend

__all__ = [
    "Backoff",
    "BrokerError",
    "Client",
    "ClientError",
    "ConnectionLost",
    "HeartBeatLost",
    "Subscription",
    "connect",
]

T = TypeVar("T")


class _LoopThread:
    """A private event loop in one daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="stomp_proto-reader", daemon=True
        )
        self._thread.start()

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if self.loop.is_closed():
            coroutine.close()
            raise ConnectionLost("the client is closed")
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError("blocking client called from its own reader thread")
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()

    @contextmanager
    def enter(self, manager: AbstractAsyncContextManager[T]) -> Iterator[T]:
        """Run an async context manager's enter and exit on the loop, around a block."""
        value = self.call(manager.__aenter__())
        try:
            yield value
        except BaseException as exc:
            if self.loop.is_closed():
                raise  # the client was closed inside the block: nothing to leave
            if not self.call(manager.__aexit__(type(exc), exc, exc.__traceback__)):
                raise
        else:
            if not self.loop.is_closed():
                self.call(manager.__aexit__(None, None, None))


#: Most messages one trip to the reader thread hands to a subscription's reader.
_BATCH = 64


async def _take(subscription: AsyncSubscription, timeout: float | None) -> list[Message | None]:
    """The next message, and those queued behind it (up to :data:`_BATCH`).

    A trip between threads costs far more than handling a message, so a
    reader that is behind takes what is waiting in one go.  The end marker
    (``None``, last in the queue) is left there: the ``get`` that reaches it
    reports the end, or the error, exactly as before.
    """
    first = await subscription.get(timeout)
    batch = [first]
    queue = subscription._queue
    while first is not None and len(batch) < _BATCH and not queue.empty():
        item = queue.get_nowait()
        if item is None:
            queue.put_nowait(None)  # room: one was just taken
            break
        batch.append(item)
    return batch


class Subscription:
    """Messages of one subscription: ``for message in subscription``."""

    def __init__(self, runner: _LoopThread, subscription: AsyncSubscription) -> None:
        self._runner = runner
        self._subscription = subscription
        #: Messages already handed over by the reader thread, not yet returned.
        self._taken: deque[Message | None] = deque()

    @property
    def id(self) -> str:
        return self._subscription.id

    @property
    def destination(self) -> str:
        return self._subscription.destination

    def get(self, timeout: float | None = None) -> Message | None:
        """The next message, waiting up to ``timeout`` seconds (TimeoutError after).

        ``None`` once the subscription has ended cleanly.
        """
        if self._taken:
            return self._taken.popleft()
        first, *rest = self._runner.call(_take(self._subscription, timeout))
        self._taken.extend(rest)
        return first

    def __iter__(self) -> Iterator[Message]:
        while (message := self.get()) is not None:
            yield message


class Client:
    """A connected, blocking STOMP client; make one with :func:`connect`."""

    def __init__(self, runner: _LoopThread, client: AsyncClient) -> None:
        self._runner = runner
        self._client = client

    @property
    def version(self) -> Version | None:
        return self._client.version

    @property
    def connection(self) -> ClientConnection:
        return self._client.connection

    def send(
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
        """Send a message; see :meth:`stomp_proto.asyncio.AsyncClient.send`."""
        self._runner.call(
            self._client.send(
                destination,
                body,
                content_type=content_type,
                headers=headers,
                transaction=transaction,
                receipt=receipt,
                content_length=content_length,
            )
        )

    @contextmanager
    def subscribe(
        self,
        destination: str,
        *,
        ack: AckMode = "auto",
        headers: Mapping[str, str] | None = None,
        id: str | None = None,
    ) -> Iterator[Subscription]:
        """Subscribe for the duration of a ``with`` block."""
        manager = self._client.subscribe(destination, ack=ack, headers=headers, id=id)
        with self._runner.enter(manager) as subscription:
            yield Subscription(self._runner, subscription)

    def ack(
        self, message: Message, *, transaction: str | None = None, receipt: bool = False
    ) -> None:
        """Acknowledge ``message``; the headers follow the negotiated version."""
        self._runner.call(self._client.ack(message, transaction=transaction, receipt=receipt))

    def nack(
        self, message: Message, *, transaction: str | None = None, receipt: bool = False
    ) -> None:
        """Reject ``message`` (STOMP 1.1 and later)."""
        self._runner.call(self._client.nack(message, transaction=transaction, receipt=receipt))

    @contextmanager
    def transaction(self) -> Iterator[str]:
        """``with client.transaction() as tx``: COMMIT on success, ABORT on an exception."""
        with self._runner.enter(self._client.transaction()) as tx:
            yield tx

    def disconnect(self) -> None:
        """Leave gracefully (DISCONNECT and its receipt) and stop the reader thread."""
        if self._runner.loop.is_closed():
            return  # already closed: like the async clients, a no-op
        try:
            self._runner.call(self._client.disconnect())
        finally:
            self._runner.stop()

    def close(self) -> None:
        """Drop the connection at once and stop the reader thread."""
        if self._runner.loop.is_closed():
            return
        try:
            self._runner.call(self._client.close())
        finally:
            self._runner.stop()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is None:
            self.disconnect()
        else:
            self.close()


def connect(host: str = "127.0.0.1", port: int = 61613, **options: Unpack[ClientOptions]) -> Client:
    """Connect and log in; returns a :class:`Client` (use it in a ``with`` block).

    ``options`` are described by :class:`~stomp_proto.ClientOptions`.  Errors
    are :class:`ConnectionLost` and :class:`BrokerError`.
    """
    runner = _LoopThread()
    try:
        client = runner.call(
            open_client(ConnectOptions.build(host, port, options), AsyncioBackend())
        )
    except BaseException:
        runner.stop()
        raise
    return Client(runner, client)
