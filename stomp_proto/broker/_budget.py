"""The broker's memory budget: the bytes of messages it holds, and the alarm that slows publishers.

Every message the broker keeps - waiting in a queue, delivered and not yet
acknowledged, or buffered in an open transaction - is charged to one
:class:`MemoryBudget` at :func:`message_size` bytes, and given back when the
broker is done with it.  A copy of a topic message counts once for each
subscription holding it.

The budget is a hard limit: a SEND that would take it past ``limit`` is
refused.  Well before that, the *alarm* goes up at the high watermark
(:data:`HIGH_WATERMARK` of the limit): while it is up the transports stop
reading from the connections that publish, as RabbitMQ's memory alarm blocks
publishers, and consumers go on receiving and acknowledging - which is what
brings the level down.  The alarm goes down at the low watermark
(:data:`LOW_WATERMARK`); in between, the alarm keeps the state it had, so that
publishers are not let in and stopped again on every acknowledgement.
"""

from __future__ import annotations

from .._events import Send

__all__ = ["HIGH_WATERMARK", "LOW_WATERMARK", "MESSAGE_OVERHEAD", "MemoryBudget", "message_size"]

#: Bytes charged to each message beside its body and headers: the Python objects
#: that hold it (the event, its header tuples, the broker's record of it).
MESSAGE_OVERHEAD = 512
#: Share of the limit at which the alarm goes up.
HIGH_WATERMARK = 0.8
#: Share of the limit at which it goes down again.
LOW_WATERMARK = 0.6


def message_size(send: Send) -> int:
    """The bytes a message is charged: body, destination, headers and a fixed overhead."""
    headers = sum(len(name) + len(value) for name, value in send.headers)
    return MESSAGE_OVERHEAD + len(send.body) + len(send.destination) + headers


class MemoryBudget:
    """The bytes of messages held against ``limit``, with the publishers' alarm."""

    __slots__ = ("_alarm", "_high", "_low", "limit", "used")

    def __init__(self, limit: int) -> None:
        #: The most bytes of messages the broker holds.
        self.limit = limit
        #: The bytes of messages held now.
        self.used = 0
        self._high = int(limit * HIGH_WATERMARK)
        self._low = int(limit * LOW_WATERMARK)
        self._alarm = False

    def __repr__(self) -> str:
        return f"<MemoryBudget {self.used}/{self.limit}{' alarm' if self._alarm else ''}>"

    @property
    def alarm(self) -> bool:
        """True from the high watermark until the level is back at the low one."""
        return self._alarm

    def fits(self, size: int) -> bool:
        """Whether ``size`` more bytes stay within the limit."""
        return self.used + size <= self.limit

    def take(self, size: int) -> None:
        self.used += size
        if self.used >= self._high:
            self._alarm = True

    def give(self, size: int) -> None:
        self.used -= size
        if self.used <= self._low:
            self._alarm = False
