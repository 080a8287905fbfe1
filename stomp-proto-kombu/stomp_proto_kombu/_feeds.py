"""The STOMP side of one Kombu connection: its subscriptions and a buffer per queue.

STOMP pushes and Kombu's virtual channel pulls, so every message the broker
pushes lands in the buffer of the Kombu queue it is for, and the channel takes
it from there (``_get``, ``drain_events``, the event loop's ``on_readable``).

Two kinds of subscription feed the buffers:

* a queue's own: ``/queue/<name>`` with ``client-individual`` acknowledgements
  and a prefetch window, for a queue being consumed (or read with
  ``basic_get``).  Its messages are acknowledged by :meth:`Feeds.settle`.
* an exchange's: ``/topic/<name>``, for fanout and topic exchanges (and direct
  ones, for what was published to a binding the publisher did not know).  It
  is taken when a queue is bound to the exchange; each message goes to the
  buffer of every queue bound here whose binding matches its routing key.
  The broker sends these to whoever listens at the time, as Redis's fanout
  does: nothing is kept for a queue whose connection is gone.

Every subscription calls back inline (``subscribe(on_message=..., inline=True)``):
the client's thread that reads the socket puts each message in its buffer as
it reads it, with no thread of its own between.  What waits for messages
waits on one condition, and an event loop, once it watches, on one file
descriptor that becomes readable when a buffer gains a message (written once
until the loop has emptied the buffers, not once per message).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from stomp_proto import Message
from stomp_proto.threads import Client

from ._mapping import Broker, broker_of, envelope_of

__all__ = ["Delivery", "Feeds"]

#: How many messages an exchange's subscription keeps for a bound queue that
#: nobody consumes, before it drops the oldest (they are auto-acknowledged).
TOPIC_BUFFER = 10_000


@dataclass(slots=True)
class Delivery:
    """One message in a queue's buffer: its Kombu envelope, and the STOMP message
    to acknowledge (``None`` for an exchange's copy: nothing to acknowledge)."""

    envelope: dict[str, Any]
    message: Message | None


@dataclass(slots=True)
class _Binding:
    queue: str
    #: Whether a routing key is for this binding.
    matches: Callable[[str], bool]


@dataclass(slots=True)
class _QueueFeed:
    stack: contextlib.ExitStack
    window: int
    #: Delivery tags of its messages taken and not yet settled.
    pending: set[str] = field(default_factory=set)


class Feeds:
    """The subscriptions of one connection, the buffers they fill, and their waits."""

    def __init__(self, client: Client, *, queue_prefix: str, topic_prefix: str) -> None:
        self.client = client
        self.broker: Broker = broker_of(client.server)
        self._queue_prefix = queue_prefix
        self._topic_prefix = topic_prefix
        self._lock = threading.Lock()
        #: Notified when a buffer gains a message, a settlement frees a slot, or
        #: the connection fails.
        self.changed = threading.Condition(self._lock)
        self._generation = 0
        self._buffers: dict[str, deque[Delivery]] = {}
        self._queues: dict[str, _QueueFeed] = {}
        #: Subscriptions of cancelled consumers that still have messages taken and
        #: not settled: each ends when its last one is (an acknowledgement needs
        #: its subscription, on RabbitMQ and in our client alike).
        self._ending: list[tuple[str, _QueueFeed]] = []
        self._exchanges: dict[str, contextlib.ExitStack] = {}
        self._bindings: dict[str, list[_Binding]] = {}
        #: Delivery tag -> (queue, STOMP message), for what was taken and not settled.
        self._unsettled: dict[str, tuple[str, Message]] = {}
        #: Set when the client's session ended for good (a lost connection).
        self.failure: BaseException | None = None
        self.closed = False
        # A pipe that an event loop watches: readable while a buffer has messages.
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self._signalled = False
        #: Whether an event loop watches the descriptor (else it is never written).
        self._watched = False
        #: The event loop's thread: what it reads itself (``pump``) it delivers right
        #: after, so its arrivals need not make the descriptor readable.
        self._loop_thread: int | None = None

    # -- destinations ----------------------------------------------------------

    def queue_destination(self, queue: str) -> str:
        return self._queue_prefix + queue

    def exchange_destination(self, exchange: str) -> str:
        return self._topic_prefix + exchange

    # -- subscriptions ---------------------------------------------------------

    def consume(
        self, queue: str, window: int, headers: dict[str, str], *, auto: bool = False
    ) -> None:
        """Have ``queue``'s own subscription, with room for ``window`` unsettled
        messages (``auto``: the broker counts a message consumed as it sends it,
        for Kombu's ``no_ack`` consumers)."""
        with self._lock:
            if queue in self._queues:
                return
        prefetch = str(window)
        stack = contextlib.ExitStack()
        with self._lock:
            # Live before the SUBSCRIBE goes: its first messages may come before
            # subscribe() returns.
            self._buffers.setdefault(queue, deque())
            self._queues[queue] = _QueueFeed(stack, window)
        try:
            stack.enter_context(
                self.client.subscribe(
                    self.queue_destination(queue),
                    ack="auto" if auto else "client-individual",
                    headers={
                        **headers,
                        "prefetch-count": prefetch,
                        "activemq.prefetchSize": prefetch,
                    },
                    on_message=lambda message: self._arrived(queue, message, settle=not auto),
                    inline=True,
                )
            )
        except BaseException:
            with self._lock:
                self._queues.pop(queue, None)
            raise

    def cancel(self, queue: str) -> None:
        """End ``queue``'s own subscription; what it buffered and nobody took goes back.

        A message taken and not yet settled keeps the subscription until it is (a
        Celery worker's warm shutdown cancels its consumer, then acknowledges the
        tasks that finish); what the broker still delivers meanwhile goes back.
        """
        with self._lock:
            feed = self._queues.pop(queue, None)
            if feed is None:
                return
            buffer = self._buffers.get(queue, deque())
            untaken = [d for d in buffer if d.message is not None]
            self._buffers[queue] = deque(d for d in buffer if d.message is None)
            if feed.pending:
                self._ending.append((queue, feed))
        for delivery in untaken:
            assert delivery.message is not None
            self._put_back(delivery.message)
        if not feed.pending:
            feed.stack.close()

    def bind(self, queue: str, exchange: str, matches: Callable[[str], bool]) -> None:
        """Copy what is published to ``exchange`` whose routing key ``matches`` to ``queue``."""
        with self._lock:
            bindings = self._bindings.setdefault(exchange, [])
            bindings.append(_Binding(queue, matches))
            self._buffers.setdefault(queue, deque())
            if exchange in self._exchanges:
                return
            stack = contextlib.ExitStack()
            self._exchanges[exchange] = stack
        try:
            stack.enter_context(
                self.client.subscribe(
                    self.exchange_destination(exchange),
                    ack="auto",
                    on_message=lambda message: self._published(exchange, message),
                    inline=True,
                )
            )
        except BaseException:
            with self._lock:
                self._exchanges.pop(exchange, None)
            raise

    def unbind(self, queue: str, exchange: str | None = None) -> None:
        """Stop copying to ``queue`` (from ``exchange``, or from every exchange)."""
        ended = []
        with self._lock:
            for name, bindings in list(self._bindings.items()):
                if exchange is not None and name != exchange:
                    continue
                bindings[:] = [b for b in bindings if b.queue != queue]
                if not bindings:
                    del self._bindings[name]
                    stack = self._exchanges.pop(name, None)
                    if stack is not None:
                        ended.append(stack)
        for stack in ended:
            stack.close()

    def _feed_of(self, queue: str, tag: str) -> _QueueFeed | None:
        """The live or ending subscription that delivered ``tag`` of ``queue``."""
        feed = self._queues.get(queue)
        if feed is not None and tag in feed.pending:
            return feed
        return next((f for q, f in self._ending if q == queue and tag in f.pending), None)

    def consumed(self, queue: str) -> bool:
        with self._lock:
            return queue in self._queues

    # -- the buffers -----------------------------------------------------------

    def take(self, queue: str) -> Delivery | None:
        """The next message buffered for ``queue``, or None (never waits)."""
        with self._lock:
            buffer = self._buffers.get(queue)
            if not buffer:
                return None
            delivery = buffer.popleft()
            if delivery.message is not None:
                tag = delivery.envelope["properties"]["delivery_tag"]
                self._unsettled[tag] = (queue, delivery.message)
                feed = self._queues.get(queue)
                if feed is not None:
                    feed.pending.add(tag)
            if self._signalled and not any(self._buffers.values()):
                self._unsignal()
            return delivery

    def buffered(self, queue: str) -> int:
        """How many messages are buffered for ``queue`` and not yet taken."""
        with self._lock:
            return len(self._buffers.get(queue, ()))

    def has_messages(self, queues: Iterable[str]) -> bool:
        with self._lock:
            return any(self._buffers.get(queue) for queue in queues)

    @property
    def generation(self) -> int:
        """A count of changes (a message, a settlement, a failure): read it before
        looking for a message, and give it to :meth:`wait`."""
        with self._lock:
            return self._generation

    def wait(self, timeout: float | None, since: int) -> None:
        """Wait until something changed after ``since`` (a :attr:`generation`), or
        ``timeout``: a change made while the caller looked is not missed."""
        with self._lock:
            self.changed.wait_for(
                lambda: self._generation != since or self.failure is not None or self.closed,
                timeout,
            )

    def _changed(self) -> None:
        # Under the lock.
        self._generation += 1
        self.changed.notify_all()

    def settle(self, tag: str, *, ack: bool, requeue: bool = False) -> None:
        """Acknowledge the message of delivery ``tag`` (``ack``), or put it back
        (``requeue``) or drop it, as its broker does each; a copy from an exchange
        has nothing to settle."""
        with self._lock:
            entry = self._unsettled.pop(tag, None)
            if entry is None:
                return
            queue, message = entry
            feed = self._feed_of(queue, tag)
            # A cancelled consumer's subscription must outlive the frame that
            # settles its message: its tag goes once that frame went.
            ending = feed if feed is not None and feed is not self._queues.get(queue) else None
            if feed is not None and ending is None:
                feed.pending.discard(tag)
            self._changed()
            if self._watched and not self._signalled and any(self._buffers.values()):
                self._signal()
        if ack:
            self.client.ack(message)
        elif requeue:
            self._put_back(message)
        else:
            self._drop(message)
        if ending is not None:
            self._settled(queue, ending, tag)

    def _settled(self, queue: str, feed: _QueueFeed, tag: str) -> None:
        """``tag`` of a cancelled consumer's ``feed`` is settled (its frame went); the
        subscription ends with the last one."""
        with self._lock:
            feed.pending.discard(tag)
            ended = not feed.pending and (queue, feed) in self._ending
            if ended:
                self._ending.remove((queue, feed))
        if ended:
            feed.stack.close()  # UNSUBSCRIBE, after every frame that settled a message

    def _put_back(self, message: Message) -> None:
        """Have the broker deliver ``message`` again."""
        if self.broker.requeue_nack:
            self.client.nack(message)
            return
        # ActiveMQ's NACK dead-letters: a copy goes back to the queue, and the
        # original is acknowledged, both or neither (one transaction).
        with self.client.transaction() as tx:
            self.client.send(
                message.destination,
                message.body,
                content_type=message.content_type,
                headers=[(n, v) for n, v in message.headers if not _broker_set(n)],
                transaction=tx,
            )
            self.client.ack(message, transaction=tx)

    def _drop(self, message: Message) -> None:
        """Have the broker drop ``message`` (or dead-letter it, where it does that)."""
        drop = self.broker.drop_header
        if drop is not None:
            self.client.nack(message, headers=[drop])
        elif self.broker.requeue_nack:
            self.client.ack(message)  # a NACK would deliver it again: it is dropped
        else:
            self.client.nack(message)

    # -- arrivals (inline, on the client's thread that reads) --------------------

    def _arrived(self, queue: str, message: Message, *, settle: bool) -> None:
        # An auto-acknowledged message has nothing to settle.
        delivery = Delivery(envelope_of(message), message if settle else None)
        with self._lock:
            if queue in self._queues:
                self._buffers.setdefault(queue, deque()).append(delivery)
                self._signal(arrival=True)
                self._changed()
        # Else its consumer was cancelled, and the subscription lives on only for
        # the messages taken before: this one is left unsettled (it fills the
        # prefetch window, so that the broker stops sending), and the broker
        # delivers it again when the subscription ends (ActiveMQ, the embedded
        # broker) or the connection does (RabbitMQ).  Putting it back now would
        # not do: RabbitMQ hands a NACKed message to the same subscription at
        # once, and one that ends with it in flight answers "Subscription not
        # found", an ERROR that ends the connection.

    def _published(self, exchange: str, message: Message) -> None:
        envelope = envelope_of(message)
        info = envelope["properties"].get("delivery_info") or {}
        routing_key = str(info.get("routing_key") or "")
        with self._lock:
            targets = [b.queue for b in self._bindings.get(exchange, ()) if b.matches(routing_key)]
            for number, queue in enumerate(targets):
                copy = envelope if number == 0 else envelope_of(message)
                buffer = self._buffers.setdefault(queue, deque())
                if len(buffer) >= TOPIC_BUFFER:
                    buffer.popleft()
                buffer.append(Delivery(copy, None))
            if targets:
                self._signal(arrival=True)
                self._changed()

    def lost(self, error: BaseException | None) -> None:
        """The client's session ended for good: every wait hears it."""
        with self._lock:
            if self.failure is None:
                self.failure = error or ConnectionError("the STOMP connection ended")
            self._signal()
            self._changed()

    # -- the event loop's file descriptor --------------------------------------

    def fileno(self) -> int:
        return self._wake_read

    def watch(self, watched: bool) -> None:
        """An event loop starts (or stops) watching :meth:`fileno`: only then is it
        made readable (a wait without a loop needs no system call per message)."""
        with self._lock:
            self._watched = watched
            self._loop_thread = threading.get_ident() if watched else None
            if not watched:
                self._unsignal()
            elif self.failure is not None or any(self._buffers.values()):
                self._signal()

    def poke(self) -> None:
        """Something may have become deliverable (a consumer, a larger prefetch):
        wake every wait, and the event loop if a buffer holds messages."""
        with self._lock:
            if self._watched and not self._signalled and any(self._buffers.values()):
                self._signal()
            self._changed()

    def quiet(self) -> None:
        """The event loop found nothing it may deliver now: its descriptor stops
        being readable until a message arrives or a settlement frees a slot."""
        with self._lock:
            self._unsignal()

    def _signal(self, *, arrival: bool = False) -> None:
        if arrival and threading.get_ident() == self._loop_thread:
            return  # read by the loop itself (pump), which delivers right after
        if self._watched and not self._signalled:
            self._signalled = True
            with contextlib.suppress(BlockingIOError):
                os.write(self._wake_write, b"!")

    def _unsignal(self) -> None:
        if self._signalled:
            self._signalled = False
            with contextlib.suppress(BlockingIOError):
                os.read(self._wake_read, 64)

    # -- the end ----------------------------------------------------------------

    def close(self) -> None:
        """End every subscription and the client; the broker delivers again what was
        not acknowledged."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            stacks = [feed.stack for feed in self._queues.values()]
            stacks += [feed.stack for _, feed in self._ending]
            stacks += list(self._exchanges.values())
            self._queues.clear()
            self._ending.clear()
            self._exchanges.clear()
            self._changed()
        try:
            self.client.close()  # ends the subscriptions' threads too
            for stack in stacks:
                with contextlib.suppress(Exception):
                    stack.close()
        finally:
            os.close(self._wake_read)
            os.close(self._wake_write)


def _broker_set(name: str) -> bool:
    """Whether a MESSAGE header is the broker's own, not the sender's."""
    return name in {"message-id", "destination", "subscription", "ack", "redelivered"} or (
        name.startswith("JMS") or name == "timestamp"
    )
