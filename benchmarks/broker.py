"""The embedded broker's own costs: throughput with N producers and N consumers, memory.

::

    python benchmarks/broker.py              # full run, about a minute
    python benchmarks/broker.py --quick      # smoke run
    python benchmarks/broker.py --json broker.json
    python benchmarks/broker.py --accelerated   # the pure and the accelerated broker

Throughput: the broker runs in a process of its own (as in ``e2e.py``); N
producer connections share one process and N consumer connections another,
all on stomp_proto's asyncio client; each N runs three times (interleaved)
and each figure is the median.  Every producer sends its share of
``--count`` messages of 100 B to one queue; the N consumers (``auto`` acks,
``prefetch-count: 1000``) take them round-robin.  Reported: messages/s from
the first send to the last arrival, and the broker process's CPU seconds per
100k messages - the broker's own cost, which is less sensitive to what else
the machine runs than messages/s.  With ``--accelerated`` the same runs go
to a broker process on the accelerated build too, interleaved with the pure
build's; the JSON's ``throughput_accelerated`` holds them.

Memory, in a second broker process running ``tracemalloc`` (so only Python
allocations, which is what grows per connection and per message):

- per connection: K idle clients connect (CONNECT, CONNECTED, then nothing);
  the growth of traced memory (and of RSS) over K;
- per queued message: one client sends K messages of 100 B and K of 4 KiB
  to queues nobody consumes, the last with a receipt; growth over K.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# e2e.py next to this file, and the stomp_proto of this checkout (installed or not).
sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

from e2e import (  # noqa: E402
    PREFETCH,
    ROOT,
    BrokerProcess,
    Worker,
    _child_env,
    _say,
    build_compiled,
    environment,
)

from stomp_proto import ClientConnection, Connect, Connected, Receipt, Send  # noqa: E402

# -- load processes ------------------------------------------------------------------------


async def _producers(port: int, destination: str, n: int, count: int, size: int) -> None:
    import stomp_proto.asyncio

    body = b"x" * size
    share = [count // n + (1 if i < count % n else 0) for i in range(n)]
    ready = asyncio.Event()

    async def one(messages: int) -> None:
        async with stomp_proto.asyncio.connect("127.0.0.1", port, heartbeat=(0, 0)) as client:
            await ready.wait()
            for _ in range(messages):
                await client.send(destination, body)

    tasks = [asyncio.create_task(one(m)) for m in share]
    await asyncio.sleep(0.5)  # let every producer connect
    _say("ready")
    await asyncio.to_thread(sys.stdin.readline)
    start, cpu0 = time.monotonic_ns(), time.process_time()
    ready.set()
    await asyncio.gather(*tasks)
    _say("sent", start=start, cpu=time.process_time() - cpu0)


async def _consumers(port: int, destination: str, n: int, count: int) -> None:
    import stomp_proto.asyncio

    received = 0
    subscribed = 0
    cpu0 = time.process_time()
    tasks: list[asyncio.Task[None]] = []

    async def one() -> None:
        nonlocal received, subscribed
        async with stomp_proto.asyncio.connect(
            "127.0.0.1", port, heartbeat=(0, 0), max_pending_messages=PREFETCH
        ) as client:
            headers = {"prefetch-count": str(PREFETCH)}
            async with client.subscribe(destination, headers=headers) as messages:
                subscribed += 1
                if subscribed == n:
                    _say("ready")
                async for _ in messages:
                    received += 1
                    if received == count:
                        _say("drained", last=time.monotonic_ns(), cpu=time.process_time() - cpu0)
                        for task in tasks:
                            if task is not asyncio.current_task():
                                task.cancel()
                        return

    tasks.extend(asyncio.create_task(one()) for _ in range(n))
    await asyncio.gather(*tasks, return_exceptions=True)


def load_main(text: str) -> None:
    spec = json.loads(text)
    if spec["role"] == "producer":
        asyncio.run(
            _producers(spec["port"], spec["destination"], spec["n"], spec["count"], spec["size"])
        )
    else:
        asyncio.run(_consumers(spec["port"], spec["destination"], spec["n"], spec["count"]))
    _say("exit")


class _Load(Worker):
    def __init__(self, spec: dict[str, Any]) -> None:
        import subprocess

        self.spec = _Named(spec["role"])  # type: ignore[assignment]
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--load", json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=_child_env(),
            cwd=ROOT,
        )


@dataclass
class _Named:
    role: str
    client: str = "stomp_proto.asyncio"


@dataclass
class Throughput:
    n: int
    count: int
    msgs_per_s: float
    broker_cpu_per_100k: float
    producer_cpu: float
    consumer_cpu: float


def median_of(runs: Sequence[Throughput]) -> Throughput:
    """Each figure's median over repeated runs of one N."""
    figures = {
        name: statistics.median(getattr(r, name) for r in runs)
        for name in ("msgs_per_s", "broker_cpu_per_100k", "producer_cpu", "consumer_cpu")
    }
    return Throughput(n=runs[0].n, count=runs[0].count, **figures)


