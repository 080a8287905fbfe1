"""``stomp_proto.stomppy`` against RabbitMQ and ActiveMQ: a stomp.py program's day.

The same calls as tests/test_stomppy.py (which runs on the embedded broker),
on the real brokers: each version sends, receives and acknowledges; a
transaction commits; a lost connection is re-made by the layer with the
subscription re-sent; RabbitMQ's Web-STOMP carries a WebSocket connection.
Destinations are unique per test, so runs sharing the brokers do not meet.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from brokers import REAL_BROKERS, Endpoint, real_broker

import stomp_proto.stomppy as stomp
from stomp_proto.stomppy.listener import TestListener

pytestmark = pytest.mark.timeout(120)

HOST = "127.0.0.1"
WAIT = 20.0


def open_connection(broker: Endpoint, cls: Any = stomp.Connection, **options: Any) -> Any:
    vhost = {"vhost": broker.vhost} if cls is not stomp.Connection10 else {}
    conn = cls([(HOST, broker.port)], **vhost, **options)
    conn.set_listener("test", TestListener("r1"))
    conn.connect(broker.login, broker.passcode, wait=True)
    return conn


def wait_for(listener: TestListener, count: int) -> list[Any]:
    deadline = time.monotonic() + WAIT
    while listener.messages < count and time.monotonic() < deadline:
        listener.wait_for_message(0.5)
    return [body for _, body in listener.message_list]


@pytest.mark.parametrize("name", REAL_BROKERS)
@pytest.mark.parametrize(
    ("cls", "ack_mode"),
    [
        (stomp.Connection10, "client"),
        (stomp.Connection11, "client"),
        (stomp.Connection12, "client-individual"),
    ],
)
def test_send_receive_ack(name: str, cls: Any, ack_mode: str) -> None:
    broker = real_broker(name)
    queue = f"/queue/stomppy-{uuid.uuid4().hex}"
    conn = open_connection(broker, cls)
    listener = conn.get_listener("test")
    conn.subscribe(queue, id="1", ack=ack_mode)
    conn.send(queue, "héllo", headers={"x-n": "1"}, receipt="r1")
    assert listener.wait_on_receipt(WAIT)
    assert wait_for(listener, 1) == ["héllo"]
    headers, _ = listener.get_latest_message()
    assert headers["x-n"] == "1"
    if cls is stomp.Connection10:
        conn.ack(headers["message-id"])
    elif cls is stomp.Connection11:
        conn.ack(headers["message-id"], headers["subscription"])
    else:
        conn.ack(headers["ack"])
    conn.disconnect()
    assert listener.errors == 0 and listener.disconnects == 1


@pytest.mark.parametrize("name", REAL_BROKERS)
def test_transaction_commits(name: str) -> None:
    broker = real_broker(name)
    queue = f"/queue/stomppy-{uuid.uuid4().hex}"
    conn = open_connection(broker)
    listener = conn.get_listener("test")
    conn.subscribe(queue, id="1")
    tx = conn.begin()
    conn.send(queue, "in tx", transaction=tx)
    dropped = conn.begin()
    conn.send(queue, "aborted", transaction=dropped)
    conn.abort(dropped)
    conn.send(queue, "outside", receipt="r1")
    assert listener.wait_on_receipt(WAIT)
    conn.commit(tx)
    assert wait_for(listener, 2) == ["outside", "in tx"]
    time.sleep(0.3)
    assert listener.messages == 2 and listener.errors == 0
    conn.disconnect()


@pytest.mark.parametrize("name", REAL_BROKERS)
def test_a_lost_connection_is_remade_with_its_subscription(name: str) -> None:
    broker = real_broker(name)
    queue = f"/queue/stomppy-{uuid.uuid4().hex}"
    conn = open_connection(broker)
    listener = conn.get_listener("test")
    conn.subscribe(queue, id="1")
    conn.transport.disconnect_socket()
    deadline = time.monotonic() + WAIT
    while listener.connections < 2 or not conn.is_connected():
        assert time.monotonic() < deadline, "no reconnect"
        time.sleep(0.05)
    conn.send(queue, "after the reconnect", receipt="r1")
    assert listener.wait_on_receipt(WAIT)
    assert wait_for(listener, 1) == ["after the reconnect"]
    assert listener.errors == 0
    conn.disconnect()


def test_websocket_on_rabbitmq() -> None:
    broker = real_broker("rabbitmq")
    queue = f"/queue/stomppy-{uuid.uuid4().hex}"
    conn = stomp.WSConnection([(HOST, 15674)], vhost="/", ws_path="/ws")
    listener = TestListener("r1")
    conn.set_listener("test", listener)
    conn.connect(broker.login, broker.passcode, wait=True)
    conn.subscribe(queue, id="1")
    conn.send(queue, "over Web-STOMP", receipt="r1")
    assert listener.wait_on_receipt(WAIT)
    assert wait_for(listener, 1) == ["over Web-STOMP"]
    conn.disconnect()
