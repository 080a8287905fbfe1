"""Raw STOMP sessions for the checker: odd bytes out, a tolerant reader in, a wire log.

The project's :class:`~stomp_proto.FrameDecoder` refuses what the specs
forbid, which is what a client wants and not what a checker wants: a checker
must see a broker's deviations to report them.  :class:`FrameReader` reads
anything frame-shaped and keeps the raw header text (escapes undecoded), the
raw bytes and whether the lines ended in CRLF; :class:`Wire` is one blocking
connection (TCP, TLS or WebSocket) that writes exactly the bytes a case gives
it and logs both directions with timestamps.
"""

from __future__ import annotations

import contextlib
import re
import socket
import ssl
import time
from dataclasses import dataclass, field

from stomp_proto import Version
from stomp_proto.websocket import ClientHandshake, ServerHandshake, WebSocketChannel

#: The most bytes of one chunk the wire log shows.
LOG_BYTES = 200

_ESCAPES = {
    "1.1": {"\\": "\\\\", "\n": "\\n", ":": "\\c"},
    "1.2": {"\\": "\\\\", "\r": "\\r", "\n": "\\n", ":": "\\c"},
}
_UNESCAPES = {
    "1.1": {"\\": "\\", "n": "\n", "c": ":"},
    "1.2": {"\\": "\\", "r": "\r", "n": "\n", "c": ":"},
}


def escape(text: str, version: Version) -> str:
    """``text`` as a header of ``version`` carries it (1.0 has no escapes)."""
    table = _ESCAPES.get(version)
    if table is None:
        return text
    return "".join(table.get(char, char) for char in text)


def unescape(text: str, version: Version) -> str | None:
    """The value a raw header text stands for; ``None`` when an escape is undefined."""
    table = _UNESCAPES.get(version)
    if table is None or "\\" not in text:
        return text
    out: list[str] = []
    chars = iter(text)
    for char in chars:
        if char != "\\":
            out.append(char)
            continue
        decoded = table.get(next(chars, ""))
        if decoded is None:
            return None
        out.append(decoded)
    return "".join(out)


def build(
    command: str,
    headers: list[tuple[str, str]] | tuple[tuple[str, str], ...] = (),
    body: bytes = b"",
    *,
    version: Version = "1.2",
    escaped: bool = True,
    eol: bytes = b"\n",
    content_length: bool | None = None,
) -> bytes:
    """The bytes of one frame; header names and values escaped for ``version``.

    ``content_length=None`` adds one when the body holds a NUL; ``escaped=False``
    writes the header text as given (for deliberately odd frames).  CONNECT and
    STOMP are never escaped, as the specs say.
    """
    escape_now = escaped and command not in ("CONNECT", "STOMP", "CONNECTED")
    lines = [command.encode("utf-8")]
    for name, value in headers:
        if escape_now:
            name, value = escape(name, version), escape(value, version)
        lines.append(f"{name}:{value}".encode())
    if content_length or (content_length is None and b"\x00" in body):
        lines.append(f"content-length:{len(body)}".encode())
    return eol.join(lines) + eol + eol + body + b"\x00"


@dataclass(frozen=True, slots=True)
class RawFrame:
    """A frame as the peer wrote it; header text raw (escapes not decoded)."""

    #: The command line (``MESSAGE``), CR removed.
    command: str
    #: ``(name, value)`` pairs as written, escapes not decoded, repeats kept.
    headers: tuple[tuple[str, str], ...]
    #: The body.
    body: bytes
    #: The frame's bytes, from the command to the NUL.
    raw: bytes
    #: Whether some line of the head ended in CRLF.
    crlf: bool = False
    #: Why the frame is malformed ("" when it is not): no NUL after content-length octets...
    fault: str = ""
    #: Seconds since the wire opened, when the frame was complete.
    at: float = 0.0

    def get(self, name: str) -> str | None:
        """The raw text of the first header called ``name``."""
        for key, value in self.headers:
            if key == name:
                return value
        return None

    def get_all(self, name: str) -> list[str]:
        """The raw text of every header called ``name``, in order."""
        return [value for key, value in self.headers if key == name]

    def value(self, name: str, version: Version) -> str | None:
        """The first ``name`` header decoded for ``version`` (raw if its escapes are bad)."""
        raw = self.get(name)
        if raw is None:
            return None
        decoded = unescape(raw, version)
        return raw if decoded is None else decoded

    def decoded_headers(self, version: Version) -> dict[str, str]:
        """Names and values decoded, the first of a repeated header winning."""
        result: dict[str, str] = {}
        for key, value in self.headers:
            name = unescape(key, version) or key
            result.setdefault(name, unescape(value, version) or value)
        return result


