"""The client adapters against the embedded broker: one scenario, every adapter.

Each test below is an async scenario (see tests/adapter_harness.py) run with
the asyncio, trio and threads clients, for each STOMP version it applies to.
Nothing here measures time: where a scenario must show that something did
*not* happen (a message not delivered, not redelivered), it sends a sentinel
after it and checks that the sentinel comes first (queues deliver in order,
redeliveries at the front).
"""

from __future__ import annotations

import pytest
from adapter_harness import HOST, WAIT, ConnectionLost, Harness, in_thread, on_every_adapter

from stomp_proto import LocalProtocolError, Message
from stomp_proto import threads as stomp_threads

# Any warning (an unclosed transport, a never-awaited coroutine) fails the test.
pytestmark = [pytest.mark.filterwarnings("error"), pytest.mark.timeout(60)]

V11 = ("1.1", "1.2")


def redelivered(message: Message) -> bool:
    return ("redelivered", "true") in message.headers


class Boom(Exception):
    """Raised inside a block to see what the client does on the way out."""


# -- connecting ------------------------------------------------------------------------


@on_every_adapter()
async def test_connect_with_login_and_passcode(h: Harness) -> None:
    broker = await h.start_broker(users={"alice": "s3cret", "bob": "other"})
    async with h.connect(broker.port, login="alice", passcode="s3cret") as client:
        assert client.version == h.version
        assert client.connection.version == h.version
        async with client.subscribe("/queue/login") as messages:
            await client.send("/queue/login", b"in", receipt=True)
            assert (await messages.get(WAIT)).body == b"in"
        assert await h.sessions(broker) == 1


@on_every_adapter()
async def test_send_and_receive_with_receipt(h: Harness) -> None:
    broker = await h.start_broker()
    body = b"\x00binary\xff\n body\x00"  # NULs: only content-length can carry this
    async with (
        h.connect(broker.port) as producer,
        h.connect(broker.port) as consumer,
        consumer.subscribe("/queue/basic") as messages,
    ):
        await producer.send("/queue/basic", body, receipt=True)
        await producer.send("/queue/basic", b"second", content_type="application/x-test")
        first = await messages.get(WAIT)
        second = await messages.get(WAIT)
        assert first.body == body
        assert first.destination == "/queue/basic"
        assert first.subscription == messages.id
        assert first.message_id and first.message_id != second.message_id
        assert first.content_type is None
        assert (second.body, second.content_type) == (b"second", "application/x-test")
        assert not redelivered(first)
        # Iterating works too.
        await producer.send("/queue/basic", b"third", receipt=True)
        async for message in messages:
            assert message.body == b"third"
            break


# -- acknowledgement -------------------------------------------------------------------


@on_every_adapter()
async def test_ack_auto(h: Harness) -> None:
    broker = await h.start_broker()
    queue = "/queue/auto"
    async with h.connect(broker.port) as client, client.subscribe(queue) as messages:
        for n in range(3):
            await client.send(queue, f"m{n}", receipt=n == 2)
        received = [await messages.get(WAIT) for _ in range(3)]
        assert [m.body for m in received] == [b"m0", b"m1", b"m2"]
        assert all(m.ack is None for m in received)
        # Settled on delivery: there is nothing to acknowledge.
        with pytest.raises(LocalProtocolError):
            await client.ack(received[0])
    await h.expect_only(broker.port, queue)


@on_every_adapter()
async def test_ack_client_is_cumulative(h: Harness) -> None:
    broker = await h.start_broker()
    queue = "/queue/cumulative"
    async with (
        h.connect(broker.port) as client,
        client.subscribe(queue, ack="client") as messages,
    ):
        for n in range(3):
            await client.send(queue, f"m{n}", receipt=n == 2)
        received = [await messages.get(WAIT) for _ in range(3)]
        assert [m.body for m in received] == [b"m0", b"m1", b"m2"]
        assert (received[0].ack is not None) == (h.version == "1.2")
        await client.ack(received[2], receipt=True)  # covers the two before it
        assert client.connection.pending_acks(messages.id) == ()
        with pytest.raises(LocalProtocolError):
            await client.ack(received[0])  # already settled by the cumulative ACK
    # The consumer is gone (DISCONNECT); anything unacknowledged would be back in the queue.
    await h.expect_only(broker.port, queue, ack="client")


