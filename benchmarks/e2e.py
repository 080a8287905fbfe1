"""End-to-end benchmark: producer -> broker -> consumer over loopback.

One command runs every row (see ``benchmarks/README.rst``)::

    python benchmarks/e2e.py                 # full run, a few minutes
    python benchmarks/e2e.py --quick         # smoke run
    python benchmarks/e2e.py --json e2e.json --svg e2e.svg

Each row is one client library moving ``--count`` messages of one body size
with one acknowledgement mode through one broker.  The producer and the
consumer are two separate processes of that library, and the embedded broker
runs in a third, so that each process's CPU time (``time.process_time()``,
all its threads) is its own.  The orchestrating process only passes lines:

1. the consumer connects, subscribes and says ``ready``;
2. the producer connects, says ``ready``, is told ``go``, sends ``count``
   messages as fast as its library lets it and reports when it started and
   the CPU it used;
3. the consumer reports when the last of them arrived and its CPU time:
   messages/s is ``count`` over first send to last arrival;
4. then the latency phase: the producer sends ``latency_count`` more messages
   paced at one per :data:`LATENCY_INTERVAL` (a light load every library
   keeps up with), each stamped with ``time.monotonic_ns()`` (one clock for
   all processes on Linux) in an ``x-ts`` header; the consumer records
   arrival minus stamp, and p50/p99 are taken over those.

Everyone gets the same settings: STOMP 1.2, heart-beats 10 s both ways, a
SUBSCRIBE with ``prefetch-count: 1000`` (RabbitMQ's and the embedded broker's
in-flight limit for client acknowledgements), no receipts on SEND, an ACK per
message in ``client-individual`` mode sent as soon as the message is handled.
Every message carries the ``x-ts`` header.

The embedded broker is started by this script on a free port; RabbitMQ is
taken from the environment of ``scripts/start-brokers.sh``
(``RABBITMQ_STOMP_HOST``, ``RABBITMQ_STOMP_PORT``, ``RABBITMQ_STOMP_VHOST``,
``RABBITMQ_STOMP_USER``, ``RABBITMQ_STOMP_PASSWORD``; guest/guest on 61613
by default) and its rows are skipped, with a message, when it does not answer.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import datetime
import json
import logging
import os
import platform
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: "bare" is no library client: a ClientConnection on a blocking socket, the loop of
#: examples/plain_socket_client.py - what is left of our clients without an adapter.  "uvloop"
#: is the asyncio client on uvloop's event loop.  "floor" is no client either: frames
#: made and counted with bytes operations on a blocking socket (see :func:`run_floor`),
#: what any Python client pays at least, for the wake-ups and system calls alone.
CLIENTS = (
    "asyncio",
    "uvloop",
    "trio",
    "threads",
    "bare",
    "stomppy",
    "floor",
    "stomp.py",
    "stompman",
)
#: With --compiled, our clients also run on the accelerated build of stomp_proto (the
#: native fast path; until it came, the mypyc-compiled core), as rows named
#: "asyncio[compiled]" and so on.  On the embedded broker those rows talk to a second
#: broker process that runs the accelerated build too (what a user of the accelerated
#: wheel runs on both sides), so its CPU column shows the broker's gain; the other rows,
#: the peers' included, keep the pure-build broker.
COMPILED = "[compiled]"
#: "stomppy" is stomp.py's program (run_stomppy's) on stomp_proto.stomppy, the layer
#: that gives stomp.py's API on our core: the same code as the "stomp.py" row.
OUR_CLIENTS = ("asyncio", "uvloop", "trio", "threads", "bare", "stomppy")


def implementation(client: str) -> str:
    """The runner a row's client name stands for: "asyncio[compiled]" runs "asyncio"."""
    return client.removesuffix(COMPILED)


def ordered_clients(names: Iterable[str]) -> list[str]:
    """Clients in the tables' and charts' order: each of ours, then its compiled row."""
    order = [c for client in CLIENTS for c in (client, client + COMPILED)]
    return sorted(set(names), key=lambda name: order.index(name) if name in order else 99)


BODIES = (100, 4096)
ACKS = ("auto", "client-individual")
#: Seconds between two sends of the latency phase.
LATENCY_INTERVAL = 0.001
PREFETCH = 1000
HEARTBEAT = (10_000, 10_000)
#: Seconds a row may take before its processes are killed and it is marked failed.
ROW_TIMEOUT = 300.0


# -- workers: one producer or consumer process of one library ------------------------------


@dataclass
class Spec:
    """What one worker process does."""

    client: str
    role: str  # "producer" | "consumer"
    host: str
    port: int
    login: str
    passcode: str
    vhost: str
    destination: str
    size: int
    ack: str
    count: int
    latency_count: int


def _say(kind: str, **values: Any) -> None:
    sys.stdout.write(f"{kind} {json.dumps(values)}\n")
    sys.stdout.flush()


def _stamp() -> str:
    return str(time.monotonic_ns())


class Tally:
    """The consumer's bookkeeping, the same for every library."""

    def __init__(self, spec: Spec) -> None:
        self.count = spec.count
        self.total = spec.count + spec.latency_count
        self.received = 0
        self.latencies: list[int] = []
        self.cpu0 = time.process_time()

    def start(self) -> None:
        self.cpu0 = time.process_time()

    def hit(self, stamp: str | None) -> bool:
        """Count one message; True once the last one has arrived."""
        now = time.monotonic_ns()
        self.received += 1
        if self.received <= self.count:
            if self.received == self.count:
                _say("drained", last=now, cpu=time.process_time() - self.cpu0)
            return False
        self.latencies.append(now - int(stamp or now))
        if self.received == self.total:
            _say("latency", latencies=self.latencies)
            return True
        return False


