"""The Spark side of ``stomp-streams``: RabbitMQ stream queues, read in parallel and replayable.

A thin adapter from Spark's Python Data Source API to the plain objects of
``_reader`` (planning on the driver, range reads on executors) and
``_writer`` (the sink).  As everywhere in this package, nothing
connects before Spark calls a method that needs the broker.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from .._columns import column_kind, streams_schema
from .._options import ConnectionSettings, option_names, warn_unknown_options
from .._progress import behind
from .._schema import streams_arrow_schema
from ._link import declare_streams
from ._offsets import (
    KAFKA_OPTIONS,
    StreamRange,
    StreamsReaderSettings,
    StreamsWriterSettings,
    check_offsets,
    streams_option_names,
)
from ._reader import StreamsPlanner, read_partition
from ._writer import StreamsPartitionWriter, plan_stream_columns

try:  # Spark 4.2 and later
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - Spark 4.0 and 4.1: no read limits
    ReadAllAvailable = ReadMaxRows = None  # type: ignore[assignment, misc]

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in: before Spark 4.2 an availableNow query plans once, then stops."""

        def prepareForTriggerAvailableNow(self) -> None:
            pass


try:  # Spark 4.1 and later
    from pyspark.sql.datasource import DataSourceStreamArrowWriter
except ImportError:  # pragma: no cover - Spark 4.0: no Arrow stream writer
    DataSourceStreamArrowWriter = None  # type: ignore[assignment, misc]

__all__ = ["StompStreamsDataSource", "StreamsCommitMessage"]

log = logging.getLogger("stomp_proto.spark")


def _check_schema(schema: StructType, settings: StreamsReaderSettings) -> None:
    kafka = settings.kafka_schema
    expected = streams_arrow_schema(settings.key_binary, kafka)
    if list(schema.names) != list(expected.names):
        raise ValueError(
            "the stomp-streams source has a fixed schema and cannot read into another one: "
            f"expected {streams_schema(settings.key_binary, kafka)}; got {schema.simpleString()}"
        )


@dataclass
class StreamsPartition(InputPartition):
    """One read task: offsets ``[start, end)`` of one stream."""

    stream: str
    start: int
    end: int


def _partitions(ranges: Sequence[StreamRange]) -> list[InputPartition]:
    return [StreamsPartition(r.stream, r.start, r.end) for r in ranges]


class _RangeReader:
    """``read(partition)``, shared by the batch and the streaming reader; runs on executors."""

    connection: ConnectionSettings
    settings: StreamsReaderSettings

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, StreamsPartition):
            if getattr(partition, "value", None) is None:
                # Spark's stand-in when planning found nothing to read (``partitions()``
                # returned no range: a start at or past the tail, an empty stream).
                return iter(())
            raise TypeError(f"not a partition of the stomp-streams source: {partition!r}")
        part = StreamRange(partition.stream, partition.start, partition.end)
        return read_partition(self.connection, self.settings, part)


class StreamsBatchReader(_RangeReader, DataSourceReader):
    """``spark.read.format("stomp-streams")``: ``startingOffsets`` to ``endingOffsets``."""

    def __init__(self, planner: StreamsPlanner) -> None:
        self.planner = planner
        self.connection = planner.connection
        self.settings = planner.settings

    def partitions(self) -> Sequence[InputPartition]:
        start = self.planner.initial_offsets()
        end = self.planner.ending_offsets()
        return _partitions(self.planner.ranges(start, end))


