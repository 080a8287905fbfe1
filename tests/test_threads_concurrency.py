"""The blocking client under concurrency: many threads on one client at once.

Writes happen in the caller's thread under the client's write lock, the
reader thread hands messages over to whoever iterates, and ``close()`` may come
from any thread.  Each test runs against the embedded broker (in an event loop
of its own, in a daemon thread) and ends by checking that the client left
nothing behind: no thread of its own, no open socket or other file descriptor,
no ResourceWarning.
"""

from __future__ import annotations

import asyncio
import gc
import os
import queue
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from stomp_proto import LocalProtocolError
from stomp_proto import threads as stomp_threads
from stomp_proto.broker import Broker
from stomp_proto.threads import ConnectionLost

HOST = "127.0.0.1"
WAIT = 20.0


class BrokerThread:
    """The embedded broker in its own event loop and daemon thread."""

    def __init__(self, **options: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="test-broker")
        self._thread.start()
        self._broker = Broker(HOST, 0, **options)
        self._call(self._broker.__aenter__())
        self.port = self._broker.port

    def _call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(WAIT)

    def close(self) -> None:
        self._call(self._broker.__aexit__(None, None, None))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(WAIT)
        self.loop.close()


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else set()


@pytest.fixture
def broker() -> Iterator[BrokerThread]:
    """The broker, and the check that the client under test leaked nothing."""
    with leak_checked(BrokerThread()) as service:
        yield service


@contextmanager
def leak_checked(service: BrokerThread) -> Iterator[BrokerThread]:
    """Run a test on ``service``; then check that the client left nothing behind."""
    threads_before = set(threading.enumerate())
    fds_before = _open_fds()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        try:
            yield service
        finally:
            gc.collect()  # an unclosed socket warns when it is collected
    leaked_threads = [
        t for t in set(threading.enumerate()) - threads_before if t.name != "test-broker"
    ]
    resource = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    # The broker's own sockets come and go in its thread: compare after it stops.
    service.close()
    fds_after = _open_fds()
    assert not leaked_threads, f"threads left running: {leaked_threads}"
    assert not resource, resource
    assert fds_after <= fds_before, f"file descriptors left open: {fds_after - fds_before}"


