"""Spark data source benchmarks: the ``stomp`` source and sink against the embedded broker.

    python benchmarks/spark.py              # 100,000 rows, 3 repetitions (about 2 minutes)
    python benchmarks/spark.py --quick      # 20,000 rows, 1 repetition
    python benchmarks/spark.py --json out.json
    python benchmarks/spark.py --streams    # RabbitMQ: queue source vs stream source

``--tasks`` times one read task of the stream source (``read_partition`` on a
50,000-offset range of a RabbitMQ stream, no Spark session) on the pure build and on
an accelerated copy of ``stomp_proto`` (``scripts/build_accelerated.py --target``),
each in its own process, alternating; medians of ``--repeats`` (5 by default).
Each process reads 2,000 offsets untimed first (an executor reuses its Python
worker), then reports the task's rows/s and its CPU time per row
(``time.process_time`` around the task's iteration: the process's user and system
time, all threads).  The stream reads at what RabbitMQ delivers over STOMP (about
50k messages/s on two CPUs), whichever build reads it, so the figure that the build
moves is the CPU per row; the target is 0.33x the pure build's, in the same run.
``--before REV`` adds the pure code of a git revision to the same run (a change's
before and after); ``--pure-only`` skips the accelerated build.

``--streams`` compares the two sources against RabbitMQ
(``scripts/start-brokers.sh rabbitmq``; ``RABBITMQ_STOMP_PORT``, guest/guest):
200,000 messages of 100 B, read by ``format("stomp")`` from one queue and by
``format("stomp-streams")`` from four stream queues, ``local[2]``, both with
50,000 rows per micro-batch and ``availableNow`` into the ``noop`` sink;
medians of 3 and their ratio.  The queue source ends after ``idleTimeout``
(1 s) without a message, which its end-to-end time includes (under load a
shorter one ended a run early).  It also times one read task alone (the
executor's code, ``read_partition``, on a 50,000-offset range in this
process) against the 40,000 rows/s per task target.

Needs the ``spark`` extra and Java 17+.  Runs a ``local[2]`` session with the
embedded broker in a background thread of the same process, and measures
rows per second for:

* streaming read: ``readStream.format("stomp")`` -> ``noop`` sink, ``availableNow``,
  over messages queued beforehand (16-byte bodies, one header).  Two figures:
  end to end (query start to finish, including the query's start-up and its
  final idle wait of ``idleTimeout``), and the micro-batches alone (rows over
  the sum of their ``triggerExecution`` times, from the query's progress);
* baseline read, the way users do it today: the blocking client
  (``stomp_proto.threads``) on the driver, ``spark.createDataFrame`` per chunk
  of 20,000 messages, ACK after each chunk is written;
* batch write: ``df.write.format("stomp")`` from ``spark.range`` (2 partitions);
* baseline write, the way users do it today: ``df.foreachPartition`` with the
  blocking client, one ``send`` per row, a receipt on the last one;
* ``df.write.format("noop")``: Spark's own floor for the same DataFrame.

Targets: read >= 50,000 rows/s, write >= 150,000 rows/s.  They are
reported, never enforced; the exit status is 0 unless a run loses messages (2).
The machine's load average is printed with every run: timings on a shared
machine vary by a factor of two.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

T = TypeVar("T")

READ_TARGET = 50_000
WRITE_TARGET = 150_000


class BrokerThread:
    """The embedded broker on its own event loop in a daemon thread."""

    def __init__(self, **options: Any) -> None:
        from stomp_proto.broker import Broker

        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

        async def start() -> Any:
            broker = Broker("127.0.0.1", 0, **options)
            await broker.start()
            return broker

        self.broker = self.call(start())
        self.host, self.port = self.broker.host, self.broker.port

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(600)

    def queued(self, destination: str) -> int:
        async def count() -> int:
            return int(self.broker.core.queued(destination))

        return self.call(count())

    def close(self) -> None:
        self.call(self.broker.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


def serve_fake_broker(port_file: str, messages: int) -> None:
    """A STOMP server that costs (almost) nothing: it measures the data source alone.

    A subscriber gets ``messages`` pre-encoded MESSAGE frames at once; SENDs are
    read and dropped; every ``receipt`` header is answered.  Runs in its own
    process (``--fake-broker``), so that its work is not on the measured side.
    """
    import re
    import socket

    from stomp_proto import Frame, FrameDecoder, FrameEncoder

    encoder = FrameEncoder("1.2")
    blast = b"".join(
        encoder.encode(
            Frame(
                "MESSAGE",
                (
                    ("destination", "/queue/fake"),
                    ("message-id", f"m-{n}"),
                    ("subscription", "@SUB@"),
                    ("ack", f"a-{n}"),
                    ("seq", str(n)),
                ),
                b"%016d" % n,
            )
        )
        for n in range(messages)
    )
    receipt = re.compile(rb"\nreceipt:([^\n]*)\n")
    server = socket.create_server(("127.0.0.1", 0))
    Path(port_file).write_text(str(server.getsockname()[1]))

    def serve(sock: socket.socket) -> None:
        decoder = FrameDecoder("1.2")
        with sock:
            while True:  # the handshake: CONNECT, then SUBSCRIBE or BEGIN
                data = sock.recv(65536)
                if not data:
                    return
                decoder.receive_data(data)
                frame = decoder.next_frame()
                while frame is not None:
                    if isinstance(frame, Frame) and frame.command == "CONNECT":
                        sock.sendall(b"CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\0")
                    elif isinstance(frame, Frame) and frame.command in ("SUBSCRIBE", "BEGIN"):
                        break
                    frame = decoder.next_frame()
                if frame is not None:
                    break
            if frame.command == "SUBSCRIBE":
                sock.sendall(b"RECEIPT\nreceipt-id:%s\n\n\0" % frame.get("receipt").encode())
                sock.sendall(blast.replace(b"@SUB@", frame.get("id").encode()))
            tail = b""
            while data := sock.recv(1 << 20):
                chunk = tail + data
                for match in receipt.finditer(chunk):
                    sock.sendall(b"RECEIPT\nreceipt-id:%s\n\n\0" % match.group(1))
                tail = chunk[-200:] if not receipt.search(chunk[-200:]) else b""

    while True:
        connection, _ = server.accept()
        threading.Thread(target=serve, args=(connection,), daemon=True).start()


class FakeBroker:
    """serve_fake_broker() in a child process."""

    def __init__(self, messages: int) -> None:
        import subprocess

        folder = Path(tempfile.mkdtemp(prefix="stomp-bench-fake-"))
        port_file = folder / "port"
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--fake-broker", str(port_file), str(messages)]
        )
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("the fake broker did not start")
            time.sleep(0.05)
        self.host, self.port = "127.0.0.1", int(port_file.read_text())

    def queued(self, destination: str) -> int:
        return -1  # it keeps nothing

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def preload(broker: BrokerThread, destination: str, rows: int) -> None:
    """Queue ``rows`` messages (16-byte bodies, one header) with the sink's own sender."""
    import pyarrow as pa

    from stomp_proto.spark._options import ConnectionSettings, WriterSettings
    from stomp_proto.spark._queue._writer import PartitionWriter, plan_columns

    settings = WriterSettings(destination=destination)
    writer = PartitionWriter(
        ConnectionSettings(host=broker.host, port=broker.port),
        settings,
        plan_columns([("body", "binary"), ("headers", "map<string,string>")], settings),
    )
    batches = (
        pa.record_batch(
            [
                pa.array([b"%016d" % n for n in range(start, min(start + 10_000, rows))]),
                pa.array(
                    [[("seq", str(n))] for n in range(start, min(start + 10_000, rows))],
                    pa.map_(pa.string(), pa.string()),
                ),
            ],
            names=["body", "headers"],
        )
        for start in range(0, rows, 10_000)
    )
    assert writer.write_batches(batches)[0] == rows
    deadline = time.monotonic() + 60
    while broker.queued(destination) < rows and time.monotonic() < deadline:
        time.sleep(0.05)


