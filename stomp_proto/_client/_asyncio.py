"""asyncio's primitives for the async client: streams, futures, queues, tasks, timeouts."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import cast

from .._events import Event, Message
from ._backend import READ_SIZE as _READ_SIZE
from ._backend import HandOverLock, Stream
from ._options import ConnectOptions

__all__ = ["AsyncioBackend"]

#: Bytes of frames gathered before they are written (and drained) at once.
_WRITE_BATCH = 64 * 1024


class _Stream(asyncio.BufferedProtocol):
    """A TCP (or TLS) connection, read into one buffer; frames written once per loop turn.

    Reading: the transport writes what arrives straight into a buffer of
    :data:`READ_SIZE` bytes made once, and ``receive`` takes all of it as one
    ``bytes`` - no stream reader, no buffer per read, one copy.  While the
    buffer is full (the client's reader is not taking: its consumer is behind)
    the transport stops reading, which is the back-pressure a full
    subscription buffer asks for.  While the reader waits in
    ``receive_or_take`` (see :class:`TakingStream`), the bytes go to its
    ``take`` in the transport's callback instead, with no task step.

    Writing: one ``write`` (one ``send`` system call) per frame is most of the
    cost of a producer sending small messages, and of a consumer acknowledging
    them.  So ``send`` (and ``write``, the same without a coroutine: see
    :class:`WritingStream`) keeps the bytes and writes them all either when the
    task lets the event loop run (a ``call_soon`` callback) or when
    :data:`_WRITE_BATCH` bytes have gathered - then it also waits while the
    transport's own buffer is above its high-water mark.  The order of the
    bytes is unchanged, and ``aclose`` writes what is left.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, *, over_ssl: bool) -> None:
        self._loop = loop
        self._over_ssl = over_ssl
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray(_READ_SIZE)
        self._view = memoryview(self._buffer)
        #: Bytes at the front of the buffer that ``receive`` has not taken yet.
        self._size = 0
        self._reading_paused = False
        #: The stream has ended (the peer's end of stream, or the connection is lost).
        self._ended = False
        #: Why the connection was lost, if not cleanly.
        self._error: BaseException | None = None
        self._lost = False
        #: What a ``receive`` (there is one reader) waits on.
        self._arrived: asyncio.Future[None] | None = None
        #: Who takes the bytes as they arrive, while ``receive_or_take`` waits.
        self._take: Callable[[memoryview], bool] | None = None
        #: ``take`` asked for the reader (returned False), or raised this.
        self._handed = False
        self._take_error: Exception | None = None
        self._writing_paused = False
        self._drained: list[asyncio.Future[None]] = []
        self._closed: asyncio.Future[None] = loop.create_future()
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._flush_handle: asyncio.Handle | None = None

    # -- the protocol (called by the transport) ----------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (uvloop's transports have the methods without being asyncio.Transport subclasses.)
        self._transport = cast(asyncio.Transport, transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._size == len(self._buffer):
            # A transport may hand over one more read after pause_reading():
            # the buffer grows rather than lose it.
            grown = bytearray(2 * len(self._buffer))
            grown[: self._size] = self._view
            self._buffer, self._view = grown, memoryview(grown)
        return self._view[self._size :]

    def buffer_updated(self, nbytes: int) -> None:
        take = self._take
        if take is not None:
            # (Set only while the buffer is empty: the bytes are at its start.)
            try:
                if take(self._view[:nbytes]):
                    return  # all taken: the buffer is empty again, the reader sleeps on
            except Exception as exc:  # raised by the reader, in its own task
                self._take_error = exc
            self._take = None
            self._handed = True
            self._wake()
            return
        self._size += nbytes
        if self._size == len(self._buffer) and not self._reading_paused:
            assert self._transport is not None
            self._reading_paused = True
            self._transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self._ended = True
        self._wake()
        # Kept open (not over TLS, which cannot half-close): a DISCONNECT may still go out.
        return not self._over_ssl

    def connection_lost(self, exc: BaseException | None) -> None:
        self._ended = self._lost = True
        self._error = exc
        self._wake()
        for waiter in self._drained:
            if not waiter.done():
                waiter.set_result(None)
        self._drained.clear()
        if not self._closed.done():
            self._closed.set_result(None)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        for waiter in self._drained:
            if not waiter.done():
                waiter.set_result(None)
        self._drained.clear()

    def _wake(self) -> None:
        arrived = self._arrived
        if arrived is not None and not arrived.done():
            arrived.set_result(None)

    # -- the Stream (called by the client) -----------------------------------------

    async def receive(self) -> bytes:
        await self._wait(None)
        return self._buffered()

    async def receive_or_take(self, take: Callable[[memoryview], bool]) -> bytes | None:
        await self._wait(take)
        if not self._handed:
            return self._buffered()
        self._handed = False
        error, self._take_error = self._take_error, None
        if error is not None:
            raise error
        return None

    async def _wait(self, take: Callable[[memoryview], bool] | None) -> None:
        """Until bytes are buffered, the stream ends, or ``take`` hands over
        (a hand-over that a cancelled wait missed counts: it is the next one's)."""
        if self._size or self._ended:
            return
        self._take = take
        try:
            while not ((self._handed and take is not None) or self._size or self._ended):
                arrived = self._arrived = self._loop.create_future()
                try:
                    await arrived
                finally:
                    self._arrived = None
        finally:
            self._take = None

    def _buffered(self) -> bytes:
        """The buffered bytes (b"" at the end of the stream), or why the connection was lost."""
        size = self._size
        if size:
            data = bytes(self._view[:size])
            self._size = 0
            if self._reading_paused and not self._lost:
                assert self._transport is not None
                self._reading_paused = False
                self._transport.resume_reading()
            return data
        if self._error is not None:
            raise self._error
        return b""

    async def send(self, data: bytes) -> None:
        wait = self.write(data)
        if wait is not None:
            await wait

    def write(self, data: bytes) -> Awaitable[None] | None:
        """See :class:`WritingStream`: the bytes wait for the flush, or go at once
        with those before them when a batch has gathered (then drain)."""
        self._pending.append(data)
        self._pending_size += len(data)
        transport = self._transport
        assert transport is not None
        if self._pending_size >= _WRITE_BATCH or transport.is_closing():
            self._flush()
            return self._drain()
        if self._flush_handle is None:
            self._flush_handle = self._loop.call_soon(self._flush)
        return None

    async def _drain(self) -> None:
        """Wait while the transport holds too much; once the connection is lost,
        raise why (as ``StreamWriter.drain`` does)."""
        self._check_lost()
        assert self._transport is not None
        if self._transport.is_closing():
            await asyncio.sleep(0)  # lets connection_lost() come, if it is on its way
        elif self._writing_paused:
            waiter = self._loop.create_future()
            self._drained.append(waiter)
            await waiter
        self._check_lost()

    def _check_lost(self) -> None:
        if self._error is not None:
            raise self._error
        if self._lost:
            raise ConnectionResetError("Connection lost")

    def _flush(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        if self._pending:
            data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
            self._pending.clear()
            self._pending_size = 0
            assert self._transport is not None
            self._transport.write(data)

    async def aclose(self) -> None:
        self._flush()
        assert self._transport is not None
        self._transport.close()
        # Shielded: cancelling one closer (the reader, say) must not cancel the
        # close waiter that every other closer of this stream shares.
        await asyncio.shield(self._closed)


class _Lock(HandOverLock):
    """The write lock (see :class:`HandOverLock`): waiters wait on futures."""

    __slots__ = ("_waiters",)

    def __init__(self) -> None:
        super().__init__()
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def _wait(self) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                await self.__aexit__()  # handed the lock, then cancelled: hand it on
            elif waiter in self._waiters:  # (a release may have dropped it already)
                self._waiters.remove(waiter)
            raise

    def _hand_over(self) -> bool:
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return True
        return False


class _Waiter:
    def __init__(self) -> None:
        self._future: asyncio.Future[Event] = asyncio.get_running_loop().create_future()

    def done(self) -> bool:
        return self._future.done()

    def set_result(self, value: Event) -> None:
        self._future.set_result(value)

    def set_exception(self, error: BaseException) -> None:
        self._future.set_exception(error)

    async def wait(self) -> Event:
        return await self._future


class _Queue:
    def __init__(self, size: int) -> None:
        self._queue: asyncio.Queue[Message | None] = asyncio.Queue(size)

    async def put(self, item: Message | None) -> None:
        await self._queue.put(item)

    def put_nowait(self, item: Message | None) -> bool:
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:
            return False
        return True

    async def get(self) -> Message | None:
        return await self._queue.get()

    def get_nowait(self) -> Message | None:
        try:
            return self._queue.get_nowait()
        except asyncio.QueueEmpty:
            return None

    def empty(self) -> bool:
        return self._queue.empty()


class _Task:
    def __init__(self, function: Callable[[], Awaitable[None]]) -> None:
        async def run() -> None:
            await function()

        self._task = asyncio.create_task(run())

    def cancel(self) -> None:
        if self._task is not asyncio.current_task():
            self._task.cancel()

    async def join(self) -> None:
        if self._task is not asyncio.current_task():
            await asyncio.gather(self._task, return_exceptions=True)


class AsyncioBackend:
    """asyncio's primitives for :class:`AsyncClient`."""

    #: (See Backend.) asyncio cancels a task only where it waits.
    cancel_point: Callable[[], Awaitable[None]] | None = None

    async def open_stream(self, options: ConnectOptions) -> Stream:
        loop = asyncio.get_running_loop()
        over_ssl = options.ssl is not None
        _, stream = await loop.create_connection(
            lambda: _Stream(loop, over_ssl=over_ssl), options.host, options.port, ssl=options.ssl
        )
        return stream

    def timeout(self, seconds: float | None) -> AbstractAsyncContextManager[object]:
        return asyncio.timeout(seconds)

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def waiter(self) -> _Waiter:
        return _Waiter()

    def queue(self, size: int) -> _Queue:
        return _Queue(size)

    def flag(self) -> asyncio.Event:
        return asyncio.Event()

    def lock(self) -> _Lock:
        return _Lock()

    def spawn(self, function: Callable[[], Awaitable[None]]) -> _Task:
        return _Task(function)
