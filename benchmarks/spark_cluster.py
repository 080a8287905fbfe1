"""Scale-out of the ``stomp-streams`` read on a standalone Spark cluster (1 worker, then 2).

    python benchmarks/spark_cluster.py                 # 100,000 rows, 3 reads per size
    python benchmarks/spark_cluster.py --rows 50000 --reads 2 --json out.json

A benchmark, not a test: it starts a Master and up to two Workers of one core
each from the pip pyspark (``spark-class``, bound to 127.0.0.1), fills four
RabbitMQ streams once (``RABBITMQ_STOMP_PORT``, guest/guest), and for each
cluster size runs a fresh application (``spark.cores.max`` = workers,
``spark.executor.cores=1``, ``spark.python.worker.reuse=true``) that reads all
the rows with ``spark.read.format("stomp-streams")`` into the ``noop`` sink,
in eight read tasks (``maxOffsetsPerPartition``), ``--reads`` times.  The
executors are registered before anything is timed, so the JVM start-up is
left out; the first read of each application also starts the executors'
Python workers (the daemon, then ``pyarrow`` and ``stomp_proto`` imported in
each), which later reads reuse.  It reports, per cluster size:

* ``first_read_s``: the first read, start-up included;
* ``steady_rows_per_s``: the median of the later reads (rows over wall time);
* ``startup_s``: the first read's time minus the time the steady rate gives
  for its rows, i.e. what the Python workers' start-up cost;
* ``tasks_per_executor``: from the driver's REST API, to see that every
  worker took part.

The load average is printed before each application: on a shared machine the
figures move with it.  Only the processes this script starts are stopped, by
their ids, at exit.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spark import fill_streams, load_average, rabbitmq_options

STREAMS = 4
TASKS = 8


class Cluster:
    """A Master and Workers from the pip pyspark, on 127.0.0.1; ``close()`` stops them."""

    def __init__(self, port: int, work: Path) -> None:
        import pyspark

        self.spark_home = os.path.dirname(pyspark.__file__)
        self.port = port
        self.work = work
        self.url = f"spark://127.0.0.1:{port}"
        self.processes: list[subprocess.Popen[bytes]] = []
        self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(port + 1),
        )  # fmt: skip

    def _start(self, name: str, *args: str) -> None:
        log = open(self.work / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(self.work)}
        command = [f"{self.spark_home}/bin/spark-class", *args]
        self.processes.append(
            subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        )

    def add_worker(self, host: str = "127.0.0.1") -> None:
        """One more Worker of one core.  ``host`` is its name for Spark: speculative copies
        never run on the host of the original, so a test of speculation names its two
        workers differently (``127.0.0.1`` and ``localhost``, the same loopback)."""
        n = len(self.processes)
        self._start(
            f"worker-{n}",
            "org.apache.spark.deploy.worker.Worker", self.url,
            "--host", host, "--cores", "1", "--memory", "1g",
            "--webui-port", str(self.port + 1 + n), "--work-dir", str(self.work / f"worker-{n}"),
        )  # fmt: skip

    def alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port + 1}/json/", timeout=2) as r:
                state = json.load(r)
        except OSError:
            return 0
        return sum(w["state"] == "ALIVE" for w in state["workers"])

    def wait_for_workers(self, count: int, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while self.alive_workers() < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{count} worker(s) did not register; logs in {self.work}")
            time.sleep(1)

    def close(self) -> None:
        for process in reversed(self.processes):
            with contextlib.suppress(OSError):
                process.terminate()
        for process in self.processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


def application(cluster: Cluster, workers: int, ui_port: int) -> Any:
    from pyspark.sql import SparkSession

    from stomp_proto.spark import register

    spark = (
        SparkSession.builder.master(cluster.url)
        .appName(f"stomp-streams-scale-out-{workers}")
        .config("spark.cores.max", str(workers))
        .config("spark.executor.cores", "1")
        .config("spark.executor.memory", "512m")
        .config("spark.python.worker.reuse", "true")
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.port", str(ui_port))
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    register(spark)
    # Wait until every executor is registered: their JVM start-up is not what is measured.
    status = spark.sparkContext._jsc.sc()
    deadline = time.monotonic() + 120
    while status.getExecutorMemoryStatus().size() < workers + 1:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{workers} executor(s) did not register")
        time.sleep(0.5)
    return spark


def tasks_per_executor(spark: Any) -> dict[str, int]:
    """Tasks each executor ran, from the driver's REST API (the driver itself left out)."""
    url = spark.sparkContext.uiWebUrl
    app = spark.sparkContext.applicationId
    try:
        with urllib.request.urlopen(f"{url}/api/v1/applications/{app}/executors", timeout=5) as r:
            executors = json.load(r)
    except OSError:
        return {}
    return {e["id"]: e["totalTasks"] for e in executors if e["id"] != "driver"}


