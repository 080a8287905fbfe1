"""Our clients over WebSocket against RabbitMQ Web-STOMP (``ws://127.0.0.1:15674/ws``).

Every adapter x every STOMP version RabbitMQ speaks (1.0, 1.1, 1.2).  The
broker is found like the other real brokers (tests/brokers.py): the
``RABBITMQ_STOMP_WS_URL`` that ``scripts/start-brokers.sh`` prints, from the
environment or its ``last-start.env``; when it does not answer, the tests skip
with a how-to - and fail under ``CI=true``.

RabbitMQ's ``web_stomp.ws_frame`` setting decides how it sends frames:
``text`` (its default) puts every frame in a text message, even a body that is
not UTF-8 - which RFC 6455 forbids, so our client (like a browser) fails the
connection with close code 1007.  ``scripts/brokers/start-rabbitmq.sh`` sets
``binary``; against a broker started otherwise, the binary-body scenario
checks that clean failure instead of the round trip (docs/interop.rst).
"""

from __future__ import annotations

import functools
import uuid
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest
from adapter_harness import ADAPTERS, WAIT, ConnectionLost, Harness, on_every_adapter, run
from brokers import _HOW_TO, _start_record, in_ci

from stomp_proto import ErrorKind, Frame, FrameDecoder, FrameEncoder, RemoteProtocolError, Version

websockets = pytest.importorskip("websockets")
from websockets.sync.client import connect as ws_connect  # noqa: E402

pytestmark = pytest.mark.timeout(120)

DEFAULT_URL = "ws://127.0.0.1:15674/ws"


@dataclass(frozen=True)
class WebStomp:
    """Where RabbitMQ Web-STOMP listens, and how it sends frames."""

    host: str
    port: int
    path: str
    login: str
    passcode: str
    vhost: str
    #: True when the broker sends STOMP frames in text messages (``ws_frame = text``).
    text_frames: bool

    def options(self, **options: Any) -> dict[str, Any]:
        options.setdefault("login", self.login)
        options.setdefault("passcode", self.passcode)
        options.setdefault("vhost", self.vhost)
        options.setdefault("websocket", self.path)
        return options


@functools.cache
def _probe() -> WebStomp | str:
    """RabbitMQ Web-STOMP's coordinates and frame kind, or why it cannot be used."""
    record = _start_record()
    url = record.get("RABBITMQ_STOMP_WS_URL") or DEFAULT_URL
    parts = urlsplit(url)
    login = record.get("RABBITMQ_STOMP_USER") or "guest"
    passcode = record.get("RABBITMQ_STOMP_PASSWORD") or "guest"
    vhost = record.get("RABBITMQ_STOMP_VHOST") or "/"
    connect = Frame(
        "CONNECT",
        (("accept-version", "1.2"), ("host", vhost), ("login", login), ("passcode", passcode)),
    )
    try:
        with ExitStack() as stack:
            ws = stack.enter_context(ws_connect(url, subprotocols=["v12.stomp"], open_timeout=5))
            ws.send(FrameEncoder().encode(connect))
            data = ws.recv(timeout=5)
    except Exception as exc:
        return f"RabbitMQ Web-STOMP does not answer at {url} ({exc!r}). {_HOW_TO}"
    decoder = FrameDecoder()
    decoder.receive_data(data.encode() if isinstance(data, str) else data)
    frame = decoder.next_frame()
    if not isinstance(frame, Frame) or frame.command != "CONNECTED":
        return f"{url} answered {frame!r}, not CONNECTED. {_HOW_TO}"
    if not (frame.get("server") or "").startswith("RabbitMQ/"):
        return f"{url} is {frame.get('server')!r}, not RabbitMQ. {_HOW_TO}"
    return WebStomp(
        parts.hostname or "127.0.0.1",
        parts.port or 80,
        parts.path or "/",
        login,
        passcode,
        vhost,
        text_frames=isinstance(data, str),
    )


def web_stomp() -> WebStomp:
    """RabbitMQ Web-STOMP; skips the test (fails it under CI) when it is not up."""
    found = _probe()
    if isinstance(found, WebStomp):
        return found
    if in_ci():
        pytest.fail(f"CI=true and RabbitMQ Web-STOMP is not available: {found}", pytrace=False)
    pytest.skip(found)


@pytest.fixture(autouse=True)
def _need_web_stomp() -> None:
    web_stomp()


def ack_mode(version: Version | None) -> str:
    return "client" if version == "1.0" else "client-individual"


