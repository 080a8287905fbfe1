"""Async writers that wait for each other, on asyncio and trio.

A send holds the client's write lock while the socket drains, so writers of
large messages queue for it.  Each gets it in turn, frames reach the broker
whole, and a writer cancelled while it waits takes nothing with it: the
lock passes on and the client keeps working.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
import trio
from adapter_harness import WAIT, Harness, run

pytestmark = [pytest.mark.filterwarnings("error"), pytest.mark.timeout(60)]

#: Beyond what a client gathers before it waits for the socket to drain.
BIG = 256 * 1024
WRITERS = 8


async def side_by_side(
    h: Harness, writers: list[Callable[[], Awaitable[None]]], cancelled: set[int]
) -> None:
    """Run ``writers`` at once; cancel those numbered in ``cancelled`` once all have started."""
    if h.adapter == "trio":
        async with trio.open_nursery() as nursery:
            scopes = []
            for writer in writers:
                scope = trio.CancelScope()
                scopes.append(scope)

                async def one(
                    writer: Callable[[], Awaitable[None]] = writer, scope: trio.CancelScope = scope
                ) -> None:
                    with scope:
                        await writer()

                nursery.start_soon(one)
            await trio.sleep(0)
            for n in cancelled:
                scopes[n].cancel()
        return
    tasks = [asyncio.create_task(writer()) for writer in writers]  # type: ignore[arg-type]
    await asyncio.sleep(0)
    for n in cancelled:
        tasks[n].cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    for n, result in enumerate(results):
        if n not in cancelled and result is not None:
            raise result


async def writers_queue_for_the_lock(h: Harness) -> None:
    broker = await h.start_broker()
    queue = "/queue/writers"
    async with (
        h.connect(broker.port) as producer,
        h.connect(broker.port) as consumer,
        consumer.subscribe(queue) as messages,
    ):

        def writer(n: int) -> Callable[[], Awaitable[None]]:
            return lambda: producer.send(queue, bytes([n]) * BIG)

        cancelled = set(range(1, WRITERS, 2))
        await side_by_side(h, [writer(n) for n in range(WRITERS)], cancelled)
        await producer.send(queue, b"last", receipt=True)  # the lock was passed on
        seen = []
        while (message := await messages.get(WAIT)).body != b"last":
            n = message.body[0]
            assert message.body == bytes([n]) * BIG  # whole: no other frame inside it
            seen.append(n)
    assert len(seen) == len(set(seen))
    assert set(range(0, WRITERS, 2)) <= set(seen)  # every writer not cancelled got through


@pytest.mark.parametrize("adapter", ["asyncio", "trio"])
def test_writers_queue_for_the_write_lock(adapter: str) -> None:
    run(adapter, writers_queue_for_the_lock)
