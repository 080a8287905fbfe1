"""stomp_proto.asgi.StompApp end to end: served by uvicorn, reached by our asyncio client.

uvicorn runs in the test's event loop on a socket bound to a free port, with
each of its WebSocket implementations (wsproto, websockets-sansio); the clients are
``stomp_proto.asyncio.connect(..., websocket=...)`` and, for what our client
does not send (an Origin header), the ``websockets`` library.  Also: an http
request gets 426, and the app mounted in Starlette.  No timing is asserted.
"""

from __future__ import annotations

import asyncio
import socket
import textwrap
import urllib.parse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from stomp_proto import Version
from stomp_proto.asgi import AppMessage, Refused, StompApp
from stomp_proto.asyncio import BrokerError, connect

uvicorn = pytest.importorskip("uvicorn")
websockets = pytest.importorskip("websockets")
from websockets.asyncio.client import connect as ws_connect  # noqa: E402

pytestmark = pytest.mark.timeout(120)

WAIT = 10.0
WS_IMPLEMENTATIONS = ["wsproto", "websockets-sansio"]


def query_user(scope: dict[str, Any]) -> str | None:
    """The test's stand-in for a web app's session: ``?user=NAME``."""
    query = urllib.parse.parse_qs(bytes(scope.get("query_string", b"")).decode())
    return query.get("user", [None])[0]


def make_app() -> StompApp:
    app = StompApp(authenticate=query_user, users={"carol": "pw"})

    @app.handler("/app/echo")
    async def echo(message: AppMessage) -> None:
        await message.reply(message.text[::-1], destination="/user/queue/echo")

    @app.handler("/app/shout")
    async def shout(message: AppMessage) -> None:
        await message.app.publish("/topic/shouts", message.text.upper())

    @app.handler("/app/refuse")
    def refuse(message: AppMessage) -> None:
        raise Refused("refused", "by the app")

    @app.handler("/app/boom")
    def boom(message: AppMessage) -> None:
        raise RuntimeError("a bug")

    return app


@asynccontextmanager
async def served(app: Any, ws: str) -> AsyncIterator[int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    config = uvicorn.Config(app, ws=ws, lifespan="on", log_level="warning")
    server = uvicorn.Server(config)
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        yield port
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, WAIT)
        sock.close()


@pytest.mark.parametrize("ws", WS_IMPLEMENTATIONS)
@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_queue_topic_acks_receipts_transactions(ws: str, version: Version) -> None:
    async def main() -> None:
        app = make_app()
        async with (
            served(app, ws) as port,
            connect("127.0.0.1", port, websocket="/ws?user=p", versions=(version,)) as producer,
            connect("127.0.0.1", port, websocket="/ws?user=c", versions=(version,)) as consumer,
        ):
            assert consumer.version == version
            ack = "client" if version == "1.0" else "client-individual"
            async with consumer.subscribe("/queue/jobs", ack=ack) as jobs:
                await producer.send("/queue/jobs", b"\x00binary\xff", receipt=True)
                first = await jobs.get(WAIT)
                assert first.body == b"\x00binary\xff"
                await consumer.ack(first, receipt=True)
                async with producer.transaction() as tx:
                    await producer.send("/queue/jobs", "in a transaction", transaction=tx)
                second = await jobs.get(WAIT)
                assert second.body == b"in a transaction"
                await consumer.ack(second, receipt=True)
            assert app.core.queued("/queue/jobs") == 0

    asyncio.run(main())