def throughput(n: int, count: int, size: int = 100, *, accelerated: bool = False) -> Throughput:
    """One run of N producers and N consumers; ``accelerated``: the broker process runs
    the accelerated build (the load processes stay as they are: the broker is measured)."""
    broker = BrokerProcess(accelerated=accelerated)
    loads: list[_Load] = []
    try:
        destination = f"/queue/broker-bench-{uuid.uuid4().hex[:8]}"
        spec = {"port": broker.port, "destination": destination, "n": n, "count": count}
        consumers = _Load({**spec, "role": "consumer"})
        loads.append(consumers)
        consumers.expect("ready")
        producers = _Load({**spec, "role": "producer", "size": size})
        loads.append(producers)
        producers.expect("ready")
        cpu0 = broker.cpu()
        producers.tell("go")
        sent = producers.expect("sent")
        drained = consumers.expect("drained")
        cpu1 = broker.cpu()
        producers.expect("exit")
        consumers.expect("exit")
    finally:
        for load in loads:
            load.kill()
        broker.close()
    return Throughput(
        n=n,
        count=count,
        msgs_per_s=count / ((drained["last"] - sent["start"]) / 1e9),
        broker_cpu_per_100k=(cpu1 - cpu0) * 100_000 / count,
        producer_cpu=sent["cpu"],
        consumer_cpu=drained["cpu"],
    )


# -- memory --------------------------------------------------------------------------------


def _connect(port: int) -> tuple[socket.socket, ClientConnection]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    conn = ClientConnection()
    sock.sendall(
        conn.send(Connect(host="/", accept_versions=("1.2",), login="guest", passcode="g"))
    )
    _wait_for(sock, conn, Connected)
    return sock, conn


def _wait_for(sock: socket.socket, conn: ClientConnection, kind: type) -> None:
    while True:
        for event in conn:
            if isinstance(event, kind):
                return
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("the broker closed the connection")
        conn.receive_data(data)


@dataclass
class Memory:
    connections: int
    bytes_per_connection: float
    rss_bytes_per_connection: float
    messages: int
    bytes_per_message_100b: float
    bytes_per_message_4k: float


def memory(connections: int, messages: int) -> Memory:
    broker = BrokerProcess(trace=True)
    try:
        base = broker.stats()
        socks = [_connect(broker.port) for _ in range(connections)]
        time.sleep(0.2)
        idle = broker.stats()
        assert idle["sessions"] >= connections, idle
        for sock, _ in socks:
            sock.close()
        time.sleep(0.5)
        per_message = []
        for size in (100, 4096):
            sock, conn = _connect(broker.port)
            before = broker.stats()
            destination = f"/queue/memory-bench-{size}-{uuid.uuid4().hex[:8]}"
            body = b"x" * size
            chunk = bytearray()
            for i in range(messages):
                last = i == messages - 1
                chunk += conn.send(Send(destination, body, receipt="last" if last else None))
                if len(chunk) > 256 * 1024 or last:
                    sock.sendall(chunk)
                    chunk.clear()
            _wait_for(sock, conn, Receipt)
            after = broker.stats()
            per_message.append((after["traced"] - before["traced"]) / messages)
            sock.close()
    finally:
        broker.close()
    return Memory(
        connections=connections,
        bytes_per_connection=(idle["traced"] - base["traced"]) / connections,
        rss_bytes_per_connection=(idle["rss_kib"] - base["rss_kib"]) * 1024 / connections,
        messages=messages,
        bytes_per_message_100b=per_message[0],
        bytes_per_message_4k=per_message[1],
    )


