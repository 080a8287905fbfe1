"""The client adapters against real brokers: RabbitMQ, ActiveMQ and the embedded one.

Every scenario is written once (see tests/adapter_harness.py) and run against
each broker; ``scripts/start-brokers.sh`` starts the real ones once per test
run (tests/brokers.py finds them, and skips - or under CI=true fails - when
they are not up).

Coverage (docs/interop.rst has the table):

* every scenario runs on the full matrix, 3 adapters x 3 brokers x 3 versions
  (2 versions where NACK or client-individual acks need STOMP 1.1) - except
  the heart-beat scenarios, which idle for seconds on purpose: they run on each
  broker x version with the adapter rotated over the cases (a Latin square:
  each broker meets each adapter, and so does each version);
* the wire-level checks (what the broker does after an ERROR, RECEIPT vs
  MESSAGE order) use a raw socket and the sans-IO ClientConnection;
* the fault tests - a broker frozen with SIGSTOP, a consumer killed before
  acking, a connection cut in the middle of a frame, a broker restarted while
  messages flow - also rotate the adapter.  They signal and restart only the
  broker processes scripts/start-brokers.sh started (tests/brokers.py checks).

Where brokers legitimately differ, the expectation is spelled out per broker
(the dicts keyed by broker name below) rather than loosened; docs/interop.rst
records the measurements behind each of them.

No timing is asserted.  Where a scenario must show that something did *not*
happen, it sends a sentinel after it and checks that the sentinel comes first.
Queue and topic names are unique per test: the real brokers live for the whole
run.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
from adapter_harness import (
    ADAPTERS,
    SCENARIO_TIMEOUT,
    VERSIONS,
    WAIT,
    Harness,
    ServiceLoop,
    run,
)
from brokers import (
    BROKERS,
    EMBEDDED_HEARTBEAT,
    REAL_BROKERS,
    USERS,
    Endpoint,
    Wire,
    broker_pid,
    connect_event,
    endpoint,
    real_broker,
)
from timeouts import bound_text, run_command, scaled

from stomp_proto import (
    Backoff,
    BrokerError,
    ConnectionClosed,
    ConnectionLost,
    ConnectionState,
    Error,
    HeartBeatLost,
    LocalProtocolError,
    Message,
    Receipt,
    Send,
    Subscribe,
    Version,
)

pytestmark = [pytest.mark.filterwarnings("error"), pytest.mark.timeout(120)]

V11: tuple[Version, ...] = ("1.1", "1.2")

BrokerScenario = Callable[[Harness, Endpoint], Awaitable[None]]
Matrix = Callable[[tuple[str, ...], tuple[Version, ...]], list[tuple[str, str, Version]]]


def unique(kind: str, name: str) -> str:
    """A destination no other test (or earlier run against the same broker) uses."""
    return f"/{kind}/stomp-proto-it-{name}-{uuid.uuid4().hex[:12]}"


def redelivered(message: Message) -> bool:
    return ("redelivered", "true") in message.headers


def header(message: Message, name: str) -> str | None:
    return next((value for key, value in message.headers if key == name), None)


class Boom(Exception):
    """Raised inside a block to make the client leave it on an error."""


# -- parametrization -------------------------------------------------------------------


def latin_square(
    brokers: tuple[str, ...], versions: tuple[Version, ...]
) -> list[tuple[str, str, Version]]:
    """(broker, adapter, version) cases: every broker x version, the adapter rotating.

    The adapter of case (i, j) is ``ADAPTERS[(i + j) % 3]``: with three versions
    each broker meets every adapter, and each version does too.
    """
    return [
        (broker, ADAPTERS[(BROKERS.index(broker) + j) % len(ADAPTERS)], version)
        for broker in brokers
        for j, version in enumerate(versions)
    ]


def full_matrix(
    brokers: tuple[str, ...], versions: tuple[Version, ...]
) -> list[tuple[str, str, Version]]:
    return [(b, a, v) for b in brokers for a in ADAPTERS for v in versions]


def on_brokers(
    *,
    brokers: tuple[str, ...] = BROKERS,
    versions: tuple[Version, ...] = VERSIONS,
    matrix: Matrix | None = None,
    embedded: dict[str, Any] | None = None,
    timeout: float = SCENARIO_TIMEOUT,
    xfail: dict[str, str] | None = None,
    xfail_raises: type[BaseException] | None = None,
) -> Callable[[BrokerScenario], Callable[[str, str, Version], None]]:
    """Make ``async def scenario(h, broker)`` a test over brokers, adapters and versions.

    ``broker`` is the :class:`~brokers.Endpoint` to connect to; for the embedded
    broker a new one is started per test (``embedded``: its options).  ``xfail``
    maps a broker to the reason its cases are expected to fail (a known bug;
    strict), by raising ``xfail_raises``.
    """

    def decorate(scenario: BrokerScenario) -> Callable[[str, str, Version], None]:
        combos = (matrix or full_matrix)(brokers, versions)
        reasons = xfail or {}
        cases = [
            pytest.param(
                b,
                a,
                v,
                id=f"{b}-{a}-{v}",
                marks=[pytest.mark.xfail(strict=True, reason=reasons[b], raises=xfail_raises)]
                if b in reasons
                else [],
            )
            for b, a, v in combos
        ]

        @pytest.mark.parametrize(("broker", "adapter", "version"), cases)
        def test(broker: str, adapter: str, version: Version) -> None:
            real = real_broker(broker) if broker in REAL_BROKERS else None

            async def bound(h: Harness) -> None:
                target = real or await endpoint(h, broker, **(embedded or {}))
                await scenario(h, target)

            run(adapter, bound, version=version, timeout=timeout)

        test.__name__ = scenario.__name__
        test.__qualname__ = scenario.__qualname__
        test.__doc__ = scenario.__doc__
        test.__module__ = scenario.__module__
        return test

    return decorate


async def expect_only(h: Harness, b: Endpoint, destination: str, *, ack: str = "auto") -> None:
    """Subscribe anew: nothing but a fresh sentinel may be waiting in ``destination``."""
    async with (
        h.connect(b.port, **b.options()) as client,
        client.subscribe(destination, ack=ack) as messages,
    ):
        await client.send(destination, b"sentinel", receipt=True)
        first = await messages.get(WAIT)
        if ack != "auto":
            await client.ack(first)
    assert first.body == b"sentinel", first


# -- the core session: the full matrix -------------------------------------------------


@on_brokers()
async def test_core_session(h: Harness, b: Endpoint) -> None:
    """Login, SEND with receipts, SUBSCRIBE, MESSAGE, UNSUBSCRIBE, DISCONNECT with receipt."""
    queue = unique("queue", "core")
    bodies: list[bytes | str] = [b"one", "tw\u00f6 (text)", b"\x00binary\xff\n"]
    async with (
        h.connect(b.port, **b.options()) as producer,
        h.connect(b.port, **b.options(login="stomptest", passcode="stomptest")) as consumer,
    ):
        assert producer.version == consumer.version == h.version
        async with consumer.subscribe(queue) as messages:
            for body in bodies:
                await producer.send(queue, body, receipt=True)
            got = [await messages.get(WAIT) for _ in bodies]
        # The block sent UNSUBSCRIBE; a message sent after it *on the same connection*
        # (the broker handles one connection's frames in order) stays in the queue.
        await consumer.send(queue, b"after unsubscribe", receipt=True)

        expected = [body.encode() if isinstance(body, str) else body for body in bodies]
        assert [m.body for m in got] == expected
        assert [m.destination for m in got] == [queue] * 3
        assert [m.subscription for m in got] == [messages.id] * 3
        assert len({m.message_id for m in got}) == 3
        assert got[1].content_type == "text/plain;charset=utf-8"
        assert got[0].content_type is None
        # We send content-length: every broker delivers it (the NULs need it).
        assert all(m.content_length for m in got)
        # RabbitMQ always says whether a message is redelivered; the others only when it is.
        flags = {header(m, "redelivered") for m in got}
        assert flags == ({"false"} if b.is_rabbitmq else {None})
        for client in (producer, consumer):
            assert client.connection.state is ConnectionState.CONNECTED
    # Leaving the block sent DISCONNECT with a receipt: the session only closes
    # (CLOSED, not DISCONNECTING) once that RECEIPT has arrived.
    assert producer.connection.state is ConnectionState.CLOSED
    assert consumer.connection.state is ConnectionState.CLOSED
    async with (
        h.connect(b.port, **b.options()) as client,
        client.subscribe(queue) as messages,
    ):
        assert (await messages.get(WAIT)).body == b"after unsubscribe"


# -- acknowledgement -------------------------------------------------------------------


@on_brokers()
async def test_ack_auto(h: Harness, b: Endpoint) -> None:
    queue = unique("queue", "auto")
    async with h.connect(b.port, **b.options()) as client, client.subscribe(queue) as messages:
        for n in range(3):
            await client.send(queue, f"m{n}", receipt=True)
        got = [await messages.get(WAIT) for _ in range(3)]
        assert [m.body for m in got] == [b"m0", b"m1", b"m2"]
        assert all(m.ack is None for m in got)
    await expect_only(h, b, queue)


@on_brokers(matrix=latin_square)
async def test_subscribe_behind_a_backlog(h: Harness, b: Endpoint) -> None:
    """A backlog larger than the client's buffer, no prefetch limit: subscribe() returns.

    RabbitMQ sends such a backlog before the SUBSCRIBE's RECEIPT; the client's
    reader pauses once the buffer is full, so the RECEIPT cannot be what
    subscribe() waits for.  Cumulative ACKs then leave nothing tracked.
    """
    queue = unique("queue", "backlog")
    backlog = 60
    async with h.connect(b.port, **b.options()) as producer:
        for n in range(backlog):
            await producer.send(queue, f"m{n}", receipt=n == backlog - 1)
    async with (
        h.connect(b.port, **b.options(max_pending_messages=5)) as consumer,
        consumer.subscribe(queue, ack="client") as messages,
    ):
        got = [await messages.get(WAIT) for _ in range(backlog)]
        assert [m.body for m in got] == [f"m{n}".encode() for n in range(backlog)]
        await consumer.ack(got[-1], receipt=True)
        assert consumer.connection.pending_acks(messages.id) == ()
    await expect_only(h, b, queue)


@on_brokers()
async def test_ack_client_cumulative(h: Harness, b: Endpoint) -> None:
    """``ack:client``: one ACK settles the message and every earlier one."""
    queue = unique("queue", "client")
    async with (
        h.connect(b.port, **b.options()) as client,
        client.subscribe(queue, ack="client") as messages,
    ):
        for n in range(3):
            await client.send(queue, f"m{n}", receipt=True)
        got = [await messages.get(WAIT) for _ in range(3)]
        assert [m.body for m in got] == [b"m0", b"m1", b"m2"]
        assert all((m.ack is not None) == (h.version == "1.2") for m in got)
        await client.ack(got[2], receipt=True)
        assert client.connection.pending_acks(messages.id) == ()
    await expect_only(h, b, queue, ack="client")


@on_brokers()
async def test_ack_client_unacked_are_redelivered(h: Harness, b: Endpoint) -> None:
    """Messages not acknowledged when the consumer goes come back, marked redelivered."""
    queue = unique("queue", "unacked")
    async with (
        h.connect(b.port, **b.options()) as client,
        client.subscribe(queue, ack="client") as messages,
    ):
        for n in range(2):
            await client.send(queue, f"m{n}", receipt=True)
        first = [await messages.get(WAIT) for _ in range(2)]
        await client.close()  # no ACK, no UNSUBSCRIBE, no DISCONNECT
    async with (
        h.connect(b.port, **b.options()) as client,
        client.subscribe(queue, ack="client") as messages,
    ):
        again = [await messages.get(WAIT) for _ in range(2)]
        assert [m.body for m in again] == [b"m0", b"m1"]
        assert all(redelivered(m) for m in again)
        assert not any(redelivered(m) for m in first)
        await client.ack(again[1], receipt=True)
    await expect_only(h, b, queue, ack="client")


@on_brokers(versions=V11)
async def test_ack_client_individual(h: Harness, b: Endpoint) -> None:
    """``ack:client-individual``: each ACK settles one message; the unacked one returns."""
    queue = unique("queue", "individual")
    async with (
        h.connect(b.port, **b.options()) as client,
        client.subscribe(queue, ack="client-individual") as messages,
    ):
        for n in (1, 2, 3):
            await client.send(queue, f"m{n}", receipt=True)
        m1, _, m3 = [await messages.get(WAIT) for _ in range(3)]
        await client.ack(m3)
        await client.ack(m1, receipt=True)
        assert len(client.connection.pending_acks(messages.id)) == 1
        await client.close()
    async with (
        h.connect(b.port, **b.options()) as client,
        client.subscribe(queue, ack="client-individual") as messages,
    ):
        await client.send(queue, b"sentinel", receipt=True)
        again = await messages.get(WAIT)
        assert again.body == b"m2"
        assert redelivered(again)
        await client.ack(again)
        sentinel = await messages.get(WAIT)
        assert sentinel.body == b"sentinel"
        await client.ack(sentinel, receipt=True)


DLQ = "/queue/ActiveMQ.DLQ"


@on_brokers(versions=V11)
async def test_nack(h: Harness, b: Endpoint) -> None:
    """NACK: RabbitMQ and the embedded broker redeliver at once; ActiveMQ dead-letters.

    ActiveMQ never redelivers a NACKed message: a persistent one goes to
    ``ActiveMQ.DLQ`` with an ``original-destination`` header (a non-persistent
    one would be dropped), so the message is sent with ``persistent:true``.
    """
    queue = unique("queue", "nack")
    body = f"nack-me {uuid.uuid4().hex}".encode()
    async with (
        h.connect(b.port, **b.options()) as client,
        client.subscribe(queue, ack="client-individual") as messages,
    ):
        await client.send(queue, body, headers={"persistent": "true"}, receipt=True)
        first = await messages.get(WAIT)
        assert first.body == body
        await client.nack(first, receipt=True)
        await client.send(queue, b"sentinel", receipt=True)
        after = await messages.get(WAIT)
        if b.is_activemq:
            assert after.body == b"sentinel"  # not redelivered
        else:
            assert after.body == body
            assert redelivered(after)
            await client.ack(after)
            after = await messages.get(WAIT)
            assert after.body == b"sentinel"
        await client.ack(after, receipt=True)
    if b.is_activemq:
        async with (
            h.connect(b.port, **b.options()) as client,
            client.subscribe(DLQ, ack="client-individual") as dead,
        ):
            # Other tests dead-letter too: skip (and leave unacked) what is not ours.
            for _ in range(50):
                message = await dead.get(WAIT)
                if message.body == body:
                    break
            assert message.body == body
            assert header(message, "original-destination") == queue
            await client.ack(message, receipt=True)


# -- transactions ----------------------------------------------------------------------


@on_brokers()
async def test_transactions(h: Harness, b: Endpoint) -> None:
    """BEGIN/SEND/ABORT delivers nothing; BEGIN/SEND/COMMIT delivers, in order."""
    queue = unique("queue", "tx")
    async with (
        h.connect(b.port, **b.options()) as producer,
        h.connect(b.port, **b.options()) as consumer,
        consumer.subscribe(queue) as messages,
    ):
        with pytest.raises(Boom):
            async with producer.transaction() as tx:
                await producer.send(queue, b"aborted", transaction=tx)
                raise Boom
        async with producer.transaction() as tx:
            await producer.send(queue, b"committed-1", transaction=tx)
            await producer.send(queue, b"committed-2", transaction=tx)
        await producer.send(queue, b"sentinel", receipt=True)
        got = [await messages.get(WAIT) for _ in range(3)]
        assert [m.body for m in got] == [b"committed-1", b"committed-2", b"sentinel"]


@on_brokers()
async def test_ack_in_aborted_transaction(h: Harness, b: Endpoint) -> None:
    """An ACK inside an aborted transaction does not settle: the message comes back."""
    queue = unique("queue", "txack")
    async with (
        h.connect(b.port, **b.options()) as client,
        client.subscribe(queue, ack="client") as messages,
    ):
        await client.send(queue, b"m", receipt=True)
        message = await messages.get(WAIT)
        with pytest.raises(Boom):
            async with client.transaction() as tx:
                await client.ack(message, transaction=tx)
                raise Boom
        await client.close()
    async with (
        h.connect(b.port, **b.options()) as client,
        client.subscribe(queue, ack="client") as messages,
    ):
        again = await messages.get(WAIT)
        assert again.body == b"m"
        async with client.transaction() as tx:
            await client.ack(again, transaction=tx)
    await expect_only(h, b, queue, ack="client")


# -- topics and unsubscribing ----------------------------------------------------------


@on_brokers()
async def test_topic_fans_out(h: Harness, b: Endpoint) -> None:
    """A topic copies each message to every subscriber; nothing is kept for later ones."""
    topic = unique("topic", "fan")
    async with (
        h.connect(b.port, **b.options()) as producer,
        h.connect(b.port, **b.options()) as one,
        h.connect(b.port, **b.options()) as two,
    ):
        await producer.send(topic, b"before anyone listens", receipt=True)
        async with one.subscribe(topic) as first, two.subscribe(topic) as second:
            for n in range(3):
                await producer.send(topic, f"t{n}", receipt=True)
            for messages in (first, second):
                got = [await messages.get(WAIT) for _ in range(3)]
                assert [m.body for m in got] == [b"t0", b"t1", b"t2"]
                assert {m.destination for m in got} == {topic}


@on_brokers()
async def test_unsubscribe_stops_delivery(h: Harness, b: Endpoint) -> None:
    """After UNSUBSCRIBE a queue's messages go to the remaining consumer."""
    queue = unique("queue", "unsub")
    async with (
        h.connect(b.port, **b.options()) as leaver,
        h.connect(b.port, **b.options()) as stayer,
    ):
        async with leaver.subscribe(queue) as messages:
            await leaver.send(queue, b"while subscribed", receipt=True)
            assert (await messages.get(WAIT)).body == b"while subscribed"
        # UNSUBSCRIBE went out (no receipt); frames on one connection are processed in order.
        for n in range(3):
            await leaver.send(queue, f"later-{n}", receipt=True)
        async with stayer.subscribe(queue) as messages:
            got = [await messages.get(WAIT) for _ in range(3)]
        assert [m.body for m in got] == [b"later-0", b"later-1", b"later-2"]
        if hasattr(leaver, "unsolicited"):
            assert leaver.unsolicited.empty()


