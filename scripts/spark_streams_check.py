"""The exactly-once check of the ``stomp-streams`` source: publish, run a query, verify.

Three steps, each its own process, so that a test (or ``scripts/spark-cluster.sh``)
can ``kill -9`` the query's whole process tree and start it again:

``publish``
    Send ``--count`` messages over the streams ``<base>-0`` .. ``<base>-<N-1>``
    (routed by key, ``crc32(key) % N``), with bodies ``<run>:<i>`` for
    ``i`` from ``--first``.  No JVM: the sink's own routing and sending code.
``run``
    A streaming query, ``stomp-streams`` -> parquet with a checkpoint,
    ``Trigger.AvailableNow`` with ``maxOffsetsPerTrigger``, so it runs in many
    micro-batches and ends once it has read up to the tails it found at its
    start.  Prints one line per finished batch and the rows/s at the end.
``verify``
    Read the sink back with ``spark.read.parquet`` (which follows the sink's
    ``_spark_metadata`` log) and compare with what was published: prints a
    JSON object with ``rows``, ``distinct``, ``expected``, ``lost`` and
    ``duplicated``; exits 1 unless both are 0.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request
from typing import Any


def connection_options(args: argparse.Namespace) -> dict[str, str]:
    return {
        "host": args.host,
        "port": str(args.port),
        "login": args.login,
        "passcode": args.passcode,
        "vhost": args.vhost,
    }


def publish(args: argparse.Namespace) -> None:
    from stomp_proto.spark._options import ConnectionSettings
    from stomp_proto.spark._streams._link import declare_streams
    from stomp_proto.spark._streams._offsets import StreamsWriterSettings
    from stomp_proto.spark._streams._writer import StreamColumns, StreamsPartitionWriter

    options = {**connection_options(args), "stream": args.stream}
    options["partitions"] = str(args.partitions)
    connection = ConnectionSettings.from_options(options)
    settings = StreamsWriterSettings.from_options(options)
    declare_streams(connection, settings.streams, create=True)
    writer = StreamsPartitionWriter(
        connection, settings, StreamColumns(body="body", key="key", stream=None, headers=None)
    )
    chunk = args.chunk
    began = time.monotonic()

    def chunks() -> Any:
        for low in range(args.first, args.first + args.count, chunk):
            if args.pace and low > args.first:
                time.sleep(args.pace)  # a write that lasts (one under a broker restart)
            ids = range(low, min(low + chunk, args.first + args.count))
            keys = [f"k{i}" for i in ids]
            bodies = [f"{args.run}:{i}".encode().ljust(args.size, b".") for i in ids]
            yield bodies, keys, None, None

    sent = writer.send(chunks(), task_partition=0, row_id_prefix=f"{args.run}-{args.first}")
    took = time.monotonic() - began
    print(
        f"published {sum(sent.values())} messages in {took:.2f} s "
        f"({sum(sent.values()) / took:,.0f}/s): {json.dumps(sent, sort_keys=True)}",
        flush=True,
    )


def session(args: argparse.Namespace, name: str) -> Any:
    if args.master.startswith("local"):
        from stomp_proto.spark import local_session

        return local_session(name, cores=int(args.master[6:-1] or 2), ui=False)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from stomp_proto.spark import register

    spark = (
        SparkSession.builder.master(args.master)
        .appName(name)
        .config("spark.ui.enabled", "true")
        .config("spark.ui.port", str(args.ui_port))
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
        .getOrCreate()
    )
    register(spark)
    return spark


def executors_report(spark: Any) -> list[dict[str, Any]]:
    """Which executors ran how many tasks, from the driver's REST API (cluster runs only)."""
    web = spark.sparkContext.uiWebUrl
    if not web:
        return []
    app = spark.sparkContext.applicationId
    with urllib.request.urlopen(f"{web}/api/v1/applications/{app}/executors", timeout=10) as r:
        found = json.loads(r.read())
    return [
        {"id": e["id"], "hostPort": e["hostPort"], "totalTasks": e["totalTasks"]} for e in found
    ]


