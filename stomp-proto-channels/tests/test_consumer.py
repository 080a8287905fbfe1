"""StompConsumer under channels.testing.WebsocketCommunicator, with a STOMP client
side made of the core's FrameEncoder and FrameDecoder.

Covers subprotocol negotiation, CONNECT/CONNECTED, SUBSCRIBE/SEND/MESSAGE,
acks and nacks, receipts, ERROR for bad input, app and user destinations, and
two apps - standing for two Django processes - sharing topics through
Channels' InMemoryChannelLayer, while their queues stay their own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import stomp_proto_channels
from broken_layer import BrokenLayer
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.urls import path
from stomp_proto_channels import StompConsumer, close_app, make_app, publish

from stomp_proto import Frame, FrameDecoder, FrameEncoder, HeartBeat, LocalProtocolError
from stomp_proto.asgi import AppMessage, Relay, StompApp

pytestmark = pytest.mark.timeout(60)

#: Seconds the communicator waits for output before it gives up (never asserted on).
WAIT = 10.0


class Client:
    """A STOMP client over one WebsocketCommunicator."""

    def __init__(self, communicator: WebsocketCommunicator) -> None:
        self.communicator = communicator
        self.encoder = FrameEncoder()
        self.decoder = FrameDecoder()
        self.frames: list[Frame] = []

    async def write(self, command: str, *headers: tuple[str, str], body: bytes = b"") -> None:
        data = self.encoder.encode(Frame(command, headers, body))
        await self.communicator.send_to(bytes_data=data)

    async def read(self) -> Frame:
        while not self.frames:
            output = await self.communicator.receive_output(WAIT)
            if output["type"] == "websocket.close":
                raise ConnectionError(f"closed: {output.get('code')}")
            assert output["type"] == "websocket.send", output
            data = output.get("bytes") or output["text"].encode()
            self.decoder.receive_data(data)
            while (item := self.decoder.next_frame()) is not None:
                if not isinstance(item, HeartBeat):
                    self.frames.append(item)
        return self.frames.pop(0)

    async def expect(self, command: str) -> Frame:
        got = await self.read()
        assert got.command == command, (got.command, got.headers, got.body)
        return got

    async def closed(self) -> Any:
        """The close code, once the app has closed the WebSocket."""
        while True:
            output = await self.communicator.receive_output(WAIT)
            if output["type"] == "websocket.close":
                return output.get("code")


def header(got: Frame, name: str) -> str | None:
    return next((value for key, value in got.headers if key == name), None)


def router(app: StompApp | None = None) -> Any:
    kwargs = {} if app is None else {"app": app}
    return URLRouter([path("ws/stomp", StompConsumer.as_asgi(**kwargs))])


@asynccontextmanager
async def connected(
    application: Any, *connect: tuple[str, str], subprotocol: str = "v12.stomp"
) -> AsyncIterator[Client]:
    communicator = WebsocketCommunicator(application, "/ws/stomp", subprotocols=[subprotocol])
    accepted, chosen = await communicator.connect(WAIT)
    assert (accepted, chosen) == (True, subprotocol)
    client = Client(communicator)
    await client.write("CONNECT", ("accept-version", "1.0,1.1,1.2"), ("host", "x"), *connect)
    connected = await client.expect("CONNECTED")
    version = f"{subprotocol[1]}.{subprotocol[2]}"
    assert header(connected, "version") == (None if version == "1.0" else version)
    try:
        yield client
    finally:
        await communicator.disconnect(timeout=WAIT)


async def subscribe(client: Client, destination: str, *extra: tuple[str, str]) -> None:
    await client.write(
        "SUBSCRIBE", ("id", destination), ("destination", destination), ("receipt", "s"), *extra
    )
    await client.expect("RECEIPT")


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())


# -- one process ---------------------------------------------------------------


@pytest.mark.parametrize("subprotocol", ["v10.stomp", "v11.stomp", "v12.stomp"])
def test_connect_with_each_subprotocol(subprotocol: str) -> None:
    async def main() -> None:
        app = make_app()
        async with connected(router(app), subprotocol=subprotocol) as client:
            await client.write("DISCONNECT", ("receipt", "bye"))
            assert header(await client.expect("RECEIPT"), "receipt-id") == "bye"
        await close_app(app)

    run(main)


def test_an_unknown_subprotocol_is_refused() -> None:
    async def main() -> None:
        app = make_app()
        communicator = WebsocketCommunicator(router(app), "/ws/stomp", subprotocols=["mqtt"])
        accepted, code = await communicator.connect(WAIT)
        assert (accepted, code) == (False, 1008)
        await close_app(app)

    run(main)


def test_subscribe_send_message_and_receipts() -> None:
    async def main() -> None:
        app = make_app()
        async with connected(router(app)) as listener, connected(router(app)) as sender:
            await subscribe(listener, "/topic/news")
            await sender.write(
                "SEND", ("destination", "/topic/news"), ("x-note", "1"), ("receipt", "r1"),
                body=b"hello",
            )  # fmt: skip
            assert header(await sender.expect("RECEIPT"), "receipt-id") == "r1"
            message = await listener.expect("MESSAGE")
            assert message.body == b"hello"
            assert header(message, "destination") == "/topic/news"
            assert header(message, "x-note") == "1"
        await close_app(app)

    run(main)


def test_ack_and_nack_on_a_queue() -> None:
    async def main() -> None:
        app = make_app()
        async with connected(router(app)) as client:
            await subscribe(client, "/queue/work", ("ack", "client-individual"))
            for body in (b"one", b"two"):
                await client.write("SEND", ("destination", "/queue/work"), body=body)
            first = await client.expect("MESSAGE")
            second = await client.expect("MESSAGE")
            assert (first.body, second.body) == (b"one", b"two")
            await client.write("ACK", ("id", header(first, "ack") or ""), ("receipt", "a"))
            await client.expect("RECEIPT")
            await client.write("NACK", ("id", header(second, "ack") or ""), ("receipt", "n"))
            # the nacked message is the queue's again: it comes back (before or after the receipt)
            got = {frame.command: frame for frame in [await client.read(), await client.read()]}
            assert set(got) == {"MESSAGE", "RECEIPT"}
            again = got["MESSAGE"]
            assert (again.body, header(again, "redelivered")) == (b"two", "true")
            await client.write("ACK", ("id", header(again, "ack") or ""), ("receipt", "a2"))
            await client.expect("RECEIPT")
        assert app.core.queued("/queue/work") == 0
        await close_app(app)

    run(main)


def test_bad_input_gets_an_error() -> None:
    async def main() -> None:
        app = make_app()
        async with connected(router(app)) as client:
            await client.communicator.send_to(bytes_data=b"NOT-A-COMMAND\n\n\x00")
            error = await client.expect("ERROR")
            assert header(error, "message")
            assert await client.closed() is not None
        await close_app(app)

    run(main)


def test_a_transaction_cannot_hold_a_shared_topic() -> None:
    async def main() -> None:
        app = make_app()
        async with connected(router(app)) as client:
            await client.write("BEGIN", ("transaction", "t"))
            await client.write("SEND", ("destination", "/topic/news"), ("transaction", "t"))
            assert header(await client.expect("ERROR"), "message") == "Bad SEND"
        await close_app(app)

    run(main)


def test_app_and_user_destinations() -> None:
    async def main() -> None:
        app = make_app(users={"alice": "pw"})

        @app.handler("/app/shout")
        async def shout(message: AppMessage) -> None:
            await message.reply(message.body.upper())

        async with connected(router(app), ("login", "alice"), ("passcode", "pw")) as alice:
            await subscribe(alice, "/user/queue/replies")
            await alice.write(
                "SEND", ("destination", "/app/shout"), ("reply-to", "/user/queue/replies"),
                ("receipt", "r"), body=b"hi",
            )  # fmt: skip
            assert (await alice.expect("MESSAGE")).body == b"HI"
            await alice.expect("RECEIPT")
            await app.send_to_user("alice", "/queue/replies", "direct")
            assert (await alice.expect("MESSAGE")).body == b"direct"
        await close_app(app)

    run(main)


def test_the_django_user_names_the_session() -> None:
    class User:
        is_authenticated = True

        def get_username(self) -> str:
            return "bob"

    assert stomp_proto_channels.django_user({"user": User()}) == "bob"
    assert stomp_proto_channels.django_user({}) is None

    async def main() -> None:
        app = make_app()

        async def with_user(scope: Any, receive: Any, send: Any) -> None:
            await router(app)({**scope, "user": User()}, receive, send)

        async with connected(with_user) as client:
            await subscribe(client, "/user/queue/private")
            await app.send_to_user("bob", "/queue/private", "for bob")
            assert (await client.expect("MESSAGE")).body == b"for bob"
        await close_app(app)

    run(main)


def test_the_class_default_app_and_a_subclass_app() -> None:
    class Chat(StompConsumer):
        app = make_app()

    assert Chat().app is Chat.app
    assert StompConsumer.default_app() is StompConsumer.default_app()

    async def main() -> None:
        async with connected(URLRouter([path("ws/stomp", Chat.as_asgi())])) as client:
            await subscribe(client, "/topic/a")
        assert Chat.app is not None
        await close_app(Chat.app)

    run(main)


def test_a_shared_topic_delivers_what_a_plain_app_does() -> None:
    async def message_headers(app: StompApp) -> tuple[tuple[str, str], ...]:
        async with connected(router(app)) as listener, connected(router(app)) as sender:
            await subscribe(listener, "/topic/same")
            await sender.write(
                "SEND", ("destination", "/topic/same"), ("receipt", "r"),
                ("content-type", "text/plain"), ("x-a", "1"), ("x-a", "2"), body=b"hi",
            )  # fmt: skip
            await sender.expect("RECEIPT")
            return (await listener.expect("MESSAGE")).headers

    async def main() -> None:
        plain = await message_headers(StompApp())
        app = make_app()
        shared = await message_headers(app)
        await close_app(app)
        assert shared == plain
        assert ("x-a", "2") in shared
        assert "receipt" not in dict(shared)

    run(main)


def test_a_relay_must_leave_the_topics_to_the_layer() -> None:
    with pytest.raises(ValueError, match="overlaps"):
        make_app(relay=Relay("127.0.0.1", 61613))
    make_app(relay=Relay("127.0.0.1", 61613, prefixes=["/exchange/"]))


def test_a_plain_stomp_app_keeps_its_topics() -> None:
    async def main() -> None:
        app = StompApp()
        async with connected(router(app)) as listener, connected(router(app)) as sender:
            await subscribe(listener, "/topic/local")
            await sender.write("SEND", ("destination", "/topic/local"), body=b"here")
            assert (await listener.expect("MESSAGE")).body == b"here"
        await app.close()

    run(main)


# -- two processes, one channel layer ------------------------------------------


def test_a_topic_is_shared_by_two_processes() -> None:
    async def main() -> None:
        one, two = make_app(), make_app()
        async with (
            connected(router(one)) as here,
            connected(router(two)) as there,
            connected(router(two)) as sender,
        ):
            await subscribe(here, "/topic/chat")
            await subscribe(there, "/topic/chat")
            await sender.write("SEND", ("destination", "/topic/chat"), ("receipt", "r"), body=b"hi")
            await sender.expect("RECEIPT")
            # each process's subscriber gets one copy, the sender's process's included
            assert (await here.expect("MESSAGE")).body == b"hi"
            assert (await there.expect("MESSAGE")).body == b"hi"
            await here.write("SEND", ("destination", "/topic/chat"), body=b"back")
            assert (await there.expect("MESSAGE")).body == b"back"
            assert (await here.expect("MESSAGE")).body == b"back"
            # a body that is not text crosses as it is
            await sender.write("SEND", ("destination", "/topic/chat"), body=b"\xff\x00\xfe")
            assert (await here.expect("MESSAGE")).body == b"\xff\x00\xfe"
            assert (await there.expect("MESSAGE")).body == b"\xff\x00\xfe"
            # from Django code: publish() goes through the layer too
            await publish("/topic/chat", "from a view", headers=[("x-from", "view")])
            for client in (here, there):
                got = await client.expect("MESSAGE")
                assert (got.body, header(got, "x-from")) == (b"from a view", "view")
        await close_app(one)
        await close_app(two)

    run(main)


def test_queues_stay_in_their_process() -> None:
    async def main() -> None:
        one, two = make_app(), make_app()
        async with connected(router(one)) as here, connected(router(two)) as there:
            await there.write("SEND", ("destination", "/queue/jobs"), ("receipt", "r"))
            await there.expect("RECEIPT")
            await subscribe(here, "/queue/jobs")
            assert one.core.queued("/queue/jobs") == 0
            assert two.core.queued("/queue/jobs") == 1
        await close_app(one)
        await close_app(two)

    run(main)


def test_publish_takes_topics_only_and_needs_a_layer() -> None:
    async def main() -> None:
        with pytest.raises(ValueError, match="only topics"):
            await publish("/queue/jobs", "x")
        with pytest.raises(LocalProtocolError, match="no channel layer"):
            await publish("/topic/x", "x", channel_layer_alias="missing")

    run(main)


def test_the_group_is_left_at_close() -> None:
    async def main() -> None:
        layer = get_channel_layer()
        app = make_app(group="stomp_proto.test-close")
        async with connected(router(app)):
            assert layer.groups.get("stomp_proto.test-close")
        await close_app(app)
        assert not layer.groups.get("stomp_proto.test-close")

    run(main)


# -- a failing layer -----------------------------------------------------------


def test_a_send_the_layer_refuses_is_an_error(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        app = make_app(channel_layer_alias="broken")
        BrokenLayer.fail_sends = True
        try:
            with caplog.at_level(logging.ERROR, "stomp_proto.asgi"):
                async with connected(router(app)) as client:
                    await client.write("SEND", ("destination", "/topic/t"), ("receipt", "r"))
                    error = await client.expect("ERROR")
                    assert (header(error, "message"), header(error, "receipt-id")) == (
                        "handler failed",
                        "r",
                    )
        finally:
            BrokenLayer.fail_sends = False
        # the app goes on
        async with connected(router(app)) as listener, connected(router(app)) as sender:
            await subscribe(listener, "/topic/t")
            await sender.write("SEND", ("destination", "/topic/t"), body=b"again")
            assert (await listener.expect("MESSAGE")).body == b"again"
        await close_app(app)

    run(main)


def test_the_next_connection_rejoins_after_the_layer_failed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def failures() -> list[logging.LogRecord]:
        return [r for r in caplog.records if "channel layer failed" in r.getMessage()]

    async def main() -> None:
        app = make_app(channel_layer_alias="broken", group="stomp_proto.test-rejoin")
        BrokenLayer.fail_receives = 1
        with caplog.at_level(logging.ERROR, "stomp_proto_channels"):
            async with connected(router(app)) as listener:
                await subscribe(listener, "/topic/t")
                while not failures():  # the bridge's first receive fails
                    await asyncio.sleep(0.01)
                async with connected(router(app)) as sender:  # which starts it again
                    await sender.write("SEND", ("destination", "/topic/t"), body=b"back")
                    assert (await listener.expect("MESSAGE")).body == b"back"
        assert len(failures()) == 1
        await close_app(app)

    run(main)
