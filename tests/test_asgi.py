"""stomp_proto.asgi.StompApp driven in-process through a minimal fake ASGI server.

Each fake WebSocket is a pair of queues: what the "server" passes to the app's
``receive`` and what the app ``send``\\ s back; STOMP frames are written by hand
and read back with FrameDecoder.  Covers subprotocol negotiation, the Origin
policy, the authenticate hook and CONNECT logins, subscribe/send/ack/receipts,
app handlers (reply, publish, refusal, exception), user destinations across
two sessions of one user, heart-beats, the http and lifespan scopes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from stomp_proto import Frame, FrameDecoder, HeartBeat, LocalProtocolError
from stomp_proto.asgi import AppMessage, Refused, StompApp
from stomp_proto.broker import BrokerCore

pytestmark = pytest.mark.timeout(60)

WAIT = 10.0


def frame(command: str, *headers: tuple[str, str], body: bytes = b"") -> bytes:
    lines = "".join(f"{name}:{value}\n" for name, value in headers)
    return f"{command}\n{lines}\n".encode() + body + b"\x00"


class FakeSocket:
    """One WebSocket as an ASGI server would present it to the app."""

    def __init__(self, app: StompApp, scope: dict[str, Any]) -> None:
        self.to_app: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.from_app: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.decoder = FrameDecoder()
        self.frames: list[Frame] = []
        self.beats = 0
        self.closed: int | None = None
        self.task = asyncio.get_running_loop().create_task(
            app(scope, self.to_app.get, self._from_app)
        )

    async def _from_app(self, message: dict[str, Any]) -> None:
        await self.from_app.put(message)

    async def opened(self) -> dict[str, Any]:
        await self.to_app.put({"type": "websocket.connect"})
        return await asyncio.wait_for(self.from_app.get(), WAIT)

    def write(self, data: bytes) -> None:
        self.to_app.put_nowait({"type": "websocket.receive", "bytes": data})

    async def next_frame(self) -> Frame:
        while not self.frames:
            message = await asyncio.wait_for(self.from_app.get(), WAIT)
            if message["type"] == "websocket.close":
                self.closed = message["code"]
                raise ConnectionError(f"closed: {message['code']}")
            self.decoder.receive_data(message["bytes"])
            for item in self.decoder:
                if isinstance(item, HeartBeat):
                    self.beats += 1
                else:
                    self.frames.append(item)
        return self.frames.pop(0)

    async def expect(self, command: str) -> Frame:
        got = await self.next_frame()
        assert got.command == command, (got.command, got.headers, got.body)
        return got

    async def wait_closed(self) -> int:
        while self.closed is None:
            message = await asyncio.wait_for(self.from_app.get(), WAIT)
            if message["type"] == "websocket.close":
                self.closed = message["code"]
        return self.closed

    async def disconnect(self) -> None:
        self.to_app.put_nowait({"type": "websocket.disconnect", "code": 1000})
        await asyncio.wait_for(self.task, WAIT)


def header(got: Frame, name: str) -> str | None:
    return next((value for key, value in got.headers if key == name), None)


def ws_scope(
    subprotocols: Iterable[str] = ("v12.stomp",),
    headers: Iterable[tuple[bytes, bytes]] = ((b"host", b"example.test"),),
    **extra: Any,
) -> dict[str, Any]:
    scope: dict[str, Any] = {
        "type": "websocket",
        "asgi": {"version": "3.0"},
        "scheme": "ws",
        "path": "/ws",
        "headers": list(headers),
        "subprotocols": list(subprotocols),
        "client": ("127.0.0.1", 50000),
    }
    scope.update(extra)
    return scope


@asynccontextmanager
async def session(
    app: StompApp,
    *connect_headers: tuple[str, str],
    version: str = "1.2",
    scope: dict[str, Any] | None = None,
) -> AsyncIterator[FakeSocket]:
    sock = FakeSocket(app, scope or ws_scope())
    accepted = await sock.opened()
    assert accepted["type"] == "websocket.accept", accepted
    sock.write(frame("CONNECT", ("accept-version", version), ("host", "x"), *connect_headers))
    await sock.expect("CONNECTED")
    try:
        yield sock
    finally:
        if not sock.task.done():
            await sock.disconnect()


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# -- negotiation, origins, http, lifespan --------------------------------------


@pytest.mark.parametrize(
    ("offered", "chosen"),
    [
        (["v10.stomp", "v11.stomp", "v12.stomp"], "v12.stomp"),
        (["v10.stomp", "v11.stomp"], "v11.stomp"),
        (["v10.stomp"], "v10.stomp"),
        ([], None),
    ],
)
def test_subprotocol_negotiation(offered: list[str], chosen: str | None) -> None:
    async def main() -> None:
        app = StompApp()
        sock = FakeSocket(app, ws_scope(offered))
        accepted = await sock.opened()
        assert accepted == {"type": "websocket.accept", "subprotocol": chosen}
        sock.write(frame("CONNECT", ("accept-version", "1.0,1.1,1.2"), ("host", "x")))
        connected = await sock.expect("CONNECTED")
        top = {"v10.stomp": "1.0", "v11.stomp": "1.1"}.get(chosen or "", "1.2")
        assert (header(connected, "version") or "1.0") == top
        await sock.disconnect()

    run(main())


def test_unknown_subprotocol_is_refused() -> None:
    async def main() -> None:
        sock = FakeSocket(StompApp(), ws_scope(["mqtt"]))
        assert await sock.opened() == {"type": "websocket.close", "code": 1008}
        await asyncio.wait_for(sock.task, WAIT)

    run(main())


def test_origin_policy() -> None:
    async def main() -> None:
        app = StompApp(allowed_origins=["https://good.test"])
        for origin, ok in [
            (b"http://example.test", True),  # the app's own
            (b"https://good.test", True),
            (b"https://evil.test", False),
        ]:
            headers = [(b"host", b"example.test"), (b"origin", origin)]
            sock = FakeSocket(app, ws_scope(headers=headers))
            answer = await sock.opened()
            assert answer["type"] == ("websocket.accept" if ok else "websocket.close"), origin
            if ok:
                await sock.disconnect()
            else:
                assert answer["code"] == 1008
                await asyncio.wait_for(sock.task, WAIT)

    run(main())


def test_http_scope_gets_426() -> None:
    async def main() -> None:
        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b""}

        await StompApp()({"type": "http", "path": "/"}, receive, send)
        assert sent[0]["status"] == 426
        assert sent[1]["type"] == "http.response.body"

    run(main())


def test_lifespan_shutdown_ends_sessions() -> None:
    async def main() -> None:
        app = StompApp()
        life_in: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        life_out: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            life_out.append(message)

        life = asyncio.get_running_loop().create_task(app({"type": "lifespan"}, life_in.get, send))
        await life_in.put({"type": "lifespan.startup"})
        async with session(app) as sock:
            await life_in.put({"type": "lifespan.shutdown"})
            error = await sock.expect("ERROR")
            assert header(error, "message") == "broker shutting down"
            assert await sock.wait_closed() == 1000
            await asyncio.wait_for(life, WAIT)
        assert [m["type"] for m in life_out] == [
            "lifespan.startup.complete",
            "lifespan.shutdown.complete",
        ]

    run(main())


# -- users ---------------------------------------------------------------------


def cookie_user(scope: dict[str, Any]) -> str | None:
    for name, value in scope["headers"]:
        if name == b"cookie" and value.startswith(b"user="):
            return str(value[5:].decode())
    return None


def test_user_from_the_hook_skips_the_login_check() -> None:
    async def main() -> None:
        app = StompApp(authenticate=cookie_user, users={"bob": "secret"})
        scope = ws_scope(headers=[(b"host", b"h"), (b"cookie", b"user=alice")])
        async with session(app, scope=scope):
            (only,) = app.core.sessions
            assert only.user == "alice"

    run(main())


def test_login_when_the_hook_names_nobody() -> None:
    async def main() -> None:
        app = StompApp(authenticate=cookie_user, users={"bob": "secret"})
        async with session(app, ("login", "bob"), ("passcode", "secret")):
            assert app.core.sessions[0].user == "bob"
        sock = FakeSocket(app, ws_scope())
        await sock.opened()
        sock.write(frame("CONNECT", ("accept-version", "1.2"), ("host", "x"), ("login", "bob")))
        error = await sock.expect("ERROR")
        assert "login failed" in (header(error, "message") or "")
        await sock.wait_closed()
        await asyncio.wait_for(sock.task, WAIT)

    run(main())


def test_async_hook_refusing_with_permission_error() -> None:
    async def main() -> None:
        async def hook(scope: dict[str, Any]) -> str | None:
            raise PermissionError("no session cookie")

        sock = FakeSocket(StompApp(authenticate=hook), ws_scope())
        assert await sock.opened() == {"type": "websocket.close", "code": 1008}
        await asyncio.wait_for(sock.task, WAIT)

    run(main())


def test_an_unchecked_login_is_no_user() -> None:
    async def main() -> None:
        app = StompApp()
        async with session(app, ("login", "mallory")) as sock:
            assert app.core.sessions[0].user is None
            sock.write(frame("SUBSCRIBE", ("id", "1"), ("destination", "/user/queue/x")))
            error = await sock.expect("ERROR")
            assert header(error, "message") == "Bad SUBSCRIBE"

    run(main())


# -- the simple broker ---------------------------------------------------------


def test_subscribe_send_ack_receipt() -> None:
    async def main() -> None:
        app = StompApp()
        async with session(app) as consumer, session(app) as producer:
            consumer.write(
                frame(
                    "SUBSCRIBE", ("id", "s"), ("destination", "/queue/jobs"), ("ack", "client"),
                    ("receipt", "r-sub"),
                )
            )  # fmt: skip
            assert header(await consumer.expect("RECEIPT"), "receipt-id") == "r-sub"
            producer.write(frame("SEND", ("destination", "/queue/jobs"), ("receipt", "r1"),
                                 body=b"job 1"))  # fmt: skip
            assert header(await producer.expect("RECEIPT"), "receipt-id") == "r1"
            message = await consumer.expect("MESSAGE")
            assert message.body == b"job 1"
            assert header(message, "destination") == "/queue/jobs"
            consumer.write(frame("ACK", ("id", header(message, "ack") or ""), ("receipt", "r2")))
            await consumer.expect("RECEIPT")
            assert app.core.destinations() == {"/queue/jobs": (0, 0, 1)}
            # a transaction, as the broker has them
            producer.write(frame("BEGIN", ("transaction", "t")))
            producer.write(frame("SEND", ("destination", "/topic/t"), ("transaction", "t")))
            producer.write(frame("COMMIT", ("transaction", "t"), ("receipt", "r3")))
            await producer.expect("RECEIPT")

    run(main())


def test_heart_beats() -> None:
    async def main() -> None:
        app = StompApp(heartbeat=(50, 1000))
        sock = FakeSocket(app, ws_scope())
        await sock.opened()
        sock.write(frame("CONNECT", ("accept-version", "1.2"), ("host", "x"),
                         ("heart-beat", "0,50")))  # fmt: skip
        connected = await sock.expect("CONNECTED")
        assert header(connected, "heart-beat") == "50,0"
        while sock.beats < 3:
            message = await asyncio.wait_for(sock.from_app.get(), WAIT)
            sock.decoder.receive_data(message["bytes"])
            sock.beats += sum(isinstance(item, HeartBeat) for item in sock.decoder)
        await sock.disconnect()

    run(main())


def test_a_silent_client_is_ended() -> None:
    async def main() -> None:
        app = StompApp(heartbeat=(0, 100))
        sock = FakeSocket(app, ws_scope())
        await sock.opened()
        sock.write(frame("CONNECT", ("accept-version", "1.2"), ("host", "x"),
                         ("heart-beat", "100,0")))  # fmt: skip
        await sock.expect("CONNECTED")
        await sock.wait_closed()  # never sent a beat
        await asyncio.wait_for(sock.task, WAIT)
        assert not app.core.sessions

    run(main())


# -- app destinations ----------------------------------------------------------


def chat_app() -> StompApp:
    app = StompApp(authenticate=cookie_user)

    @app.handler("/app/chat")
    async def chat(message: AppMessage) -> None:
        await message.app.publish("/topic/chat", f"{message.user}: {message.text}")

    @app.handler("/app/echo")
    async def echo(message: AppMessage) -> None:
        await message.reply(message.body.upper(), headers=[("echoed", "yes")])

    @app.handler("/app/refuse")
    def refuse(message: AppMessage) -> None:
        raise Refused("not today", "closed for the day")

    @app.handler("/app/boom")
    def boom(message: AppMessage) -> None:
        raise ZeroDivisionError("a bug in the app")

    return app


def alice() -> dict[str, Any]:
    return ws_scope(headers=[(b"host", b"h"), (b"cookie", b"user=alice")])


def test_handler_publishes() -> None:
    async def main() -> None:
        app = chat_app()
        async with session(app, scope=alice()) as sender, session(app) as listener:
            listener.write(frame("SUBSCRIBE", ("id", "1"), ("destination", "/topic/chat"),
                                 ("receipt", "ok")))  # fmt: skip
            await listener.expect("RECEIPT")
            sender.write(frame("SEND", ("destination", "/app/chat"), ("receipt", "r"), body=b"hi"))
            assert header(await sender.expect("RECEIPT"), "receipt-id") == "r"
            assert (await listener.expect("MESSAGE")).body == b"alice: hi"
            # nothing was stored under /app
            assert "/app/chat" not in app.core.destinations()

    run(main())


def test_handler_replies_to_the_sender_only() -> None:
    async def main() -> None:
        app = chat_app()
        async with session(app, scope=alice()) as one, session(app, scope=alice()) as two:
            for sock in (one, two):
                sock.write(frame("SUBSCRIBE", ("id", "1"), ("destination", "/user/queue/echo"),
                                 ("receipt", "ok")))  # fmt: skip
                await sock.expect("RECEIPT")
            reply_to = ("reply-to", "/user/queue/echo")
            one.write(
                frame("SEND", ("destination", "/app/echo"), reply_to, ("receipt", "r"), body=b"abc")
            )
            reply = await one.expect("MESSAGE")
            assert reply.body == b"ABC"
            assert header(reply, "destination") == "/user/queue/echo"
            assert header(reply, "echoed") == "yes"
            await one.expect("RECEIPT")  # after the reply: the handler had returned
            two.write(frame("SEND", ("destination", "/topic/none"), ("receipt", "t")))
            assert (await two.expect("RECEIPT")).command == "RECEIPT"  # no reply came first

    run(main())


@pytest.mark.parametrize(
    ("destination", "message", "detail"),
    [
        ("/app/refuse", "not today", b"closed for the day"),
        ("/app/boom", "handler failed", b"the handler for '/app/boom' failed"),
        ("/app/nowhere", "no handler", b"no handler for '/app/nowhere'"),
    ],
)
def test_handler_refusal_and_failure_are_errors(
    destination: str, message: str, detail: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        app = chat_app()
        with caplog.at_level(logging.ERROR, "stomp_proto.asgi"):
            async with session(app) as sock:
                sock.write(frame("SEND", ("destination", destination), ("receipt", "r9")))
                sock.write(frame("SEND", ("destination", "/queue/after")))
                error = await sock.expect("ERROR")
                assert header(error, "message") == message
                assert header(error, "receipt-id") == "r9"
                assert error.body == detail
                await sock.wait_closed()
            # what followed the refused SEND was not acted on; the app goes on
            assert app.core.queued("/queue/after") == 0
            async with session(app, scope=alice()) as again:
                again.write(frame("SEND", ("destination", "/app/chat"), ("receipt", "ok")))
                await again.expect("RECEIPT")
        failures = [r for r in caplog.records if "failed" in r.getMessage()]
        assert bool(failures) == (destination == "/app/boom")

    run(main())


def test_app_destinations_take_no_transactions() -> None:
    async def main() -> None:
        async with session(chat_app()) as sock:
            sock.write(frame("BEGIN", ("transaction", "t")))
            sock.write(frame("SEND", ("destination", "/app/chat"), ("transaction", "t")))
            assert header(await sock.expect("ERROR"), "message") == "Bad SEND"

    run(main())


def test_handler_registration_checks() -> None:
    app = StompApp(app_prefix="/api")
    assert app.app_prefix == "/api/"
    with pytest.raises(ValueError, match="not under"):
        app.handler("/app/x")
    app.handler("/api/x")(lambda message: None)
    with pytest.raises(ValueError, match="already"):
        app.handler("/api/x")


# -- user destinations and the publishing API -----------------------------------


def test_send_to_user_reaches_every_session_of_that_user() -> None:
    async def main() -> None:
        app = StompApp(authenticate=cookie_user)
        bob = ws_scope(headers=[(b"host", b"h"), (b"cookie", b"user=bob")])
        async with (
            session(app, scope=alice()) as one,
            session(app, scope=alice()) as two,
            session(app, scope=bob) as other,
        ):
            for sock in (one, two, other):
                sock.write(frame("SUBSCRIBE", ("id", "n"), ("destination", "/user/queue/news"),
                                 ("ack", "client-individual"), ("receipt", "ok")))  # fmt: skip
                await sock.expect("RECEIPT")
            await app.send_to_user("alice", "/queue/news", "for alice", headers=[("k", "v")])
            for sock in (one, two):
                got = await sock.expect("MESSAGE")
                assert (got.body, header(got, "k")) == (b"for alice", "v")
                assert header(got, "destination") == "/user/queue/news"
                sock.write(frame("ACK", ("id", header(got, "ack") or ""), ("receipt", "a")))
                await sock.expect("RECEIPT")
            await app.publish("/topic/nobody", b"x")
            other.write(frame("SEND", ("destination", "/user/alice/queue/news"), ("receipt", "s"),
                              body=b"from bob"))  # fmt: skip
            await other.expect("RECEIPT")
            assert (await one.expect("MESSAGE")).body == b"from bob"
            assert (await two.expect("MESSAGE")).body == b"from bob"
            other.write(frame("SEND", ("destination", "/topic/x"), ("receipt", "t")))
            await other.expect("RECEIPT")  # bob got nothing of alice's

    run(main())


def test_publish_to_a_queue_and_its_limits() -> None:
    async def main() -> None:
        app = StompApp(max_queue_length=1)
        await app.publish("/queue/q", "one")
        with pytest.raises(OverflowError):
            await app.publish("/queue/q", "two")
        assert app.core.queued("/queue/q") == 1

    run(main())


def test_reply_without_a_destination_is_a_local_error() -> None:
    async def main() -> None:
        app = StompApp()
        caught: list[BaseException] = []

        @app.handler("/app/x")
        async def handler(message: AppMessage) -> None:
            try:
                await message.reply("?")
            except LocalProtocolError as exc:
                caught.append(exc)

        async with session(app) as sock:
            sock.write(frame("SEND", ("destination", "/app/x"), ("receipt", "r")))
            await sock.expect("RECEIPT")
        assert len(caught) == 1

    run(main())


# -- the core's hooks on their own ---------------------------------------------


def test_core_user_destination_names() -> None:
    core = BrokerCore(user_prefix="/user/")
    assert core.user_destination("alice", "/queue/x") == "/user/alice/queue/x"
    assert core.user_destination("a/b%", "/queue/x") == "/user/a%2Fb%25/queue/x"
    with pytest.raises(ValueError):
        core.user_destination("alice", "queue/x")
    with pytest.raises(LocalProtocolError):
        BrokerCore().user_destination("alice", "/queue/x")
    with pytest.raises(ValueError):
        BrokerCore(user_prefix="user")


def test_core_answer_diverted_without_a_diverted_send() -> None:
    core = BrokerCore(divert=lambda session, send: True)
    with pytest.raises(LocalProtocolError):
        core.answer_diverted(core.open_session())
    with pytest.raises(LocalProtocolError):
        BrokerCore(user_prefix="/user/").publish("/queue/q", only=core.open_session())


def test_a_client_gone_during_its_handler() -> None:
    async def main() -> None:
        app = StompApp()
        started = asyncio.Event()
        cancelled = asyncio.Event()

        @app.handler("/app/slow")
        async def slow(message: AppMessage) -> None:
            started.set()
            try:
                await asyncio.Event().wait()
            finally:
                cancelled.set()

        sock = FakeSocket(app, ws_scope())
        await sock.opened()
        sock.write(frame("CONNECT", ("accept-version", "1.2"), ("host", "x")))
        await sock.expect("CONNECTED")
        sock.write(frame("SEND", ("destination", "/app/slow"), ("receipt", "r")))
        await asyncio.wait_for(started.wait(), WAIT)
        await sock.disconnect()
        assert cancelled.is_set()
        assert not app.core.sessions

    run(main())


def test_a_client_that_does_not_read_is_paused_then_resumed() -> None:
    async def main() -> None:
        app = StompApp(output_limit=4096)
        release = asyncio.Event()
        sock = FakeSocket(app, ws_scope())
        real_send = sock._from_app

        async def slow_send(message: dict[str, Any]) -> None:
            if message["type"] == "websocket.send" and app.core.sessions[0].paused:
                await release.wait()  # the client stops reading once deliveries pause
            await real_send(message)

        sock.task.cancel()
        await asyncio.gather(sock.task, return_exceptions=True)
        sock.task = asyncio.get_running_loop().create_task(
            app(ws_scope(), sock.to_app.get, slow_send)
        )
        await sock.opened()
        sock.write(frame("CONNECT", ("accept-version", "1.2"), ("host", "x")))
        await sock.expect("CONNECTED")
        sock.write(frame("SUBSCRIBE", ("id", "1"), ("destination", "/queue/big"),
                         ("receipt", "ok")))  # fmt: skip
        await sock.expect("RECEIPT")
        for n in range(100):
            await app.publish("/queue/big", b"x" * 1000, headers=[("n", str(n))])
        (session_,) = app.core.sessions
        assert session_.paused
        assert app.core.queued("/queue/big") > 0  # held back, not buffered for the client
        release.set()
        seen = [header(await sock.expect("MESSAGE"), "n") for _ in range(100)]
        assert seen == [str(n) for n in range(100)]
        assert not session_.paused
        await sock.disconnect()
        assert app.core.counters.connections_opened["websocket"] == 1

    run(main())


def test_a_failing_hook_refuses_and_the_app_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        calls = []

        def hook(scope: dict[str, Any]) -> str | None:
            calls.append(scope)
            if len(calls) == 1:
                raise KeyError("a bug in the hook")
            return "alice"

        app = StompApp(authenticate=hook)
        sock = FakeSocket(app, ws_scope())
        assert await sock.opened() == {"type": "websocket.close", "code": 1008}
        await asyncio.wait_for(sock.task, WAIT)
        async with session(app):
            assert app.core.sessions[0].user == "alice"
        assert app.core.counters.upgrades_refused == {403: 1}

    with caplog.at_level(logging.ERROR, "stomp_proto.asgi"):
        run(main())
    assert "authenticate() failed" in caplog.text


def test_a_client_flooding_behind_a_slow_handler_is_not_read() -> None:
    async def main() -> None:
        app = StompApp()
        release = asyncio.Event()

        @app.handler("/app/slow")
        async def slow(message: AppMessage) -> None:
            await release.wait()

        async with session(app) as sock:
            sock.write(frame("SEND", ("destination", "/app/slow"), ("receipt", "first")))
            body = b"x" * 10_000
            for n in range(100):  # 1 MB, four times the app's input limit
                sock.write(frame("SEND", ("destination", "/queue/q"), ("receipt", f"r{n}"),
                                 body=body))  # fmt: skip
            for _ in range(50):
                await asyncio.sleep(0)
            # The app took a bounded part of it; the "server" holds the rest.
            assert sock.to_app.qsize() > 50
            assert app.core.queued("/queue/q") == 0
            release.set()
            receipts = [header(await sock.expect("RECEIPT"), "receipt-id") for _ in range(101)]
            assert receipts == ["first"] + [f"r{n}" for n in range(100)]
            assert app.core.queued("/queue/q") == 100

    run(main())


def test_the_memory_alarm_holds_a_publisher_until_consumers_take_some() -> None:
    async def main() -> None:
        app = StompApp(max_memory=100_000)
        async with session(app) as publisher, session(app) as consumer:
            body = b"x" * 10_000
            for n in range(20):
                publisher.write(frame("SEND", ("destination", "/queue/m"), ("receipt", f"r{n}"),
                                      body=body))  # fmt: skip
            for _ in range(50):
                await asyncio.sleep(0)
            assert app.core.memory_alarm
            assert app.core.queued("/queue/m") < 20  # the rest is not read yet
            consumer.write(frame("SUBSCRIBE", ("id", "1"), ("destination", "/queue/m")))
            bodies = [(await consumer.expect("MESSAGE")).body for _ in range(20)]
            assert bodies == [body] * 20
            receipts = [header(await publisher.expect("RECEIPT"), "receipt-id") for _ in range(20)]
            assert receipts == [f"r{n}" for n in range(20)]
            assert not app.core.memory_alarm

    run(main())


def test_forward_topics_takes_the_sends_to_topics() -> None:
    forwarded: list[AppMessage] = []

    async def forward(message: AppMessage) -> None:
        forwarded.append(message)
        if message.body == b"no":
            raise Refused("not shared", "refused by the forwarder")
        # where the forwarder would hand it to every process: here, this one
        await message.app.publish(
            message.destination, message.body, headers=message.headers,
            content_type=message.content_type,
        )  # fmt: skip

    async def main() -> None:
        app = StompApp(forward_topics=forward)
        async with session(app) as listener, session(app) as sender:
            listener.write(frame("SUBSCRIBE", ("id", "1"), ("destination", "/topic/t"),
                                 ("receipt", "ok")))  # fmt: skip
            await listener.expect("RECEIPT")
            sender.write(frame("SEND", ("destination", "/topic/t"), ("x", "1"),
                               ("receipt", "r"), body=b"hi"))  # fmt: skip
            await sender.expect("RECEIPT")
            got = await listener.expect("MESSAGE")
            assert (got.body, header(got, "x")) == (b"hi", "1")
            # queues stay the core's
            sender.write(frame("SEND", ("destination", "/queue/q"), ("receipt", "q")))
            await sender.expect("RECEIPT")
            assert app.core.queued("/queue/q") == 1
            sender.write(frame("BEGIN", ("transaction", "t")))
            sender.write(frame("SEND", ("destination", "/topic/t"), ("transaction", "t")))
            assert header(await sender.expect("ERROR"), "message") == "Bad SEND"
        async with session(app) as refused:
            refused.write(frame("SEND", ("destination", "/topic/t"), body=b"no"))
            assert header(await refused.expect("ERROR"), "message") == "not shared"
        assert [m.destination for m in forwarded] == ["/topic/t", "/topic/t"]

    run(main())


def test_forward_topics_checks_its_prefixes() -> None:
    with pytest.raises(ValueError, match="overlaps the forwarded topics"):
        StompApp(app_prefix="/topic/app", forward_topics=lambda message: None)
