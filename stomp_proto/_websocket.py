"""STOMP over WebSocket, on wsproto (sans-IO, like the rest of stomp_proto).

A WebSocket carries STOMP as a stream of bytes cut into messages: each
message's payload (binary, or text as UTF-8) is the next piece of that stream,
so a frame may span messages, a message may hold several frames, and the
STOMP decoder reassembles them as it does TCP segments.  We send every piece
as one binary message (always valid, whatever the body holds) and accept both
kinds.

The subprotocols ``v10.stomp``, ``v11.stomp`` and ``v12.stomp`` name the
highest STOMP version a side will speak: the one negotiated in the upgrade
caps the versions offered (client) or accepted (broker) in CONNECT.  Without a
subprotocol every configured version stays allowed.

Browsers send an ``Origin`` header with every upgrade; a server that admits
any origin lets every web page the user opens speak to it with the user's
network position (cross-site WebSocket hijacking).  :class:`OriginPolicy`
decides which origins the broker admits: its own (the scheme it serves, and the
``Host`` the request names) and the ones configured; a request without
``Origin`` comes from no browser page and is admitted.

Three sans-IO pieces - :class:`ClientHandshake`, :class:`ServerHandshake` and
:class:`WebSocketChannel` (the open connection) - hold all the protocol
handling, with no I/O; the clients put the client side on their byte streams
(``_client._websocket_stream`` for asyncio and trio, ``_client._blocking``
for threads), and the broker drives the
server side in ``stomp_proto.broker._server``.

wsproto is an optional dependency (the ``ws`` extra): it is imported when a
WebSocket is first used, never by ``import stomp_proto``.
"""

from __future__ import annotations

import base64
import importlib
import re
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ._errors import ErrorKind, LocalProtocolError, RemoteProtocolError
from ._frame import VERSIONS, Version

__all__ = [
    "CLEAN_CLOSE_MEANING",
    "SUBPROTOCOLS",
    "ClientHandshake",
    "OriginPolicy",
    "Received",
    "ServerHandshake",
    "WebSocketChannel",
    "accepted_versions",
    "check_origin",
    "choose_subprotocol",
    "offered_subprotocols",
    "require_wsproto",
]

#: The WebSocket subprotocol of each STOMP version.
SUBPROTOCOLS: dict[Version, str] = {"1.0": "v10.stomp", "1.1": "v11.stomp", "1.2": "v12.stomp"}
_VERSION_OF = {name: version for version, name in SUBPROTOCOLS.items()}

#: The close codes that end a connection normally, with what each means for the log:
#: 1005 is a close frame without a status code, which browsers and stompjs's
#: forceDisconnect() send (RFC 6455 7.1.5 and 7.4.1).
CLEAN_CLOSE_MEANING = {1000: "normal", 1001: "going away", 1005: "normal, no status code"}
_CLEAN_CLOSE = CLEAN_CLOSE_MEANING.keys()
#: Close code sent when we end the connection.
_NORMAL_CLOSURE = 1000

_INSTALL_HINT = "STOMP over WebSocket needs the wsproto package: pip install 'stomp-proto[ws]'"


def require_wsproto() -> ModuleType:
    """The ``wsproto`` module; ImportError with install instructions when it is missing."""
    try:
        return importlib.import_module("wsproto")
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc


def _bad(message: str) -> RemoteProtocolError:
    return RemoteProtocolError(ErrorKind.BAD_WEBSOCKET, message)


def check_path(path: str) -> str:
    """``path`` if it can be a request target ("/ws", "/stomp?x=1"), else ValueError."""
    if not path.startswith("/") or any(c.isspace() or ord(c) < 0x21 for c in path):
        raise ValueError(f"a WebSocket path starts with '/' and has no spaces: {path!r}")
    return path


def offered_subprotocols(versions: Iterable[Version]) -> list[str]:
    """The subprotocols a client offers for ``versions``, most preferred (highest) first."""
    return [SUBPROTOCOLS[v] for v in sorted(set(versions), reverse=True)]


def accepted_versions(
    subprotocol: str | None, versions: tuple[Version, ...]
) -> tuple[Version, ...]:
    """``versions`` capped by a negotiated subprotocol (all of them when there is none)."""
    if subprotocol is None:
        return versions
    top = _VERSION_OF[subprotocol]
    return tuple(v for v in versions if v <= top)


def choose_subprotocol(offers: Iterable[str], versions: tuple[Version, ...]) -> str | None:
    """The subprotocol a server picks among a client's ``offers``: the highest STOMP version.

    None when nothing is offered (an empty name offers nothing); a
    ``BAD_WEBSOCKET`` RemoteProtocolError when none of the offers is one of ``versions``.
    """
    offered = [p for p in offers if p]
    if not offered:
        return None
    ours = set(offered_subprotocols(versions))
    usable = [p for p in offered if p in ours]
    if not usable:
        raise _bad(f"no supported STOMP subprotocol among {', '.join(offered)}")
    return max(usable, key=lambda p: _VERSION_OF[p])