def timed(function: Callable[[], object]) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def query_figures(running: Any, rows: int, elapsed: float) -> dict[str, Any]:
    """What a finished streaming query moved, from its progress reports: rows/s end to
    end (``elapsed``) and within its micro-batches, and the time spent planning them."""
    progress = [p for p in running.recentProgress if p["numInputRows"]]
    got = sum(p["numInputRows"] for p in progress)
    batch_seconds = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
    plan_seconds = sum(p["durationMs"].get("latestOffset", 0) for p in progress) / 1000
    return {
        "rows": got,
        "lost": rows - got,
        "seconds": elapsed,
        "rows_per_s": got / elapsed,
        "batches": len(progress),
        "batch_rows_per_s": got / batch_seconds if batch_seconds else 0.0,
        "latest_offset_s": plan_seconds,
    }


def stream_read(spark: Any, broker: Any, destination: str, rows: int) -> dict[str, Any]:
    checkpoint = tempfile.mkdtemp(prefix="stomp-bench-")
    query = (
        spark.readStream.format("stomp")
        .option("host", broker.host)
        .option("port", broker.port)
        .option("destination", destination)
        .option("maxBatchSize", 50_000)
        .option("idleTimeout", 0.2)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
    )
    started = time.perf_counter()
    running = query.start()
    running.awaitTermination(600)
    elapsed = time.perf_counter() - started
    return query_figures(running, rows, elapsed)


