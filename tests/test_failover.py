"""Failover: a client given several brokers connects to the first that answers,
and moves to the next when the one in use dies - on every adapter.

The brokers here share no storage (as two embedded brokers, or RabbitMQ and an
embedded broker, do not): what one confirmed is that broker's.  So the tests
check what the client promises across them: calls in flight when the broker
died fail with ConnectionLost and nothing else, every message the second broker
confirmed is there, subscriptions come back on it, and ``client.broker`` says
where the client is.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from adapter_harness import (
    HOST,
    WAIT,
    Backoff,
    ConnectionLost,
    Harness,
    dead_port,
    free_port,
    on_every_adapter,
)
from brokers import USERS, real_broker

from stomp_proto._client._brokers import Brokers, FirstConnect
from stomp_proto._client._core import ClientCore
from stomp_proto._client._options import ConnectOptions

#: Reconnect at once-ish: the test waits on events, never on the clock.
FAST = Backoff(initial=0.05, maximum=0.2, jitter=0.0)
_queues = itertools.count()


async def _produce_through_a_broker_death(
    h: Harness, client: Any, kill: Any, destination: str, *, count: int = 60
) -> tuple[list[tuple[int, tuple[str, int]]], list[BaseException]]:
    """Send ``count`` messages with receipts while ``kill()`` stops the broker in use
    after the 10th is confirmed; each confirmed message with the broker that confirmed it,
    and what the sends that failed raised."""
    confirmed: list[tuple[int, tuple[str, int]]] = []
    failures: list[BaseException] = []
    killed = False

    async def producer() -> None:
        nonlocal killed
        for n in range(count):
            try:
                await client.send(destination, str(n).encode(), receipt=True)
            except Exception as exc:  # which ones is what is checked
                failures.append(exc)
                continue
            confirmed.append((n, client.broker))
            if len(confirmed) == 10 and not killed:
                killed = True
                await h.gather(kill(), _keep_sending(h, client, destination, failures))

    await producer()
    return confirmed, failures


async def _keep_sending(
    h: Harness, client: Any, destination: str, failures: list[BaseException]
) -> None:
    """Calls in flight while the broker dies: they may fail, with ConnectionLost only."""
    for n in range(5):
        try:
            await client.send(destination, f"in-flight-{n}".encode(), receipt=True)
        except Exception as exc:
            failures.append(exc)


async def _bodies(client: Any, destination: str) -> set[bytes]:
    """Everything queued at ``destination`` on the client's broker (until a sentinel)."""
    seen: set[bytes] = set()
    async with client.subscribe(destination) as messages:
        await client.send(destination, b"sentinel", receipt=True)
        while (message := await messages.get(WAIT)) is not None:
            if message.body == b"sentinel":
                break
            seen.add(message.body)
    return seen


def _check(
    confirmed: list[tuple[int, tuple[str, int]]],
    failures: list[BaseException],
    second: tuple[str, int],
    on_second: set[bytes],
) -> None:
    assert all(type(exc) is ConnectionLost for exc in failures), failures
    by_second = {str(n).encode() for n, broker in confirmed if broker == second}
    assert len(by_second) >= 40  # the producer went on, on the second broker
    missing = by_second - on_second
    assert not missing, f"confirmed by the second broker, but not there: {sorted(missing)}"


@on_every_adapter(versions=(None,))
async def test_the_client_moves_to_the_next_broker_when_the_one_in_use_dies(h: Harness) -> None:
    first = await h.start_broker(vanishing=True, users=USERS)
    second = await h.start_broker(users=USERS)
    hosts = [(HOST, first.port), (HOST, second.port)]
    queue = f"/queue/failover-{next(_queues)}"
    echo = f"/queue/failover-echo-{next(_queues)}"
    async with h.connect(
        None, hosts=hosts, reconnect=FAST, login="guest", passcode="guest"
    ) as client:
        assert client.broker == hosts[0]
        async with client.subscribe(echo) as echoes:
            confirmed, failures = await _produce_through_a_broker_death(
                h, client, lambda: h.stop_broker(first), queue
            )
            assert client.broker == hosts[1]
            # The subscription was restored on the second broker.
            await client.send(echo, b"back", receipt=True)
            assert (await echoes.get(WAIT)).body == b"back"
        _check(confirmed, failures, hosts[1], await _bodies(client, queue))


@on_every_adapter(versions=(None,))
async def test_a_first_connect_whose_first_address_is_dead(h: Harness) -> None:
    broker = await h.start_broker()
    with dead_port() as dead:
        async with h.connect(None, hosts=[(HOST, dead), (HOST, broker.port)]) as client:
            assert client.broker == (HOST, broker.port)
            await client.send("/queue/first-dead", b"x", receipt=True)
        # The same through a failover URL.
        url = f"failover:(stomp://{HOST}:{dead},stomp://{HOST}:{broker.port})?randomize=false"
        async with h.connect(None, host=url) as client:
            assert client.broker == (HOST, broker.port)


