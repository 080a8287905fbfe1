"""Every refusal reaches the application, on every client, over real sockets.

* A SEND without a receipt that the broker refuses with an ERROR (here one over
  the embedded broker's ``max_body_size``) is raised as that
  :class:`BrokerError` by the application's next call, even though the client
  reconnected meanwhile; if no call comes, by ``disconnect()``.  Once told, it
  is not told again.
* A connect that times out says so: ``ConnectionLost`` ending in "timed out
  after N s", never an empty reason.
* A MESSAGE for a subscription the client does not know is logged at WARNING,
  once per subscription id (1.2 §MESSAGE: the ``subscription`` header "MUST"
  name the subscription that receives it, so the message cannot be placed).

The backoff under a flapping link is tested on the schedule itself in
``test_client_core.py``, and end to end here: a broker that drops every
session keeps being reconnected to at the first wait.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from adapter_harness import WAIT, BrokerError, Harness, on_every_adapter

from stomp_proto import (
    Backoff,
    Connected,
    ConnectionLost,
    Disconnect,
    Limits,
    Message,
    Receipt,
    ServerConnection,
    Subscribe,
)

pytestmark = pytest.mark.timeout(120)

LIMIT = 64 * 1024
#: Quick reconnects, so that a test waits little for the new session.
QUICK = Backoff(initial=0.02, maximum=0.1, jitter=0.0)


async def reconnected(h: Harness, client: object, before: object) -> None:
    """Until ``client`` is in a new session (its ``connection`` is another one)."""
    for _ in range(int(WAIT / 0.01)):
        connection = client.connection  # type: ignore[attr-defined]
        if connection is not before and connection.version is not None:
            return
        await h.sleep(0.01)
    raise AssertionError("the client did not reconnect")


@on_every_adapter(versions=(None,))
async def test_a_refused_send_without_receipt_is_raised_at_the_next_call(h: Harness) -> None:
    broker = await h.start_broker(limits=Limits(max_body_size=LIMIT))
    async with h.connect(broker.port, reconnect=QUICK) as client:
        first = client.connection
        await client.send("/queue/refused", b"x" * (100 * 1024))  # no receipt: returns at once
        await reconnected(h, client, first)
        with pytest.raises(BrokerError) as refused:
            await client.send("/queue/refused", b"next", receipt=True)
        assert "max_body_size" in str(refused.value)
        # Told once; the client is in its new session and goes on.
        await client.send("/queue/refused", b"after", receipt=True)
    assert await h.queued(broker, "/queue/refused") == 1


@on_every_adapter(versions=(None,))
async def test_a_refusal_no_call_has_raised_is_raised_by_disconnect(h: Harness) -> None:
    broker = await h.start_broker(limits=Limits(max_body_size=LIMIT))
    with pytest.raises(BrokerError) as refused:
        async with h.connect(broker.port, reconnect=QUICK) as client:
            first = client.connection
            await client.send("/queue/last", b"x" * (100 * 1024))
            await reconnected(h, client, first)
    assert "max_body_size" in str(refused.value)


@on_every_adapter(versions=(None,))
async def test_a_refusal_is_raised_once_without_reconnect_too(h: Harness) -> None:
    broker = await h.start_broker(limits=Limits(max_body_size=LIMIT))
    async with h.connect(broker.port) as client:
        await client.send("/queue/once", b"x" * (100 * 1024))
        with pytest.raises(BrokerError):  # the session is over: every call says why
            for _ in range(int(WAIT / 0.01)):
                await client.send("/queue/once", b"y")
                await h.sleep(0.01)
        with pytest.raises(BrokerError):
            await client.send("/queue/once", b"z")
    # Leaving the block raised nothing more: the refusal was told.


@on_every_adapter(versions=(None,))
async def test_a_broker_shutting_down_an_idle_consumer_is_no_refusal(h: Harness) -> None:
    # Only a SEND without receipt can be refused unseen: a consumer whose
    # session ends with a broker's ERROR carries on after the reconnect.
    broker = await h.start_broker()
    async with (
        h.connect(broker.port, reconnect=QUICK) as client,
        client.subscribe("/queue/idle") as messages,
    ):
        first = client.connection
        await client.send("/queue/idle", b"before", receipt=True)
        assert (await messages.get(WAIT)).body == b"before"
        port = broker.port
        await h.stop_broker(broker)
        await h.start_broker(port)
        await reconnected(h, client, first)
        await client.send("/queue/idle", b"after", receipt=True)
        assert (await messages.get(WAIT)).body == b"after"


async def never_answers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(65536)  # the CONNECT; no CONNECTED ever comes
    await asyncio.sleep(WAIT * 2)


@on_every_adapter(versions=(None,))
async def test_a_connect_that_times_out_says_so(h: Harness) -> None:
    port = await h.start_server(never_answers)
    with pytest.raises(ConnectionLost) as lost:
        async with h.connect(port, timeout=0.5):
            pass
    assert str(lost.value) == (
        f"cannot connect to 127.0.0.1:{port}: "
        "the connect attempt timed out after 0.5 s (waiting for CONNECTED)"
    )


async def connects_then_never_answers(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    await reader.read(65536)  # the CONNECT
    writer.write(b"CONNECTED\nversion:1.2\n\n\x00")  # no heart-beats; no RECEIPT ever
    await writer.drain()
    while await reader.read(65536):
        pass


@on_every_adapter(versions=(None,))
async def test_every_timeout_says_what_timed_out_and_after_how_long(h: Harness) -> None:
    # The same words in the three clients: the wait, the broker, the seconds.
    port = await h.start_server(connects_then_never_answers)
    async with h.connect(port, timeout=0.3) as client:
        with pytest.raises(TimeoutError) as receipt:
            await client.send("/queue/t", b"x", receipt=True)
        assert str(receipt.value) == (
            f"the RECEIPT of SEND to /queue/t from 127.0.0.1:{port} timed out after 0.3 s"
        )
        with pytest.raises(TimeoutError) as subscribe:
            async with client.subscribe("/queue/t"):
                pass
        assert str(subscribe.value) == (
            f"the RECEIPT of SUBSCRIBE to /queue/t from 127.0.0.1:{port} timed out after 0.3 s"
        )
        await client.close()
    broker = await h.start_broker()
    async with h.connect(broker.port) as client, client.subscribe("/queue/quiet") as messages:
        with pytest.raises(TimeoutError) as get:
            await messages.get(0.25)
        assert str(get.value) == "the wait for a message on /queue/quiet timed out after 0.25 s"


@contextmanager
def client_warnings() -> Iterator[list[logging.LogRecord]]:
    """WARNING records of the clients, kept here (and from the harness's check)."""
    records: list[logging.LogRecord] = []

    def keep(record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            records.append(record)
            return False
        return True

    logger = logging.getLogger("stomp_proto.client")
    logger.addFilter(keep)
    try:
        yield records
    finally:
        logger.removeFilter(keep)


async def corrupting_server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """CONNECTED; then for the SUBSCRIBE: three MESSAGEs whose subscription id was
    corrupted in transit (two ids), one good one, and the RECEIPT."""
    server = ServerConnection()
    while True:
        data = await reader.read(65536)
        if not data:
            return
        server.receive_data(data)
        while (event := server.next_event()) is not None:
            if type(event).__name__ == "Connect":
                writer.write(server.send(Connected(heartbeat=(0, 0))))
            elif isinstance(event, Subscribe):
                assert event.id is not None and event.receipt is not None
                for n, subscription in enumerate(["sub-9", "sub-9", "xub-1", event.id]):
                    # Written by hand: the server's books refuse a stranger's id.
                    frame = (
                        f"MESSAGE\ndestination:{event.destination}\nmessage-id:m-{n}\n"
                        f"subscription:{subscription}\n\nbody-{n}\x00"
                    )
                    writer.write(frame.encode())
                writer.write(server.send(Receipt(event.receipt)))
            elif isinstance(event, Disconnect) and event.receipt is not None:
                writer.write(server.send(Receipt(event.receipt)))
            await writer.drain()


@on_every_adapter(versions=(None,))
async def test_unsolicited_messages_are_logged_once_per_subscription(h: Harness) -> None:
    port = await h.start_server(corrupting_server)
    with client_warnings() as warnings:
        async with h.connect(port, heartbeat=(0, 0)) as client:
            async with client.subscribe("/queue/a") as messages:
                message = await messages.get(WAIT)
                assert isinstance(message, Message) and message.body == b"body-3"
            if hasattr(client, "unsolicited"):
                assert client.unsolicited.get_nowait().body == b"body-0"
    lines = [record.getMessage() for record in warnings]
    assert len(lines) == 2, lines  # sub-9 once, xub-1 once
    assert "'sub-9'" in lines[0] and "'xub-1'" in lines[1]
    assert all("did not make" in line and "unsolicited" in line for line in lines)
    assert all(record.name == "stomp_proto.client" for record in warnings)
