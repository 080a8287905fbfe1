"""The ``stomp`` and ``stomp-capture`` data sources in a real Spark (local[2]) session.

One session-scoped SparkSession for the whole file, against the embedded
broker running in a background thread.  Skipped when pyspark or Java 17+ is
missing - except under CI=true, where that is a failure.  Java: on Debian,
``bash scripts/ensure-java.sh`` installs it (as root).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from brokers import real_broker
from test_spark_logic import BrokerThread, record_session
from timeouts import bound_text, scaled

pytestmark = pytest.mark.timeout(180)


def _java_problem() -> str | None:
    """Why Spark cannot start here, or None."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        return "no java on PATH (Spark needs Java 17+; run scripts/ensure-java.sh as root)"
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError as exc:
        return f"java does not run: {exc}"
    match = re.search(r'version "(\d+)', out.stderr + out.stdout)
    if not match or int(match.group(1)) < 17:
        return f"Spark 4 needs Java 17 or later; `java -version` says: {out.stderr.strip()!r}"
    return None


def _unavailable() -> str | None:
    if importlib.util.find_spec("pyspark") is None or importlib.util.find_spec("pyarrow") is None:
        return "pyspark and pyarrow are not installed (pip install -e '.[spark]')"
    return _java_problem()


def spark_home_without_the_zip(where: Path) -> Path:
    """A SPARK_HOME for the tests: pyspark's own, without its ``python/`` (``where``).

    Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on every Python
    worker's PYTHONPATH, so a worker imports pyspark from that zip - compiled anew
    in each worker, as a zip holds no bytecode: 0.65 s of CPU where the installed
    package's cached bytecode takes 0.16 s.  The streaming sources' driver-side
    worker (``PythonStreamingSourceRunner``, one per query start) must connect back
    to Spark within 10 s, a bound set in ``PythonWorkerFactory.createSimpleWorker``
    (``selector.select(10000)`` in Spark 4.x) that no setting changes; on a loaded
    machine that compile took longer, and queries failed with "[STREAM_FAILED] ...
    Python worker failed to connect back".  Here the zip's path names nothing, and
    the workers import the installed pyspark (the same version) instead.
    """
    import pyspark

    installed = Path(pyspark.__file__).parent
    where.mkdir(parents=True, exist_ok=True)
    for entry in installed.iterdir():
        link = where / entry.name
        if entry.name != "python" and not link.exists():
            link.symlink_to(entry)
    return where


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    problem = _unavailable()
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and Spark cannot run: {problem}", pytrace=False)
        pytest.skip(problem)
    from stomp_proto.spark import local_session

    # Before the JVM starts (it reads SPARK_HOME then); Spark drivers that tests
    # start in child processes inherit it.
    os.environ["SPARK_HOME"] = str(
        spark_home_without_the_zip(tmp_path_factory.mktemp("spark-home"))
    )

    session = local_session(
        "stomp_proto-tests", conf_dir=tmp_path_factory.mktemp("spark-conf"), ui=False
    )
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerThread]:
    server = BrokerThread()
    try:
        yield server
    finally:
        server.close()


def options(broker: BrokerThread, **extra: Any) -> dict[str, str]:
    return {"host": broker.host, "port": str(broker.port), **{k: str(v) for k, v in extra.items()}}


def committed(checkpoint: Path) -> set[int]:
    commits = checkpoint / "commits"
    if not commits.is_dir():
        return set()
    return {int(p.name) for p in commits.iterdir() if p.name.isdigit()}


def run_stream(query: Any, timeout: float = 120) -> None:
    """Until ``query`` ends, within ``timeout`` s on an idle machine (scaled); stopped after."""
    try:
        assert query.awaitTermination(scaled(timeout)), (
            f"the query did not finish in {bound_text(timeout)}"
        )
    finally:
        query.stop()


def test_the_python_workers_import_the_installed_pyspark(spark: Any) -> None:
    """Not Spark's pyspark.zip, compiled anew in each worker (see spark_home_without_the_zip)."""

    def where(_: Any) -> str:
        import pyspark

        return str(pyspark.__file__)

    import pyspark

    found = set(spark.sparkContext.parallelize([0, 1], 2).map(where).collect())
    assert found == {pyspark.__file__}, found


