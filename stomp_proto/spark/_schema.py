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
from . import CAPTURE_SCHEMA, MESSAGE_SCHEMA

__all__ = [
    "CAPTURE_ARROW_SCHEMA",
    "CAPTURE_SCHEMA",
    "MESSAGE_ARROW_SCHEMA",
    "MESSAGE_SCHEMA",
    "OMITTED_HEADERS",
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
