"""Celery and Kombu on one RabbitMQ: this transport (STOMP) against ``pyamqp``.

In one run, each measurement alternates the two transports, three times (or
``--repeats``), and the medians are kept:

- Kombu: messages/s published (``Producer.publish``, 100 B bodies) and consumed
  (``Consumer`` + ``drain_events``, acknowledging each);
- Celery: tasks/s of a worker (prefork, two processes) through 2,000 ``add``
  tasks with ``rpc://`` results, and the latency of one task at a time (apply to
  result, p50 and p99 of 300);
- where the CPU goes in the Celery rows: CPU seconds per 1,000 tasks of the
  broker (RabbitMQ's Erlang VM), the worker (with its pool) and the client.

Usage (RabbitMQ as ``scripts/start-brokers.sh`` runs it, STOMP on 61613 and
AMQP on 5672)::

    python stomp-proto-kombu/benchmarks/celery_vs_pyamqp.py [--quick] [--json FILE]

``--stomp-port`` and ``--amqp-port`` (or ``RABBITMQ_STOMP_PORT`` and
``RABBITMQ_AMQP_PORT``) name another RabbitMQ, such as a private one started
with ``scripts/brokers/start-rabbitmq.sh``; its CPU is read from the Erlang VM
whose AMQP port that is.  The results record the machine's load average and
which build of stomp_proto ran.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import kombu
import stomp_proto_kombu  # noqa: F401  (registers the stomp:// scheme)

import stomp_proto

HERE = Path(__file__).resolve().parent
APP = HERE / "celery_bench_app"
CLOCK = os.sysconf("SC_CLK_TCK")


def urls(host: str, stomp_port: int, amqp_port: int) -> dict[str, str]:
    return {
        "stomp-proto-kombu": f"stomp://guest:guest@{host}:{stomp_port}//",
        "pyamqp": f"pyamqp://guest:guest@{host}:{amqp_port}//",
    }


# -- CPU accounting -------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User and system CPU of ``pid`` and of its children it has waited for."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(fields[i]) for i in (11, 12, 13, 14))
    return (utime + stime + cutime + cstime) / CLOCK


def tree_cpu(pid: int) -> float:
    """CPU of ``pid`` and of every live process below it (a worker and its pool)."""
    total = 0.0
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    stack = [pid]
    while stack:
        current = stack.pop()
        try:
            total += cpu_seconds(current)
        except OSError:
            continue
        stack.extend(children.get(current, ()))
    return total


def rabbitmq_pid(amqp_port: int) -> int:
    """The Erlang VM of the RabbitMQ under test (beam.smp): the one whose AMQP port is
    ``amqp_port`` when several run (a private broker beside the shared one)."""
    found = subprocess.run(["pgrep", "-f", "beam.smp.*rabbit"], capture_output=True, text=True)
    pids = [int(p) for p in found.stdout.split()]
    if not pids:
        raise SystemExit("no RabbitMQ (beam.smp) process: start it with scripts/start-brokers.sh")
    for pid in pids:
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"RABBITMQ_NODE_PORT={amqp_port}".encode() in environ:
            return pid
    return pids[0]


@contextmanager
def cpu_of(pids: dict[str, Callable[[], float]], into: dict[str, float]) -> Iterator[None]:
    before = {name: read() for name, read in pids.items()}
    yield
    for name, read in pids.items():
        into[name] = read() - before[name]


# -- Kombu ----------------------------------------------------------------------


def kombu_rates(url: str, count: int) -> dict[str, float]:
    """Messages/s published, then consumed, through one queue of the run's own."""
    name = f"bench-{uuid.uuid4().hex[:8]}"
    exchange = kombu.Exchange(name, type="direct")
    queue = kombu.Queue(name, exchange, routing_key=name)
    body = "x" * 100
    with kombu.Connection(url) as connection:
        channel = connection.channel()
        queue(channel).declare()
        producer = kombu.Producer(channel, exchange=exchange, routing_key=name)
        started = time.perf_counter()
        for _ in range(count):
            producer.publish(body)
        published = time.perf_counter() - started
        got = 0

        def on_message(_body: Any, message: kombu.Message) -> None:
            nonlocal got
            got += 1
            message.ack()

        channel.basic_qos(0, 100, False)
        started = time.perf_counter()
        with kombu.Consumer(channel, [queue], callbacks=[on_message]):
            while got < count:
                connection.drain_events(timeout=30)
        consumed = time.perf_counter() - started
        queue(channel).delete()
        channel.close()
    return {"publish_per_s": count / published, "consume_per_s": count / consumed}


# -- Celery ---------------------------------------------------------------------


