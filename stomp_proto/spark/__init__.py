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

import importlib
from typing import TYPE_CHECKING, Any

from . import _columns

if TYPE_CHECKING:
    from ._capture_source import StompCaptureDataSource
    from ._local import local_session
    from ._progress import offsets_behind_latest
    from ._queue._source import StompCommitMessage, StompDataSource
    from ._register import register
    from ._streams._source import StompStreamsDataSource

__all__ = [
    "CAPTURE_SCHEMA",
    "KAFKA_SCHEMA",
    "MESSAGE_SCHEMA",
    "STREAMS_SCHEMA",
    "StompCaptureDataSource",
    "StompCommitMessage",
    "StompDataSource",
    "StompStreamsDataSource",
    "local_session",
    "offsets_behind_latest",
    "register",
]

#: The ``stomp`` source's schema (DDL); stable: columns are only ever added at the end.
MESSAGE_SCHEMA = _columns.MESSAGE_SCHEMA
#: The ``stomp-streams`` source's schema (DDL); columns are only ever added at the end.
STREAMS_SCHEMA = _columns.STREAMS_SCHEMA
#: The ``stomp-streams`` source's schema with ``schema=kafka`` (DDL): Spark's Kafka source's.
KAFKA_SCHEMA = _columns.KAFKA_SCHEMA
#: The ``stomp-capture`` source's schema (DDL).
CAPTURE_SCHEMA = _columns.CAPTURE_SCHEMA

#: Where each lazily loaded name lives (the data sources import pyspark).
_LAZY = {
    "local_session": "._local",
    "offsets_behind_latest": "._progress",
    "register": "._register",
    "StompDataSource": "._queue._source",
    "StompCommitMessage": "._queue._source",
    "StompStreamsDataSource": "._streams._source",
    "StompCaptureDataSource": "._capture_source",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
