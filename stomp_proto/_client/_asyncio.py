"""asyncio's primitives for the async client: streams, futures, queues, tasks, timeouts."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager

from .._events import Event, Message
from ._backend import READ_SIZE as _READ_SIZE
from ._backend import Stream
from ._options import ConnectOptions

__all__ = ["AsyncioBackend"]

#: Bytes of frames gathered before they are written (and drained) at once.
_WRITE_BATCH = 64 * 1024


class _StreamPair:
    """asyncio's streams; small frames are gathered and written once per loop turn.

    One ``write`` (one ``send`` system call) per frame is most of the cost of a
    producer sending small messages, and of a consumer acknowledging them.  So
    ``send`` keeps the bytes and writes them all either when the task lets the
    event loop run (a ``call_soon`` callback) or when :data:`_WRITE_BATCH` bytes
    have gathered - then it also drains, which is where back-pressure waits.
    The order of the bytes is unchanged, and ``aclose`` writes what is left.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._flush_handle: asyncio.Handle | None = None

    async def receive(self) -> bytes:
        return await self._reader.read(_READ_SIZE)

    async def send(self, data: bytes) -> None:
        self._pending.append(data)
        self._pending_size += len(data)
        if self._pending_size >= _WRITE_BATCH or self._writer.transport.is_closing():
            # A closing transport: drain() reports the lost connection to the caller.
            self._flush()
            await self._writer.drain()
        elif self._flush_handle is None:
            self._flush_handle = asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        if self._pending:
            data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
            self._pending.clear()
            self._pending_size = 0
            self._writer.write(data)

    async def aclose(self) -> None:
        self._flush()
        self._writer.close()
        # Shielded: cancelling one closer (the reader, say) must not cancel the
        # close waiter that every other closer of this stream shares.
        await asyncio.shield(self._writer.wait_closed())


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

    async def open_stream(self, options: ConnectOptions) -> Stream:
        reader, writer = await asyncio.open_connection(
            options.host, options.port, ssl=options.ssl, limit=_READ_SIZE
        )
        return _StreamPair(reader, writer)

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

    def lock(self) -> asyncio.Lock:
        return asyncio.Lock()

    def spawn(self, function: Callable[[], Awaitable[None]]) -> _Task:
        return _Task(function)
