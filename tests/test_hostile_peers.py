"""Hostile peers against the embedded broker: slowloris, floods, bad logins, early frames.

Deadlines are configured small (fractions of a second) and the tests check what
happens - an ERROR, a closed connection, bounded memory, other clients served -
never how long it took.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import tracemalloc

import pytest
from test_broker_server import StreamClient, run
from timeouts import scaled

import stomp_proto.asyncio as stomp_asyncio
from stomp_proto import (
    ClientConnection,
    Connect,
    Error,
    Limits,
    Message,
    Receipt,
    Send,
    Subscribe,
)
from stomp_proto.broker import Broker

pytestmark = [pytest.mark.filterwarnings("error"), pytest.mark.timeout(60)]


async def _read_until_closed(client: StreamClient, timeout: float = 10.0) -> bytes:
    data = bytearray()
    try:
        while chunk := await asyncio.wait_for(client.reader.read(65536), timeout):
            data += chunk
    except ConnectionResetError:
        pass
    return bytes(data)


async def _trickle(client: StreamClient, data: bytes, stop: asyncio.Event) -> None:
    """Write ``data`` a byte at a time, endlessly repeating its last byte, until stopped."""
    index = 0
    while not stop.is_set():
        byte = data[min(index, len(data) - 1) : min(index, len(data) - 1) + 1]
        index += 1
        try:
            client.writer.write(byte)
            await client.writer.drain()
        except OSError:
            return
        await asyncio.sleep(0.02)


async def _other_client_works(broker: Broker) -> None:
    """A well-behaved client, through the asyncio adapter, gets its message round trip.

    Its connect attempt may wait behind a flood that the broker, in the same process
    and often under tracemalloc, is still reading: the bound scales with the load
    (the client's default of 5 s was exceeded beside two CPU-bound loops).
    """
    async with (
        stomp_asyncio.connect(
            broker.host, broker.port, connect_timeout=scaled(10.0), timeout=scaled(30.0)
        ) as client,
        client.subscribe("/queue/fine") as messages,
    ):
        await client.send("/queue/fine", "still served", receipt=True)
        async for message in messages:
            assert message.body == b"still served"
            break


def _error_in(data: bytes) -> Error:
    conn = ClientConnection(strict=False)
    conn.send(Connect(host="/"))
    conn.receive_data(data)
    conn.receive_data(None)
    errors = [e for e in conn if isinstance(e, Error)]
    assert errors, data
    return errors[0]


@pytest.mark.parametrize(
    "prefix",
    [b"CONNECT\naccept-version:1.2\nhost:/\nx-endless:", b"CON"],
    ids=["header", "command"],
)
def test_slowloris_before_connect_is_cut_off_by_the_connect_deadline(prefix: bytes) -> None:
    async def body() -> None:
        # Scaled: the other client's CONNECT must beat this deadline on a loaded machine.
        async with Broker(connect_timeout=scaled(0.3), frame_timeout=None) as broker:
            client = await StreamClient.open(broker)
            stop = asyncio.Event()
            trickler = asyncio.create_task(_trickle(client, prefix, stop))
            await _other_client_works(broker)
            data = await _read_until_closed(client)
            stop.set()
            await trickler
            assert _error_in(data).message == "CONNECT timeout"
            await client.close()
            assert len(broker.core.sessions) == 0

    run(body, timeout=30)


def test_silent_connection_is_cut_off_by_the_connect_deadline() -> None:
    async def body() -> None:
        async with Broker(connect_timeout=0.2) as broker:
            client = await StreamClient.open(broker)
            data = await _read_until_closed(client)
            assert _error_in(data).message == "CONNECT timeout"
            await client.close()

    run(body)


@pytest.mark.parametrize("heartbeat", [(0, 0), (50, 50)], ids=["no-heartbeat", "heartbeat"])
def test_slowloris_header_is_cut_off_by_the_frame_deadline(heartbeat: tuple[int, int]) -> None:
    """Bytes arriving keep heart-beats alive; the frame deadline still ends the session."""

    # Scaled: the heart-beats (and the other client's frames) must keep up on a loaded
    # machine; the trickle's bytes come every 20 ms, well inside the beats.
    beat = round(scaled(50))
    beats = (beat, beat) if heartbeat != (0, 0) else heartbeat

    async def body() -> None:
        async with Broker(frame_timeout=scaled(0.3), heartbeat=(beat, beat)) as broker:
            client = await StreamClient.connect(broker, heartbeat=beats)
            stop = asyncio.Event()
            trickler = asyncio.create_task(
                _trickle(client, b"SEND\ndestination:/queue/a\nx-endless:", stop)
            )
            await _other_client_works(broker)
            data = await _read_until_closed(client)
            stop.set()
            await trickler
            assert _error_in(data).message == "frame timeout"
            await client.close()

    run(body, timeout=30)


def test_slowloris_body_is_cut_off_by_the_frame_deadline() -> None:
    async def body() -> None:
        async with Broker(frame_timeout=0.3) as broker:
            client = await StreamClient.connect(broker)
            stop = asyncio.Event()
            head = b"SEND\ndestination:/queue/a\ncontent-length:1000000\n\nbody"
            trickler = asyncio.create_task(_trickle(client, head, stop))
            data = await _read_until_closed(client)
            stop.set()
            await trickler
            assert _error_in(data).message == "frame timeout"
            await client.close()

    run(body)


def test_frames_that_complete_reset_the_frame_deadline() -> None:
    """A client whose frames each complete in time is never cut off, however long it runs."""
    # Each frame goes in 8-byte pieces 10 ms apart (about 0.1 s on an idle machine);
    # the deadline scales with the machine's load, and the frames go on until
    # together they took twice as long as it.
    deadline = scaled(0.25)

    async def body() -> None:
        async with Broker(frame_timeout=deadline) as broker:
            client = await StreamClient.connect(broker)
            try:
                frame = client.conn.send(Send("/queue/t", b"x" * 20))
                loop = asyncio.get_running_loop()
                started, frames = loop.time(), 0
                while frames < 3 or loop.time() - started < 2 * deadline:
                    for n in range(0, len(frame), 8):
                        client.writer.write(frame[n : n + 8])
                        await client.writer.drain()
                        await asyncio.sleep(0.01)
                    frames += 1
                await client.send(Send("/queue/t", b"", receipt="ok"))
                assert (await client.expect(Receipt)).receipt_id == "ok"
            finally:
                await client.close()

    run(body)


def test_declared_huge_body_is_refused_at_once() -> None:
    async def body() -> None:
        async with Broker(frame_timeout=None, connect_timeout=None) as broker:
            client = await StreamClient.connect(broker)
            client.writer.write(b"SEND\ndestination:/queue/a\ncontent-length:2147483648\n\n")
            data = await _read_until_closed(client)
            error = _error_in(data)
            assert "content-length" in error.message and "exceeds" in error.message
            await _other_client_works(broker)
            await client.close()

    run(body)


def test_publisher_that_never_reads_its_receipts_is_bounded_and_cut_off() -> None:
    """Receipts pile up unread: the broker stops reading, then ends the session.

    Measured with tracemalloc while the flooder pushes as fast as TCP lets it:
    the broker's memory stays near its output limit, not what was sent.
    """
    limit = 64 * 1024
    frame = ClientConnection().send(Connect(host="/")) + b"".join(
        b"SEND\ndestination:/topic/void\nreceipt:r-%d\n\n\x00" % n for n in range(2000)
    )
    outcome: dict[str, object] = {}

    def flood(port: int) -> None:
        sent = 0
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.settimeout(0.2)
            try:
                while sent < 256 * 1024 * 1024:
                    try:
                        sent += sock.send(frame[sent % len(frame) :] if sent else frame)
                    except TimeoutError:
                        continue
            except OSError as exc:
                outcome["error"] = exc
        outcome["sent"] = sent

    async def body() -> None:
        async with Broker(output_limit=limit, slow_consumer_timeout=0.5) as broker:
            tracemalloc.start()
            baseline = tracemalloc.get_traced_memory()[0]
            flooder = threading.Thread(target=flood, args=(broker.port,))
            flooder.start()
            await _other_client_works(broker)
            while flooder.is_alive():
                await asyncio.sleep(0.05)
            peak = tracemalloc.get_traced_memory()[1] - baseline
            tracemalloc.stop()
            flooder.join()
            outcome["peak"] = peak
            assert "error" in outcome, outcome  # cut off, not allowed to send 256 MiB
            assert peak < 16 * limit + 1024 * 1024, outcome
            await _other_client_works(broker)

    run(body, timeout=40)
    print(outcome)


def test_frames_before_connect_get_an_error_and_a_close() -> None:
    async def body() -> None:
        async with Broker() as broker:
            client = await StreamClient.open(broker)
            client.writer.write(b"SEND\ndestination:/queue/a\n\nearly\x00")
            data = await _read_until_closed(client)
            assert b"CONNECTED" not in data
            assert _error_in(data).message
            await client.close()

    run(body)


def test_unknown_user_and_wrong_password_get_the_same_answer() -> None:
    async def attempt(broker: Broker, login: str, passcode: str) -> bytes:
        client = await StreamClient.open(broker)
        await client.send(Connect(host="/", login=login, passcode=passcode))
        data = await _read_until_closed(client)
        await client.close()
        return data

    async def body() -> None:
        async with Broker(users={"alice": "secret"}) as broker:
            unknown = await attempt(broker, "mallory", "secret")
            wrong = await attempt(broker, "alice", "guess")
            assert unknown == wrong  # byte for byte: nothing tells the user exists
            assert _error_in(wrong).message == "Bad CONNECT: login failed"

    run(body)


def test_subscriber_that_never_acks_holds_at_most_its_prefetch() -> None:
    async def body() -> None:
        async with Broker(max_in_flight=5, max_queue_length=50) as broker:
            hoarder = await StreamClient.connect(broker)
            await hoarder.send(Subscribe("/queue/h", id="1", ack="client", receipt="s"))
            await hoarder.expect(Receipt)
            producer = await StreamClient.connect(broker)
            for n in range(50):
                await producer.send(Send("/queue/h", b"%d" % n))
            await producer.send(Send("/queue/h", b"one too many", receipt="r"))
            refused = await producer.expect(Error)
            assert refused.message == "queue full"
            bodies = [(await hoarder.expect(Message)).body for _ in range(5)]
            assert bodies == [b"0", b"1", b"2", b"3", b"4"]
            # 5 in flight to the hoarder, the rest held, nothing more accepted.
            assert broker.core.queued("/queue/h") == 45
            await _other_client_works(broker)
            await producer.close()
            await hoarder.close()

    run(body)


def test_one_zero_subscriber_gets_messages_whose_headers_1_0_cannot_carry() -> None:
    """A 1.2 header with a line break, to a 1.0 subscriber: dropped for it, not a crash."""

    async def body() -> None:
        async with Broker(limits=Limits()) as broker:
            old = await StreamClient.connect(broker, "1.0")
            await old.send(Subscribe("/queue/v", receipt="s"))
            await old.expect(Receipt)
            new = await StreamClient.connect(broker, "1.2")
            await new.send(
                Send("/queue/v", b"hi", headers=(("multi", "a\nb"), ("ok", "1")), receipt="r")
            )
            await new.expect(Receipt)
            message = await old.expect(Message)
            assert message.body == b"hi"
            assert ("ok", "1") in message.headers and "multi" not in dict(message.headers)
            await old.close()
            await new.close()

    run(body)


def test_deadlines_are_values_without_a_clock_in_the_core() -> None:
    """BrokerCore alone: get_timer says when, handle_timer(now) decides, process acts."""
    from stomp_proto.broker import BrokerCore

    core = BrokerCore(connect_timeout=30.0, frame_timeout=5.0, heartbeat=(0, 0))
    session = core.open_session()
    assert session.get_timer() == 0.0  # a deadline whose start is not known yet
    session.handle_timer(100.0)
    assert session.get_timer() == 130.0
    session.receive_data(ClientConnection().send(Connect(host="/")))
    session.handle_timer(101.0)
    assert b"CONNECTED" in core.process(session).bytes_for(session)
    # Connected, nothing partial: only the idle timeout (600 s) is due, since no
    # heart-beats were negotiated.
    assert session.get_timer() == 701.0
    session.receive_data(b"SEND\ndestination:/q")
    session.handle_timer(102.0)
    core.process(session)
    assert session.get_timer() == 107.0
    session.handle_timer(106.9)
    assert not core.process(session)
    session.handle_timer(107.0)
    outbox = core.process(session)
    assert session in outbox.to_close
    assert _error_in(outbox.bytes_for(session)).message == "frame timeout"
