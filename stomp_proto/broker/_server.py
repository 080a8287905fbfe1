"""The embedded broker on asyncio: a TCP (optionally TLS) server around BrokerCore.

Each client connection gets a :class:`~stomp_proto.broker.Session` and one
task that reads with a timeout taken from the session's heart-beat timer
(``loop.time()`` is the clock), feeds the bytes and the time to the core, and
writes what the core returns to every connection it names.  A client silent
past its heart-beat deadline is closed, and its unacknowledged messages go to
other consumers.

Slow consumers: a write never waits for another client.  Each connection's
transport has a high-water mark of ``output_limit`` bytes (1 MiB by default).
When a write leaves more than that in a client's send buffer - or the core
paused the session after one large batch - the broker stops delivering to that
client: its queue messages stay queued or go to other consumers, its topic
subscriptions keep theirs (up to ``max_queue_length``, then they miss new ones).
A small task waits for the buffer to drain below the low-water mark (a quarter
of the high one) and resumes deliveries.  Meanwhile the client's own task stops
reading from it, so a client that sends (say, with receipts) but never reads is
slowed down by TCP instead of growing the broker's memory.  What the broker
buffers for one client is so bounded by about twice ``output_limit`` (or
``output_limit`` and one message, for messages larger than that).

HTTP on the same port: STOMP over WebSocket (``websocket="/ws"``) and the
metrics (``GET /metrics``, on unless ``metrics=False``).  The first bytes of
each connection tell them apart - an HTTP ``GET `` is a request, anything else
is plain STOMP (a STOMP client sends a command or a heart-beat EOL first; one
that sends nothing for :data:`HANDSHAKE_TIMEOUT` seconds, or its CONNECT
deadline if shorter, is taken for STOMP too, and its CONNECT deadline counts
from the connection).  A request must be complete within
:data:`HANDSHAKE_TIMEOUT` seconds.  ``/metrics`` gets the Prometheus text
exposition and the connection is closed.  A WebSocket upgrade goes to
``stomp_proto._websocket`` (on wsproto), whose :class:`OriginPolicy` refuses
(403) browser pages of other origins than the broker's own and
``allowed_origins``; a refused or malformed upgrade is logged (INFO, with its
``BAD_WEBSOCKET`` kind and the reason, the origin for a foreign one) and the
connection closed, and the negotiated subprotocol caps the session's STOMP
versions.

TLS (``ssl``): each connection's handshake runs once it is accepted
(``StreamWriter.start_tls``), within the CONNECT deadline, and a failed one
is logged; a connection gets its session only once it is secured.

Ending a connection the broker ended (an ERROR, a refused upgrade, shutdown):
:func:`stomp_proto.asyncio.drain_and_close` half-closes it, reads and discards
what the client still sends until it closes (at most
:data:`~stomp_proto.DRAIN_TIMEOUT` seconds or :data:`~stomp_proto.DRAIN_BYTES`
bytes), then closes it.  Closing at
once would reset a client that is still sending (a frame over the limits, or
frames pipelined behind a bad one), and the reset would destroy the ERROR that
says why before the client reads it.

Shutdown (:meth:`Broker.close`): stop listening, send every client an ERROR
``broker shutting down``, then close every connection as above, letting each
flush what it has buffered (at most :data:`~stomp_proto.DRAIN_TIMEOUT` seconds
more, then it is aborted), and wait for every task.
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import logging
import socket
import ssl as _ssl
from collections.abc import Callable, Coroutine, Iterable
from types import TracebackType
from typing import Unpack

from .._closing import asyncio_drain_and_close, close_writer
from .._connection import ServerConnection
from .._errors import ErrorKind, RemoteProtocolError
from .._events import ConnectionClosed, Error, HeartBeatTimeout
from .._frame import VERSIONS, Version
from .._state import ConnectionState
from .._websocket import (
    CLEAN_CLOSE_MEANING,
    OriginPolicy,
    ServerHandshake,
    WebSocketChannel,
    check_path,
    require_wsproto,
)
from ._core import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_OUTPUT_LIMIT,
    SHUTDOWN_REASON,
    BrokerCore,
    BrokerOptions,
    Outbox,
    Session,
)
from ._listen import accept_forever, listen
from ._metrics import (
    CONTENT_TYPE,
    DEFAULT_TOP_DESTINATIONS,
    METRICS_PATH,
    SCRAPE_SLICE,
    DestinationSummary,
    exposition,
    exposition_lines,
)

__all__ = ["Broker", "run_broker"]

log = logging.getLogger("stomp_proto.broker")

#: Seconds a connection the client closed first may take to flush its output
#: before it is aborted.
CLOSE_TIMEOUT = 5.0
#: Most bytes taken from a socket at a time.
READ_SIZE = 64 * 1024
#: Seconds a connection has, with ``websocket`` on, to send its first bytes and
#: (for a WebSocket) to complete the upgrade.
HANDSHAKE_TIMEOUT = 10.0
#: Seconds a TLS handshake may take when there is no ``connect_timeout``.
TLS_HANDSHAKE_TIMEOUT = 60.0
#: Most bytes of an HTTP request head (request line and headers) read before answering.
MAX_REQUEST_HEAD = 16 * 1024
_HTTP_GET = b"GET "


class _Peer:
    """The transport side of one session."""

    __slots__ = (
        "address",
        "ended",
        "pending",
        "reader",
        "resumer",
        "session",
        "stopping",
        "task",
        "writer",
        "ws",
    )

    def __init__(
        self,
        session: Session,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        ws: WebSocketChannel | None = None,
        pending: bytes | None = None,
    ) -> None:
        self.session = session
        self.reader = reader
        self.writer = writer
        #: The WebSocket the session's STOMP bytes travel in; None for plain STOMP.
        self.ws = ws
        #: Bytes already read (while telling WebSocket from plain STOMP), to handle first.
        self.pending = pending
        self.task: asyncio.Task[None] | None = None
        #: Waits for the send buffer to drain, then resumes deliveries.
        self.resumer: asyncio.Task[None] | None = None
        self.stopping = False
        #: The client closed (or reset) its stream: nothing is left to drain.
        self.ended = False
        #: Where the client connects from, for the log.
        self.address = _address(writer.get_extra_info("peername"))

    def write(self, data: bytes | bytearray) -> None:
        """Write STOMP bytes (in a WebSocket message, for a WebSocket)."""
        self.writer.write(data if self.ws is None else self.ws.send(data))

    def over_limit(self, limit: int) -> bool:
        return self.writer.transport.get_write_buffer_size() > limit

    def stop(self) -> None:
        """Make the connection's task end, unless it is ending already.

        Cancelled once only: a second cancel would interrupt its clean-up.
        """
        if not self.stopping and self.task is not None and not self.task.done():
            self.stopping = True
            self.task.cancel()


class Broker:
    """The embedded STOMP broker, listening on ``host:port`` (127.0.0.1 and a free port).

    ``ssl`` makes it a TLS server; ``websocket`` (a path such as ``"/ws"``)
    serves STOMP over WebSocket on the same port as well (needs wsproto, the
    ``ws`` extra), to clients without an ``Origin`` header and to web pages of
    the broker's own origin or one of ``allowed_origins``
    (``"scheme://host[:port]"``, ``"*"`` for any; see :doc:`/security`);
    ``metrics`` serves ``GET /metrics`` (the Prometheus text format, see
    :meth:`metrics`) on the same port: with ``users``, only to a request
    carrying one of their logins (HTTP Basic), or ``metrics_token``
    (``Authorization: Bearer TOKEN``; required with or without ``users``), and
    with only the ``metrics_destinations`` deepest destinations listed one by
    one (``None``: every one) beside the totals; the other keywords,
    ``options``, are the :class:`BrokerCore` options (:class:`BrokerOptions`).
    Use it as an async context manager::

        async with Broker() as broker:
            ...  # connect to broker.host, broker.port

    or call :meth:`start` and :meth:`close` yourself.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        ssl: _ssl.SSLContext | None = None,
        websocket: str | None = None,
        allowed_origins: Iterable[str] = (),
        metrics: bool = True,
        metrics_token: str | None = None,
        metrics_destinations: int | None = DEFAULT_TOP_DESTINATIONS,
        **options: Unpack[BrokerOptions],
    ) -> None:
        if metrics_token is not None and not metrics_token:
            raise ValueError("metrics_token must not be empty")
        DestinationSummary(metrics_destinations)  # checks it
        if websocket is not None:
            check_path(websocket)
            require_wsproto()
        if isinstance(allowed_origins, str):
            raise TypeError("allowed_origins is a list of origins, not one string")
        self._origins = OriginPolicy(allowed_origins, secure=ssl is not None)
        #: Whether ``GET /metrics`` is served.
        self.serves_metrics = metrics
        self._metrics_token = metrics_token
        self._metrics_destinations = metrics_destinations
        #: Whether a scrape needs credentials: a login of ``users``, or the token.
        self._metrics_guarded = metrics_token is not None or options.get("users") is not None
        #: The :class:`BrokerCore` that does the work (inspect queues and sessions there).
        self.core = BrokerCore(**options)
        #: The WebSocket path served beside plain STOMP; ``None``: plain STOMP only.
        self.websocket = websocket
        self._versions = options.get("versions", VERSIONS)
        #: The address the broker listens on.
        self.host = host
        self._requested_port = port
        self._port: int | None = None
        self._ssl = ssl
        self._output_limit = options.get("output_limit", DEFAULT_OUTPUT_LIMIT)
        connect_timeout = options.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT)
        #: Seconds a TLS handshake may take: the CONNECT deadline (asyncio's 60 s without one).
        self._tls_timeout = connect_timeout or TLS_HANDSHAKE_TIMEOUT
        #: Seconds a connection may stay silent before it is taken for plain STOMP.
        self._silence_limit = min(HANDSHAKE_TIMEOUT, connect_timeout or HANDSHAKE_TIMEOUT)
        #: The listening sockets, and the task accepting on each (``_listen``).
        self._listeners: list[socket.socket] | None = None
        self._acceptors: list[asyncio.Task[None]] = []
        self._peers: dict[Session, _Peer] = {}
        #: Connections not yet known to be WebSocket or plain STOMP.
        self._undecided: set[asyncio.Task[None]] = set()
        self._closing = False
        self._closed = asyncio.Event()
        #: Set while the core's memory alarm is down: blocked publishers wait for it.
        self._memory_ok = asyncio.Event()
        self._memory_ok.set()

    @property
    def port(self) -> int:
        """The port the broker listens on (the one chosen when 0 was asked for)."""
        if self._port is None:
            raise RuntimeError("the broker is not listening; use 'async with' or start()")
        return self._port

    @property
    def allowed_origins(self) -> tuple[str, ...]:
        """The origins admitted besides the broker's own (``"*"``: any)."""
        return self._origins.allowed

    def metrics(self) -> str:
        """The broker's metrics in the Prometheus text format: what ``GET /metrics`` serves.

        Counters (``stomp_broker_*_total``): connections opened by transport,
        sessions opened, messages received, delivered, acked and nacked,
        sessions refused by reason, WebSocket upgrades refused by status, bytes
        received and sent.  Gauges: open connections and sessions, memory
        used, its limit and alarm, totals over every destination, and for the
        ``metrics_destinations`` deepest destinations (every one if ``None``)
        the messages queued, the unacknowledged ones and the subscribers.  See
        :doc:`/metrics`.  This builds it in one go; a scrape builds it a slice
        at a time, letting clients be served in between.
        """
        summary = DestinationSummary(self._metrics_destinations)
        for name, stats in self.core.each_destination():
            summary.add(name, stats)
        return exposition(self.core.counters, self._gauges(), summary)

    def _gauges(self) -> dict[str, int]:
        core = self.core
        return {
            "connections_open": len(self._peers),
            "sessions_open": sum(
                session.connection.state is ConnectionState.CONNECTED for session in core.sessions
            ),
            "memory_used_bytes": core.memory_used,
            "memory_limit_bytes": core.memory_limit,
            "memory_alarm": int(core.memory_alarm),
        }

    async def _scrape(self) -> bytes:
        """What ``GET /metrics`` answers, built :data:`SCRAPE_SLICE` steps at a time."""
        summary = DestinationSummary(self._metrics_destinations)
        for index, (name, stats) in enumerate(self.core.each_destination(), 1):
            summary.add(name, stats)
            if index % SCRAPE_SLICE == 0:
                await asyncio.sleep(0)
        body = bytearray()
        lines = exposition_lines(self.core.counters, self._gauges(), summary)
        for index, line in enumerate(lines, 1):
            body += line.encode("utf-8") + b"\n"
            if index % SCRAPE_SLICE == 0:
                await asyncio.sleep(0)
        return bytes(body)

    async def _may_scrape(self, head: bytes, writer: asyncio.StreamWriter) -> bool:
        """Whether the request ``head`` carries the credentials a scrape needs, if any.

        HTTP Basic with a login and passcode of ``users``, or ``Authorization:
        Bearer`` with ``metrics_token``.  Failed tries count towards the
        client's failed-login throttle, and wait for it, as a CONNECT does.
        """
        throttle, host = self.core.login_throttle, _host(writer)
        loop = asyncio.get_running_loop()
        if self._metrics_guarded and throttle is not None and host is not None:
            await asyncio.sleep(throttle.ready_at(host, loop.time()) - loop.time())
        allowed = self._credentials_ok(head)
        if not allowed and throttle is not None and host is not None:
            throttle.failed(host, loop.time())
        return allowed

    def _credentials_ok(self, head: bytes) -> bool:
        if not self._metrics_guarded:
            return True
        scheme, _, credentials = _header_value(head, b"authorization").partition(" ")
        scheme = scheme.lower()
        if scheme == "bearer" and self._metrics_token is not None:
            return hmac.compare_digest(credentials.strip().encode(), self._metrics_token.encode())
        if scheme == "basic" and self.core.users is not None:
            try:
                decoded = base64.b64decode(credentials.strip(), validate=True).decode("utf-8")
            except ValueError:
                return False
            login, sep, passcode = decoded.partition(":")
            return bool(sep) and self.core.authenticate(login, passcode)
        return False

    async def __aenter__(self) -> Broker:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Start listening."""
        if self._listeners is not None or self._closing:
            raise RuntimeError("a Broker can be started once")
        # The broker's own accept loop, not asyncio.start_server's, which floods the
        # log at the descriptor limit; TLS is started per connection (_secure), so
        # that its handshake has the CONNECT deadline and its failures are logged.
        self._listeners = await listen(self.host, self._requested_port)
        self._port = self._listeners[0].getsockname()[1]
        loop = asyncio.get_running_loop()
        self._acceptors = [
            loop.create_task(accept_forever(sock, self._connected), name="stomp-broker-accept")
            for sock in self._listeners
        ]
        log.info("STOMP broker listening on %s", self.listening_on)

    @property
    def listening_on(self) -> str:
        """Where the broker listens, in words: ``host:port``, then its WebSocket and
        metrics addresses (as its log line and the command line say it)."""
        address = f"{self.host}:{self.port}"
        tls = self._ssl is not None
        where = address
        if self.websocket is not None:
            where += f" (WebSocket: {'wss' if tls else 'ws'}://{address}{self.websocket})"
        if self.serves_metrics:
            where += f" (metrics: {'https' if tls else 'http'}://{address}{METRICS_PATH})"
        return where

    async def serve_forever(self) -> None:
        """Wait until the broker is closed (by :meth:`close`, or by cancelling this)."""
        if self._listeners is None:
            await self.start()
        await self._closed.wait()

    async def close(self) -> None:
        """Stop listening and close every connection cleanly; wait until all is done."""
        if self._closing:
            await self._closed.wait()
            return
        self._closing = True
        for acceptor in self._acceptors:
            acceptor.cancel()
        await asyncio.gather(*self._acceptors, return_exceptions=True)
        for sock in self._listeners or ():
            sock.close()
        told = len(self.core.sessions)
        self._flush(self.core.shut_down())
        for task in self._undecided:
            task.cancel()
        await asyncio.gather(*self._undecided, return_exceptions=True)
        peers = list(self._peers.values())
        for peer in peers:
            peer.stop()
        await asyncio.gather(*(p.task for p in peers if p.task is not None), return_exceptions=True)
        self._closed.set()
        log.info("STOMP broker closed: %d session(s) ended with ERROR %r", told, SHUTDOWN_REASON)

    # -- connections -------------------------------------------------------------

    async def _connected(self, client: socket.socket) -> None:
        """A connection ``accept_forever`` took: streams around it, then ``_accept``."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=READ_SIZE, loop=loop)
        # With a client_connected_cb the protocol is server-side (start_tls needs it).
        protocol = asyncio.StreamReaderProtocol(reader, self._accept, loop=loop)
        await loop.connect_accepted_socket(lambda: protocol, client)

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._closing:
            writer.close()
            return
        loop = asyncio.get_running_loop()
        accepted = loop.time()
        if self._ssl is not None:
            self._undecide(self._secure(reader, writer, accepted), "stomp-broker-tls")
        else:
            self._accepted(reader, writer, accepted)

    def _undecide(self, work: Coroutine[None, None, None], name: str) -> None:
        """Run ``work`` for a connection that has no session yet (close() cancels it)."""
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._undecided.add(task)
        task.add_done_callback(self._undecided.discard)

    async def _secure(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, accepted: float
    ) -> None:
        """The TLS handshake, within the CONNECT deadline; then the connection as usual."""
        assert self._ssl is not None
        try:
            await writer.start_tls(self._ssl, ssl_handshake_timeout=self._tls_timeout)
        except asyncio.CancelledError:
            writer.transport.abort()  # the broker is closing
            raise
        except OSError as exc:
            # A client that never says ClientHello, one that speaks plain text,
            # one that refuses the certificate: none costs more than the deadline.
            log.info(
                "STOMP broker: TLS handshake with %s failed: %s",
                _address(writer.get_extra_info("peername")),
                exc or type(exc).__name__,
            )
            writer.transport.abort()
            return
        if self._closing:
            writer.transport.abort()
            return
        self._accepted(reader, writer, accepted)

    def _accepted(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, accepted: float
    ) -> None:
        # The transport pauses (and drain() waits) past the same mark that pauses deliveries.
        writer.transport.set_write_buffer_limits(high=self._output_limit)
        if self.websocket is None and not self.serves_metrics:
            self._start(_Peer(self._open_session(accepted, writer), reader, writer))
            return
        self._undecide(self._route(reader, writer, accepted), "stomp-broker-route")

    def _open_session(
        self,
        accepted: float,
        writer: asyncio.StreamWriter,
        versions: tuple[Version, ...] | None = None,
    ) -> Session:
        session = self.core.open_session(versions, _host(writer))
        # Its CONNECT deadline counts from the connection, not from when it was routed.
        session.handle_timer(accepted)
        return session

    def _start(self, peer: _Peer) -> None:
        self.core.counters.connections_opened["tcp" if peer.ws is None else "websocket"] += 1
        self._peers[peer.session] = peer
        peer.task = asyncio.get_running_loop().create_task(
            self._serve(peer), name=f"stomp-broker-{peer.session.id}"
        )

    async def _route(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, accepted: float
    ) -> None:
        """Tell HTTP from plain STOMP; start the session, or answer the request."""
        peername = _address(writer.get_extra_info("peername"))
        try:
            try:
                async with asyncio.timeout(self._silence_limit):
                    data = await reader.read(READ_SIZE)
            except asyncio.CancelledError:
                # The broker is closing: a silent client is told so, as a STOMP one is.
                writer.write(ServerConnection().send(Error(message=SHUTDOWN_REASON)))
                writer.close()
                raise
            except TimeoutError:
                # Silent: no browser and no scraper (they speak first), so STOMP.
                if not self._closing:
                    self._start(_Peer(self._open_session(accepted, writer), reader, writer))
                    return
                data = b""
            async with asyncio.timeout(HANDSHAKE_TIMEOUT):
                while data and len(data) < len(_HTTP_GET) and _HTTP_GET.startswith(data):
                    chunk = await reader.read(READ_SIZE)
                    if not chunk:
                        break
                    data += chunk
                if not data.startswith(_HTTP_GET):
                    if data and not self._closing:
                        session = self._open_session(accepted, writer)
                        self._start(_Peer(session, reader, writer, pending=data))
                        return
                elif await self._answer_http(reader, writer, data, peername, accepted):
                    return
        except TimeoutError:
            _log_refusal(
                peername,
                RemoteProtocolError(
                    ErrorKind.BAD_WEBSOCKET,
                    f"no STOMP frame or complete HTTP request within {HANDSHAKE_TIMEOUT} s",
                ),
            )
        except OSError:
            pass  # reset before it said anything: nothing to serve
        except asyncio.CancelledError:
            if not writer.is_closing():
                writer.transport.abort()  # the broker is closing: no time for a polite close
            raise
        except Exception:
            # As for sessions: one connection's failure must not take the broker down.
            log.exception("STOMP broker: handshake with %s failed", peername)
        await asyncio_drain_and_close(reader, writer)

    async def _answer_http(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        data: bytes,
        peername: str,
        accepted: float,
    ) -> bool:
        """Answer a GET: the metrics, or a WebSocket upgrade; True when a session started."""
        while b"\r\n\r\n" not in data and len(data) < MAX_REQUEST_HEAD:
            chunk = await reader.read(READ_SIZE)
            if not chunk:
                break
            data += chunk
        request_line = data.split(b"\r\n", 1)[0].split(b" ")
        target = request_line[1].decode("latin-1") if len(request_line) > 1 else ""
        if self.serves_metrics and target.partition("?")[0] == METRICS_PATH:
            if not await self._may_scrape(data.partition(b"\r\n\r\n")[0], writer):
                log.info("STOMP broker: %s asked for %s: no valid credentials", peername, target)
                scheme = "Basic" if self.core.users is not None else "Bearer"
                challenge = (("WWW-Authenticate", f'{scheme} realm="stomp_proto broker"'),)
                writer.write(
                    _http_answer(401, "Unauthorized", "text/plain", "credentials required\n",
                                 challenge)
                )  # fmt: skip
                return False
            writer.write(_http_answer(200, "OK", CONTENT_TYPE, await self._scrape()))
            return False
        if self.websocket is None:
            log.info("STOMP broker: %s asked for %r: not found", peername, target)
            writer.write(_http_answer(404, "Not Found", "text/plain", f"no {target!r} here\n"))
            return False
        handshake = ServerHandshake(self.websocket, self._versions, self._origins)
        upgrade = handshake.receive_data(data)
        while upgrade is None:
            upgrade = handshake.receive_data(await reader.read(READ_SIZE) or None)
        if upgrade.error is not None:
            _log_refusal(peername, upgrade.error)  # before the client hears of it
            if upgrade.status is not None:
                self.core.counters.upgrades_refused[upgrade.status] += 1
        writer.write(upgrade.to_send)
        if upgrade.channel is None or self._closing:
            return False
        session = self._open_session(accepted, writer, upgrade.versions)
        self._start(_Peer(session, reader, writer, upgrade.channel, b""))
        return True

    async def _serve(self, peer: _Peer) -> None:
        session = peer.session
        loop = asyncio.get_running_loop()
        try:
            while not session.closed:
                data = await self._next_input(peer)
                peer.ended = data is None
                if data:
                    self.core.counters.bytes_received += len(data)
                session.receive_data(data)
                beat = session.handle_timer(loop.time())
                if beat:
                    self.core.counters.bytes_sent += len(beat)
                    peer.write(beat)
                self._flush(self.core.process(session))
        except Exception:
            # One connection's failure must not take the broker down.
            log.exception("STOMP broker: connection %s failed", session.id)
        finally:
            peer.stopping = True  # cancelling the clean-up below would cut it short
            _log_ending(peer, self._closing)
            self._flush(self.core.close_session(session))
            await self._stop_resumer(peer)
            await self._close_transport(peer)
            self._peers.pop(session, None)

    async def _next_input(self, peer: _Peer) -> bytes | None:
        """Bytes from the client, ``None`` at its end, ``b""`` when the timer is due."""
        data: bytes | None
        if peer.pending is not None:
            data, peer.pending = peer.pending, None
        else:
            deadline = peer.session.get_timer()
            try:
                async with asyncio.timeout_at(deadline):
                    # The memory alarm: a publisher is not read from (TCP slows it
                    # down) until consumers have brought the level down.
                    while peer.session.reading_blocked:
                        await self._memory_ok.wait()
                    # While the client's send buffer is over its high-water mark, do not
                    # read from it: TCP then slows down a client that does not read.
                    await peer.writer.drain()
                    data = await peer.reader.read(READ_SIZE) or None
            except TimeoutError:
                return b""
            except OSError:
                # Reset, TLS failure: as good as the end of the stream.
                return None
        if peer.ws is None:
            return data
        got = peer.ws.receive_data(data)
        if got.to_send:
            peer.writer.write(got.to_send)
        if got.error is not None:
            log.info(
                "STOMP broker: connection %s: %s: %s",
                peer.session.id,
                got.error.kind.name,
                got.error.message,
            )
        if got.closed:
            if got.error is None and peer.ws.close_code in CLEAN_CLOSE_MEANING:
                log.debug(
                    "STOMP broker: connection %s: WebSocket closed by the client: %d (%s)",
                    peer.session.id,
                    peer.ws.close_code,
                    CLEAN_CLOSE_MEANING[peer.ws.close_code],
                )
            # What came before the close still counts (a DISCONNECT, say); the
            # end follows on the next read.
            if got.data:
                peer.pending = b""
                return got.data
            return None
        # b"" (only control frames came) just makes the loop check the timers.
        return got.data

    def _flush(self, outbox: Outbox) -> None:
        """Write what the core asked for, pausing clients that do not keep up."""
        self._watch_memory()
        for session, data in outbox.data.items():
            peer = self._peers.get(session)
            if peer is None:
                continue
            self.core.counters.bytes_sent += len(data)
            peer.write(data)
            if session.closed:
                continue
            if peer.over_limit(self._output_limit):
                self.core.pause(session)
            if session.paused and peer.resumer is None:
                peer.resumer = asyncio.get_running_loop().create_task(
                    self._resume_when_drained(peer), name=f"stomp-broker-{session.id}-resume"
                )
        for session in outbox.to_close:
            peer = self._peers.get(session)
            # The session's own task ends by itself: it sees the session closed.
            if peer is not None and peer.task is not asyncio.current_task():
                peer.stop()

    def _watch_memory(self) -> None:
        """Follow the core's memory alarm (it changes only in calls whose outbox comes here)."""
        core = self.core
        if core.memory_alarm == self._memory_ok.is_set():
            if core.memory_alarm:
                self._memory_ok.clear()
                log.warning(
                    "STOMP broker: memory alarm: %d of %d bytes of messages held;"
                    " publishers are not read from until consumers take some",
                    core.memory_used,
                    core.memory_limit,
                )
            else:
                self._memory_ok.set()
                log.info(
                    "STOMP broker: memory alarm cleared: %d bytes of messages held",
                    core.memory_used,
                )

    async def _resume_when_drained(self, peer: _Peer) -> None:
        session = peer.session
        try:
            while session.paused and not session.closed:
                await peer.writer.drain()
                if peer.over_limit(self._output_limit):
                    # drain() follows the transport's own pause state; should the two
                    # ever disagree, poll rather than spin.
                    await asyncio.sleep(0.01)
                    continue
                self._flush(self.core.resume(session))
                # drain() does not yield when nothing is buffered: let others run.
                await asyncio.sleep(0)
        except OSError:
            pass  # the connection is gone; its own task cleans up
        finally:
            peer.resumer = None

    async def _stop_resumer(self, peer: _Peer) -> None:
        resumer = peer.resumer
        if resumer is not None:
            resumer.cancel()
            await asyncio.gather(resumer, return_exceptions=True)

    async def _close_transport(self, peer: _Peer) -> None:
        writer = peer.writer
        if peer.ws is not None:
            writer.write(peer.ws.close())
        if peer.ended:
            await close_writer(writer, CLOSE_TIMEOUT)
        else:
            await asyncio_drain_and_close(peer.reader, writer)


