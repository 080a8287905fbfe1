"""trio's primitives for the async client: streams, events, memory channels, tasks, deadlines."""

from __future__ import annotations

import os
import socket as _socket
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, suppress
from types import TracebackType

import trio

from .._events import Event, Message
from ._backend import READ_SIZE as _READ_SIZE
from ._backend import HandOverLock, Stream
from ._options import ConnectOptions

__all__ = ["TrioBackend"]


#: Bytes of frames gathered before they are written at once.
_WRITE_BATCH = 64 * 1024

#: The socket option that trio's SocketStream sets to 16 KiB, and _TrioStream
#: sets back to 0, the system's default (None where it does not exist).
_NOTSENT_LOWAT: int | None = getattr(_socket, "TCP_NOTSENT_LOWAT", None)

#: Whether a socket's descriptor can be read and written directly (not on Windows).
_RAW_FD = hasattr(os, "readv")


class _Lock(HandOverLock):
    """The write locks (see :class:`HandOverLock`): waiters park.

    Cancelled while parked, a waiter is not handed the lock; unparked, it holds it.
    """

    __slots__ = ("_waiters",)

    def __init__(self) -> None:
        super().__init__()
        self._waiters = trio.lowlevel.ParkingLot()

    async def _wait(self) -> None:
        await self._waiters.park()

    def _hand_over(self) -> bool:
        if not self._waiters:
            return False
        self._waiters.unpark()
        return True


