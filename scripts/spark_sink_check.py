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
"""

from __future__ import annotations

import argparse
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


def write(
    spark: Any, args: argparse.Namespace, rows: int, guarded: bool, fail: bool
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
    frame(spark, rows, fail_dir).write.format("stomp-streams").options(**options).mode(
        "append"
    ).save()
    took = time.monotonic() - began
    result: dict[str, Any] = {"seconds": round(took, 3), "rows_per_s": round(rows / took)}
    if fail_dir is not None:
        result["failed_attempts"] = len(os.listdir(fail_dir))
    result["messages"], result["distinct_rows"] = count_streams(args, base, 2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("retry", "throughput"))
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=61613)
    parser.add_argument("--login", default="guest")
    parser.add_argument("--passcode", default="guest")
    parser.add_argument("--vhost", default="/")
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from stomp_proto.spark import local_session

    if args.step == "retry":
        spark = local_session("stomp-sink-retry", cores=2, max_failures=3)
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
        spark = local_session("stomp-sink-throughput", cores=2)
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
