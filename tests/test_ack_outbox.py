"""The blocking client holds acknowledgements back and writes them together.

An ACK made while more messages of its subscription are buffered (or, with a
wide prefetch window, at any time) waits in the client's outbox and goes out
with the next write, when the consumer finds nothing buffered, or at the latest
``OUTBOX_DELAY`` later (the reader thread sees to that).  These tests count the
writes on the client's stream and check, through the broker, that every ACK
arrived: after the client leaves, nothing is delivered again.
"""

from __future__ import annotations

import queue as queues
import time
from collections.abc import Iterator

import pytest
from test_threads_concurrency import WAIT, BrokerThread, broker  # noqa: F401 (fixture)

from stomp_proto import Message, Subscribe
from stomp_proto import threads as stomp_threads
from stomp_proto._client._outbox import OUTBOX_FRAMES, Outbox, wide_window

COUNT = 50


def _writes(client: stomp_threads.Client) -> list[bytes]:
    """Record every write the client makes from now on."""
    stream = client._writer.stream
    assert stream is not None
    written: list[bytes] = []
    send = stream.send

    def recording(data: bytes) -> None:
        written.append(data)
        send(data)

    stream.send = recording  # type: ignore[method-assign]
    return written


def _fill(client: stomp_threads.Client, queue: str) -> None:
    for n in range(COUNT):
        client.send(queue, f"m{n}".encode())
    client.send(queue, b"last", receipt=True)


def _wait_buffered(subscription: stomp_threads.Subscription, count: int) -> None:
    deadline = time.monotonic() + WAIT
    while len(subscription._messages) < count:
        assert time.monotonic() < deadline, "messages did not arrive"
        time.sleep(0.01)


def _nothing_redelivered(port: int, queue: str) -> None:
    with (
        stomp_threads.connect("127.0.0.1", port, timeout=WAIT) as other,
        other.subscribe(queue, ack="client-individual") as messages,
        pytest.raises(TimeoutError),
    ):
        messages.get(timeout=1.0)


def _take_and_ack(
    client: stomp_threads.Client, messages: stomp_threads.Subscription, count: int
) -> None:
    for _ in range(count):
        message = messages.get(timeout=WAIT)
        assert message is not None
        client.ack(message)


def _acks(data: list[bytes]) -> int:
    return sum(chunk.count(b"ACK\n") for chunk in data)


@pytest.fixture
def queue(request: pytest.FixtureRequest) -> Iterator[str]:
    yield f"/queue/outbox-{request.node.name}"


def test_acks_of_buffered_messages_go_out_in_one_write(
    broker: BrokerThread,  # noqa: F811
    queue: str,
) -> None:
    # No prefetch window declared: ACKs wait only while more messages are
    # buffered, and the ACK of the last buffered one writes them all.
    with (
        stomp_threads.connect("127.0.0.1", broker.port, timeout=WAIT) as client,
        client.subscribe(queue, ack="client-individual") as messages,
    ):
        _fill(client, queue)
        _wait_buffered(messages, COUNT + 1)
        written = _writes(client)
        _take_and_ack(client, messages, COUNT + 1)
        assert _acks(written) == COUNT + 1
        assert len(written) == 1, "one write for all the ACKs"
        assert not client._writer.outbox
    _nothing_redelivered(broker.port, queue)


def test_a_wide_window_holds_acks_until_they_are_due(
    broker: BrokerThread,  # noqa: F811
    queue: str,
) -> None:
    # prefetch-count 1000: the last ACK is held too, and the reader thread
    # writes what is held once it is due, though the consumer asks for nothing.
    headers = {"prefetch-count": "1000"}
    with (
        stomp_threads.connect("127.0.0.1", broker.port, timeout=WAIT) as client,
        client.subscribe(queue, ack="client-individual", headers=headers) as messages,
    ):
        _fill(client, queue)
        _wait_buffered(messages, COUNT + 1)
        written = _writes(client)
        _take_and_ack(client, messages, COUNT + 1)
        deadline = time.monotonic() + WAIT
        while client._writer.outbox:
            assert time.monotonic() < deadline, "held ACKs never went out"
            time.sleep(0.005)
        assert _acks(written) == COUNT + 1
        assert len(written) == 1
    _nothing_redelivered(broker.port, queue)


