"""The connection's engine: socket, reader thread, heart-beats, reconnects.

One :class:`Transport` per connection.  Frames go out from the caller's thread
(a lock keeps each frame whole); one reader thread per connection reads,
watches the broker's heart-beat deadline between reads, calls the listeners,
and reconnects when the connection is lost.  Our heart-beats go out from a
thread of their own while they are on, so that a slow listener cannot delay
them.  Bytes are turned into frames and back by the sans-IO
codec of :mod:`stomp_proto` (:class:`~stomp_proto.FrameDecoder`,
:class:`~stomp_proto.FrameEncoder`), the accelerated build where it is loaded.

Reconnection belongs to the reader thread: after a loss it tells the listeners
(``on_disconnected``), re-opens a socket on the ``reconnect_*`` schedule, logs
in again with the first CONNECT's headers and re-sends every subscription
still open.  A ``connect()`` made meanwhile - from ``on_disconnected`` as
stomp.py's documentation recommends, or from any thread - joins that work
instead of starting a second connection.
"""

from __future__ import annotations

import random
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from .._client._backend import BlockingStream
from .._client._blocking import SocketStream, TLSStream, WebSocketStream
from .._decoder import FrameDecoder
from .._encoder import FrameEncoder
from .._errors import ProtocolError
from .._events import HeartBeat
from .._frame import Frame as WireFrame
from .._frame import Version
from . import log
from .constants import (
    CMD_CONNECT,
    CMD_DISCONNECT,
    CMD_STOMP,
    CMD_SUBSCRIBE,
    CMD_UNSUBSCRIBE,
    HDR_DESTINATION,
    HDR_ID,
    HDR_RECEIPT,
)
from .exception import ConnectFailedException, NotConnectedException
from .listener import ConnectionListener, Publisher
from .utils import Frame, calculate_heartbeats, clean_headers, decode, encode, is_localhost

__all__ = ["BaseTransport", "Transport"]

#: ``set_ssl``'s default ``ssl_version``, as in stomp.py: ``ssl.PROTOCOL_TLS_CLIENT``, or
#: None where the ``ssl`` module lacks it.  The layer's TLS context negotiates the
#: highest version both sides support whatever ``ssl_version`` says.
DEFAULT_SSL_VERSION: Any = getattr(ssl, "PROTOCOL_TLS_CLIENT", None)
#: True where the socket module has Linux's keep-alive options, so that
#: ``keepalive=("linux", idle, interval, count)`` is applied (elsewhere only
#: ``SO_KEEPALIVE`` is set).
LINUX_KEEPALIVE_AVAIL = all(
    hasattr(socket, name) for name in ("SOL_TCP", "TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT")
)

#: How long ``disconnect()`` waits for the broker's receipt before closing anyway.
DISCONNECT_WAIT = 10.0
_VERSIONS: tuple[Version, ...] = ("1.0", "1.1", "1.2")


def _default_create_thread(target: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=target, name="stomp_proto.stomppy reader", daemon=True)
    thread.start()
    return thread