# -- heart-beats -----------------------------------------------------------------------

#: ActiveMQ 5.17.2 sends a heart-beat only when it wrote nothing for a whole check
#: period, so its gaps reach twice the interval (the first one comes ~2 s after
#: CONNECTED at 1000 ms, ~20 s at the clients' default 10 s).  The client declares
#: a broker dead after 2.5 intervals of silence (heartbeat_tolerance), so an idle
#: session to ActiveMQ survives; at 1.5, as once, it failed with HeartBeatLost.


@on_brokers(matrix=latin_square)
async def test_heartbeats_keep_an_idle_session_alive(h: Harness, b: Endpoint) -> None:
    """Heart-beats both ways keep a session that is idle from the start alive.

    1000,1000, then 3.3 s without a frame: RabbitMQ drops a client silent for 3
    intervals (ActiveMQ after 2-3), and our client gives up on a broker silent
    for 2.5 intervals, so surviving needs beats in both directions.
    """
    queue = unique("queue", "hb")
    async with h.connect(b.port, **b.options(heartbeat=(1000, 1000))) as client:
        assert client.connection.heartbeat == (1000, 1000)
        await h.sleep(3.3)
        async with client.subscribe(queue) as messages:
            await client.send(queue, b"still here", receipt=True)
            assert (await messages.get(WAIT)).body == b"still here"