@on_every_adapter(versions=V11)
async def test_ack_client_individual(h: Harness) -> None:
    broker = await h.start_broker()
    queue = "/queue/individual"
    async with (
        h.connect(broker.port) as client,
        client.subscribe(queue, ack="client-individual") as messages,
    ):
        for n in (1, 2, 3):
            await client.send(queue, f"m{n}", receipt=n == 3)
        m1, m2, m3 = [await messages.get(WAIT) for _ in range(3)]
        assert [m.body for m in (m1, m2, m3)] == [b"m1", b"m2", b"m3"]
        await client.ack(m1)
        await client.ack(m3, receipt=True)
        assert len(client.connection.pending_acks(messages.id)) == 1
        await client.close()  # no UNSUBSCRIBE, no DISCONNECT: the connection just ends
    async with (
        h.connect(broker.port) as client,
        client.subscribe(queue, ack="client-individual") as messages,
    ):
        again = await messages.get(WAIT)
        assert again.body == b"m2"
        assert again.message_id == m2.message_id
        assert redelivered(again)
        await client.ack(again)
        await client.send(queue, b"sentinel", receipt=True)
        assert (await messages.get(WAIT)).body == b"sentinel"  # exactly one came back


@on_every_adapter(versions=V11)
async def test_nack_redelivers(h: Harness) -> None:
    broker = await h.start_broker()
    queue = "/queue/nack"
    async with (
        h.connect(broker.port) as client,
        client.subscribe(queue, ack="client-individual") as messages,
    ):
        await client.send(queue, b"try again", receipt=True)
        first = await messages.get(WAIT)
        assert not redelivered(first)
        await client.nack(first, receipt=True)
        again = await messages.get(WAIT)
        assert (again.body, again.message_id) == (first.body, first.message_id)
        assert redelivered(again)
        with pytest.raises(LocalProtocolError):
            await client.ack(first)  # settled by the NACK; the redelivery is a new one
        await client.ack(again, receipt=True)
    await h.expect_only(broker.port, queue)


@on_every_adapter(versions=("1.0",))
async def test_stomp_10_has_no_nack_and_no_client_individual(h: Harness) -> None:
    broker = await h.start_broker()
    async with h.connect(broker.port) as client:
        with pytest.raises(LocalProtocolError):
            async with client.subscribe("/queue/ci", ack="client-individual"):
                pass
        async with client.subscribe("/queue/ci", ack="client") as messages:
            await client.send("/queue/ci", b"x", receipt=True)
            message = await messages.get(WAIT)
            with pytest.raises(LocalProtocolError):
                await client.nack(message)
            await client.ack(message, receipt=True)  # refusals left the client usable


# -- transactions ----------------------------------------------------------------------


@on_every_adapter()
async def test_transaction_commit_delivers(h: Harness) -> None:
    broker = await h.start_broker()
    queue = "/queue/tx-commit"
    async with h.connect(broker.port) as client, client.subscribe(queue) as messages:
        async with client.transaction() as tx:
            await client.send(queue, b"in tx 1", transaction=tx, receipt=True)
            await client.send(queue, b"in tx 2", transaction=tx)
            assert client.connection.transactions == {tx}
            await client.send(queue, b"outside", receipt=True)
            # Sent later, delivered first: the transaction holds its messages.
            assert (await messages.get(WAIT)).body == b"outside"
            assert await h.queued(broker, queue) == 0
        assert client.connection.transactions == frozenset()
        assert (await messages.get(WAIT)).body == b"in tx 1"
        assert (await messages.get(WAIT)).body == b"in tx 2"


@on_every_adapter()
async def test_exception_in_transaction_aborts(h: Harness) -> None:
    broker = await h.start_broker()
    queue = "/queue/tx-abort"
    async with h.connect(broker.port) as client, client.subscribe(queue) as messages:
        with pytest.raises(Boom):
            async with client.transaction() as tx:
                await client.send(queue, b"dropped", transaction=tx, receipt=True)
                raise Boom
        assert client.connection.transactions == frozenset()  # ABORT was sent
        await client.send(queue, b"after", receipt=True)
        assert (await messages.get(WAIT)).body == b"after"
    await h.expect_only(broker.port, queue)


