"""The threads client's outbox: acknowledgements held back to be written together.

Only the threads client holds acknowledgements back (the async clients write
each at once), so the outbox and the rules for using it live here, beside it.
"""

from __future__ import annotations

from .._events import Subscribe

__all__ = ["OUTBOX_DELAY", "OUTBOX_FRAMES", "Outbox", "may_hold", "wide_window"]


#: Most acknowledgements an :class:`Outbox` holds back; the next one writes them all.
OUTBOX_FRAMES = 64
#: Seconds an acknowledgement may be held back at most.
OUTBOX_DELAY = 0.02


class Outbox:
    """ACK and NACK frames held back to be written together.

    A consumer that acknowledges every message writes one small frame per
    message; on a fast stream each of those is a system call for the client
    and a wake-up for the broker, which then costs more than the message.  So
    an acknowledgement without a receipt is held back while the consumer has
    more messages of the same subscription buffered (it is about to ask for
    the next one) or the subscription has a :func:`wide_window`, up to
    :data:`OUTBOX_FRAMES` frames.  The adapter writes
    what is held in front of the next frame it writes for any reason, when a
    consumer finds its buffer empty, and at the latest :data:`OUTBOX_DELAY`
    seconds after the first was held.  The books of the connection are
    already up to date: only the bytes wait.  Held bytes belong to one
    connection; a new connection starts with an empty outbox.
    """

    __slots__ = ("_data", "_frames", "since")

    def __init__(self) -> None:
        self._data = bytearray()
        self._frames = 0
        #: When the first frame held now was held (the adapter's clock), or None.
        self.since: float | None = None

    def __bool__(self) -> bool:
        return self._frames > 0

    def hold(self, data: bytes, now: float) -> bool:
        """Hold ``data``; True when the outbox is full and must be written now."""
        if not self._frames:
            self.since = now
        self._data += data
        self._frames += 1
        return self._frames >= OUTBOX_FRAMES

    def take(self, then: bytes = b"") -> bytes:
        """Everything held, followed by ``then``; the outbox is empty after."""
        if not self._frames:
            return then
        data = b"".join((self._data, then))  # one copy of each
        self.clear()
        return data

    def clear(self) -> None:
        self._data.clear()
        self._frames = 0
        self.since = None

    def deadline(self) -> float | None:
        """When what is held must be written at the latest; None if nothing is."""
        return None if self.since is None else self.since + OUTBOX_DELAY


#: Headers by which brokers let a subscription set how many unacknowledged
#: messages they send ahead: RabbitMQ's (and the embedded broker's), ActiveMQ's.
_WINDOW_HEADERS = ("prefetch-count", "activemq.prefetchSize")


def wide_window(subscribe: Subscribe) -> bool:
    """Whether ``subscribe`` asks the broker to send at least ``2 * OUTBOX_FRAMES``
    messages ahead of their acknowledgements.

    Then holding acknowledgements back while the consumer waits for the next
    message cannot stall the stream: the broker has room to send more.  With a
    narrow window (``prefetch-count: 1`` is common for work queues) or none
    declared, the consumer writes what is held before it waits.
    """
    for name, value in subscribe.headers:
        if name in _WINDOW_HEADERS:
            return value.isdigit() and int(value) >= 2 * OUTBOX_FRAMES
    return False


def may_hold(receipt: str | None, buffered: int, wide: bool) -> bool:
    """Whether an ACK or NACK may wait in the :class:`Outbox`.

    Not with a receipt: the caller waits for its answer.  Otherwise while
    the consumer has ``buffered`` messages of the subscription yet to take,
    or always on a subscription with a :func:`wide_window` (``wide``).
    """
    return receipt is None and (buffered > 0 or wide)
