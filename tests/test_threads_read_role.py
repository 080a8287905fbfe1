"""The blocking client's read role: the thread that needs data reads for itself.

A consumer with nothing buffered, or a call waiting for a receipt, waits on
the socket in its own thread while no other thread reads; the background
thread reads only for nobody.  These tests watch which threads wait on the
client's stream and check what must still hold around that: heart-beats go on
while a consumer holds the role, receipts complete for other threads,
``close()`` ends a consumer that reads, a full buffer pauses reading without
losing or reordering anything, and two consumers on two subscriptions both
progress.  Each ends with the leak check of ``test_threads_concurrency``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from test_ack_outbox import _writes
from test_threads_concurrency import HOST, WAIT, BrokerThread, broker, leak_checked, run_all

from stomp_proto import threads as stomp_threads
from stomp_proto.threads import READER_THREAD, Client

__all__ = ["broker"]  # the fixture, imported for the tests below

#: Heart-beats every 100 ms both ways: a client that stops keeping time loses
#: its session within a few hundred milliseconds.
BEAT = (100, 100)


@pytest.fixture
def beating() -> Iterator[BrokerThread]:
    with leak_checked(BrokerThread(heartbeat=BEAT)) as service:
        yield service


def _readers(client: Client) -> list[threading.Thread]:
    """Record, from now on, each thread that waits on the client's stream for data."""
    stream = client._writer.stream
    assert stream is not None
    seen: list[threading.Thread] = []
    wait_readable = stream.wait_readable

    def watched(timeout: float | None) -> bool:
        seen.append(threading.current_thread())
        return wait_readable(timeout)

    stream.wait_readable = watched  # type: ignore[method-assign]
    return seen


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_a_consumer_waiting_in_get_reads_itself_and_keeps_heart_beats(
    beating: BrokerThread,
) -> None:
    with (
        stomp_threads.connect(HOST, beating.port, heartbeat=BEAT, timeout=WAIT) as client,
        client.subscribe("/queue/quiet") as quiet,
    ):
        conn = client.connection
        readers = _readers(client)
        written = _writes(client)
        with pytest.raises(TimeoutError):
            quiet.get(timeout=1.5)  # 15 heart-beat intervals
        assert threading.current_thread() in readers, "get() left the reading to another thread"
        assert b"\n" in written, "no heart-beat went out while the consumer read"
        # The broker's beats were read and ours were sent: the same session lives on.
        assert client.connection is conn and client._core.error is None
        client.send("/queue/quiet", b"after", receipt=True)
        message = quiet.get(timeout=WAIT)
        assert message is not None and message.body == b"after"


def test_the_background_thread_reads_while_nobody_asks(broker: BrokerThread) -> None:
    with (
        stomp_threads.connect(HOST, broker.port, timeout=WAIT) as client,
        client.subscribe("/queue/unasked") as messages,
    ):
        readers = _readers(client)
        client.send("/queue/unasked", b"one")  # no receipt: this thread does not read
        _until(lambda: len(messages._messages) == 1, "nobody read the message in")
        assert {t.name for t in readers} == {READER_THREAD}


def test_a_receipt_completes_while_a_consumer_holds_the_read_role(broker: BrokerThread) -> None:
    with (
        stomp_threads.connect(HOST, broker.port, timeout=WAIT) as client,
        client.subscribe("/queue/waiting") as waiting,
    ):
        readers = _readers(client)
        got: list[object] = []

        def consume() -> None:
            got.append(waiting.get(timeout=WAIT))

        consumer = threading.Thread(target=consume, name="test-consumer")
        consumer.start()
        _until(lambda: consumer in readers, "the consumer never read for itself")
        for n in range(20):  # each RECEIPT is read by whoever holds the role
            client.send("/queue/elsewhere", str(n), receipt=True)
        assert consumer.is_alive(), "the consumer got something it was not sent"
        client.send("/queue/waiting", b"yours")
        consumer.join(WAIT)
        assert not consumer.is_alive()
        assert [m.body for m in got] == [b"yours"]  # type: ignore[attr-defined]


