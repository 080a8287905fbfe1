"""Connections to the broker, as the data sources use them.

* :class:`Consumer` - one subscription whose messages pile up in a buffer that
  the caller drains without blocking.  A daemon thread runs a
  :class:`~stomp_proto.ClientConnection` on a non-blocking socket (TLS
  included) with ``select``: it decodes straight into a deque and writes the
  ACKs the caller posts, so taking 20,000 buffered messages costs no thread
  hand-over per message.  (The library's asyncio client moves every message
  through two queues and a timeout scope, about four times slower here.)
* :class:`Producer` - a blocking socket and a :class:`~stomp_proto.ClientConnection`
  in the caller's thread, for a writer task that streams SEND frames inside
  one transaction and waits for one receipt at the end.  It asks for no
  heart-beats: between two record batches the task may be busy upstream for
  longer than any heart-beat interval.

Neither is ever pickled: the objects that Spark pickles make them lazily,
where they are used.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import queue
import select
import socket
import ssl
import threading
import time
import uuid
from collections import deque
from collections.abc import Sequence
from typing import Any

from ..._client._errors import BrokerError, ClientError, ConnectionLost
from ..._connection import ClientConnection
from ..._errors import ProtocolError
from ..._events import (
    Connected,
    ConnectionClosed,
    Disconnect,
    Error,
    Event,
    FrameEvent,
    HeartBeatTimeout,
    Message,
    Receipt,
    Subscribe,
    Unsubscribe,
)
from .._options import ConnectionSettings, ReaderSettings
from .._schema import now_us

__all__ = ["Consumer", "Producer"]

log = logging.getLogger("stomp_proto.spark")

#: Seconds a Consumer waits between looks at its buffer while someone waits for messages.
_POLL = 0.005
#: Bytes taken from a Producer's socket at a time.
_READ_SIZE = 64 * 1024


class _Flush:
    """A caller waiting until the bytes queued before its request have been written."""

    __slots__ = ("done", "target")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.target = -1


class Consumer:
    """A subscription draining into a local buffer; see the module docstring.

    One daemon thread owns the socket and the :class:`~stomp_proto.ClientConnection`:
    it reads, decodes, appends each MESSAGE to a deque, writes the frames the
    caller asks for (ACKs, the final UNSUBSCRIBE and DISCONNECT) and the
    heart-beats, multiplexing with ``select`` so that a write never blocks a
    read (the broker may stop reading from a client that does not read).  The
    caller's thread only pops from the deque and posts requests.

    ``max_buffer`` bounds the deque: past it the thread stops reading from the
    socket (heart-beats go on), and TCP slows the broker down.
    """

    def __init__(
        self, connection: ConnectionSettings, reader: ReaderSettings, *, max_buffer: int
    ) -> None:
        self._buffer: deque[tuple[int, Message]] = deque()
        self._max_buffer = max(1, max_buffer)
        self._error: BaseException | None = None
        self._ready = threading.Event()
        self._ended = threading.Event()
        self._requests: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._conn = ClientConnection()
        self._subscription = reader.subscription_id or f"spark-{uuid.uuid4().hex[:12]}"
        self._out = bytearray()
        self._written = 0  # bytes written so far (all of _out before them)
        self._flushes: list[_Flush] = []
        self._closing = False
        self._unflushed = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        try:
            sock = connection.open_socket()
        except BaseException:
            self._wake_r.close()
            self._wake_w.close()
            raise
        sock.setblocking(False)
        self._sock = sock
        self._queue(connection.connect_event())
        self._subscribe = Subscribe(
            reader.destination,
            id=self._subscription,
            ack=reader.ack,
            receipt=f"{self._subscription}-subscribed",
            headers=tuple(reader.subscription_headers().items()),
        )
        self._thread = threading.Thread(
            target=self._run, name="stomp_proto-spark-consumer", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(connection.timeout) or self._error is not None:
            error = self._error
            self._requests.put(("close", None))
            self._wake()
            self._stop(1.0)
            if error is None:
                raise TimeoutError(f"no answer from the broker within {connection.timeout:.0f} s")
            raise error
        # Spark ends its Python runners without telling the reader: leave cleanly
        # at exit, so that the ACKs sent last are not lost to a reset connection.
        atexit.register(self.close)

    # -- the caller's side -------------------------------------------------------

    @property
    def alive(self) -> bool:
        """False once the subscription has ended (the connection failed, or close())."""
        return not self._ended.is_set()

    @property
    def error(self) -> BaseException | None:
        """What ended the subscription, if it failed."""
        return self._error

    def buffered(self) -> int:
        return len(self._buffer)

    def take(self, limit: int) -> list[tuple[int, Message]]:
        """Up to ``limit`` buffered ``(received_at µs, message)`` pairs, oldest first; no wait."""
        buffer = self._buffer
        full = len(buffer) >= self._max_buffer
        count = min(limit, len(buffer))
        taken = [buffer.popleft() for _ in range(count)]
        if full and count:
            self._wake()  # the thread may read again
        return taken

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a buffered message; False if none came."""
        deadline = time.monotonic() + timeout
        while not self._buffer:
            if self._ended.is_set() or time.monotonic() >= deadline:
                return bool(self._buffer)
            time.sleep(_POLL)
        return True

    def acknowledge(self, messages: Sequence[Message], *, cumulative: bool) -> None:
        """ACK ``messages`` (only the last one, when ``cumulative``) without waiting.

        The ACKs go out in the order of the calls.  If the connection is gone
        they are dropped: the broker redelivers those messages, which
        at-least-once allows.
        """
        if messages and not self._ended.is_set():
            self._requests.put(("ack", list(messages[-1:] if cumulative else messages)))
            self._unflushed = True
            self._wake()

    def flush_acks(self, timeout: float) -> None:
        """Wait until every ACK asked for so far has been written to the socket."""
        if self._ended.is_set() or not self._unflushed:
            return
        self._unflushed = False
        flush = _Flush()
        self._requests.put(("flush", flush))
        self._wake()
        deadline = time.monotonic() + timeout
        while not flush.done.wait(_POLL * 10):
            if self._ended.is_set() or time.monotonic() > deadline:
                return

    def close(self, timeout: float = 10.0) -> None:
        """Unsubscribe and disconnect (unacknowledged messages go back to the broker)."""
        atexit.unregister(self.close)
        if not self._ended.is_set():
            self._requests.put(("close", None))
            self._wake()
        self._stop(timeout)

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def _stop(self, timeout: float) -> None:
        self._thread.join(timeout)
        self._ended.set()
        for closable in (self._sock, self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                closable.close()

    # -- the I/O thread ------------------------------------------------------------

    def _queue(self, event: FrameEvent) -> None:
        self._out += self._conn.send(event)

    def _run(self) -> None:
        try:
            self._loop()
        except ClientError as exc:
            self._error = exc
        except (ProtocolError, OSError) as exc:
            self._error = ConnectionLost(f"connection failed: {exc}")
            self._error.__cause__ = exc
        except Exception as exc:  # a bug must not leave the reader waiting forever
            self._error = ConnectionLost(f"consumer failed: {exc!r}")
            self._error.__cause__ = exc
        finally:
            self._ended.set()
            if self._error is not None:
                # Wake the constructor at once: a refused login (the broker's ERROR)
                # is reported with its reason, not after the connect timeout.
                self._ready.set()
            for flush in self._flushes:
                flush.done.set()

    def _loop(self) -> None:
        sock, conn, buffer = self._sock, self._conn, self._buffer
        bye = f"{self._subscription}-bye"
        while True:
            self._serve_requests(bye)
            # Past max_buffer, stop reading; but never before the subscription is
            # made, nor while closing (the receipts are behind the messages).
            reading = len(buffer) < self._max_buffer or not self._ready.is_set() or self._closing
            deadline = conn.get_timer()
            now = time.monotonic()
            if deadline is not None and deadline <= now:
                self._out += conn.handle_timer(now, reading=reading)
                deadline = conn.get_timer()
            timeout = None if deadline is None else max(0.0, deadline - now)
            pending = isinstance(sock, ssl.SSLSocket) and sock.pending() > 0
            readers = [self._wake_r, sock] if reading else [self._wake_r]
            writers = [sock] if self._out else []
            if pending and reading:
                readable: list[Any] = [sock]
            else:
                readable, writable, _ = select.select(readers, writers, [], timeout)
                if writable:
                    self._write()
            if self._wake_r in readable:
                with contextlib.suppress(OSError):
                    while self._wake_r.recv(4096):
                        pass
            if sock in readable:
                try:
                    data = sock.recv(_READ_SIZE)
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                    continue
                conn.receive_data(data or None)
            received_at = now_us()  # one clock reading per read from the socket
            while (event := conn.next_event()) is not None:
                if isinstance(event, Message):
                    buffer.append((received_at, event))
                elif isinstance(event, Receipt):
                    if event.receipt_id == bye:
                        return
                    if event.receipt_id == self._subscribe.receipt:
                        self._ready.set()
                elif isinstance(event, Connected):
                    self._queue(self._subscribe)
                elif isinstance(event, Error):
                    raise BrokerError(event)
                elif isinstance(event, (ConnectionClosed, HeartBeatTimeout)):
                    raise ConnectionLost("the broker closed the connection")

    def _serve_requests(self, bye: str) -> None:
        conn = self._conn
        while True:
            try:
                kind, value = self._requests.get_nowait()
            except queue.Empty:
                break
            if kind == "ack":
                for message in value:
                    self._out += conn.ack(message)
            elif kind == "flush":
                value.target = self._written + len(self._out)
                self._flushes.append(value)
            elif kind == "close" and not self._closing:
                if not self._ready.is_set():
                    raise ConnectionLost("closed before the subscription was made")
                self._closing = True
                self._queue(Unsubscribe(id=self._subscription))
                self._queue(Disconnect(receipt=bye))
        if self._flushes:
            written = self._written
            for flush in self._flushes:
                if flush.target <= written:
                    flush.done.set()
            self._flushes = [f for f in self._flushes if not f.done.is_set()]

    def _write(self) -> None:
        try:
            sent = self._sock.send(self._out)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
            return
        del self._out[:sent]
        self._written += sent
        if self._flushes:
            for flush in self._flushes:
                if flush.target <= self._written:
                    flush.done.set()
            self._flushes = [f for f in self._flushes if not f.done.is_set()]


class Producer:
    """A blocking, single-threaded sending connection; see the module docstring.

    Frames go out either as events through the connection (:meth:`send`,
    :meth:`request`) or, for bulk SENDs, as bytes made by a
    :class:`~stomp_proto.FrameEncoder` of the negotiated version (:meth:`write`).
    """

    def __init__(self, settings: ConnectionSettings) -> None:
        self._timeout = settings.timeout
        self._conn = ClientConnection()
        sock = self._sock = settings.open_socket()
        try:
            self.send(settings.connect_event(heartbeat=(0, 0)))
            self._expect(Connected)
        except BaseException:
            sock.close()
            raise

    @property
    def connection(self) -> ClientConnection:
        return self._conn

    def write(self, data: bytes) -> None:
        """Write bytes that are whole frames of the negotiated version."""
        try:
            self._sock.sendall(data)
        except OSError as exc:
            raise self._failure(exc) from exc

    def send(self, event: FrameEvent) -> None:
        self.write(self._conn.send(event))

    def request(self, event: FrameEvent) -> None:
        """Send ``event`` (which asks for a receipt) and wait for its RECEIPT."""
        receipt = getattr(event, "receipt", None)
        assert receipt is not None, "request() needs an event with a receipt"
        self.send(event)
        self.wait_for_receipt(receipt)

    def wait_for_receipt(self, receipt: str) -> None:
        """Read until the RECEIPT for ``receipt`` arrives."""
        while True:
            answer = self._expect(Receipt)
            assert isinstance(answer, Receipt)
            if answer.receipt_id == receipt:
                return

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()

    def _expect(self, kind: type[Event]) -> Event:
        """Read until an event of ``kind`` arrives; an ERROR or the end of the stream raises."""
        while True:
            try:
                event = self._conn.next_event()
            except ProtocolError as exc:
                raise ConnectionLost(f"bad data from the broker: {exc}") from exc
            if event is None:
                try:
                    data = self._sock.recv(_READ_SIZE)
                except TimeoutError:
                    raise TimeoutError(
                        f"no answer from the broker within {self._timeout:.0f} s"
                    ) from None
                except OSError as exc:
                    raise self._failure(exc) from exc
                self._conn.receive_data(data or None)
                continue
            if isinstance(event, kind):
                return event
            if isinstance(event, Error):
                raise BrokerError(event)
            if isinstance(event, (ConnectionClosed, HeartBeatTimeout)):
                raise ConnectionLost("the broker closed the connection")
            # Heart-beats and anything else are not what we wait for.

    def _failure(self, exc: OSError) -> ClientError:
        """The error to raise for a failed write: the broker's ERROR, when it sent one."""
        with contextlib.suppress(Exception):
            self._sock.settimeout(1.0)
            while True:
                data = self._sock.recv(_READ_SIZE)
                self._conn.receive_data(data or None)
                while (event := self._conn.next_event()) is not None:
                    if isinstance(event, Error):
                        return BrokerError(event)
                if not data:
                    break
        return ConnectionLost(f"connection to the broker failed: {exc}")