@on_every_adapter(versions=(None,))
async def test_a_first_connect_fails_only_when_every_address_failed(h: Harness) -> None:
    with dead_port() as first, dead_port() as second, pytest.raises(ConnectionLost) as caught:
        async with h.connect(None, hosts=[(HOST, first), (HOST, second)]):
            pass
    dead = [first, second]
    text = str(caught.value)
    assert "any of 2 brokers" in text
    for port in dead:
        assert f"{HOST}:{port}" in text  # every address, with its reason


@on_every_adapter(versions=(None,))
async def test_a_broker_that_refuses_the_login_is_one_failure_among_others(h: Harness) -> None:
    strict = await h.start_broker(users={"someone": "else"})
    friendly = await h.start_broker(users=USERS)
    hosts = [(HOST, strict.port), (HOST, friendly.port)]
    async with h.connect(None, hosts=hosts, login="guest", passcode="guest") as client:
        assert client.broker == hosts[1]


async def _failover_to_a_real_broker(h: Harness, name: str) -> None:
    real = real_broker(name)
    embedded = await h.start_broker(vanishing=True, users={real.login: real.passcode})
    hosts = [(HOST, embedded.port), (HOST, real.port)]
    queue = f"/queue/stomp-proto-failover-{h.adapter}-{next(_queues)}"
    async with h.connect(None, hosts=hosts, reconnect=FAST, **real.options()) as client:
        assert client.broker == hosts[0]
        confirmed, failures = await _produce_through_a_broker_death(
            h, client, lambda: h.stop_broker(embedded), queue
        )
        assert client.broker == hosts[1]
        _check(confirmed, failures, hosts[1], await _bodies(client, queue))


@on_every_adapter(versions=(None,))
async def test_failover_from_the_embedded_broker_to_rabbitmq(h: Harness) -> None:
    await _failover_to_a_real_broker(h, "rabbitmq")


@on_every_adapter(versions=(None,))
async def test_failover_from_the_embedded_broker_to_activemq(h: Harness) -> None:
    await _failover_to_a_real_broker(h, "activemq")


# -- the rotation and the first connect's clock, without I/O ------------------------------


def test_reconnects_go_round_the_list_from_the_address_in_use() -> None:
    options = ConnectOptions(hosts=(("a", 1), ("b", 2), ("c", 3)))
    core: ClientCore[Any] = ClientCore(options)
    seen = [core.brokers.current]
    for _ in range(4):
        core.new_connection()  # what every reconnect does first
        seen.append(core.brokers.current)
    assert seen == [("a", 1), ("b", 2), ("c", 3), ("a", 1), ("b", 2)]
    assert (core.brokers.options.host, core.brokers.options.port) == ("b", 2)
    assert core.brokers.options.login == options.login


def test_randomize_shuffles_once_and_keeps_every_address() -> None:
    hosts = tuple((f"h{n}", 61613) for n in range(8))
    orders = set()
    for _ in range(20):
        brokers = Brokers(ConnectOptions(hosts=hosts, randomize=True))
        order = []
        for _ in hosts:
            order.append(brokers.current)
            brokers.advance()
        assert sorted(order) == sorted(hosts)
        orders.add(tuple(order))
    assert len(orders) > 1  # 20 draws of 8! orders: all equal only by a broken shuffle
    assert Brokers(ConnectOptions(hosts=hosts)).current == hosts[0]  # in order by default


def test_each_first_attempt_gets_a_share_of_the_time_left() -> None:
    now = [100.0]
    first = FirstConnect(ConnectOptions(hosts=(("a", 1), ("b", 2)), timeout=10.0), lambda: now[0])
    attempts = first.attempts()
    assert next(attempts) == (0.0, 5.0)  # half of it: the other address must get its turn
    assert first.brokers.current == ("a", 1)
    now[0] += 5.0  # the first address swallowed its share
    first.failed(TimeoutError())
    assert next(attempts) == (0.0, 5.0)  # all that is left
    assert first.brokers.current == ("b", 2)
    first.failed(ConnectionRefusedError("refused"))
    assert list(attempts) == []
    error = first.error()
    assert isinstance(error, ConnectionLost)
    expected = "cannot connect to any of 2 brokers: a:1: timed out after 5 s; b:2: refused"
    assert str(error) == expected