def _headers_get(headers: Iterable[tuple[str, str]], name: str) -> str | None:
    for key, value in headers:
        if key == name:
            return value
    return None


def _paced(spec: Spec) -> Iterable[float]:
    """Yield the seconds to wait before each send of the latency phase."""
    start = time.monotonic()
    for n in range(spec.latency_count):
        yield max(0.0, start + n * LATENCY_INTERVAL - time.monotonic())


def _produce(spec: Spec, send: Callable[[dict[str, str]], object]) -> None:
    """The producer's part for a blocking client; ``send(headers)`` sends one message.

    Ready, then on each line from the parent: the timed burst (reported as
    "sent"), the paced latency phase, and the end.
    """
    _say("ready")
    sys.stdin.readline()  # go
    start, cpu0 = time.monotonic_ns(), time.process_time()
    for _ in range(spec.count):
        send({"x-ts": _stamp()})
    _say("sent", start=start, cpu=time.process_time() - cpu0)
    sys.stdin.readline()  # latency
    for wait in _paced(spec):
        time.sleep(wait)
        send({"x-ts": _stamp()})
    sys.stdin.readline()  # finish


async def _produce_async(
    spec: Spec,
    send: Callable[[dict[str, str]], Awaitable[object]],
    readline: Callable[[], Awaitable[object]],
    sleep: Callable[[float], Awaitable[object]],
) -> None:
    """:func:`_produce` for an async client, in its event loop's own terms."""
    _say("ready")
    await readline()  # go
    start, cpu0 = time.monotonic_ns(), time.process_time()
    for _ in range(spec.count):
        await send({"x-ts": _stamp()})
    _say("sent", start=start, cpu=time.process_time() - cpu0)
    await readline()  # latency
    for wait in _paced(spec):
        await sleep(wait)
        await send({"x-ts": _stamp()})
    await readline()  # finish


def _subscribe_headers(spec: Spec) -> dict[str, str]:
    return {"prefetch-count": str(PREFETCH)}


# stomp_proto's three adapters ------------------------------------------------------------


def _ours_options(spec: Spec) -> dict[str, Any]:
    return {
        "login": spec.login,
        "passcode": spec.passcode,
        "vhost": spec.vhost,
        "heartbeat": HEARTBEAT,
        "versions": ("1.2",),
        "max_pending_messages": PREFETCH,
    }


async def _ours_async(spec: Spec, connect: Any, readline: Callable[[], Any], sleep: Any) -> None:
    body = b"x" * spec.size
    async with connect(spec.host, spec.port, **_ours_options(spec)) as client:
        if spec.role == "consumer":
            tally = Tally(spec)
            headers = _subscribe_headers(spec)
            async with client.subscribe(spec.destination, ack=spec.ack, headers=headers) as sub:
                _say("ready")
                tally.start()
                client_ack = spec.ack != "auto"
                async for message in sub:
                    done = tally.hit(_headers_get(message.headers, "x-ts"))
                    if client_ack:
                        await client.ack(message)
                    if done:
                        break
            return
        await _produce_async(
            spec,
            lambda headers: client.send(spec.destination, body, headers=headers),
            readline,
            sleep,
        )


def run_asyncio(spec: Spec) -> None:
    import stomp_proto.asyncio

    async def readline() -> str:
        return await asyncio.to_thread(sys.stdin.readline)

    asyncio.run(_ours_async(spec, stomp_proto.asyncio.connect, readline, asyncio.sleep))


def run_uvloop(spec: Spec) -> None:
    import uvloop

    import stomp_proto.asyncio

    async def readline() -> str:
        return await asyncio.to_thread(sys.stdin.readline)

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(_ours_async(spec, stomp_proto.asyncio.connect, readline, asyncio.sleep))


def run_trio(spec: Spec) -> None:
    import trio

    import stomp_proto.trio

    async def readline() -> str:
        return await trio.to_thread.run_sync(sys.stdin.readline)

    trio.run(_ours_async, spec, stomp_proto.trio.connect, readline, trio.sleep)


def run_threads(spec: Spec) -> None:
    import stomp_proto.threads

    body = b"x" * spec.size
    with stomp_proto.threads.connect(spec.host, spec.port, **_ours_options(spec)) as client:
        if spec.role == "consumer":
            tally = Tally(spec)
            headers = _subscribe_headers(spec)
            with client.subscribe(spec.destination, ack=spec.ack, headers=headers) as sub:  # type: ignore[arg-type]
                _say("ready")
                tally.start()
                client_ack = spec.ack != "auto"
                for message in sub:
                    done = tally.hit(_headers_get(message.headers, "x-ts"))
                    if client_ack:
                        client.ack(message)
                    if done:
                        break
            return
        _produce(spec, lambda headers: client.send(spec.destination, body, headers=headers))


