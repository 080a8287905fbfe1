"""@stomp/stompjs in headless Chromium against stomp_proto.asgi.StompApp served by uvicorn.

The page and its helpers are those of tests/test_browser_stompjs.py: the test page is
served from a port of its own, so to the app it is a page of another origin, refused
until ``allowed_origins`` names it.  Then stompjs's round trip (1000 messages,
client-individual acks, receipts, heart-beats) runs through the app, and a chat-like
scenario uses an app handler, a reply to a user destination, and ``send_to_user``
across two stompjs clients of one user; and stompjs reconnects when the app restarts.
In relay mode the same round trip goes through the app to an embedded broker, RabbitMQ
and ActiveMQ (a real broker that is down skips, or fails under ``CI=true``), and stompjs
hears of a lost broker as an ERROR, reconnects, and its new session is on the next.
The user comes from the WebSocket URL's query (a stand-in for a web app's session
cookie).

Without Chromium, node or npm the tests skip - except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import urllib.parse
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from adapter_harness import HOST, ServiceLoop
from brokers import USERS, Endpoint, real_broker
from test_browser_stompjs import (  # noqa: F401 - the fixtures
    HEARTBEAT,
    DevTools,
    check_roundtrip,
    chromium,
    roundtrip,
    test_page,
    wait_until,
)

from stomp_proto.asgi import AppMessage, Relay, StompApp
from stomp_proto.asyncio import ClientError

uvicorn = pytest.importorskip("uvicorn")

pytestmark = pytest.mark.timeout(180)


def query_user(scope: dict[str, Any]) -> str | None:
    query = urllib.parse.parse_qs(bytes(scope.get("query_string", b"")).decode())
    return query.get("user", [None])[0]


class Served:
    """uvicorn serving an app in a ServiceLoop's thread, on a free port."""

    def __init__(self, app: StompApp, port: int = 0) -> None:
        self.app = app
        self.closed = False
        self.service = ServiceLoop()
        self.port = self.service.call(self._start(port))

    async def _start(self, port: int) -> int:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, port))
        config = uvicorn.Config(self.app, ws="wsproto", lifespan="on", log_level="warning")
        self.server = uvicorn.Server(config)
        self.task = asyncio.get_running_loop().create_task(self.server.serve(sockets=[sock]))
        while not self.server.started:
            if self.task.done():
                self.task.result()
            await asyncio.sleep(0.01)
        return int(sock.getsockname()[1])

    async def _stop(self) -> None:
        self.server.should_exit = True
        await asyncio.wait_for(self.task, 30)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.service.call(self._stop())
        finally:
            self.service.close()


@pytest.fixture
def served_app(test_page: tuple[DevTools, str]) -> Iterator[tuple[DevTools, Served]]:  # noqa: F811
    tools, origin = test_page
    app = StompApp(
        authenticate=query_user, allowed_origins=[origin], heartbeat=(HEARTBEAT, HEARTBEAT)
    )

    @app.handler("/app/echo")
    async def echo(message: AppMessage) -> None:
        await message.reply(f"{message.user} said {message.text}")

    @app.handler("/app/shout")
    async def shout(message: AppMessage) -> None:
        await message.app.publish("/topic/shouts", message.text.upper())

    served = Served(app)
    try:
        yield tools, served
    finally:
        served.close()


def test_a_foreign_page_is_refused_by_default(test_page: tuple[DevTools, str]) -> None:  # noqa: F811
    tools, _ = test_page
    served = Served(StompApp())
    try:
        url = f"ws://{HOST}:{served.port}/ws"
        assert not tools.evaluate(f"tryConnect({json.dumps(url)})")["connected"]
    finally:
        served.close()


def test_stompjs_roundtrip_through_the_app(served_app: tuple[DevTools, Served]) -> None:
    tools, served = served_app
    url = f"ws://{HOST}:{served.port}/ws?user=alice"
    assert tools.evaluate(f"tryConnect({json.dumps(url)})")["connected"]
    destination = f"/queue/browser-{uuid.uuid4()}"
    result = roundtrip(tools, url, destination)
    check_roundtrip(result, destination)
    assert destination not in served.app.core.destinations()
    print(f"StompApp under uvicorn: 1000 messages through stompjs in {result['ms']} ms")


