"""What stomp.py programs rely on, in the native clients (asyncio, trio, threads):
explicit transactions, UNSUBSCRIBE with headers, request/reply, the state hooks.

Each runs against the embedded broker, in the three clients; the threads client
is driven from a worker thread through :func:`in_thread` so that one async test
body can check all three the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest
import trio
from test_threads_concurrency import HOST, BrokerThread

import stomp_proto.asyncio
import stomp_proto.threads
import stomp_proto.trio
from stomp_proto import LocalProtocolError

T = TypeVar("T")


@pytest.fixture
def broker() -> Iterator[BrokerThread]:
    service = BrokerThread()
    try:
        yield service
    finally:
        service.close()


def run_async(adapter: str, main: Callable[[Any], Awaitable[T]]) -> T:
    """``main(module)`` under asyncio or trio, with that adapter's module."""
    if adapter == "asyncio":
        return asyncio.run(main(stomp_proto.asyncio))  # type: ignore[arg-type]
    return trio.run(main, stomp_proto.trio)


ASYNC = ["asyncio", "trio"]


# -- begin(): a transaction object -------------------------------------------------


@pytest.mark.parametrize("adapter", ASYNC)
def test_begin_commit_and_abort_async(broker: BrokerThread, adapter: str) -> None:
    """1.2 §ABORT: what an aborted transaction held is not delivered; §COMMIT: a
    committed one's is."""

    async def main(module: Any) -> list[bytes]:
        async with (
            module.connect(HOST, broker.port) as client,
            client.subscribe("/queue/tx", ack="client-individual") as subscription,
        ):
            dropped = await client.begin()
            await dropped.send("/queue/tx", "aborted")
            await dropped.abort()
            kept = await client.begin()
            assert kept.id != dropped.id and kept.open
            await kept.send("/queue/tx", "one")
            await kept.send("/queue/tx", "two")
            await kept.commit()
            assert not kept.open
            with pytest.raises(LocalProtocolError, match="committed already"):
                await kept.send("/queue/tx", "late")
            with pytest.raises(LocalProtocolError, match="aborted already"):
                await dropped.commit()
            first = await subscription.get(timeout=20)
            second = await subscription.get(timeout=20)
            assert first is not None and second is not None
            settle = await client.begin()
            await settle.ack(first)
            await settle.nack(second)
            await settle.commit()
            return [first.body, second.body]

    assert run_async(adapter, main) == [b"one", b"two"]


def test_begin_commit_and_abort_threads(broker: BrokerThread) -> None:
    with (
        stomp_proto.threads.connect(HOST, broker.port) as client,
        client.subscribe("/queue/tx", ack="client-individual") as subscription,
    ):
        dropped = client.begin()
        dropped.send("/queue/tx", "aborted")
        dropped.abort()
        kept = client.begin()
        kept.send("/queue/tx", "one")
        kept.commit()
        with pytest.raises(LocalProtocolError, match="committed already"):
            kept.abort()
        message = subscription.get(timeout=20)
        assert message is not None and message.body == b"one"
        settle = client.begin()
        settle.ack(message)
        settle.commit()
        assert "committed" in repr(settle)
