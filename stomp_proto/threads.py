"""The blocking STOMP client, for plain scripts and threaded programs.

.. code-block:: python

    with stomp_proto.threads.connect("127.0.0.1", 61613) as client:
        with client.subscribe("/queue/work", ack="client-individual") as messages:
            client.send("/queue/work", b"hello", receipt=True)
            for message in messages:
                client.ack(message)
                break

How it works: a socket (TCP, TLS or a WebSocket), one reader thread and a
:class:`~stomp_proto.ClientConnection`.  The reader feeds the connection,
hands messages to their subscription's bounded buffer, completes receipt
waits, keeps heart-beats and reconnects.  Every call that writes - ``send``,
``ack``, ``nack``, transactions - makes its frame and writes it from the
caller's own thread, under a lock that keeps frames whole and in order; no
other thread is involved.  An ACK or NACK without a receipt, made while
more messages of its subscription are buffered, may wait up to 20 ms to go out
with the next frames (see ``Outbox`` in the client core): one write and one
broker wake-up for many acknowledgements.  The client may be used from any
number of threads at once.  What it shares with the async clients (options, ids, routing,
errors, the reconnect schedule) is in the sans-IO ``ClientCore``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from types import TracebackType
from typing import Unpack

from ._client._backend import BlockingStream
from ._client._blocking import open_stream
from ._client._core import (
    CONNECT_WAITER,
    OUTBOX_DELAY,
    Backoff,
    BrokerError,
    ClientCore,
    ClientError,
    ClientOptions,
    ConnectionLost,
    ConnectOptions,
    End,
    HeartBeatLost,
    Outbox,
    Resolve,
    wide_window,
)
from ._connection import ClientConnection
from ._errors import ProtocolError
from ._events import (
    Abort,
    AckMode,
    Begin,
    Event,
    FrameEvent,
    Message,
    Subscribe,
)
from ._frame import Version
from ._state import ConnectionState

__all__ = [
    "Backoff",
    "BrokerError",
    "Client",
    "ClientError",
    "ConnectionLost",
    "HeartBeatLost",
    "Subscription",
    "connect",
]

#: The reader thread's name (one per connected client).
READER_THREAD = "stomp_proto-reader"


class _Waiter:
    """One thread waits for a result another thread sets (a receipt, CONNECTED)."""

    __slots__ = ("_done", "_error", "_value")

    def __init__(self) -> None:
        self._done = threading.Event()
        self._value: Event | Message | None = None
        self._error: BaseException | None = None

    def set_result(self, value: Event | Message) -> None:
        if not self._done.is_set():
            self._value = value
            self._done.set()

    def set_exception(self, error: BaseException) -> None:
        if not self._done.is_set():
            self._error = error
            self._done.set()

    def wait(self, timeout: float | None) -> Event | Message | None:
        if not self._done.wait(timeout):
            raise TimeoutError("no answer from the broker in time")
        if self._error is not None:
            raise self._error
        return self._value


class Subscription:
    """Messages of one subscription: ``for message in subscription``.

    Its buffer holds up to ``max_pending_messages``; when it is full the
    reader stops reading from the socket (heart-beats go on) until the
    consumer catches up.  Any thread may take messages.
    """

    def __init__(self, client: Client, event: Subscribe) -> None:
        self._client = client
        self._event = event
        self._limit = client._options.max_pending_messages
        self._messages: deque[Message] = deque()
        lock = threading.Lock()
        self._lock = lock
        self._arrived = threading.Condition(lock)
        self._room = threading.Condition(lock)
        self._takers = 0  # threads waiting in get(): notify only when there are some
        self._ended = False
        self._error: ClientError | None = None
        self._active = False
        #: The receipt id of its SUBSCRIBE while that is awaited.
        self._receipt: str | None = None
        #: Whether acknowledgements may stay held while get() waits (see wide_window).
        self._wide_window = wide_window(event)

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
        outbox = self._client._outbox
        while True:
            with self._lock:
                messages = self._messages
                if messages:
                    if len(messages) == self._limit:
                        self._room.notify()  # the reader may be waiting for room
                    return messages.popleft()
                if self._ended:
                    if self._error is not None:
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
                        raise TimeoutError("no message in time")
                    self._takers += 1
                    try:
                        self._arrived.wait(wait)
                    finally:
                        self._takers -= 1
                    continue
            self._client._flush_outbox()

    def __iter__(self) -> Iterator[Message]:
        while (message := self.get()) is not None:
            yield message

    def _put_all(self, group: list[Message]) -> int:
        """Buffer as many of ``group`` as there is room for; how many that was.

        One lock and one wake-up for all the messages of one read: a consumer
        woken per message would fight the reader for the lock and the GIL.
        """
        with self._lock:
            if self._ended:
                return len(group)  # nobody takes them: dropped
            messages = self._messages
            room = self._limit - len(messages)
            if room <= 0:
                return 0
            taken = group if len(group) <= room else group[:room]
            messages.extend(taken)
            if self._takers:
                self._arrived.notify(len(taken))
            return len(taken)

    def _put(self, message: Message, timeout: float | None = None, *, wait: bool = False) -> bool:
        """Buffer ``message``; False if full (after waiting ``timeout`` for room)."""
        with self._lock:
            messages = self._messages
            if len(messages) >= self._limit and not self._ended:
                if not wait:
                    return False
                self._room.wait(timeout)
                if len(messages) >= self._limit and not self._ended:
                    return False
            if not self._ended:  # after the end, nobody takes it: dropped
                messages.append(message)
                if self._takers:
                    self._arrived.notify()
            return True

    def _end(self, error: ClientError | None) -> None:
        with self._lock:
            if self._ended:
                return
            self._ended = True
            self._error = error
            self._active = False
            self._arrived.notify_all()
            self._room.notify_all()


class Client:
    """A connected, blocking STOMP client; make one with :func:`connect`.

    Safe to use from many threads at once.
    """

    def __init__(self, options: ConnectOptions) -> None:
        self._options = options
        self._core: ClientCore[Subscription] = ClientCore(options)
        #: Guards the ClientConnection (the reader and writers both use it); never
        #: held across I/O.
        self._state_lock = threading.Lock()
        #: Keeps "make the frame, write it" atomic: frames reach the wire whole
        #: and in the order the connection made them.
        self._write_lock = threading.Lock()
        #: Acknowledgements held back for the current connection (under _write_lock).
        self._outbox = Outbox()
        self._stream: BlockingStream | None = None
        self._reader: threading.Thread | None = None
        self._waiters: dict[str, _Waiter] = {}
        #: Set while writers need not wait: a session is up, or the client has
        #: ended (closed, or failed for good) and writers must hear so.  Writers
        #: wait for it between sessions.
        self._ready = threading.Event()
        #: What ended the last session (set as _ready is cleared, under _state_lock).
        self._ended_by: ClientError | None = None
        #: Set by close(): interrupts the reconnect schedule's waits.
        self._stopping = threading.Event()
        self._closed = False
        self._connected_once = False
        #: Messages for subscriptions this client did not make (e.g. RabbitMQ
        #: /temp-queue/ replies); the oldest are dropped when it is full.
        self.unsolicited: deque[Message] = deque(maxlen=options.max_pending_messages)

    # -- inspection --------------------------------------------------------------

    @property
    def version(self) -> Version | None:
        """The negotiated STOMP version of the current connection."""
        return self._core.conn.version

    @property
    def connection(self) -> ClientConnection:
        """The current sans-IO connection (for inspection)."""
        return self._core.conn

    # -- lifecycle ---------------------------------------------------------------

    def _open(self) -> None:
        """Connect, start the reader, wait for CONNECTED (the first connect)."""
        stream = self._start(self._core.conn)
        connected = self._expect(CONNECT_WAITER)
        self._reader = threading.Thread(
            target=self._run, args=(stream, self._core.conn), name=READER_THREAD, daemon=True
        )
        self._reader.start()
        connected.wait(self._options.timeout)

    def _start(self, conn: ClientConnection) -> BlockingStream:
        """Open a stream and write the CONNECT on it."""
        stream, versions = open_stream(self._options)
        try:
            with self._state_lock:
                data = conn.send(self._options.connect_event(versions))
            stream.send(data)
        except BaseException:
            stream.close()
            raise
        self._stream = stream
        return stream

    def _connected(self, stream: BlockingStream, conn: ClientConnection) -> None:
        """CONNECTED came (reader thread): restore subscriptions, let writers in."""
        with self._write_lock:
            for subscribe in self._core.restore_subscriptions():
                with self._state_lock:
                    data = conn.send(subscribe)
                stream.send(data)
        self._connected_once = True
        self._core.reconnects.started(time.monotonic())
        with self._state_lock:
            if not self._closed:
                self._ready.set()

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
        """Leave gracefully (DISCONNECT and its receipt), then close."""
        if self._closed:
            return  # already closed: like the async clients, a no-op
        try:
            if self._ready.is_set() and self._core.error is None:
                with suppress(ClientError, TimeoutError, ProtocolError, OSError):
                    self._send(*self._core.disconnect_event())
        finally:
            self.close()

    def close(self) -> None:
        """Drop the connection at once (no DISCONNECT) and stop the reader thread.

        Any thread may call it; blocked calls return (a waiting ``get`` returns
        ``None``, a receipt wait raises ConnectionLost).
        """
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
            self._ready.set()  # a writer waiting for a session sees the end
        self._stopping.set()
        stream = self._stream
        # Acknowledgements already made go out first, unless a writer is stuck
        # on a full socket (close() must not wait for the broker).
        if self._outbox:
            self._flush_outbox(wait=False)
        if stream is not None:
            stream.shutdown()  # the reader sees the end and leaves
        self._finish(None)  # wakes a reader waiting for room, and every consumer
        reader = self._reader
        if reader is not None and reader is not threading.current_thread():
            reader.join()
        if stream is not None:
            with suppress(Exception):
                stream.close()
        self._fail_waiters(ConnectionLost("the client is closed"))

    # -- reading (the reader thread) ---------------------------------------------

    def _run(self, stream: BlockingStream, conn: ClientConnection) -> None:
        """The reader thread: read sessions one after another while reconnecting."""
        while True:
            connected, error = self._read(stream, conn)
            with self._state_lock:
                if not self._closed:  # close() leaves it set: writers must see the end
                    self._ready.clear()
                self._ended_by = error
            with self._write_lock:
                self._outbox.clear()  # acknowledgements of a connection that is gone
            self._fail_waiters(error)
            with suppress(Exception):
                stream.close()
            if self._closed:
                return
            if not self._connected_once or not self._core.again(error, time.monotonic()):
                self._finish(error)
                return
            if not connected and not isinstance(error, BrokerError):
                error = ConnectionLost(f"reconnect failed: {error}")
            while True:
                delay = self._core.reconnects.next_delay()
                if delay is None:
                    self._finish(error)
                    return
                if self._stopping.wait(delay):
                    return
                with self._state_lock:
                    conn = self._core.new_connection()
                try:
                    stream = self._start(conn)
                    break
                except (OSError, ClientError, ProtocolError) as exc:
                    error = ConnectionLost(f"reconnect failed: {exc}")
            if self._closed:  # close() came while connecting: it did not see this stream
                stream.close()
                return

    def _read(self, stream: BlockingStream, conn: ClientConnection) -> tuple[bool, ClientError]:
        """Read one session until it ends; whether it got CONNECTED, and why it ended."""
        connected = False
        timeout = self._options.timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        events: list[Event] = []
        try:
            while True:
                failure: ProtocolError | None = None
                with self._state_lock:
                    try:
                        while (event := conn.next_event()) is not None:
                            events.append(event)
                    except ProtocolError as exc:
                        failure = exc  # what came before it is still handled
                arrived: list[Message] = []  # handed over together (see _deliver)
                for event in events:
                    route = self._core.route(event)
                    if type(route) is Message:
                        arrived.append(route)
                        continue
                    if arrived:  # messages first, in the order they came
                        self._deliver(arrived, stream, conn)
                        arrived = []
                    if type(route) is Resolve:
                        if route.key == CONNECT_WAITER:
                            self._connected(stream, conn)
                            connected = True
                        waiter = self._waiters.pop(route.key, None)
                        if waiter is not None:
                            waiter.set_result(route.value)
                    elif type(route) is End:
                        return connected, route.error
                if arrived:
                    self._deliver(arrived, stream, conn)
                events.clear()
                if failure is not None:
                    raise failure
                if not connected and deadline is not None and time.monotonic() > deadline:
                    return connected, ConnectionLost("no CONNECTED from the broker in time")
                wait = self._next_wake(conn)
                if not connected and deadline is not None:
                    left = max(0.0, deadline - time.monotonic())
                    wait = left if wait is None else min(wait, left)
                if not stream.wait_readable(wait):
                    self._on_timer(stream, conn, reading=True)
                    continue
                data = stream.receive()
                with self._state_lock:
                    conn.receive_data(data)
        except (ProtocolError, OSError) as exc:
            error = ConnectionLost(f"connection failed: {exc}")
            error.__cause__ = exc
        except Exception as exc:  # a bug must not leave waiters hanging
            error = ConnectionLost(f"client failed: {exc!r}")
            error.__cause__ = exc
        return connected, error

    def _until_timer(self, conn: ClientConnection) -> float | None:
        deadline = conn.get_timer()
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    def _next_wake(self, conn: ClientConnection) -> float | None:
        """Seconds the reader may wait: until the connection's timer, and no more
        than the outbox's delay while a consumer may hold acknowledgements back
        (its subscription has messages buffered, or a wide window), so that
        what is held goes out in time even if the consumer stops asking."""
        wait = self._until_timer(conn)
        handles = list(self._core.subscriptions.values())
        if self._outbox or any(h._messages or h._wide_window for h in handles):
            wait = OUTBOX_DELAY if wait is None else min(wait, OUTBOX_DELAY)
        return wait

    def _on_timer(self, stream: BlockingStream, conn: ClientConnection, *, reading: bool) -> None:
        now = time.monotonic()
        with self._state_lock:
            beat = conn.handle_timer(now, reading=reading)
        due = self._outbox.deadline()
        if not beat and (due is None or due > now):
            return
        # A writer holding the lock is sending bytes, which count as a beat
        # (and it writes what the outbox holds).
        if self._write_lock.acquire(blocking=False):
            try:
                data = self._outbox.take(beat)
                if data:
                    stream.send(data)
            finally:
                self._write_lock.release()

    def _flush_outbox(self, *, wait: bool = True) -> None:
        """Write the acknowledgements held back, if any (any thread).

        ``wait=False``: not if another writer holds the write lock.
        """
        if not self._write_lock.acquire(blocking=wait):
            return
        try:
            stream = self._stream
            data = self._outbox.take()
            if data and stream is not None:
                with suppress(OSError):  # the reader sees the failure and ends the session
                    stream.send(data)
        finally:
            self._write_lock.release()

    def _deliver(
        self, arrived: list[Message], stream: BlockingStream, conn: ClientConnection
    ) -> None:
        """Hand messages that arrived together to their subscriptions, in order."""
        groups: dict[Subscription, list[Message]] = {}
        for message in arrived:
            subscription, receipt = self._core.target(message)
            if subscription is None:
                self.unsolicited.append(message)
                continue
            if receipt is not None:
                waiter = self._waiters.pop(receipt, None)
                if waiter is not None:
                    waiter.set_result(message)
            groups.setdefault(subscription, []).append(message)
        for subscription, group in groups.items():
            taken = subscription._put_all(group)  # the common case: room for all
            for message in group[taken:]:
                # A full buffer pauses reading (back-pressure) but not heart-beats.
                while not subscription._put(message, self._next_wake(conn), wait=True):
                    self._on_timer(stream, conn, reading=False)

    def _fail_waiters(self, error: ClientError) -> None:
        with self._state_lock:
            waiters = list(self._waiters.values())
            self._waiters.clear()
        for waiter in waiters:
            waiter.set_exception(error)

    def _finish(self, error: ClientError | None) -> None:
        """The client is over: end every subscription, and release waiting writers."""
        self._core.finish(error)
        self._ready.set()

    # -- writing (any thread) -------------------------------------------------------

    def _why_send_failed(self, stream: BlockingStream, exc: OSError) -> ClientError:
        """The error a failed write raises: the broker's ERROR when it sent one.

        A broker that refuses a frame sends an ERROR and closes; a write can
        find the connection reset or closed before the reader has handled that
        ERROR (over WebSocket, the close frame behind it closes the channel at
        once).  So wait, bounded by the timeout, for the reader to end the
        session written on, and raise what ended it.
        """
        lost = ConnectionLost(f"connection failed: {exc}")
        if threading.current_thread() is self._reader:
            return lost  # it cannot wait for itself
        key = f"write failed in thread {threading.get_ident()}"
        with self._state_lock:
            # The reader records the reason and clears _ready under this lock,
            # then fails every waiter.
            live = self._ready.is_set() and self._stream is stream
            if not live or self._closed or self._core.error is not None:
                return self._core.error or self._ended_by or lost
            waiter = self._expect(key)
        try:
            waiter.wait(self._options.timeout)
        except ClientError as ended:
            return ended
        except TimeoutError:
            pass
        finally:
            self._waiters.pop(key, None)
        return lost

    def _expect(self, key: str) -> _Waiter:
        waiter = _Waiter()
        self._waiters[key] = waiter
        return waiter

    def _wait_ready(self) -> None:
        """Wait until a session is up, or until the client has ended.

        ``_ready`` is set by a session that is up, and also by close() and by
        the end of the client: a sender that found the client between sessions
        wakes for those too, and then fails.
        """
        if not self._ready.wait(self._options.timeout):
            # The connection is what is missing, not an answer: say so.
            raise ConnectionLost(
                f"no session with the broker within {self._options.timeout} s (reconnecting)"
            )
        if self._core.error is not None:
            raise self._core.error
        if self._closed:
            raise ConnectionLost("the client is closed")

    def _send(
        self,
        event: FrameEvent,
        receipt: str | None = None,
        settles: Message | None = None,
        *,
        hold: bool = False,
    ) -> Event | Message | None:
        """Write ``event`` from this thread; with ``receipt``, wait for the broker's answer.

        ``settles``: the message an ACK or NACK is for (it must have come on
        the current connection).  ``hold``: it may wait in the outbox.
        """
        if not self._ready.is_set() or self._closed or self._core.error is not None:
            self._wait_ready()
        waiter: _Waiter | None = None
        failed: OSError | None = None
        with self._write_lock:
            with self._state_lock:
                conn = self._core.conn
                stream = self._stream
                if conn.state is ConnectionState.CLOSED or stream is None:
                    raise self._core.error or ConnectionLost("the connection is closed")
                if settles is not None:
                    conn.check_delivered(settles)
                data = conn.send(event)
                if receipt is not None:
                    waiter = self._waiters[receipt] = _Waiter()
            if hold:
                if not self._outbox.hold(data, time.monotonic()):
                    return None
                data = self._outbox.take()
            else:
                data = self._outbox.take(data)
            try:
                stream.send(data)
            except OSError as exc:
                self._waiters.pop(receipt or "", None)
                failed = exc
        if failed is not None:  # outside the write lock: the reader takes it as a session ends
            raise self._why_send_failed(stream, failed) from failed
        if waiter is None:
            return None
        try:
            return waiter.wait(self._options.timeout)
        finally:
            self._waiters.pop(receipt or "", None)

    def send(
        self,
        destination: str,
        body: bytes | str = b"",
        *,
        content_type: str | None = None,
        headers: Mapping[str, str] | None = None,
        transaction: str | None = None,
        receipt: bool = False,
        content_length: bool = True,
    ) -> None:
        """Send a message; with ``receipt=True``, return once the broker has it.

        A ``str`` body is sent as UTF-8 text.  ``content_length=False`` omits
        that header (ActiveMQ then delivers a text message).
        """
        event, receipt_id = self._core.send_event(
            destination,
            body,
            content_type=content_type,
            headers=headers,
            transaction=transaction,
            receipt=receipt,
            content_length=content_length,
        )
        self._send(event, receipt_id)

    @contextmanager
    def subscribe(
        self,
        destination: str,
        *,
        ack: AckMode = "auto",
        headers: Mapping[str, str] | None = None,
        id: str | None = None,
    ) -> Iterator[Subscription]:
        """Subscribe for the duration of a ``with`` block.

        ``headers`` carries broker extensions (``prefetch-count``, ``selector``, ...).
        """
        subscription = Subscription(self, self._core.subscribe_event(destination, ack, headers, id))
        self._subscribe(subscription)
        try:
            yield subscription
        finally:
            self._unsubscribe(subscription)

    def _subscribe(self, subscription: Subscription) -> None:
        event, receipt = self._core.subscribing(subscription)
        try:
            self._send(event, receipt)
        except BaseException:
            self._core.subscribe_done(subscription, ok=False)
            raise
        self._core.subscribe_done(subscription, ok=True)

    def _unsubscribe(self, subscription: Subscription) -> None:
        unsubscribe = self._core.unsubscribing(subscription)
        if unsubscribe is not None and self._ready.is_set() and self._core.error is None:
            with suppress(ClientError, ProtocolError, OSError, TimeoutError):
                self._send(unsubscribe)
        subscription._end(None)

    def ack(
        self, message: Message, *, transaction: str | None = None, receipt: bool = False
    ) -> None:
        """Acknowledge ``message``; the headers follow the negotiated version."""
        self._settle(message, transaction, receipt, nack=False)

    def nack(
        self, message: Message, *, transaction: str | None = None, receipt: bool = False
    ) -> None:
        """Reject ``message`` (STOMP 1.1 and later)."""
        self._settle(message, transaction, receipt, nack=True)

    def _settle(
        self, message: Message, transaction: str | None, receipt: bool, *, nack: bool
    ) -> None:
        event, receipt_id = self._core.settle_event(message, transaction, receipt, nack=nack)
        subscription = self._core.subscriptions.get(message.key)
        buffered = len(subscription._messages) if subscription is not None else 0
        wide = subscription is not None and subscription._wide_window
        hold = self._core.may_hold(receipt_id, buffered, wide)
        self._send(event, receipt_id, message, hold=hold)

    @contextmanager
    def transaction(self) -> Iterator[str]:
        """``with client.transaction() as tx``: COMMIT on success, ABORT on an exception.

        Pass ``transaction=tx`` to ``send``, ``ack`` and ``nack`` inside the
        block.  The COMMIT waits for the broker's receipt.
        """
        tx = self._core.next_id("tx")
        self._send(Begin(tx))
        try:
            yield tx
        except BaseException:
            with suppress(ClientError, ProtocolError, OSError, TimeoutError):
                self._send(Abort(tx))
            raise
        self._send(*self._core.commit_event(tx))


def connect(host: str = "127.0.0.1", port: int = 61613, **options: Unpack[ClientOptions]) -> Client:
    """Connect and log in; returns a :class:`Client` (use it in a ``with`` block).

    ``options`` are described by :class:`~stomp_proto.ClientOptions`.  Errors
    are :class:`ConnectionLost` and :class:`BrokerError`.
    """
    client = Client(ConnectOptions.build(host, port, options))
    try:
        client._open()
    except ClientError:
        client.close()
        raise
    except (OSError, TimeoutError, ProtocolError) as exc:
        client.close()
        raise ConnectionLost(f"cannot connect to {host}:{port}: {exc}") from exc
    except BaseException:
        client.close()
        raise
    return client