@dataclass(slots=True)
class FrameReader:
    """Splits a byte stream into :class:`RawFrame` values and heart-beat EOLs, tolerantly."""

    buffer: bytearray = field(default_factory=bytearray)
    # While a frame is incomplete: the buffer length it needs (content-length known),
    # and where a NUL may still appear.  Without them, a 4 MiB body in 64 KiB reads
    # would be parsed again at every read (quadratic; the proxy of the tests felt it).
    _need: int = 0
    _nul_from: int = 0

    def feed(self, data: bytes, at: float) -> list[RawFrame | float]:
        """Frames completed by ``data``, and the time of each EOL between frames."""
        self.buffer += data
        out: list[RawFrame | float] = []
        while True:
            buf = self.buffer
            if buf[:1] == b"\n":
                del buf[:1]
                out.append(at)
                continue
            if buf[:2] == b"\r\n":
                del buf[:2]
                out.append(at)
                continue
            if not buf or buf == b"\r":
                return out
            frame = self._frame(at)
            if frame is None:
                return out
            out.append(frame)

    def _frame(self, at: float) -> RawFrame | None:
        buf = self.buffer
        if len(buf) < self._need or buf.find(b"\x00", self._nul_from) < 0:
            self._nul_from = max(self._nul_from, len(buf))
            return None
        frame = self._parse(at)
        if frame is None:
            self._nul_from = len(buf)
        else:
            self._need = self._nul_from = 0
        return frame

    def _parse(self, at: float) -> RawFrame | None:
        buf = self.buffer
        ends = [i for i in (buf.find(b"\n\n"), buf.find(b"\n\r\n")) if i >= 0]
        nul_first = buf.find(b"\x00")
        if not ends or (0 <= nul_first < min(ends)):
            if nul_first >= 0:
                # A NUL inside the head: a frame without the blank line.
                raw = bytes(buf[: nul_first + 1])
                del buf[: nul_first + 1]
                text = raw[:-1].decode("utf-8", "replace")
                return RawFrame(
                    text.split("\n")[0].rstrip("\r"),
                    (),
                    b"",
                    raw,
                    fault="no blank line before the NUL",
                    at=at,
                )
            return None
        head_end = min(ends)
        body_start = head_end + (2 if buf[head_end : head_end + 2] == b"\n\n" else 3)
        lines = bytes(buf[:head_end]).split(b"\n")
        crlf = (
            any(line.endswith(b"\r") for line in lines) or buf[head_end + 1 : head_end + 2] == b"\r"
        )
        texts = [line.removesuffix(b"\r").decode("utf-8", "replace") for line in lines]
        headers = []
        fault = ""
        for line in texts[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                fault = fault or f"header line without ':' ({line!r})"
            headers.append((name, value))
        length = None
        for name, value in headers:
            if name == "content-length":
                try:
                    length = int(value)
                except ValueError:
                    fault = fault or f"bad content-length {value!r}"
                break
        if length is not None and length >= 0:
            end = body_start + length
            if len(buf) <= end:
                self._need = end + 1
                return None
            body = bytes(buf[body_start:end])
            if buf[end] != 0:
                fault = fault or "no NUL after the content-length octets"
                nul = buf.find(b"\x00", end)
                if nul < 0:
                    return None
                end = nul
        else:
            end = buf.find(b"\x00", body_start)
            if end < 0:
                return None
            body = bytes(buf[body_start:end])
        raw = bytes(buf[: end + 1])
        del buf[: end + 1]
        return RawFrame(texts[0], tuple(headers), body, raw, crlf, fault, at)


class Unreachable(Exception):
    """The broker could not be reached (refused, timed out, TLS or WebSocket failed)."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where and how the checker connects."""

    #: The broker's host name or address.
    host: str
    #: Its port (the HTTP port for WebSocket).
    port: int
    #: CONNECT ``login``; ``None``: not sent.
    login: str | None = None
    #: CONNECT ``passcode``; ``None``: not sent.
    passcode: str | None = None
    #: CONNECT ``host``; ``None``: the host itself.
    vhost: str | None = None
    #: Whether to connect with TLS.
    tls: bool = False
    #: A CA file to trust for TLS (default: the system's).
    cafile: str | None = None
    #: A WebSocket path (``/ws``): run over STOMP over WebSocket.
    websocket: str | None = None
    #: Seconds the checker waits for one answer.
    timeout: float = 2.0
    #: How the queues of the run are named: this prefix, a run tag and a number.
    prefix: str = "/queue/stomp-check."
    #: Headers every SEND and SUBSCRIBE to the run's queues carries, so that the broker
    #: removes them after the run (RabbitMQ: ``x-expires``); see :func:`queue_headers`.
    queue_headers: tuple[tuple[str, str], ...] = ()


#: How long RabbitMQ keeps one of the run's queues after its last use, in ms.
RABBITMQ_EXPIRY_MS = 60_000


def queue_headers(server: str) -> tuple[tuple[str, str], ...]:
    """What a broker (by its server header) is told over STOMP to remove the run's queues."""
    if server.startswith("RabbitMQ"):
        # Queue arguments must be the same on every declaration, SEND and SUBSCRIBE alike.
        return (("x-expires", str(RABBITMQ_EXPIRY_MS)),)
    return ()


def left_behind(target: Target, queues: int) -> str:
    """What the run leaves on the broker, in one sentence for the report."""
    where = f"{queues} queues named {target.prefix}*"
    if dict(target.queue_headers).get("x-expires"):
        seconds = int(dict(target.queue_headers)["x-expires"]) // 1000
        return f"nothing after {seconds} s: the run's {where} carry x-expires"
    return (
        f"the run's {where} (this broker offers no way over STOMP to remove them; "
        "messages left in some of them)"
    )


_FRAME_START = re.compile(rb"(\A|\x00[\r\n]*)(SEND|SUBSCRIBE)(\r?\n)")


class Wire:
    """One raw connection to the broker, with its log; blocking, one thread at a time."""

    def __init__(
        self,
        target: Target,
        log: list[str],
        name: str,
        started: float,
        versions: tuple[Version, ...] = ("1.2", "1.1", "1.0"),
        accepted: socket.socket | None = None,
    ) -> None:
        # ``accepted``: a connection a listening checker accepted (client mode).
        #: Where it is connected.
        self.target = target
        self._log = log
        self._name = name
        self._started = started
        self._reader = FrameReader()
        #: Every frame received, in order.
        self.frames: list[RawFrame] = []
        #: When (seconds since the case began) each EOL between frames came.
        self.eols: list[float] = []
        #: Seconds since the start of the case when any data last arrived.
        self.arrivals: list[float] = []
        #: Whether the connection has ended.
        self.closed = False
        #: Whether it ended with an error (a reset) rather than a close.
        self.reset = False
        #: The WebSocket subprotocol agreed (``None``: none, or not WebSocket).
        self.subprotocol: str | None = None
        self._pending: list[RawFrame] = []
        #: The CONNECTED frame, once :meth:`Probe.session` has logged in.
        self.connected: RawFrame | None = None
        try:
            if accepted is not None:
                sock = accepted
            else:
                sock = socket.create_connection((target.host, target.port), timeout=target.timeout)
            if target.tls and accepted is None:
                context = ssl.create_default_context(cafile=target.cafile)
                sock = context.wrap_socket(sock, server_hostname=target.host)
        except OSError as exc:
            raise Unreachable(f"cannot connect to {target.host}:{target.port}: {exc}") from exc
        self._sock = sock
        self._ws: WebSocketChannel | None = None
        if target.websocket and accepted is not None:
            self._server_handshake(target, versions)
        elif target.websocket:
            self._handshake(target, versions)
        self.note(
            ("accepted a client on" if accepted is not None else "connected to")
            + f" {target.host}:{target.port}"
            + (f" (WebSocket {target.websocket}, {self.subprotocol})" if self._ws else "")
        )

    def _server_handshake(self, target: Target, versions: tuple[Version, ...]) -> None:
        """Accept a client's WebSocket upgrade (client mode over WebSocket)."""
        handshake = ServerHandshake(target.websocket or "/", versions)
        deadline = time.monotonic() + target.timeout
        try:
            while True:
                self._sock.settimeout(max(0.01, deadline - time.monotonic()))
                data = self._sock.recv(65536)
                upgrade = handshake.receive_data(data or None)
                if upgrade is not None:
                    break
            self._sock.sendall(upgrade.to_send)
        except OSError as exc:
            self._sock.close()
            raise Unreachable(f"WebSocket handshake failed: {exc}") from exc
        if upgrade.channel is None:
            self._sock.close()
            raise Unreachable(f"WebSocket handshake refused: {upgrade.error}")
        self._ws = upgrade.channel
        self.subprotocol = upgrade.channel.subprotocol

    def _handshake(self, target: Target, versions: tuple[Version, ...]) -> None:
        try:
            handshake = ClientHandshake(target.host, target.port, target.websocket or "/", versions)
            self._sock.sendall(handshake.request)
            deadline = time.monotonic() + target.timeout
            while True:
                self._sock.settimeout(max(0.01, deadline - time.monotonic()))
                data = self._sock.recv(65536)
                channel = handshake.receive_data(data or None)
                if channel is not None:
                    self._ws = channel
                    self.subprotocol = channel.subprotocol
                    leftover = channel.receive_data(b"")
                    if leftover.data:
                        self._take(leftover.data)
                    return
        except Exception as exc:
            self._sock.close()
            raise Unreachable(f"WebSocket handshake failed: {exc}") from exc

    # -- log -------------------------------------------------------------------

    def now(self) -> float:
        """Seconds since the case began."""
        return time.monotonic() - self._started

    def note(self, text: str) -> None:
        """Add a line to the wire log."""
        self._log.append(f"{self.now() * 1000:8.1f} ms {self._name} {text}")

    def _log_bytes(self, arrow: str, data: bytes) -> None:
        shown = repr(data[:LOG_BYTES])
        more = f" ... ({len(data)} bytes)" if len(data) > LOG_BYTES else ""
        self.note(f"{arrow} {shown}{more}")

    # -- writing ---------------------------------------------------------------

    def send(self, data: bytes, *, chunk: int | None = None) -> None:
        """Write ``data`` as it is (in pieces of ``chunk`` bytes when given)."""
        if self.closed:
            self.note(f"(not sent, closed) {data[:80]!r}")
            return
        if self.target.queue_headers and self.target.prefix.encode() in data:
            extra = b"".join(f"{k}:{v}\n".encode() for k, v in self.target.queue_headers)
            data = _FRAME_START.sub(lambda m: m.group(0) + extra, data)
        self._log_bytes("->", data)
        pieces = [data] if not chunk else [data[i : i + chunk] for i in range(0, len(data), chunk)]
        try:
            for piece in pieces:
                if self._ws is not None:
                    piece = self._ws.send(piece)
                self._sock.sendall(piece)
        except OSError as exc:
            self.note(f"write failed: {exc}")
            self._ended(reset=True)

    # -- reading ---------------------------------------------------------------

    def _ended(self, *, reset: bool = False) -> None:
        if not self.closed:
            self.closed = True
            self.reset = reset
            self.note("connection reset" if reset else "connection closed by the broker")

    def _take(self, data: bytes) -> None:
        at = self.now()
        self.arrivals.append(at)
        self._log_bytes("<-", data)
        for item in self._reader.feed(data, at):
            if isinstance(item, RawFrame):
                self.frames.append(item)
                self._pending.append(item)
            else:
                self.eols.append(item)

    def _receive(self, timeout: float) -> bool:
        """Read once; False when nothing came within ``timeout`` or the connection ended."""
        if self.closed:
            return False
        self._sock.settimeout(max(timeout, 0.001))
        try:
            data = self._sock.recv(65536)
        except TimeoutError:
            return False
        except ssl.SSLError as exc:
            self.note(f"TLS error: {exc}")
            self._ended(reset=True)
            return False
        except OSError:
            self._ended(reset=True)
            return False
        if self._ws is not None:
            received = self._ws.receive_data(data or None)
            if received.to_send:
                with contextlib.suppress(OSError):
                    self._sock.sendall(received.to_send)
            if received.data:
                self._take(received.data)
            if received.closed or not data:
                self._ended()
                return False
            return True
        if not data:
            self._ended()
            return False
        self._take(data)
        return True

    def next_frame(self, timeout: float | None = None) -> RawFrame | None:
        """The next unread frame; ``None`` when none came in time or the connection ended."""
        deadline = time.monotonic() + (self.target.timeout if timeout is None else timeout)
        while not self._pending:
            left = deadline - time.monotonic()
            if left <= 0 or (not self._receive(left) and self.closed):
                break
        return self._pending.pop(0) if self._pending else None

    def expect(
        self, *commands: str, timeout: float | None = None, receipt: str | None = None
    ) -> RawFrame | None:
        """The first unread frame with one of ``commands``, or an ERROR; others stay unread.

        ``receipt`` also requires that receipt-id (raw text) on a RECEIPT.
        """
        deadline = time.monotonic() + (self.target.timeout if timeout is None else timeout)
        while True:
            for index, frame in enumerate(self._pending):
                wanted = frame.command in commands and (
                    receipt is None
                    or frame.command != "RECEIPT"
                    or frame.get("receipt-id") == receipt
                )
                if wanted or frame.command == "ERROR":
                    return self._pending.pop(index)
            left = deadline - time.monotonic()
            if left <= 0 or self.closed:
                return None
            self._receive(left)

    def quiet(self, seconds: float) -> list[RawFrame]:
        """Everything that arrives in ``seconds`` (or until the connection ends)."""
        deadline = time.monotonic() + seconds
        while not self.closed:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._receive(left)
        got, self._pending = self._pending, []
        return got

    def wait_closed(self, timeout: float | None = None) -> bool:
        """Whether the broker ends the connection within ``timeout`` (reading meanwhile)."""
        deadline = time.monotonic() + (self.target.timeout if timeout is None else timeout)
        while not self.closed:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._receive(left)
        return True

    def close(self) -> None:
        """Close the connection (the checker's side)."""
        if not self.closed:
            self.note("closed by the checker")
        self.closed = True
        with contextlib.suppress(OSError):
            self._sock.close()
