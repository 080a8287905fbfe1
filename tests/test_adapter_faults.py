"""The client adapters when things go wrong: refused logins and connections, TLS,
silent brokers, broker errors, lost connections and reconnects.

Same harness as test_adapters.py: each scenario runs on the asyncio, trio and
threads clients.  The fake servers here are plain asyncio servers speaking
through :class:`~stomp_proto.ServerConnection`, hosted on the harness's
service loop next to the brokers.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from adapter_harness import (
    ADAPTERS,
    HOST,
    WAIT,
    Backoff,
    BrokerError,
    ConnectionLost,
    Harness,
    HeartBeatLost,
    ReconnectExhausted,
    dead_port,
    on_every_adapter,
    run,
)
from helpers import pure_core

from stomp_proto import (
    Connect,
    Connected,
    ConnectionClosed,
    LocalProtocolError,
    Message,
    Receipt,
    RemoteProtocolError,
    ServerConnection,
    Subscribe,
)

pytestmark = [pytest.mark.filterwarnings("error"), pytest.mark.timeout(60)]

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def causes(error: BaseException | None) -> Iterator[BaseException]:
    """``error`` and what caused it, and what caused that, ..."""
    while error is not None:
        yield error
        error = error.__cause__ or error.__context__


# -- logging in and connecting -----------------------------------------------------------


@on_every_adapter(versions=(None,))
async def test_wrong_password_and_unknown_user_get_the_same_broker_error(h: Harness) -> None:
    broker = await h.start_broker(users={"alice": "s3cret"})
    refused = []
    for login, passcode in (("alice", "wrong"), ("mallory", "s3cret"), (None, None)):
        with pytest.raises(BrokerError) as caught:
            async with h.connect(broker.port, login=login, passcode=passcode):
                pytest.fail("logged in with a bad login")
        refused.append(caught.value)
    wrong, unknown, anonymous = refused
    assert wrong.message == "Bad CONNECT: login failed"  # the broker's own words
    assert "login failed" in str(wrong)
    # Nothing tells an unknown user from a wrong password.
    assert str(wrong) == str(unknown) == str(anonymous)
    assert wrong.error.body == unknown.error.body
    assert await h.sessions(broker) == 0
    async with h.connect(broker.port, login="alice", passcode="s3cret") as client:
        await client.send("/queue/in", b"", receipt=True)


def test_a_dead_port_refuses_connections_and_nothing_else_can_take_it() -> None:
    # What the refused-connection tests rely on while other test runs start brokers.
    with dead_port() as port:
        with socket.socket() as other, pytest.raises(OSError):
            other.bind((HOST, port))
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((HOST, port), timeout=WAIT).close()


@on_every_adapter(versions=(None,))
async def test_connection_refused_is_connection_lost(h: Harness) -> None:
    with dead_port() as port, pytest.raises(ConnectionLost) as caught:
        async with h.connect(port):
            pytest.fail("connected to a closed port")
    assert str(port) in str(caught.value)
    assert not isinstance(caught.value, HeartBeatLost)


async def _never_answers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Accept the connection, read the CONNECT, say nothing."""
    while await reader.read(65536):
        pass


@on_every_adapter(versions=(None,))
async def test_broker_that_never_answers_connect_times_out(h: Harness) -> None:
    port = await h.start_server(_never_answers)
    with pytest.raises(ConnectionLost):
        async with h.connect(port, timeout=0.3):
            pytest.fail("connected without CONNECTED")


# -- TLS -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A throw-away self-signed certificate for 127.0.0.1, and its key."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command is not available")
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    return cert, key


