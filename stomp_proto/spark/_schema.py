"""The rows the data sources produce: their schemas, and Arrow record batches of them.

The schemas are part of the public contract (``docs/spark.rst``): columns are
only ever added at the end.  Rows are built as :mod:`pyarrow` record batches,
the fastest way into Spark from a Python data source; their Arrow schema is
exactly what Spark derives from the DDL (Spark checks that).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped, import-not-found, unused-ignore]

from .._events import Message
from .._frame import Frame
from ._columns import CAPTURE_SCHEMA, MESSAGE_SCHEMA, STREAMS_SCHEMA

__all__ = [
    "CAPTURE_ARROW_SCHEMA",
    "CAPTURE_SCHEMA",
    "MESSAGE_ARROW_SCHEMA",
    "MESSAGE_SCHEMA",
    "OMITTED_HEADERS",
    "STREAMS_ARROW_SCHEMA",
    "STREAMS_SCHEMA",
    "message_batch",
    "message_headers",
    "now_us",
]

#: MESSAGE headers left out of the ``headers`` column: those with a column of their
#: own, the codec's content-length, and the ``ack`` token (it names one delivery on
#: one connection and means nothing anywhere else).
OMITTED_HEADERS = frozenset({"destination", "message-id", "subscription", "ack", "content-length"})

_HEADERS_TYPE = pa.map_(pa.string(), pa.string())
_TIMESTAMP = pa.timestamp("us", tz="UTC")

MESSAGE_ARROW_SCHEMA = pa.schema(
    [
        ("destination", pa.string()),
        ("message_id", pa.string()),
        ("subscription", pa.string()),
        ("headers", _HEADERS_TYPE),
        ("body", pa.binary()),
        ("received_at", _TIMESTAMP),
    ]
)

STREAMS_ARROW_SCHEMA = pa.schema(
    [
        ("stream", pa.string()),
        ("offset", pa.int64()),
        ("headers", _HEADERS_TYPE),
        ("body", pa.binary()),
        ("received_at", _TIMESTAMP),
        ("key", pa.string()),
        ("row_id", pa.string()),
    ]
)

#: Stream MESSAGE headers left out of the ``headers`` column: the ``stomp``
#: source's, and the offset (a column of its own).
STREAM_OMITTED_HEADERS = OMITTED_HEADERS | {"x-stream-offset"}

CAPTURE_ARROW_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("frame_index", pa.int64()),
        ("offset", pa.int64()),
        ("command", pa.string()),
        ("headers", _HEADERS_TYPE),
        ("body", pa.binary()),
        ("error", pa.string()),
    ]
)


def now_us() -> int:
    """The wall-clock time in microseconds since the epoch (the ``received_at`` unit)."""
    return time.time_ns() // 1000


def message_headers(message: Message) -> list[tuple[str, str]]:
    """The ``headers`` column of one message: first of repeated names wins, as in STOMP."""
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    if message.content_type is not None:
        pairs.append(("content-type", message.content_type))
        seen.add("content-type")
    for name, value in message.headers:
        if name not in seen and name not in OMITTED_HEADERS:
            seen.add(name)
            pairs.append((name, value))
    return pairs


def message_batch(received: Sequence[tuple[int, Message]]) -> Any:
    """A record batch of ``(received_at in µs, message)`` pairs, in the MESSAGE schema."""
    messages = [m for _, m in received]
    return pa.record_batch(
        [
            pa.array([m.destination for m in messages], pa.string()),
            pa.array([m.message_id for m in messages], pa.string()),
            pa.array([m.subscription for m in messages], pa.string()),
            pa.array([message_headers(m) for m in messages], _HEADERS_TYPE),
            pa.array([m.body for m in messages], pa.binary()),
            pa.array([t for t, _ in received], _TIMESTAMP),
        ],
        schema=MESSAGE_ARROW_SCHEMA,
    )


def stream_batch(
    stream: str,
    received: Sequence[tuple[int, int, Frame]],
    key_header: str,
    row_id_header: str,
) -> Any:
    """A record batch of ``(offset, received_at in µs, MESSAGE frame)`` triples of one stream.

    The ``headers`` column keeps the first of a repeated name, as STOMP does.
    """
    count = len(received)
    offsets: list[int] = []
    times: list[int] = []
    bodies: list[bytes] = []
    headers: list[list[tuple[str, str]]] = []
    keys: list[str | None] = []
    row_ids: list[str | None] = []
    omitted = STREAM_OMITTED_HEADERS
    for offset, received_at, frame in received:
        offsets.append(offset)
        times.append(received_at)
        bodies.append(frame.body)
        pairs: list[tuple[str, str]] = []
        seen: set[str] = set()
        key = row_id = None
        for name, value in frame.headers:
            if name in seen or name in omitted:
                continue
            seen.add(name)
            pairs.append((name, value))
            if name == key_header:
                key = value
            elif name == row_id_header:
                row_id = value
        headers.append(pairs)
        keys.append(key)
        row_ids.append(row_id)
    return pa.record_batch(
        [
            pa.array([stream] * count, pa.string()),
            pa.array(offsets, pa.int64()),
            pa.array(headers, _HEADERS_TYPE),
            pa.array(bodies, pa.binary()),
            pa.array(times, _TIMESTAMP),
            pa.array(keys, pa.string()),
            pa.array(row_ids, pa.string()),
        ],
        schema=STREAMS_ARROW_SCHEMA,
    )
