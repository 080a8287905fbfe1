"""STOMP over a WebSocket for the async clients: the sans-IO channel on a :class:`Stream`.

The protocol - handshake, framing, ping and close - is all in
``stomp_proto._websocket``; this is only the I/O around it.  (The threads
client's counterpart is ``_blocking.WebSocketStream``.)
"""

from __future__ import annotations

from contextlib import suppress

from .._errors import RemoteProtocolError
from .._frame import Version
from .._websocket import ClientHandshake, WebSocketChannel
from ._backend import Stream

__all__ = ["WebSocketStream"]


class WebSocketStream:
    """A client adapter's byte stream with STOMP over WebSocket on top.

    Implements :class:`Stream` over another one, so the asyncio and trio
    clients get WebSocket from this one class.  The reader writes pongs while
    callers write frames, with no lock: the inner stream takes the bytes of
    each ``send`` when called, before any wait (see :class:`Stream`), so each
    message goes whole and in the order the channel made it.  A lock here
    would be a wait after the frame was made, and a sender cancelled there
    would lose a frame that its connection counts as sent.
    """

    def __init__(self, inner: Stream, channel: WebSocketChannel) -> None:
        self._inner = inner
        self._channel = channel
        self._ended = False
        self._error: RemoteProtocolError | None = None

    @property
    def subprotocol(self) -> str | None:
        return self._channel.subprotocol

    @classmethod
    async def open(
        cls,
        inner: Stream,
        host: str,
        port: int,
        path: str,
        versions: tuple[Version, ...],
    ) -> WebSocketStream:
        """Upgrade ``inner`` to a WebSocket; RemoteProtocolError when the server refuses."""
        handshake = ClientHandshake(host, port, path, versions)
        await inner.send(handshake.request)
        while True:
            channel = handshake.receive_data(await inner.receive() or None)
            if channel is not None:
                return cls(inner, channel)

    async def receive(self) -> bytes:
        """STOMP bytes; b"" once the WebSocket has closed cleanly (else RemoteProtocolError)."""
        # b"" first: wsproto may hold messages that came with the handshake answer.
        data: bytes | None = b""
        while not self._ended:
            got = self._channel.receive_data(data)
            if got.to_send:
                # A pong or the answer to a close.  A broken connection must not
                # lose what came with it (a broker's ERROR, then its close): the
                # next read or write sees the failure.
                with suppress(OSError):
                    await self._inner.send(got.to_send)
            if got.closed:
                # Data that came before the close is returned first, the end next time.
                self._ended = True
                self._error = got.error
            if got.data:
                return got.data
            if not self._ended:
                data = await self._inner.receive() or None
        error, self._error = self._error, None
        if error is not None:
            raise error
        return b""

    async def send(self, data: bytes) -> None:
        wire = self._channel.send(data)
        if not wire and data:
            raise OSError("the WebSocket is closed")
        await self._inner.send(wire)

    async def aclose(self) -> None:
        """Send a close frame (when still open), then close the transport."""
        try:
            wire = self._channel.close()
            if wire:
                await self._inner.send(wire)
        except OSError:
            pass  # the transport is gone already: closing it is all that is left
        finally:
            await self._inner.aclose()
