"""What operations see of a client's life, on every adapter: its state, the hook told
of each change, the counts, the log lines of a failover, and a give-up that is its own
exception (:class:`ReconnectExhausted`, a :class:`ConnectionLost`) naming every broker.

The brokers are embedded ones that vanish (no ERROR: their connections just drop, as
when a broker process dies).  The tests wait on the client's state, never on a clock.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from adapter_harness import (
    HOST,
    WAIT,
    Backoff,
    BrokerError,
    ClientError,
    ClientState,
    ConnectionLost,
    Harness,
    ReconnectExhausted,
    on_every_adapter,
)
from helpers import LogRecords

from stomp_proto import SessionEvent
from stomp_proto._client._options import ConnectOptions

#: Reconnect at once-ish (the schedule starts over after every session), and give up
#: after three attempts in a row.
FAST = Backoff(initial=0.05, maximum=0.1, jitter=0.0, attempts=3, held_after=0.0)


def sessions_log() -> LogRecords:
    """Every record of the clients' ``stomp_proto.client.sessions`` logger."""
    return LogRecords("stomp_proto.client.sessions", level=logging.DEBUG)


async def until(h: Harness, client: Any, state: ClientState) -> None:
    for _ in range(int(WAIT / 0.02)):
        if client.state is state:
            return
        await h.sleep(0.02)
    raise AssertionError(f"the client is {client.state}, never {state}")


@on_every_adapter(versions=(None,))
async def test_a_failover_and_a_give_up_as_operations_see_them(h: Harness) -> None:
    first = await h.start_broker(vanishing=True)
    second = await h.start_broker(vanishing=True)
    hosts = [(HOST, first.port), (HOST, second.port)]
    changes: list[tuple[ClientState, ClientError | None]] = []
    with sessions_log().installed() as log:
        async with h.connect(
            None,
            hosts=hosts,
            reconnect=FAST,
            on_state_change=lambda state, error: changes.append((state, error)),
        ) as client:
            assert client.state is ClientState.CONNECTED
            assert changes == [(ClientState.CONNECTED, None)]
            await h.stop_broker(first)
            await until(h, client, ClientState.CONNECTED)
            await client.send("/queue/lifecycle", b"after the failover", receipt=True)
            assert client.broker == hosts[1]
            assert [state for state, _ in changes] == [
                ClientState.CONNECTED,
                ClientState.RECONNECTING,
                ClientState.CONNECTED,
            ]
            assert type(changes[1][1]) is ConnectionLost
            stats = client.stats
            assert (stats.sessions, stats.reconnects, stats.lost) == (2, 1, 1)
            # Now every broker is gone: three attempts, then the client gives up.
            await h.stop_broker(second)
            await until(h, client, ClientState.FAILED)
            state, error = changes[-1]
            assert state is ClientState.FAILED and isinstance(error, ReconnectExhausted)
            assert isinstance(error, ConnectionLost)  # what catches a loss catches it too
            assert error.attempts == 3
            assert [address for address, _ in error.reasons] == [hosts[1], hosts[0]]
            for host, port in hosts:
                assert f"{host}:{port}: " in str(error)
            try:
                await client.send("/queue/lifecycle", b"too late", receipt=True)
            except ReconnectExhausted as raised:
                assert raised is error  # every call after the give-up raises it
            else:
                raise AssertionError("a send after the give-up went through")
    # The log of one failover and the give-up, as printed.
    warnings = log.lines(logging.WARNING)
    assert warnings[0].startswith(f"session with {HOST}:{first.port} lost: ")
    assert warnings[0].endswith("; reconnecting")
    infos = log.lines(logging.INFO)
    assert infos[0].startswith(f"session 1 with {HOST}:{first.port} up (attempt 1, ")
    second_up = f"session 2 with {HOST}:{second.port} up (attempt "
    assert any(line.startswith(second_up) for line in infos)
    assert log.lines(logging.ERROR) == [f"gave up: {error}"]
    assert client.state is ClientState.FAILED  # closing a failed client changes nothing


