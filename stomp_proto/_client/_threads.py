"""The threads client behind ``stomp_proto.threads``: sockets, locks, no event loop.

Writing: every call that writes (``send``, ``ack``, ``nack``, transactions)
makes its frame and writes it from the caller's own thread, under a lock that
keeps frames whole and in order.  An ACK or NACK without a receipt may wait in
the :class:`~stomp_proto._client._outbox.Outbox` to go out with the next frames.

Reading is a role, not a thread (leader and followers).  One thread at a time
holds the *read role*: it waits on the socket, feeds the
:class:`~stomp_proto.ClientConnection`, hands each message to its
subscription's buffer, completes receipt waits and keeps the heart-beat timer.
Whichever thread needs data takes the role when it is free: a consumer whose
buffer is empty, a call waiting for a receipt, ``connect()`` waiting for
CONNECTED.  So a consumer streaming messages reads them itself, in its own
thread: no other thread is woken per message, and no lock changes hands.  A
thread that needs data while another reads waits (a follower) and is woken
only when something arrived for it, or when the role became free and it
should take it.

The background thread (``stomp_proto-reader``) takes the role when nobody else
needs it - once the role has stayed free for :data:`IDLE_READ` seconds (at
once before CONNECTED) - so that buffers fill, receipts complete and a silent
broker is seen while no consumer asks; and it hands the role back as soon as a
follower waits.  While nobody reads it keeps time: heart-beats, and the
acknowledgements held in the outbox once they are due.  It also ends each
session and reconnects.  A full buffer pauses reading (back-pressure): the
messages of the read that did not fit wait, in order, and nobody reads until
their consumer makes room.

Three locks, never held across a wait on the network: the state lock guards
the connection, the write lock keeps frames whole, and the hub lock guards the
buffers, the read role and every wait (one lock, so that a follower can never
miss its wake-up).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from types import EllipsisType, TracebackType

from .._connection import ClientConnection
from .._errors import ErrorKind, LocalProtocolError, ProtocolError
from .._events import Abort, AckMode, Begin, Event, Message, Send, Subscribe
from .._state import ConnectionState
from ._backend import BlockingStream
from ._blocking import open_stream
from ._brokers import Brokers, FirstConnect
from ._core import CONNECT_WAITER, ClientCore, End, Resolve
from ._errors import (
    BrokerError,
    ClientError,
    ConnectionLost,
    connect_timed_out,
    message_timed_out,
    reason,
    timed_out,
)
from ._lifecycle import SessionEvent
from ._options import ConnectOptions
from ._outbox import OUTBOX_DELAY, may_hold, wide_window
from ._read_role import IDLE_READ, ReadRole, waits_on_itself
from ._transaction import TransactionBase
from ._unsolicited import UnsolicitedBase
from ._view import ClientView
from ._writer import Writer

__all__ = [
    "DISPATCH_THREAD",
    "IDLE_READ",
    "READER_THREAD",
    "Client",
    "Subscription",
    "Transaction",
    "Unsolicited",
    "open_client",
]

log = logging.getLogger("stomp_proto.client")

#: The background thread's name (one per connected client).
READER_THREAD = "stomp_proto-reader"
#: The name of the thread that calls a subscription's ``on_message`` (one per such
#: subscription).
DISPATCH_THREAD = "stomp_proto-dispatch"


class Subscription:
    """Messages of one subscription: ``for message in subscription``.

    Its buffer holds up to ``max_pending_messages``; when it is full the
    client stops reading from the socket (heart-beats go on) until the
    consumer catches up.  Any thread may take messages; a thread that finds
    the buffer empty reads from the socket itself while no other thread does.
    """

    def __init__(self, client: Client, event: Subscribe) -> None:
        self._client = client
        role: ReadRole = client._role
        self._role = role
        self._event = event
        self._limit = client._core.options.max_pending_messages
        self._messages: deque[Message] = deque()
        #: Messages read while the buffer was full, in order; reading waits
        #: until they fit (back-pressure).
        self._overflow: deque[Message] = deque()
        self._arrived = role.condition()
        self._takers = 0  # threads waiting in get() (followers)
        self._ended = False
        self._error: ClientError | None = None
        #: Whether acknowledgements may stay held while get() waits (see wide_window).
        self._wide_window = wide_window(event)
        self._tracing = client._core.options.tracing
        #: The thread that calls ``on_message`` (while the subscription is open).
        self._dispatcher: threading.Thread | None = None
        #: ``on_message`` when it is called inline, by the thread that reads.
        self._inline: Callable[[Message], object] | None = None
        #: Messages handed to the inline ``on_message`` and not yet through it.
        self._calls = 0
        #: Messages an inline ``client-individual`` subscription delivered and
        #: the application has not settled (its own buffer, as it were).
        self._unsettled = 0
        self._counts_unsettled = event.ack == "client-individual"

    @property
    def id(self) -> str:
        """The subscription id sent to the broker."""
        return self._event.key

    @property
    def destination(self) -> str:
        return self._event.destination

    def get(self, timeout: float | None = None) -> Message | None:
        """The next message, waiting up to ``timeout`` seconds (TimeoutError after).

        ``None`` once the subscription has ended cleanly; the error that ended
        the session if it did not.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        began = 0 if self._tracing is None else time.time_ns()
        client = self._client
        role = self._role
        writer = client._writer
        outbox = writer.outbox
        waited = False  # as a follower: the read role may have to be handed on
        while True:
            flush = False
            with role.lock:
                messages = self._messages
                if messages:
                    message = messages.popleft()
                    if self._overflow:
                        self._refill()
                    if waited:
                        role.hand_on()
                    if self._tracing is None:
                        return message
                    break  # to record it outside the lock

                if self._ended:
                    if waited:
                        role.hand_on()
                    if self._error is not None:
                        client._core.reported(self._error)
                        raise self._error
                    return None
                # Nothing buffered: acknowledgements held back go out before
                # waiting - right away, or with a wide window once they are due.
                due = outbox.deadline() if outbox else None
                now = time.monotonic()
                if due is None or (self._wide_window and due > now):
                    wait = None if deadline is None else deadline - now
                    if due is not None:
                        wait = due - now if wait is None else min(wait, due - now)
                    if wait is not None and wait <= 0:
                        if waited:
                            role.hand_on()
                        raise message_timed_out(self.destination, timeout)
                    if role.may_lead():
                        role.lead()
                    else:
                        if role.reads_here():
                            raise waits_on_itself()
                        self._takers += 1
                        role.follow(self)
                        try:
                            self._arrived.wait(wait)
                        finally:
                            self._takers -= 1
                            if not self._takers:
                                role.unfollow(self)
                        waited = True
                        continue
                else:
                    flush = True
            if flush:
                writer.flush_outbox()
                continue
            waited = False
            role.read(wait)
        self._tracing.received(message, client.broker, client.version, began)
        return message

    def __iter__(self) -> Iterator[Message]:
        while (message := self.get()) is not None:
            yield message

    def unsubscribe(
        self,
        *,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
        receipt: bool = False,
    ) -> None:
        """UNSUBSCRIBE now, before the ``with`` block ends (which then does nothing
        more): the messages buffered still come, then the end.  It may be called
        from the subscription's own ``on_message``.

        :param headers: more headers, sent as given: ActiveMQ's
            ``activemq.subscriptionName`` removes a durable subscription (see
            :ref:`durable-subscriptions`).
        :param receipt: return only once the broker has confirmed it.
        """
        self._client._unsubscribe(self, headers, receipt)
        dispatcher = self._dispatcher
        if dispatcher is not None and dispatcher is not threading.current_thread():
            dispatcher.join()
        if self._inline is not None:
            role = self._role
            with role.lock:  # a call under way ends first (unless it is this thread's)
                while self._calls and not role.reads_here():
                    self._arrived.wait()

    def _needs_data(self) -> bool:
        return self._takers > 0 and not self._messages and not self._ended

    def _wake(self) -> None:
        self._arrived.notify()

    def _woken(self, count: int) -> None:
        """Wake ``count`` threads waiting for messages (under the hub lock)."""
        self._arrived.notify(count)

    def _end(self, error: ClientError | None) -> None:
        with self._role.lock:
            if self._ended:
                return
            self._ended = True
            self._error = error
            if self._overflow:  # nobody takes them: dropped, and reading resumes
                self._overflow.clear()
                self._role.overflow_ended()
            self._arrived.notify_all()

    def _offer(self, message: Message) -> bool:
        """Buffer ``message`` as it arrived (under the hub lock); True when a
        thread waits for it.  What does not fit waits in the overflow."""
        if self._ended:
            return False  # nobody takes it: dropped
        overflow = self._overflow
        if overflow or len(self._messages) >= self._limit:
            if not overflow:
                self._role.overflow_began()
            overflow.append(message)
            return False
        self._messages.append(message)
        return self._takers > 0

    def _call_taken(self) -> bool:
        """Its inline ``on_message`` is to be called with a message that arrived
        (under the hub lock); False when it has ended (the message is dropped)."""
        if self._ended:
            return False
        self._calls += 1
        if self._counts_unsettled:
            self._unsettled += 1
        return True

    def _call_done(self) -> None:
        """A call of the inline ``on_message`` is over (under the hub lock)."""
        self._calls -= 1
        if not self._calls and self._ended:
            self._arrived.notify_all()  # unsubscribe() waits for it

    def _settling(self) -> int:
        """As one of its messages is settled: how many more the consumer has yet to
        take or settle (see may_hold).  For an inline ``client-individual``
        subscription, the buffer is the application's: the messages it was given
        and has not settled yet."""
        if not (self._counts_unsettled and self._inline):
            return len(self._messages)
        with self._role.lock:
            buffered = self._unsettled - 1
            if self._unsettled:
                self._unsettled -= 1
        return buffered

    def _refill(self) -> None:
        """Room appeared in the buffer: move what waits into it (hub lock held)."""
        messages, overflow = self._messages, self._overflow
        room = self._limit - len(messages)
        while room > 0 and overflow:
            messages.append(overflow.popleft())
            room -= 1
        if not overflow:
            self._role.overflow_ended()

    def _holds_acks(self) -> bool:
        """Whether its consumer may hold acknowledgements back (see may_hold): it
        has messages buffered, an inline one has messages unsettled, or a wide window."""
        return bool(self._messages) or self._wide_window or self._unsettled > 0


