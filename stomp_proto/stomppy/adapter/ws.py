"""STOMP over a WebSocket (RabbitMQ Web-STOMP, ActiveMQ's ``ws://`` connector).

``WSStompConnection(host_and_ports, ws_path="/ws")`` is a 1.2 connection whose
bytes travel in WebSocket messages (the sans-IO channel of
:mod:`stomp_proto`, on ``wsproto``).  TLS (``wss://``) comes from ``set_ssl``
as for TCP.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..connect import StompConnection12

__all__ = ["WSStompConnection"]


class WSStompConnection(StompConnection12):
    """A STOMP 1.2 connection over a WebSocket at ``ws_path`` (default ``/``).

    ``header`` holds extra headers for the handshake request (an
    ``Authorization`` or ``Cookie`` header, say).  ``binary_mode`` is accepted for
    stomp.py programs and not used: frames go as text or binary messages as their
    bytes need.
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
        heartbeats: tuple[int, int] = (0, 0),
        keepalive: Any = None,
        vhost: str | None = None,
        auto_decode: bool = True,
        encoding: str = "utf-8",
        auto_content_length: bool = True,
        heart_beat_receive_scale: float = 1.5,
        bind_host_port: tuple[str, int] | None = None,
        ws: Any = None,
        ws_path: str | None = None,
        header: Mapping[str, str] | None = None,
        binary_mode: bool = False,
    ) -> None:
        StompConnection12.__init__(
            self,
            host_and_ports,
            prefer_localhost,
            try_loopback_connect,
            reconnect_sleep_initial,
            reconnect_sleep_increase,
            reconnect_sleep_jitter,
            reconnect_sleep_max,
            reconnect_attempts_max,
            timeout,
            heartbeats,
            keepalive,
            vhost,
            auto_decode,
            encoding,
            auto_content_length,
            heart_beat_receive_scale,
            bind_host_port,
            ws_path=ws_path or "/",
        )
        self.transport.ws_headers = tuple((str(k), str(v)) for k, v in (header or {}).items())