def _server_context(certificate: tuple[Path, Path]) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)
    return context


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_tls(adapter: str, certificate: tuple[Path, Path]) -> None:
    server_context = _server_context(certificate)
    trusting = ssl.create_default_context(cafile=str(certificate[0]))

    async def scenario(h: Harness) -> None:
        broker = await h.start_broker(ssl=server_context)
        async with (
            h.connect(broker.port, ssl=trusting) as client,
            client.subscribe("/queue/tls") as messages,
        ):
            await client.send("/queue/tls", b"secret", receipt=True)
            assert (await messages.get(WAIT)).body == b"secret"

    run(adapter, scenario)


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_tls_disconnect(adapter: str, certificate: tuple[Path, Path]) -> None:
    """Leaving the block over TLS: DISCONNECT, its receipt, then a TLS close.

    (It used to raise CancelledError: close() cancelled the reader while it
    awaited the stream's close waiter, which close() then awaited too.)
    """
    server_context = _server_context(certificate)
    trusting = ssl.create_default_context(cafile=str(certificate[0]))

    async def scenario(h: Harness) -> None:
        broker = await h.start_broker(ssl=server_context)
        for _ in range(3):
            async with h.connect(broker.port, ssl=trusting) as client:
                await client.send("/queue/tls", b"x", receipt=True)
        assert await h.sessions(broker) == 0

    run(adapter, scenario)


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_tls_refusals_fail_cleanly(adapter: str, certificate: tuple[Path, Path]) -> None:
    server_context = _server_context(certificate)

    async def scenario(h: Harness) -> None:
        broker = await h.start_broker(ssl=server_context)
        # A plain client speaks STOMP to a TLS server.
        with pytest.raises(ConnectionLost):
            async with h.connect(broker.port):
                pytest.fail("a plain client got through to the TLS port")
        # A TLS client that does not trust the certificate.
        with pytest.raises(ConnectionLost) as caught:
            async with h.connect(broker.port, ssl=ssl.create_default_context()):
                pytest.fail("an untrusted certificate was accepted")
        if h.adapter != "trio":  # see test_connect_errors_keep_their_cause
            assert any(isinstance(e, ssl.SSLCertVerificationError) for e in causes(caught.value))
        assert await h.sessions(broker) == 0
        # The broker is unharmed.
        trusting = ssl.create_default_context(cafile=str(certificate[0]))
        async with h.connect(broker.port, ssl=trusting) as client:
            await client.send("/queue/tls", b"fine", receipt=True)

    run(adapter, scenario)


# -- a broker that goes silent -----------------------------------------------------------


def fake_broker(*, heartbeat: tuple[int, int] = (0, 0), receipts: bool = True) -> Handler:
    """A server that answers CONNECT (offering ``heartbeat``) and then, at most, receipts.

    It never sends a heart-beat, whatever it offered.
    """

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = ServerConnection()
        while True:
            data = await reader.read(65536)
            conn.receive_data(data or None)
            try:
                events = list(iter(conn.next_event, None))
            except RemoteProtocolError:
                return
            for event in events:
                if isinstance(event, ConnectionClosed):
                    return
                if isinstance(event, Connect):
                    writer.write(conn.send(Connected(heartbeat=heartbeat, session="fake")))
                elif receipts and getattr(event, "receipt", None) is not None:
                    writer.write(conn.send(Receipt(event.receipt)))  # type: ignore[attr-defined]
            if not data:
                return

    return handler


@on_every_adapter()
async def test_silent_broker_raises_heartbeat_lost(h: Harness) -> None:
    port = await h.start_server(fake_broker(heartbeat=(100, 100)))
    async with h.connect(port, heartbeat=(100, 100)) as client:
        assert client.connection.heartbeat == (100, 100)
        async with client.subscribe("/queue/hb") as messages:
            # The broker promised a beat every 100 ms and has gone quiet.
            with pytest.raises(HeartBeatLost):
                await messages.get(WAIT)
            with pytest.raises(HeartBeatLost):
                await client.send("/queue/hb", b"anyone?")


@on_every_adapter(versions=(None,))
async def test_missing_receipt_times_out(h: Harness) -> None:
    port = await h.start_server(fake_broker(receipts=False))
    async with h.connect(port, timeout=0.3) as client:
        with pytest.raises(TimeoutError):
            await client.send("/queue/void", b"lost?", receipt=True)
        await client.send("/queue/void", b"no receipt asked")  # the session goes on


def eager_broker(backlog: int) -> Handler:
    """A server that answers a SUBSCRIBE with ``backlog`` MESSAGEs *before* its RECEIPT.

    RabbitMQ does this when a queue already holds messages and prefetch is unlimited.
    """

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = ServerConnection()
        while data := await reader.read(65536):
            conn.receive_data(data)
            for event in iter(conn.next_event, None):
                if isinstance(event, Connect):
                    writer.write(conn.send(Connected(session="eager")))
                elif isinstance(event, Subscribe):
                    for n in range(backlog):
                        message = Message(
                            event.destination,
                            message_id=f"m{n}",
                            subscription=event.id,
                            ack=f"a{n}" if conn.version == "1.2" else None,
                            body=str(n).encode(),
                        )
                        writer.write(conn.send(message))
                    assert event.receipt is not None
                    writer.write(conn.send(Receipt(event.receipt)))
                elif getattr(event, "receipt", None) is not None:
                    writer.write(conn.send(Receipt(event.receipt)))  # type: ignore[attr-defined]
            await writer.drain()

    return handler