#: The client's default heart-beat tolerance with each broker: ActiveMQ beats up to two
#: intervals apart (it skips a beat after any frame it sent), so it is allowed 2.5.
DEFAULT_TOLERANCE_WITH = {"rabbitmq": 1.25, "activemq": 2.5, "embedded": 1.25}


@on_brokers(matrix=latin_square)
async def test_heartbeats_survive_idleness_after_traffic(h: Harness, b: Endpoint) -> None:
    """Frames, then idleness: a broker that skips the beat after a frame it sent
    (ActiveMQ) leaves a gap of nearly two intervals, which the client's default
    tolerance with it allows; RabbitMQ and the embedded broker beat every interval
    or more often, and a silent one is noticed within 1.5 intervals."""
    queue = unique("queue", "hb-traffic")
    async with h.connect(b.port, **b.options(heartbeat=(1000, 1000))) as client:
        assert client.connection.heartbeat_tolerance == DEFAULT_TOLERANCE_WITH[b.name]
        async with client.subscribe(queue) as messages:
            for n in range(3):
                await client.send(queue, f"m{n}", receipt=True)
                assert (await messages.get(WAIT)).body == f"m{n}".encode()
                await h.sleep(1.9)  # the broker's beat after its RECEIPT and MESSAGE
            await client.send(queue, b"still here", receipt=True)
            assert (await messages.get(WAIT)).body == b"still here"


