"""The read side without Spark: offsets and acknowledgements (streaming), drains (batch).

:class:`StreamConsumer` is what Spark's ``SimpleDataSourceStreamReader`` calls
into.  Its rules, measured on pyspark 4.3 (``docs/spark.rst``):

* ``read(start)`` is called only once the batch ending at ``start`` is
  recorded durably in the checkpoint's commit log.  So ``read(start)`` first
  ACKs every message numbered up to ``start``, then hands out what is
  buffered.  ``commit(end)`` ACKs too, but Spark calls it late (only once a
  later batch has data) and never for the last batch of ``availableNow``, so
  it cannot be the only place.
* Offsets are ``{"offset": n}``: ``n`` counts the messages this query has
  handed out, across restarts.  Broker message ids are no offsets: a message
  that comes back after a crash gets a new number.
* A queue cannot be replayed, so ``readBetweenOffsets`` has nothing to give:
  messages of a batch that never committed were never acknowledged, and the
  broker redelivers them once the connection that held them is gone.  The
  guarantee is at-least-once; deduplicate on ``message_id``.
* A refused or lost connection is tried again with the bounded backoff of
  :mod:`.._retry` (``retryTimeout``); what the lost connection handed out
  and had not acknowledged, the broker delivers again.

:func:`drain` is the batch read of one partition: take until the destination
has been idle for ``idleTimeout`` or ``maxMessages`` arrived, then ACK.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from ..._client._errors import ConnectionLost
from ..._events import Message
from .._options import ConnectionSettings, ReaderSettings
from .._retry import Retry
from .._schema import message_batch
from ._link import Consumer

__all__ = ["OFFSET_KEY", "StreamConsumer", "drain"]

log = logging.getLogger("stomp_proto.spark")

OFFSET_KEY = "offset"


def offset_of(offset: dict[str, Any]) -> int:
    try:
        return int(offset[OFFSET_KEY])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"not an offset of the STOMP source: {offset!r}") from None


class StreamConsumer:
    """The streaming source's state: handed-out messages, their numbers, the ACKs owed.

    Picklable until it connects (it connects in its first ``read``); Spark
    builds it in one process and uses it in another.
    """

    def __init__(self, connection: ConnectionSettings, reader: ReaderSettings) -> None:
        self.connection = connection
        self.reader = reader
        #: Handed out and not yet acknowledged: (number, received_at µs, message), in order.
        self._handed: deque[tuple[int, int, Message]] = deque()
        #: The number of the last message handed out (None before the first read).
        self._last: int | None = None
        self._consumer: Consumer | None = None
        self._available_now = False
        self.acknowledged = 0
        #: Failed connections since messages last came (see :mod:`.._retry`).
        self._retry = Retry(connection, f"reading {reader.destination}", source="stomp")

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_consumer"] = None
        state["_handed"] = deque()
        return state

    # -- what Spark calls --------------------------------------------------------

    def initial_offset(self) -> dict[str, int]:
        return {OFFSET_KEY: 0}

    def read(self, start: dict[str, Any]) -> tuple[list[Any], dict[str, int]]:
        """ACK everything up to ``start``, then hand out what is buffered after it.

        Returns the record batches (at most one) and the end offset; the end
        equals ``start`` when nothing is buffered.
        """
        first = offset_of(start)
        self._acknowledge_through(first)
        if self._last is None or self._last < first:
            self._last = first
        consumer = self._connected()
        # Handed out after ``start`` but not yet in a durable batch: Spark asked
        # again from an earlier offset (not seen in practice), so give them again.
        again = [(received, message) for _, received, message in self._handed]
        room = self.reader.max_batch_size - len(again)
        fresh = consumer.take(room) if room > 0 else []
        if not fresh and not again and self._available_now:
            # Idle for idleTimeout ends an availableNow query; a lost connection must not.
            while not consumer.wait(self.reader.idle_timeout) and not consumer.alive:
                consumer = self._connected()
            fresh = consumer.take(room)
        if fresh:
            self._retry.succeeded()
        number = self._last
        for received_at, message in fresh:
            number += 1
            self._handed.append((number, received_at, message))
        self._last = number
        received = again + fresh
        if not received:
            # Idle: the query may be about to end, so make sure the ACKs are out.
            consumer.flush_acks(self.connection.timeout)
            return [], {OFFSET_KEY: first}
        return [message_batch(received)], {OFFSET_KEY: first + len(received)}

    def commit(self, end: dict[str, Any]) -> None:
        """Spark's commit: late and sometimes never (see the module docstring); ACK anyway."""
        self._acknowledge_through(offset_of(end))

    def prepare_available_now(self) -> None:
        """An ``availableNow`` query: a read finding nothing waits up to ``idleTimeout``.

        The query ends at the first read that finds nothing: once the
        destination has been idle that long.
        """
        self._available_now = True

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        self._handed.clear()

    # -- inside ------------------------------------------------------------------

    def _connected(self) -> Consumer:
        """The live subscription: a lost one is replaced, after a logged wait (or raises,
        past ``retryTimeout`` or for an error that a new connection cannot mend)."""
        consumer = self._consumer
        if consumer is not None and not consumer.alive:
            # What this connection handed out can no longer be acknowledged; the
            # broker redelivers it on the next connection (as duplicates, if a
            # batch containing it commits meanwhile).
            self._handed.clear()
            self._consumer = None
            consumer = self._consumer = _resubscribe(consumer, self._retry, self._subscribe)
        elif consumer is None:
            consumer = self._consumer = self._retry.call(self._subscribe)
        return consumer

    def _subscribe(self) -> Consumer:
        return Consumer(self.connection, self.reader, max_buffer=2 * self.reader.max_batch_size)

    def _acknowledge_through(self, last: int) -> None:
        handed = self._handed
        done: list[Message] = []
        while handed and handed[0][0] <= last:
            done.append(handed.popleft()[2])
        if not done:
            return
        self.acknowledged += len(done)
        if self.reader.ack == "auto" or self._consumer is None:
            return
        self._consumer.acknowledge(done, cumulative=self.reader.ack == "client")