def test_stream_every_message_arrives_and_is_acked_after_its_batch_commits(
    spark: Any, broker: BrokerThread, tmp_path: Path
) -> None:
    count, destination = 1200, "/queue/spark-stream"
    broker.send(destination, count)
    checkpoint = tmp_path / "checkpoint"
    batches: list[dict[str, Any]] = []

    def observe(df: Any, batch_id: int) -> None:
        ids = [row.message_id for row in df.select("message_id").collect()]
        earlier = sum(len(b["ids"]) for b in batches)

        def acked() -> int:
            return count - broker.queued(destination) - broker.in_flight()

        # The ACKs of the batches before this one go out when Spark asks for
        # this one; give them a moment to reach the broker.
        deadline = time.monotonic() + 5
        while acked() < earlier and time.monotonic() < deadline:
            time.sleep(0.02)
        batches.append(
            {
                "id": batch_id,
                "ids": ids,
                "acked": acked(),
                "acked_before": earlier,
                "committed": committed(checkpoint),
            }
        )

    query = (
        spark.readStream.format("stomp")
        .options(**options(broker, destination=destination, maxBatchSize=500))
        .load()
        .writeStream.foreachBatch(observe)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    run_stream(query)
    all_ids = [i for b in batches for i in b["ids"]]
    assert len(all_ids) == count and len(set(all_ids)) == count
    assert len(batches) >= 3
    for batch in batches:
        # While a batch is processed, exactly the batches before it are acknowledged:
        # none of its own messages, and it is not in the commit log yet.
        assert batch["acked"] == batch["acked_before"], batch
        assert batch["id"] not in batch["committed"]
        assert batch["committed"] == set(range(batch["id"])), batch
    # The last batch is acknowledged too, by the read that found nothing more.
    broker.wait_for(lambda: broker.in_flight() == 0 and broker.queued(destination) == 0)


def test_restart_from_the_checkpoint_loses_nothing(
    spark: Any, broker: BrokerThread, tmp_path: Path
) -> None:
    count, destination = 600, "/queue/spark-restart"
    broker.send(destination, count)
    checkpoint = tmp_path / "checkpoint"
    seen: list[tuple[str, bytes]] = []

    def crash_in_batch_two(df: Any, batch_id: int) -> None:
        seen.extend((r.message_id, r.body) for r in df.select("message_id", "body").collect())
        if batch_id == 2:
            raise RuntimeError("the sink crashed")

    def source() -> Any:
        return (
            spark.readStream.format("stomp")
            .options(**options(broker, destination=destination, maxBatchSize=100))
            .load()
        )

    query = (
        source()
        .writeStream.foreachBatch(crash_in_batch_two)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    with pytest.raises(Exception, match="the sink crashed"):
        query.awaitTermination(scaled(120))
    query.stop()
    first_run = len(seen)
    assert committed(checkpoint) == {0, 1}
    # The crashed query's connection is gone: its unacknowledged messages are back.
    broker.wait_for(lambda: broker.in_flight() == 0, timeout=60)

    def collect(df: Any, batch_id: int) -> None:
        seen.extend((r.message_id, r.body) for r in df.select("message_id", "body").collect())

    query = (
        source()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    run_stream(query)
    assert {body for _, body in seen} == {f"body-{n}".encode() for n in range(count)}
    assert len({message_id for message_id, _ in seen}) == count
    duplicates = len(seen) - count
    # Batch 2 (crashed, never committed) comes back; so may what was buffered.
    assert 100 <= duplicates <= count, (first_run, duplicates)
    broker.wait_for(lambda: broker.in_flight() == 0 and broker.queued(destination) == 0)


def test_write_a_dataframe_and_read_it_back(
    spark: Any, broker: BrokerThread, tmp_path: Path
) -> None:
    frame = spark.range(0, 1000, 1, 2).selectExpr(
        "IF(id % 2 = 0, '/queue/spark-even', NULL) AS destination",
        "map('id', CAST(id AS STRING)) AS headers",
        "CONCAT('row ', id) AS body",
    )
    frame.write.format("stomp").options(**options(broker, destination="/queue/spark-odd")).mode(
        "append"
    ).save()
    read = spark.read.format("stomp").options(**options(broker, idleTimeout="1"))
    even = read.option("destination", "/queue/spark-even").load().collect()
    odd = read.option("destination", "/queue/spark-odd").load().collect()
    assert sorted(int(r.headers["id"]) for r in even) == list(range(0, 1000, 2))
    assert sorted(int(r.headers["id"]) for r in odd) == list(range(1, 1000, 2))
    row = even[0]
    assert row.body == f"row {row.headers['id']}".encode()
    assert row.headers["content-type"] == "text/plain;charset=utf-8"
    assert row.destination == "/queue/spark-even" and row.received_at is not None
    broker.wait_for(lambda: broker.in_flight() == 0)

    with pytest.raises(Exception, match="cannot overwrite"):
        frame.write.format("stomp").options(**options(broker)).mode("overwrite").save()


def test_a_failed_partition_sends_nothing(spark: Any, broker: BrokerThread) -> None:
    from pyspark.sql.functions import udf

    def make_body(n):  # type: ignore[no-untyped-def]
        if n == 900:
            raise ValueError("bad row 900")
        return f"row {n}"

    body = udf(make_body, "string", useArrow=False)

    frame = spark.range(0, 1000, 1, 2).select(body("id").alias("body"))
    with pytest.raises(Exception, match="bad row 900"):
        frame.write.format("stomp").options(
            **options(broker, destination="/queue/spark-failed")
        ).mode("append").save()
    time.sleep(0.5)
    rows = (
        spark.read.format("stomp")
        .options(**options(broker, destination="/queue/spark-failed", idleTimeout="1"))
        .load()
        .collect()
    )
    numbers = sorted(int(r.body[4:]) for r in rows)
    # Partition 1 (rows 500-999) failed before its COMMIT: the broker dropped all of it.
    # Partition 0 committed whole, or not at all if Spark cancelled it first.
    assert numbers in (list(range(500)), [])


def test_stream_from_stomp_to_stomp(spark: Any, broker: BrokerThread, tmp_path: Path) -> None:
    broker.send("/queue/spark-in", 300)
    query = (
        spark.readStream.format("stomp")
        .options(**options(broker, destination="/queue/spark-in", maxBatchSize=100))
        .load()
        .selectExpr("upper(CAST(body AS STRING)) AS body", "headers")
        .writeStream.format("stomp")
        .options(**options(broker, destination="/queue/spark-out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    run_stream(query)
    got = broker.receive("/queue/spark-out", 300)
    assert sorted(m.body for m in got) == sorted(f"BODY-{n}".encode() for n in range(300))
    assert {dict(m.headers)["seq"] for m in got} == {str(n) for n in range(300)}
    broker.wait_for(lambda: broker.in_flight() == 0 and broker.queued("/queue/spark-in") == 0)


def test_capture_decoding(spark: Any, broker: BrokerThread, tmp_path: Path) -> None:
    folder = tmp_path / "captures"
    folder.mkdir()
    client, _ = record_session(broker, folder)
    (folder / "cut.stomp").write_bytes(client.read_bytes()[:-5])
    frames = spark.read.format("stomp-capture").load(str(folder))
    rows = frames.orderBy("path", "frame_index").collect()
    by_file: dict[str, list[Any]] = {}
    for row in rows:
        by_file.setdefault(Path(row.path).name, []).append(row)
    assert [r.command for r in by_file["server.stomp"]] == [
        "CONNECTED", "MESSAGE", "MESSAGE", "MESSAGE", "RECEIPT",
    ]  # fmt: skip
    assert [r.command for r in by_file["client.stomp"]][:2] == ["CONNECT", "SUBSCRIBE"]
    cut = by_file["cut.stomp"]
    assert cut[-1].command is None and cut[-1].error.startswith("truncated")
    assert [r.command for r in cut[:-1]] == [r.command for r in by_file["client.stomp"]][:-1]
    assert frames.rdd.getNumPartitions() == 3  # one per file
    with pytest.raises(Exception, match=r"bad STOMP data in .*cut\.stomp"):
        spark.read.format("stomp-capture").option("onError", "fail").load(str(folder)).collect()


# -- RabbitMQ, when the interop suite's broker runs -------------------------------------


def test_round_trip_through_rabbitmq(spark: Any, tmp_path: Path) -> None:
    """Write, stream back, check everything was acknowledged (the interop suite's RabbitMQ)."""
    endpoint = real_broker("rabbitmq")  # skips when it is not running; fails under CI=true
    rabbit = {
        "host": "127.0.0.1",
        "port": str(endpoint.port),
        "login": endpoint.login,
        "passcode": endpoint.passcode,
        "vhost": endpoint.vhost,
    }
    destination = f"/queue/stomp-proto-spark-{uuid.uuid4().hex[:8]}"
    spark.range(0, 300, 1, 3).selectExpr(
        "CONCAT('rabbit ', id) AS body", "map('n', CAST(id AS STRING)) AS headers"
    ).write.format("stomp").options(**rabbit, destination=destination).mode("append").save()
    got: list[Any] = []
    query = (
        spark.readStream.format("stomp")
        .options(**rabbit, destination=destination, maxBatchSize="100", idleTimeout="2")
        .load()
        .writeStream.foreachBatch(lambda df, _: got.extend(df.collect()))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    run_stream(query)
    assert sorted(int(r.headers["n"]) for r in got) == list(range(300))
    # Everything was acknowledged: a batch drain finds the queue empty.
    left = (
        spark.read.format("stomp")
        .options(**rabbit, destination=destination, idleTimeout="1")
        .load()
        .count()
    )
    assert left == 0
