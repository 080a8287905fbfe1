"""``client.request()``: request/reply over a temporary queue, on the embedded broker,
RabbitMQ and ActiveMQ, in the three clients; and ``client.unsolicited`` waited on.

The replier is a threads client whose ``on_message`` answers each request on the
``reply-to`` it names, with its ``correlation-id``, as any replier does.  RabbitMQ
makes the ``/temp-queue/`` itself and delivers the replies on a subscription the
requester never made; ActiveMQ and the embedded broker get a reply subscription.
Either way a reply reaches its request, and no WARNING is logged for it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import trio
from brokers import Endpoint, real_broker
from test_threads_concurrency import HOST, BrokerThread

import stomp_proto.asyncio
import stomp_proto.threads
import stomp_proto.trio
from stomp_proto import LocalProtocolError, Message
from stomp_proto.threads import Unsolicited

WAIT = 20.0


@pytest.fixture(params=["embedded", "rabbitmq", "activemq"])
def endpoint(request: pytest.FixtureRequest) -> Iterator[Endpoint]:
    if request.param != "embedded":
        yield real_broker(request.param)
        return
    service = BrokerThread()
    try:
        yield Endpoint("embedded", service.port)
    finally:
        service.close()


@contextmanager
def replier(endpoint: Endpoint, queue: str, *, answer: bool = True) -> Iterator[list[Message]]:
    """A client answering each request on ``queue`` with its body in capitals (or,
    without ``answer``, keeping the requests for the test to answer)."""
    kept: list[Message] = []
    client = stomp_proto.threads.connect(HOST, endpoint.port, **endpoint.options())

    def on_request(message: Message) -> None:
        if not answer:
            kept.append(message)
            return
        reply_to, correlation = message.get("reply-to"), message.get("correlation-id")
        assert reply_to is not None and correlation is not None
        client.send(reply_to, message.body.upper(), headers={"correlation-id": correlation})

    with client, client.subscribe(queue, on_message=on_request):
        yield kept


def stranger_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "stomp_proto.client" and r.levelno >= logging.WARNING
    ]


def test_request_reply_threads(endpoint: Endpoint, caplog: pytest.LogCaptureFixture) -> None:
    queue = f"/queue/rpc-{uuid.uuid4().hex[:8]}"
    with (
        replier(endpoint, queue),
        stomp_proto.threads.connect(HOST, endpoint.port, **endpoint.options()) as client,
    ):
        replies: dict[str, bytes] = {}

        def ask(word: str) -> None:
            replies[word] = client.request(queue, word, timeout=WAIT).body

        workers = [threading.Thread(target=ask, args=(w,)) for w in ("one", "two", "three")]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(WAIT * 2)
        # Each reply went to its own request (correlation-id), not to another's.
        assert replies == {"one": b"ONE", "two": b"TWO", "three": b"THREE"}
        assert client.request(queue, "again", timeout=WAIT).body == b"AGAIN"
        assert client.unsolicited.empty() and client.unsolicited.dropped == 0
    assert stranger_warnings(caplog) == []


@pytest.mark.parametrize("adapter", ["asyncio", "trio"])
def test_request_reply_async(
    endpoint: Endpoint, adapter: str, caplog: pytest.LogCaptureFixture
) -> None:
    if adapter == "trio" and not endpoint.is_embedded:
        pytest.skip("trio's client is the asyncio one's code: one adapter per real broker")
    queue = f"/queue/rpc-{uuid.uuid4().hex[:8]}"

    async def main(module: Any) -> list[bytes]:
        async with module.connect(HOST, endpoint.port, **endpoint.options()) as client:
            if adapter == "asyncio":
                replies = await asyncio.gather(
                    *(client.request(queue, w, timeout=WAIT) for w in ("one", "two", "three"))
                )
            else:
                replies = [await client.request(queue, w, timeout=WAIT) for w in ("one", "two")]
            assert client.unsolicited.empty()
            return [reply.body for reply in replies]

    with replier(endpoint, queue):
        if adapter == "asyncio":
            bodies = asyncio.run(main(stomp_proto.asyncio))
        else:
            bodies = trio.run(main, stomp_proto.trio)
    assert bodies == ([b"ONE", b"TWO", b"THREE"] if adapter == "asyncio" else [b"ONE", b"TWO"])
    assert stranger_warnings(caplog) == []


def test_a_late_reply_goes_to_unsolicited_without_a_warning(
    endpoint: Endpoint, caplog: pytest.LogCaptureFixture
) -> None:
    """A request that timed out stops waiting; its reply, when it comes, is kept in
    ``client.unsolicited`` - waited for there - and asked for, so not warned of."""
    queue = f"/queue/rpc-{uuid.uuid4().hex[:8]}"
    with (
        replier(endpoint, queue, answer=False) as kept,
        stomp_proto.threads.connect(HOST, endpoint.port, **endpoint.options()) as client,
    ):
        with pytest.raises(TimeoutError, match="the reply to a request to"):
            client.request(queue, "slow", timeout=0.2)
        with stomp_proto.threads.connect(HOST, endpoint.port, **endpoint.options()) as late:
            for _ in range(int(WAIT / 0.05)):
                if kept:
                    break
                threading.Event().wait(0.05)
            request = kept[0]
            reply_to = request.get("reply-to")
            assert reply_to is not None
            headers = {"correlation-id": request.get("correlation-id", "")}
            late.send(reply_to, "late", headers=headers, receipt=True)
        reply = client.unsolicited.get(timeout=WAIT)
        assert reply is not None and reply.body == b"late"
    assert stranger_warnings(caplog) == []


def test_request_refuses_the_headers_it_sets() -> None:
    service = BrokerThread()
    try:
        with (
            stomp_proto.threads.connect(HOST, service.port) as client,
            pytest.raises(LocalProtocolError, match="correlation-id"),
        ):
            client.request("/queue/x", "", headers={"correlation-id": "mine"})
    finally:
        service.close()


# -- client.unsolicited -------------------------------------------------------------


def _message(n: int) -> Message:
    return Message("/temp-queue/x", f"m-{n}", subscription="/temp-queue/x", body=str(n).encode())


def test_unsolicited_is_bounded_and_counts_what_it_dropped() -> None:
    unsolicited = Unsolicited(2)
    for n in range(5):
        unsolicited._put(_message(n))
    assert len(unsolicited) == 2 and unsolicited.dropped == 3 and unsolicited.limit == 2
    assert [unsolicited.get(timeout=0).body, unsolicited.popleft().body] == [b"3", b"4"]  # type: ignore[union-attr]
    assert unsolicited.get_nowait() is None and unsolicited.empty()
    with pytest.raises(TimeoutError, match="unsolicited message"):
        unsolicited.get(timeout=0.01)
    unsolicited._end()
    assert unsolicited.get() is None  # the client has ended: no wait


def test_unsolicited_get_waits_for_a_message_threads() -> None:
    unsolicited = Unsolicited(4)
    got: list[Message | None] = []
    waiter = threading.Thread(target=lambda: got.append(unsolicited.get(timeout=WAIT)))
    waiter.start()
    unsolicited._put(_message(7))
    waiter.join(WAIT)
    assert got and got[0] is not None and got[0].body == b"7"


@pytest.mark.parametrize("adapter", ["asyncio", "trio"])
def test_unsolicited_get_waits_for_a_message_async(adapter: str) -> None:
    service = BrokerThread()

    async def main(module: Any, sleep: Any) -> bytes:
        async with module.connect(HOST, service.port) as client:

            async def later() -> None:
                await sleep(0.01)
                client.unsolicited._put(_message(8))

            if adapter == "asyncio":
                task = asyncio.ensure_future(later())
                message = await client.unsolicited.get(timeout=WAIT)
                await task
            else:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(later)
                    message = await client.unsolicited.get(timeout=WAIT)
            assert message is not None
            return message.body

    try:
        if adapter == "asyncio":
            assert asyncio.run(main(stomp_proto.asyncio, asyncio.sleep)) == b"8"
        else:
            assert trio.run(main, stomp_proto.trio, trio.sleep) == b"8"
    finally:
        service.close()
