"""STOMP for Spark: the ``stomp``, ``stomp-streams`` and ``stomp-capture`` data sources (PySpark 4).

.. code-block:: python

    from stomp_proto.spark import StompDataSource, StompCaptureDataSource

    spark.dataSource.register(StompDataSource)
    spark.dataSource.register(StompCaptureDataSource)
    messages = (
        spark.readStream.format("stomp")
        .option("host", "broker").option("port", 61613)
        .option("destination", "/queue/orders")
        .load()
    )

Needs the ``spark`` extra (``pip install 'stomp-proto[spark]'``: pyspark 4 and
pyarrow); the rest of ``stomp_proto`` never imports pyspark.  The data source
classes are loaded on first use, so the Spark-free logic in this package's
private modules can be imported (and tested) without pyspark.  The guide:
:doc:`/spark`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._datasource import (
        StompCaptureDataSource,
        StompCommitMessage,
        StompDataSource,
        register,
    )
    from ._local import local_session
    from ._streams_datasource import StompStreamsDataSource

__all__ = [
    "CAPTURE_SCHEMA",
    "MESSAGE_SCHEMA",
    "STREAMS_SCHEMA",
    "StompCaptureDataSource",
    "StompCommitMessage",
    "StompDataSource",
    "StompStreamsDataSource",
    "local_session",
    "register",
]

#: The ``stomp`` source's schema (DDL); stable: columns are only ever added at the end.
MESSAGE_SCHEMA = (
    "destination STRING, message_id STRING, subscription STRING, "
    "headers MAP<STRING, STRING>, body BINARY, received_at TIMESTAMP"
)
#: The ``stomp-streams`` source's schema (DDL); columns are only ever added at the end.
STREAMS_SCHEMA = (
    "stream STRING, offset BIGINT, headers MAP<STRING, STRING>, body BINARY, "
    "received_at TIMESTAMP, key STRING, row_id STRING"
)
#: The ``stomp-capture`` source's schema (DDL).
CAPTURE_SCHEMA = (
    "path STRING, frame_index BIGINT, offset BIGINT, command STRING, "
    "headers MAP<STRING, STRING>, body BINARY, error STRING"
)

_SPARK_NAMES = frozenset(
    {"StompCaptureDataSource", "StompCommitMessage", "StompDataSource", "register"}
)


def __getattr__(name: str) -> Any:
    if name == "local_session":
        from ._local import local_session

        return local_session
    if name in _SPARK_NAMES:
        from . import _datasource  # imports pyspark

        return getattr(_datasource, name)
    if name == "StompStreamsDataSource":
        from ._streams_datasource import StompStreamsDataSource  # imports pyspark

        return StompStreamsDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