class StreamsStreamReader(_RangeReader, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("stomp-streams")``: micro-batches of offset ranges."""

    def __init__(self, planner: StreamsPlanner) -> None:
        self.planner = planner
        self.connection = planner.connection
        self.settings = planner.settings
        #: The end of the batch latestOffset last planned.
        self._planned: dict[str, int] | None = None

    def initialOffset(self) -> dict[str, int]:
        return self.planner.initial_offsets()

    def getDefaultReadLimit(self) -> Any:
        limit = self.settings.max_offsets_per_trigger
        if ReadMaxRows is None or limit is None:
            return ReadAllAvailable() if ReadAllAvailable is not None else None
        return ReadMaxRows(limit)

    def latestOffset(self, start: dict[str, Any], limit: Any) -> dict[str, int]:
        begin = check_offsets("latestOffset", start)
        max_rows: int | None = None
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            max_rows = int(limit.max_rows)
        self._planned = self.planner.latest_offsets(begin, max_rows)
        return self._planned

    def prepareForTriggerAvailableNow(self) -> None:
        self.planner.prepare_available_now()

    def reportLatestOffset(self) -> dict[str, int]:
        # Asked after each latestOffset(): the tails its probe just found.
        return self.planner.reported_latest()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, stop = check_offsets("start", start), check_offsets("end", end)
        if stop != self._planned and stop != begin:
            self._log_replayed(begin, stop)
        return _partitions(self.planner.ranges(begin, stop))

    def _log_replayed(self, start: dict[str, int], end: dict[str, int]) -> None:
        """A batch this reader did not plan: the one of Spark's offset log that had not
        committed before a restart.  Spark asks no latest offset for it, so its progress
        shows none; the lag is logged here instead, from a probe (whose tails the next
        batch's progress reports too)."""
        self.planner.reached(end)
        lag = behind(end, self.planner.latest())
        log.info(
            "stomp-streams: batch %s..%s is replayed from the checkpoint; the streams are "
            "%d offsets behind their tails after it: %s",
            json.dumps(start, sort_keys=True), json.dumps(end, sort_keys=True),
            sum(lag.values()), json.dumps(lag, sort_keys=True),
        )  # fmt: skip

    def commit(self, end: dict[str, Any]) -> None:
        # The broker keeps no position for a stream consumer: the checkpoint is the position.
        pass


# -- writing -------------------------------------------------------------------------


@dataclass
class StreamsCommitMessage(WriterCommitMessage):
    """What one write task reports: the rows the broker confirmed, per stream."""

    rows: dict[str, int]


def _task() -> tuple[int, str | None]:
    """The Spark partition id of the running task, and a replay-stable batch id if streaming."""
    try:
        from pyspark import TaskContext

        context = TaskContext.get()
    except Exception:  # pragma: no cover - outside a task
        context = None
    if context is None:
        return 0, None
    query = context.getLocalProperty("sql.streaming.queryId")
    batch = context.getLocalProperty("streaming.sql.batchId")
    stable = f"{query}-{batch}" if query and batch is not None else None
    return context.partitionId(), stable


class _StreamsSink:
    def __init__(self, writer: StreamsPartitionWriter) -> None:
        self.partition_writer = writer
        #: Row ids start with this: made once per write on the driver, so a retried
        #: task gives its rows the ids of the first attempt.
        self.write_id = uuid.uuid4().hex[:16]

    def _write(self, iterator: Iterator[Any]) -> StreamsCommitMessage:
        partition, stable = _task()
        rows = self.partition_writer.write_batches(
            iterator, task_partition=partition, row_id_prefix=stable or self.write_id
        )
        return StreamsCommitMessage(rows=rows)

    @staticmethod
    def _log(messages: Sequence[WriterCommitMessage | None], what: str) -> None:
        sent = sum(sum(m.rows.values()) for m in messages if isinstance(m, StreamsCommitMessage))
        if sent:
            log.warning(
                "stomp-streams sink: %s failed after %d row(s) were confirmed; they stay "
                "in the streams (readers can deduplicate on row_id)",
                what,
                sent,
            )


class StreamsArrowWriter(_StreamsSink, DataSourceArrowWriter):
    """``df.write.format("stomp-streams")``."""

    def write(self, iterator: Iterator[Any]) -> StreamsCommitMessage:
        return self._write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self._log(messages, "the write")


if DataSourceStreamArrowWriter is not None:

    class StreamsStreamArrowWriter(_StreamsSink, DataSourceStreamArrowWriter):
        """``writeStream.format("stomp-streams")``."""

        def write(self, iterator: Iterator[Any]) -> StreamsCommitMessage:
            return self._write(iterator)

        def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
            pass

        def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
            self._log(messages, f"micro-batch {batchId}")


# -- the data source ---------------------------------------------------------------------


class StompStreamsDataSource(DataSource):
    """``format("stomp-streams")``: RabbitMQ stream queues, read in parallel, replayable.

    Register it with ``spark.dataSource.register(StompStreamsDataSource)`` (or
    :func:`~stomp_proto.spark.register`).  Its ``options`` (``.option(...)`` in Spark)
    and guarantees: :doc:`/spark`.
    """

    def __init__(self, options: dict[str, str]) -> None:
        """Check every option at once (Spark makes the source at ``load()`` and ``save()``):
        a bad value fails there, naming the option, rather than in a task or a
        running query; an unknown option is logged at WARNING."""
        super().__init__(options)
        ConnectionSettings.from_options(options)
        writing = StreamsWriterSettings.from_options(options)
        if writing.streams:  # a write without them routes by its rows' stream column
            StreamsReaderSettings.from_options(options)
        names = streams_option_names()
        warn_unknown_options(
            "stomp-streams",
            options,
            (*option_names()["connection"], *names["streams-read"], *names["streams-write"]),
            KAFKA_OPTIONS,
        )

    @classmethod
    def name(cls) -> str:
        """The format's name: ``"stomp-streams"``."""
        return "stomp-streams"

    def schema(self) -> str:
        """The rows read: :data:`STREAMS_SCHEMA` (``key BINARY`` with ``keyType=binary``),
        or :data:`KAFKA_SCHEMA` with ``schema=kafka``."""
        settings = StreamsReaderSettings.from_options(self.options)
        return streams_schema(settings.key_binary, settings.kafka_schema)

    def _planner(self, schema: StructType) -> StreamsPlanner:
        settings = StreamsReaderSettings.from_options(self.options)
        _check_schema(schema, settings)
        return StreamsPlanner(ConnectionSettings.from_options(self.options), settings)

    def reader(self, schema: StructType) -> StreamsBatchReader:
        """Called by Spark for ``read``: the offsets in the streams now, in parallel.

        ``schema`` is the one Spark passes (see :meth:`schema`).

        :rtype: pyspark.sql.datasource.DataSourceReader
        """
        return StreamsBatchReader(self._planner(schema))

    def streamReader(self, schema: StructType) -> StreamsStreamReader:
        """Called by Spark for ``readStream``: replayable micro-batches by offset.

        ``schema`` is the one Spark passes (see :meth:`schema`).

        :rtype: pyspark.sql.datasource.DataSourceStreamReader
        """
        if "endingoffsets" in {str(k).lower() for k in self.options}:
            raise ValueError(
                "option 'endingOffsets' is for batch reads (spark.read) only: a streaming "
                "query reads on as messages come.  To stop at the messages there when the "
                "query starts, use .trigger(availableNow=True)"
            )
        return StreamsStreamReader(self._planner(schema))

    def _partition_writer(self, schema: StructType) -> StreamsPartitionWriter:
        settings = StreamsWriterSettings.from_options(self.options)
        columns = plan_stream_columns(
            [(f.name, column_kind(f.dataType)) for f in schema.fields], settings
        )
        connection = ConnectionSettings.from_options(self.options)
        # Before any task sends: RabbitMQ drops SENDs to a missing stream silently.
        declare_streams(
            connection,
            settings.streams,
            create=settings.create_streams,
            arguments=settings.declare_headers(),
        )
        return StreamsPartitionWriter(connection, settings, columns)

    def writer(self, schema: StructType, overwrite: bool) -> StreamsArrowWriter:
        """Called by Spark for ``write``: rows appended to the streams.

        ``schema`` is the written DataFrame's, as Spark passes it; ``overwrite``
        (Spark's save mode) changes nothing: messages are always added.

        :rtype: pyspark.sql.datasource.DataSourceArrowWriter
        """
        if overwrite:
            raise ValueError(
                "the stomp-streams sink cannot overwrite (a stream is append-only); "
                "use mode('append')"
            )
        return StreamsArrowWriter(self._partition_writer(schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """Called by Spark for ``writeStream`` (Spark 4.1 and later).

        ``schema`` is the written DataFrame's, as Spark passes it; ``overwrite``
        (Spark's save mode) changes nothing: messages are always added.
        """
        if DataSourceStreamArrowWriter is None:  # pragma: no cover - Spark 4.0
            raise ValueError("streaming writes to stomp-streams need Spark 4.1 or later")
        return StreamsStreamArrowWriter(self._partition_writer(schema))
