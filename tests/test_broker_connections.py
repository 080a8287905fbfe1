"""The embedded broker's connection caps: in all, per login, idle sessions, the descriptor limit.

Each refusal reaches the client as a STOMP ERROR that says which limit it hit.
The descriptor limit is a broker process of its own with a low ``RLIMIT_NOFILE``
(Linux and macOS): its stderr must stay small while clients wait, and they
must be served once descriptors are free again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import subprocess
import sys
import time

import pytest
from test_broker_core import Client, Net
from test_cli import listening_port, stop, wait_for_stderr

from stomp_proto import (
    ClientConnection,
    Connect,
    Connected,
    Disconnect,
    Error,
    Send,
    Unsubscribe,
)
from stomp_proto.broker import Broker

pytestmark = pytest.mark.timeout(120)

USERS = {"ann": "a", "bob": "b"}


def test_a_connection_over_max_connections_gets_an_error_naming_the_limit() -> None:
    net = Net(max_connections=2)
    first, second = net.connect(), net.open()
    third = net.open()
    # Refused at its first step, before what it sends is looked at.
    third.send(Connect(host="/"))
    (error,) = third.take(Error)
    assert error.message == "too many connections"
    assert b"max_connections" in error.body and b"2" in error.body
    assert third.closed and not first.closed and not second.closed
    assert net.core.counters.refused["too_many_connections"] == 1
    # A place freed is taken again.
    first.send(Disconnect())
    net.connect()


def test_a_login_over_its_cap_gets_an_error_the_others_do_not() -> None:
    net = Net(users=USERS, max_connections_per_login=2)
    ann1 = net.connect(login="ann", passcode="a")
    net.connect(login="ann", passcode="a")
    third = net.open()
    third.send(Connect(host="/", login="ann", passcode="a"))
    (error,) = third.take(Error)
    assert error.message == "too many connections"
    assert b"'ann'" in error.body and b"max_connections_per_login" in error.body
    assert net.core.counters.refused["too_many_connections_for_login"] == 1
    net.connect(login="bob", passcode="b")  # another login has its own count
    # A wrong passcode is a failed login, whatever the count: nothing is told about ann.
    wrong = net.open()
    wrong.send(Connect(host="/", login="ann", passcode="x"))
    assert [e.message for e in wrong.take(Error)] == ["Bad CONNECT: login failed"]
    ann1.drop()  # a lost connection gives its place back too
    net.connect(login="ann", passcode="a")


def test_sessions_without_a_login_are_not_counted_per_login() -> None:
    net = Net(max_connections_per_login=1)
    net.connect(), net.connect()


def test_an_idle_session_without_heart_beats_is_ended_with_an_error() -> None:
    net = Net(idle_timeout=30.0)
    idle = net.connect(heartbeat=(0, 0))
    session = idle.session
    session.handle_timer(0.0)
    assert session.get_timer() == 30.0
    session.handle_timer(29.0)
    net.route(net.core.process(session))
    assert not idle.closed
    session.handle_timer(30.0)
    net.route(net.core.process(session))
    (error,) = idle.take(Error)
    assert error.message == "idle timeout" and b"30.0 s" in error.body
    assert idle.closed
    assert net.core.counters.refused["idle_timeout"] == 1


def test_frames_keep_a_session_without_heart_beats_alive() -> None:
    net = Net(idle_timeout=30.0)
    producer = net.connect()
    for now in (0.0, 20.0, 40.0, 60.0):
        producer.send(Send("/queue/work", b"job"))
        producer.session.handle_timer(now)
        net.route(net.core.process(producer.session))
    assert not producer.closed
    producer.session.handle_timer(90.0)
    net.route(net.core.process(producer.session))
    assert producer.closed and producer.take(Error)[0].message == "idle timeout"


def _tick(client: Client, now: float) -> None:
    client.session.handle_timer(now)
    client.net.route(client.net.core.process(client.session))


def test_a_subscriber_waiting_quietly_is_not_idle() -> None:
    """A session holding a subscription is exempt from the idle timeout (stomp.py
    subscribes with ``heart-beat:0,0`` by default); ``max_connections`` bounds them."""
    net = Net(idle_timeout=30.0)
    subscriber, producer = net.connect(), net.connect()
    first = subscriber.subscribe("/queue/rare")
    second = subscriber.subscribe("/topic/rarer")
    _tick(subscriber, 0.0)
    assert subscriber.session.get_timer() is None  # no deadline at all
    _tick(subscriber, 3600.0)
    assert not subscriber.closed
    producer.send(Send("/queue/rare", b"at last"))
    assert subscriber.bodies() == [b"at last"]
    # One subscription left: still exempt.
    subscriber.send(Unsubscribe(id=first))
    _tick(subscriber, 7200.0)
    assert subscriber.session.get_timer() is None
    _tick(subscriber, 9000.0)
    assert not subscriber.closed
    # The last one ends at 9500: the clock starts then, whatever came before.
    subscriber.send(Unsubscribe(id=second))
    assert subscriber.session.get_timer() == 0.0  # the start is to be learned
    _tick(subscriber, 9500.0)
    assert subscriber.session.get_timer() == 9530.0
    _tick(subscriber, 9529.0)
    assert not subscriber.closed
    _tick(subscriber, 9530.0)
    (error,) = subscriber.take(Error)
    assert error.message == "idle timeout" and b"no subscription" in error.body
    assert subscriber.closed


def test_a_session_with_heart_beats_is_left_to_them() -> None:
    net = Net(idle_timeout=30.0, heartbeat=(0, 10_000))
    beating = net.connect(heartbeat=(10_000, 0))
    session = beating.session
    now = 0.0
    while now < 100.0 and not beating.closed:
        now += 5.0
        session.receive_data(b"\n")  # a beat, and never a frame
        session.handle_timer(now)
        net.route(net.core.process(session))
    assert not beating.closed
    # Silent: the heart-beat deadline ends it (without an ERROR), not the idle one.
    silent_until = now + 60.0
    while now < silent_until and not beating.closed:
        now += 5.0
        session.handle_timer(now)
        net.route(net.core.process(session))
    assert beating.closed and beating.take(Error) == []
    assert net.core.counters.refused["idle_timeout"] == 0


def test_connection_options_are_checked() -> None:
    for options in ({"max_connections": 0}, {"max_connections_per_login": 0}):
        with pytest.raises(ValueError, match="at least 1"):
            Net(**options)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="idle_timeout"):
        Net(idle_timeout=0)


def test_over_tcp_the_refused_client_reads_why_and_the_broker_logs_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def body() -> None:
        async with Broker(max_connections=1, metrics=False) as broker:
            first = await asyncio.open_connection(broker.host, broker.port)
            conn = ClientConnection()
            first[1].write(conn.send(Connect(host="/")))
            conn.receive_data(await first[0].read(4096))
            assert isinstance(conn.next_event(), Connected)
            reader, writer = await asyncio.open_connection(broker.host, broker.port)
            refused = ClientConnection()
            writer.write(refused.send(Connect(host="/")))
            data = await asyncio.wait_for(reader.read(), 10)
            refused.receive_data(data)
            error = refused.next_event()
            assert isinstance(error, Error) and error.message == "too many connections"
            writer.close()
            first[1].close()

    with caplog.at_level("INFO", "stomp_proto.broker"):
        asyncio.run(body())
    assert "ended by ERROR: too many connections: the broker serves at most 1" in caplog.text


# -- the descriptor limit --------------------------------------------------------------

DESCRIPTORS = 128


def _low_descriptor_limit() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_NOFILE, (DESCRIPTORS, DESCRIPTORS))


def _connect(port: int) -> ClientConnection | None:
    """A STOMP session on the broker; ``None`` if the broker did not answer in time."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    conn = ClientConnection()
    sock.sendall(conn.send(Connect(host="/")))
    try:
        while (event := conn.next_event()) is None:
            data = sock.recv(4096)
            conn.receive_data(data or None)
    except TimeoutError:
        return None
    finally:
        sock.close()
    return conn if isinstance(event, Connected) else None


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_NOFILE is POSIX")
def test_at_the_descriptor_limit_the_log_stays_small_and_clients_are_served_later() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "stomp_proto", "broker", "--port", "0", "--no-metrics"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        preexec_fn=_low_descriptor_limit,
    )
    held: list[socket.socket] = []
    try:
        port = listening_port(process)
        started = time.monotonic()
        # More connections than the broker has descriptors: the last ones wait in the
        # listen backlog while accept() fails with EMFILE.
        for _ in range(DESCRIPTORS + 40):
            sock = socket.socket()
            sock.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                sock.connect(("127.0.0.1", port))
            held.append(sock)
        # The broker has run out of descriptors once it says so (then the rest wait).
        wait_for_stderr(process, re.compile(rb"cannot accept connections"), 15, "EMFILE")
        waiting = socket.create_connection(("127.0.0.1", port), timeout=30)
        waiting_conn = ClientConnection()
        waiting.sendall(waiting_conn.send(Connect(host="/")))
        # Descriptors free up: the one waiting, and new ones, are served.
        for sock in held[:80]:
            sock.close()
        del held[:80]
        while (event := waiting_conn.next_event()) is None:
            waiting_conn.receive_data(waiting.recv(4096) or None)
        assert isinstance(event, Connected)
        waiting.close()
        assert _connect(port) is not None
        elapsed = time.monotonic() - started
    finally:
        for sock in held:
            sock.close()
        code, _, err = stop(process)
    assert code == 130, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    reports = err.count("cannot accept connections: Too many open files")
    # One line at the first failure, then at most one per 10 s (LOG_INTERVAL).
    assert 1 <= reports <= 1 + elapsed / 10, err
    assert "accepting connections again" in err
    # Beside those, at most a line per connection (a CONNECT timeout, if the machine is
    # slow enough): asyncio's server wrote a traceback per failed accept, thousands.
    assert len(err.splitlines()) < DESCRIPTORS + 60, err[-2000:]


def test_over_tcp_an_idle_session_gets_its_error() -> None:
    async def body() -> None:
        async with Broker(idle_timeout=0.2, metrics=False) as broker:
            reader, writer = await asyncio.open_connection(broker.host, broker.port)
            conn = ClientConnection()
            writer.write(conn.send(Connect(host="/", heartbeat=(0, 0))))
            events = []
            while not any(isinstance(event, Error) for event in events):
                data = await asyncio.wait_for(reader.read(4096), 30)
                conn.receive_data(data or None)
                events.extend(conn)
                assert data, events
            assert isinstance(events[0], Connected)
            error = next(event for event in events if isinstance(event, Error))
            assert error.message == "idle timeout"
            writer.close()

    asyncio.run(body())
