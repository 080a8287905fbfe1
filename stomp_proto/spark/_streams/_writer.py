"""The stream sink without Spark: routing rows to streams and sending them.

Each task sends over one connection.  Rows go to ``/amq/queue/<stream>``:

* with the ``stream`` (or ``streams``) option, ``streams[crc32(key) % N]``
  when there is a ``key`` column, else the stream of the Spark partition
  writing the row; a ``stream`` column is then ignored, as Kafka's sink
  ignores a ``topic`` column when the ``topic`` option is given;
* without it, the stream the row's ``stream`` column names.

RabbitMQ drops a SEND to a stream that does not exist without a word (even
one with a receipt), so every stream is declared or checked
(:func:`~._link.declare_streams`) before the first SEND to it: the
configured ones by the driver when the write starts, a stream first named
by a ``stream`` column by the task, on a short side connection, before
sending to it.

A transaction's COMMIT receipt is no publisher confirm on RabbitMQ 3.10 (it
came before the last SEND's), so there is no transaction: the last SEND of a
chunk (an Arrow batch) to each stream asks for a receipt, and the next chunk
is read once all those receipts are in.

Every row carries an id (``x-row-id``) that is the same in a retry of the
same task.  With ``exactlyOnce`` (the default) the task runs under the
guard of :mod:`._guard`: one attempt at a time, and an attempt sends only the
rows that earlier attempts did not, so a retried, speculative or replayed
task adds no duplicate.  Without it a task that fails midway leaves what it
sent, a retried task sends it again, and writes are at-least-once.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from ..._encoder import FrameEncoder
from ..._events import Send
from ..._frame import Frame
from .._columns import (
    BINARY,
    HEADER_MAP,
    RESERVED_HEADERS,
    STRING,
    TEXT_CONTENT_TYPE,
    body_column,
)
from .._options import ConnectionSettings
from .._retry import retrying
from ._guard import RowIds, TaskGuard, rows_already_written, stream_floors
from ._link import StreamLink, amq_destination, declare_streams
from ._offsets import StreamsWriterSettings, route

__all__ = ["StreamColumns", "StreamsPartitionWriter", "plan_stream_columns"]


@dataclass(frozen=True)
class StreamColumns:
    """Which DataFrame columns the stream sink reads (None: the column is absent)."""

    body: str
    key: str | None
    stream: str | None
    headers: str | None


def plan_stream_columns(
    fields: Sequence[tuple[str, str]], settings: StreamsWriterSettings
) -> StreamColumns:
    """Check the DataFrame's ``(column, Spark simple type)`` pairs; ValueError if unusable."""
    kinds = dict(fields)
    body = body_column(kinds, settings.body_column)
    if kinds.get(body) not in (STRING, BINARY):
        names = ", ".join(kinds) or "none"
        raise ValueError(
            f"the stomp-streams sink needs a {body!r} column (or Kafka's 'value') of type "
            f"binary or string (option 'bodyColumn'); the columns are: {names}"
        )

    def optional(name: str, allowed: tuple[str, ...], what: str) -> str | None:
        if name not in kinds:
            return None
        if kinds[name] not in allowed:
            raise ValueError(f"the {what} column {name!r} must be {' or '.join(allowed)}")
        return name

    # Kafka's rule: the option, when given, wins over the column, so a copy of a
    # stream's rows (which carry a stream column) never lands back in its source.
    stream = None if settings.streams else optional(settings.stream_column, (STRING,), "stream")
    if not settings.streams and stream is None:
        raise ValueError(
            "the stomp-streams sink needs the 'stream' (or 'streams') option, or a "
            f"{settings.stream_column!r} column of type string naming each row's stream"
        )
    return StreamColumns(
        body=body,
        key=optional(settings.key_column, (STRING, BINARY), "key"),
        stream=stream,
        headers=optional(settings.headers_column, (HEADER_MAP,), "headers"),
    )


def _pairs(row_headers: Any) -> list[tuple[str, str]]:
    """A row's own headers (a map or (name, value) pairs), without reserved or null ones."""
    if not row_headers:
        return []
    pairs = row_headers.items() if isinstance(row_headers, Mapping) else row_headers
    return [(k, v) for k, v in pairs if v is not None and k not in RESERVED_HEADERS]


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray)) else str(value)


