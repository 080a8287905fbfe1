"""The clients under faults: each test here is a bug that once wedged or leaked a session.

Same harness as test_adapter_faults.py (every test runs on the asyncio, trio
and threads clients).  The fake brokers are scripted per connection: the
n-th connection a client makes (from 1) does what the test says, so a
reconnect meets the fault at a known point.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import pytest
from adapter_harness import (
    WAIT,
    Backoff,
    BrokerError,
    ConnectionLost,
    Harness,
    on_every_adapter,
)

from stomp_proto import (
    Connect,
    Connected,
    ConnectionClosed,
    Error,
    Receipt,
    RemoteProtocolError,
    ServerConnection,
    Subscribe,
)

pytestmark = [pytest.mark.filterwarnings("error"), pytest.mark.timeout(60)]

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@dataclass
class Seen:
    """What a scripted broker saw, across its connections."""

    connections: int = 0
    #: Connections that the client closed while the broker still owed CONNECTED.
    abandoned: set[int] = field(default_factory=set)
    #: Connections that got CONNECTED.
    logged_in: set[int] = field(default_factory=set)


@dataclass
class Peer:
    """One connection of a scripted broker: the ``n``-th (from 1)."""

    n: int
    conn: ServerConnection
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    def send(self, event: Connected | Error) -> None:
        self.writer.write(self.conn.send(event))

    def drop_later(self, seconds: float = 0.3) -> None:
        """Reset this connection ``seconds`` from now (a cut the client must survive)."""
        asyncio.get_running_loop().call_later(seconds, self.writer.transport.abort)

    async def closed_within(self, seconds: float) -> bool:
        """Whether the client closes this connection within ``seconds``."""
        try:
            async with asyncio.timeout(seconds):
                while await self.reader.read(65536):
                    pass
        except TimeoutError:
            return False
        return True


Plan = Callable[[Peer, object], Awaitable[bool]]


def scripted_broker(seen: Seen, plan: Plan) -> Handler:
    """A broker that answers receipts; ``plan(peer, event)`` handles each event
    first (it may send frames itself) and returns False to drop the connection."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.connections += 1
        conn = ServerConnection()
        peer = Peer(seen.connections, conn, reader, writer)
        while True:
            data = await reader.read(65536)
            conn.receive_data(data or None)
            try:
                events = list(iter(conn.next_event, None))
            except RemoteProtocolError:
                return
            for event in events:
                if isinstance(event, ConnectionClosed):
                    return
                if not await plan(peer, event):
                    return
                receipt = getattr(event, "receipt", None)
                if receipt is not None and conn.state.name != "CLOSED":
                    writer.write(conn.send(Receipt(receipt)))
            await writer.drain()

    return handler


async def _send_when_back(h: Harness, client: object, destination: str) -> None:
    """``send(..., receipt=True)``, tried again while the client is between sessions."""
    for _ in range(100):
        try:
            await client.send(destination, b"are you back?", receipt=True)  # type: ignore[attr-defined]
            return
        except (ConnectionLost, TimeoutError):
            await h.sleep(0.05)
    pytest.fail("the client did not come back")


# -- A: one owner per connection attempt ------------------------------------------------


@on_every_adapter(versions=(None,))
async def test_a_timed_out_reconnect_attempt_leaves_nothing_behind(h: Harness) -> None:
    # Connection 1 drops; connection 2 accepts TCP but answers CONNECT only
    # after 1.5 s (a load balancer in front of a broker that is down), long
    # after the client's 0.5 s timeout; connection 3 works.  The attempt that
    # timed out must close its socket and stop its reader: left running, it
    # logged in later (a leaked session), and when it ended it took the
    # healthy session 3 down with it.
    seen = Seen()

    async def plan(peer: Peer, event: object) -> bool:
        if not isinstance(event, Connect):
            return True
        if peer.n == 2:
            if await peer.closed_within(1.5):
                seen.abandoned.add(peer.n)
                return False
            peer.send(Connected(session="late"))
            seen.logged_in.add(peer.n)
            await peer.writer.drain()
            await asyncio.sleep(0.5)
            return False  # and the late session ends
        peer.send(Connected(session=f"s{peer.n}"))
        seen.logged_in.add(peer.n)
        if peer.n == 1:
            peer.drop_later()
        return True

    port = await h.start_server(scripted_broker(seen, plan))
    backoff = Backoff(initial=0.05, maximum=0.1)
    async with h.connect(port, timeout=0.5, reconnect=backoff) as client:
        await h.sleep(0.5)  # connection 1 has dropped
        await _send_when_back(h, client, "/queue/a")
        assert seen.connections == 3
        await h.sleep(2.5)  # past the moment the late session would have ended
        await client.send("/queue/a", b"still here", receipt=True)
    assert seen.abandoned == {2}
    assert seen.logged_in == {1, 3}
    assert seen.connections == 3


# -- B and C: the end of a subscription is a flag, never a slot in a full buffer -----------


