"""Ending a connection so that the last frame written - an ERROR, usually - arrives.

A STOMP server that refuses a frame sends an ERROR and closes (1.2 §ERROR).
Closing a TCP socket while the peer's data is still unread makes the kernel
answer with a reset, and a reset throws away what was still on its way: the
ERROR in our send buffer, and what the peer's kernel had received but its
application not yet read.  The peer then sees "connection reset" instead of
the reason.  The remedy (RFC 1122 §4.2.2.13; what HTTP servers call "lingering
close"): half-close the sending side, so the peer reads our last bytes and
then end of stream, read and discard whatever it still sends, and close once
it closes too - or after a bounded time or number of bytes, so that a peer
that never stops cannot hold the connection open.

The same policy in three forms: :func:`drain_and_close` for a blocking socket,
:func:`asyncio_drain_and_close` for asyncio's streams and
:func:`trio_drain_and_close` for a trio stream (public as
``stomp_proto.asyncio.drain_and_close`` and ``stomp_proto.trio.drain_and_close``).
The two async forms share the reading loop (:class:`_Discard`); each adds its
framework's half-close, deadline and close.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import TYPE_CHECKING

from ._checks import check_number, is_int, wrong_type

if TYPE_CHECKING:  # an optional extra: imported by trio_drain_and_close when called
    import trio

__all__ = [
    "DRAIN_BYTES",
    "DRAIN_TIMEOUT",
    "asyncio_drain_and_close",
    "drain_and_close",
    "trio_drain_and_close",
]

#: Seconds a lingering close (:func:`drain_and_close` and its asyncio and trio
#: forms) waits for the peer to close, by default.
DRAIN_TIMEOUT = 2.0
#: Bytes a lingering close reads and discards at most, by default: more
#: than a frame at the largest default :class:`~stomp_proto.Limits`, so that a
#: client whose over-large frame was refused still reads the ERROR that says so.
DRAIN_BYTES = 128 * 1024 * 1024
_CHUNK = 256 * 1024


def _check_policy(timeout: object, max_bytes: object) -> None:
    """The lingering close's bounds, checked before anything is closed."""
    check_number("timeout", timeout, minimum=0)
    if not is_int(max_bytes):
        raise wrong_type("max_bytes", "an int", max_bytes, "the bytes to discard at most")
    if max_bytes < 0:  # type: ignore[operator]
        raise ValueError(f"max_bytes must be at least 0, not {max_bytes!r}")


def drain_and_close(
    sock: socket.socket, *, timeout: float = DRAIN_TIMEOUT, max_bytes: int = DRAIN_BYTES
) -> int:
    """Close ``sock`` so that what was written to it last reaches the peer.

    Half-closes the sending side (``shutdown(SHUT_WR)``: the peer reads our
    last bytes, then end of stream), reads and discards what the peer still
    sends until it closes, ``timeout`` seconds pass or ``max_bytes`` were
    discarded, then closes the socket.  Returns the bytes discarded.  Blocks
    for up to ``timeout`` seconds (the socket is put in blocking mode: it is
    being closed anyway); errors on the way (the peer reset) just end it.

    Call it after writing the ERROR of a refused connection or a
    :class:`~stomp_proto.RemoteProtocolError`'s ``event_hint``; it is also a
    polite way to end any connection.  For a TLS socket the half-close is
    skipped (TLS has no half-close), the rest is the same.
    """
    if not isinstance(sock, socket.socket):
        raise wrong_type(
            "sock",
            "a socket.socket",
            sock,
            "for asyncio or trio streams use "
            "stomp_proto.asyncio.drain_and_close or stomp_proto.trio.drain_and_close",
        )
    _check_policy(timeout, max_bytes)
    discarded = 0
    try:
        if not isinstance(sock, ssl.SSLSocket):
            sock.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + timeout
        while discarded < max_bytes:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            sock.settimeout(remaining)
            chunk = sock.recv(min(_CHUNK, max_bytes - discarded))
            if not chunk:
                break
            discarded += len(chunk)
    except OSError:  # includes TimeoutError: the peer took too long, or reset
        pass
    finally:
        sock.close()
    return discarded