class Unsolicited(UnsolicitedBase):
    """``client.unsolicited`` of the threads client: the messages for subscriptions
    the client did not make, oldest first, at most ``max_pending_messages`` (past
    that the oldest is dropped, and counted in :attr:`dropped`).  Any thread may
    take from it."""

    __slots__ = ("_arrived",)

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self._arrived = threading.Condition()

    def _wake(self) -> None:
        with self._arrived:
            self._arrived.notify_all()

    def get(self, timeout: float | None = None) -> Message | None:
        """The oldest message, waiting for one; ``None`` once the client has ended
        and none is left.  TimeoutError after ``timeout`` seconds (``None``: wait
        as long as it takes)."""
        with self._arrived:
            if not self._arrived.wait_for(lambda: self._messages or self._ended, timeout):
                raise timed_out("the wait for an unsolicited message", timeout)
            return self.get_nowait()


class Transaction(TransactionBase):
    """A transaction from ``client.begin()``: what is sent, acknowledged or rejected
    through it takes effect at :meth:`commit`, and not at all after :meth:`abort`.
    Ended once; a frame after that is a LocalProtocolError.  A transaction still
    open when its session is lost is gone (STOMP 1.2 §BEGIN).
    """

    __slots__ = ("_client",)

    def __init__(self, client: Client, transaction: str) -> None:
        super().__init__(transaction)
        self._client = client

    def send(
        self,
        destination: str,
        body: bytes | bytearray | memoryview | str = b"",
        *,
        content_type: str | None = None,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
        receipt: bool = False,
        content_length: bool = True,
    ) -> None:
        """:meth:`Client.send` within the transaction; ``destination``, ``body``,
        ``content_type``, ``headers``, ``receipt`` and ``content_length`` as there."""
        self._client.send(
            destination,
            body,
            content_type=content_type,
            headers=headers,
            transaction=self._use(),
            receipt=receipt,
            content_length=content_length,
        )

    def ack(
        self,
        message: Message,
        *,
        receipt: bool = False,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
    ) -> None:
        """:meth:`Client.ack` of ``message`` within the transaction; ``receipt`` and
        ``headers`` as there."""
        self._client.ack(message, transaction=self._use(), receipt=receipt, headers=headers)

    def nack(
        self,
        message: Message,
        *,
        receipt: bool = False,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
    ) -> None:
        """:meth:`Client.nack` of ``message`` within the transaction; ``receipt`` and
        ``headers`` as there."""
        self._client.nack(message, transaction=self._use(), receipt=receipt, headers=headers)

    def commit(self) -> None:
        """COMMIT: what the transaction holds takes effect; returns with the broker's
        receipt."""
        client = self._client
        client._core.take_refusal()
        client._writer.send(*client._core.commit_event(self._use("committed")))

    def abort(self) -> None:
        """ABORT: what the transaction holds is dropped; returns with the broker's
        receipt."""
        client = self._client
        client._core.take_refusal()
        client._writer.send(*client._core.abort_event(self._use("aborted")))


