"""The exception family of stomp_proto.

Two kinds of problem, kept apart as in h11 and wsproto: ``LocalProtocolError``
is misuse of this library's API (the frame or event *we* were asked to send is
wrong, or a call came in the wrong state); ``RemoteProtocolError`` is bad input
from the peer.  Both say *what* went wrong through :class:`ErrorKind`, so code
can react without parsing messages.

This module gathers them; they are defined where the imports run one way
(no cycle): :class:`ErrorKind`, :class:`ProtocolError` and
:class:`LocalProtocolError` in :mod:`._protocol_errors`, which the events
import, and :class:`RemoteProtocolError` (whose ``event_hint`` is an
:class:`~stomp_proto.Error` event) in :mod:`._events`, next to
``FrameEvent.from_frame``, where a received frame's problems become the peer's.
"""

from __future__ import annotations

from ._events import RemoteProtocolError, as_remote
from ._protocol_errors import ErrorKind, LocalProtocolError, ProtocolError

__all__ = [
    "ErrorKind",
    "LocalProtocolError",
    "ProtocolError",
    "RemoteProtocolError",
    "as_remote",
]
