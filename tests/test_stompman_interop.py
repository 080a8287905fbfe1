"""stompman (PyPI, asyncio, STOMP 1.2 only) and our clients, through the embedded broker.

Both directions - stompman sends and our client receives; our client sends
and stompman receives and acknowledges - over plain STOMP and over WebSocket
(stompman's ``WebSocketConnection``, on the ``websockets`` library, against
the broker's ``websocket="/ws"`` endpoint on the same port).  Our side runs
on the asyncio and threads adapters (stompman needs an asyncio loop, so not
trio).

Notes on stompman: it offers no WebSocket subprotocol (the broker then allows
every version, and stompman asks for 1.2), and it writes every frame as a
text message, so it can only send UTF-8 bodies over WebSocket (a text message
must be UTF-8); it reads binary messages, so it receives any body.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from adapter_harness import HOST, WAIT, Harness, run

stompman = pytest.importorskip("stompman")
pytest.importorskip("websockets")
from stompman.connection import Connection as TcpConnection  # noqa: E402
from stompman.connection_ws import WebSocketConnection  # noqa: E402

pytestmark = pytest.mark.timeout(120)

PATH = "/ws"
TRANSPORTS = ("tcp", "websocket")
# asyncio and threads: both run the scenario on asyncio, where stompman lives.
OUR_ADAPTERS = ("asyncio", "threads")


@asynccontextmanager
async def stompman_client(port: int, transport: str) -> AsyncIterator[Any]:
    errors: list[Any] = []
    client = stompman.Client(
        servers=[
            stompman.ConnectionParameters(
                host=HOST,
                port=port,
                login="guest",
                passcode="guest",
                ws_uri_path=PATH if transport == "websocket" else None,
            )
        ],
        connection_class=WebSocketConnection if transport == "websocket" else TcpConnection,
        heartbeat=stompman.Heartbeat(1000, 1000),
        on_error_frame=errors.append,
        connect_timeout=int(WAIT),
        connect_retry_attempts=1,
    )
    async with client:
        yield client
    assert errors == []


def ours(transport: str) -> dict[str, Any]:
    return {"websocket": PATH} if transport == "websocket" else {}


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("adapter", OUR_ADAPTERS)
def test_stompman_sends_our_client_receives(adapter: str, transport: str) -> None:
    queue = f"/queue/from-stompman-{uuid.uuid4()}"

    async def scenario(h: Harness) -> None:
        broker = await h.start_broker(websocket=PATH)
        async with (
            h.connect(broker.port, versions=("1.2",), **ours(transport)) as client,
            client.subscribe(queue) as messages,
            stompman_client(broker.port, transport) as sender,
        ):
            await sender.send(b"from stompman", queue)
            await sender.send("h\u00e9llo".encode(), queue, content_type="text/plain;charset=utf-8")
            await sender.send(
                b"with headers", queue, headers={"x-origin": "stompman"}, receipt_timeout=WAIT
            )
            received = [await messages.get(WAIT) for _ in range(3)]
        assert [m.body for m in received] == [
            b"from stompman",
            "h\u00e9llo".encode(),
            b"with headers",
        ]
        assert received[1].content_type == "text/plain;charset=utf-8"
        assert ("x-origin", "stompman") in received[2].headers

    run(adapter, scenario)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("adapter", OUR_ADAPTERS)
def test_our_client_sends_stompman_receives_and_acks(adapter: str, transport: str) -> None:
    queue = f"/queue/to-stompman-{uuid.uuid4()}"
    bodies = [b"\x00binary\xff", "h\u00e9llo".encode(), b"last"]

    async def scenario(h: Harness) -> None:
        broker = await h.start_broker(websocket=PATH)
        received: asyncio.Queue[Any] = asyncio.Queue()

        async def handle(frame: Any) -> None:
            await frame.ack()
            await received.put(frame)

        async with (
            h.connect(broker.port, versions=("1.2",), **ours(transport)) as client,
            stompman_client(broker.port, transport) as receiver,
        ):
            subscription = await receiver.subscribe_with_manual_ack(
                queue, handle, ack="client-individual", receipt_timeout=WAIT
            )
            for body in bodies:
                await client.send(queue, body, headers={"x-n": str(len(body))}, receipt=True)
            frames = [await asyncio.wait_for(received.get(), WAIT) for _ in bodies]
            await subscription.unsubscribe()
        assert [f.body for f in frames] == bodies
        assert [f.headers["x-n"] for f in frames] == [str(len(b)) for b in bodies]
        # Every message was acknowledged: nothing is left for the next consumer.
        assert await h.queued(broker, queue) == 0
        await h.expect_only(broker.port, queue, ack="client-individual")

    run(adapter, scenario)
