"""The async client's reader: one task a session reads, routes and keeps time.

It feeds the connection and routes each event: a message to its
subscription's bounded buffer (or to ``unsolicited``), a receipt, a reply or
CONNECTED to its waiter, an ERROR or a lost connection to the client.  It
drives the heart-beat timer too.  On a stream that lets it (a
:class:`~stomp_proto._client._backend.TakingStream`), the bytes are fed and
the messages with room delivered where they are read; the reader acts on
the rest.  A module of its own because this is the one task that reads: the
client starts it per session and hears from it only how the session ended.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from typing import Generic, TypeVar

from .._connection import ClientConnection
from .._errors import ProtocolError
from .._events import Message
from ._async_session import Inbox, Session
from ._async_writer import AsyncWriter
from ._backend import Backend, Stream, TakingStream
from ._core import CONNECT_WAITER, ClientCore, End, Resolve
from ._errors import ClientError, ConnectionLost, reason
from ._unsolicited import UnsolicitedBase

__all__ = ["AsyncReader"]

S = TypeVar("S", bound=Inbox)


class AsyncReader(Generic[S]):
    """What the reader task of each session does (:meth:`run`).

    ``lost`` is told how the client's current session ended.
    """

    def __init__(
        self,
        core: ClientCore[S],
        backend: Backend,
        writer: AsyncWriter,
        unsolicited: UnsolicitedBase,
        lost: Callable[[ClientError], None],
    ) -> None:
        self._core = core
        self._backend = backend
        self._writer = writer
        self._unsolicited = unsolicited
        self._lost = lost

    async def run(self, session: Session) -> None:
        """Read ``session`` until it ends; then tell whoever waits why."""
        stream = session.stream
        conn = session.conn
        assert stream is not None
        error: ClientError
        try:
            while True:
                # One timer for the heart-beats, armed again only when the
                # connection's deadline may have moved: get_timer() changes when
                # handle_timer runs, at CONNECTED and at the end, not per read.
                # A timer per read cost as much as the read.
                try:
                    async with self._backend.timeout(self._until_timer(conn)):
                        await self._read_events(session, stream, conn)
                except TimeoutError as exc:
                    if exc.args:  # not the timer's: a system error (ETIMEDOUT)
                        raise
                    await self._write_timer(stream, conn, reading=not session.paused)
        except ClientError as exc:
            error = exc
        except (ProtocolError, OSError) as exc:
            error = ConnectionLost(f"connection failed: {reason(exc)}")
            error.__cause__ = exc
        except Exception as exc:  # a bug must not leave waiters hanging
            error = ConnectionLost(f"client failed: {exc!r}")
            error.__cause__ = exc
        # (Cancelled - its attempt was abandoned, or the client closed - ends
        # here without a word: whoever cancelled it cleans up.)
        session.error = error
        if not session.connected.done():
            session.connected.set_exception(error)  # the attempt fails with it
        elif session.current:
            # Lost first, so that no writer sees a ready client on a dead stream.
            self._lost(error)
        with suppress(Exception):
            await stream.aclose()

    def _until_timer(self, conn: ClientConnection) -> float | None:
        deadline = conn.get_timer()
        return None if deadline is None else max(0.0, deadline - self._backend.now())

    async def _write_timer(self, stream: Stream, conn: ClientConnection, *, reading: bool) -> None:
        async with self._writer.lock:
            data = conn.handle_timer(self._backend.now(), reading=reading)
            if data:
                await stream.send(data)

    def _deliver(self, message: Message) -> S | None:
        """Hand ``message`` to its subscription's buffer, or to ``unsolicited``.

        The common case, room in the buffer, takes no await.  Returns the
        subscription when its buffer is full (see :meth:`_deliver_when_room`).
        A message for a subscription that has ended is dropped, unacknowledged:
        the broker delivers it again.
        """
        subscription, receipt = self._core.target(message)
        if receipt is not None:
            self._writer.resolve(receipt, message)
        if subscription is None:
            # A reply goes to its request; anything else no subscription takes is kept.
            key = self._core.replies.key(message)
            if key is None or not self._writer.resolve(key, message):
                self._unsolicited._put(message)
            return None
        if subscription._ended or subscription._put_nowait(message):
            return None
        return subscription

    def _taker(self, session: Session, conn: ClientConnection) -> Callable[[memoryview], bool]:
        """What takes the bytes of a :class:`TakingStream` as they arrive: messages
        with room in their buffers are delivered there and then; anything else
        (another event, a full buffer) is left to the reader, which it wakes."""
        deliver = self._deliver

        def take(data: memoryview) -> bool:
            conn.receive_data(data)
            while (event := conn.next_event()) is not None:
                if type(event) is not Message:
                    session.handed = event
                    return False
                full = deliver(event)
                if full is not None:
                    session.held = (full, event)
                    return False
            return True

        return take

    async def _read_events(self, session: Session, stream: Stream, conn: ClientConnection) -> None:
        """Read, and act on each event, until the heart-beat timer must be armed anew
        (CONNECTED came); the session's end is raised.

        The timer interrupts it at its waits (for bytes, for room), where
        nothing read is lost: a message waiting for room stays ``session.held``.
        """
        taking = stream if isinstance(stream, TakingStream) else None
        take = self._taker(session, conn)
        while True:
            if session.held is not None:
                await self._deliver_when_room(session)
            event = session.handed
            if event is not None:
                session.handed = None
            else:
                event = conn.next_event()
            if event is None:
                if taking is None:
                    conn.receive_data(await stream.receive() or None)
                elif (data := await taking.receive_or_take(take)) is not None:
                    conn.receive_data(data or None)
                # (else: taken, up to what the reader must act on)
                continue
            # (A message routes to itself: no call for the common event.)
            route = event if type(event) is Message else self._core.route(event)
            if type(route) is Message:
                full = self._deliver(route)
                if full is not None:
                    session.held = (full, route)
            elif isinstance(route, Resolve):
                if route.key == CONNECT_WAITER:
                    if not session.connected.done():
                        session.connected.set_result(route.value)
                    return  # the heart-beats start now
                self._writer.resolve(route.key, route.value)
            elif isinstance(route, End):
                raise route.error

    async def _deliver_when_room(self, session: Session) -> None:
        """Buffer the held message once its subscription has room, or ends (then it is
        dropped).  A full buffer pauses reading (back-pressure), not heart-beats."""
        assert session.held is not None
        subscription, message = session.held
        session.paused = True
        while not subscription._ended and not subscription._put_nowait(message):
            await subscription._wait_for_room()
        session.held = None
        session.paused = False