def test_each_attempt_is_bounded_by_connect_timeout_within_the_share() -> None:
    # A hung address costs connect_timeout, not a share of the whole timeout; and
    # with many addresses, a share of what is left when that is less.
    hosts = tuple((f"h{n}", n) for n in range(1, 4))
    first = FirstConnect(ConnectOptions(hosts=hosts, timeout=30.0, connect_timeout=2.0), lambda: 0)
    bounds = []
    for _, timeout in first.attempts():
        bounds.append(timeout)
        first.failed(TimeoutError())
    assert bounds == [2.0, 2.0, 2.0]
    now = [0.0]
    options = ConnectOptions(hosts=hosts, timeout=3.0, connect_timeout=2.0)
    first = FirstConnect(options, lambda: now[0])
    attempts = first.attempts()
    assert next(attempts) == (0.0, 1.0)  # a third of 3 s
    now[0] += 0.25  # refused at once: more is left for the others
    first.failed(ConnectionRefusedError("refused"))
    assert next(attempts) == (0.0, 1.375)
    # Reconnects: connect_timeout, never more than timeout.
    assert options.attempt_timeout == 2.0
    assert ConnectOptions(timeout=1.0, connect_timeout=2.0).attempt_timeout == 1.0
    assert ConnectOptions(timeout=None, connect_timeout=None).attempt_timeout is None
    assert ConnectOptions().attempt_timeout == 5.0  # the default: a few seconds


def test_a_first_connect_retried_on_the_reconnect_schedule() -> None:
    # Each round through the addresses has the whole timeout; the rounds are spaced
    # by the reconnect schedule's waits until it is spent.
    schedule = Backoff(initial=1.0, maximum=4.0, factor=2.0, jitter=0.0, attempts=2)
    options = ConnectOptions(
        hosts=(("a", 1), ("b", 2)),
        timeout=10.0,
        connect_timeout=None,  # the shares alone
        reconnect=schedule,
        retry_first_connect=True,
    )
    first = FirstConnect(options, lambda: 0.0)
    seen = []
    for wait, timeout in first.attempts():
        seen.append((wait, timeout, first.brokers.current))
        first.failed(ConnectionRefusedError(f"refused by {first.brokers.current[0]}"))
    assert seen == [
        (0.0, 5.0, ("a", 1)),
        (0.0, 10.0, ("b", 2)),
        (1.0, 5.0, ("a", 1)),
        (0.0, 10.0, ("b", 2)),
        (2.0, 5.0, ("a", 1)),
        (0.0, 10.0, ("b", 2)),
    ]
    assert str(first.error()) == (
        "cannot connect in 6 attempts (3 rounds): a:1: refused by a; b:2: refused by b"
    )
    with pytest.raises(ValueError, match="give reconnect=Backoff"):
        ConnectOptions(retry_first_connect=True)


@on_every_adapter(versions=(None,))
async def test_a_first_connect_waits_for_a_broker_that_starts_late(h: Harness) -> None:
    port = free_port()

    async def start_late() -> None:
        await h.sleep(0.5)  # the client's first attempts find nothing listening
        await h.start_broker(port)

    async def connect() -> None:
        async with h.connect(port, reconnect=FAST, retry_first_connect=True, timeout=2.0) as client:
            await client.send("/queue/late-broker", b"x", receipt=True)
            assert client.stats.sessions == 1

    await h.gather(start_late(), connect())


def test_a_first_attempt_interrupted_by_something_else_is_not_a_failure() -> None:
    first = FirstConnect(ConnectOptions(), lambda: 0.0)
    next(first.attempts())
    with pytest.raises(KeyboardInterrupt):
        first.failed(KeyboardInterrupt())


# -- URLs, end to end -------------------------------------------------------------------


@on_every_adapter(versions=(None,))
async def test_a_stomp_url_with_credentials_and_a_ws_url(h: Harness) -> None:
    broker = await h.start_broker(users=USERS, websocket="/ws")
    queue = "/queue/by-url"
    async with (
        h.connect(None, host=f"stomp://guest:guest@{HOST}:{broker.port}/") as client,
        client.subscribe(queue) as messages,
        h.connect(None, host=f"ws://guest:guest@{HOST}:{broker.port}/ws") as over_ws,
    ):
        assert over_ws.version is not None
        await over_ws.send(queue, b"from the ws:// client", receipt=True)
        assert (await messages.get(WAIT)).body == b"from the ws:// client"


@on_every_adapter(versions=(None,))
async def test_a_receipt_held_up_by_a_full_buffer_does_not_leave_the_broker(h: Harness) -> None:
    # A full subscription buffer pauses reading: a receipt may wait, unread, behind
    # messages the application has not taken.  That is no silent broker: the send
    # times out, and the session stays.
    broker = await h.start_broker()
    other = await h.start_broker()
    queue = f"/queue/full-buffer-{next(_queues)}"
    async with h.connect(broker.port) as producer:
        for n in range(5):
            await producer.send(queue, str(n).encode())
        await producer.send(queue, b"last", receipt=True)
    hosts = [(HOST, broker.port), (HOST, other.port)]
    async with (
        h.connect(None, hosts=hosts, reconnect=FAST, max_pending_messages=1, timeout=1.0) as client,
        client.subscribe(queue) as messages,
    ):
        with pytest.raises(TimeoutError, match=r"timed out after 1 s\Z"):
            await client.send(queue, b"behind the full buffer", receipt=True)
        assert client.broker == hosts[0]
        assert client.stats.lost == 0
        bodies = [(await messages.get(WAIT)).body for _ in range(6)]
        assert bodies[:6] == [b"0", b"1", b"2", b"3", b"4", b"last"]
