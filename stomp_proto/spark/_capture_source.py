"""The Spark side of ``stomp-capture``: recorded STOMP byte streams, one row per frame.

A thin adapter from Spark's Python Data Source API to :mod:`._capture`,
which finds and decodes the files without Spark.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from ._capture import capture_files, decode_file
from ._options import CaptureSettings, option_names, warn_unknown_options
from ._schema import CAPTURE_ARROW_SCHEMA, CAPTURE_SCHEMA

__all__ = ["StompCaptureDataSource"]


@dataclass
class CaptureFile(InputPartition):
    path: str


class StompCaptureReader(DataSourceReader):
    """Decodes capture files, one partition per file."""

    def __init__(self, settings: CaptureSettings) -> None:
        self.settings = settings

    def partitions(self) -> Sequence[InputPartition]:
        return [CaptureFile(path) for path in capture_files(self.settings)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, CaptureFile)
        return decode_file(partition.path, self.settings)


class StompCaptureDataSource(DataSource):
    """``format("stomp-capture")``: one row per frame of recorded STOMP byte streams.

    Its ``options`` (``.option(...)`` in Spark) are in :doc:`/spark`.
    """

    @classmethod
    def name(cls) -> str:
        """The format's name: ``"stomp-capture"``."""
        return "stomp-capture"

    def schema(self) -> str:
        """The rows read: :data:`CAPTURE_SCHEMA`; the options are checked here, at ``load()``."""
        CaptureSettings.from_options(self.options)
        warn_unknown_options("stomp-capture", self.options, option_names()["capture"])
        return CAPTURE_SCHEMA

    def reader(self, schema: StructType) -> StompCaptureReader:
        """Called by Spark for ``read``: one partition per capture file.

        ``schema`` is the one Spark passes (see :meth:`schema`).

        :rtype: pyspark.sql.datasource.DataSourceReader
        """
        found = [f.name for f in schema.fields]
        expected = list(CAPTURE_ARROW_SCHEMA.names)
        if found != expected:
            raise ValueError(f"stomp-capture has a fixed schema: {CAPTURE_SCHEMA}")
        return StompCaptureReader(CaptureSettings.from_options(self.options))
