"""``discoverPartitions``: a ``<stream>-N`` added while a query runs is read from its start.

Against RabbitMQ, through the stream source's Spark adapter (the methods
Spark's driver calls: ``initialOffset``, ``latestOffset``, ``partitions``)
and, once, through a running streaming query.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from brokers import Endpoint, real_broker

# The one SparkSession of the test process (getOrCreate would share it anyway).
from test_spark_integration import spark  # noqa: F401

from stomp_proto.spark._options import ConnectionSettings
from stomp_proto.spark._streams._discovery import next_partitions, partition_index
from stomp_proto.spark._streams._link import declare_streams
from stomp_proto.spark._streams._offsets import StreamsReaderSettings
from stomp_proto.spark._streams._reader import StreamsPlanner

pytestmark = pytest.mark.timeout(240)


def test_partition_names() -> None:
    assert partition_index("orders", "orders-12") == 12
    assert partition_index("orders", "orders-x") is None
    assert partition_index("orders", "orders-eu-1") is None
    assert partition_index("a.b", "axb-1") is None  # the base is no pattern


def test_discovery_needs_a_stream_base() -> None:
    with pytest.raises(ValueError, match="discoverPartitions"):
        StreamsReaderSettings.from_options({"streams": "a,b", "discoverPartitions": "true"})
    settings = StreamsReaderSettings.from_options({"stream": "a", "discoverPartitions": "true"})
    assert settings.discover_partitions == "a" and settings.streams == ("a-0",)
    assert StreamsReaderSettings.from_options({"stream": "a"}).discover_partitions is None


@pytest.fixture(scope="module")
def rabbitmq() -> Endpoint:
    return real_broker("rabbitmq")


@pytest.fixture
def connection(rabbitmq: Endpoint) -> ConnectionSettings:
    return ConnectionSettings(
        host="127.0.0.1",
        port=rabbitmq.port,
        login=rabbitmq.login,
        passcode=rabbitmq.passcode,
        vhost=rabbitmq.vhost,
        timeout=20.0,
    )


@pytest.fixture
def base(connection: ConnectionSettings) -> Iterator[str]:
    name = f"spark-discovery-test-{uuid.uuid4().hex[:10]}"
    yield name
    from test_spark_streams_rabbitmq import rabbitmqctl

    try:
        listed = rabbitmqctl("list_queues", "-p", connection.vhost or "/", "name", "--quiet")
        for queue in listed.split():
            if queue.startswith(name):
                rabbitmqctl("delete_queue", "-p", connection.vhost or "/", queue)
    except (RuntimeError, OSError, subprocess.SubprocessError):
        pass  # small leftovers; not worth failing a test for


def publish(connection: ConnectionSettings, stream: str, count: int) -> None:
    from test_spark_streams_rabbitmq import publish as send

    send(connection, stream, count, size=20)


def stream_reader(connection: ConnectionSettings, **options: str) -> object:
    pytest.importorskip("pyspark")
    from stomp_proto.spark._streams._source import StreamsStreamReader

    settings = StreamsReaderSettings.from_options(options)
    return StreamsStreamReader(StreamsPlanner(connection, settings))


def test_next_partitions_stop_at_the_first_gap(connection: ConnectionSettings, base: str) -> None:
    declare_streams(connection, [f"{base}-0", f"{base}-1", f"{base}-3"], create=True)
    assert next_partitions(connection, base, [f"{base}-0"]) == [f"{base}-1"]
    assert next_partitions(connection, base, [f"{base}-0", f"{base}-1"]) == []


def test_a_new_partition_is_read_from_its_first_offset(
    connection: ConnectionSettings, base: str
) -> None:
    declare_streams(connection, [f"{base}-0", f"{base}-1"], create=True)
    publish(connection, f"{base}-0", 30)
    publish(connection, f"{base}-1", 20)
    reader = stream_reader(connection, stream=base, partitions="2", discoverPartitions="true")
    fixed = stream_reader(connection, stream=base, partitions="2")
    start = reader.initialOffset()  # type: ignore[attr-defined]
    assert start == {f"{base}-0": 0, f"{base}-1": 0}
    first = reader.latestOffset(start, None)  # type: ignore[attr-defined]
    assert first == {f"{base}-0": 30, f"{base}-1": 20}
    # A third partition appears while the query runs, and already holds messages.
    declare_streams(connection, [f"{base}-2"], create=True)
    publish(connection, f"{base}-2", 7)
    second = reader.latestOffset(first, None)  # type: ignore[attr-defined]
    assert second == {**first, f"{base}-2": 7}
    parts = reader.partitions(first, second)  # type: ignore[attr-defined]
    assert [(p.stream, p.start, p.end) for p in parts] == [(f"{base}-2", 0, 7)]
    # Without the option the new stream is never read.
    assert fixed.latestOffset(first, None) == first  # type: ignore[attr-defined]
    # After a restart, the checkpointed offsets name the partition before any discovery.
    restarted = stream_reader(connection, stream=base, partitions="2", discoverPartitions="true")
    parts = restarted.partitions(first, second)  # type: ignore[attr-defined]
    assert [(p.stream, p.start, p.end) for p in parts] == [(f"{base}-2", 0, 7)]


@pytest.mark.spark
def test_a_running_query_reads_a_partition_added_meanwhile(
    connection: ConnectionSettings,
    base: str,
    rabbitmq: Endpoint,
    spark: Any,  # noqa: F811 - the session fixture
) -> None:
    declare_streams(connection, [f"{base}-0"], create=True)
    publish(connection, f"{base}-0", 10)
    options = {
        "host": "127.0.0.1", "port": str(rabbitmq.port), "login": rabbitmq.login or "",
        "passcode": rabbitmq.passcode or "", "vhost": rabbitmq.vhost or "/",
        "stream": base, "partitions": "1", "discoverPartitions": "true",
    }  # fmt: skip
    table = f"discovered_{uuid.uuid4().hex[:8]}"
    query = (
        spark.readStream.format("stomp-streams").options(**options).load()
        .writeStream.format("memory").queryName(table).trigger(processingTime="1 second")
        .start()
    )  # fmt: skip
    try:

        def rows() -> dict[str, int]:
            got = spark.sql(f"SELECT stream, count(*) AS n FROM {table} GROUP BY stream")
            return {r["stream"]: r["n"] for r in got.collect()}

        deadline = time.monotonic() + 120
        while rows().get(f"{base}-0") != 10:
            assert time.monotonic() < deadline, rows()
            time.sleep(0.5)
        declare_streams(connection, [f"{base}-1"], create=True)
        publish(connection, f"{base}-1", 5)
        while rows().get(f"{base}-1") != 5:
            assert query.exception() is None, query.exception()
            assert time.monotonic() < deadline, rows()
            time.sleep(0.5)
        assert rows() == {f"{base}-0": 10, f"{base}-1": 5}
    finally:
        query.stop()