def run_bare(spec: Spec) -> None:
    """A bare ClientConnection loop: examples/plain_socket_client.py, used as it stands."""
    sys.path.insert(0, str(ROOT / "examples"))
    from plain_socket_client import PlainSocketClient

    from stomp_proto import Connect, Connected, Disconnect, Message, Receipt, Send, Subscribe

    body = b"x" * spec.size
    client = PlainSocketClient(spec.host, spec.port)
    client.send(
        Connect(
            host=spec.vhost,
            accept_versions=("1.2",),
            login=spec.login,
            passcode=spec.passcode,
            heartbeat=HEARTBEAT,
        )
    )
    client.expect(Connected)
    if spec.role == "consumer":
        tally = Tally(spec)
        headers = tuple(_subscribe_headers(spec).items())
        client.send(Subscribe(spec.destination, id="1", ack=spec.ack, headers=headers))  # type: ignore[arg-type]
        _say("ready")
        tally.start()
        client_ack = spec.ack != "auto"
        while True:
            message = client.expect(Message)
            assert isinstance(message, Message)
            done = tally.hit(_headers_get(message.headers, "x-ts"))
            if client_ack:
                client.sock.sendall(client.conn.ack(message))
            if done:
                break
    else:
        destination = spec.destination
        _produce(
            spec,
            lambda headers: client.send(Send(destination, body, headers=tuple(headers.items()))),
        )
    client.send(Disconnect(receipt="bye"))
    client.expect(Receipt)
    client.sock.close()


def _floor_frame(socket_: socket.socket, buffer: bytearray) -> bytes:
    """Read one whole frame of the start of the connection (CONNECTED, RECEIPT)."""
    while b"\0" not in buffer:
        data = socket_.recv(65536)
        if not data:
            raise ConnectionError("the broker closed the connection")
        buffer += data
    frame, _, rest = bytes(buffer).partition(b"\0")
    buffer[:] = rest
    return frame