#: What ``connection.heartbeat`` (send every, expect every) becomes when the client
#: asks for (500, 1500): RabbitMQ rounds to whole seconds (500 -> 1000, 1500 -> 1000),
#: ActiveMQ echoes the milliseconds, the embedded broker offers 1000,1000.
ROUNDED_HEARTBEAT = {"rabbitmq": (1000, 1500), "activemq": (500, 1500), "embedded": (1000, 1500)}


@on_brokers(matrix=latin_square)
async def test_heartbeat_rounding(h: Harness, b: Endpoint) -> None:
    """Asking 500,1500: each broker's answer, then 2 s of idleness survived.

    ActiveMQ expects our beats every 500 ms here (it drops a client silent for
    2-3 intervals); its own first beat comes after 2.0 s, inside our 2.25 s.
    """
    queue = unique("queue", "hbround")
    async with h.connect(b.port, **b.options(heartbeat=(500, 1500))) as client:
        assert client.connection.heartbeat == ROUNDED_HEARTBEAT[b.name]
        await h.sleep(2.0)
        async with client.subscribe(queue) as messages:
            await client.send(queue, b"and here", receipt=True)
            assert (await messages.get(WAIT)).body == b"and here"


# -- broker ERROR frames become BrokerError --------------------------------------------

#: (message header, text in the body) of the ERROR for a wrong passcode.
WRONG_PASSWORD = {
    "rabbitmq": ("Bad CONNECT", "Access refused for user 'guest'"),
    "activemq": ("User name [guest] or password is invalid.", "password is invalid"),
    "embedded": ("Bad CONNECT: login failed", "the login or the passcode is wrong"),
}
UNKNOWN_TRANSACTION = {
    "rabbitmq": ("Bad transaction", 'Invalid transaction identifier: "tx-nope"'),
    "activemq": ("Invalid transaction id: tx-nope", "ProtocolException"),
    "embedded": ("no transaction 'tx-nope' is open", "tx-nope"),
}