class StreamsPartitionWriter:
    """Sends one task's rows to the streams; see the module docstring.  Picklable."""

    def __init__(
        self,
        connection: ConnectionSettings,
        settings: StreamsWriterSettings,
        columns: StreamColumns,
    ) -> None:
        self.connection = connection
        self.settings = settings
        self.columns = columns

    def write_batches(
        self, batches: Iterable[Any], *, task_partition: int, row_id_prefix: str
    ) -> dict[str, int]:
        """Send Arrow record batches; returns rows sent per stream, once the broker has them."""
        columns = self.columns

        def column(batch: Any, name: str | None) -> list[Any] | None:
            if name is None:
                return None
            return batch.column(batch.schema.get_field_index(name)).to_pylist()  # type: ignore[no-any-return]

        chunks = (
            (
                column(b, columns.body),
                column(b, columns.key),
                column(b, columns.stream),
                column(b, columns.headers),
            )
            for b in batches
            if b.num_rows
        )
        return self.send(chunks, task_partition=task_partition, row_id_prefix=row_id_prefix)  # type: ignore[arg-type]

    def send(
        self,
        chunks: Iterable[tuple[list[Any], list[Any] | None, list[Any] | None, list[Any] | None]],
        *,
        task_partition: int,
        row_id_prefix: str,
    ) -> dict[str, int]:
        """Send rows given column by column: (bodies, keys, streams, headers) per chunk.

        Each chunk is confirmed by the broker before the next is read, so a
        connection lost midway (a broker restart) costs one chunk at most: the
        task connects again (see :mod:`.._retry`) and sends it again.  With
        ``exactlyOnce`` the rows an earlier attempt of the task, or this
        attempt's lost connection, sent are counted in the result but not sent
        again.
        """
        iterator = iter(chunks)
        first = next(iterator, None)
        if first is None:
            return {}  # an empty partition needs no connection
        settings = self.settings
        prefix = f"{row_id_prefix}-{task_partition}-"
        ids = RowIds(prefix) if settings.exactly_once else None
        static = [(k, v) for k, v in settings.send_headers.items() if k not in RESERVED_HEADERS]
        channel = _TaskChannel(self.connection, settings, row_id_prefix, task_partition)
        sent: dict[str, int] = {}
        index = 0
        try:
            for bodies, keys, named, headers in itertools.chain([first], iterator):
                targets = route(settings.streams, keys, named, len(bodies), task_partition)
                # The reader's replay-stable ``timestamp``: when the chunk was made, in ms.
                stamp = str(time.time_ns() // 1_000_000)
                rows: list[_Row] = []
                for i, body in enumerate(bodies):
                    stream = targets[i]
                    key = None if keys is None else keys[i]
                    own = _pairs(None if headers is None else headers[i])
                    data = body.encode("utf-8") if isinstance(body, str) else (body or b"")
                    if ids is None:
                        row_id = f"{prefix}{index}"
                        index += 1
                    else:
                        row_id = ids.next(stream, key, data, own)
                    frame_headers = self._headers(
                        stream, body, key, own, row_id, static, stamp, own_id=ids is None
                    )
                    rows.append(_Row(stream, row_id, frame_headers, data))
                streams = ", ".join(sorted({r.stream for r in rows}))
                retrying(self.connection, f"writing to {streams}", partial(channel.deliver, rows))
                for row in rows:
                    sent[row.stream] = sent.get(row.stream, 0) + 1
        finally:
            channel.close()
        return sent

    def _headers(
        self,
        stream: str,
        body: Any,
        key: Any,
        own: list[tuple[str, str]],
        row_id: str,
        static: list[tuple[str, str]],
        stamp: str,
        *,
        own_id: bool,
    ) -> list[tuple[str, str]]:
        """A SEND's headers; ``own_id``: a row's own row-id header wins over ``row_id``."""
        settings = self.settings
        if not own_id:
            own = [(k, v) for k, v in own if k != settings.row_id_header]
        names = {k for k, _ in own}
        frame_headers = [("destination", amq_destination(stream))]
        frame_headers += [(k, v) for k, v in static if k not in names]
        frame_headers += own
        if key is not None and settings.key_header not in names:
            frame_headers.append((settings.key_header, _text(key)))
        if settings.row_id_header not in names:
            frame_headers.append((settings.row_id_header, row_id))
        if settings.timestamp_header not in names:
            frame_headers.append((settings.timestamp_header, stamp))
        if (
            isinstance(body, str)
            and "content-type" not in names
            and all(k != "content-type" for k, _ in static)
        ):
            frame_headers.append(("content-type", TEXT_CONTENT_TYPE))
        return frame_headers


@dataclass(frozen=True)
class _Row:
    """One SEND of a task: its stream, its id, its headers (destination first), its body."""

    stream: str
    row_id: str
    headers: list[tuple[str, str]]
    body: bytes


class _TaskChannel:
    """A write task's connection to the broker, made again after it is lost.

    With ``exactlyOnce`` each connection runs under the task's guard
    (:class:`~._guard.TaskGuard`).  Before its first row to a stream the
    connection records that stream's floor in the journal.  When the journal
    shows that some earlier attempt, or an earlier connection of this one, ran,
    each stream it left a floor for is read back from there
    (:func:`~._guard.rows_already_written`) before the first chunk sent to it,
    and only the rows not found are sent.
    """

    def __init__(
        self,
        connection: ConnectionSettings,
        settings: StreamsWriterSettings,
        write_id: str,
        partition: int,
    ) -> None:
        self.connection = connection
        self.settings = settings
        self.write_id = write_id
        self.partition = partition
        self.prefix = f"{write_id}-{partition}-"
        self.link: StreamLink | None = None
        self.guard: TaskGuard | None = None
        #: Streams known to exist: the driver declared or checked the configured ones.
        self.checked = set(settings.streams)
        #: Per stream, the lowest floor in the journal when this connection began: what
        #: earlier attempts or connections may have sent there is at or above it.
        self.to_read: dict[str, int] = {}
        #: Streams with a floor in the journal (from the history, or recorded here).
        self.floored: set[str] = set()
        #: Per stream, the ids found there (read once per connection).
        self.written: dict[str, set[str]] = {}

    def _open(self) -> StreamLink:
        link = StreamLink(self.connection)
        try:
            if self.settings.exactly_once:
                self.guard = TaskGuard(link, self.write_id, self.partition)
                history = self.guard.acquire()
                self.to_read = dict(history.floors) if history.earlier else {}
                self.floored = set(history.floors)
        except BaseException:
            link.abandon()
            raise
        self.link = link
        return link

    def deliver(self, rows: Sequence[_Row]) -> None:
        """Send ``rows`` (less those already in their streams) and wait for the broker's
        receipt of each stream's last one; the connection is dropped if anything fails."""
        link = self.link or self._open()
        settings = self.settings
        try:
            streams = sorted({r.stream for r in rows})
            new = [s for s in streams if s not in self.checked]
            if new:
                declare_streams(
                    self.connection,
                    new,
                    create=settings.create_streams,
                    arguments=settings.declare_headers(),
                )
                self.checked.update(new)
            if self.guard is not None:
                unfloored = [s for s in streams if s not in self.floored]
                if unfloored:
                    self.guard.record_floors(stream_floors(self.connection, unfloored))
                    self.floored.update(unfloored)
                for stream in streams:
                    if stream in self.to_read and stream not in self.written:
                        self.written[stream] = rows_already_written(
                            self.connection, stream, self.prefix, self.to_read[stream],
                            settings.row_id_header,
                        )  # fmt: skip
                rows = [r for r in rows if r.row_id not in self.written.get(r.stream, ())]
            last = {r.stream: n for n, r in enumerate(rows)}
            encoder = FrameEncoder(link.conn.version or "1.2")
            ends = set(last.values())
            link.write(
                b"".join(
                    encoder.encode(Frame("SEND", tuple(r.headers), r.body))
                    for n, r in enumerate(rows)
                    if n not in ends
                )
            )
            receipts: dict[str, str] = {}
            for stream, n in last.items():
                receipt = f"sent-{len(receipts)}"
                receipts[receipt] = stream
                row = rows[n]
                # Through the connection, which then expects the RECEIPT.
                link.send(
                    Send(
                        row.headers[0][1], row.body, receipt=receipt, headers=tuple(row.headers[1:])
                    )
                )
            link.wait_for_receipts(receipts, "the last SEND to")  # an ERROR raises
        except BaseException:
            self._drop()
            raise

    def _drop(self) -> None:
        """Forget a failed connection: what it sent is unknown, so the next connection
        learns from the journal (``exactlyOnce``) what to read back before sending."""
        if self.link is not None:
            self.link.abandon()
            self.link = None
            self.guard = None
            self.to_read = {}
            self.floored = set()
            self.written = {}

    def close(self) -> None:
        if self.link is not None:
            self.link.close(self.connection.timeout)
            self.link = None
