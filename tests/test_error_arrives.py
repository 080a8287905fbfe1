"""The ERROR that ends a refused connection reaches the client.

A server that closes a socket while the client is still sending makes the
kernel reset the connection, and the reset destroys the ERROR that said why
(the client saw ``ConnectionLost: [Errno 104] Connection reset by peer``).
:func:`stomp_proto.drain_and_close` and the embedded broker half-close, discard
what still arrives, then close.  1.2 §ERROR: "the server MUST close the
connection" after an ERROR - these tests check that the close comes after the
client could read it.

Each case runs on every client (asyncio, trio, threads), over TCP and over
WebSocket:

* a 70 MiB SEND, over the default ``max_body_size`` (64 MiB): refused as soon
  as its ``content-length`` is read, with 70 MiB still on the way;
* a SEND refused for one over-long header line, with 2 MB of good SENDs
  pipelined behind it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import threading
from collections.abc import Awaitable, Callable

import pytest
from adapter_harness import BrokerError, Harness, on_every_adapter

import stomp_proto.asyncio
from stomp_proto import (
    ClientConnection,
    Connect,
    Connected,
    ConnectionState,
    Error,
    Limits,
    RemoteProtocolError,
    ServerConnection,
    drain_and_close,
)

pytestmark = pytest.mark.timeout(120)

PATH = "/ws"
TRANSPORTS = {"tcp": None, "websocket": PATH}
BIG = 70 * 1024 * 1024
PIPELINED = 2 * 1000 * 1000
CHUNK = 64 * 1024


async def send_too_large(h: Harness, websocket: str | None) -> None:
    broker = await h.start_broker(websocket=websocket)
    async with h.connect(broker.port, websocket=websocket) as client:
        with pytest.raises(BrokerError) as refused:
            await client.send("/queue/big", b"x" * BIG, receipt=True)
    assert "max_body_size" in str(refused.value)
    assert await h.sessions(broker) == 0


async def send_behind_a_bad_frame(h: Harness, websocket: str | None) -> None:
    broker = await h.start_broker(websocket=websocket, limits=Limits(max_line_length=1024))
    async with h.connect(broker.port, websocket=websocket) as client:
        with pytest.raises(BrokerError) as refused:
            # Refused by the broker, not by the client: limits bound what is received.
            await client.send("/queue/a", b"bad", headers={"long": "y" * 2000})
            for _ in range(PIPELINED // CHUNK + 1):
                await client.send("/queue/a", b"z" * CHUNK)
            await client.send("/queue/a", b"last", receipt=True)
    assert "max_line_length" in str(refused.value)
    assert await h.queued(broker, "/queue/a") == 0


def on_every_transport(
    case: Callable[[Harness, str | None], Awaitable[None]],
) -> dict[str, Callable[[str, object], None]]:
    tests = {}
    for transport, websocket in TRANSPORTS.items():

        async def scenario(h: Harness, websocket: str | None = websocket) -> None:
            await case(h, websocket)

        scenario.__name__ = f"test_{case.__name__}_over_{transport}"
        scenario.__qualname__ = scenario.__name__
        tests[scenario.__name__] = on_every_adapter(versions=(None,))(scenario)
    return tests


globals().update(on_every_transport(send_too_large))
globals().update(on_every_transport(send_behind_a_bad_frame))


# -- drain_and_close on a plain socket, as the adapter guide's servers use it --------


def answer(conn: ServerConnection, data: bytes | None) -> tuple[bytes, bool]:
    """Feed ``data`` to a server connection: the bytes to write back, and whether
    the client was refused (the bytes end with the ERROR; close next)."""
    conn.receive_data(data)
    reply = b""
    try:
        while (event := conn.next_event()) is not None:
            if isinstance(event, Connect):
                reply += conn.send(Connected())
    except RemoteProtocolError as exc:
        assert exc.event_hint is not None
        return reply + conn.send(exc.event_hint), True
    return reply, False


def refuse_first_bad_frame(
    listener: socket.socket, closer: Callable[[socket.socket], object]
) -> None:
    """Serve one connection: answer its first bad frame with the ERROR, close with ``closer``."""
    sock, _ = listener.accept()
    conn = ServerConnection()
    refused = False
    while not refused:
        reply, refused = answer(conn, sock.recv(65536) or None)
        sock.sendall(reply)
    closer(sock)


def send_frame(destination: str, body: bytes) -> bytes:
    return b"SEND\ndestination:" + destination.encode() + b"\n\n" + body + b"\x00"


def read_behind_a_bad_frame(address: tuple[str, int]) -> list[object]:
    """What a client reads back from ``address`` while it sends a bad frame with 2 MB
    behind it (a blocking socket, written from a second thread)."""
    client = ClientConnection()
    data = client.send(Connect(host="/"))
    # The NUL must follow the content-length bytes (1.2 §Frames); here it does not.
    data += b"SEND\ndestination:/queue/a\ncontent-length:1\n\nxy\x00"
    data += send_frame("/queue/a", b"z" * CHUNK) * (PIPELINED // CHUNK + 1)
    events: list[object] = []
    with socket.create_connection(address) as sock:

        def write() -> None:
            with contextlib.suppress(OSError):  # a reset ends the writing too
                sock.sendall(data)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        try:
            while chunk := sock.recv(65536):
                client.receive_data(chunk)
                events.extend(client)
        except OSError as exc:
            events.append(exc)
        writer.join(10)
    return events


def bad_frame_then_two_megabytes(closer: Callable[[socket.socket], object]) -> list[object]:
    """What the client above reads back from a blocking server that closes with ``closer``."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        server = threading.Thread(
            target=refuse_first_bad_frame, args=(listener, closer), daemon=True
        )
        server.start()
        events = read_behind_a_bad_frame(listener.getsockname())
        server.join(10)
    return events


