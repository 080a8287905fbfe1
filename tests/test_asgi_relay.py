"""StompApp in relay mode: browser sessions forwarded to a broker behind, in-process.

The browser side is test_asgi's fake WebSocket (frames written by hand); the
broker behind is an embedded broker started by the test (always), RabbitMQ
or ActiveMQ (found as test_interop_brokers finds them: skipped when down,
failed under CI=true).  On each: a subscribe and send round trip on a queue
and a topic, receipts, client-individual ACK and NACK (redelivery as each
broker does it), cumulative ACKs, a STOMP 1.1 browser, a transaction
committed and one aborted, a login mapped per user, a backlog, the app's own
publish and reply.  On an embedded broker: app and user destinations stay
with the app, a lost or missing broker is an ERROR to the browser, new
sessions fail over, a browser that does not read holds the broker back, and
shutting the app down leaves the broker cleanly.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

import pytest
from brokers import USERS, Endpoint, real_broker
from test_asgi import FakeSocket, frame, header, session, ws_scope

from stomp_proto import Frame
from stomp_proto.asgi import AppMessage, Relay, StompApp
from stomp_proto.asyncio import ClientError, ConnectionLost
from stomp_proto.broker import Broker, Permissions

pytestmark = pytest.mark.timeout(90)

UPSTREAMS = ("embedded", "rabbitmq", "activemq")


def unique(kind: str, name: str) -> str:
    return f"/{kind}/relay-{name}-{uuid.uuid4().hex[:10]}"


@asynccontextmanager
async def upstream(name: str, **broker_options: Any) -> AsyncIterator[Endpoint]:
    """The broker behind the relay: a new embedded one, or a real one (skipped when down)."""
    if name != "embedded":
        yield real_broker(name)
        return
    broker_options.setdefault("users", USERS)
    async with Broker(**broker_options) as broker:
        yield Endpoint("embedded", broker.port)


def relay_to(ep: Endpoint, **options: Any) -> Relay:
    options.setdefault("login", ep.login)
    options.setdefault("passcode", ep.passcode)
    options.setdefault("vhost", ep.vhost)
    options.setdefault("timeout", 20.0)
    return Relay("127.0.0.1", ep.port, **options)


def authenticate_by_query(scope: MutableMapping[str, Any]) -> str | None:
    """The test's web app: the user is named in the query string (``user=alice``)."""
    query = scope.get("query_string", b"").decode()
    return dict(p.split("=", 1) for p in query.split("&") if "=" in p).get("user")


def as_user(user: str) -> dict[str, Any]:
    return ws_scope(query_string=f"user={user}".encode())


def run(name: str, test: Any) -> None:
    async def main() -> None:
        async with upstream(name) as ep:
            await test(ep)

    asyncio.run(main())


async def receipt(sock: FakeSocket, receipt_id: str) -> None:
    """Until RECEIPT ``receipt_id``; the MESSAGEs that came first are read next.

    A relayed message may overtake the receipt of the frame that caused it.
    """
    early: list[Frame] = []
    while True:
        got = await sock.next_frame()
        if got.command == "RECEIPT":
            assert header(got, "receipt-id") == receipt_id
            sock.frames[:0] = early
            return
        assert got.command == "MESSAGE", (got.command, got.headers, got.body)
        early.append(got)


async def subscribe(sock: FakeSocket, destination: str, sub: str, ack: str = "auto") -> None:
    sock.write(
        frame(
            "SUBSCRIBE",
            ("destination", destination),
            ("id", sub),
            ("ack", ack),
            ("receipt", f"r-{sub}"),
        )
    )
    await receipt(sock, f"r-{sub}")


async def send(sock: FakeSocket, destination: str, body: bytes, *headers: tuple[str, str]) -> None:
    ident = f"r-send-{uuid.uuid4().hex[:8]}"
    sock.write(frame("SEND", ("destination", destination), ("receipt", ident), *headers, body=body))
    await receipt(sock, ident)


def redelivered(message: Frame) -> bool:
    return header(message, "redelivered") == "true"


# -- the scenarios, on each broker behind ----------------------------------------------