def baseline_read(spark: Any, broker: BrokerThread, destination: str, rows: int) -> float:
    """Today's way: a client on the driver, createDataFrame per chunk, ACK after writing."""
    from stomp_proto import threads

    schema = "destination STRING, message_id STRING, headers MAP<STRING,STRING>, body BINARY"
    got = 0
    started = time.perf_counter()
    # max_pending_messages above the prefetch: a SUBSCRIBE to a full queue otherwise
    # waits for its receipt behind more messages than the client buffers.
    with (
        threads.connect(broker.host, broker.port, max_pending_messages=50_000) as client,
        client.subscribe(
            destination, ack="client-individual", headers={"prefetch-count": "40000"}
        ) as subscription,
    ):
        while got < rows:
            chunk = []
            try:
                while len(chunk) < 20_000:
                    message = subscription.get(1.0)
                    if message is None:
                        break
                    chunk.append(message)
            except TimeoutError:
                pass
            if not chunk:
                break
            frame = spark.createDataFrame(
                [(m.destination, m.message_id, dict(m.headers), m.body) for m in chunk], schema
            )
            frame.write.format("noop").mode("append").save()
            for message in chunk:
                client.ack(message)
            got += len(chunk)
    elapsed = time.perf_counter() - started
    assert got == rows, (got, rows)
    return rows / elapsed


def frame_of(spark: Any, rows: int) -> Any:
    return spark.range(0, rows, 1, 2).selectExpr(
        "CAST(lpad(CAST(id AS STRING), 16, '0') AS BINARY) AS body",
        "map('seq', CAST(id AS STRING)) AS headers",
    )


def batch_write(spark: Any, broker: Any, destination: str, rows: int, check: bool = True) -> float:
    frame = frame_of(spark, rows)
    seconds = timed(
        lambda: (
            frame.write.format("stomp")
            .option("host", broker.host)
            .option("port", broker.port)
            .option("destination", destination)
            .mode("append")
            .save()
        )
    )
    if check:
        assert broker.queued(destination) == rows, (broker.queued(destination), rows)
    return rows / seconds


def baseline_write(spark: Any, broker: BrokerThread, destination: str, rows: int) -> float:
    """Today's way: foreachPartition, one blocking client per partition, a send per row."""
    host, port = broker.host, broker.port

    def send_partition(partition: Any) -> None:
        from stomp_proto import threads

        with threads.connect(host, port) as client:
            last = None
            for row in partition:
                if last is not None:
                    client.send(destination, last[0], headers=last[1])
                last = (bytes(row.body), dict(row.headers))
            if last is not None:
                client.send(destination, last[0], headers=last[1], receipt=True)

    frame = frame_of(spark, rows)
    seconds = timed(lambda: frame.foreachPartition(send_partition))
    assert broker.queued(destination) == rows, (broker.queued(destination), rows)
    return rows / seconds


def noop_write(spark: Any, rows: int) -> float:
    frame = frame_of(spark, rows)
    return rows / timed(lambda: frame.write.format("noop").mode("append").save())


def start_spark() -> Any:
    from stomp_proto.spark import local_session

    return local_session("stomp_proto-bench", ui=False)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


STREAM_RATIO_TARGET = 2.0
TASK_TARGET = 40_000
#: The accelerated read task's CPU per row over the pure build's, in the same run.
TASK_CPU_TARGET = 0.33