def _host(writer: asyncio.StreamWriter) -> str | None:
    """The client's host (without the port), for the failed-login throttle."""
    peername = writer.get_extra_info("peername")
    if isinstance(peername, tuple) and peername:
        return str(peername[0])
    return None


def _address(peername: object) -> str:
    """``host:port`` of a peer name (``[host]:port`` for IPv6); anything else as it is."""
    if isinstance(peername, tuple) and len(peername) >= 2:
        host, port = peername[0], peername[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(peername)


def _log_ending(peer: _Peer, shutting_down: bool) -> None:
    """Log how a session ended: INFO for a refused or failed one, with the client and why.

    A clean DISCONNECT, a connection closed before it sent anything (a port
    probe) and the broker's own shutdown are DEBUG.
    """
    conn = peer.session.connection
    ending = conn.ended_by
    where = f"STOMP broker: connection {peer.session.id} from {peer.address}"
    if conn.ended_cleanly:
        log.debug("%s: ended by DISCONNECT", where)
    elif isinstance(ending, RemoteProtocolError):
        log.info("%s refused: %s: %s", where, ending.kind.name, ending.message)
    elif isinstance(ending, Error):
        detail = ending.body.decode("utf-8", "replace").strip()[:200]
        reason = (
            ending.message
            if not detail or detail == ending.message
            else (f"{ending.message}: {detail}")
        )
        (log.debug if shutting_down else log.info)("%s ended by ERROR: %s", where, reason)
    elif isinstance(ending, HeartBeatTimeout):
        log.info("%s: no heart-beat for %.1f s", where, ending.silence)
    elif isinstance(ending, ConnectionClosed) and conn.negotiated_version is None:
        log.debug("%s closed before CONNECT", where)
    else:
        log.info("%s lost: closed without DISCONNECT", where)


def _http_answer(
    status: int,
    reason: str,
    content_type: str,
    body: str | bytes,
    headers: tuple[tuple[str, str], ...] = (),
) -> bytes:
    """A complete HTTP/1.1 answer that closes the connection."""
    payload = body.encode("utf-8") if isinstance(body, str) else body
    extra = "".join(f"{name}: {value}\r\n" for name, value in headers)
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n{extra}"
        f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("ascii") + payload


def _header_value(head: bytes, name: bytes) -> str:
    """The value of the first header ``name`` (lower case) in a request head; ``""`` if none."""
    for line in head.split(b"\r\n")[1:]:
        field, sep, value = line.partition(b":")
        if sep and field.strip().lower() == name:
            return value.strip().decode("latin-1")
    return ""


def _log_refusal(peer: str, error: RemoteProtocolError) -> None:
    # A client's mistake, not the broker's: INFO, with the kind to grep for.
    log.info(
        "STOMP broker: refused connection from %s: %s: %s", peer, error.kind.name, error.message
    )


async def run_broker(
    host: str = "127.0.0.1",
    port: int = 61613,
    *,
    ssl: _ssl.SSLContext | None = None,
    websocket: str | None = None,
    allowed_origins: Iterable[str] = (),
    metrics: bool = True,
    metrics_token: str | None = None,
    metrics_destinations: int | None = DEFAULT_TOP_DESTINATIONS,
    on_listening: Callable[[Broker], object] | None = None,
    **options: Unpack[BrokerOptions],
) -> None:
    """Serve a :class:`Broker` on ``host:port`` until cancelled, then close it cleanly.

    ``ssl`` (a server-side :class:`ssl.SSLContext`) makes it a TLS server;
    ``websocket``: also serve STOMP over WebSocket at this path, to the
    ``allowed_origins`` (see :class:`Broker`); ``metrics``: serve ``GET
    /metrics``, guarded and bounded by ``metrics_token`` and
    ``metrics_destinations`` as for :class:`Broker`; ``options`` are the
    :class:`BrokerCore` options.

    ``on_listening`` is called with the broker once it listens (say, to print
    ``broker.port`` when ``port`` is 0).
    """
    async with Broker(
        host,
        port,
        ssl=ssl,
        websocket=websocket,
        allowed_origins=allowed_origins,
        metrics=metrics,
        metrics_token=metrics_token,
        metrics_destinations=metrics_destinations,
        **options,
    ) as broker:
        if on_listening is not None:
            on_listening(broker)
        await broker.serve_forever()
