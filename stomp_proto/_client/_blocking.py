"""Blocking byte streams for the threads client: TCP, TLS and WebSocket.

One thread at a time receives (whichever holds the client's read role, see
``_threads``) while any number of caller threads send, so each
stream keeps what it shares behind locks that are never held across a wait
on the network - except the lock that keeps one writer's bytes whole, which
only writers take.  A reader that blocked on a writer could deadlock with a
peer that stops reading while its own output is full.

* :class:`SocketStream` - a TCP socket.
* :class:`TLSStream` - TLS over it through an :class:`ssl.SSLObject` and
  memory buffers: OpenSSL is then only used under our lock, never read and
  written by two threads at once, which it does not allow.
* :class:`WebSocketStream` - STOMP over a WebSocket, the sans-IO
  ``WebSocketChannel`` (``stomp_proto._websocket``) on any of the above.

``receive()`` returns bytes (``b""``: nothing usable yet, for example half a
TLS record) or ``None`` at the end of the stream; ``wait_readable(timeout)``
waits for the next ``receive()`` to have something to work on.
"""

from __future__ import annotations

import contextlib
import select
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Sequence
from typing import Any

from .._errors import RemoteProtocolError
from .._frame import Version
from .._websocket import ClientHandshake, WebSocketChannel, accepted_versions
from ._backend import BlockingStream
from ._errors import connect_timed_out
from ._options import ConnectOptions

__all__ = ["SocketStream", "TLSStream", "WebSocketStream", "open_stream"]

READ_SIZE = 256 * 1024


class SocketStream:
    """A connected TCP socket, blocking, with Nagle's delay off (small frames)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._view = memoryview(bytearray(READ_SIZE))
        # poll() where there is one: no file descriptor of its own to close, and
        # cheaper per call than a selector, which the reader pays per wake-up.
        self._poll = select.poll() if hasattr(select, "poll") else None
        self._selector: selectors.BaseSelector | None = None
        if self._poll is not None:
            self._poll.register(sock, select.POLLIN)
        else:  # pragma: no cover - Windows
            self._selector = selectors.DefaultSelector()
            self._selector.register(sock, selectors.EVENT_READ)

    def fileno(self) -> int:
        return self._sock.fileno()

    def wait_readable(self, timeout: float | None) -> bool:
        if timeout is None:
            return True  # recv() blocks until there is something
        if self._poll is not None:
            return bool(self._poll.poll(timeout * 1000.0))
        assert self._selector is not None
        return bool(self._selector.select(timeout))

    def receive(self) -> bytes | None:
        # Into one buffer kept for the stream's life: recv(READ_SIZE) would
        # allocate READ_SIZE bytes per call, past malloc's mmap threshold, and
        # pay an mmap, an mremap and a munmap for every read.
        view = self._view
        received = self._sock.recv_into(view)
        return bytes(view[:received]) if received else None

    def send(self, data: bytes) -> None:
        self._sock.sendall(data)

    def shutdown(self) -> None:
        with contextlib.suppress(OSError):  # not connected any more: nothing to wake
            self._sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        if self._selector is not None:
            self._selector.close()
        self._sock.close()

    def settimeout(self, timeout: float | None) -> None:
        self._sock.settimeout(timeout)


class TLSStream:
    """TLS on a :class:`SocketStream`, through memory BIOs; see the module docstring."""

    def __init__(self, raw: SocketStream, context: ssl.SSLContext, server_hostname: str) -> None:
        self._raw = raw
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(
            self._incoming, self._outgoing, server_hostname=server_hostname
        )
        #: Guards the SSLObject and its buffers; never held across I/O.
        self._tls_lock = threading.Lock()
        #: Keeps records in the order they were made, across writers.
        self._send_lock = threading.Lock()

    def handshake(self) -> None:
        """Run the TLS handshake (before the reader thread starts)."""
        while True:
            try:
                self._tls.do_handshake()
            except ssl.SSLWantReadError:
                pass
            else:
                break
            self._flush()
            data = self._raw.receive()
            if data is None:
                raise ConnectionResetError("the connection closed during the TLS handshake")
            self._incoming.write(data)
        self._flush()

    def peer_certificate(self) -> dict[str, Any] | None:
        """The broker's certificate, as ``ssl.SSLSocket.getpeercert()`` gives it."""
        return self._tls.getpeercert()

    def _flush(self) -> None:
        with self._tls_lock:
            data = self._outgoing.read()
        if data:
            self._raw.send(data)

    def fileno(self) -> int:
        return self._raw.fileno()

    def wait_readable(self, timeout: float | None) -> bool:
        return self._raw.wait_readable(timeout)

    def receive(self) -> bytes | None:
        data = self._raw.receive()
        plain = bytearray()
        ended = False
        with self._tls_lock:
            if data is None:
                self._incoming.write_eof()
            else:
                self._incoming.write(data)
            try:
                while piece := self._tls.read(READ_SIZE):
                    plain += piece
                ended = True  # b"" from read(): the peer's close_notify
            except ssl.SSLWantReadError:
                ended = data is None
            except ssl.SSLZeroReturnError:
                ended = True
            reply = self._outgoing.pending > 0  # e.g. an answer to a key update
        if reply:
            with self._send_lock:
                self._flush()
        if plain:
            return bytes(plain)  # the end, if it came too, is seen on the next call
        return None if ended else b""

    def send(self, data: bytes) -> None:
        with self._send_lock:
            with self._tls_lock:
                self._tls.write(data)
                wire = self._outgoing.read()
            self._raw.send(wire)

    def shutdown(self) -> None:
        self._raw.shutdown()

    def close(self) -> None:
        self._raw.close()


