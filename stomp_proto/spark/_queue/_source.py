"""The Spark side of ``stomp``: a queue or topic, read by competing consumers, and its sink.

Everything here is a thin adapter from Spark's Python Data Source API
(``pyspark.sql.datasource``, Spark 4) to the plain objects of ``_reader``
and ``_writer``.  Spark pickles every object made here and calls it in other
processes: nothing connects before Spark calls ``read`` or ``write``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamWriter,
    InputPartition,
    SimpleDataSourceStreamReader,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from .._columns import column_kind
from .._options import (
    ConnectionSettings,
    ReaderSettings,
    WriterSettings,
    option_names,
    warn_unknown_options,
)
from .._schema import MESSAGE_SCHEMA
from ._reader import StreamConsumer, drain, offset_of
from ._writer import PartitionWriter, plan_columns

try:  # Spark 4.2 and later
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - Spark 4.0 and 4.1

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in: before Spark 4.2 an availableNow query reads once, then stops."""

        def prepareForTriggerAvailableNow(self) -> None:
            pass


try:  # Spark 4.1 and later
    from pyspark.sql.datasource import DataSourceStreamArrowWriter
except ImportError:  # pragma: no cover - Spark 4.0: the row-based stream writer
    DataSourceStreamArrowWriter = None  # type: ignore[assignment, misc]

__all__ = ["StompCommitMessage", "StompDataSource"]

log = logging.getLogger("stomp_proto.spark")

#: The MESSAGE schema as (column, Spark simple type) pairs, to check a user's schema.
_MESSAGE_COLUMNS = [
    ("destination", "string"),
    ("message_id", "string"),
    ("subscription", "string"),
    ("headers", "map<string,string>"),
    ("body", "binary"),
    ("received_at", "timestamp"),
]


def _check_message_schema(schema: StructType) -> None:
    found = [(f.name, f.dataType.simpleString()) for f in schema.fields]
    if found != _MESSAGE_COLUMNS:
        raise ValueError(
            "the stomp source has a fixed schema and cannot read into another one: "
            f"expected {MESSAGE_SCHEMA}; got {schema.simpleString()}"
        )


# -- reading -----------------------------------------------------------------------


class StompStreamReader(SimpleDataSourceStreamReader, SupportsTriggerAvailableNow):
    """Spark's streaming reader; the logic is :class:`~._reader.StreamConsumer`."""

    def __init__(self, consumer: StreamConsumer) -> None:
        self.consumer = consumer

    def initialOffset(self) -> dict[str, int]:
        return self.consumer.initial_offset()

    def read(self, start: dict[str, Any]) -> tuple[Iterator[Any], dict[str, int]]:
        batches, end = self.consumer.read(start)
        # A list iterator, not a generator: Spark copies (pickles) it for its cache.
        return iter(batches), end

    def readBetweenOffsets(self, start: dict[str, Any], end: dict[str, Any]) -> Iterator[Any]:
        # A batch replayed after a restart: a queue cannot be read again.  Its
        # messages were never acknowledged, so the broker redelivers them.
        if offset_of(end) > offset_of(start):
            log.warning(
                "STOMP source: batch %s..%s is replayed after a restart; its messages come "
                "back by broker redelivery in a later batch",
                offset_of(start),
                offset_of(end),
            )
        return iter([])

    def commit(self, end: dict[str, Any]) -> None:
        self.consumer.commit(end)

    def prepareForTriggerAvailableNow(self) -> None:
        self.consumer.prepare_available_now()


@dataclass
class DrainPartition(InputPartition):
    """One competing consumer of a batch read, taking at most ``limit`` messages."""

    index: int
    limit: int | None


class StompBatchReader(DataSourceReader):
    """A batch read: drain the destination until idle (or ``maxMessages``)."""

    def __init__(self, connection: ConnectionSettings, reader: ReaderSettings) -> None:
        self.connection = connection
        self.settings = reader

    def partitions(self) -> Sequence[InputPartition]:
        count = self.settings.num_partitions
        total = self.settings.max_messages
        limit = None if total is None else math.ceil(total / count)
        return [DrainPartition(i, limit) for i in range(count)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, DrainPartition)
        limit = partition.limit
        total = self.settings.max_messages
        if limit is not None and total is not None:
            limit = max(0, min(limit, total - partition.index * limit))
            if limit == 0:
                return iter([])
        return drain(self.connection, self.settings, limit)


# -- writing -----------------------------------------------------------------------


@dataclass
class StompCommitMessage(WriterCommitMessage):
    """What one partition's task reports: rows sent and committed, and its transaction."""

    #: Rows the partition sent (and committed).
    rows: int
    #: The STOMP transaction that carried them; ``None`` if none was needed.
    transaction: str | None


def _summary(messages: Sequence[WriterCommitMessage | None]) -> tuple[int, int]:
    done = [m for m in messages if isinstance(m, StompCommitMessage)]
    return len(done), sum(m.rows for m in done)


