"""Registering the three data sources with a session: one call for the user's setup."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._capture_source import StompCaptureDataSource
from ._queue._source import StompDataSource
from ._streams._source import StompStreamsDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["register"]


def register(spark: SparkSession) -> None:
    """Register ``stomp``, ``stomp-streams`` and ``stomp-capture`` with ``spark``, a
    SparkSession (once each)."""
    spark.dataSource.register(StompDataSource)
    spark.dataSource.register(StompStreamsDataSource)
    spark.dataSource.register(StompCaptureDataSource)