class _Reader:
    """What the holder of the read role does: read the stream, act on the events
    (messages to their buffers, answers to their waits), keep the timers."""

    def __init__(
        self,
        core: ClientCore[Subscription],
        role: ReadRole,
        writer: Writer,
        unsolicited: Unsolicited,
        on_connected: Callable[[BlockingStream, ClientConnection], None],
    ) -> None:
        self._core = core
        self._role = role
        self._writer = writer
        self._unsolicited = unsolicited
        self._on_connected = on_connected
        #: Until when the current session may take to get CONNECTED (under the hub lock).
        self.connect_deadline: float | None = None
        #: The seconds that deadline allows (for the error that says it passed).
        self.connect_timeout: float | None = None

    def step(self, wait: float | None) -> None:
        """Read once, as the holder of the read role: wait up to ``wait`` seconds
        (and no later than the timers) for data, feed it, act on the events."""
        stream, conn = self._writer.stream, self._core.conn
        assert stream is not None
        try:
            if conn.state is ConnectionState.CLOSED:
                # Ended while nobody read (a heart-beat check found the broker
                # silent): what it queued ends the session, without a read.
                self._drain(stream, conn)
                if self._role.live:
                    self._writer.end_session(ConnectionLost("the connection is closed"))
                return
            timeout = self.next_wake(conn)
            if wait is not None:
                timeout = wait if timeout is None else min(timeout, wait)
            if stream.wait_readable(timeout):
                data = stream.receive()
                with self._writer.state_lock:
                    conn.receive_data(data)
            now = time.monotonic()
            timer = conn.get_timer()
            due = self._writer.outbox.deadline()
            if (timer is not None and timer <= now) or (due is not None and due <= now):
                self._writer.on_timer(stream, conn, reading=True)
            self._drain(stream, conn)
            deadline = self.connect_deadline
            if deadline is not None and not self._role.connected and now > deadline:
                waited = connect_timed_out(self.connect_timeout, opened=True)
                self._writer.end_session(ConnectionLost(str(waited)))
        except (ProtocolError, OSError) as exc:
            error = ConnectionLost(f"connection failed: {reason(exc)}")
            error.__cause__ = exc
            self._writer.end_session(error)
        except Exception as exc:  # a bug must not leave waiters hanging
            error = ConnectionLost(f"client failed: {exc!r}")
            error.__cause__ = exc
            self._writer.end_session(error)

    def _drain(self, stream: BlockingStream, conn: ClientConnection) -> None:
        """Act on every event the connection has (the holder of the read role)."""
        events: list[Event] = []
        failure: ProtocolError | None = None
        with self._writer.state_lock:
            try:
                while (event := conn.next_event()) is not None:
                    events.append(event)
            except ProtocolError as exc:
                failure = exc  # what came before it is still handled
        if not events and failure is None:
            return
        arrived: list[Message] = []  # handed over together (see _deliver)
        core = self._core
        for event in events:
            # (A message routes to itself: no call for the common event.)
            route = event if type(event) is Message else core.route(event)
            if type(route) is Message:
                arrived.append(route)
                continue
            if arrived:  # messages first, in the order they came
                self._deliver(arrived)
                arrived = []
            if type(route) is Resolve:
                if route.key == CONNECT_WAITER:
                    self._on_connected(stream, conn)
                with self._role.lock:
                    waiter = self._writer.waiters.pop(route.key, None)
                    if waiter is not None:
                        waiter._settle(route.value, None)
            elif type(route) is End:
                self._writer.end_session(route.error)
                return
        if arrived:
            self._deliver(arrived)
        if failure is not None:
            raise failure

    def _deliver(self, arrived: list[Message]) -> None:
        """Hand messages that arrived together to their subscriptions, in order.

        One lock for all, and one wake-up per subscription that has a thread
        waiting for them.  What does not fit waits in the subscription's
        overflow, and reading stops until its consumer makes room.  An inline
        ``on_message`` is called with its messages after, outside the lock.
        """
        woken: dict[Subscription, int] = {}
        inline: list[tuple[Subscription, Message]] = []
        with self._role.lock:
            for message in arrived:
                subscription, receipt = self._core.target(message)
                if receipt is not None:
                    waiter = self._writer.waiters.pop(receipt, None)
                    if waiter is not None:
                        waiter._settle(message, None)
                if subscription is None:
                    # A reply goes to its request; anything else no subscription takes is kept.
                    key = self._core.replies.key(message)
                    waiter = None if key is None else self._writer.waiters.pop(key, None)
                    if waiter is not None:
                        waiter._settle(message, None)
                    else:
                        self._unsolicited._put(message)
                    continue
                if subscription._inline is not None:
                    if subscription._call_taken():
                        inline.append((subscription, message))
                    continue
                if subscription._offer(message):
                    woken[subscription] = woken.get(subscription, 0) + 1
            for subscription, count in woken.items():
                subscription._woken(count)
        if inline:
            self._call_inline(inline)

    def _call_inline(self, calls: list[tuple[Subscription, Message]]) -> None:
        """Call the inline ``on_message`` of each message, in order, on this (the
        reading) thread, outside every lock; one that ended meanwhile is skipped."""
        try:
            for subscription, message in calls:
                if subscription._ended:
                    continue  # unsubscribe() waits for the calls under way, not for these
                on_message = subscription._inline
                assert on_message is not None
                try:
                    on_message(message)
                except Exception:
                    _log_failed(subscription, message)
        finally:
            with self._role.lock:
                for subscription, _ in calls:
                    subscription._call_done()

    def keep_time(self, reading: bool) -> None:
        """Handle the timers while nobody reads (the background thread)."""
        stream = self._writer.stream
        if stream is not None:
            with suppress(OSError):  # the next reader sees the failure
                self._writer.on_timer(stream, self._core.conn, reading=reading)

    def _until_timer(self, conn: ClientConnection) -> float | None:
        deadline = conn.get_timer()
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    def next_wake(self, conn: ClientConnection) -> float | None:
        """Seconds a reader may wait: until the connection's timer (or the
        CONNECTED deadline), and no more than the outbox's delay while a
        consumer may hold acknowledgements back (its subscription has messages
        buffered, an inline one has messages unsettled, or a wide window), so
        that what is held goes out in time even if the consumer stops asking."""
        wait = self._until_timer(conn)
        deadline = self.connect_deadline
        if deadline is not None and not self._role.connected:
            left = max(0.0, deadline - time.monotonic())
            wait = left if wait is None else min(wait, left)
        handles = list(self._core.subscriptions.values())
        if self._writer.outbox or any(h._holds_acks() for h in handles):
            wait = OUTBOX_DELAY if wait is None else min(wait, OUTBOX_DELAY)
        return wait


