"""What stomp.py programs rely on, in the native clients (asyncio, trio, threads):
explicit transactions, UNSUBSCRIBE with headers, request/reply, the state hooks.

Each runs against the embedded broker, in the three clients; the threads client
is driven from a worker thread through :func:`in_thread` so that one async test
body can check all three the same way.
"""

from __future__ import annotations

import asyncio
import logging
import threading
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


# -- the frame trace at DEBUG -------------------------------------------------------

SECRET = "s3cret-passcode"
TOKEN = "Bearer t0ken-value"


def _exchange_threads(port: int) -> None:
    with (
        stomp_proto.threads.connect(
            HOST, port, login="guest", passcode=SECRET, headers={"Authorization": TOKEN}
        ) as client,
        client.subscribe("/queue/traced", ack="client-individual") as subscription,
    ):
        client.send("/queue/traced", "x" * 1000, receipt=True)
        message = subscription.get(timeout=20)
        assert message is not None
        client.ack(message)


async def _exchange_async(module: Any, port: int) -> None:
    async with (
        module.connect(
            HOST, port, login="guest", passcode=SECRET, headers={"Authorization": TOKEN}
        ) as client,
        client.subscribe("/queue/traced", ack="client-individual") as subscription,
    ):
        await client.send("/queue/traced", "x" * 1000, receipt=True)
        message = await subscription.get(timeout=20)
        assert message is not None
        await client.ack(message)


@pytest.mark.parametrize("adapter", ["threads", *ASYNC])
def test_every_frame_is_logged_at_debug_with_secrets_masked(
    broker: BrokerThread, adapter: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="stomp_proto.client.frames")
    if adapter == "threads":
        _exchange_threads(broker.port)
    else:
        run_async(adapter, lambda module: _exchange_async(module, broker.port))
    lines = [r.getMessage() for r in caplog.records if r.name == "stomp_proto.client.frames"]
    commands = [line.split()[2] for line in lines]
    outgoing = {line.split()[2] for line in lines if line.startswith(">>>")}
    incoming = {line.split()[2] for line in lines if line.startswith("<<<")}
    assert {"CONNECT", "SUBSCRIBE", "SEND", "ACK", "UNSUBSCRIBE", "DISCONNECT"} <= outgoing
    assert {"CONNECTED", "RECEIPT", "MESSAGE"} <= incoming
    assert commands[0] == "CONNECT" and commands[1] == "CONNECTED"
    text = "\n".join(lines)
    assert SECRET not in text and TOKEN not in text and "t0ken" not in text
    assert "passcode:******" in text and "Authorization:******" in text
    assert "login:guest" in text
    send = next(line for line in lines if " SEND " in line)
    assert "destination:/queue/traced" in send and "(1000 bytes)" in send
    assert "x" * 101 not in send  # the body is cut short


# -- unsubscribe() from the subscription's own callback ----------------------------


@pytest.mark.parametrize("adapter", ASYNC)
def test_unsubscribe_from_its_own_on_message_returns(
    broker: BrokerThread, adapter: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The callback's task does not wait for itself to end: the call returns, and
    nothing fails (a task awaiting itself raises, and the callback's error is logged)."""

    async def main(module: Any) -> list[bytes]:
        seen: list[bytes] = []
        returned: list[bool] = []
        pause = asyncio.sleep if module is stomp_proto.asyncio else trio.sleep
        async with module.connect(HOST, broker.port) as client:

            async def on_message(message: Any) -> None:
                seen.append(message.body)
                await subscription.unsubscribe(receipt=True)
                returned.append(True)

            async with client.subscribe("/queue/self-unsub", on_message=on_message) as subscription:
                await client.send("/queue/self-unsub", "only", receipt=True)
                for _ in range(400):
                    if returned:
                        break
                    await pause(0.05)
        return seen

    assert run_async(adapter, main) == [b"only"]
    assert not [r for r in caplog.records if r.exc_info], "the callback raised"


def test_unsubscribe_from_its_own_on_message_returns_threads(broker: BrokerThread) -> None:
    seen: list[bytes] = []
    done = threading.Event()
    with stomp_proto.threads.connect(HOST, broker.port) as client:

        def on_message(message: Any) -> None:
            seen.append(message.body)
            subscription.unsubscribe(receipt=True)
            done.set()

        with client.subscribe("/queue/self-unsub", on_message=on_message) as subscription:
            client.send("/queue/self-unsub", "only", receipt=True)
            assert done.wait(20)
    assert seen == [b"only"]
