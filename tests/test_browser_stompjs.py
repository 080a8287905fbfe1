"""@stomp/stompjs in headless Chromium against the embedded broker's ``/ws`` and
RabbitMQ Web-STOMP, and the example page of ``examples/browser/``.

The pages are driven over Chromium's DevTools protocol (``scripts/devtools.py``, with
the ``websockets`` package; Chromium from ``scripts/ensure-chromium.sh``, stompjs from
``npm ci`` in tests/js): nothing is downloaded while the tests run.  The test page,
``tests/js/browser/stompjs.html``, is served from its own port, so to the broker it is a
page of another origin - which the broker refuses until that origin is allowed.

A broker restart (and stompjs's reconnect) is done on the embedded broker only: the
RabbitMQ of the test run is shared with other tests and is never restarted.

Without Chromium, node or npm the tests skip - except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from adapter_harness import HOST, ServiceLoop, free_port
from brokers import in_ci
from test_interop_websocket import web_stomp
from test_stompjs_interop import JS_DIR, node

from stomp_proto.asyncio import connect
from stomp_proto.broker import Broker

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from devtools import DevTools, chromium_page, find_chromium, serve  # noqa: E402

pytestmark = pytest.mark.timeout(180)

PATH = "/ws"
COUNT = 1000
#: Heart-beat interval (ms) both ways: short, so that a few beats pass in a short test.
HEARTBEAT = 500
EXAMPLE = ROOT / "examples" / "browser"
#: Where the example page's screenshot goes (docs/_static/browser-example.png is a copy).
SCREENSHOT = ROOT / "docs" / "_build" / "screenshots" / "browser-example.png"
STOMPJS_BUNDLE = JS_DIR / "node_modules" / "@stomp" / "stompjs" / "bundles" / "stomp.umd.min.js"


def _need_chromium() -> None:
    if find_chromium() is None:
        why = "chromium is needed for the browser tests (bash scripts/ensure-chromium.sh)"
        if in_ci():
            pytest.fail(f"CI=true: {why}", pytrace=False)
        pytest.skip(why)


@pytest.fixture(scope="module")
def chromium() -> Iterator[DevTools]:
    """One headless Chromium for the module (it is heavy on a small machine)."""
    _need_chromium()
    node()  # npm ci in tests/js: stompjs (skips, or fails under CI, without npm)
    with chromium_page() as tools:
        yield tools


@pytest.fixture
def test_page(chromium: DevTools) -> Iterator[tuple[DevTools, str]]:
    """tests/js/browser/stompjs.html, open in Chromium; and the origin it was served from."""
    server, origin = serve(JS_DIR)
    try:
        chromium.open(f"{origin}/browser/stompjs.html")
        assert chromium.evaluate("typeof StompJs.Client") == "function"
        yield chromium, origin
    finally:
        server.shutdown()


def wait_until(condition: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def expected_body(n: int) -> bytes:
    """What the page's bodyOf(n) sends: text for even n, binary for odd n."""
    if n % 2 == 0:
        return f"text {n} h\u00e9llo \u2603".encode()
    return bytes([0, 255, n & 0xFF, (n >> 8) & 0xFF, 10, 0])


def roundtrip(tools: DevTools, url: str, destination: str, **login: str) -> dict[str, Any]:
    options = {
        "url": url,
        "destination": destination,
        "count": COUNT,
        "heartbeat": HEARTBEAT,
        **login,
    }
    try:
        result: dict[str, Any] = tools.evaluate(f"roundtrip({json.dumps(options)})", timeout=60)
    except TimeoutError:
        progress = tools.evaluate("JSON.stringify({...progress, log: progress.log.slice(-12)})")
        raise AssertionError(f"stompjs did not finish: {progress}") from None
    return result


