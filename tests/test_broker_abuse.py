"""The embedded broker under abuse, as a separate process (``stomp-proto broker``).

Floods that once grew the broker's memory without bound - a queue nobody
consumes, a topic subscriber that never reads, SENDs piled up in open
transactions - must leave its peak RSS within the configured ``--max-memory``
(over its resident size before the flood), while a consumer elsewhere keeps
receiving.  The RSS is the kernel's (``VmHWM``, the peak, in
``/proc/PID/status``), so Linux only.
"""

from __future__ import annotations

import signal
import socket
import sys
from collections.abc import Callable, Iterator

import pytest
from adapter_harness import HOST
from test_cli import start_broker, stop

from stomp_proto import (
    Ack,
    Begin,
    ClientConnection,
    Connect,
    Connected,
    Disconnect,
    Event,
    Message,
    Receipt,
    Send,
    Subscribe,
)

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

MIB = 1024 * 1024
BUDGET = 64 * MIB
#: What the flooders send at most: twice the budget, which an unbounded broker would hold.
FLOOD = 2 * BUDGET
#: Seconds a send may stay stuck before the flooder takes itself for blocked.
STUCK = 2.0


def status(pid: int) -> dict[str, int]:
    """The kB figures of ``/proc/PID/status`` (VmRSS, VmHWM, ...)."""
    figures: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as lines:
        for line in lines:
            name, _, value = line.partition(":")
            if value.strip().endswith(" kB"):
                figures[name] = int(value.split()[0]) * 1024
    return figures


class Peer:
    """A blocking socket speaking STOMP 1.2 through a ClientConnection."""

    def __init__(self, port: int, *, receive_buffer: int | None = None) -> None:
        self.sock = socket.socket()
        if receive_buffer is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self.sock.connect((HOST, port))
        self.sock.settimeout(30)
        self.conn = ClientConnection()
        self.events: list[Event] = []
        self.send(Connect(host="/", accept_versions=("1.2",)))
        assert isinstance(self.wait_for(Connected), Connected)

    def send(self, event: Event) -> None:
        self.sock.sendall(self.conn.send(event))

    def wait_for(self, cls: type[Event]) -> Event:
        while True:
            for index, event in enumerate(self.events):
                if isinstance(event, cls):
                    return self.events.pop(index)
            data = self.sock.recv(65536)
            assert data, f"the broker closed the connection: {self.events}"
            self.conn.receive_data(data)
            self.events.extend(self.conn)

    def close(self) -> None:
        self.sock.close()


def flood(port: int, frame: Callable[[int], list[Event]], receive_buffer: int = 0) -> int:
    """Send ``frame(n)`` for n = 0, 1, ... until FLOOD bytes or the broker stops reading.

    Returns the bytes sent.
    """
    peer = Peer(port)
    peer.sock.settimeout(STUCK)
    sent = 0
    n = 0
    try:
        while sent < FLOOD:
            data = b"".join(peer.conn.send(event) for event in frame(n))
            try:
                peer.sock.sendall(data)
            except TimeoutError:
                return sent  # held back: the broker does not read from it
            sent += len(data)
            n += 1
    finally:
        peer.sock.close()
    return sent


BODY = bytes(256 * 1024)


def to_a_queue_nobody_reads(n: int) -> list[Event]:
    return [Send("/queue/nobody", BODY)]


def to_a_topic(n: int) -> list[Event]:
    return [Send("/topic/flood", BODY)]


def in_open_transactions(n: int) -> list[Event]:
    # 64 KiB SENDs, a new transaction every 16 of them, none committed.
    frames: list[Event] = [Begin(f"tx-{n // 16}")] if n % 16 == 0 else []
    return [*frames, Send("/queue/tx", BODY[: 64 * 1024], transaction=f"tx-{n // 16}")]


@pytest.fixture
def broker() -> Iterator[tuple[int, int]]:
    running = start_broker(
        "--max-memory", str(BUDGET), "--max-queue-bytes", str(BUDGET),
        "--max-transaction-bytes", str(BUDGET),
    )  # fmt: skip
    yield running.port, running.process.pid
    code, _, err = stop(running.process)
    assert code == 130, err
    assert "WARNING STOMP broker: memory alarm" in err, err


@pytest.mark.parametrize(
    "frames", [to_a_queue_nobody_reads, to_a_topic, in_open_transactions], ids=lambda f: f.__name__
)
def test_a_flood_leaves_rss_within_the_budget_and_consumers_served(
    broker: tuple[int, int], frames: Callable[[int], list[Event]]
) -> None:
    port, pid = broker
    # Messages waiting elsewhere, for the consumer that comes during the flood.
    producer = Peer(port)
    for index in range(20):
        producer.send(Send("/queue/elsewhere", str(index).encode()))
    producer.send(Disconnect(receipt="bye"))
    assert isinstance(producer.wait_for(Receipt), Receipt)
    producer.close()
    listener = None
    if frames is to_a_topic:
        # Subscribed, and never read: its private queue fills up.
        listener = Peer(port, receive_buffer=4096)
        listener.send(Subscribe("/topic/flood", id="0", ack="client", receipt="sub"))
        assert isinstance(listener.wait_for(Receipt), Receipt)
    before = status(pid)["VmRSS"]
    sent = flood(port, frames)
    # The broker took in more than its alarm level, then stopped reading.
    assert sent < FLOOD, "the flood was never held back"
    assert sent > BUDGET * 0.8 - 8 * MIB  # less what sits in the socket buffers
    consumer = Peer(port)
    consumer.send(Subscribe("/queue/elsewhere", id="1", ack="client-individual"))
    for index in range(20):
        message = consumer.wait_for(Message)
        assert isinstance(message, Message) and message.body == str(index).encode()
        consumer.send(Ack(message.ack or "", receipt=f"ack-{index}"))
    assert isinstance(consumer.wait_for(Receipt), Receipt)
    consumer.close()
    peak = status(pid)["VmHWM"]
    grown = peak - before
    print(f"sent {sent / MIB:.1f} MiB; RSS {before / MIB:.1f} MiB, peak +{grown / MIB:.1f} MiB")
    assert grown < BUDGET, f"the peak RSS grew by {grown / MIB:.1f} MiB"
    if listener is not None:
        listener.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "kill -9"])
def test_messages_confirmed_persistent_are_gone_after_a_stop(sig: int) -> None:
    """What docs/broker.rst's "Durability: memory only" says: a RECEIPT is memory only."""
    first = start_broker()
    producer = Peer(first.port)
    for index in range(100):
        send = Send("/queue/kept", b"m", headers=(("persistent", "true"),), receipt=f"r{index}")
        producer.send(send)
    for _ in range(100):
        assert isinstance(producer.wait_for(Receipt), Receipt)  # all accepted
    # While it runs, the header is passed on, untouched, like any other.
    consumer = Peer(first.port)
    consumer.send(Subscribe("/queue/kept", id="0", ack="client-individual"))
    message = consumer.wait_for(Message)
    assert isinstance(message, Message) and ("persistent", "true") in message.headers
    code, _, err = stop(first.process, sig)
    producer.close()
    consumer.close()
    assert code == (0 if sig == signal.SIGTERM else -signal.SIGKILL), err
    second = start_broker()
    try:
        peer = Peer(second.port)
        peer.send(Subscribe("/queue/kept", id="0", receipt="sub"))
        # The SUBSCRIBE's receipt comes after any message waiting in the queue.
        assert isinstance(peer.wait_for(Receipt), Receipt)
        assert not [event for event in peer.events if isinstance(event, Message)]
        peer.close()
    finally:
        stop(second.process)
