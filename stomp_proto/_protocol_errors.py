"""ErrorKind and the exceptions that need nothing from the events.

The bottom of the core's imports: the events raise these.  The exception
family's public home is :mod:`stomp_proto._errors` (and :mod:`stomp_proto`).
"""

from __future__ import annotations

import enum

from ._build import interpreted

__all__ = ["ErrorKind", "LocalProtocolError", "ProtocolError"]


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


@interpreted
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


@interpreted
class LocalProtocolError(ProtocolError):
    """We were asked to do something the protocol (or our state) does not allow.

    Raised before anything is changed: a refused call leaves the encoder,
    decoder or connection exactly as it was.
    """