def _keep_alive(sock: socket.socket, keepalive: Any) -> None:
    """Turn TCP keep-alive on; ``("linux", idle, interval, count)`` also sets its timing."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    if isinstance(keepalive, tuple) and keepalive[0] == "linux" and LINUX_KEEPALIVE_AVAIL:
        _, idle, interval, count = keepalive
        sock.setsockopt(socket.SOL_TCP, socket.TCP_KEEPIDLE, idle)
        sock.setsockopt(socket.SOL_TCP, socket.TCP_KEEPINTVL, interval)
        sock.setsockopt(socket.SOL_TCP, socket.TCP_KEEPCNT, count)


def _host_list(
    host_and_ports: Iterable[tuple[str, int]] | None, prefer_localhost: bool, loopback: bool
) -> list[tuple[str, int]]:
    hosts = list(host_and_ports) if host_and_ports else [("localhost", 61613)]
    if prefer_localhost:
        hosts.sort(key=is_localhost)
    if loopback:
        extra = [
            ("127.0.0.1", port)
            for (host, port) in hosts
            if is_localhost((host, port)) == 1
            and ("127.0.0.1", port) not in hosts
            and ("localhost", port) not in hosts
        ]
        hosts = extra + hosts
    return hosts


def _wire_headers(headers: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    # stomp.py programs pass ints (id=1) and leave out a header with None.
    return tuple(
        [
            (
                name if name.__class__ is str else str(name),
                value if value.__class__ is str else str(value),
            )
            for name, value in headers.items()
            if value is not None
        ]
    )


class Transport(Publisher):
    """The socket side of a connection; see the module docstring.

    The parameters are stomp.py's (``Connection(...)`` passes them on).
    """

    def __init__(
        self,
        host_and_ports: Iterable[tuple[str, int]] | None = None,
        prefer_localhost: bool = True,
        try_loopback_connect: bool = True,
        reconnect_sleep_initial: float = 0.1,
        reconnect_sleep_increase: float = 0.5,
        reconnect_sleep_jitter: float = 0.1,
        reconnect_sleep_max: float = 60.0,
        reconnect_attempts_max: int = 3,
        timeout: float | None = None,
        keepalive: Any = None,
        vhost: str | None = None,
        auto_decode: bool = True,
        encoding: str = "utf-8",
        bind_host_port: tuple[str, int] | None = None,
        *,
        version: Version = "1.1",
        ws_path: str | None = None,
    ) -> None:
        #: The brokers tried, in order (local ones first with ``prefer_localhost``).
        self.host_and_ports = _host_list(host_and_ports, prefer_localhost, try_loopback_connect)
        #: The first wait before a new attempt (seconds).
        self.reconnect_sleep_initial = reconnect_sleep_initial
        #: How much each wait grows (0.5: by half).
        self.reconnect_sleep_increase = reconnect_sleep_increase
        #: Randomness added to each wait (0.1: up to 10 % either way).
        self.reconnect_sleep_jitter = reconnect_sleep_jitter
        #: The longest wait (seconds).
        self.reconnect_sleep_max = reconnect_sleep_max
        #: Rounds over every host before giving up; -1: never give up.
        self.reconnect_attempts_max = reconnect_attempts_max
        #: Seconds a TCP connect may take (None: the system's).
        self.timeout = timeout
        #: TCP keep-alive on the socket when true.
        self.keepalive = keepalive
        #: The ``host`` header of the login (the broker's virtual host).
        self.vhost = vhost
        #: Bodies given to listeners as ``str`` (else ``bytes``).
        self.auto_decode = auto_decode
        #: The text encoding of bodies, both ways.
        self.encoding = encoding
        #: The local address to connect from, if any.
        self.bind_host_port = bind_host_port
        #: The STOMP version asked for.
        self.version: Version = version
        #: The WebSocket path; None for plain STOMP over TCP.
        self.ws_path = ws_path
        #: Extra headers of the WebSocket handshake request (``WSConnection(header=)``).
        self.ws_headers: tuple[tuple[str, str], ...] = ()
        #: Adds ``content-length`` to frames with a body (the connection sets it).
        self.auto_content_length = True
        #: What the connection asks for, then (once CONNECTED) what was agreed (ms).
        self.heartbeats: tuple[int, int] = (0, 0)
        #: The heart-beats asked for, ``(send, receive)`` ms.
        self.requested_heartbeats: tuple[int, int] = (0, 0)
        #: The broker's heart-beat deadline is its interval times this.
        self.heart_beat_receive_scale = 1.5
        #: The broker of the current (or last) socket.
        self.current_host_and_port: tuple[str, int] | None = None
        #: The listeners by name.
        self.listeners: dict[str, ConnectionListener] = {}
        self._callbacks: dict[str, list[tuple[str, Callable[..., Any]]]] = {}
        #: True once the broker refused the login (an ERROR before CONNECTED).
        self.connection_error = False
        self._ssl: dict[tuple[str, int], dict[str, Any]] = {}
        self._create_thread: Callable[[Callable[[], None]], Any] = _default_create_thread
        self._state = threading.Condition()
        self._write_lock = threading.Lock()
        self._stream: BlockingStream | None = None
        self._decoder = FrameDecoder(version)
        self._encoder = FrameEncoder(version)
        self._connected = False
        self._running = False
        self._reader_alive = False
        self._reader_ident: int | None = None
        self._had_session = False
        self._closing = False
        self._disconnect_receipt: str | None = None
        self._notified_disconnect = False
        self._connect_frame: bytes | None = None
        # Open subscriptions by id, re-sent after a reconnect; the ids sent on this socket.
        self._subscriptions: dict[str, bytes] = {}
        self._sent_subscriptions: set[str] = set()
        self._failed_attempts = 0
        self._last_received = 0.0
        self._last_sent = 0.0

    # -- listeners -------------------------------------------------------------

    def set_listener(self, name: str, listener: ConnectionListener | None) -> None:
        """Register ``listener`` under ``name``; TypeError for None."""
        if listener is None:
            raise TypeError(f"set_listener({name!r}, None): a listener is required")
        with self._state:
            self.listeners[name] = listener
            self._callbacks = {}

    def remove_listener(self, name: str) -> None:
        """Forget the listener registered under ``name``."""
        with self._state:
            self.listeners.pop(name, None)
            self._callbacks = {}

    def get_listener(self, name: str) -> ConnectionListener | None:
        """The listener registered under ``name``, or None."""
        with self._state:
            return self.listeners.get(name)

    def override_threading(self, create_thread_fc: Callable[[Callable[[], None]], Any]) -> None:
        """Start the reader with ``create_thread_fc(target)`` instead of a daemon thread."""
        self._create_thread = create_thread_fc

    def notify(self, event: str, *args: Any) -> None:
        """Call ``on_<event>(*args)`` on every listener, in the order of their names.

        A listener that raises is logged with the frame's command and does not
        stop the others or the reader.
        """
        callbacks = self._callbacks.get(event)
        if callbacks is None:
            callbacks = self._callbacks_for(event)
        for name, callback in callbacks:
            try:
                callback(*args)
            except Exception:
                log.error("listener %r raised in on_%s", name, event, exc_info=True)

    def _callbacks_for(self, event: str) -> list[tuple[str, Callable[..., Any]]]:
        # Kept until the listeners change: looked up per frame, it is a good part of
        # the layer's cost per message.  A listener's inherited no-op is left out.
        method = f"on_{event}"
        inherited = getattr(ConnectionListener, method, None)
        with self._state:
            callbacks = [
                (name, getattr(listener, method))
                for name, listener in sorted(self.listeners.items())
                if getattr(type(listener), method, inherited) is not inherited
                or method in vars(listener)
            ]
            self._callbacks[event] = callbacks
        return callbacks

    # -- TLS -------------------------------------------------------------------

    def set_ssl(
        self,
        for_hosts: Iterable[tuple[str, int]] = (),
        key_file: str | None = None,
        cert_file: str | None = None,
        ca_certs: str | None = None,
        cert_validator: Callable[[Any, str], tuple[bool, str]] | None = None,
        ssl_version: Any = DEFAULT_SSL_VERSION,
        password: Any = None,
        verify: bool = True,
    ) -> None:
        """Use TLS for ``for_hosts``.  Certificates are verified unless ``verify=False``:
        against ``ca_certs`` when given, else the system's trusted roots."""
        for host in for_hosts:
            self._ssl[tuple(host)] = {  # type: ignore[index]
                "key_file": key_file,
                "cert_file": cert_file,
                "ca_certs": ca_certs,
                "cert_validator": cert_validator,
                "ssl_version": ssl_version,
                "password": password,
                "verify": verify,
            }

    def get_ssl(self, host_and_port: tuple[str, int] | None = None) -> dict[str, Any] | None:
        """The TLS settings for ``host_and_port`` (default: the current host)."""
        return self._ssl.get(host_and_port or self.current_host_and_port or ("", 0))

    def _ssl_context(self, params: dict[str, Any]) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=params["ca_certs"])
        if not params["verify"]:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if params["cert_file"]:
            context.load_cert_chain(params["cert_file"], params["key_file"], params["password"])
        return context

    # -- opening ---------------------------------------------------------------

    def _open(self, host: str, port: int) -> BlockingStream:
        sock = socket.create_connection(
            (host, port), timeout=self.timeout, source_address=self.bind_host_port
        )
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.keepalive:
                _keep_alive(sock, self.keepalive)
            raw = SocketStream(sock)
            stream: BlockingStream = raw
            params = self._ssl.get((host, port))
            if params is not None:
                tls = TLSStream(raw, self._ssl_context(params), host)
                tls.handshake()
                validator = params["cert_validator"]
                if validator is not None:
                    ok, why = validator(tls.peer_certificate(), host)
                    if not ok:
                        raise ssl.SSLError(f"certificate refused by cert_validator: {why}")
                stream = tls
            if self.ws_path is not None:
                stream = WebSocketStream.open(
                    stream, host, port, self.ws_path, (self.version,), self.ws_headers
                )
            sock.settimeout(None)
        except BaseException:
            sock.close()
            raise
        return stream

    def _sleep_before(self, attempt: int) -> None:
        delay = self.reconnect_sleep_initial * (1.0 + self.reconnect_sleep_increase) ** attempt
        delay = min(self.reconnect_sleep_max, delay)
        delay *= 1.0 + random.uniform(-self.reconnect_sleep_jitter, self.reconnect_sleep_jitter)
        with self._state:
            self._state.wait_for(lambda: not self._running, max(0.0, delay))

    def _attempts_left(self) -> bool:
        limit = self.reconnect_attempts_max
        return limit < 0 or self._failed_attempts < limit

    def _open_any(self) -> None:
        """Open a socket to the first host that answers, on the reconnect schedule."""
        while self._running and self._attempts_left():
            for host, port in self.host_and_ports:
                if not self._running:
                    break
                try:
                    stream = self._open(host, port)
                except (OSError, ProtocolError) as exc:
                    log.info("could not connect to %s:%s: %s", host, port, exc)
                    continue
                self._use_stream(stream, (host, port))
                return
            self._failed_attempts += 1
            if self._running and self._attempts_left():
                self._sleep_before(self._failed_attempts - 1)
        raise ConnectFailedException(
            f"no broker of {self.host_and_ports} answered after {self._failed_attempts} attempts"
        )

    def _use_stream(self, stream: BlockingStream, host_and_port: tuple[str, int]) -> None:
        with self._state:
            self._stream = stream
            self._decoder = FrameDecoder(self.version)
            self._encoder = FrameEncoder(self.version)
            self._connected = False
            self._notified_disconnect = False
            self._sent_subscriptions = set()
            self.heartbeats = self.requested_heartbeats
            self.current_host_and_port = host_and_port
            self._last_received = self._last_sent = time.monotonic()
        self.notify("connecting", host_and_port)

    # -- starting and stopping -------------------------------------------------

    def start(self) -> None:
        """Open the connection (trying every host, on the reconnect schedule) and
        start the reader; nothing to do while the reader runs."""
        with self._state:
            if self._reader_alive and self._running:
                return
            self._state.wait_for(lambda: not self._reader_alive, DISCONNECT_WAIT)
            self._running = True
            self._closing = False
            self._had_session = False
            self.connection_error = False
            self._failed_attempts = 0
            self._subscriptions = {}
        try:
            self._open_any()
        except ConnectFailedException:
            with self._state:
                self._running = False
            raise
        with self._state:
            self._reader_alive = True
        self._create_thread(self._reader)

    def owns_reconnect(self) -> bool:
        """True while the reader is reconnecting: ``connect()`` then joins it."""
        with self._state:
            return self._reader_alive and self._running and self._had_session

    def on_reader_thread(self) -> bool:
        """True when called from the reader thread (a listener's callback)."""
        return threading.get_ident() == self._reader_ident

    def stop(self) -> None:
        """End the connection for good: no reconnect; the reader ends."""
        with self._state:
            self._running = False
            stream = self._stream
            self._state.notify_all()
        if stream is not None:
            stream.shutdown()
        if not self.on_reader_thread():
            with self._state:
                self._state.wait_for(lambda: not self._reader_alive, DISCONNECT_WAIT)

    def disconnect_socket(self) -> None:
        """Close the socket; the reader sees the end (and reconnects unless stopped)."""
        with self._state:
            stream = self._stream
            self._connected = False
        if stream is not None:
            stream.shutdown()

    def is_connected(self) -> bool:
        """True while logged in: CONNECTED received and the socket open."""
        with self._state:
            return self._connected and self._stream is not None

    def set_connected(self, connected: bool) -> None:
        """Mark the connection logged in or not (and wake ``connect(wait=True)``)."""
        with self._state:
            self._connected = connected
            self._state.notify_all()

    def wait_for_connection(self, timeout: float | None = None) -> None:
        """Wait for CONNECTED; ConnectFailedException if the attempt ended otherwise."""
        with self._state:
            self._state.wait_for(
                lambda: self._connected or self.connection_error or not self._running, timeout
            )
            if not self._connected:
                raise ConnectFailedException("the broker did not accept the connection")

    def wait_until_stopped(self, timeout: float) -> bool:
        """Wait for the reader to end (after DISCONNECT); False if ``timeout`` passed."""
        if self.on_reader_thread():
            return False
        with self._state:
            return self._state.wait_for(lambda: not self._reader_alive, timeout)

    @property
    def heart_beating(self) -> bool:
        """True while heart-beats are exchanged on a logged-in connection."""
        with self._state:
            return self._connected and self._reader_alive and self.heartbeats != (0, 0)

    # -- sending ---------------------------------------------------------------

    def transmit(self, frame: Frame) -> None:
        """Send ``frame`` (after the listeners' ``on_send``); NotConnectedException
        when there is no connection."""
        self.notify("send", frame)
        if frame.cmd is None:  # stomp.py's heart-beat frame: an end-of-line
            self.send(b"\n")
            return
        command = frame.cmd
        headers = _wire_headers(frame.headers)
        # Not encode(""): in UTF-16 that is a byte-order mark, a body of two bytes.
        body = encode(frame.body, self.encoding) if frame.body else b""
        wire = WireFrame(command, headers, body)
        data = self._encoder.encode(wire, content_length=self.auto_content_length and bool(body))
        if command in (CMD_CONNECT, CMD_STOMP):
            self._connect_frame = data  # sent again by each reconnect
        if log.isEnabledFor(log.DEBUG):
            log.debug("sending frame: %s %s", command, clean_headers(dict(headers)))
        if command == CMD_DISCONNECT:
            with self._state:
                self._closing = True
                self._disconnect_receipt = frame.headers.get(HDR_RECEIPT)
        elif command == CMD_SUBSCRIBE:
            self._book_subscription(frame.headers, data)
        elif command == CMD_UNSUBSCRIBE:
            key = str(frame.headers.get(HDR_ID) or frame.headers.get(HDR_DESTINATION))
            with self._state:
                self._subscriptions.pop(key, None)
                self._sent_subscriptions.discard(key)
        if command == CMD_SUBSCRIBE and not self._needs_sending(frame.headers):
            return
        self.send(data)

    def _book_subscription(self, headers: dict[str, Any], data: bytes) -> None:
        key = str(headers.get(HDR_ID) or headers.get(HDR_DESTINATION))
        with self._state:
            self._subscriptions[key] = data

    def _needs_sending(self, headers: dict[str, Any]) -> bool:
        # A subscription re-sent by the reconnect, then subscribed again by the
        # program (from on_connected or on_disconnected): the broker has it.
        key = str(headers.get(HDR_ID) or headers.get(HDR_DESTINATION))
        with self._state:
            if key in self._sent_subscriptions:
                log.debug("subscription %s is open already (re-sent after a reconnect)", key)
                return False
            if not self._connected and self._had_session and self._running:
                return False  # reconnecting: sent once logged in again
            self._sent_subscriptions.add(key)
            return True

    def send(self, encoded_frame: bytes) -> None:
        """Write bytes as they are (a frame already encoded, or a heart-beat)."""
        stream = self._stream
        if stream is None:
            raise NotConnectedException("not connected")
        try:
            with self._write_lock:
                stream.send(encoded_frame)
        except OSError as exc:
            raise NotConnectedException(f"the connection is lost: {exc}") from exc
        self._last_sent = time.monotonic()

    # -- reading ---------------------------------------------------------------

    def _reader(self) -> None:
        self._reader_ident = threading.get_ident()
        try:
            while True:
                stream = self._stream
                if stream is None:
                    break
                self._read(stream)
                self._lost(stream)
                with self._state:
                    again = self._running and self._had_session and not self._closing
                    again = again and not self.connection_error
                if not again:
                    break
                try:
                    self._open_any()
                except ConnectFailedException as exc:
                    log.warning("giving up reconnecting: %s", exc)
                    break
                if self._connect_frame is not None:
                    try:
                        self.send(self._connect_frame)
                    except NotConnectedException:
                        continue
        finally:
            with self._state:
                self._running = False
                self._reader_alive = False
                self._stream = None
                self._state.notify_all()
            self._reader_ident = None
            self.notify("receiver_loop_completed", None)

    def _lost(self, stream: BlockingStream) -> None:
        stream.close()
        with self._state:
            self._connected = False
            if self._stream is stream:
                self._stream = None
            notified, self._notified_disconnect = self._notified_disconnect, True
            self._state.notify_all()
        if not notified:
            self.notify("disconnected")

    def _next_timer(self) -> float | None:
        receive_ms = self.heartbeats[1]
        if not self._connected or not receive_ms:
            return None
        grace = receive_ms / 1000.0 * self.heart_beat_receive_scale
        return max(0.001, self._last_received + grace - time.monotonic())

    def _keep_sending_heartbeats(self, stream: BlockingStream, interval: float) -> None:
        """Send a heart-beat whenever nothing was written for ``interval`` seconds.

        A thread of its own, while the connection on ``stream`` lasts: the reader
        thread runs the listeners, and a slow one must not make the broker think
        this side is gone (1.1 "Heart-beating").
        """
        while True:
            with self._state:
                if self._stream is not stream or not self._running:
                    return
                wait = self._last_sent + interval - time.monotonic()
                if wait > 0:
                    self._state.wait(wait)  # woken early by any change of state
                    continue
            try:
                self.send(b"\n")
            except NotConnectedException:
                return

    def _timers(self) -> bool:
        """False when the broker has been silent past its heart-beat deadline."""
        receive_ms = self.heartbeats[1]
        now = time.monotonic()
        grace = receive_ms / 1000.0 * self.heart_beat_receive_scale
        if receive_ms and now - self._last_received > grace:
            log.warning(
                "heart-beat timeout: nothing received for %.1f s", now - self._last_received
            )
            self.notify("heartbeat_timeout")
            return False
        return True

    def _read(self, stream: BlockingStream) -> None:
        """Read and dispatch until the connection ends."""
        while True:
            try:
                if not stream.wait_readable(self._next_timer()):
                    if not self._timers():
                        return
                    continue
                data = stream.receive()
            except (OSError, ProtocolError) as exc:
                log.debug("read ended: %s", exc)
                return
            if data is None:
                return
            if not data:
                continue
            self._last_received = time.monotonic()
            decoder = self._decoder
            decoder.receive_data(data)
            after_frame = False
            try:
                while (item := decoder.next_frame()) is not None:
                    if isinstance(item, HeartBeat):
                        # An end-of-line that follows a frame in the same read is the
                        # frame's padding (1.2 "the NULL octet can be optionally
                        # followed by multiple EOLs"); one that arrives on its own is a
                        # heart-beat, as stomp.py counts them.
                        if not after_frame:
                            self.notify("heartbeat")
                        continue
                    after_frame = True
                    if not self._process(item):
                        return
            except ProtocolError as exc:
                log.warning("the broker sent a frame that is not STOMP: %s", exc)
                with self._state:
                    if not self._connected:
                        self.connection_error = True
                return
            if self._connected and self.heartbeats[1] and not self._timers():
                return

    def _frame_of(self, wire: WireFrame) -> Frame:
        headers: dict[str, Any] = {}
        for name, value in wire.headers:
            headers.setdefault(name, value)  # the first of repeated headers (1.2)
        body: Any = wire.body
        if self.auto_decode:
            body = decode(wire.body, self.encoding)
        return Frame(wire.command, headers, body)

    def _process(self, wire: WireFrame) -> bool:
        return self.process_frame(self._frame_of(wire))

    def process_frame(self, frame: Frame, frame_str: bytes | None = None) -> bool:
        """Give a received frame to the listeners (``frame_str``, its bytes, is not
        needed); False when the connection ends after it (our DISCONNECT's receipt)."""
        command = (frame.cmd or "").upper()
        if log.isEnabledFor(log.DEBUG):
            log.debug("received frame: %s %s", command, frame.headers)
        if command == "MESSAGE":
            self.notify("before_message", frame)
            self.notify("message", frame)
        elif command == "CONNECTED":
            self._on_connected(frame)
            self.notify("connected", frame)
        elif command == "RECEIPT":
            ends = self._on_receipt(frame)
            self.notify("receipt", frame)
            return not ends
        elif command == "HEARTBEAT":
            self.notify("heartbeat")
        elif command == "ERROR":
            with self._state:
                if not self._connected:
                    self.connection_error = True  # refused: no reconnect
                    self._state.notify_all()
            self.notify("error", frame)
        else:
            log.warning("unknown frame from the broker: %s", command)
        return True

    def _on_connected(self, frame: Frame) -> None:
        agreed = str(frame.headers.get("version", "1.0"))
        version: Version = agreed if agreed in _VERSIONS else self.version
        beats = str(frame.headers.get("heart-beat", "0,0")).replace(" ", "").split(",")
        with self._state:
            self._decoder.version = version
            self._encoder = FrameEncoder(version)
            try:
                self.heartbeats = calculate_heartbeats(beats, self.requested_heartbeats)
            except ValueError:
                self.heartbeats = (0, 0)
            replay = [
                data
                for key, data in self._subscriptions.items()
                if key not in self._sent_subscriptions
            ]
            self._sent_subscriptions.update(self._subscriptions)
            self._connected = True
            self._had_session = True
            self._failed_attempts = 0
            self._state.notify_all()
            stream = self._stream
            send_ms = self.heartbeats[0]
        if send_ms and stream is not None:
            threading.Thread(
                target=self._keep_sending_heartbeats,
                args=(stream, send_ms / 1000.0),
                name="stomp_proto.stomppy heart-beats",
                daemon=True,
            ).start()
        for data in replay:
            try:
                self.send(data)
            except NotConnectedException:
                return

    def _on_receipt(self, frame: Frame) -> bool:
        """True for the receipt of our DISCONNECT: the connection ends here."""
        with self._state:
            ends = self._closing and frame.headers.get("receipt-id") == self._disconnect_receipt
            if ends:
                self._running = False
                self._connected = False
                self._notified_disconnect = True
        if ends:
            self.notify("disconnected")  # before on_receipt, as stomp.py programs expect
        return ends


#: stomp.py's name for the base of its transports.
BaseTransport = Transport
