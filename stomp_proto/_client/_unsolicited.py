"""``client.unsolicited``: the messages no subscription of the client's takes.

A broker may deliver messages for a subscription the client never made:
RabbitMQ delivers the replies to a ``/temp-queue/`` destination that way,
and a program may make a subscription by another route.  They are kept here,
in arrival order, up to ``max_pending_messages``: past that the oldest is
dropped and counted (:attr:`UnsolicitedBase.dropped`), so that nothing goes
missing without a trace.  Replies to ``client.request()`` never come here:
they go to their request.

This is the part every client shares; ``get()`` - awaitable in the async
clients, blocking in the threads client - is each client's own.
"""

from __future__ import annotations

from collections import deque

from .._events import Message

__all__ = ["UnsolicitedBase"]


class UnsolicitedBase:
    """The bounded buffer, and the count of what it dropped."""

    __slots__ = ("_ended", "_limit", "_messages", "dropped")

    def __init__(self, limit: int) -> None:
        self._messages: deque[Message] = deque()
        self._limit = limit
        self._ended = False
        #: Messages dropped to make room, oldest first, since the client was made.
        self.dropped = 0

    @property
    def limit(self) -> int:
        """How many it holds at most (the client's ``max_pending_messages``)."""
        return self._limit

    def __len__(self) -> int:
        return len(self._messages)

    def __bool__(self) -> bool:
        return bool(self._messages)

    def empty(self) -> bool:
        """Whether it holds no message."""
        return not self._messages

    def get_nowait(self) -> Message | None:
        """The oldest message, taken; ``None`` when there is none."""
        return self._messages.popleft() if self._messages else None

    def popleft(self) -> Message:
        """The oldest message, taken; IndexError when there is none (as a deque's)."""
        return self._messages.popleft()

    def _put(self, message: Message) -> None:
        """Keep ``message`` (the reader); the oldest is dropped when it is full."""
        if len(self._messages) >= self._limit:
            self._messages.popleft()
            self.dropped += 1
        self._messages.append(message)
        self._wake()

    def _end(self) -> None:
        """The client is over: waits for a message end (with what is kept still there)."""
        self._ended = True
        self._wake()

    def _wake(self) -> None:
        """Wake whoever waits in ``get()`` (each client's own)."""
        raise NotImplementedError