@on_every_adapter(versions=V11)
async def test_abort_returns_messages_acked_in_the_transaction(h: Harness) -> None:
    broker = await h.start_broker()
    queue = "/queue/tx-ack"
    async with (
        h.connect(broker.port) as client,
        client.subscribe(queue, ack="client-individual") as messages,
    ):
        await client.send(queue, b"work", receipt=True)
        message = await messages.get(WAIT)
        with pytest.raises(Boom):
            async with client.transaction() as tx:
                await client.ack(message, transaction=tx)
                raise Boom
        again = await messages.get(WAIT)
        assert (again.body, again.message_id) == (b"work", message.message_id)
        assert redelivered(again)
        async with client.transaction() as tx:
            await client.ack(again, transaction=tx)
    await h.expect_only(broker.port, queue)


# -- receipts --------------------------------------------------------------------------


@on_every_adapter()
async def test_receipts_confirm_each_operation(h: Harness) -> None:
    broker = await h.start_broker()
    queue = "/queue/receipts"
    async with h.connect(broker.port) as client:
        for n in range(1, 4):
            await client.send(queue, b"kept", receipt=True)
            # The RECEIPT comes after the broker acted: the message is in the queue.
            assert await h.queued(broker, queue) == n
        assert client.connection.pending_receipts == {}
        ack = "client" if h.version == "1.0" else "client-individual"
        async with client.subscribe(queue, ack=ack) as messages:
            received = [await messages.get(WAIT) for _ in range(3)]
            for message in received:
                await client.ack(message, receipt=True)
            assert client.connection.pending_acks(messages.id) == ()
        assert client.connection.pending_receipts == {}
    assert await h.queued(broker, queue) == 0


# -- destinations ----------------------------------------------------------------------


@on_every_adapter()
async def test_topic_fans_out_to_every_subscriber(h: Harness) -> None:
    broker = await h.start_broker()
    topic = "/topic/news"
    async with (
        h.connect(broker.port) as alice,
        h.connect(broker.port) as bob,
        alice.subscribe(topic) as for_alice,
        bob.subscribe(topic) as for_bob,
        alice.subscribe(topic) as for_alice_again,
    ):
        await bob.send(topic, b"extra", receipt=True)
        copies = [await sub.get(WAIT) for sub in (for_alice, for_bob, for_alice_again)]
        assert [m.body for m in copies] == [b"extra"] * 3
        assert [m.subscription for m in copies] == [
            for_alice.id,
            for_bob.id,
            for_alice_again.id,
        ]
        assert len({m.message_id for m in copies}) == 3


@on_every_adapter()
async def test_unsubscribe_stops_delivery(h: Harness) -> None:
    broker = await h.start_broker()
    queue = "/queue/unsub"
    async with h.connect(broker.port) as client:
        async with client.subscribe(queue) as first:
            await client.send(queue, b"before", receipt=True)
            assert (await first.get(WAIT)).body == b"before"
        assert await first.get(WAIT) is None  # ended cleanly
        await client.send(queue, b"after", receipt=True)
        assert await h.queued(broker, queue) == 1  # nobody took it
        async with client.subscribe(queue) as second:
            assert (await second.get(WAIT)).body == b"after"


# -- message content -------------------------------------------------------------------


@on_every_adapter()
async def test_str_body_is_utf8_text(h: Harness) -> None:
    broker = await h.start_broker()
    queue = "/queue/text"
    text = "héllo wörld ✓ 𝄞"
    async with h.connect(broker.port) as client, client.subscribe(queue) as messages:
        await client.send(queue, text, receipt=True)
        message = await messages.get(WAIT)
        assert message.body == text.encode("utf-8")
        assert message.body.decode("utf-8") == text
        assert message.content_type == "text/plain;charset=utf-8"
        # An explicit content type wins; bytes get none by default.
        await client.send(queue, text, content_type="text/x-custom", receipt=True)
        assert (await messages.get(WAIT)).content_type == "text/x-custom"
        await client.send(queue, text.encode(), receipt=True)
        assert (await messages.get(WAIT)).content_type is None