@pytest.mark.parametrize("name", UPSTREAMS)
def test_subscribe_and_send_round_trip(name: str) -> None:
    async def test(ep: Endpoint) -> None:
        app = StompApp(relay=relay_to(ep))
        queue, topic = unique("queue", "rt"), unique("topic", "rt")
        async with session(app) as a, session(app) as b:
            await subscribe(a, queue, "q")
            await subscribe(a, topic, "t")
            await send(b, queue, b"to the queue", ("content-type", "text/plain"))
            got = await a.expect("MESSAGE")
            assert got.body == b"to the queue"
            assert header(got, "subscription") == "q"
            assert header(got, "content-type") == "text/plain"
            assert header(got, "message-id")
            await send(b, topic, b"to the topic", ("x-custom", "kept"))
            got = await a.expect("MESSAGE")
            assert got.body == b"to the topic"
            assert header(got, "subscription") == "t"
            assert header(got, "x-custom") == "kept"
            # UNSUBSCRIBE with a receipt: nothing more comes.
            a.write(frame("UNSUBSCRIBE", ("id", "t"), ("receipt", "r-unsub")))
            await receipt(a, "r-unsub")
            await send(b, topic, b"after")
            await send(b, queue, b"second")
            got = await a.expect("MESSAGE")
            assert (got.body, header(got, "subscription")) == (b"second", "q")

    run(name, test)


@pytest.mark.parametrize("name", UPSTREAMS)
def test_client_individual_ack_and_nack(name: str) -> None:
    async def test(ep: Endpoint) -> None:
        app = StompApp(relay=relay_to(ep))
        queue = unique("queue", "ack")
        async with session(app) as sock:
            await subscribe(sock, queue, "s", "client-individual")
            await send(sock, queue, b"m1", ("persistent", "true"))
            await send(sock, queue, b"m2", ("persistent", "true"))
            m1, m2 = await sock.expect("MESSAGE"), await sock.expect("MESSAGE")
            assert (m1.body, m2.body) == (b"m1", b"m2")
            ack1, ack2 = header(m1, "ack"), header(m2, "ack")
            assert ack1 and ack2 and ack1 != ack2
            sock.write(frame("ACK", ("id", ack2), ("receipt", "r-ack")))
            await receipt(sock, "r-ack")
            sock.write(frame("NACK", ("id", ack1), ("receipt", "r-nack")))
            await receipt(sock, "r-nack")
            await send(sock, queue, b"sentinel")
            after = await sock.expect("MESSAGE")
            if ep.is_activemq:
                assert after.body == b"sentinel"  # a NACKed message is dead-lettered
            else:
                assert after.body == b"m1"
                assert redelivered(after)
                sock.write(frame("ACK", ("id", header(after, "ack") or "")))
                after = await sock.expect("MESSAGE")
                assert after.body == b"sentinel"
            sock.write(frame("ACK", ("id", header(after, "ack") or ""), ("receipt", "r-last")))
            await receipt(sock, "r-last")
        # Every message was settled at the broker (m1 by its NACK: redelivered, or on
        # ActiveMQ dead-lettered): a new consumer gets only its probe.
        async with session(app) as sock:
            await subscribe(sock, queue, "again", "client-individual")
            await send(sock, queue, b"probe")
            got = await sock.expect("MESSAGE")
            assert got.body == b"probe"
            sock.write(frame("ACK", ("id", header(got, "ack") or ""), ("receipt", "r-p")))
            await sock.expect("RECEIPT")

    run(name, test)


@pytest.mark.parametrize("name", UPSTREAMS)
def test_unacknowledged_messages_return_when_the_session_ends(name: str) -> None:
    async def test(ep: Endpoint) -> None:
        app = StompApp(relay=relay_to(ep))
        queue = unique("queue", "unacked")
        async with session(app) as sock:
            await subscribe(sock, queue, "s", "client")
            await send(sock, queue, b"kept")
            assert (await sock.expect("MESSAGE")).body == b"kept"
        async with session(app) as sock:
            await subscribe(sock, queue, "s", "client")
            again = await sock.expect("MESSAGE")
            assert again.body == b"kept"
            assert redelivered(again)
            sock.write(frame("ACK", ("id", header(again, "ack") or ""), ("receipt", "r")))
            await sock.expect("RECEIPT")

    run(name, test)