@pytest.mark.parametrize("name", ["embedded", "rabbitmq", "activemq"])
def test_stompjs_roundtrip_relayed_to_a_broker(
    test_page: tuple[DevTools, str],  # noqa: F811
    name: str,
) -> None:
    tools, origin = test_page
    upstream = ServiceLoop()
    try:
        if name == "embedded":
            broker = upstream.call(upstream.start_broker(0, False, {"users": USERS}))
            ep = Endpoint("embedded", broker.port)
        else:
            ep = real_broker(name)
        relay = Relay(HOST, ep.port, login=ep.login, passcode=ep.passcode, vhost=ep.vhost)
        app = StompApp(relay=relay, allowed_origins=[origin], heartbeat=(HEARTBEAT, HEARTBEAT))
        served = Served(app)
        try:
            url = f"ws://{HOST}:{served.port}/ws"
            destination = f"/queue/browser-relay-{uuid.uuid4()}"
            result = roundtrip(tools, url, destination)
            check_roundtrip(result, destination)
            assert destination not in app.core.destinations()  # the broker's, not the app's
        finally:
            served.close()
    finally:
        upstream.close()
    print(f"StompApp relaying to {name}: 1000 messages through stompjs in {result['ms']} ms")


#: A stompjs client that stays (reconnecting every 200 ms), subscribing on every connect,
#: and noting the ERROR frames it gets.
STAYING = """
(({ url, destination }) => {
  const state = { connects: 0, errors: [], messages: [] };
  const client = new StompJs.Client({ brokerURL: url, reconnectDelay: 200 });
  client.onConnect = () => {
    state.connects += 1;
    client.subscribe(destination, (message) => state.messages.push(message.body));
  };
  client.onStompError = (frame) => state.errors.push(frame.headers.message);
  client.activate();
  window.staying = state;
  window.stayingClient = client;
  return true;
})
"""


def test_stompjs_hears_of_a_lost_broker_and_comes_back_on_the_next(
    test_page: tuple[DevTools, str],  # noqa: F811
) -> None:
    tools, origin = test_page
    upstream = ServiceLoop()
    destination = f"/topic/browser-relay-{uuid.uuid4()}"
    try:
        first, second = (
            upstream.call(upstream.start_broker(0, False, {"users": USERS})) for _ in range(2)
        )
        hosts = [(HOST, first.port), (HOST, second.port)]
        relay = Relay(hosts=hosts, login="guest", passcode="guest")
        served = Served(StompApp(relay=relay, allowed_origins=[origin]))

        def state() -> dict[str, Any]:
            staying: dict[str, Any] = tools.evaluate("window.staying")
            return staying

        def publish(body: str) -> None:
            # Until the subscription is there, a topic message reaches nobody: say it again.
            wanted = len(state()["messages"]) + 1

            def arrived() -> bool:
                with contextlib.suppress(ClientError):  # (the app's own connection, lost)
                    served.service.call(served.app.publish(destination, body))
                return len(state()["messages"]) >= wanted

            wait_until(arrived, f"the message {body!r}")

        try:
            options = {"url": f"ws://{HOST}:{served.port}/ws", "destination": destination}
            tools.evaluate(f"{STAYING}({json.dumps(options)})")
            wait_until(lambda: state()["connects"] == 1, "the first connect")
            publish("before")
            upstream.call(first.close())
            wait_until(lambda: "broker connection lost" in state()["errors"], "the ERROR")
            wait_until(lambda: state()["connects"] == 2, "stompjs to reconnect")
            publish("after")  # through the second broker
            assert state()["messages"][0] == "before" and state()["messages"][-1] == "after"
            assert second.core.counters.sessions_opened >= 2  # the browser's and the app's
        finally:
            tools.evaluate("stayingClient.deactivate()")
            served.close()
    finally:
        upstream.close()