class _Sink:
    """What the batch and the streaming writers share."""

    def __init__(self, writer: PartitionWriter) -> None:
        self.partition_writer = writer

    def _result(self, sent: tuple[int, str | None]) -> StompCommitMessage:
        return StompCommitMessage(rows=sent[0], transaction=sent[1])

    def _log_abort(self, messages: Sequence[WriterCommitMessage | None], what: str) -> None:
        partitions, rows = _summary(messages)
        if rows:
            log.warning(
                "STOMP sink: %s failed after %d partition(s) had committed %d message(s); "
                "those stay sent (a broker cannot take back a committed transaction)",
                what,
                partitions,
                rows,
            )


class StompArrowWriter(_Sink, DataSourceArrowWriter):
    """``df.write.format("stomp")``: one STOMP transaction per partition."""

    def write(self, iterator: Iterator[Any]) -> StompCommitMessage:
        return self._result(self.partition_writer.write_batches(iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        partitions, rows = _summary(messages)
        log.info("STOMP sink: %d message(s) sent in %d partition(s)", rows, partitions)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self._log_abort(messages, "the write")


class StompStreamWriter(_Sink, DataSourceStreamWriter):
    """``writeStream.format("stomp")`` on Spark 4.0 (rows); 4.1+ uses the Arrow one."""

    def write(self, iterator: Iterator[Any]) -> StompCommitMessage:
        return self._result(self.partition_writer.write_rows(iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self._log_abort(messages, f"micro-batch {batchId}")


if DataSourceStreamArrowWriter is not None:

    class StompStreamArrowWriter(_Sink, DataSourceStreamArrowWriter):
        """``writeStream.format("stomp")``: one STOMP transaction per partition and micro-batch."""

        def write(self, iterator: Iterator[Any]) -> StompCommitMessage:
            return self._result(self.partition_writer.write_batches(iterator))

        def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
            pass

        def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
            self._log_abort(messages, f"micro-batch {batchId}")


# -- the data sources ----------------------------------------------------------------


class StompDataSource(DataSource):
    """``format("stomp")``: read messages from a destination, or send rows as messages.

    Register it with ``spark.dataSource.register(StompDataSource)`` (or
    :func:`register`).  Its ``options`` (``.option(...)`` in Spark) and guarantees:
    :doc:`/spark`.
    """

    def __init__(self, options: dict[str, str]) -> None:
        """Check every option at once (Spark makes the source at ``load()`` and ``save()``):
        a bad value fails there, naming the option, rather than in a task or a
        running query; an unknown option is logged at WARNING."""
        super().__init__(options)
        ConnectionSettings.from_options(options)
        for streaming in (False, True):
            ReaderSettings.from_options(options, streaming=streaming, destination="-")
        WriterSettings.from_options(options)
        names = option_names()
        warn_unknown_options(
            "stomp", options, (*names["connection"], *names["read"], *names["write"])
        )

    @classmethod
    def name(cls) -> str:
        """The format's name: ``"stomp"``."""
        return "stomp"

    def schema(self) -> str:
        """The rows read: :data:`MESSAGE_SCHEMA` (Spark asks at ``load()``, so a read
        without a ``destination`` fails there)."""
        ReaderSettings.from_options(self.options, streaming=False)
        return MESSAGE_SCHEMA

    def simpleStreamReader(self, schema: StructType) -> StompStreamReader:
        """Called by Spark for ``readStream``: the streaming reader.

        ``schema`` is the one Spark passes (see :meth:`schema`).

        :rtype: pyspark.sql.datasource.SimpleDataSourceStreamReader
        """
        _check_message_schema(schema)
        return StompStreamReader(
            StreamConsumer(
                ConnectionSettings.from_options(self.options),
                ReaderSettings.from_options(self.options, streaming=True),
            )
        )

    def reader(self, schema: StructType) -> StompBatchReader:
        """Called by Spark for ``read``: the batch reader (drains until idle).

        ``schema`` is the one Spark passes (see :meth:`schema`).

        :rtype: pyspark.sql.datasource.DataSourceReader
        """
        _check_message_schema(schema)
        return StompBatchReader(
            ConnectionSettings.from_options(self.options),
            ReaderSettings.from_options(self.options, streaming=False),
        )

    def _partition_writer(self, schema: StructType) -> PartitionWriter:
        settings = WriterSettings.from_options(self.options)
        plan = plan_columns([(f.name, column_kind(f.dataType)) for f in schema.fields], settings)
        return PartitionWriter(ConnectionSettings.from_options(self.options), settings, plan)

    def writer(self, schema: StructType, overwrite: bool) -> StompArrowWriter:
        """Called by Spark for ``write``: one STOMP transaction per partition.

        ``schema`` is the written DataFrame's, as Spark passes it; ``overwrite``
        (Spark's save mode) changes nothing: messages are always added.

        :rtype: pyspark.sql.datasource.DataSourceArrowWriter
        """
        if overwrite:
            raise ValueError(
                "the STOMP sink cannot overwrite (sent messages cannot be taken back); "
                "use mode('append')"
            )
        return StompArrowWriter(self._partition_writer(schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """Called by Spark for ``writeStream``: one transaction per partition and batch.

        ``schema`` is the written DataFrame's, as Spark passes it; ``overwrite``
        (Spark's save mode) changes nothing: messages are always added.
        """
        if DataSourceStreamArrowWriter is not None:
            return StompStreamArrowWriter(self._partition_writer(schema))
        return StompStreamWriter(self._partition_writer(schema))  # pragma: no cover
