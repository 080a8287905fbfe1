"""The threads client's writing side: the stream, the locks, the outbox, the waits.

Every call that writes makes its frame and writes it from the caller's own
thread, under a lock that keeps frames whole and in order; an ACK or NACK
without a receipt may wait in the :class:`~stomp_proto._client._outbox.Outbox`
to go out with the next frames.  A frame that asks for a receipt leaves a
:class:`~stomp_proto._client._read_role.Waiter` that whoever holds the read
role completes.  :class:`Writer` owns that state; the client reads it.
"""

from __future__ import annotations

import threading
import time
from contextlib import suppress
from typing import Any

from .._connection import ClientConnection, SendParts
from .._events import Event, FrameEvent, Message
from .._state import ConnectionState
from ._backend import BlockingStream
from ._core import ClientCore, PlainSettle
from ._errors import BrokerError, ClientError, ConnectionLost, reason
from ._outbox import Outbox
from ._read_role import ReadRole, Waiter, waits_on_itself

__all__ = ["Writer"]


class Writer:
    """The writing side of one threads client (any thread writes through it)."""

    def __init__(self, core: ClientCore[Any], role: ReadRole, timeout: float | None) -> None:
        self._core = core
        self._role = role
        self._timeout = timeout
        #: Guards the ClientConnection (readers and writers both use it); never
        #: held across I/O.
        self.state_lock = threading.Lock()
        #: Keeps "make the frame, write it" atomic: frames reach the wire whole
        #: and in the order the connection made them.
        self.write_lock = threading.Lock()
        #: Acknowledgements held back for the current connection (under write_lock).
        self.outbox = Outbox()
        #: The stream of the current session (or of the last one).
        self.stream: BlockingStream | None = None
        #: The background thread (it cannot wait for itself).
        self.reader: threading.Thread | None = None
        #: The waits for an answer, by receipt (or other) key.
        self.waiters: dict[str, Waiter] = {}
        #: Set while writers need not wait: a session is up, or the client has
        #: ended (closed, or failed for good) and writers must hear so.  Writers
        #: wait for it between sessions.
        self.ready = threading.Event()
        #: What ended the last session (set as ready is cleared, under state_lock).
        self.ended_by: ClientError | None = None

    def end_session(self, error: ClientError, stream: BlockingStream | None = None) -> None:
        """The session is over (seen by the role's holder, or by a caller that gave up
        on the broker: then ``stream`` is the one it wrote on, and the session on it
        ends unless it has already); the background thread takes over."""
        with self._role.lock:
            if stream is not None and stream is not self.stream:
                return
            self._role.end_session(error)

    def on_timer(self, stream: BlockingStream, conn: ClientConnection, *, reading: bool) -> None:
        now = time.monotonic()
        with self.state_lock:
            beat = conn.handle_timer(now, reading=reading)
        due = self.outbox.deadline()
        if not beat and (due is None or due > now):
            return
        # A writer holding the lock is sending bytes, which count as a beat
        # (and it writes what the outbox holds).
        if self.write_lock.acquire(blocking=False):
            try:
                data = self.outbox.take(beat)
                if data:
                    stream.send(data)
            finally:
                self.write_lock.release()

    def flush_outbox(self, *, wait: bool = True) -> None:
        """Write the acknowledgements held back, if any (any thread).

        ``wait=False``: not if another writer holds the write lock.
        """
        if not self.write_lock.acquire(blocking=wait):
            return
        try:
            stream = self.stream
            data = self.outbox.take()
            if data and stream is not None:
                with suppress(OSError):  # the reader sees the failure and ends the session
                    stream.send(data)
        finally:
            self.write_lock.release()

    def fail_waiters(self, error: ClientError) -> None:
        with self.state_lock:
            waiters = list(self.waiters.values())
            self.waiters.clear()
        for waiter in waiters:
            waiter.set_exception(error)

    def _why_send_failed(self, stream: BlockingStream, exc: OSError) -> ClientError:
        """The error a failed write raises: the broker's ERROR when it sent one.

        A broker that refuses a frame sends an ERROR and closes; a write can
        find the connection reset or closed before the reader has handled that
        ERROR (over WebSocket, the close frame behind it closes the channel at
        once).  So wait, bounded by the timeout, for the session written on to
        end (reading for it if nobody else does), and raise what ended it.
        """
        lost = ConnectionLost(f"connection failed: {reason(exc)}")
        if threading.current_thread() is self.reader or self._role.reads_here():
            return lost  # it cannot wait for itself
        key = f"write failed in thread {threading.get_ident()}"
        with self.state_lock:
            # The background thread records the reason and clears _ready under
            # this lock, then fails every waiter.
            live = self.ready.is_set() and self.stream is stream
            if not live or self._role.closed or self._core.error is not None:
                return self._core.error or self.ended_by or lost
            waiter = self.expect(key)
        try:
            waiter.wait(self._timeout)
        except ClientError as ended:
            return ended
        except TimeoutError:
            pass
        finally:
            self.waiters.pop(key, None)
        return lost

    def expect(self, key: str) -> Waiter:
        waiter = Waiter(self._role)
        self.waiters[key] = waiter
        return waiter

    def wait_ready(self) -> None:
        """Wait until a session is up, or until the client has ended.

        ``_ready`` is set by a session that is up, and also by close() and by
        the end of the client: a sender that found the client between sessions
        wakes for those too, and then fails.
        """
        if not self.ready.wait(self._timeout):
            # The connection is what is missing, not an answer: say so.
            raise ConnectionLost(
                f"no session with the broker within {self._timeout} s (reconnecting)"
            )
        if self._core.error is not None:
            raise self._core.error
        if self._role.closed:
            raise ConnectionLost("the client is closed")

    def send(
        self,
        event: FrameEvent | PlainSettle | SendParts,
        receipt: str | None = None,
        settles: Message | None = None,
        *,
        hold: bool = False,
    ) -> Event | Message | None:
        """Write ``event`` from this thread; with ``receipt``, wait for the broker's answer."""
        try:
            return self._write(event, receipt, settles, hold=hold)
        except BrokerError as exc:
            self._core.reported(exc)  # told now: not again at the next call
            raise

    def _write(
        self,
        event: FrameEvent | PlainSettle | SendParts,
        receipt: str | None = None,
        settles: Message | None = None,
        *,
        hold: bool = False,
    ) -> Event | Message | None:
        """Write ``event`` from this thread; with ``receipt``, wait for the broker's answer.

        ``settles``: the message an ACK or NACK is for (it must have come on
        the current connection).  ``hold``: it may wait in the outbox.
        """
        if not self.ready.is_set() or self._role.closed or self._core.error is not None:
            self.wait_ready()
        if receipt is not None and self._role.reads_here():
            raise waits_on_itself()  # before the frame goes: nobody would read its receipt
        waiter: Waiter | None = None
        failed: OSError | None = None
        with self.write_lock:
            with self.state_lock:
                conn = self._core.conn
                stream = self.stream
                if conn.state is ConnectionState.CLOSED or stream is None:
                    raise self._core.error or ConnectionLost("the connection is closed")
                data = self._core.frame(conn, event, settles)
                if receipt is not None:
                    waiter = self.waiters[receipt] = Waiter(self._role)
            if hold:
                if not self.outbox.hold(data, time.monotonic()):
                    return None
                data = self.outbox.take()
            else:
                data = self.outbox.take(data)
            try:
                stream.send(data)
            except OSError as exc:
                self.waiters.pop(receipt or "", None)
                failed = exc
        if failed is not None:  # outside the write lock: the session's end takes it
            raise self._why_send_failed(stream, failed) from failed
        if waiter is None:
            return None
        try:
            return waiter.wait(self._timeout)
        except TimeoutError:
            assert not isinstance(event, (PlainSettle, tuple))  # (those want no receipt)
            paused = self._role.overflowing > 0  # without the hub lock: at worst a moment stale
            timed_out, lost = self._core.receipt_timed_out(event, self._timeout, paused=paused)
            if lost is not None:
                self.end_session(lost, stream)
                stream.shutdown()  # wakes the thread reading it
            raise timed_out from None
        finally:
            self.waiters.pop(receipt or "", None)