def run(args: argparse.Namespace) -> None:
    spark = session(args, "stomp-streams-exactly-once")
    options = {
        **connection_options(args),
        "stream": args.stream,
        "partitions": str(args.partitions),
        "maxOffsetsPerTrigger": str(args.per_trigger),
        "startingOffsets": "earliest",
    }
    if args.per_partition:
        options["maxOffsetsPerPartition"] = str(args.per_partition)
    began = time.monotonic()
    query = (
        spark.readStream.format("stomp-streams")
        .options(**options)
        .load()
        .writeStream.format("parquet")
        .option("path", args.out)
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    shown = 0
    rows = 0
    try:
        while query.isActive:
            progress = query.recentProgress
            for p in progress[shown:]:
                rows += p["numInputRows"]
                print(
                    f"batch {p['batchId']}: {p['numInputRows']} rows, "
                    f"{p['durationMs'].get('triggerExecution', 0)} ms",
                    flush=True,
                )
            shown = len(progress)
            query.awaitTermination(0.2)
        for p in query.recentProgress[shown:]:
            rows += p["numInputRows"]
            print(f"batch {p['batchId']}: {p['numInputRows']} rows", flush=True)
        if query.exception() is not None:
            raise SystemExit(f"the query failed: {query.exception()}")
    finally:
        took = time.monotonic() - began
        print(f"query done: {rows} rows in {took:.2f} s ({rows / took:,.0f} rows/s)", flush=True)
        # Where a micro-batch's time goes, on average (Spark's own progress figures).
        durations: dict[str, float] = {}
        batches = [p for p in query.recentProgress if p["numInputRows"]]
        for p in batches:
            for name, ms in p["durationMs"].items():
                durations[name] = durations.get(name, 0) + ms / len(batches)
        if batches:
            print(
                f"per batch ({len(batches)} with rows, ms): "
                + ", ".join(f"{k} {v:.0f}" for k, v in sorted(durations.items())),
                flush=True,
            )
        if not args.master.startswith("local"):
            print("executors: " + json.dumps(executors_report(spark)), flush=True)
        spark.stop()


def verify(args: argparse.Namespace) -> None:
    spark = session(args, "stomp-streams-verify")
    try:
        frame = spark.read.parquet(args.out)
        bodies = [r.body.decode().rstrip(".") for r in frame.select("body").collect()]
    finally:
        spark.stop()
    expected = {f"{args.run}:{i}" for i in range(args.count)}
    seen = set(bodies)
    report = {
        "rows": len(bodies),
        "distinct": len(seen),
        "expected": len(expected),
        "lost": len(expected - seen),
        "duplicated": len(bodies) - len(seen),
        "unexpected": len(seen - expected),
    }
    print(json.dumps(report), flush=True)
    if report["lost"] or report["duplicated"] or report["unexpected"]:
        raise SystemExit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("publish", "run", "verify"))
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=61613)
    parser.add_argument("--login", default="guest")
    parser.add_argument("--passcode", default="guest")
    parser.add_argument("--vhost", default="/")
    parser.add_argument("--stream", required=True, help="streams <stream>-0 .. <stream>-<N-1>")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--run", default="run", help="a tag in every body")
    parser.add_argument("--first", type=int, default=0, help="publish: the first id")
    parser.add_argument("--count", type=int, default=50_000, help="messages (all, for verify)")
    parser.add_argument("--size", type=int, default=100, help="publish: body bytes")
    parser.add_argument("--chunk", type=int, default=10_000, help="publish: rows per chunk")
    parser.add_argument("--pace", type=float, default=0.0, help="publish: seconds between chunks")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--ui-port", type=int, default=4050)
    parser.add_argument("--out", help="the parquet sink's directory")
    parser.add_argument("--checkpoint", help="the query's checkpoint directory")
    parser.add_argument("--per-trigger", type=int, default=5000, help="maxOffsetsPerTrigger")
    parser.add_argument("--per-partition", type=int, default=0, help="maxOffsetsPerPartition")
    args = parser.parse_args()
    steps = {"publish": publish, "run": run, "verify": verify}
    steps[args.step](args)


if __name__ == "__main__":
    main()