def test_close_ends_a_consumer_that_holds_the_read_role(broker: BrokerThread) -> None:
    client = stomp_threads.connect(HOST, broker.port, timeout=WAIT)
    outcome: list[object] = []
    with client.subscribe("/queue/held") as held:
        readers = _readers(client)

        def consume() -> None:
            outcome.append(held.get())  # no timeout: only close() ends it

        consumer = threading.Thread(target=consume, name="test-consumer")
        consumer.start()
        _until(lambda: consumer in readers, "the consumer never read for itself")
        client.close()
        consumer.join(WAIT)
        assert not consumer.is_alive(), "close() did not end the reading consumer"
    assert outcome == [None]
    assert not [t for t in threading.enumerate() if t.name == READER_THREAD]


def test_two_consumers_on_two_subscriptions_both_progress(broker: BrokerThread) -> None:
    count = 300
    bodies: dict[str, list[bytes]] = {"a": [], "b": []}
    with (
        stomp_threads.connect(HOST, broker.port, timeout=WAIT, max_pending_messages=8) as client,
        client.subscribe("/queue/two-a") as a,
        client.subscribe("/queue/two-b") as b,
    ):

        def consume(subscription: stomp_threads.Subscription, key: str) -> Callable[[], None]:
            def work() -> None:
                for _ in range(count):
                    message = subscription.get(timeout=WAIT)
                    assert message is not None
                    bodies[key].append(message.body)

            return work

        def produce() -> None:
            for n in range(count):
                client.send("/queue/two-a", f"a{n}")
                client.send("/queue/two-b", f"b{n}", receipt=n % 50 == 0)

        run_all([consume(a, "a"), consume(b, "b"), produce])
    assert bodies["a"] == [f"a{n}".encode() for n in range(count)]
    assert bodies["b"] == [f"b{n}".encode() for n in range(count)]


def test_a_full_buffer_pauses_reading_and_heart_beats_go_on(beating: BrokerThread) -> None:
    count = 40
    with (
        stomp_threads.connect(
            HOST, beating.port, heartbeat=BEAT, timeout=WAIT, max_pending_messages=4
        ) as client,
        client.subscribe("/queue/full") as full,
    ):
        conn = client.connection
        for n in range(count):
            client.send("/queue/full", str(n))
        _until(lambda: len(full._messages) == 4, "the buffer never filled")
        written = _writes(client)
        time.sleep(1.0)  # reading is paused: only heart-beats keep the session
        assert len(full._messages) == 4, "the buffer grew past max_pending_messages"
        assert b"\n" in written, "no heart-beat went out while reading was paused"
        taken = [full.get(timeout=WAIT) for _ in range(count)]
        assert [m.body for m in taken if m is not None] == [str(n).encode() for n in range(count)]
        assert client.connection is conn and client._core.error is None


def test_two_threads_waiting_on_one_subscription_both_time_out(broker: BrokerThread) -> None:
    outcomes: list[BaseException] = []
    with (
        stomp_threads.connect(HOST, broker.port, timeout=WAIT) as client,
        client.subscribe("/queue/empty") as empty,
    ):

        def wait() -> None:
            try:
                empty.get(timeout=0.5)
            except TimeoutError as exc:
                outcomes.append(exc)

        run_all([wait, wait])
        assert len(outcomes) == 2
        client.send("/queue/empty", b"late", receipt=True)  # reading goes on after them
        message = empty.get(timeout=WAIT)
        assert message is not None and message.body == b"late"


def test_heart_beats_go_out_while_messages_keep_arriving(beating: BrokerThread) -> None:
    # A message every 10 ms, for 1.5 s: the socket is seldom idle, and an
    # auto-ack consumer writes nothing of its own but heart-beats.
    count = 150
    with (
        stomp_threads.connect(HOST, beating.port, heartbeat=BEAT, timeout=WAIT) as client,
        stomp_threads.connect(HOST, beating.port, heartbeat=BEAT, timeout=WAIT) as producer,
        client.subscribe("/queue/steady") as steady,
    ):
        conn = client.connection
        written = _writes(client)
        got: list[bytes] = []

        def consume() -> None:
            for _ in range(count):
                message = steady.get(timeout=WAIT)
                assert message is not None
                got.append(message.body)

        def produce() -> None:
            for n in range(count):
                producer.send("/queue/steady", str(n))
                time.sleep(0.01)

        run_all([consume, produce])
        assert got == [str(n).encode() for n in range(count)]
        assert b"\n" in written, "no heart-beat went out while messages kept arriving"
        assert client.connection is conn and client._core.error is None