@on_brokers()
async def test_error_wrong_password(h: Harness, b: Endpoint) -> None:
    """The ERROR answering a bad login is raised by connect() as BrokerError.

    ActiveMQ 5.17.2 sometimes (about 1 in 170 here) closes the socket without
    sending its ERROR: that is a ConnectionLost, and the attempt is repeated.
    """
    message, detail = WRONG_PASSWORD[b.name]
    for _attempt in range(5):
        try:
            async with h.connect(b.port, **b.options(passcode="wrong")):
                pytest.fail("logged in with a wrong passcode")
        except BrokerError as exc:
            error = exc
            break
        except ConnectionLost:
            if not b.is_activemq:
                raise
    else:
        pytest.fail("no ERROR frame in 5 attempts")
    assert isinstance(error.error, Error)
    assert error.message == message
    assert detail in str(error)
    assert detail in error.error.body.decode()


@on_brokers()
async def test_error_unknown_transaction(h: Harness, b: Endpoint) -> None:
    """A SEND naming a transaction the broker does not know: BrokerError, session over."""
    message, detail = UNKNOWN_TRANSACTION[b.name]
    queue = unique("queue", "badtx")
    async with h.connect(b.port, **b.options()) as client:
        # Our client refuses an unknown transaction id; a raw header gets past it.
        with pytest.raises(BrokerError) as caught:
            await client.send(queue, b"x", headers={"transaction": "tx-nope"}, receipt=True)
        assert caught.value.message == message
        assert detail in str(caught.value)
        # Every later call fails with the same error: the session has ended.
        with pytest.raises(BrokerError) as again:
            await client.send(queue, b"y")
        assert again.value is caught.value


@on_brokers()
async def test_error_bad_destination(h: Harness, b: Endpoint) -> None:
    """RabbitMQ refuses destinations outside its prefixes; the others take any name."""
    name = f"/stomp-proto-it/{uuid.uuid4().hex[:12]}"
    async with h.connect(b.port, **b.options()) as client:
        if b.is_rabbitmq:
            with pytest.raises(BrokerError) as caught:
                await client.send(name, b"x", receipt=True)
            assert caught.value.message == "Unknown destination"
            assert f"'{name}' is not a valid destination" in str(caught.value)
        else:
            async with client.subscribe(name) as messages:
                await client.send(name, b"x", receipt=True)
                assert (await messages.get(WAIT)).body == b"x"


@on_brokers()
async def test_vhost(h: Harness, b: Endpoint) -> None:
    """RabbitMQ reads CONNECT's ``host`` as its virtual host; the others ignore it."""
    async with h.connect(b.port, **b.options(vhost="stomp-test")) as client:
        assert client.version == h.version
    if b.is_rabbitmq:
        with pytest.raises(BrokerError) as caught:
            async with h.connect(b.port, **b.options(vhost="no-such-vhost")):
                pass
        assert caught.value.message == "Bad CONNECT"
        assert "Virtual host 'no-such-vhost' access denied" in str(caught.value)
    else:
        async with h.connect(b.port, **b.options(vhost="no-such-vhost")) as client:
            assert client.version == h.version


