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
from typing import Any, NamedTuple

import pyarrow as pa  # type: ignore[import-untyped, import-not-found, unused-ignore]

from .._build import native
from .._events import Message
from .._frame import Frame
from ._columns import CAPTURE_SCHEMA, KAFKA_SCHEMA, MESSAGE_SCHEMA, STREAMS_SCHEMA

__all__ = [
    "CAPTURE_ARROW_SCHEMA",
    "CAPTURE_SCHEMA",
    "KAFKA_ARROW_SCHEMA",
    "KAFKA_SCHEMA",
    "MESSAGE_ARROW_SCHEMA",
    "MESSAGE_SCHEMA",
    "OMITTED_HEADERS",
    "STREAMS_ARROW_SCHEMA",
    "STREAMS_SCHEMA",
    "StreamRows",
    "message_batch",
    "message_headers",
    "now_us",
    "streams_arrow_schema",
]

#: MESSAGE headers left out of the ``headers`` column: those with a column of their
#: own, the codec's content-length, and the ``ack`` token (it names one delivery on
#: one connection and means nothing anywhere else).
OMITTED_HEADERS = frozenset({"destination", "message-id", "subscription", "ack", "content-length"})

_HEADERS_TYPE = pa.map_(pa.string(), pa.string())
_TIMESTAMP = pa.timestamp("us", tz="UTC")
#: Kafka's form of headers: every (key, value) pair in order, repeats kept.
_HEADER_LIST_TYPE = pa.list_(
    pa.field("element", pa.struct([("key", pa.string()), ("value", pa.string())]))
)

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
        ("partition", pa.int32()),
        ("timestamp", _TIMESTAMP),
        ("header_list", _HEADER_LIST_TYPE),
    ]
)
#: The same with ``keyType=binary``.
STREAMS_ARROW_SCHEMA_BINARY_KEY = STREAMS_ARROW_SCHEMA.set(
    STREAMS_ARROW_SCHEMA.get_field_index("key"), pa.field("key", pa.binary())
)

#: ``schema=kafka``: Kafka's headers, (key, binary value) pairs in order, repeats kept.
_KAFKA_HEADERS_TYPE = pa.list_(
    pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())]))
)
KAFKA_ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", _TIMESTAMP),
        ("timestampType", pa.int32()),
        ("headers", _KAFKA_HEADERS_TYPE),
    ]
)
#: Kafka's ``timestampType``: 0 is CreateTime (the sink's stamp); -1, no timestamp.
CREATE_TIME = 0
NO_TIMESTAMP_TYPE = -1

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


class _Layout(NamedTuple):
    """What a header layout (the names of a MESSAGE's headers, in order) means for the
    columns: the names kept in ``headers`` and the function that picks their values;
    the getters of the key, the row id and the timestamp; and, when the layout repeats
    a name, every kept name and its picker (the ``header_list`` column keeps repeats;
    without them it is ``headers`` again).  The rest says the same by index (-1: no
    such header), for the native twin of :meth:`StreamRows.add`."""

    kept_names: tuple[str, ...]
    pick: Callable[[tuple[str, ...]], tuple[str, ...]]
    key_of: Callable[[tuple[str, ...]], str | None]
    row_id_of: Callable[[tuple[str, ...]], str | None]
    stamp_of: Callable[[tuple[str, ...]], str | None]
    repeats: tuple[tuple[str, ...], Callable[[tuple[str, ...]], tuple[str, ...]]] | None
    names: tuple[str, ...]
    kept: tuple[int, ...]
    key: int
    row_id: int
    stamp: int