def rabbitmq_options() -> dict[str, str]:
    return {
        "host": os.environ.get("RABBITMQ_STOMP_HOST", "127.0.0.1"),
        "port": os.environ.get("RABBITMQ_STOMP_PORT", "61613"),
        "login": os.environ.get("RABBITMQ_STOMP_USER", "guest"),
        "passcode": os.environ.get("RABBITMQ_STOMP_PASSWORD", "guest"),
    }


def fill_queue(options: dict[str, str], destination: str, rows: int, size: int) -> None:
    """``rows`` messages into a RabbitMQ queue, with the ``stomp`` sink's sender."""
    import pyarrow as pa

    from stomp_proto.spark._options import ConnectionSettings, WriterSettings
    from stomp_proto.spark._queue._writer import PartitionWriter, plan_columns

    settings = WriterSettings(destination=destination)
    writer = PartitionWriter(
        ConnectionSettings.from_options(options),
        settings,
        plan_columns([("body", "binary")], settings),
    )
    body = b"x" * size
    batches = (
        pa.record_batch([pa.array([body] * min(10_000, rows - start))], names=["body"])
        for start in range(0, rows, 10_000)
    )
    assert writer.write_batches(batches)[0] == rows


def fill_streams(options: dict[str, str], base: str, partitions: int, rows: int, size: int) -> None:
    """``rows`` messages over ``<base>-0..N-1``, routed by key, with the stream sink's sender."""
    from stomp_proto.spark._options import ConnectionSettings
    from stomp_proto.spark._streams._link import declare_streams
    from stomp_proto.spark._streams._offsets import StreamsWriterSettings
    from stomp_proto.spark._streams._writer import StreamColumns, StreamsPartitionWriter

    stream_options = {**options, "stream": base, "partitions": str(partitions)}
    connection = ConnectionSettings.from_options(stream_options)
    settings = StreamsWriterSettings.from_options(stream_options)
    declare_streams(connection, settings.streams, create=True)
    writer = StreamsPartitionWriter(
        connection, settings, StreamColumns(body="body", key="key", stream=None, headers=None)
    )
    body = b"x" * size
    chunks = (
        (
            [body] * min(10_000, rows - start),
            [str(i) for i in range(start, min(start + 10_000, rows))],
            None,
            None,
        )
        for start in range(0, rows, 10_000)
    )
    assert sum(writer.send(chunks, task_partition=0, row_id_prefix=base).values()) == rows


def read_to_noop(spark: Any, source: str, options: dict[str, str], rows: int) -> dict[str, Any]:
    """An availableNow query from ``source`` into ``noop``: rows/s end to end and in batches."""
    checkpoint = tempfile.mkdtemp(prefix="stomp-bench-")
    started = time.perf_counter()
    running = (
        spark.readStream.format(source)
        .options(**options)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    running.awaitTermination(900)
    elapsed = time.perf_counter() - started
    return query_figures(running, rows, elapsed)


class TaskFigures(NamedTuple):
    """One read task, timed inside the task: rows/s of wall time, and CPU per row."""

    rows_per_s: float
    cpu_us_per_row: float  #: the process's CPU time (user + system, all threads) per row


def one_task(options: dict[str, str], stream: str, count: int) -> TaskFigures:
    """One read task's code (``read_partition``) on ``[0, count)`` of ``stream``: rows/s,
    and the process CPU time it took per row (``time.process_time``, around the iteration
    of the batches, as an executor's Python worker spends it)."""
    from stomp_proto.spark import _schema  # noqa: F401  (pyarrow's import is not the task's)
    from stomp_proto.spark._options import ConnectionSettings
    from stomp_proto.spark._streams._offsets import StreamRange, StreamsReaderSettings
    from stomp_proto.spark._streams._reader import read_partition

    settings = StreamsReaderSettings.from_options({**options, "streams": stream})
    connection = ConnectionSettings.from_options(options)
    started, cpu = time.perf_counter(), time.process_time()
    got = sum(
        b.num_rows for b in read_partition(connection, settings, StreamRange(stream, 0, count))
    )
    cpu = time.process_time() - cpu
    elapsed = time.perf_counter() - started
    assert got == count, (got, count)
    return TaskFigures(got / elapsed, cpu / got * 1e6)


def export_revision(root: Path, revision: str, target: Path) -> None:
    """The ``stomp_proto`` package of git ``revision`` (for example ``main``), into ``target``."""
    import subprocess

    archive = subprocess.run(
        ["git", "-C", str(root), "archive", revision, "stomp_proto"],
        check=True, capture_output=True,
    ).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)