def assert_the_error_arrived(events: list[object]) -> None:
    """The ERROR, then a clean end of stream: no reset, which would show as an OSError."""
    assert [type(e) for e in events] == [Connected, Error], events
    error = events[1]
    assert isinstance(error, Error)
    assert error.message is not None and "NUL" in error.message


def test_drain_and_close_lets_the_error_arrive() -> None:
    """The ERROR, then a clean end of stream.  After a plain close the kernel resets
    the connection (data was unread); on loopback a client that reads at once may
    still get the ERROR before the reset, but one busy writing gets the reset first
    - as all three of our clients did - so no reset at all is what is asserted."""
    assert_the_error_arrived(bad_frame_then_two_megabytes(drain_and_close))


def test_drain_and_close_gives_up_after_max_bytes() -> None:
    """A peer that keeps sending does not hold the connection: the byte bound ends it."""
    left, right = socket.socketpair()
    with left, right:
        right.sendall(b"x" * 100_000)  # and never closes
        assert drain_and_close(left, max_bytes=1000) == 1000
        assert left.fileno() == -1


def test_drain_and_close_returns_at_the_peers_end_of_stream() -> None:
    left, right = socket.socketpair()
    with left, right:
        right.sendall(b"x" * 5000)
        right.shutdown(socket.SHUT_WR)
        assert drain_and_close(left) == 5000
        # Our half-close came through as end of stream.
        assert right.recv(10) == b""


# -- the asyncio and trio forms, on servers of those frameworks ----------------------


def test_asyncio_drain_and_close_lets_the_error_arrive() -> None:
    """An asyncio server on ServerConnection refuses a client that is still sending:
    stomp_proto.asyncio.drain_and_close gets the ERROR to it (1.2 §ERROR)."""

    async def main() -> tuple[list[object], int]:
        discarded: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def refuse_first_bad_frame(
            reader: asyncio.StreamReader, writer: asyncio.StreamWriter
        ) -> None:
            conn = ServerConnection()
            refused = False
            while not refused:
                reply, refused = answer(conn, await reader.read(65536) or None)
                writer.write(reply)
            discarded.set_result(await stomp_proto.asyncio.drain_and_close(reader, writer))

        server = await asyncio.start_server(refuse_first_bad_frame, "127.0.0.1", 0)
        async with server:
            address = server.sockets[0].getsockname()
            events = await asyncio.to_thread(read_behind_a_bad_frame, address)
            return events, await discarded

    events, discarded = asyncio.run(main())
    assert_the_error_arrived(events)
    # The client was still sending when the ERROR went out: what it sent after the
    # bad frame was read and thrown away, not left unread (which makes a reset).
    assert discarded > 0