# -- report --------------------------------------------------------------------------------


def report(rows: Sequence[Throughput], mem: Memory | None) -> str:
    lines = [
        "===  =======  =======  =================",
        "N    msg/s    count    broker CPU s/100k",
        "===  =======  =======  =================",
    ]
    for r in rows:
        lines.append(f"{r.n:<3}  {r.msgs_per_s:<7,.0f}  {r.count:<7}  {r.broker_cpu_per_100k:.1f}")
    lines.append(lines[0])
    if mem is None:
        return "\n".join(lines)
    lines += [
        "",
        f"memory per idle connection: {mem.bytes_per_connection:,.0f} B traced, "
        f"{mem.rss_bytes_per_connection:,.0f} B RSS ({mem.connections} connections)",
        f"memory per queued message: {mem.bytes_per_message_100b:,.0f} B (100 B body), "
        f"{mem.bytes_per_message_4k:,.0f} B (4 KiB body) ({mem.messages} messages each)",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run")
    parser.add_argument("--count", type=int, help="messages per N (default 50000, quick 5000)")
    parser.add_argument("--repeats", type=int, help="runs per N, median (default 3, quick 1)")
    parser.add_argument("--n", default="1,10,100", help="producers = consumers, comma-separated")
    parser.add_argument("--json", type=Path, help="write the results as JSON")
    parser.add_argument(
        "--accelerated",
        action="store_true",
        help="also run the broker on the accelerated build (scripts/build_accelerated.py "
        "--target, in a temporary directory), its throughput runs interleaved with the "
        "pure build's",
    )
    parser.add_argument("--load", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.load:
        load_main(args.load)
        return 0
    count = args.count or (5000 if args.quick else 50_000)
    repeats = args.repeats or (1 if args.quick else 3)
    sizes = [int(x) for x in args.n.split(",")]
    builds = [False]
    if args.accelerated:
        builds.append(True)
        directory = tempfile.mkdtemp(prefix="stomp-proto-broker-accelerated-")
        atexit.register(shutil.rmtree, directory, ignore_errors=True)
        os.environ["STOMP_BENCH_COMPILED_ROOT"] = build_compiled(Path(directory))
    runs: dict[tuple[bool, int], list[Throughput]] = {(b, n): [] for b in builds for n in sizes}
    for _ in range(repeats):  # the Ns and builds interleaved, as e2e.py interleaves clients
        for n in sizes:
            for accelerated in builds:
                row = throughput(n, count, accelerated=accelerated)
                print(
                    f"N={n:<3} {'accelerated' if accelerated else 'pure':11} "
                    f"{row.msgs_per_s:9,.0f} msg/s  broker CPU "
                    f"{row.broker_cpu_per_100k:.1f} s/100k",
                    file=sys.stderr,
                )
                runs[accelerated, n].append(row)
    rows = [median_of(runs[False, n]) for n in sizes]
    fast_rows = [median_of(runs[True, n]) for n in sizes] if args.accelerated else []
    mem = memory(100 if args.quick else 1000, 2000 if args.quick else 20_000)
    print(report(rows, mem))
    if fast_rows:
        print("accelerated build:")
        print(report(fast_rows, None))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "environment": environment(),
            "throughput": [asdict(r) for r in rows],
            "memory": asdict(mem),
        }
        if fast_rows:
            data["throughput_accelerated"] = [asdict(r) for r in fast_rows]
        args.json.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    sys.exit(main())
