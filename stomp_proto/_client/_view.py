"""What a client shows of itself, written once for the asyncio, trio and threads clients.

Every adapter keeps its protocol-side state in a :class:`ClientCore`; these read-only
properties look into it the same way whatever the I/O, so they live here and the
clients inherit them.
"""

from __future__ import annotations

from typing import Any

from .._connection import ClientConnection
from .._frame import Version
from ._core import ClientCore
from ._lifecycle import ClientState, ClientStats

__all__ = ["ClientView"]


class ClientView:
    """The inspection properties of a connected client (the base of every client class)."""

    __slots__ = ()

    _core: ClientCore[Any]

    @property
    def version(self) -> Version | None:
        """The negotiated STOMP version of the current connection."""
        return self._core.conn.version

    @property
    def server(self) -> str | None:
        """The broker's name and version from its CONNECTED ``server`` header
        (``"RabbitMQ/3.10.8"``, ``"ActiveMQ/5.17.2"``); ``None`` before CONNECTED
        or when the broker sent none.  Each new session reads it again."""
        return self._core.server

    @property
    def connection(self) -> ClientConnection:
        """The current sans-IO connection (for inspection)."""
        return self._core.conn

    @property
    def broker(self) -> tuple[str, int]:
        """The ``(host, port)`` of the broker in use (while reconnecting: being tried)."""
        return self._core.brokers.current

    @property
    def state(self) -> ClientState:
        """Where the client stands: connected, reconnecting, closed or failed."""
        return self._core.life.state

    @property
    def stats(self) -> ClientStats:
        """Counts of the client's sessions and messages (live, not a copy)."""
        return self._core.life.stats
