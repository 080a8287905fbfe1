"""``discoverPartitions``: a ``<stream>-N`` added while a query runs is read from its start.

Against RabbitMQ, through the planner and the stream source's Spark adapter
(the methods Spark's driver calls: ``initialOffset``, ``latestOffset``,
``partitions``).  A running query that picks up a new stream is in
``test_spark_kafka_parity.py``; the planner's logic with a fake broker in
``test_spark_streams_logic.py``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from brokers import Endpoint, real_broker, spark_settings

from stomp_proto.spark._options import ConnectionSettings
from stomp_proto.spark._streams._link import declare_streams
from stomp_proto.spark._streams._offsets import StreamsReaderSettings
from stomp_proto.spark._streams._reader import StreamsPlanner

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def rabbitmq() -> Endpoint:
    return real_broker("rabbitmq")


@pytest.fixture
def connection(rabbitmq: Endpoint) -> ConnectionSettings:
    return spark_settings(rabbitmq)


@pytest.fixture
def base(connection: ConnectionSettings) -> Iterator[str]:
    name = f"spark-discovery-test-{uuid.uuid4().hex[:10]}"
    yield name
    from test_spark_streams_rabbitmq import delete_queues_later

    delete_queues_later(connection.vhost or "/", name)


def publish(connection: ConnectionSettings, stream: str, count: int) -> None:
    from test_spark_streams_rabbitmq import publish as send

    send(connection, stream, count, size=20)


def stream_reader(connection: ConnectionSettings, **options: str) -> object:
    pytest.importorskip("pyspark")
    from stomp_proto.spark._streams._source import StreamsStreamReader

    settings = StreamsReaderSettings.from_options(options)
    return StreamsStreamReader(StreamsPlanner(connection, settings))


def test_discovery_stops_at_the_first_missing_stream(
    connection: ConnectionSettings, base: str
) -> None:
    declare_streams(connection, [f"{base}-0", f"{base}-1", f"{base}-3"], create=True)
    settings = StreamsReaderSettings.from_options(
        {"stream": base, "partitions": "1", "discoverPartitions": "true"}
    )
    planner = StreamsPlanner(connection, settings)
    assert planner.discover() == [f"{base}-1"]
    assert planner.discover() == []  # <stream>-2 is missing: <stream>-3 is never looked for


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