@on_every_adapter()
async def test_send_receive_ack(h: Harness) -> None:
    ws = web_stomp()
    queue = f"/queue/ws-{uuid.uuid4()}"
    async with (
        h.connect(ws.port, **ws.options()) as producer,
        h.connect(ws.port, **ws.options()) as consumer,
        consumer.subscribe(queue, ack=ack_mode(h.version)) as messages,
    ):
        assert producer.version == consumer.version == h.version
        await producer.send(queue, "h\u00e9llo \u2603", receipt=True)
        await producer.send(queue, b"second", content_type="application/x-test", receipt=True)
        first = await messages.get(WAIT)
        second = await messages.get(WAIT)
        assert first.body == "h\u00e9llo \u2603".encode()
        assert (second.body, second.content_type) == (b"second", "application/x-test")
        await consumer.ack(first, receipt=True)
        await consumer.ack(second, receipt=True)
        async with producer.transaction() as tx:
            await producer.send(queue, b"committed", transaction=tx)
        third = await messages.get(WAIT)
        assert third.body == b"committed"
        await consumer.ack(third, receipt=True)


@on_every_adapter(versions=("1.1", "1.2"))
async def test_nack_and_redelivery(h: Harness) -> None:
    ws = web_stomp()
    queue = f"/queue/ws-nack-{uuid.uuid4()}"
    async with (
        h.connect(ws.port, **ws.options()) as client,
        client.subscribe(queue, ack="client-individual") as messages,
    ):
        await client.send(queue, b"again", receipt=True)
        first = await messages.get(WAIT)
        await client.nack(first, receipt=True)
        second = await messages.get(WAIT)
        assert second.body == b"again"
        await client.ack(second, receipt=True)


@on_every_adapter(versions=("1.1", "1.2"))
async def test_heartbeats_over_web_stomp(h: Harness) -> None:
    ws = web_stomp()
    queue = f"/queue/ws-idle-{uuid.uuid4()}"
    async with (
        # RabbitMQ beats every 200 ms (we tolerate 2 s of silence); we beat every
        # second (RabbitMQ gives up after two missed beats).
        h.connect(ws.port, **ws.options(heartbeat=(1000, 200), heartbeat_tolerance=10)) as client,
        client.subscribe(queue) as messages,
    ):
        sending, expecting = client.connection.heartbeat
        assert sending > 0 and expecting > 0, client.connection.heartbeat
        # Idle past both deadlines: without heart-beats inside WebSocket messages
        # one side would have given up on the other.
        await h.sleep(max(3.0, 3 * max(sending, expecting) / 1000))
        await client.send(queue, b"still here", receipt=True)
        assert (await messages.get(WAIT)).body == b"still here"


@on_every_adapter(versions=(None,))
async def test_subprotocol_follows_the_versions_offered(h: Harness) -> None:
    ws = web_stomp()
    for versions in (("1.0",), ("1.0", "1.1"), ("1.0", "1.1", "1.2")):
        async with h.connect(ws.port, **ws.options(versions=versions)) as client:
            assert client.version == versions[-1]


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_binary_body(adapter: str) -> None:
    """A body that is not UTF-8: a round trip with ``ws_frame = binary``.

    With RabbitMQ's default ``ws_frame = text`` the broker puts it in a text
    message, which is invalid WebSocket: our client closes with 1007 and the
    session ends with ConnectionLost (its cause says so), as in a browser.
    """
    ws = web_stomp()
    queue = f"/queue/ws-binary-{uuid.uuid4()}"
    body = b"\x00\xff\xfe binary \x80"

    async def round_trip(h: Harness) -> None:
        async with (
            h.connect(ws.port, **ws.options()) as client,
            client.subscribe(queue) as messages,
        ):
            await client.send(queue, body, receipt=True)
            assert (await messages.get(WAIT)).body == body

    async def scenario(h: Harness) -> None:
        if not ws.text_frames:
            await round_trip(h)
            return
        with pytest.raises(ConnectionLost) as caught:
            await round_trip(h)
        cause = caught.value.__cause__
        assert isinstance(cause, RemoteProtocolError), caught.value
        assert cause.kind is ErrorKind.BAD_WEBSOCKET
        assert "1007" in str(cause)

    run(adapter, scenario)


@on_every_adapter(versions=(None,))
async def test_wrong_path_is_refused(h: Harness) -> None:
    ws = web_stomp()
    with pytest.raises(ConnectionLost) as caught:
        async with h.connect(ws.port, **ws.options(websocket="/no-such-endpoint")):
            pass
    cause = caught.value.__cause__
    assert isinstance(cause, RemoteProtocolError)
    assert cause.kind is ErrorKind.BAD_WEBSOCKET
    assert "HTTP 4" in str(cause)


@on_every_adapter(versions=(None,))
async def test_a_ws_url_reaches_web_stomp(h: Harness) -> None:
    ws = web_stomp()
    url = f"ws://{ws.login}:{ws.passcode}@{ws.host}:{ws.port}{ws.path}"
    queue = f"/queue/ws-url-{uuid.uuid4()}"
    async with (
        h.connect(None, host=url, vhost=ws.vhost) as client,
        client.subscribe(queue) as messages,
    ):
        assert client.broker == (ws.host, ws.port)
        await client.send(queue, b"through a URL", receipt=True)
        assert (await messages.get(WAIT)).body == b"through a URL"