@pytest.mark.parametrize("ws", WS_IMPLEMENTATIONS)
def test_app_handlers_and_user_destinations(ws: str) -> None:
    async def main() -> None:
        app = make_app()
        alice = "/ws?user=alice"
        async with (
            served(app, ws) as port,
            connect("127.0.0.1", port, websocket=alice) as one,
            connect("127.0.0.1", port, websocket=alice) as two,
            connect("127.0.0.1", port, websocket="/ws", login="carol", passcode="pw") as carol,
            one.subscribe("/user/queue/echo") as one_echo,
            two.subscribe("/user/queue/echo") as two_echo,
            two.subscribe("/user/queue/news") as two_news,
            one.subscribe("/user/queue/news") as one_news,
            carol.subscribe("/topic/shouts") as shouts,
            carol.subscribe("/user/queue/news") as carol_news,
        ):
            assert {s.user for s in app.core.sessions} == {"alice", "carol"}
            # reply: to the sender's session only
            await one.send("/app/echo", "abc", receipt=True)
            reply = await one_echo.get(WAIT)
            assert (reply.body, reply.destination) == (b"cba", "/user/queue/echo")
            # publish from a handler
            await carol.send("/app/shout", "hey", receipt=True)
            assert (await shouts.get(WAIT)).body == b"HEY"
            # from "an HTTP route": every session of alice, not carol
            await app.send_to_user("alice", "/queue/news", "for alice")
            assert (await one_news.get(WAIT)).body == b"for alice"
            assert (await two_news.get(WAIT)).body == b"for alice"
            await app.send_to_user("carol", "/queue/news", "for carol")
            assert (await carol_news.get(WAIT)).body == b"for carol"
            await two.send("/app/echo", "xy", receipt=True)
            assert (await two_echo.get(WAIT)).body == b"yx"  # two had no earlier reply

    asyncio.run(main())


@pytest.mark.parametrize("ws", WS_IMPLEMENTATIONS)
@pytest.mark.parametrize(
    ("destination", "message"), [("/app/refuse", "refused"), ("/app/boom", "handler failed")]
)
def test_handler_refusal_and_exception(ws: str, destination: str, message: str) -> None:
    async def main() -> None:
        app = make_app()
        async with served(app, ws) as port:
            with pytest.raises(BrokerError) as caught:
                async with connect("127.0.0.1", port, websocket="/ws?user=u") as client:
                    await client.send(destination, "x", receipt=True)
            assert message in str(caught.value)
            # the app goes on
            async with connect("127.0.0.1", port, websocket="/ws?user=u") as client:
                await client.send("/app/shout", "still here", receipt=True)

    asyncio.run(main())


def test_a_bad_login_is_refused() -> None:
    async def main() -> None:
        async with served(make_app(), "wsproto") as port:
            with pytest.raises(BrokerError, match="login failed"):
                async with connect(
                    "127.0.0.1", port, websocket="/ws", login="carol", passcode="wrong"
                ):
                    pass

    asyncio.run(main())


@pytest.mark.parametrize("ws", WS_IMPLEMENTATIONS)
def test_heart_beats_keep_a_quiet_session(ws: str) -> None:
    async def main() -> None:
        app = StompApp(heartbeat=(100, 100))
        async with (
            served(app, ws) as port,
            connect("127.0.0.1", port, websocket="/ws", heartbeat=(100, 100)) as client,
        ):
            (server_side,) = app.core.sessions
            assert server_side.connection.heartbeat == (100, 100)
            await asyncio.sleep(1.0)  # ten intervals with nothing but beats
            await client.send("/topic/t", "alive", receipt=True)

    asyncio.run(main())


@pytest.mark.parametrize("ws", WS_IMPLEMENTATIONS)
def test_origin_and_subprotocol_refusals(ws: str) -> None:
    async def main() -> None:
        app = StompApp(allowed_origins=["http://good.test"])
        async with served(app, ws) as port:
            url = f"ws://127.0.0.1:{port}/ws"
            async with ws_connect(
                url, origin="http://good.test", subprotocols=["v11.stomp", "v12.stomp"]
            ) as good:
                assert good.subprotocol == "v12.stomp"
            with pytest.raises(websockets.InvalidStatus) as refused:
                async with ws_connect(url, origin="http://evil.test"):
                    pass
            assert refused.value.response.status_code == 403
            with pytest.raises(websockets.InvalidStatus):
                async with ws_connect(url, subprotocols=["mqtt"]):
                    pass

    asyncio.run(main())


def test_http_request_gets_426() -> None:
    async def main() -> None:
        async with served(StompApp(), "wsproto") as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = await asyncio.wait_for(reader.read(), WAIT)
            writer.close()
            assert answer.startswith(b"HTTP/1.1 426 ")

    asyncio.run(main())