def compare_builds(args: argparse.Namespace) -> int:
    """One read task's rows/s on the pure and the accelerated build (and ``--before``),
    alternating."""
    import shutil
    import subprocess
    import uuid

    root = Path(__file__).resolve().parent.parent
    options = rabbitmq_options()
    count = 5_000 if args.quick else 50_000
    stream = f"bench-task-{uuid.uuid4().hex[:8]}"
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, load {load_average()}")
    fill_streams(options, stream, 1, count + 500, 100)
    accelerated = Path(tempfile.mkdtemp(prefix="stomp-proto-spark-accelerated-"))
    before = Path(tempfile.mkdtemp(prefix="stomp-proto-spark-before-"))
    try:
        builds: list[tuple[str, Path]] = [("pure", root)]
        if args.before:
            export_revision(root, args.before, before)
            builds.insert(0, (f"before ({args.before})", before))
        if not args.pure_only:
            subprocess.run(
                [sys.executable, str(root / "scripts" / "build_accelerated.py"), "--target",
                 str(accelerated)],
                check=True, stdout=subprocess.DEVNULL,
            )  # fmt: skip
            builds.append(("accelerated", accelerated))
        figures: dict[str, list[TaskFigures]] = {name: [] for name, _ in builds}
        for run in range(args.repeats):
            for build, path in builds:
                env = {**os.environ, "PYTHONPATH": str(path)}
                kind = "accelerated" if build == "accelerated" else "pure"
                env.pop("STOMP_PROTO_NO_EXTENSIONS", None)
                if kind == "pure":
                    env["STOMP_PROTO_NO_EXTENSIONS"] = "1"
                answer = subprocess.run(
                    [sys.executable, __file__, "--one-task", f"{stream}-0", str(count), kind],
                    env=env, check=True, capture_output=True, text=True,
                )  # fmt: skip
                task = TaskFigures(*json.loads(answer.stdout.splitlines()[-1]))
                figures[build].append(task)
                print(
                    f"run {run + 1}: {build:<16} {task.rows_per_s:>10,.0f} rows/s  "
                    f"{task.cpu_us_per_row:6.2f} us CPU per row  (load {load_average()})"
                )
    finally:
        shutil.rmtree(accelerated, ignore_errors=True)
        shutil.rmtree(before, ignore_errors=True)
    pure_rate = median([t.rows_per_s for t in figures["pure"]])
    pure_cpu = median([t.cpu_us_per_row for t in figures["pure"]])
    print(f"\none read task, {count:,} rows of 100 B, medians of {args.repeats}:")
    for build, tasks in figures.items():
        rate, cpu = median([t.rows_per_s for t in tasks]), median([t.cpu_us_per_row for t in tasks])
        print(
            f"  {build:<16} {rate:>10,.0f} rows/s ({rate / pure_rate:.2f}x pure)  "
            f"{cpu:6.2f} us CPU per row ({cpu / pure_cpu:.2f}x pure)"
        )
    if "accelerated" in figures:
        ratio = median([t.cpu_us_per_row for t in figures["accelerated"]]) / pure_cpu
        verdict = "meets" if ratio <= TASK_CPU_TARGET else "MISSES"
        print(f"  task CPU per row, accelerated over pure: {ratio:.2f}x, {verdict} the "
              f"{TASK_CPU_TARGET:g}x target")  # fmt: skip
    if args.json:
        results = {name: [t._asdict() for t in tasks] for name, tasks in figures.items()}
        Path(args.json).write_text(json.dumps({"rows": count, **results}, indent=2))
    return 0


def one_task_worker(stream: str, count: int, build: str) -> None:
    """A --tasks subprocess: check which build it imported, time one read task."""
    import stomp_proto

    if build != stomp_proto.BUILD:
        raise SystemExit(f"expected the {build} build, imported {stomp_proto.BUILD}")
    # A warm-up read first: an executor's Python worker is reused from task to task.
    one_task(rabbitmq_options(), stream, min(count, 2_000))
    print(json.dumps(one_task(rabbitmq_options(), stream, count)))


