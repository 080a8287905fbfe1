"""The asyncio Broker on 127.0.0.1, spoken to with raw asyncio streams and ClientConnection."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib.util
import logging
import shutil
import socket
import ssl
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest
from helpers import LogRecords
from timeouts import bound_text, scaled

from stomp_proto import (
    AckMode,
    ClientConnection,
    Connect,
    Connected,
    ConnectionClosed,
    Disconnect,
    Error,
    Event,
    HeartBeat,
    Message,
    Receipt,
    Send,
    Subscribe,
    Version,
)
from stomp_proto.broker import Broker, run_broker

# Any warning (an unclosed transport, a never-awaited coroutine) fails the test.
pytestmark = [pytest.mark.filterwarnings("error"), pytest.mark.timeout(30)]

VERSIONS: tuple[Version, ...] = ("1.0", "1.1", "1.2")
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
CLIENT = "plain_socket_client.py"
E = TypeVar("E", bound=Event)


def run(test: Callable[[], Awaitable[None]], timeout: float = 15.0) -> None:
    """Run an async test body on a fresh loop, bounded (``timeout`` on an idle machine,
    scaled by the load factor); fail on leftovers and complaints.

    Complaints are what asyncio or the broker log at WARNING or above: a task
    destroyed while pending, an exception never retrieved, a failed connection.
    """
    complaints = LogRecords("asyncio", "stomp_proto.broker")

    async def bounded() -> None:
        bound = asyncio.timeout(scaled(timeout))
        try:
            async with bound:
                await test()
        except TimeoutError as exc:
            if bound.expired():
                what = getattr(test, "__qualname__", "the test")
                raise TimeoutError(f"{what}: not done after {bound_text(timeout)}") from exc
            raise
        leftovers = asyncio.all_tasks() - {asyncio.current_task()}
        assert not leftovers, f"tasks left running: {leftovers}"

    with complaints.installed():
        asyncio.run(bounded())
        gc.collect()  # so that what is never closed complains now
    assert not complaints.records, complaints.messages()


class StreamClient:
    """A STOMP client on asyncio streams: the adapter loop in its simplest form."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.conn = ClientConnection()
        self.heartbeats = 0

    @classmethod
    async def open(
        cls,
        broker: Broker,
        *,
        ssl_context: ssl.SSLContext | None = None,
        rcvbuf: int | None = None,
    ) -> StreamClient:
        if rcvbuf is None:
            reader, writer = await asyncio.open_connection(
                broker.host, broker.port, ssl=ssl_context
            )
        else:
            # A small fixed receive buffer (no autotuning) makes a slow reader fill up fast.
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, (broker.host, broker.port))
            reader, writer = await asyncio.open_connection(sock=sock, limit=rcvbuf)
        return cls(reader, writer)

    @classmethod
    async def connect(
        cls,
        broker: Broker,
        version: Version = "1.2",
        *,
        heartbeat: tuple[int, int] = (0, 0),
        ssl_context: ssl.SSLContext | None = None,
        rcvbuf: int | None = None,
        login: str | None = None,
        passcode: str | None = None,
    ) -> StreamClient:
        client = await cls.open(broker, ssl_context=ssl_context, rcvbuf=rcvbuf)
        await client.send(
            Connect(
                host="/",
                accept_versions=(version,),
                heartbeat=heartbeat,
                login=login,
                passcode=passcode,
            )
        )
        connected = await client.expect(Connected)
        assert connected.version == version
        return client

    async def send(self, event: Event) -> None:
        self.writer.write(self.conn.send(event))
        await self.writer.drain()

    async def next_event(self, timeout: float = 5.0) -> Event:
        """The next event that is not a heart-beat."""
        while True:
            event = self.conn.next_event()
            if isinstance(event, HeartBeat):
                self.heartbeats += 1
            elif event is not None:
                return event
            else:
                data = await asyncio.wait_for(self.reader.read(65536), timeout)
                self.conn.receive_data(data or None)

    async def expect(self, cls: type[E], timeout: float = 5.0) -> E:
        event = await self.next_event(timeout)
        assert isinstance(event, cls), f"expected {cls.__name__}, got {event!r}"
        return event

    async def closed_by_broker(self, timeout: float = 5.0) -> None:
        """Read until the broker closes the stream."""
        while await asyncio.wait_for(self.reader.read(65536), timeout):
            pass

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError):  # the broker may have reset it first
            await self.writer.wait_closed()