@on_every_adapter(versions=(None,))
async def test_leaving_a_subscription_with_a_full_buffer_does_not_stop_the_reader(
    h: Harness,
) -> None:
    # The README's ``async for ...: break`` with more messages waiting than the
    # buffer holds: the reader was left waiting for room in a buffer nobody
    # reads, and every receipt after it timed out.
    broker = await h.start_broker()
    queue = "/queue/backlog"
    async with h.connect(broker.port, max_pending_messages=50) as client:
        for n in range(500):
            await client.send(queue, str(n).encode())
        await client.send(queue, b"last", receipt=True)
        async with client.subscribe("/queue/other") as other:
            async with client.subscribe(queue) as messages:
                async for message in messages:
                    assert message.body == b"0"
                    break
            await client.send("/queue/other", b"the reader still reads", receipt=True)
            assert (await other.get(WAIT)).body == b"the reader still reads"


@on_every_adapter(versions=(None,))
async def test_close_with_a_full_buffer_ends_the_consumer(h: Harness) -> None:
    broker = await h.start_broker()
    queue = "/queue/full-at-close"
    async with h.connect(broker.port, max_pending_messages=5) as client:
        for n in range(20):
            await client.send(queue, str(n).encode())
        await client.send(queue, b"last", receipt=True)
        async with client.subscribe(queue) as messages:
            assert (await messages.get(WAIT)).body == b"0"
            await h.sleep(0.2)  # the buffer fills up again
            await client.close()
            rest = []
            while (message := await messages.get(WAIT)) is not None:
                rest.append(message)
            assert 1 <= len(rest) <= 5  # what was buffered, then the end
            assert await messages.get(WAIT) is None


@on_every_adapter(versions=(None,))
async def test_close_wakes_a_sender_waiting_for_a_reconnect(h: Harness) -> None:
    broker = await h.start_broker(vanishing=True)
    # Nothing comes back, and the next attempt is a long way off.
    backoff = Backoff(initial=30.0, maximum=30.0)
    async with h.connect(broker.port, reconnect=backoff, timeout=20.0) as client:
        await client.send("/queue/x", b"", receipt=True)
        await h.stop_broker(broker)
        await h.sleep(0.2)  # the client has seen the end and waits to reconnect

        async def sender() -> BaseException | None:
            try:
                await client.send("/queue/x", b"waits for a session")
            except (ConnectionLost, TimeoutError) as exc:
                return exc
            return None

        async def closer() -> None:
            await h.sleep(0.3)
            await client.close()

        error, _ = await h.gather(sender(), closer())
        # Woken by close(), not by the 20 s timeout.
        assert isinstance(error, ConnectionLost), error


# -- D: a reconnect that knows when to stop -------------------------------------------------


@on_every_adapter(versions=(None,))
async def test_a_subscription_refused_on_restore_ends_with_the_broker_error(h: Harness) -> None:
    # After a drop, the broker refuses one of the restored subscriptions (its
    # queue was deleted: RabbitMQ answers ERROR not_found, without receipt-id,
    # then closes).  That subscription ends with the BrokerError; the client
    # comes back without it, and does not loop.
    seen = Seen()

    async def plan(peer: Peer, event: object) -> bool:
        if isinstance(event, Connect):
            peer.send(Connected(session=f"s{peer.n}"))
            if peer.n == 1:
                peer.drop_later()
        elif (
            isinstance(event, Subscribe)
            and peer.n > 1
            and event.destination == "/amq/queue/deleted"
        ):
            peer.send(Error(message="not_found", body=b"NOT_FOUND - no queue"))
            await peer.writer.drain()
            return False
        return True

    port = await h.start_server(scripted_broker(seen, plan))
    backoff = Backoff(initial=0.05, maximum=0.1)
    async with (
        h.connect(port, reconnect=backoff) as client,
        client.subscribe("/queue/kept") as kept,
        client.subscribe("/amq/queue/deleted") as deleted,
    ):
        with pytest.raises(BrokerError) as caught:
            await deleted.get(WAIT)
        assert caught.value.message == "not_found"
        await _send_when_back(h, client, "/queue/kept")
        await h.sleep(1.0)
        assert seen.connections == 3  # the drop, the refusal, then a session without it
        with pytest.raises(TimeoutError):
            await kept.get(0.05)  # still open, with nothing for it
        await client.send("/queue/kept", b"", receipt=True)


@on_every_adapter(versions=(None,))
async def test_errors_in_a_row_end_the_client(h: Harness) -> None:
    # Every session the broker ends at once with an ERROR: the client comes
    # back ``error_attempts`` times, then gives up with the BrokerError (it
    # used to reconnect about 10 times a second, forever, and tell nobody).
    seen = Seen()

    async def plan(peer: Peer, event: object) -> bool:
        if isinstance(event, Connect):
            peer.send(Connected(session=f"s{peer.n}"))
            if peer.n > 1:
                peer.send(Error(message="go away"))
                return False
            peer.drop_later()
        return True

    port = await h.start_server(scripted_broker(seen, plan))
    backoff = Backoff(initial=0.02, maximum=0.05, error_attempts=2)
    async with h.connect(port, reconnect=backoff) as client:
        await h.sleep(1.5)  # the drop at 0.3 s, then three short sessions
        with pytest.raises(BrokerError) as caught:
            await client.send("/queue/q", b"", receipt=True)
        assert caught.value.message == "go away"
        # The first session, then three that ended with an ERROR; then it stopped.
        assert seen.connections == 1 + 3
