"""The errors a stomp.py program catches, under the names it catches them by."""

from __future__ import annotations

__all__ = [
    "ConnectFailedException",
    "ConnectionClosedException",
    "InterruptedException",
    "NotConnectedException",
    "StompException",
]


class StompException(Exception):
    """The base of every error this layer raises on its own account."""


class ConnectionClosedException(StompException):
    """The broker closed the connection while a frame was being read."""


class NotConnectedException(StompException):
    """A frame was to be sent while there is no connection (or it is being re-made)."""


class ConnectFailedException(StompException):
    """``connect()`` could not log in: every attempt failed, or the broker said no."""


class InterruptedException(StompException):
    """A read was interrupted (kept for programs that catch it; never raised here)."""