@on_brokers()
async def test_content_length_on_message(h: Harness, b: Endpoint) -> None:
    """RabbitMQ always sends content-length on MESSAGE; ActiveMQ only if the SEND had one.

    (Without it ActiveMQ makes a text message and delivers it without one; the
    embedded broker, too, passes on what the SEND did.)  RabbitMQ also copies
    the SEND's ``receipt`` header into the MESSAGE.
    """
    queue = unique("queue", "clen")
    async with h.connect(b.port, **b.options()) as client, client.subscribe(queue) as messages:
        await client.send(queue, b"with", receipt=True)
        await client.send(queue, b"without", content_length=False, receipt=True)
        with_, without = await messages.get(WAIT), await messages.get(WAIT)
    assert (with_.body, without.body) == (b"with", b"without")
    assert with_.content_length
    expected = {"rabbitmq": True, "activemq": False, "embedded": False}[b.name]
    assert without.content_length is expected
    copied = header(with_, "receipt")
    assert (copied is not None) == b.is_rabbitmq, with_.headers


# -- on the wire: what happens after an ERROR, and in which order frames come -----------


def wire_cases(versions: tuple[Version, ...] = VERSIONS) -> list[Any]:
    return [pytest.param(b, v, id=f"{b}-{v}") for b in BROKERS for v in versions]


def _wire_endpoint(name: str) -> Endpoint | None:
    return real_broker(name) if name in REAL_BROKERS else None


def _run_with_embedded(check: Callable[[Endpoint], None]) -> None:
    """Run ``check`` against a fresh embedded broker (on the harness's service loop)."""
    service = ServiceLoop()
    try:
        options = {"users": USERS, "heartbeat": EMBEDDED_HEARTBEAT}
        broker = service.call(service.start_broker(0, False, options))
        check(Endpoint("embedded", broker.port))
    finally:
        assert not service.close()


def on_wire(name: str, check: Callable[[Endpoint], None]) -> None:
    ep = _wire_endpoint(name)
    if ep is None:
        _run_with_embedded(check)
    else:
        check(ep)


#: After an ERROR for a wrong passcode: does the broker close the socket?
#: RabbitMQ keeps it open (until its 10 s login timeout) and would take a second CONNECT.
CLOSES_AFTER_LOGIN_ERROR = {"rabbitmq": False, "activemq": True, "embedded": True}
#: After an ERROR for an unknown transaction (the session was open)?
CLOSES_AFTER_SESSION_ERROR = {"rabbitmq": False, "activemq": False, "embedded": True}


@pytest.mark.parametrize(("broker", "version"), wire_cases())
def test_wire_error_then_close_or_not(broker: str, version: Version) -> None:
    def check(ep: Endpoint) -> None:
        for _attempt in range(5):
            with Wire(ep.port) as wire:
                wire.send(connect_event(ep, version, passcode="wrong"))
                (event,) = wire.frames(1)
                if isinstance(event, ConnectionClosed) and ep.is_activemq:
                    continue  # ActiveMQ's occasional close without the ERROR
                assert isinstance(event, Error), event
                assert wire.closed_within(1.0) is CLOSES_AFTER_LOGIN_ERROR[ep.name]
                break
        else:
            pytest.fail("no ERROR frame in 5 attempts")
        with Wire(ep.port) as wire:
            wire.send(connect_event(ep, version))
            wire.frames(1)
            wire.send_raw(b"SEND\ndestination:/queue/x\ntransaction:tx-nope\nreceipt:r-1\n\n\x00")
            (event,) = wire.frames(1)
            assert isinstance(event, Error), event
            # ActiveMQ (and the embedded broker) name the frame's receipt in the ERROR;
            # RabbitMQ never does.
            assert event.receipt_id == (None if ep.is_rabbitmq else "r-1")
            assert wire.closed_within(1.0) is CLOSES_AFTER_SESSION_ERROR[ep.name]

    on_wire(broker, check)


#: SUBSCRIBE (receipted), then SEND with a receipt to that queue on the same connection:
#: RabbitMQ and the embedded broker deliver the MESSAGE before the RECEIPT, ActiveMQ after.
ORDER = {
    "rabbitmq": (Message, Receipt),
    "activemq": (Receipt, Message),
    "embedded": (Message, Receipt),
}


@pytest.mark.parametrize(("broker", "version"), wire_cases())
def test_wire_receipt_and_message_order(broker: str, version: Version) -> None:
    def check(ep: Endpoint) -> None:
        queue = unique("queue", "order")
        with Wire(ep.port) as wire:
            wire.send(connect_event(ep, version))
            wire.frames(1)
            wire.send(Subscribe(queue, id="s-1", receipt="r-sub"))
            assert wire.frames(1) == [Receipt("r-sub")]
            wire.send(Send(queue, b"x", receipt="r-send"))
            events = wire.frames(2)
            assert tuple(type(e) for e in events) == ORDER[ep.name], events

    on_wire(broker, check)


# -- faults ----------------------------------------------------------------------------


