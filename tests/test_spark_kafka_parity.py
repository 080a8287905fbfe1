"""What a Kafka source user expects of ``stomp-streams`` and ``stomp``, in Spark, against RabbitMQ.

One ``local[2]`` session (shared with ``test_spark_integration``) and the
RabbitMQ of ``scripts/start-brokers.sh rabbitmq`` (stream plugin on); skipped
without them, except under CI=true, where that is a failure.  Each test uses
streams or queues of its own and deletes its streams at the end.  The rules
are checked without Spark in ``test_spark_logic`` and
``test_spark_streams_logic``; here they meet Spark's own calls: options at
``load()`` and ``save()``, empty reads, a refused login.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from brokers import Endpoint, in_ci

# The one SparkSession of the test process (getOrCreate would share it anyway).
from test_spark_integration import _unavailable, run_stream, spark  # noqa: F401
from test_spark_streams_rabbitmq import names, publish, rabbitmqctl  # noqa: F401

from stomp_proto.spark._options import ConnectionSettings
from stomp_proto.spark._streams._link import declare_streams

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def rabbitmq() -> Endpoint:
    problem = _unavailable()
    if problem is not None:
        if in_ci():
            pytest.fail(f"CI=true and Spark cannot run: {problem}", pytrace=False)
        pytest.skip(problem)
    from brokers import real_broker

    return real_broker("rabbitmq")


@pytest.fixture
def rabbit(rabbitmq: Endpoint) -> dict[str, str]:
    """Connection options for a source or sink; a short timeout, as a user would set."""
    return {
        "host": "127.0.0.1",
        "port": str(rabbitmq.port),
        "login": rabbitmq.login,
        "passcode": rabbitmq.passcode,
        "vhost": rabbitmq.vhost,
        "timeout": "10",
    }


@pytest.fixture
def settings(rabbit: dict[str, str]) -> ConnectionSettings:
    return ConnectionSettings.from_options(rabbit)


@pytest.fixture
def stream(settings: ConnectionSettings, names: list[str]) -> Iterator[str]:  # noqa: F811
    """A stream ``<base>-0`` holding 20 messages; its base name."""
    base = names[0]
    declare_streams(settings, [f"{base}-0"], create=True)
    publish(settings, f"{base}-0", 20, size=10)
    yield base


def stream_read(spark: Any, rabbit: dict[str, str], base: str, **options: str) -> Any:  # noqa: F811
    return spark.read.format("stomp-streams").options(**rabbit, stream=base, **options).load()


def stream_query_rows(
    spark: Any,  # noqa: F811
    rabbit: dict[str, str],
    base: str,
    checkpoint: Path,
    **options: str,
) -> list[Any]:
    """Every row an availableNow query from the streams gives."""
    got: list[Any] = []
    query = (
        spark.readStream.format("stomp-streams")
        .options(**rabbit, stream=base, **options)
        .load()
        .writeStream.foreachBatch(lambda df, _: got.extend(df.collect()))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    run_stream(query)
    return got


# -- 1. options are checked before anything runs ------------------------------------------


def test_a_streaming_query_with_a_bad_option_never_starts(
    spark: Any,  # noqa: F811
    rabbit: dict[str, str],
    stream: str,
) -> None:
    cases = [
        ("stomp-streams", {"stream": stream, "maxOffsetsPerTrigger": "-5"}, "'-5'"),
        ("stomp-streams", {"stream": stream, "startingOffsets": "earlist"}, "'earlist'"),
        ("stomp-streams", {"stream": stream, "startingOffsets": "{oops"}, "'{oops'"),
        ("stomp-streams", {"stream": stream, "partitions": "0"}, "'partitions'"),
        ("stomp-streams", {"stream": stream, "port": "abc"}, "'abc'"),
        ("stomp", {"destination": "/queue/x", "port": "abc"}, "'abc'"),
        ("stomp", {"port": "61613"}, "'destination' option is required"),
    ]
    for source, options, words in cases:
        with pytest.raises(Exception) as failure:
            spark.readStream.format(source).options(**{**rabbit, **options}).load()
        assert words in str(failure.value), (source, options, str(failure.value)[:500])
    assert spark.streams.active == []
    # The same at load() of a batch read, and at save() of a write.
    with pytest.raises(Exception, match="maxOffsetsPerPartition"):
        stream_read(spark, rabbit, stream, maxOffsetsPerPartition="none")
    frame = spark.range(3).selectExpr("CAST(id AS STRING) AS body")
    with pytest.raises(Exception, match="createStreams"):
        frame.write.format("stomp-streams").options(
            **rabbit, stream=stream, createStreams="y"
        ).mode("append").save()


# -- 2. empty reads are empty --------------------------------------------------------------


def test_empty_reads_give_no_rows_in_batch_and_streaming(
    spark: Any,  # noqa: F811
    rabbit: dict[str, str],
    settings: ConnectionSettings,
    stream: str,
    names: list[str],  # noqa: F811
    tmp_path: Path,
) -> None:
    assert stream_read(spark, rabbit, stream).count() == 20
    future = str(int(time.time()) + 3600)
    empty = f"{names[0]}-empty"
    declare_streams(settings, [f"{empty}-0"], create=True)
    cases: list[tuple[str, dict[str, str]]] = [
        (stream, {"startingOffsets": "latest"}),
        (stream, {"startingOffsets": f"timestamp={future}"}),
        (stream, {"startingOffsets": f'{{"{stream}-0": 500}}'}),  # past the end
        (empty, {}),
        (empty, {"startingOffsets": "latest"}),
    ]
    for base, options in cases:
        assert stream_read(spark, rabbit, base, **options).count() == 0, (base, options)
    for index, (base, options) in enumerate(cases):
        rows = stream_query_rows(spark, rabbit, base, tmp_path / f"checkpoint-{index}", **options)
        assert rows == [], (base, options)


# -- 7. a wrong login fails fast, with the broker's reason ---------------------------------


def test_a_wrong_login_fails_every_source_and_sink_with_the_brokers_reason(
    spark: Any,  # noqa: F811
    rabbit: dict[str, str],
    stream: str,
    tmp_path: Path,
) -> None:
    # A timeout longer than the test may take: only an error that comes at once passes.
    wrong = {**rabbit, "passcode": "not-the-passcode", "timeout": "600"}
    queue = f"/queue/spark-login-{uuid.uuid4().hex[:8]}"
    frame = spark.range(3).selectExpr("CAST(id AS STRING) AS body")
    actions = {
        "stomp read": lambda: (
            spark.read.format("stomp").options(**wrong, destination=queue).load().count()
        ),
        "stomp write": lambda: (
            frame.write.format("stomp").options(**wrong, destination=queue).mode("append").save()
        ),
        "stomp-streams read": lambda: stream_read(spark, wrong, stream).count(),
        "stomp-streams write": lambda: (
            frame.write.format("stomp-streams")
            .options(**wrong, stream=stream)
            .mode("append")
            .save()
        ),
    }
    for what, action in actions.items():
        with pytest.raises(Exception) as failure:
            action()
        assert "Access refused" in str(failure.value), (what, str(failure.value)[:500])
    for source, options in (
        ("stomp", {"destination": queue}),
        ("stomp-streams", {"stream": stream}),
    ):
        query = (
            spark.readStream.format(source)
            .options(**wrong, **options)
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / source))
            .start()
        )
        try:
            with pytest.raises(Exception) as failure:
                query.awaitTermination(120)
            assert "Access refused" in str(failure.value), (source, str(failure.value)[:500])
        finally:
            query.stop()


# -- 3. progress and lag -------------------------------------------------------------------


def test_progress_reports_the_latest_offset_and_the_lag(
    spark: Any,  # noqa: F811
    rabbit: dict[str, str],
    settings: ConnectionSettings,
    names: list[str],  # noqa: F811
    tmp_path: Path,
) -> None:
    from stomp_proto.spark import offsets_behind_latest

    base = names[0]
    streams = [f"{base}-0", f"{base}-1"]
    declare_streams(settings, streams, create=True)
    publish(settings, streams[0], 12, size=10)
    publish(settings, streams[1], 8, size=10)
    query = (
        spark.readStream.format("stomp-streams")
        .options(**rabbit, stream=base, partitions="2", maxOffsetsPerTrigger="5")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    run_stream(query)
    progress = [p for p in query.recentProgress if p.numInputRows]
    assert sum(p.numInputRows for p in progress) == 20
    first = json.loads(progress[0].json)["sources"][0]
    assert first["latestOffset"] == {streams[0]: 12, streams[1]: 8}
    behind = offsets_behind_latest(progress[0])
    assert sum(behind.values()) == 20 - 5
    assert behind == {s: first["latestOffset"][s] - first["endOffset"][s] for s in streams}
    assert offsets_behind_latest(progress[-1]) == {streams[0]: 0, streams[1]: 0}


# -- 4. partition discovery ----------------------------------------------------------------


def test_a_new_partition_is_discovered_and_read_from_its_first_offset(
    spark: Any,  # noqa: F811
    rabbit: dict[str, str],
    settings: ConnectionSettings,
    names: list[str],  # noqa: F811
    tmp_path: Path,
) -> None:
    base = names[0]
    declare_streams(settings, [f"{base}-0"], create=True)
    publish(settings, f"{base}-0", 4, size=10)
    got: list[Any] = []
    query = (
        spark.readStream.format("stomp-streams")
        .options(**rabbit, stream=base, discoverPartitions="true")
        .load()
        .writeStream.foreachBatch(lambda df, _: got.extend(df.collect()))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="1 second")
        .start()
    )
    try:
        query.processAllAvailable()
        assert {(r.stream, r.offset) for r in got} == {(f"{base}-0", o) for o in range(4)}
        declare_streams(settings, [f"{base}-1"], create=True)
        publish(settings, f"{base}-1", 3, size=10)
        deadline = time.monotonic() + 120
        while len(got) < 7 and time.monotonic() < deadline:
            query.processAllAvailable()
            time.sleep(0.5)
    finally:
        query.stop()
    new = sorted((r.offset, r.partition) for r in got if r.stream == f"{base}-1")
    assert new == [(0, 1), (1, 1), (2, 1)]


# -- 5. Kafka's forms ---------------------------------------------------------------------


def test_kafkas_starting_timestamps_in_milliseconds(
    spark: Any,  # noqa: F811
    rabbit: dict[str, str],
    settings: ConnectionSettings,
    names: list[str],  # noqa: F811
    tmp_path: Path,
) -> None:
    base = names[0]
    streams = [f"{base}-0", f"{base}-1"]
    declare_streams(settings, streams, create=True)
    for stream in streams:
        publish(settings, stream, 5, size=10)
    time.sleep(1.5)  # RabbitMQ resolves a time to whole seconds and chunks
    since = int(time.time() * 1000)
    for stream in streams:
        publish(settings, stream, 3, size=10)
    later = {(s, o) for s in streams for o in range(5, 8)}
    every = {(s, o) for s in streams for o in range(8)}

    def offsets(rows: list[Any]) -> set[tuple[str, int]]:
        return {(r.stream, r.offset) for r in rows}

    rows = stream_read(spark, rabbit, base, partitions="2", startingTimestamp=str(since))
    assert offsets(rows.collect()) == later
    by_partition = f'{{"{base}": {{"0": {since}}}}}'  # Kafka's shape; partition 1 left out
    rows = stream_read(spark, rabbit, base, partitions="2", startingOffsetsByTimestamp=by_partition)
    assert offsets(rows.collect()) == {r for r in every if r[0] == streams[1]} | {
        r for r in later if r[0] == streams[0]
    }
    got = stream_query_rows(
        spark, rabbit, base, tmp_path / "checkpoint", partitions="2", startingTimestamp=str(since)
    )
    assert offsets(got) == later


def test_the_sinks_take_kafkas_value_column(
    spark: Any,  # noqa: F811
    rabbit: dict[str, str],
    names: list[str],  # noqa: F811
) -> None:
    base = names[0]
    kafka_shaped = spark.range(0, 6, 1, 2).selectExpr(
        "CAST(CAST(id AS STRING) AS BINARY) AS key", "CAST(CONCAT('v', id) AS BINARY) AS value"
    )
    kafka_shaped.write.format("stomp-streams").options(**rabbit, stream=base).mode("append").save()
    rows = stream_read(spark, rabbit, base).collect()
    assert sorted((r.key, bytes(r.body)) for r in rows) == [
        (str(i), f"v{i}".encode()) for i in range(6)
    ]
    # Spark itself refuses the default save mode (ErrorIfExists) for every Python data
    # source, before the sink is asked: the docs say so.
    with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        kafka_shaped.write.format("stomp-streams").options(**rabbit, stream=base).save()
    queue = f"/queue/spark-value-{uuid.uuid4().hex[:8]}"
    kafka_shaped.write.format("stomp").options(**rabbit, destination=queue).mode("append").save()
    got = spark.read.format("stomp").options(**rabbit, destination=queue).load().collect()
    assert sorted(bytes(r.body) for r in got) == [f"v{i}".encode() for i in range(6)]


def test_kafkas_columns_binary_key_partition_replay_stable_timestamp_header_list(
    spark: Any,  # noqa: F811
    rabbit: dict[str, str],
    names: list[str],  # noqa: F811
    tmp_path: Path,
) -> None:
    base = names[0]
    frame = spark.range(0, 8, 1, 2).selectExpr(
        "CAST(CAST(id AS STRING) AS BINARY) AS key",
        "CAST(id AS STRING) AS value",
        "map('trace', CONCAT('t', id)) AS headers",
    )
    started = time.time()
    frame.write.format("stomp-streams").options(**rabbit, stream=base, partitions="2").mode(
        "append"
    ).save()
    options = {"partitions": "2", "keyType": "binary"}
    first = stream_read(spark, rabbit, base, **options)
    assert dict(first.dtypes)["key"] == "binary"
    assert dict(first.dtypes)["partition"] == "int"
    rows = first.collect()
    assert sorted(bytes(r.key) for r in rows) == sorted(str(i).encode() for i in range(8))
    for r in rows:
        assert r.partition == int(r.stream.rsplit("-", 1)[1])
        assert started - 60 < r.timestamp.timestamp() < time.time() + 60
        assert ("trace", f"t{int(bytes(r.key))}") in [(h.key, h.value) for h in r.header_list]
    # A second read (and a streaming one) gives the same timestamps: a watermark is stable.
    again = stream_query_rows(spark, rabbit, base, tmp_path / "checkpoint", **options)
    stamps = {(r.stream, r.offset): r.timestamp for r in rows}
    assert {(r.stream, r.offset): r.timestamp for r in again} == stamps
    received = {(r.stream, r.offset): r.received_at for r in again}
    assert received != {(r.stream, r.offset): r.received_at for r in rows}


# -- 6. routing, Kafka's schema and offsets, lag after a restart ------------------------------


def count_rows(spark: Any, rabbit: dict[str, str], base: str, partitions: int) -> int:  # noqa: F811
    return int(stream_read(spark, rabbit, base, partitions=str(partitions)).count())


def test_the_stream_option_wins_over_the_stream_column_so_a_copy_never_feeds_its_source(
    spark: Any,  # noqa: F811
    rabbit: dict[str, str],
    names: list[str],  # noqa: F811
    tmp_path: Path,
) -> None:
    base = names[0]
    spark.range(0, 40, 1, 2).selectExpr(
        "CONCAT('k', id) AS key", "CAST(id AS STRING) AS body"
    ).write.format("stomp-streams").options(**rabbit, stream=base, partitions="2").mode(
        "append"
    ).save()
    source = stream_read(spark, rabbit, base, partitions="2")
    assert "stream" in source.columns  # the column Kafka's 'topic' column is to its sink
    # A batch copy: every row to <base>-copy-N, none back to <base>-N.
    source.write.format("stomp-streams").options(
        **rabbit, stream=f"{base}-copy", partitions="2"
    ).mode("append").save()
    # A streaming copy of the same rows, with the stream column still in them.
    query = (
        spark.readStream.format("stomp-streams")
        .options(**rabbit, stream=base, partitions="2")
        .load()
        .writeStream.format("stomp-streams")
        .options(**rabbit, stream=f"{base}-again", partitions="3")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    run_stream(query)
    assert query.exception() is None
    assert count_rows(spark, rabbit, base, 2) == 40
    assert count_rows(spark, rabbit, f"{base}-copy", 2) == 40
    assert count_rows(spark, rabbit, f"{base}-again", 3) == 40
    # Without the option the column routes each row, to streams the sink declares.
    spark.createDataFrame(
        [(f"{base}-by-column-{i % 2}", f"b{i}") for i in range(6)], "stream STRING, body STRING"
    ).write.format("stomp-streams").options(**rabbit).mode("append").save()
    by_column = stream_read(spark, rabbit, f"{base}-by-column", partitions="2").collect()
    assert sorted((r.stream, r.body.decode()) for r in by_column) == sorted(
        (f"{base}-by-column-{i % 2}", f"b{i}") for i in range(6)
    )


def test_schema_kafka_and_kafkas_offset_json_in_spark(
    spark: Any,  # noqa: F811
    rabbit: dict[str, str],
    stream: str,
    tmp_path: Path,
) -> None:
    kafka = stream_read(spark, rabbit, stream, schema="kafka")
    # Spark's Kafka source's columns, names and types.
    assert kafka.dtypes == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"),
        ("offset", "bigint"), ("timestamp", "timestamp"), ("timestampType", "int"),
        ("headers", "array<struct<key:string,value:binary>>"),
    ]  # fmt: skip
    rows = kafka.selectExpr("CAST(value AS STRING) AS v", "topic", "partition", "offset").collect()
    assert sorted(r.offset for r in rows) == list(range(20))
    assert {(r.topic, r.partition) for r in rows} == {(stream, 0)}
    # Kafka's offset JSON, with -1 (latest) as an end; -2 (earliest) as a start.
    ranged = stream_read(
        spark, rabbit, stream,
        startingOffsets=json.dumps({stream: {"0": 5}}),
        endingOffsets=json.dumps({stream: {"0": 12}}),
    ).collect()  # fmt: skip
    assert sorted(r.offset for r in ranged) == list(range(5, 12))
    whole = stream_read(
        spark, rabbit, stream, startingOffsets=json.dumps({stream: {"0": -2}}),
        endingOffsets=json.dumps({stream: {"0": -1}}),
    ).count()  # fmt: skip
    assert whole == 20
    # endingOffsets has no meaning for a streaming read: the query fails to start, naming it.
    with pytest.raises(Exception, match="'endingOffsets' is for batch reads"):
        stream_query_rows(spark, rabbit, stream, tmp_path / "checkpoint", endingOffsets="latest")


def test_after_a_restart_the_lag_of_the_replayed_batch_is_fetched_then_reported(
    spark: Any,  # noqa: F811
    rabbit: dict[str, str],
    stream: str,
    settings: ConnectionSettings,
    tmp_path: Path,
) -> None:
    from stomp_proto.spark import offsets_behind_latest

    checkpoint = tmp_path / "checkpoint"

    def run(**options: str) -> list[Any]:
        query = (
            spark.readStream.format("stomp-streams")
            .options(**rabbit, stream=stream, maxOffsetsPerTrigger="5", **options)
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        run_stream(query)
        return [p for p in query.recentProgress if p.numInputRows]

    assert sum(p.numInputRows for p in run()) == 20
    # Forget the last batch's commit: the restarted query replays that batch from its
    # offset log, as after a crash, before it plans any new one.
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    for name in (str(last), f".{last}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    publish(settings, f"{stream}-0", 30, size=10)
    replayed = run()
    assert sum(p.numInputRows for p in replayed) == 5 + 30
    # Spark asks no source for its latest offset for a replayed batch: unknown, never 0,
    # from the progress alone; with the connection options, the tails come from the broker.
    assert json.loads(replayed[0].json)["sources"][0]["latestOffset"] is None
    assert offsets_behind_latest(replayed[0]) == {}
    assert json.loads(replayed[0].json)["sources"][0]["endOffset"] == {f"{stream}-0": 20}
    assert offsets_behind_latest(replayed[0], rabbit) == {f"{stream}-0": 30}
    # The first batch planned after the restart has the real backlog.
    second = json.loads(replayed[1].json)["sources"][0]
    assert second["latestOffset"] == {f"{stream}-0": 50}
    assert second["endOffset"] == {f"{stream}-0": 25}
    assert offsets_behind_latest(replayed[1]) == {f"{stream}-0": 25}