def _host_header(host: str, port: int) -> str:
    # An IPv6 literal needs brackets in a Host header (RFC 7230 uri-host).
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{host}:{port}"


@dataclass(frozen=True, slots=True)
class Received:
    """What some bytes from the peer amounted to, for :meth:`WebSocketChannel.receive_data`.

    ``data`` is STOMP stream data; ``to_send`` must be written back (a pong, or
    the reply to a close); ``closed`` means the WebSocket has ended - cleanly
    when ``error`` is None, else ``error`` says why.
    """

    data: bytes = b""
    to_send: bytes = b""
    closed: bool = False
    error: RemoteProtocolError | None = None


class WebSocketChannel:
    """An open WebSocket carrying a STOMP byte stream, without I/O (either side).

    ``subprotocol`` is the one negotiated (None: none was).
    """

    def __init__(self, ws: Any, subprotocol: str | None) -> None:
        self._ws = ws  # a wsproto.WSConnection in the OPEN state
        self._events = require_wsproto().events
        self.subprotocol = subprotocol
        #: The close code the peer sent (1006 when the transport ended without one).
        self.close_code: int | None = None
        self._ended = False

    @property
    def open(self) -> bool:
        """Whether messages may still be sent (no close frame sent or received yet)."""
        return bool(self._ws.state.name == "OPEN")

    def send(self, data: bytes | bytearray) -> bytes:
        """The wire bytes of one binary message holding ``data`` (b"" once closing)."""
        if not data or not self.open:
            return b""
        return bytes(self._ws.send(self._events.BytesMessage(data=bytes(data))))

    def close(self, code: int = _NORMAL_CLOSURE, reason: str | None = None) -> bytes:
        """The close frame to send (b"" when the WebSocket is already closing)."""
        if not self.open:
            return b""
        return bytes(self._ws.send(self._events.CloseConnection(code=code, reason=reason)))

    def receive_data(self, data: bytes | None) -> Received:
        """Feed bytes from the peer (``None``: the transport ended); see :class:`Received`."""
        events = self._events
        if self._ended:
            return Received(closed=True)
        try:
            self._ws.receive_data(data)
        except Exception as exc:  # wsproto refuses data once closed
            self._ended = True
            return Received(closed=True, error=_bad(f"WebSocket: {exc}"))
        payload = bytearray()
        to_send = bytearray()
        for event in self._ws.events():
            if isinstance(event, events.BytesMessage):
                # Pieces of a fragmented message arrive in order: appending them
                # to the stream is reassembling the message.
                payload += event.data
            elif isinstance(event, events.TextMessage):
                payload += event.data.encode("utf-8")
            elif isinstance(event, events.Ping):
                to_send += self._ws.send(event.response())
            elif isinstance(event, events.CloseConnection):
                return self._closed(event, bytes(payload), to_send)
        return Received(bytes(payload), bytes(to_send))

    def _closed(self, event: Any, payload: bytes, to_send: bytearray) -> Received:
        state = self._ws.state.name
        self._ended = True
        self.close_code = event.code
        reason = f"{event.code}" + (f" {event.reason}" if event.reason else "")
        if state == "REMOTE_CLOSING":
            # The peer closed: answer its close frame, as RFC 6455 5.5.1 asks.
            to_send += self._ws.send(event.response())
            error = None if event.code in _CLEAN_CLOSE else _bad(f"WebSocket closed: {reason}")
        elif state == "OPEN":
            # wsproto found a fault in what the peer sent (bad UTF-8 in a text
            # message is 1007): we close with that code.
            to_send += self._ws.send(self._events.CloseConnection(event.code, event.reason))
            error = _bad(f"bad WebSocket data from the peer: {reason}")
        else:
            # The reply to our own close, or the transport ended (1006).
            error = None if event.code in _CLEAN_CLOSE else _bad(f"WebSocket ended: {reason}")
        return Received(payload, bytes(to_send), closed=True, error=error)


#: An HTTP header name (RFC 9110 "token").
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