@on_every_adapter()
async def test_subscribe_returns_when_messages_outnumber_the_queue_before_its_receipt(
    h: Harness,
) -> None:
    # The queue holds 4; 20 MESSAGEs precede the RECEIPT.  The first MESSAGE
    # confirms the subscription, so subscribe() must not wait for the RECEIPT
    # that the paused reader cannot reach.
    port = await h.start_server(eager_broker(backlog=20))
    async with (
        h.connect(port, max_pending_messages=4, timeout=2.0) as client,
        client.subscribe("/queue/backlog", ack="client") as messages,
    ):
        received = [await messages.get(WAIT) for _ in range(20)]
        assert [m.body for m in received] == [str(n).encode() for n in range(20)]
        await client.ack(received[-1], receipt=True)


# -- settling: the same frames and refusals on both builds ----------------------------------


def recording_broker(wire: list[bytes]) -> Handler:
    """A server that delivers 4 MESSAGEs to each SUBSCRIBE, then its RECEIPT, answers
    every receipt, and keeps in ``wire`` every byte the client sent."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = ServerConnection()
        while data := await reader.read(65536):
            wire.append(data)
            conn.receive_data(data)
            for event in iter(conn.next_event, None):
                if isinstance(event, Connect):
                    writer.write(conn.send(Connected(session="recording")))
                elif isinstance(event, Subscribe):
                    for n in range(4):
                        message = Message(
                            event.destination,
                            message_id=f"m{n}",
                            subscription=event.id,
                            ack=f"a{n}" if conn.version == "1.2" else None,
                        )
                        writer.write(conn.send(message))
                if getattr(event, "receipt", None) is not None:
                    writer.write(conn.send(Receipt(event.receipt)))  # type: ignore[attr-defined]
            await writer.drain()

    return handler


async def settle_session(h: Harness) -> tuple[bytes, list[str]]:
    """Every way of settling a message, and of getting it wrong: what the client
    wrote, and each error it raised (its type and message), in order."""
    wire: list[bytes] = []
    refusals: list[str] = []
    port = await h.start_server(recording_broker(wire))
    async with (
        h.connect(port) as client,
        client.subscribe("/queue/settle", ack="client-individual") as messages,
    ):
        m = [await messages.get(WAIT) for _ in range(4)]
        await client.ack(m[0])
        await client.nack(m[1])
        await client.ack(m[2], receipt=True)
        misuse: list[tuple[type[Exception], Callable[[], Awaitable[None]]]] = [
            (LocalProtocolError, lambda: client.ack(m[0])),  # settled already
            (LocalProtocolError, lambda: client.nack(m[2])),
            (TypeError, lambda: client.ack("m3")),  # type: ignore[arg-type]
            (LocalProtocolError, lambda: client.ack(replace(m[3], body=b"redelivered"))),
            (TypeError, lambda: client.nack(m[3], receipt="yes")),  # type: ignore[arg-type]
        ]
        for kind, call in misuse:
            with pytest.raises(kind) as refused:
                await call()
            refusals.append(f"{type(refused.value).__name__}: {refused.value}")
        # The session goes on: nothing was written, and the write lock is free.
        async with client.transaction() as tx:
            await client.nack(m[3], transaction=tx)
        await client.send("/queue/settle", b"after", receipt=True)
    return b"".join(wire), refusals


@on_every_adapter(versions=("1.1", "1.2"))
async def test_settling_writes_the_same_frames_and_refuses_the_same_misuse_on_both_builds(
    h: Harness,
) -> None:
    # The accelerated build makes a plain ACK or NACK natively, without an event;
    # the pure build checks and encodes an Ack or Nack.  The broker must see the
    # same bytes, and a mistake must be refused alike (misuse: LocalProtocolError;
    # a wrong type: TypeError), before anything is written.
    native = await settle_session(h)
    with pure_core():
        pure = await settle_session(h)
    assert native == pure
    wire, refusals = native
    settled = [f for f in wire.split(b"\x00") if f.startswith((b"ACK\n", b"NACK\n"))]
    if h.version == "1.2":  # 1.2 §ACK: the MESSAGE's ack header, as id
        names = [b"id:a0", b"id:a1", b"id:a2", b"id:a3"]
    else:  # 1.1 §ACK: the message-id and the subscription
        names = [b"message-id:m%d\nsubscription:sub-1" % n for n in range(4)]
    assert settled == [
        b"ACK\n" + names[0] + b"\n\n",
        b"NACK\n" + names[1] + b"\n\n",
        b"ACK\n" + names[2] + b"\nreceipt:receipt-3\n\n",
        b"NACK\n" + names[3] + b"\ntransaction:tx-4\n\n",
    ]
    assert len(refusals) == 5


def resetting_broker(after: float) -> Handler:
    """A server that answers CONNECT, then reads nothing more and, ``after`` seconds
    later, resets the connection."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = ServerConnection()
        while not any(isinstance(e, Connect) for e in iter(conn.next_event, None)):
            conn.receive_data(await reader.read(65536) or None)
        writer.write(conn.send(Connected(session="resetting")))
        await asyncio.sleep(after)
        writer.transport.abort()

    return handler