@pytest.mark.parametrize("version", VERSIONS)
def test_round_trip(version: Version) -> None:
    async def body() -> None:
        async with Broker() as broker:
            assert broker.host == "127.0.0.1" and broker.port > 0
            client = await StreamClient.connect(broker, version)
            ack: AckMode = "client" if version == "1.0" else "client-individual"
            await client.send(Subscribe("/queue/rt", id="s1", ack=ack, receipt="r-sub"))
            assert (await client.expect(Receipt)).receipt_id == "r-sub"
            await client.send(Send("/queue/rt", b"hello", headers=(("x-k", "v"),)))
            message = await client.expect(Message)
            assert (message.body, message.headers) == (b"hello", (("x-k", "v"),))
            await client.send(Disconnect(receipt="bye"))
            # The broker closes after the DISCONNECT receipt; the ACK was never sent,
            # so the message is back in its queue.
            assert (await client.expect(Receipt)).receipt_id == "bye"
            await client.closed_by_broker()
            await client.close()
            assert broker.core.queued("/queue/rt") == 1

    run(body)


def test_producer_and_consumer() -> None:
    async def body() -> None:
        async with Broker() as broker:
            consumer = await StreamClient.connect(broker, "1.1")
            producer = await StreamClient.connect(broker, "1.2")
            await consumer.send(Subscribe("/topic/t", id="1", receipt="r"))
            await consumer.expect(Receipt)
            for n in range(50):
                await producer.send(Send("/topic/t", str(n).encode()))
            bodies = [(await consumer.expect(Message)).body for _ in range(50)]
            assert bodies == [str(n).encode() for n in range(50)]
            await producer.close()
            await consumer.close()

    run(body)


def test_wrong_password_closes() -> None:
    async def body() -> None:
        async with Broker(users={"u": "p"}) as broker:
            client = await StreamClient.open(broker)
            await client.send(Connect(host="/", login="u", passcode="nope"))
            error = await client.expect(Error)
            assert error.message == "Bad CONNECT: login failed"
            await client.closed_by_broker()
            await client.close()
            good = await StreamClient.connect(broker, login="u", passcode="p")
            await good.close()

    run(body)


def test_protocol_error_closes_only_that_client() -> None:
    async def body() -> None:
        async with Broker() as broker:
            bad = await StreamClient.connect(broker)
            good = await StreamClient.connect(broker)
            bad.writer.write(b"UNSUBSCRIBE\nid:nope\nreceipt:r1\n\n\x00")
            raw = await asyncio.wait_for(bad.reader.read(), 5)  # to EOF
            assert raw.startswith(b"ERROR\n") and b"receipt-id:r1\n" in raw
            await bad.close()
            await good.send(Send("/queue/x", b"still fine", receipt="r"))
            assert (await good.expect(Receipt)).receipt_id == "r"
            await good.close()

    run(body)


def test_content_length_of_thousands_of_leading_zeros_is_delivered() -> None:
    # More digits than int() reads from a string by default: the broker must
    # neither drop the client nor log a traceback (run() fails on either).
    async def body() -> None:
        async with Broker() as broker:
            consumer = await StreamClient.connect(broker)
            await consumer.send(Subscribe("/queue/zeros", id="0", receipt="s"))
            await consumer.expect(Receipt)
            producer = await StreamClient.connect(broker)
            length = b"0" * 5000 + b"5"
            producer.writer.write(
                b"SEND\ndestination:/queue/zeros\ncontent-length:" + length + b"\n\nhe\x00lo\x00"
            )
            assert (await consumer.expect(Message)).body == b"he\x00lo"
            await producer.send(Send("/queue/zeros", b"after", receipt="r"))
            assert (await producer.expect(Receipt)).receipt_id == "r"
            await producer.close()
            await consumer.close()

    run(body)


def _self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, as PEM files in ``directory``."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    openssl = shutil.which("openssl")
    if openssl is None:
        _self_signed_with_cryptography(cert, key)
        return cert, key
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    return cert, key


