"""Several uvicorn workers share topics through the relay.

``uvicorn --workers 2`` serves tests/asgi_workers_app.py (a StompApp with a
:class:`~stomp_proto.asgi.Relay`) in two processes on one port, relaying to
``stomp-proto broker`` started as a process of its own (always), and to
RabbitMQ and ActiveMQ (found as test_interop_brokers finds them: skipped when
down, failed under CI=true).  WebSocket clients (our asyncio client) connect until there
are sessions on both workers, told apart by the process id an app handler
replies with.  A message sent on a topic through one worker reaches the
subscribers on the other, and so does an ``/app`` handler's publish() to a
relayed topic; a destination the relay does not forward, and a user
destination, stay in their worker.  Every process started here is ended here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path

import pytest
from brokers import Endpoint, real_broker
from test_cli import EXIT_INTERRUPTED, start_broker, stop, wait_for_stderr

from stomp_proto import Message
from stomp_proto.asyncio import AsyncClient, AsyncSubscription, connect

pytest.importorskip("uvicorn")

pytestmark = pytest.mark.timeout(180)

TESTS = Path(__file__).resolve().parent
WAIT = 20.0
#: Connections made at most to find a session on each worker (each one is kept).
TRIES = 40
UPSTREAMS = ("embedded", "rabbitmq", "activemq")


@contextmanager
def upstream(name: str) -> Iterator[Endpoint]:
    """The broker behind the relay: a ``stomp-proto broker`` process, or RabbitMQ."""
    if name != "embedded":
        yield real_broker(name)
        return
    broker = start_broker("--no-metrics")
    try:
        yield Endpoint("embedded", broker.port)
    finally:
        code, _, err = stop(broker.process)
        assert code == EXIT_INTERRUPTED, err[-2000:]
        assert "Traceback" not in err, err[-2000:]


@contextmanager
def workers(ep: Endpoint) -> Iterator[int]:
    """``uvicorn --workers 2`` serving the relaying app; the port it listens on."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "--factory",
            "asgi_workers_app:create_app",
            "--app-dir",
            str(TESTS),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--workers",
            "2",
            "--lifespan",
            "on",
            "--log-level",
            "info",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=TESTS,
        env={
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "STOMP_RELAY_PORT": str(ep.port),
            "STOMP_RELAY_LOGIN": ep.login,
            "STOMP_RELAY_PASSCODE": ep.passcode,
            "STOMP_RELAY_VHOST": ep.vhost,
        },
        # A group of its own: its workers are ended with it, whatever happens.
        start_new_session=True,
    )
    served = False
    try:
        # The parent binds the port, then each worker starts the app.
        ready = re.compile(
            rb"running on http://127\.0\.0\.1:(\d+)\D.*?Application startup complete"
            rb".*?Application startup complete",
            re.DOTALL,
        )
        found = wait_for_stderr(process, ready, 60, "two workers started")
        yield int(found.group(1))
        served = True
    finally:
        _, _, err = stop(process)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # a worker left behind, if any
    assert "Traceback" not in err, err[-3000:]
    if served:  # each worker closed its app (and the relay's connection)
        assert err.count("Application shutdown complete") == 2, err[-3000:]


class Client:
    """A WebSocket session of the test and the worker that serves it."""

    def __init__(self, client: AsyncClient, pid: str, whoami: AsyncSubscription) -> None:
        self.client = client
        self.pid = pid
        self.whoami = whoami


async def open_session(stack: AsyncExitStack, port: int, user: str) -> Client:
    client = await stack.enter_async_context(
        connect("127.0.0.1", port, websocket=f"/ws?user={user}", timeout=WAIT)
    )
    whoami = await stack.enter_async_context(client.subscribe("/user/queue/whoami"))
    await client.send("/app/whoami", b"", receipt=True)
    reply = await next_on(whoami)
    return Client(client, reply.body.decode(), whoami)


async def one_on_each_worker(stack: AsyncExitStack, port: int) -> tuple[Client, Client]:
    """Sessions until two workers serve one each (at most TRIES connections, all kept)."""
    by_worker: dict[str, Client] = {}
    for _ in range(TRIES):
        session = await open_session(stack, port, "alice")
        by_worker.setdefault(session.pid, session)
        if len(by_worker) == 2:
            first, second = by_worker.values()
            return first, second
    pytest.fail(f"{TRIES} connections, all served by worker {list(by_worker)}")


async def next_on(subscription: AsyncSubscription) -> Message:
    """The next message of ``subscription`` (TimeoutError after WAIT seconds)."""
    message = await subscription.get(WAIT)
    assert message is not None, "the subscription ended"
    return message


async def first_on(subscription: AsyncSubscription) -> tuple[bytes, str | None]:
    """The next message of ``subscription``: its body and the worker header."""
    message = await next_on(subscription)
    return message.body, message.all_headers.get("worker")


@pytest.mark.parametrize("name", UPSTREAMS)
def test_workers_share_relayed_topics_and_keep_their_own_destinations(name: str) -> None:
    async def main(port: int) -> None:
        topic = f"/topic/workers-{uuid.uuid4().hex[:10]}"
        local = f"/local/workers-{uuid.uuid4().hex[:10]}"
        async with AsyncExitStack() as stack:
            a, b = await one_on_each_worker(stack, port)
            assert a.pid != b.pid
            on_a = await stack.enter_async_context(a.client.subscribe(topic))
            on_b = await stack.enter_async_context(b.client.subscribe(topic))

            # A client's SEND to a relayed topic, through either worker, reaches both.
            await a.client.send(topic, "from a", receipt=True)
            assert (await next_on(on_a)).body == b"from a"
            assert (await next_on(on_b)).body == b"from a"
            await b.client.send(topic, "from b", receipt=True)
            assert (await next_on(on_a)).body == b"from b"
            assert (await next_on(on_b)).body == b"from b"

            # An /app handler's publish() to a relayed topic: on the worker of the
            # sender, and to every subscriber, through the broker.
            for sender in (a, b):
                await sender.client.send("/app/shout", "hi", headers=[("topic", topic)])
                assert await first_on(on_a) == (b"HI", sender.pid)
                assert await first_on(on_b) == (b"HI", sender.pid)

            # What the relay does not forward stays in its worker: b's first message on
            # the local queue is its own, though a's was sent first (and confirmed).
            local_b = await stack.enter_async_context(b.client.subscribe(local))
            await a.client.send(local, "kept by a's worker", receipt=True)
            await b.client.send(local, "b's own", receipt=True)
            assert (await next_on(local_b)).body == b"b's own"

            # So do user destinations: send_to_user() reaches the sessions of the user
            # that the worker serves, not the user's sessions on the other one.
            news_a = await stack.enter_async_context(a.client.subscribe("/user/queue/news"))
            news_b = await stack.enter_async_context(b.client.subscribe("/user/queue/news"))
            await a.client.send("/app/notify", "one", receipt=True)
            assert await first_on(news_a) == (b"one", a.pid)
            await b.client.send("/app/notify", "two", receipt=True)
            assert await first_on(news_b) == (b"two", b.pid)

    with upstream(name) as ep, workers(ep) as port:
        asyncio.run(main(port))