def run_floor(spec: Spec) -> None:
    """The least a Python client can do: no STOMP library, a blocking socket.

    The producer writes pre-made SEND frames (only the ``x-ts`` stamp is made per
    message), gathered into writes of 64 KiB or more during the burst.  The consumer
    reads into one buffer and finds each frame's end with ``bytes.find``; in
    client-individual mode it takes the ``ack`` header the same way and writes its
    ACK at once, as every other consumer here does.  No frame is parsed or checked:
    this is not a client, only what the wake-ups and the system calls of the
    messages cost, under the same settings as the other rows.
    """
    sock = socket.create_connection((spec.host, spec.port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    connect = (
        f"CONNECT\naccept-version:1.2\nhost:{spec.vhost}\nlogin:{spec.login}\n"
        f"passcode:{spec.passcode}\nheart-beat:{HEARTBEAT[0]},{HEARTBEAT[1]}\n\n\0"
    )
    sock.sendall(connect.encode())
    pending = bytearray()
    if not _floor_frame(sock, pending).startswith(b"CONNECTED"):
        raise ConnectionError("the broker refused the connection")
    if spec.role == "consumer":
        prefetch = _subscribe_headers(spec)["prefetch-count"]
        sock.sendall(
            f"SUBSCRIBE\nid:1\ndestination:{spec.destination}\nack:{spec.ack}\n"
            f"prefetch-count:{prefetch}\n\n\0".encode()
        )
        _say("ready")
        tally = Tally(spec)
        tally.start()
        _floor_consume(sock, spec, tally, bytes(pending))
        sock.sendall(b"UNSUBSCRIBE\nid:1\n\n\0")
    else:
        head = f"SEND\ndestination:{spec.destination}\ncontent-length:{spec.size}\nx-ts:"
        tail = b"\n\n" + b"x" * spec.size + b"\0"
        prefix = head.encode()

        def frame() -> bytes:
            return prefix + _stamp().encode() + tail

        _say("ready")
        sys.stdin.readline()  # go
        start, cpu0 = time.monotonic_ns(), time.process_time()
        batch: list[bytes] = []
        gathered = 0
        for _ in range(spec.count):
            data = frame()
            batch.append(data)
            gathered += len(data)
            if gathered >= 65536:
                sock.sendall(b"".join(batch))
                batch.clear()
                gathered = 0
        if batch:
            sock.sendall(b"".join(batch))
        _say("sent", start=start, cpu=time.process_time() - cpu0)
        sys.stdin.readline()  # latency
        for wait in _paced(spec):
            time.sleep(wait)
            sock.sendall(frame())
        sys.stdin.readline()  # finish
    sock.sendall(b"DISCONNECT\nreceipt:bye\n\n\0")
    pending.clear()
    while not _floor_frame(sock, pending).lstrip(b"\r\n").startswith(b"RECEIPT"):
        pass
    sock.close()


def _floor_consume(sock: socket.socket, spec: Spec, tally: Tally, carried: bytes) -> None:
    client_ack = spec.ack != "auto"
    buffer = bytearray(65536)
    view = memoryview(buffer)
    data = carried
    while True:
        start = 0
        while (end := data.find(b"\0", start)) >= 0:
            stamp = None
            if tally.received >= tally.count:  # the latency phase: its stamp
                at = data.find(b"\nx-ts:", start, end) + 6
                stamp = data[at : data.find(b"\n", at)].decode()
            if client_ack:
                at = data.find(b"\nack:", start, end) + 5
                sock.sendall(b"ACK\nid:" + data[at : data.find(b"\n", at)] + b"\n\n\0")
            if tally.hit(stamp):
                return
            start = end + 1
        received = sock.recv_into(buffer)
        if not received:
            raise ConnectionError("the broker closed the connection")
        data = data[start:] + view[:received] if start < len(data) else bytes(view[:received])


# the peers -------------------------------------------------------------------------------


def run_stomppy(spec: Spec) -> None:
    import stomp

    stomppy_program(spec, stomp)


def run_stomppy_layer(spec: Spec) -> None:
    import stomp_proto.stomppy

    stomppy_program(spec, stomp_proto.stomppy)


def stomppy_program(spec: Spec, stomp: Any) -> None:
    """A stomp.py program: ``stomp`` is stomp.py itself or stomp_proto.stomppy."""
    body = b"x" * spec.size
    conn = stomp.Connection12([(spec.host, spec.port)], heartbeats=HEARTBEAT, vhost=spec.vhost)
    done = threading.Event()
    if spec.role == "consumer":
        tally = Tally(spec)
        client_ack = spec.ack != "auto"

        class Listener(stomp.ConnectionListener):  # type: ignore[misc]
            def on_message(self, frame: Any) -> None:
                headers = frame.headers
                if tally.hit(headers.get("x-ts")):
                    done.set()
                if client_ack:
                    conn.ack(headers["ack"])

        conn.set_listener("bench", Listener())
    conn.connect(spec.login, spec.passcode, wait=True)
    try:
        if spec.role == "consumer":
            conn.subscribe(spec.destination, id="1", ack=spec.ack, headers=_subscribe_headers(spec))
            _say("ready")
            tally.start()
            done.wait()
            conn.unsubscribe(id="1")
            return
        _produce(spec, lambda headers: conn.send(spec.destination, body, headers=headers))
    finally:
        conn.disconnect()


def run_stompman(spec: Spec) -> None:
    import stompman

    asyncio.run(_stompman(spec, stompman))


async def _stompman(spec: Spec, stompman: Any) -> None:
    body = b"x" * spec.size
    server = stompman.ConnectionParameters(
        host=spec.host,
        port=spec.port,
        login=spec.login,
        passcode=spec.passcode,
        connect_headers={"host": spec.vhost},
    )
    heartbeat = stompman.Heartbeat(*HEARTBEAT)
    async with stompman.Client(servers=[server], heartbeat=heartbeat) as client:
        if spec.role == "consumer":
            tally = Tally(spec)
            finished = asyncio.Event()

            async def handler(frame: Any) -> None:
                if tally.hit(frame.headers.get("x-ts")):
                    finished.set()

            def suppressed(exc: Exception, frame: Any) -> None:
                print(f"stompman handler failed: {exc!r}", file=sys.stderr)

            subscription = await client.subscribe(
                spec.destination,
                handler,
                ack=spec.ack,
                headers=_subscribe_headers(spec),
                on_suppressed_exception=suppressed,
            )
            _say("ready")
            tally.start()
            await finished.wait()
            await subscription.unsubscribe()
            return
        await _produce_async(
            spec,
            lambda headers: client.send(body, spec.destination, headers=headers),
            lambda: asyncio.to_thread(sys.stdin.readline),
            asyncio.sleep,
        )


RUNNERS: dict[str, Callable[[Spec], None]] = {
    "asyncio": run_asyncio,
    "uvloop": run_uvloop,
    "trio": run_trio,
    "threads": run_threads,
    "bare": run_bare,
    "floor": run_floor,
    "stomp.py": run_stomppy,
    "stomppy": run_stomppy_layer,
    "stompman": run_stompman,
}


def worker_main(text: str) -> None:
    logging.basicConfig(level=logging.CRITICAL)
    spec = Spec(**json.loads(text))
    if spec.client in OUR_CLIENTS or spec.client.endswith(COMPILED):
        import stomp_proto

        wanted = "accelerated" if spec.client.endswith(COMPILED) else "pure"
        build = getattr(stomp_proto, "BUILD", "pure")  # an older checkout has no BUILD
        if build != wanted:  # a silent fallback would mislabel the row
            raise SystemExit(f"{spec.client}: stomp_proto is the {build} build")
    profile_dir = os.environ.get("STOMP_BENCH_PROFILE")
    if profile_dir:
        import cProfile

        profiler = cProfile.Profile()
        profiler.runcall(RUNNERS[implementation(spec.client)], spec)
        profiler.dump_stats(
            Path(profile_dir) / f"{spec.client}-{spec.size}-{spec.ack}-{spec.role}.prof"
        )
    else:
        RUNNERS[implementation(spec.client)](spec)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    _say("exit", cpu=usage.ru_utime + usage.ru_stime, maxrss_kib=usage.ru_maxrss)


# -- the embedded broker process ------------------------------------------------------------


def _rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def broker_main(trace: bool, build: str | None = None) -> None:
    """Serve the embedded broker; answer ``stats`` lines on stdin until EOF or ``quit``.

    ``build``, when given, is the stomp_proto build the process must have imported
    (a silent fallback to the pure build would mislabel the broker's figures).
    """
    import gc
    import tracemalloc

    import stomp_proto
    from stomp_proto.broker import Broker

    loaded = getattr(stomp_proto, "BUILD", "pure")  # an older checkout has no BUILD
    if build is not None and loaded != build:
        raise SystemExit(f"broker process: stomp_proto is the {loaded} build, not {build}")

    if trace:
        tracemalloc.start()

    async def serve() -> None:
        async with Broker("127.0.0.1", 0, max_queue_length=1_000_000) as broker:
            _say("port", port=broker.port)
            loop = asyncio.get_running_loop()
            while True:
                line = await loop.run_in_executor(None, sys.stdin.readline)
                command = line.strip()
                if command in ("", "quit"):
                    return
                if command == "stats":
                    gc.collect()
                    _say(
                        "stats",
                        cpu=time.process_time(),
                        rss_kib=_rss_kib(),
                        traced=tracemalloc.get_traced_memory()[0] if trace else None,
                        sessions=len(broker.core.sessions),
                    )

    profile_dir = os.environ.get("STOMP_BENCH_PROFILE")
    if profile_dir:
        import cProfile

        profiler = cProfile.Profile()
        profiler.runcall(asyncio.run, serve())
        profiler.dump_stats(Path(profile_dir) / f"broker-{os.getpid()}.prof")
    else:
        asyncio.run(serve())


class BrokerProcess:
    """The embedded broker in a child process, with its ``stats`` channel."""

    def __init__(self, *, trace: bool = False, accelerated: bool = False) -> None:
        args = [sys.executable, str(Path(__file__).resolve()), "--broker-process"]
        if trace:
            args.append("--trace")
        if accelerated:  # the copy that --compiled built, checked by broker_main
            args += ["--broker-build", "accelerated"]
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=_child_env(COMPILED if accelerated else ""),
            cwd=ROOT,
        )
        self.port = int(self._read("port")["port"])

    def _read(self, kind: str) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        got, _, payload = line.partition(" ")
        if got != kind:
            raise RuntimeError(f"broker process: expected {kind!r}, got {line!r}")
        return dict(json.loads(payload))

    def stats(self) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write("stats\n")
        self.proc.stdin.flush()
        return self._read("stats")

    def cpu(self) -> float:
        return float(self.stats()["cpu"])

    def close(self) -> None:
        if self.proc.stdin is not None:
            with _suppress():
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return exc[0] is not None and issubclass(exc[0], OSError)  # type: ignore[arg-type]


def build_compiled(directory: Path) -> str:
    """Build an accelerated copy of the measured stomp_proto in ``directory``; return its root.

    The copy is made and built by that checkout's own ``scripts/build_accelerated.py``.
    """
    source = Path(os.environ.get("STOMP_BENCH_ROOT", str(ROOT)))
    print(f"building {source / 'stomp_proto'} with its native fast path ...", file=sys.stderr)
    build = source / "scripts" / "build_accelerated.py"
    subprocess.run(
        [sys.executable, str(build), "--target", str(directory)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return str(directory)


def _child_env(client: str = "") -> dict[str, str]:
    env = dict(os.environ)
    # The stomp_proto next to benchmarks/ is the one measured, installed or not; a
    # "[compiled]" row takes the accelerated copy that --compiled built.
    root = env.get("STOMP_BENCH_ROOT", str(ROOT))
    if client.endswith(COMPILED):
        root = env["STOMP_BENCH_COMPILED_ROOT"]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    return env


# -- the orchestrator ---------------------------------------------------------------------


@dataclass
class Target:
    name: str
    host: str
    port: int
    login: str
    passcode: str
    vhost: str


@dataclass
class Row:
    broker: str
    client: str
    size: int
    ack: str
    count: int
    ok: bool = False
    error: str = ""
    msgs_per_s: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    producer_cpu: float = 0.0
    consumer_cpu: float = 0.0
    #: CPU seconds of producer and consumer together per 100k messages.
    cpu_per_100k: float = 0.0
    #: The broker's CPU seconds per 100k messages (RabbitMQ: when its PID is known).
    broker_cpu_per_100k: float | None = None
    latency_samples: int = 0
    #: Runs combined into this row (the median of each figure), and why others failed.
    runs: int = 1
    failed_runs: list[str] = field(default_factory=list)

    @property
    def scenario(self) -> str:
        return f"{self.broker} {_size_label(self.size)} {self.ack}"


def _size_label(size: int) -> str:
    return f"{size // 1024} KiB" if size >= 1024 and size % 1024 == 0 else f"{size} B"


class Worker:
    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(asdict(spec))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=_child_env(spec.client),
            cwd=ROOT,
        )

    def expect(self, kind: str) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        got, _, payload = line.strip().partition(" ")
        if got != kind:
            raise RuntimeError(
                f"{self.spec.client} {self.spec.role}: expected {kind!r}, got {line!r}"
            )
        return dict(json.loads(payload)) if payload else {}

    def tell(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def run_row(
    target: Target,
    broker_cpu: Callable[[], float | None] | None,
    client: str,
    size: int,
    ack: str,
    count: int,
    latency_count: int,
) -> Row:
    row = Row(target.name, client, size, ack, count)
    destination = f"/queue/stomp-proto-bench-{uuid.uuid4().hex[:12]}"
    common = dict(
        client=client,
        host=target.host,
        port=target.port,
        login=target.login,
        passcode=target.passcode,
        vhost=target.vhost,
        destination=destination,
        size=size,
        ack=ack,
        count=count,
        latency_count=latency_count,
    )
    workers: list[Worker] = []
    watchdog = threading.Timer(ROW_TIMEOUT, lambda: [w.kill() for w in workers])
    watchdog.start()
    try:
        consumer = Worker(Spec(role="consumer", **common))  # type: ignore[arg-type]
        workers.append(consumer)
        consumer.expect("ready")
        producer = Worker(Spec(role="producer", **common))  # type: ignore[arg-type]
        workers.append(producer)
        producer.expect("ready")
        before = broker_cpu() if broker_cpu is not None else None
        producer.tell("go")
        sent = producer.expect("sent")
        drained = consumer.expect("drained")
        after = broker_cpu() if broker_cpu is not None else None
        producer.tell("latency")
        latencies = sorted(consumer.expect("latency")["latencies"])
        producer.tell("finish")
        producer.expect("exit")
        consumer.expect("exit")
        for worker in workers:
            if worker.proc.wait(timeout=30) != 0:
                raise RuntimeError(
                    f"{client} {worker.spec.role} exited with {worker.proc.returncode}"
                )
    except Exception as exc:  # one failing row must not end the run
        row.error = str(exc) or repr(exc)
        return row
    finally:
        watchdog.cancel()
        for worker in workers:
            worker.kill()
    elapsed = (drained["last"] - sent["start"]) / 1e9
    row.ok = True
    row.msgs_per_s = count / elapsed
    row.producer_cpu = sent["cpu"]
    row.consumer_cpu = drained["cpu"]
    row.cpu_per_100k = (sent["cpu"] + drained["cpu"]) * 100_000 / count
    if before is not None and after is not None and after >= before:
        row.broker_cpu_per_100k = (after - before) * 100_000 / count
    row.latency_samples = len(latencies)
    row.p50_ms = statistics.median(latencies) / 1e6
    row.p99_ms = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] / 1e6
    return row


def _summary(row: Row) -> str:
    if not row.ok:
        return f"FAILED: {row.error}"
    return (
        f"{row.msgs_per_s:9,.0f} msg/s  p50 {row.p50_ms:7.2f} ms  "
        f"p99 {row.p99_ms:7.2f} ms  CPU {row.cpu_per_100k:5.1f} s/100k"
    )


def combine(runs: Sequence[Row]) -> Row:
    """One row from repeated runs: the median of each figure over the runs that worked."""
    good = [r for r in runs if r.ok]
    if not good:
        return runs[-1]
    row = Row(good[0].broker, good[0].client, good[0].size, good[0].ack, good[0].count, ok=True)
    for name in ("msgs_per_s", "p50_ms", "p99_ms", "producer_cpu", "consumer_cpu", "cpu_per_100k"):
        setattr(row, name, statistics.median(getattr(r, name) for r in good))
    broker = [r.broker_cpu_per_100k for r in good if r.broker_cpu_per_100k is not None]
    row.broker_cpu_per_100k = statistics.median(broker) if broker else None
    row.latency_samples = sum(r.latency_samples for r in good)
    row.runs = len(good)
    row.failed_runs = [r.error for r in runs if not r.ok]
    return row


def rabbitmq_cpu() -> Callable[[], float | None] | None:
    """Reads RabbitMQ's CPU seconds from /proc, if ``scripts/start-brokers.sh`` started it here.

    The PID is read again on every call: a test run on the same machine may
    restart the broker, and then the reading of that row is ``None``.
    """
    state = Path(os.environ.get("STOMP_BROKERS_DIR", "/tmp/stomp-proto-brokers")) / "rabbitmq"
    ticks = os.sysconf("SC_CLK_TCK")

    def cpu() -> float | None:
        try:
            pid = int((state / "rabbitmq.pid").read_text().strip())
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except (OSError, ValueError):
            return None
        return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime

    return cpu if cpu() is not None else None


def rabbitmq_target() -> Target | str:
    """RabbitMQ's coordinates from the environment, or why it cannot be used."""
    env = os.environ
    target = Target(
        "rabbitmq",
        env.get("RABBITMQ_STOMP_HOST", "127.0.0.1"),
        int(env.get("RABBITMQ_STOMP_PORT", "61613")),
        env.get("RABBITMQ_STOMP_USER", "guest"),
        env.get("RABBITMQ_STOMP_PASSWORD", "guest"),
        env.get("RABBITMQ_STOMP_VHOST", "/"),
    )
    try:
        with socket.create_connection((target.host, target.port), timeout=3) as sock:
            sock.settimeout(3)
            sock.sendall(
                b"CONNECT\naccept-version:1.2\nhost:%s\nlogin:%s\npasscode:%s\n\n\x00"
                % (target.vhost.encode(), target.login.encode(), target.passcode.encode())
            )
            reply = sock.recv(4096)
    except OSError as exc:
        return f"RabbitMQ does not answer on {target.host}:{target.port} ({exc})"
    if not reply.startswith(b"CONNECTED"):
        return f"RabbitMQ on {target.host}:{target.port} refused CONNECT: {reply[:200]!r}"
    return target


# -- report -------------------------------------------------------------------------------


def table(rows: Sequence[Row]) -> str:
    """The results as an RST simple table, with ratios to stomp.py in the same scenario."""
    base = {(r.broker, r.size, r.ack): r for r in rows if r.client == "stomp.py" and r.ok}
    head = (
        "broker",
        "body",
        "ack",
        "client",
        "msg/s",
        "x stomp.py",
        "p50 ms",
        "p99 ms",
        "CPU s/100k",
        "CPU x stomp.py",
        "broker CPU s/100k",
    )
    lines = []
    for r in rows:
        if not r.ok:
            lines.append(
                (
                    r.broker,
                    _size_label(r.size),
                    r.ack,
                    r.client,
                    "failed",
                    r.error[:60],
                    "",
                    "",
                    "",
                    "",
                    "",
                )
            )
            continue
        b = base.get((r.broker, r.size, r.ack))
        lines.append(
            (
                r.broker,
                _size_label(r.size),
                r.ack,
                r.client,
                f"{r.msgs_per_s:,.0f}",
                f"{r.msgs_per_s / b.msgs_per_s:.2f}" if b else "-",
                f"{r.p50_ms:.2f}",
                f"{r.p99_ms:.2f}",
                f"{r.cpu_per_100k:.1f}",
                f"{r.cpu_per_100k / b.cpu_per_100k:.2f}" if b else "-",
                "-" if r.broker_cpu_per_100k is None else f"{r.broker_cpu_per_100k:.1f}",
            )
        )
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(head)]
    rule = "  ".join("=" * w for w in widths)

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return "\n".join([rule, fmt(head), rule, *(fmt(line) for line in lines), rule])


COLOURS = {
    "asyncio": "#1f77b4",
    "uvloop": "#9467bd",
    "trio": "#17becf",
    "threads": "#2ca02c",
    "bare": "#7f7f7f",
    "floor": "#bcbd22",
    "stomp.py": "#d62728",
    "stompman": "#ff7f0e",
    # the compiled build's rows: a darker shade of the same client's colour
    "asyncio[compiled]": "#0b3c61",
    "uvloop[compiled]": "#4b2a66",
    "trio[compiled]": "#0b6a73",
    "threads[compiled]": "#145214",
    "bare[compiled]": "#3b3b3b",
    "stomppy": "#e377c2",
    "stomppy[compiled]": "#8c2d6f",
}


def svg(rows: Sequence[Row], title: str) -> str:
    """A grouped bar chart (messages/s and CPU per 100k messages), stdlib only."""
    scenarios: list[str] = []
    for r in rows:
        if r.scenario not in scenarios:
            scenarios.append(r.scenario)
    clients = ordered_clients(r.client for r in rows)
    by_key = {(r.scenario, r.client): r for r in rows if r.ok}
    bar, gap, label_w, panel_w = 9, 10, 230, 330
    group_h = bar * len(clients) + gap
    top = 60
    height = top + group_h * len(scenarios) + 40
    width = label_w + 2 * panel_w + 100
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14">{_esc(title)}</text>',
    ]
    panels = [
        ("messages/s (higher is better)", lambda r: r.msgs_per_s, "{:,.0f}"),
        (
            "client CPU s per 100k messages (lower is better; axis cut)",
            lambda r: r.cpu_per_100k,
            "{:.1f}",
        ),
    ]
    for p, (name, value, form) in enumerate(panels):
        x0 = label_w + p * (panel_w + 30)
        values = [value(r) for r in by_key.values()] or [1.0]
        top_value = max(values) or 1.0
        if p == 1:
            # One slow peer would flatten every other CPU bar: the axis stops at
            # 3x stomp.py's largest figure, longer bars are cut (marked, with values).
            reference = [value(r) for r in by_key.values() if r.client == "stomp.py"]
            if reference:
                top_value = min(top_value, 3 * max(reference)) or 1.0
        scale = (panel_w - 60) / top_value
        out.append(f'<text x="{x0}" y="{top - 14}" font-size="12">{_esc(name)}</text>')
        out.append(f'<line x1="{x0}" y1="{top - 4}" x2="{x0}" y2="{height - 40}" stroke="#888"/>')
        for g, scenario in enumerate(scenarios):
            for c, client in enumerate(clients):
                row = by_key.get((scenario, client))
                y = top + g * group_h + c * bar
                if row is None:
                    continue
                w = min(value(row), top_value) * scale
                out.append(
                    f'<rect x="{x0}" y="{y}" width="{w:.1f}" height="{bar - 1}" '
                    f'fill="{COLOURS.get(client, "#777")}"/>'
                )
                if value(row) > top_value:  # cut: a white notch near its end
                    out.append(
                        f'<rect x="{x0 + w - 8:.1f}" y="{y}" width="3" height="{bar - 1}" '
                        f'fill="white"/>'
                    )
                out.append(
                    f'<text x="{x0 + w + 3:.1f}" y="{y + bar - 2}" font-size="8">'
                    f"{form.format(value(row))}</text>"
                )
    for g, scenario in enumerate(scenarios):
        y = top + g * group_h + group_h / 2 - gap / 2 + 4
        out.append(f'<text x="{label_w - 8}" y="{y}" text-anchor="end">{_esc(scenario)}</text>')
    x = label_w
    for client in clients:
        colour = COLOURS.get(client, "#777")
        out.append(f'<rect x="{x}" y="{height - 24}" width="10" height="10" fill="{colour}"/>')
        out.append(f'<text x="{x + 14}" y="{height - 15}">{_esc(client)}</text>')
        x += 14 + 7 * len(client)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def environment() -> dict[str, Any]:
    versions: dict[str, str] = {}
    from importlib import metadata

    for name in ("stomp-proto", "stomp.py", "stompman", "trio", "uvloop"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return {
        # When the run started (UTC): benchmarks/summary.py dates the published tables with it.
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "versions": versions,
    }


@dataclass
class Results:
    settings: dict[str, Any]
    environment: dict[str, Any]
    rows: list[Row] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def combine_files(paths: Sequence[Path], json_path: Path | None, svg_path: Path | None) -> int:
    first = json.loads(paths[0].read_text(encoding="utf-8"))
    rows: dict[tuple[str, str, int, str], Row] = {}
    skipped: list[str] = []
    for path in paths:
        data = json.loads(path.read_text(encoding="utf-8"))
        skipped += data.get("skipped", [])
        for fields in data["rows"]:
            row = Row(**fields)
            rows[(row.broker, row.client, row.size, row.ack)] = row
    order = {name: i for i, name in enumerate(ordered_clients(r.client for r in rows.values()))}
    brokers = {name: i for i, name in enumerate(("embedded", "rabbitmq"))}
    ordered = sorted(
        rows.values(),
        key=lambda r: (brokers.get(r.broker, 9), r.size, r.ack, order.get(r.client, 9)),
    )
    results = Results(first["settings"], first["environment"], ordered, skipped)
    print(table(results.rows))
    write(results, json_path, svg_path)
    return 0


def write(results: Results, json_path: Path | None, svg_path: Path | None) -> None:
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(asdict(results), indent=1) + "\n", encoding="utf-8")
    if svg_path:
        svg_path.parent.mkdir(parents=True, exist_ok=True)
        title = f"End to end, {results.settings['count']} messages per row"
        svg_path.write_text(svg(results.rows, title), "utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: few messages")
    parser.add_argument("--count", type=int, help="messages per row (default 20000, quick 1000)")
    parser.add_argument(
        "--latency-count", type=int, help="paced messages (default 2000, quick 100)"
    )
    parser.add_argument(
        "--repeats", type=int, help="runs per row, median reported (default 3, quick 1)"
    )
    parser.add_argument("--brokers", default="embedded,rabbitmq")
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--sizes", default=",".join(map(str, BODIES)))
    parser.add_argument("--acks", default=",".join(ACKS))
    parser.add_argument("--json", type=Path, help="write the results as JSON")
    parser.add_argument("--svg", type=Path, help="write the chart as SVG")
    parser.add_argument(
        "--profile",
        type=Path,
        help="profile every client process with cProfile into this directory",
    )
    parser.add_argument(
        "--from-json",
        type=Path,
        nargs="+",
        metavar="PATH",
        help="no run: combine earlier --json files (a later file's row replaces an earlier "
        "one of the same broker, client, size and ack), print the table, write --json/--svg",
    )
    parser.add_argument(
        "--stomp-proto",
        type=Path,
        help="measure the stomp_proto package in this directory (say, an older checkout)",
    )
    parser.add_argument(
        "--compiled",
        action="store_true",
        help="also run our clients on the accelerated build (scripts/build_accelerated.py "
        "--target, in a temporary directory): rows named asyncio[compiled] and so on",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--broker-process", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--broker-build", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker_main(args.worker)
        return 0
    if args.broker_process:
        broker_main(args.trace, args.broker_build)
        return 0

    if args.from_json:
        return combine_files(args.from_json, args.json, args.svg)
    if args.stomp_proto:
        os.environ["STOMP_BENCH_ROOT"] = str(args.stomp_proto.resolve())
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
        os.environ["STOMP_BENCH_PROFILE"] = str(args.profile.resolve())
    count = args.count or (1000 if args.quick else 20_000)
    latency_count = args.latency_count or (100 if args.quick else 2000)
    repeats = args.repeats or (1 if args.quick else 3)
    clients = [c for c in args.clients.split(",") if c]
    if args.compiled:
        clients = ordered_clients([*clients, *(c + COMPILED for c in clients if c in OUR_CLIENTS)])
        compiled_dir = tempfile.mkdtemp(prefix="stomp-proto-e2e-compiled-")
        atexit.register(shutil.rmtree, compiled_dir, ignore_errors=True)
        os.environ["STOMP_BENCH_COMPILED_ROOT"] = build_compiled(Path(compiled_dir))
    sizes = [int(s) for s in args.sizes.split(",") if s]
    acks = [a for a in args.acks.split(",") if a]
    results = Results(
        settings={
            "count": count,
            "repeats": repeats,
            "latency_count": latency_count,
            "latency_interval_s": LATENCY_INTERVAL,
            "prefetch_count": PREFETCH,
            "heartbeat_ms": list(HEARTBEAT),
            "version": "1.2",
        },
        environment=environment(),
    )
    for name in args.brokers.split(","):
        brokers: list[BrokerProcess] = []
        broker_cpu: Callable[[], float | None] | None = None
        #: Where the "[compiled]" rows go, when not where the others do.
        compiled_side: tuple[Target, Callable[[], float | None]] | None = None
        if name == "embedded":
            brokers.append(BrokerProcess())
            broker_cpu = brokers[0].cpu
            target: Target | str = Target(
                "embedded", "127.0.0.1", brokers[0].port, "guest", "guest", "/"
            )
            if args.compiled:
                brokers.append(BrokerProcess(accelerated=True))
                compiled_side = (
                    Target("embedded", "127.0.0.1", brokers[1].port, "guest", "guest", "/"),
                    brokers[1].cpu,
                )
        elif name == "rabbitmq":
            target = rabbitmq_target()
            broker_cpu = rabbitmq_cpu()
        else:
            parser.error(f"unknown broker {name!r}")
        if isinstance(target, str):
            print(f"skipping the {name} rows: {target}", file=sys.stderr)
            results.skipped.append(target)
            continue
        try:
            for size in sizes:
                for ack in acks:
                    # Repeats interleave the clients, so that a noisy moment
                    # does not fall on one client's runs only.
                    runs: dict[str, list[Row]] = {client: [] for client in clients}
                    for _ in range(repeats):
                        for client in clients:
                            side = (target, broker_cpu)
                            if compiled_side is not None and client.endswith(COMPILED):
                                side = compiled_side
                            row = run_row(*side, client, size, ack, count, latency_count)
                            runs[client].append(row)
                            print(f"{row.scenario:38} {client:9} {_summary(row)}", file=sys.stderr)
                    results.rows.extend(combine(runs[client]) for client in clients)
        finally:
            for broker in brokers:
                broker.close()
    print(table(results.rows))
    write(results, args.json, args.svg)
    return 0 if all(r.ok for r in results.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