class ClientHandshake:
    """The client's upgrade request and the reading of the server's answer (sans-IO).

    ``headers`` are extra request headers (``Authorization``, ``Cookie`` ...); one
    that is not an HTTP header is a LocalProtocolError.  ``request`` holds the bytes
    to send; :meth:`receive_data` returns the open
    :class:`WebSocketChannel` once the server has accepted, or raises
    RemoteProtocolError (``BAD_WEBSOCKET``) when it refuses.
    """

    def __init__(
        self,
        host: str,
        port: int,
        path: str,
        versions: tuple[Version, ...],
        headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        wsproto = require_wsproto()
        self._events = wsproto.events
        self._ws = wsproto.WSConnection(wsproto.ConnectionType.CLIENT)
        extra = []
        for name, value in headers:  # an Authorization or Cookie header, say
            if not _TOKEN.fullmatch(name) or any(c in value for c in "\r\n\0"):
                raise LocalProtocolError(
                    ErrorKind.BAD_WEBSOCKET, f"not an HTTP header: {name!r}: {value!r}"
                )
            extra.append((name.encode("ascii"), value.encode("latin-1")))
        self.request: bytes = self._ws.send(
            self._events.Request(
                host=_host_header(host, port),
                target=check_path(path),
                subprotocols=offered_subprotocols(versions),
                extra_headers=extra,
            )
        )
        self._rejected: int | None = None
        self._body = bytearray()

    def receive_data(self, data: bytes | None) -> WebSocketChannel | None:
        """The channel once accepted; None while the answer is incomplete.

        ``b""`` is "nothing yet" (half a TLS record gives that), not the end:
        wsproto's handshake would pass it to h11, which reads it as end of stream.
        """
        if data == b"":
            return None
        try:
            self._ws.receive_data(data)
        except Exception as exc:  # wsproto's RemoteProtocolError: not an HTTP answer
            raise _bad(f"bad WebSocket handshake answer: {exc}") from exc
        # Lazily: what follows the 101 in the same read (a ping, say) stays in
        # wsproto for the channel, instead of being consumed here.
        for event in self._ws.events():
            if isinstance(event, self._events.AcceptConnection):
                return WebSocketChannel(self._ws, event.subprotocol)
            if isinstance(event, self._events.RejectConnection):
                self._rejected = event.status_code
                if not event.has_body:
                    self._refused()
            elif isinstance(event, self._events.RejectData):
                self._body += event.data
                if event.body_finished:
                    self._refused()
        if data is None:
            if self._rejected is not None:
                self._refused()
            raise _bad("the connection closed during the WebSocket handshake")
        return None

    def _refused(self) -> None:
        detail = self._body[:200].decode("utf-8", "replace").strip()
        raise _bad(
            f"WebSocket upgrade refused: HTTP {self._rejected}" + (f": {detail}" if detail else "")
        )


#: The port an origin without one means, by scheme (RFC 6454 4: the scheme's default).
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
#: An allowed origin that admits every one.
ANY_ORIGIN = "*"
#: The origin a browser sends for an opaque origin (a file:// page, a sandboxed frame).
_OPAQUE_ORIGIN = "null"


def _origin_key(text: str) -> tuple[str, str, int | None] | None:
    """``(scheme, host, port)`` of a serialized origin, compared case-insensitively.

    None when ``text`` is not one: an origin has a scheme and a host, and no
    path, query, fragment or user.
    """
    try:
        parts = urllib.parse.urlsplit(text.strip())
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), parts.hostname
    if not scheme or not host or parts.username is not None or parts.password is not None:
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return None
    return scheme, host, port if port is not None else _DEFAULT_PORTS.get(scheme)


def check_origin(text: str) -> str:
    """``text`` if it is an allowed origin ('*', 'null', scheme://host[:port]), else ValueError."""
    if text not in (ANY_ORIGIN, _OPAQUE_ORIGIN) and _origin_key(text) is None:
        raise ValueError(f"an allowed origin is '*', 'null' or scheme://host[:port], not {text!r}")
    return text


class OriginPolicy:
    """Which web pages may open a WebSocket to the broker (the ``Origin`` of the upgrade).

    Admitted: a request without ``Origin`` (no browser page sent it), the
    broker's own origin - ``https`` when it serves TLS (``secure``), else
    ``http``, with the host and port of the request's ``Host`` header - and
    every origin in ``allowed`` (``"scheme://host[:port]"``; ``"*"`` admits
    any, ``"null"`` the opaque origin of file:// pages and sandboxed frames).
    ValueError for an entry that is none of these.
    """

    def __init__(self, allowed: Iterable[str] = (), *, secure: bool = False) -> None:
        self.allowed = tuple(check_origin(origin) for origin in allowed)
        self._any = ANY_ORIGIN in self.allowed
        self._opaque = _OPAQUE_ORIGIN in self.allowed
        self._keys = {_origin_key(origin) for origin in self.allowed} - {None}
        self._scheme = "https" if secure else "http"

    def refusal(self, origin: str | None, host: str) -> str | None:
        """Why a request from ``origin`` to ``host`` (its Host header) is refused; None if not."""
        if origin is None or self._any:
            return None
        if origin.strip() == _OPAQUE_ORIGIN:
            if self._opaque:
                return None
        else:
            key = _origin_key(origin)
            own = _origin_key(f"{self._scheme}://{host}")
            if key is not None and (key == own or key in self._keys):
                return None
        return f"origin {origin!r} is not allowed"