@on_every_adapter(versions=(None,))
async def test_session_events_to_the_hook_and_to_an_iterator(h: Harness) -> None:
    """Connected, lost, reconnected (on the next broker), lost, gave up: the
    ``on_session`` hook is told each, and ``session_events()`` yields the same from
    the moment it was made, then ends with the client."""
    first = await h.start_broker(vanishing=True)
    second = await h.start_broker(vanishing=True)
    hosts = [(HOST, first.port), (HOST, second.port)]
    told: list[SessionEvent] = []
    async with h.connect(None, hosts=hosts, reconnect=FAST, on_session=told.append) as client:
        events = client.session_events()
        await h.stop_broker(first)
        await until(h, client, ClientState.CONNECTED)
        await client.send("/queue/session-events", b"after the failover", receipt=True)
        await h.stop_broker(second)
        await until(h, client, ClientState.FAILED)
        iterated = [event async for event in events]  # it ends: the client has failed
    assert [e.kind for e in told] == ["connected", "lost", "reconnected", "lost", "gave_up"]
    assert iterated == told[1:]  # from the moment it was made
    connected, lost, reconnected, _, gave_up = told
    assert connected.broker == hosts[0] and connected.sessions == 1 and connected.error is None
    assert isinstance(lost.error, ConnectionLost) and lost.broker == hosts[0]
    assert reconnected.broker == hosts[1] and reconnected.sessions == 2
    assert isinstance(gave_up.error, ReconnectExhausted)


@on_every_adapter(versions=(None,))
async def test_without_reconnect_a_lost_session_ends_the_client(h: Harness) -> None:
    broker = await h.start_broker(vanishing=True)
    changes: list[tuple[ClientState, ClientError | None]] = []
    with sessions_log().installed() as log:
        async with h.connect(
            broker.port, on_state_change=lambda state, error: changes.append((state, error))
        ) as client:
            await h.stop_broker(broker)
            await until(h, client, ClientState.FAILED)
    assert [state for state, _ in changes] == [ClientState.CONNECTED, ClientState.FAILED]
    assert type(changes[-1][1]) is ConnectionLost  # not a give-up: nothing was retried
    assert log.lines(logging.ERROR) == []
    assert log.lines(logging.WARNING)[0].startswith(f"session with {HOST}:{broker.port} lost")


@on_every_adapter(versions=(None,))
async def test_a_closed_client_says_so_and_a_failing_hook_is_only_logged(h: Harness) -> None:
    broker = await h.start_broker()
    seen: list[ClientState] = []

    def hook(state: ClientState, error: ClientError | None) -> None:
        seen.append(state)
        raise RuntimeError("a bug in the application's hook")

    async with h.connect(broker.port, on_state_change=hook) as client:
        await client.send("/queue/lifecycle-closed", b"x", receipt=True)
    assert client.state is ClientState.CLOSED
    assert seen == [ClientState.CONNECTED, ClientState.CLOSED]


@on_every_adapter(versions=(None,))
async def test_a_broker_that_keeps_refusing_ends_the_client_with_its_error(h: Harness) -> None:
    # After error_attempts ERROR endings in a row the broker's own error ends the client.
    broker = await h.start_broker(users={"guest": "guest"})
    refusing = Backoff(initial=0.05, maximum=0.1, jitter=0.0, error_attempts=0)
    changes: list[tuple[ClientState, ClientError | None]] = []
    async with h.connect(
        broker.port,
        login="guest",
        passcode="guest",
        reconnect=refusing,
        on_state_change=lambda state, error: changes.append((state, error)),
    ) as client:
        await h.on_service(_shut_down(broker))
        await until(h, client, ClientState.FAILED)
    assert isinstance(changes[-1][1], BrokerError)


async def _shut_down(broker: Any) -> None:
    await broker.close()  # an ERROR "broker shutting down" to every client


def test_the_hook_must_be_callable() -> None:
    with pytest.raises(TypeError, match="on_state_change must be a callable or None"):
        ConnectOptions(on_state_change="print")  # type: ignore[arg-type]


