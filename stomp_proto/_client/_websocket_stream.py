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
        #: What the channel answered the peer with (a pong, the reply to its close),
        #: sent before the next read: see :meth:`receive`.
        self._reply = b""

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
        """STOMP bytes; b"" once the WebSocket has closed cleanly (else RemoteProtocolError).

        The data that came with a pong or a close is returned before the answer
        is sent, which happens at the next call, before reading on.  Sending may
        wait (for room behind a big frame being written, the broker's ERROR and
        close coming meanwhile), and the reader's heart-beat timer cancels it
        there: data kept only in this call would be lost, and the client would
        see a bare end of stream instead of the ERROR.
        """
        # b"" first: wsproto may hold messages that came with the handshake answer.
        data: bytes | None = b""
        while True:
            if self._reply:
                await self._send_reply()
            if self._ended:
                break
            got = self._channel.receive_data(data)
            self._reply = got.to_send
            if got.closed:
                # Data that came before the close is returned first, the end next time.
                self._ended = True
                self._error = got.error
            if got.data:
                return got.data
            # The answer to send (or the end) first; then read on.
            data = b"" if self._reply or self._ended else (await self._inner.receive() or None)
        error, self._error = self._error, None
        if error is not None:
            raise error
        return b""

    async def _send_reply(self) -> None:
        """Send the pending answer; the inner stream takes its bytes when called, so
        a cancel during the wait that may follow loses nothing."""
        reply, self._reply = self._reply, b""
        # A broken connection must not lose what came with it (a broker's ERROR,
        # then its close): the next read or write sees the failure.
        with suppress(OSError):
            await self._inner.send(reply)

    async def send(self, data: bytes) -> None:
        wire = self._channel.send(data)
        if not wire and data:
            raise OSError("the WebSocket is closed")
        await self._inner.send(wire)

    async def aclose(self) -> None:
        """Send a close frame (when still open), then close the transport."""
        try:
            # The answer to the peer's close, when the session ended on what came before it.
            wire = self._reply + self._channel.close()
            self._reply = b""
            if wire:
                await self._inner.send(wire)
        except OSError:
            pass  # the transport is gone already: closing it is all that is left
        finally:
            await self._inner.aclose()