class _Discard:
    """Reads and discards, up to a number of bytes, until the end of the stream.

    ``count`` stays right when a deadline cancels the reading half way.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.count = 0

    async def until_end(self, receive: Callable[[int], Awaitable[bytes | bytearray]]) -> None:
        while self.count < self.max_bytes:
            chunk = await receive(min(_CHUNK, self.max_bytes - self.count))
            if not chunk:
                return
            self.count += len(chunk)


async def asyncio_drain_and_close(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    *,
    timeout: float = DRAIN_TIMEOUT,
    max_bytes: int = DRAIN_BYTES,
) -> int:
    """Close an asyncio stream so that what was written to it last reaches the peer.

    :param reader: the connection's reader, from :func:`asyncio.start_server`'s
        callback or :func:`asyncio.open_connection`.
    :param writer: the same connection's writer.
    :param timeout: seconds to wait for the peer to close, and then again at most
        for what is still buffered to be written; after that the transport is
        aborted.
    :param max_bytes: bytes to read and discard at most before closing anyway.
    :returns: the bytes discarded.

    The asyncio form of :func:`stomp_proto.drain_and_close`: half-closes the
    writing side once what is buffered is written (``write_eof()``: the peer
    reads our last bytes, then the end of the stream), reads and discards what
    the peer still sends until it closes, ``timeout`` seconds pass or
    ``max_bytes`` were discarded, then closes the writer and waits for it.
    Errors on the way (the peer reset) just end it.  A TLS stream cannot
    half-close: that step is skipped, the rest is the same.  Cancelled, it
    aborts the transport and lets the cancellation through.
    """
    _check_policy(timeout, max_bytes)
    discard = _Discard(max_bytes)
    try:
        if writer.can_write_eof():
            with suppress(OSError):
                writer.write_eof()
        with suppress(OSError, TimeoutError):
            async with asyncio.timeout(timeout):
                await discard.until_end(reader.read)
        await close_writer(writer, timeout)
    except asyncio.CancelledError:
        writer.transport.abort()
        raise
    return discard.count


async def close_writer(writer: asyncio.StreamWriter, timeout: float) -> None:
    """Close ``writer``, letting it flush for up to ``timeout`` seconds, then abort it."""
    writer.close()  # flushes what is buffered, then closes (TLS: close_notify first)
    try:
        async with asyncio.timeout(timeout):
            await writer.wait_closed()
    except (OSError, TimeoutError):
        writer.transport.abort()


async def trio_drain_and_close(
    stream: trio.abc.Stream,
    *,
    timeout: float = DRAIN_TIMEOUT,
    max_bytes: int = DRAIN_BYTES,
) -> int:
    """Close a trio stream so that what was sent on it last reaches the peer.

    :param stream: the connection, such as the :class:`trio.SocketStream` a
        :func:`trio.serve_tcp` handler gets, or a :class:`trio.SSLStream`.
    :param timeout: seconds to wait for the peer to close, and then again at
        most for the close itself (a TLS stream's ``close_notify``).
    :param max_bytes: bytes to read and discard at most before closing anyway.
    :returns: the bytes discarded.

    The trio form of :func:`stomp_proto.drain_and_close`: half-closes the
    sending side (``send_eof()``, for a
    :class:`trio.abc.HalfCloseableStream`; TLS has no half-close, that step is
    skipped), receives and discards what the peer still sends until it closes,
    ``timeout`` seconds pass or ``max_bytes`` were discarded, then closes the
    stream.  Errors on the way (the peer reset) just end it; a cancellation
    still closes the stream.
    """
    import trio

    broken = (trio.BrokenResourceError, trio.ClosedResourceError, trio.BusyResourceError)
    _check_policy(timeout, max_bytes)
    discard = _Discard(max_bytes)
    try:
        with trio.move_on_after(timeout):
            if isinstance(stream, trio.abc.HalfCloseableStream):
                with suppress(*broken):
                    await stream.send_eof()
            with suppress(*broken):
                await discard.until_end(stream.receive_some)
    finally:
        with trio.move_on_after(timeout):
            await stream.aclose()  # closes the stream even when cancelled
    return discard.count
