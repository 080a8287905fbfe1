"""Exactly-once from RabbitMQ streams into a parquet sink, across a ``kill -9`` of the driver.

Four streams, ``local[2]``, a parquet sink with a checkpoint.  The query runs
as its own process tree (``scripts/spark_streams_check.py run``); once some of
its micro-batches are committed, the whole tree (Python driver, JVM, Python
workers) gets SIGKILL.  More messages are published, the query is started
again from its checkpoint, and ``spark.read.parquet`` must then find every
published message exactly once.

Needs RabbitMQ (``scripts/start-brokers.sh rabbitmq``), pyspark and Java 17;
skipped without them, except under CI=true, where that is a failure.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
import zlib
from pathlib import Path
from typing import Any

import pytest
from brokers import Endpoint, in_ci, real_broker

# The one SparkSession of the test process (getOrCreate would share it anyway).
from test_spark_integration import _unavailable, spark  # noqa: F401

pytestmark = pytest.mark.timeout(600)

ROOT = Path(__file__).resolve().parent.parent
CHECK = ROOT / "scripts" / "spark_streams_check.py"


@pytest.fixture(scope="module")
def rabbitmq() -> Endpoint:
    problem = _unavailable()
    if problem is not None:
        if in_ci():
            pytest.fail(f"CI=true and Spark cannot run: {problem}", pytrace=False)
        pytest.skip(problem)
    return real_broker("rabbitmq")


def check(rabbitmq: Endpoint, step: str, *args: str) -> list[str]:
    return [
        sys.executable, str(CHECK), step, "--port", str(rabbitmq.port),
        "--login", rabbitmq.login, "--passcode", rabbitmq.passcode, "--vhost", rabbitmq.vhost,
        *args,
    ]  # fmt: skip


def run_step(command: list[str], timeout: float = 300) -> str:
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{command[2]} failed:\n{done.stdout}\n{done.stderr[-4000:]}"
    return done.stdout


def committed(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    return sum(1 for p in commits.iterdir() if p.name.isdigit()) if commits.is_dir() else 0


def test_every_message_exactly_once_after_the_driver_is_killed(
    rabbitmq: Endpoint, tmp_path: Path
) -> None:
    base = f"spark-eo-{uuid.uuid4().hex[:10]}"
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    common = ["--stream", base, "--partitions", "4", "--run", "eo"]
    run_step(check(rabbitmq, "publish", *common, "--count", "40000"))
    query = [
        *check(rabbitmq, "run", *common), "--out", str(out), "--checkpoint", str(checkpoint),
    ]  # fmt: skip
    log = (tmp_path / "first-run.log").open("w")
    # A session of its own: the driver, its JVM and the Python workers form one
    # process group, which SIGKILL takes down at once.
    first = subprocess.Popen(
        [*query, "--per-trigger", "2000"], cwd=ROOT, stdout=log, stderr=log,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while committed(checkpoint) < 3:
            assert first.poll() is None, (tmp_path / "first-run.log").read_text()[-4000:]
            assert time.monotonic() < deadline, "no three committed batches in 300 s"
            time.sleep(0.1)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(60)
        log.close()
    batches_at_kill = committed(checkpoint)
    assert batches_at_kill < 20, "the query was done before the kill (40000 / 2000 batches)"
    # Messages published while the query is down, then the restart from the checkpoint.
    run_step(check(rabbitmq, "publish", *common, "--first", "40000", "--count", "10000"))
    # The restart replays the batch the kill cut short, as its offset log planned it; the
    # batches after it may be large (their size proves nothing more).
    second = run_step([*query, "--per-trigger", "50000"])
    assert "query done" in second
    report = json.loads(
        run_step(check(rabbitmq, "verify", *common, "--out", str(out), "--count", "50000"))
        .strip()
        .splitlines()[-1]
    )
    assert report == {
        "rows": 50000,
        "distinct": 50000,
        "expected": 50000,
        "lost": 0,
        "duplicated": 0,
        "unexpected": 0,
    }, (batches_at_kill, second)


# -- the format through Spark, in this process ------------------------------------------------


def test_write_read_and_stream_write_through_spark(
    spark: Any,  # noqa: F811 - the fixture imported above
    rabbitmq: Endpoint,
    tmp_path: Path,
) -> None:
    base = f"spark-rw-{uuid.uuid4().hex[:10]}"
    connection = {
        "port": str(rabbitmq.port), "login": rabbitmq.login, "passcode": rabbitmq.passcode,
        "vhost": rabbitmq.vhost,
    }  # fmt: skip
    rows = spark.range(3000).selectExpr(
        "concat('k', CAST(id % 97 AS STRING)) AS key", "CAST(id AS STRING) AS body"
    )
    rows.write.format("stomp-streams").options(**connection, stream=base, partitions=3).mode(
        "append"
    ).save()
    read = (
        spark.read.format("stomp-streams")
        .options(**connection, stream=base, partitions=3, maxOffsetsPerPartition=400)
        .load()
        .collect()
    )
    assert sorted(int(r.body) for r in read) == list(range(3000))
    assert len({r.row_id for r in read}) == 3000
    assert len({(r.stream, r.offset) for r in read}) == 3000
    for r in read:
        assert r.stream == f"{base}-{zlib.crc32(r.key.encode()) % 3}"
        assert r.headers["content-type"].startswith("text/plain")
    # A streaming write of what a streaming read gives.
    copy = f"{base}-copy"
    query = (
        spark.readStream.format("stomp-streams")
        .options(**connection, stream=base, partitions=3, maxOffsetsPerTrigger=1000)
        .load()
        .selectExpr("key", "body")
        .writeStream.format("stomp-streams")
        .options(**connection, stream=copy, partitions=2)
        .option("checkpointLocation", str(tmp_path / "copy"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(180), "the streaming copy did not finish"
    finally:
        query.stop()
    assert query.exception() is None
    copied = (
        spark.read.format("stomp-streams")
        .options(**connection, stream=copy, partitions=2)
        .load()
        .collect()
    )
    assert sorted(r.body for r in copied) == sorted(r.body for r in read)
    query_id = query.id
    assert all(r.row_id.startswith(f"{query_id}-") for r in copied)
    assert len({r.row_id for r in copied}) == 3000


def test_mistakes_through_spark(spark: Any, rabbitmq: Endpoint) -> None:  # noqa: F811
    connection = {"port": str(rabbitmq.port), "login": rabbitmq.login,
                  "passcode": rabbitmq.passcode, "vhost": rabbitmq.vhost}  # fmt: skip
    missing = f"spark-missing-{uuid.uuid4().hex[:10]}"
    with pytest.raises(Exception, match=f"stream '{missing}' does not exist"):
        spark.read.format("stomp-streams").options(**connection, streams=missing).load().count()
    with pytest.raises(Exception, match=f"stream '{missing}' does not exist"):
        spark.range(3).selectExpr("CAST(id AS STRING) AS body").write.format(
            "stomp-streams"
        ).options(**connection, streams=missing, createStreams="false").mode("append").save()
    with pytest.raises(Exception, match="startingOffsets"):
        spark.read.format("stomp-streams").options(
            **connection, streams=missing, startingOffsets="offset:5"
        ).load().count()
