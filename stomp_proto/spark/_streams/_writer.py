"""The stream sink without Spark: routing rows to streams and sending them.

Each task sends over one connection.  Rows go to ``/amq/queue/<stream>``:

* the stream a ``stream`` column names, when the row has one;
* else ``streams[crc32(key) % N]`` when there is a ``key`` column;
* else the stream of the Spark partition writing the row.

RabbitMQ drops a SEND to a stream that does not exist without a word (even
one with a receipt), so every stream is declared or checked
(:func:`~._link.declare_streams`) before the first SEND to it: the
configured ones by the driver when the write starts, a stream first named
by a ``stream`` column by the task, on a short side connection, before
sending to it.

A transaction's COMMIT receipt is no publisher confirm on RabbitMQ 3.10 (it
came before the last SEND's), so there is no transaction: the last SEND to
each stream asks for a receipt, and the task succeeds once all those
receipts are in.  A task that fails midway leaves what it sent.  Every row
carries an id (``x-row-id``: ``<write>-<partition>-<index>``) that is the same
in a retry of the same task, and a task's rows reach each stream in index
order.  So a task that may be running again (a retry, or any streaming task:
a batch can be replayed after a restart) first looks, in each stream it
writes to, for the last row of its own that is already there
(:func:`last_written`), and sends only the rows after it: exactly once,
for sequential attempts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..._client._core import BrokerError
from ..._encoder import FrameEncoder
from ..._events import Send, Subscribe
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
from ._link import StreamLink, amq_destination, declare_streams, probe_streams, read_range
from ._offsets import StreamRange, StreamsWriterSettings, route

__all__ = ["StreamColumns", "StreamsPartitionWriter", "last_written", "plan_stream_columns"]

#: The queues that serve as the locks of write tasks (exclusive, deleted with their holder).
LOCK_PREFIX = "stomp-streams-lock-"
#: The queues that mark a task an attempt of which began to send, and how long one is
#: kept unused.
STARTED_PREFIX = "stomp-streams-started-"
MARKER_EXPIRES_MS = 24 * 3600 * 1000
#: Seconds an attempt of a task waits for another attempt of it to end (speculation).
LOCK_TIMEOUT = 3600.0
#: Offsets a resume scan reads first, back from a stream's tail (doubled each time).
SCAN_WINDOW = 2000
#: A resume scan's prefetch, and how long it waits for a message.
_SCAN_PREFETCH = 2000
_SCAN_READ_TIMEOUT = 30.0

#: Whether a message read by a resume scan is older than anything the task can have sent.
Older = Callable[[Frame], bool]


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

    return StreamColumns(
        body=body,
        key=optional(settings.key_column, (STRING, BINARY), "key"),
        stream=optional(settings.stream_column, (STRING,), "stream"),
        headers=optional(settings.headers_column, (HEADER_MAP,), "headers"),
    )


def last_written(
    connection: ConnectionSettings,
    stream: str,
    row_id_header: str,
    prefix: str,
    older: Older,
    *,
    quiet: float = 1.0,
    probe_timeout: float = 0.25,
) -> int | None:
    """The highest ``<index>`` of a row id ``<prefix><index>`` in ``stream``; None if none.

    Reads back from the tail, a window at a time (:data:`SCAN_WINDOW` offsets,
    doubled each time): a task's rows reach a stream in index order, so the
    first window (from the tail) that holds one of them holds the highest.
    The newest window is read on past the tail the probe found, until
    ``quiet`` seconds pass without a message: a probe can end before the last
    chunk is in, and the messages of an attempt that just died may still be
    landing.  The scan ends without a row at the head of the stream, or once a
    window holds a message ``older`` says was there before the task could
    write.
    """
    found = probe_streams(connection, [stream], timeout=probe_timeout)[stream]
    head = found.first or 0
    end = head if found.tail is None else found.tail + 1
    start = max(head, end - SCAN_WINDOW)
    best, passed = _scan(connection, stream, row_id_header, prefix, older, start, None, quiet)
    size = SCAN_WINDOW
    while best < 0 and not passed and start > head:
        end, size = start, size * 2
        start = max(head, end - size)
        best, passed = _scan(connection, stream, row_id_header, prefix, older, start, end, quiet)
    return best if best >= 0 else None


def _scan(
    connection: ConnectionSettings,
    stream: str,
    row_id_header: str,
    prefix: str,
    older: Older,
    start: int,
    end: int | None,
    quiet: float,
) -> tuple[int, bool]:
    """The highest own index in ``[start, end)`` (-1: none), and whether an older message
    was seen; ``end=None`` reads until ``quiet`` seconds pass without a message."""
    best = -1
    passed = False
    last = (1 << 62) if end is None else end
    try:
        for chunk in read_range(
            connection,
            StreamRange(stream, start, last),
            prefetch=_SCAN_PREFETCH,
            read_timeout=quiet if end is None else _SCAN_READ_TIMEOUT,
            fail_on_data_loss=False,
        ):
            for _, frame in chunk:
                row_id = frame.get(row_id_header)
                if row_id is not None and row_id.startswith(prefix):
                    index = row_id[len(prefix) :]
                    if index.isdigit():
                        best = max(best, int(index))
                elif not passed and older(frame):
                    passed = True
    except TimeoutError:
        if end is not None:
            raise
    return best, passed


def _lock(connection: ConnectionSettings, name: str, timeout: float) -> StreamLink:
    """A connection holding the lock ``name``: an exclusive queue of RabbitMQ's, which the
    broker gives one connection at a time and deletes when that connection ends.

    Another connection's SUBSCRIBE to it gets ``RESOURCE_LOCKED`` (and loses its
    connection); it is tried again, on a new connection, until ``timeout`` seconds
    have passed.
    """
    deadline = time.monotonic() + timeout
    pause = 0.05
    while True:
        link = StreamLink(connection)
        try:
            link.send(
                Subscribe(
                    f"/queue/{LOCK_PREFIX}{name}",
                    id="lock",
                    ack="client",
                    receipt="locked",
                    headers=(("exclusive", "true"), ("auto-delete", "true"), ("durable", "false")),
                )
            )
            link.wait_for_receipts({"locked": name}, "the lock of")
            return link
        except BrokerError as exc:
            link.abandon()
            if "RESOURCE_LOCKED" not in str(exc) or time.monotonic() + pause > deadline:
                raise
        except BaseException:
            link.abandon()
            raise
        time.sleep(pause)
        pause = min(pause * 2, 1.0)


def _never_older(frame: Frame) -> bool:
    return False


def _started(connection: ConnectionSettings, task: str) -> bool:
    """Whether an attempt of ``task`` began to send (its marker queue exists)."""
    link = StreamLink(connection)
    try:
        link.send(
            Subscribe(
                amq_destination(f"{STARTED_PREFIX}{task}"), id="mark", ack="client", receipt="m"
            )
        )
        link.wait_for_receipts({"m": task}, "the check of")
    except BrokerError as exc:
        link.abandon()
        if "NOT_FOUND" in str(exc):
            return False
        raise
    link.close(connection.timeout)
    return True


def _mark_started(link: StreamLink, task: str) -> None:
    """Leave the marker of a task that begins to send: a queue that expires unused."""
    link.send(
        Subscribe(
            f"/queue/{STARTED_PREFIX}{task}",
            id="mark",
            ack="client",
            receipt="marked",
            headers=(
                ("durable", "true"),
                ("auto-delete", "false"),
                ("x-expires", str(MARKER_EXPIRES_MS)),
            ),
        )
    )
    link.wait_for_receipts({"marked": task}, "the marker of")


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
        #: Seconds without a message that end a resume scan's newest window.
        self.quiet = 1.0
        #: Seconds an attempt waits for another attempt of its task to finish.
        self.lock_timeout = LOCK_TIMEOUT

    def write_batches(
        self,
        batches: Iterable[Any],
        *,
        task_partition: int,
        row_id_prefix: str,
        resume: Older | None = None,
        exclusive: bool = False,
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
        return self.send(
            chunks,  # type: ignore[arg-type]
            task_partition=task_partition,
            row_id_prefix=row_id_prefix,
            resume=resume,
            exclusive=exclusive,
        )

    def send(
        self,
        chunks: Iterable[tuple[list[Any], list[Any] | None, list[Any] | None, list[Any] | None]],
        *,
        task_partition: int,
        row_id_prefix: str,
        resume: Older | None = None,
        exclusive: bool = False,
    ) -> dict[str, int]:
        """Send rows given column by column: (bodies, keys, streams, headers) per chunk.

        With ``resume`` (the task may be running again), each stream's rows
        already there (:func:`last_written`, ``resume`` bounding its scan) are
        not sent again.  With ``exclusive`` (``exactlyOnce``), the task first
        takes the lock of its rows (:func:`_lock`), so that two attempts of it
        running at once (speculative execution) send one after the other,
        never together.  Holding it, an attempt that finds the marker of an
        earlier one (:func:`_started`) resumes as above; the first to send
        leaves the marker and scans nothing.
        """
        iterator = iter(chunks)
        first = next(iterator, None)
        if first is None:
            return {}  # an empty partition needs no connection
        settings = self.settings
        checked = set(settings.streams)  # the driver declared or checked these
        task = f"{row_id_prefix}-{task_partition}"
        if exclusive:
            link = _lock(self.connection, task, self.lock_timeout)
            try:
                if _started(self.connection, task):
                    # An earlier attempt (or a speculative copy) sent some or all rows.
                    resume = resume or _never_older
                else:
                    _mark_started(link, task)
                    resume = None  # the first attempt to send: nothing can be there
            except BaseException:
                link.abandon()
                raise
        else:
            link = StreamLink(self.connection)
        try:
            encoder = FrameEncoder(link.conn.version or "1.2")
            static = [(k, v) for k, v in settings.send_headers.items() if k not in RESERVED_HEADERS]
            held: dict[str, tuple[list[tuple[str, str]], bytes]] = {}
            sent: dict[str, int] = {}
            index = 0
            own = f"{row_id_prefix}-{task_partition}-"
            #: Per stream, the highest row index already there (resume only).
            done: dict[str, int] = {}
            chunk: tuple[list[Any], list[Any] | None, list[Any] | None, list[Any] | None] | None
            chunk = first
            while chunk is not None:
                bodies, keys, named, headers = chunk
                targets = route(settings.streams, keys, named, len(bodies), task_partition)
                new = sorted({t for t in targets if t not in checked})
                if new:
                    declare_streams(
                        self.connection,
                        new,
                        create=settings.create_streams,
                        arguments=settings.declare_headers(),
                    )
                    checked.update(new)
                out: list[bytes] = []
                # The reader's replay-stable ``timestamp``: when the chunk was sent, in ms.
                stamp = str(time.time_ns() // 1_000_000)
                for i, body in enumerate(bodies):
                    stream = targets[i]
                    if resume is not None:
                        last = done.get(stream)
                        if last is None:
                            last = done[stream] = self._last_written(stream, own, resume)
                        if index <= last:
                            index += 1  # sent by an earlier attempt
                            continue
                    frame_headers = self._headers(
                        stream,
                        body,
                        None if keys is None else keys[i],
                        None if headers is None else headers[i],
                        f"{row_id_prefix}-{task_partition}-{index}",
                        static,
                        stamp,
                    )
                    index += 1
                    data = body.encode("utf-8") if isinstance(body, str) else (body or b"")
                    previous = held.get(stream)
                    if previous is not None:
                        out.append(encoder.encode(Frame("SEND", tuple(previous[0]), previous[1])))
                    held[stream] = (frame_headers, data)
                    sent[stream] = sent.get(stream, 0) + 1
                if out:
                    link.write(b"".join(out))
                chunk = next(iterator, None)
            receipts: dict[str, str] = {}
            for n, (stream, (frame_headers, data)) in enumerate(held.items()):
                receipt = f"sent-{n}"
                receipts[receipt] = stream
                # Through the connection, which then expects the RECEIPT.
                link.send(
                    Send(
                        frame_headers[0][1],
                        data,
                        receipt=receipt,
                        headers=tuple(frame_headers[1:]),
                    )
                )
            link.wait_for_receipts(receipts, "the last SEND to")  # an ERROR raises
        except BaseException:
            link.abandon()
            raise
        link.close(self.connection.timeout)
        return sent

    def _last_written(self, stream: str, own: str, older: Older) -> int:
        found = last_written(
            self.connection, stream, self.settings.row_id_header, own, older, quiet=self.quiet
        )
        return -1 if found is None else found

    def _headers(
        self,
        stream: str,
        body: Any,
        key: Any,
        row_headers: Any,
        row_id: str,
        static: list[tuple[str, str]],
        stamp: str,
    ) -> list[tuple[str, str]]:
        settings = self.settings
        own: list[tuple[str, str]] = []
        if row_headers:
            pairs = row_headers.items() if isinstance(row_headers, Mapping) else row_headers
            own = [(k, v) for k, v in pairs if v is not None and k not in RESERVED_HEADERS]
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