def _resubscribe(lost: Consumer, retry: Retry, subscribe: Callable[[], Consumer]) -> Consumer:
    """A new subscription in place of ``lost``, after the retry's logged wait (or its error)."""
    error = lost.error or ConnectionLost("the subscription ended")
    lost.close()
    retry.failed(error)
    return retry.call(subscribe)


def drain(
    connection: ConnectionSettings, reader: ReaderSettings, limit: int | None
) -> Iterator[Any]:
    """One partition of a batch read: record batches until idle or ``limit`` messages.

    The messages are acknowledged after Spark has taken every batch (when the
    iterator is exhausted); if the task fails first, none are, and the broker
    redelivers them all.  A lost connection is replaced (see :mod:`.._retry`):
    what it had taken comes again, by redelivery, and is read twice.
    """
    retry = Retry(connection, f"reading {reader.destination}", source="stomp")

    def subscribe() -> Consumer:
        return Consumer(connection, reader, max_buffer=2 * reader.max_batch_size)

    consumer = retry.call(subscribe)
    taken: list[Message] = []  # on this connection, to acknowledge at the end
    count = 0
    finished = False
    try:
        while limit is None or count < limit:
            room = reader.max_batch_size if limit is None else limit - count
            received = consumer.take(min(room, reader.max_batch_size))
            if not received:
                if consumer.wait(reader.idle_timeout):
                    continue
                if consumer.alive:
                    break  # idle for idleTimeout: drained
                consumer = _resubscribe(consumer, retry, subscribe)
                taken = []
                continue
            retry.succeeded()
            taken.extend(m for _, m in received)
            count += len(received)
            yield message_batch(received)
        finished = True
    finally:
        if finished and reader.ack != "auto":
            consumer.acknowledge(taken, cumulative=reader.ack == "client")
        consumer.close()
