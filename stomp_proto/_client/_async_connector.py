"""The async client's sessions: each connection attempt, the reconnects, the end.

:class:`Connector` owns the life of an async client's sessions: it opens
each attempt (the stream, the CONNECT, the reader task, the restored
subscriptions), hears from the reader when the current session is lost,
reconnects as the policy says, and ends the client - on ``close()`` or
when it gives up.  A module of its own because that is the one place that
decides which session is the client's; the reader (``_async_reader``) and
the writing side (``_async_writer``) it makes only serve that session.
"""

from __future__ import annotations

from types import EllipsisType
from typing import Generic, TypeVar

from .._errors import ProtocolError
from .._websocket import accepted_versions
from ._async_reader import AsyncReader
from ._async_session import Inbox, Session
from ._async_writer import AsyncWriter
from ._backend import Backend, Task, WritingStream
from ._core import ClientCore
from ._errors import BrokerError, ClientError, ConnectionLost, connect_timed_out, reason
from ._unsolicited import UnsolicitedBase
from ._websocket_stream import WebSocketStream

__all__ = ["Connector"]

S = TypeVar("S", bound=Inbox)


class Connector(Generic[S]):
    """The sessions of one async client, and its writing side (:attr:`writer`)."""

    def __init__(self, core: ClientCore[S], backend: Backend, unsolicited: UnsolicitedBase) -> None:
        self._core = core
        self._backend = backend
        self._unsolicited = unsolicited
        #: The write lock, the waits for answers, readiness, the current session.
        self.writer = AsyncWriter(core, backend, self.leave)
        self._reader = AsyncReader(core, backend, self.writer, unsolicited, self.lost)
        self._reconnector: Task | None = None
        self._reconnecting = False

    async def open(self, timeout: float | EllipsisType | None = ...) -> None:
        """One connection attempt; on any failure (a timeout too) it leaves nothing behind.

        ``timeout``: seconds for it; by default the options' bound on one attempt.
        """
        bound = self._core.options.attempt_timeout if timeout is ... else timeout
        session = Session(self._core.conn, self._backend.waiter())
        self._core.life.attempt(self._backend.now())
        try:
            try:
                async with self._backend.timeout(bound):
                    await self._connect(session)
            except TimeoutError as exc:
                if exc.args:  # not the bound's: a system error (ETIMEDOUT)
                    raise
                # The reader starts once the CONNECT is written.
                raise connect_timed_out(bound, opened=session.reader is not None) from None
        except BaseException:
            session.current = False
            await session.abandon()
            raise
        self._core.session_started(self._backend.now())
        self.writer.ready.set()

    async def _connect(self, session: Session) -> None:
        options = self._core.brokers.options  # aimed at the broker to try
        conn = session.conn
        stream = session.stream = await self._backend.open_stream(options)
        versions = options.versions
        if options.websocket is not None:
            stream = session.stream = await WebSocketStream.open(
                stream, options.host, options.port, options.websocket, versions
            )
            versions = accepted_versions(stream.subprotocol, versions)
        if isinstance(stream, WritingStream):
            session.write = stream.write
        await stream.send(self._core.encode(conn, options.connect_event(versions)))
        session.reader = self._backend.spawn(lambda: self._reader.run(session))
        await session.connected.wait()  # the reader's error if it ended first
        # No await between CONNECTED and this: the session becomes the client's,
        # and from now on its reader reports its end to lost().
        self.writer.session = session
        session.current = True
        if session.error is not None:
            raise session.error  # it ended in the same read as CONNECTED
        async with self.writer.lock:
            for subscribe in self._core.restore_subscriptions():
                await stream.send(self._core.encode(conn, subscribe))
        if session.error is not None:
            raise session.error  # lost() left it to this attempt

    async def close(self) -> None:
        """End the client at once: every wait ends (see ``AsyncClient.close``)."""
        writer = self.writer
        writer.closing = True
        writer.ready.set()  # writers waiting for a session see the end
        if self._reconnector is not None:
            self._reconnector.cancel()  # abandons the attempt it is making
            await self._reconnector.join()
        if writer.session is not None:
            await writer.session.abandon()
        writer.fail_waiters(ConnectionLost("the client is closed"))
        self._finish(None)
        self._core.life.closed()

    def lost(self, error: ClientError) -> None:
        """The current session is gone: reconnect if the policy says so, else end the client."""
        writer = self.writer
        writer.ready.clear()
        writer.fail_waiters(error)
        if writer.closing:
            writer.ready.set()
            return
        if self._reconnecting:
            return  # the attempt in progress sees it (session.error)
        ending = self._core.session_lost(error, self._backend.now())
        if ending is not None:
            self._finish(ending)
            return
        self._reconnecting = True
        self._reconnector = self._backend.spawn(lambda: self._reconnect(error))

    async def _reconnect(self, error: ClientError) -> None:
        try:
            while (delay := self._core.reconnects.next_delay()) is not None:
                await self._backend.sleep(delay)
                self._core.new_connection()
                try:
                    await self.open()
                    return
                except BrokerError as exc:  # a refused login, or a refused restore
                    error = exc
                    self._core.life.failed(exc)
                    if not self._core.again(exc, self._backend.now()):
                        break
                except (OSError, TimeoutError, ClientError, ProtocolError) as exc:
                    why = reason(exc)
                    self._core.life.failed(exc)
                    error = ConnectionLost(f"reconnect failed: {why}")
                    error.__cause__ = exc
            self._finish(self._core.life.gave_up(error))
        finally:
            self._reconnecting = False

    def _finish(self, error: ClientError | None) -> None:
        """The client is over: end every subscription, and release waiting writers."""
        self._core.finish(error)
        self._unsolicited._end()
        self.writer.ready.set()

    async def leave(self, session: Session, error: ConnectionLost) -> None:
        """End ``session`` with ``error`` though its connection stands (the broker went
        silent): the client then reconnects, to the next address, as after a loss."""
        if not session.current or session.error is not None:
            return  # it has ended already, or is not the client's
        session.error = error
        session.current = False  # its reader, cancelled, reports nothing
        self.writer.ready.clear()  # no writer on the stream being closed
        try:
            await session.abandon()
        finally:
            self.lost(error)