class WebSocketStream:
    """STOMP over a WebSocket on a blocking stream (the sans-IO channel does the protocol)."""

    def __init__(self, inner: BlockingStream, channel: WebSocketChannel) -> None:
        self._inner = inner
        self._channel = channel
        #: Guards the channel (wsproto); never held across I/O.
        self._channel_lock = threading.Lock()
        #: Keeps each WebSocket frame whole on the wire (writers and pongs).
        self._send_lock = threading.Lock()
        self._ended = False
        self._error: RemoteProtocolError | None = None
        # wsproto may hold messages that came with the handshake's answer.
        self._held: bytes | None = self._take(b"")

    @property
    def subprotocol(self) -> str | None:
        return self._channel.subprotocol

    @classmethod
    def open(
        cls,
        inner: BlockingStream,
        host: str,
        port: int,
        path: str,
        versions: tuple[Version, ...],
        headers: Sequence[tuple[str, str]] = (),
    ) -> WebSocketStream:
        """Upgrade ``inner`` (with extra request ``headers``); RemoteProtocolError when
        the server refuses."""
        handshake = ClientHandshake(host, port, path, versions, headers)
        inner.send(handshake.request)
        while True:
            channel = handshake.receive_data(inner.receive())
            if channel is not None:
                return cls(inner, channel)

    def fileno(self) -> int:
        return self._inner.fileno()

    def wait_readable(self, timeout: float | None) -> bool:
        if self._held or self._ended:
            return True
        return self._inner.wait_readable(timeout)

    def receive(self) -> bytes | None:
        if self._held:
            data, self._held = self._held, None
            return data
        if not self._ended:
            return self._take(self._inner.receive())
        error, self._error = self._error, None
        if error is not None:
            raise error
        return None

    def _take(self, data: bytes | None) -> bytes:
        with self._channel_lock:
            got = self._channel.receive_data(data)
        if got.to_send:
            # A pong or the answer to a close.  A broken connection must not lose
            # what came with it (a broker's ERROR, then its close): the next read
            # or write sees the failure.
            with self._send_lock, contextlib.suppress(OSError):
                self._inner.send(got.to_send)
        if got.closed:
            # Data that came before the close is returned first, the end next time.
            self._ended = True
            self._error = got.error
        return got.data

    def send(self, data: bytes) -> None:
        with self._send_lock:
            with self._channel_lock:
                wire = self._channel.send(data)
            if not wire and data:
                raise OSError("the WebSocket is closed")
            self._inner.send(wire)

    def shutdown(self) -> None:
        self._inner.shutdown()

    def close(self) -> None:
        """Send a close frame (when still open), then close the transport."""
        try:
            with self._channel_lock:
                wire = self._channel.close()
            if wire:
                with self._send_lock:
                    self._inner.send(wire)
        except OSError:
            pass  # the transport is gone already: closing it is all that is left
        finally:
            self._inner.close()


def open_stream(
    options: ConnectOptions, timeout: float | None
) -> tuple[BlockingStream, tuple[Version, ...]]:
    """Connect as ``options`` say; also the STOMP versions the stream leaves open.

    Connecting and the TLS and WebSocket handshakes share ``timeout`` seconds:
    each waits no longer than what the ones before it left.
    """
    deadline = None if timeout is None else time.monotonic() + timeout

    def left() -> float | None:
        return None if deadline is None else max(0.001, deadline - time.monotonic())

    try:
        sock = socket.create_connection((options.host, options.port), timeout=timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            raw = SocketStream(sock)
        except BaseException:
            sock.close()
            raise
        try:
            stream: BlockingStream = raw
            if options.ssl is not None:
                raw.settimeout(left())
                tls = TLSStream(raw, options.ssl, options.host)
                tls.handshake()
                stream = tls
            versions = options.versions
            if options.websocket is not None:
                raw.settimeout(left())
                websocket = WebSocketStream.open(
                    stream, options.host, options.port, options.websocket, versions
                )
                versions = accepted_versions(websocket.subprotocol, versions)
                stream = websocket
            raw.settimeout(None)  # from now on the reader waits in wait_readable()
        except BaseException:
            raw.close()
            raise
    except TimeoutError as exc:
        if exc.errno is not None:  # the system's (ETIMEDOUT): its own words
            raise
        raise connect_timed_out(timeout, opened=False) from None
    return stream, versions