def test_trio_drain_and_close_lets_the_error_arrive() -> None:
    """The same on a trio server, with stomp_proto.trio.drain_and_close."""
    trio = pytest.importorskip("trio")
    import stomp_proto.trio

    async def main() -> tuple[list[object], int]:
        send, receive = trio.open_memory_channel[int](1)

        async def refuse_first_bad_frame(stream: trio.SocketStream) -> None:
            conn = ServerConnection()
            refused = False
            while not refused:
                reply, refused = answer(conn, await stream.receive_some(65536) or None)
                await stream.send_all(reply)
            await send.send(await stomp_proto.trio.drain_and_close(stream))

        async with trio.open_nursery() as nursery:
            serve = functools.partial(trio.serve_tcp, refuse_first_bad_frame, 0, host="127.0.0.1")
            listeners = await nursery.start(serve)
            address = listeners[0].socket.getsockname()
            events = await trio.to_thread.run_sync(read_behind_a_bad_frame, address)
            discarded = await receive.receive()
            nursery.cancel_scope.cancel()
        return events, discarded

    events, discarded = trio.run(main)
    assert_the_error_arrived(events)
    assert discarded > 0


def test_asyncio_drain_and_close_gives_up_after_max_bytes() -> None:
    async def main() -> None:
        left, right = socket.socketpair()
        with right:
            reader, writer = await asyncio.open_connection(sock=left)
            right.sendall(b"x" * 100_000)  # and never closes
            assert await stomp_proto.asyncio.drain_and_close(reader, writer, max_bytes=1000) == 1000
            assert writer.is_closing() and left.fileno() == -1

    asyncio.run(main())


def test_asyncio_drain_and_close_returns_at_the_peers_end_of_stream() -> None:
    async def main() -> None:
        left, right = socket.socketpair()
        with right:
            reader, writer = await asyncio.open_connection(sock=left)
            right.sendall(b"x" * 5000)
            right.shutdown(socket.SHUT_WR)
            assert await stomp_proto.asyncio.drain_and_close(reader, writer) == 5000
            assert right.recv(10) == b""  # our half-close came through as end of stream

    asyncio.run(main())


def test_trio_drain_and_close_gives_up_after_max_bytes_and_at_end_of_stream() -> None:
    trio = pytest.importorskip("trio")
    import stomp_proto.trio

    async def main() -> None:
        left, right = socket.socketpair()
        with right:
            right.sendall(b"x" * 100_000)  # and never closes
            stream = trio.SocketStream(trio.socket.from_stdlib_socket(left))
            assert await stomp_proto.trio.drain_and_close(stream, max_bytes=1000) == 1000
        left, right = socket.socketpair()
        with right:
            right.sendall(b"x" * 5000)
            right.shutdown(socket.SHUT_WR)
            stream = trio.SocketStream(trio.socket.from_stdlib_socket(left))
            assert await stomp_proto.trio.drain_and_close(stream) == 5000
            assert right.recv(10) == b""

    trio.run(main)


# -- a server that resets right after its ERROR: the client still reports the ERROR ----------


async def error_then_reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answer CONNECT; at the first bytes after it, send an ERROR and abort (a reset):
    what a server does that closes with unread data."""
    conn = ServerConnection()
    while conn.state is not ConnectionState.CONNECTED:
        data = await reader.read(65536)
        if not data:
            return
        conn.receive_data(data)
        for event in iter(conn.next_event, None):
            if isinstance(event, Connect):
                writer.write(conn.send(Connected()))
    await reader.read(65536)  # the start of the big SEND
    writer.write(conn.send(Error(message="too big", body=b"refused by the test server")))
    await writer.drain()
    writer.transport.abort()


@on_every_adapter(versions=(None,))
async def test_a_write_that_meets_the_reset_raises_the_broker_error(h: Harness) -> None:
    """The client is still writing when the reset comes; its reader has the ERROR
    (it arrived before the reset): the write raises BrokerError, not ConnectionLost."""
    port = await h.start_server(error_then_reset)
    async with h.connect(port) as client:
        with pytest.raises(BrokerError) as refused:
            await client.send("/queue/big", b"x" * (16 * 1024 * 1024))
    assert refused.value.message == "too big"