def compare_sources(args: argparse.Namespace) -> int:
    import uuid

    options = rabbitmq_options()
    rows, size, partitions, per_batch = args.rows, 100, 4, 50_000
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, load {load_average()}")
    spark = start_spark()
    import pyspark

    print(
        f"pyspark {pyspark.__version__}, local[2], "
        f"RabbitMQ on {options['host']}:{options['port']}, "
        f"{rows:,} messages of {size} B per run, {per_batch:,} per micro-batch\n"
    )
    results: dict[str, list[Any]] = {"queue": [], "streams": [], "task": []}
    lost = False
    tag = uuid.uuid4().hex[:8]
    try:
        # Warm up the Python workers and both sources once, untimed.
        fill_queue(options, f"/queue/bench-warm-{tag}", 2000, size)
        read_to_noop(spark, "stomp", {**options, "destination": f"/queue/bench-warm-{tag}",
                                      "idleTimeout": "0.2"}, 2000)  # fmt: skip
        fill_streams(options, f"bench-warm-{tag}", partitions, 2000, size)
        read_to_noop(spark, "stomp-streams", {**options, "stream": f"bench-warm-{tag}",
                                              "partitions": str(partitions)}, 2000)  # fmt: skip
        for run in range(args.repeats):
            queue = f"/queue/bench-q-{tag}-{run}"
            fill_queue(options, queue, rows, size)
            q = read_to_noop(
                spark,
                "stomp",
                {**options, "destination": queue, "maxBatchSize": str(per_batch),
                 "idleTimeout": "1.0"},
                rows,
            )  # fmt: skip
            base = f"bench-s-{tag}-{run}"
            fill_streams(options, base, partitions, rows, size)
            s = read_to_noop(
                spark,
                "stomp-streams",
                {**options, "stream": base, "partitions": str(partitions),
                 "maxOffsetsPerTrigger": str(per_batch)},
                rows,
            )  # fmt: skip
            task = one_task(options, f"{base}-0", min(50_000, rows // partitions - 500)).rows_per_s
            lost = lost or q["lost"] != 0 or s["lost"] != 0
            results["queue"].append(q)
            results["streams"].append(s)
            results["task"].append(task)
            print(
                f"run {run + 1}: load {load_average()} | queue source {q['rows_per_s']:,.0f}/s "
                f"({q['batches']} batches) | stream source {s['rows_per_s']:,.0f}/s "
                f"({s['batches']} batches, {s['batch_rows_per_s']:,.0f}/s in batches, "
                f"latestOffset {s['latest_offset_s']:.2f} s) | one read task {task:,.0f}/s"
            )
    finally:
        spark.stop()
    queue_rate = median([r["rows_per_s"] for r in results["queue"]])
    stream_rate = median([r["rows_per_s"] for r in results["streams"]])
    task_rate = median(results["task"])
    ratio = stream_rate / queue_rate if queue_rate else 0.0
    print("\nmedians (rows/s, end to end)")
    print(f"  queue source  (stomp)          {queue_rate:>10,.0f}")
    print(f"  stream source (stomp-streams)  {stream_rate:>10,.0f}")
    print(
        f"  ratio                          {ratio:>10.2f}x  "
        f"{'meets' if ratio >= STREAM_RATIO_TARGET else 'MISSES'} "
        f"the {STREAM_RATIO_TARGET:g}x target"
    )
    print(
        f"  one read task                  {task_rate:>10,.0f}  "
        f"{'meets' if task_rate >= TASK_TARGET else 'MISSES'} the {TASK_TARGET:,} target"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    if lost:
        print("error: a read lost messages", file=sys.stderr)
        return 2
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="20,000 rows, one repetition")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument(
        "--streams", action="store_true", help="RabbitMQ: the queue source vs the stream source"
    )
    parser.add_argument(
        "--tasks", action="store_true", help="RabbitMQ: one read task, pure vs accelerated build"
    )
    parser.add_argument(
        "--before",
        metavar="REV",
        help="with --tasks: also time the stomp_proto of git revision REV (e.g. main), pure",
    )
    parser.add_argument(
        "--pure-only", action="store_true", help="with --tasks: skip the accelerated build"
    )
    parser.add_argument("--fake-broker", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--one-task", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_task:
        one_task_worker(args.one_task[0], int(args.one_task[1]), args.one_task[2])
        return 0
    if args.tasks:
        if "--repeats" not in sys.argv:
            args.repeats = 5
        return compare_builds(args)
    if args.fake_broker:
        serve_fake_broker(args.fake_broker[0], int(args.fake_broker[1]))
        return 0
    if args.streams:
        if "--rows" not in sys.argv:
            args.rows = 200_000
        if args.quick:
            args.rows, args.repeats = 20_000, 1
        return compare_sources(args)
    if args.quick:
        args.rows, args.repeats = 20_000, 1
    rows = args.rows

    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, load {load_average()}")
    spark = start_spark()
    import pyspark

    print(f"pyspark {pyspark.__version__}, local[2], {rows:,} rows per run\n")
    broker = BrokerThread(max_queue_length=10 * rows)
    fake = FakeBroker(rows)
    results: dict[str, list[Any]] = {
        "stream_read": [],
        "baseline_read": [],
        "write": [],
        "baseline_write": [],
        "noop_write": [],
        "fake_stream_read": [],
        "fake_write": [],
    }
    lost = False
    try:
        # Warm up the Python workers and the source once, untimed.
        preload(broker, "/queue/warm", 1000)
        stream_read(spark, broker, "/queue/warm", 1000)
        batch_write(spark, broker, "/queue/warm-w", 1000)
        for run in range(args.repeats):
            destination = f"/queue/read-{run}"
            preload(broker, destination, rows)
            read = stream_read(spark, broker, destination, rows)
            lost = lost or read["lost"] != 0
            results["stream_read"].append(read)
            preload(broker, f"/queue/base-{run}", rows)
            results["baseline_read"].append(
                baseline_read(spark, broker, f"/queue/base-{run}", rows)
            )
            results["write"].append(batch_write(spark, broker, f"/queue/write-{run}", rows))
            results["baseline_write"].append(
                baseline_write(spark, broker, f"/queue/fp-{run}", rows)
            )
            results["noop_write"].append(noop_write(spark, rows))
            fake_read = stream_read(spark, fake, "/queue/fake", rows)
            lost = lost or fake_read["lost"] != 0
            results["fake_stream_read"].append(fake_read)
            results["fake_write"].append(batch_write(spark, fake, "/queue/fake", rows, False))
            print(
                f"run {run + 1}: load {load_average()} | "
                f"read {read['rows_per_s']:,.0f}/s end-to-end, "
                f"{read['batch_rows_per_s']:,.0f}/s in {read['batches']} batches | "
                f"baseline read {results['baseline_read'][-1]:,.0f}/s | "
                f"write {results['write'][-1]:,.0f}/s | "
                f"foreachPartition {results['baseline_write'][-1]:,.0f}/s | "
                f"noop {results['noop_write'][-1]:,.0f}/s | "
                f"fake broker: read {fake_read['rows_per_s']:,.0f}/s "
                f"({fake_read['batch_rows_per_s']:,.0f}/s in batches), "
                f"write {results['fake_write'][-1]:,.0f}/s"
            )
    finally:
        fake.close()
        broker.close()
        spark.stop()

    read_e2e = median([r["rows_per_s"] for r in results["stream_read"]])
    read_batches = median([r["batch_rows_per_s"] for r in results["stream_read"]])
    write = median(results["write"])

    def verdict(value: float, target: int) -> str:
        return "meets" if value >= target else "MISSES"

    print("\nmedians (rows/s)")
    print(
        f"  streaming read, end to end   {read_e2e:>10,.0f}  {verdict(read_e2e, READ_TARGET)} "
        f"the {READ_TARGET:,} target"
    )
    print(f"  streaming read, batches only {read_batches:>10,.0f}")
    print(f"  baseline read (driver loop)  {median(results['baseline_read']):>10,.0f}")
    print(
        f"  batch write                  {write:>10,.0f}  {verdict(write, WRITE_TARGET)} "
        f"the {WRITE_TARGET:,} target"
    )
    print(f"  foreachPartition write       {median(results['baseline_write']):>10,.0f}")
    print(f"  noop write (Spark's floor)   {median(results['noop_write']):>10,.0f}")
    fake_read = median([r["rows_per_s"] for r in results["fake_stream_read"]])
    fake_batches = median([r["batch_rows_per_s"] for r in results["fake_stream_read"]])
    print("against a fake broker that costs nothing (the data source alone):")
    print(f"  streaming read, end to end   {fake_read:>10,.0f}")
    print(f"  streaming read, batches only {fake_batches:>10,.0f}")
    print(f"  batch write                  {median(results['fake_write']):>10,.0f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    if lost:
        print("error: the streaming read lost messages", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