class _TrioStream:
    """A trio stream; frames are gathered and written together, by one task.

    ``send_all`` per frame costs two passes of trio's scheduler, most of the
    cost of sending a small message.  So ``send`` keeps the bytes, and a
    writer task (started in the client's nursery when the first bytes wait)
    writes all that has gathered once the sender lets other tasks run, again
    and again while more comes.  A sender that leaves :data:`_WRITE_BATCH`
    bytes or more waiting waits until the writer has written them
    (back-pressure), and hears if that failed.

    Only the writer task writes, so a sender cancelled while it waits never
    cuts a frame short (a ``send_all`` cancelled part way leaves a partial
    frame on the wire): the bytes it gave go out whole, as asyncio's
    transport writes them.  ``send`` takes the bytes before anything can
    cancel it: the client's cancellation point is before it makes the frame
    (see ``Backend.cancel_point``).  A failed write fails every later ``send``.

    A sender that has gathered a batch writes it itself, when no write is
    under way, as far as the socket takes it without waiting (a write that
    cannot be cut short by a cancel): the writer task and the wait for it
    cost three passes of the scheduler per batch.  The writer task takes
    what the socket did not.
    """

    def __init__(self, stream: trio.abc.Stream, nursery: trio.Nursery) -> None:
        self._stream = stream
        self._nursery = nursery
        self._pending: list[bytes] = []
        self._pending_size = 0
        #: Whether a writer task runs (or the closer writes): nobody else may.
        self._writing = False
        #: Whether it has taken bytes and writes them now: a sender may not.
        self._in_flight = False
        #: Bytes ever given to send(), and of those, written.
        self._given = 0
        self._written = 0
        #: Senders waiting for their bytes to be written.
        self._full = trio.lowlevel.ParkingLot()
        self._error: OSError | None = None
        # A TCP stream is read into one buffer kept for the stream's life, as
        # the other clients read: receive_some(n) allocates n bytes per read.
        socket = stream.socket if isinstance(stream, trio.SocketStream) else None
        self._socket = socket
        self._view = memoryview(bytearray(_READ_SIZE if socket is not None else 0))
        #: The socket's descriptor, read directly where the system allows (see receive).
        self._fd = socket.fileno() if socket is not None and _RAW_FD else -1
        if socket is not None and _NOTSENT_LOWAT is not None:
            # trio keeps at most 16 KiB unsent in the kernel, so that a task's
            # send_all feels back-pressure soon.  This stream gathers frames
            # itself: with that limit, a producer of 4 KiB messages found the
            # socket full about once per 40 messages, and each wait for room
            # cost a pass of the scheduler and two more system calls (against
            # a slow reader its CPU per message was 1.2-1.6x asyncio's; with
            # the system's default, as asyncio and the threads client have,
            # the same as asyncio's).
            with suppress(OSError):
                socket.setsockopt(_socket.IPPROTO_TCP, _NOTSENT_LOWAT, 0)
        #: Whether the last read took bytes without waiting for them.
        self._ran_on = False

    async def receive(self) -> bytes:
        try:
            if self._fd >= 0:
                return bytes(self._view[: await self._read_fd()])
            socket = self._socket
            if socket is not None:
                view = self._view
                return bytes(view[: await socket.recv_into(view)])
            return bytes(await self._stream.receive_some(_READ_SIZE))
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise OSError(str(exc) or "connection closed") from exc

    async def receive_or_take(self, take: Callable[[memoryview], bool]) -> bytes | None:
        """See :class:`TakingStream`: here ``take`` runs in the reader's task, but
        on the read buffer itself (no copy), and reads go on while it takes."""
        if self._fd < 0:
            return await self.receive()
        view = self._view
        try:
            while received := await self._read_fd():
                if not take(view[:received]):
                    return None
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise OSError(str(exc) or "connection closed") from exc
        return b""

    async def _read_fd(self) -> int:
        """Read the socket into the buffer, with one pass of the scheduler per
        read; the number of bytes read.

        ``recv_into`` of a trio socket that finds bytes waiting yields to the
        scheduler after taking them, and one that finds none waits and then
        yields again: two passes per read, the most of what a read costs.
        Here a read that waits yields once (the wait), and one that finds
        bytes yields only if the read before it did not wait either, so that
        a flood of bytes still lets the other tasks run (and cancels in).
        """
        view = self._view
        if self._ran_on:
            await trio.lowlevel.checkpoint()
        try:
            received = os.readv(self._fd, (view,))
            self._ran_on = True
        except BlockingIOError:
            self._ran_on = False
            while True:
                await trio.lowlevel.wait_readable(self._fd)
                try:
                    received = os.readv(self._fd, (view,))
                    break
                except BlockingIOError:  # woken, and another reader was first
                    continue
        return received

    async def send(self, data: bytes) -> None:
        if (wait := self.write(data)) is not None:
            await wait

    def write(self, data: bytes) -> Awaitable[None] | None:
        """See :class:`WritingStream`: ``data`` is taken whatever comes after.

        No cancel point before the bytes are taken: the caller has made its
        frame, and its connection counts it as sent (an ACK settled, a
        receipt awaited).  The client's cancel point comes before that
        (``Backend.cancel_point``).  What the caller awaits waits until the
        writer has written a batch gathered, and raises what failed.
        """
        if self._error is not None:
            return self._wait_written()
        self._pending.append(data)
        self._pending_size += len(data)
        self._given += len(data)
        if self._pending_size >= _WRITE_BATCH and self._fd >= 0 and not self._in_flight:
            self._write_at_once()
        if self._pending and not self._writing and self._error is None:
            self._writing = True
            self._nursery.start_soon(self._write_task)
        if self._pending_size >= _WRITE_BATCH or self._error is not None:
            return self._wait_written()
        return None

    async def _wait_written(self) -> None:
        given = self._given
        while self._written < given and self._error is None:
            await self._full.park()
        if self._error is not None:
            raise self._error

    def _write_at_once(self) -> None:
        """Write the pending bytes, as many as the socket takes now; the rest stay pending."""
        pending = self._pending
        data = pending[0] if len(pending) == 1 else b"".join(pending)
        try:
            sent = os.write(self._fd, data)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            self._error = exc
            self._full.unpark_all()
            return
        self._written += sent
        pending.clear()
        if sent < len(data):
            pending.append(data[sent:])
        self._pending_size = len(data) - sent

    async def _write_task(self) -> None:
        try:
            while self._error is None:
                if not self._pending:
                    # Once more round the scheduler before ending: a sender that
                    # has just been let go is often about to give the next bytes,
                    # and a task started per write costs more than that pass.
                    await trio.lowlevel.checkpoint()
                    if not self._pending:
                        break
                await self._write_pending()
        finally:
            self._writing = False
            self._full.unpark_all()

    async def _write_pending(self) -> None:
        data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending.clear()
        self._pending_size = 0
        self._in_flight = True
        try:
            if self._fd >= 0:
                await self._write_fd(data)
            else:
                await self._stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self._error = OSError(str(exc) or "connection closed")
        except OSError as exc:  # (from the descriptor: a reset, a broken pipe)
            self._error = exc
        except BaseException:
            # Cancelled part way (the client's nursery is ending): what is on
            # the wire may end inside a frame, so nothing more can be sent.
            self._error = OSError("a write was cancelled part way")
            raise
        else:
            self._written += len(data)
        finally:
            self._in_flight = False
            self._full.unpark_all()

    async def _write_fd(self, data: bytes) -> None:
        """``data`` written to the socket's descriptor, waiting only while it is full.

        ``send_all`` passes trio's scheduler two or three times per write even
        when the socket takes every byte at once; here a write that the socket
        takes passes it not at all (the writer task passes it once per round).
        """
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self._fd, view) :]
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self._fd)

    async def aclose(self) -> None:
        try:
            # A write in progress may never end (say, a TLS handshake the peer
            # dropped): closing the stream is what ends it, so do not wait for it.
            if not self._writing and self._pending and self._error is None:
                self._writing = True
                await self._write_pending()
        finally:
            # The descriptor's number may be reused once it is closed: no
            # direct read or write of it after this.
            self._fd = -1
            await self._stream.aclose()


