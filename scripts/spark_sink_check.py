"""The ``stomp-streams`` sink under Spark: retried tasks add no duplicate; the guard's cost.

``retry``
    ``local[2,3]`` (a task may fail twice).  A DataFrame of ``--rows`` rows in
    two partitions, made by a Python step (an RDD's ``mapPartitions``) that, in each task's first
    attempt, fails after half its rows went past (and a pause, so that the sink
    has sent them).  Spark runs each task again.  The write is done twice, into
    new streams each time: with ``exactlyOnce=false`` (the control, which must
    show duplicates) and with the default guard.  Prints a JSON line: per run
    the messages in the streams, the distinct rows among them, and the failed
    attempts seen.
``throughput``
    ``local[2]``, no failure: the same write ``--repeats`` times with and
    without the guard, after one warm-up write; prints the rows/s (median) of
    each as a JSON line.
``speculate``
    Speculative execution, for real: Spark's local mode never speculates, so
    this starts a standalone cluster (``benchmarks/spark_cluster.py``'s
    Master and two one-core Workers, named ``127.0.0.1`` and ``localhost``:
    Spark never runs a copy on the host of the original) with
    ``spark.speculation`` set to act within a second.  Two writes of
    ``--rows`` rows in three partitions, where the first attempt of the last
    partition straggles: once for 12 s before its first row (the copy
    overtakes it), once for 12 s after half of its rows (the copy waits for
    the original's lock).  Prints a JSON line per write: messages, distinct
    rows, the attempts each partition ran, and from the straggling
    partition's journal queue when each attempt asked for the lock and got it.
``task``
    No Spark: one write task's code (the sink's sender, one connection, two
    streams routed by key) on ``--rows`` rows, guarded and unguarded in turn,
    ``--repeats`` times; and the time a retry takes after an attempt that died
    half-way (its read of the streams included).  Prints a JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import tempfile
import time
import uuid
from typing import Any


def connection_options(args: argparse.Namespace) -> dict[str, str]:
    return {
        "host": args.host,
        "port": str(args.port),
        "login": args.login,
        "passcode": args.passcode,
        "vhost": args.vhost,
    }


def count_streams(args: argparse.Namespace, base: str, partitions: int) -> tuple[int, int]:
    """(messages, distinct bodies) in the streams ``<base>-0`` .. ``<base>-<N-1>``."""
    from stomp_proto.spark._options import ConnectionSettings
    from stomp_proto.spark._streams._link import probe_streams, read_range
    from stomp_proto.spark._streams._offsets import StreamRange

    connection = ConnectionSettings.from_options(connection_options(args))
    streams = [f"{base}-{i}" for i in range(partitions)]
    tails = probe_streams(connection, streams, firsts=False)
    messages = 0
    bodies: set[bytes] = set()
    for stream in streams:
        tail = tails[stream].tail
        if tail is None:
            continue
        for got in read_range(
            connection, StreamRange(stream, 0, tail + 1), prefetch=2000, read_timeout=30.0,
            fail_on_data_loss=True,
        ):  # fmt: skip
            messages += len(got)
            bodies.update(frame.body for _, frame in got)
    return messages, len(bodies)


def frame(spark: Any, rows: int, fail_dir: str | None) -> Any:
    """``rows`` rows (``body`` "row-<i>", ``key``) in two partitions; see the module doc."""

    def make(ids: Any) -> Any:
        from pyspark import TaskContext

        context = TaskContext.get()
        failing = fail_dir is not None and context is not None and context.attemptNumber() == 0
        ids = list(ids)
        for n, i in enumerate(ids):
            if failing and n == len(ids) // 2:
                time.sleep(1.5)  # the sink sends what it has meanwhile
                assert context is not None and fail_dir is not None
                marker = f"failed-{context.partitionId()}-{context.attemptNumber()}"
                open(os.path.join(fail_dir, marker), "w").close()
                raise RuntimeError("injected: the task dies midway")
            yield f"row-{i}".encode(), f"k{i}"

    rdd = spark.sparkContext.parallelize(range(rows), 2).mapPartitions(make)
    return spark.createDataFrame(rdd, "body binary, key string")


def straggler_frame(spark: Any, rows: int, stall: str, attempts_dir: str) -> Any:
    """Three partitions of 1 kB rows; the last one's first attempt stalls 12 s ``before``
    or ``midway``."""

    def make(ids: Any) -> Any:
        from pyspark import TaskContext

        context = TaskContext.get()
        assert context is not None
        partition, attempt = context.partitionId(), context.attemptNumber()
        open(os.path.join(attempts_dir, f"attempt-{partition}-{attempt}"), "w").close()
        straggles = partition == 2 and attempt == 0
        ids = list(ids)
        if straggles and stall == "before":
            time.sleep(12)
        for n, i in enumerate(ids):
            if straggles and stall == "midway" and n == len(ids) // 2:
                time.sleep(12)
            # 1 kB bodies: the rows before a stall fill the buffers between the Python
            # step, the JVM and the sink, so that the sink gets (and sends) them.
            yield f"row-{i}".encode().ljust(1000, b"."), f"k{i}"

    rdd = spark.sparkContext.parallelize(range(rows), 3).mapPartitions(make)
    return spark.createDataFrame(rdd, "body binary, key string")


def guard_queues() -> set[str]:
    """The sink's journal queues on the broker now (``scripts/brokers/rabbitmqctl.sh``)."""
    import subprocess
    from pathlib import Path

    tool = Path(__file__).resolve().parent / "brokers" / "rabbitmqctl.sh"
    listed = subprocess.run(
        ["bash", str(tool), "list_queues", "name", "--quiet"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    return {q for q in listed.split() if q.startswith("stomp-sink-guard.")}


def journal(args: argparse.Namespace, queue: str) -> list[dict[str, Any]]:
    """Per attempt in a journal queue: when it asked for the lock and when it got it
    (its ``fence`` marker is sent once it is the active consumer)."""
    from stomp_proto._events import Message, Subscribe
    from stomp_proto.spark._options import ConnectionSettings
    from stomp_proto.spark._streams._link import StreamLink

    link = StreamLink(ConnectionSettings.from_options(connection_options(args)))
    markers: list[dict[str, Any]] = []
    try:
        link.send(
            Subscribe(f"/amq/queue/{queue}", id="j", ack="client",
                      headers=(("prefetch-count", "100"),))
        )  # fmt: skip
        deadline = time.monotonic() + 1.0
        while (event := link.next_event(deadline)) is not None:
            if isinstance(event, Message):
                markers.append(json.loads(event.body))
    finally:
        link.close()  # nothing acknowledged: the markers stay
    attempts: dict[str, dict[str, float]] = {}
    for marker in markers:
        attempts.setdefault(marker["attempt"], {})[marker["kind"]] = marker["at"]
    begun = min(a.get("started", 0.0) for a in attempts.values())
    return sorted(
        (
            {
                "asked_at_s": round(a["started"] - begun, 2),
                "active_at_s": round(a["fence"] - begun, 2) if "fence" in a else None,
            }
            for a in attempts.values()
        ),
        key=lambda a: a["asked_at_s"],
    )


def speculate(args: argparse.Namespace) -> list[dict[str, Any]]:
    """See ``speculate`` in the module docstring."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from spark_cluster import Cluster

    from stomp_proto.spark._local import _LOG4J2

    work = Path(tempfile.mkdtemp(prefix="spark-speculate-"))
    (work / "log4j2.properties").write_text(_LOG4J2)
    os.environ["SPARK_CONF_DIR"] = str(work)
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    cluster = Cluster(args.cluster_port, work)
    results = []
    try:
        cluster.add_worker("127.0.0.1")
        cluster.add_worker("localhost")
        cluster.wait_for_workers(2)
        from pyspark.sql import SparkSession

        from stomp_proto.spark import register

        spark = (
            SparkSession.builder.master(cluster.url)
            .appName("stomp-sink-speculate")
            .config("spark.cores.max", "2")
            .config("spark.executor.cores", "1")
            .config("spark.executor.memory", "512m")
            .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.speculation", "true")
            .config("spark.speculation.interval", "200ms")
            .config("spark.speculation.quantile", "0.5")
            .config("spark.speculation.multiplier", "1.5")
            .config("spark.speculation.minTaskRuntime", "1s")
            .config("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
            .getOrCreate()
        )
        register(spark)
        try:
            # Warm both executors' Python workers: the fast tasks must be fast for a
            # straggler to stand out.
            write(spark, args, 2000, True, False)
            for stall in ("before", "midway"):
                attempts = tempfile.mkdtemp(prefix="spark-speculate-attempts-")
                before = guard_queues()
                result = write(
                    spark, args, args.rows, True, False,
                    source=straggler_frame(spark, args.rows, stall, attempts),
                )  # fmt: skip
                result["stall"] = stall
                result["attempts"] = sorted(os.listdir(attempts))
                # The straggling partition's journal: who held its lock, and when.
                for queue in sorted(guard_queues() - before):
                    if queue.endswith(".2"):
                        result["journal_partition_2"] = journal(args, queue)
                results.append(result)
        finally:
            spark.stop()
    finally:
        cluster.close()
    return results


def write(
    spark: Any,
    args: argparse.Namespace,
    rows: int,
    guarded: bool,
    fail: bool,
    *,
    source: Any = None,
) -> dict[str, Any]:
    base = f"spark-sink-check-{uuid.uuid4().hex[:10]}"
    fail_dir = tempfile.mkdtemp(prefix="spark-sink-fail-") if fail else None
    options = {
        **connection_options(args),
        "stream": base,
        "partitions": "2",
        "exactlyOnce": str(guarded).lower(),
    }
    began = time.monotonic()
    if source is None:
        source = frame(spark, rows, fail_dir)
    source.write.format("stomp-streams").options(**options).mode("append").save()
    took = time.monotonic() - began
    result: dict[str, Any] = {"seconds": round(took, 3), "rows_per_s": round(rows / took)}
    if fail_dir is not None:
        result["failed_attempts"] = len(os.listdir(fail_dir))
    result["messages"], result["distinct_rows"] = count_streams(args, base, 2)
    return result


def task_costs(args: argparse.Namespace) -> dict[str, Any]:
    """See ``task`` in the module docstring."""
    import dataclasses

    from stomp_proto.spark._options import ConnectionSettings
    from stomp_proto.spark._streams._link import declare_streams
    from stomp_proto.spark._streams._offsets import StreamsWriterSettings
    from stomp_proto.spark._streams._writer import StreamColumns, StreamsPartitionWriter

    connection = ConnectionSettings.from_options(connection_options(args))
    columns = StreamColumns(body="body", key="key", stream=None, headers=None)
    rows = [(f"row-{i}".encode(), f"k{i}") for i in range(args.rows)]

    def chunks(fail_at: int | None = None) -> Any:
        for start in range(0, len(rows), 1000):
            if fail_at is not None and start >= fail_at:
                raise RuntimeError("injected")
            part = rows[start : start + 1000]
            yield [b for b, _ in part], [k for _, k in part], None, None

    def writer(guarded: bool) -> Any:
        base = f"spark-sink-task-{uuid.uuid4().hex[:10]}"
        settings = StreamsWriterSettings.from_options({"stream": base, "partitions": "2"})
        declare_streams(connection, settings.streams, create=True)
        settings = dataclasses.replace(settings, exactly_once=guarded)
        return StreamsPartitionWriter(connection, settings, columns)

    rates: dict[str, list[float]] = {"guarded": [], "unguarded": []}
    for _ in range(args.repeats):
        for name in ("unguarded", "guarded"):
            sink = writer(name == "guarded")
            began = time.perf_counter()
            sink.send(chunks(), task_partition=0, row_id_prefix=uuid.uuid4().hex)
            rates[name].append(args.rows / (time.perf_counter() - began))
    retries: list[float] = []
    for _ in range(args.repeats):
        sink, write = writer(True), uuid.uuid4().hex  # one write id per write, as in Spark
        with contextlib.suppress(RuntimeError):  # the injected failure
            sink.send(chunks(fail_at=args.rows // 2), task_partition=0, row_id_prefix=write)
        began = time.perf_counter()
        sink.send(chunks(), task_partition=0, row_id_prefix=write)
        retries.append(time.perf_counter() - began)
    return {
        "rows": args.rows,
        "guarded_rows_per_s": [round(r) for r in rates["guarded"]],
        "unguarded_rows_per_s": [round(r) for r in rates["unguarded"]],
        "guarded_median": round(statistics.median(rates["guarded"])),
        "unguarded_median": round(statistics.median(rates["unguarded"])),
        "retry_after_half_s": [round(t, 3) for t in retries],
        "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("retry", "throughput", "task", "speculate"))
    parser.add_argument("--cluster-port", type=int, default=7377, help="speculate: the Master")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=61613)
    parser.add_argument("--login", default="guest")
    parser.add_argument("--passcode", default="guest")
    parser.add_argument("--vhost", default="/")
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    if args.step == "task":
        print(json.dumps(task_costs(args), sort_keys=True), flush=True)
        return
    if args.step == "speculate":
        for result in speculate(args):
            print(json.dumps(result, sort_keys=True), flush=True)
        return

    from stomp_proto.spark import local_session

    if args.step == "retry":
        spark = local_session("stomp-sink-retry", cores=2, max_failures=3, ui=False)
        # Small Arrow batches, so that the sink gets (and sends) rows before the failure.
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
        try:
            report = {
                "unguarded": write(spark, args, args.rows, guarded=False, fail=True),
                "guarded": write(spark, args, args.rows, guarded=True, fail=True),
            }
        finally:
            spark.stop()
    else:
        spark = local_session("stomp-sink-throughput", cores=2, ui=False)
        try:
            write(spark, args, args.rows, guarded=True, fail=False)  # warm-up
            runs: dict[str, list[dict[str, Any]]] = {"guarded": [], "unguarded": []}
            for _ in range(args.repeats):
                for name in ("unguarded", "guarded"):
                    runs[name].append(write(spark, args, args.rows, name == "guarded", False))
            report = {
                name: {
                    "rows_per_s_median": round(statistics.median(r["rows_per_s"] for r in got)),
                    "runs": got,
                }
                for name, got in runs.items()
            }
            report["rows"] = args.rows
            report["load_average"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
        finally:
            spark.stop()
    print(json.dumps(report, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