@pytest.mark.parametrize("name", UPSTREAMS)
def test_transactions_committed_and_aborted(name: str) -> None:
    async def test(ep: Endpoint) -> None:
        app = StompApp(relay=relay_to(ep))
        queue = unique("queue", "tx")
        async with session(app) as consumer, session(app) as producer:
            await subscribe(consumer, queue, "s", "client-individual")
            producer.write(frame("BEGIN", ("transaction", "t1")))
            producer.write(frame("SEND", ("destination", queue), ("transaction", "t1"), body=b"c1"))
            producer.write(frame("SEND", ("destination", queue), ("transaction", "t1"), body=b"c2"))
            producer.write(frame("COMMIT", ("transaction", "t1"), ("receipt", "r-commit")))
            await receipt(producer, "r-commit")
            c1, c2 = await consumer.expect("MESSAGE"), await consumer.expect("MESSAGE")
            assert (c1.body, c2.body) == (b"c1", b"c2")
            producer.write(frame("BEGIN", ("transaction", "t2")))
            producer.write(frame("SEND", ("destination", queue), ("transaction", "t2"), body=b"x"))
            producer.write(frame("ABORT", ("transaction", "t2"), ("receipt", "r-abort")))
            await receipt(producer, "r-abort")
            await send(producer, queue, b"sentinel")
            got = await consumer.expect("MESSAGE")
            assert got.body == b"sentinel"  # the aborted message never came
            # ACKs in a transaction: committed, they settle.
            consumer.write(frame("BEGIN", ("transaction", "t3")))
            for message in (c1, c2, got):
                consumer.write(
                    frame("ACK", ("id", header(message, "ack") or ""), ("transaction", "t3"))
                )
            consumer.write(frame("COMMIT", ("transaction", "t3"), ("receipt", "r-c3")))
            await receipt(consumer, "r-c3")
        async with session(app) as sock:
            await subscribe(sock, queue, "s2", "client-individual")
            await send(sock, queue, b"probe")
            assert (await sock.expect("MESSAGE")).body == b"probe"  # nothing else was left

    run(name, test)


@pytest.mark.parametrize("name", UPSTREAMS)
def test_login_mapped_per_user(name: str) -> None:
    async def test(ep: Endpoint) -> None:
        mapped: list[str | None] = []

        async def credentials(user: str | None) -> tuple[str | None, str | None]:
            mapped.append(user)
            if user == "alice":
                return "stomptest", "stomptest"
            return "stomptest", "wrong"

        relay = relay_to(ep, credentials=credentials)
        app = StompApp(relay=relay, authenticate=authenticate_by_query)
        queue = unique("queue", "login")
        async with session(app, scope=as_user("alice")) as alice:
            await subscribe(alice, queue, "s")
            await send(alice, queue, b"hello")
            assert (await alice.expect("MESSAGE")).body == b"hello"
            async with session(app, scope=as_user("mallory")) as mallory:
                mallory.write(frame("SEND", ("destination", queue), ("receipt", "r"), body=b"x"))
                error = await mallory.expect("ERROR")
                assert header(error, "message") == "broker unavailable"
                assert header(error, "receipt-id") == "r"
                await mallory.wait_closed()
        assert mapped == ["alice", "mallory"]

    run(name, test)


# -- the embedded broker behind: what the app keeps, what fails -------------------------


def test_app_and_user_destinations_stay_with_the_app() -> None:
    async def main() -> None:
        async with Broker(users=USERS) as broker:
            relay = relay_to(Endpoint("embedded", broker.port))
            app = StompApp(relay=relay, authenticate=authenticate_by_query)

            @app.handler("/app/echo")
            async def echo(message: AppMessage) -> None:
                await message.reply(message.body, destination="/user/queue/echo")

            async with session(app, scope=as_user("alice")) as sock:
                await subscribe(sock, "/user/queue/echo", "u")
                await send(sock, "/app/echo", b"local")
                got = await sock.expect("MESSAGE")
                assert (got.body, header(got, "subscription")) == (b"local", "u")
            # Nothing of it reached the broker behind: no session was opened there.
            assert broker.core.counters.sessions_opened == 0

    asyncio.run(main())