def check_roundtrip(result: dict[str, Any], destination: str) -> None:
    """Every message once, in order, with its body and headers; a receipt; heart-beats."""
    received = result["received"]
    assert [m["headers"]["x-seq"] for m in received] == [str(n) for n in range(COUNT)]
    for n, message in enumerate(received):
        assert bytes.fromhex(message["hex"]) == expected_body(n), n
        headers = message["headers"]
        assert headers["destination"] == destination
        kind = "application/octet-stream" if n % 2 else "text/plain"
        assert headers["content-type"].startswith(kind), headers
        assert "ack" in headers  # STOMP 1.2: what the client-individual ACK names
    assert len({m["headers"]["message-id"] for m in received}) == COUNT
    assert result["receipt"] == "last"
    # STOMP 1.2 section "Heart-beating": the CONNECTED header says what was agreed,
    # and the beats flowed both ways while the page sat idle.
    sending, receiving = (int(ms) for ms in result["connected"]["heart-beat"].split(","))
    assert 0 < sending <= 2 * HEARTBEAT and 0 < receiving <= 2 * HEARTBEAT
    assert result["pingsSent"] >= 1 and result["pongsReceived"] >= 1, result
    assert result["alive"]


def test_a_page_of_another_origin_is_refused_until_allowed_then_stompjs_works(
    test_page: tuple[DevTools, str], caplog: pytest.LogCaptureFixture
) -> None:
    tools, page_origin = test_page
    caplog.set_level(logging.INFO, logger="stomp_proto.broker")
    service = ServiceLoop()
    try:
        options: dict[str, Any] = {"websocket": PATH, "heartbeat": (HEARTBEAT, HEARTBEAT)}
        broker: Broker = service.call(service.start_broker(0, False, options))
        port = broker.port
        url = f"ws://{HOST}:{port}{PATH}"
        # The page's origin is http://127.0.0.1:<its port>, not the broker's: refused.
        assert not tools.evaluate(f"tryConnect({json.dumps(url)})")["connected"]
        assert broker.core.counters.upgrades_refused == {403: 1}
        refusals = [r.getMessage() for r in caplog.records if page_origin in r.getMessage()]
        assert refusals and "not allowed" in refusals[0], caplog.text
        print(f"refused: {refusals[0]}")
        service.call(broker.close())

        options["allowed_origins"] = [page_origin]
        broker = service.call(service.start_broker(port, False, options))
        assert tools.evaluate(f"tryConnect({json.dumps(url)})")["connected"]
        destination = f"/queue/browser-{uuid.uuid4()}"
        result = roundtrip(tools, url, destination)
        check_roundtrip(result, destination)
        assert result["connected"]["server"].startswith("stomp_proto-broker/")
        # Every message was acknowledged: the queue is gone (nothing held for anyone).
        assert destination not in broker.core.destinations()
        assert broker.core.counters.messages_acked == COUNT
        print(f"embedded broker: {COUNT} messages through stompjs in Chromium in {result['ms']} ms")
    finally:
        assert not service.close()


def test_stompjs_reconnects_when_the_embedded_broker_restarts(
    test_page: tuple[DevTools, str],
) -> None:
    tools, page_origin = test_page
    destination = f"/queue/restart-{uuid.uuid4()}"
    service = ServiceLoop()

    async def publish(port: int, body: str) -> None:
        async with connect(HOST, port) as client:
            await client.send(destination, body, receipt=True)

    def state() -> dict[str, Any]:
        listener: dict[str, Any] = tools.evaluate("window.listener")
        return listener

    try:
        options = {"websocket": PATH, "allowed_origins": [page_origin]}
        port = service.call(service.start_broker(0, False, options)).port
        url = f"ws://{HOST}:{port}{PATH}"
        tools.evaluate(f"listen({json.dumps({'url': url, 'destination': destination})})")
        wait_until(lambda: state()["connects"] == 1, "the first connect")
        service.call(publish(port, "before"))
        wait_until(lambda: state()["messages"] == ["before"], "the first message")
        for broker in list(service.brokers):
            service.call(broker.close())
        wait_until(lambda: state()["closes"] >= 1, "stompjs to see the broker go")
        service.call(service.start_broker(port, False, options))
        wait_until(lambda: state()["connects"] == 2, "stompjs to reconnect")
        service.call(publish(port, "after"))
        wait_until(lambda: state()["messages"] == ["before", "after"], "the message after")
    finally:
        tools.evaluate("listenerClient.deactivate()")
        assert not service.close()