class _Sessions:
    """The sessions of one threads client: the first connect, the background thread
    that keeps each session and reconnects after a loss, and the end (``close()``,
    or giving up).  It makes the reader that serves the holder of the read role."""

    def __init__(
        self,
        core: ClientCore[Subscription],
        role: ReadRole,
        writer: Writer,
        unsolicited: Unsolicited,
    ) -> None:
        self._core = core
        self._role = role
        self._writer = writer
        self._unsolicited = unsolicited
        #: Reads for the holder of the read role.
        self.reading = _Reader(core, role, writer, unsolicited, self._connected)
        #: The background thread (once the first attempt has begun).
        self._thread: threading.Thread | None = None
        #: Set by close(): interrupts the reconnect schedule's waits.
        self._stopping = threading.Event()
        self._connected_once = False

    def open(self, timeout: float | EllipsisType | None = ...) -> None:
        """Connect, start the background thread, wait for CONNECTED (the first connect).

        ``timeout``: seconds for it; by default the options' bound on one attempt.
        """
        bound = self._core.options.attempt_timeout if timeout is ... else timeout
        began = time.monotonic()
        stream = self._start(self._core.conn, bound)
        connected = self._writer.expect(CONNECT_WAITER)
        self._thread = threading.Thread(
            target=self._run, args=(stream,), name=READER_THREAD, daemon=True
        )
        self._writer.reader = self._thread
        self._thread.start()
        # The reader ends the attempt at its deadline too; this wait is the backstop.
        left = None if bound is None else max(0.0, began + bound - time.monotonic())
        try:
            connected.wait(left)
        except TimeoutError:
            raise connect_timed_out(bound, opened=True) from None

    def _start(
        self, conn: ClientConnection, timeout: float | EllipsisType | None = ...
    ) -> BlockingStream:
        """Open a stream (to the broker to try), write the CONNECT on it, and let it be read.

        ``timeout``: seconds for the attempt, from opening the stream to CONNECTED;
        by default the options' bound on one attempt.
        """
        if timeout is ...:
            timeout = self._core.options.attempt_timeout
        began = time.monotonic()
        self._core.life.attempt(began)
        stream, versions = open_stream(self._core.brokers.options, timeout)
        try:
            with self._writer.state_lock:
                data = self._core.encode(conn, self._core.options.connect_event(versions))
            stream.send(data)
        except BaseException:
            stream.close()
            raise
        self._writer.stream = stream
        with self._role.lock:
            self._role.session_began()
            self.reading.connect_deadline = None if timeout is None else began + timeout
            self.reading.connect_timeout = timeout
        return stream

    def _connected(self, stream: BlockingStream, conn: ClientConnection) -> None:
        """CONNECTED came (read by the role's holder): restore subscriptions, let writers in."""
        with self._writer.write_lock:
            for subscribe in self._core.restore_subscriptions():
                with self._writer.state_lock:
                    data = self._core.encode(conn, subscribe)
                stream.send(data)
        for subscription in self._core.subscriptions.values():
            subscription._unsettled = 0  # what the last session delivered cannot be settled
        self._role.connected = True
        self.reading.connect_deadline = None
        self._connected_once = True
        self._core.session_started(time.monotonic())
        with self._writer.state_lock:
            if not self._role.closed:
                self._writer.ready.set()

    def close(self) -> None:
        """End the client at once and stop the background thread (see ``Client.close``)."""
        with self._writer.state_lock:
            if self._role.closed:
                return
            self._role.closed = True
            self._writer.ready.set()  # a writer waiting for a session sees the end
        self._stopping.set()
        stream = self._writer.stream
        # Acknowledgements already made go out first, unless a writer is stuck
        # on a full socket (close() must not wait for the broker).
        if self._writer.outbox:
            self._writer.flush_outbox(wait=False)
        if stream is not None:
            stream.shutdown()  # the thread reading sees the end and lets go
        self._finish(None)  # wakes every consumer
        self._core.life.closed()
        self._role.stop()
        reader = self._thread
        if reader is not None and reader is not threading.current_thread():
            reader.join()
        self._role.wait_unread()  # the stream is closed once nobody reads it
        if stream is not None:
            with suppress(Exception):
                stream.close()
        self._writer.fail_waiters(ConnectionLost("the client is closed"))

    def _run(self, stream: BlockingStream) -> None:
        """The background thread: keep each session, then reconnect as the options say."""
        while True:
            ended = self._role.keep(
                lambda: self.reading.next_wake(self._core.conn), self.reading.keep_time
            )
            if ended is None:
                return  # closed
            connected, error = ended
            with self._writer.state_lock:
                if not self._role.closed:  # close() leaves it set: writers must see the end
                    self._writer.ready.clear()
                self._writer.ended_by = error
            with self._writer.write_lock:
                self._writer.outbox.clear()  # acknowledgements of a connection that is gone
            self._writer.fail_waiters(error)
            with suppress(Exception):
                stream.close()
            if self._role.closed:
                return
            if not self._connected_once:
                self._finish(error)  # the first connect's: connect() raises it
                return
            if connected:
                ending = self._core.session_lost(error, time.monotonic())
            else:  # an attempt that ended before CONNECTED
                self._core.life.failed(error)
                again = self._core.again(error, time.monotonic())
                ending = None if again else self._core.life.gave_up(error)
            if ending is not None:
                self._finish(ending)
                return
            if not connected and not isinstance(error, BrokerError):
                error = ConnectionLost(f"reconnect failed: {error}")
            while True:
                delay = self._core.reconnects.next_delay()
                if delay is None:
                    self._finish(self._core.life.gave_up(error))
                    return
                if self._stopping.wait(delay):
                    return
                with self._role.lock:
                    self._role.ending = None
                with self._writer.state_lock:
                    conn = self._core.new_connection()
                try:
                    stream = self._start(conn)
                    break
                except (OSError, ClientError, ProtocolError) as exc:
                    self._core.life.failed(exc)
                    error = ConnectionLost(f"reconnect failed: {reason(exc)}")
            if self._role.closed:  # close() came while connecting: it did not see this stream
                with self._role.lock:
                    self._role.live = False
                stream.close()
                return

    def _finish(self, error: ClientError | None) -> None:
        """The client is over: end every subscription, and release waiting writers."""
        self._core.finish(error)
        self._unsolicited._end()
        self._writer.ready.set()