def one_read(spark: Any, options: dict[str, str]) -> float:
    began = time.perf_counter()
    spark.read.format("stomp-streams").options(**options).load().write.format("noop").mode(
        "append"
    ).save()
    return time.perf_counter() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--reads", type=int, default=3, help="reads per cluster size (>= 2)")
    parser.add_argument("--workers", default="1,2", help="cluster sizes, in increasing order")
    parser.add_argument("--port", type=int, default=int(os.environ.get("SPARK_PORT_BASE", 7277)))
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    sizes = [int(n) for n in args.workers.split(",")]
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    conf = Path(tempfile.mkdtemp(prefix="spark-cluster-bench-"))
    from stomp_proto.spark._local import _LOG4J2

    (conf / "log4j2.properties").write_text(_LOG4J2)
    os.environ["SPARK_CONF_DIR"] = str(conf)

    import pyspark

    options = rabbitmq_options()
    base = f"bench-scale-{uuid.uuid4().hex[:8]}"
    print(f"pyspark {pyspark.__version__}, {os.cpu_count()} CPUs, load {load_average()}")
    began = time.perf_counter()
    fill_streams(options, base, STREAMS, args.rows, 100)
    print(f"filled {STREAMS} streams with {args.rows:,} messages of 100 B in "
          f"{time.perf_counter() - began:.1f} s")  # fmt: skip
    read_options = {
        **options,
        "stream": base,
        "partitions": str(STREAMS),
        "maxOffsetsPerPartition": str(-(-args.rows // TASKS)),
    }
    cluster = Cluster(args.port, conf)
    results: list[dict[str, Any]] = []
    try:
        for workers in sizes:
            while len(cluster.processes) - 1 < workers:
                cluster.add_worker()
            cluster.wait_for_workers(workers)
            load = load_average()
            spark = application(cluster, workers, args.port + 20 + workers)
            try:
                times = [one_read(spark, read_options) for _ in range(max(2, args.reads))]
                tasks = tasks_per_executor(spark)
            finally:
                spark.stop()
            steady = statistics.median(args.rows / t for t in times[1:])
            result = {
                "workers": workers,
                "load_before": load,
                "first_read_s": round(times[0], 2),
                "steady_rows_per_s": round(steady),
                "startup_s": round(max(0.0, times[0] - args.rows / steady), 2),
                "read_s": [round(t, 2) for t in times],
                "tasks_per_executor": tasks,
            }
            results.append(result)
            print(
                f"{workers} worker(s), load {load}: first read {times[0]:.2f} s "
                f"(start-up {result['startup_s']:.2f} s), then "
                f"{', '.join(f'{t:.2f}' for t in times[1:])} s: "
                f"steady {steady:,.0f} rows/s; tasks per executor {tasks}"
            )
    finally:
        cluster.close()
    report = {"rows": args.rows, "streams": STREAMS, "tasks": TASKS, "results": results,
              "load_after": load_average(), "date": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                  time.gmtime())}  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
