"""The rows the data sources produce: their schemas, and Arrow record batches of them.

The schemas are part of the public contract (``docs/spark.rst``): columns are
only ever added at the end.  Rows are built as :mod:`pyarrow` record batches,
the fastest way into Spark from a Python data source; their Arrow schema is
exactly what Spark derives from the DDL (Spark checks that).
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable, Sequence
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
    "StreamRows",
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


#: How many header layouts (the tuple of a MESSAGE's header names) one reader remembers;
#: a broker sends a handful, and a peer that sends endless new ones costs no memory.
MAX_LAYOUTS = 256


def _picker(indices: Sequence[int]) -> Callable[[tuple[str, ...]], tuple[str, ...]]:
    """A function that takes the values at ``indices`` out of a tuple, as a tuple."""
    if not indices:
        return lambda values: ()
    if len(indices) == 1:
        only = indices[0]
        return lambda values: (values[only],)
    return operator.itemgetter(*indices)


def _getter(index: int) -> Callable[[tuple[str, ...]], str | None]:
    """A function that takes the value at ``index`` out of a tuple; None if ``index`` < 0."""
    if index < 0:
        return lambda values: None
    return operator.itemgetter(index)


#: What a header layout means for the columns: the names kept in ``headers``, the
#: function that picks their values, and the getters of the key and the row id.
_Layout = tuple[
    tuple[str, ...],
    Callable[[tuple[str, ...]], tuple[str, ...]],
    Callable[[tuple[str, ...]], "str | None"],
    Callable[[tuple[str, ...]], "str | None"],
]


class StreamRows:
    """The rows of one stream's range read, appended column by column as frames arrive.

    The hot path of a read task.  Each MESSAGE frame costs a split of its
    headers into names and values (one C call), a lookup of the names' layout
    (a broker sends the same names in the same order, message after message),
    and a few appends: no per-header Python work, no event objects.  What a
    layout means - which headers go into the ``headers`` column (the first of
    a repeated name, as STOMP reads them; none of
    :data:`STREAM_OMITTED_HEADERS`), where the key and the row id are - is
    worked out once per layout.  :meth:`take` builds the record batch with one
    :mod:`pyarrow` call per column.
    """

    __slots__ = (
        "_bodies",
        "_ends",
        "_key_header",
        "_keys",
        "_layouts",
        "_names",
        "_offsets",
        "_row_id_header",
        "_row_ids",
        "_size",
        "_stream",
        "_times",
        "_values",
    )

    def __init__(self, stream: str, key_header: str, row_id_header: str) -> None:
        self._stream = stream
        self._key_header = key_header
        self._row_id_header = row_id_header
        self._layouts: dict[tuple[str, ...], _Layout] = {}
        self._reset()

    def _reset(self) -> None:
        self._offsets: list[int] = []
        self._times: list[int] = []
        self._bodies: list[bytes] = []
        self._keys: list[str | None] = []
        self._row_ids: list[str | None] = []
        # The headers column, flat: every row's names and values, and where each row ends.
        self._names: list[str] = []
        self._values: list[str] = []
        self._ends: list[int] = [0]
        self._size = 0

    def __len__(self) -> int:
        return len(self._offsets)

    def _layout(self, names: tuple[str, ...]) -> _Layout:
        kept: list[int] = []
        seen: set[str] = set()
        for index, name in enumerate(names):
            if name not in seen and name not in STREAM_OMITTED_HEADERS:
                kept.append(index)
            seen.add(name)
        # The first of a repeated name; an omitted header is no key, whatever its name.
        first = {names[i]: i for i in reversed(kept)}
        layout: _Layout = (
            tuple(names[i] for i in kept),
            _picker(kept),
            _getter(first.get(self._key_header, -1)),
            _getter(first.get(self._row_id_header, -1)),
        )
        if len(self._layouts) < MAX_LAYOUTS:
            self._layouts[names] = layout
        return layout

    def add(self, messages: Sequence[tuple[int, Frame]], received_at: int) -> None:
        """Append ``(offset, MESSAGE frame)`` pairs received at ``received_at`` (µs)."""
        layouts = self._layouts
        offsets_append = self._offsets.append
        bodies_append = self._bodies.append
        keys_append = self._keys.append
        row_ids_append = self._row_ids.append
        names_extend = self._names.extend
        values_extend = self._values.extend
        ends_append = self._ends.append
        size = self._size
        empty: tuple[str, ...] = ()
        for offset, frame in messages:
            headers = frame.headers
            names, values = zip(*headers, strict=True) if headers else (empty, empty)
            layout = layouts.get(names)
            if layout is None:
                layout = self._layout(names)
            kept, pick, key, row_id = layout
            names_extend(kept)
            values_extend(pick(values))
            size += len(kept)
            ends_append(size)
            keys_append(key(values))
            row_ids_append(row_id(values))
            offsets_append(offset)
            bodies_append(frame.body)
        self._size = size
        self._times.extend([received_at] * len(messages))

    def take(self) -> Any:
        """The rows added since the last call, as one record batch in the stream schema."""
        count = len(self._offsets)
        headers = pa.MapArray.from_arrays(
            pa.array(self._ends, pa.int32()),
            pa.array(self._names, pa.string()),
            pa.array(self._values, pa.string()),
        )
        batch = pa.record_batch(
            [
                pa.repeat(pa.scalar(self._stream, pa.string()), count),
                pa.array(self._offsets, pa.int64()),
                headers,
                pa.array(self._bodies, pa.binary()),
                pa.array(self._times, _TIMESTAMP),
                pa.array(self._keys, pa.string()),
                pa.array(self._row_ids, pa.string()),
            ],
            schema=STREAMS_ARROW_SCHEMA,
        )
        self._reset()
        return batch