def test_a_lost_broker_is_an_error_to_the_browser() -> None:
    async def main() -> None:
        broker = Broker(users=USERS)
        await broker.start()
        try:
            app = StompApp(relay=relay_to(Endpoint("embedded", broker.port)))
            async with session(app) as sock, session(app) as idle:
                await subscribe(sock, unique("queue", "lost"), "s")
                await broker.close()
                error = await sock.expect("ERROR")
                assert header(error, "message") == "broker connection lost"
                assert await sock.wait_closed() == 1000
                # A session that relayed nothing has no connection to lose.
                idle.write(frame("SEND", ("destination", "/app/none"), ("receipt", "r")))
                assert header(await idle.expect("ERROR"), "message") == "no handler"
                # A new session finds no broker behind.
                async with session(app) as late:
                    late.write(frame("SUBSCRIBE", ("destination", "/queue/x"), ("id", "1"),
                                     ("receipt", "r")))  # fmt: skip
                    error = await late.expect("ERROR")
                    assert header(error, "message") == "broker unavailable"
                    assert header(error, "receipt-id") == "r"
        finally:
            await broker.close()

    asyncio.run(main())


def test_new_sessions_fail_over_to_the_next_broker() -> None:
    async def main() -> None:
        async with Broker(users=USERS) as first, Broker(users=USERS) as second:
            hosts = [("127.0.0.1", first.port), ("127.0.0.1", second.port)]
            relay = Relay(hosts=hosts, login="guest", passcode="guest", timeout=20.0)
            app = StompApp(relay=relay)
            queue = unique("queue", "failover")
            async with session(app) as sock:
                await send(sock, queue, b"on the first")
            await first.close()
            async with session(app) as sock:
                await subscribe(sock, queue, "s")
                await send(sock, queue, b"on the second")
                assert (await sock.expect("MESSAGE")).body == b"on the second"
            assert second.core.counters.messages_received == 1

    asyncio.run(main())


def test_relay_options_are_checked() -> None:
    from stomp_proto.asyncio import Backoff

    with pytest.raises(ValueError, match="reconnect"):
        Relay(reconnect=Backoff())
    with pytest.raises(ValueError, match="prefixes"):
        Relay(prefixes=["queue/"])
    with pytest.raises(TypeError, match="prefixes"):
        Relay(prefixes="/queue/")
    with pytest.raises(TypeError, match="unknown option"):
        Relay(bogus=1)  # type: ignore[call-arg]
    relay = Relay(prefixes=["/queue/"])
    assert relay.relays("/queue/a") and not relay.relays("/topic/a")
    for prefixes in (["/app/"], ["/user/queue/"], ["/"]):
        with pytest.raises(ValueError, match="overlaps"):
            StompApp(relay=Relay(prefixes=prefixes))
    with pytest.raises(ValueError, match="overlaps"):
        StompApp(relay=relay, app_prefix="/queue/app/")


@pytest.mark.parametrize("name", UPSTREAMS)
def test_a_cumulative_ack_settles_every_earlier_message(name: str) -> None:
    async def test(ep: Endpoint) -> None:
        app = StompApp(relay=relay_to(ep))
        queue = unique("queue", "cumulative")
        async with session(app) as sock:
            await subscribe(sock, queue, "s", "client")
            for n in range(3):
                await send(sock, queue, f"m{n}".encode())
            got = [await sock.expect("MESSAGE") for _ in range(3)]
            assert [m.body for m in got] == [b"m0", b"m1", b"m2"]
            sock.write(frame("ACK", ("id", header(got[2], "ack") or ""), ("receipt", "r")))
            await receipt(sock, "r")
        async with session(app) as sock:
            await subscribe(sock, queue, "s", "client")
            await send(sock, queue, b"probe")
            got = [await sock.expect("MESSAGE")]
            assert got[0].body == b"probe"  # none of the three came back
            sock.write(frame("ACK", ("id", header(got[0], "ack") or ""), ("receipt", "r")))
            await receipt(sock, "r")

    run(name, test)


