"""The WebSocket side of one :class:`~stomp_proto.asgi.StompApp` session: its
input, bounded by :data:`INPUT_LIMIT`, and its output, sent by a writer task."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ..broker._core import BrokerCore, Outbox, Session

_Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
_SendCallable = Callable[[MutableMapping[str, Any]], Awaitable[None]]

_NORMAL_CLOSURE = 1000
#: Bytes read from a client and not yet taken by its session before the app stops reading.
INPUT_LIMIT = 256 * 1024
#: Seconds an ended session's output may take to be sent before its WebSocket is closed.
CLOSE_TIMEOUT = 5.0


class _Peer:
    """The transport side of one session: its ASGI callables, input and output.

    ``flush`` is the app's: it queues what the core returns for every session
    it names.
    """

    __slots__ = (
        "closing",
        "core",
        "drained",
        "flush",
        "gone",
        "inbox",
        "inbox_bytes",
        "output",
        "output_limit",
        "poked",
        "queued",
        "room",
        "send",
        "session",
        "stirred",
        "wake",
        "writer",
    )

    def __init__(
        self,
        session: Session,
        send: _SendCallable,
        core: BrokerCore,
        output_limit: int,
        flush: Callable[[Outbox], None],
    ) -> None:
        self.session = session
        self.send = send
        self.core = core
        self.output_limit = output_limit
        self.flush = flush
        #: What the client sent and the session has not read yet, and its size.
        self.inbox: deque[bytes] = deque()
        self.inbox_bytes = 0
        #: The client's side has ended (a disconnect, or a failed send).
        self.gone = False
        #: Something the session's task must look at: input, an ended session, a handler done.
        self.stirred = asyncio.Event()
        self.poked = False
        #: Set while the inbox has room: the reader waits for it (the server then stops reading).
        self.room = asyncio.Event()
        self.room.set()
        #: Bytes waiting for the writer task, and their total.
        self.output: deque[bytes] = deque()
        self.queued = 0
        self.wake = asyncio.Event()
        self.writer: asyncio.Task[None] | None = None
        #: The session has ended: the writer sends what is left, then returns.
        self.closing = False
        #: Set while the output has room: relayed subscriptions wait for it before a delivery.
        self.drained = asyncio.Event()
        self.drained.set()

    def poke(self) -> None:
        """Wake the session's task: a handler is done, or the session ended."""
        self.poked = True
        self.stirred.set()

    def queue(self, data: bytes) -> None:
        """Queue ``data`` for the writer task."""
        self.core.counters.bytes_sent += len(data)
        self.output.append(data)
        self.queued += len(data)
        self.wake.set()

    async def output_room(self) -> None:
        """Return once the output is under the limit, or the session has ended."""
        while self.queued > self.output_limit and not self.session.closed:
            self.drained.clear()
            await self.drained.wait()

    async def read(self, receive: _Receive) -> None:
        """Move what the client sends to the session's inbox."""
        while True:
            message = await receive()
            kind = message["type"]
            if kind == "websocket.receive":
                data = message.get("bytes")
                if data is None:
                    data = (message.get("text") or "").encode("utf-8")
                if data:
                    self.inbox.append(data)
                    self.inbox_bytes += len(data)
                    self.stirred.set()
                    if self.inbox_bytes > INPUT_LIMIT:
                        self.room.clear()
                        await self.room.wait()
            elif kind == "websocket.disconnect":
                self.gone = True
                self.stirred.set()
                return

    async def next_input(self) -> bytes | None:
        """Bytes from the client, ``None`` at its end, ``b""`` when the timer is due or
        something else changed.

        Nothing is read while a SEND is with its handler or the memory alarm
        holds the session's publisher back: the inbox fills, the reader waits,
        and the server stops reading from the client.
        """
        session = self.session
        deadline = session.get_timer()
        try:
            async with asyncio.timeout_at(deadline):
                while True:
                    if self.poked:
                        self.poked = False
                        return b""
                    held = (
                        session.reading_blocked
                        or session.diverted is not None
                        or session.relayed is not None
                    )
                    if self.inbox and not held:
                        data = self.inbox.popleft()
                        self.inbox_bytes -= len(data)
                        if self.inbox_bytes <= INPUT_LIMIT:
                            self.room.set()
                        return data
                    if self.gone and (held or not self.inbox):
                        return None
                    self.stirred.clear()
                    await self.stirred.wait()
        except TimeoutError:
            return b""

    async def write(self) -> None:
        """Send the session's output, one WebSocket message per write; resume when drained."""
        session = self.session
        try:
            while True:
                await self.wake.wait()
                self.wake.clear()
                if not self.output and self.closing:
                    return
                while self.output:
                    data = self.output.popleft()
                    self.queued -= len(data)
                    await self.send({"type": "websocket.send", "bytes": data})
                    if self.queued <= self.output_limit // 4:
                        self.drained.set()
                        if session.paused:
                            self.flush(self.core.resume(session))
                if self.closing and not self.output:
                    return
        except (OSError, RuntimeError):
            # The client is gone (servers raise either); the session's task cleans up.
            self.output.clear()
            self.gone = True
            self.stirred.set()

    async def finish(self, ended: bool, forget: Callable[[], None]) -> None:
        """Send what is left, ``forget`` the session, close the WebSocket (unless the
        client ``ended`` it)."""
        writer = self.writer
        if writer is not None:
            self.closing = True
            self.wake.set()
            try:
                await asyncio.wait_for(asyncio.shield(writer), CLOSE_TIMEOUT)
            except TimeoutError:
                ended = True  # the client does not read: do not wait on it again
            except (OSError, RuntimeError):
                pass
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)
        forget()
        if not ended:
            with contextlib.suppress(OSError, RuntimeError):
                await self.send({"type": "websocket.close", "code": _NORMAL_CLOSURE})