@on_every_adapter()
async def test_extra_headers_reach_the_consumer(h: Harness) -> None:
    broker = await h.start_broker()
    queue = "/queue/headers"
    headers = {"x-trace": "abc-123", "x-empty": "", "priority-ish": "7", "x-spaced": " a b "}
    if h.version != "1.0":  # 1.0 has no header escaping
        headers["x-special"] = "colon:back\\slash\nnew line"
    async with (
        h.connect(broker.port) as producer,
        h.connect(broker.port) as consumer,
        consumer.subscribe(queue) as messages,
    ):
        await producer.send(queue, b"h", headers=headers, receipt=True)
        message = await messages.get(WAIT)
        extra = [(k, v) for k, v in message.headers if k in headers]
        assert extra == list(headers.items())  # all of them, untouched and in order


@on_every_adapter()
async def test_content_length_can_be_left_out(h: Harness) -> None:
    broker = await h.start_broker()
    queue = "/queue/length"
    async with h.connect(broker.port) as client, client.subscribe(queue) as messages:
        await client.send(queue, b"text message", content_length=False, receipt=True)
        await client.send(queue, b"bytes message", receipt=True)
        text, data = await messages.get(WAIT), await messages.get(WAIT)
        assert (text.body, text.content_length) == (b"text message", False)
        assert (data.body, data.content_length) == (b"bytes message", True)


# -- flow ------------------------------------------------------------------------------


@on_every_adapter()
async def test_back_pressure_loses_nothing(h: Harness) -> None:
    broker = await h.start_broker(output_limit=64 * 1024)
    queue = "/queue/slow"
    count, filler = 200, b"." * 4096  # 800 KiB: well past the broker's output limit
    async with (
        h.connect(broker.port, max_pending_messages=5) as consumer,
        h.connect(broker.port) as producer,
        consumer.subscribe(queue) as messages,
    ):
        for n in range(count):
            await producer.send(
                queue, b"%d|" % n + filler, headers={"x-seq": str(n)}, receipt=n == count - 1
            )
        received: list[int] = []
        for n in range(count):
            message = await messages.get(WAIT)
            received.append(int(message.body.split(b"|")[0]))
            assert dict(message.headers)["x-seq"] == str(received[-1])
            if n % 10 == 0:
                await h.sleep(0.005)  # a slow consumer
        assert received == list(range(count))
        await producer.send(queue, b"last", receipt=True)
        assert (await messages.get(WAIT)).body == b"last"


@on_every_adapter()
async def test_heartbeats_keep_an_idle_connection_alive(h: Harness) -> None:
    broker = await h.start_broker(heartbeat=(100, 100))
    queue = "/queue/idle"
    async with (
        h.connect(broker.port, heartbeat=(100, 100)) as client,
        client.subscribe(queue) as messages,
    ):
        if h.version != "1.0":
            # (1.0 predates heart-beats; both ends honour the header anyway, as RabbitMQ does.)
            assert client.connection.heartbeat == (100, 100)
        await h.sleep(0.8)  # eight intervals; the broker drops a client silent for 150 ms
        assert await h.sessions(broker) == 1
        await client.send(queue, b"still here", receipt=True)
        assert (await messages.get(WAIT)).body == b"still here"


# -- the end of a client ---------------------------------------------------------------


@on_every_adapter(versions=(None,))
async def test_calls_after_close_raise_connection_lost(h: Harness) -> None:
    broker = await h.start_broker()
    async with h.connect(broker.port) as client:
        await client.close()
        with pytest.raises(ConnectionLost):
            await client.send("/queue/closed", b"too late")
        with pytest.raises(ConnectionLost):
            async with client.subscribe("/queue/closed"):
                pass


@on_every_adapter(versions=(None,))
async def test_blocks_after_close(h: Harness) -> None:
    """close() inside the blocks, then leave them: no error, whatever the adapter."""
    broker = await h.start_broker()

    async def asynchronous() -> None:
        async with h.connect(broker.port) as client:
            async with client.subscribe("/queue/closing"):
                await client.close()
            await client.close()
            await client.disconnect()

    def blocking() -> None:  # without the harness's ThreadsClient, which works around it
        with stomp_threads.connect(HOST, broker.port, **h.options()) as client:
            with client.subscribe("/queue/closing"):
                client.close()
            client.close()
            client.disconnect()

    if h.adapter == "threads":
        await in_thread(blocking)
    else:
        await asynchronous()
