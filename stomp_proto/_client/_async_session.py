"""One connection attempt of the async client, and what its subscriptions must offer.

A module of its own because the client, its reader and its writer each hold
a :class:`Session`: the client makes one per attempt and ends it, the reader
reads it, the writer writes to the current one.  Putting it below all three
keeps their imports one way.  :class:`Inbox` is what the reader needs of a
subscription (a buffer it delivers to), so that the reader need not import
the client's subscription class.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Protocol

from .._connection import ClientConnection
from .._events import Event, Message
from ._backend import Stream, Task, Waiter
from ._errors import ClientError
from ._registry import Handle

__all__ = ["Inbox", "Session"]


class Inbox(Handle, Protocol):
    """What the reader needs of a subscription: a bounded buffer to deliver to."""

    #: Whether the subscription has ended (a message for it is then dropped).
    _ended: bool

    def _put_nowait(self, message: Message) -> bool:
        """Buffer ``message``; False when the buffer is full."""

    async def _wait_for_room(self) -> None:
        """Until the full buffer has room or the subscription ends."""


class Session:
    """One connection attempt and, once CONNECTED, the session on it.

    Each attempt owns its stream, its reader task and its connect waiter, so
    that an attempt that fails or times out can be ended whole (its reader
    cancelled, its stream closed), and a reader can never touch another
    attempt's session.
    """

    __slots__ = (
        "conn",
        "connected",
        "current",
        "error",
        "handed",
        "held",
        "paused",
        "reader",
        "stream",
        "write",
    )

    def __init__(self, conn: ClientConnection, connected: Waiter[Event]) -> None:
        self.conn = conn
        #: Resolved by this session's reader with CONNECTED, or failed with why it ended.
        self.connected = connected
        self.stream: Stream | None = None
        #: Its stream's ``write``, when it is a :class:`WritingStream` (see AsyncWriter.write).
        self.write: Callable[[bytes], Awaitable[None] | None] | None = None
        self.reader: Task | None = None
        #: Whether this is the client's session (its CONNECTED came and was taken).
        self.current = False
        #: Why its reader ended, once it has.
        self.error: ClientError | None = None
        #: Whether its reader waits for room in a full subscription buffer.
        self.paused = False
        #: The message read that waits for that room, and its subscription.
        self.held: tuple[Inbox, Message] | None = None
        #: An event read in the stream's callback, for the reader to act on.
        self.handed: Event | None = None

    async def abandon(self) -> None:
        """End this attempt: cancel its reader, close its stream."""
        if self.reader is not None:
            self.reader.cancel()
            await self.reader.join()
        if self.stream is not None:
            with suppress(Exception):
                await self.stream.aclose()
