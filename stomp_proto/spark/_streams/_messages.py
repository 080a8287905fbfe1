"""The per-frame step of a range read: the decoded frames of one read from the socket,
sorted into the range's messages.

The hot path of a read task, with :meth:`~.._schema.StreamRows.add` after it.  The
accelerated build runs the native twin of :func:`collect_messages`
(``stomp_proto/_streams_native.pyx``), which does exactly what this code does.
"""

from __future__ import annotations

from collections.abc import Callable

from ..._build import native
from ..._client._errors import ConnectionLost
from ..._decoder import FrameDecoder
from ..._frame import Frame
from ._offsets import STREAM_OFFSET_HEADER, RangeCursor

__all__ = ["collect", "collect_messages", "stream_offset"]

_NO_HEADER = ("", "")

#: What :func:`collect_messages` gives back: how many MESSAGE frames of the range it
#: counted, the last of them, and the frame it stopped at (None: the buffer is used up).
Collected = tuple[int, "Frame | None", "Frame | None"]


def collect_messages(
    decoder: FrameDecoder,
    cursor: RangeCursor,
    got: list[tuple[int, Frame]],
    stream: str,
) -> Collected:
    """Decode frames with ``decoder`` until it needs more data or gives a frame other
    than a MESSAGE (which is returned, for the caller to judge).

    Heart-beats are skipped; a MESSAGE after the cursor is done is in flight behind
    the range's end and dropped.  Every other MESSAGE is counted (it uses credit)
    and, if the cursor takes its offset, appended to ``got`` as ``(offset, frame)``.
    """
    seen = 0
    last: Frame | None = None
    take = cursor.take
    next_frame = decoder.next_frame
    while (frame := next_frame()) is not None:
        if not isinstance(frame, Frame):
            continue  # a heart-beat
        if frame.command != "MESSAGE":
            return seen, last, frame
        if cursor.done:
            continue
        headers = frame.headers
        name, value = headers[-1] if headers else _NO_HEADER
        offset = int(value) if name == STREAM_OFFSET_HEADER else stream_offset(headers, stream)
        if take(offset):
            got.append((offset, frame))
        last = frame
        seen += 1
    return seen, last, None


def stream_offset(headers: tuple[tuple[str, str], ...], source: str) -> int:
    """The ``x-stream-offset`` of a stream MESSAGE's ``headers`` (the first of a repeated
    name); the error for a MESSAGE without one names ``source`` (its stream or destination).

    RabbitMQ puts it last, or before the message's own headers that sort after it.
    """
    if headers and headers[-1][0] == STREAM_OFFSET_HEADER:
        return int(headers[-1][1])
    for name, value in headers:
        if name == STREAM_OFFSET_HEADER:
            return int(value)
    raise ConnectionLost(
        f"a MESSAGE from {source!r} has no {STREAM_OFFSET_HEADER} header: is it a stream queue?"
    )


# The native twin (stomp_proto/_streams_native.pyx), or None: the pure build.
_native = native("_streams_native")
if _native is not None:
    _native.use_pure_offset(stream_offset)
#: What a range read runs: the native twin of collect_messages, or collect_messages.
collect: Callable[[FrameDecoder, RangeCursor, list[tuple[int, Frame]], str], Collected] = (
    collect_messages if _native is None else _native.collect_messages
)