@dataclass(frozen=True, slots=True)
class Upgrade:
    """How a server handshake ended: ``channel`` when accepted, else ``error``.

    ``to_send`` (the 101 answer, or the refusal) must be written either way;
    ``versions`` are the STOMP versions the session may then negotiate;
    ``status`` is the HTTP status of the answer (101 when accepted; None: no answer).
    """

    to_send: bytes
    channel: WebSocketChannel | None = None
    versions: tuple[Version, ...] = ()
    error: RemoteProtocolError | None = None
    status: int | None = None


def _key_fault(keys: list[bytes]) -> str | None:
    """What is wrong with the request's Sec-WebSocket-Key headers; None if nothing.

    RFC 6455 4.2.1: one key, the base64 of 16 bytes.  wsproto answers any
    value, and a client that sent a broken one is not a WebSocket client.
    """
    if len(keys) != 1:
        return f"{len(keys)} Sec-WebSocket-Key headers (one is needed)"
    try:
        nonce = base64.b64decode(keys[0].strip(), validate=True)
    except ValueError:
        nonce = b""
    if len(nonce) != 16:
        return "Sec-WebSocket-Key is not the base64 of 16 bytes"
    return None


class ServerHandshake:
    """The broker's side of the upgrade (sans-IO).

    Accepts a GET for ``path`` whose ``Origin`` the ``origins`` policy admits
    (by default: none, or the broker's own) and that offers one of our
    subprotocols (the highest STOMP version both sides have), or no
    subprotocol at all; refuses everything else with an HTTP error and a
    ``BAD_WEBSOCKET`` error.
    """

    def __init__(
        self,
        path: str,
        versions: tuple[Version, ...] = VERSIONS,
        origins: OriginPolicy | None = None,
    ) -> None:
        wsproto = require_wsproto()
        self._events = wsproto.events
        self._ws = wsproto.WSConnection(wsproto.ConnectionType.SERVER)
        self._path = check_path(path)
        self._versions = versions
        self._origins = origins if origins is not None else OriginPolicy()

    def receive_data(self, data: bytes | None) -> Upgrade | None:
        """The outcome once the request is complete; None while it is not.

        ``b""`` is "nothing yet", as in :meth:`ClientHandshake.receive_data`.
        """
        if data == b"":
            return None
        events = self._events
        try:
            self._ws.receive_data(data)
            request = next((e for e in self._ws.events() if isinstance(e, events.Request)), None)
        except Exception as exc:  # wsproto's RemoteProtocolError, with the answer to send
            hint = getattr(exc, "event_hint", None) or events.RejectConnection()
            return self._refuse(hint.status_code, f"bad WebSocket upgrade request: {exc}")
        if request is None:
            if data is None:
                return Upgrade(b"", error=_bad("the connection closed during the handshake"))
            return None
        if request.target != self._path:
            return self._refuse(404, f"no WebSocket endpoint at {request.target!r}")
        fault = _key_fault([v for n, v in request.extra_headers if n == b"sec-websocket-key"])
        if fault is not None:
            return self._refuse(400, fault)
        origin = next(
            (value.decode("latin-1") for name, value in request.extra_headers if name == b"origin"),
            None,
        )
        refusal = self._origins.refusal(origin, request.host)
        if refusal is not None:
            return self._refuse(403, refusal)
        try:
            chosen = choose_subprotocol(request.subprotocols, self._versions)
        except RemoteProtocolError as exc:
            return self._refuse(400, exc.message)
        to_send = self._ws.send(events.AcceptConnection(subprotocol=chosen))
        return Upgrade(
            to_send,
            WebSocketChannel(self._ws, chosen),
            accepted_versions(chosen, self._versions),
            status=101,
        )

    def _refuse(self, status: int, message: str) -> Upgrade:
        events = self._events
        body = (message + "\n").encode("utf-8", "replace")
        try:
            to_send = self._ws.send(
                events.RejectConnection(
                    status_code=status,
                    headers=[(b"content-type", b"text/plain; charset=utf-8")],
                    has_body=True,
                )
            )
            to_send += self._ws.send(events.RejectData(data=body))
        except Exception:  # no HTTP answer is possible in this state: just close
            to_send = b""
        return Upgrade(to_send, error=_bad(message), status=status)