class Client(ClientView):
    """A connected, blocking STOMP client; make one with :func:`connect`.

    Safe to use from many threads at once.
    """

    def __init__(self, options: ConnectOptions, brokers: Brokers | None = None) -> None:
        self._core: ClientCore[Subscription] = ClientCore(options, brokers)
        #: The read role; its lock (the hub lock) guards the buffers and every wait.
        self._role: ReadRole = ReadRole(lambda wait: self._sessions.reading.step(wait))
        #: The stream, the locks, the outbox and the waits for answers.
        self._writer: Writer = Writer(self._core, self._role, options.timeout)
        #: Messages for subscriptions this client did not make (an
        #: :class:`Unsolicited`): ``client.unsolicited.get(timeout)`` waits for one,
        #: ``get_nowait()`` (``None`` when empty) does not.  It holds up to
        #: ``max_pending_messages``; the oldest are dropped when it is full, and
        #: counted in its ``dropped``.  Replies to :meth:`request` go to it only
        #: when they come after their request stopped waiting.
        self.unsolicited = Unsolicited(options.max_pending_messages)
        #: The first connect, the background thread (each session, the reconnects), the end.
        self._sessions = _Sessions(self._core, self._role, self._writer, self.unsolicited)

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is None:
            self.disconnect()
        else:
            self.close()

    def disconnect(self) -> None:
        """Leave gracefully (DISCONNECT and its receipt), then close.

        Raises the :class:`BrokerError` that may have refused a message sent
        without a receipt, if no call since has raised it.
        """
        if self._role.closed:
            return  # already closed: like the async clients, a no-op
        try:
            if self._writer.ready.is_set() and self._core.error is None:
                with suppress(ClientError, TimeoutError, ProtocolError, OSError):
                    self._writer.send(*self._core.disconnect_event())
        finally:
            self.close()
        self._core.take_refusal()

    def close(self) -> None:
        """Drop the connection at once (no DISCONNECT) and stop the background thread.

        Any thread may call it; blocked calls return (a waiting ``get`` returns
        ``None``, a receipt wait raises ConnectionLost).
        """
        self._sessions.close()

    # -- reading on an event loop's thread -------------------------------------------

    def fileno(self) -> int:
        """The descriptor of the current connection's socket, for an event loop to
        watch (see :meth:`pump`); -1 while there is none.  It changes when the client
        connects again."""
        stream = self._writer.stream
        return -1 if stream is None or not self._role.live else stream.fileno()

    def loop_reads(self, reading: bool) -> None:
        """Say whether an event loop reads for this client.

        :param reading: True while a loop watches :meth:`fileno` and calls
            ``pump(0)`` when it is readable.  Meanwhile the background thread
            reads only what the loop left unread for a second, or when a
            heart-beat check is due (so heart-beats are heard while the loop's
            thread is busy), and without waiting.  False: the background thread
            reads whenever nobody else does, as by default.
        """
        with self._role.lock:
            self._role.loop_reads = reading
            self._role.hand_on()

    def pump(self, timeout: float | None = 0.0) -> bool:
        """Read on this thread what the broker sent, and act on it: messages go to
        their subscriptions, an inline ``on_message`` is called here, answers end
        their waits.

        :param timeout: seconds to wait for data (0: only what has come; None:
            until something does).

        True after one read.  False, having read nothing, when nobody may read
        (between connections, closed) or another thread is reading: that one acts
        on what comes, and ``pump`` waits, up to ``timeout``, until it has let go.
        From an inline ``on_message``: :class:`LocalProtocolError`.
        """
        role = self._role
        if not role.take(timeout):
            return False
        role.read(timeout)
        return True

    def send(
        self,
        destination: str,
        body: bytes | bytearray | memoryview | str = b"",
        *,
        content_type: str | None = None,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
        transaction: str | None = None,
        receipt: bool = False,
        content_length: bool = True,
    ) -> None:
        """Send a message; with ``receipt=True``, return once the broker has it.

        A ``str`` body is sent as UTF-8 text; ``headers`` is a mapping or
        ``(name, value)`` pairs of str.  ``content_length=False`` omits
        that header (ActiveMQ then delivers a text message).

        :param destination: where to send it (``/queue/work``, ``/topic/news``;
            the names a broker accepts are its own).
        :param body: the message: bytes (or a bytes-like object) or text.
        :param content_type: the ``content-type`` header (a MIME type).
        :param headers: more headers, sent as given (broker extensions,
            application properties).
        :param transaction: the id of an open :meth:`transaction`: the message
            is delivered when it commits.
        """
        self._core.take_refusal()
        tracing = self._core.options.tracing
        event, receipt_id = self._core.send_event(
            destination,
            body,
            content_type=content_type,
            headers=headers,
            transaction=transaction,
            receipt=receipt,
            content_length=content_length,
            parts=tracing is None,
        )
        if tracing is None:
            self._writer.send(event, receipt_id)
            return
        # A span around the call; the SEND carries its context.
        assert isinstance(event, Send)  # (not its parts: see send_event)
        with tracing.sending(event, self.broker, self.version) as traced:
            self._writer.send(traced, receipt_id)

    @contextmanager
    def subscribe(
        self,
        destination: str,
        *,
        ack: AckMode = "auto",
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
        id: str | None = None,
        on_message: Callable[[Message], object] | None = None,
        inline: bool = False,
    ) -> Iterator[Subscription]:
        """Subscribe for the duration of a ``with`` block.

        ``headers`` (a mapping or ``(name, value)`` pairs) carries broker
        extensions (``prefetch-count``, ``selector``, ...).

        :param destination: the queue or topic to receive from.
        :param ack: how messages are acknowledged: ``"auto"`` (by the broker, as
            it sends them), ``"client"`` (an :meth:`ack` covers every earlier
            message too) or ``"client-individual"`` (each on its own).
        :param id: the subscription's id; by default the client picks one.
        :param on_message: called with each message, in order, on a thread of
            the subscription's own (``stomp_proto-dispatch``), instead of taking
            them with ``get()``.  An exception it raises is logged with the
            message (logger ``stomp_proto.client``) and the next message comes
            all the same; heart-beats and reading never wait for it beyond the
            subscription's buffer.  The thread ends with the subscription, after
            the messages already buffered, and the ``with`` block waits for it.
        :param inline: call ``on_message`` on the thread that reads each message
            from the socket, as it is read, instead of on a thread of its own:
            no hand-off between threads, and no buffer.  It must be quick and
            must not block nor wait for the broker (a receipt, ``get()``: a
            LocalProtocolError), since nothing is read meanwhile.  Messages may
            come before ``subscribe`` returns; none after ``unsubscribe()``
            returns (it waits for a call under way).
        """
        if inline and on_message is None:
            raise LocalProtocolError(
                ErrorKind.BAD_STATE, "subscribe(inline=True) needs an on_message to call"
            )
        subscription = Subscription(self, self._core.subscribe_event(destination, ack, headers, id))
        if inline:
            subscription._inline = on_message  # before the SUBSCRIBE: messages may follow it
        self._subscribe(subscription)
        if on_message is not None and not inline:
            subscription._dispatcher = threading.Thread(
                target=_dispatch,
                args=(subscription, on_message),
                name=DISPATCH_THREAD,
                daemon=True,
            )
            subscription._dispatcher.start()
        try:
            yield subscription
        finally:
            subscription.unsubscribe()

    def _subscribe(self, subscription: Subscription) -> None:
        self._core.take_refusal()
        event, receipt = self._core.subscribing(subscription)
        try:
            self._writer.send(event, receipt)
        except BaseException:
            self._core.subscribe_done(subscription, ok=False)
            raise
        self._core.subscribe_done(subscription, ok=True)

    def unsubscribe(
        self,
        id: str,
        *,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
        receipt: bool = False,
    ) -> None:
        """UNSUBSCRIBE the subscription ``id``: one of this client's open
        subscriptions (as its :meth:`Subscription.unsubscribe`) or, with
        ``headers``, a durable one that outlives its subscription at the broker.

        :param id: the subscription's id (``subscribe(..., id=...)``).
        :param headers: more headers, sent as given: ActiveMQ removes a durable
            subscription, once its consumer is gone, by an UNSUBSCRIBE with
            ``activemq.subscriptionName`` (see :ref:`durable-subscriptions`).
        :param receipt: return only once the broker has confirmed it.
        """
        subscription = self._core.subscriptions.get(id)
        if subscription is not None:
            subscription.unsubscribe(headers=headers, receipt=receipt)
            return
        self._core.take_refusal()
        self._writer.send(*self._core.removal_event(id, headers, receipt))

    def _unsubscribe(
        self,
        subscription: Subscription,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
        receipt: bool = False,
    ) -> None:
        unsubscribe = self._core.unsubscribing(subscription, headers, receipt)
        try:
            if unsubscribe is not None and self._writer.ready.is_set() and self._core.error is None:
                if unsubscribe.receipt is not None:  # asked for: what fails is raised
                    self._writer.send(unsubscribe, unsubscribe.receipt)
                    return
                with suppress(ClientError, ProtocolError, OSError, TimeoutError):
                    self._writer.send(unsubscribe)
        finally:
            subscription._end(None)

    def ack(
        self,
        message: Message,
        *,
        transaction: str | None = None,
        receipt: bool = False,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
    ) -> None:
        """Acknowledge ``message``; the headers follow the negotiated version.

        :param transaction: the id of an open :meth:`transaction`: the
            acknowledgement takes effect when it commits.
        :param receipt: return only once the broker has confirmed it.
        :param headers: more headers, sent as given (broker extensions).
        """
        self._settle(message, transaction, receipt, headers, nack=False)

    def nack(
        self,
        message: Message,
        *,
        transaction: str | None = None,
        receipt: bool = False,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
    ) -> None:
        """Reject ``message`` (STOMP 1.1 and later): the broker delivers it again,
        or elsewhere.

        :param transaction: the id of an open :meth:`transaction`.
        :param receipt: return only once the broker has confirmed it.
        :param headers: more headers, sent as given (RabbitMQ's ``requeue:false``
            drops or dead-letters the message instead of delivering it again).
        """
        self._settle(message, transaction, receipt, headers, nack=True)

    def _settle(
        self,
        message: Message,
        transaction: str | None,
        receipt: bool,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None,
        *,
        nack: bool,
    ) -> None:
        self._core.take_refusal()
        event, receipt_id = self._core.settle_event(
            message, transaction, receipt, nack=nack, headers=headers
        )
        subscription = self._core.subscriptions.get(message.key)
        buffered = subscription._settling() if subscription is not None else 0
        wide = subscription is not None and subscription._wide_window
        hold = may_hold(receipt_id, buffered, wide)
        # An event loop that reads goes back to waiting on the socket, and nothing
        # tells the background thread that a held acknowledgement is now due.
        wake = hold and self._role.loop_reads and not self._writer.outbox
        tracing = self._core.options.tracing
        if tracing is None:
            self._writer.send(event, receipt_id, message, hold=hold)
        else:
            with tracing.settling(message, nack, self.broker, self.version):
                self._writer.send(event, receipt_id, message, hold=hold)
        if wake:
            self._role.wake_keeper()

    def request(
        self,
        destination: str,
        body: bytes | bytearray | memoryview | str = b"",
        *,
        timeout: float | None = None,
        content_type: str | None = None,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
    ) -> Message:
        """Send a request and return its reply: request/reply over a temporary queue.

        The SEND carries ``reply-to`` (a ``/temp-queue/`` destination of this
        client's) and a ``correlation-id`` of its own; the replier sends its reply
        to the ``reply-to`` it got, with the same ``correlation-id`` (see
        :ref:`request-reply`).  On RabbitMQ the broker makes the temporary queue;
        elsewhere the client subscribes to it once, at the first request.
        Replies go to their requests, never to :attr:`unsolicited` (unless they
        come too late) and never with a warning.

        :param destination: where the request goes (the replier's queue).
        :param body: the request, as for :meth:`send`.
        :param timeout: seconds to wait for the reply; ``None``: the client's
            ``timeout``.  TimeoutError after that.
        :param content_type: the ``content-type`` header, as for :meth:`send`.
        :param headers: more headers, as for :meth:`send` (not ``reply-to`` nor
            ``correlation-id``: the request sets those).
        """
        if not self._writer.ready.is_set() or self._role.closed or self._core.error is not None:
            self._writer.wait_ready()  # the broker's name decides where replies go
        reply_to, subscribe = self._core.reply_destination()
        if subscribe is not None:
            try:
                self._subscribe(Subscription(self, subscribe))
            except BaseException:
                self._core.replies.failed(subscribe)
                raise
        pairs, correlation, key = self._core.replies.started(headers, reply_to)
        waiter = self._writer.expect(key)
        seconds = self._core.options.timeout if timeout is None else timeout
        try:
            self.send(destination, body, content_type=content_type, headers=pairs)
            try:
                reply = waiter.wait(seconds)
            except TimeoutError:
                raise timed_out(f"the reply to a request to {destination}", seconds) from None
        finally:
            self._writer.waiters.pop(key, None)
            self._core.replies.ended(correlation)
        assert isinstance(reply, Message)
        return reply

    def session_events(self) -> Iterator[SessionEvent]:
        """``for event in client.session_events()``: each :class:`SessionEvent` from
        this call on - a session lost, the next one up (``"reconnected"``), the
        client giving up - until the client is over (closed, or failed for good).
        Each ``next()`` blocks until the next event.

        Each iterator keeps the events of its own from the moment it is made: none
        is missed while the loop body runs, or before the loop starts.  The
        ``on_session`` option is the callback form.
        """
        events: deque[SessionEvent | None] = deque()
        arrived = threading.Condition()

        def heard(event: SessionEvent | None) -> None:
            with arrived:
                events.append(event)
                arrived.notify_all()

        self._core.life.listen(heard)
        return self._session_events(events, arrived, heard)

    def _session_events(
        self,
        events: deque[SessionEvent | None],
        arrived: threading.Condition,
        heard: Callable[[SessionEvent | None], None],
    ) -> Iterator[SessionEvent]:
        try:
            while True:
                with arrived:
                    arrived.wait_for(lambda: bool(events))
                    event = events.popleft()
                if event is None:
                    return
                yield event
        finally:
            self._core.life.unlisten(heard)

    def begin(self) -> Transaction:
        """BEGIN a transaction, ended by its ``commit()`` or ``abort()`` (the
        :meth:`transaction` block does the same around a block)."""
        self._core.take_refusal()
        tx = self._core.next_id("tx")
        self._writer.send(Begin(tx))
        return Transaction(self, tx)

    @contextmanager
    def transaction(self) -> Iterator[str]:
        """``with client.transaction() as tx``: COMMIT on success, ABORT on an exception.

        Pass ``transaction=tx`` to ``send``, ``ack`` and ``nack`` inside the
        block.  The COMMIT waits for the broker's receipt.
        """
        self._core.take_refusal()
        tx = self._core.next_id("tx")
        self._writer.send(Begin(tx))
        try:
            yield tx
        except BaseException:
            with suppress(ClientError, ProtocolError, OSError, TimeoutError):
                self._writer.send(Abort(tx))
            raise
        self._writer.send(*self._core.commit_event(tx))


def _dispatch(subscription: Subscription, on_message: Callable[[Message], object]) -> None:
    """The thread of a subscription made with ``on_message``: each message to it, in order."""
    while True:
        try:
            message = subscription.get()
        except ClientError:
            return  # the session ended: the client's state hooks and log say how
        if message is None:
            return
        try:
            on_message(message)
        except Exception:
            _log_failed(subscription, message)


def _log_failed(subscription: Subscription, message: Message) -> None:
    """Log what ``on_message`` raised on ``message`` (in an ``except`` block)."""
    log.exception(
        "on_message of subscription %s (%s) raised on message %s; the next "
        "message is delivered all the same",
        subscription.id,
        subscription.destination,
        message.message_id,
    )


def open_client(options: ConnectOptions) -> Client:
    """A connected, logged-in :class:`Client`, on the first broker that lets us (see
    FirstConnect); errors are ClientErrors (ConnectionLost...)."""
    first = FirstConnect(options, time.monotonic)
    for wait, timeout in first.attempts():
        if wait:
            time.sleep(wait)
        client = Client(options, first.brokers)
        try:
            client._sessions.open(timeout)
        except BaseException as exc:
            client.close()
            first.failed(exc)
            continue
        return client
    raise first.error()