@on_every_adapter(versions=(None,))
async def test_a_write_the_broker_does_not_take_fails_when_it_resets(h: Harness) -> None:
    # More than the socket buffers hold: the send waits for room, and the reset
    # ends that wait with the session's end (not a bare OSError, not a hang).
    port = await h.start_server(resetting_broker(after=0.3))
    async with h.connect(port) as client:
        with pytest.raises(ConnectionLost):
            await client.send("/queue/void", b"x" * (16 << 20))
        with pytest.raises(ConnectionLost):
            await client.send("/queue/void", b"after the reset")


# -- broker errors ---------------------------------------------------------------------------


@on_every_adapter(versions=(None,))
async def test_broker_error_ends_the_session(h: Harness) -> None:
    broker = await h.start_broker(max_queue_length=1)
    async with h.connect(broker.port) as client, client.subscribe("/queue/other") as messages:
        await client.send("/queue/full", b"1", receipt=True)
        with pytest.raises(BrokerError) as caught:
            await client.send("/queue/full", b"2", receipt=True)
        assert caught.value.message == "queue full"
        assert "holds 1 messages already" in str(caught.value)  # the ERROR's body
        # Everything after it fails the same way.
        with pytest.raises(BrokerError):
            await messages.get(WAIT)
        with pytest.raises(BrokerError):
            await client.send("/queue/other", b"3")
    assert await h.sessions(broker) == 0


@on_every_adapter(versions=(None,))
async def test_reconnect_after_broker_error(h: Harness) -> None:
    broker = await h.start_broker(max_queue_length=1)
    backoff = Backoff(initial=0.01, maximum=0.05)
    async with (
        h.connect(broker.port, reconnect=backoff) as client,
        client.subscribe("/queue/other") as messages,
    ):
        await client.send("/queue/full", b"1", receipt=True)
        with pytest.raises(BrokerError):  # the wait the ERROR interrupted fails
            await client.send("/queue/full", b"2", receipt=True)
        # Then the client logs in again and restores its subscription.
        await client.send("/queue/other", b"after the error", receipt=True)
        assert (await messages.get(WAIT)).body == b"after the error"
        assert await h.sessions(broker) == 1


# -- reconnecting ----------------------------------------------------------------------------


@on_every_adapter()
async def test_reconnect_restores_subscriptions(h: Harness) -> None:
    queue = "/queue/survivor"
    ack = "client" if h.version == "1.0" else "client-individual"
    broker = await h.start_broker(vanishing=True)
    port = broker.port
    backoff = Backoff(initial=0.05, maximum=0.2)
    async with h.connect(port, reconnect=backoff) as client:
        async with client.subscribe(queue, ack=ack) as messages:
            await client.send(queue, b"before", receipt=True)
            old = await messages.get(WAIT)
            # The broker vanishes (no ERROR, the connection drops); a new one takes its port.
            await h.stop_broker(broker)
            await h.start_broker(port)
            async with h.connect(port) as other:
                await other.send(queue, b"after", receipt=True)
            new = await messages.get(WAIT)
            assert new.body == b"after"
            assert new.subscription == messages.id
            # The old delivery belonged to the connection that is gone.
            with pytest.raises(LocalProtocolError):
                await client.ack(old)
            await client.ack(new, receipt=True)
            await client.send(queue, b"again", receipt=True)
            last = await messages.get(WAIT)
            assert last.body == b"again"
            await client.ack(last)
        assert client.version == h.version