def _self_signed_with_cryptography(cert: Path, key: Path) -> None:
    # Only if already installed: it is not a dependency of the project.
    try:
        import datetime
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        pytest.skip("neither the openssl command nor the 'cryptography' package is available")
    private_key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(private_key, hashes.SHA256())
    )
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(
        private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def test_tls(tmp_path: Path) -> None:
    cert, key = _self_signed_certificate(tmp_path)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    client_context = ssl.create_default_context(cafile=str(cert))

    async def body() -> None:
        async with Broker(ssl=server_context) as broker:
            client = await StreamClient.connect(broker, ssl_context=client_context)
            assert client.writer.get_extra_info("peercert") is not None
            await client.send(Subscribe("/queue/tls", id="1"))
            await client.send(Send("/queue/tls", b"secret"))
            assert (await client.expect(Message)).body == b"secret"
            # Left connected: the broker's close must also shut TLS down cleanly.
            await broker.close()
            assert (await client.expect(Error)).message == "broker shutting down"
            await client.closed_by_broker()
            await client.close()

    run(body)


def test_plain_client_cannot_talk_to_tls_broker(tmp_path: Path) -> None:
    cert, key = _self_signed_certificate(tmp_path)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)

    async def body() -> None:
        async with Broker(ssl=server_context) as broker:
            client = await StreamClient.open(broker)
            client.writer.write(ClientConnection().send(Connect(host="/")))
            try:
                data = await asyncio.wait_for(client.reader.read(), 5)  # to EOF
            except ConnectionResetError:
                data = b""
            assert b"CONNECTED" not in data
            await client.close()
            assert broker.core.sessions == ()  # the handshake failed: no session was made

    run(body)


@pytest.mark.parametrize("client_sends", [b"", b"CONNECT\nhost:/\n\n\x00"], ids=["silent", "plain"])
def test_a_failed_tls_handshake_is_ended_within_the_connect_timeout_and_logged(
    tmp_path: Path, client_sends: bytes
) -> None:
    cert, key = _self_signed_certificate(tmp_path)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    said = LogRecords("stomp_proto.broker", level=logging.INFO)

    async def body() -> None:
        async with Broker(ssl=server_context, connect_timeout=0.5) as broker:
            client = await StreamClient.open(broker)
            client.writer.write(client_sends)
            try:
                # Well below asyncio's own 60 s: the broker's CONNECT deadline holds.
                data = await asyncio.wait_for(client.reader.read(), 10)
            except ConnectionResetError:
                data = b""
            assert b"CONNECTED" not in data
            await client.close()
            assert broker.core.sessions == ()

    with said.installed():
        run(body)
    [line] = [m for m in said.messages() if "TLS handshake" in m]
    assert "failed" in line and "127.0.0.1:" in line, line
    if not client_sends:
        assert "0.5 seconds" in line, line


def test_silent_client_is_closed_and_its_messages_requeued() -> None:
    async def body() -> None:
        async with Broker(heartbeat=(0, 100)) as broker:
            other = await StreamClient.connect(broker)
            await other.send(Subscribe("/queue/hb", id="1", ack="client", receipt="r"))
            await other.expect(Receipt)
            # Promise a heart-beat every 100 ms, then say nothing at all.
            silent = await StreamClient.connect(broker, heartbeat=(100, 0))
            await silent.send(Subscribe("/queue/hb", id="1", ack="client", receipt="r"))
            await silent.expect(Receipt)
            await silent.send(Send("/queue/hb", b"a"))
            await silent.send(Send("/queue/hb", b"b"))
            held = await silent.expect(Message)  # one each, round robin
            assert (await other.expect(Message)).body != held.body
            loop = asyncio.get_running_loop()
            start = loop.time()
            await silent.closed_by_broker(timeout=scaled(5))
            # The deadline is 150 ms: closed long before the 5 s bound above, it was the
            # missed heart-beats that closed it (not the bound, not some later cause).
            assert loop.time() - start < scaled(3.0)
            again = await other.expect(Message)
            assert again.body == held.body and ("redelivered", "true") in again.headers
            await silent.close()
            await other.close()

    run(body)


def test_broker_sends_heartbeats() -> None:
    async def body() -> None:
        async with Broker(heartbeat=(100, 0)) as broker:
            client = await StreamClient.connect(broker, heartbeat=(0, 100))
            assert client.conn.heartbeat == (0, 100)
            # Ends on the heart-beats it waits for; each round trip reads what came.
            deadline = asyncio.get_running_loop().time() + scaled(10)
            while client.heartbeats < 2:
                assert asyncio.get_running_loop().time() < deadline, f"no beats in {bound_text(10)}"
                await asyncio.sleep(0.1)
                await client.send(Send("/queue/none", b"", receipt="r"))
                await client.expect(Receipt)
            await client.close()

    run(body)