@on_every_adapter(versions=(None,))
async def test_the_counts_of_messages_sent_received_acked_and_nacked(h: Harness) -> None:
    broker = await h.start_broker()
    queue = "/queue/counted"
    async with (
        h.connect(broker.port) as client,
        client.subscribe(queue, ack="client-individual") as messages,
    ):
        stats = client.stats
        assert (stats.sent, stats.received, stats.acked, stats.nacked) == (0, 0, 0, 0)
        for number in range(4):
            await client.send(queue, f"order {number}", receipt=number % 2 == 0)
        taken = [await messages.get(WAIT) for _ in range(4)]
        assert all(message is not None for message in taken)
        first, second, third, fourth = taken
        assert first is not None and second is not None
        assert third is not None and fourth is not None
        await client.ack(first)  # the plain ACK
        await client.ack(second, receipt=True)  # an ACK event with its receipt
        assert (stats.sent, stats.received, stats.acked, stats.nacked) == (4, 4, 2, 0)
        # NACK exists from STOMP 1.1 on; the client negotiated 1.2.  The broker
        # delivers the message again: a fifth MESSAGE received.
        await client.nack(third)
        again = await messages.get(WAIT)
        assert again is not None and again.body == third.body
        async with client.transaction() as tx:
            await client.ack(fourth, transaction=tx)
            await client.ack(again, transaction=tx)
        assert client.stats is stats  # one live object
        assert (stats.sent, stats.received, stats.acked, stats.nacked) == (4, 5, 4, 1)
        assert (stats.sessions, stats.reconnects, stats.lost) == (1, 0, 0)


@on_every_adapter(versions=(None,))
async def test_sessions_reconnects_and_losses_as_opentelemetry_metrics(h: Harness) -> None:
    pytest.importorskip("opentelemetry.sdk", reason="the otel extra (and its SDK) is not installed")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from stomp_proto.tracing import Tracing

    first = await h.start_broker(vanishing=True)
    second = await h.start_broker(vanishing=True)
    hosts = [(HOST, first.port), (HOST, second.port)]
    reader = InMemoryMetricReader()
    tracing = Tracing(meter_provider=MeterProvider([reader]))  # metrics only
    async with h.connect(None, hosts=hosts, reconnect=FAST, tracing=tracing) as client:
        await h.stop_broker(first)
        await until(h, client, ClientState.CONNECTED)
        await client.send("/queue/lifecycle", b"after the failover", receipt=True)
    data = reader.get_metrics_data()
    assert data is not None
    counted = {
        (metric.name, point.attributes["server.port"], point.attributes.get("error.type")): (
            point.value
        )
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name.startswith("stomp_proto.client.")
        for point in metric.data.data_points
        if point.attributes is not None
    }
    assert counted == {
        ("stomp_proto.client.sessions", first.port, None): 1,
        ("stomp_proto.client.sessions", second.port, None): 1,
        ("stomp_proto.client.reconnects", second.port, None): 1,
        ("stomp_proto.client.lost_sessions", first.port, "stomp_proto.ConnectionLost"): 1,
    }


def test_the_session_hook_must_be_callable() -> None:
    with pytest.raises(TypeError, match="on_session must be a callable or None"):
        ConnectOptions(on_session="print")  # type: ignore[arg-type]


@on_every_adapter(versions=(None,))
async def test_a_failing_session_hook_is_logged_and_iterators_end_at_close(h: Harness) -> None:
    broker = await h.start_broker()

    def hook(event: SessionEvent) -> None:
        raise RuntimeError("a bug in the application's hook")

    with sessions_log().installed() as log:
        async with h.connect(broker.port, on_session=hook) as client:
            events = client.session_events()
            await client.send("/queue/lifecycle-hook", b"x", receipt=True)
    assert [event async for event in events] == []  # closed: the iterator ended
    assert any("on_session hook raised on connected" in line for line in log.lines(logging.ERROR))
    assert client.state is ClientState.CLOSED
