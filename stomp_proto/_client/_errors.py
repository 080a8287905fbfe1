"""The errors every client raises, besides the protocol errors of the core.

A leaf: it imports nothing of the clients, so that every module of theirs (and
the Spark source's) can name these errors without importing a client.
"""

from __future__ import annotations

from .._events import Error
from .._public import present_as

__all__ = ["BrokerError", "ClientError", "ConnectionLost", "HeartBeatLost", "reason"]


class ClientError(Exception):
    """Base class of the errors the client adapters raise (besides protocol errors)."""


class BrokerError(ClientError):
    """The broker sent an ERROR frame; it closes the connection after it.

    ``error`` is the :class:`~stomp_proto.Error` event: ``message`` is the
    broker's short text, ``body`` its details.
    """

    def __init__(self, error: Error) -> None:
        #: The :class:`~stomp_proto.Error` event the broker sent.
        self.error = error
        detail = error.body.decode("utf-8", "replace").strip()
        text = error.message or "ERROR frame without a message"
        super().__init__(f"{text}: {detail}" if detail and detail != text else text)

    @property
    def message(self) -> str | None:
        """The ERROR frame's ``message`` header."""
        return self.error.message


class ConnectionLost(ClientError):
    """The connection ended: the peer closed it, the network failed, or it was never made."""


def reason(exc: BaseException, timeout: float | None = None) -> str:
    """What went wrong, in words, never empty (an asyncio timeout has no text of its own)."""
    text = str(exc)
    if text:
        return text
    if isinstance(exc, TimeoutError):
        return "timed out" if timeout is None else f"timed out after {timeout:.3g} s"
    return type(exc).__name__


class HeartBeatLost(ConnectionLost):
    """Nothing arrived from the broker within the negotiated heart-beat deadline."""


# Tracebacks and reprs say stomp_proto.ConnectionLost..., the names users import, though
# the top level loads this module only on first use.
present_as("stomp_proto", BrokerError, ClientError, ConnectionLost, HeartBeatLost)
