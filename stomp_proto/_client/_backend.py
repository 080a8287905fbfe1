"""What a client needs from its I/O, and nothing else: the neutral interfaces.

:class:`Backend` and :class:`Stream` are what the async client
(``_client._async``) is written against; ``_client._asyncio`` and
``_client._trio`` implement them, and the WebSocket stream wraps a
:class:`Stream` in another.  :class:`BlockingStream` is the same idea for the
threads client.  Nothing here imports a client, so every layer can depend on
these without depending on each other.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

from .._events import Event, Message

if TYPE_CHECKING:
    from ._options import ConnectOptions

__all__ = [
    "Backend",
    "BlockingStream",
    "Flag",
    "HandOverLock",
    "Queue",
    "Stream",
    "TakingStream",
    "Task",
    "Waiter",
    "WritingStream",
]

#: Bytes one read asks for, in every client.
READ_SIZE = 256 * 1024

T = TypeVar("T")


class Stream(Protocol):
    async def receive(self) -> bytes:
        """Some bytes; b"" at end of stream."""

    async def send(self, data: bytes) -> None:
        """Write ``data``.  The stream takes the bytes when called, before any wait:
        a caller cancelled in ``send`` has still given them, and callers' bytes
        go in the order of their calls, whole, without a lock."""

    async def aclose(self) -> None: ...


@runtime_checkable
class TakingStream(Stream, Protocol):
    """A stream whose bytes can be taken where they are read.

    ``receive`` returns each read to the reader: a copy of the bytes, and on
    asyncio a task step on top of the transport's callback.  With
    ``receive_or_take`` the bytes go to ``take`` as they are read (asyncio: in
    the transport's callback; trio: in the reader's task, from the read
    buffer), and the reader goes on only when ``take`` asks.
    """

    async def receive_or_take(self, take: Callable[[memoryview], bool]) -> bytes | None:
        """As :meth:`receive`, but bytes that arrive while it waits go to
        ``take(view)`` (the view is valid during the call only): ``take``
        consumes them all and returns True to go on waiting.  Returns None
        once ``take`` has returned False, and raises what ``take`` raised."""


@runtime_checkable
class WritingStream(Stream, Protocol):
    """A stream that takes bytes to write without a coroutine.

    ``send`` is a coroutine, and one per frame costs about as much as the rest
    of writing a small one; a writer that has nothing to wait for (the stream
    gathers frames and writes them later, at once) calls ``write``.
    """

    def write(self, data: bytes) -> Awaitable[None] | None:
        """Take ``data``, in order with every other write: None when it is taken
        and nothing need be awaited; else what the caller awaits before it
        writes again (the stream holds too much; it raises what failed)."""


class Waiter(Protocol[T]):
    def done(self) -> bool: ...
    def set_result(self, value: T) -> None: ...
    def set_exception(self, error: BaseException) -> None: ...
    async def wait(self) -> T: ...


class Queue(Protocol[T]):
    async def put(self, item: T) -> None: ...
    def put_nowait(self, item: T) -> bool:
        """False when full."""

    async def get(self) -> T: ...
    def get_nowait(self) -> T | None: ...
    def empty(self) -> bool: ...


class Flag(Protocol):
    def is_set(self) -> bool: ...
    def set(self) -> None: ...
    def clear(self) -> None: ...
    async def wait(self) -> object: ...


class Task(Protocol):
    def cancel(self) -> None: ...
    async def join(self) -> None: ...


class HandOverLock:
    """A lock for tasks of one event loop, cheap when free, fair when held.

    The client takes its write lock once per frame, and the locks of asyncio
    and trio cost as much as writing a small frame (a coroutine more; trio's
    scheduling pass and owner bookkeeping).  A free lock is taken at once.
    A held one is waited for in order: each release hands it straight to the
    oldest waiter (it stays held), so none can be passed over.  A backend
    says how to wait and how to wake.
    """

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held = False

    def locked(self) -> bool:
        return self._held

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()

    def take(self) -> bool:
        """Take the lock if it is free (True), without a coroutine: a writer's
        fast path is ``if not lock.take(): await lock.acquire()``, then ``release()``."""
        if self._held:
            return False
        self._held = True
        return True

    async def acquire(self) -> None:
        if not self.take():
            await self._wait()

    def release(self) -> None:
        if not self._hand_over():
            self._held = False

    async def _wait(self) -> None:
        """Until a release hands the lock over (cancelled: not taken, or passed on)."""
        raise NotImplementedError

    def _hand_over(self) -> bool:
        """Wake the oldest waiter, now the holder; False when nobody waits."""
        raise NotImplementedError


class Backend(Protocol):
    async def open_stream(self, options: ConnectOptions) -> Stream: ...
    def timeout(self, seconds: float | None) -> AbstractAsyncContextManager[object]:
        """Raise TimeoutError when the block takes longer than ``seconds``."""

    def now(self) -> float: ...
    async def sleep(self, seconds: float) -> None: ...

    #: Raises the caller's cancellation now, if it has one waiting (trio's
    #: scopes): a writer awaits it before it makes a frame, so that a frame made
    #: is a frame written.  None where cancellation only comes at a wait
    #: (asyncio): a writer then has nothing to await.
    cancel_point: Callable[[], Awaitable[None]] | None

    def waiter(self) -> Waiter[Event]: ...
    def queue(self, size: int) -> Queue[Message | None]: ...
    def flag(self) -> Flag: ...
    def lock(self) -> HandOverLock: ...
    def spawn(self, function: Callable[[], Awaitable[None]]) -> Task: ...


class BlockingStream(Protocol):
    def wait_readable(self, timeout: float | None) -> bool:
        """Whether ``receive()`` has work within ``timeout`` seconds (None: wait)."""

    def receive(self) -> bytes | None:
        """Some bytes (possibly none yet); ``None`` at the end of the stream."""

    def send(self, data: bytes) -> None: ...

    def fileno(self) -> int:
        """The descriptor an event loop can watch for what :meth:`receive` reads;
        -1 when there is no single one."""

    def shutdown(self) -> None:
        """Wake a reader blocked on this stream (it then sees the end); any thread."""

    def close(self) -> None: ...
