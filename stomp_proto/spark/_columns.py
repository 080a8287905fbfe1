"""The columns of both families: the rows the sources give, the columns the sinks take.

A leaf that loads neither pyspark nor pyarrow on import, so the package's
``__init__`` can re-export the schemas (DDL) without loading either, and
the ``stomp`` and ``stomp-streams`` sinks share one vocabulary of column
kinds and reserved headers without importing each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

__all__ = [
    "BINARY",
    "CAPTURE_SCHEMA",
    "HEADER_MAP",
    "KAFKA_SCHEMA",
    "MESSAGE_SCHEMA",
    "RESERVED_HEADERS",
    "STREAMS_SCHEMA",
    "STRING",
    "TEXT_CONTENT_TYPE",
    "body_column",
    "column_kind",
    "streams_schema",
]

# -- the rows the sources give (public: stomp_proto.spark re-exports them) ---------------

MESSAGE_SCHEMA = (
    "destination STRING, message_id STRING, subscription STRING, "
    "headers MAP<STRING, STRING>, body BINARY, received_at TIMESTAMP"
)
STREAMS_SCHEMA = (
    "stream STRING, offset BIGINT, headers MAP<STRING, STRING>, body BINARY, "
    "received_at TIMESTAMP, key STRING, row_id STRING, partition INT, timestamp TIMESTAMP, "
    "header_list ARRAY<STRUCT<key: STRING, value: STRING>>"
)
#: ``schema=kafka``: exactly the columns, names and types of Spark's Kafka source.
KAFKA_SCHEMA = (
    "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
    "timestamp TIMESTAMP, timestampType INT, headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
)
CAPTURE_SCHEMA = (
    "path STRING, frame_index BIGINT, offset BIGINT, command STRING, "
    "headers MAP<STRING, STRING>, body BINARY, error STRING"
)


def streams_schema(key_binary: bool, kafka: bool = False) -> str:
    """:data:`STREAMS_SCHEMA`, with ``key BINARY`` (Kafka's type) when ``keyType=binary``;
    :data:`KAFKA_SCHEMA` with ``schema=kafka``."""
    if kafka:
        return KAFKA_SCHEMA
    return STREAMS_SCHEMA.replace("key STRING,", "key BINARY,") if key_binary else STREAMS_SCHEMA


# -- the columns the sinks take ------------------------------------------------------------

#: Headers a row cannot set: the sink sets them (destination, transaction), the
#: codec does (content-length), they would ask for what the sink handles itself
#: (receipt), or they belong to a received message (message-id, subscription, ack).
RESERVED_HEADERS = frozenset(
    {"destination", "transaction", "receipt", "content-length", "message-id", "subscription", "ack"}
)
TEXT_CONTENT_TYPE = "text/plain;charset=utf-8"

#: The kinds of column a sink reads (Spark's simple type names).
STRING = "string"
BINARY = "binary"
HEADER_MAP = "map<string,string>"


def body_column(kinds: dict[str, str], configured: str) -> str:
    """The column a sink sends as the body: ``configured`` (``bodyColumn``), or Kafka's
    ``value`` when the default ``body`` is absent and ``value`` is there."""
    if configured == "body" and "body" not in kinds and "value" in kinds:
        return "value"
    return configured


def column_kind(data_type: DataType) -> str:
    """The sink's kind of a Spark column type; another type's simple name (refused later)."""
    from pyspark.sql.types import BinaryType, MapType, StringType  # only the Spark side calls it

    if isinstance(data_type, StringType):
        return STRING
    if isinstance(data_type, BinaryType):
        return BINARY
    if (
        isinstance(data_type, MapType)
        and isinstance(data_type.keyType, StringType)
        and isinstance(data_type.valueType, StringType)
    ):
        return HEADER_MAP
    return str(data_type.simpleString())
