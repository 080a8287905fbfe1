"""A DEBUG line for every frame a client writes or reads, on its own logger.

``logging.getLogger("stomp_proto.client.frames").setLevel(logging.DEBUG)`` (or
DEBUG on ``stomp_proto``) shows each frame as it goes out (``>>>``) and as it
comes in (``<<<``): the command, every header, and the body cut to
:data:`BODY_SHOWN` bytes with its length.  Secrets are masked: the value of a
``passcode`` and of every header whose name says it holds a credential
(``Authorization``, ``password``, ``token``, ``secret``, ``cookie``, ``api-key``)
is shown as ``******``.  Heart-beat EOLs are not frames and are not logged.

The clients call :func:`frame_out` and :func:`frame_in` only when
:data:`log` is enabled for DEBUG, so that the trace costs nothing else.
"""

from __future__ import annotations

import logging
import re

from .._events import FrameEvent
from .._frame import Version

__all__ = ["BODY_SHOWN", "MASK", "frame_in", "frame_out", "log"]

#: The logger of the frame trace (below ``stomp_proto.client``).
log = logging.getLogger("stomp_proto.client.frames")

#: Bytes of a body the trace shows; the rest is counted, not shown.
BODY_SHOWN = 100
#: What a masked header value is shown as.
MASK = "******"
#: Header names whose values are credentials.
_SECRET = re.compile(r"pass|authori[sz]|token|secret|cookie|api.?key|credential", re.IGNORECASE)


def describe(event: FrameEvent, version: Version | None) -> str:
    """``event`` as one line: command, headers (secrets masked), body cut short."""
    try:
        frame = event._to_frame(version or "1.2")
        command, headers, body = frame.command, frame.headers, frame.body
    except Exception:  # a frame the version would refuse: the event as it is
        return repr(event)
    shown = ", ".join(
        f"{name}:{MASK if _SECRET.search(name) else value}" for name, value in headers
    )
    text = f"{command} {{{shown}}}"
    if body:
        cut = "..." if len(body) > BODY_SHOWN else ""
        text += f" body={body[:BODY_SHOWN]!r}{cut} ({len(body)} bytes)"
    return text


def frame_out(event: FrameEvent, version: Version | None, broker: tuple[str, int]) -> None:
    """Log ``event``, written to ``broker``."""
    log.debug(">>> %s:%d %s", *broker, describe(event, version))


def frame_in(event: FrameEvent, version: Version | None, broker: tuple[str, int]) -> None:
    """Log ``event``, read from ``broker``."""
    log.debug("<<< %s:%d %s", *broker, describe(event, version))