@on_every_adapter(versions=(None,))
async def test_reconnect_gives_up_after_its_attempts(h: Harness) -> None:
    broker = await h.start_broker(vanishing=True)
    backoff = Backoff(initial=0.01, maximum=0.02, attempts=3)
    async with (
        h.connect(broker.port, reconnect=backoff) as client,
        client.subscribe("/queue/gone") as messages,
    ):
        await h.stop_broker(broker)  # and nothing comes back
        with pytest.raises(ReconnectExhausted) as caught:
            await messages.get(WAIT)
        assert str(caught.value).startswith(
            f"gave up reconnecting after 3 attempts: {HOST}:{broker.port}: "
        )
        with pytest.raises(ReconnectExhausted):
            await client.send("/queue/gone", b"x")


@on_every_adapter(versions=(None,))
async def test_reconnect_survives_a_graceful_broker_restart(h: Harness) -> None:
    queue = "/queue/restart"
    broker = await h.start_broker()
    port = broker.port
    async with (
        h.connect(port, reconnect=Backoff(initial=0.05, maximum=0.2)) as client,
        client.subscribe(queue) as messages,
    ):
        # Broker.close(): ERROR "broker shutting down" to everyone, then close.
        await h.stop_broker(broker)
        await h.start_broker(port)
        async with h.connect(port) as other:
            await other.send(queue, b"after restart", receipt=True)
        assert (await messages.get(WAIT)).body == b"after restart"


# -- errors leaving connect() ---------------------------------------------------------------


class Boom(Exception):
    pass


@on_every_adapter(versions=(None,))
async def test_connect_errors_are_not_wrapped(h: Harness) -> None:
    """What leaves ``connect()`` is the exception itself (trio: not an ExceptionGroup)."""
    with dead_port() as port, pytest.raises(ConnectionLost):
        async with h.connect(port):
            pass
    broker = await h.start_broker()
    with pytest.raises(Boom):
        async with h.connect(broker.port):
            raise Boom


@on_every_adapter(versions=(None,))
async def test_connect_errors_keep_their_cause(h: Harness) -> None:
    with dead_port() as port, pytest.raises(ConnectionLost) as caught:
        async with h.connect(port):
            pass
    assert isinstance(caught.value.__cause__, OSError), repr(caught.value.__cause__)


@on_every_adapter(versions=(None,))
async def test_the_three_clients_say_a_refused_connection_in_the_same_words(h: Harness) -> None:
    # asyncio, trio and a socket word a refused connection each their own way; the
    # clients give the system's words for the error number, the same in all three.
    with dead_port() as port, pytest.raises(ConnectionLost) as caught:
        async with h.connect(port):
            pass
    assert str(caught.value) == f"cannot connect to {HOST}:{port}: [Errno 111] Connection refused"


def test_a_read_handed_to_a_reader_cancelled_before_it_woke_is_not_lost() -> None:
    # The asyncio client takes a read's bytes in the transport's callback and
    # wakes its reader only for what it must act on.  The reader's heart-beat
    # timer may cancel it after such a hand-over and before it wakes: its next
    # wait must still see that hand-over, and a plain receive() must not take
    # it for the end of the stream.
    from stomp_proto._client._asyncio import _Stream

    async def scenario() -> None:
        stream = _Stream(asyncio.get_running_loop(), over_ssl=False)
        stream.connection_made(asyncio.Transport())
        taken: list[bytes] = []

        def take(view: memoryview) -> bool:
            taken.append(bytes(view))
            return False  # the reader must act on this

        def arrive(data: bytes) -> None:
            stream.get_buffer(-1)[: len(data)] = data
            stream.buffer_updated(len(data))

        reader = asyncio.ensure_future(stream.receive_or_take(take))
        await asyncio.sleep(0)  # it waits
        arrive(b"CONNECTED")
        reader.cancel()  # the timer fires before the reader runs again
        with pytest.raises(asyncio.CancelledError):
            await reader
        assert taken == [b"CONNECTED"]
        receiving = asyncio.ensure_future(stream.receive())
        await asyncio.sleep(0)
        assert not receiving.done()  # the hand-over is not the end of the stream
        arrive(b"MESSAGE")  # no take now: the bytes are buffered
        assert await receiving == b"MESSAGE"
        assert await stream.receive_or_take(take) is None  # the hand-over it missed
        reader = asyncio.ensure_future(stream.receive_or_take(take))
        await asyncio.sleep(0)  # and now it waits for the next read
        arrive(b"RECEIPT")
        assert await reader is None
        assert taken == [b"CONNECTED", b"RECEIPT"]

    asyncio.run(scenario())


