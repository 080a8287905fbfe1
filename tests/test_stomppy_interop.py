"""stomp.py (``import stomp``) and our asyncio client, through the embedded broker.

For each version stomp.py speaks (``stomp.Connection10/11/12``): stomp.py sends
and our client receives; our client sends and stomp.py receives (through its
listener API) and acknowledges.  stomp.py runs in worker threads, the broker
on the harness's service loop; every wait is bounded.

Notes: stomp.py 1.1/1.2 log in with the ``STOMP`` command.  Its 1.2 ``host``
header names the machine (the embedded broker ignores it), but its 1.1
connection sends none unless given ``vhost``, and STOMP 1.1 requires one: the
default (lenient) broker lets it in as RabbitMQ and ActiveMQ do, a
``strict=True`` one refuses it, as ``test_stomppy_11_host`` records.  Every
stomp.py class in its default configuration is in tests/test_client_matrix.py.  stomp.py's automatic
content-length counts characters, so non-ASCII bodies are given as bytes.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from adapter_harness import HOST, VERSIONS, WAIT, Harness, in_thread, run

from stomp_proto import Version

stomp = pytest.importorskip("stomp")

pytestmark = [pytest.mark.filterwarnings("error"), pytest.mark.timeout(60)]

CONNECTIONS = {"1.0": stomp.Connection10, "1.1": stomp.Connection11, "1.2": stomp.Connection12}


class Recorder(stomp.ConnectionListener):  # type: ignore[misc]
    """Everything a stomp.py connection reports, for bounded waits."""

    def __init__(self) -> None:
        self.connected = threading.Event()
        self.disconnected = threading.Event()
        self.messages: queue.Queue[Any] = queue.Queue()
        self.receipts: queue.Queue[str] = queue.Queue()
        self.errors: list[Any] = []

    def on_connected(self, frame: Any) -> None:
        self.connected.set()

    def on_message(self, frame: Any) -> None:
        self.messages.put(frame)

    def on_receipt(self, frame: Any) -> None:
        self.receipts.put(frame.headers["receipt-id"])

    def on_error(self, frame: Any) -> None:
        self.errors.append(frame)

    def on_disconnected(self) -> None:
        self.disconnected.set()

    def receipt(self, receipt: str) -> None:
        assert self.receipts.get(timeout=WAIT) == receipt

    def message(self) -> Any:
        return self.messages.get(timeout=WAIT)


@contextmanager
def stomppy(version: Version, port: int) -> Iterator[tuple[Any, Recorder]]:
    """A connected stomp.py connection and its listener; disconnected (bounded) after."""
    # stomp.py 1.1 sends no host header unless given a vhost (see test_stomppy_11_host).
    options = {} if version == "1.0" else {"vhost": "/"}
    conn = CONNECTIONS[version]([(HOST, port)], **options)
    listener = Recorder()
    conn.set_listener("recorder", listener)
    conn.connect(wait=False)
    try:
        assert listener.connected.wait(WAIT), "stomp.py did not connect"
        yield conn, listener
    finally:
        # disconnect(receipt=...) waits for the receipt and the I/O thread: bound it.
        leaving = threading.Thread(
            target=conn.disconnect, kwargs={"receipt": f"bye-{uuid.uuid4()}"}, daemon=True
        )
        leaving.start()
        leaving.join(WAIT)
        assert not leaving.is_alive(), "stomp.py did not disconnect"
        assert listener.disconnected.wait(WAIT)
    assert listener.errors == []


def stomppy_sends(version: Version, port: int, destination: str) -> None:
    with stomppy(version, port) as (conn, listener):
        conn.send(destination, b"from stomp.py")
        conn.send(destination, "h\u00e9llo".encode(), content_type="text/plain;charset=utf-8")
        conn.send(destination, b"with headers", headers={"x-origin": "stomp.py", "x-n": "3"})
        conn.send(destination, b"last", receipt="r-last")
        listener.receipt("r-last")


@pytest.mark.parametrize("version", VERSIONS)
def test_stomppy_sends_our_client_receives(version: Version) -> None:
    queue_name = "/queue/from-stomppy"

    async def scenario(h: Harness) -> None:
        broker = await h.start_broker()
        async with h.connect(broker.port) as client, client.subscribe(queue_name) as messages:
            await in_thread(stomppy_sends, version, broker.port, queue_name)
            received = [await messages.get(WAIT) for _ in range(4)]
        assert [m.body for m in received] == [
            b"from stomp.py",
            "h\u00e9llo".encode(),
            b"with headers",
            b"last",
        ]
        assert received[1].content_type == "text/plain;charset=utf-8"
        headers = dict(received[2].headers)
        assert (headers["x-origin"], headers["x-n"]) == ("stomp.py", "3")
        assert all(m.destination == queue_name for m in received)

    run("asyncio", scenario, version=version)


def stomppy_receives(
    version: Version, port: int, destination: str, sent: threading.Event, count: int
) -> list[Any]:
    """Subscribe with stomp.py, let our client send, receive and acknowledge ``count``."""
    ack = "client" if version == "1.0" else "client-individual"
    with stomppy(version, port) as (conn, listener):
        conn.subscribe(destination, id="stomppy-1", ack=ack, receipt="r-sub")
        listener.receipt("r-sub")
        sent.set()
        frames = [listener.message() for _ in range(count)]
        for frame in frames:
            if version == "1.2":
                conn.ack(frame.headers["ack"])
            elif version == "1.1":
                conn.ack(frame.headers["message-id"], frame.headers["subscription"])
            else:
                conn.ack(frame.headers["message-id"])
        # The DISCONNECT that ends the block follows the ACKs: the broker sees them first.
    return frames


@pytest.mark.parametrize("version", VERSIONS)
def test_our_client_sends_stomppy_receives(version: Version) -> None:
    queue_name = "/queue/to-stomppy"

    async def scenario(h: Harness) -> None:
        broker = await h.start_broker()
        subscribed = threading.Event()
        receiving = asyncio.create_task(
            in_thread(stomppy_receives, version, broker.port, queue_name, subscribed, 4)
        )
        async with h.connect(broker.port) as client:
            assert await in_thread(subscribed.wait, WAIT)
            await client.send(queue_name, b"bytes body", receipt=True)
            await client.send(queue_name, "t\u00eaxt body", receipt=True)
            await client.send(queue_name, b"headers", headers={"x-origin": "stomp_proto"})
            await client.send(queue_name, b"no length", content_length=False, receipt=True)
            frames = await receiving
        assert [f.body for f in frames] == ["bytes body", "t\u00eaxt body", "headers", "no length"]
        assert frames[1].headers["content-type"] == "text/plain;charset=utf-8"
        assert frames[2].headers["x-origin"] == "stomp_proto"
        assert "content-length" not in frames[3].headers
        assert all(f.headers["subscription"] == "stomppy-1" for f in frames)
        # stomp.py acknowledged everything: nothing is left, nothing redelivered.
        await h.expect_only(broker.port, queue_name)

    run("asyncio", scenario, version=version)


@pytest.mark.parametrize("strict", [False, True])
def test_stomppy_11_host(strict: bool) -> None:
    """STOMP 1.1 requires CONNECT's host header; stomp.py 1.1 leaves it out by default.

    The default broker lets the login in (as RabbitMQ and ActiveMQ do); a
    ``strict=True`` one follows the specification and refuses it.
    """

    def attempt(port: int) -> Recorder:
        conn = stomp.Connection11([(HOST, port)])
        listener = Recorder()
        conn.set_listener("recorder", listener)
        conn.connect(wait=False)
        if strict:
            assert listener.disconnected.wait(WAIT), "the broker did not close"
        else:
            assert listener.connected.wait(WAIT), "the broker did not let stomp.py in"
            conn.disconnect(receipt="bye")
        return listener

    async def scenario(h: Harness) -> None:
        broker = await h.start_broker(strict=strict)
        listener = await in_thread(attempt, broker.port)
        if strict:
            assert not listener.connected.is_set()
            assert len(listener.errors) == 1
            assert "host" in listener.errors[0].headers["message"]
        else:
            assert listener.errors == []

    run("asyncio", scenario)