@pytest.mark.parametrize("name", UPSTREAMS)
def test_a_stomp_11_browser_acks_by_message_id(name: str) -> None:
    async def test(ep: Endpoint) -> None:
        app = StompApp(relay=relay_to(ep))
        queue = unique("queue", "v11")
        async with session(app, version="1.1", scope=ws_scope(["v11.stomp"])) as sock:
            await subscribe(sock, queue, "s", "client-individual")
            await send(sock, queue, b"one")
            await send(sock, queue, b"two")
            one, two = await sock.expect("MESSAGE"), await sock.expect("MESSAGE")
            assert header(one, "ack") is None
            for message, command in ((two, "ACK"), (one, "NACK")):
                sock.write(
                    frame(
                        command,
                        ("message-id", header(message, "message-id") or ""),
                        ("subscription", "s"),
                        ("receipt", f"r-{command}"),
                    )
                )
                await receipt(sock, f"r-{command}")
            await send(sock, queue, b"sentinel")
            after = await sock.expect("MESSAGE")
            if not ep.is_activemq:  # ActiveMQ dead-letters a NACKed message
                assert (after.body, redelivered(after)) == (b"one", True)
                after = await sock.expect("MESSAGE")
            assert after.body == b"sentinel"

    run(name, test)


def test_an_error_from_the_broker_names_the_receipt() -> None:
    async def main() -> None:
        permissions: dict[str, Permissions] = {"guest": {"write": "/queue/open", "read": ".*"}}
        async with Broker(users=USERS, permissions=permissions) as broker:
            app = StompApp(relay=relay_to(Endpoint("embedded", broker.port)))
            async with session(app) as sock:
                await send(sock, "/queue/open", b"allowed")
                sock.write(frame("SEND", ("destination", "/queue/closed"), ("receipt", "r")))
                error = await sock.expect("ERROR")
                assert header(error, "message") == "access refused"
                assert header(error, "receipt-id") == "r"
                await sock.wait_closed()

    asyncio.run(main())


def test_a_browser_that_does_not_read_holds_the_broker_back() -> None:
    async def main() -> None:
        async with Broker(users=USERS) as broker:
            ep = Endpoint("embedded", broker.port)
            limit = 4096
            app = StompApp(relay=relay_to(ep, max_pending_messages=5), output_limit=limit)
            queue, count, body = unique("queue", "slow"), 200, b"x" * 1024
            async with session(app) as sock:
                sock.from_app = asyncio.Queue(maxsize=2)  # the browser stops reading
                await subscribe(sock, queue, "s")
                async with session(app) as producer:
                    for _ in range(count - 1):
                        producer.write(frame("SEND", ("destination", queue), body=body))
                    await send(producer, queue, body)
                    await asyncio.sleep(0.3)  # (time for more to go through, if it could)
                    delivered = app.core.counters.messages_delivered
                    # What waits for the browser: within its output limit (and a message).
                    assert delivered < 20, delivered
                    assert all(p.queued <= limit + 2048 for p in app._peers.values())
                    # Read again: every message comes, in order.
                    for _ in range(count):
                        assert (await sock.expect("MESSAGE")).body == body
                    assert app.core.counters.messages_delivered == count

    asyncio.run(main())


def test_credentials_that_refuse_or_fail_make_the_broker_unavailable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def test(ep: Endpoint) -> None:
        def credentials(user: str | None) -> tuple[str | None, str | None]:
            if user == "mallory":
                raise PermissionError("mallory may not")
            if user == "bug":
                raise RuntimeError("the hook has a bug")
            return ep.login, ep.passcode

        app = StompApp(
            relay=relay_to(ep, credentials=credentials), authenticate=authenticate_by_query
        )
        for user, detail in (("mallory", b"mallory may not"), ("bug", b"credentials() failed")):
            async with session(app, scope=as_user(user)) as sock:
                sock.write(frame("SUBSCRIBE", ("destination", "/topic/t"), ("id", "1")))
                error = await sock.expect("ERROR")
                assert header(error, "message") == "broker unavailable"
                assert detail in error.body
        async with session(app, scope=as_user("alice")) as sock:
            await send(sock, "/topic/t", b"fine")
        assert "credentials() failed" in caplog.text

    run("embedded", test)