def test_slow_consumer_does_not_grow_the_broker_buffers() -> None:
    limit = 256 * 1024
    size, count = 128 * 1024, 64  # 8 MiB: more than the kernel buffers can hide

    async def body() -> None:
        async with Broker(output_limit=limit) as broker:
            consumer = await StreamClient.connect(broker, rcvbuf=64 * 1024)
            await consumer.send(Subscribe("/queue/slow", id="1", receipt="r"))
            await consumer.expect(Receipt)
            producer = await StreamClient.connect(broker)
            for n in range(count):
                await producer.send(Send("/queue/slow", bytes([n]) * size))
            await producer.send(Send("/queue/other", b"", receipt="done"))
            await producer.expect(Receipt)
            # The consumer reads nothing: the broker stops delivering, and the rest waits.
            (session,) = [s for s in broker.core.sessions if s.id == "s1"]
            assert session.paused
            assert broker.core.queued("/queue/slow") > 0
            peer = broker._peers[session]
            assert peer.writer.transport.get_write_buffer_size() <= 2 * limit
            # Once it reads, everything arrives, in order.
            for n in range(count):
                message = await consumer.expect(Message)
                assert message.body[:1] == bytes([n]) and len(message.body) == size
            assert broker.core.queued("/queue/slow") == 0
            await producer.close()
            await consumer.close()

    run(body, timeout=25)


def test_close_with_connected_clients_is_clean() -> None:
    async def body() -> None:
        broker = Broker()
        await broker.start()
        idle = await StreamClient.open(broker)  # connected at TCP level only
        clients = [await StreamClient.connect(broker, v) for v in VERSIONS]
        await clients[0].send(Subscribe("/queue/c", id="1", ack="client"))
        await clients[1].send(Send("/queue/c", b"in flight"))
        assert (await clients[0].expect(Message)).body == b"in flight"
        clients[2].writer.write(b"SEND\ndestination:/queue/c\n\nhalf a fr")  # mid-frame
        await asyncio.sleep(0.05)
        await broker.close()
        for client in clients:
            assert (await client.expect(Error)).message == "broker shutting down"
            await client.closed_by_broker()
            await client.close()
        assert (await asyncio.wait_for(idle.reader.read(), 5)).startswith(b"ERROR\n")
        await idle.close()
        await broker.close()  # a second close is harmless
        with pytest.raises(OSError):
            await asyncio.open_connection(broker.host, broker.port)

    run(body)


def test_serve_forever_returns_on_close() -> None:
    async def body() -> None:
        async with Broker() as broker:
            serving = asyncio.create_task(broker.serve_forever())
            await asyncio.sleep(0.01)
            assert not serving.done()
            await broker.close()
            await asyncio.wait_for(serving, 5)

    run(body)


def test_run_broker_serves_until_cancelled() -> None:
    async def body() -> None:
        listening: asyncio.Future[Broker] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(run_broker("127.0.0.1", 0, on_listening=listening.set_result))
        broker = await asyncio.wait_for(listening, 5)
        client = await StreamClient.connect(broker, "1.1")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert (await client.expect(Error)).message == "broker shutting down"
        event = await client.next_event()
        assert isinstance(event, ConnectionClosed)
        await client.close()

    run(body)


def test_abrupt_disconnect_requeues_to_another_client() -> None:
    async def body() -> None:
        async with Broker() as broker:
            doomed = await StreamClient.connect(broker, "1.1")
            await doomed.send(Subscribe("/queue/ab", id="1", ack="client-individual"))
            producer = await StreamClient.connect(broker)
            for n in range(20):
                await producer.send(Send("/queue/ab", str(n).encode()))
            await doomed.expect(Message)
            doomed.writer.transport.abort()  # a reset, not a DISCONNECT
            survivor = await StreamClient.connect(broker, "1.2")
            await survivor.send(Subscribe("/queue/ab", id="1", ack="client"))
            bodies = sorted([int((await survivor.expect(Message)).body) for _ in range(20)])
            assert bodies == list(range(20))
            await doomed.close()
            await producer.close()
            await survivor.close()

    run(body)


def test_example_blocking_client_against_the_broker() -> None:
    spec = importlib.util.spec_from_file_location("plain_socket_client", EXAMPLES / CLIENT)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)

    async def body() -> None:
        # Without heart-beats: with them, the example's timer handling trips over
        # socket.settimeout(0.0) (a BlockingIOError; reported, not this file's to fix).
        async with Broker(heartbeat=(0, 0)) as broker:
            bodies = await asyncio.to_thread(example.main, broker.host, broker.port)
            assert bodies == [b"hello 0", b"hello 1", b"hello 2"]

    run(body)