#: Two stompjs clients of alice: each subscribes to its replies, to its notices and to
#: the shouts topic; the first sends to two app destinations.
CHAT = """
(async ({ url }) => {
  window.chat = { a: [], b: [], errors: [] };
  const open = (name) => new Promise((resolve, reject) => {
    const client = new StompJs.Client({ brokerURL: url, reconnectDelay: 0 });
    client.onConnect = () => {
      const note = (m) => window.chat[name].push(`${m.headers.destination} ${m.body}`);
      client.subscribe("/user/queue/echo", note);
      client.subscribe("/user/queue/notices", note);
      client.subscribe("/topic/shouts", note);
      const ready = new Promise((done) => client.watchForReceipt(`${name}-ready`, done));
      client.publish({ destination: "/topic/nobody", headers: { receipt: `${name}-ready` } });
      ready.then(() => resolve(client));
    };
    client.onStompError = (frame) => window.chat.errors.push(frame.headers.message);
    client.onWebSocketClose = (event) => reject(new Error(`closed ${event.code}`));
    client.activate();
  });
  const a = await open("a");
  await open("b");
  const sent = new Promise((done) => a.watchForReceipt("echoed", done));
  a.publish({ destination: "/app/echo", body: "hi",
              headers: { "reply-to": "/user/queue/echo", receipt: "echoed" } });
  await sent;
  a.publish({ destination: "/app/shout", body: "hey" });
  const tx = a.begin();
  a.publish({ destination: "/topic/shouts", body: "in a transaction",
              headers: { transaction: tx.id } });
  tx.commit();
  return true;
})
"""


def test_app_handler_and_user_destinations_in_the_browser(
    served_app: tuple[DevTools, Served],
) -> None:
    tools, served = served_app
    url = f"ws://{HOST}:{served.port}/ws?user=alice"
    assert tools.evaluate(f"{CHAT}({json.dumps({'url': url})})", timeout=60)

    def chat() -> dict[str, list[str]]:
        state: dict[str, list[str]] = tools.evaluate("window.chat")
        return state

    wait_until(lambda: len(chat()["a"]) == 3 and len(chat()["b"]) == 2, "the reply and shouts")
    state = chat()
    # The reply reached the sending session only; the shout and the transaction both.
    shouts = ["/topic/shouts HEY", "/topic/shouts in a transaction"]
    assert state["a"] == ["/user/queue/echo alice said hi", *shouts]
    assert state["b"] == shouts
    served.service.call(served.app.send_to_user("alice", "/queue/notices", "for every tab"))
    wait_until(lambda: len(chat()["a"]) == 4 and len(chat()["b"]) == 3, "the notices")
    state = chat()
    assert state["a"][-1] == state["b"][-1] == "/user/queue/notices for every tab"
    assert state["errors"] == []


def test_stompjs_reconnects_when_the_app_restarts(test_page: tuple[DevTools, str]) -> None:  # noqa: F811
    tools, origin = test_page
    destination = "/topic/restart"
    served = Served(StompApp(allowed_origins=[origin]))
    port = served.port

    def state() -> dict[str, Any]:
        listener: dict[str, Any] = tools.evaluate("window.listener")
        return listener

    def publish(body: str) -> None:
        # Until the subscription is there, a topic message reaches nobody: say it again.
        wanted = len(state()["messages"]) + 1

        def arrived() -> bool:
            served.service.call(served.app.publish(destination, body))
            return len(state()["messages"]) >= wanted

        wait_until(arrived, f"the message {body!r}")

    try:
        url = f"ws://{HOST}:{port}/ws"
        tools.evaluate(f"listen({json.dumps({'url': url, 'destination': destination})})")
        wait_until(lambda: state()["connects"] == 1, "the first connect")
        publish("before")
        served.close()  # lifespan shutdown: ERROR "broker shutting down" to the page
        wait_until(lambda: state()["closes"] >= 1, "stompjs to see the app go")
        served = Served(StompApp(allowed_origins=[origin]), port)
        wait_until(lambda: state()["connects"] == 2, "stompjs to reconnect")
        publish("after")
        assert state()["messages"][0] == "before" and state()["messages"][-1] == "after"
    finally:
        tools.evaluate("listenerClient.deactivate()")
        served.close()