@contextmanager
def frozen(pid: int) -> Iterator[None]:
    """SIGSTOP the broker process for the duration of the block (SIGCONT after, always)."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


@on_brokers(brokers=REAL_BROKERS, matrix=latin_square)
async def test_fault_frozen_broker(h: Harness, b: Endpoint) -> None:
    """A broker frozen by SIGSTOP is detected from heart-beats; nothing hangs.

    Heart-beats 1000,1000: the client gives up after 2.5 intervals of
    silence (heartbeat_tolerance), i.e. within about three intervals; 5 s is
    the generous bound.  After SIGCONT the broker serves again.
    """
    pid = broker_pid(b.name)
    queue = unique("queue", "frozen")
    async with (
        h.connect(b.port, **b.options(heartbeat=(1000, 1000))) as client,
        client.subscribe(queue) as messages,
    ):
        await client.send(queue, b"before", receipt=True)
        assert (await messages.get(WAIT)).body == b"before"
        with frozen(pid):
            started = time.monotonic()
            with pytest.raises(HeartBeatLost) as lost:
                await messages.get(10)
            detected = time.monotonic() - started
        with pytest.raises(HeartBeatLost):
            await client.send(queue, b"after")
    assert detected < 5.0, detected
    assert "no data from the broker" in str(lost.value)
    async with h.connect(b.port, **b.options()) as client, client.subscribe(queue) as messages:
        await client.send(queue, b"thawed", receipt=True)
        assert (await messages.get(WAIT)).body == b"thawed"


#: A consumer in its own process: takes N messages without acknowledging them,
#: says "ready", and waits to be killed.
CONSUMER = """
import sys, time
from stomp_proto import threads
port, queue, count, version, login, passcode, vhost = sys.argv[1:]
client = threads.connect("127.0.0.1", int(port), login=login, passcode=passcode, vhost=vhost,
                         versions=(version,), timeout=10)
ack = "client" if version == "1.0" else "client-individual"
with client.subscribe(queue, ack=ack) as messages:
    for _ in range(int(count)):
        print(messages.get(10).body.decode(), flush=True)
    print("ready", flush=True)
    time.sleep(60)
