"""The exception family of stomp_proto.

Two kinds of problem, kept apart as in h11 and wsproto: ``LocalProtocolError``
is misuse of this library's API (the frame or event *we* were asked to send is
wrong, or a call came in the wrong state); ``RemoteProtocolError`` is bad input
from the peer.  Both say *what* went wrong through :class:`ErrorKind`, so code
can react without parsing messages.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._events import Error

__all__ = [
    "ErrorKind",
    "LocalProtocolError",
    "ProtocolError",
    "RemoteProtocolError",
    "as_remote",
]


class ErrorKind(enum.Enum):
    """What kind of protocol problem an error reports."""

    BAD_COMMAND = "bad command"
    BAD_HEADER = "bad header line"
    BAD_ESCAPE = "undefined escape sequence"
    BAD_ENCODING = "text is not valid UTF-8"
    BAD_CONTENT_LENGTH = "invalid content-length"
    MISSING_NUL = "frame not terminated by NUL"
    UNEXPECTED_BODY = "body on a frame that must not have one"
    #: A :class:`~stomp_proto.Limits` bound was crossed; ``error.limit`` names it.
    TOO_LARGE = "limit exceeded"
    TRUNCATED = "stream ended inside a frame"
    BAD_STATE = "not allowed in the current state"
    MISSING_HEADER = "required header missing or invalid"
    BAD_VERSION = "no common protocol version"
    #: The connection is over (closed, failed, or its stream ended) and was used anyway.
    CLOSED = "connection closed"
    BAD_WEBSOCKET = "bad WebSocket handshake or data"


class ProtocolError(Exception):
    """Base class of every error this library raises about the STOMP protocol.

    ``kind`` classifies the problem; ``str(error)`` is a human-readable message.
    For ``TOO_LARGE``, ``limit`` is the name of the :class:`~stomp_proto.Limits`
    field that was crossed (``"max_line_length"``, ``"max_headers"``,
    ``"max_head_size"``, ``"max_body_size"`` or ``"max_frame_size"``), and the
    message names it too; it is ``None`` for every other kind.
    Not raised directly: it is always one of the two subclasses.
    """

    #: What went wrong, as an :class:`ErrorKind`.
    kind: ErrorKind
    #: For ``TOO_LARGE``, the :class:`~stomp_proto.Limits` field crossed; else ``None``.
    limit: str | None

    def __init__(self, kind: ErrorKind, message: str, *, limit: str | None = None) -> None:
        if type(self) is ProtocolError:
            raise TypeError("raise LocalProtocolError or RemoteProtocolError instead")
        super().__init__(message)
        self.kind = kind
        self.limit = limit

    @property
    def message(self) -> str:
        """The human-readable description (the same as ``str(error)``)."""
        return str(self.args[0])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.kind.name}, {self.message!r})"


class LocalProtocolError(ProtocolError):
    """We were asked to do something the protocol (or our state) does not allow.

    Raised before anything is changed: a refused call leaves the encoder,
    decoder or connection exactly as it was.
    """


class RemoteProtocolError(ProtocolError):
    """The peer sent something the protocol does not allow.

    ``event_hint`` is filled in by :class:`ServerConnection`: the ERROR event
    to send to the peer before closing the connection, as the specs ask of
    servers (like wsproto's ``event_hint``).  It is ``None`` when raised by the
    codec or a client connection.
    """

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        event_hint: Error | None = None,
        limit: str | None = None,
    ) -> None:
        super().__init__(kind, message, limit=limit)
        #: The ERROR event to send before closing (server side), or ``None``.
        self.event_hint = event_hint


def as_remote(error: LocalProtocolError) -> RemoteProtocolError:
    """``error``, found in what the peer sent instead of in what we were asked to send.

    Inside, every check raises :class:`LocalProtocolError`, whichever side the
    frame came from; the receiving paths (``FrameEvent.from_frame`` and a
    connection's ``next_event``) turn it into this, once, as h11 does.
    """
    return RemoteProtocolError(error.kind, error.message, limit=error.limit)