def test_trio_a_send_or_ack_in_a_cancelled_scope_is_cancelled_and_writes_nothing() -> None:
    # trio's rule: a call that can wait raises Cancelled in a cancelled scope.  The
    # plain send and ack are written without a coroutine (the stream's write), so
    # they check for the cancel themselves; the client goes on working after.
    import trio

    async def scenario(h: Harness) -> None:
        broker = await h.start_broker()
        queue = "/queue/cancelled-writes"
        async with h.connect(broker.port) as client:
            with trio.CancelScope() as scope:
                scope.cancel()
                await client.send(queue, b"never")
            assert scope.cancelled_caught
            await client.send(queue, b"kept", receipt=True)
            assert await h.queued(broker, queue) == 1
            async with client.subscribe(queue, ack="client-individual") as messages:
                message = await messages.get(WAIT)
                assert message is not None and message.body == b"kept"
                with trio.CancelScope() as scope:
                    scope.cancel()
                    await client.ack(message)
                assert scope.cancelled_caught
                assert client.connection.pending_acks(messages.id) != ()
                await client.ack(message, receipt=True)
                assert client.connection.pending_acks(messages.id) == ()
        assert await h.queued(broker, queue) == 0

    run("trio", scenario)


@pytest.mark.skipif(
    not hasattr(socket, "TCP_NOTSENT_LOWAT"), reason="the system has no TCP_NOTSENT_LOWAT"
)
def test_trio_leaves_the_kernel_its_default_unsent_limit() -> None:
    # trio's SocketStream limits the unsent bytes in the kernel to 16 KiB; the
    # client's stream gathers its frames itself and sets the system's default
    # back (see _TrioStream), so that a producer's bursts do not wait for room
    # every few dozen messages.
    async def scenario(h: Harness) -> None:
        broker = await h.start_broker()
        async with h.connect(broker.port) as client:
            session = client._writer.session
            assert session is not None
            sock = session.stream._socket
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NOTSENT_LOWAT) == 0

    run("trio", scenario)


def test_trio_a_websocket_frame_made_is_taken_even_when_its_sender_is_cancelled() -> None:
    # The client's cancel point comes before the frame is made; after it, the
    # frame counts as sent (an ACK settled), so the stream must take it.  The
    # WebSocket layer once waited for a lock of its own after that point: a
    # sender cancelled while the reader wrote a pong lost its frame.
    import trio
    import trio.testing

    from stomp_proto._client._websocket_stream import WebSocketStream
    from stomp_proto._websocket import ClientHandshake, ServerHandshake

    client = ClientHandshake("127.0.0.1", 1, "/ws", ("1.2",))
    upgrade = ServerHandshake("/ws").receive_data(client.request)
    assert upgrade is not None and upgrade.channel is not None
    server = upgrade.channel
    channel = client.receive_data(upgrade.to_send)
    assert channel is not None

    class SlowInner:
        """Takes the bytes when called (as the clients' streams do), then waits."""

        def __init__(self) -> None:
            self.taken: list[bytes] = []
            self.gate = trio.Event()

        async def send(self, data: bytes) -> None:
            self.taken.append(data)
            await self.gate.wait()

        async def receive(self) -> bytes:
            await trio.sleep_forever()
            return b""

        async def aclose(self) -> None:
            pass

    async def scenario() -> None:
        async with trio.open_nursery() as nursery:
            inner = SlowInner()
            stream = WebSocketStream(inner, channel)
            nursery.start_soon(stream.send, b"SEND\ndestination:/q\n\nfirst\x00")
            await trio.testing.wait_all_tasks_blocked()  # that write waits, as on a full socket
            with trio.CancelScope() as scope:
                scope.cancel()
                await stream.send(b"ACK\nid:1\n\n\x00")
            assert scope.cancelled_caught
            inner.gate.set()
        received = server.receive_data(b"".join(inner.taken))
        assert received.data == b"SEND\ndestination:/q\n\nfirst\x00ACK\nid:1\n\n\x00"

    trio.run(scenario)