"""


def _await_ready(process: subprocess.Popen[str]) -> list[str]:
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        if line.strip() == "ready":
            return lines
        lines.append(line.strip())
    raise AssertionError(f"the consumer ended early: {lines}, exit {process.wait()}")


@on_brokers(matrix=latin_square)
async def test_fault_consumer_killed_before_acking(h: Harness, b: Endpoint) -> None:
    """SIGKILL a consumer holding unacknowledged messages: another consumer gets them all."""
    queue = unique("queue", "killed")
    count = 5
    async with h.connect(b.port, **b.options()) as producer:
        for n in range(count):
            await producer.send(queue, f"m{n}", receipt=True)
    args = [str(b.port), queue, str(count), h.version or "1.2", b.login, b.passcode, b.vhost]
    process = subprocess.Popen(
        [sys.executable, "-c", CONSUMER, *args], stdout=subprocess.PIPE, text=True
    )
    try:
        taken = await h.on_service(asyncio.to_thread(_await_ready, process), timeout=20)
        assert taken == [f"m{n}" for n in range(count)]
    finally:
        process.kill()
        process.wait(10)
        assert process.stdout is not None
        process.stdout.close()
    ack = "client" if h.version == "1.0" else "client-individual"
    async with h.connect(b.port, **b.options()) as client, client.subscribe(queue, ack=ack) as got:
        again = [await got.get(WAIT) for _ in range(count)]
        assert sorted(m.body for m in again) == [f"m{n}".encode() for n in range(count)]
        assert all(redelivered(m) for m in again)
        for message in again:
            await client.ack(message)
        await client.send(queue, b"sentinel", receipt=True)
        sentinel = await got.get(WAIT)
        assert sentinel.body == b"sentinel"
        await client.ack(sentinel, receipt=True)


class _CutProxy:
    """A TCP proxy to the broker that cuts the connection in the middle of the first MESSAGE.

    Everything the broker sends before that MESSAGE is passed on; of the MESSAGE
    only its first ``keep`` bytes (the headers and part of the body), then both
    sockets are closed.
    """

    def __init__(self, port: int, keep: int = 300) -> None:
        self.port = port
        self.keep = keep
        self.cut = asyncio.Event()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.port)

        async def upstream() -> None:
            while data := await reader.read(65536):
                up_writer.write(data)
                await up_writer.drain()

        forward = asyncio.ensure_future(upstream())
        seen = bytearray()
        try:
            while data := await up_reader.read(65536):
                start = len(seen)
                seen += data
                at = seen.find(b"MESSAGE\n")
                if at < 0:
                    writer.write(data)
                    await writer.drain()
                    continue
                writer.write(bytes(seen[start : at + self.keep]))
                await writer.drain()
                self.cut.set()
                return
        finally:
            forward.cancel()
            await asyncio.gather(forward, return_exceptions=True)
            up_writer.close()


@on_brokers(matrix=latin_square)
async def test_fault_connection_cut_mid_frame(h: Harness, b: Endpoint) -> None:
    """The connection drops inside a MESSAGE: a clear error, no partial message, none lost."""
    queue = unique("queue", "cut")
    body = bytes(range(256)) * 256  # 64 KiB: the cut falls inside the body
    async with h.connect(b.port, **b.options()) as producer:
        await producer.send(queue, body, receipt=True)
    proxy = _CutProxy(b.port)
    proxy_port = await h.start_server(proxy.handle)
    ack = "client" if h.version == "1.0" else "client-individual"
    # RabbitMQ and the embedded broker send the MESSAGE before the SUBSCRIBE's
    # RECEIPT, so the cut may end the subscribe() call itself; ActiveMQ's RECEIPT
    # comes first, and get() sees the cut.  Either way: no message, an error.
    with pytest.raises(ConnectionLost) as lost:
        async with (
            h.connect(proxy_port, **b.options()) as client,
            client.subscribe(queue, ack=ack) as messages,
        ):
            await messages.get(WAIT)
    assert not isinstance(lost.value, HeartBeatLost)
    assert "stream ended inside a frame" in str(lost.value)
    assert proxy.cut.is_set()
    # The broker saw its consumer go without an ACK: the message is still there, whole.
    async with (
        h.connect(b.port, **b.options()) as client,
        client.subscribe(queue, ack=ack) as again,
    ):
        message = await again.get(WAIT)
        assert message.body == body
        await client.ack(message, receipt=True)


SCRIPTS = Path(__file__).resolve().parent.parent / "scripts" / "brokers"


async def _restart(name: str) -> None:
    """Stop our broker and start it again on the same data (runs on the service loop).

    About 10 s on an idle machine (RabbitMQ's stop and boot are Erlang VMs, several
    of them): bounded by 90 s, scaled.
    """
    keep = {"rabbitmq": "RMQ_FRESH", "activemq": "AMQ_FRESH"}[name]
    script = f'bash "$1/stop-{name}.sh" && {keep}=0 bash "$1/start-{name}.sh" >/dev/null'
    await run_command(
        ["bash", "-c", script, "restart", str(SCRIPTS)], what=f"the restart of {name}", seconds=90
    )


#: What a send() may raise while the broker restarts.  Only ConnectionLost (and
#: TimeoutError for a receipt) should: the other two are a bug - a write racing
#: with the loss of the connection raises LocalProtocolError ("cannot send SEND
#: when the connection is closed") after a clean close, or the transport's raw
#: OSError after a reset.  See docs/interop.rst.
SEND_FAILURES = (ConnectionLost, TimeoutError, LocalProtocolError, OSError)


async def _finished(future: Any) -> None:
    """Wait (on the service loop) for a future that :meth:`ServiceLoop.submit` returned."""
    await asyncio.wrap_future(future)


@on_brokers(brokers=REAL_BROKERS, versions=("1.2",), matrix=latin_square, timeout=180)
async def test_fault_broker_restart_mid_stream(h: Harness, b: Endpoint) -> None:
    """The broker restarts while messages flow: every message sent with a receipt arrives.

    Consumer and producer reconnect (``reconnect=Backoff``); the consumer acks
    each message individually.  A SEND whose receipt is lost in the restart is
    sent again, and an ACK lost with its connection makes the broker redeliver:
    duplicates are allowed (counted), losses are not.  Messages are persistent
    and the broker comes back on the same data.
    """
    pid = broker_pid(b.name)  # ours to restart, or skip
    queue = unique("queue", "restart")
    total, restart_at = 40, 15
    backoff = Backoff(initial=0.2, maximum=1.0, attempts=200)
    options = b.options(reconnect=backoff, timeout=3.0)
    received: list[bytes] = []
    confirmed: set[bytes] = set()
    restart: Any = None

    async def drain(client: Any, messages: Any, wait: float) -> None:
        while True:
            try:
                message = await messages.get(wait)
            except TimeoutError:
                return
            received.append(message.body)
            # An ACK that fails (the connection it belongs to is gone): it comes again.
            with suppress(ConnectionLost, LocalProtocolError, TimeoutError):
                await client.ack(message)

    async with (
        h.connect(b.port, **options) as producer,
        h.connect(b.port, **options) as consumer,
        consumer.subscribe(queue, ack="client-individual") as messages,
    ):
        first_connections = (producer.connection, consumer.connection)
        try:
            for n in range(total):
                if n == restart_at:
                    restart = h.service.submit(_restart(b.name))
                body = f"m{n}".encode()
                # Sent again until its receipt comes, for as long as the restart may take.
                deadline = time.monotonic() + scaled(120)
                while True:
                    try:
                        await producer.send(
                            queue, body, headers={"persistent": "true"}, receipt=True
                        )
                        break
                    except SEND_FAILURES:
                        if time.monotonic() > deadline:
                            pytest.fail(f"could not send {body!r} in {bound_text(120)}")
                        await h.sleep(0.2)
                confirmed.add(body)
                await drain(consumer, messages, 0.01)
        finally:
            # Whatever happened, the restart ends (bounded by itself) before the
            # service loop does: its child processes must not outlive that loop.
            if restart is not None:
                await h.on_service(_finished(restart), timeout=None)
        for _ in range(300):
            if confirmed <= set(received):
                break
            await drain(consumer, messages, 0.2)
        # Both clients are on new connections, to a new broker process.
        assert producer.connection is not first_connections[0]
        assert consumer.connection is not first_connections[1]
    assert broker_pid(b.name) != pid
    missing = confirmed - set(received)
    assert not missing, f"lost: {sorted(missing)}"
    duplicates = len(received) - len(set(received))
    print(f"{b.name}: {total} sent, {len(received)} received, {duplicates} duplicates")
