"""The async client's writing side: the write lock, the waits for answers, readiness.

Callers write, each in its own task; a lock keeps "make the frame, write
it" atomic so that frames reach the wire in the order the connection made
them.  A frame that asks for a receipt leaves a waiter, by key, that the
reader resolves; a request's reply and the connection's end come the same
way.  :class:`AsyncWriter` owns that state - the lock, the waiters, whether
writers may go ahead (a session is up, or the client has ended), the
session written to - so that the reader and the client's lifecycle change
it through one object.  It mirrors the threads client's ``Writer``.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from typing import Any

from .._connection import SendParts
from .._events import Event, FrameEvent, Message
from .._state import ConnectionState
from ._async_session import Session
from ._backend import Backend, Waiter
from ._core import ClientCore, PlainSettle
from ._errors import BrokerError, ClientError, ConnectionLost, reason

__all__ = ["AsyncWriter"]

#: Names the waits of writes that failed (see AsyncWriter._why_send_failed).
_write_failures = itertools.count()


class AsyncWriter:
    """The writing side of one async client (any task writes through it).

    ``leave`` ends a session whose broker went silent (a receipt that never
    came): the client's, since it decides what comes next.
    """

    def __init__(
        self,
        core: ClientCore[Any],
        backend: Backend,
        leave: Callable[[Session, ConnectionLost], Awaitable[None]],
    ) -> None:
        self._core = core
        self._backend = backend
        self._leave = leave
        #: Keeps "make the frame, write it" atomic (the reader's heart-beats too).
        self.lock = backend.lock()
        #: The waits for an answer by key: receipts, CONNECTED, a request's reply.
        self.waiters: dict[str, Waiter[Event]] = {}
        #: Set while writers need not wait: a session is up, or the client has
        #: ended (closed, or failed for good) and writers must hear so.
        self.ready = backend.flag()
        #: The current session (None before the first CONNECTED).
        self.session: Session | None = None
        #: Whether the client is closed (or closing): writes then fail.
        self.closing = False

    # -- the waits ---------------------------------------------------------------

    def expect(self, key: str) -> Waiter[Event]:
        """A wait for the answer ``key`` (see :meth:`resolve`); :meth:`forget` it after."""
        waiter = self._backend.waiter()
        self.waiters[key] = waiter
        return waiter

    def forget(self, key: str) -> None:
        self.waiters.pop(key, None)

    def resolve(self, key: str, value: Event) -> bool:
        """The answer ``key`` came: whether a wait took it."""
        waiter = self.waiters.pop(key, None)
        if waiter is None or waiter.done():
            return False
        waiter.set_result(value)
        return True

    def fail_waiters(self, error: ClientError) -> None:
        waiters = list(self.waiters.values())
        self.waiters.clear()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(error)

    async def wait_ready(self) -> None:
        """Until a session is up or the client has ended, for the options' ``timeout``."""
        try:
            async with self._backend.timeout(self._core.options.timeout):
                await self.ready.wait()
        except TimeoutError:
            # The connection is what is missing, not an answer: say so.
            raise ConnectionLost(
                f"no session with the broker within {self._core.options.timeout} s (reconnecting)"
            ) from None

    # -- writing -----------------------------------------------------------------

    async def _why_send_failed(self, session: Session, exc: OSError) -> ClientError:
        """The error a failed write raises: the broker's ERROR when it sent one.

        A broker that refuses a frame sends an ERROR and closes; a write can
        fail (a reset, the reader closed the stream on that ERROR, or the
        WebSocket's close frame closed the channel) before the reader has
        ended the session.  So wait, bounded by the timeout, for the session's
        reader to end, and raise what ended it.
        """
        if session.error is None and session.current:
            # The client's _lost() fails every waiter as the reader ends the session.
            key = f"write failed {next(_write_failures)}"
            waiter = self.expect(key)
            try:
                async with self._backend.timeout(self._core.options.timeout):
                    await waiter.wait()
            except (ClientError, TimeoutError):
                pass
            finally:
                self.forget(key)
        return session.error or ConnectionLost(f"connection failed: {reason(exc)}")

    def write(
        self, event: FrameEvent | PlainSettle | SendParts, settles: Message | None = None
    ) -> Awaitable[None] | None:
        """Write ``event``, which wants no receipt: None once written, else what the
        caller awaits (at once) to finish the write.

        Sending and acknowledging each message write this way: with a session
        up, the write lock free and a stream that takes bytes without a
        coroutine (asyncio's, and trio's over TCP), the frame is made and handed
        over here, with no coroutine at all (trio's cancel point comes before,
        in the caller).  Anything else goes the way of :meth:`send`, with the
        same checks in the same order, and the same errors.
        """
        session = self.session
        write = None if session is None else session.write
        if (
            write is None
            or self.closing
            or self._core.error is not None
            or not self.ready.is_set()
            or session is None  # (for mypy: write is None then)
            or session.error is not None
            or session.conn.state is ConnectionState.CLOSED
        ):
            return self.send(event, None, settles)
        lock = self.lock
        if not lock.take():
            return self.send(event, None, settles)
        try:
            data = self._core.frame(session.conn, event, settles)
            wait = write(data)
        except BaseException:
            lock.release()
            raise
        if wait is None:
            lock.release()
            return None
        return self._written(session, wait)

    async def _written(self, session: Session, wait: Awaitable[None]) -> None:
        """The end of a :meth:`write` whose stream holds too much: wait, under the
        write lock, as :meth:`send` does."""
        try:
            try:
                await wait
            finally:
                self.lock.release()
        except OSError as exc:
            failure = await self._why_send_failed(session, exc)
            self._core.reported(failure)  # told now: not again at the next call
            raise failure from exc

    async def send(
        self,
        event: FrameEvent | PlainSettle | SendParts,
        receipt: str | None = None,
        settles: Message | None = None,
    ) -> None:
        """Write ``event``; with ``receipt``, wait until the broker confirms it.

        ``settles``: the message an ACK or NACK is for (it must have come on
        the current connection).  One coroutine for a write without a
        receipt: it runs for every message sent and acknowledged.
        """
        try:
            if not self.ready.is_set():
                await self.wait_ready()
            if self._core.error is not None:
                raise self._core.error
            if self.closing:
                raise ConnectionLost("the client is closed")
            session = self.session
            assert session is not None and session.stream is not None
            stream = session.stream
            waiter = self.expect(receipt) if receipt is not None else None
            lock = self.lock
            try:
                # The lock taken without a coroutine when free (most writes): two
                # fewer coroutines per frame than ``async with``.
                if not lock.take():
                    await lock.acquire()
                try:
                    conn = session.conn
                    if conn.state is ConnectionState.CLOSED or session.error is not None:
                        raise self._core.error or ConnectionLost("the connection is closed")
                    # Cancelled, the call ends here: once the frame is made, the
                    # connection counts it as sent, so the stream must take it.
                    if (cancel_point := self._backend.cancel_point) is not None:
                        await cancel_point()
                    data = self._core.frame(conn, event, settles)
                    await stream.send(data)
                finally:
                    lock.release()
            except OSError as exc:
                self.forget(receipt or "")
                raise await self._why_send_failed(session, exc) from exc
            except BaseException:
                if receipt is not None:
                    self.forget(receipt)
                raise
            if waiter is not None:
                assert receipt is not None
                await self._wait_receipt(session, event, receipt, waiter)
        except BrokerError as exc:
            self._core.reported(exc)  # told now: not again at the next call
            raise

    async def _wait_receipt(
        self,
        session: Session,
        event: FrameEvent | PlainSettle | SendParts,
        receipt: str,
        waiter: Waiter[Event],
    ) -> None:
        """Until the RECEIPT ``receipt`` of ``event``, written on ``session``, comes."""
        try:
            async with self._backend.timeout(self._core.options.timeout):
                await waiter.wait()
        except TimeoutError:
            assert not isinstance(event, (PlainSettle, tuple))  # (those want no receipt)
            self.forget(receipt)
            timed_out, lost = self._core.receipt_timed_out(
                event, self._core.options.timeout, paused=session.paused
            )
            if lost is not None:
                await self._leave(session, lost)
            raise timed_out from None
