"""The asyncio client on uvloop's event loop: a whole session, as on asyncio's own.

uvloop implements asyncio's loop API on libuv (its transports, its buffered
reads); the client uses nothing but that API, so every step of a session -
frames that span reads, acknowledgements held and written together, receipts,
transactions, heart-beats, a graceful end - must behave as on asyncio's loop.
"""

from __future__ import annotations

import asyncio

import pytest
import uvloop
from adapter_harness import WAIT, Harness, run

# Any warning (an unclosed transport, a never-awaited coroutine) fails the test.
pytestmark = [pytest.mark.filterwarnings("error"), pytest.mark.timeout(60)]

#: Bodies of one byte, of a few KiB and of 1 MiB: the last spans many reads.
BODIES = (b"x", bytes(range(256)) * 16, bytes(range(256)) * 4096)


def redelivered(message: object) -> bool:
    return ("redelivered", "true") in getattr(message, "headers", ())


async def whole_session(h: Harness) -> None:
    assert isinstance(asyncio.get_running_loop(), uvloop.Loop)
    broker = await h.start_broker(heartbeat=(100, 100))
    queue = "/queue/uvloop"
    async with (
        h.connect(broker.port, heartbeat=(100, 100)) as client,
        client.subscribe(queue, ack="client-individual") as messages,
    ):
        assert client.version == "1.2"
        for body in BODIES:
            await client.send(queue, body)
        await client.send(queue, "last", receipt=True)
        received = [await messages.get(WAIT) for _ in range(len(BODIES) + 1)]
        assert [m.body for m in received] == [*BODIES, b"last"]
        for message in received[:-1]:
            await client.ack(message)  # plain ACKs: held, then written together
        await client.nack(received[-1])
        again = await messages.get(WAIT)
        assert (again.body, again.message_id) == (b"last", received[-1].message_id)
        assert redelivered(again)
        await client.ack(again, receipt=True)
        assert client.connection.pending_acks(messages.id) == ()
        async with client.transaction() as tx:
            await client.send(queue, b"in a transaction", transaction=tx)
        committed = await messages.get(WAIT)
        assert committed.body == b"in a transaction"
        await client.ack(committed)
        await h.sleep(0.5)  # five heart-beat intervals: the broker drops a client silent for 150 ms
        assert await h.sessions(broker) == 1
        await client.send(queue, b"still here", receipt=True)
        still = await messages.get(WAIT)
        assert still.body == b"still here"
        await client.ack(still, receipt=True)
    await h.expect_only(broker.port, queue)  # nothing was left unacknowledged


def test_a_whole_session_on_uvloop() -> None:
    run("asyncio", whole_session, loop_factory=uvloop.new_event_loop)
