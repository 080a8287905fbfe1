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
"""

from __future__ import annotations

import socket
import ssl
import time

__all__ = ["DRAIN_BYTES", "DRAIN_TIMEOUT", "drain_and_close"]

#: Seconds :func:`drain_and_close` waits for the peer to close, by default.
DRAIN_TIMEOUT = 2.0
#: Bytes :func:`drain_and_close` reads and discards at most, by default: more
#: than a frame at the largest default :class:`~stomp_proto.Limits`, so that a
#: client whose over-large frame was refused still reads the ERROR that says so.
DRAIN_BYTES = 128 * 1024 * 1024
_CHUNK = 256 * 1024


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