@contextmanager
def celery_worker(url: str) -> Iterator[tuple[Any, subprocess.Popen[bytes]]]:
    """The bench app on ``url`` in this process, and a prefork worker (two
    processes) on it; the app's queue is the run's own."""
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "BENCH_BROKER": url, "BENCH_QUEUE": queue}
    os.environ.update(BENCH_BROKER=url, BENCH_QUEUE=queue)
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "bench_tasks", "worker", "-P", "prefork",
         "-c", "2", "-Q", queue, "--loglevel", "warning", "--without-gossip",
         "--without-mingle", "--without-heartbeat", "-n", f"bench-{queue}@%h"],
        cwd=APP, env=env, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    sys.path.insert(0, str(APP))
    try:
        bench_tasks = importlib.import_module("bench_tasks")  # the app, on ``url``
        # Ready once it answers a task (a worker that starts slowly is waited for).
        bench_tasks.add.delay(0, 0).get(timeout=120)
        yield bench_tasks, worker
    finally:
        sys.path.remove(str(APP))
        module = sys.modules.pop("bench_tasks", None)
        if module is not None:
            module.app.close()
        worker.terminate()
        worker.wait(120)


def celery_rates(url: str, tasks: int, paced: int, amqp_port: int) -> dict[str, float]:
    with celery_worker(url) as (bench, worker):
        cpu: dict[str, float] = {}
        broker = rabbitmq_pid(amqp_port)
        readers = {
            "broker": lambda: cpu_seconds(broker),
            "worker": lambda: tree_cpu(worker.pid),
            "client": lambda: cpu_seconds(os.getpid()),
        }
        with cpu_of(readers, cpu):
            started = time.perf_counter()
            results = [bench.add.delay(n, n) for n in range(tasks)]
            for result in results:
                result.get(timeout=300)
            elapsed = time.perf_counter() - started
        latencies = []
        for n in range(paced):
            sent = time.perf_counter()
            bench.add.delay(n, n).get(timeout=60)
            latencies.append(time.perf_counter() - sent)
    latencies.sort()
    return {
        "tasks_per_s": tasks / elapsed,
        "latency_p50_ms": 1000 * latencies[len(latencies) // 2],
        "latency_p99_ms": 1000 * latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
        **{f"cpu_{name}_s_per_1000": 1000 * seconds / tasks for name, seconds in cpu.items()},
    }


# -- the run --------------------------------------------------------------------


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: few messages, one repeat"
    )
    parser.add_argument("--json", type=Path, help="write the results here too")
    parser.add_argument(
        "--repeats", type=int, default=3, help="alternating rounds (medians of them are kept)"
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--stomp-port", type=int, default=int(os.environ.get("RABBITMQ_STOMP_PORT", 61613))
    )
    parser.add_argument(
        "--amqp-port", type=int, default=int(os.environ.get("RABBITMQ_AMQP_PORT", 5672))
    )
    args = parser.parse_args()
    repeats, messages, tasks, paced = (
        (1, 200, 100, 20) if args.quick else (args.repeats, 5000, 2000, 300)
    )
    targets = urls(args.host, args.stomp_port, args.amqp_port)
    runs: dict[str, dict[str, list[dict[str, float]]]] = {
        name: {"kombu": [], "celery": []} for name in targets
    }
    load_at_start = os.getloadavg()[0]
    for repeat in range(repeats):
        for name, url in targets.items():  # alternating, so that drift hits both
            runs[name]["kombu"].append(kombu_rates(url, messages))
            runs[name]["celery"].append(celery_rates(url, tasks, paced, args.amqp_port))
            print(f"repeat {repeat + 1}/{repeats} {name}: {runs[name]['kombu'][-1]} "
                  f"{runs[name]['celery'][-1]}", file=sys.stderr, flush=True)  # fmt: skip
    result: dict[str, Any] = {
        "broker": "RabbitMQ (STOMP plugin for stomp-proto-kombu, AMQP 0-9-1 for pyamqp)",
        "repeats": repeats,
        "messages": messages,
        "tasks": tasks,
        "paced_tasks": paced,
        "python": sys.version.split()[0],
        "stomp_proto_build": stomp_proto.BUILD,
        # The 1-minute load average as the run began and ended: the machine may be shared.
        "load_average": [load_at_start, os.getloadavg()[0]],
        "transports": {
            name: {"kombu": medians(parts["kombu"]), "celery": medians(parts["celery"])}
            for name, parts in runs.items()
        },
    }
    ours, theirs = (result["transports"][n] for n in targets)
    result["ratios"] = {
        f"{part}.{key}": ours[part][key] / theirs[part][key]
        for part in ("kombu", "celery")
        for key in ours[part]
    }
    print(json.dumps(result, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
