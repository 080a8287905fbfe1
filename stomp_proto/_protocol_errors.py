"""ErrorKind and the exceptions that need nothing from the events.

The bottom of the core's imports: the events raise these.  The exception
family's public home is :mod:`stomp_proto._errors` (and :mod:`stomp_proto`).
"""

from __future__ import annotations

import enum

__all__ = ["ErrorKind", "LocalProtocolError", "ProtocolError"]


class ErrorKind(enum.Enum):
    """What kind of protocol problem an error reports.

    ``error.kind`` of every :class:`ProtocolError`; the value is a short text
    for messages and logs.
    """

    #: A command that does not exist in the version spoken (``NACK`` in 1.0, a
    #: typing mistake), or that this side of the connection does not send.
    BAD_COMMAND = "bad command"
    #: A header line without a colon or with a NUL, or a header value the frame's
    #: rules refuse (an ``ack`` mode, a ``heart-beat`` that is not two numbers).
    BAD_HEADER = "bad header line"
    #: A backslash escape the version does not define (``\t`` in 1.2), or a lone
    #: backslash at the end of a header.
    BAD_ESCAPE = "undefined escape sequence"
    #: A command or header that is not valid UTF-8, or text that cannot be written
    #: as UTF-8 (a lone surrogate).
    BAD_ENCODING = "text is not valid UTF-8"
    #: A ``content-length`` that is not a non-negative integer, or a body holding a
    #: NUL sent without one.
    BAD_CONTENT_LENGTH = "invalid content-length"
    #: The byte after the ``content-length`` bytes of the body is not the NUL that
    #: ends a frame.
    MISSING_NUL = "frame not terminated by NUL"
    #: A body on a frame that must not carry one (SUBSCRIBE, ACK, CONNECT ...).
    UNEXPECTED_BODY = "body on a frame that must not have one"
    #: A :class:`~stomp_proto.Limits` bound was crossed; ``error.limit`` names it.
    TOO_LARGE = "limit exceeded"
    #: The stream ended (``receive_data(None)``) in the middle of a frame.
    TRUNCATED = "stream ended inside a frame"
    #: A frame or call the session's state does not allow: a SEND before
    #: CONNECTED, a transaction begun twice, an ACK of a message not awaiting one.
    BAD_STATE = "not allowed in the current state"
    #: A header the frame needs is absent or empty: ``destination`` on a SEND,
    #: ``host`` on a 1.1 or 1.2 CONNECT, ``ack`` on a 1.2 MESSAGE that needs one.
    MISSING_HEADER = "required header missing or invalid"
    #: The two sides share no protocol version, or a frame names a version that
    #: was not offered or agreed.
    BAD_VERSION = "no common protocol version"
    #: The connection is over (closed, failed, or its stream ended) and was used anyway.
    CLOSED = "connection closed"
    #: A refused WebSocket upgrade (another path, no STOMP subprotocol in common),
    #: or WebSocket data that breaks RFC 6455.
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