def test_trio_a_websocket_reader_cancelled_while_answering_a_close_keeps_what_came_before() -> None:
    # The broker's ERROR and its close frame come in one read, while a big frame
    # being written fills the socket: the answer to the close waits for room.  The
    # reader's heart-beat timer cancels it there; the ERROR read with the close
    # once went with the cancelled call, and the client saw a bare end of stream
    # ("the broker closed the connection") instead of the broker's ERROR.
    import trio
    import trio.testing

    from stomp_proto._client._websocket_stream import WebSocketStream
    from stomp_proto._websocket import ClientHandshake, ServerHandshake

    client = ClientHandshake("127.0.0.1", 1, "/ws", ("1.2",))
    upgrade = ServerHandshake("/ws").receive_data(client.request)
    assert upgrade is not None and upgrade.channel is not None
    server = upgrade.channel
    channel = client.receive_data(upgrade.to_send)
    assert channel is not None
    error = b"ERROR\nmessage:too large\n\n\x00"

    class FullInner:
        """Gives the ERROR and the close in one read; takes what is sent, then waits."""

        def __init__(self) -> None:
            self.incoming = [server.send(error) + server.close()]
            self.taken: list[bytes] = []
            self.room = trio.Event()

        async def send(self, data: bytes) -> None:
            self.taken.append(data)
            await self.room.wait()

        async def receive(self) -> bytes:
            if self.incoming:
                return self.incoming.pop(0)
            await trio.sleep_forever()
            return b""

        async def aclose(self) -> None:
            pass

    async def scenario() -> list[bytes]:
        inner = FullInner()
        stream = WebSocketStream(inner, channel)
        got: list[bytes] = []

        async def read(scope: trio.CancelScope) -> None:
            with scope:
                while data := await stream.receive():
                    got.append(data)

        async with trio.open_nursery() as nursery:
            timer = trio.CancelScope()
            nursery.start_soon(read, timer)
            await trio.testing.wait_all_tasks_blocked()  # waiting for room, or done
            timer.cancel()  # the heart-beat timer
        inner.room.set()
        while data := await stream.receive():
            got.append(data)
        # The answer to the close went out: the broker's side sees its close answered.
        answer = server.receive_data(b"".join(inner.taken))
        assert answer.closed and answer.error is None, answer
        return got

    assert b"".join(trio.run(scenario)) == error


def test_threads_a_websocket_close_that_cannot_be_answered_keeps_what_came_before() -> None:
    # The broker's ERROR and its close frame come in one read, and the connection
    # breaks before the close is answered (the broker reset it): the ERROR read
    # with the close must still reach the client, not an OSError in its place.
    from stomp_proto._client._blocking import WebSocketStream
    from stomp_proto._websocket import ClientHandshake, ServerHandshake

    client = ClientHandshake("127.0.0.1", 1, "/ws", ("1.2",))
    upgrade = ServerHandshake("/ws").receive_data(client.request)
    assert upgrade is not None and upgrade.channel is not None
    server = upgrade.channel
    channel = client.receive_data(upgrade.to_send)
    assert channel is not None
    error = b"ERROR\nmessage:too large\n\n\x00"

    class BrokenInner:
        """Gives the ERROR and the close in one read; every send fails."""

        def __init__(self) -> None:
            self.incoming = [server.send(error) + server.close()]

        def wait_readable(self, timeout: float | None) -> bool:
            return True

        def receive(self) -> bytes | None:
            return self.incoming.pop(0) if self.incoming else None

        def send(self, data: bytes) -> None:
            raise ConnectionResetError(104, "Connection reset by peer")

        def shutdown(self) -> None:
            pass

        def close(self) -> None:
            pass

    stream = WebSocketStream(BrokenInner(), channel)  # type: ignore[arg-type]
    got = []
    while (data := stream.receive()) is not None:
        got.append(data)
    assert b"".join(got) == error
