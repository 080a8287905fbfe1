"""The connection classes: one per STOMP version, as stomp.py names them.

``StompConnection11(host_and_ports, ...)`` takes stomp.py's parameters; each
connection is a :class:`~stomp_proto.stomppy.transport.Transport` (socket,
reader thread, heart-beats, reconnects) with the calls of its version's
protocol class.  Used in a ``with`` block, a connection disconnects at the end
and waits for the broker's receipt.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import TracebackType
from typing import Any

from .listener import ConnectionListener, Publisher
from .protocol import Protocol10, Protocol11, Protocol12
from .transport import Transport

__all__ = ["BaseConnection", "StompConnection10", "StompConnection11", "StompConnection12"]


class BaseConnection(Publisher):
    """What every connection has besides its version's calls."""

    #: The connection's engine: socket, reader thread, heart-beats, reconnects.
    transport: Transport

    def __enter__(self) -> BaseConnection:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.disconnect()  # type: ignore[attr-defined]  # each version's protocol has it

    def set_listener(self, name: str, listener: ConnectionListener | None) -> None:
        """Register ``listener`` under ``name``; listeners are called in name order."""
        self.transport.set_listener(name, listener)

    def remove_listener(self, name: str) -> None:
        """Forget the listener registered under ``name``."""
        self.transport.remove_listener(name)

    def get_listener(self, name: str) -> ConnectionListener | None:
        """The listener registered under ``name``, or None."""
        return self.transport.get_listener(name)

    def is_connected(self) -> bool:
        """True while logged in (False while a reconnect is under way)."""
        return self.transport.is_connected()

    def set_ssl(self, *args: Any, **kwargs: Any) -> None:
        """Use TLS for some hosts; see :meth:`Transport.set_ssl
        <stomp_proto.stomppy.transport.Transport.set_ssl>`."""
        self.transport.set_ssl(*args, **kwargs)

    def get_ssl(self, host_and_port: tuple[str, int] | None = None) -> dict[str, Any] | None:
        """The TLS settings for ``host_and_port``."""
        return self.transport.get_ssl(host_and_port)


def _transport(
    version: str,
    host_and_ports: Iterable[tuple[str, int]] | None,
    prefer_localhost: bool,
    try_loopback_connect: bool,
    reconnect: tuple[float, float, float, float, int],
    timeout: float | None,
    keepalive: Any,
    vhost: str | None,
    auto_decode: bool,
    encoding: str,
    bind_host_port: tuple[str, int] | None,
    ws_path: str | None = None,
) -> Transport:
    return Transport(
        host_and_ports,
        prefer_localhost,
        try_loopback_connect,
        *reconnect,
        timeout=timeout,
        keepalive=keepalive,
        vhost=vhost,
        auto_decode=auto_decode,
        encoding=encoding,
        bind_host_port=bind_host_port,
        version=version,  # type: ignore[arg-type]
        ws_path=ws_path,
    )


class StompConnection10(BaseConnection, Protocol10):
    """A STOMP 1.0 connection."""

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
        auto_decode: bool = True,
        encoding: str = "utf-8",
        auto_content_length: bool = True,
        bind_host_port: tuple[str, int] | None = None,
    ) -> None:
        reconnect = (
            reconnect_sleep_initial,
            reconnect_sleep_increase,
            reconnect_sleep_jitter,
            reconnect_sleep_max,
            reconnect_attempts_max,
        )
        transport = _transport(
            "1.0", host_and_ports, prefer_localhost, try_loopback_connect, reconnect,
            timeout, keepalive, None, auto_decode, encoding, bind_host_port,
        )  # fmt: skip
        Protocol10.__init__(self, transport, auto_content_length)


class StompConnection11(BaseConnection, Protocol11):
    """A STOMP 1.1 connection (``stomp.Connection``)."""

    _version = "1.1"

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
        heartbeats: tuple[int, int] = (0, 0),
        keepalive: Any = None,
        vhost: str | None = None,
        auto_decode: bool = True,
        encoding: str = "utf-8",
        auto_content_length: bool = True,
        heart_beat_receive_scale: float = 1.5,
        bind_host_port: tuple[str, int] | None = None,
        ws_path: str | None = None,
    ) -> None:
        reconnect = (
            reconnect_sleep_initial,
            reconnect_sleep_increase,
            reconnect_sleep_jitter,
            reconnect_sleep_max,
            reconnect_attempts_max,
        )
        transport = _transport(
            self._version, host_and_ports, prefer_localhost, try_loopback_connect, reconnect,
            timeout, keepalive, vhost, auto_decode, encoding, bind_host_port, ws_path,
        )  # fmt: skip
        Protocol11.__init__(
            self, transport, heartbeats, auto_content_length, heart_beat_receive_scale
        )


class StompConnection12(StompConnection11, Protocol12):
    """A STOMP 1.2 connection."""

    _version = "1.2"