class _Waiter:
    def __init__(self) -> None:
        self._event = trio.Event()
        self._value: Event | None = None
        self._error: BaseException | None = None

    def done(self) -> bool:
        return self._event.is_set()

    def set_result(self, value: Event) -> None:
        self._value = value
        self._event.set()

    def set_exception(self, error: BaseException) -> None:
        self._error = error
        self._event.set()

    async def wait(self) -> Event:
        await self._event.wait()
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value


class _Queue:
    def __init__(self, size: int) -> None:
        self._send, self._receive = trio.open_memory_channel[Message | None](size)

    async def put(self, item: Message | None) -> None:
        await self._send.send(item)

    def put_nowait(self, item: Message | None) -> bool:
        try:
            self._send.send_nowait(item)
        except trio.WouldBlock:
            return False
        return True

    async def get(self) -> Message | None:
        return await self._receive.receive()

    def get_nowait(self) -> Message | None:
        try:
            return self._receive.receive_nowait()
        except trio.WouldBlock:
            return None

    def empty(self) -> bool:
        return self._send.statistics().current_buffer_used == 0


class _Flag:
    """A trio.Event that can be cleared (by replacing it)."""

    def __init__(self) -> None:
        self._event = trio.Event()

    def is_set(self) -> bool:
        return self._event.is_set()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        if self._event.is_set():
            self._event = trio.Event()

    async def wait(self) -> None:
        await self._event.wait()


class _Task:
    def __init__(self, nursery: trio.Nursery, function: Callable[[], Awaitable[None]]) -> None:
        self._scope = trio.CancelScope()
        self._done = trio.Event()

        async def run() -> None:
            try:
                with self._scope:
                    await function()
            finally:
                self._done.set()

        nursery.start_soon(run)

    def cancel(self) -> None:
        self._scope.cancel()

    async def join(self) -> None:
        with trio.CancelScope(shield=True):
            await self._done.wait()


class _FailAfter:
    """``async with``: TimeoutError once ``seconds`` have passed (None: never).

    trio says TooSlowError; the client (and asyncio) say TimeoutError.  A cancel
    scope of its own rather than ``trio.fail_after`` in a generator-based
    context manager (two generators, and a scope even for no limit): the reader
    enters one per read, and a consumer one per wait.
    """

    __slots__ = ("_scope", "_seconds")

    def __init__(self, seconds: float | None) -> None:
        if seconds is not None and not seconds >= 0:
            raise ValueError(f"timeout must be non-negative, not {seconds!r}")
        self._seconds = seconds
        self._scope: trio.CancelScope | None = None

    async def __aenter__(self) -> None:
        if self._seconds is not None:
            # The deadline counts from entering, as trio.fail_after's does.
            self._scope = trio.CancelScope(deadline=trio.current_time() + self._seconds)
            self._scope.__enter__()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        scope = self._scope
        if scope is None:
            return False
        self._scope = None
        swallowed = scope.__exit__(kind, error, traceback)
        if scope.cancelled_caught:
            raise TimeoutError from None
        return swallowed


class TrioBackend:
    """trio's primitives for :class:`AsyncClient`; tasks run in ``nursery``."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        #: (See Backend.) A cancelled scope raises here; it passes the
        #: scheduler only then.
        self.cancel_point: Callable[[], Awaitable[None]] | None = (
            trio.lowlevel.checkpoint_if_cancelled
        )

    async def open_stream(self, options: ConnectOptions) -> Stream:
        stream: trio.abc.Stream
        if options.ssl is not None:
            stream = await trio.open_ssl_over_tcp_stream(
                options.host, options.port, ssl_context=options.ssl
            )
        else:
            stream = await trio.open_tcp_stream(options.host, options.port)
        return _TrioStream(stream, self._nursery)

    def timeout(self, seconds: float | None) -> AbstractAsyncContextManager[object]:
        return _FailAfter(seconds)

    def now(self) -> float:
        return trio.current_time()

    async def sleep(self, seconds: float) -> None:
        await trio.sleep(seconds)

    def waiter(self) -> _Waiter:
        return _Waiter()

    def queue(self, size: int) -> _Queue:
        return _Queue(size)

    def flag(self) -> _Flag:
        return _Flag()

    def lock(self) -> _Lock:
        return _Lock()

    def spawn(self, function: Callable[[], Awaitable[None]]) -> _Task:
        return _Task(self._nursery, function)
