"""Chaos for the clients: a fault-injecting TCP proxy and the workload run through it.

:class:`ChaosProxy` sits between the clients and a broker, on 127.0.0.1 only,
and on request cuts every connection it carries - with a reset (RST), with a
clean close (FIN), or in the middle of a frame - stalls them like a network
partition (bytes are held, not lost, until the stall ends), or adds latency.
:func:`inject` applies a seeded random series of those faults.

:func:`workload` runs, on one client adapter, a producer that sends numbered
messages with receipts and a consumer that acknowledges each one
(client-individual), both through the proxy, with reconnects on.  It returns
:class:`ChaosResult`: what was confirmed, what arrived, the longest silence at
the consumer, how long the producer took to recover after each failure, and
every exception a wait ended with.  ``tests/test_chaos.py`` asserts on it;
``scripts/chaos.sh`` runs it for minutes and prints the table.

:class:`BrokerProcess` is an embedded broker in a process of its own, for the
faults a proxy cannot make: killed (``kill -9``) or frozen (``SIGSTOP``); and
:func:`hung_listener` a port whose connections are accepted and never answered.

Like ``helpers``, this module is imported by name (``tests/`` is on ``sys.path``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from adapter_harness import Backoff, ConnectionLost, Harness, free_port
from timeouts import bound_text, scaled

from stomp_proto import LocalProtocolError

__all__ = [
    "FAULTS",
    "BrokerProcess",
    "ChaosProxy",
    "ChaosResult",
    "Fault",
    "broker_processes",
    "hung_listener",
    "inject",
    "start_proxy",
    "workload",
]

HOST = "127.0.0.1"
CHUNK = 64 * 1024


@dataclass(eq=False)
class _Pair:
    """One proxied connection: the client's side and the broker's side."""

    client: asyncio.StreamWriter
    broker: asyncio.StreamWriter
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    #: Set by a mid-frame cut: the next chunk from the broker is cut in two,
    #: its first half delivered, then the connection reset.
    cut_next: bool = False


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (RST), not a FIN: SO_LINGER with a zero timeout."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class ChaosProxy:
    """A TCP proxy on 127.0.0.1 that forwards to ``target_port`` and injects faults.

    Runs on the event loop that calls :meth:`start`.  ``open_connections``
    counts the client connections it carries now; ``accepted`` all it took.
    """

    def __init__(self, target_port: int, target_host: str = HOST) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.latency = 0.0
        self.accepted = 0
        self._server: asyncio.Server | None = None
        self._pairs: set[_Pair] = set()
        #: The server's task of each connection it carries (ended by close()).
        self._accepting: set[asyncio.Task[Any]] = set()
        self._closed = False
        self._flowing = asyncio.Event()
        self._flowing.set()

    @property
    def open_connections(self) -> int:
        return len(self._pairs)

    async def wait_closed(self, seconds: float = 5.0) -> int:
        """Wait until the clients have closed every connection (or ``seconds``,
        scaled by the load factor, pass); how many are still open."""
        deadline = asyncio.get_running_loop().time() + scaled(seconds)
        while self._pairs and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
        return len(self._pairs)

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, HOST, 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def close(self) -> None:
        self._closed = True
        if self._server is not None:
            self._server.close()
        pairs = list(self._pairs)
        for pair in pairs:
            self._drop(pair, _reset)
        await asyncio.gather(*self._accepting, return_exceptions=True)
        await asyncio.gather(
            *(task for pair in pairs for task in pair.tasks), return_exceptions=True
        )
        if self._server is not None:
            await self._server.wait_closed()

    # -- faults ----------------------------------------------------------------------

    def cut(self, how: str) -> int:
        """Cut every connection: ``"rst"``, ``"fin"`` or ``"mid-frame"``; how many."""
        pairs = list(self._pairs)
        for pair in pairs:
            if how == "mid-frame":
                pair.cut_next = True
            else:
                self._drop(pair, _reset if how == "rst" else _close)
        return len(pairs)

    async def stall(self, seconds: float) -> None:
        """Forward nothing, either way, for ``seconds`` (bytes wait; none are lost)."""
        self._flowing.clear()
        try:
            await asyncio.sleep(seconds)
        finally:
            self._flowing.set()

    async def slow(self, latency: float, seconds: float) -> None:
        """Delay every chunk by ``latency`` seconds, for ``seconds``."""
        self.latency = latency
        try:
            await asyncio.sleep(seconds)
        finally:
            self.latency = 0.0

    # -- forwarding --------------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        task = asyncio.current_task()
        assert task is not None
        self._accepting.add(task)
        try:
            await self._carry(reader, writer)
        finally:
            self._accepting.discard(task)

    async def _carry(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            broker_reader, broker_writer = await asyncio.open_connection(*self.target)
        except OSError:
            _reset(writer)  # the broker is down: what a load balancer in front of it may do
            return
        if self._closed:
            _reset(writer)
            _reset(broker_writer)
            return
        pair = _Pair(writer, broker_writer)
        self._pairs.add(pair)
        pair.tasks = [
            asyncio.create_task(self._pump(pair, reader, broker_writer, from_broker=False)),
            asyncio.create_task(self._pump(pair, broker_reader, writer, from_broker=True)),
        ]
        await asyncio.gather(*pair.tasks, return_exceptions=True)
        self._drop(pair, _close)

    async def _pump(
        self,
        pair: _Pair,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        from_broker: bool,
    ) -> None:
        try:
            while data := await reader.read(CHUNK):
                await self._flowing.wait()
                if self.latency:
                    await asyncio.sleep(self.latency)
                if from_broker and pair.cut_next:
                    writer.write(data[: max(1, len(data) // 2)])
                    self._drop(pair, _reset)
                    return
                writer.write(data)
                await writer.drain()
            # A FIN from one side: pass it on, as a proxy does.
            if writer.can_write_eof():
                writer.write_eof()
        except (OSError, RuntimeError):
            pass
        finally:
            self._drop(pair, _close)  # a no-op when the pair is gone already

    def _drop(self, pair: _Pair, close: Callable[[asyncio.StreamWriter], None]) -> None:
        if pair not in self._pairs:
            return
        self._pairs.discard(pair)
        for writer in (pair.client, pair.broker):
            close(writer)


def _close(writer: asyncio.StreamWriter) -> None:
    """Close with a FIN, after what is buffered."""
    writer.close()


async def start_proxy(h: Harness, target_port: int) -> ChaosProxy:
    """A :class:`ChaosProxy` to ``target_port`` on the harness's service loop,
    closed when the test ends (whether it passed or not)."""
    proxy = ChaosProxy(target_port)

    async def start() -> None:
        await proxy.start()
        h.service.closers.append(proxy.close)

    await h.on_service(start())
    return proxy


# -- faults ---------------------------------------------------------------------------

FAULTS = ("rst", "fin", "mid-frame", "stall", "latency")


@dataclass(frozen=True)
class Fault:
    """One fault as applied: what, when (seconds since the start), for how long."""

    kind: str
    at: float
    seconds: float = 0.0


async def inject(
    proxy: ChaosProxy,
    seconds: float,
    *,
    seed: int,
    gap: tuple[float, float] = (0.4, 1.2),
    stall: tuple[float, float] = (0.6, 1.6),
    restart: Callable[[], Awaitable[None]] | None = None,
) -> list[Fault]:
    """Faults at random (seeded) for ``seconds``; what was applied.

    ``restart``: also restart the broker, as one more kind of fault.
    """
    rng = random.Random(seed)
    kinds = list(FAULTS + (("restart",) if restart is not None else ()))
    deck: list[str] = []
    start = time.monotonic()
    applied: list[Fault] = []
    while (now := time.monotonic() - start) < seconds:
        await asyncio.sleep(rng.uniform(*gap))
        if not deck:  # every kind once, in a random order, then again
            deck = rng.sample(kinds, len(kinds))
        kind = deck.pop()
        at = time.monotonic() - start
        if kind == "stall":
            length = rng.uniform(*stall)
            await proxy.stall(length)
            applied.append(Fault(kind, at, length))
        elif kind == "latency":
            length = rng.uniform(0.5, 1.5)
            await proxy.slow(rng.uniform(0.01, 0.05), length)
            applied.append(Fault(kind, at, length))
        elif kind == "restart":
            assert restart is not None
            await restart()
            applied.append(Fault(kind, at, time.monotonic() - start - at))
        else:
            proxy.cut(kind)
            applied.append(Fault(kind, at))
        del now
    return applied


# -- the workload ------------------------------------------------------------------------


@dataclass
class ChaosResult:
    """What one run of :func:`workload` saw."""

    adapter: str
    #: Message numbers whose receipt came: the broker has them.
    confirmed: set[int] = field(default_factory=set)
    #: Sends made (a send that failed is tried again, with the same number).
    attempts: int = 0
    #: Deliveries by message number (more than one: a redelivery).
    received: Counter[int] = field(default_factory=Counter)
    #: Exceptions the client's waits ended with, by type name.
    errors: Counter[str] = field(default_factory=Counter)
    #: Acknowledgements refused because their message came on a connection now gone.
    stale_acks: int = 0
    #: Longest time between two deliveries while messages were due, in seconds.
    longest_gap: float = 0.0
    #: Seconds from each failed send to the next confirmed one.
    recoveries: list[float] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def lost(self) -> set[int]:
        return self.confirmed - set(self.received)

    @property
    def duplicates(self) -> int:
        return sum(count - 1 for count in self.received.values())

    def row(self) -> dict[str, Any]:
        recoveries = sorted(self.recoveries)
        return {
            "client": self.adapter,
            "seconds": round(self.seconds, 1),
            "faults": dict(Counter(fault.kind for fault in self.faults)),
            "sent": len(self.confirmed),
            "attempts": self.attempts,
            "received": len(self.received),
            "lost": len(self.lost),
            "duplicates": self.duplicates,
            "longest_gap_s": round(self.longest_gap, 2),
            "recovery_median_s": round(recoveries[len(recoveries) // 2], 2) if recoveries else 0,
            "recovery_max_s": round(recoveries[-1], 2) if recoveries else 0,
            "errors": dict(self.errors),
        }


#: Exceptions a wait may end with under faults; anything else is a defect.
EXPECTED = (ConnectionLost,)


async def workload(
    h: Harness,
    port: int | None,
    queue: str,
    *,
    seconds: float,
    chaos: Callable[[], Awaitable[list[Fault]]],
    heartbeat: tuple[int, int] = (200, 200),
    drain: float = 20.0,
    send_headers: dict[str, str] | None = None,
    pace: float = 0.0,
    **options: Any,
) -> ChaosResult:
    """Producer and consumer through ``port`` for ``seconds`` while ``chaos()`` runs.

    ``port=None``: the options say where (``hosts=[...]``: failover).

    Then the consumer drains until every confirmed message has arrived (or
    ``drain`` seconds pass).  Exceptions other than :data:`EXPECTED` propagate.
    ``send_headers`` go on every SEND (``persistent: true`` for a broker that restarts).
    ``pace``: seconds the producer waits after each confirmed send (0: none).
    """
    result = ChaosResult(h.adapter)
    options.setdefault("timeout", 10.0)
    backoff = Backoff(initial=0.05, maximum=0.5, reset_after=2.0, error_attempts=100)
    options.setdefault("reconnect", backoff)
    producing = True
    subscribed = False
    start = time.monotonic()

    async def produce(client: Any) -> None:
        nonlocal producing
        number = 0
        failed_at: float | None = None
        try:
            while time.monotonic() - start < seconds:
                result.attempts += 1
                try:
                    await client.send(
                        queue, str(number).encode(), receipt=True, headers=send_headers
                    )
                except EXPECTED as exc:
                    result.errors[type(exc).__name__] += 1
                    failed_at = failed_at or time.monotonic()
                    await h.sleep(0.01)
                    continue
                result.confirmed.add(number)
                number += 1
                if pace:
                    await h.sleep(pace)
                if failed_at is not None:
                    result.recoveries.append(time.monotonic() - failed_at)
                    failed_at = None
        finally:
            producing = False

    async def consume(client: Any) -> None:
        last = time.monotonic()
        ack = "client-individual"
        headers = {"prefetch-count": "50"}
        nonlocal subscribed
        async with client.subscribe(queue, ack=ack, headers=headers) as messages:
            subscribed = True
            deadline: float | None = None
            while True:
                if not producing:
                    deadline = deadline or time.monotonic() + drain
                    if set(result.received) >= result.confirmed or time.monotonic() > deadline:
                        return
                try:
                    message = await messages.get(0.5)
                except TimeoutError:
                    continue
                except EXPECTED as exc:
                    result.errors[type(exc).__name__] += 1
                    continue
                assert message is not None, "the subscription ended under faults"
                now = time.monotonic()
                if producing or not set(result.received) >= result.confirmed:
                    result.longest_gap = max(result.longest_gap, now - last)
                last = now
                result.received[int(message.body)] += 1
                try:
                    await client.ack(message)
                except LocalProtocolError:
                    result.stale_acks += 1  # delivered on a connection now gone
                except EXPECTED as exc:
                    result.errors[type(exc).__name__] += 1

    async def faults() -> None:
        while not subscribed:  # faults begin once both clients are in place
            await h.sleep(0.01)
        result.faults = await chaos()

    async with (
        h.connect(port, heartbeat=heartbeat, **options) as producer,
        h.connect(port, heartbeat=heartbeat, **options) as consumer,
    ):
        await h.gather(produce(producer), consume(consumer), faults())
    result.seconds = time.monotonic() - start
    return result


# -- brokers as processes: killed, frozen, hung ------------------------------------------


class BrokerProcess:
    """``python -m stomp_proto broker`` on a free port of 127.0.0.1, in its own process."""

    def __init__(self) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "stomp_proto", "broker", "--port", str(self.port),
             "--log-level", "error"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip

    @property
    def address(self) -> tuple[str, int]:
        return (HOST, self.port)

    def wait_listening(self, timeout: float = 30.0) -> None:
        """Until the broker accepts connections (or it died: then why); ``timeout`` is
        the bound on an idle machine (scaled by the load factor)."""
        deadline = time.monotonic() + scaled(timeout)
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the broker exited early: {self.process.communicate()}")
            try:
                with socket.create_connection(self.address, timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"nothing listens on port {self.port} after {bound_text(timeout)}")

    def kill(self) -> None:
        """``kill -9``: its connections drop as the system closes them, with no ERROR."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def freeze(self) -> None:
        """``SIGSTOP``: its connections stay open, and it answers nothing, not even a
        heart-beat; the system still completes new TCP connections to it."""
        self.process.send_signal(signal.SIGSTOP)

    def end(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGCONT)
            self.process.kill()
        self.process.communicate(timeout=10)


@contextlib.contextmanager
def broker_processes(count: int) -> Iterator[list[BrokerProcess]]:
    """``count`` brokers, started side by side; each ended (killed) after the block."""
    brokers: list[BrokerProcess] = []
    try:
        for _ in range(count):
            brokers.append(BrokerProcess())
        for broker in brokers:
            broker.wait_listening()
        yield brokers
    finally:
        for broker in brokers:
            broker.end()


@contextlib.contextmanager
def hung_listener() -> Iterator[tuple[str, int]]:
    """The address of a port that takes TCP connections and never answers on them:
    the system completes each connection, and nothing ever reads it."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        sock.listen(64)
        yield (HOST, int(sock.getsockname()[1]))