def test_shutting_the_app_down_ends_its_broker_connections() -> None:
    async def main() -> None:
        async with Broker(users=USERS) as broker:
            app = StompApp(relay=relay_to(Endpoint("embedded", broker.port)))
            queue = unique("queue", "shutdown")
            async with session(app) as sock:
                await subscribe(sock, queue, "s", "client-individual")
                await send(sock, queue, b"unacked")
                assert (await sock.expect("MESSAGE")).body == b"unacked"
                assert len(broker.core.sessions) == 1
                await app.close()
                assert header(await sock.expect("ERROR"), "message") == "broker shutting down"
                # close() returned once each session had left the broker with DISCONNECT.
                assert not broker.core.sessions
                assert broker.core.queued(queue) == 1  # back in its queue, unacknowledged

    asyncio.run(main())


@pytest.mark.parametrize("name", UPSTREAMS)
def test_the_app_publishes_and_replies_through_the_relay(name: str) -> None:
    async def test(ep: Endpoint) -> None:
        app = StompApp(relay=relay_to(ep))
        queue, topic = unique("queue", "from-app"), unique("topic", "from-app")

        @app.handler("/app/ask")
        async def ask(message: AppMessage) -> None:
            await message.reply(b"answer")  # to its reply-to, a relayed queue

        async with session(app) as sock:
            await subscribe(sock, queue, "q")
            await subscribe(sock, topic, "t")
            await app.publish(topic, "to the topic", headers=[("x-from", "app")])
            got = await sock.expect("MESSAGE")
            assert (got.body, header(got, "subscription")) == (b"to the topic", "t")
            assert header(got, "x-from") == "app"
            await send(sock, "/app/ask", b"question", ("reply-to", queue))
            got = await sock.expect("MESSAGE")
            assert (got.body, header(got, "subscription")) == (b"answer", "q")
        await app.close()  # its own connection to the broker too

    run(name, test)


def test_the_apps_own_connection_fails_over_when_lost() -> None:
    async def main() -> None:
        async with Broker(users=USERS) as first, Broker(users=USERS) as second:
            hosts = [("127.0.0.1", first.port), ("127.0.0.1", second.port)]
            app = StompApp(relay=Relay(hosts=hosts, login="guest", passcode="guest"))
            await app.publish("/queue/q", b"one")
            assert first.core.queued("/queue/q") == 1
            await first.close()
            try:
                await app.publish("/queue/q", b"two")  # a new connection, to the next broker
            except ClientError:  # (unless the publish raced the loss: then the next one)
                await app.publish("/queue/q", b"two")
            assert second.core.queued("/queue/q") == 1
            await second.close()
            with pytest.raises(ConnectionLost):
                await app.publish("/queue/q", b"three")
            await app.close()

    asyncio.run(main())


@pytest.mark.parametrize("name", UPSTREAMS)
def test_a_subscription_behind_a_backlog(name: str) -> None:
    async def test(ep: Endpoint) -> None:
        app = StompApp(relay=relay_to(ep, max_pending_messages=5))
        queue, backlog = unique("queue", "backlog"), 60
        async with session(app) as producer:
            for n in range(backlog - 1):
                producer.write(frame("SEND", ("destination", queue), body=f"m{n}".encode()))
            await send(producer, queue, f"m{backlog - 1}".encode())
        async with session(app) as sock:
            await subscribe(sock, queue, "s", "client")
            got = [await sock.expect("MESSAGE") for _ in range(backlog)]
            assert [m.body for m in got] == [f"m{n}".encode() for n in range(backlog)]
            sock.write(frame("ACK", ("id", header(got[-1], "ack") or ""), ("receipt", "r")))
            await receipt(sock, "r")

    run(name, test)
