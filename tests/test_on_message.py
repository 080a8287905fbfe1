"""``subscribe(..., on_message=fn)`` on the async clients (asyncio and trio).

The threads client's form is tested in ``test_threads_concurrency.py``; these
check the same promise where the callback runs in a task of the client's own:
each message in order, an awaitable result awaited, a raising callback logged
and the next message delivered all the same, and the task ended with its
subscription.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import trio
from test_threads_concurrency import HOST, BrokerThread

import stomp_proto
import stomp_proto.asyncio
import stomp_proto.trio


@pytest.fixture
def broker() -> Iterator[BrokerThread]:
    service = BrokerThread()
    try:
        yield service
    finally:
        service.close()


@pytest.mark.parametrize("adapter", ["asyncio", "trio"])
def test_on_message_in_order_and_survives_a_raising_callback(
    broker: BrokerThread, adapter: str, caplog: pytest.LogCaptureFixture
) -> None:
    if adapter == "asyncio":

        async def main() -> list[bytes]:
            event = asyncio.Event()
            seen: list[bytes] = []

            async def on_message(message: Any) -> None:
                await asyncio.sleep(0)
                seen.append(message.body)
                if message.body == b"2":
                    raise RuntimeError("a listener's own bug")
                if message.body == b"9":
                    event.set()

            async with (
                stomp_proto.asyncio.connect(HOST, broker.port) as client,
                client.subscribe("/queue/async-callbacks", on_message=on_message),
            ):
                for n in range(10):
                    await client.send("/queue/async-callbacks", str(n))
                async with asyncio.timeout(20):
                    await event.wait()
            return seen

        seen = asyncio.run(main())
    else:

        async def main() -> list[bytes]:
            event = trio.Event()
            seen: list[bytes] = []

            def on_message(message: Any) -> None:  # a plain function works too
                seen.append(message.body)
                if message.body == b"2":
                    raise RuntimeError("a listener's own bug")
                if message.body == b"9":
                    event.set()

            async with (
                stomp_proto.trio.connect(HOST, broker.port) as client,
                client.subscribe("/queue/async-callbacks", on_message=on_message),
            ):
                for n in range(10):
                    await client.send("/queue/async-callbacks", str(n))
                with trio.fail_after(20):
                    await event.wait()
            return seen

        seen = trio.run(main)
    assert seen == [str(n).encode() for n in range(10)]
    logged = [r for r in caplog.records if r.name == "stomp_proto.client" and r.exc_info]
    assert len(logged) == 1 and "raised on message" in logged[0].getMessage()


@pytest.mark.parametrize("adapter", ["asyncio", "trio"])
def test_inline_on_message_in_order_in_the_reader(
    broker: BrokerThread, adapter: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``inline=True``: a plain function called by the reader as each message is read,
    in order; what it raises is logged and the next comes; an awaitable it returns is
    closed, not awaited, and logged as an error."""
    seen: list[bytes] = []
    library: Any = asyncio if adapter == "asyncio" else trio
    connect: Any = stomp_proto.asyncio.connect if adapter == "asyncio" else stomp_proto.trio.connect

    async def never_awaited() -> None:
        raise AssertionError("an inline on_message's awaitable was awaited")

    async def main() -> None:
        event = library.Event()

        def on_message(message: Any) -> Any:
            seen.append(message.body)
            if message.body == b"2":
                raise RuntimeError("a listener's own bug")
            if message.body == b"3":
                return never_awaited()
            if message.body == b"9":
                event.set()
            return None

        async with connect(HOST, broker.port) as client:
            with pytest.raises(stomp_proto.LocalProtocolError, match="needs an on_message"):
                client.subscribe("/queue/async-inline", inline=True)
            async with client.subscribe("/queue/async-inline", on_message=on_message, inline=True):
                for n in range(10):
                    await client.send("/queue/async-inline", str(n))
                if adapter == "asyncio":
                    async with asyncio.timeout(20):
                        await event.wait()
                else:
                    with trio.fail_after(20):
                        await event.wait()

    if adapter == "asyncio":
        asyncio.run(main())
    else:
        trio.run(main)
    assert seen == [str(n).encode() for n in range(10)]
    records = [r for r in caplog.records if r.name == "stomp_proto.client"]
    assert len([r for r in records if r.exc_info and "raised on message" in r.getMessage()]) == 1
    assert len([r for r in records if "returned an awaitable" in r.getMessage()]) == 1