def run_all(workers: list[Callable[[], None]]) -> None:
    """Run each worker in a thread of its own; raise the first failure."""
    errors: list[BaseException] = []

    def guarded(work: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                work()
            except BaseException as exc:  # reported below, in the test's thread
                errors.append(exc)

        return run

    started = [threading.Thread(target=guarded(w), name="test-worker") for w in workers]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join(WAIT * 3)
    assert not [t for t in started if t.is_alive()], "a worker never finished"
    if errors:
        raise errors[0]


def test_many_threads_send_and_ack_at_once(broker: BrokerThread) -> None:
    senders, per_sender, ackers = 8, 150, 4
    total = senders * per_sender
    handed: queue.Queue[Any] = queue.Queue()
    bodies: Counter[bytes] = Counter()
    with stomp_threads.connect(HOST, broker.port) as client:
        with client.subscribe("/queue/many", ack="client-individual") as messages:

            def send(n: int) -> Callable[[], None]:
                def work() -> None:
                    for i in range(per_sender):
                        # Every tenth with a receipt: waits interleave with writes.
                        client.send("/queue/many", f"{n}-{i}", receipt=i % 10 == 0)

                return work

            def consume() -> None:
                for count, message in enumerate(messages, 1):
                    bodies[message.body] += 1
                    handed.put(message)
                    if count == total:
                        break
                for _ in range(ackers):
                    handed.put(None)

            def ack() -> None:
                while (message := handed.get(timeout=WAIT)) is not None:
                    client.ack(message, receipt=message.body.endswith(b"-7"))

            run_all([send(n) for n in range(senders)] + [consume] + [ack] * ackers)
            assert len(bodies) == total and set(bodies.values()) == {1}
            assert client.connection.pending_acks(messages.id) == ()
        # Everything was acknowledged: nothing comes back to a new subscriber.
        with (
            client.subscribe("/queue/many", ack="client-individual") as again,
            pytest.raises(TimeoutError),
        ):
            again.get(timeout=0.5)


def test_threads_share_one_subscription(broker: BrokerThread) -> None:
    total, readers = 600, 3
    seen: list[list[bytes]] = [[] for _ in range(readers)]
    with (
        stomp_threads.connect(HOST, broker.port, max_pending_messages=16) as client,
        client.subscribe("/queue/shared") as messages,
    ):

        def read(k: int) -> Callable[[], None]:
            def work() -> None:
                while (message := messages.get(timeout=WAIT)) is not None:
                    seen[k].append(message.body)
                    if message.body == b"last":
                        client.close()  # ends the iteration of every reader

            return work

        def produce() -> None:
            for i in range(total - 1):
                client.send("/queue/shared", str(i))
            client.send("/queue/shared", "last")

        run_all([read(k) for k in range(readers)] + [produce])
    everything = [body for bodies in seen for body in bodies]
    # The buffer (16 here) hands each message to exactly one reader, in order overall.
    assert len(everything) == total and len(set(everything)) == total


def test_consumer_iterates_while_others_ack_and_nack(broker: BrokerThread) -> None:
    total = 400
    rejected = {str(i).encode() for i in range(0, total, 5)}  # NACKed once, then redelivered
    expected = total + len(rejected)
    with stomp_threads.connect(HOST, broker.port) as client:
        for i in range(total):
            client.send("/queue/settle", str(i))
        handed: queue.Queue[Any] = queue.Queue()
        settled = Counter[str]()
        lock = threading.Lock()
        with client.subscribe("/queue/settle", ack="client-individual") as messages:

            def consume() -> None:
                for count, message in enumerate(messages, 1):
                    handed.put(message)
                    if count == expected:
                        break
                handed.put(None)
                handed.put(None)

            def settle() -> None:
                while (message := handed.get(timeout=WAIT)) is not None:
                    with lock:
                        first_time = message.body in rejected
                        rejected.discard(message.body)
                        settled["nack" if first_time else "ack"] += 1
                    if first_time:
                        client.nack(message)
                    else:
                        client.ack(message)

            run_all([consume, settle, settle])
            assert settled == {"nack": total // 5, "ack": total}
            assert client.connection.pending_acks(messages.id) == ()


def test_close_from_another_thread_ends_every_blocked_call(broker: BrokerThread) -> None:
    client = stomp_threads.connect(HOST, broker.port)
    outcomes: dict[str, object] = {}
    entered = threading.Barrier(4)

    def iterate(messages: stomp_threads.Subscription) -> Callable[[], None]:
        def work() -> None:
            entered.wait(WAIT)
            outcomes["iterate"] = list(messages)  # blocks: nothing is sent

        return work

    def keep_sending() -> None:
        entered.wait(WAIT)
        sent = 0
        try:
            while True:
                client.send("/queue/elsewhere", b"x", receipt=sent % 50 == 0)
                sent += 1
        except ConnectionLost as exc:
            outcomes["send"] = exc

    def wait_with_timeout(messages: stomp_threads.Subscription) -> Callable[[], None]:
        def work() -> None:
            entered.wait(WAIT)
            outcomes["get"] = messages.get(timeout=WAIT)

        return work

    def closer() -> None:
        entered.wait(WAIT)
        time.sleep(0.3)  # everyone is blocked or busy by now
        client.close()

    with client.subscribe("/queue/quiet") as quiet, client.subscribe("/queue/other") as other:
        run_all([iterate(quiet), keep_sending, wait_with_timeout(other), closer])
    assert outcomes["iterate"] == []  # the iteration ended cleanly
    assert outcomes["get"] is None  # the end of the subscription, not a timeout
    assert isinstance(outcomes["send"], ConnectionLost)
    client.close()  # again: a no-op
    client.disconnect()  # likewise


def test_disconnect_while_another_thread_waits_for_a_receipt(broker: BrokerThread) -> None:
    with stomp_threads.connect(HOST, broker.port) as client:
        done = threading.Event()

        def send_many() -> None:
            try:
                for _ in range(2000):
                    client.send("/queue/busy", b"y" * 512, receipt=True)
            except ConnectionLost:
                pass
            finally:
                done.set()

        worker = threading.Thread(target=send_many, name="test-worker")
        worker.start()
        time.sleep(0.2)
        client.disconnect()
        assert done.wait(WAIT)
        worker.join(WAIT)


def test_close_wakes_a_sender_that_found_the_client_between_sessions(broker: BrokerThread) -> None:
    # The race CI hit: the reader has seen the session end (ready cleared) but
    # close() has not begun; a send() then waited for a reconnection that close()
    # never signals, for the whole timeout.  Here the reader's clear is made by hand.
    client = stomp_threads.connect(HOST, broker.port, timeout=WAIT)
    outcome: list[BaseException] = []

    def send() -> None:
        try:
            client.send("/queue/x", b"x")
        except BaseException as exc:  # the outcome is what the test checks
            outcome.append(exc)

    client._writer.ready.clear()
    worker = threading.Thread(target=send, name="test-worker")
    worker.start()
    time.sleep(0.2)  # the sender is waiting for the connection
    client.close()
    worker.join(WAIT)
    assert not worker.is_alive()
    # ConnectionLost from close(), not TimeoutError after the client's timeout
    assert len(outcome) == 1 and isinstance(outcome[0], ConnectionLost)


def test_on_message_calls_back_in_order_on_a_thread_of_its_own(
    broker: BrokerThread, caplog: pytest.LogCaptureFixture
) -> None:
    """``subscribe(on_message=fn)``: each message to ``fn`` in order, on the dispatch
    thread; a callback that raises is logged with the message, and the next comes."""
    seen: list[tuple[bytes, str]] = []
    done = threading.Event()

    def on_message(message: Any) -> None:
        seen.append((message.body, threading.current_thread().name))
        if message.body == b"2":
            raise RuntimeError("a listener's own bug")
        if message.body == b"9":
            done.set()

    with stomp_threads.connect(HOST, broker.port) as client:
        assert client.server is not None and client.server.startswith("stomp_proto-broker/")
        with client.subscribe("/queue/callbacks", ack="auto", on_message=on_message):
            for n in range(10):
                client.send("/queue/callbacks", str(n))
            assert done.wait(WAIT), f"on_message saw only {seen}"
        # The with block waited for the dispatch thread: nothing more comes to it.
        assert not [t for t in threading.enumerate() if t.name == stomp_threads.DISPATCH_THREAD]
    assert [body for body, _ in seen] == [str(n).encode() for n in range(10)]
    assert {name for _, name in seen} == {stomp_threads.DISPATCH_THREAD}
    logged = [r for r in caplog.records if r.name == "stomp_proto.client" and r.exc_info]
    assert len(logged) == 1 and "raised on message" in logged[0].getMessage()


def test_on_message_ends_when_the_session_is_lost(broker: BrokerThread) -> None:
    """A lost session ends the dispatch thread (the client's state says why)."""
    client = stomp_threads.connect(HOST, broker.port)
    try:
        with client.subscribe("/queue/lost", on_message=lambda message: None):
            threads = [t for t in threading.enumerate() if t.name == stomp_threads.DISPATCH_THREAD]
            assert len(threads) == 1
            client.close()
            threads[0].join(WAIT)
            assert not threads[0].is_alive()
    finally:
        client.close()


def test_on_message_that_raises_or_dawdles_stops_neither_reading_nor_heart_beats(
    broker: BrokerThread, caplog: pytest.LogCaptureFixture
) -> None:
    """A callback's exception is logged with the message it was given; a callback
    that takes many heart-beat intervals does not cost the session (the read role
    and the heart-beats are not its thread's), and the next messages come."""
    seen: list[bytes] = []
    done = threading.Event()
    slow = 1.0  # ten of the 100 ms heart-beat intervals below

    def on_message(message: Any) -> None:
        seen.append(message.body)
        if message.body == b"0":
            raise RuntimeError("a listener's own bug")
        if message.body == b"1":
            time.sleep(slow)
        if message.body == b"3":
            done.set()

    with stomp_threads.connect(HOST, broker.port, heartbeat=(100, 100)) as client:
        with client.subscribe("/queue/dawdling", on_message=on_message):
            for n in range(4):
                client.send("/queue/dawdling", str(n), receipt=True)
            assert done.wait(WAIT), f"on_message saw only {seen}"
            # Sent while the callback slept, receipts came: the reader was not waiting.
            assert client.state is stomp_threads.ClientState.CONNECTED
        assert client.stats.lost == 0 and client.stats.sessions == 1
    assert seen == [b"0", b"1", b"2", b"3"]
    logged = [r for r in caplog.records if r.name == "stomp_proto.client" and r.exc_info]
    assert len(logged) == 1
    text = logged[0].getMessage()
    assert "raised on message" in text and "/queue/dawdling" in text
    assert "a listener's own bug" in str(logged[0].exc_info[1])


def test_inline_on_message_runs_on_the_reading_thread_in_order(
    broker: BrokerThread, caplog: pytest.LogCaptureFixture
) -> None:
    """``subscribe(on_message=fn, inline=True)``: each message to ``fn`` in order, on
    the thread that read it (no dispatch thread); a callback that raises is logged
    and the next comes; once the block has left, ``fn`` is not called again."""
    seen: list[tuple[bytes, str]] = []
    done = threading.Event()

    def on_message(message: Any) -> None:
        seen.append((message.body, threading.current_thread().name))
        if message.body == b"2":
            raise RuntimeError("a listener's own bug")
        if message.body == b"9":
            done.set()

    with stomp_threads.connect(HOST, broker.port) as client:
        with client.subscribe("/queue/inline", on_message=on_message, inline=True):
            assert not [t for t in threading.enumerate() if t.name == stomp_threads.DISPATCH_THREAD]
            for n in range(10):
                client.send("/queue/inline", str(n))
            assert done.wait(WAIT), f"on_message saw only {seen}"
        left = len(seen)
        client.send("/queue/inline", "after", receipt=True)
        assert len(seen) == left
    assert [body for body, _ in seen] == [str(n).encode() for n in range(10)]
    assert stomp_threads.DISPATCH_THREAD not in {name for _, name in seen}
    logged = [r for r in caplog.records if r.name == "stomp_proto.client" and r.exc_info]
    assert len(logged) == 1 and "raised on message" in logged[0].getMessage()


def test_inline_on_message_may_not_wait_for_the_broker(broker: BrokerThread) -> None:
    """An inline callback runs on the thread that reads: a receipt it waited for would
    never be read, so that is a LocalProtocolError (before the frame goes); writing
    without a receipt, and unsubscribing from within, are fine."""
    outcome: list[object] = []
    done = threading.Event()

    with stomp_threads.connect(HOST, broker.port) as client:

        def on_message(message: Any) -> None:
            try:
                client.send("/queue/inline-echo", b"echo", receipt=True)
            except LocalProtocolError as exc:
                outcome.append(exc)
            client.send("/queue/inline-echo", b"echo")  # no receipt: written at once
            subscription.unsubscribe()
            done.set()

        with (
            pytest.raises(LocalProtocolError, match="needs an on_message"),
            client.subscribe("/queue/inline-waits", inline=True),
        ):
            pass
        with (
            client.subscribe("/queue/inline-echo") as echoes,
            client.subscribe(
                "/queue/inline-waits", on_message=on_message, inline=True
            ) as subscription,
        ):
            client.send("/queue/inline-waits", b"go")
            assert done.wait(WAIT)
            echo = echoes.get(timeout=WAIT)
            assert echo is not None and echo.body == b"echo"
    assert len(outcome) == 1 and "cannot wait for the broker" in str(outcome[0])