def test_mounted_in_starlette() -> None:
    starlette = pytest.importorskip("starlette")
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Mount, Route

    assert starlette
    stomp = StompApp()

    async def notify(request: Any) -> PlainTextResponse:
        await stomp.publish("/topic/notes", request.query_params["text"])
        return PlainTextResponse("sent")

    web = Starlette(routes=[Route("/notify", notify), Mount("/ws", stomp)])

    async def main() -> None:
        async with (
            served(web, "wsproto") as port,
            # a Mount matches the paths below it: "/ws/", not "/ws"
            connect("127.0.0.1", port, websocket="/ws/") as client,
            client.subscribe("/topic/notes") as notes,
        ):
            await client.send("/topic/none", "", receipt=True)  # subscribed by now
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /notify?text=hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = await asyncio.wait_for(reader.read(), WAIT)
            writer.close()
            assert answer.startswith(b"HTTP/1.1 200 ")
            assert (await notes.get(WAIT)).body == b"hello"

    asyncio.run(main())


def test_the_checker_finds_no_failed_case_over_ws() -> None:
    """``stomp-check`` over ``ws://``: the strict app fails no case."""
    # stomp-check is a distribution of its own: installed beside the core on 3.11.
    check = pytest.importorskip("stomp_check")
    Target, run_check = check.Target, check.run_check

    async def main() -> list[tuple[str, str]]:
        async with served(StompApp(strict=True), "wsproto") as port:
            where = Target("127.0.0.1", port, websocket="/ws", timeout=5.0)
            report = await asyncio.to_thread(run_check, where, workers=2)
        assert len(report.results) > 200
        return [(r.case.id, r.detail) for r in report.results if str(r.verdict) == "FAILED"]

    assert asyncio.run(main()) == []


def test_the_fastapi_chat_of_the_docs() -> None:
    """docs/webapps.rst's program, as printed, under uvicorn: cookies make the users."""
    pytest.importorskip("fastapi")
    page = (Path(__file__).resolve().parent.parent / "docs" / "webapps.rst").read_text()
    block = page.split(".. code-block:: python\n", 1)[1].split("\nRun it with", 1)[0]
    program = textwrap.dedent(block)
    namespace: dict[str, Any] = {"__name__": "chat"}
    exec(compile(program, "webapps.rst", "exec"), namespace)  # our own docs
    web = namespace["app"]

    def cookie(token: str) -> dict[str, str]:
        return {"Cookie": f"theme=dark; session={token}"}

    async def stomp(ws: Any, *frames: bytes) -> None:
        for data in frames:
            await ws.send(data)

    async def next_frame(ws: Any) -> bytes:
        return bytes(await asyncio.wait_for(ws.recv(), WAIT))

    async def main() -> None:
        async with served(web, "wsproto") as port:
            url = f"ws://127.0.0.1:{port}/ws/"
            with pytest.raises(websockets.InvalidStatus):
                async with ws_connect(url, additional_headers=cookie("forged")):
                    pass
            async with (
                ws_connect(url, additional_headers=cookie("token-of-alice"),
                           subprotocols=["v12.stomp"]) as alice,
                ws_connect(url, additional_headers=cookie("token-of-bob"),
                           subprotocols=["v12.stomp"]) as bob,
            ):  # fmt: skip
                for ws in (alice, bob):
                    await stomp(
                        ws,
                        b"CONNECT\naccept-version:1.2\nhost:chat\n\n\x00",
                        b"SUBSCRIBE\nid:1\ndestination:/topic/chat\n\n\x00",
                        b"SUBSCRIBE\nid:2\ndestination:/user/queue/notices\nreceipt:r\n\n\x00",
                    )
                    assert (await next_frame(ws)).startswith(b"CONNECTED\n")
                    assert (await next_frame(ws)).startswith(b"RECEIPT\n")
                await stomp(alice, b"SEND\ndestination:/app/chat\n\nhello\x00")
                for ws in (alice, bob):
                    message = await next_frame(ws)
                    assert message.startswith(b"MESSAGE\n")
                    assert message.endswith(b"\n\nalice: hello\x00")
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(
                    b"POST /notify/bob?text=hi HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                    b"Connection: close\r\n\r\n"
                )
                answer = await asyncio.wait_for(reader.read(), WAIT)
                writer.close()
                assert answer.startswith(b"HTTP/1.1 200 "), answer
                notice = await next_frame(bob)
                assert b"destination:/user/queue/notices\n" in notice
                assert notice.endswith(b"\n\nhi\x00")
                await stomp(alice, b"SEND\ndestination:/app/chat\nreceipt:e\n\n \x00")
                refused = await next_frame(alice)
                assert refused.startswith(b"ERROR\n") and b"message:empty message\n" in refused
                assert b"receipt-id:e\n" in refused

    asyncio.run(main())
