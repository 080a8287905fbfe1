"""``GET /metrics`` on the embedded broker's port: the Prometheus text format, read back
by ``prometheus_client``'s own parser, with counters and gauges that follow what the
clients did."""

from __future__ import annotations

import asyncio
import base64
import math

import pytest
from timeouts import scaled

from stomp_proto import ClientConnection, Connect, Send
from stomp_proto.asyncio import BrokerError, connect
from stomp_proto.broker import Broker
from stomp_proto.broker._metrics import SCRAPE_SLICE

parser = pytest.importorskip("prometheus_client.parser")

pytestmark = [pytest.mark.filterwarnings("error"), pytest.mark.timeout(60)]

HOST = "127.0.0.1"
USERS = {"ann": "secret"}


async def http_get(
    port: int, target: str, origin: str | None = None, authorization: str | None = None
) -> tuple[str, bytes]:
    """The status line and headers, and the body, of ``GET target`` (the broker closes)."""
    reader, writer = await asyncio.open_connection(HOST, port)
    request = f"GET {target} HTTP/1.1\r\nHost: {HOST}:{port}\r\n"
    if authorization is not None:
        request += f"Authorization: {authorization}\r\n"
    if origin is not None:
        request += (
            f"Upgrade: websocket\r\nConnection: Upgrade\r\nOrigin: {origin}\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        )
    writer.write((request + "\r\n").encode())
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    await writer.wait_closed()
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.decode("latin-1"), body


def basic(login: str, passcode: str) -> str:
    return "Basic " + base64.b64encode(f"{login}:{passcode}".encode()).decode()


ANN = basic("ann", "secret")


async def scrape(
    port: int, authorization: str | None = None
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``GET /metrics``, by name and labels, read by prometheus_client."""
    head, body = await http_get(port, "/metrics", authorization=authorization)
    assert head.startswith("HTTP/1.1 200 OK"), head
    assert "Content-Type: text/plain; version=0.0.4; charset=utf-8" in head
    samples = {}
    for family in parser.text_string_to_metric_families(body.decode("utf-8")):
        assert family.name.startswith("stomp_broker_")
        assert family.documentation  # every family says what it counts
        for sample in family.samples:
            samples[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def test_metrics_follow_connections_messages_acks_and_refusals() -> None:
    queue, topic = "/queue/metrics", '/topic/odd "name" \\ here'

    async def body() -> None:
        async with Broker(HOST, 0, websocket="/ws", users=USERS) as broker:
            port = broker.port
            fresh = await scrape(port, ANN)
            assert fresh[("stomp_broker_sessions_opened_total", ())] == 0
            assert fresh[("stomp_broker_connections_open", ())] == 0
            async with connect(HOST, port, login="ann", passcode="secret") as producer:
                for n in range(3):
                    await producer.send(queue, f"m{n}", receipt=True)
                waiting = await scrape(port, ANN)
                assert waiting[("stomp_broker_queue_depth", (("destination", queue),))] == 3
                assert waiting[("stomp_broker_subscribers", (("destination", queue),))] == 0
                async with (
                    connect(HOST, port, login="ann", passcode="secret") as consumer,
                    consumer.subscribe(queue, ack="client-individual") as messages,
                    consumer.subscribe(topic),
                ):
                    first, second, third = [await messages.get(timeout=5) for _ in range(3)]
                    assert first and second and third
                    await consumer.ack(first, receipt=True)
                    await consumer.nack(second, receipt=True)  # delivered again
                    again = await messages.get(timeout=5)
                    assert again is not None and again.body == second.body
                    busy = await scrape(port, ANN)
        # A wrong passcode, and a web page of another origin.
        async with Broker(HOST, 0, websocket="/ws", users=USERS) as refusing:
            with pytest.raises(BrokerError):
                async with connect(HOST, refusing.port, login="ann", passcode="wrong"):
                    pass
            head, _ = await http_get(refusing.port, "/ws", origin="http://evil.example")
            assert head.startswith("HTTP/1.1 403 ")
            refused = await scrape(refusing.port, ANN)

        def by(name: str, **labels: str) -> float:
            return busy[(f"stomp_broker_{name}", tuple(sorted(labels.items())))]

        assert by("connections_opened_total", transport="tcp") == 2
        assert by("sessions_opened_total") == 2
        assert by("connections_open") == 2
        assert by("sessions_open") == 2
        assert by("messages_received_total") == 3
        assert by("messages_delivered_total") == 4  # the NACKed one twice
        assert by("messages_acked_total") == 1
        assert by("messages_nacked_total") == 1
        assert by("queue_depth", destination=queue) == 0
        assert by("unacked_messages", destination=queue) == 2
        assert by("subscribers", destination=queue) == 1
        # The text format escapes '"' and '\' in label values; the parser undoes it.
        assert by("subscribers", destination=topic) == 1
        assert by("received_bytes_total") > 0 and by("sent_bytes_total") > 0
        assert not any(name == "stomp_broker_frames_refused_total" for name, _ in busy)
        refusals = {key: value for key, value in refused.items() if "refused" in key[0]}
        assert refusals == {
            ("stomp_broker_frames_refused_total", (("reason", "login_failed"),)): 1,
            ("stomp_broker_websocket_upgrades_refused_total", (("status", "403"),)): 1,
        }
        assert all(math.isfinite(value) for value in busy.values())

    asyncio.run(body())


def test_deadline_and_protocol_refusals_are_counted_by_reason() -> None:
    async def body() -> None:
        # Scaled: the second connection's CONNECT must beat the deadline that the first
        # one's silence runs into.
        async with Broker(HOST, 0, connect_timeout=scaled(0.2)) as broker:
            silent = await asyncio.open_connection(HOST, broker.port)
            assert (await asyncio.wait_for(silent[0].read(), 10)).startswith(b"ERROR\n")
            silent[1].close()
            bad = await asyncio.open_connection(HOST, broker.port)
            bad[1].write(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00NOT-A-COMMAND\n\n\x00")
            assert b"ERROR\n" in await asyncio.wait_for(bad[0].read(), 10)
            bad[1].close()
            samples = await scrape(broker.port)
        reasons = {
            dict(labels)["reason"]: value
            for (name, labels), value in samples.items()
            if name == "stomp_broker_frames_refused_total"
        }
        assert reasons == {"connect_timeout": 1, "bad_command": 1}

    asyncio.run(body())


def test_metrics_can_be_turned_off_and_other_paths_are_not_found() -> None:
    async def body() -> None:
        async with Broker(HOST, 0) as plain:
            head, answer = await http_get(plain.port, "/other")
            assert head.startswith("HTTP/1.1 404 ") and b"/other" in answer
            # A query string does not matter (Prometheus may add one).
            assert (await http_get(plain.port, "/metrics?x=1"))[0].startswith("HTTP/1.1 200 ")
        async with Broker(HOST, 0, websocket="/ws", metrics=False) as without:
            # Only WebSocket upgrades are served: a plain GET is a bad one.
            assert (await http_get(without.port, "/metrics"))[0].startswith("HTTP/1.1 400 ")
        async with Broker(HOST, 0, metrics=False) as stomp_only:
            # Plain STOMP only: the request is read as a (bad) STOMP frame.
            head, _ = await http_get(stomp_only.port, "/metrics")
            assert head.startswith("ERROR\n")

    asyncio.run(body())


# -- who may scrape, and how much a scrape holds ----------------------------------------


@pytest.mark.parametrize(
    ("authorization", "status"),
    [
        (None, 401),
        (basic("ann", "wrong"), 401),
        (basic("nobody", "secret"), 401),
        ("Basic not-base64!", 401),
        (ANN, 200),
        ("Bearer t0ken", 200),
        ("Bearer other", 401),
    ],
)
def test_with_users_metrics_need_a_login_or_the_token(
    authorization: str | None, status: int
) -> None:
    async def body() -> None:
        async with Broker(HOST, 0, users=USERS, metrics_token="t0ken") as broker:
            head, answer = await http_get(broker.port, "/metrics", authorization=authorization)
            assert head.startswith(f"HTTP/1.1 {status} "), head
            if status == 401:
                assert 'WWW-Authenticate: Basic realm="stomp_proto broker"' in head
                assert b"stomp_broker_" not in answer

    asyncio.run(body())


def test_a_token_alone_guards_the_metrics_of_a_broker_without_users() -> None:
    async def body() -> None:
        async with Broker(HOST, 0, metrics_token="t0ken") as broker:
            head, _ = await http_get(broker.port, "/metrics")
            assert head.startswith("HTTP/1.1 401 ") and "Bearer" in head
            # No users: a login is nothing to check against.
            assert (await http_get(broker.port, "/metrics", authorization=ANN))[0].startswith(
                "HTTP/1.1 401 "
            )
            samples = await scrape(broker.port, "Bearer t0ken")
            assert samples[("stomp_broker_sessions_open", ())] == 0

    asyncio.run(body())


def _fill(broker: Broker, destinations: int) -> None:
    """``destinations`` queues, queue ``q<n>`` holding ``n % 7`` messages plus one."""
    session = broker.core.open_session()
    client = ClientConnection()
    session.receive_data(client.send(Connect(host="/")))
    client.receive_data(broker.core.process(session).bytes_for(session))
    assert client.next_event() is not None
    data = bytearray()
    for n in range(destinations):
        for _ in range(n % 7 + 1):
            data += client.send(Send(f"/queue/q{n}", b"x"))
    session.receive_data(bytes(data))
    broker.core.process(session)


def test_a_scrape_lists_the_deepest_destinations_and_totals_over_all() -> None:
    async def body() -> None:
        async with Broker(HOST, 0) as broker:
            _fill(broker, 5000)
            head, answer = await http_get(broker.port, "/metrics")
            samples = await scrape(broker.port)
        assert head.startswith("HTTP/1.1 200 ")
        # 100 destinations of 3 gauges, with the counters: kilobytes, not megabytes.
        assert len(answer) < 30_000, len(answer)
        listed = {
            dict(labels)["destination"]: value
            for (name, labels), value in samples.items()
            if name == "stomp_broker_queue_depth"
        }
        assert len(listed) == 100
        assert set(listed.values()) == {7}  # the deepest: n % 7 == 6
        assert samples[("stomp_broker_destinations", ())] == 5000
        assert samples[("stomp_broker_destinations_listed", ())] == 100
        assert samples[("stomp_broker_messages_queued", ())] == sum(n % 7 + 1 for n in range(5000))
        assert samples[("stomp_broker_memory_used_bytes", ())] > 0
        assert samples[("stomp_broker_memory_alarm", ())] == 0

    asyncio.run(body())


def test_every_destination_is_listed_on_request() -> None:
    async def body() -> None:
        async with Broker(HOST, 0, metrics_destinations=None) as broker:
            _fill(broker, 500)
            samples = await scrape(broker.port)
            assert samples[("stomp_broker_destinations_listed", ())] == 500
            # Broker.metrics() is the same text, built in one go.
            text = broker.metrics()
            assert text.count("stomp_broker_queue_depth{") == 500

    asyncio.run(body())


def test_a_scrape_lets_other_tasks_run_while_it_is_built() -> None:
    async def body() -> None:
        async with Broker(HOST, 0, metrics_destinations=None) as broker:
            _fill(broker, 5 * SCRAPE_SLICE)
            ticks = 0
            stop = False

            async def ticker() -> None:
                nonlocal ticks
                while not stop:
                    ticks += 1
                    await asyncio.sleep(0)

            task = asyncio.create_task(ticker())
            await asyncio.sleep(0)
            before = ticks
            text = await broker._scrape()
            stop = True
            await task
        # The work was cut in slices, and the other task ran between them.
        assert ticks - before >= 5
        assert text.count(b"stomp_broker_subscribers{") == 5 * SCRAPE_SLICE

    asyncio.run(body())


def test_a_bad_metrics_destinations_is_refused() -> None:
    with pytest.raises(ValueError, match="top"):
        Broker(metrics_destinations=-1)
    with pytest.raises(ValueError, match="metrics_token"):
        Broker(metrics_token="")