def _milliseconds_to_timestamps(values: list[str | None]) -> Any:
    """The ``timestamp`` column from the writer's ms stamps; null where one is missing or bad."""
    import pyarrow.compute as pc  # type: ignore[import-untyped, import-not-found, unused-ignore]

    text = pa.array(values, pa.string())
    try:
        millis = pc.cast(text, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        # Some message carries a stamp that is no number (not written by this sink).
        millis = pa.array([_as_int(v) for v in values], pa.int64())
    return pc.multiply(millis, 1000).cast(_TIMESTAMP)


def _as_int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


class StreamRows:
    """The rows of one stream's range read, appended column by column as frames arrive.

    The hot path of a read task.  Each MESSAGE frame costs a split of its
    headers into names and values (one C call), a lookup of the names' layout
    (a broker sends the same names in the same order, message after message),
    and a few appends: no per-header Python work, no event objects.  What a
    layout means - which headers go into the ``headers`` column (the first of
    a repeated name, as STOMP reads them; none of
    :data:`STREAM_OMITTED_HEADERS`), which into ``header_list`` (all of them,
    repeats kept), where the key, the row id and the timestamp are - is
    worked out once per layout.  :meth:`take` builds the record batch with one
    :mod:`pyarrow` call per column; ``header_list`` shares the ``headers``
    column's arrays unless some message of the batch repeats a name.
    """

    __slots__ = (
        "_bodies",
        "_ends",
        "_full",
        "_key_binary",
        "_key_header",
        "_keys",
        "_layouts",
        "_names",
        "_offsets",
        "_partition",
        "_row_id_header",
        "_row_ids",
        "_size",
        "_stamps",
        "_stream",
        "_times",
        "_timestamp_header",
        "_topic",
        "_values",
    )

    def __init__(
        self,
        stream: str,
        key_header: str,
        row_id_header: str,
        *,
        partition: int = 0,
        timestamp_header: str = "x-timestamp",
        key_binary: bool = False,
        topic: str | None = None,
    ) -> None:
        """``topic``: rows in :data:`KAFKA_SCHEMA` (``schema=kafka``), with that topic."""
        self._stream = stream
        self._topic = topic
        self._partition = partition
        self._key_header = key_header
        self._row_id_header = row_id_header
        self._timestamp_header = timestamp_header
        self._key_binary = key_binary
        self._layouts: dict[tuple[str, ...], _Layout] = {}
        self._reset()

    def _reset(self) -> None:
        self._offsets: list[int] = []
        self._times: list[int] = []
        self._bodies: list[bytes] = []
        self._keys: list[str | None] = []
        self._row_ids: list[str | None] = []
        self._stamps: list[str | None] = []
        # The headers column, flat: every row's names and values, and where each row ends.
        self._names: list[str] = []
        self._values: list[str] = []
        self._ends: list[int] = [0]
        self._size = 0
        # The header_list column the same way, once a row repeats a name (else None).
        self._full: tuple[list[str], list[str], list[int]] | None = None

    def __len__(self) -> int:
        return len(self._offsets)

    def _layout(self, names: tuple[str, ...]) -> _Layout:
        kept: list[int] = []
        every: list[int] = []
        seen: set[str] = set()
        for index, name in enumerate(names):
            if name not in STREAM_OMITTED_HEADERS:
                every.append(index)
                if name not in seen:
                    kept.append(index)
            seen.add(name)
        # The first of a repeated name; an omitted header is no key, whatever its name.
        first = {names[i]: i for i in reversed(kept)}
        key, row_id, stamp = (
            first.get(self._key_header, -1),
            first.get(self._row_id_header, -1),
            first.get(self._timestamp_header, -1),
        )
        layout = _Layout(
            tuple(names[i] for i in kept),
            _picker(kept),
            _getter(key),
            _getter(row_id),
            _getter(stamp),
            (tuple(names[i] for i in every), _picker(every)) if every != kept else None,
            names,
            tuple(kept),
            key,
            row_id,
            stamp,
        )
        if len(self._layouts) < MAX_LAYOUTS:
            self._layouts[names] = layout
        return layout

    def add(self, messages: Sequence[tuple[int, Frame]], received_at: int) -> None:
        """Append ``(offset, MESSAGE frame)`` pairs received at ``received_at`` (µs)."""
        self._times.extend([received_at] * len(messages))
        if _native is not None and self._full is None:
            # The native twin takes the rows up to the first whose layout repeats a name.
            done, self._size = _native.add_rows(
                messages, self._layouts, self._layout, self._offsets, self._bodies,
                self._keys, self._row_ids, self._stamps, self._names, self._values,
                self._ends, self._size,
            )  # fmt: skip
            if done == len(messages):
                return
            messages = messages[done:]
        layouts = self._layouts
        offsets_append = self._offsets.append
        bodies_append = self._bodies.append
        keys_append = self._keys.append
        row_ids_append = self._row_ids.append
        stamps_append = self._stamps.append
        names_extend = self._names.extend
        values_extend = self._values.extend
        ends_append = self._ends.append
        size = self._size
        full = self._full
        empty: tuple[str, ...] = ()
        for offset, frame in messages:
            headers = frame.headers
            names, values = zip(*headers, strict=True) if headers else (empty, empty)
            layout = layouts.get(names)
            if layout is None:
                layout = self._layout(names)
            kept, pick, key, row_id, stamp, repeats, _, _, _, _, _ = layout
            picked = pick(values)
            names_extend(kept)
            values_extend(picked)
            size += len(kept)
            ends_append(size)
            if repeats is not None and full is None:
                # The first repeat of this batch: header_list parts from headers here.
                before = size - len(kept)  # the earlier rows' entries, the same in both
                full = self._full = (self._names[:before], self._values[:before], self._ends[:-1])
            if full is not None:
                if repeats is not None:
                    full[0].extend(repeats[0])
                    full[1].extend(repeats[1](values))
                else:
                    full[0].extend(kept)
                    full[1].extend(picked)
                full[2].append(len(full[0]))
            keys_append(key(values))
            row_ids_append(row_id(values))
            stamps_append(stamp(values))
            offsets_append(offset)
            bodies_append(frame.body)
        self._size = size

    def take(self) -> Any:
        """The rows added since the last call, as one record batch in the stream schema
        (in :data:`KAFKA_SCHEMA` when made with a ``topic``)."""
        if self._topic is not None:
            return self._take_kafka(self._topic)
        count = len(self._offsets)
        names = pa.array(self._names, pa.string())
        values = pa.array(self._values, pa.string())
        ends = pa.array(self._ends, pa.int32())
        headers = pa.MapArray.from_arrays(ends, names, values)
        if self._full is not None:
            names = pa.array(self._full[0], pa.string())
            values = pa.array(self._full[1], pa.string())
            ends = pa.array(self._full[2], pa.int32())
        header_list = pa.ListArray.from_arrays(
            ends,
            pa.StructArray.from_arrays([names, values], names=["key", "value"]),
            type=_HEADER_LIST_TYPE,
        )
        keys = pa.array(self._keys, pa.string())
        if self._key_binary:
            keys = keys.cast(pa.binary())
        batch = pa.record_batch(
            [
                pa.repeat(pa.scalar(self._stream, pa.string()), count),
                pa.array(self._offsets, pa.int64()),
                headers,
                pa.array(self._bodies, pa.binary()),
                pa.array(self._times, _TIMESTAMP),
                keys,
                pa.array(self._row_ids, pa.string()),
                pa.repeat(pa.scalar(self._partition, pa.int32()), count),
                _milliseconds_to_timestamps(self._stamps),
                header_list,
            ],
            schema=streams_arrow_schema(self._key_binary),
        )
        self._reset()
        return batch

    def _take_kafka(self, topic: str) -> Any:
        count = len(self._offsets)
        names, values, ends = self._full or (self._names, self._values, self._ends)
        headers = pa.ListArray.from_arrays(
            pa.array(ends, pa.int32()),
            pa.StructArray.from_arrays(
                [pa.array(names, pa.string()), pa.array(values, pa.string()).cast(pa.binary())],
                names=["key", "value"],
            ),
            type=_KAFKA_HEADERS_TYPE,
        )
        import pyarrow.compute as pc  # type: ignore[import-untyped, import-not-found, unused-ignore]

        stamps = _milliseconds_to_timestamps(self._stamps)
        kinds = pc.if_else(
            pc.is_valid(stamps),
            pa.scalar(CREATE_TIME, pa.int32()),
            pa.scalar(NO_TIMESTAMP_TYPE, pa.int32()),
        )
        batch = pa.record_batch(
            [
                pa.array(self._keys, pa.string()).cast(pa.binary()),
                pa.array(self._bodies, pa.binary()),
                pa.repeat(pa.scalar(topic, pa.string()), count),
                pa.repeat(pa.scalar(self._partition, pa.int32()), count),
                pa.array(self._offsets, pa.int64()),
                stamps,
                kinds,
                headers,
            ],
            schema=KAFKA_ARROW_SCHEMA,
        )
        self._reset()
        return batch


# The native twin of StreamRows.add's loop (stomp_proto/_streams_native.pyx), or None.
_native = native("_streams_native")


def streams_arrow_schema(key_binary: bool, kafka: bool = False) -> Any:
    """The Arrow schema of ``stomp-streams`` rows (``keyType=binary``: a binary key;
    ``schema=kafka``: :data:`KAFKA_ARROW_SCHEMA`)."""
    if kafka:
        return KAFKA_ARROW_SCHEMA
    return STREAMS_ARROW_SCHEMA_BINARY_KEY if key_binary else STREAMS_ARROW_SCHEMA