def test_an_inline_subscription_holds_acks_while_others_are_unsettled(
    broker: BrokerThread,  # noqa: F811
    queue: str,
) -> None:
    # inline=True: the application's own buffer counts.  ACKs wait while other
    # messages it was given are unsettled, and the ACK of the last writes them all.
    given: queues.Queue[Message] = queues.Queue()
    with (
        stomp_threads.connect("127.0.0.1", broker.port, timeout=WAIT) as client,
        client.subscribe(queue, ack="client-individual", on_message=given.put, inline=True),
    ):
        _fill(client, queue)
        deadline = time.monotonic() + WAIT
        while given.qsize() < COUNT + 1:
            assert time.monotonic() < deadline, "messages did not arrive"
            time.sleep(0.01)
        written = _writes(client)
        for _ in range(COUNT + 1):
            client.ack(given.get_nowait())
        assert _acks(written) == COUNT + 1
        assert len(written) == 1, "one write for all the ACKs"
        assert not client._writer.outbox
    _nothing_redelivered(broker.port, queue)


def test_an_inline_subscriptions_held_ack_goes_out_while_another_stays_unsettled(
    broker: BrokerThread,  # noqa: F811
    queue: str,
) -> None:
    # One of two messages acknowledged, the other kept: the ACK is held (another
    # is unsettled), and the reader writes it once due, with nothing else going on.
    given: queues.Queue[Message] = queues.Queue()
    with (
        stomp_threads.connect("127.0.0.1", broker.port, timeout=WAIT) as client,
        client.subscribe(queue, ack="client-individual", on_message=given.put, inline=True),
    ):
        client.send(queue, b"first")
        client.send(queue, b"second", receipt=True)
        first, second = given.get(timeout=WAIT), given.get(timeout=WAIT)
        time.sleep(0.2)  # the background thread has taken the read role and waits on the socket
        written = _writes(client)
        client.ack(first)
        deadline = time.monotonic() + WAIT
        while client._writer.outbox:
            assert time.monotonic() < deadline, "the held ACK never went out"
            time.sleep(0.005)
        assert _acks(written) == 1
        client.ack(second)


def test_an_ack_with_a_receipt_writes_what_is_held(
    broker: BrokerThread,  # noqa: F811
    queue: str,
) -> None:
    client = stomp_threads.connect("127.0.0.1", broker.port, timeout=WAIT)
    try:
        with client.subscribe(queue, ack="client-individual") as messages:
            _fill(client, queue)
            _wait_buffered(messages, COUNT + 1)
            _take_and_ack(client, messages, COUNT)  # one stays buffered: every ACK is held
            assert client._writer.outbox
            remaining = messages.get(timeout=WAIT)
            assert remaining is not None
            client.ack(remaining, receipt=True)  # a receipt is never held back
            assert not client._writer.outbox
    finally:
        client.close()
    _nothing_redelivered(broker.port, queue)


def test_close_without_waiting_still_writes_the_outbox(
    broker: BrokerThread,  # noqa: F811
    queue: str,
) -> None:
    client = stomp_threads.connect("127.0.0.1", broker.port, timeout=WAIT)
    subscribing = client.subscribe(queue, ack="client-individual")  # left open on purpose
    messages = subscribing.__enter__()
    _fill(client, queue)
    _wait_buffered(messages, COUNT + 1)
    for _ in range(COUNT + 1):
        message = messages.get(timeout=WAIT)
        assert message is not None
        if message.body != b"last":
            client.ack(message)
    assert client._writer.outbox, "the ACKs are held (one message was left unacknowledged)"
    client.close()  # no DISCONNECT: the held ACKs must still reach the broker first
    with (
        stomp_threads.connect("127.0.0.1", broker.port, timeout=WAIT) as other,
        other.subscribe(queue, ack="client-individual") as again,
    ):
        redelivered = again.get(timeout=WAIT)
        assert redelivered is not None and redelivered.body == b"last"
        other.ack(redelivered)
        with pytest.raises(TimeoutError):
            again.get(timeout=1.0)


def test_outbox_fills_up_and_asks_for_a_write() -> None:
    outbox = Outbox()
    assert not outbox and outbox.deadline() is None
    for n in range(OUTBOX_FRAMES - 1):
        assert not outbox.hold(b"ACK\n\n\x00", 10.0 + n)
    due = outbox.deadline()
    assert due is not None and 10.0 < due < 11.0  # counted from the first
    assert outbox.hold(b"ACK\n\n\x00", 99.0)
    data = outbox.take(b"\n")
    assert data.count(b"ACK") == OUTBOX_FRAMES and data.endswith(b"\x00\n")
    assert not outbox and outbox.take() == b""


@pytest.mark.parametrize(
    ("headers", "wide"),
    [
        ((), False),
        ((("prefetch-count", "1"),), False),
        ((("prefetch-count", "1000"),), True),
        ((("activemq.prefetchSize", str(2 * OUTBOX_FRAMES)),), True),
        ((("prefetch-count", "lots"),), False),
    ],
)
def test_wide_window(headers: tuple[tuple[str, str], ...], wide: bool) -> None:
    assert wide_window(Subscribe("/queue/a", id="1", headers=headers)) is wide