def test_stompjs_against_rabbitmq_web_stomp(test_page: tuple[DevTools, str]) -> None:
    ws = web_stomp()
    if ws.text_frames:
        pytest.skip(
            "RabbitMQ sends text WebSocket frames (web_stomp.ws_frame = text): binary bodies "
            "would fail the page's connection; scripts/brokers/start-rabbitmq.sh sets binary"
        )
    tools, _ = test_page
    url = f"ws://{ws.host}:{ws.port}{ws.path}"
    destination = f"/queue/browser-{uuid.uuid4()}"
    login = {"login": ws.login, "passcode": ws.passcode, "vhost": ws.vhost}
    result = roundtrip(tools, url, destination, **login)
    check_roundtrip(result, destination)
    assert result["connected"]["server"].startswith("RabbitMQ/")
    print(f"RabbitMQ Web-STOMP: {COUNT} messages through stompjs in Chromium in {result['ms']} ms")


# -- the example page ----------------------------------------------------------------


def _serve_cdn_copy(tools: DevTools, page_html: str) -> None:
    """Answer the page's request for stompjs on the CDN with the npm copy of the same version.

    The page pins a version and its SRI hash: the copy must be that very file.
    """
    version = json.loads((STOMPJS_BUNDLE.parents[1] / "package.json").read_text())["version"]
    assert f"@stomp/stompjs@{version}/" in page_html, "examples/browser pins another stompjs"
    bundle = STOMPJS_BUNDLE.read_bytes()

    def answer(params: dict[str, Any]) -> None:
        request_url = params["request"]["url"]
        if request_url.endswith("/stomp.umd.min.js"):
            headers = [
                {"name": "Content-Type", "value": "application/javascript"},
                {"name": "Access-Control-Allow-Origin", "value": "*"},
            ]
            tools.call(
                "Fetch.fulfillRequest",
                requestId=params["requestId"],
                responseCode=200,
                responseHeaders=headers,
                body=base64.b64encode(bundle).decode(),
            )
        else:
            tools.call("Fetch.failRequest", requestId=params["requestId"], errorReason="Failed")

    tools.handlers["Fetch.requestPaused"] = answer
    tools.call("Fetch.enable", patterns=[{"urlPattern": "https://*"}])


def test_the_example_page_shows_live_messages(chromium: DevTools) -> None:
    """examples/browser/index.html against ``python -m stomp_proto broker --websocket /ws``."""
    page_server, page_origin = serve(EXAMPLE)
    port = free_port()
    broker = subprocess.Popen(
        [
            sys.executable, "-m", "stomp_proto", "broker", "--port", str(port),
            "--websocket", PATH, "--allowed-origin", page_origin, "--log-level", "warning",
        ],
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert broker.stderr is not None
        assert b"listening" in broker.stderr.readline()
        _serve_cdn_copy(chromium, (EXAMPLE / "index.html").read_text())
        destination = "/topic/demo"
        chromium.call(
            "Emulation.setDeviceMetricsOverride",
            width=900,
            height=380,
            deviceScaleFactor=1,
            mobile=False,
        )
        query = f"url=ws://{HOST}:{port}{PATH}&destination={destination}"
        chromium.open(f"{page_origin}/index.html?{query}")
        wait_until(
            lambda: chromium.evaluate("document.body.dataset.state") == "connected",
            "the example page to connect",
        )

        async def publish() -> None:
            async with connect(HOST, port) as client:
                for n, text in enumerate(["hello from stomp_proto", "temperature=21.5", "done"]):
                    await client.send(
                        destination, text, headers={"x-n": str(n)}, content_type="text/plain"
                    )
                await client.send(destination, b"\x00\x01binary", receipt=True)

        asyncio.run(publish())
        shown = wait_until(
            lambda: chromium.evaluate("document.querySelectorAll('#messages li').length") == 4,
            "four messages on the page",
        )
        assert shown
        text = chromium.evaluate("document.getElementById('messages').innerText")
        assert "hello from stomp_proto" in text and "temperature=21.5" in text
        assert "x-n: 1" in text and "8 bytes" in text  # headers; binary shown by size
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        chromium.screenshot(SCREENSHOT, 900, 380)
        # The same broker answers GET /metrics on its port, as curl would ask.
        with urllib.request.urlopen(f"http://{HOST}:{port}/metrics", timeout=10) as answer:
            metrics = answer.read().decode()
        assert 'stomp_broker_connections_opened_total{transport="websocket"} 1' in metrics
        assert "stomp_broker_messages_delivered_total 4" in metrics
    finally:
        chromium.handlers.pop("Fetch.requestPaused", None)
        chromium.call("Fetch.disable")
        chromium.open("about:blank")
        broker.terminate()
        broker.wait(10)
        page_server.shutdown()
