"""The blocking client read on an event loop's thread: ``fileno()``, ``pump()``, ``loop_reads()``.

An event loop (Celery's, a selector loop) watches the client's socket and
calls ``pump(0)`` when it is readable: messages then reach an inline
``on_message`` on the loop's thread, with no thread between.  These tests
check that, what ``pump`` does while another thread reads, that the
background thread still hears heart-beats while the loop's thread is busy,
and that the descriptor follows a reconnect.
"""

from __future__ import annotations

import selectors
import threading
import time
from collections.abc import Iterator

import pytest
from test_ack_outbox import _writes
from test_threads_concurrency import HOST, WAIT, BrokerThread, broker, leak_checked
from test_threads_read_role import _readers, _until

from stomp_proto import Backoff, LocalProtocolError, Message
from stomp_proto import threads as stomp_threads
from stomp_proto.threads import Client

__all__ = ["broker"]  # the fixture, imported for the tests below

BEAT = (100, 100)


@pytest.fixture
def beating() -> Iterator[BrokerThread]:
    with leak_checked(BrokerThread(heartbeat=BEAT)) as service:
        yield service


def _loop_turns(client: Client, until: threading.Event, turns: int = 200) -> int:
    """A minimal event loop: wait for the socket, pump; how many pumps read."""
    read = 0
    with selectors.DefaultSelector() as selector:
        selector.register(client.fileno(), selectors.EVENT_READ)
        for _ in range(turns):
            if until.is_set():
                break
            if selector.select(0.05) and client.pump(0):
                read += 1
    return read


def test_an_event_loop_reads_and_on_message_runs_on_its_thread(broker: BrokerThread) -> None:
    with (
        stomp_threads.connect(HOST, broker.port, timeout=WAIT) as client,
        stomp_threads.connect(HOST, broker.port, timeout=WAIT) as sender,
    ):
        called: list[tuple[bytes, int]] = []
        done = threading.Event()

        def on_message(message: Message) -> None:
            called.append((message.body, threading.get_ident()))
            if len(called) == 20:
                done.set()

        with client.subscribe("/queue/pumped", on_message=on_message, inline=True):
            client.loop_reads(True)
            time.sleep(0.2)  # the background thread lets the role go
            readers = _readers(client)
            for i in range(20):
                sender.send("/queue/pumped", f"m{i}".encode())
            assert _loop_turns(client, done) >= 1
        assert [body for body, _ in called] == [f"m{i}".encode() for i in range(20)]
        assert {ident for _, ident in called} == {threading.get_ident()}
        assert {t.ident for t in readers} == {threading.get_ident()}


def test_pump_waits_for_data_up_to_its_timeout(broker: BrokerThread) -> None:
    with (
        stomp_threads.connect(HOST, broker.port, timeout=WAIT) as client,
        client.subscribe("/queue/pump-wait") as sub,
    ):
        client.send("/queue/pump-wait", b"", receipt=True)  # subscribed by now
        sub.get(timeout=WAIT)
        began = time.monotonic()
        assert client.pump(0.3) is True  # nothing came: one read, that waited
        assert time.monotonic() - began >= 0.25
        client.send("/queue/pump-wait", b"x")
        _until(lambda: client.pump(0.5) and len(sub._messages) > 0, "not read")
        message = sub.get(timeout=0)
        assert message is not None and message.body == b"x"


def test_pump_from_an_inline_on_message_is_a_local_error(broker: BrokerThread) -> None:
    with stomp_threads.connect(HOST, broker.port, timeout=WAIT) as client:
        errors: list[BaseException] = []
        done = threading.Event()

        def on_message(message: Message) -> None:
            try:
                client.pump(0)
            except LocalProtocolError as exc:
                errors.append(exc)
            done.set()

        with client.subscribe("/queue/reentry", on_message=on_message, inline=True):
            client.send("/queue/reentry", b"x")
            assert done.wait(WAIT)
        assert len(errors) == 1 and "inline on_message" in str(errors[0])


def test_pump_while_another_thread_reads_returns_false_once_it_lets_go(
    broker: BrokerThread,
) -> None:
    with (
        stomp_threads.connect(HOST, broker.port, timeout=WAIT) as client,
        client.subscribe("/queue/held") as sub,
    ):
        holding = threading.Thread(target=lambda: sub.get(timeout=5.0))
        holding.start()
        _until(lambda: client._role.reading, "the consumer did not take the read role")
        assert client.pump(0) is False  # no wait: the loop must not block
        client.send("/queue/held", b"x")  # the consumer reads it and lets go
        assert client.pump(WAIT) is False
        holding.join(WAIT)
        assert not holding.is_alive()
        assert client.pump(0) is True  # free now


def test_with_loop_reads_and_no_loop_turning_heart_beats_still_go_on(
    beating: BrokerThread,
) -> None:
    with stomp_threads.connect(HOST, beating.port, heartbeat=BEAT, timeout=WAIT) as client:
        got: list[bytes] = []
        with client.subscribe(
            "/queue/busy-loop", on_message=lambda m: got.append(m.body), inline=True
        ):
            conn = client.connection
            client.loop_reads(True)
            time.sleep(2.5)  # a loop busy for 25 heart-beat intervals
            assert client.connection is conn and client._core.error is None
            client.send("/queue/busy-loop", b"late")
            _until(lambda: got == [b"late"], "the background thread did not read it")


def test_fileno_follows_the_connection(broker: BrokerThread) -> None:
    client = stomp_threads.connect(
        HOST, broker.port, timeout=WAIT, reconnect=Backoff(initial=0.05, jitter=0.0)
    )
    with client:
        first = client.fileno()
        assert first >= 0
        conn = client.connection
        stream = client._writer.stream
        assert stream is not None
        stream.shutdown()  # the connection is lost; the client connects again
        _until(lambda: client.connection is not conn and client.fileno() >= 0, "no reconnect")
        assert client._writer.stream is not stream
    assert client.fileno() == -1


def test_acknowledgements_held_while_a_loop_reads_go_out_without_it(
    broker: BrokerThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loop acknowledges, then waits on the socket: the background thread writes
    what the client held back, though it reads nothing for the loop."""
    from stomp_proto._client import _read_role

    monkeypatch.setattr(_read_role, "LOOP_IDLE_READ", 3600.0)  # it never reads
    with (
        stomp_threads.connect(HOST, broker.port, timeout=WAIT) as client,
        stomp_threads.connect(HOST, broker.port, timeout=WAIT) as sender,
    ):
        taken: list[Message] = []
        done = threading.Event()

        def on_message(message: Message) -> None:
            taken.append(message)
            if len(taken) == 5:
                done.set()

        with client.subscribe(
            "/queue/loop-acks", ack="client-individual", on_message=on_message, inline=True
        ):
            client.loop_reads(True)
            time.sleep(0.2)  # the background thread lets the role go
            written = _writes(client)
            for i in range(5):
                sender.send("/queue/loop-acks", f"m{i}".encode())
            _loop_turns(client, done)
            assert len(taken) == 5
            for message in taken[:-1]:
                client.ack(message)  # held: a message given to on_message is unsettled
            _until(lambda: b"ACK\n" in b"".join(written), "no held ACK was written")
            client.ack(taken[-1])
            _until(lambda: b"".join(written).count(b"ACK\n") == 5, "the ACKs were not all written")
