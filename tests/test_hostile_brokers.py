"""Hostile brokers against the client adapters: every adapter, the same attacks.

The embedded broker's side of hostile peers is in test_hostile_peers.py; here
the server is the attacker.  A fake server answers CONNECT and SUBSCRIBE, then
sends what the test asks for: a body too large to accept, a header that never
ends, or messages faster than the application reads them.  The client must end
with a typed error carrying the protocol error as its cause, or - for the
flood - stop reading, so that the memory it holds stays bounded by its own
settings and the kernel's socket buffers, whatever the server tries to send.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from adapter_harness import WAIT, ConnectionLost, Harness, on_every_adapter

from stomp_proto import (
    Connect,
    Connected,
    ErrorKind,
    Limits,
    Message,
    RemoteProtocolError,
    ServerConnection,
    Subscribe,
)

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

#: What the flooding server tries to push: far more than any buffer may hold.
FLOOD_BYTES = 256 * 1024 * 1024
FLOOD_BODY = 64 * 1024


def hostile_broker(
    attack: Callable[[Subscribe, ServerConnection], bytes], report: dict[str, Any]
) -> Handler:
    """A server that answers CONNECT, then answers a SUBSCRIBE with ``attack``'s bytes.

    ``attack`` is called for each write, until the client goes away
    or, for a flood, until ``FLOOD_BYTES`` are out; ``report["sent"]`` counts
    what the client's socket took.
    """

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = ServerConnection()
        report["sent"] = 0
        try:
            while data := await reader.read(65536):
                conn.receive_data(data)
                for event in iter(conn.next_event, None):
                    if isinstance(event, Connect):
                        writer.write(conn.send(Connected(session="hostile")))
                    elif isinstance(event, Subscribe):
                        while report["sent"] < FLOOD_BYTES:
                            chunk = attack(event, conn)
                            writer.write(chunk)
                            await writer.drain()
                            report["sent"] += len(chunk)
                await writer.drain()
        except (ConnectionError, RemoteProtocolError):
            pass  # the client hung up on the attack, as it should
        finally:
            writer.close()

    return handler


def _protocol_error(error: BaseException) -> RemoteProtocolError:
    cause = error.__cause__
    assert isinstance(cause, RemoteProtocolError), repr(error)
    return cause


@on_every_adapter(versions=(None,))
async def test_declared_huge_body_ends_the_session(h: Harness) -> None:
    """A MESSAGE announcing 2 GiB is refused from its head, before any of it is buffered."""

    started: list[bool] = []

    def attack(subscribe: Subscribe, conn: ServerConnection) -> bytes:
        if not started:
            started.append(True)
            head = (
                f"MESSAGE\ndestination:{subscribe.destination}\nmessage-id:m-1\n"
                f"subscription:{subscribe.id}\ncontent-length:2147483648\n\n"
            )
            return head.encode()
        return b"x" * 65536

    report: dict[str, Any] = {}
    port = await h.start_server(hostile_broker(attack, report))
    with pytest.raises(ConnectionLost) as caught:
        async with h.connect(port) as client, client.subscribe("/queue/huge") as messages:
            await messages.get(WAIT)
    assert _protocol_error(caught.value).kind is ErrorKind.TOO_LARGE


@on_every_adapter(versions=(None,))
async def test_endless_header_ends_the_session_at_the_head_limit(h: Harness) -> None:
    """A header that never ends is cut off at the client's ``max_line_length``."""
    limits = Limits(max_line_length=16 * 1024)
    started: list[bool] = []

    def attack(subscribe: Subscribe, conn: ServerConnection) -> bytes:
        if not started:
            started.append(True)
            return b"MESSAGE\ndestination:/queue/endless\nx-endless:"
        return b"a" * 4096

    report: dict[str, Any] = {}
    port = await h.start_server(hostile_broker(attack, report))
    with pytest.raises(ConnectionLost) as caught:
        async with h.connect(port, limits=limits) as client, client.subscribe("/q/e") as m:
            await m.get(WAIT)
    assert _protocol_error(caught.value).kind is ErrorKind.TOO_LARGE
    # The client stopped reading at the limit; the server got rid of no more
    # than that plus what the kernel's buffers took.
    assert report["sent"] < FLOOD_BYTES


@on_every_adapter(versions=(None,))
async def test_flood_to_a_reader_that_does_not_keep_up_is_held_back(h: Harness) -> None:
    """Messages pushed faster than the application reads: reading pauses (back-pressure).

    The client buffers at most ``max_pending_messages`` decoded messages; the
    rest stays in the kernel's socket buffers, so the server cannot get rid of
    its 256 MiB.  When the application reads again, everything arrives in order.
    """
    pending = 4
    count = 0

    def attack(subscribe: Subscribe, conn: ServerConnection) -> bytes:
        nonlocal count
        count += 1
        return conn.send(
            Message(
                subscribe.destination,
                message_id=f"m-{count}",
                subscription=subscribe.id,
                body=count.to_bytes(4, "big") * (FLOOD_BODY // 4),
            )
        )

    report: dict[str, Any] = {}
    port = await h.start_server(hostile_broker(attack, report))
    # timeout=1: the flooding server never reads the DISCONNECT, so closing
    # waits this long for its receipt before giving up on it.
    async with (
        h.connect(port, max_pending_messages=pending, timeout=1.0) as client,
        client.subscribe("/queue/flood") as messages,
    ):
        # Let the server push until the socket buffers are full and it stalls.
        last = -1
        while report.get("sent", 0) != last:
            last = report.get("sent", 0)
            await h.sleep(0.5)
        # Linux loopback buffers grow to a few MiB each way; 32 MiB is well
        # above them and far below the flood.
        assert 0 < report["sent"] < 32 * 1024 * 1024, report
        for n in range(1, 3 * pending):
            message = await messages.get(WAIT)
            assert message is not None
            assert message.body[:4] == n.to_bytes(4, "big")
            assert message.message_id == f"m-{n}"
